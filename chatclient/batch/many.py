"""``run_many`` and its kin: bounded, ordered bulk calls on one machine, with a checkpoint and a bar.

Threads run a plain ``fn``, tasks an ``async def``; at most ``4 * concurrency`` items are read
ahead, results leave in input order. A checkpoint item is committed by the worker that ran it
before it is reported done (``checkpoint.py``); Ctrl-C prints one line saying what is saved.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections import deque
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from chatclient.errors import BatchError
from chatclient.models.base import ChatResponse, Usage
from chatclient.progress import progress_bar, report_interrupt
from chatclient.usage_meter import metering

from .results import ItemResult, RunResults

if TYPE_CHECKING:
    from chatclient.models.base import ChatModel
    from chatclient.prompt import Prompt
    from chatclient.resilience.prices import PriceTable

    from .checkpoint import Checkpoint

__all__ = ["aiter_many", "arun_many", "iter_many", "run_many"]

T = TypeVar("T")


class _ItemMeter:
    """Adds up the usage of every model call one item makes (a ``UsageMeter``)."""

    __slots__ = ("calls", "cost", "prices", "usage")

    def __init__(self, prices: PriceTable | None) -> None:
        self.prices = prices
        self.usage = Usage()
        self.cost: float | None = 0.0 if prices is not None else None
        self.calls = 0

    def before_call(self, prompt: Prompt, model: ChatModel) -> None:
        return None

    def after_call(self, response: ChatResponse, model: ChatModel) -> None:
        usage = response.metadata.usage
        self.usage = self.usage + usage
        self.calls += 1
        if self.prices is not None and self.cost is not None:
            from chatclient.resilience._common import model_label

            cost = self.prices.cost(response.metadata.model or model_label(model), usage)
            self.cost = None if cost is None else self.cost + cost

    def result(self, index: int, value: Any, error: BaseException | None) -> ItemResult[Any]:
        usage: Usage | None = self.usage if self.calls else None
        if usage is None and isinstance(value, ChatResponse):  # a bare model call made by fn itself
            usage = value.metadata.usage
        return ItemResult(index, value, error, usage, self.cost if self.calls else None)


def _run_one(fn: Callable[[Any], Any], index: int, item: Any, prices: PriceTable | None) -> ItemResult[Any]:
    meter = _ItemMeter(prices)
    with metering(meter):
        try:
            value = fn(item)
        except Exception as exc:
            return meter.result(index, None, exc)
    return meter.result(index, value, None)


def _record(ckpt: Checkpoint | None, digest: bytes, result: ItemResult[Any]) -> ItemResult[Any]:
    """Commit a successful item to the checkpoint (before anyone sees it done)."""
    if ckpt is not None and digest and result.error is None:
        ckpt.add(result.index, digest, result.value, result.usage)
    return result


def _run_and_record(
    fn: Callable[[Any], Any], index: int, item: Any, prices: PriceTable | None, ckpt: Checkpoint | None, digest: bytes
) -> ItemResult[Any]:
    # In the worker thread: the item is durable before this worker takes another one, even if the
    # items before it in input order are still running (a kill then loses nothing that returned).
    return _record(ckpt, digest, _run_one(fn, index, item, prices))


async def _arun_one(fn: Callable[[Any], Any], index: int, item: Any, prices: PriceTable | None) -> ItemResult[Any]:
    meter = _ItemMeter(prices)
    with metering(meter):
        try:
            if _is_async(fn):
                value = await fn(item)
            else:
                value = await asyncio.to_thread(fn, item)  # the meter travels with the copied context
        except Exception as exc:
            return meter.result(index, None, exc)
    return meter.result(index, value, None)


def _is_async(fn: Any) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None))  # noqa: B004


def _check(fn: Any, concurrency: int) -> None:
    if not callable(fn):
        raise TypeError(f"run_many(fn, items): fn must be callable, got {type(fn).__name__}")
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ValueError(f"concurrency must be an int >= 1, got {concurrency!r}")


def _open_checkpoint(checkpoint: str | Path | Checkpoint | None, fn: Any) -> Checkpoint | None:
    if checkpoint is None:
        return None
    from .checkpoint import Checkpoint, function_fingerprint

    ckpt = checkpoint if isinstance(checkpoint, Checkpoint) else Checkpoint(checkpoint)
    ckpt.open(f"key:{ckpt.key}" if ckpt.key is not None else function_fingerprint(fn))
    return ckpt


class _Plan:
    """Items next to the checkpoint's finished rows: which to run and which are already done."""

    def __init__(self, ckpt: Checkpoint | None) -> None:
        self.ckpt = ckpt
        self.count = 0
        self._done = ckpt.done() if ckpt is not None else None
        self._row = next(self._done, None) if self._done is not None else None

    def entry(self, item: Any) -> tuple[int, bytes, ItemResult[Any] | None]:
        """The next item's (index, digest, stored result if the checkpoint has it)."""
        index = self.count
        self.count += 1
        ckpt, row = self.ckpt, self._row
        if ckpt is None or self._done is None:
            return index, b"", None
        from .checkpoint import item_digest

        digest = item_digest(item)
        if row is None or row[0] != index:
            return index, digest, None
        if row[1] != digest:
            raise BatchError(
                f"checkpoint {str(ckpt.path)!r} holds a different item at index {index}: it was written "
                "for another item list; pass a new checkpoint path, or delete the file to start over"
            )
        self._row = next(self._done, None)
        return index, digest, ItemResult(index, row[2], None, row[3])

    def finish(self) -> None:
        """Refuse a checkpoint holding finished items past the end of the items given."""
        if self.ckpt is not None and self._row is not None:
            raise BatchError(
                f"checkpoint {str(self.ckpt.path)!r} has a finished item at index {self._row[0]} but only "
                f"{self.count} items were given: it was written for another item list; pass a new checkpoint path"
            )

    def __call__(self, items: Iterable[Any]) -> Iterator[tuple[int, Any, bytes, ItemResult[Any] | None]]:
        for item in items:
            index, digest, done = self.entry(item)
            yield index, item, digest, done
        self.finish()

    async def acall(self, items: AsyncIterable[Any]) -> AsyncIterator[tuple[int, Any, bytes, ItemResult[Any] | None]]:
        async for item in items:
            index, digest, done = self.entry(item)
            yield index, item, digest, done
        self.finish()


