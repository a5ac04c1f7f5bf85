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
``length``: the same limit would cut it again), or when the model gave the same invalid answer as
on the previous attempt (it cannot follow the format). The usage of every attempt is summed into the returned
response's metadata, and ``validation_attempts`` in its ``extra`` says how many calls were made.
In the stream modes each attempt is buffered, validated when it ends, and only the accepted
attempt's chunks are replayed downstream.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from chatclient import jsonsafe
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
from chatclient.messages import UserMessage
from chatclient.models.base import ChatResponse, ResponseAggregator, Usage
from chatclient.request import ChatClientRequest, ChatClientResponse

if TYPE_CHECKING:
    from chatclient.converters import EntityOutputConverter

_FEEDBACK_PREFIX = "Your previous answer was rejected because its JSON did not match the required format: "
_MAX_ERRORS = 10  # problems listed in the feedback line; more are summarised as a count
_MAX_MESSAGE = 200  # characters kept of each problem's message


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
        from chatclient.converters import EntityOutputConverter, converter_for

        converter = converter_for(output_type)
        if not isinstance(converter, EntityOutputConverter) or converter.json_schema is None:
            if converter is output_type:  # a converter given explicitly must bring its own schema
                raise ValueError(f"the converter {output_type!r} has no JSON schema to validate against")
            converter = EntityOutputConverter(output_type)  # e.g. dict: validate as a JSON object
        self.output_type = output_type
        self.max_repeat_attempts = max_repeat_attempts
        self.order = order
        if name is not None:
            self.name = name
        self._converter: EntityOutputConverter[Any] = converter
        self._validator: Any = None  # jsonschema validator, built on first use (keeps imports lazy)

    # -- validation ------------------------------------------------------------------------------

    def validate(self, text: str | None) -> list[str]:
        """Every problem of ``text`` as ``"at <path>: <message>"``; empty when it is valid."""
        from chatclient.converters import clean_text, first_json_value

        if text is None or not text.strip():
            return ["at $: the answer has no JSON (it is empty)"]
        cleaned = clean_text(text)
        segment = first_json_value(cleaned)
        if segment is None:
            return [f"at $: the answer is not valid JSON ({_json_problem(cleaned)}); answer with the JSON value only"]
        from chatclient.jsonsafe import JSONDepthError, loads

        try:
            instance = loads(segment)
        except JSONDepthError as exc:
            return [f"at $: the answer is not usable JSON ({exc})"]
        try:
            errors = [
                f"at {_json_path(e.absolute_path)}: {_short(e.message)}"
                for e in sorted(self._schema_validator().iter_errors(instance), key=_error_sort_key)
            ]
        except RecursionError:  # jsonschema recurses per level of a recursive schema ($ref to itself)
            return ["at $: the answer nests too deeply to validate; answer with a flatter JSON value"]
        if errors:
            return errors
        from pydantic import ValidationError

        try:
            self._converter.type_adapter.validate_json(segment)
        except ValidationError as exc:
            return [f"at {_json_path(e['loc'])}: {_short(e['msg'])}" for e in exc.errors(include_url=False)]
        return []

    def _schema_validator(self) -> Any:
        if self._validator is None:
            from jsonschema import Draft202012Validator  # type: ignore[import-untyped]  # no stubs in deps

            self._validator = Draft202012Validator(self._converter.json_schema)
        return self._validator

    def feedback(self, errors: Sequence[str]) -> str:
        """The one line added to the user message after a failed attempt."""
        shown = list(errors[:_MAX_ERRORS])
        if len(errors) > _MAX_ERRORS:
            shown.append(f"and {len(errors) - _MAX_ERRORS} more")
        return _FEEDBACK_PREFIX + "; ".join(shown) + "."

    def _retry_request(self, original: ChatClientRequest, errors: Sequence[str]) -> ChatClientRequest:
        line = self.feedback(errors)

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
            attempt_request = self._retry_request(request, errors)
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
            attempt_request = self._retry_request(request, errors)
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
            attempt_request = self._retry_request(request, errors)

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
            attempt_request = self._retry_request(request, errors)


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


def _json_path(loc: Any) -> str:
    from chatclient.converters import json_path

    return json_path(loc)


def _short(message: str) -> str:
    one_line = " ".join(message.split())
    return one_line if len(one_line) <= _MAX_MESSAGE else one_line[: _MAX_MESSAGE - 3] + "..."


def _error_sort_key(error: Any) -> tuple[str, str]:
    return (_json_path(error.absolute_path), error.message)


def _json_problem(text: str) -> str:
    try:
        jsonsafe.loads(text)
    except jsonsafe.JSONDepthError:
        return "it nests too deeply"
    except json.JSONDecodeError as exc:
        return exc.msg
    return "unexpected text"


__all__ = ["StructuredOutputValidationAdvisor"]
