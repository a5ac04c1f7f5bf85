"""MCP tools as chatclient ``ToolCallback``s: ``McpToolProvider`` and ``McpToolCallback``.

A provider is passed to ``.tools(provider)`` or ``.default_tools(provider)`` like any tool. Its
tools are indistinguishable from ``@tool`` functions to the advisor chain: the name, description
and input schema come straight from the server, and a result comes back as the text the model
reads, with the images and audio the server returned passed through as media (a ``ToolResult``).
Tool lists are cached per server and refreshed when the server announces
``notifications/tools/list_changed``, so a running tool loop sees the new list on its next turn.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from chatclient import jsonsafe
from chatclient.errors import ToolExecutionError
from chatclient.mcp._blobs import decode_blob
from chatclient.mcp._schemas import check_input_schema
from chatclient.mcp._sdk import types
from chatclient.mcp.client import McpClient, _slug
from chatclient.messages import Media
from chatclient.prompt import ToolDefinition
from chatclient.tools.callback import ToolArgumentsError, ToolCallback
from chatclient.tools.context import ToolContext
from chatclient.tools.results import ToolResult

DEFAULT_MAX_RESULT_CHARS = 100_000
"""Tool results longer than this reach the model cut, with a marker saying how much was dropped."""
MAX_DESCRIPTION_CHARS = 4096
MAX_MEDIA_BYTES = 20_000_000

ToolFilter = Callable[[McpClient, types.Tool], bool] | Collection[str]
"""Which server tools to offer: ``fn(client, tool) -> bool``, or a collection of tool names (server names)."""
NamePrefix = str | Callable[[McpClient, str], str]
"""``"fs_"`` (prepended to every tool name) or ``fn(client, tool_name) -> name``."""
ToolProgress = Callable[[str, float, "float | None", "str | None"], object]
"""``fn(tool_name, progress, total, message)`` for a server's progress notifications during a tool call."""

_INVALID = re.compile(r"[^A-Za-z0-9_-]")
_log = logging.getLogger("chatclient.mcp")


@dataclass(frozen=True, slots=True)
class McpToolResult:
    """An MCP tool result mapped to chatclient's terms.

    ``text`` is what the model reads: the text contents joined by newlines (embedded text
    resources included, links as ``[resource: uri]``), or the structured content as JSON when the
    server sent no text; images and audio are in ``media`` and announced in the text as
    ``[image/png attachment, N bytes]``. ``truncated`` says the text was cut to the limit.
    """

    text: str
    media: tuple[Media, ...] = ()
    structured: Any = None
    is_error: bool = False
    truncated: bool = False


def map_result(result: types.CallToolResult, *, max_chars: int = DEFAULT_MAX_RESULT_CHARS) -> McpToolResult:
    """Map a raw ``CallToolResult``; the text is cut at ``max_chars`` with a marker naming the original size."""
    parts: list[str] = []
    media: list[Media] = []
    for block in result.content:
        if isinstance(block, types.TextContent):
            parts.append(block.text)
        elif isinstance(block, (types.ImageContent, types.AudioContent)):
            data = decode_blob(block.data, MAX_MEDIA_BYTES)
            media.append(Media(block.mime_type, data))
            parts.append(f"[{block.mime_type} attachment, {len(data)} bytes]")
        elif isinstance(block, types.EmbeddedResource):
            resource = block.resource
            if isinstance(resource, types.TextResourceContents):
                parts.append(resource.text)
            else:
                parts.append(f"[binary resource {resource.uri} ({resource.mime_type or 'unknown type'})]")
        elif isinstance(block, types.ResourceLink):
            parts.append(f"[resource: {block.uri}]")
    text_parts = [p for p in parts if p]
    if not any(isinstance(b, types.TextContent) for b in result.content) and result.structured_content is not None:
        text_parts.insert(0, json.dumps(result.structured_content, ensure_ascii=False, separators=(",", ":")))
    text = "\n".join(text_parts)
    truncated = len(text) > max_chars
    if truncated:
        text = (
            text[:max_chars] + f"\n[... result truncated: {len(text)} characters, only the first {max_chars} are shown]"
        )
    return McpToolResult(text, tuple(media), result.structured_content, bool(result.is_error), truncated)


def safe_tool_name(name: str) -> str:
    """A provider-safe name (1-64 of ``A-Za-z0-9_-``): other characters become ``_``."""
    cleaned = _INVALID.sub("_", name)[:64]
    return cleaned or "tool"


