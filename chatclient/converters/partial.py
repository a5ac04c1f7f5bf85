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
import itertools
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
from chatclient.converters.incremental import _NONE, Frame, IncrementalJSON, PartialString

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


_PLAIN_SCALARS = frozenset((str, int, float, bool))


def build_partial(tp: Any, value: Any) -> Any:
    """Shape ``value`` (parsed partial JSON) into ``tp`` as far as it goes; see the module docstring."""
    if value is None or tp is Any or tp is object:
        return value
    if type(value) is tp and tp in _PLAIN_SCALARS:
        return value  # what validating a str as str (an int as int, ...) gives: the value itself
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
    types, fields_plan = _plan(tp)[1]
    return _model_from(tp, fields_plan, {k: build_partial(types[k], v) for k, v in value.items() if k in types})


def _model_from(
    tp: type[BaseModel], fields_plan: Sequence[tuple[str, str | None, bool]], got: Mapping[str, Any]
) -> BaseModel:
    """The model from shaped values by JSON key (its alias when that was sent, else its name)."""
    fields: dict[str, Any] = {}
    complete = True  # every field is in ``fields`` (received, or required and None for now)
    for name, alias, required in fields_plan:
        key = alias if alias is not None and alias in got else name
        if key in got:
            fields[name] = got[key]
        elif required:
            fields[name] = None  # not received yet; non-required fields get their default
        else:
            complete = False
    if complete and _plain_model(tp):
        # What model_construct does when every field is given and the model has no post-init,
        # validation aliases, extra or root: built here directly (this runs for every delta).
        model = _new_model(tp)
        _set(model, "__dict__", fields)
        _set(model, "__pydantic_fields_set__", set(fields))
        _set(model, "__pydantic_extra__", None)
        _set(model, "__pydantic_private__", None)
        return model
    return tp.model_construct(**fields)


_set = object.__setattr__
_PLAIN: dict[type, bool] = {}


def _new_model(tp: type[BaseModel]) -> BaseModel:
    return tp.__new__(tp)


def _plain_model(tp: type[BaseModel]) -> bool:
    """Whether ``model_construct`` of ``tp`` with every field given only fills ``__dict__`` (cached)."""
    plain = _PLAIN.get(tp)
    if plain is None:
        plain = _PLAIN[tp] = (
            not tp.__pydantic_root_model__
            and not tp.__pydantic_post_init__
            and tp.model_config.get("extra") != "allow"
            and all(f.validation_alias is None for f in tp.model_fields.values())
        )
    return plain


def _build_dataclass(tp: type[Any], value: Mapping[str, Any]) -> Any:
    types = _plan(tp)[1]
    return _dataclass_from(tp, {k: build_partial(types[k], v) for k, v in value.items() if k in types})


