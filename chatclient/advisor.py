"""Advisors and the advisor chain.

An advisor is middleware around the model call. The chain sorts advisors by ``order`` (lowest
first on the way in, last on the way out — a stack) and always ends with the terminal
``ChatModelAdvisor``, which calls the model. One chain implementation serves all four modes:
``next_call``, ``next_stream``, ``next_acall`` and ``next_astream`` differ only in which advisor
method they invoke.

A chain object is an immutable position in a sorted tuple of advisors, so an advisor may call
``next_*`` more than once (recursive advisors use ``chain.copy(self)`` to re-run only the part of
the chain after themselves).
"""

from __future__ import annotations

import dataclasses
import itertools
import operator
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from chatclient import observation
from chatclient.errors import AdvisorChainError, ModelError
from chatclient.request import ChatClientRequest, ChatClientResponse, ContextKeys
from chatclient.usage_meter import metered_acall, metered_astream, metered_call, metered_stream

if TYPE_CHECKING:
    from chatclient.events import StreamEvent
    from chatclient.models.base import ChatModel, ChatResponse
    from chatclient.models.structured_output import LadderPlan
    from chatclient.prompt import Prompt

HIGHEST_PRECEDENCE = -(2**31)
LOWEST_PRECEDENCE = 2**31 - 1
DEFAULT_CHAT_MEMORY_ORDER = HIGHEST_PRECEDENCE + 200
TOOL_CALL_ORDER = HIGHEST_PRECEDENCE + 300
STRUCTURED_OUTPUT_VALIDATION_ORDER = LOWEST_PRECEDENCE - 2000

Mode = Literal["call", "stream", "acall", "astream"]
_METHOD_OF_MODE: dict[str, str] = {
    "call": "advise_call",
    "stream": "advise_stream",
    "acall": "advise_acall",
    "astream": "advise_astream",
}


class Advisor:
    """Base of all advisors: a ``name`` (default: the class name) and an ``order`` (default 0)."""

    order: int = 0
    _name: str | None = None

    @property
    def name(self) -> str:
        return self._name or type(self).__name__

    @name.setter
    def name(self, value: str) -> None:
        self._name = value

    def __repr__(self) -> str:
        return f"{self.name}(order={self.order})"


