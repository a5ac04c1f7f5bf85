"""SimpleLoggerAdvisor logs through stdlib ``logging``: DEBUG bodies, an INFO summary, stderr only, no global setup."""

from __future__ import annotations

import io
import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest
import structlog

from advisors import SimpleLoggerAdvisor
from advisors.logging import LOGGER_NAME, describe_request
from chatclient import ChatClient, ChatOptions, Prompt
from chatclient.errors import ModelConnectionError
from chatclient.testing import FunctionChatModel, ScriptedChatModel
from tests.conftest import run_text


@pytest.fixture
def records() -> Iterator[list[logging.LogRecord]]:
    """Every record reaching the ``chatclient`` logger tree at DEBUG, through a real handler."""
    captured: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            captured.append(record)

    root = logging.getLogger("chatclient")
    handler, old_level = Keep(logging.DEBUG), root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield captured
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    fields: dict[str, Any] = record.__dict__["chatclient"]  # set through logging's ``extra``
    return fields


def _events(records: list[logging.LogRecord]) -> list[tuple[str, str]]:
    return [(r.levelname, _fields(r)["event"]) for r in records if r.name == LOGGER_NAME]


def test_bodies_at_debug_and_one_summary_at_info_in_every_mode(mode: str, records: list[logging.LogRecord]) -> None:
    spec = (
        ChatClient.create(ScriptedChatModel([["Hel", "lo"]])).prompt("Tell me a joke").advisors(SimpleLoggerAdvisor())
    )
    assert run_text(spec, mode) == "Hello"
    assert _events(records) == [
        ("DEBUG", "chat_client.request"),
        ("DEBUG", "chat_client.response"),
        ("INFO", "chat_client.summary"),
    ]
    request, response, summary = (r.getMessage() for r in records)
    assert "user: Tell me a joke" in request
    assert "text: Hello" in response
    # The summary is one line with the model, tokens, finish reason and time.
    assert "\n" not in summary
    fields = _fields(records[2])
    assert fields["model"] == "scripted" and fields["finish_reason"] == "stop" and fields["mode"] == mode
    assert fields["total_tokens"] == fields["prompt_tokens"] + fields["completion_tokens"]
    assert f"total_tokens={fields['total_tokens']}" in summary and "duration_ms=" in summary


def test_summary_measures_the_call_in_milliseconds(records: list[logging.LogRecord]) -> None:
    def slow(prompt: Prompt) -> str:
        time.sleep(0.05)
        return "done"

    ChatClient.create(FunctionChatModel(slow)).prompt("q").advisors(SimpleLoggerAdvisor()).call().content()
    (summary,) = [r for r in records if _fields(r)["event"] == "chat_client.summary"]
    assert 50 <= _fields(summary)["duration_ms"] < 5000


def test_nothing_on_stdout_and_lines_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    logger = logging.getLogger("chatclient")
    handler = logging.StreamHandler()  # logging's own default stream: sys.stderr (captured here)
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        ChatClient.create(ScriptedChatModel(["ans"])).prompt("q").advisors(SimpleLoggerAdvisor()).call().content()
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
    out, err = capsys.readouterr()
    assert out == ""
    assert "chat_client.request" in err and "chat_client.summary" in err


def test_options_that_are_none_are_omitted(records: list[logging.LogRecord]) -> None:
    spec = ChatClient.create(ScriptedChatModel(["ok"])).prompt("q").options(ChatOptions(temperature=0.2))
    body = describe_request(spec.to_request())
    assert "options: temperature=0.2" in body
    assert "None" not in body
    spec.advisors(SimpleLoggerAdvisor()).call().content()
    assert "None" not in records[0].getMessage()


def test_quiet_level_keeps_the_summary_out_of_an_info_log(records: list[logging.LogRecord]) -> None:
    logging.getLogger("chatclient").setLevel(logging.INFO)
    client = ChatClient.create(ScriptedChatModel(["a", "b"]))
    client.prompt("q").advisors(SimpleLoggerAdvisor(level="DEBUG")).call().content()
    assert _events(records) == []
    logging.getLogger("chatclient").setLevel(logging.DEBUG)
    client.prompt("q").advisors(SimpleLoggerAdvisor(level="debug")).call().content()
    assert _events(records)[-1] == ("DEBUG", "chat_client.summary")


def test_levels_can_be_turned_off_and_are_validated(records: list[logging.LogRecord]) -> None:
    advisor = SimpleLoggerAdvisor(level=None, body_level=logging.INFO)
    ChatClient.create(ScriptedChatModel(["ok"])).prompt("q").advisors(advisor).call().content()
    assert _events(records) == [("INFO", "chat_client.request"), ("INFO", "chat_client.response")]
    with pytest.raises(ValueError, match="DEBUG, INFO"):
        SimpleLoggerAdvisor(level="LOUD")
    with pytest.raises(ValueError, match="body_level"):
        SimpleLoggerAdvisor(body_level=5)


def test_bodies_are_not_formatted_when_debug_is_off(records: list[logging.LogRecord]) -> None:
    calls: list[str] = []

    def formatter(request: Any) -> str:
        calls.append("formatted")
        return "body"

    logging.getLogger("chatclient").setLevel(logging.INFO)
    advisor = SimpleLoggerAdvisor(request_to_str=formatter)
    ChatClient.create(ScriptedChatModel(["ok"])).prompt("q").advisors(advisor).call().content()
    assert calls == []  # the (possibly large) body was never built
    assert _events(records) == [("INFO", "chat_client.summary")]


def test_redirect_to_a_stdlib_logger_or_name() -> None:
    stream = io.StringIO()
    target = logging.getLogger("myapp.llm")
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
    target.addHandler(handler)
    target.setLevel(logging.INFO)
    try:
        for logger in (target, "myapp.llm"):
            ChatClient.create(ScriptedChatModel(["ok"])).prompt("q").advisors(
                SimpleLoggerAdvisor(logger=logger)
            ).call().content()
    finally:
        target.removeHandler(handler)
        target.setLevel(logging.NOTSET)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2 and all(
        line.startswith("myapp.llm INFO chat_client.summary model=scripted") for line in lines
    )


def test_a_failed_call_logs_a_summary_with_the_error_and_still_raises(
    mode: str, records: list[logging.LogRecord]
) -> None:
    def broken(prompt: Prompt) -> str:
        raise ModelConnectionError("connection refused")

    spec = ChatClient.create(FunctionChatModel(broken)).prompt("q").advisors(SimpleLoggerAdvisor())
    with pytest.raises(ModelConnectionError):
        run_text(spec, mode)
    summary = _fields(records[-1])
    assert summary["event"] == "chat_client.summary" and summary["error"] == "ModelConnectionError"


def test_structlog_is_not_configured_globally_for_the_application() -> None:
    before = structlog.is_configured()
    ChatClient.create(ScriptedChatModel(["ok"])).prompt("q").advisors(SimpleLoggerAdvisor()).call().content()
    assert structlog.is_configured() is before


def test_retries_log_in_the_same_logger_tree() -> None:
    # One handler on "chatclient" (as docs/guide/logging.md shows) must catch both the advisor's lines
    # and the HTTP layer's retry warnings; tests/integration covers that retries do log there.
    from chatclient.models import http

    assert LOGGER_NAME.startswith("chatclient.")
    assert http.logger.name.startswith("chatclient.")