def _dataclass_from(tp: type[Any], got: Mapping[str, Any]) -> Any:
    """The dataclass from shaped field values; fields not received hold their default, else None."""
    obj = object.__new__(tp)
    for f in dataclasses.fields(tp):
        if f.name in got:
            v = got[f.name]
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
    """Collects deltas; ``feed`` returns a new partial state (or ``_NOTHING``), ``finish`` the final value.

    Entities are read with the incremental parser (linear in the answer). Two cases use the
    re-parsing path instead, which gives the same states at a cost that grows with the text: the
    start of the answer until it is clear where the JSON begins (a reasoning block or a code fence
    still arriving), and text that is not a prefix of valid JSON (the parser gives up, the
    tolerant re-parse still finds what it can).
    """

    def __init__(self, converter: StructuredOutputConverter[Any]) -> None:
        self.converter = converter
        self.parts: list[str] = []
        self.seen_text = False
        self.last: Any = _NOTHING
        self.target: Any = converter.target if isinstance(converter, EntityOutputConverter) else _NOTHING
        self.reader: _JsonReader | None = None
        self.reparse = False  # the incremental parser gave up: re-parse from now on
        self.waiting_for_tag_end = False

    def feed(self, delta: str | None) -> Any:
        if delta is None:
            return _NOTHING
        self.seen_text = True
        if not delta:
            return _NOTHING
        self.parts.append(delta)
        if isinstance(self.converter, ListOutputConverter) or self.target is _NOTHING:
            return self._changed(self._partial("".join(self.parts)))
        if self.reader is None and not self.reparse:
            return self._changed(self._start(delta))
        if self.reader is not None and not self.reparse:
            state = self.reader.feed(delta)
            if not self.reader.failed:
                return self._changed(state)
            self.reparse = True
            self.reader = None
        return self._changed(self._partial("".join(self.parts)))

    def _start(self, delta: str) -> Any:
        """Before the JSON starts: re-parse (short), and hand over to the incremental reader when it does."""
        if self.waiting_for_tag_end and ">" not in delta:
            return _NOTHING  # an open reasoning block cannot close without a ">"
        text = "".join(self.parts)
        start = _json_start(text)
        if start is None:
            self.waiting_for_tag_end = strip_thinking(text).startswith("<")
            return self._partial(text)
        offset, fenced = start
        self.reader = _JsonReader(self.target, fenced)
        state = self.reader.feed(text[offset:])
        if self.reader.failed:
            self.reparse = True
            self.reader = None
            return self._partial(text)
        if state is _REPARSE:
            return self._partial(text)
        return state

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
        if state is _REPARSE:
            state = self._partial("".join(self.parts))
        if state is _NOTHING or _equal(state, self.last):
            return _NOTHING
        self.last = state
        return state

    def finish(self) -> Any:
        if not self.seen_text:
            return _NOTHING
        return self._changed(self.converter.convert("".join(self.parts)))


_REPARSE: Any = object()  # "this one state needs the re-parsing path" (a closing fence eating into the text)


def _json_start(text: str) -> tuple[int, bool] | None:
    """Where the JSON of ``text`` starts, and whether it is inside a code fence; None while unclear.

    Mirrors ``parse_partial_json``'s cleaning: leading reasoning blocks and whitespace go, and an
    opening fence with its language tag goes. While a reasoning block, the fence or its tag is still
    arriving, the answer is None and the caller re-parses.
    """
    s = strip_thinking(text)
    if not s or s[0] == "<":
        return None
    base = len(text) - len(s)
    if s[0] != "`":
        return base, False
    if not s.startswith("```"):
        return None
    rest_start = base + 3
    end = rest_start
    while end < len(text) and (text[end].isalnum() or text[end] in "+-._"):
        end += 1
    if end == len(text):
        return None  # the language tag may still grow
    if end > rest_start and not text[end].isspace():
        return None  # "```json{": not a fence with a tag; the re-parsing path decides
    k = end
    while k < len(text) and text[k].isspace():
        k += 1
    if k == len(text):
        return None
    return k, True


