"""Build-time analysis of a service method: its parameters' roles, its templates, its return type.

Everything a call needs is worked out here once (argument positions, compiled templates, the
output converter), so a call only binds arguments and fills a request spec. Every mistake in a
declaration raises ``AiServiceDefinitionError`` naming the method and the parameter.
"""

from __future__ import annotations

import collections.abc as cabc
import inspect
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from chatclient.errors import AiServiceDefinitionError, TemplateError
from chatclient.messages import Media
from chatclient.services.markers import (
    SYSTEM_ATTR,
    USER_ATTR,
    MemoryIdMarker,
    PartialMarker,
    TemplateSource,
    ToolArgMarker,
    VarMarker,
)
from chatclient.services.result import Result

MISSING: Any = object()
"""Placeholder for a parameter without a default."""

BUILTIN_VARIABLES = ("current_date", "current_time", "current_date_time")
"""Variables every template may use without a parameter of that name (filled at call time)."""

# Return kinds.
TEXT = "text"
CHAT_RESPONSE = "chat_response"
CLIENT_RESPONSE = "client_response"
ENTITY = "entity"
RESULT_TEXT = "result_text"
RESULT_ENTITY = "result_entity"
STREAM_TEXT = "stream_text"
STREAM_PARTIAL = "stream_partial"

_SYNC_ITERATORS = (cabc.Iterator, cabc.Iterable, cabc.Generator)
_ASYNC_ITERATORS = (cabc.AsyncIterator, cabc.AsyncIterable, cabc.AsyncGenerator)
_MEDIA_SEQUENCES = (list, tuple, cabc.Sequence, cabc.Iterable)


@dataclass(frozen=True, slots=True)
class ReturnPlan:
    """How a method's answer is produced: ``kind`` (see the constants above), the converter for
    entity kinds, and whether a stream is async."""

    kind: str
    converter: Any = None
    async_stream: bool = False

    @property
    def streams(self) -> bool:
        return self.kind in (STREAM_TEXT, STREAM_PARTIAL)


