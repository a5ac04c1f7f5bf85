"""``@tool`` and turning what users pass to ``.tools(...)`` into ``ToolCallback``s."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar, overload

from chatclient.tools.callback import (
    FunctionToolCallback,
    ToolCallback,
    check_timeout,
    check_tool_name,
    is_tool_callback,
)
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
) -> Any:
    """Mark a function or method as a tool the model may call; it stays callable as before.

    The input schema is built from the signature now, so an inexpressible parameter type fails
    here (``TypeError``), not in the middle of a conversation. ``timeout`` (seconds) bounds each
    call of this tool, overriding ``ToolCallingManager(timeout=...)``; a call that takes longer
    becomes an error tool response (see ``ToolTimeoutError``).

    >>> @tool
    ... def add(a: int, b: int) -> int:
    ...     '''Add two integers.'''
    ...     return a + b
    >>> add(1, 2)
    3
    """

    limit = check_timeout(timeout)

    def decorate(f: Any) -> Any:
        target = f.__func__ if isinstance(f, (staticmethod, classmethod)) else f
        if not callable(target):
            raise TypeError(f"@tool decorates functions and methods, not {type(f).__name__}")
        tool_name = check_tool_name(name if name is not None else getattr(target, "__name__", None))
        is_method = isinstance(f, classmethod) or (not isinstance(f, staticmethod) and _is_method_like(target))
        binder = SignatureInput(target, tool_name, skip_first=is_method)
        spec = ToolSpec(tool_name, description, return_direct, result_converter, binder, is_method, limit)
        setattr(target, _MARK, spec)
        return f

    if fn is not None:
        return decorate(fn)
    return decorate


def tool_spec(obj: Any) -> ToolSpec | None:
    """The ``@tool`` record of a function or bound method, if any."""
    spec = getattr(obj, _MARK, None)
    return spec if isinstance(spec, ToolSpec) else None


def _callback(fn: Callable[..., Any], spec: ToolSpec) -> FunctionToolCallback:
    return FunctionToolCallback(
        fn,
        name=spec.name,
        description=spec.description,
        return_direct=spec.return_direct,
        result_converter=spec.result_converter,
        timeout=spec.timeout,
        _binder=spec.binder,
    )


def _raw_function(raw: Any) -> Any:
    return raw.__func__ if isinstance(raw, (staticmethod, classmethod)) else raw


def callbacks_from_object(obj: Any) -> list[FunctionToolCallback]:
    """One callback per ``@tool`` method of ``obj`` (an instance, a class with static tools, or a module).

    An override without ``@tool`` of a decorated base method is still a tool (the base's name and
    schema, the override's code), so subclassing a tool class keeps its tools.
    """
    if inspect.ismodule(obj):
        return [_callback(v, s) for v in vars(obj).values() if (s := tool_spec(v)) is not None and not s.is_method]
    cls = obj if isinstance(obj, type) else type(obj)
    specs: dict[str, ToolSpec] = {}
    for klass in reversed(cls.__mro__):  # base classes first, definition order within a class
        for attr, raw in vars(klass).items():
            spec = tool_spec(_raw_function(raw))
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
        callbacks.append(_callback(bound, spec))
    return callbacks


def _resolve_one(item: Any, out: list[ToolCallback]) -> None:
    if item is None:
        raise ValueError("tools cannot contain None")
    if is_tool_callback(item):
        out.append(item)
        return
    if isinstance(item, (list, tuple, set, frozenset)):
        for sub in item:
            _resolve_one(sub, out)
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


def resolve_tools(tools: Iterable[Any]) -> list[ToolCallback]:
    """Turn ``@tool`` functions, objects with ``@tool`` methods and ``ToolCallback``s into callbacks.

    Raises ``ValueError`` naming any tool name given more than once (models cannot tell them apart).
    """
    if tools is None:
        raise ValueError("tools cannot be None")
    out: list[ToolCallback] = []
    for item in tools:
        _resolve_one(item, out)
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
    return out