class _JsonReader:
    """The incremental parser, the trailing-number rule and the shaping, for one answer.

    In a fence, the text that counts is the body without trailing whitespace and without one
    closing fence (as ``strip_code_fence`` cuts it). Characters that may still turn out to be that
    trailing part are held back from the parser until more text shows what they are.
    """

    def __init__(self, target: Any, fenced: bool) -> None:
        self.parser = IncrementalJSON()
        self.target = target
        self.fenced = fenced
        self.unfed = ""
        self.fed_tail = ""  # the last three characters fed (fences only)
        self.fed_len = 0
        # the trailing-number rule of ``_ends_with_number``, tracked character by character
        self.run_has_digit = False
        self.run_ends_dash = False
        self.after_space = False
        self.shaper = _Shaper()
        self.shaped_at = -1  # the parser's change count when the view was last shaped

    @property
    def failed(self) -> bool:
        return self.parser.failed

    def feed(self, text: str) -> Any:
        if not self.fenced:
            self._feed(text)
        else:
            self.unfed += text
            u = self.unfed
            j = len(u.rstrip())
            view_end = self.fed_len + j
            last3 = (self.fed_tail + u[:j])[-3:]
            if last3 == "```":
                view_end -= 3
                if view_end >= self.fed_len:
                    view_end = self.fed_len + len(u[: view_end - self.fed_len].rstrip())
            if view_end < self.fed_len:
                return _REPARSE  # the closing fence reaches into text already read: rare, re-parse
            take = view_end - self.fed_len
            if take:
                self._feed(u[:take])
                self.unfed = u[take:]
        if self.parser.failed:
            return _NOTHING
        if self.run_has_digit or self.run_ends_dash:
            return _NOTHING  # a number at the end may still grow
        changes = self.parser.changes
        if changes == self.shaped_at:
            return _NOTHING  # the view is the one shaped last time: the same state again
        self.shaped_at = changes
        node = self.parser.view_node()
        if node is _NONE or node is None:
            return _NOTHING
        state = self.shaper.shape(self.target, node)
        return _NOTHING if state is None else state

    def _feed(self, text: str) -> None:
        self.parser.feed(text)
        self.fed_len += len(text)
        if self.fenced:
            self.fed_tail = (self.fed_tail + text)[-3:]
        self._track_number_run(text)

    def _track_number_run(self, text: str) -> None:
        # Only the end of the text matters: find the last character that is neither whitespace nor a
        # number character, then replay the short tail after it.
        i = len(text)
        while i > 0 and (text[i - 1] in _NUMBER_CHARS or text[i - 1].isspace()):
            i -= 1
        if i > 0:
            self.run_has_digit = self.run_ends_dash = self.after_space = False
        for ch in text[i:]:
            if ch.isspace():
                self.after_space = True
                continue
            if self.after_space:
                self.run_has_digit = self.run_ends_dash = False
                self.after_space = False
            self.run_has_digit = self.run_has_digit or "0" <= ch <= "9"
            self.run_ends_dash = ch == "-"


class _Shaper:
    """``build_partial`` over the parser's open frames, reusing the shaped form of complete children."""

    def shape(self, tp: Any, node: Any) -> Any:
        if isinstance(node, PartialString):
            return build_partial(tp, node.text)
        if isinstance(node, Frame):
            return self._frame(tp, node)
        return build_partial(tp, node)

    def _frame(self, tp: Any, frame: Frame) -> Any:
        kind, info = _plan(tp)
        if kind == _LIST:
            return self._list(frame, tp, info) if not frame.is_dict else _leaf(tp, _materialize(frame))
        if kind == _MODEL:
            return self._model(tp, frame, info) if frame.is_dict else None
        if kind == _KEYED:  # TypedDict (known keys) or Mapping (every key, one item type)
            if not frame.is_dict:
                return None if info[1] else _leaf(tp, _materialize(frame))
            return self._items(frame, tp, info[0], info[2])
        if kind == _DATACLASS:
            return self._dataclass(tp, frame, info) if frame.is_dict else None
        if kind == _INNER:
            return self._frame(info, frame)
        if kind == _ANY:
            return _materialize(frame)
        if kind == _UNION:
            return build_partial(tp, _materialize(frame))  # the member depends on the whole value
        return _leaf(tp, _materialize(frame))

    def _list(self, frame: Frame, tp: Any, item_tp: Any) -> list[Any]:
        done = _cache(frame, tp, list)
        items = frame.container
        for i in range(len(done), len(items)):
            done.append(build_partial(item_tp, items[i]))
        out = list(done)
        if frame.child is not None:
            out.append(self.shape(item_tp, frame.child))
        return out

    def _items(self, frame: Frame, tp: Any, types: Mapping[str, Any] | None, default: Any) -> dict[str, Any]:
        """Shaped values by key, in JSON order: keys in ``types`` (all keys with ``default`` when None)."""
        done: _ShapedItems = _cache(frame, tp, _ShapedItems)
        container = frame.container
        if len(container) != done.seen:  # new complete members: shape those only
            shaped = done.out
            for key in itertools.islice(container, done.seen, None):
                item_tp = default if types is None else types.get(key, _SKIP)
                if item_tp is not _SKIP:
                    shaped[key] = build_partial(item_tp, container[key])
            done.seen = len(container)
        out = done.out.copy()
        key = frame.key
        if key is not None and frame.child is not None:
            item_tp = default if types is None else types.get(key, _SKIP)
            if item_tp is not _SKIP:
                out[key] = self.shape(item_tp, frame.child)
        return out

    def _model(self, tp: type[BaseModel], frame: Frame, info: tuple[Any, ...]) -> BaseModel:
        types, fields_plan = info
        return _model_from(tp, fields_plan, self._items(frame, tp, types, None))

    def _dataclass(self, tp: type[Any], frame: Frame, types: Mapping[str, Any]) -> Any:
        return _dataclass_from(tp, self._items(frame, tp, types, None))


