"""Dask: map a bag through a ``ChatClient`` built once per worker process (extra ``dask``).

``map_partitions(bag, fn, client_factory=...)`` ships ``fn`` and the factory (both must pickle),
builds the client the first time a partition lands in a worker process and keeps it there for
every later partition (so its connection pool, rate limiter and caches are shared by the worker's
threads), and returns the bag of ``fn(client, item)`` in the input order.

    import dask.bag as db
    from dask.distributed import Client, LocalCluster
    from chatclient.batch.dask import map_partitions

    with Client(LocalCluster(n_workers=4)):
        bag = db.from_sequence(documents, npartitions=64)
        answers = map_partitions(bag, summarize, client_factory=make_client).compute()
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from typing import Any

from chatclient.client import ChatClient

__all__ = ["map_partitions", "worker_client"]

_CLIENTS: dict[bytes, ChatClient] = {}
_LOCK = threading.Lock()


def _bag_type() -> Any:
    try:
        import dask.bag
    except ImportError:
        raise ImportError("chatclient.batch.dask needs Dask: pip install 'chatclient[dask]'") from None
    return dask.bag.Bag


def worker_client(client_factory: Callable[[], ChatClient]) -> ChatClient:
    """The client this process built from ``client_factory`` (built on first use, then reused)."""
    import cloudpickle  # Dask's own serializer: factories may be lambdas or closures

    key = hashlib.blake2b(cloudpickle.dumps(client_factory), digest_size=16).digest()
    with _LOCK:
        client = _CLIENTS.get(key)
        if client is None:
            client = _CLIENTS[key] = client_factory()
        return client


def _partition(items: Any, fn: Callable[[ChatClient, Any], Any], client_factory: Callable[[], ChatClient]) -> list[Any]:
    client = worker_client(client_factory)
    return [fn(client, item) for item in items]


def map_partitions(bag: Any, fn: Callable[[ChatClient, Any], Any], *, client_factory: Callable[[], ChatClient]) -> Any:
    """``bag`` mapped item by item through ``fn(client, item)``, one client per worker process (lazy)."""
    bag_type = _bag_type()
    if not isinstance(bag, bag_type):
        raise TypeError(f"map_partitions needs a dask.bag.Bag, got {type(bag).__name__}")
    if not callable(fn) or not callable(client_factory):
        raise TypeError("map_partitions(bag, fn, client_factory=...): fn and client_factory must be callables")
    import cloudpickle

    try:
        cloudpickle.dumps((fn, client_factory))
    except Exception as exc:
        raise TypeError(
            f"fn and client_factory are shipped to the workers and must pickle ({exc}); build live objects "
            "(clients, connections) inside client_factory instead of capturing them"
        ) from exc
    return bag.map_partitions(_partition, fn, client_factory)