def _total(items: Any) -> int | None:
    try:
        return len(items)
    except TypeError:
        return None


def iter_many(
    fn: Callable[[Any], T],
    items: Iterable[Any],
    *,
    concurrency: int = 16,
    progress: bool | None = True,
    checkpoint: str | Path | Checkpoint | None = None,
    prices: PriceTable | None = None,
    desc: str = "run_many",
) -> Iterator[ItemResult[T]]:
    """``run_many`` as a generator: yields each ``ItemResult`` in input order as soon as it and all before it are done.

    ``fn`` must be a plain function here (use ``aiter_many`` for ``async def``). Memory stays flat on
    any number of items: at most ``4 * concurrency`` are read ahead. Each finished item is committed to
    the checkpoint by its worker before it is yielded; closing the generator early (or Ctrl-C) lets the
    calls in flight finish in the background, and those are committed too.
    """
    _check(fn, concurrency)
    if _is_async(fn):
        raise TypeError("iter_many runs plain functions; for an async def use aiter_many (or run_many)")
    ckpt = _open_checkpoint(checkpoint, fn)
    plan = _Plan(ckpt)
    bar = _bar(items, desc, progress, ckpt)
    pool = ThreadPoolExecutor(concurrency, thread_name_prefix="run_many")
    window: deque[tuple[int, bytes, ItemResult[Any] | Future[ItemResult[Any]]]] = deque()
    limit = 4 * concurrency

    def finish(window: deque[tuple[int, bytes, ItemResult[Any] | Future[ItemResult[Any]]]]) -> ItemResult[Any]:
        # the oldest entry leaves the window only once done: Ctrl-C while waiting still sees it in flight
        _, _, slot = window[0]
        result = slot if isinstance(slot, ItemResult) else slot.result()
        window.popleft()
        if not isinstance(slot, ItemResult):  # a checkpoint's item counts in the bar's start, not as speed
            bar.update(1)
        return result

    def start(index: int, item: Any, digest: bytes) -> Future[ItemResult[Any]]:
        return pool.submit(_run_and_record, fn, index, item, prices, ckpt, digest)

    try:
        for index, item, digest, done in plan(items):
            window.append((index, digest, done if done is not None else start(index, item, digest)))
            while window and (len(window) > limit or _ready(window[0][2])):
                yield finish(window)
        while window:
            yield finish(window)
    except KeyboardInterrupt as exc:
        in_flight = sum(1 for _, _, slot in window if isinstance(slot, Future) and slot.running())
        report_interrupt(_interrupted_line(ckpt, plan.count, _total(items), in_flight), exc)
        raise
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
        for _, _, slot in window:
            if isinstance(slot, Future):
                slot.cancel()
        running = [slot for _, _, slot in window if isinstance(slot, Future) and not slot.done()]
        if ckpt is not None:
            _close_when_done(ckpt, running)
        bar.close()


