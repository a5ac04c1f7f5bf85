"""Replay helpers for recorded OpenAI Responses API answers (tests/data/providers/responses/).

Fixtures follow tests/support/openai_replay.py (``source``, ``kind``, ``body``/``events``,
``expect``); a Responses stream is sent the way OpenAI sends it: an ``event:`` line naming each
event's type before its ``data:`` line, and no ``[DONE]`` marker (``response.completed`` ends it).
Extra ``expect`` keys: ``hosted`` ([id, name, input, status] per hosted tool call), ``hosted_logs``,
``citations`` ([url, title, start, end]) and ``raw_output`` (the raw items are kept in metadata).
"""

from __future__ import annotations

import json
import random
from typing import Any

from chatclient.models.base import ChatResponse
from chatclient.models.openai_responses import OUTPUT_KEY
from tests.support.loopback import Reply
from tests.support.openai_replay import check as check_common
from tests.support.openai_replay import load, names

__all__ = ["check", "load", "names", "recorded", "sse_bytes"]

GROUP = "responses"


def sse_bytes(events: list[dict[str, Any]]) -> bytes:
    """The event-stream body of ``events`` (named events, no end marker of its own)."""
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e, ensure_ascii=False)}\n\n" for e in events).encode()


def recorded(fixture: dict[str, Any], seed: str, *, whole: bool = False) -> Reply:
    """The fixture as a loopback answer, cut into random 1..19 byte chunks unless ``whole``."""
    rng = random.Random(seed)
    sizes = () if whole else tuple(rng.randint(1, 19) for _ in range(97))
    if fixture["kind"] in ("stream", "stream_error"):
        body, ctype = sse_bytes(fixture["events"]), "text/event-stream"
    else:
        body, ctype = json.dumps(fixture["body"], ensure_ascii=False).encode(), "application/json"
    headers = {"content-type": ctype, **fixture.get("headers", {})}
    return Reply(int(fixture.get("status", 200)), body=body, headers=headers, split=sizes)


def check(response: ChatResponse, expect: dict[str, Any]) -> None:
    """Assert every value ``expect`` names, hosted tool calls and citations included."""
    check_common(response, expect)
    out = response.generations[0].output
    if "hosted" in expect:
        got = [[h.id, h.name, dict(h.input), h.status] for h in out.hosted_tool_calls]
        assert got == expect["hosted"]
        assert all(h.provider == "openai-responses" and h.raw for h in out.hosted_tool_calls)
    if "hosted_logs" in expect:
        assert out.hosted_tool_calls[0].output["logs"] == expect["hosted_logs"]
    if "citations" in expect:
        assert [[c.url, c.title, c.start, c.end] for c in out.citations] == expect["citations"]
    if "raw_output" in expect:
        assert (OUTPUT_KEY in out.metadata) is expect["raw_output"]
