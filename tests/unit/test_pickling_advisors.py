"""Every built-in advisor travels: a client holding one of each (those needing no outside service),
each already used once, round-trips through pickle and answers again. SimpleLoggerAdvisor's
structlog logger, unpicklable once used, is built again where it arrives."""

from __future__ import annotations

import logging
import pickle
from pathlib import Path
from typing import Any

import pytest
import structlog
from pydantic import BaseModel

import advisors as A
from chatclient import ChatClient
from chatclient.guardrails import KeywordGuardrail, MaxLengthGuardrail
from chatclient.memory import InMemoryChatMemoryRepository, MessageWindowChatMemory
from chatclient.rag.documents import Document
from chatclient.rag.embedding import HashingEmbeddingModel
from chatclient.rag.retrievers import VectorStoreDocumentRetriever
from chatclient.rag.stores.simple import SimpleVectorStore
from chatclient.skills import Skill
from chatclient.testing import ScriptedChatModel


class Person(BaseModel):
    name: str


def every_advisor(tmp_path: Path) -> list[Any]:
    memory = MessageWindowChatMemory(InMemoryChatMemoryRepository(), max_messages=7)
    store = SimpleVectorStore(HashingEmbeddingModel(64))
    store.add([Document("Otters hold hands while they sleep.")])
    skill_dir = tmp_path / "otters"
    skill_dir.mkdir()
    (skill_dir / "SKILL.md").write_text(
        "---\nname: otters\ndescription: Facts about otters.\n---\nBe kind to otters.\n"
    )
    return [
        A.SimpleLoggerAdvisor(),
        A.ReReadingAdvisor(),
        A.SafeGuardAdvisor(["forbidden"]),
        A.MessageChatMemoryAdvisor(memory),
        A.PromptChatMemoryAdvisor(memory),
        A.VectorStoreChatMemoryAdvisor(store),
        A.QuestionAnswerAdvisor(store),
        A.RetrievalAugmentationAdvisor(VectorStoreDocumentRetriever(store)),
        A.ToolCallAdvisor(),
        A.StructuredOutputValidationAdvisor(Person),
        A.PromptCachingAdvisor(ttl="1h"),
        A.BudgetAdvisor(max_tokens=100_000, budget=A.Budget(max_tokens=500_000)),
        A.ToolApprovalAdvisor(),
        A.ToolSearchAdvisor(),
        A.InputGuardrailAdvisor(KeywordGuardrail(["forbidden"])),
        A.OutputGuardrailAdvisor(MaxLengthGuardrail(10_000)),
        A.SkillsAdvisor(Skill.from_dir(skill_dir)),
        A.ContextWindowAdvisor(max_input_tokens=100_000),
    ]


def test_a_client_with_every_built_in_advisor_round_trips_after_use(tmp_path: Path) -> None:
    advisors = every_advisor(tmp_path)
    built = {type(a).__name__ for a in advisors}
    missing = {name for name in A.__all__ if name.endswith("Advisor")} - built
    assert not missing, f"add these built-in advisors to the pickling test: {sorted(missing)}"

    # Use them once: SimpleLoggerAdvisor's structlog proxy caches a local function on first use.
    logging.getLogger("chatclient").setLevel(logging.DEBUG)
    used = ChatClient.builder(ScriptedChatModel(['{"name": "Ada"}'])).default_advisors(*advisors).build()
    assert used.prompt("Who?").call().content() == '{"name": "Ada"}'

    client = ChatClient.builder(ScriptedChatModel(['{"name": "Bo"}'])).default_advisors(*advisors).build()
    copy = pickle.loads(pickle.dumps(client))
    assert [type(a) for a in copy._defaults.advisors] == [type(a) for a in advisors]
    assert [a.order for a in copy._defaults.advisors] == [a.order for a in advisors]
    assert copy.prompt("Who?").call().content() == '{"name": "Bo"}'


@pytest.mark.parametrize("given", [None, "my.app", logging.getLogger("my.other"), structlog.get_logger("s")])
def test_simple_logger_advisor_logs_again_after_a_round_trip(given: Any, caplog: pytest.LogCaptureFixture) -> None:
    advisor = A.SimpleLoggerAdvisor(logger=given)
    ChatClient.builder(ScriptedChatModel(["one"])).default_advisors(advisor).build().prompt("a").call().content()
    copy = pickle.loads(pickle.dumps(advisor))
    if given is None or isinstance(given, (str, logging.Logger)):
        caplog.clear()
        caplog.set_level(logging.INFO)
        ChatClient.builder(ScriptedChatModel(["two"])).default_advisors(copy).build().prompt("b").call().content()
        summaries = [r for r in caplog.records if "chat_client.summary" in r.getMessage()]
        expected = {None: "chatclient.advisors.logging", "my.app": "my.app"}.get(given, "my.other")  # type: ignore[call-overload]
        assert [r.name for r in summaries] == [expected]
    else:
        with structlog.testing.capture_logs() as logs:
            ChatClient.builder(ScriptedChatModel(["two"])).default_advisors(copy).build().prompt("b").call().content()
        assert [e["event"] for e in logs if e["event"] == "chat_client.summary"] == ["chat_client.summary"]
