"""``AgentRegistry``: agents by name (LangChain4j: ``AgentsRegistry``).

A registry holds agents built in one place (a module of shared agents, a plugin, remote agents
wrapped as agents) so that others find them by name and put them into any workflow. Every planner
workflow keeps one of its own agents, handed to its planner (``Planner.bind``).

    registry = AgentRegistry()
    registry.register(audience_editor)
    registry.register(style_editor, name="style")
    sequence(writer, registry.get("audience_editor"), registry.get("style"))
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from chatclient._pickling import PicklesWithoutLocks
from chatclient._suggest import closest
from chatclient.errors import UnknownAgentError

if TYPE_CHECKING:
    from chatclient.agents.base import Agent


def _check_agent(agent: Any) -> Agent:
    from chatclient.agents.base import Agent

    if not isinstance(agent, Agent):
        raise TypeError(f"a registry holds agents, got {type(agent).__name__}")
    return agent


class AgentRegistry(PicklesWithoutLocks):
    """Agents by name; ``get(name)`` raises ``UnknownAgentError`` naming the registered ones (and the
    closest name when it looks like a typo). Safe to use from several threads."""

    def __init__(self, agents: Iterable[Agent] = ()) -> None:
        self._agents: dict[str, Agent] = {}
        self._lock = threading.Lock()
        for agent in agents:
            self.register(agent)

    def register(self, agent: Agent, *, name: str | None = None, replace: bool = False) -> Agent:
        """Add ``agent`` under ``name`` (default: its own name) and return it. A name already taken
        by another agent raises ``ValueError`` unless ``replace=True``."""
        agent = _check_agent(agent)
        key = agent.name if name is None else name
        if not isinstance(key, str) or not key.strip():
            raise ValueError(f"an agent's registry name must be a non-empty string, got {key!r}")
        with self._lock:
            known = self._agents.get(key)
            if known is not None and known is not agent and not replace:
                raise ValueError(f"two agents are named {key!r}: give one another name (name=...) or pass replace=True")
            self._agents[key] = agent
        return agent

    def unregister(self, name: str) -> None:
        """Remove the agent registered under ``name`` (``UnknownAgentError`` if there is none)."""
        with self._lock:
            if name not in self._agents:
                raise self._unknown(name)
            del self._agents[name]

    def find(self, name: str) -> Agent | None:
        """The agent registered under ``name``, or ``None``."""
        return self._agents.get(name) if isinstance(name, str) else None

    def get(self, name: str) -> Agent:
        """The agent registered under ``name``; ``UnknownAgentError`` when there is none."""
        agent = self.find(name)
        if agent is None:
            raise self._unknown(name)
        return agent

    def _unknown(self, name: Any) -> UnknownAgentError:
        known = self.names()
        error = UnknownAgentError(str(name), known)
        near = closest(name, known, n=1) if isinstance(name, str) else []
        if near:
            error.args = (f"{error.args[0]}; did you mean {near[0]!r}?",)
        return error

    def names(self) -> tuple[str, ...]:
        """The registered names, in registration order."""
        return tuple(self._agents)

    def all(self) -> Mapping[str, Agent]:
        """A read-only snapshot of every registered agent by name."""
        return MappingProxyType(dict(self._agents))

    def __contains__(self, name: object) -> bool:
        return name in self._agents

    def __iter__(self) -> Iterator[Agent]:
        return iter(tuple(self._agents.values()))

    def __len__(self) -> int:
        return len(self._agents)

    def __repr__(self) -> str:
        return f"AgentRegistry({', '.join(self._agents)})"


__all__ = ["AgentRegistry"]
