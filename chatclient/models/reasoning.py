"""Split a local model's ``<think>…</think>`` reasoning out of its answer, whole or while streaming.

Reasoning models served without a reasoning parser (llama.cpp, some vLLM and Ollama setups) put
their thinking at the start of the content, wrapped in ``<think>`` tags. Only a block that OPENS the
answer counts (after optional whitespace): a ``<think>`` later in the text is the answer talking
about tags and stays untouched.

    >>> split_think("<think>2+2 is 4</think>The answer is 4.")
    ('2+2 is 4', 'The answer is 4.')
    >>> s = ThinkSplitter()
    >>> s.feed("<thi") + s.feed("nk>hm</th") + s.feed("ink>Hi") + s.finish()
    [('reasoning', 'hm'), ('text', 'Hi')]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

__all__ = ["DEFAULT_THINK_TAGS", "ThinkSplitter", "split_think"]

DEFAULT_THINK_TAGS: tuple[str, ...] = ("think", "thinking")
"""Tag names recognised by default (DeepSeek-R1/Qwen3 use ``think``; some fine-tunes ``thinking``)."""

PieceKind = Literal["reasoning", "text"]


def split_think(text: str, tags: Sequence[str] = DEFAULT_THINK_TAGS) -> tuple[str, str]:
    """``(reasoning, answer)`` of a whole text; ``reasoning`` is ``""`` when the text has no leading block.

    Several leading blocks are joined. A block that is never closed (the answer was cut by
    ``max_tokens`` while thinking) is all reasoning, with an empty answer.
    """
    splitter = ThinkSplitter(tags)
    pieces = splitter.feed(text) + splitter.finish()
    reasoning = "".join(p for kind, p in pieces if kind == "reasoning")
    answer = "".join(p for kind, p in pieces if kind == "text")
    return reasoning, answer


class ThinkSplitter:
    """Incremental ``<think>`` splitter: feed content deltas, get ``("reasoning"|"text", piece)`` pairs.

    A tag cut across deltas (``"<thi"`` + ``"nk>"``) is recognised: the ambiguous tail is held back
    until the next delta (or ``finish()``) decides it. Whitespace before the first block is dropped;
    the whitespace models put between ``</think>`` and the answer is dropped too, so the streamed
    answer equals the one :func:`split_think` returns.
    """

    __slots__ = ("_buffer", "_close", "_opens", "_state")

    def __init__(self, tags: Sequence[str] = DEFAULT_THINK_TAGS) -> None:
        if not tags:
            raise ValueError("ThinkSplitter needs at least one tag name, e.g. ('think',)")
        self._opens = tuple(f"<{t}>" for t in tags)
        self._close = ""
        # "start": nothing decided yet; "reasoning": inside a block; "between": after a block,
        # where another block or the answer may follow; "text": the answer, passed through.
        self._state = "start"
        self._buffer = ""

    def feed(self, delta: str) -> list[tuple[PieceKind, str]]:
        """Consume one content delta; return the pieces it decides (maybe none)."""
        if self._state == "text":
            return [("text", delta)] if delta else []
        self._buffer += delta
        out: list[tuple[PieceKind, str]] = []
        while self._buffer:
            if self._state == "reasoning":
                end = self._buffer.find(self._close)
                if end >= 0:
                    if end:
                        out.append(("reasoning", self._buffer[:end]))
                    self._buffer = self._buffer[end + len(self._close) :]
                    self._state = "between"
                    continue
                keep = _partial_suffix(self._buffer, (self._close,))
                emit = self._buffer[: len(self._buffer) - keep]
                if emit:
                    out.append(("reasoning", emit))
                self._buffer = self._buffer[len(emit) :]
                return out
            # "start" or "between": skip whitespace, then a block opens, or the answer begins.
            stripped = self._buffer.lstrip()
            if not stripped:
                return out  # only whitespace so far: undecided
            for open_tag in self._opens:
                if stripped.startswith(open_tag):
                    self._buffer = stripped[len(open_tag) :]
                    self._close = "</" + open_tag[1:]
                    self._state = "reasoning"
                    break
            else:
                if any(tag.startswith(stripped) for tag in self._opens):
                    return out  # could still become an opening tag
                # The answer: leading whitespace is kept when no block came first.
                text = stripped if self._state == "between" else self._buffer
                self._state = "text"
                self._buffer = ""
                out.append(("text", text))
                return out
        return out

    def finish(self) -> list[tuple[PieceKind, str]]:
        """Flush what is held back at the end of the answer."""
        rest, self._buffer = self._buffer, ""
        if not rest:
            return []
        if self._state == "reasoning":
            return [("reasoning", rest)]
        if self._state == "between":
            rest = rest.lstrip()
            return [("text", rest)] if rest else []
        self._state = "text"
        return [("text", rest)]

    @property
    def answering(self) -> bool:
        """Whether the answer has started (everything fed from now on is passed through as text)."""
        return self._state == "text"

    @property
    def in_reasoning(self) -> bool:
        """Whether the splitter is inside a reasoning block (the answer has not started)."""
        return self._state == "reasoning"


def _partial_suffix(buffer: str, tags: Sequence[str]) -> int:
    """Length of the longest tail of ``buffer`` that is a proper prefix of one of ``tags``."""
    best = 0
    for tag in tags:
        for n in range(min(len(tag) - 1, len(buffer)), 0, -1):
            if buffer.endswith(tag[:n]):
                best = max(best, n)
                break
    return best
