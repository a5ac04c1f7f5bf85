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

from chatclient.messages import AssistantMessage, Citation, HostedToolCall, Reasoning, ToolCall
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
        for g in self.generations:  # noqa: SIM110 - a plain loop: runs for every chunk in every advisor
            if g.metadata.finish_reason:
                return True
        return False

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


_CONSTRAINED_RUNGS = ("native", "json_object", "tool")


@dataclass(frozen=True, slots=True)
class ModelCapabilities:
    """What a model can do natively; the client uses this to pick structured-output modes.

    ``structured_output`` lists the ways the model can be held to a JSON schema, best first (the
    structured-output ladder of ``chatclient.models.structured_output``): ``"native"`` (the
    provider's own schema mode), ``"json_object"`` (JSON mode with the schema attached) and
    ``"tool"`` (a synthetic tool whose parameters are the schema, forced with ``tool_choice``).
    Prompt instructions are always the last resort and are not listed. Left as ``None`` it is
    ``("native",)`` when ``native_structured_output`` is true, else empty; giving it sets
    ``native_structured_output`` to whether any rung is listed. ``logprobs``: the model reports
    token log-probabilities (``logprobs`` / ``top_logprobs`` in ``ChatOptions.extra``) in each
    generation's ``metadata.extra["logprobs"]``, in OpenAI's shape; decision models need it.
    ``context_window``: input + output tokens the model accepts; ``None`` falls back to the dated
    table in ``chatclient.tokens`` (``context_window(model)``).
    """

    native_structured_output: bool = False
    tools: bool = True
    streaming: bool = True
    vision: bool = False
    structured_output: tuple[str, ...] | None = None
    logprobs: bool = False
    context_window: int | None = None

    def __post_init__(self) -> None:
        rungs = self.structured_output
        if rungs is None:
            object.__setattr__(self, "structured_output", ("native",) if self.native_structured_output else ())
            return
        if isinstance(rungs, str):
            raise TypeError("structured_output must be a tuple of rung names, e.g. ('native', 'json_object')")
        rungs = tuple(rungs)
        for rung in rungs:
            if rung not in _CONSTRAINED_RUNGS:
                raise ValueError(
                    f"unknown structured-output rung {rung!r}; use some of {', '.join(map(repr, _CONSTRAINED_RUNGS))}"
                )
        object.__setattr__(self, "structured_output", rungs)
        object.__setattr__(self, "native_structured_output", bool(rungs))


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