def _close_when_done(ckpt: Checkpoint, running: list[Future[ItemResult[Any]]]) -> None:
    """Close the checkpoint now, or once the calls still in flight have finished and saved their items."""
    if not running:
        ckpt.close()
        return
    left = [len(running)]
    lock = threading.Lock()

    def one_done(_: Future[ItemResult[Any]]) -> None:
        with lock:
            left[0] -= 1
            last = left[0] == 0
        if last:
            ckpt.close()

    for future in running:
        future.add_done_callback(one_done)


def _bar(items: Any, desc: str, progress: bool | None, ckpt: Checkpoint | None) -> Any:
    """The run's bar; a resumed run starts at what the checkpoint holds and says so."""
    restored = ckpt.count() if ckpt is not None else 0
    postfix = f"{restored} from checkpoint" if restored else None
    return progress_bar(
        total=_total(items), desc=desc, unit="item", enabled=progress, initial=restored, postfix=postfix
    )


def _interrupted_line(ckpt: Checkpoint | None, seen: int, total: int | None, in_flight: int) -> str:
    """The one line Ctrl-C prints: what is saved and how to go on."""
    of = f" of {total}" if total is not None else ""
    if ckpt is None:
        return (
            f"run_many interrupted after starting {seen}{of} items; nothing was saved (pass "
            "checkpoint='run.sqlite' to make a run resumable)"
        )
    waiting = f"; waiting for {in_flight} call(s) in flight, which are saved too" if in_flight else ""
    return (
        f"run_many interrupted: {ckpt.count()}{of} items are saved in checkpoint {str(ckpt.path)!r}{waiting}. "
        "Run the same call again to resume: saved items are not called again."
    )


def _async_interrupted_line(checkpoint: str | Path | Checkpoint | None, total: int | None) -> str:
    """The Ctrl-C line of an ``async def`` run under ``run_many`` (the checkpoint is closed by then)."""
    if checkpoint is None:
        return "run_many interrupted; nothing was saved (pass checkpoint='run.sqlite' to make a run resumable)"
    from .checkpoint import Checkpoint

    path = checkpoint.path if isinstance(checkpoint, Checkpoint) else Path(checkpoint)
    of = f" of {total}" if total is not None else ""
    return (
        f"run_many interrupted: {Checkpoint.saved(path)}{of} items are saved in checkpoint {str(path)!r}. "
        "Run the same call again to resume: saved items are not called again."
    )


def _ready(slot: ItemResult[Any] | Future[ItemResult[Any]] | asyncio.Task[ItemResult[Any]]) -> bool:
    """Whether a window slot can leave: a saved item, or a call (thread or task) that has finished."""
    return isinstance(slot, ItemResult) or slot.done()


