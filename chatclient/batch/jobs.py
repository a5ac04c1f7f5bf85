"""What the provider batch APIs share: building each line from a request spec, jobs, waiting, results.

``submit`` runs each spec's advisor chain up to the model (every advisor's ``before``, the
structured-output choice of ``entity=``) against a stand-in model that stops the run there, and
asks the spec's own provider model for the body it would POST: each line is the body the same
synchronous call sends. Results come back by ``custom_id`` (``item-<index>``), are parsed by the
provider model's own response parser and converted to ``entity``; an item without an answer gets a
``BatchItemError`` naming why (errored, expired, canceled).

A submission larger than the vendor's limits (lines or bytes per job) becomes several jobs; the
``BatchJob`` id is then their ids joined by commas, and ``attach`` takes that id back.
"""

from __future__ import annotations

import re
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from chatclient.errors import BatchError, BatchItemError, BatchTimeoutError
from chatclient.models.base import BaseChatModel, ChatResponse
from chatclient.progress import progress_bar, report_interrupt

from .results import ItemResult

if TYPE_CHECKING:
    from chatclient.client import ChatClientRequestSpec
    from chatclient.models.http.chat_model import HTTPChatModel
    from chatclient.models.http.transport import HTTPTransport
    from chatclient.prompt import Prompt

    from ._http import BatchHTTP

__all__ = ["BatchAPI", "BatchJob", "custom_id", "index_of"]

_ID = re.compile(r"item-(\d{1,12})")


def custom_id(index: int) -> str:
    """The ``custom_id`` of the item at ``index``."""
    return f"item-{index}"


def index_of(cid: Any, total: int, *, first: int = 0, job_id: str = "") -> int:
    """The item index of ``cid`` in the results of a part holding items ``first .. first + total - 1``.

    Anything else (an id this part never sent, or no ``item-<n>`` at all) is a ``BatchItemError``
    of kind ``"unknown"`` naming it: never guessed onto an item.
    """
    match = _ID.fullmatch(cid) if isinstance(cid, str) else None
    if match is None or not first <= int(match.group(1)) < first + total:
        sent = f"item-{first} .. item-{first + total - 1}" if total else "no items"
        where = f" of batch job {job_id!r}" if job_id else ""
        raise BatchItemError(
            f"the results file{where} names custom_id {str(cid)[:80]!r}, which was never sent there (it sent "
            f"{sent}); refusing to guess which item it belongs to",
            kind="unknown",
            custom_id=str(cid)[:80],
        )
    return int(match.group(1))


class _Captured(BaseException):
    """Raised by the stand-in model with the prompt the chain would send (BaseException: no advisor swallows it)."""

    def __init__(self, prompt: Prompt) -> None:
        super().__init__("captured")
        self.prompt = prompt


