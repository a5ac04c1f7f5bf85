"""The chat template choice with the real bundled models: the GGUF's own, else the family's, never Llama 2's.

Issue: the bundled Gemma base model's GGUF stores no template, llama-cpp-python silently fell back
to Llama 2's ``[INST] <<SYS>>`` format, and plain chat answered with that markup. Each model here is
loaded by name the way a user would, and asked plain questions with its default options.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from pydantic import BaseModel

from chatclient import ChatClient, ChatOptions

pytestmark = pytest.mark.e2e

MARKUP = re.compile(r"\[/?INST\]|<<SYS>>|<\|im_(start|end)\|>|<(start|end)_of_turn>")
QUESTIONS = ("What is the capital of Australia?", "Who wrote Romeo and Juliet?", "Give me three tips for studying.")


class Person(BaseModel):
    name: str
    age: int
    city: str


@pytest.fixture(scope="module")
def smollm2(smollm2_path: str) -> Any:
    from chatclient.models.llamacpp import LlamaCppChatModel

    return LlamaCppChatModel.from_bundled("smollm2-135m", n_ctx=2048, seed=42, prefix_cache=False)


@pytest.fixture(scope="module")
def gemma(gguf_path: str) -> Any:
    from chatclient.models.llamacpp import LlamaCppChatModel

    return LlamaCppChatModel.from_bundled("gemma3-270m", n_ctx=2048, seed=42, prefix_cache=False)


def test_default_model_is_smollm2_with_the_template_stored_in_its_gguf(smollm2_path: str) -> None:
    from chatclient.models.llamacpp import LlamaCppChatModel

    model = LlamaCppChatModel(n_ctx=512)  # no path: the default chat model
    assert model.model_name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert (model.chat_template.source, model.chat_template.name) == ("gguf", "chat_template.default")
    assert model.chat_template.template == model.llama.metadata["tokenizer.chat_template"]
    assert model.llama.chat_format == "chat_template.default"  # what llama-cpp-python will render with
    assert "<|im_end|>" in model.chat_template.stop


def test_smollm2_answers_the_capital_of_australia(smollm2: Any) -> None:
    answer = ChatClient.create(smollm2).prompt(QUESTIONS[0]).options(ChatOptions(temperature=0.0)).call()
    response = answer.chat_response()
    assert "Canberra" in (response.text or "")
    assert response.result.metadata.finish_reason == "stop"  # ended by the template's end of turn


def test_gemma_base_model_uses_its_family_format_not_llama2(gemma: Any) -> None:
    from chatclient.models.llamacpp import FAMILY_TEMPLATES

    assert "tokenizer.chat_template" not in gemma.llama.metadata  # the base model's GGUF has none
    assert (gemma.chat_template.source, gemma.chat_template.name) == ("family", "gemma")
    assert gemma.chat_template.template == FAMILY_TEMPLATES["gemma"]
    assert gemma.llama.chat_format == "chatclient-gemma"
    assert gemma.llama.chat_format != "llama-2"


@pytest.mark.parametrize("which", ["smollm2", "gemma"])
def test_no_answer_contains_template_markup(which: str, request: pytest.FixtureRequest) -> None:
    model = request.getfixturevalue(which)
    client = ChatClient.create(model)
    # a short cap keeps the base model (which does not stop by itself) quick; markup would show early
    for question in QUESTIONS:
        text = client.prompt(question).options(ChatOptions(temperature=0.0, max_tokens=64)).call().content() or ""
        assert MARKUP.search(text) is None, (which, question, text)
        assert text.strip(), (which, question)


def test_entity_on_the_default_model_needs_no_context_key(smollm2: Any) -> None:
    # No NATIVE_STRUCTURED_OUTPUT key: the model's capabilities make the schema grammar the default path.
    person = (
        ChatClient.create(smollm2)
        .prompt("Extract the person from this text: Maria Silva is 31 years old and lives in Lisbon.")
        .options(ChatOptions(temperature=0.0))
        .call()
        .entity(Person)
    )
    assert person == Person(name="Maria Silva", age=31, city="Lisbon")


def test_a_cut_off_answer_reports_finish_reason_length(smollm2: Any) -> None:
    response = (
        ChatClient.create(smollm2)
        .prompt("Give me three tips for studying.")
        .options(ChatOptions(temperature=0.0, max_tokens=3))
        .call()
        .chat_response()
    )
    assert response.result.metadata.finish_reason == "length"
    assert response.metadata.usage.completion_tokens == 3


def test_stream_and_call_give_the_same_answer_on_the_default_model(smollm2: Any) -> None:
    client = ChatClient.create(smollm2)
    options = ChatOptions(temperature=0.0)
    whole = client.prompt(QUESTIONS[0]).options(options).call().content()
    pieces = list(client.prompt(QUESTIONS[0]).options(options).stream().content())
    assert len(pieces) > 3 and "".join(pieces) == whole


def test_an_unknown_explicit_chat_format_fails_at_construction(smollm2_path: str) -> None:
    from chatclient.models.llamacpp import ChatTemplateError, LlamaCppChatModel

    with pytest.raises(ChatTemplateError, match=r"chat_format='no-such-format' is not a chat format"):
        LlamaCppChatModel(smollm2_path, n_ctx=256, chat_format="no-such-format")
    built_in = LlamaCppChatModel(smollm2_path, n_ctx=256, chat_format="chatml")  # explicit family name
    assert (built_in.chat_template.source, built_in.llama.chat_format) == ("explicit", "chatclient-chatml")
