"""Replay helpers for recorded OpenAI-format and Ollama responses (tests/data/providers/{openai,ollama,compat}).

A fixture is a JSON file: ``source`` (the vendor reference the shape comes from), ``kind``
(``call``, ``stream`` — SSE events, dicts or ``": comment"`` strings —, ``ndjson`` or ``error``),
the recorded ``body`` / ``events`` / ``lines`` (plus ``status``/``headers`` for errors), and
``expect``: the values chatclient must produce, field by field. The body is served by the loopback
server re-cut into small irregular HTTP chunks, so SSE frames, JSON lines and UTF-8 characters
arrive split across network reads.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from chatclient.models.base import ChatResponse
from tests.support.loopback import Reply

DATA = Path(__file__).resolve().parent.parent / "data" / "providers"


def load(group: str, name: str) -> dict[str, Any]:
    """The fixture ``tests/data/providers/<group>/<name>.json``."""
    data: dict[str, Any] = json.loads((DATA / group / f"{name}.json").read_text(encoding="utf-8"))
    return data


def names(group: str, *kinds: str) -> list[str]:
    """Fixture names of ``group`` whose kind is one of ``kinds``, sorted."""
    out = []
    for path in sorted((DATA / group).glob("*.json")):
        if json.loads(path.read_text(encoding="utf-8"))["kind"] in kinds:
            out.append(path.stem)
    return out


def wire_body(fixture: dict[str, Any]) -> tuple[bytes, str]:
    """The bytes a server sends for the fixture, and their content type."""
    kind = fixture["kind"]
    if kind == "stream":
        frames = []
        for event in fixture["events"]:
            if isinstance(event, str) and event.startswith(":"):
                frames.append(f"{event}\n\n")  # an SSE comment (OpenRouter's keep-alive)
            else:
                frames.append(f"data: {json.dumps(event, ensure_ascii=False)}\n\n")
        frames.append("data: [DONE]\n\n")
        return "".join(frames).encode(), "text/event-stream"
    if kind == "ndjson":
        return "".join(
            json.dumps(x, ensure_ascii=False) + "\n" for x in fixture["lines"]
        ).encode(), "application/x-ndjson"
    return json.dumps(fixture["body"], ensure_ascii=False).encode(), "application/json"


def recorded(fixture: dict[str, Any], seed: str) -> Reply:
    """The fixture as a loopback answer cut into random 1..19 byte chunks (reproducible per seed)."""
    rng = random.Random(seed)
    sizes = [rng.randint(1, 19) for _ in range(97)]
    body, content_type = wire_body(fixture)
    headers = {"content-type": content_type, **fixture.get("headers", {})}
    return Reply(int(fixture.get("status", 200)), body=body, headers=headers, split=sizes)


def check(response: ChatResponse, expect: dict[str, Any]) -> None:
    """Assert every value ``expect`` names (missing keys are not checked)."""
    md = response.metadata
    if "id" in expect:
        assert md.id == expect["id"]
    if "model" in expect:
        assert md.model == expect["model"]
    gens = expect.get("generations", [])
    assert len(response.generations) == len(gens), [g.output for g in response.generations]
    for g, e in zip(response.generations, gens, strict=True):
        out = g.output
        for key in ("text", "refusal"):
            if key in e:
                assert getattr(out, key) == e[key], (key, getattr(out, key))
        if "finish_reason" in e:
            assert g.finish_reason == e["finish_reason"]
        if "tool_calls" in e:
            calls = [[c.id, c.name, c.arguments, dict(c.metadata)] for c in out.tool_calls]
            assert calls == e["tool_calls"]
        if "reasoning" in e:
            blocks = [[r.text, r.signature, r.redacted, r.provider] for r in out.reasoning]
            assert blocks == e["reasoning"]
        for key, value in e.get("metadata", {}).items():
            assert out.metadata[key] == value, key
        for key, value in e.get("extra", {}).items():
            assert g.metadata.extra[key] == value, key
        for key in e.get("absent_extra", ()):
            assert key not in g.metadata.extra, key
    for key, value in expect.get("usage", {}).items():
        assert getattr(md.usage, key) == value, (key, md.usage)
    for key, value in expect.get("response_extra", {}).items():
        assert md.extra[key] == value, key
    for key in expect.get("absent_response_extra", ()):
        assert key not in md.extra, key