class CallAdvisor(Advisor):
    """Advises blocking calls."""

    def advise_call(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientResponse:
        raise NotImplementedError


class StreamAdvisor(Advisor):
    """Advises blocking streams."""

    def advise_stream(self, request: ChatClientRequest, chain: AdvisorChain) -> Iterator[ChatClientResponse]:
        raise NotImplementedError


class AsyncCallAdvisor(Advisor):
    """Advises async calls."""

    async def advise_acall(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientResponse:
        raise NotImplementedError


class AsyncStreamAdvisor(Advisor):
    """Advises async streams."""

    def advise_astream(self, request: ChatClientRequest, chain: AdvisorChain) -> AsyncIterator[ChatClientResponse]:
        raise NotImplementedError


def is_finished(response: ChatClientResponse) -> bool:
    """True when the response carries a finish reason (the last chunk of a stream)."""
    cr = response.chat_response
    return cr is not None and cr.has_finish_reason()


class BaseAdvisor(CallAdvisor, StreamAdvisor, AsyncCallAdvisor, AsyncStreamAdvisor):
    """An advisor written as ``before`` (request) and ``after`` (response), served in all four modes.

    In streams, ``after`` runs once, on the chunk that carries a finish reason. Override
    ``abefore``/``aafter`` when the async path should not block the event loop.
    """

    def before(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientRequest:
        return request

    def after(self, response: ChatClientResponse, chain: AdvisorChain) -> ChatClientResponse:
        return response

    async def abefore(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientRequest:
        return self.before(request, chain)

    async def aafter(self, response: ChatClientResponse, chain: AdvisorChain) -> ChatClientResponse:
        return self.after(response, chain)

    def advise_call(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientResponse:
        return self.after(chain.next_call(self.before(request, chain)), chain)

    def advise_stream(self, request: ChatClientRequest, chain: AdvisorChain) -> Iterator[ChatClientResponse]:
        request = self.before(request, chain)
        if type(self).after is BaseAdvisor.after:
            # Nothing to do on the way out. The advisors right after this one that have nothing to
            # do on the way out either run their before() here too: one generator layer for all
            # of them instead of one each, and every chunk passes through each layer.
            while observation._observer is None and _passes_through(chain._peek(), "stream"):
                advisor, chain = chain._next(request)
                request = advisor.before(request, chain)
            yield from chain.next_stream(request)
            return
        for response in chain.next_stream(request):
            yield self.after(response, chain) if is_finished(response) else response

    async def advise_acall(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientResponse:
        return await self.aafter(await chain.next_acall(await self.abefore(request, chain)), chain)

    async def advise_astream(
        self, request: ChatClientRequest, chain: AdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        request = await self.abefore(request, chain)
        cls = type(self)
        if cls.aafter is BaseAdvisor.aafter and cls.after is BaseAdvisor.after:
            # Nothing to do on the way out: as in advise_stream, the following advisors that have
            # nothing to do on the way out share this one async layer (their abefore() runs here).
            while observation._observer is None and _passes_through(chain._peek(), "astream"):
                advisor, chain = chain._next(request)
                request = await advisor.abefore(request, chain)
            async for response in chain.next_astream(request):
                yield response
            return
        async for response in chain.next_astream(request):
            yield (await self.aafter(response, chain)) if is_finished(response) else response


class AdvisorChain:
    """A position in a sorted tuple of advisors; ``next_*`` runs the advisor at that position."""

    __slots__ = ("_advisors", "_pos", "_sink")

    def __init__(self, advisors: tuple[Advisor, ...], pos: int = 0, sink: Any = None) -> None:
        self._advisors = advisors
        self._pos = pos
        self._sink = sink

    def emit(self, event: StreamEvent) -> None:
        """Send an event to whoever listens to the request this chain runs (as ``request.emit``)."""
        if self._sink is not None:
            self._sink.emit(event)

    @property
    def advisors(self) -> tuple[Advisor, ...]:
        """The chain's advisors in execution order (a snapshot; the terminal advisor is last)."""
        return self._advisors

    @property
    def remaining(self) -> tuple[Advisor, ...]:
        """The advisors that ``next_*`` would still run."""
        return self._advisors[self._pos :]

    def _peek(self) -> Any:
        """The advisor ``next_*`` would run, or ``None`` past the end."""
        return self._advisors[self._pos] if self._pos < len(self._advisors) else None

    def _next(self, request: ChatClientRequest) -> tuple[Any, AdvisorChain]:
        ctx = request.context
        deadline = ctx.get(ContextKeys.DEADLINE)
        if deadline is not None:
            deadline.check(f"before {self._advisors[self._pos].name}" if self._pos < len(self._advisors) else "")
        if self._pos >= len(self._advisors):
            raise AdvisorChainError(
                "The advisor chain is exhausted: no advisor is left to call. "
                "An advisor called next after the terminal model advisor, or on a copy made after the last advisor."
            )
        return self._advisors[self._pos], AdvisorChain(self._advisors, self._pos + 1, ctx.get(ContextKeys.EVENTS))

    def next_call(self, request: ChatClientRequest) -> ChatClientResponse:
        advisor, rest = self._next(request)
        if observation._observer is None:
            return advisor.advise_call(request, rest)  # type: ignore[no-any-return]
        obs = observation._observer.start_advisor(advisor, "call")
        try:
            response = advisor.advise_call(request, rest)
        except BaseException as exc:
            obs.finish(error=exc)
            raise
        obs.finish(response)
        return response  # type: ignore[no-any-return]

    def next_stream(self, request: ChatClientRequest) -> Iterator[ChatClientResponse]:
        advisor, rest = self._next(request)
        if observation._observer is None:
            return advisor.advise_stream(request, rest)  # type: ignore[no-any-return]
        obs = observation._observer.start_advisor(advisor, "stream")
        return observation.observe_iterator(obs, advisor.advise_stream(request, rest))

    async def next_acall(self, request: ChatClientRequest) -> ChatClientResponse:
        advisor, rest = self._next(request)
        if observation._observer is None:
            return await advisor.advise_acall(request, rest)  # type: ignore[no-any-return]
        obs = observation._observer.start_advisor(advisor, "acall")
        try:
            response = await advisor.advise_acall(request, rest)
        except BaseException as exc:
            obs.finish(error=exc)
            raise
        obs.finish(response)
        return response  # type: ignore[no-any-return]

    def next_astream(self, request: ChatClientRequest) -> AsyncIterator[ChatClientResponse]:
        advisor, rest = self._next(request)
        if observation._observer is None:
            return _tracked(advisor.advise_astream(request, rest), request)
        obs = observation._observer.start_advisor(advisor, "astream")
        stream = _tracked(advisor.advise_astream(request, rest), request)
        return _tracked(observation.observe_async_iterator(obs, stream), request)

    def copy(self, after: Advisor) -> AdvisorChain:
        """A new chain holding only the advisors after ``after`` (used by recursive advisors)."""
        if after is None:
            raise ValueError("after cannot be None")
        for i, a in enumerate(self._advisors):
            if a is after:
                return AdvisorChain(self._advisors[i + 1 :], 0, self._sink)
        raise ValueError(f"The advisor {getattr(after, 'name', after)!r} is not part of the chain")

    def __repr__(self) -> str:
        return f"AdvisorChain({[a.name for a in self.remaining]})"


_S = TypeVar("_S")


def _chunk_responder(context: Mapping[str, Any]) -> Callable[[ChatResponse], ChatClientResponse]:
    """``lambda chunk: ChatClientResponse(chunk, context)`` for the chunks of one stream, sharing
    the request's context (already frozen) instead of copying it for every chunk."""
    if type(context) is not MappingProxyType or _RESPONSE_FIELDS != ("chat_response", "context"):
        return lambda chunk: ChatClientResponse(chunk, context)
    new, set_chunk, set_context = object.__new__, _SET_CHAT_RESPONSE, _SET_CONTEXT

    def respond(chunk: ChatResponse) -> ChatClientResponse:
        response = new(ChatClientResponse)
        set_chunk(response, chunk)
        set_context(response, context)
        return response

    return respond


_RESPONSE_FIELDS = tuple(f.name for f in dataclasses.fields(ChatClientResponse))
_SET_CHAT_RESPONSE = ChatClientResponse.__dict__["chat_response"].__set__
_SET_CONTEXT = ChatClientResponse.__dict__["context"].__set__


def _passes_through(advisor: Any, mode: str) -> bool:
    """Whether ``advisor`` is a ``BaseAdvisor`` whose stream of ``mode`` only runs its before
    hook and passes every chunk on unchanged (its stream method and after hooks are the defaults)."""
    if not isinstance(advisor, BaseAdvisor):
        return False
    cls = type(advisor)
    if mode == "stream":
        return cls.advise_stream is BaseAdvisor.advise_stream and cls.after is BaseAdvisor.after
    return (
        cls.advise_astream is BaseAdvisor.advise_astream
        and cls.aafter is BaseAdvisor.aafter
        and cls.after is BaseAdvisor.after
    )


def _tracked(stream: _S, request: ChatClientRequest) -> _S:
    """Register an async stream with its request so closing the response closes it at once.

    An ``async for`` that stops early (the consumer closed the stream) leaves the inner async
    generator to the event loop's finalizer, which may run late or never; the response spec closes
    every stream registered under ``ContextKeys.ASYNC_STREAMS`` instead (``finally`` semantics
    down the chain, and the model's HTTP response closed).
    """
    opened = request.context.get(ContextKeys.ASYNC_STREAMS)
    if opened is not None:
        opened.append(stream)
    return stream


def build_chain(advisors: Sequence[Advisor], terminal: Advisor, mode: Mode) -> AdvisorChain:
    """Sort ``advisors`` by order (stable), append ``terminal``, and check each serves ``mode``."""
    method = _METHOD_OF_MODE[mode]
    # Runs on every call: the sort key is a C-level getter and the per-class check is looked up
    # inline, so a chain of n advisors costs no 2n Python calls before it starts.
    ordered = sorted(advisors, key=_order_of) if len(advisors) > 1 else list(advisors)
    for a in ordered:
        if a is None:
            raise ValueError("advisors cannot contain None")
        if not (_SERVES.get((type(a), method)) or _serves(a, method)):
            raise AdvisorChainError(
                f"Advisor {getattr(a, 'name', type(a).__name__)!r} does not support {mode}(): "
                f"it has no {method}(). Implement it (or extend BaseAdvisor), or remove the advisor from this request."
            )
    ordered.append(terminal)
    return AdvisorChain(tuple(ordered))


# (advisor class, method) -> whether the class serves that mode; classes do not change at run time.
_SERVES: dict[tuple[type, str], bool] = {}


def _serves(advisor: Advisor, method: str) -> bool:
    key = (type(advisor), method)
    known = _SERVES.get(key)
    if known is None:
        known = callable(getattr(advisor, method, None)) and not _is_unimplemented(advisor, method)
        _SERVES[key] = known
    return known


_order_of: Callable[[Advisor], int] = operator.attrgetter("order")


_BASE_METHODS: dict[str, Any] = {
    "advise_call": CallAdvisor.advise_call,
    "advise_stream": StreamAdvisor.advise_stream,
    "advise_acall": AsyncCallAdvisor.advise_acall,
    "advise_astream": AsyncStreamAdvisor.advise_astream,
}


def _is_unimplemented(advisor: Advisor, method: str) -> bool:
    # An advisor inheriting the mode class but not overriding its method does not serve that mode.
    return getattr(type(advisor), method, None) is _BASE_METHODS[method]


# -- the terminal advisor ------------------------------------------------------------------------


class ChatModelAdvisor(BaseAdvisor):
    """The last link of every chain: asks for the output format and calls the model.

    When the context asks for structured output (``OUTPUT_SCHEMA``/``OUTPUT_FORMAT``, set by
    ``entity()``), it walks the structured-output ladder of ``chatclient.models.structured_output``:
    the strongest rung the model's capabilities offer first (native schema, JSON mode with the
    schema, a forced answer tool), format instructions last; a rung the server rejects is replaced
    by the next one in the same request. ``ContextKeys.STRUCTURED_OUTPUT_MODE`` pins a rung
    (``NATIVE_STRUCTURED_OUTPUT=False`` pins ``"instructions"``). The rung used is recorded in the
    response metadata under ``structured_output_mode``, and why under ``structured_output_reason``.
    """

    order = LOWEST_PRECEDENCE

    def __init__(self, model: ChatModel) -> None:
        if model is None:
            raise ValueError("model cannot be None")
        self.model = model

    def plan(self, request: ChatClientRequest) -> LadderPlan | None:
        """The ladder for this request, or None when it asks for no output format."""
        ctx = request.context
        if not ctx:
            return None
        fmt = ctx.get(ContextKeys.OUTPUT_FORMAT)
        schema = ctx.get(ContextKeys.OUTPUT_SCHEMA)
        if not fmt and not schema:
            return None
        from chatclient.models import structured_output as so

        return so.plan(self.model, request.prompt, schema, _requested_mode(ctx))

    def prompt_for(self, request: ChatClientRequest, rung: str) -> Prompt:
        """The prompt that asks for structured output the ``rung`` way."""
        from chatclient.models.structured_output import prompt_for_rung

        ctx = request.context
        return prompt_for_rung(
            self.model, request.prompt, rung, ctx.get(ContextKeys.OUTPUT_SCHEMA), ctx.get(ContextKeys.OUTPUT_FORMAT)
        )

    def prepare(self, request: ChatClientRequest) -> tuple[ChatClientRequest, str | None]:
        """The request for the first rung of the ladder and that rung (None without an output format)."""
        ladder = self.plan(request)
        if ladder is None:
            return request, None
        rung = ladder.rungs[0]
        return request.mutate(prompt=self.prompt_for(request, rung)), rung

    def _rejected(self, error: BaseException, ladder: LadderPlan, index: int, reasons: list[str]) -> bool:
        """True when ``error`` is the server rejecting this rung and a lower rung is left to try."""
        from chatclient.models.structured_output import rejection_reason, remember_rejection

        rung = ladder.rungs[index]
        reason = rejection_reason(error, rung)
        if reason is None or ladder.pinned or index + 1 >= len(ladder.rungs):
            return False
        remember_rejection(self.model, rung, reason, ladder.model_name)
        reasons.append(reason)
        return True

    def _respond(
        self,
        request: ChatClientRequest,
        response: ChatResponse | None,
        rung: str | None,
        ladder: LadderPlan | None = None,
        reasons: Sequence[str] = (),
    ) -> ChatClientResponse:
        if rung is not None and response is not None:
            why = "; ".join(reasons) if reasons else (ladder.reason if ladder is not None else "")
            response = response.with_metadata(structured_output_mode=rung, structured_output_reason=why)
        return ChatClientResponse(response, request.context)

    def advise_call(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientResponse:
        ladder = self.plan(request)
        if ladder is None:
            return ChatClientResponse(metered_call(self.model, request.prompt, request.context), request.context)
        reasons: list[str] = []
        for index, rung in enumerate(ladder.rungs):
            try:
                response = metered_call(self.model, self.prompt_for(request, rung), request.context)
            except ModelError as exc:
                if self._rejected(exc, ladder, index, reasons):
                    continue
                raise
            return self._respond(request, _answer(response, rung), rung, ladder, reasons)
        raise AssertionError("unreachable: the last rung either answers or raises")  # pragma: no cover

    async def advise_acall(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientResponse:
        ladder = self.plan(request)
        if ladder is None:
            return ChatClientResponse(await metered_acall(self.model, request.prompt, request.context), request.context)
        reasons: list[str] = []
        for index, rung in enumerate(ladder.rungs):
            try:
                response = await metered_acall(self.model, self.prompt_for(request, rung), request.context)
            except ModelError as exc:
                if self._rejected(exc, ladder, index, reasons):
                    continue
                raise
            return self._respond(request, _answer(response, rung), rung, ladder, reasons)
        raise AssertionError("unreachable: the last rung either answers or raises")  # pragma: no cover

    def advise_stream(self, request: ChatClientRequest, chain: AdvisorChain) -> Iterator[ChatClientResponse]:
        if chain._sink is not None and chain._sink.pending:
            # An events() consumer gets what advisors emitted before the (possibly slow) first token.
            yield ChatClientResponse(None, request.context)
        ladder = self.plan(request)
        if ladder is None:
            respond = _chunk_responder(request.context)
            for chunk in metered_stream(self.model, request.prompt, request.context):
                yield respond(chunk)
            return
        reasons: list[str] = []
        for index, rung in enumerate(ladder.rungs):
            chunks = iter(metered_stream(self.model, self.prompt_for(request, rung), request.context))
            try:
                # A server rejects the request before the first chunk, so only that read can fall back.
                first = next(chunks, None)
            except ModelError as exc:
                if self._rejected(exc, ladder, index, reasons):
                    continue
                raise
            rewrite = _stream_rewriter(rung)
            try:
                pending = [] if first is None else [first]
                for chunk in itertools.chain(pending, chunks):
                    chunk = rewrite(chunk)
                    final = chunk.has_finish_reason()
                    yield self._respond(request, chunk, rung if final else None, ladder, reasons)
            finally:
                close = getattr(chunks, "close", None)
                if close is not None:
                    close()
            return

    async def advise_astream(
        self, request: ChatClientRequest, chain: AdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        if chain._sink is not None and chain._sink.pending:
            yield ChatClientResponse(None, request.context)
        ladder = self.plan(request)
        if ladder is None:
            respond = _chunk_responder(request.context)
            async for chunk in _tracked(metered_astream(self.model, request.prompt, request.context), request):
                yield respond(chunk)
            return
        reasons: list[str] = []
        for index, rung in enumerate(ladder.rungs):
            stream = metered_astream(self.model, self.prompt_for(request, rung), request.context)
            chunks = aiter(_tracked(stream, request))
            try:
                first = await anext(chunks, None)
            except ModelError as exc:
                if self._rejected(exc, ladder, index, reasons):
                    continue
                raise
            rewrite = _stream_rewriter(rung)
            try:
                if first is not None:
                    first = rewrite(first)
                    yield self._respond(request, first, rung if first.has_finish_reason() else None, ladder, reasons)
                async for chunk in chunks:
                    chunk = rewrite(chunk)
                    final = chunk.has_finish_reason()
                    yield self._respond(request, chunk, rung if final else None, ladder, reasons)
            finally:
                aclose = getattr(chunks, "aclose", None)
                if aclose is not None:
                    await aclose()
            return


def _requested_mode(ctx: Any) -> str:
    from chatclient.models.structured_output import check_mode

    mode = ctx.get(ContextKeys.STRUCTURED_OUTPUT_MODE)
    if mode is not None:
        return check_mode(mode)
    if ctx.get(ContextKeys.NATIVE_STRUCTURED_OUTPUT) is False:
        return "instructions"
    return "auto"


def _answer(response: ChatResponse, rung: str) -> ChatResponse:
    if rung != "tool":
        return response
    from chatclient.models.structured_output import tool_answer

    return tool_answer(response)


def _stream_rewriter(rung: str) -> Callable[[ChatResponse], ChatResponse]:
    if rung != "tool":
        return _same
    from chatclient.models.structured_output import ToolAnswerStream

    return ToolAnswerStream().rewrite


def _same(chunk: ChatResponse) -> ChatResponse:
    return chunk


def _supports_native(model: Any, schema: Any = None) -> bool:
    """Whether ``model`` offers a schema rung for ``schema`` (kept for callers of the old name)."""
    caps = getattr(model, "capabilities", None)
    if not getattr(caps, "structured_output", None) and not getattr(caps, "native_structured_output", False):
        return False
    # Schema modes (OpenAI's strict json_schema among them) want an object at the root; a list or
    # scalar target keeps the prompt instructions instead of failing at the provider.
    return schema is None or (hasattr(schema, "get") and schema.get("type") == "object")
