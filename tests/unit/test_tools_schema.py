"""@tool, input schemas from signatures, FunctionToolCallback, result conversion, resolve_tools."""

from __future__ import annotations

import dataclasses
import enum
import json
import threading
from collections.abc import Callable
from typing import Annotated, Any, Literal, Optional

import pytest
from pydantic import BaseModel, Field

from chatclient.errors import ToolExecutionError
from chatclient.tools import (
    DONE,
    FunctionToolCallback,
    ToolArgumentsError,
    ToolCallback,
    ToolContext,
    ToolDefinition,
    ToolResultConversionError,
    parse_docstring,
    resolve_tools,
    tool,
)


class Unit(enum.Enum):
    CELSIUS = "c"
    FAHRENHEIT = "f"


class Location(BaseModel):
    city: str
    country: str | None = None


def schema_of(fn: Any) -> dict[str, Any]:
    return dict(resolve_tools([fn])[0].definition.input_schema)


# -- docstrings ------------------------------------------------------------------------------------


def test_google_docstring_gives_description_and_parameter_texts() -> None:
    parsed = parse_docstring(
        """Look up the weather.

        Uses the national service.

        Args:
            city (str): City name,
                spelled in English.
            days: How many days.

        Returns:
            A forecast.
        """
    )
    assert parsed.description == "Look up the weather.\n\nUses the national service."
    assert parsed.params == {"city": "City name, spelled in English.", "days": "How many days."}


def test_numpy_docstring_gives_parameter_texts() -> None:
    parsed = parse_docstring(
        """Convert a temperature.

        Parameters
        ----------
        value : float
            The temperature.
        lo, hi : int
            Bounds.

        Returns
        -------
        float
        """
    )
    assert parsed.description == "Convert a temperature."
    assert parsed.params == {"value": "The temperature.", "lo": "Bounds.", "hi": "Bounds."}


def test_rest_docstring_fields() -> None:
    parsed = parse_docstring("Do it.\n\n:param x: the x\n    value\n:returns: nothing")
    assert parsed.description == "Do it."
    assert parsed.params == {"x": "the x value"}


# -- schema from the signature ---------------------------------------------------------------------


def test_schema_types_required_defaults_and_descriptions() -> None:
    @tool
    def forecast(
        location: Location,
        unit: Unit,
        days: list[int],
        mode: Literal["brief", "full"] = "brief",
        note: Optional[str] = None,  # noqa: UP045 - Optional spelling on purpose
        label: str | None = None,
        *,
        tz: Annotated[str, Field(description="IANA time zone")] = "UTC",
    ) -> str:
        """Weather forecast.

        Args:
            location: Where to look.
            unit: Temperature unit.
            days: Day offsets.
            tz: Ignored because Field wins.
        """
        return "ok"

    schema = schema_of(forecast)
    assert schema["type"] == "object"
    assert schema["additionalProperties"] is False
    assert schema["required"] == ["location", "unit", "days"]
    props = schema["properties"]
    assert list(props) == ["location", "unit", "days", "mode", "note", "label", "tz"]
    assert props["location"]["description"] == "Where to look."
    assert props["days"] == {"type": "array", "items": {"type": "integer"}, "description": "Day offsets."}
    assert props["mode"]["enum"] == ["brief", "full"] and props["mode"]["default"] == "brief"
    assert props["tz"]["description"] == "IANA time zone"
    assert {"type": "null"} in props["note"]["anyOf"]
    # nested model and enum are described (via $defs), without pydantic's noisy titles
    assert schema["$defs"]["Location"]["required"] == ["city"]
    assert schema["$defs"]["Unit"]["enum"] == ["c", "f"]
    assert "title" not in json.dumps(schema)
    assert resolve_tools([forecast])[0].definition.description == "Weather forecast."


def test_optional_without_default_is_still_required() -> None:
    @tool
    def f(x: int | None) -> str:
        return str(x)

    assert schema_of(f)["required"] == ["x"]
    cb = resolve_tools([f])[0]
    assert cb.call('{"x": null}') == "None"
    with pytest.raises(ToolArgumentsError, match="x: Field required"):
        cb.call("{}")


