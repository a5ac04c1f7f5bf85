"""ChatClientRequest / ChatClientResponse: read-only context, mutate merges, originals untouched."""

from __future__ import annotations

import pytest

from chatclient import ChatClientRequest, ChatClientResponse, ChatResponse, ContextKeys, Prompt


def test_context_is_read_only_and_copied() -> None:
    source = {"a": 1}
    request = ChatClientRequest(Prompt("q"), source)
    source["a"] = 2
    assert request.context["a"] == 1
    with pytest.raises(TypeError):
        request.context["b"] = 2  # type: ignore[index]


def test_mutate_merges_context_and_keeps_original() -> None:
    request = ChatClientRequest(Prompt("q"), {"k": "old", "other": 1})
    changed = request.mutate(context={"k": "new"})
    assert dict(changed.context) == {"k": "new", "other": 1}
    assert request.context["k"] == "old"
    replaced = request.mutate(prompt=Prompt("p"))
    assert replaced.prompt.user_message.text == "p" and replaced.context == request.context


def test_request_requires_a_prompt_and_string_keys() -> None:
    with pytest.raises(TypeError):
        ChatClientRequest("not a prompt")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        ChatClientRequest(Prompt("q"), {None: 1})  # type: ignore[dict-item]


def test_response_allows_none_and_mutates() -> None:
    empty = ChatClientResponse()
    assert empty.chat_response is None and dict(empty.context) == {}
    r = ChatClientResponse(ChatResponse.of_text("x"), {"a": 1}).mutate(context={"b": 2})
    assert dict(r.context) == {"a": 1, "b": 2}
    assert r.mutate(chat_response=None).chat_response is None


def test_context_keys_match_the_reference_names() -> None:
    assert ContextKeys.CONVERSATION_ID == "chat_memory_conversation_id"
    assert ContextKeys.RETRIEVED_DOCUMENTS == "qa_retrieved_documents"
    assert ContextKeys.FILTER_EXPRESSION == "qa_filter_expression"
    assert ContextKeys.DOCUMENT_CONTEXT == "rag_document_context"
    assert ContextKeys.VECTOR_MEMORY_TOP_K == "chat_memory_vector_store_top_k"
