"""Cheap construction of streamed delta chunks, shared by the stream parsers.

A stream parser builds one ``ChatResponse`` per token, usually holding nothing but a piece of text.
The dataclasses' own constructors normalise every field (tuples, frozen metadata, default
factories) and cost several microseconds together; a delta's fields are already in normal form, so
here the slots are filled directly and the metadata objects that do not change between chunks are
shared (they are frozen). The result compares equal to what the constructors build (a unit test
checks it); if a dataclass gains a field this module does not know, it falls back to the
constructors instead of leaving a slot empty.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from chatclient.errors import ModelResponseError
from chatclient.messages import AssistantMessage
from chatclient.models.base import ChatResponse, ChatResponseMetadata, Generation, GenerationMetadata

__all__ = [
    "MAX_CHOICES",
    "NO_FINISH",
    "choice_index",
    "message_chunk",
    "message_generation",
    "text_chunk",
    "text_generation",
]

NO_FINISH = GenerationMetadata()
"""The metadata of every delta generation (no finish reason yet, nothing extra): one shared object."""

MAX_CHOICES = 128
"""Choices (candidates) one streamed answer may name: OpenAI's ``n`` stops at 128, Gemini's
``candidateCount`` lower. Each index below the one named costs a placeholder generation, so a larger
one is refused rather than allocated."""


def choice_index(value: Any) -> int:
    """The index a stream chunk gives a choice, as an int in ``[0, MAX_CHOICES)``; anything else is a
    ``ModelResponseError`` (a non-numeric index still fails as ``int()`` fails, mapped by the model)."""
    try:
        index = value if type(value) is int else int(value)
    except OverflowError:  # an infinite float
        index = -1
    if 0 <= index < MAX_CHOICES:
        return index
    raise ModelResponseError(
        f"a stream chunk names choice {str(value)[:40]}; indexes 0..{MAX_CHOICES - 1} are accepted"
    )


_EMPTY_MESSAGE = AssistantMessage()
_MESSAGE_FIELDS = ("text", "tool_calls", "metadata", "reasoning", "refusal", "hosted_tool_calls", "citations")


def _setter(cls: type, name: str) -> Any:
    return cls.__dict__[name].__set__  # the slot's member descriptor: a C-level store


_new = object.__new__


def _slots_match() -> bool:
    return (
        tuple(f.name for f in fields(AssistantMessage)) == _MESSAGE_FIELDS
        and tuple(f.name for f in fields(Generation)) == ("output", "metadata")
        and tuple(f.name for f in fields(ChatResponse)) == ("generations", "metadata")
    )


if _slots_match():
    _m_text, _m_calls, _m_meta, _m_reasoning, _m_refusal, _m_hosted, _m_citations = (
        _setter(AssistantMessage, name) for name in _MESSAGE_FIELDS
    )
    _g_output, _g_meta = _setter(Generation, "output"), _setter(Generation, "metadata")
    _r_generations, _r_meta = _setter(ChatResponse, "generations"), _setter(ChatResponse, "metadata")
    _NO_META = _EMPTY_MESSAGE.metadata

    def text_generation(text: str) -> Generation:
        """``Generation(AssistantMessage(text))`` for a delta of text."""
        message = _new(AssistantMessage)
        _m_text(message, text)
        _m_calls(message, ())
        _m_meta(message, _NO_META)
        _m_reasoning(message, ())
        _m_refusal(message, None)
        _m_hosted(message, ())
        _m_citations(message, ())
        generation = _new(Generation)
        _g_output(generation, message)
        _g_meta(generation, NO_FINISH)
        return generation

    def message_generation(message: AssistantMessage) -> Generation:
        """``Generation(message)`` with the shared delta metadata."""
        generation = _new(Generation)
        _g_output(generation, message)
        _g_meta(generation, NO_FINISH)
        return generation

    def _response(generations: tuple[Generation, ...], metadata: ChatResponseMetadata) -> ChatResponse:
        response = _new(ChatResponse)
        _r_generations(response, generations)
        _r_meta(response, metadata)
        return response

else:  # pragma: no cover - only if the message dataclasses change shape

    def text_generation(text: str) -> Generation:
        """``Generation(AssistantMessage(text))`` for a delta of text."""
        return Generation(AssistantMessage(text), NO_FINISH)

    def message_generation(message: AssistantMessage) -> Generation:
        """``Generation(message)`` with the shared delta metadata."""
        return Generation(message, NO_FINISH)

    def _response(generations: tuple[Generation, ...], metadata: ChatResponseMetadata) -> ChatResponse:
        return ChatResponse(generations, metadata)


def text_chunk(text: str, metadata: ChatResponseMetadata) -> ChatResponse:
    """A one-generation delta holding ``text``; ``metadata`` is shared between chunks (frozen)."""
    return _response((text_generation(text),), metadata)


def message_chunk(generations: tuple[Generation, ...], metadata: ChatResponseMetadata) -> ChatResponse:
    """A delta of the given generations (already a tuple), with shared metadata."""
    return _response(generations, metadata)
