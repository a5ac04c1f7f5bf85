"""An agent (or a whole workflow) as a tool another ChatClient's model can call (``agent.as_tool()``).

This module knows agents only through the small ``ToolableAgent`` protocol, so it imports nothing
from ``chatclient.agents.base`` (which imports this module for ``Agent.as_tool``): no import circle.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, Protocol

from chatclient import jsonsafe
from chatclient.errors import ChatClientError, ToolExecutionError
from chatclient.prompt import ToolDefinition

if TYPE_CHECKING:
    from chatclient.tools.context import ToolContext

MAX_ARGUMENTS_CHARS = 1_000_000


class ToolableAgent(Protocol):
    """What ``AgentTool`` needs of an agent (every ``chatclient.agents.Agent`` has it): a name, a
    description, its inputs' types, and ``run`` / ``arun`` returning a result with ``output`` and
    ``suspended``."""

    name: str
    description: str

    def input_types(self) -> dict[str, tuple[Any, bool]]: ...

    def run(self, **inputs: Any) -> Any: ...

    def arun(self, **inputs: Any) -> Awaitable[Any]: ...


def _tool_name(name: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9_-]", "_", name)[:64]
    return cleaned or "agent"


def _schema(agent: ToolableAgent) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    required: list[str] = []
    for key, (hint, needed) in agent.input_types().items():
        schema: dict[str, Any] = {"description": f"the agent's input {key!r}"}
        if hint is not None:
            try:
                from pydantic import TypeAdapter

                schema = {**TypeAdapter(hint).json_schema(), **schema}
            except Exception:
                pass
        properties[key] = schema
        if needed:
            required.append(key)
    return {"type": "object", "properties": properties, "required": required}


def _text(output: Any) -> str:
    if output is None or isinstance(output, str):
        return output or ""
    dump = getattr(output, "model_dump", None)
    if callable(dump):
        output = dump(mode="json")
    try:
        return json.dumps(output, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(output)


class AgentTool:
    """A ``ToolCallback`` running an agent: the arguments become its inputs, its output the result."""

    return_direct = False

    def __init__(self, agent: ToolableAgent, *, name: str | None = None, description: str | None = None) -> None:
        self.agent = agent
        self.definition = ToolDefinition(
            _tool_name(name or agent.name),
            description or agent.description or f"Runs the agent {agent.name!r}.",
            _schema(agent),
        )

    def _inputs(self, arguments: str) -> dict[str, Any]:
        if len(arguments) > MAX_ARGUMENTS_CHARS:
            raise ToolExecutionError(f"arguments for {self.definition.name} are too long", self.definition.name)
        try:
            data = jsonsafe.loads(arguments or "{}")
        except ValueError as exc:
            raise ToolExecutionError(f"arguments are not valid JSON: {exc}", self.definition.name) from None
        if not isinstance(data, dict):
            raise ToolExecutionError("arguments must be a JSON object", self.definition.name)
        return {str(k): v for k, v in data.items() if k not in ("scope_store", "scope_id", "monitor", "max_duration")}

    def call(self, arguments: str, context: ToolContext | None = None) -> str:
        inputs = self._inputs(arguments)
        try:
            result = self.agent.run(**inputs)
        except ChatClientError as exc:
            raise ToolExecutionError(f"{type(exc).__name__}: {exc}", self.definition.name) from exc
        if result.suspended is not None:
            raise ToolExecutionError(
                f"the agent is waiting for a person's answer ({result.suspended.question}); it cannot run as a tool",
                self.definition.name,
            )
        return _text(result.output)

    async def acall(self, arguments: str, context: ToolContext | None = None) -> str:
        inputs = self._inputs(arguments)
        try:
            result = await self.agent.arun(**inputs)
        except ChatClientError as exc:
            raise ToolExecutionError(f"{type(exc).__name__}: {exc}", self.definition.name) from exc
        if result.suspended is not None:
            raise ToolExecutionError(
                f"the agent is waiting for a person's answer ({result.suspended.question}); it cannot run as a tool",
                self.definition.name,
            )
        return _text(result.output)

    def __repr__(self) -> str:
        return f"AgentTool({self.agent!r})"


__all__ = ["AgentTool", "ToolableAgent"]
