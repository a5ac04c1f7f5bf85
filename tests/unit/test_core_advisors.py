"""SimpleLoggerAdvisor, ReReadingAdvisor and SafeGuardAdvisor in the four modes."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from structlog.testing import capture_logs

from advisors import ReReadingAdvisor, SafeGuardAdvisor, SimpleLoggerAdvisor
from advisors.safeguard import DEFAULT_FAILURE_RESPONSE
from chatclient import ChatClient, ChatClientRequest, ChatResponse
from chatclient.testing import ScriptedChatModel
from tests.conftest import run_spec, run_text


class ListLogger:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    def debug(self, event: str, **kw: Any) -> None:
        self.events.append((event, kw))

    info = debug  # the one-line summary is logged at INFO


def test_logger_logs_request_and_response_once(mode: str) -> None:
    log = ListLogger()
    spec = (
        ChatClient.create(ScriptedChatModel([["Hel", "lo"]]))
        .prompt("Tell me a joke")
        .advisors(SimpleLoggerAdvisor(logger=log))
    )
    assert run_text(spec, mode) == "Hello"
    names = [e for e, _ in log.events]
    assert names == ["chat_client.request", "chat_client.response", "chat_client.summary"]
    assert "Tell me a joke" in log.events[0][1]["request"]
    response_text = log.events[1][1]["response"]
    assert "Hello" in response_text and "finish_reason: stop" in response_text


def test_logger_custom_formatters() -> None:
    log = ListLogger()
    advisor = SimpleLoggerAdvisor(
        request_to_str=lambda r: "REQ " + r.prompt.user_message.text,
        response_to_str=lambda r: "RESP " + str(r.text if r else None),
        logger=log,
    )
    ChatClient.create(ScriptedChatModel(["ans"])).prompt("q").advisors(advisor).call().content()
    assert [kw.get("request") or kw.get("response") for e, kw in log.events if e != "chat_client.summary"] == [
        "REQ q",
        "RESP ans",
    ]


def test_logger_uses_stdlib_logging_by_default(caplog: pytest.LogCaptureFixture) -> None:
    # structlog is not configured globally: its capture hook sees nothing, stdlib logging sees all.
    with capture_logs() as logs, caplog.at_level(logging.DEBUG, logger="chatclient.advisors.logging"):
        ChatClient.create(ScriptedChatModel(["ans"])).prompt("q").advisors(SimpleLoggerAdvisor()).call().content()
    assert logs == []
    assert [(r.levelname, r.getMessage().split()[0]) for r in caplog.records] == [
        ("DEBUG", "chat_client.request"),
        ("DEBUG", "chat_client.response"),
        ("INFO", "chat_client.summary"),
    ]


def test_rereading_rewrites_the_user_message(mode: str) -> None:
    model = ScriptedChatModel([["ok"]])
    spec = ChatClient.create(model).prompt().user("What is {{ 2 + 2 }}?").advisors(ReReadingAdvisor())
    run_spec(spec, mode)
    assert model.last_prompt.user_message.text == (
        "What is {{ 2 + 2 }}?\nRead the question again: What is {{ 2 + 2 }}?\n"
    )


def test_rereading_custom_template_and_validation() -> None:
    model = ScriptedChatModel(["ok"])
    advisor = ReReadingAdvisor(template="Q: {{ re2_input_query }} / again: {{ re2_input_query }}")
    ChatClient.create(model).prompt("why").advisors(advisor).call().content()
    assert model.last_prompt.user_message.text == "Q: why / again: why"
    with pytest.raises(ValueError):
        ReReadingAdvisor(template="no placeholder")


def test_safeguard_blocks_case_insensitively_without_calling_the_model(mode: str) -> None:
    model = ScriptedChatModel([])
    spec = ChatClient.create(model).prompt("How do I build a BOMB?").advisors(SafeGuardAdvisor(["bomb"]))
    response = run_spec(spec, mode).chat_response
    assert response is not None and response.text == DEFAULT_FAILURE_RESPONSE
    assert model.prompts == []


def test_safeguard_screens_every_message_text() -> None:
    model = ScriptedChatModel([])
    client = ChatClient.builder(model).default_system("topic: Secret project").build()
    out = client.prompt("hello").advisors(SafeGuardAdvisor(["secret"], failure_response="no")).call().content()
    assert out == "no" and model.prompts == []


def test_safeguard_passes_clean_requests(mode: str) -> None:
    model = ScriptedChatModel([["fine"]])
    spec = ChatClient.create(model).prompt("hello").advisors(SafeGuardAdvisor(["bomb"]))
    assert run_text(spec, mode) == "fine"
    assert len(model.prompts) == 1


def test_safeguard_check_response(mode: str) -> None:
    model = ScriptedChatModel([["the pass", "word is 42"]])
    spec = (
        ChatClient.create(model)
        .prompt("hello")
        .advisors(SafeGuardAdvisor(["PASSWORD"], failure_response="blocked", check_response=True))
    )
    assert run_text(spec, mode) == "blocked"
    assert len(model.prompts) == 1


def test_safeguard_empty_word_list_never_matches() -> None:
    model = ScriptedChatModel(["ok"])
    assert ChatClient.create(model).prompt("anything").advisors(SafeGuardAdvisor([])).call().content() == "ok"


def test_safeguard_arguments() -> None:
    with pytest.raises(ValueError):
        SafeGuardAdvisor(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        SafeGuardAdvisor("bomb")


def test_safeguard_refusal_keeps_context() -> None:
    spec = (
        ChatClient.create(ScriptedChatModel([])).prompt("bomb").advisors(SafeGuardAdvisor(["bomb"]), params={"k": "v"})
    )
    cr = spec.call().chat_client_response()
    assert cr.context["k"] == "v"
    assert isinstance(cr.chat_response, ChatResponse)
    assert cr.chat_response.metadata.extra["safeguard_blocked"] is True
    assert isinstance(spec.to_request(), ChatClientRequest)
