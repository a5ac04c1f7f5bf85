"""StructuredOutputValidationAdvisor: check the model's JSON against the target type, re-ask on failure.

    client.prompt("Who wrote Dune?").advisors(StructuredOutputValidationAdvisor(Book)).call().entity(Book)

Each answer is cleaned like the converters clean it (whitespace, leading ``<think>`` blocks, a code
fence, a remark after the value), then checked twice: with ``jsonschema`` against the target's
schema (the shape the model was asked for), then with pydantic (so field validators count too).
On failure the advisor calls the rest of the chain again with the ORIGINAL request plus one line
listing every problem (path and message); the line is rebuilt from scratch each time, so errors of
earlier attempts never pile up in the prompt. At most ``max_repeat_attempts + 1`` model calls are
made; the last response is returned, valid or not (``entity()`` then raises if it cannot convert).

A response that asks for tools is passed back unvalidated (the tool loop, which sits outside this
advisor, runs the tools and comes back). Re-asking cannot help, so the advisor stops early and
says why in ``validation_stopped`` (which ``entity()``'s error then reports) when the model refused
(``AssistantMessage.refusal``), when the answer was cut off by the token limit (finish reason
``length``: the same limit would cut it again; when the cut answer ends by repeating itself, the
reason names the loop and says that more tokens would not help), or when the model gave the same invalid answer as
on the previous attempt (it cannot follow the format). The usage of every attempt is summed into the returned
response's metadata, and ``validation_attempts`` in its ``extra`` says how many calls were made.
In the stream modes each attempt is buffered, validated when it ends, and only the accepted
attempt's chunks are replayed downstream.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from chatclient.advisor import (
    HIGHEST_PRECEDENCE,
    LOWEST_PRECEDENCE,
    STRUCTURED_OUTPUT_VALIDATION_ORDER,
    AdvisorChain,
    AsyncCallAdvisor,
    AsyncStreamAdvisor,
    CallAdvisor,
    StreamAdvisor,
)
from chatclient.events import AdvisorEvent
from chatclient.messages import UserMessage
from chatclient.models.base import ChatResponse, ResponseAggregator, Usage
from chatclient.request import ChatClientRequest, ChatClientResponse

if TYPE_CHECKING:
    from chatclient.converters import EntityOutputConverter

_MAX_ERRORS = 10  # problems quoted in a retry event (the feedback line's own cap is in json_check)


class StructuredOutputValidationAdvisor(CallAdvisor, StreamAdvisor, AsyncCallAdvisor, AsyncStreamAdvisor):
    """Validates structured output against ``output_type`` and re-asks the model when it does not fit.

    ``output_type`` is any type ``entity()`` accepts that has a JSON schema (or an
    ``EntityOutputConverter``). ``max_repeat_attempts`` (>= 0) is how many times it re-asks.
    """

    def __init__(
        self,
        output_type: Any,
        max_repeat_attempts: int = 3,
        order: int = STRUCTURED_OUTPUT_VALIDATION_ORDER,
        *,
        name: str | None = None,
    ) -> None:
        if output_type is None:
            raise ValueError("output_type must be set")
        if not isinstance(max_repeat_attempts, int) or isinstance(max_repeat_attempts, bool):
            raise TypeError("max_repeat_attempts must be an int")
        if max_repeat_attempts < 0:
            raise ValueError("max_repeat_attempts must be greater than or equal to 0")
        if not HIGHEST_PRECEDENCE < order < LOWEST_PRECEDENCE:
            raise ValueError("order must be strictly between HIGHEST_PRECEDENCE and LOWEST_PRECEDENCE")
        from chatclient.converters.json_check import JsonOutputCheck

        # The checks (cleaning, schema, pydantic) and the feedback line are shared with JsonExtractionGuardrail.
        self._json_check = JsonOutputCheck(output_type)
        self.output_type = output_type
        self.max_repeat_attempts = max_repeat_attempts
        self.order = order
        if name is not None:
            self.name = name
        self._converter: EntityOutputConverter[Any] = self._json_check.converter

    # -- validation ------------------------------------------------------------------------------

    def validate(self, text: str | None) -> list[str]:
        """Every problem of ``text`` as ``"at <path>: <message>"``; empty when it is valid."""
        return self._json_check.problems(text)

    def feedback(self, errors: Sequence[str]) -> str:
        """The one line added to the user message after a failed attempt."""
        return self._json_check.feedback(errors)

    def _retry_request(
        self, original: ChatClientRequest, errors: Sequence[str], attempt: int | None = None
    ) -> ChatClientRequest:
        line = self.feedback(errors)
        if attempt is not None:
            total = self.max_repeat_attempts + 1
            original.emit(
                AdvisorEvent(
                    "validation.retry",
                    {
                        "attempt": attempt,
                        "of": total,
                        "errors": tuple(errors),
                        "message": f"attempt {attempt} of {total}: {'; '.join(errors[:_MAX_ERRORS])}",
                    },
                )
            )

        def add_line(u: UserMessage) -> UserMessage:
            return replace(u, text=f"{u.text}\n{line}" if u.text else line)

        return original.mutate(prompt=original.prompt.augment_user_message(add_line))

    def _check(self, response: ChatResponse | None) -> list[str] | None:
        """None when the response is accepted (valid, or a tool call); else its problems."""
        if response is not None and response.has_tool_calls():
            return None
        errors = self.validate(response.text if response is not None else None)
        return errors or None

    def _judge(self, response: ChatResponse | None, previous: str | None) -> tuple[list[str] | None, str | None]:
        """The problems of ``response`` (None: accepted) and, when re-asking is pointless, why."""
        generation = response.result if response is not None else None
        if generation is not None and generation.output.refusal:
            return None, "the model refused to answer"
        errors = self._check(response)
        if errors is None or generation is None:
            return errors, None
        if generation.finish_reason == "length":
            from chatclient.converters.core import repeated_tail

            loop = repeated_tail(generation.output.text or "")
            if loop is not None:
                return errors, (
                    f"the answer was cut off by the token limit while the model repeated {loop[:40]!r} over and "
                    "over; a new attempt or a higher max_tokens would loop the same way: bound the field in the "
                    "schema (maxLength, maxItems) or use a larger model"
                )
            return errors, (
                "the answer was cut off by the token limit (finish reason 'length'); the same limit would cut "
                "a new attempt too, so raise max_tokens"
            )
        text = generation.output.text
        if previous is not None and (text or "").strip() == previous.strip():
            return errors, "the model gave the same invalid answer twice; it cannot follow this format"
        return errors, None

    # -- the four modes --------------------------------------------------------------------------

    def advise_call(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientResponse:
        attempt_request, usage = request, Usage()
        previous: str | None = None
        for attempt in range(1, self.max_repeat_attempts + 2):
            response = chain.copy(self).next_call(attempt_request)
            usage = _add_usage(usage, response.chat_response)
            errors, stop = self._judge(response.chat_response, previous)
            if errors is None or stop is not None or attempt > self.max_repeat_attempts:
                return _finish(response, usage, attempt, stop)
            previous = _text(response.chat_response)
            attempt_request = self._retry_request(request, errors, attempt + 1)
        raise AssertionError("unreachable")  # pragma: no cover

    async def advise_acall(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientResponse:
        attempt_request, usage = request, Usage()
        previous: str | None = None
        for attempt in range(1, self.max_repeat_attempts + 2):
            response = await chain.copy(self).next_acall(attempt_request)
            usage = _add_usage(usage, response.chat_response)
            errors, stop = self._judge(response.chat_response, previous)
            if errors is None or stop is not None or attempt > self.max_repeat_attempts:
                return _finish(response, usage, attempt, stop)
            previous = _text(response.chat_response)
            attempt_request = self._retry_request(request, errors, attempt + 1)
        raise AssertionError("unreachable")  # pragma: no cover

    def advise_stream(self, request: ChatClientRequest, chain: AdvisorChain) -> Iterator[ChatClientResponse]:
        attempt_request, usage = request, Usage()
        previous: str | None = None
        for attempt in range(1, self.max_repeat_attempts + 2):
            chunks = list(chain.copy(self).next_stream(attempt_request))
            whole = _aggregate(chunks)
            usage = _add_usage(usage, whole)
            errors, stop = self._judge(whole, previous)
            if errors is None or stop is not None or attempt > self.max_repeat_attempts:
                yield from _replay(chunks, usage, attempt, stop)
                return
            previous = _text(whole)
            attempt_request = self._retry_request(request, errors, attempt + 1)

    async def advise_astream(
        self, request: ChatClientRequest, chain: AdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        attempt_request, usage = request, Usage()
        previous: str | None = None
        for attempt in range(1, self.max_repeat_attempts + 2):
            chunks = [c async for c in chain.copy(self).next_astream(attempt_request)]
            whole = _aggregate(chunks)
            usage = _add_usage(usage, whole)
            errors, stop = self._judge(whole, previous)
            if errors is None or stop is not None or attempt > self.max_repeat_attempts:
                for chunk in _replay(chunks, usage, attempt, stop):
                    yield chunk
                return
            previous = _text(whole)
            attempt_request = self._retry_request(request, errors, attempt + 1)


# -- helpers -------------------------------------------------------------------------------------


def _add_usage(total: Usage, response: ChatResponse | None) -> Usage:
    return total if response is None else total + response.metadata.usage


def _text(response: ChatResponse | None) -> str:
    return (response.text if response is not None else None) or ""


def _finish(response: ChatClientResponse, usage: Usage, attempts: int, stop: str | None = None) -> ChatClientResponse:
    cr = response.chat_response
    if cr is None:
        return response
    cr = cr.with_usage(usage).with_metadata(validation_attempts=attempts)
    if stop is not None:
        cr = cr.with_metadata(validation_stopped=stop)
    return response.mutate(chat_response=cr)


def _aggregate(chunks: Sequence[ChatClientResponse]) -> ChatResponse | None:
    responses = [c.chat_response for c in chunks if c.chat_response is not None]
    if not responses:
        return None
    agg = ResponseAggregator()
    for r in responses:
        agg.add(r)
    return agg.result()


def _replay(
    chunks: list[ChatClientResponse], usage: Usage, attempts: int, stop: str | None = None
) -> Iterator[ChatClientResponse]:
    # The summed usage goes on the last chunk that has a response: stream aggregators keep the
    # last non-empty usage, so the whole stream then reports the total of every attempt.
    last = max((i for i, c in enumerate(chunks) if c.chat_response is not None), default=-1)
    for i, chunk in enumerate(chunks):
        yield _finish(chunk, usage, attempts, stop) if i == last else chunk


__all__ = ["StructuredOutputValidationAdvisor"]
