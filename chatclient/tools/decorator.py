"""``@tool`` and turning what users pass to ``.tools(...)`` into ``ToolCallback``s."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, overload

from chatclient.messages import Message
from chatclient.request import ChatClientRequest, ContextKeys
from chatclient.tools.callback import (
    FunctionToolCallback,
    ToolCallback,
    ToolCallbackProvider,
    check_timeout,
    is_tool_callback,
    is_tool_callback_provider,
)
from chatclient.tools.compensation import compensated_tool
from chatclient.tools.names import check_tool_name
from chatclient.tools.providers import ToolProviderRequest, is_request_aware, provider_callbacks
from chatclient.tools.results import ToolResultConverter
from chatclient.tools.schema import SignatureInput

F = TypeVar("F")
_MARK = "__chatclient_tool__"


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """What ``@tool`` recorded on a function; the schema is built once, at decoration."""

    name: str
    description: str | None
    return_direct: bool
    result_converter: ToolResultConverter | Callable[[Any], str] | None
    binder: SignatureInput
    is_method: bool
    timeout: float | None = None
    return_direct_if_last: bool = False
    requires_approval: bool = False
    compensate: Callable[..., Any] | None = None


def _is_method_like(fn: Callable[..., Any]) -> bool:
    # Decorated inside a class body the function is still plain; its first parameter gives it away.
    try:
        first = next(iter(inspect.signature(fn).parameters), None)
    except (TypeError, ValueError):
        return False
    return first in ("self", "cls") and "." in getattr(fn, "__qualname__", "")


@overload
def tool(fn: F, /) -> F: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    return_direct: bool = False,
    result_converter: ToolResultConverter | Callable[[Any], str] | None = None,
    timeout: float | None = None,
    return_direct_if_last: bool = False,
    requires_approval: bool = False,
    compensate: Callable[..., Any] | None = None,
) -> Callable[[F], F]: ...


def tool(
    fn: Any = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    return_direct: bool = False,
    result_converter: ToolResultConverter | Callable[[Any], str] | None = None,
    timeout: float | None = None,
    return_direct_if_last: bool = False,
    requires_approval: bool = False,
    compensate: Callable[..., Any] | None = None,
) -> Any:
    """Mark a function or method as a tool the model may call; it stays callable as before.

    The input schema is built from the signature now, so an inexpressible parameter type, or a
    parameter without a type annotation, fails here (``TypeError`` naming the parameter), not in
    the middle of a conversation (annotate with ``Any`` to accept any JSON value on purpose). ``timeout`` (seconds) bounds each
    call of this tool, overriding ``ToolCallingManager(timeout=...)``; a call that takes longer
    becomes an error tool response (see ``ToolTimeoutError``). ``return_direct_if_last`` answers
    with the tool's result without asking the model again when this tool is the last call of the
    turn (LangChain4j's ``IMMEDIATE_IF_LAST``). ``requires_approval`` makes
    ``ToolApprovalAdvisor`` ask for a decision before each call. ``compensate`` undoes a successful
    call when another call of the same model turn fails: it takes the tool's parameters, or one
    ``ToolExecution`` (see ``chatclient.tools.compensation``).

    >>> @tool
    ... def add(a: int, b: int) -> int:
    ...     '''Add two integers.'''
    ...     return a + b
    >>> add(1, 2)
    3
    """

    limit = check_timeout(timeout)
    if compensate is not None and not callable(compensate):
        raise TypeError(f"compensate= must be a callable that undoes the tool, not {compensate!r}")

    def decorate(f: Any) -> Any:
        target = f.__func__ if isinstance(f, (staticmethod, classmethod)) else f
        if not callable(target):
            raise TypeError(f"@tool decorates functions and methods, not {type(f).__name__}")
        tool_name = check_tool_name(name if name is not None else getattr(target, "__name__", None))
        is_method = isinstance(f, classmethod) or (not isinstance(f, staticmethod) and _is_method_like(target))
        binder = SignatureInput(target, tool_name, skip_first=is_method, require_hints=True)
        spec = ToolSpec(
            tool_name,
            description,
            return_direct,
            result_converter,
            binder,
            is_method,
            limit,
            return_direct_if_last=bool(return_direct_if_last),
            requires_approval=bool(requires_approval),
            compensate=compensate,
        )
        setattr(target, _MARK, spec)
        return f

    if fn is not None:
        return decorate(fn)
    return decorate


def tool_spec(obj: Any) -> ToolSpec | None:
    """The ``@tool`` record of a function or bound method, if any."""
    spec = getattr(obj, _MARK, None)
    return spec if isinstance(spec, ToolSpec) else None


def _callback(
    fn: Callable[..., Any], spec: ToolSpec, compensate: Callable[..., Any] | None = None
) -> FunctionToolCallback:
    return FunctionToolCallback(
        fn,
        name=spec.name,
        description=spec.description,
        return_direct=spec.return_direct,
        result_converter=spec.result_converter,
        timeout=spec.timeout,
        return_direct_if_last=spec.return_direct_if_last,
        requires_approval=spec.requires_approval,
        compensate=compensate if compensate is not None else spec.compensate,
        _binder=spec.binder,
    )


def _raw_function(raw: Any) -> Any:
    return raw.__func__ if isinstance(raw, (staticmethod, classmethod)) else raw


def callbacks_from_object(obj: Any) -> list[FunctionToolCallback]:
    """One callback per ``@tool`` method of ``obj`` (an instance, a class with static tools, or a module).

    An override without ``@tool`` of a decorated base method is still a tool (the base's name and
    schema, the override's code), so subclassing a tool class keeps its tools. A method marked
    ``@compensates("name")`` becomes the undo function of tool ``name``.
    """
    if inspect.ismodule(obj):
        return [_callback(v, s) for v in vars(obj).values() if (s := tool_spec(v)) is not None and not s.is_method]
    cls = obj if isinstance(obj, type) else type(obj)
    specs: dict[str, ToolSpec] = {}
    undo: dict[str, str] = {}  # tool name -> attribute of its @compensates method
    for klass in reversed(cls.__mro__):  # base classes first, definition order within a class
        for attr, raw in vars(klass).items():
            spec = tool_spec(_raw_function(raw))
            linked = compensated_tool(_raw_function(raw))
            if linked is not None:
                undo[linked] = attr
            if spec is not None:
                specs[attr] = spec
            elif attr in specs and not inspect.isroutine(_raw_function(raw)):
                del specs[attr]  # shadowed by something that is not a method
    callbacks = []
    for attr, spec in specs.items():
        bound = getattr(obj, attr)
        if isinstance(obj, type) and spec.is_method and not inspect.ismethod(bound):
            raise TypeError(
                f"tool {spec.name!r} is an instance method of {cls.__name__}: pass an instance "
                f"({cls.__name__}()) to tools(), not the class"
            )
        compensate = None
        if spec.name in undo:
            if spec.compensate is not None:
                raise ValueError(
                    f"tool {spec.name!r} has compensate= and a @compensates method ({undo[spec.name]}); keep one"
                )
            compensate = getattr(obj, undo.pop(spec.name))
        callbacks.append(_callback(bound, spec, compensate))
    if undo:
        raise ValueError(
            f"{cls.__name__}: @compensates names tool(s) it does not have: {', '.join(sorted(undo))} "
            f"(its tools: {', '.join(s.name for s in specs.values()) or 'none'})"
        )
    return callbacks


def _resolve_one(item: Any, out: list[ToolCallback], providers: list[ToolCallbackProvider]) -> None:
    if item is None:
        raise ValueError("tools cannot contain None")
    if is_tool_callback(item):
        out.append(item)
        return
    if isinstance(item, (list, tuple, set, frozenset)):
        for sub in item:
            _resolve_one(sub, out, providers)
        return
    if is_tool_callback_provider(item):
        providers.append(item)  # asked for its tools once the directly given tools are known
        return
    spec = tool_spec(item)
    if spec is not None:
        if spec.is_method and not inspect.ismethod(item):
            raise TypeError(
                f"tool {spec.name!r} is a method: pass the object that owns it (or obj.{spec.name}), "
                "not the function from the class"
            )
        out.append(_callback(item, spec))
        return
    if not isinstance(item, type) and callable(getattr(item, "as_tool", None)):
        # an agent (or anything that knows how to become a tool): duck-typed, tools sit below agents
        name = getattr(item, "name", None) or type(item).__name__
        raise TypeError(f"{name!r} is not a tool but can become one: pass {name}.as_tool() to .tools(...)")
    if inspect.isroutine(item) or (callable(item) and not isinstance(item, type) and not _has_tool_methods(item)):
        raise TypeError(
            f"{getattr(item, '__name__', item)!r} is not a tool: decorate it with @tool or wrap it in "
            "FunctionToolCallback(fn, name=..., description=...)"
        )
    found = callbacks_from_object(item)
    if not found:
        raise TypeError(
            f"{type(item).__name__ if not isinstance(item, type) else item.__name__} has no @tool methods; "
            "pass @tool functions, objects with @tool methods, or ToolCallbacks"
        )
    out.extend(found)


def _has_tool_methods(obj: Any) -> bool:
    return any(tool_spec(_raw_function(raw)) for klass in type(obj).__mro__ for raw in vars(klass).values())


ProvidedTools = tuple[ToolCallbackProvider, tuple[ToolCallback, ...]]
"""A provider and the callbacks it gave for one request (kept in ``ContextKeys.TOOL_PROVIDERS``)."""


def resolve_tool_sources(
    tools: Iterable[Any], request: ToolProviderRequest | None = None
) -> tuple[list[ToolCallback], tuple[ProvidedTools, ...]]:
    """``resolve_tools``, plus each ``ToolCallbackProvider`` with the callbacks it gave.

    Tools given directly come first and keep their names; providers are asked afterwards, in order,
    with the names already taken (see ``ToolCallbackProvider``) and, when they take it, ``request``.
    """
    if tools is None:
        raise ValueError("tools cannot be None")
    out: list[ToolCallback] = []
    providers: list[ToolCallbackProvider] = []
    for item in tools:
        _resolve_one(item, out, providers)
    taken = {cb.definition.name for cb in out}
    sources: list[ProvidedTools] = []
    for provider in providers:
        given = provider_callbacks(provider, taken, request)
        taken.update(cb.definition.name for cb in given)
        sources.append((provider, given))
        out.extend(given)
    _check_unique(out)
    return out, tuple(sources)


def refresh_provided_tools(
    request: ChatClientRequest, messages: Sequence[Message] | None = None, *, only_request_aware: bool = False
) -> ChatClientRequest:
    """The request with its providers' current tools, or the same request when none changed.

    The tool loop calls this between model turns, so a provider whose tools changed (an MCP
    server's ``notifications/tools/list_changed``) offers the new list on the next turn; the
    prompt's tool definitions and the callbacks the manager runs change together. Request-aware
    providers see ``messages`` (the conversation so far; default: the request's prompt). With
    ``only_request_aware`` (the loop's first turn) nothing is asked unless a provider is request-aware.
    """
    sources: tuple[ProvidedTools, ...] = tuple(request.context.get(ContextKeys.TOOL_PROVIDERS) or ())
    if not sources:
        return request
    if only_request_aware and not any(is_request_aware(p) for p, _ in sources):
        return request
    asked = ToolProviderRequest(
        tuple(messages) if messages is not None else request.prompt.messages,
        request.context,
        request.context.get(ContextKeys.TOOL_CONTEXT) or {},
    )
    provided = {id(cb) for _, given in sources for cb in given}
    direct = [cb for cb in request.context.get(ContextKeys.TOOL_CALLBACKS) or () if id(cb) not in provided]
    taken = {cb.definition.name for cb in direct}
    fresh: list[ProvidedTools] = []
    changed = False
    for provider, old in sources:
        # On the first turn the request was built a moment ago: only request-aware providers have
        # something new to see (the memory); the others keep what they just gave.
        fresh_ask = not only_request_aware or is_request_aware(provider)
        given = provider_callbacks(provider, taken, asked) if fresh_ask else old
        taken.update(cb.definition.name for cb in given)
        changed = changed or len(given) != len(old) or any(a is not b for a, b in zip(given, old, strict=False))
        fresh.append((provider, given))
    if not changed:
        return request
    callbacks = [*direct, *(cb for _, given in fresh for cb in given)]
    _check_unique(callbacks)
    prompt = request.prompt.copy(tools=tuple(cb.definition for cb in callbacks))
    return request.mutate(
        prompt=prompt,
        context={ContextKeys.TOOL_CALLBACKS: tuple(callbacks), ContextKeys.TOOL_PROVIDERS: tuple(fresh)},
    )


def resolve_tools(tools: Iterable[Any]) -> list[ToolCallback]:
    """Turn ``@tool`` functions, objects with ``@tool`` methods, ``ToolCallback``s and providers into callbacks.

    A ``ToolCallbackProvider`` contributes its current tools. Raises ``ValueError`` naming any tool
    name given more than once (models cannot tell them apart).
    """
    return resolve_tool_sources(tools)[0]


def _check_unique(out: Sequence[ToolCallback]) -> None:
    seen: set[str] = set()
    duplicates: list[str] = []
    for cb in out:
        name = cb.definition.name
        if name in seen and name not in duplicates:
            duplicates.append(name)
        seen.add(name)
    if duplicates:
        raise ValueError(
            f"duplicate tool name(s) in one request: {', '.join(duplicates)}; each tool needs a unique name "
            "(use @tool(name=...) or FunctionToolCallback(name=...))"
        )
