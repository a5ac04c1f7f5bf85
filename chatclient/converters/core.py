"""Structured-output converters: format instructions for the model, and text -> typed value.

    converter = EntityOutputConverter(Person)
    converter.format        # instructions appended to the user message (JSON only, then the schema)
    converter.json_schema   # draft 2020-12 schema (also what native structured output sends)
    converter.convert('{"name": "Ada", "age": 36}')  # -> Person(name='Ada', age=36)

Any type pydantic's ``TypeAdapter`` understands works as a target: pydantic models, dataclasses,
TypedDicts, enums, ``list[T]``, ``dict[str, T]``, ``Literal``, unions and primitives.
"""

from __future__ import annotations

import functools
import json
import sys
import threading
import types
import typing
from typing import Any, Generic, Protocol, TypeVar, overload, runtime_checkable

from pydantic import TypeAdapter, ValidationError
from pydantic.errors import PydanticSchemaGenerationError, PydanticUserError

from chatclient.converters.cleaning import clean_text, first_json_value, strip_thinking
from chatclient.converters.schema import strict_schema
from chatclient.errors import OutputConversionError

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)

_MAX_SHOWN = 500  # characters of model output quoted in an error message


@runtime_checkable
class StructuredOutputConverter(Protocol[T_co]):
    """Turns model text into a ``T``; ``format`` tells the model how to answer ("" for none).

    ``json_schema`` is the schema for native structured output, or None when the converter has no
    schema (then native mode falls back to the ``format`` instructions).
    """

    @property
    def format(self) -> str: ...

    @property
    def json_schema(self) -> dict[str, Any] | None: ...

    def convert(self, text: str) -> T_co: ...


# -- naming and errors ---------------------------------------------------------------------------


def type_name(target: Any) -> str:
    """A short readable name for a type or type expression: ``list[Person]``, ``Literal['a', 'b']``."""
    origin = typing.get_origin(target)
    if origin is not None:
        args = typing.get_args(target)
        if origin is typing.Literal:
            return f"Literal[{', '.join(repr(a) for a in args)}]"
        if origin is typing.Union or type(target).__name__ == "UnionType":
            return " | ".join(type_name(a) for a in args)
        if origin is typing.Annotated:
            return type_name(args[0])
        return f"{type_name(origin)}[{', '.join(type_name(a) for a in args)}]"
    if target is type(None):
        return "None"
    if isinstance(target, type):
        return target.__qualname__
    return repr(target)


def shown(text: str | None, limit: int = _MAX_SHOWN) -> str:
    """``text`` quoted for an error message, cut to ``limit`` characters."""
    if text is None:
        return "None"
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}... ({len(text) - limit} more characters)"


def conversion_error(target: Any, text: str | None, reason: str) -> OutputConversionError:
    """An ``OutputConversionError`` naming the target type and showing (truncated) text."""
    return OutputConversionError(
        f"Could not convert the model output to {type_name(target)}: {reason}. Output was: {shown(text)}",
        text=text,
        target=target,
    )


def describe_validation_error(error: ValidationError, limit: int = 5) -> str:
    """The first ``limit`` problems of a pydantic error on one line: ``at $.age: Input should be ...``."""
    items = error.errors(include_url=False)
    parts = [f"at {json_path(e['loc'])}: {e['msg']}" for e in items[:limit]]
    if len(items) > limit:
        parts.append(f"and {len(items) - limit} more")
    return "; ".join(parts)


def json_path(loc: typing.Iterable[Any]) -> str:
    """A JSONPath-like location (``$.people[2].name``) for an error location."""
    path = "$"
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


SUPPORTED_TARGETS = (
    "pydantic models, dataclasses, TypedDicts, enums, list[X] / dict[str, X] / tuples of those, "
    "Literal[...], unions, primitives (str, int, float, bool, datetime, ...), or a "
    "StructuredOutputConverter"
)