async def aiter_many(
    fn: Callable[[Any], Awaitable[T]] | Callable[[Any], T],
    items: Iterable[Any] | AsyncIterable[Any],
    *,
    concurrency: int = 16,
    progress: bool | None = True,
    checkpoint: str | Path | Checkpoint | None = None,
    prices: PriceTable | None = None,
    desc: str = "run_many",
) -> AsyncIterator[ItemResult[T]]:
    """``iter_many`` for async code: tasks for an ``async def fn`` (a plain ``fn`` runs in worker threads).

    ``items`` may be an async iterable (read as the run goes, like an iterator in ``iter_many``).
    """
    _check(fn, concurrency)
    ckpt = _open_checkpoint(checkpoint, fn)
    plan = _Plan(ckpt)
    bar = _bar(items, desc, progress, ckpt)
    gate = asyncio.Semaphore(concurrency)
    window: deque[tuple[bytes, ItemResult[Any] | asyncio.Task[ItemResult[Any]]]] = deque()
    limit = 4 * concurrency

    async def run(index: int, item: Any, digest: bytes) -> ItemResult[Any]:
        async with gate:
            return _record(ckpt, digest, await _arun_one(fn, index, item, prices))

    async def finish(entry: tuple[bytes, ItemResult[Any] | asyncio.Task[ItemResult[Any]]]) -> ItemResult[Any]:
        _, slot = entry
        if isinstance(slot, ItemResult):
            return slot  # from the checkpoint: already counted by the bar's start, not as speed
        result = await slot
        bar.update(1)
        return result

    try:
        entries = plan.acall(items) if isinstance(items, AsyncIterable) else _as_async(plan(items))
        async for index, item, digest, done in entries:
            window.append((digest, done if done is not None else asyncio.ensure_future(run(index, item, digest))))
            while window and (len(window) > limit or _ready(window[0][1])):
                yield await finish(window.popleft())
        while window:
            yield await finish(window.popleft())
    except KeyboardInterrupt as exc:
        report_interrupt(_interrupted_line(ckpt, plan.count, _total(items), 0), exc)
        raise
    finally:
        for _, slot in window:
            if isinstance(slot, asyncio.Task):
                slot.cancel()
        if ckpt is not None:
            ckpt.close()
        bar.close()


async def _as_async(entries: Iterator[Any]) -> AsyncIterator[Any]:
    for entry in entries:
        yield entry


def run_many(
    fn: Callable[[Any], T] | Callable[[Any], Awaitable[T]],
    items: Iterable[Any],
    *,
    concurrency: int = 16,
    progress: bool | None = True,
    checkpoint: str | Path | Checkpoint | None = None,
    prices: PriceTable | None = None,
    desc: str = "run_many",
) -> RunResults:
    """Call ``fn(item)`` for every item, at most ``concurrency`` at a time; results in input order.

    ``fn`` may be a plain function (run in threads) or an ``async def`` (run as tasks on a private
    event loop; inside async code ``await arun_many(...)`` instead). ``progress`` shows a bar on
    stderr (``None``: only on a terminal). ``checkpoint`` is a SQLite file path: successful items are
    written to it as they finish and skipped (their stored value returned) when the run is repeated;
    failed items run again. ``prices`` (a ``PriceTable``) fills each item's ``cost``.

    Raises ``BatchError`` when the checkpoint belongs to another function or item list.
    """
    if _is_async(fn):
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            try:
                return asyncio.run(
                    arun_many(
                        fn,
                        items,
                        concurrency=concurrency,
                        progress=progress,
                        checkpoint=checkpoint,
                        prices=prices,
                        desc=desc,
                    )
                )
            except KeyboardInterrupt as exc:  # asyncio.run cancelled the run, then re-raised Ctrl-C
                report_interrupt(_async_interrupted_line(checkpoint, _total(items)), exc)
                raise
        raise TypeError("run_many was called inside a running event loop: use `await arun_many(...)` there")
    return RunResults(
        iter_many(
            fn,
            items,
            concurrency=concurrency,
            progress=progress,
            checkpoint=checkpoint,
            prices=prices,
            desc=desc,
        )
    )


async def arun_many(
    fn: Callable[[Any], Awaitable[T]] | Callable[[Any], T],
    items: Iterable[Any] | AsyncIterable[Any],
    *,
    concurrency: int = 16,
    progress: bool | None = True,
    checkpoint: str | Path | Checkpoint | None = None,
    prices: PriceTable | None = None,
    desc: str = "run_many",
) -> RunResults:
    """``run_many`` for async code."""
    results = RunResults()
    async for r in aiter_many(
        fn, items, concurrency=concurrency, progress=progress, checkpoint=checkpoint, prices=prices, desc=desc
    ):
        results.append(r)
    return results
