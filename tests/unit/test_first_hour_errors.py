"""Careless first-hour mistakes fail where they are made, with a message that says what to do."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from advisors import ReReadingAdvisor, SimpleLoggerAdvisor
from chatclient import ChatClient, ChatOptions
from chatclient.errors import TemplateError
from chatclient.testing import ScriptedChatModel
from chatclient.tools import tool


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def plain_function(city: str) -> str:
    return city


def spec() -> Any:
    return ChatClient.create(ScriptedChatModel(["ok"] * 3)).prompt("q")


# -- the model -----------------------------------------------------------------------------------


@pytest.mark.parametrize("factory", [ChatClient.create, ChatClient.builder])
def test_a_model_name_instead_of_a_model_says_how_to_build_one(factory: Any) -> None:
    with pytest.raises(TypeError) as err:
        factory("gpt-4o-mini")
    message = str(err.value)
    assert "not the string 'gpt-4o-mini'" in message
    assert "OpenAIChatModel('gpt-4o-mini')" in message and "from chatclient.models.openai import" in message


def test_a_model_class_or_a_non_model_is_rejected() -> None:
    with pytest.raises(TypeError, match=r"pass ScriptedChatModel\(\.\.\.\)"):
        ChatClient.create(ScriptedChatModel)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="needs a chat model"):
        ChatClient.builder(object())  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        ChatClient.create(None)  # type: ignore[arg-type]


# -- advisors ------------------------------------------------------------------------------------


def test_an_advisor_class_instead_of_an_instance_says_to_call_it() -> None:
    with pytest.raises(TypeError, match=r"pass ReReadingAdvisor\(\), not the class ReReadingAdvisor"):
        spec().advisors(ReReadingAdvisor)
    with pytest.raises(TypeError, match=r"pass SimpleLoggerAdvisor\(\)"):
        ChatClient.builder(ScriptedChatModel(["ok"])).default_advisors(SimpleLoggerAdvisor)


@pytest.mark.parametrize("bad", [lambda r: r, get_weather, 42, "SimpleLoggerAdvisor"])
def test_a_non_advisor_is_rejected_at_the_call_that_received_it(bad: Any) -> None:
    with pytest.raises(TypeError, match="not an advisor"):
        spec().advisors(bad)


def test_advisors_given_as_one_list_are_accepted() -> None:
    a, b = ReReadingAdvisor(), SimpleLoggerAdvisor()
    s = spec().advisors([a, b])
    model = ScriptedChatModel(["ok"])
    ChatClient.create(model).prompt("why").advisors([a]).call().content()
    assert "Read the question again" in model.last_prompt.user_message.text
    assert s.call().content() == "ok"


# -- tools ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bad", "expected"),
    [
        ("get_weather", "not the string 'get_weather': pass the function itself"),
        (42, "not int"),
        ({"name": "get_weather"}, "not dict"),
        (plain_function, "decorate it with @tool"),
        (object(), "has no @tool methods"),
    ],
)
def test_something_that_is_not_a_tool_fails_at_tools(bad: Any, expected: str) -> None:
    with pytest.raises(TypeError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        spec().tools(bad)
    with pytest.raises(TypeError):
        ChatClient.builder(ScriptedChatModel(["ok"])).default_tools(bad)


class Calendar:
    @tool
    def today(self) -> str:
        """Today's date."""
        return "2026-01-01"


def test_real_tools_are_still_accepted() -> None:
    from chatclient.tools import FunctionToolCallback

    callback = FunctionToolCallback(plain_function, name="echo_city", description="Echo a city.")
    request = spec().tools(get_weather, [Calendar()], callback).to_request()
    assert [t.name for t in request.prompt.tools] == ["get_weather", "today", "echo_city"]