def test_tool_context_parameter_is_hidden_and_received() -> None:
    seen: list[ToolContext] = []

    @tool
    def whoami(greeting: str, ctx: ToolContext) -> str:
        seen.append(ctx)
        return f"{greeting} {ctx['user']}"

    schema = schema_of(whoami)
    assert list(schema["properties"]) == ["greeting"]
    assert "ctx" not in json.dumps(schema)
    cb = resolve_tools([whoami])[0]
    assert isinstance(cb, FunctionToolCallback)
    assert cb.call('{"greeting": "hi"}', ToolContext({"user": "ann"})) == "hi ann"
    assert cb.call('{"greeting": "yo"}', {"user": "bob"}) == "yo bob"  # a plain mapping is accepted
    assert isinstance(seen[0], ToolContext)


def test_tool_without_parameters_accepts_empty_arguments() -> None:
    @tool
    def now() -> str:
        """The time."""
        return "noon"

    cb = resolve_tools([now])[0]
    assert cb.definition.input_schema["properties"] == {}
    assert cb.call("") == "noon"
    assert cb.call("{}") == "noon"


def test_parameter_names_reserved_by_pydantic_still_work() -> None:
    @tool
    def lookup(schema: str, model_config: int) -> str:
        return f"{schema}:{model_config}"

    cb = resolve_tools([lookup])[0]
    assert list(cb.definition.input_schema["properties"]) == ["schema", "model_config"]
    assert cb.call('{"schema": "s", "model_config": 2}') == "s:2"


def test_description_falls_back_to_name_words_and_explicit_wins() -> None:
    @tool
    def get_current_time() -> str:
        return "x"

    @tool(name="clock", description="Tells the time", return_direct=True)
    def other() -> str:
        """Docstring loses."""
        return "x"

    a, b = resolve_tools([get_current_time, other])
    assert a.definition == ToolDefinition("get_current_time", "get current time", a.definition.input_schema)
    assert (b.definition.name, b.definition.description, b.return_direct) == ("clock", "Tells the time", True)
    assert a.return_direct is False
    assert other() == "x"  # decorated functions stay ordinary functions


# -- bad input at decoration / registration time ---------------------------------------------------


def test_inexpressible_parameter_type_fails_at_decoration_naming_it() -> None:
    with pytest.raises(TypeError, match=r"tool 'bad'.*parameter 'lock'.*JSON schema"):

        @tool
        def bad(lock: threading.Lock) -> str:  # type: ignore[valid-type]
            return "x"


def test_missing_annotation_fails_at_decoration_naming_the_parameter() -> None:
    # Issue 27.3: an untyped parameter was advertised as {} ("anything"); the model then sent
    # {"a": {"b": 2}} and the tool's own TypeError went back to it.
    with pytest.raises(TypeError) as info:

        @tool
        def add(a, b: int) -> int:  # type: ignore[no-untyped-def]
            return a + b  # type: ignore[no-any-return]

    message = str(info.value)
    assert "tool 'add'" in message and "'a'" in message and "'b'" not in message
    assert "`a: int`" in message and ": Any" in message

    with pytest.raises(TypeError, match=r"parameters 'x', 'y'"):

        class Calc:
            @tool
            def mul(self, x, y):  # type: ignore[no-untyped-def]  # self needs no annotation
                return x * y


def test_explicit_any_is_accepted_and_a_lambda_callback_warns() -> None:
    @tool
    def echo(value: Any) -> str:
        return str(value)

    assert schema_of(echo)["properties"] == {"value": {}}
    with pytest.warns(UserWarning, match=r"tool 'add'.*'a', 'b'.*no type annotation"):
        cb = FunctionToolCallback(lambda a, b: a + b, name="add", description="Add")
    assert cb.call('{"a": 2, "b": 3}') == "5"


def test_callable_parameter_type_fails_at_decoration() -> None:
    with pytest.raises(TypeError, match="parameter 'fn'"):

        @tool
        def bad(fn: Callable[[int], int]) -> str:
            return "x"


