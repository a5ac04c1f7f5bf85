"""Input schemas for tools, built with pydantic from a function signature or an input type.

A tool's arguments arrive as JSON text from the model. The input binder validates them against
the same pydantic model that produced the schema the model saw, so what the model is told and what
the tool accepts never drift apart.
"""

from __future__ import annotations

import inspect
import json
import types
import typing
import warnings
from collections.abc import Callable, Mapping
from typing import Annotated, Any

from chatclient import jsonsafe
from chatclient.tools.context import ToolContext
from chatclient.tools.docstrings import parse_docstring

# Schema keys whose values are data, not sub-schemas: never strip "title" inside them.
_DATA_KEYS = {"default", "const", "enum", "examples"}
_NAMED_SCHEMA_MAPS = {"properties", "$defs", "definitions", "patternProperties"}


class ArgumentsError(ValueError):
    """The model's arguments are not valid JSON or do not match the tool's input schema."""


def clean_schema(node: Any) -> Any:
    """Drop pydantic's generated ``title``s (noise for the model) without touching data values."""
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key == "title" and isinstance(value, str):
                continue
            if key in _NAMED_SCHEMA_MAPS and isinstance(value, dict):
                out[key] = {name: clean_schema(sub) for name, sub in value.items()}
            elif key in _DATA_KEYS:
                out[key] = value
            else:
                out[key] = clean_schema(value)
        return out
    if isinstance(node, list):
        return [clean_schema(v) for v in node]
    return node