class _StopBeforeModel(BaseChatModel):
    """Looks like the spec's model to the chain (capabilities, options) and stops the run at the model."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.capabilities = real.capabilities
        self.default_options = getattr(real, "default_options", None)

    def call(self, prompt: Prompt) -> ChatResponse:
        raise _Captured(prompt)

    async def acall(self, prompt: Prompt) -> ChatResponse:
        raise _Captured(prompt)

    def stream(self, prompt: Prompt) -> Iterator[ChatResponse]:
        raise _Captured(prompt)

    async def astream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
        raise _Captured(prompt)
        yield  # pragma: no cover


def prepared_prompt(spec: ChatClientRequestSpec, entity: Any) -> tuple[Prompt, Any]:
    """The prompt ``spec`` would send its model (after every advisor's ``before``), and that model."""
    from chatclient.client import ChatClientRequestSpec

    if not isinstance(spec, ChatClientRequestSpec):
        raise TypeError(f"submit() takes request specs (client.prompt(...) without .call()), got {type(spec).__name__}")
    real = spec._model
    stand_in = ChatClientRequestSpec(_StopBeforeModel(real), spec._state.copy())
    try:
        call = stand_in.call()
        if entity is None:
            call.chat_client_response()
        else:
            call.entity(entity)
    except _Captured as captured:
        return captured.prompt, real
    raise BatchError("an advisor answered this request without calling the model, so there is nothing to batch")


class BatchAPI(ABC):
    """Base of ``OpenAIBatch`` and ``AnthropicBatch``: the provider model, limits, submit/attach."""

    provider: ClassVar[str] = ""
    model_type: ClassVar[str] = ""
    default_max_lines: ClassVar[int] = 50_000
    default_max_bytes: ClassVar[int] = 200 * 1024 * 1024

    def __init__(
        self,
        model: HTTPChatModel,
        *,
        max_lines: int | None = None,
        max_bytes: int | None = None,
        max_download_bytes: int = 2 * 1024**3,
    ) -> None:
        self._check_model(model)
        self.model = model
        self.max_lines = max_lines or self.default_max_lines
        self.max_bytes = max_bytes or self.default_max_bytes
        self.max_download_bytes = max_download_bytes

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model!r})"

    @abstractmethod
    def _check_model(self, model: Any) -> None: ...

    @property
    def transport(self) -> HTTPTransport:
        """The provider model's HTTP transport (base URL, key, retry policy)."""
        transport: HTTPTransport = self.model._http
        return transport

    @property
    def http(self) -> BatchHTTP:
        from ._http import BatchHTTP

        return BatchHTTP(self.transport, max_download_bytes=self.max_download_bytes)

    def encode(self, body: dict[str, Any]) -> bytes:
        """``body`` as the exact bytes a synchronous call sends."""
        encoded: Any = self.transport._encode(body)
        # newer transports answer (bytes, content type) so that multipart bodies can be sent too
        data: bytes = encoded[0] if isinstance(encoded, tuple) else encoded
        return data

    def _id_in(self, answer: Any, what: str) -> str:
        """The ``id`` of the object the provider answered with (``what`` names it in the ``BatchError`` when missing)."""
        found = answer.get("id") if isinstance(answer, dict) else None
        if not isinstance(found, str):
            raise BatchError(f"{self.provider} did not return {what} (got {str(answer)[:200]!r})")
        return found

    # -- building lines -------------------------------------------------------------------------------

    def body_for(self, spec: ChatClientRequestSpec, entity: Any = None) -> dict[str, Any]:
        """The request body ``spec`` would POST synchronously (advisors' ``before`` applied)."""
        prompt, real = prepared_prompt(spec, entity)
        builder = real if hasattr(real, "build_body") else self.model
        body: dict[str, Any] = builder.build_body(prompt, stream=False)
        return body

    def _groups(self, lines: list[tuple[str, bytes]]) -> list[list[tuple[str, bytes]]]:
        groups: list[list[tuple[str, bytes]]] = [[]]
        size = 0
        for cid, line in lines:
            if len(line) + 1 > self.max_bytes:
                raise BatchError(
                    f"{cid}: its request is {len(line)} bytes, more than the {self.provider} limit of {self.max_bytes} "
                    "bytes per batch file; shorten that item"
                )
            if groups[-1] and (len(groups[-1]) >= self.max_lines or size + len(line) + 1 > self.max_bytes):
                groups.append([])
                size = 0
            groups[-1].append((cid, line))
            size += len(line) + 1
        return groups

    def submit(self, specs: Iterable[ChatClientRequestSpec], *, entity: Any = None) -> BatchJob:
        """Send every spec's request as one batch (several jobs past the vendor's limits); a ``BatchJob``."""
        lines = [(custom_id(i), self._line(custom_id(i), self.body_for(spec, entity))) for i, spec in enumerate(specs)]
        if not lines:
            raise ValueError("submit() needs at least one request spec")
        parts: list[str] = []
        sizes: list[int | None] = []
        first = 0
        for group in self._groups(lines):
            parts.append(self._create(group, first))
            sizes.append(len(group))
            first += len(group)
        return BatchJob(self, parts, entity, sizes=sizes)

    def attach(self, job_id: str, *, entity: Any = None) -> BatchJob:
        """The job ``job_id`` (from ``BatchJob.id``, possibly in another process).

        ``BatchJob.id`` carries how many items each provider job holds (``batch_abc:200``), so the
        results are keyed by what was submitted. A bare provider id (``batch_abc``, say from the
        provider's console) is accepted too; its item count is then the provider's own report.
        """
        if not isinstance(job_id, str) or not job_id.strip():
            raise ValueError(f"attach() needs the id of a submitted job (BatchJob.id), got {job_id!r}")
        parts: list[str] = []
        sizes: list[int | None] = []
        for piece in (p.strip() for p in job_id.split(",")):
            if not piece:
                continue
            part, sep, count = piece.rpartition(":")
            if not sep:
                part, size = piece, None
            elif count.isdigit() and part and len(count) <= 9:
                size = int(count)
            else:
                raise ValueError(
                    f"attach(): {piece[:80]!r} is not a job id from BatchJob.id (a provider id, optionally "
                    "followed by ':' and its item count)"
                )
            parts.append(part)
            sizes.append(size)
        return BatchJob(self, parts, entity, sizes=sizes)

    def parse(self, payload: Any) -> ChatResponse:
        """A result body as the provider model parses a synchronous answer."""
        response: ChatResponse = self.model._parse(payload)
        return response

    # -- provider hooks ----------------------------------------------------------------------------------

    @abstractmethod
    def _line(self, cid: str, body: dict[str, Any]) -> bytes: ...

    @abstractmethod
    def _create(self, lines: list[tuple[str, bytes]], first: int) -> str: ...

    @abstractmethod
    def _retrieve(self, part: str) -> dict[str, Any]: ...

    @abstractmethod
    def _status(self, info: dict[str, Any]) -> str: ...

    @abstractmethod
    def _finished(self, info: dict[str, Any]) -> bool: ...

    @abstractmethod
    def _counts(self, info: dict[str, Any]) -> tuple[int, int]:
        """(finished, total) requests of one part."""

    @abstractmethod
    def _cancel(self, part: str) -> None: ...

    @abstractmethod
    def _results(self, part: str, info: dict[str, Any]) -> Iterator[tuple[Any, ChatResponse | BaseException]]:
        """(custom_id, response or the item's error) for every line of the part's results."""

    def _failure(self, part: str, info: dict[str, Any]) -> str | None:
        """Why the whole part failed (a rejected input file), or ``None``."""
        return None

    def _missing(self, info: dict[str, Any]) -> str:
        """Why an item of this part has no result line (``expired``, ``canceled`` or ``missing``)."""
        return "missing"