def unsupported_target_message(target: Any, error: BaseException | None = None) -> str:
    """Why ``target`` cannot be an ``entity()`` type, naming what can (not pydantic's internal text)."""
    name = type_name(target)
    if isinstance(target, type) and not _is_supported_shape(target):
        advice = f"turn {name} into a @dataclass or a pydantic BaseModel, or pass a converter"
        what = f"{name} is a plain class, so its fields are unknown"
    else:
        advice = "use one of those types for it, or pass a converter"
        detail = str(error).splitlines()[0] if error is not None and str(error) else "no schema can be built for it"
        what = f"{name} contains a type pydantic cannot describe ({detail.strip()[:160]})"
    return f"Cannot convert model output to {name}: {what}. entity() supports {SUPPORTED_TARGETS}; {advice}."


def _is_supported_shape(target: type) -> bool:
    import dataclasses
    import enum

    from pydantic import BaseModel

    return (
        dataclasses.is_dataclass(target)
        or issubclass(target, BaseModel | enum.Enum)
        or typing.is_typeddict(target)
        or target.__module__ == "builtins"
    )


# -- explaining conversion failures --------------------------------------------------------------


def explain_conversion(
    converter: StructuredOutputConverter[Any],
    response: Any,
    *,
    max_tokens: int | None = None,
) -> Any:
    """``converter.convert`` of a ``ChatResponse``'s text, with errors that say WHY the text was bad.

    - a refusal (``AssistantMessage.refusal``) raises ``RefusalError`` with the model's words;
    - no content at all gives ``None`` (as ``entity()`` promises);
    - an answer cut off by the token limit (finish reason ``length``) says so, with ``max_tokens``
      when known, instead of a JSON syntax error;
    - with ``StructuredOutputValidationAdvisor``, how many model calls were made and why it stopped.
    """
    from chatclient.errors import RefusalError

    target = getattr(converter, "target", converter)
    generation = getattr(response, "result", None)
    if generation is None:
        return None
    refusal = getattr(generation.output, "refusal", None)
    if refusal:
        raise RefusalError(refusal, target=target)
    text = generation.output.text
    if text is None:
        return None
    try:
        return converter.convert(text)
    except OutputConversionError as exc:
        raise explained_error(exc, response, target, max_tokens=max_tokens) from exc


def explained_error(
    error: OutputConversionError, response: Any, target: Any, *, max_tokens: int | None = None
) -> OutputConversionError:
    """``error`` re-worded with what the response tells about the failure (cut off, attempts made)."""
    from chatclient.errors import RefusalError

    if isinstance(error, RefusalError):
        return error
    generation = getattr(response, "result", None)
    finish = getattr(generation, "finish_reason", None) if generation is not None else None
    text = error.text
    if finish == "length":
        limit = f" (max_tokens={max_tokens})" if max_tokens is not None else ""
        state = "an empty answer" if not (text or "").strip() else "an incomplete answer"
        loop = repeated_tail(text or "")
        advice = (
            f"it was repeating {shown(loop, 40)} over and over when it was cut, so a higher max_tokens would "
            "only repeat more: bound the field in the schema (maxLength, maxItems), describe the fields, or use "
            "a larger model"
            if loop is not None
            else "raise max_tokens in ChatOptions or ask for less"
        )
        message = (
            f"Could not convert the model output to {type_name(target)}: the model hit its token limit{limit} "
            f"(finish reason 'length') and returned {state}; {advice}. "
            f"Output was: {shown(text, _SHORT_EXCERPT)}"
        )
    elif text is not None and not text.strip():
        message = (
            f"Could not convert the model output to {type_name(target)}: the model returned an empty answer "
            f"(finish reason {finish!r}); a small model may not follow the format, try a larger model or "
            f"a structured-output mode the server enforces. Output was: {shown(text)}"
        )
    else:
        message = str(error)
    extra = getattr(getattr(response, "metadata", None), "extra", None) or {}
    attempts = extra.get("validation_attempts")
    if attempts:
        message += f" StructuredOutputValidationAdvisor made {attempts} model call{'s' if attempts != 1 else ''}"
        stopped = extra.get("validation_stopped")
        message += f" and stopped early: {stopped}." if stopped else "."
    return OutputConversionError(message, text=text, target=target)


_SHORT_EXCERPT = 200
_TAIL_CHARS = 600