def is_tool_context(annotation: Any) -> bool:
    """True for ``ToolContext``, ``ToolContext | None`` and ``Annotated[ToolContext, ...]``."""
    if annotation is ToolContext:
        return True
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return is_tool_context(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return len(args) == 1 and is_tool_context(args[0])
    return False


def _loads(arguments: str | None) -> dict[str, Any]:
    text = (arguments or "").strip() or "{}"  # models send "" for tools without parameters
    try:
        value = jsonsafe.loads(text)
    except jsonsafe.JSONDepthError as exc:
        raise ArgumentsError(f"arguments are not usable: {exc}") from None
    except json.JSONDecodeError as exc:
        raise ArgumentsError(
            f"arguments are not valid JSON ({exc.msg} at position {exc.pos}): {text[:200]!r}"
        ) from None
    if not isinstance(value, dict):
        raise ArgumentsError(f"arguments must be a JSON object, got {type(value).__name__}: {text[:200]!r}")
    return value


def _describe_validation_error(exc: Any) -> str:
    problems = []
    for err in exc.errors(include_url=False):
        loc = ".".join(str(p) for p in err.get("loc", ())) or "(arguments)"
        problems.append(f"{loc}: {err.get('msg')}")
    return "invalid arguments: " + "; ".join(problems)


def _check_expressible(tool_name: str, param: str, annotation: Any) -> None:
    from pydantic import TypeAdapter
    from pydantic.errors import PydanticUserError

    try:
        TypeAdapter(annotation).json_schema()
    except (PydanticUserError, TypeError, ValueError) as exc:
        shown = getattr(annotation, "__name__", None) or repr(annotation)
        raise TypeError(
            f"tool {tool_name!r}: parameter {param!r} has type {shown}, which cannot be described as a JSON schema "
            f"for the model ({type(exc).__name__}: {str(exc).splitlines()[0]}). Use JSON-friendly types (str, int, "
            "float, bool, list, dict, enums, Literal, dataclasses, pydantic models)."
        ) from exc


def _unannotated(tool_name: str, fn: Callable[..., Any], names: list[str]) -> str:
    return (
        f"tool {tool_name!r}: parameter{'s' if len(names) > 1 else ''} {', '.join(map(repr, names))} "
        f"of {getattr(fn, '__qualname__', repr(fn))} {'have' if len(names) > 1 else 'has'} no type annotation, "
        "so the model would be told it may send any JSON value there (schema {}) and the call would be "
        f"checked against nothing. Annotate each parameter with the type the tool expects, e.g. `{names[0]}: int`; "
        "write `: Any` where any JSON value is really accepted (a lambda cannot carry annotations: wrap a typed "
        "function, or pass input_type=)."
    )


class SignatureInput:
    """Input of a function tool: one JSON property per parameter (``ToolContext`` ones hidden).

    A parameter without a type annotation would be advertised as "any value" (``{}``):
    ``require_hints`` (what ``@tool`` passes) makes that a ``TypeError`` naming the parameter;
    otherwise (a ``FunctionToolCallback`` over a lambda, which cannot carry annotations) it is a
    ``UserWarning``.
    """

    def __init__(
        self, fn: Callable[..., Any], tool_name: str, *, skip_first: bool = False, require_hints: bool = False
    ) -> None:
        from pydantic import ConfigDict, Field, create_model

        try:
            # eval_str resolves "from __future__ import annotations" strings and works for callable
            # objects and partials, unlike typing.get_type_hints.
            signature = inspect.signature(fn, eval_str=True)
        except (NameError, TypeError, ValueError) as exc:
            raise TypeError(f"tool {tool_name!r}: cannot read the type hints of {fn!r}: {exc}") from exc
        docs = parse_docstring(inspect.getdoc(fn)).params
        params = list(signature.parameters.values())
        if skip_first and params:
            params = params[1:]  # self / cls of a method decorated inside its class
        self.context_params: list[str] = []
        self.positional: list[str] = []  # positional-only parameters, in order
        self.field_to_param: dict[str, str] = {}
        fields: dict[str, Any] = {}
        unannotated = [
            p.name
            for p in params
            if p.annotation is inspect.Parameter.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        ]
        if unannotated:
            if require_hints:
                raise TypeError(_unannotated(tool_name, fn, unannotated))
            warnings.warn(_unannotated(tool_name, fn, unannotated), UserWarning, stacklevel=3)
        for index, p in enumerate(params):
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise TypeError(
                    f"tool {tool_name!r}: *{p.name} / **{p.name} parameters cannot be described to the model; "
                    "declare each argument explicitly"
                )
            annotation = Any if p.annotation is inspect.Parameter.empty else p.annotation
            if is_tool_context(annotation):
                self.context_params.append(p.name)
                continue
            _check_expressible(tool_name, p.name, annotation)
            default = p.default if p.default is not inspect.Parameter.empty else ...
            if p.name in docs and not _has_description(annotation, default):
                annotation = Annotated[annotation, Field(description=docs[p.name])]
            # pydantic reserves some names (leading underscore, BaseModel attributes): use an alias.
            key = p.name if _safe_field_name(p.name) else f"field_{index}"
            if key != p.name:
                annotation = Annotated[annotation, Field(alias=p.name)]
            fields[key] = (annotation, default)  # a FieldInfo default keeps its own default/description
            self.field_to_param[key] = p.name
            if p.kind is p.POSITIONAL_ONLY:
                self.positional.append(key)
        self.model = create_model(  # type: ignore[call-overload]
            f"{tool_name}_arguments",
            __config__=ConfigDict(extra="forbid", populate_by_name=True, arbitrary_types_allowed=False),
            **fields,
        )
        schema = clean_schema(self.model.model_json_schema(by_alias=True))
        schema.setdefault("properties", {})
        schema["additionalProperties"] = False
        self.json_schema: dict[str, Any] = schema

    def bind(self, arguments: str | None, context: ToolContext) -> tuple[list[Any], dict[str, Any]]:
        """Validate ``arguments`` and return the positional and keyword arguments of the call."""
        from pydantic import ValidationError

        data = _loads(arguments)
        try:
            parsed = self.model.model_validate(data)
        except ValidationError as exc:
            raise ArgumentsError(_describe_validation_error(exc)) from None
        args = [getattr(parsed, key) for key in self.positional]
        kwargs = {
            self.field_to_param[key]: getattr(parsed, key) for key in self.field_to_param if key not in self.positional
        }
        for name in self.context_params:
            kwargs[name] = context
        return args, kwargs


class TypeInput:
    """Input of a callback that takes one object (a pydantic model or dataclass) built from the arguments."""

    def __init__(self, input_type: Any, tool_name: str, *, pass_context: bool) -> None:
        from pydantic import TypeAdapter

        _check_expressible(tool_name, "input_type", input_type)
        self.adapter: TypeAdapter[Any] = TypeAdapter(input_type)
        schema = clean_schema(self.adapter.json_schema())
        if schema.get("type") != "object":
            raise TypeError(
                f"tool {tool_name!r}: input_type must describe a JSON object (a pydantic model or dataclass), "
                f"got a schema of type {schema.get('type')!r}"
            )
        schema.setdefault("properties", {})
        schema["additionalProperties"] = False
        self.json_schema: dict[str, Any] = schema
        self.pass_context = pass_context

    def bind(self, arguments: str | None, context: ToolContext) -> tuple[list[Any], dict[str, Any]]:
        from pydantic import ValidationError

        data = _loads(arguments)
        allowed = set(self.json_schema["properties"])
        extra = sorted(set(data) - allowed)
        if extra:
            raise ArgumentsError(
                f"invalid arguments: unexpected {', '.join(extra)}; allowed: {', '.join(sorted(allowed))}"
            )
        try:
            value = self.adapter.validate_python(data)
        except ValidationError as exc:
            raise ArgumentsError(_describe_validation_error(exc)) from None
        return ([value, context] if self.pass_context else [value]), {}


def _has_description(annotation: Any, default: Any) -> bool:
    from pydantic.fields import FieldInfo

    if isinstance(default, FieldInfo) and default.description:
        return True
    if typing.get_origin(annotation) is Annotated:
        return any(isinstance(m, FieldInfo) and m.description for m in typing.get_args(annotation)[1:])
    return False


def _safe_field_name(name: str) -> bool:
    from pydantic import BaseModel

    return not name.startswith("_") and not hasattr(BaseModel, name)


def describe(fn: Callable[..., Any], explicit: str | None, name: str) -> str:
    """The tool description: explicit text, else the docstring's description, else the name in words."""
    if explicit:
        return explicit
    parsed = parse_docstring(inspect.getdoc(fn))
    return parsed.description or name.replace("_", " ").strip()


def schema_properties(schema: Mapping[str, Any]) -> list[str]:
    """Property names of an object schema (for messages)."""
    return list(schema.get("properties", {}))