class _ShapedItems:
    """The shaped complete members of one open object, for one target type: the first ``seen`` keys
    of its container (the parser empties the frame's cache when a repeated key replaces a value)."""

    __slots__ = ("out", "seen")

    def __init__(self) -> None:
        self.out: dict[str, Any] = {}
        self.seen = 0


_SKIP: Any = object()
_ANY, _INNER, _UNION, _MODEL, _DATACLASS, _KEYED, _LIST, _LEAF = range(8)
_PLANS: dict[Any, tuple[int, Any]] = {}


def _plan(tp: Any) -> tuple[int, Any]:
    """How ``build_partial`` treats a container value of type ``tp`` (cached per type)."""
    try:
        found = _PLANS.get(tp)
    except TypeError:  # an unhashable type expression
        return _make_plan(tp)
    if found is None:
        found = _PLANS[tp] = _make_plan(tp)
    return found


def _make_plan(tp: Any) -> tuple[int, Any]:
    if tp is Any or tp is object:
        return _ANY, None
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _INNER, typing.get_args(tp)[0]
    if origin in _UNION_TYPES:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return (_INNER, args[0]) if len(args) == 1 else (_UNION, None)
    if isinstance(tp, type):
        if issubclass(tp, BaseModel):
            types = {name: info.annotation for name, info in tp.model_fields.items()}
            for info in tp.model_fields.values():
                if info.alias is not None:
                    types[info.alias] = info.annotation
            plan = [(name, info.alias, info.is_required()) for name, info in tp.model_fields.items()]
            return _MODEL, (types, plan)
        if dataclasses.is_dataclass(tp):
            hints = _hints(tp)
            return _DATACLASS, {f.name: hints.get(f.name, Any) for f in dataclasses.fields(tp)}
        if typing.is_typeddict(tp):
            return _KEYED, (_hints(tp), True, None)
    if origin is not None and isinstance(origin, type):
        type_args = typing.get_args(tp)
        if issubclass(origin, Mapping):
            return _KEYED, (None, False, type_args[1] if len(type_args) == 2 else Any)
        if origin in (list, Sequence):
            return _LIST, type_args[0] if type_args else Any
    return _LEAF, None


def _cache(frame: Frame, tp: Any, kind: Any) -> Any:
    try:
        found = frame.cache.get(tp)
        if found is None:
            found = frame.cache[tp] = kind()
        return found
    except TypeError:  # an unhashable type expression: nothing is cached
        return kind()


def _materialize(node: Any) -> Any:
    """The plain JSON value of a node (shallow copies of the open containers only)."""
    if isinstance(node, PartialString):
        return node.text
    if not isinstance(node, Frame):
        return node
    if node.is_dict:
        out: dict[str, Any] = dict(node.container)
        if node.key is not None and node.child is not None:
            out[node.key] = _materialize(node.child)
        return out
    items = list(node.container)
    if node.child is not None:
        items.append(_materialize(node.child))
    return items


_HINTS: dict[Any, dict[str, Any]] = {}


def _hints(tp: Any) -> dict[str, Any]:
    found = _HINTS.get(tp)
    if found is None:
        found = _HINTS[tp] = typing.get_type_hints(tp)
    return found


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