def repeated_tail(text: str, *, min_repeats: int = 4, max_unit: int = 40) -> str | None:
    """The unit a text ends by repeating (``";1"`` for ``"...;1;1;1;1;1"``), or None.

    A model that loops inside a JSON string or list until its token limit leaves such a tail;
    naming it tells the user that more tokens would not have helped. Looks at the last 600
    characters only, with plain string comparisons (no backtracking regex)."""
    tail = text[-_TAIL_CHARS:]
    for size in range(1, max_unit + 1):
        if size * min_repeats > len(tail):
            break
        unit = tail[-size:]
        if not unit.strip():
            continue
        if all(tail[-size * (k + 1) : len(tail) - size * k] == unit for k in range(1, min_repeats)):
            return unit
    return None


# -- typing.TypedDict on Python 3.11 ---------------------------------------------------------------


def pydantic_compatible(tp: Any) -> Any:
    """``tp`` with every ``typing.TypedDict`` replaced by an equivalent ``typing_extensions`` one.

    pydantic refuses ``typing.TypedDict`` before Python 3.12 (it lacks the data pydantic needs), yet
    that is the TypedDict users write; rebuilding it keeps ``entity(MyTypedDict)`` working. Other
    type expressions come back unchanged (the same object).
    """
    if sys.version_info >= (3, 12):
        return tp
    return _compat(tp)


_IN_PROGRESS: set[int] = set()


@functools.lru_cache(maxsize=256)
def _compat_typeddict(tp: Any) -> Any:
    import typing_extensions

    if id(tp) in _IN_PROGRESS:
        raise TypeError(
            f"the typing.TypedDict {tp.__qualname__} refers to itself; on Python 3.11 pydantic needs "
            "typing_extensions.TypedDict for that, so declare it with typing_extensions"
        )
    _IN_PROGRESS.add(id(tp))
    try:
        return _rebuild_typeddict(tp, typing_extensions)
    finally:
        _IN_PROGRESS.discard(id(tp))


def _rebuild_typeddict(tp: Any, typing_extensions: Any) -> Any:
    hints = typing.get_type_hints(tp, include_extras=True)
    required = getattr(tp, "__required_keys__", frozenset(hints))
    fields = {
        name: (typing_extensions.Required if name in required else typing_extensions.NotRequired)[_compat(hint)]
        for name, hint in hints.items()
    }
    new = typing_extensions.TypedDict(tp.__name__, fields)  # type: ignore[operator]
    new.__module__ = tp.__module__
    new.__qualname__ = tp.__qualname__
    new.__doc__ = tp.__doc__
    return new


def _compat(tp: Any) -> Any:
    if typing.is_typeddict(tp) and type(tp).__module__ == "typing":
        return _compat_typeddict(tp)
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is None or not args or origin is typing.Literal:
        return tp
    if origin is typing.Annotated:
        inner = _compat(args[0])
        return tp if inner is args[0] else typing.Annotated[(inner, *tp.__metadata__)]
    new_args = tuple(_compat(a) for a in args)
    if all(n is a for n, a in zip(new_args, args, strict=True)):
        return tp
    if origin is typing.Union or origin is types.UnionType:
        return typing.Union[new_args]  # noqa: UP007 - built from a runtime tuple
    return origin[new_args]


# -- the converters ------------------------------------------------------------------------------

_INSTRUCTIONS = (
    "Answer with one JSON value and nothing else: no explanation or other text before or after it, "
    "and no markdown code fences around it.\n"
    "The JSON must be valid (RFC 8259) and must match this JSON Schema:\n"
)


