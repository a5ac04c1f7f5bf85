"""Templates: sandboxed jinja2, every missing variable reported, custom delimiters, no-op renderer."""

from __future__ import annotations

import pytest

from chatclient import ChatClient, JinjaTemplateRenderer, NoOpTemplateRenderer
from chatclient.errors import TemplateError
from chatclient.templates import render
from chatclient.testing import ScriptedChatModel


def test_renders_variables() -> None:
    assert render("Hello {{ name }}!", {"name": "Ada"}) == "Hello Ada!"


def test_every_missing_variable_is_listed() -> None:
    with pytest.raises(TemplateError) as info:
        render("{{ greeting }} {{ name }} {{ place }}", {"greeting": "hi"})
    assert info.value.missing == ("name", "place")
    assert "name" in str(info.value) and "place" in str(info.value)


def test_extra_variables_are_fine() -> None:
    assert render("{{ a }}", {"a": 1, "b": 2}) == "1"


def test_sandbox_refuses_python_internals() -> None:
    with pytest.raises(TemplateError):
        render("{{ ''.__class__.__mro__ }}", {"x": 1})
    with pytest.raises(TemplateError):
        render("{{ x.__class__.__subclasses__() }}", {"x": 1})


def test_syntax_error_is_a_template_error() -> None:
    with pytest.raises(TemplateError, match="not valid"):
        render("Hello {{ name", {"name": "x"})


def test_loops_and_conditions() -> None:
    out = render("{% for i in items %}{{ i }}{% if not loop.last %}, {% endif %}{% endfor %}", {"items": ["a", "b"]})
    assert out == "a, b"


def test_custom_delimiters() -> None:
    angle = JinjaTemplateRenderer(variable_start="<", variable_end=">")
    assert angle.render("Hi <name>, {{ not a var }}", {"name": "Bob"}) == "Hi Bob, {{ not a var }}"
    dollar = JinjaTemplateRenderer(variable_start="$", variable_end="$")
    assert dollar.render("$a$ and $b$", {"a": 1, "b": 2}) == "1 and 2"
    with pytest.raises(TemplateError) as info:
        dollar.render("$a$ $missing$", {"a": 1})
    assert info.value.missing == ("missing",)


def test_noop_renderer_returns_template() -> None:
    assert NoOpTemplateRenderer().render("{{ x }}", {"x": 1}) == "{{ x }}"


def test_empty_template_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        render("", {})


def test_text_is_rendered_only_with_params() -> None:
    model = ScriptedChatModel(["a", "b"])
    client = ChatClient.create(model)
    client.prompt().user("literal {{ braces }} and {x}").call().content()
    assert model.last_prompt.user_message.text == "literal {{ braces }} and {x}"
    client.prompt().system("Be {{ tone }}", params={"tone": "kind"}).user(
        "hi {{ n }}", params={"n": 3}
    ).call().content()
    assert model.last_prompt.system_message.text == "Be kind"
    assert model.last_prompt.user_message.text == "hi 3"


def test_missing_param_fails_before_the_model_is_called() -> None:
    model = ScriptedChatModel(["never"])
    spec = ChatClient.create(model).prompt().user("{{ a }} {{ b }}", params={"a": 1})
    with pytest.raises(TemplateError) as info:
        spec.call().content()
    assert info.value.missing == ("b",)
    assert model.prompts == []


def test_client_level_renderer_is_used() -> None:
    model = ScriptedChatModel(["ok"])
    client = (
        ChatClient.builder(model)
        .default_template_renderer(JinjaTemplateRenderer(variable_start="<", variable_end=">"))
        .build()
    )
    client.prompt().user("Hi <who>", params={"who": "you"}).call().content()
    assert model.last_prompt.user_message.text == "Hi you"
