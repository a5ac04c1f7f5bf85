"""The documentation builds in strict mode, and the troubleshooting page quotes real error texts.

The API reference pages are generated from the docstrings, so this also fails when a documented
module, class or cross-reference disappears from the code.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from pydantic import BaseModel

ROOT = Path(__file__).resolve().parents[1]


def test_mkdocs_build_strict(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs", reason="the docs tools are not installed (mkdocs, mkdocs-material, mkdocstrings)")
    pytest.importorskip("material", reason="mkdocs-material is not installed")
    pytest.importorskip("mkdocstrings_handlers.python", reason="mkdocstrings[python] is not installed")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"), "-d", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
    )
    output = result.stdout + result.stderr
    warnings = [line for line in output.splitlines() if line.startswith(("WARNING", "ERROR"))]
    assert result.returncode == 0 and not warnings, output[-4000:]
    # The build produced the guide and the generated reference, not just an empty shell.
    assert (tmp_path / "getting-started" / "index.html").is_file()
    reference = (tmp_path / "reference" / "chatclient" / "index.html").read_text(encoding="utf-8")
    assert 'id="chatclient.ChatClient"' in reference


# -- troubleshooting.md quotes what the library really says -----------------------------------------

TROUBLESHOOTING = ROOT / "docs" / "guide" / "troubleshooting.md"
_PORT = re.compile(r'(127\.0\.0\.1|localhost)(:|", port )\d+')


def _normalise(text: str) -> str:
    # Host ports differ between the page (the usual defaults) and the test (free local ports).
    return _PORT.sub(r"\1\2PORT", text.strip())


def _quoted(number: int) -> list[str]:
    """The ```text blocks of section "## <number>. ..." of the troubleshooting page."""
    page = TROUBLESHOOTING.read_text(encoding="utf-8")
    sections = re.split(r"^## (\d+)\. .*$", page, flags=re.MULTILINE)
    body = dict(zip(sections[1::2], sections[2::2], strict=True))[str(number)]
    return re.findall(r"^```text\n(.*?)\n```$", body, flags=re.MULTILINE | re.DOTALL)


def _error_text(fn: Callable[[], object]) -> str:
    try:
        fn()
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    raise AssertionError("the snippet did not fail")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Person(BaseModel):
    name: str
    age: int


def _produce(number: int, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    from advisors import SimpleLoggerAdvisor
    from chatclient import ChatClient
    from chatclient.testing import ScriptedChatModel

    if number == 1:
        from chatclient.models.openai import OpenAIChatModel

        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
        return [_error_text(lambda: OpenAIChatModel("gpt-4o-mini"))]
    if number == 2:
        from chatclient.models.ollama import OllamaChatModel

        ollama = OllamaChatModel("llama3.2", base_url=f"http://localhost:{_closed_port()}", max_retries=0)
        return [_error_text(lambda: ChatClient.create(ollama).prompt("Hi").call().content())]
    if number == 3:
        from chatclient.models.openai import OpenAIChatModel
        from tests.support.loopback import LoopbackServer, Reply

        not_found = {"error": {"code": 404, "message": "File Not Found", "type": "not_found_error"}}  # llama-server's
        with LoopbackServer() as server:
            server.script("/chat/completions", Reply(404, json=not_found))
            model = OpenAIChatModel("local", base_url=server.url, max_retries=0)
            return [_error_text(lambda: ChatClient.create(model).prompt("Hi").call().content())]
    if number == 4:
        return [_error_text(lambda: ChatClient.create("gpt-4o-mini"))]  # type: ignore[arg-type]
    if number == 5:
        builder = ChatClient.builder(ScriptedChatModel(["ok"]))
        return [_error_text(lambda: builder.default_advisors(SimpleLoggerAdvisor).build())]  # type: ignore[arg-type]
    if number == 6:
        client = ChatClient.builder(ScriptedChatModel(["ok"])).default_system("You are {{ voice }}.", params={}).build()
        return [_error_text(lambda: client.prompt("Hi").call().content())]
    if number == 7:
        client = ChatClient.create(ScriptedChatModel(["Sure! Maria is 31."]))
        return [_error_text(lambda: client.prompt("Extract the person: Maria Silva, 31").call().entity(Person))]
    if number == 8:
        from chatclient.models.llamacpp import LlamaCppChatModel

        monkeypatch.setitem(sys.modules, "llama_cpp", None)  # as if llama-cpp-python were not installed
        return [_error_text(lambda: LlamaCppChatModel())]
    if number == 9:
        pytest.importorskip("psycopg", reason="the postgres extra is not installed")
        pytest.importorskip("redis", reason="the redis extra is not installed")
        from chatclient.memory.postgres import PostgresChatMemoryRepository
        from chatclient.memory.redis import RedisChatMemoryRepository

        pg = PostgresChatMemoryRepository(f"postgresql://postgres@127.0.0.1:{_closed_port()}/postgres")
        rd = RedisChatMemoryRepository(f"redis://127.0.0.1:{_closed_port()}/0")
        return [_error_text(pg.find_conversation_ids), _error_text(rd.find_conversation_ids)]
    if number == 10:
        stream = ChatClient.create(ScriptedChatModel([["Once", " upon"]])).prompt("Tell me a story").stream()
        parts = list(stream.content())
        assert parts == ["Once", " upon"]
        return [_error_text(lambda: "".join(stream.content()))]
    raise AssertionError(f"no producer for problem {number}")


def test_troubleshooting_lists_ten_problems() -> None:
    numbers = re.findall(r"^## (\d+)\. ", TROUBLESHOOTING.read_text(encoding="utf-8"), flags=re.MULTILINE)
    assert numbers == [str(n) for n in range(1, 11)]


@pytest.mark.parametrize("number", range(1, 11))
def test_troubleshooting_quotes_the_exact_error_text(number: int, monkeypatch: pytest.MonkeyPatch) -> None:
    quoted = [_normalise(q) for q in _quoted(number)]
    produced = [_normalise(p) for p in _produce(number, monkeypatch)]
    assert quoted == produced
