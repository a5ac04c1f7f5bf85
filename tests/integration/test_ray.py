"""chatclient.batch.ray.map_batches on a local Ray cluster (ray.init(num_cpus=2)) against a loopback model server."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from chatclient import ChatClient
from chatclient.models.openai import OpenAIChatModel
from tests.support.loopback import LoopbackServer, Recorded, Reply, openai_completion

pytestmark = pytest.mark.integration

ray = pytest.importorskip("ray", reason="the ray extra is not installed: pip install 'chatclient[ray]'")


def echo(rec: Recorded) -> Reply:
    text = rec.body["messages"][-1]["content"]
    if text == "boom":
        return Reply(400, json={"error": {"message": "bad item", "type": "invalid_request_error"}})
    return Reply(json=openai_completion("echo " + text))


@pytest.fixture(scope="module")
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer() as srv:
        srv.set_default("/v1/chat/completions", echo)
        yield srv


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    # The workers cannot import this test module: ship its functions and classes by value.
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        yield
    finally:
        ray.shutdown()


class Factory:
    def __init__(self, url: str) -> None:
        self.url = url

    def __call__(self) -> ChatClient:
        model = OpenAIChatModel(
            "gpt-test", api_key="sk-x-000000", base_url=self.url, headers={"x-built-by": str(os.getpid())}
        )
        return ChatClient.builder(model).build()


def ask(client: ChatClient, row: dict[str, Any]) -> dict[str, Any]:
    return {"id": row["id"], "answer": client.prompt(row["text"]).call().content(), "pid": os.getpid()}


def test_map_batches_one_client_per_actor_in_order(server: LoopbackServer, local_ray: None) -> None:
    from chatclient.batch.ray import map_batches

    rows = [{"id": i, "text": f"q{i}"} for i in range(60)]
    out = map_batches(
        ray.data.from_items(rows), ask, client_factory=Factory(server.url + "/v1"), concurrency=2, batch_size=7
    ).take_all()
    assert [o["id"] for o in out] == list(range(60))
    assert [o["answer"] for o in out] == [f"echo q{i}" for i in range(60)]
    pids = {o["pid"] for o in out}
    builders = {r.headers["x-built-by"] for r in server.requests_to("/v1/chat/completions")}
    assert os.getpid() not in pids and 1 <= len(pids) <= 2
    assert builders == {str(p) for p in pids}  # each actor built one client, in its own process


def test_on_error_record_keeps_going(server: LoopbackServer, local_ray: None) -> None:
    from chatclient.batch.ray import map_batches

    rows = [{"id": 0, "text": "fine"}, {"id": 1, "text": "boom"}, {"id": 2, "text": "also fine"}]
    out = map_batches(
        ray.data.from_items(rows), ask, client_factory=Factory(server.url + "/v1"), concurrency=1, on_error="record"
    ).take_all()
    assert [o["id"] for o in out] == [0, 1, 2]
    assert out[0]["answer"] == "echo fine" and "bad item" in out[1]["error"] and out[2]["error"] is None


def test_bad_arguments(local_ray: None) -> None:
    from chatclient.batch.ray import map_batches

    with pytest.raises(TypeError, match=r"ray\.data\.Dataset"):
        map_batches([{"id": 1}], ask, client_factory=Factory("http://127.0.0.1:9/v1"))
    with pytest.raises(ValueError, match="on_error"):
        map_batches(ray.data.from_items([{"id": 1}]), ask, client_factory=Factory("x"), on_error="ignore")
