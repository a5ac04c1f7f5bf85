"""Issue 36 item 2: the A2A server's in-memory task store is bounded.

Before, every finished task stayed in the SDK's store with its whole history (300 messages of
0.9 MB kept +276 MB). Now at most ``max_finished_tasks`` finished tasks of ``max_finished_bytes`` in
all are kept, the oldest finished dropped first; running and waiting tasks are never dropped. The
stored size is read through the SDK's own ``TaskStore.list`` of everything the store holds.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx
import pytest

pytest.importorskip("a2a", reason="needs the a2a extra: pip install 'chatclient[a2a]'")

from a2a.auth.user import UnauthenticatedUser
from a2a.server.context import ServerCallContext
from a2a.types import ListTasksRequest

from chatclient.a2a import a2a_agent, a2a_app
from chatclient.agents import agent_function, human_input, sequence
from tests.integration.test_a2a import running


@agent_function(output_key="answer")
def echo(request: str) -> str:
    """Says the request back."""
    return request


ECHO = sequence(echo, name="echo", description="Echoes")


def rpc(url: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    answer = httpx.post(url, json=body, headers={"A2A-Version": "1.0"}, timeout=30)
    assert answer.status_code == 200
    return dict(answer.json())


def say(url: str, text: str) -> str:
    """Send one message; the id of the task it made (completed)."""
    message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": text}]}
    task = rpc(url, "SendMessage", {"message": message})["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    return str(task["id"])


def known(url: str, task_id: str) -> bool:
    return "result" in rpc(url, "GetTask", {"id": task_id})


def held(store: Any) -> tuple[int, int]:
    """How many tasks the store holds for the anonymous caller, and their serialized bytes."""

    async def go() -> tuple[int, int]:
        page = await store.list(ListTasksRequest(page_size=1000), ServerCallContext(user=UnauthenticatedUser()))
        return len(page.tasks), sum(task.ByteSize() for task in page.tasks)

    return asyncio.run(go())


def test_finished_tasks_are_bounded_by_count_oldest_first() -> None:
    apps: list[Any] = []

    def make(url: str) -> Any:
        apps.append(a2a_app(ECHO, url=url, max_finished_tasks=5))
        return apps[0]

    with running(make) as url:
        ids = [say(url, f"message {n}") for n in range(12)]
        store = apps[0].task_store
        assert held(store)[0] == 5 == store.finished_tasks
        assert [known(url, task_id) for task_id in ids] == [False] * 7 + [True] * 5


def test_stored_bytes_stay_bounded_while_messages_keep_coming() -> None:
    apps: list[Any] = []
    limit = 400_000

    def make(url: str) -> Any:
        apps.append(a2a_app(ECHO, url=url, max_finished_bytes=limit))
        return apps[0]

    with running(make) as url:
        sizes = []
        for n in range(30):  # 30 tasks of ~100 KB each (the 50 KB message and its 50 KB answer): 3 MB sent
            say(url, f"{n:04d}" + "x" * 50_000)
            sizes.append(held(apps[0].task_store)[1])
        count, stored = held(apps[0].task_store)
    assert max(sizes) <= limit and stored == apps[0].task_store.finished_bytes
    assert 2 <= count <= 4  # what fits, not the 30 tasks sent


def test_a_lone_task_over_the_byte_bound_is_kept_until_the_next_one_finishes() -> None:
    apps: list[Any] = []

    def make(url: str) -> Any:
        apps.append(a2a_app(ECHO, url=url, max_finished_bytes=1_000))
        return apps[0]

    with running(make) as url:
        first = say(url, "y" * 5_000)
        assert known(url, first)  # its caller can still read it
        second = say(url, "z" * 5_000)
        assert not known(url, first) and known(url, second)
        assert apps[0].task_store.finished_tasks == 1


def test_tasks_waiting_for_input_are_never_dropped() -> None:
    @agent_function(output_key="booking")
    def book(city: str) -> str:
        return f"booked in {city}"

    booker = sequence(human_input(question="Which city?", output_key="city"), book, name="booker")
    with running(lambda url: a2a_app(booker, url=url, max_finished_tasks=1)) as url:
        remote = a2a_agent(url)
        waiting = [remote.run(request=f"table {n}") for n in range(3)]
        for run in waiting:
            assert run.suspended is not None
        finished = remote.resume(waiting[2].scope, "Rome")  # one finished task: the bound is reached
        assert finished.output == "booked in Rome"
        assert remote.resume(waiting[0].scope, "Oslo").output == "booked in Oslo"  # still held, answered
        assert remote.resume(waiting[1].scope, "Lima").output == "booked in Lima"


@pytest.mark.parametrize("knob", ["max_finished_tasks", "max_finished_bytes"])
@pytest.mark.parametrize("value", [0, -1, True, 1.5])
def test_the_bounds_must_be_positive_integers(knob: str, value: Any) -> None:
    with pytest.raises(ValueError, match=knob):
        a2a_app(ECHO, url="http://127.0.0.1:8000/", **{knob: value})


@agent_function(output_key="turns")
def tally(request: str, turns: int = 0) -> int:
    """Counts the turns of a conversation; the request (kept in the scope) may be large."""
    return turns + 1


def test_remembered_conversations_are_bounded_by_bytes_too() -> None:
    """The benchmark of item 2 found the next holder: every conversation's scope state (a 0.9 MB
    request each) stayed until max_contexts=1,000 conversations were held."""
    served = sequence(tally, name="tally", output=lambda scope: f"turn {scope.read('turns')}")
    with running(lambda url: a2a_app(served, url=url, max_context_bytes=250_000)) as url:
        remote = a2a_agent(url)
        first = remote.run(request="a" * 100_000)
        others = [remote.run(request=f"{n}" * 100_000) for n in range(5)]
        assert remote.run(request="b", tally_context_id=others[-1].scope.read("tally_context_id")).output == "turn 2"
        # The oldest conversation was dropped to stay under 250 KB: it starts over.
        assert remote.run(request="c", tally_context_id=first.scope.read("tally_context_id")).output == "turn 1"


def test_approx_bytes_counts_text_containers_and_objects_once() -> None:
    from chatclient.a2a.server import _approx_bytes

    text = "x" * 10_000
    assert 10_000 < _approx_bytes({"a": text, "b": text}) < 11_000  # the same string counted once
    assert _approx_bytes([text, "y" * 10_000]) > 20_000
    assert _approx_bytes({"obj": ECHO}) > _approx_bytes({"obj": None})
    loop: list[Any] = []
    loop.append(loop)
    assert _approx_bytes(loop) < 1_000  # a cycle ends
    assert _approx_bytes(list(range(1_000_000)), max_objects=1_000) < 8_100_000  # the walk is bounded
