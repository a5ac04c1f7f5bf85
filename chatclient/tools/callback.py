"""Tool callbacks: what the tool-calling machinery actually invokes."""

from __future__ import annotations

import asyncio
import inspect
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from chatclient.errors import ToolExecutionError
from chatclient.messages import Media
from chatclient.prompt import ToolDefinition
from chatclient.tools.context import ToolContext
from chatclient.tools.names import check_tool_name
from chatclient.tools.results import ToolResult, ToolResultConverter, default_result_converter
from chatclient.tools.schema import ArgumentsError, SignatureInput, TypeInput, describe


class ToolArgumentsError(ToolExecutionError):
    """The model's arguments for a tool were not valid JSON or did not match its schema."""


class ToolResultConversionError(ToolExecutionError):
    """A tool's return value could not be converted to text (a bug in the tool, not the model's fault)."""


class ToolTimeoutError(ToolExecutionError):
    """A tool did not finish within its timeout (``@tool(timeout=...)`` or ``ToolCallingManager(timeout=...)``).

    ``timeout`` is the limit in seconds. An async tool is cancelled; a sync tool cannot be stopped
    and keeps running in its daemon thread, its result discarded.
    """

    def __init__(self, message: str, tool_name: str | None = None, timeout: float | None = None) -> None:
        super().__init__(message, tool_name)
        self.timeout = timeout