# -- options -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "error", "expected"),
    [
        ({"temperature": -1}, ValueError, "temperature=-1) is out of range: it must be >= 0"),
        ({"top_p": 1.5}, ValueError, "top_p=1.5) is out of range: it must be between 0 and 1"),
        ({"top_p": -0.1}, ValueError, "between 0 and 1"),
        ({"max_tokens": 0}, ValueError, "max_tokens=0) must be a positive int"),
        ({"max_tokens": -5}, ValueError, "positive int"),
        ({"max_tokens": 10.5}, TypeError, "must be an int"),
        ({"top_k": 0}, ValueError, "top_k=0) must be a positive int"),
        ({"temperature": "hot"}, TypeError, "must be a number"),
        ({"temperature": math.nan}, ValueError, "finite"),
        ({"frequency_penalty": math.inf}, ValueError, "finite"),
        ({"seed": "42"}, TypeError, "seed"),
        ({"model": ""}, ValueError, "non-empty model name"),
        ({"stop": [1]}, TypeError, "list of non-empty strings"),
        ({"tool_choice": 3}, TypeError, "tool_choice"),
        ({"parallel_tool_calls": "yes"}, TypeError, "True or False"),
        ({"extra": ["a"]}, TypeError, "must be a dict"),
    ],
)
def test_out_of_range_or_mistyped_options_fail_at_construction(
    kwargs: dict[str, Any], error: type[Exception], expected: str
) -> None:
    with pytest.raises(error) as err:
        ChatOptions(**kwargs)
    assert expected in str(err.value)


def test_a_bare_stop_string_is_one_stop_sequence() -> None:
    assert ChatOptions(stop="END").stop == ("END",)


def test_copy_and_merge_validate_too() -> None:
    with pytest.raises(ValueError):
        ChatOptions(temperature=0.5).copy(temperature=-0.5)
    with pytest.raises(ValueError):
        ChatOptions(max_tokens=10).copy(max_tokens=0)


def test_a_dict_instead_of_chat_options_says_how_to_build_them() -> None:
    with pytest.raises(TypeError, match=r"ChatOptions\(\*\*your_dict\)"):
        spec().options({"temperature": 0.2})  # type: ignore[arg-type]


@settings(max_examples=60, deadline=None)
@given(
    temperature=st.floats(min_value=0, max_value=2),
    top_p=st.floats(min_value=0, max_value=1),
    max_tokens=st.integers(min_value=1, max_value=1_000_000),
)
def test_every_in_range_option_is_accepted(temperature: float, top_p: float, max_tokens: int) -> None:
    options = ChatOptions(temperature=temperature, top_p=top_p, max_tokens=max_tokens)
    assert ChatOptions().merge(options) == options


# -- templates: explicit params mean "render" ------------------------------------------------------


def test_default_system_with_empty_params_reports_the_missing_variable() -> None:
    model = ScriptedChatModel(["ok"])
    client = ChatClient.builder(model).default_system("You are {{ voice }}.", params={}).build()
    with pytest.raises(TemplateError) as err:
        client.prompt("hi").call().content()
    assert err.value.missing == ("voice",)
    assert "system text" in str(err.value) and "params={'voice': ...}" in str(err.value)
    assert model.remaining == 1  # the model was not called
    # Giving the variable later (per request) completes the template.
    client.prompt("hi").system(params={"voice": "a pirate"}).call().content()
    assert model.last_prompt.system_message.text == "You are a pirate."


def test_system_and_user_with_empty_params_render() -> None:
    with pytest.raises(TemplateError) as err:
        spec().system("Be {{ tone }}.", params={}).to_request()
    assert err.value.missing == ("tone",)
    with pytest.raises(TemplateError) as err:
        spec().user("Hi {{ name }} from {{ city }}", params={}).to_request()
    assert err.value.missing == ("city", "name")
    with pytest.raises(TemplateError):
        ChatClient.builder(ScriptedChatModel(["ok"])).default_user("Hi {{ name }}", params={}).build().prompt().call()
    # With empty params and nothing to fill, the text renders as is.
    assert spec().system("Plain.", params={}).to_request().prompt.system_message.text == "Plain."


def test_without_params_braces_are_still_sent_verbatim() -> None:
    request = (
        ChatClient.builder(ScriptedChatModel(["ok"]))
        .default_system("Reply as JSON like {{ 'a': 1 }} and {{ voice }}.")
        .build()
        .prompt()
        .user("What is {{ 2 + 2 }}?")
        .to_request()
    )
    assert request.prompt.system_message.text == "Reply as JSON like {{ 'a': 1 }} and {{ voice }}."
    assert request.prompt.user_message.text == "What is {{ 2 + 2 }}?"


def test_the_render_flag_survives_build_mutate_and_copy() -> None:
    client = ChatClient.builder(ScriptedChatModel(["ok"])).default_system("You are {{ voice }}.", params={}).build()
    with pytest.raises(TemplateError):
        client.mutate().build().prompt("hi").to_request()
    with pytest.raises(TemplateError):
        client.prompt("hi").mutate().build().prompt("again").to_request()