class McpToolCallback:
    """One server tool as a ``ToolCallback``: calls go to the server; ``isError`` results become tool errors.

    ``definition.name`` is the name the model sees (maybe prefixed); ``tool_name`` is the server's.
    A result the server marks ``isError`` raises ``ToolExecutionError`` with the server's text, so
    the tool loop sends it to the model as an error response it can react to; connection
    failures and timeouts raise ``McpError`` subclasses (the loop also reports those to the model
    unless ``raise_on_tool_error``).
    """

    def __init__(
        self,
        client: McpClient,
        tool: types.Tool,
        *,
        name: str | None = None,
        max_result_chars: int = DEFAULT_MAX_RESULT_CHARS,
        timeout: float | None = None,
        progress: ToolProgress | None = None,
    ) -> None:
        self.client = client
        self.progress = progress
        self.tool = tool
        self.tool_name = tool.name
        description = (tool.description or tool.title or tool.name)[:MAX_DESCRIPTION_CHARS]
        self._definition = ToolDefinition(name or safe_tool_name(tool.name), description, dict(tool.input_schema))
        self.max_result_chars = max_result_chars
        self._call_timeout = timeout

    @property
    def definition(self) -> ToolDefinition:
        """Name, description and input schema as the model sees them."""
        return self._definition

    @property
    def return_direct(self) -> bool:
        """MCP tools always report back to the model."""
        return False

    @property
    def timeout(self) -> None:
        """No extra limit from the tool manager: the client's ``call_timeout`` bounds each call."""
        return None

    @property
    def is_async(self) -> bool:
        """The call is a coroutine on the client's loop (cancellable)."""
        return True

    def renamed(self, name: str) -> McpToolCallback:
        """The same server tool offered under another name."""
        return McpToolCallback(
            self.client,
            self.tool,
            name=name,
            max_result_chars=self.max_result_chars,
            timeout=self._call_timeout,
            progress=self.progress,
        )

    def _arguments(self, arguments: str | None) -> dict[str, Any]:
        if arguments is None or not arguments.strip():
            return {}
        try:
            value = jsonsafe.loads(arguments)
        except ValueError as exc:
            raise ToolArgumentsError(
                f"tool {self.definition.name!r}: the arguments are not valid JSON ({exc})", self.definition.name
            ) from exc
        if not isinstance(value, dict):
            raise ToolArgumentsError(
                f"tool {self.definition.name!r}: the arguments must be a JSON object, got {type(value).__name__}",
                self.definition.name,
            )
        return value

    def _text(self, result: types.CallToolResult) -> str | ToolResult:
        mapped = map_result(result, max_chars=self.max_result_chars)
        if mapped.is_error:
            raise ToolExecutionError(
                f"tool {self.definition.name!r} reported an error: {mapped.text or '(no message)'}",
                self.definition.name,
            )
        # Images and audio go to the model as media; the text keeps its "[... attachment]" markers.
        return ToolResult(mapped.text, mapped.media) if mapped.media else mapped.text

    def _on_progress(self) -> Callable[[float, float | None, str | None], object] | None:
        progress = self.progress
        if progress is None:
            return None
        name = self.definition.name
        return lambda value, total, message: progress(name, value, total, message)

    def call(self, arguments: str, context: ToolContext | None = None) -> str | ToolResult:
        """Call the server tool and return its result as text, or text and media (the tool context is never sent)."""
        result = self.client.call_tool(
            self.tool_name, self._arguments(arguments), timeout=self._call_timeout, progress=self._on_progress()
        )
        return self._text(result)

    async def acall(self, arguments: str, context: ToolContext | None = None) -> str | ToolResult:
        """Async twin of ``call``."""
        result = await self.client.acall_tool(
            self.tool_name, self._arguments(arguments), timeout=self._call_timeout, progress=self._on_progress()
        )
        return self._text(result)

    def call_result(self, arguments: Mapping[str, Any] | None = None) -> McpToolResult:
        """Call the tool and get the whole mapped result (media and structured content included)."""
        result = self.client.call_tool(self.tool_name, dict(arguments or {}), timeout=self._call_timeout)
        return map_result(result, max_chars=self.max_result_chars)

    def __repr__(self) -> str:
        return f"McpToolCallback({self.definition.name!r} -> {self.client.name}:{self.tool_name})"


