"""Hosted tools: web search, code execution and web fetch that the provider runs on its own servers.

Give them to ``.tools(...)`` beside function tools::

    from chatclient.tools.builtin import CodeExecution, WebSearch

    client.prompt("What changed in Python 3.13?").tools(WebSearch(max_uses=3)).call()

chatclient never runs these tools: each provider declares them in its own wire form (the table
``DECLARATIONS`` below, the one place that knows the dated Anthropic tool types and their beta
headers), the provider runs them during the turn, and their calls and results come back as
``HostedToolCall`` parts on the ``AssistantMessage`` (``message.hosted_tool_calls``, cited sources in
``message.citations``); they are stored in memory and sent back verbatim in the next turn. A model
that cannot run a hosted tool raises ``UnsupportedFeatureError`` while the request is built, before
any HTTP call. Only the options that are set are declared.

| tool | OpenAI Responses | Anthropic Messages |
|---|---|---|
| ``WebSearch`` | ``web_search`` (``filters.allowed_domains``) | ``web_search_20250305`` (``max_uses``, ``allowed_domains``) |
| ``CodeExecution`` | ``code_interpreter`` (container ``auto``) | ``code_execution_20250825`` (beta ``code-execution-2025-08-25``) |
| ``WebFetch`` | not offered | ``web_fetch_20250910`` (beta ``web-fetch-2025-09-10``, ``max_uses``) |
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from chatclient.errors import ToolExecutionError, UnsupportedFeatureError
from chatclient.prompt import HostedToolDefinition
from chatclient.tools.context import ToolContext

__all__ = [
    "ANTHROPIC",
    "DECLARATIONS",
    "OPENAI_RESPONSES",
    "CodeExecution",
    "HostedTool",
    "WebFetch",
    "WebSearch",
]

OPENAI_RESPONSES = "openai-responses"
"""The API name the Responses model asks declarations for."""
ANTHROPIC = "anthropic"
"""The API name the Anthropic Messages model asks declarations for."""

DECLARATIONS: Mapping[tuple[str, str], tuple[str, str | None]] = {
    # (api, portable tool name) -> (the API's tool type, the beta header it needs or None)
    (OPENAI_RESPONSES, "web_search"): ("web_search", None),
    (OPENAI_RESPONSES, "code_execution"): ("code_interpreter", None),
    (ANTHROPIC, "web_search"): ("web_search_20250305", None),
    (ANTHROPIC, "code_execution"): ("code_execution_20250825", "code-execution-2025-08-25"),
    (ANTHROPIC, "web_fetch"): ("web_fetch_20250910", "web-fetch-2025-09-10"),
}

_DESCRIPTIONS = {
    "web_search": "Search the web (run by the model provider).",
    "code_execution": "Run code in a sandbox (run by the model provider).",
    "web_fetch": "Fetch a web page or PDF by URL (run by the model provider).",
}


def _positive(name: str, value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer or None, got {value!r}")
    return value


def _domains(value: Any) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        raise TypeError("allowed_domains takes a list of domains, not one string: use [domain]")
    domains = tuple(value)
    for d in domains:
        if not isinstance(d, str) or not d.strip():
            raise ValueError(f"allowed_domains must hold non-empty domain names, got {d!r}")
    return domains


class HostedTool:
    """Base of the hosted tools: a tool callback the tool loop never runs, declared per provider.

    ``declaration(api)`` returns ``(declaration, beta header or None)`` for an API of the table, or
    ``None`` when that API has no such tool.
    """

    __slots__ = ()
    tool_name: str = ""

    @property
    def definition(self) -> HostedToolDefinition:
        """What the request carries; providers recognise it and ask this object for the declaration."""
        return HostedToolDefinition(self.tool_name, _DESCRIPTIONS[self.tool_name], {}, self)

    @property
    def return_direct(self) -> bool:
        return False

    def call(self, arguments: str, context: ToolContext | None = None) -> str:
        """Never runs: the provider executes hosted tools itself."""
        raise ToolExecutionError(
            f"{self.tool_name!r} is a hosted tool that the model provider runs; it cannot be called locally",
            self.tool_name,
        )

    async def acall(self, arguments: str, context: ToolContext | None = None) -> str:
        return self.call(arguments, context)

    def settings(self, api: str) -> dict[str, Any]:
        """The declaration's keys besides ``type`` (and ``name``) for ``api``: only those that are set."""
        return {}

    def declaration(self, api: str) -> tuple[dict[str, Any], str | None] | None:
        """This tool declared for ``api`` (see ``DECLARATIONS``), or ``None`` when the API lacks it."""
        found = DECLARATIONS.get((api, self.tool_name))
        if found is None:
            return None
        kind, beta = found
        out: dict[str, Any] = {"type": kind}
        if api == ANTHROPIC:
            out["name"] = self.tool_name
        out.update(self.settings(api))
        return out, beta


@dataclass(frozen=True, slots=True)
class WebSearch(HostedTool):
    """Web search run by the provider; ``max_uses`` caps searches per turn (Anthropic only),
    ``allowed_domains`` restricts the sites searched."""

    max_uses: int | None = None
    allowed_domains: Sequence[str] | None = None
    """Kept as a tuple (the tool compares and hashes by value)."""
    tool_name = "web_search"

    def __post_init__(self) -> None:
        _positive("max_uses", self.max_uses)
        object.__setattr__(self, "allowed_domains", _domains(self.allowed_domains))

    def settings(self, api: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if api == OPENAI_RESPONSES:
            if self.max_uses is not None:
                raise UnsupportedFeatureError(
                    "the OpenAI Responses API has no per-tool max_uses for web_search; drop max_uses, or cap "
                    "all hosted tool calls with options extra={'max_tool_calls': n}",
                    feature="web_search.max_uses",
                    provider="OpenAI Responses",
                )
            if self.allowed_domains:
                out["filters"] = {"allowed_domains": list(self.allowed_domains)}
            return out
        if self.max_uses is not None:
            out["max_uses"] = self.max_uses
        if self.allowed_domains:
            out["allowed_domains"] = list(self.allowed_domains)
        return out


@dataclass(frozen=True, slots=True)
class CodeExecution(HostedTool):
    """Code execution in the provider's sandbox (Responses: code interpreter in an automatic container)."""

    tool_name = "code_execution"

    def settings(self, api: str) -> dict[str, Any]:
        return {"container": {"type": "auto"}} if api == OPENAI_RESPONSES else {}


@dataclass(frozen=True, slots=True)
class WebFetch(HostedTool):
    """Fetching a URL's content by the provider (Anthropic); ``max_uses`` caps fetches per turn."""

    max_uses: int | None = None
    tool_name = "web_fetch"

    def __post_init__(self) -> None:
        _positive("max_uses", self.max_uses)

    def settings(self, api: str) -> dict[str, Any]:
        return {"max_uses": self.max_uses} if self.max_uses is not None else {}