class EntityOutputConverter(Generic[T]):
    """Converts JSON model output to ``target`` with a pydantic ``TypeAdapter``.

    ``convert`` cleans the text (whitespace, leading ``<think>``-style blocks, a surrounding code
    fence, remarks after the JSON value) and validates it in pydantic's JSON mode. A ``str`` target
    also accepts plain text that is not a JSON string. Failures raise ``OutputConversionError``.

    >>> EntityOutputConverter(list[int]).convert("```json\\n[1, 2]\\n```")
    [1, 2]
    """

    __slots__ = ("_format", "_lock", "_schema", "target", "type_adapter")

    @overload
    def __init__(self: EntityOutputConverter[T], target: type[T]) -> None: ...
    @overload
    def __init__(self: EntityOutputConverter[Any], target: Any) -> None: ...

    def __init__(self, target: Any) -> None:
        if target is None:
            raise ValueError("type cannot be None")
        self.target = target
        try:
            self.type_adapter: TypeAdapter[T] = TypeAdapter(pydantic_compatible(target))
        except (PydanticSchemaGenerationError, PydanticUserError, TypeError) as exc:
            raise TypeError(unsupported_target_message(target, exc)) from exc
        self._schema: dict[str, Any] | None = None
        self._format: str | None = None
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        return {"target": self.target}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["target"])  # type: ignore[misc]

    @property
    def json_schema(self) -> dict[str, Any]:
        """The strict draft 2020-12 schema of the target (computed once)."""
        if self._schema is None:
            with self._lock:
                if self._schema is None:
                    try:
                        raw = self.type_adapter.json_schema()
                    except PydanticUserError as exc:
                        raise TypeError(unsupported_target_message(self.target, exc)) from exc
                    self._schema = strict_schema(raw)
        return self._schema

    @property
    def format(self) -> str:
        """Instructions for the model: JSON only, no prose, no fences, then the schema."""
        if self._format is None:
            self._format = _INSTRUCTIONS + json.dumps(self.json_schema, indent=2, ensure_ascii=False)
        return self._format

    def convert(self, text: str) -> T:
        """Parse and validate ``text``; raise ``OutputConversionError`` naming the target if it does not fit."""
        if text is None:
            raise conversion_error(self.target, None, "the model returned no content")
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        cleaned = clean_text(text)
        if not cleaned:
            raise conversion_error(self.target, text, "the output is empty")
        adapter = self.type_adapter
        try:
            return adapter.validate_json(cleaned)  # the common case: clean JSON, one parse
        except ValidationError as exc:
            member = enum_member(self.target, cleaned)
            if member is not None:
                return member  # type: ignore[no-any-return]  # a bare member name: LEGAL, "legal", Legal.
            if not _is_json_syntax_error(exc):
                if self.target is str:
                    return cleaned  # type: ignore[return-value]  # e.g. the model answered 42 for a str
                raise conversion_error(self.target, text, describe_validation_error(exc)) from exc
            first_error = exc
        value = first_json_value(cleaned)
        value_error: ValidationError | None = None
        if value is not None and len(value) < len(cleaned):
            # A complete JSON value followed by a remark: convert the value alone.
            try:
                return adapter.validate_json(value)
            except ValidationError as exc:
                value_error = exc
        if self.target is str:
            return cleaned  # type: ignore[return-value]  # plain text answer for a str target
        if cleaned[0] not in '{["':
            # A bare word for a scalar type (an enum member, a date): accepted in lax python mode.
            try:
                return adapter.validate_python(cleaned)
            except ValidationError:
                pass
        if value_error is not None:
            raise conversion_error(self.target, text, describe_validation_error(value_error)) from value_error
        raise conversion_error(self.target, text, _syntax_reason(first_error)) from first_error

    def __repr__(self) -> str:
        return f"EntityOutputConverter({type_name(self.target)})"


_ENUM_TRIM = " \t\r\n\"'`.!"
_MAX_ENUM_ANSWER = 200


def enum_member(target: Any, text: str) -> Any:
    """The member of the ``Enum`` ``target`` that ``text`` names, or ``None``.

    Users and small models answer an enum question with the member's name or value, bare or as a
    JSON string, in any case, with stray quotes, spaces or a final period: ``LEGAL``, ``"Legal"``,
    `` legal.``. A value match wins over a name match (as the JSON string would mean the value).
    """
    import enum

    if not (isinstance(target, type) and issubclass(target, enum.Enum)) or len(text) > _MAX_ENUM_ANSWER:
        return None
    word = text.strip(_ENUM_TRIM).casefold()
    if not word:
        return None
    members = list(target)
    for member in members:
        if str(member.value).casefold() == word:
            return member
    for member in members:
        if member.name.casefold() == word:
            return member
    return None


def _is_json_syntax_error(exc: ValidationError) -> bool:
    errors = exc.errors(include_url=False)
    return len(errors) == 1 and errors[0]["type"] == "json_invalid"


def _syntax_reason(exc: ValidationError) -> str:
    msg = exc.errors(include_url=False)[0]["msg"]
    return f"the output is not valid JSON ({msg.removeprefix('Invalid JSON: ')})"