def test_var_args_fail_at_decoration() -> None:
    with pytest.raises(TypeError, match=r"\*\*kw"):

        @tool
        def bad(a: int, **kw: Any) -> str:
            return "x"


def test_invalid_tool_name_is_rejected() -> None:
    with pytest.raises(ValueError, match="invalid tool name"):
        tool(name="has space")(lambda: 1)
    with pytest.raises(ValueError, match="invalid tool name"):
        FunctionToolCallback(lambda x: x)  # a lambda has no usable name


def test_duplicate_names_raise_naming_the_duplicate() -> None:
    @tool
    def echo(x: str) -> str:
        return x

    @tool(name="echo")
    def echo2(x: str) -> str:
        return x

    with pytest.raises(ValueError, match=r"duplicate tool name.*echo"):
        resolve_tools([echo, echo2])


def test_undecorated_function_and_empty_object_are_rejected() -> None:
    def plain(x: int) -> int:
        return x

    with pytest.raises(TypeError, match="decorate it with @tool"):
        resolve_tools([plain])
    with pytest.raises(TypeError, match="has no @tool methods"):
        resolve_tools([object()])
    with pytest.raises(ValueError, match="None"):
        resolve_tools([None])


# -- methods and objects ---------------------------------------------------------------------------


class Calculator:
    def __init__(self, offset: int) -> None:
        self.offset = offset

    @tool
    def add(self, a: int, b: int) -> int:
        """Add two numbers and the offset."""
        return a + b + self.offset

    @tool(name="negate")
    def neg(self, a: int) -> int:
        return -a

    @staticmethod
    @tool
    def double(a: int) -> int:
        return 2 * a

    @classmethod
    @tool
    def kind(cls) -> str:
        return cls.__name__

    def helper(self) -> None:  # not a tool
        pass

    @property
    def not_evaluated(self) -> int:
        raise AssertionError("properties must not be evaluated while collecting tools")


class LoudCalculator(Calculator):
    def add(self, a: int, b: int) -> int:  # override without @tool: still the 'add' tool
        return 100 * (a + b)


def test_object_contributes_all_decorated_methods_bound_to_it() -> None:
    callbacks = {cb.definition.name: cb for cb in resolve_tools([Calculator(10)])}
    assert set(callbacks) == {"add", "negate", "double", "kind"}
    assert "self" not in callbacks["add"].definition.input_schema["properties"]
    assert callbacks["add"].call('{"a": 1, "b": 2}') == "13"
    assert callbacks["negate"].call('{"a": 4}') == "-4"
    assert callbacks["double"].call('{"a": 4}') == "8"
    assert callbacks["kind"].call("{}") == "Calculator"


def test_bound_method_alone_and_subclass_override() -> None:
    (cb,) = resolve_tools([Calculator(1).add])
    assert cb.call('{"a": 1, "b": 1}') == "3"
    loud = {cb.definition.name: cb for cb in resolve_tools([LoudCalculator(0)])}
    assert loud["add"].call('{"a": 1, "b": 1}') == "200"
    assert loud["kind"].call("{}") == "LoudCalculator"


def test_unbound_method_and_class_with_instance_tools_are_rejected() -> None:
    with pytest.raises(TypeError, match="is a method"):
        resolve_tools([Calculator.add])
    with pytest.raises(TypeError, match="pass an instance"):
        resolve_tools([Calculator])


# -- FunctionToolCallback --------------------------------------------------------------------------


class WeatherRequest(BaseModel):
    city: str = Field(description="City name")
    unit: Unit = Unit.CELSIUS


@dataclasses.dataclass
class Point:
    x: int
    y: int