class McpToolProvider:
    """The tools of one or more MCP servers, for ``.tools(provider)`` / ``.default_tools(provider)``.

    Each server's tools come from its client's cached list (fetched at connect time, refreshed on
    ``notifications/tools/list_changed``), so asking the provider never blocks; the clients must be
    open when a request is built.

    Naming, in this order: ``name_prefix`` if given (a string is prepended to every name, a
    callable ``fn(client, name)`` returns the name); characters a model API rejects become ``_``;
    then a name that two servers share, or that a tool given directly to the request already has,
    becomes ``<server>_<name>`` for every server that offers it (``<server>`` is the client's
    ``name``; a number is appended if that still clashes).

    A tool whose input schema is not a valid, object-typed JSON Schema (or is absurdly large or
    deep) is skipped with a warning naming it, so one broken or hostile server cannot take down a
    request; ``strict=True`` raises ``McpProtocolError`` instead. Results longer than
    ``max_result_chars`` are cut with a marker (see ``map_result``). ``progress(tool, value, total,
    message)`` receives the progress notifications servers send while the tool loop runs their tools.
    """

    def __init__(
        self,
        *clients: McpClient,
        tool_filter: ToolFilter | None = None,
        name_prefix: NamePrefix | None = None,
        max_result_chars: int = DEFAULT_MAX_RESULT_CHARS,
        strict: bool = False,
        progress: ToolProgress | None = None,
    ) -> None:
        if not clients:
            raise ValueError("McpToolProvider needs at least one McpClient")
        for client in clients:
            if not isinstance(client, McpClient):
                raise TypeError(f"McpToolProvider takes McpClient objects, not {type(client).__name__}")
        if not isinstance(max_result_chars, int) or max_result_chars < 100:
            raise ValueError("max_result_chars must be an integer >= 100")
        if tool_filter is not None and not callable(tool_filter):
            if isinstance(tool_filter, str):
                raise TypeError("tool_filter takes a collection of tool names, not one string: use [name]")
            names = frozenset(tool_filter)
            self._filter: Callable[[McpClient, types.Tool], bool] | None = lambda _c, t: t.name in names
        else:
            self._filter = tool_filter  # type: ignore[assignment]
        self.clients = tuple(clients)
        self.name_prefix = name_prefix
        self.max_result_chars = max_result_chars
        self.strict = strict
        self.progress = progress
        self._cache_key: tuple[Any, ...] | None = None
        self._cache: tuple[McpToolCallback, ...] = ()
        self._built: dict[tuple[int, str, str], McpToolCallback] = {}

    def tool_callbacks(self, reserved: Collection[str] = ()) -> Sequence[ToolCallback]:
        """The current tools of every server, named by the rules above; the same objects while nothing changed."""
        for client in self.clients:
            if not client.connected and not client.lost:
                raise ToolExecutionError(
                    f"MCP server {client.name} is not connected: open the McpClient (with/async with) before "
                    "sending requests that use its tools"
                )
        key = (
            tuple((id(c), c.tools_version, id(c.cached_tools), c.lost) for c in self.clients),
            frozenset(reserved),
        )
        if key != self._cache_key:
            self._cache = self._build(frozenset(reserved))
            self._cache_key = key
        return self._cache

    def _offered(self) -> list[tuple[McpClient, types.Tool, str]]:
        from chatclient.errors import McpProtocolError

        offered: list[tuple[McpClient, types.Tool, str]] = []
        for client in self.clients:
            if client.lost:
                continue  # a server that went away offers nothing more; its calls already told the model
            for tool in client.cached_tools:
                if self._filter is not None and not self._filter(client, tool):
                    continue
                problem = check_input_schema(tool.input_schema)
                if problem is not None:
                    message = f"MCP server {client.name}: tool {tool.name!r} skipped: {problem}"
                    if self.strict:
                        raise McpProtocolError(message, server=client.name)
                    _log.warning(message)
                    continue
                name = tool.name
                if isinstance(self.name_prefix, str):
                    name = self.name_prefix + name
                elif self.name_prefix is not None:
                    name = self.name_prefix(client, name)
                offered.append((client, tool, safe_tool_name(name)))
        return offered

    def _build(self, reserved: frozenset[str]) -> tuple[McpToolCallback, ...]:
        offered = self._offered()
        counts: dict[str, int] = {}
        for _, _, name in offered:
            counts[name] = counts.get(name, 0) + 1
        taken = set(reserved)
        final: list[tuple[McpClient, types.Tool, str]] = []
        for client, tool, name in offered:
            if counts[name] > 1 or name in reserved:
                base = safe_tool_name(f"{_server_slug(client)}_{name}")
                name, n = base, 2
                while name in taken:
                    name = safe_tool_name(f"{base[:60]}_{n}")
                    n += 1
            taken.add(name)
            final.append((client, tool, name))
        callbacks = []
        for client, tool, name in final:
            cache_key = (id(client), tool.name, name)
            cached = self._built.get(cache_key)
            if cached is None or cached.tool != tool:
                cached = McpToolCallback(
                    client, tool, name=name, max_result_chars=self.max_result_chars, progress=self.progress
                )
                self._built[cache_key] = cached
            callbacks.append(cached)
        return tuple(callbacks)

    def __repr__(self) -> str:
        return f"McpToolProvider({', '.join(c.name for c in self.clients)})"


def _server_slug(client: McpClient) -> str:
    return _slug(client.name, 24)


__all__ = [
    "DEFAULT_MAX_RESULT_CHARS",
    "McpToolCallback",
    "McpToolProvider",
    "McpToolResult",
    "NamePrefix",
    "ToolFilter",
    "ToolProgress",
    "check_input_schema",
    "map_result",
    "safe_tool_name",
]
