"""chatclient.batch.dask.map_partitions on a real dask.distributed LocalCluster against a loopback model server."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from chatclient import ChatClient
from chatclient.models.openai import OpenAIChatModel
from tests.support.loopback import LoopbackServer, Recorded, Reply, openai_completion

pytestmark = pytest.mark.integration

dask_bag = pytest.importorskip("dask.bag", reason="the dask extra is not installed: pip install 'chatclient[dask]'")
distributed = pytest.importorskip("dask.distributed")


def echo(rec: Recorded) -> Reply:
    return Reply(json=openai_completion("echo " + rec.body["messages"][-1]["content"]))


@pytest.fixture(scope="module")
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer() as srv:
        srv.set_default("/v1/chat/completions", echo)
        yield srv


class Factory:
    """Builds a client whose requests name the process that built it (header x-built-by)."""

    def __init__(self, url: str) -> None:
        self.url = url

    def __call__(self) -> ChatClient:
        built = f"{os.getpid()}-{threading.get_ident()}-{id(self)}"
        model = OpenAIChatModel("gpt-test", api_key="sk-x-000000", base_url=self.url, headers={"x-built-by": built})
        return ChatClient.builder(model).build()


def ask(client: ChatClient, item: str) -> dict[str, Any]:
    return {"item": item, "answer": client.prompt(item).call().content(), "pid": os.getpid()}


def test_one_client_per_worker_process_and_input_order(server: LoopbackServer) -> None:
    from chatclient.batch.dask import map_partitions

    items = [f"q{i}" for i in range(40)]
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=2, processes=True, dashboard_address=None)
    with cluster, distributed.Client(cluster):
        bag = dask_bag.from_sequence(items, npartitions=8)
        out = map_partitions(bag, ask, client_factory=Factory(server.url + "/v1")).compute()
    assert [o["item"] for o in out] == items and [o["answer"] for o in out] == [f"echo {i}" for i in items]
    pids = {o["pid"] for o in out}
    builders = {r.headers["x-built-by"] for r in server.requests_to("/v1/chat/completions")}
    assert len(pids) == 2 and os.getpid() not in pids  # the work ran in the two worker processes
    assert len(builders) == len(pids)  # one client per worker process, shared by its threads and partitions


def test_bad_input() -> None:
    from chatclient.batch.dask import map_partitions

    with pytest.raises(TypeError, match=r"dask\.bag\.Bag"):
        map_partitions([1, 2], ask, client_factory=Factory("http://127.0.0.1:9/v1"))
    bag = dask_bag.from_sequence([1])
    with pytest.raises(TypeError, match="must pickle"):
        map_partitions(bag, ask, client_factory=lambda lock=threading.Lock(): None)  # type: ignore[misc]