class MapOutputConverter(EntityOutputConverter[dict[str, Any]]):
    """Converts a JSON object answer to ``dict[str, Any]``.

    It has no ``json_schema`` (an open object is no useful schema, and strict native modes reject
    it), so native structured output falls back to the instructions.
    """

    __slots__ = ()

    _MAP_INSTRUCTIONS = (
        "Answer with one JSON object and nothing else: no explanation or other text before or after it, "
        "and no markdown code fences around it. The JSON must be valid (RFC 8259)."
    )

    def __init__(self) -> None:
        super().__init__(dict[str, Any])

    @property
    def json_schema(self) -> None:  # type: ignore[override]
        return None

    @property
    def format(self) -> str:
        return self._MAP_INSTRUCTIONS

    def __repr__(self) -> str:
        return "MapOutputConverter()"


class ListOutputConverter:
    """Converts a comma-separated answer (``a, b, c``) to a list of trimmed strings.

    As in the reference: split on every comma, trim each item, keep empty items (``"a, , c"`` ->
    ``["a", "", "c"]``); an empty answer is ``[]``. Leading reasoning blocks are removed first.
    """

    __slots__ = ()

    @property
    def format(self) -> str:
        return (
            "Answer with the values as one list of comma-separated values and nothing else, "
            "no text before or after the list.\nFor example: foo, bar, baz"
        )

    @property
    def json_schema(self) -> None:
        return None

    def convert(self, text: str) -> list[str]:
        if text is None:
            raise conversion_error(list[str], None, "the model returned no content")
        cleaned = strip_thinking(text)
        if not cleaned:
            return []
        return [item.strip() for item in cleaned.split(",")]

    def __repr__(self) -> str:
        return "ListOutputConverter()"


# -- choosing a converter ------------------------------------------------------------------------

_CACHE: dict[Any, StructuredOutputConverter[Any]] = {}
_CACHE_LIMIT = 512
_CACHE_LOCK = threading.Lock()


def _is_converter(target: Any) -> bool:
    return not isinstance(target, type) and callable(getattr(target, "convert", None)) and hasattr(target, "format")


def _new_converter(target: Any) -> StructuredOutputConverter[Any]:
    if target is dict or target == dict[str, Any]:
        return MapOutputConverter()
    if target is list:
        return ListOutputConverter()
    return EntityOutputConverter(target)


def _value_not_type_message(target: Any) -> str:
    kind = type(target).__name__
    if isinstance(target, dict):
        return (
            "entity() takes a type, not a dict value: describe the answer with a pydantic model "
            "(class Answer(BaseModel): name: str), a dataclass or a TypedDict and pass the class, e.g. "
            ".entity(Answer); use .entity(dict) for any JSON object. A JSON schema dict is not accepted: "
            "write the model class it describes"
        )
    return (
        f"entity() takes a type such as a pydantic model, a dataclass, list[int] or an Enum, not a {kind} value "
        f"({shown(target)}): pass the class itself, e.g. .entity({kind}) or .entity(MyModel)"
    )


def converter_for(target: Any) -> StructuredOutputConverter[Any]:
    """The converter for ``target``: a converter is used as is, ``dict`` gets ``MapOutputConverter``,
    bare ``list`` gets ``ListOutputConverter``, any other type an ``EntityOutputConverter``.

    Converters are cached per target type, so the schema and validator are built once.
    """
    if target is None:
        raise ValueError("type cannot be None")
    if _is_converter(target):
        return target  # type: ignore[no-any-return]
    if isinstance(target, (dict, list, tuple, set, frozenset, str, bytes, int, float)):
        raise TypeError(_value_not_type_message(target))
    try:
        cached = _CACHE.get(target)
    except TypeError:  # an unhashable type expression: build one each time
        return _new_converter(target)
    if cached is not None:
        return cached
    converter = _new_converter(target)
    with _CACHE_LOCK:
        if len(_CACHE) >= _CACHE_LIMIT:
            _CACHE.clear()
        _CACHE[target] = converter
    return converter


__all__ = [
    "EntityOutputConverter",
    "ListOutputConverter",
    "MapOutputConverter",
    "StructuredOutputConverter",
    "conversion_error",
    "converter_for",
    "describe_validation_error",
    "explain_conversion",
    "explained_error",
    "json_path",
    "shown",
    "type_name",
    "unsupported_target_message",
]
