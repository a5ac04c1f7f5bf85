"""The three streaming apps hold the response until the run's first event: a refusal before it (a
budget, a rate limit) is answered with its HTTP status and ``Retry-After`` like a whole answer, and a
client that leaves while waiting still cancels the model call at once (API.md §15)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from advisors.budget import Budget, BudgetAdvisor
from chatclient import ChatClient
from chatclient.messages import UserMessage
from chatclient.serving import ag_ui_app, ai_sdk_app, openai_app
from chatclient.testing import ScriptedChatModel
from tests.support.serving import SlowBeforeFirstChunk, running, wait_until, with_memory


def _openai(text: str, conversation: str) -> tuple[str, dict[str, Any], dict[str, str]]:
    body = {"model": "chatclient", "stream": True, "messages": [{"role": "user", "content": text}]}
    return "/v1/chat/completions", body, {"X-Conversation-Id": conversation}


def _ag_ui(text: str, conversation: str) -> tuple[str, dict[str, Any], dict[str, str]]:
    body = {"threadId": conversation, "runId": "r1", "messages": [{"id": "u1", "role": "user", "content": text}]}
    return "/", body, {}


def _ai_sdk(text: str, conversation: str) -> tuple[str, dict[str, Any], dict[str, str]]:
    body = {"id": conversation, "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": text}]}]}
    return "/", body, {}


PROTOCOLS: list[tuple[Callable[..., Any], Callable[[str, str], tuple[str, dict[str, Any], dict[str, str]]]]] = [
    (openai_app, _openai),
    (ag_ui_app, _ag_ui),
    (ai_sdk_app, _ai_sdk),
]
IDS = ["openai", "ag-ui", "ai-sdk"]


@pytest.mark.parametrize(("make_app", "request_for"), PROTOCOLS, ids=IDS)
def test_a_budget_refusal_before_the_first_event_is_a_429_with_retry_after(
    make_app: Callable[..., Any], request_for: Callable[[str, str], Any]
) -> None:
    budget = Budget(max_tokens=1, period=None)
    client = ChatClient.builder(ScriptedChatModel(["one", "never"])).default_advisors(BudgetAdvisor(budget=budget)).build()
    with running(make_app(client)) as url:
        path, body, headers = request_for("hi", "c1")
        first = httpx.post(url + path, json=body, headers=headers, timeout=10)
        refused = httpx.post(url + path, json=body, headers=headers, timeout=10)
    assert first.status_code == 200 and "one" in first.text
    assert refused.status_code == 429 and int(refused.headers["retry-after"]) >= 1
    assert "budget" in refused.text.lower() and "never" not in refused.text


@pytest.mark.parametrize(("make_app", "request_for"), PROTOCOLS, ids=IDS)
def test_leaving_before_the_first_event_cancels_the_model_call(
    make_app: Callable[..., Any], request_for: Callable[[str, str], Any]
) -> None:
    model = SlowBeforeFirstChunk()
    client, memory = with_memory(model)
    with running(make_app(client)) as url:
        path, body, headers = request_for("a long question", "gone")
        with pytest.raises(httpx.ReadTimeout):  # nothing comes: the client gives up and closes
            httpx.post(url + path, json=body, headers=headers, timeout=0.5)
        closed_at = time.monotonic()
        wait_until(lambda: model.cancelled_at is not None)
        wait_until(lambda: memory.get("gone"))
    assert model.cancelled_at is not None, "the model call was not cancelled"
    assert model.cancelled_at - closed_at < 1.0
    assert memory.get("gone") == [UserMessage("a long question")]  # the question, never an answer