def test_function_callback_with_pydantic_input_type_and_context() -> None:
    def weather(req: WeatherRequest, ctx: ToolContext) -> dict[str, Any]:
        return {"city": req.city, "unit": req.unit.value, "tenant": ctx.get("tenant")}

    cb = FunctionToolCallback(weather, name="current_weather", description="Weather", input_type=WeatherRequest)
    assert isinstance(cb, ToolCallback)
    schema = cb.definition.input_schema
    assert schema["required"] == ["city"] and schema["additionalProperties"] is False
    assert schema["properties"]["city"]["description"] == "City name"
    out = json.loads(cb.call('{"city": "Oslo"}', {"tenant": "t1"}))
    assert out == {"city": "Oslo", "unit": "c", "tenant": "t1"}
    with pytest.raises(ToolArgumentsError, match="unexpected zip"):
        cb.call('{"city": "Oslo", "zip": 1}')


def test_function_callback_with_dataclass_input_type() -> None:
    cb = FunctionToolCallback(lambda p: p.x * p.y, name="area", description="Area", input_type=Point)
    assert cb.definition.input_schema["required"] == ["x", "y"]
    assert cb.call('{"x": 3, "y": 4}') == "12"
    with pytest.raises(ToolArgumentsError, match="y"):
        cb.call('{"x": 3}')


def test_input_type_must_be_an_object() -> None:
    with pytest.raises(TypeError, match="JSON object"):
        FunctionToolCallback(lambda n: n, name="n", input_type=int)


def test_callable_object_and_signature_schema() -> None:
    class Multiplier:
        def __call__(self, a: float, b: float = 2.0) -> float:
            return a * b

    cb = FunctionToolCallback(Multiplier(), name="mul", description="Multiply")
    assert cb.definition.input_schema["required"] == ["a"]
    assert cb.call('{"a": 1.5}') == "3.0"


async def test_async_function_callback_in_both_paths() -> None:
    async def slow_upper(text: str) -> str:
        return text.upper()

    cb = FunctionToolCallback(slow_upper, description="Upper-case")
    assert cb.definition.name == "slow_upper"
    assert await cb.acall('{"text": "a"}') == "A"
    assert cb.call('{"text": "b"}') == "B"  # sync path runs the coroutine on a private loop


def test_tool_exception_is_wrapped_naming_the_tool() -> None:
    @tool
    def boom(x: int) -> str:
        raise RuntimeError("disk full")

    cb = resolve_tools([boom])[0]
    with pytest.raises(ToolExecutionError, match=r"tool 'boom' failed: RuntimeError: disk full") as info:
        cb.call('{"x": 1}')
    assert info.value.tool_name == "boom"
    assert isinstance(info.value.__cause__, RuntimeError)


# -- result conversion ------------------------------------------------------------------------------


def test_default_result_conversion() -> None:
    values: dict[str, Any] = {
        "text": "plain text",
        "none": None,
        "model": Location(city="Rome"),
        "dc": Point(1, 2),
        "mapping": {"a": [1, 2]},
        "number": 4.5,
        "flag": True,
        "enum": Unit.FAHRENHEIT,
    }

    def make(name: str) -> FunctionToolCallback:
        return FunctionToolCallback(lambda: values[name], name=name, description=name)

    assert make("text").call("{}") == "plain text"
    assert make("none").call("{}") == DONE == "Done"
    assert json.loads(make("model").call("{}")) == {"city": "Rome", "country": None}
    assert json.loads(make("dc").call("{}")) == {"x": 1, "y": 2}
    assert make("mapping").call("{}") == '{"a":[1,2]}'
    assert make("number").call("{}") == "4.5"
    assert make("flag").call("{}") == "true"
    assert make("enum").call("{}") == "f"


def test_non_serialisable_result_is_a_clear_conversion_error() -> None:
    @tool
    def leaky() -> Any:
        return {"lock": threading.Lock()}

    cb = resolve_tools([leaky])[0]
    with pytest.raises(ToolResultConversionError, match=r"tool 'leaky' returned a dict that cannot be converted"):
        cb.call("{}")


def test_custom_result_converter() -> None:
    @tool(result_converter=lambda value: f"<{value}>")
    def shout(x: int) -> int:
        return x

    assert resolve_tools([shout])[0].call('{"x": 7}') == "<7>"
