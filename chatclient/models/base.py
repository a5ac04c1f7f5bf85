"""Model-side types: responses, usage, capabilities, the ChatModel protocol and a base class.

``BaseChatModel`` lets a provider implement only what it natively has (say ``call`` and
``stream``); the missing modes are derived: streaming from a call as a single chunk, async from
sync in a worker thread, sync from async on a private event loop.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol, runtime_checkable

from chatclient.messages import AssistantMessage, ToolCall
from chatclient.options import ChatOptions
from chatclient.prompt import Prompt

_EMPTY: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts of one or more model calls; ``+`` sums them.

    The same rule holds for every provider: ``prompt_tokens`` is the whole input, cached tokens
    included; ``cached_input_tokens`` (read from a prompt cache) and ``cache_write_tokens`` (written
    to it) are the parts of it that the provider reported; ``reasoning_tokens`` is the part of
    ``completion_tokens`` spent thinking. ``reported_total_tokens`` keeps the server's own total
    when it differs from prompt + completion (some providers count more in it); ``total_tokens``
    prefers it.
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_input_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    reported_total_tokens: int | None = None

    @property
    def total_tokens(self) -> int:
        if self.reported_total_tokens is not None:
            return self.reported_total_tokens
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        reported = None
        if self.reported_total_tokens is not None or other.reported_total_tokens is not None:
            reported = self.total_tokens + other.total_tokens
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.cached_input_tokens + other.cached_input_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
            self.reasoning_tokens + other.reasoning_tokens,
            reported,
        )

    def is_empty(self) -> bool:
        return (
            self.prompt_tokens == 0
            and self.completion_tokens == 0
            and self.cached_input_tokens == 0
            and self.cache_write_tokens == 0
            and self.reasoning_tokens == 0
            and not self.reported_total_tokens
        )


@dataclass(frozen=True, slots=True)
class GenerationMetadata:
    """Per-generation metadata; ``finish_reason`` is e.g. ``"stop"``, ``"length"``, ``"tool_calls"``."""

    finish_reason: str | None = None
    extra: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)


@dataclass(frozen=True, slots=True)
class Generation:
    """One candidate answer of the model."""

    output: AssistantMessage
    metadata: GenerationMetadata = field(default_factory=GenerationMetadata)

    @property
    def finish_reason(self) -> str | None:
        return self.metadata.finish_reason


@dataclass(frozen=True, slots=True)
class ChatResponseMetadata:
    """Response-level metadata: provider id, model name, usage and anything else (``extra``)."""

    id: str | None = None
    model: str | None = None
    usage: Usage = field(default_factory=Usage)
    extra: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)


@dataclass(frozen=True, slots=True)
class ChatResponse:
    """A model's answer (or, while streaming, one delta of it)."""

    generations: tuple[Generation, ...] = ()
    metadata: ChatResponseMetadata = field(default_factory=ChatResponseMetadata)

    def __post_init__(self) -> None:
        object.__setattr__(self, "generations", tuple(self.generations))

    @property
    def result(self) -> Generation | None:
        """The first generation, if any."""
        return self.generations[0] if self.generations else None

    @property
    def text(self) -> str | None:
        """The first generation's text, or ``None``."""
        g = self.result
        return g.output.text if g is not None else None

    def has_tool_calls(self) -> bool:
        return any(g.output.tool_calls for g in self.generations)

    def has_finish_reason(self) -> bool:
        return any(g.metadata.finish_reason for g in self.generations)

    @classmethod
    def of_text(
        cls, text: str | None, *, finish_reason: str | None = "stop", usage: Usage | None = None, **extra: Any
    ) -> ChatResponse:
        """A one-generation response with the given text (handy for short-circuiting advisors)."""
        return cls(
            (Generation(AssistantMessage(text), GenerationMetadata(finish_reason)),),
            ChatResponseMetadata(usage=usage or Usage(), extra=MappingProxyType(extra) if extra else _EMPTY),
        )

    def with_metadata(self, **extra: Any) -> ChatResponse:
        """A copy whose metadata ``extra`` also holds the given keys."""
        md = self.metadata
        merged = MappingProxyType({**md.extra, **extra})
        return ChatResponse(self.generations, ChatResponseMetadata(md.id, md.model, md.usage, merged))

    def with_usage(self, usage: Usage) -> ChatResponse:
        md = self.metadata
        return ChatResponse(self.generations, ChatResponseMetadata(md.id, md.model, usage, md.extra))


@dataclass(frozen=True, slots=True)
class ModelCapabilities:
    """What a model can do natively; the client uses this to pick structured-output modes."""

    native_structured_output: bool = False
    tools: bool = True
    streaming: bool = True
    vision: bool = False


@runtime_checkable
class ChatModel(Protocol):
    """Anything that can answer a prompt, in any of the four modes."""

    default_options: ChatOptions | None
    capabilities: ModelCapabilities

    def call(self, prompt: Prompt) -> ChatResponse: ...

    def stream(self, prompt: Prompt) -> Iterator[ChatResponse]: ...

    async def acall(self, prompt: Prompt) -> ChatResponse: ...

    def astream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]: ...


