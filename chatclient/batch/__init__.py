"""Bulk runs: ``run_many`` on one machine, provider batch APIs, and adapters for Ray, Dask and DBOS.

``run_many(fn, items)`` calls ``fn(item)`` for every item with at most ``concurrency`` calls in
flight (threads for a plain function, tasks for an ``async def``), shows a ``tqdm`` bar on stderr
and returns one ``ItemResult`` per item in input order; a failure is an entry with its exception,
never dropped. Retries are the model's own (its HTTP retry policy): ``run_many`` never calls an
item twice. With ``checkpoint="run.sqlite"`` every successful item is committed to a SQLite file as it
finishes (before it is reported done), and a re-run after a crash, a kill or Ctrl-C skips what is there.

    from chatclient.batch import run_many

    def extract(doc: str) -> Person:
        return client.prompt().user(doc).call().entity(Person)

    results = run_many(extract, documents, concurrency=32, checkpoint="people.sqlite")
    people = [r.value for r in results if r.ok]
    print(results.usage, [r.error for r in results if not r.ok])

For an input too large to hold, ``iter_many`` yields the same results one by one (memory stays flat:
at most a few windows of items are in flight). Usage is counted from every model call ``fn`` makes
through a ``ChatClient`` (the same meters a budget uses).
"""

from __future__ import annotations

from chatclient._lazy import lazy_getattr

from .many import aiter_many, arun_many, iter_many, run_many
from .results import ItemResult, RunResults

__all__ = [
    "AnthropicBatch",
    "BatchJob",
    "ItemResult",
    "OpenAIBatch",
    "RunResults",
    "aiter_many",
    "arun_many",
    "iter_many",
    "run_many",
]

__getattr__ = lazy_getattr(
    __name__,
    {
        "OpenAIBatch": "chatclient.batch.openai",
        "AnthropicBatch": "chatclient.batch.anthropic",
        "BatchJob": "chatclient.batch.jobs",
    },
    globals(),
)
