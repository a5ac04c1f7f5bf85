"""InputGuardrailAdvisor and OutputGuardrailAdvisor: run guardrails around the model call.

    from advisors import InputGuardrailAdvisor, OutputGuardrailAdvisor
    from chatclient.guardrails import PiiRedactionGuardrail, JsonExtractionGuardrail

    client.prompt(text).advisors(
        InputGuardrailAdvisor([PiiRedactionGuardrail()]),
        OutputGuardrailAdvisor([JsonExtractionGuardrail(Invoice)], max_retries=2),
    ).call()

Both serve all four modes. Guardrails run in the order given; see ``chatclient.guardrails`` for
the results they return.

Where they sit in the chain (``order``):

- ``INPUT_GUARDRAIL_ORDER`` (``HIGHEST_PRECEDENCE + 100``): before the memory advisors
  (``DEFAULT_CHAT_MEMORY_ORDER``), so a rewritten (say, redacted) user message is what memory
  stores, and a rejected one is never stored; before retrieval (order 0), so the guards see what
  the user typed, not retrieved documents (give a larger order to check the augmented text).
- ``OUTPUT_GUARDRAIL_ORDER`` (``HIGHEST_PRECEDENCE + 250``): inside memory, so only the accepted
  answer is stored (never a rejected one or a reprompt); outside the tool loop
  (``TOOL_CALL_ORDER``), so guards check the final answer, not the tool-call rounds, and a retry
  runs the tool loop again.

The output advisor asks again at most ``max_retries`` times (``1 + max_retries`` model calls),
re-running only the advisors after itself (``chain.copy(self)``). A reprompt sends the original
prompt plus the rejected answer and the guard's prompt as a new user message; each reprompt is
built from the original prompt, so rejected attempts do not pile up. The usage of every attempt is
summed on the returned response, whose metadata ``extra`` holds ``guardrail_attempts``. In the
stream modes each attempt is buffered, checked when it ends, and the accepted attempt's chunks are
replayed (a rewritten answer arrives as one chunk).

Both report to the request's event listeners: an ``AdvisorEvent`` named ``guardrail.retry`` or
``guardrail.reprompt`` before each new attempt (``data``: ``failures``, ``message``, ``attempt``),
and ``guardrail.input_rejected`` / ``guardrail.output_rejected`` before raising.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from chatclient.advisor import (
    HIGHEST_PRECEDENCE,
    LOWEST_PRECEDENCE,
    AdvisorChain,
    AsyncCallAdvisor,
    AsyncStreamAdvisor,
    CallAdvisor,
    StreamAdvisor,
)
from chatclient.errors import InputGuardrailError
from chatclient.events import AdvisorEvent
from chatclient.guardrails import (
    GuardrailFailure,
    InputGuardrail,
    OutputGuardrail,
    OutputGuardrailRequest,
    OutputVerdict,
    arun_input_guardrails,
    check_result,
    output_error,
    run_input_guardrails,
)
from chatclient.messages import AssistantMessage, UserMessage
from chatclient.models.base import ChatResponse, ResponseAggregator, Usage
from chatclient.request import ChatClientRequest, ChatClientResponse

INPUT_GUARDRAIL_ORDER = HIGHEST_PRECEDENCE + 100
"""Default order of ``InputGuardrailAdvisor``: before memory and retrieval."""
OUTPUT_GUARDRAIL_ORDER = HIGHEST_PRECEDENCE + 250
"""Default order of ``OutputGuardrailAdvisor``: inside memory, outside the tool loop."""

_G = TypeVar("_G", InputGuardrail, OutputGuardrail)


def _guard_tuple(guards: Any, kind: type[_G], advisor: str) -> tuple[_G, ...]:
    if guards is None:
        raise ValueError(f"{advisor} needs guardrails: pass a list of {kind.__name__} objects")
    items = (guards,) if isinstance(guards, (InputGuardrail, OutputGuardrail)) else tuple(guards)
    for g in items:
        if not isinstance(g, kind):
            raise TypeError(
                f"{advisor} takes {kind.__name__} objects; got {type(g).__name__}"
                + (" (an output guardrail: use OutputGuardrailAdvisor)" if isinstance(g, OutputGuardrail) else "")
                + (" (an input guardrail: use InputGuardrailAdvisor)" if isinstance(g, InputGuardrail) else "")
            )
    return items


def _check_order(order: int) -> int:
    if not isinstance(order, int) or not HIGHEST_PRECEDENCE < order < LOWEST_PRECEDENCE:
        raise ValueError("order must be an int strictly between HIGHEST_PRECEDENCE and LOWEST_PRECEDENCE")
    return order


class InputGuardrailAdvisor(CallAdvisor, StreamAdvisor, AsyncCallAdvisor, AsyncStreamAdvisor):
    """Runs input guardrails over the user message before the rest of the chain.

    A ``failure`` or ``fatal`` result raises ``InputGuardrailError`` (carrying every failure) and
    the model is not called; a ``success_with`` rewrite replaces the user message text (its media
    and metadata are kept). The async modes call each guard's ``avalidate``.
    """

    def __init__(
        self,
        guards: Iterable[InputGuardrail] | InputGuardrail,
        *,
        order: int = INPUT_GUARDRAIL_ORDER,
        name: str | None = None,
    ) -> None:
        self.guards: tuple[InputGuardrail, ...] = _guard_tuple(guards, InputGuardrail, "InputGuardrailAdvisor")
        self.order = _check_order(order)
        if name is not None:
            self.name = name

    def check(self, request: ChatClientRequest) -> ChatClientRequest:
        """The request after every guard (rewritten or unchanged); raises ``InputGuardrailError``."""
        try:
            return run_input_guardrails(self.guards, request)
        except InputGuardrailError as exc:
            _emit(request, "guardrail.input_rejected", exc.failures)
            raise

    async def acheck(self, request: ChatClientRequest) -> ChatClientRequest:
        """The async form of ``check``."""
        try:
            return await arun_input_guardrails(self.guards, request)
        except InputGuardrailError as exc:
            _emit(request, "guardrail.input_rejected", exc.failures)
            raise

    def advise_call(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientResponse:
        return chain.next_call(self.check(request))

    async def advise_acall(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientResponse:
        return await chain.next_acall(await self.acheck(request))

    def advise_stream(self, request: ChatClientRequest, chain: AdvisorChain) -> Iterator[ChatClientResponse]:
        yield from chain.next_stream(self.check(request))

    async def advise_astream(
        self, request: ChatClientRequest, chain: AdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        async for chunk in chain.next_astream(await self.acheck(request)):
            yield chunk

    def __repr__(self) -> str:
        return f"{self.name}(guards={list(self.guards)!r}, order={self.order})"


class OutputGuardrailAdvisor(CallAdvisor, StreamAdvisor, AsyncCallAdvisor, AsyncStreamAdvisor):
    """Runs output guardrails over the model's answer, asking again on ``retry``/``reprompt``.

    ``max_retries`` (>= 0, default 2) is how many more answers may be asked for. Raises
    ``OutputGuardrailError`` when a guard fails the answer, when the retries are used up, or when a
    guard asks for a retry after another rewrote the answer; ``.failures`` then holds every failure
    of every attempt.
    """

    def __init__(
        self,
        guards: Iterable[OutputGuardrail] | OutputGuardrail,
        max_retries: int = 2,
        *,
        order: int = OUTPUT_GUARDRAIL_ORDER,
        name: str | None = None,
    ) -> None:
        if not isinstance(max_retries, int) or isinstance(max_retries, bool):
            raise TypeError("max_retries must be an int")
        if max_retries < 0:
            raise ValueError("max_retries must be >= 0 (0 means: never ask again)")
        self.guards: tuple[OutputGuardrail, ...] = _guard_tuple(guards, OutputGuardrail, "OutputGuardrailAdvisor")
        self.max_retries = max_retries
        self.order = _check_order(order)
        if name is not None:
            self.name = name

    # -- one attempt -----------------------------------------------------------------------------

    def verdict(self, response: ChatResponse | None, request: ChatClientRequest, attempt: int = 1) -> OutputVerdict:
        """Run every guard over ``response`` (the answer to ``request``) and fold their results."""
        v = OutputVerdict(_text(response), attempt)
        for guard in self.guards:
            result = guard.validate(OutputGuardrailRequest(v.text, response, request, attempt))
            if not v.add(check_result(guard, result, output=True)):
                break
        return v

    async def averdict(
        self, response: ChatResponse | None, request: ChatClientRequest, attempt: int = 1
    ) -> OutputVerdict:
        """The async form of ``verdict`` (calls each guard's ``avalidate``)."""
        v = OutputVerdict(_text(response), attempt)
        for guard in self.guards:
            result = await guard.avalidate(OutputGuardrailRequest(v.text, response, request, attempt))
            if not v.add(check_result(guard, result, output=True)):
                break
        return v

    def _next_request(
        self,
        verdict: OutputVerdict,
        original: ChatClientRequest,
        response: ChatResponse | None,
        history: list[GuardrailFailure],
    ) -> ChatClientRequest | None:
        """None when the answer is accepted; else the request for the next attempt (or raise)."""
        if verdict.accepted:
            return None
        history.extend(verdict.failures)
        if verdict.failures or verdict.again is None:
            _emit(original, "guardrail.output_rejected", verdict.failures)
            raise output_error(history, exhausted=False)
        history.append(verdict.again)
        if verdict.attempt > self.max_retries:
            _emit(original, "guardrail.output_rejected", [verdict.again])
            raise output_error(history, exhausted=True)
        _emit(original, f"guardrail.{verdict.again.kind}", [verdict.again], attempt=verdict.attempt + 1)
        if verdict.again.kind == "retry" or verdict.again.reprompt is None:
            return original
        messages = [*original.prompt.messages, AssistantMessage(_text(response)), UserMessage(verdict.again.reprompt)]
        return original.mutate(prompt=original.prompt.copy(messages=messages))

    # -- the four modes --------------------------------------------------------------------------

    def advise_call(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientResponse:
        attempt_request, usage = request, Usage()
        history: list[GuardrailFailure] = []
        for attempt in range(1, self.max_retries + 2):
            response = chain.copy(self).next_call(attempt_request)
            usage = _add_usage(usage, response.chat_response)
            verdict = self.verdict(response.chat_response, attempt_request, attempt)
            following = self._next_request(verdict, request, response.chat_response, history)
            if following is None:
                return _finish(response, verdict, usage)
            attempt_request = following
        raise AssertionError("unreachable")  # pragma: no cover

    async def advise_acall(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientResponse:
        attempt_request, usage = request, Usage()
        history: list[GuardrailFailure] = []
        for attempt in range(1, self.max_retries + 2):
            response = await chain.copy(self).next_acall(attempt_request)
            usage = _add_usage(usage, response.chat_response)
            verdict = await self.averdict(response.chat_response, attempt_request, attempt)
            following = self._next_request(verdict, request, response.chat_response, history)
            if following is None:
                return _finish(response, verdict, usage)
            attempt_request = following
        raise AssertionError("unreachable")  # pragma: no cover

    def advise_stream(self, request: ChatClientRequest, chain: AdvisorChain) -> Iterator[ChatClientResponse]:
        attempt_request, usage = request, Usage()
        history: list[GuardrailFailure] = []
        for attempt in range(1, self.max_retries + 2):
            chunks = list(chain.copy(self).next_stream(attempt_request))
            whole = _aggregate(chunks)
            usage = _add_usage(usage, whole)
            verdict = self.verdict(whole, attempt_request, attempt)
            following = self._next_request(verdict, request, whole, history)
            if following is None:
                yield from _replay(chunks, whole, verdict, usage)
                return
            attempt_request = following

    async def advise_astream(
        self, request: ChatClientRequest, chain: AdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        attempt_request, usage = request, Usage()
        history: list[GuardrailFailure] = []
        for attempt in range(1, self.max_retries + 2):
            chunks = [c async for c in chain.copy(self).next_astream(attempt_request)]
            whole = _aggregate(chunks)
            usage = _add_usage(usage, whole)
            verdict = await self.averdict(whole, attempt_request, attempt)
            following = self._next_request(verdict, request, whole, history)
            if following is None:
                for chunk in _replay(chunks, whole, verdict, usage):
                    yield chunk
                return
            attempt_request = following

    def __repr__(self) -> str:
        return f"{self.name}(guards={list(self.guards)!r}, max_retries={self.max_retries}, order={self.order})"


# -- helpers -------------------------------------------------------------------------------------


def _emit(request: ChatClientRequest, name: str, failures: Sequence[GuardrailFailure], **extra: Any) -> None:
    """An ``AdvisorEvent`` for listeners of the request (``on_event``, ``stream().events()``)."""
    shown = "; ".join(str(f) for f in failures)
    data = {"failures": tuple(failures), "message": shown, **extra}
    request.emit(AdvisorEvent(name, data))


def _text(response: ChatResponse | None) -> str:
    return (response.text if response is not None else None) or ""


def _add_usage(total: Usage, response: ChatResponse | None) -> Usage:
    return total if response is None else total + response.metadata.usage


def _with_text(response: ChatResponse, text: str) -> ChatResponse:
    """``response`` whose first answer reads ``text`` (other generations and metadata kept)."""
    if not response.generations:
        return ChatResponse.of_text(text).with_usage(response.metadata.usage).with_metadata(**response.metadata.extra)
    first = response.generations[0]
    rewritten = replace(first, output=replace(first.output, text=text))
    return replace(response, generations=(rewritten, *response.generations[1:]))


def _finished(response: ChatResponse, verdict: OutputVerdict, usage: Usage) -> ChatResponse:
    if verdict.rewritten:
        response = _with_text(response, verdict.text).with_metadata(guardrail_rewritten=True)
    if verdict.attempt > 1:  # one attempt: the response already carries its own usage
        response = response.with_usage(usage)
    return response.with_metadata(guardrail_attempts=verdict.attempt)


def _finish(response: ChatClientResponse, verdict: OutputVerdict, usage: Usage) -> ChatClientResponse:
    cr = response.chat_response
    if cr is None:
        if not verdict.rewritten:
            return response
        cr = ChatResponse.of_text(verdict.text)
    return response.mutate(chat_response=_finished(cr, verdict, usage))


def _aggregate(chunks: Sequence[ChatClientResponse]) -> ChatResponse | None:
    responses = [c.chat_response for c in chunks if c.chat_response is not None]
    if not responses:
        return None
    aggregator = ResponseAggregator()
    for r in responses:
        aggregator.add(r)
    return aggregator.result()


def _replay(
    chunks: list[ChatClientResponse], whole: ChatResponse | None, verdict: OutputVerdict, usage: Usage
) -> Iterator[ChatClientResponse]:
    if verdict.rewritten:
        # The chunks spell the old text; the rewritten answer goes out as one complete chunk.
        base = whole if whole is not None else ChatResponse.of_text(verdict.text)
        context = chunks[-1].context if chunks else {}
        yield ChatClientResponse(_finished(base, verdict, usage), context)
        return
    # Summed usage and the attempt count go on the last chunk with a response: stream aggregators
    # keep the last non-empty usage, so the whole stream reports the total of every attempt.
    last = max((i for i, c in enumerate(chunks) if c.chat_response is not None), default=-1)
    for i, chunk in enumerate(chunks):
        yield _finish(chunk, verdict, usage) if i == last else chunk


__all__ = ["INPUT_GUARDRAIL_ORDER", "OUTPUT_GUARDRAIL_ORDER", "InputGuardrailAdvisor", "OutputGuardrailAdvisor"]
