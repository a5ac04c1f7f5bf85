"""What ``ag_ui`` and ``ai_sdk`` share when they read a conversation from a request body.

Both protocols send the whole conversation on every run, in their own message shapes. Each turns
its messages into OpenAI-shaped dicts (the shape ``openai_compat`` already reads and checks), and
``conversation`` does the rest: the chatclient messages, trimmed to the newest turn when the
target's memory holds the history (API.md §15: with a conversation id and a memory advisor, only
the newest user message is taken).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from chatclient.serving._edge import EdgeError

MAX_ID_CHARS = 256
"""Longest thread / chat / run id accepted (it names a memory conversation)."""


def checked_id(value: Any, what: str) -> str:
    """``value`` as an id: 1-256 printable characters, else ``EdgeError`` 400."""
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_ID_CHARS or not value.isprintable():
        raise EdgeError(400, f"{what} must be 1-{MAX_ID_CHARS} printable characters.", code=f"invalid_{what}")
    return value.strip()


def conversation(raw: Sequence[dict[str, Any]], *, memory: bool) -> tuple[Any, ...]:
    """The chatclient messages of OpenAI-shaped ``raw`` messages (``EdgeError`` 400 when malformed).

    With ``memory`` (the target keeps the conversation) only the system text and the newest user
    message are sent — or the tool results ending the conversation, which answer the caller's tool
    calls memory kept from the previous run (``openai_compat``'s rule).
    """
    from chatclient.messages import ToolResponseMessage, UserMessage
    from chatclient.serving.openai_compat import _messages, _newest_turn

    messages = _messages(list(raw))
    if not memory:
        return tuple(messages)
    if not any(isinstance(m, (UserMessage, ToolResponseMessage)) for m in messages):
        raise EdgeError(400, "The conversation needs a user message.", code="invalid_messages")
    return tuple(_newest_turn(messages))


def answer_text(value: Any) -> str:
    """A resume payload or tool output as the text a model or an agent reads."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def jsonable(value: Any) -> Any:
    """``value`` as plain JSON data (pydantic models and dataclasses dumped, anything else as text)."""

    def fallback(item: Any) -> Any:
        dump = getattr(item, "model_dump", None)
        if callable(dump):
            return dump(mode="json")
        from dataclasses import asdict, is_dataclass

        if is_dataclass(item) and not isinstance(item, type):
            return asdict(item)
        return str(item)

    try:
        return json.loads(json.dumps(value, ensure_ascii=False, default=fallback))
    except (TypeError, ValueError, RecursionError):
        return str(value)
