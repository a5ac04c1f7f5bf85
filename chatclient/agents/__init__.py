"""Agents and agentic workflows on the ChatClient chain (LangChain4j's agentic module, in Python).

An agent's model calls are ordinary ``ChatClient`` calls, so every advisor, event, span, budget and
guardrail applies inside a workflow. Every workflow is itself an ``Agent``, so workflows nest.

    from chatclient.agents import agent, sequence
    writer = agent(client, name="writer", user="Write a story about {{ topic }}.", output_key="story")
    editor = agent(client, name="editor", user="Shorten: {{ story }}", output_key="story")
    print(sequence(writer, editor).run(topic="otters").output)

See docs/guide/agents.md.
"""

from chatclient.agents.agent import FunctionAgent, LlmAgent, ServiceAgent, agent, agent_function, service_agent
from chatclient.agents.base import (
    Agent,
    AgentErrorContext,
    AgentFinished,
    AgentResult,
    AgentRunStream,
    AgentStarted,
    Recovery,
    Suspended,
    Workflow,
)
from chatclient.agents.compensation import compensating
from chatclient.agents.conditional import conditional
from chatclient.agents.human import human_input
from chatclient.agents.loop import loop
from chatclient.agents.monitor import AgentMonitor
from chatclient.agents.parallel import parallel, parallel_map
from chatclient.agents.planner import Done, Planner, PlannerTurn, PlannerWorkflow, planner_workflow
from chatclient.agents.registry import AgentRegistry
from chatclient.agents.scope import AgenticScope, AgentInvocation, register_type
from chatclient.agents.sequence import sequence
from chatclient.agents.stores import InMemoryScopeStore, PostgresScopeStore, ScopeStore, SqliteScopeStore
from chatclient.agents.supervisor import ModelPlanner, PlannerStep, supervisor

__all__ = [
    "Agent",
    "AgentErrorContext",
    "AgentFinished",
    "AgentInvocation",
    "AgentRegistry",
    "AgentMonitor",
    "AgentResult",
    "AgentRunStream",
    "AgentStarted",
    "AgenticScope",
    "Done",
    "FunctionAgent",
    "InMemoryScopeStore",
    "LlmAgent",
    "ModelPlanner",
    "Planner",
    "PlannerStep",
    "PlannerTurn",
    "PlannerWorkflow",
    "PostgresScopeStore",
    "Recovery",
    "ScopeStore",
    "ServiceAgent",
    "SqliteScopeStore",
    "Suspended",
    "Workflow",
    "agent",
    "agent_function",
    "compensating",
    "conditional",
    "human_input",
    "loop",
    "parallel",
    "parallel_map",
    "planner_workflow",
    "register_type",
    "sequence",
    "service_agent",
    "supervisor",
]
