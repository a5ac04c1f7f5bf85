"""Observation hooks: calls and advisors are reported to an installed observer, in every mode."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from chatclient import ChatClient
from chatclient.observation import set_observer
from chatclient.testing import RecordingAdvisor, ScriptedChatModel
from tests.conftest import run_spec


class Recorded:
    def __init__(self, log: list[str], label: str) -> None:
        self.log, self.label = log, label

    def finish(self, result: Any = None, error: BaseException | None = None) -> None:
        self.log.append(f"end {self.label}" + (f" error={type(error).__name__}" if error else ""))


class RecordingObserver:
    def __init__(self) -> None:
        self.log: list[str] = []

    def start_call(self, mode: str, request: Any, model: Any) -> Recorded:
        self.log.append(f"start call:{mode}")
        return Recorded(self.log, f"call:{mode}")

    def start_advisor(self, advisor: Any, mode: str) -> Recorded:
        self.log.append(f"start {advisor.name}")
        return Recorded(self.log, advisor.name)

    def start_tool(self, name: str, call_id: str, arguments: str) -> Recorded:
        return Recorded(self.log, name)

    def start_http_attempt(self, provider: str, method: str, url: str, attempt: int) -> Recorded:
        return Recorded(self.log, url)


@pytest.fixture
def observer() -> Iterator[RecordingObserver]:
    obs = RecordingObserver()
    set_observer(obs)
    yield obs
    set_observer(None)


def test_call_and_advisors_are_observed_as_nested_units(observer: RecordingObserver, mode: str) -> None:
    spec = ChatClient.create(ScriptedChatModel([["a", "b"]])).prompt("q").advisors(RecordingAdvisor("outer", []))
    run_spec(spec, mode)
    assert observer.log == [
        f"start call:{mode}",
        "start outer",
        "start ChatModelAdvisor",
        "end ChatModelAdvisor",
        "end outer",
        f"end call:{mode}",
    ]


def test_errors_are_reported(observer: RecordingObserver, mode: str) -> None:
    spec = ChatClient.create(ScriptedChatModel([RuntimeError("down")])).prompt("q")
    with pytest.raises(RuntimeError):
        run_spec(spec, mode)
    assert observer.log[-1] == f"end call:{mode} error=RuntimeError"
    assert "end ChatModelAdvisor error=RuntimeError" in observer.log


def test_no_observer_no_reports() -> None:
    obs = RecordingObserver()
    ChatClient.create(ScriptedChatModel(["x"])).prompt("q").call().content()
    assert obs.log == []