class BatchJob:
    """A submitted batch: ``id``, ``status()``, ``wait()``, ``cancel()``, ``results()``."""

    def __init__(
        self, api: BatchAPI, parts: Sequence[str], entity: Any = None, *, sizes: Sequence[int | None] | None = None
    ) -> None:
        if not parts:
            raise ValueError("a batch job needs at least one provider job id")
        self.api = api
        self.parts = list(parts)
        self.entity = entity
        # how many items each part was submitted with (None: unknown, a bare provider id was attached)
        self.sizes: list[int | None] = list(sizes) if sizes is not None else [None] * len(self.parts)
        if len(self.sizes) != len(self.parts):
            raise ValueError("sizes= needs one item count per provider job id")
        self._infos: dict[str, dict[str, Any]] = {}

    def __setstate__(self, state: dict[str, Any]) -> None:
        # a job pickled before item counts were kept has none: the provider's counts stand in
        state.setdefault("sizes", [None] * len(state.get("parts", ())))
        self.__dict__.update(state)

    @property
    def id(self) -> str:
        """The job id to keep (``attach(id)`` takes it back): each provider job id with its item count
        (``batch_abc:200``), comma-joined when the submission was split. ``parts`` holds the bare ids."""
        return ",".join(p if n is None else f"{p}:{n}" for p, n in zip(self.parts, self.sizes, strict=True))

    def _sizes(self, infos: list[dict[str, Any]]) -> list[int]:
        """Items per part: as submitted; the provider's reported total only where the id did not say."""
        return [n if n is not None else self.api._counts(i)[1] for n, i in zip(self.sizes, infos, strict=True)]

    def __repr__(self) -> str:
        return f"BatchJob({self.id!r}, {type(self.api).__name__})"

    def refresh(self) -> list[dict[str, Any]]:
        """Fetch every part's provider object once more."""
        self._infos = {p: self.api._retrieve(p) for p in self.parts}
        return list(self._infos.values())

    def _info(self) -> list[dict[str, Any]]:
        return [self._infos[p] for p in self.parts] if len(self._infos) == len(self.parts) else self.refresh()

    def status(self) -> str:
        """The provider's status string (of the first unfinished part when the job was split)."""
        infos = self.refresh()
        for info in infos:
            if not self.api._finished(info):
                return self.api._status(info)
        return self.api._status(infos[-1])

    def done(self) -> bool:
        """True when every part has ended (finished, failed, expired or canceled)."""
        return all(self.api._finished(i) for i in self.refresh())

    def wait(self, poll_interval: float = 10.0, timeout: float | None = None, progress: bool | None = True) -> BatchJob:
        """Poll until the job ends; ``BatchTimeoutError`` after ``timeout`` seconds (the job keeps running)."""
        if poll_interval <= 0:
            raise ValueError(f"poll_interval must be > 0, got {poll_interval!r}")
        start = time.monotonic()
        infos = self.refresh()
        total = sum(self._sizes(infos))
        bar = progress_bar(total=total or None, desc=f"batch {self.parts[0][:24]}", unit="req", enabled=progress)
        try:
            while True:
                # the provider's counts only move the bar; they never decide which results exist
                done = min(total, sum(self.api._counts(i)[0] for i in infos))
                if done > bar.n:
                    bar.update(done - bar.n)
                if all(self.api._finished(i) for i in infos):
                    self._raise_failures(infos)
                    return self
                if timeout is not None and time.monotonic() - start + poll_interval > timeout:
                    left = timeout - (time.monotonic() - start)
                    if left > 0:
                        time.sleep(left)
                        infos = self.refresh()
                        if all(self.api._finished(i) for i in infos):
                            return self
                    raise BatchTimeoutError(self.id, timeout)
                time.sleep(poll_interval)
                infos = self.refresh()
        except KeyboardInterrupt as exc:
            bar.close()
            report_interrupt(
                f"batch wait interrupted: job {self.id!r} keeps running at the provider (nothing is lost); "
                f"resume with attach({self.id!r}).wait(), or cancel() it",
                exc,
            )
            raise
        finally:
            bar.close()

    def _raise_failures(self, infos: list[dict[str, Any]]) -> None:
        for part, info in zip(self.parts, infos, strict=True):
            why = self.api._failure(part, info)
            if why is not None:
                raise BatchError(why)

    def cancel(self) -> None:
        """Ask the provider to cancel every unfinished part (finished items keep their results)."""
        for part, info in zip(self.parts, self.refresh(), strict=True):
            if not self.api._finished(info):
                self.api._cancel(part)

    def results(self) -> list[ItemResult[Any]]:
        """One ``ItemResult`` per submitted spec, in input order (the job must have ended).

        A failed request, an expired or canceled one, or an answer that does not convert to the
        entity is that item's ``error``; ``usage`` is the item's own. The items are the ones submitted
        (``sizes``), whatever counts the provider reports: a submitted item absent from the results
        is an error entry naming its ``custom_id``; a results line naming an item this job never sent
        raises ``BatchItemError`` (kind ``"unknown"``).
        """
        infos = self.refresh()
        unfinished = [p for p, i in zip(self.parts, infos, strict=True) if not self.api._finished(i)]
        if unfinished:
            raise BatchError(
                f"batch job {self.id!r} has not ended yet (status {self.api._status(self._infos[unfinished[0]])!r}); "
                "call wait() first"
            )
        self._raise_failures(infos)
        sizes = self._sizes(infos)
        slots: list[ItemResult[Any] | None] = [None] * sum(sizes)
        converter = None
        if self.entity is not None:
            from chatclient.converters import converter_for

            converter = converter_for(self.entity)
        why_missing: list[str] = []
        first = 0
        # keyed by the custom_ids each part was submitted with: parts hold consecutive items in order
        for part, info, size in zip(self.parts, infos, sizes, strict=True):
            for cid, outcome in self.api._results(part, info):
                index = index_of(cid, size, first=first, job_id=self.id)
                if slots[index] is not None:
                    raise BatchError(f"the results of batch job {self.id!r} name {cid!r} twice")
                slots[index] = self._item(index, outcome, converter)
            why_missing.extend([self.api._missing(info)] * size)
            first += size
        out: list[ItemResult[Any]] = []
        for index, slot in enumerate(slots):
            if slot is None:
                kind = why_missing[index]
                slot = ItemResult(
                    index,
                    None,
                    BatchItemError(
                        f"{custom_id(index)} of batch job {self.id!r} has no answer in the results: {kind}",
                        kind=kind,
                        custom_id=custom_id(index),
                    ),
                )
            out.append(slot)
        return out

    def _item(self, index: int, outcome: ChatResponse | BaseException, converter: Any) -> ItemResult[Any]:
        if isinstance(outcome, BaseException):
            return ItemResult(index, None, outcome)
        usage = outcome.metadata.usage
        if converter is None:
            return ItemResult(index, outcome, None, usage)
        from chatclient.converters.core import explain_conversion
        from chatclient.models.structured_output import tool_answer

        try:
            return ItemResult(index, explain_conversion(converter, tool_answer(outcome)), None, usage)
        except Exception as exc:  # a failed conversion is that item's error (no re-ask inside a batch)
            return ItemResult(index, None, exc, usage)
