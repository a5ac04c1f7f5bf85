"""Cassette record → replay → prompt change → diff, over real HTTP against the loopback server.

For OpenAI, Anthropic and Ollama, blocking and async, plain and streamed: a recording is made
against the loopback server, replayed with the server answering something else (so a replayed
answer provably came from the file), and a changed prompt fails with a diff naming the change.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from chatclient import ChatClient
from chatclient.errors import CassetteError, CassetteMismatchError
from chatclient.models.anthropic import AnthropicChatModel
from chatclient.models.ollama import OllamaChatModel
from chatclient.models.openai import OpenAIChatModel
from chatclient.testing import Cassette
from tests.support import server_fixtures
from tests.support.loopback import (
    NDJSON,
    SSE,
    LoopbackServer,
    Reply,
    anthropic_message,
    anthropic_stream,
    ollama_chat,
    ollama_stream,
    openai_completion,
    openai_stream,
)

pytestmark = pytest.mark.integration
loopback_server, server = server_fixtures()

KEY = "sk-cassette-secret-0123456789"


def _openai(srv: LoopbackServer, cassette: Cassette) -> Any:
    return OpenAIChatModel(
        "gpt-test", api_key=KEY, base_url=srv.url + "/v1", http_client=cassette.http_client(),
        async_http_client=cassette.async_http_client(), max_retries=0,
    )


def _anthropic(srv: LoopbackServer, cassette: Cassette) -> Any:
    return AnthropicChatModel(
        "claude-test", api_key=KEY, base_url=srv.url, http_client=cassette.http_client(),
        async_http_client=cassette.async_http_client(), max_retries=0,
    )


def _ollama(srv: LoopbackServer, cassette: Cassette) -> Any:
    return OllamaChatModel(
        "llama-test", api_key=KEY, base_url=srv.url, http_client=cassette.http_client(),
        async_http_client=cassette.async_http_client(), max_retries=0,
    )


def _plain(text: str, provider: str) -> Any:
    if provider == "openai":
        return Reply(json=openai_completion(text))
    if provider == "anthropic":
        return Reply(json=anthropic_message(text))
    return Reply(json=ollama_chat(text))


def _streamed(pieces: tuple[str, ...], provider: str) -> Any:
    if provider == "openai":
        return SSE(openai_stream(pieces))
    if provider == "anthropic":
        return SSE(anthropic_stream(pieces), done=False)
    return NDJSON(ollama_stream(pieces))


PROVIDERS: dict[str, tuple[str, Callable[[LoopbackServer, Cassette], Any]]] = {
    "openai": ("/v1/chat/completions", _openai),
    "anthropic": ("/v1/messages", _anthropic),
    "ollama": ("/api/chat", _ollama),
}


def _ask(model: Any, text: str, mode: str) -> str:
    spec = ChatClient.create(model).prompt(text)
    if mode == "call":
        return spec.call().content() or ""
    if mode == "stream":
        return "".join(spec.stream().content())
    if mode == "acall":
        return asyncio.run(spec.acall().content()) or ""

    async def collect() -> str:
        return "".join([piece async for piece in spec.astream().content()])

    return asyncio.run(collect())


@pytest.mark.parametrize("provider", list(PROVIDERS))
@pytest.mark.parametrize("mode", ["call", "stream", "acall", "astream"])
def test_record_then_replay_then_a_changed_prompt_fails_with_a_diff(
    server: LoopbackServer, tmp_path: Path, provider: str, mode: str
) -> None:
    path, make = PROVIDERS[provider]
    file = tmp_path / "cassette.json"
    streamed = mode in ("stream", "astream")
    server.script(path, _streamed(("Rec", "orded"), provider) if streamed else _plain("Recorded", provider))

    with Cassette(file, mode="record") as cassette:
        assert _ask(make(server, cassette), "What is an advisor?", mode) == "Recorded"
    assert len(server.requests_to(path)) == 1
    stored = file.read_text(encoding="utf-8")
    assert KEY not in stored and KEY[:12] not in stored  # the key is neither stored nor partly echoed
    data = json.loads(stored)
    assert data["interactions"][0]["request"]["path"] == path
    assert "What is an advisor?" in json.dumps(data["interactions"][0]["request"]["body"])
    if streamed:
        assert isinstance(data["interactions"][0]["response"]["lines"], list)  # stream kept line by line

    # the server would now answer differently: a replay must come from the file, without a request
    server.set_default(path, _streamed(("Live",), provider) if streamed else _plain("Live", provider))
    with Cassette(file) as cassette:
        assert _ask(make(server, cassette), "What is an advisor?", mode) == "Recorded"
        assert cassette.played == 1
    assert len(server.requests_to(path)) == 1

    with Cassette(file) as cassette, pytest.raises(CassetteMismatchError) as info:
        _ask(make(server, cassette), "What is a tool?", mode)
    assert len(server.requests_to(path)) == 1  # nothing went to the network
    diff = info.value.diff
    assert "-" in diff and "What is an advisor?" in diff and "What is a tool?" in diff
    assert any(line.startswith("+") and "What is a tool?" in line for line in diff.splitlines())
    assert "re-record" in str(info.value)


def test_new_episodes_replays_known_requests_and_appends_new_ones(server: LoopbackServer, tmp_path: Path) -> None:
    path, make = PROVIDERS["openai"]
    file = tmp_path / "c.json"
    server.script(path, _plain("first", "openai"))
    with Cassette(file, mode="record") as cassette:
        _ask(make(server, cassette), "one", "call")
    server.script(path, _plain("second", "openai"))
    with Cassette(file, mode="new_episodes") as cassette:
        model = make(server, cassette)
        assert _ask(model, "one", "call") == "first"  # replayed
        assert _ask(model, "two", "call") == "second"  # sent and recorded
    assert len(server.requests_to(path)) == 2
    assert len(json.loads(file.read_text())["interactions"]) == 2
    with Cassette(file) as cassette:
        model = make(server, cassette)
        assert [_ask(model, "one", "call"), _ask(model, "two", "call")] == ["first", "second"]
    assert len(server.requests_to(path)) == 2


def test_identical_requests_replay_in_recorded_order_and_errors_are_recorded(server: LoopbackServer, tmp_path: Path) -> None:
    path, make = PROVIDERS["openai"]
    file = tmp_path / "c.json"
    server.script(path, _plain("a", "openai"), _plain("b", "openai"))
    with Cassette(file, mode="record") as cassette:
        model = make(server, cassette)
        assert [_ask(model, "same", "call"), _ask(model, "same", "call")] == ["a", "b"]
    with Cassette(file) as cassette:
        model = make(server, cassette)
        assert [_ask(model, "same", "call"), _ask(model, "same", "call"), _ask(model, "same", "call")] == ["a", "b", "b"]

    from chatclient.errors import RateLimitError

    server.script(path, Reply(429, json={"error": {"message": "slow down"}}, headers={"Retry-After": "7"}))
    file2 = tmp_path / "err.json"
    with Cassette(file2, mode="record") as cassette, pytest.raises(RateLimitError):
        _ask(make(server, cassette), "x", "call")
    with Cassette(file2) as cassette, pytest.raises(RateLimitError) as info:
        _ask(make(server, cassette), "x", "call")
    assert info.value.retry_after == 7.0


def test_replay_without_a_file_or_outside_the_context_says_what_to_do(server: LoopbackServer, tmp_path: Path) -> None:
    with pytest.raises(CassetteError, match="record it first"):
        Cassette(tmp_path / "missing.json").__enter__()
    cassette = Cassette(tmp_path / "x.json", mode="record")
    with pytest.raises(CassetteError, match="context manager"):
        _ask(_openai(server, cassette), "hi", "call")
    with pytest.raises(ValueError, match="mode"):
        Cassette(tmp_path / "x.json", mode="replay-all")  # type: ignore[arg-type]


def test_a_key_echoed_by_the_server_is_scrubbed_and_ignored_keys_do_not_break_matching(
    server: LoopbackServer, tmp_path: Path
) -> None:
    path, make = PROVIDERS["openai"]
    file = tmp_path / "c.json"
    echo = Reply(json=openai_completion(f"your key is {KEY}"), headers={"x-request-id": f"req-{KEY}"})
    server.script(path, echo)
    with Cassette(file, mode="record", ignore_keys=("temperature",)) as cassette:
        live = _ask(make(server, cassette), "echo", "call")
    stored = file.read_text(encoding="utf-8")
    assert KEY not in stored and "[REDACTED]" in stored
    assert KEY not in live  # the live run already sees what the file holds

    from chatclient import ChatOptions

    with Cassette(file, ignore_keys=("temperature",)) as cassette:
        spec = ChatClient.create(make(server, cassette)).prompt("echo").options(ChatOptions(temperature=0.9))
        assert "[REDACTED]" in (spec.call().content() or "")
    assert len(server.requests_to(path)) == 1