def check_timeout(timeout: Any, what: str = "timeout") -> float | None:
    """``None`` (no limit) or a positive, finite number of seconds, as a float."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise TypeError(f"{what} must be a number of seconds or None, not {type(timeout).__name__}")
    if not math.isfinite(timeout) or timeout <= 0:
        raise ValueError(f"{what} must be a positive, finite number of seconds (or None for no limit), got {timeout!r}")
    return float(timeout)


@runtime_checkable
class ToolCallback(Protocol):
    """A tool the model may call: its definition, whether its result goes straight to the caller, and how to run it.

    Implement ``call`` (and ``acall`` for native async); ``arguments`` is the model's raw JSON text.
    ``call`` returns the text for the model, or a ``ToolResult`` when the result carries media.
    Raise ``ToolExecutionError`` for failures the model should hear about. An optional ``timeout``
    attribute (seconds, or ``None``) overrides the ``ToolCallingManager``'s default.
    """

    @property
    def definition(self) -> ToolDefinition: ...

    @property
    def return_direct(self) -> bool: ...

    def call(self, arguments: str, context: ToolContext | None = None) -> str | ToolResult: ...

    async def acall(self, arguments: str, context: ToolContext | None = None) -> str | ToolResult:
        """Default for explicit subclasses: run ``call`` in a worker thread."""
        return await asyncio.to_thread(self.call, arguments, context)


def as_tool_context(context: ToolContext | Mapping[str, Any] | None) -> ToolContext:
    if isinstance(context, ToolContext):
        return context
    return ToolContext(context or {})


def _is_async(fn: Callable[..., Any]) -> bool:
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(fn, "__call__", None)  # noqa: B004 - callable objects with an async __call__
    return call is not None and inspect.iscoroutinefunction(call)


def _takes_two(fn: Callable[..., Any]) -> bool:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2 or any(p.kind is p.VAR_POSITIONAL for p in params)


class FunctionToolCallback:
    """A tool backed by a Python callable (sync or ``async``).

    Without ``input_type`` the input schema comes from the callable's signature (a parameter
    without a type annotation, as in a lambda, is advertised as "any value" and warns). With
    ``input_type`` (a pydantic model or dataclass) the callable receives one instance built from
    the arguments, plus the ``ToolContext`` as a second argument if it takes two. ``timeout``
    (seconds) bounds each call when a ``ToolCallingManager`` runs it, overriding the manager's default.

    >>> def add(a: int, b: int) -> int:
    ...     return a + b
    >>> cb = FunctionToolCallback(add, description="Add two numbers")
    >>> cb.call('{"a": 2, "b": 3}')
    '5'
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        input_type: Any = None,
        return_direct: bool = False,
        result_converter: ToolResultConverter | Callable[[Any], str] | None = None,
        timeout: float | None = None,
        return_direct_if_last: bool = False,
        requires_approval: bool = False,
        compensate: Callable[..., Any] | None = None,
        _binder: SignatureInput | TypeInput | None = None,
    ) -> None:
        if fn is None or not callable(fn):
            raise TypeError(f"a tool needs a callable, got {fn!r}")
        self._timeout = check_timeout(timeout)
        tool_name = check_tool_name(name if name is not None else getattr(fn, "__name__", None))
        self._fn = fn
        self._async = _is_async(fn)
        if _binder is not None:
            self._binder: SignatureInput | TypeInput = _binder
        elif input_type is not None:
            self._binder = TypeInput(input_type, tool_name, pass_context=_takes_two(fn))
        else:
            self._binder = SignatureInput(fn, tool_name)
        self._definition = ToolDefinition(tool_name, describe(fn, description, tool_name), self._binder.json_schema)
        self._return_direct = bool(return_direct)
        self.return_direct_if_last = bool(return_direct_if_last)
        """Answer with this tool's result when it is the last call of the turn (``IMMEDIATE_IF_LAST``)."""
        self.requires_approval = bool(requires_approval)
        """``ToolApprovalAdvisor`` asks for a decision before each call of this tool."""
        self._convert = result_converter or default_result_converter
        from chatclient.tools.compensation import Compensator

        self.compensator: Compensator | None = Compensator(compensate, tool_name) if compensate is not None else None
        """How to undo a successful call when a later call of the same turn fails (``@tool(compensate=...)``)."""

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    @property
    def name(self) -> str:
        return self._definition.name

    @property
    def return_direct(self) -> bool:
        return self._return_direct

    @property
    def timeout(self) -> float | None:
        """This tool's time limit in seconds (``None``: the manager's default applies)."""
        return self._timeout

    @property
    def is_async(self) -> bool:
        """True when the wrapped callable is a coroutine function (it can be cancelled on timeout)."""
        return self._async

    @property
    def function(self) -> Callable[..., Any]:
        """The wrapped callable."""
        return self._fn

    def _bind(self, arguments: str | None, context: ToolContext | Mapping[str, Any] | None) -> Any:
        try:
            return self._binder.bind(arguments, as_tool_context(context))
        except ArgumentsError as exc:
            raise ToolArgumentsError(f"tool {self.name!r}: {exc}", self.name) from exc

    def bind_arguments(
        self, arguments: str | None, context: ToolContext | Mapping[str, Any] | None = None
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The positional and keyword arguments the function receives for ``arguments`` (JSON text)."""
        args, kwargs = self._bind(arguments, context)
        return tuple(args), kwargs

    def _failed(self, exc: Exception) -> ToolExecutionError:
        detail = str(exc) or "(no message)"
        return ToolExecutionError(f"tool {self.name!r} failed: {type(exc).__name__}: {detail}", self.name)

    def _to_text(self, result: Any) -> str | ToolResult:
        # Media pass through as a ToolResult; everything else becomes text.
        if isinstance(result, ToolResult):
            return result
        if isinstance(result, Media):
            return ToolResult("", (result,))
        try:
            text = self._convert(result)
        except Exception as exc:
            raise ToolResultConversionError(
                f"tool {self.name!r} returned a {type(result).__name__} that cannot be converted to text: {exc}. "
                "Return str, None, a dict/list, a dataclass or a pydantic model, or give the tool a result_converter.",
                self.name,
            ) from exc
        if not isinstance(text, str):
            raise ToolResultConversionError(
                f"tool {self.name!r}: the result converter returned {type(text).__name__}, not str", self.name
            )
        return text

    def call(self, arguments: str, context: ToolContext | Mapping[str, Any] | None = None) -> str | ToolResult:
        """Validate ``arguments``, run the tool (async tools on a private loop) and convert the result."""
        from chatclient.models.base import run_sync

        args, kwargs = self._bind(arguments, context)
        try:
            result = self._fn(*args, **kwargs)
            if inspect.isawaitable(result):
                result = run_sync(_await(result))
        except Exception as exc:
            raise self._failed(exc) from exc
        return self._to_text(result)

    async def acall(self, arguments: str, context: ToolContext | Mapping[str, Any] | None = None) -> str | ToolResult:
        """Async twin of ``call``; sync tools run in a worker thread so they never block the loop."""
        args, kwargs = self._bind(arguments, context)
        try:
            if self._async:
                result = await self._fn(*args, **kwargs)
            else:
                result = await asyncio.to_thread(self._fn, *args, **kwargs)
                if inspect.isawaitable(result):
                    result = await result
        except Exception as exc:
            raise self._failed(exc) from exc
        return self._to_text(result)

    def __repr__(self) -> str:
        timeout = f", timeout={self._timeout}" if self._timeout is not None else ""
        return f"FunctionToolCallback(name={self.name!r}, return_direct={self._return_direct}{timeout})"


async def _await(awaitable: Any) -> Any:
    return await awaitable


def is_tool_callback(obj: Any) -> bool:
    """Duck-typed check: a definition with a name, and a ``call`` method."""
    definition = getattr(obj, "definition", None)
    return isinstance(getattr(definition, "name", None), str) and callable(getattr(obj, "call", None))


@runtime_checkable
class ToolCallbackProvider(Protocol):
    """A source of tools whose list may change while it is in use (an MCP server, a plugin registry).

    Pass the provider itself to ``.tools(...)`` / ``.default_tools(...)``: the client asks it for its
    tools when each request is built, and the tool loop asks again between model turns, so tools a
    server adds or removes mid-conversation reach the next turn. ``tool_callbacks`` is called on the
    request's thread (inside an event loop in async code), so it must answer from memory without
    blocking; return the same callback objects while nothing changed (the loop compares them by
    identity to skip rebuilding the request).

    If the method also accepts a ``reserved`` keyword, it receives the names already taken by the
    request's other tools, so the provider can rename its clashing tools (``McpToolProvider`` adds
    the server's name as a prefix); otherwise a clash fails the request with the duplicate names.
    If it accepts a ``request`` keyword (``request: ToolProviderRequest | None = None``), it receives
    the conversation so far and the request and tool contexts, also on the loop's first turn, and may
    offer tools that fit the request (see ``chatclient.tools.providers``); returning ``None`` means none.
    """

    def tool_callbacks(self) -> Sequence[ToolCallback]:
        """The provider's current tools."""
        ...


def is_tool_callback_provider(obj: Any) -> bool:
    """Duck-typed check: an object (not a class) with a ``tool_callbacks`` method that is not itself a tool."""
    return not isinstance(obj, type) and callable(getattr(obj, "tool_callbacks", None)) and not is_tool_callback(obj)