class _ChoiceAggregate:
    """The deltas of one choice (generation index) of a stream, merged."""

    __slots__ = (
        "calls",
        "citations",
        "extra",
        "finish",
        "hosted",
        "metadata",
        "reasoning",
        "refusal",
        "seen_text",
        "text",
    )

    def __init__(self) -> None:
        self.text: list[str] = []
        self.seen_text = False
        self.calls: list[list[Any]] = []  # [id, name, arguments, metadata dict]
        self.reasoning: list[list[Any]] = []  # [text parts, signature, redacted, provider]
        self.refusal: list[str] | None = None
        self.finish: str | None = None
        self.extra: dict[str, Any] = {}
        self.metadata: dict[str, Any] = {}
        self.hosted: list[HostedToolCall] = []
        self.citations: list[Citation] = []

    def add(self, g: Generation) -> None:
        out = g.output
        if out.text is not None:
            self.seen_text = True
            self.text.append(out.text)
        for call in out.tool_calls:
            self._add_call(call)
        for r in out.reasoning:
            self._add_reasoning(r)
        if out.refusal is not None:
            if self.refusal is None:
                self.refusal = []
            self.refusal.append(out.refusal)
        if out.metadata:
            self.metadata.update(out.metadata)
        if out.hosted_tool_calls:
            self.hosted.extend(out.hosted_tool_calls)
        if out.citations:
            self.citations.extend(out.citations)
        if g.metadata.finish_reason:
            self.finish = g.metadata.finish_reason
        if g.metadata.extra:
            self.extra.update(g.metadata.extra)

    def _add_call(self, call: ToolCall) -> None:
        target: list[Any] | None = None
        for existing in self.calls:
            if call.id and existing[0] == call.id:
                target = existing
                break
        if target is None and not call.id and self.calls:
            target = self.calls[-1]
        if target is None:
            self.calls.append([call.id, call.name, call.arguments, dict(call.metadata) if call.metadata else None])
            return
        if call.name and not target[1]:
            target[1] = call.name
        target[2] += call.arguments
        if call.metadata:
            target[3] = {**(target[3] or {}), **call.metadata}

    def _add_reasoning(self, r: Reasoning) -> None:
        # The merge rule every provider's stream parser relies on: a delta extends the last block
        # until that block is complete (it got its signature or its redacted data); then a new
        # block starts. A delta from another provider never extends a block.
        if self.reasoning:
            last = self.reasoning[-1]
            same_provider = r.provider is None or last[3] is None or r.provider == last[3]
            if last[1] is None and last[2] is None and same_provider:
                if r.text:
                    last[0].append(r.text)
                if r.signature is not None:
                    last[1] = r.signature
                if r.redacted is not None:
                    last[2] = r.redacted
                if last[3] is None:
                    last[3] = r.provider
                return
        self.reasoning.append([[r.text] if r.text else [], r.signature, r.redacted, r.provider])

    def result(self) -> Generation:
        text = "".join(self.text) if self.seen_text else None
        calls = tuple(ToolCall(i, n, a, m or _EMPTY) for i, n, a, m in self.calls)
        reasoning = tuple(Reasoning("".join(parts), sig, red, prov) for parts, sig, red, prov in self.reasoning)
        refusal = "".join(self.refusal) if self.refusal is not None else None
        message = AssistantMessage(
            text, calls, self.metadata or _EMPTY, reasoning, refusal, tuple(self.hosted), tuple(self.citations)
        )
        extra = MappingProxyType(dict(self.extra)) if self.extra else _EMPTY
        return Generation(message, GenerationMetadata(self.finish, extra))


class ResponseAggregator:
    """Rebuild one ``ChatResponse`` from streamed deltas.

    A chunk's generations are positional: generation ``i`` of a chunk is a delta of choice ``i``
    (a parser streaming several choices pads the positions it has nothing for with an empty
    generation), and each choice is aggregated on its own. Within a choice, text and refusal
    deltas are concatenated; tool-call deltas are assembled (a delta with a known or empty id
    extends the call it belongs to, a new id starts a call; ``metadata`` dicts merge); reasoning
    deltas extend the last reasoning block until it is complete (has a signature or redacted data),
    then start a new one; message metadata and generation ``extra`` merge (later keys win); the last
    finish reason is kept. For the response: the last non-empty usage (all of its fields), id and
    model are kept and ``extra`` dicts merge.
    """

    __slots__ = ("_choices", "_extra", "_id", "_model", "_usage")

    def __init__(self) -> None:
        self._choices: list[_ChoiceAggregate] = []
        self._id: str | None = None
        self._model: str | None = None
        self._usage = Usage()
        self._extra: dict[str, Any] = {}

    def add(self, chunk: ChatResponse | None) -> None:
        if chunk is None:
            return
        choices = self._choices
        for index, g in enumerate(chunk.generations):
            while len(choices) <= index:
                choices.append(_ChoiceAggregate())
            choices[index].add(g)
        md = chunk.metadata
        if md.id:
            self._id = md.id
        if md.model:
            self._model = md.model
        if not md.usage.is_empty():
            self._usage = md.usage
        if md.extra:
            self._extra.update(md.extra)

    def result(self) -> ChatResponse:
        gens = tuple(c.result() for c in self._choices) or (Generation(AssistantMessage(None)),)
        extra = MappingProxyType(dict(self._extra)) if self._extra else _EMPTY
        return ChatResponse(gens, ChatResponseMetadata(self._id, self._model, self._usage, extra))


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
