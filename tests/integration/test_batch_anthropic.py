"""AnthropicBatch against a loopback fake of the Message Batches endpoints."""

from __future__ import annotations

import json
from typing import Any

import pytest

from chatclient import ChatClient
from chatclient.batch import AnthropicBatch
from chatclient.errors import BatchError, BatchItemError
from chatclient.models.anthropic import AnthropicChatModel
from tests.support import LoopbackServer, server_fixtures
from tests.support.batch_fakes import FakeAnthropicBatches
from tests.support.loopback import Reply, anthropic_message

pytestmark = pytest.mark.integration

loopback_server, server = server_fixtures()
KEY = "sk-ant-batch-test-0123456789"


def model(srv: LoopbackServer) -> AnthropicChatModel:
    return AnthropicChatModel("claude-test", api_key=KEY, base_url=srv.url, timeout=10.0, backoff_base=0.001)


def client(srv: LoopbackServer) -> ChatClient:
    return ChatClient.builder(model(srv)).default_system("Be brief.").build()


def test_params_are_the_synchronous_body_and_results_map_back(server: LoopbackServer) -> None:
    fake = FakeAnthropicBatches(server)
    c = client(server)
    job = AnthropicBatch(model(server)).submit([c.prompt(f"q{i}") for i in range(3)])
    create = server.requests_to("/v1/messages/batches")[0]
    assert create.headers["x-api-key"] == KEY and create.headers["anthropic-version"]
    server.script("/v1/messages", Reply(json=anthropic_message("hi")))
    c.prompt("q1").call().content()
    sent = server.requests_to("/v1/messages")[-1].raw
    assert b'{"custom_id":"item-1","params":' + sent + b"}" in create.raw
    results = job.wait(poll_interval=0.01, progress=False).results()
    assert [r.value.text for r in results] == ["echo q0", "echo q1", "echo q2"]  # type: ignore[union-attr]
    assert all(r.usage is not None and r.usage.prompt_tokens == 6 for r in results)
    assert job.status() == "ended"
    assert fake.jobs[job.parts[0]]["request_counts"]["succeeded"] == 3
    assert job.id == f"{job.parts[0]}:3"  # the id says how many items were submitted


def test_errored_canceled_expired(server: LoopbackServer) -> None:
    def answer(params: dict[str, Any]) -> Any:
        return ValueError("overloaded item") if params["messages"][-1]["content"] == "q1" else anthropic_message("ok")

    FakeAnthropicBatches(server, answer=answer, expire_after=3)
    c = client(server)
    results = (
        AnthropicBatch(model(server))
        .submit([c.prompt(f"q{i}") for i in range(4)])
        .wait(poll_interval=0.01, progress=False)
        .results()
    )
    assert [r.ok for r in results] == [True, False, True, False]
    assert isinstance(results[1].error, BatchItemError) and results[1].error.kind == "errored"
    assert "overloaded item" in str(results[1].error)
    assert isinstance(results[3].error, BatchItemError) and results[3].error.kind == "expired"

    fake = FakeAnthropicBatches(server, steps=10_000)
    job = AnthropicBatch(model(server)).submit([c.prompt(f"q{i}") for i in range(4)])
    job.cancel()
    assert fake.canceled == job.parts
    kinds = [r.error.kind if isinstance(r.error, BatchItemError) else "ok" for r in job.results()]
    assert kinds == ["ok", "ok", "canceled", "canceled"]


def test_rejected_request_names_the_item(server: LoopbackServer) -> None:
    FakeAnthropicBatches(server, reject_request=2)
    c = client(server)
    with pytest.raises(BatchError, match=r"item 2 \(custom_id item-2\)"):
        AnthropicBatch(model(server)).submit([c.prompt(f"q{i}") for i in range(3)])


def test_unknown_custom_id_and_split(server: LoopbackServer) -> None:
    FakeAnthropicBatches(server, extra_custom_id="someone-else")
    c = client(server)
    job = AnthropicBatch(model(server)).submit([c.prompt("a")]).wait(poll_interval=0.01, progress=False)
    with pytest.raises(BatchItemError, match="someone-else"):
        job.results()

    fake = FakeAnthropicBatches(server)
    split = AnthropicBatch(model(server), max_lines=2).submit([c.prompt(f"q{i}") for i in range(3)])
    assert len(split.parts) == 2
    assert [json.loads(r.raw)["requests"][0]["custom_id"] for r in server.requests_to("/v1/messages/batches")[-2:]] == [
        "item-0",
        "item-2",
    ]
    again = AnthropicBatch(model(server)).attach(split.id)
    assert [r.value.text for r in again.wait(poll_interval=0.01, progress=False).results()] == [  # type: ignore[union-attr]
        "echo q0",
        "echo q1",
        "echo q2",
    ]
    assert len(fake.jobs) == 2


@pytest.mark.parametrize("reported", [1, 5])
def test_results_are_the_submitted_items_whatever_the_counts_say(server: LoopbackServer, reported: int) -> None:
    FakeAnthropicBatches(server, report_total=reported)  # request_counts claim 1 (or 5) requests, 2 were sent
    c = client(server)
    job = AnthropicBatch(model(server)).submit([c.prompt("a"), c.prompt("b")])
    for again in (job.wait(poll_interval=0.01, progress=False), AnthropicBatch(model(server)).attach(job.id)):
        assert [r.value.text for r in again.results()] == ["echo a", "echo b"]  # type: ignore[union-attr]


def test_a_submitted_item_missing_from_the_results_is_named(server: LoopbackServer) -> None:
    FakeAnthropicBatches(server, drop_custom_id="item-0")
    c = client(server)
    results = (
        AnthropicBatch(model(server))
        .submit([c.prompt("a"), c.prompt("b")])
        .wait(poll_interval=0.01, progress=False)
        .results()
    )
    assert [r.ok for r in results] == [False, True]
    assert isinstance(results[0].error, BatchItemError) and results[0].error.custom_id == "item-0"


def test_wrong_model_type() -> None:
    from chatclient.models.openai import OpenAIChatModel

    with pytest.raises(TypeError, match="AnthropicChatModel"):
        AnthropicBatch(OpenAIChatModel("x", api_key="k", base_url="http://127.0.0.1:9"))  # type: ignore[arg-type]
