"""Token counters for :class:`~chatclient.memory.TokenWindowChatMemory`.

``SimpleTokenCounter`` is an offline estimate (about four characters per token, plus a small
per-message overhead). ``TiktokenTokenCounter`` counts with OpenAI's tiktoken when it is installed;
tiktoken downloads its BPE file on first use, so on a machine without network access it fails when
constructed, with :class:`TokenCounterUnavailableError` saying how to fix that.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from chatclient.errors import ChatClientError
from chatclient.messages import AssistantMessage, Message, ToolResponseMessage, UserMessage


class TokenCounterUnavailableError(ChatClientError):
    """A token counter could not be set up (its library or its data file is missing)."""


@runtime_checkable
class TokenCounter(Protocol):
    """Counts the tokens a message costs in a prompt."""

    def count(self, message: Message) -> int:
        """The number of tokens of ``message`` (>= 0)."""
        ...


def message_pieces(message: Message) -> list[str]:
    """The texts of a message that a model reads: text, tool names and arguments, tool results."""
    pieces: list[str] = []
    if isinstance(message, ToolResponseMessage):
        for r in message.responses:
            pieces += [r.name, r.response_data]
        return pieces
    if message.text:
        pieces.append(message.text)
    if isinstance(message, AssistantMessage):
        for c in message.tool_calls:
            pieces += [c.name, c.arguments]
    return pieces


class SimpleTokenCounter:
    """An offline estimate: ``ceil(characters / chars_per_token)`` per text, plus overheads.

    >>> from chatclient.messages import UserMessage
    >>> SimpleTokenCounter().count(UserMessage("abcdefgh"))
    6
    """

    def __init__(self, *, chars_per_token: float = 4.0, per_message: int = 4, per_media: int = 85) -> None:
        if chars_per_token <= 0:
            raise ValueError("chars_per_token must be greater than 0")
        if per_message < 0 or per_media < 0:
            raise ValueError("per_message and per_media cannot be negative")
        self.chars_per_token = chars_per_token
        self.per_message = per_message
        self.per_media = per_media

    def count(self, message: Message) -> int:
        n = self.per_message + sum(math.ceil(len(p) / self.chars_per_token) for p in message_pieces(message))
        if isinstance(message, UserMessage):
            n += self.per_media * len(message.media)
        return n


class TiktokenTokenCounter:
    """Counts with a tiktoken encoding (``cl100k_base`` unless ``model`` or ``encoding`` says otherwise).

    Raises :class:`TokenCounterUnavailableError` when tiktoken is not installed or its encoding file
    cannot be loaded (tiktoken fetches it over the network once and caches it; point
    ``TIKTOKEN_CACHE_DIR`` at a folder holding the file to work offline).
    """

    def __init__(
        self, encoding: str = "cl100k_base", *, model: str | None = None, per_message: int = 4, per_media: int = 85
    ) -> None:
        try:
            import tiktoken
        except ImportError:
            raise TokenCounterUnavailableError(
                "TiktokenTokenCounter needs the 'tiktoken' package: pip install tiktoken "
                "(or use SimpleTokenCounter, which works offline)"
            ) from None
        name = model or encoding
        if model is None and encoding not in tiktoken.list_encoding_names():
            raise ValueError(f"tiktoken knows no encoding named {encoding!r}; known: {tiktoken.list_encoding_names()}")
        try:
            self._encoding: Any = tiktoken.encoding_for_model(model) if model else tiktoken.get_encoding(encoding)
        except KeyError:
            raise ValueError(f"tiktoken knows no encoding or model named {name!r}") from None
        except Exception as exc:  # tiktoken raises whatever its HTTP client raises when offline
            raise TokenCounterUnavailableError(
                f"tiktoken could not load the encoding for {name!r}: {type(exc).__name__}: {exc}. "
                "tiktoken downloads its BPE file on first use; without network access, copy the file into "
                "a folder and set TIKTOKEN_CACHE_DIR to it, or use SimpleTokenCounter"
            ) from None
        self.per_message = per_message
        self.per_media = per_media

    def count(self, message: Message) -> int:
        encode: Callable[..., list[int]] = self._encoding.encode
        n = self.per_message + sum(len(encode(p, disallowed_special=())) for p in message_pieces(message))
        if isinstance(message, UserMessage):
            n += self.per_media * len(message.media)
        return n


def as_counter(counter: TokenCounter | Callable[[Message], int] | None) -> Callable[[Message], int]:
    """A counting function from a counter object, a plain function, or ``None`` (the simple default)."""
    if counter is None:
        return SimpleTokenCounter().count
    if isinstance(counter, TokenCounter):
        return counter.count
    if callable(counter):
        return counter
    raise TypeError("token_counter must be a TokenCounter or a function of a message")
