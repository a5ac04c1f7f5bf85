"""Partial entities: successively more complete objects while a JSON answer streams in.

After every text delta the text received so far is parsed with pydantic-core's tolerant parser
(``from_json(..., allow_partial="trailing-strings")``: unfinished strings are kept as far as they
go, unfinished keys, numbers and literals are left out). The parsed value is then shaped into the
target type WITHOUT full validation, because a half-received object is invalid by definition:

- pydantic models are built with ``model_construct``; a field not received yet holds its default,
  or ``None`` when it has none (so ``partial.name`` never raises, it is just ``None`` for now);
- dataclasses are built the same way (fields set directly, ``__post_init__`` not run);
- TypedDicts and ``dict[str, T]`` hold only the keys received so far; lists hold the items so far
  (the last one possibly partial);
- every other value (numbers, enums, dates, literals...) is validated on its own and is ``None``
  until it validates (an enum value ``"RE"`` of ``"RED"`` stays ``None``).

A state equal to the previously yielded one is skipped, and a number at the very end of the text is
not trusted (``12`` may become ``123``), so partial states never go backwards on a number. After
the stream ends, the whole text goes through the converter: that final object is fully validated
(``OutputConversionError`` when it does not convert) and is yielded unless it equals the last
partial. A stream whose deltas were all ``None`` (no content) yields nothing.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic_core import from_json

from chatclient.converters.cleaning import strip_code_fence, strip_thinking
from chatclient.converters.core import (
    EntityOutputConverter,
    ListOutputConverter,
    StructuredOutputConverter,
    pydantic_compatible,
)

T = TypeVar("T")

_NOTHING: Any = object()
_NUMBER_CHARS = frozenset("0123456789.eE+-")
_UNION_TYPES: tuple[Any, ...] = (typing.Union, type(int | None))


# -- tolerant parsing of the text so far ---------------------------------------------------------


def parse_partial_json(text: str) -> Any:
    """The value of the JSON text received so far, or ``_NOTHING`` when there is nothing usable yet."""
    cleaned = strip_thinking(text)
    if cleaned.startswith("<"):
        return _NOTHING  # a reasoning block that has not closed yet
    if cleaned.startswith("`"):
        # While the opening fence or its language tag is still arriving this leaves a word (or
        # nothing), which the parser rejects below: no state until the JSON itself starts.
        cleaned = strip_code_fence(cleaned)
    if not cleaned or _ends_with_number(cleaned):
        return _NOTHING
    try:
        return from_json(cleaned, allow_partial="trailing-strings")
    except (ValueError, TypeError):  # TypeError: pydantic-core cannot encode a lone surrogate as UTF-8
        return _NOTHING


def _ends_with_number(text: str) -> bool:
    """True when the text ends in a number that may still grow (``12`` of ``123``), or a lone ``-``.

    One backwards scan over the trailing run of number characters; the regex it replaces
    (``\\d[\\d.eE+-]*\\s*\\Z`` with ``search``) restarted at every digit, quadratic in long runs.
    """
    end = len(text.rstrip())
    start = end
    while start > 0 and text[start - 1] in _NUMBER_CHARS:
        start -= 1
    run = text[start:end]
    return run.endswith("-") or any("0" <= ch <= "9" for ch in run)


# -- shaping a parsed value into the target type -------------------------------------------------

_LEAF_ADAPTERS: dict[Any, TypeAdapter[Any]] = {}


def _leaf_adapter(tp: Any) -> TypeAdapter[Any] | None:
    try:
        adapter = _LEAF_ADAPTERS.get(tp)
    except TypeError:  # an unhashable type expression: no caching
        return _new_adapter(tp)
    if adapter is None:
        adapter = _new_adapter(tp)
        if adapter is not None:
            _LEAF_ADAPTERS[tp] = adapter
    return adapter


def _new_adapter(tp: Any) -> TypeAdapter[Any] | None:
    try:
        return TypeAdapter(pydantic_compatible(tp))
    except Exception:
        return None


def _leaf(tp: Any, value: Any) -> Any:
    adapter = _leaf_adapter(tp)
    if adapter is None:
        return value
    try:
        return adapter.validate_python(value)
    except ValidationError:
        return None


def build_partial(tp: Any, value: Any) -> Any:
    """Shape ``value`` (parsed partial JSON) into ``tp`` as far as it goes; see the module docstring."""
    if value is None or tp is Any or tp is object:
        return value
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return build_partial(typing.get_args(tp)[0], value)
    if origin in _UNION_TYPES:
        return _build_union(tp, value)
    if isinstance(tp, type):
        if issubclass(tp, BaseModel):
            return _build_model(tp, value) if isinstance(value, Mapping) else None
        if dataclasses.is_dataclass(tp):
            return _build_dataclass(tp, value) if isinstance(value, Mapping) else None
        if typing.is_typeddict(tp):
            return _build_typeddict(tp, value) if isinstance(value, Mapping) else None
    if origin is not None and isinstance(origin, type):
        args = typing.get_args(tp)
        if issubclass(origin, Mapping) and isinstance(value, Mapping):
            item_tp = args[1] if len(args) == 2 else Any
            return {k: build_partial(item_tp, v) for k, v in value.items()}
        if origin in (list, Sequence) and isinstance(value, list):
            item_tp = args[0] if args else Any
            return [build_partial(item_tp, v) for v in value]
    return _leaf(tp, value)


def _build_union(tp: Any, value: Any) -> Any:
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    if len(args) == 1:
        return build_partial(args[0], value)
    whole = _leaf(tp, value)
    if whole is not None:
        return whole
    # No member validates the partial value: shape it into the first member of matching kind.
    for arg in args:
        structured = isinstance(arg, type) and (
            issubclass(arg, BaseModel) or dataclasses.is_dataclass(arg) or typing.is_typeddict(arg)
        )
        if isinstance(value, Mapping) and structured:
            return build_partial(arg, value)
        if isinstance(value, list) and typing.get_origin(arg) in (list, Sequence):
            return build_partial(arg, value)
    return None


def _build_model(tp: type[BaseModel], value: Mapping[str, Any]) -> BaseModel:
    fields: dict[str, Any] = {}
    for name, info in tp.model_fields.items():
        key = info.alias if info.alias is not None and info.alias in value else name
        if key in value:
            fields[name] = build_partial(info.annotation, value[key])
        elif info.is_required():
            fields[name] = None  # not received yet; non-required fields get their default
    return tp.model_construct(**fields)


def _build_dataclass(tp: type[Any], value: Mapping[str, Any]) -> Any:
    hints = typing.get_type_hints(tp)
    obj = object.__new__(tp)
    for f in dataclasses.fields(tp):
        if f.name in value:
            v = build_partial(hints.get(f.name, Any), value[f.name])
        elif f.default is not dataclasses.MISSING:
            v = f.default
        elif f.default_factory is not dataclasses.MISSING:
            v = f.default_factory()
        else:
            v = None
        object.__setattr__(obj, f.name, v)  # works for frozen and slotted dataclasses alike
    return obj


def _build_typeddict(tp: type[Any], value: Mapping[str, Any]) -> dict[str, Any]:
    hints = typing.get_type_hints(tp)
    return {k: build_partial(hints[k], v) for k, v in value.items() if k in hints}


# -- accumulating a stream -----------------------------------------------------------------------


class _Accumulator:
    """Collects deltas; ``feed`` returns a new partial state (or ``_NOTHING``), ``finish`` the final value."""

    def __init__(self, converter: StructuredOutputConverter[Any]) -> None:
        self.converter = converter
        self.parts: list[str] = []
        self.seen_text = False
        self.last: Any = _NOTHING
        self.target: Any = converter.target if isinstance(converter, EntityOutputConverter) else _NOTHING

    def feed(self, delta: str | None) -> Any:
        if delta is None:
            return _NOTHING
        self.seen_text = True
        if not delta:
            return _NOTHING
        self.parts.append(delta)
        state = self._partial("".join(self.parts))
        return self._changed(state)

    def _partial(self, text: str) -> Any:
        if isinstance(self.converter, ListOutputConverter):
            items = self.converter.convert(text)[:-1]  # the last item may still be growing
            return items if items else _NOTHING
        if self.target is _NOTHING:
            return _NOTHING  # a custom converter: only its final value is known
        value = parse_partial_json(text)
        if value is _NOTHING or value is None:
            return _NOTHING
        state = build_partial(self.target, value)
        return _NOTHING if state is None else state  # None is no partial T; only a final None counts

    def _changed(self, state: Any) -> Any:
        if state is _NOTHING or _equal(state, self.last):
            return _NOTHING
        self.last = state
        return state

    def finish(self) -> Any:
        if not self.seen_text:
            return _NOTHING
        return self._changed(self.converter.convert("".join(self.parts)))


def _equal(a: Any, b: Any) -> bool:
    if b is _NOTHING:
        return False
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:
        return False


def stream_entities(converter: StructuredOutputConverter[T], texts: Iterable[str | None]) -> Iterator[T]:
    """Partial entities from streamed text deltas, then the final validated entity."""
    acc = _Accumulator(converter)
    for delta in texts:
        state = acc.feed(delta)
        if state is not _NOTHING:
            yield state
    final = acc.finish()
    if final is not _NOTHING:
        yield final


async def astream_entities(
    converter: StructuredOutputConverter[T], texts: AsyncIterator[str | None]
) -> AsyncIterator[T]:
    """Async twin of ``stream_entities``."""
    acc = _Accumulator(converter)
    async for delta in texts:
        state = acc.feed(delta)
        if state is not _NOTHING:
            yield state
    final = acc.finish()
    if final is not _NOTHING:
        yield final


__all__ = ["astream_entities", "build_partial", "parse_partial_json", "stream_entities"]