@dataclass(frozen=True, slots=True)
class MethodPlan:
    """Everything a call of one service method needs, computed when the service is built."""

    interface: str
    name: str
    is_async: bool
    signature: inspect.Signature
    names: tuple[str, ...]
    defaults: tuple[Any, ...]
    index: Mapping[str, int]
    positional_only: int
    positional: int
    system_template: str | None
    user_template: str | None
    user_param: int | None
    variables: tuple[tuple[str, int], ...]
    builtins: tuple[str, ...]
    memory_index: int | None
    media: tuple[int, ...]
    tool_args: tuple[tuple[str | None, int], ...]
    returns: ReturnPlan
    description: str | None

    @property
    def qualname(self) -> str:
        return f"{self.interface}.{self.name}"

    def bind(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Sequence[Any]:
        """Argument values in parameter order, defaults filled in; wrong calls raise ``TypeError`` like Python's."""
        n = len(args)
        if not kwargs and n == len(self.names):
            return args
        if n > self.positional:
            raise TypeError(f"{self.name}() takes {self.positional} positional argument(s) but {n} were given")
        values = [*args, *self.defaults[n:]]
        for key, value in kwargs.items():
            i = self.index.get(key)
            if i is None or i < self.positional_only:
                raise TypeError(f"{self.name}() got an unexpected keyword argument {key!r}")
            if i < n:
                raise TypeError(f"{self.name}() got multiple values for argument {key!r}")
            values[i] = value
        for value in values:
            if value is MISSING:
                missing = [self.names[j] for j, v in enumerate(values) if v is MISSING]
                raise TypeError(f"{self.name}() missing required argument(s): {', '.join(map(repr, missing))}")
        return values


def _error(where: str, message: str, method: str, parameter: str | None = None) -> AiServiceDefinitionError:
    return AiServiceDefinitionError(f"{where}: {message}", method=method, parameter=parameter)


def unwrap_annotation(annotation: Any) -> tuple[Any, tuple[Any, ...]]:
    """``Annotated[T, *meta]`` -> ``(T, meta)``; other annotations -> ``(annotation, ())``."""
    if typing.get_origin(annotation) is Annotated:
        base, *meta = typing.get_args(annotation)
        inner, more = unwrap_annotation(base)
        return inner, (*more, *meta)
    return annotation, ()


def _without_none(tp: Any) -> Any:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        rest = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(rest) == 1:
            return rest[0]
    return tp


def is_media(tp: Any) -> bool:
    """``Media``, ``Media | None`` or a list/tuple/sequence of ``Media``."""
    tp = _without_none(tp)
    if tp is Media:
        return True
    origin = typing.get_origin(tp)
    if origin in _MEDIA_SEQUENCES:
        args = [a for a in typing.get_args(tp) if a is not Ellipsis]
        return len(args) == 1 and args[0] is Media
    return False


def _is_tool_context(tp: Any) -> bool:
    """``ToolContext`` (or ``ToolContext | None``): the parameter's mapping goes to the tools' context."""
    from chatclient.tools.context import ToolContext

    return _without_none(tp) is ToolContext


def _is_text(tp: Any) -> bool:
    return tp is inspect.Parameter.empty or tp is str or tp is Any


def _template_names(renderer: Any, template: str, where: str, kind: str, method: str) -> frozenset[str] | None:
    """Undeclared variables of ``template`` (jinja2's meta), or ``None`` when the renderer cannot tell."""
    variables = getattr(renderer, "variables", None)
    if not callable(variables):
        return None
    try:
        return frozenset(variables(template))
    except TemplateError as exc:
        raise _error(where, f"the {kind} template is not valid: {exc}", method) from None


def method_plan(
    interface: type,
    fn: Callable[..., Any],
    *,
    renderer: Any,
    has_system_provider: bool,
) -> MethodPlan:
    """Analyse one method of ``interface``; raises ``AiServiceDefinitionError`` for a bad declaration."""
    name = fn.__name__
    where = f"{interface.__name__}.{name}"
    try:
        signature = inspect.signature(fn, eval_str=True)
    except (NameError, TypeError, ValueError, SyntaxError) as exc:
        raise _error(
            where,
            f"cannot read its type hints ({type(exc).__name__}: {exc}); define the types it uses at module level",
            name,
        ) from None
    params = list(signature.parameters.values())
    if not params or params[0].kind not in (params[0].POSITIONAL_ONLY, params[0].POSITIONAL_OR_KEYWORD):
        raise _error(where, "a service method needs `self` as its first parameter", name)
    params = params[1:]

    names: list[str] = []
    defaults: list[Any] = []
    variables: dict[str, int] = {}
    explicit_vars: set[str] = set()
    plain: list[int] = []  # parameters with no role marker: candidates for the user message
    memory_index: int | None = None
    media: list[int] = []
    tool_args: list[tuple[str | None, int]] = []
    positional_only = positional = 0
    for i, p in enumerate(params):
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise _error(
                where,
                f"parameter {p.name!r} is *{p.name} / **{p.name}; declare each argument explicitly "
                "(each becomes a template variable)",
                name,
                p.name,
            )
        names.append(p.name)
        defaults.append(MISSING if p.default is p.empty else p.default)
        if p.kind is p.POSITIONAL_ONLY:
            positional_only += 1
        if p.kind is not p.KEYWORD_ONLY:
            positional += 1
        base, meta = unwrap_annotation(p.annotation)
        roles = [m for m in meta if isinstance(m, (VarMarker, MemoryIdMarker, ToolArgMarker))]
        if len({type(m) for m in roles}) > 1:
            raise _error(where, f"parameter {p.name!r} has more than one of V, MemoryId and ToolArg", name, p.name)
        role = roles[-1] if roles else None
        if isinstance(role, MemoryIdMarker):
            if memory_index is not None:
                raise _error(
                    where,
                    f"two MemoryId parameters, {names[memory_index]!r} and {p.name!r}; a call belongs to one "
                    "conversation, so keep one",
                    name,
                    p.name,
                )
            memory_index = i
            variables[p.name] = i  # usable in templates too
        elif isinstance(role, ToolArgMarker):
            tool_args.append((role.name or p.name, i))
        elif _is_tool_context(base):
            tool_args.append((None, i))  # a whole mapping, merged into the tools' context
        elif is_media(base):
            media.append(i)
        else:
            var = role.name if isinstance(role, VarMarker) and role.name else p.name
            if var in variables:
                raise _error(where, f"two parameters give the template variable {var!r}", name, p.name)
            variables[var] = i
            if isinstance(role, VarMarker):
                explicit_vars.add(var)
            else:
                plain.append(i)

    # -- templates ----------------------------------------------------------------------------
    system_source: TemplateSource | None = getattr(fn, SYSTEM_ATTR, None) or interface.__dict__.get(SYSTEM_ATTR)
    user_source: TemplateSource | None = getattr(fn, USER_ATTR, None)
    system_template = system_source.load(where, name) if system_source is not None else None
    user_template = user_source.load(where, name) if user_source is not None else None
    docstring = inspect.cleandoc(fn.__doc__) if fn.__doc__ else None
    if user_template is None and docstring:
        user_template = docstring
    if system_template is not None and not system_template.strip():
        raise _error(where, "the system template is empty", name)
    if user_template is not None and not user_template.strip():
        raise _error(where, "the user template is empty", name)

    used: set[str] = set()
    known = set(variables) | set(BUILTIN_VARIABLES)
    checked = True
    for kind, template in (("system", system_template), ("user", user_template)):
        if template is None:
            continue
        found = _template_names(renderer, template, where, kind, name)
        if found is None:
            checked = False
            continue
        unknown = sorted(found - known)
        if unknown:
            params_text = ", ".join(sorted(variables)) or "none"
            raise _error(
                where,
                f"the {kind} template uses {', '.join(unknown)}, which is not a parameter (parameters usable "
                f"in templates: {params_text}; also {', '.join(BUILTIN_VARIABLES)}); add the parameter or fix "
                "the name",
                name,
                unknown[0],
            )
        used |= found

    user_param: int | None = None
    if user_template is None:
        by_system = [i for i in plain if names[i] not in used]
        if len(by_system) == 1:
            user_param = by_system[0]
            annotation = unwrap_annotation(params[user_param].annotation)[0]
            if not _is_text(annotation):
                raise _error(
                    where,
                    f"parameter {names[user_param]!r} would be the user message but is not a str; "
                    "add a @user template (or a docstring) that uses it",
                    name,
                    names[user_param],
                )
            used.add(names[user_param])
        elif not by_system and not media:
            raise _error(
                where,
                "there is no user message: add @user('...'), a docstring template, or a str parameter",
                name,
            )
        elif by_system:
            listed = ", ".join(repr(names[i]) for i in by_system)
            raise _error(
                where,
                f"cannot tell which of {listed} is the user message; add a @user template (or a docstring) "
                "that uses them",
                name,
                names[by_system[0]],
            )
    keep_all = has_system_provider and system_template is None
    if checked and not keep_all:
        for var, i in variables.items():
            if i == memory_index or var in used:
                continue
            raise _error(
                where,
                f"parameter {names[i]!r} is not used: no template mentions {{{{ {var} }}}}; use it in @system/"
                "@user (or the docstring), or remove it",
                name,
                names[i],
            )

    is_async = inspect.iscoroutinefunction(fn)
    returns = return_plan(signature.return_annotation, is_async=is_async, where=where, method=name)
    builtins = tuple(b for b in BUILTIN_VARIABLES if b in used and b not in variables)
    return MethodPlan(
        interface=interface.__name__,
        name=name,
        is_async=is_async,
        signature=signature,
        names=tuple(names),
        defaults=tuple(defaults),
        index=types.MappingProxyType({n: i for i, n in enumerate(names)}),
        positional_only=positional_only,
        positional=positional,
        system_template=system_template,
        user_template=user_template,
        user_param=user_param,
        # a provider's system text is only known at call time: it may use any parameter
        variables=tuple((var, i) for var, i in variables.items() if var in used or not checked or keep_all),
        builtins=builtins,
        memory_index=memory_index,
        media=tuple(media),
        tool_args=tuple(tool_args),
        returns=returns,
        description=docstring,
    )


def _converter(target: Any, where: str, method: str) -> Any:
    from chatclient.converters import converter_for

    if target is Any or target is inspect.Signature.empty:
        raise _error(where, "the return type must be a concrete type, not Any", method)
    if target is list or target is tuple or target is set:
        raise _error(
            where, f"the return type {target.__name__} needs an item type, e.g. {target.__name__}[str]", method
        )
    try:
        converter = converter_for(target)
        _ = converter.format, getattr(converter, "json_schema", None)  # build the schema now, not per call
    except (TypeError, ValueError) as exc:
        raise _error(where, f"unsupported return type: {exc}", method) from None
    return converter


def return_plan(annotation: Any, *, is_async: bool, where: str, method: str) -> ReturnPlan:
    """How to produce a value of ``annotation``; unsupported types raise ``AiServiceDefinitionError``."""
    from chatclient.models.base import ChatResponse
    from chatclient.request import ChatClientResponse

    tp, _ = unwrap_annotation(annotation)
    if tp is inspect.Signature.empty or tp is str:
        return ReturnPlan(TEXT)
    if tp is None or tp is type(None):
        raise _error(
            where,
            "returns None; declare what the model answers (str, ChatResponse, Result[T], an entity type, Iterator[str])",
            method,
        )
    if tp is ChatResponse:
        return ReturnPlan(CHAT_RESPONSE)
    if tp is ChatClientResponse:
        return ReturnPlan(CLIENT_RESPONSE)
    if tp is Result:
        raise _error(where, "Result needs a value type: Result[str], Result[Invoice], ...", method)
    origin = typing.get_origin(tp)
    if origin is Result:
        (inner,) = typing.get_args(tp)
        inner = unwrap_annotation(inner)[0]
        if inner is str:
            return ReturnPlan(RESULT_TEXT)
        return ReturnPlan(RESULT_ENTITY, _converter(inner, where, method))
    if tp in _SYNC_ITERATORS or tp in _ASYNC_ITERATORS:
        raise _error(where, "a stream needs an item type: Iterator[str] or Iterator[Partial[T]]", method)
    if origin in _SYNC_ITERATORS or origin in _ASYNC_ITERATORS:
        async_stream = origin in _ASYNC_ITERATORS
        if async_stream and is_async:
            raise _error(
                where,
                "is `async def` and returns an async iterator, so callers would have to await it before "
                "iterating; declare it with plain `def ... -> AsyncIterator[...]`",
                method,
            )
        if not async_stream and is_async:
            raise _error(where, "an `async def` method cannot return a sync Iterator; use AsyncIterator", method)
        item, meta = unwrap_annotation(typing.get_args(tp)[0])
        if any(isinstance(m, PartialMarker) for m in meta):
            return ReturnPlan(STREAM_PARTIAL, _converter(item, where, method), async_stream)
        if item is str:
            return ReturnPlan(STREAM_TEXT, None, async_stream)
        raise _error(
            where,
            f"streams yield str (text deltas) or Partial[T] (partial entities), not {getattr(item, '__name__', item)}",
            method,
        )
    return ReturnPlan(ENTITY, _converter(tp, where, method))


__all__ = [
    "BUILTIN_VARIABLES",
    "MISSING",
    "MethodPlan",
    "ReturnPlan",
    "is_media",
    "unwrap_annotation",
    "method_plan",
    "return_plan",
]