def _overrides(obj: object, name: str) -> bool:
    return getattr(type(obj), name) is not getattr(BaseChatModel, name)


def run_sync(coro: Any) -> Any:
    """Run a coroutine to completion from sync code, even when an event loop is already running here."""
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    box: dict[str, Any] = {}

    def runner() -> None:
        try:
            box["value"] = asyncio.run(coro)
        except BaseException as exc:
            box["error"] = exc

    t = threading.Thread(target=runner, name="chatclient-run-sync")
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


class BaseChatModel:
    """Base class for chat models: implement ``call`` or ``acall`` (and optionally the streams).

    Missing modes are derived so that every model serves all four.
    """

    default_options: ChatOptions | None = None
    capabilities: ModelCapabilities = ModelCapabilities()

    def call(self, prompt: Prompt) -> ChatResponse:
        if _overrides(self, "acall"):
            return run_sync(self.acall(prompt))  # type: ignore[no-any-return]
        if _overrides(self, "stream"):
            return aggregate(self.stream(prompt))
        raise NotImplementedError(f"{type(self).__name__} implements neither call() nor acall()")

    async def acall(self, prompt: Prompt) -> ChatResponse:
        import asyncio

        if _overrides(self, "call") or _overrides(self, "stream"):
            return await asyncio.to_thread(self.call, prompt)
        if _overrides(self, "astream"):
            return await aaggregate(self.astream(prompt))
        raise NotImplementedError(f"{type(self).__name__} implements neither call() nor acall()")

    def stream(self, prompt: Prompt) -> Iterator[ChatResponse]:
        # A model without native streaming answers in one chunk.
        yield self.call(prompt)

    async def astream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
        if _overrides(self, "stream") and not _overrides(self, "acall"):
            import asyncio

            iterator = iter(self.stream(prompt))
            done = object()
            while True:
                chunk = await asyncio.to_thread(next, iterator, done)
                if chunk is done:
                    return
                yield chunk  # type: ignore[misc]
        yield await self.acall(prompt)


# -- stream aggregation ---------------------------------------------------------------------------


class ResponseAggregator:
    """Rebuild one ``ChatResponse`` from streamed deltas.

    Text is concatenated; tool-call deltas are assembled (a delta with a known or empty id extends
    the call it belongs to, a new id starts a call); the last non-empty usage, id, model, finish
    reason and metadata are kept.
    """

    __slots__ = ("_calls", "_extra", "_finish", "_gen_extra", "_id", "_model", "_seen_text", "_text", "_usage")

    def __init__(self) -> None:
        self._text: list[str] = []
        self._seen_text = False
        self._calls: list[list[str]] = []  # [id, name, arguments]
        self._finish: str | None = None
        self._gen_extra: Mapping[str, Any] = _EMPTY
        self._id: str | None = None
        self._model: str | None = None
        self._usage = Usage()
        self._extra: dict[str, Any] = {}

    def add(self, chunk: ChatResponse | None) -> None:
        if chunk is None:
            return
        g = chunk.result
        if g is not None:
            if g.output.text is not None:
                self._seen_text = True
                self._text.append(g.output.text)
            for call in g.output.tool_calls:
                self._add_call(call)
            if g.metadata.finish_reason:
                self._finish = g.metadata.finish_reason
            if g.metadata.extra:
                self._gen_extra = g.metadata.extra
        md = chunk.metadata
        if md.id:
            self._id = md.id
        if md.model:
            self._model = md.model
        if not md.usage.is_empty():
            self._usage = md.usage
        if md.extra:
            self._extra.update(md.extra)

    def _add_call(self, call: ToolCall) -> None:
        for existing in self._calls:
            if call.id and existing[0] == call.id:
                existing[1] += call.name if not existing[1] else ""
                existing[2] += call.arguments
                return
        if not call.id and self._calls:
            last = self._calls[-1]
            if call.name and not last[1]:
                last[1] = call.name
            last[2] += call.arguments
            return
        self._calls.append([call.id, call.name, call.arguments])

    def result(self) -> ChatResponse:
        text = "".join(self._text) if self._seen_text else None
        calls = tuple(ToolCall(i, n, a) for i, n, a in self._calls)
        gen = Generation(AssistantMessage(text, calls), GenerationMetadata(self._finish, self._gen_extra))
        extra = MappingProxyType(dict(self._extra)) if self._extra else _EMPTY
        return ChatResponse((gen,), ChatResponseMetadata(self._id, self._model, self._usage, extra))


def aggregate(chunks: Iterable[ChatResponse]) -> ChatResponse:
    """Aggregate a whole stream into one response."""
    agg = ResponseAggregator()
    for c in chunks:
        agg.add(c)
    return agg.result()


async def aaggregate(chunks: AsyncIterator[ChatResponse]) -> ChatResponse:
    agg = ResponseAggregator()
    async for c in chunks:
        agg.add(c)
    return agg.result()
