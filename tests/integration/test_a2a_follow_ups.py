"""Issue 36 item 14: A2A interoperability found by the A2A TCK (spec 1.0).

A follow-up message that names its task but no context id got a new context id from the SDK, so
the next follow-up was refused (-32602) and the task failed: the context now comes from the stored
task. The agent card is served with ``Cache-Control``.
"""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

pytest.importorskip("a2a", reason="needs the a2a extra: pip install 'chatclient[a2a]'")

from chatclient.a2a import a2a_app, serve_a2a
from chatclient.agents import agent_function, human_input, sequence
from tests.integration.test_a2a import SHOUTER, running


@agent_function(output_key="booking")
def book(city: str, day: str) -> str:
    return f"booked in {city} on {day}"


BOOKER = sequence(
    human_input(question="Which city?", output_key="city"),
    human_input(question="Which day?", output_key="day"),
    book,
    name="booker",
)


def send(url: str, text: str, **ids: str) -> dict[str, Any]:
    message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": text}], **ids}
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    answer = httpx.post(url, json=body, headers={"A2A-Version": "1.0"}, timeout=30)
    assert answer.status_code == 200
    return dict(answer.json())


def test_follow_ups_naming_only_the_task_stay_in_its_context() -> None:
    with serve_a2a(BOOKER) as server:
        first = send(server.url, "a table")["result"]["task"]
        assert first["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        task_id, context_id = first["id"], first["contextId"]
        second = send(server.url, "Lisbon", taskId=task_id)
        assert "error" not in second, second
        assert second["result"]["task"]["contextId"] == context_id
        assert second["result"]["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        third = send(server.url, "Friday", taskId=task_id)  # refused with -32602 before
        assert "error" not in third, third
        done = third["result"]["task"]
        assert done["contextId"] == context_id and done["status"]["state"] == "TASK_STATE_COMPLETED"
        assert done["artifacts"][0]["parts"][0]["text"] == "booked in Lisbon on Friday"


def test_a_follow_up_naming_another_context_is_still_refused() -> None:
    with serve_a2a(BOOKER) as server:
        first = send(server.url, "a table")["result"]["task"]
        wrong = send(server.url, "Lisbon", taskId=first["id"], contextId="someone-elses")
        assert wrong["error"]["code"] == -32602


def test_a_task_of_another_caller_is_not_found_not_borrowed() -> None:
    def auth(request: Any) -> str | None:
        return request.headers.get("x-user") or None

    with running(lambda url: a2a_app(BOOKER, url=url, auth=auth)) as url:

        def as_user(user: str, text: str, **ids: str) -> dict[str, Any]:
            message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": text}], **ids}
            body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
            headers = {"A2A-Version": "1.0", "X-User": user}
            return dict(httpx.post(url, json=body, headers=headers, timeout=30).json())

        task = as_user("alice", "a table")["result"]["task"]
        stolen = as_user("mallory", "Lisbon", taskId=task["id"])
        assert stolen["error"]["code"] == -32001 and "result" not in stolen  # TaskNotFoundError
        assert as_user("alice", "Lisbon", taskId=task["id"])["result"]["task"]["contextId"] == task["contextId"]


def test_the_agent_card_is_served_with_cache_control() -> None:
    with serve_a2a(SHOUTER) as server:
        answer = httpx.get(server.url + ".well-known/agent-card.json")
        assert answer.headers["cache-control"] == "public, max-age=300"
        assert answer.headers["etag"]
    with serve_a2a(SHOUTER, card_cache_control="no-cache") as server:
        assert httpx.get(server.url + ".well-known/agent-card.json").headers["cache-control"] == "no-cache"
