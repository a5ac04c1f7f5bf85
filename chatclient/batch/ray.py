"""Ray Data: map a dataset through a ``ChatClient`` built once per actor (extra ``ray``).

The pattern of Ray's own LLM batch inference: a pool of ``concurrency`` actors, each building its
client once from ``client_factory`` (so pools, limiters and loaded models live in the actor, and
nothing but the factory and ``fn`` is shipped), then ``fn(client, row) -> dict`` for every row.
Inside an actor the rows of a batch run on ``threads_per_actor`` threads (model calls wait on the
network, not the CPU), and the output keeps the input order.

    import ray
    from chatclient.batch.ray import map_batches

    def make_client() -> ChatClient:
        return ChatClient.builder(OpenAIChatModel("gpt-4o-mini")).build()

    def extract(client: ChatClient, row: dict) -> dict:
        return {"id": row["id"], "summary": client.prompt(row["text"]).call().content()}

    out = map_batches(ray.data.read_parquet("docs.parquet"), extract, client_factory=make_client, concurrency=8)
    out.write_parquet("summaries/")

``on_error="record"`` keeps going when ``fn`` raises: that row's output is ``{"error": "..."}``
(with the row's own columns) instead of failing the job.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from chatclient.client import ChatClient

__all__ = ["map_batches"]

RowFn = Callable[[ChatClient, dict[str, Any]], dict[str, Any]]


def _ray() -> Any:
    try:
        import ray
        import ray.data
    except ImportError:
        raise ImportError("chatclient.batch.ray needs Ray Data: pip install 'chatclient[ray]'") from None
    return ray


def _plain(value: Any) -> Any:
    item = getattr(value, "item", None)  # numpy scalars become Python values
    return item() if callable(item) and getattr(value, "ndim", 1) == 0 else value


class _ClientActor:
    """One per Ray actor: builds the client once, then maps batches of rows."""

    def __init__(self, client_factory: Callable[[], ChatClient], fn: RowFn, threads: int, on_error: str) -> None:
        self.client = client_factory()
        self.fn = fn
        self.on_error = on_error
        self.pool = ThreadPoolExecutor(threads, thread_name_prefix="chatclient-ray") if threads > 1 else None

    def _one(self, row: dict[str, Any]) -> dict[str, Any]:
        try:
            out = self.fn(self.client, row)
        except Exception as exc:
            if self.on_error == "raise":
                raise
            return {**row, "error": f"{type(exc).__name__}: {exc}"}
        if not isinstance(out, dict):
            raise TypeError(f"map_batches: fn(client, row) must return a dict, got {type(out).__name__}")
        return out

    def __call__(self, batch: dict[str, Any]) -> dict[str, list[Any]]:
        columns = {k: (v.tolist() if hasattr(v, "tolist") else list(v)) for k, v in batch.items()}
        size = len(next(iter(columns.values()), []))
        rows = [{k: _plain(v[i]) for k, v in columns.items()} for i in range(size)]
        outs = list(self.pool.map(self._one, rows)) if self.pool is not None else [self._one(r) for r in rows]
        keys: dict[str, None] = {}
        for out in outs:
            keys.update(dict.fromkeys(out))
        return {k: [out.get(k) for out in outs] for k in keys}


def map_batches(
    dataset: Any,
    fn: RowFn,
    *,
    client_factory: Callable[[], ChatClient],
    concurrency: int = 2,
    batch_size: int = 16,
    threads_per_actor: int = 8,
    num_cpus: float = 0.5,
    on_error: str = "raise",
) -> Any:
    """``dataset`` mapped row by row through ``fn(client, row) -> dict``, one client per actor.

    ``concurrency`` actors (a fixed pool), ``batch_size`` rows per call, ``threads_per_actor``
    rows in flight per actor, ``num_cpus`` reserved per actor (model calls mostly wait).
    The output keeps the input order (this sets ``preserve_order`` on the datasets' contexts). Returns the lazy
    ``ray.data.Dataset``; nothing runs until it is consumed.
    """
    ray = _ray()
    if not callable(fn) or not callable(client_factory):
        raise TypeError("map_batches(dataset, fn, client_factory=...): fn and client_factory must be callables")
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ValueError(f"concurrency must be an int >= 1, got {concurrency!r}")
    if on_error not in ("raise", "record"):
        raise ValueError(f"on_error must be 'raise' or 'record', got {on_error!r}")
    if not isinstance(dataset, ray.data.Dataset):
        raise TypeError(f"map_batches needs a ray.data.Dataset, got {type(dataset).__name__}")
    # Order is a property of the context the dataset executes with (the input's, copied onward).
    dataset.context.execution_options.preserve_order = True
    mapped = dataset.map_batches(
        _ClientActor,
        fn_constructor_args=(client_factory, fn, threads_per_actor, on_error),
        batch_size=batch_size,
        batch_format="numpy",
        compute=ray.data.ActorPoolStrategy(size=concurrency),
        num_cpus=num_cpus,
    )
    mapped.context.execution_options.preserve_order = True
    return mapped
