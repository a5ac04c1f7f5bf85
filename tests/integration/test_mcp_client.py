"""McpClient against real servers over stdio: mcp-server-time and mcp-server-git (third-party, from
PyPI) and our own serve() fixture, plus servers that fail in every way a server can fail."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from chatclient.errors import (
    McpConnectionError,
    McpError,
    McpProtocolError,
    McpServerError,
    McpTimeoutError,
)
from chatclient.mcp import McpClient
from chatclient.messages import AssistantMessage, UserMessage

pytestmark = [pytest.mark.mcp, pytest.mark.integration]

SERVERS = str(Path(__file__).with_name("mcp_servers.py"))
PY = sys.executable


def fixture_client(mode: str, **kwargs: object) -> McpClient:
    return McpClient.stdio(PY, [SERVERS, mode], **kwargs)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def served() -> Iterator[McpClient]:
    with fixture_client("serve") as client:
        yield client


# -- third-party servers ------------------------------------------------------------------------------


def test_time_server_lists_and_calls_tools() -> None:
    with McpClient.stdio(PY, ["-m", "mcp_server_time", "--local-timezone", "UTC"]) as client:
        assert client.name == "mcp-time"
        assert client.protocol_version
        names = {t.name for t in client.list_tools()}
        assert {"get_current_time", "convert_time"} <= names
        result = client.call_tool("get_current_time", {"timezone": "Asia/Tokyo"})
        assert not result.is_error
        assert result.structured_content["timezone"] == "Asia/Tokyo"
        assert "+09:00" in result.structured_content["datetime"]
        converted = client.call_tool(
            "convert_time", {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Kolkata"}
        )
        assert "17:30" in converted.structured_content["target"]["datetime"]
        # A tool-level failure is an isError result, not an exception.
        bad = client.call_tool("get_current_time", {"timezone": "Nowhere/Atlantis"})
        assert bad.is_error
        assert "Nowhere/Atlantis" in bad.content[0].text


def test_git_server_reads_a_real_repository(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-c", "user.name=Test", "-c", "user.email=test@example.invalid", "-C", str(repo)]
    subprocess.run([*git, "init", "-q"], check=True)
    (repo / "hello.txt").write_text("hello\n")
    subprocess.run([*git, "add", "hello.txt"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "first commit from the MCP test"], check=True)
    (repo / "hello.txt").write_text("hello again\n")
    with McpClient.stdio(PY, ["-m", "mcp_server_git", "--repository", str(repo)]) as client:
        names = {t.name for t in client.list_tools()}
        assert {"git_status", "git_log", "git_diff_unstaged"} <= names
        log = client.call_tool("git_log", {"repo_path": str(repo)})
        assert "first commit from the MCP test" in log.content[0].text
        diff = client.call_tool("git_diff_unstaged", {"repo_path": str(repo)})
        assert "+hello again" in diff.content[0].text


# -- our own server over stdio -------------------------------------------------------------------------


def test_served_tools_keep_the_schemas_models_get(served: McpClient) -> None:
    from chatclient.tools import resolve_tools
    from tests.integration.mcp_servers import add, greet

    tools = {t.name: t for t in served.list_tools()}
    assert set(tools) == {"add", "greet", "divide", "slow", "big", "ask"}
    for local in resolve_tools([add, greet]):
        assert tools[local.definition.name].input_schema == dict(local.definition.input_schema)
        assert tools[local.definition.name].description == local.definition.description
    # The ToolContext parameter stays hidden from clients.
    assert set(tools["greet"].input_schema["properties"]) == {"name"}


def test_served_tools_run_sync_async_and_report_errors(served: McpClient) -> None:
    assert served.call_tool("add", {"a": 2, "b": 40}).content[0].text == "42"
    assert served.call_tool("greet", {"name": "Ann"}).content[0].text.startswith("Hello, Ann!")
    failed = served.call_tool("divide", {"a": 1, "b": 0})
    assert failed.is_error
    assert "ZeroDivisionError" in failed.content[0].text
    invalid = served.call_tool("add", {"a": "two"})
    assert invalid.is_error
    # @tool(timeout=...) holds on the server side too.
    started = time.monotonic()
    late = served.call_tool("slow", {})
    assert late.is_error and "did not finish within its timeout of 0.3 s" in late.content[0].text
    assert time.monotonic() - started < 5


def test_a_chat_client_is_served_as_a_tool(served: McpClient) -> None:
    result = served.call_tool("ask", {"question": "How do I connect?"})
    assert result.content[0].text == "The docs say: use McpClient."


def test_unknown_tool_is_a_server_error(served: McpClient) -> None:
    with pytest.raises(McpServerError) as info:
        served.call_tool("nope", {})
    assert "nope" in str(info.value)
    assert info.value.code is not None


def test_resources_as_documents_with_templates(served: McpClient) -> None:
    uris = {str(r.uri) for r in served.list_resources()}
    assert uris == {"docs://guide", "docs://faq"}
    templates = [t.uri_template for t in served.list_resource_templates()]
    assert templates == ["notes://{topic}"]
    [guide] = served.read_resource("docs://guide")
    assert guide.text == "MCP servers expose tools, resources and prompts."
    assert guide.metadata["source"] == "docs://guide"
    assert guide.metadata["server"] == "fixture"
    [note] = served.read_resource("notes://{topic}", topic="mcp")
    assert note.text == "Notes about mcp: it matters."
    assert note.metadata["source"] == "notes://mcp"
    with pytest.raises(ValueError, match="missing: topic"):
        served.read_resource("notes://{topic}", subject="x")


def test_prompts_as_messages_with_validated_arguments(served: McpClient) -> None:
    prompts = {p.name: p for p in served.list_prompts()}
    assert set(prompts) == {"review", "hello"}
    messages = served.get_prompt("review", {"code": "x = 1", "language": "rust"})
    assert messages == [UserMessage("Review this rust code:\nx = 1"), AssistantMessage("Looking at it.")]
    with pytest.raises(ValueError, match=r"missing required argument\(s\): code") as info:
        served.get_prompt("review", {"lang": "go"})
    assert "unknown argument(s): lang" in str(info.value)
    with pytest.raises(ValueError, match="no prompt named 'nope'"):
        served.get_prompt("nope")


def test_async_context_manager_on_the_callers_loop() -> None:
    async def main() -> tuple[str, list[str]]:
        async with fixture_client("serve") as client:
            result = await client.acall_tool("add", {"a": 1, "b": 1})
            docs = await client.aread_resource("docs://faq")
            # Blocking methods on the session's own loop would deadlock: refused with a hint.
            with pytest.raises(McpError, match="acall_tool"):
                client.call_tool("add", {"a": 1, "b": 1})
            return result.content[0].text, [d.text for d in docs]

    assert asyncio.run(main()) == ("2", ["Q: Is it fast? A: Yes."])


def test_sync_client_used_from_another_event_loop(served: McpClient) -> None:
    async def main() -> str:
        result = await served.acall_tool("add", {"a": 5, "b": 5})
        return str(result.content[0].text)

    assert asyncio.run(main()) == "10"


# -- failures ------------------------------------------------------------------------------------------


def test_command_that_does_not_exist() -> None:
    with pytest.raises(McpConnectionError, match="could not start MCP server"):
        McpClient.stdio("/nonexistent/mcp-server-binary").connect()


def test_server_that_exits_before_the_handshake_reports_its_stderr(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FIXTURE_PARENT_SECRET", "hunter2")
    client = McpClient.stdio(PY, [SERVERS, "exit"], env={"FIXTURE_FLAVOUR": "mint"}, cwd=tmp_path, timeout=10)
    with pytest.raises(McpConnectionError) as info:
        client.connect()
    assert "did not start" in str(info.value)
    assert "missing configuration file /nonexistent/config.toml" in info.value.stderr
    assert "missing configuration file" in str(info.value)
    # env is passed on, the parent's own variables are not, cwd is honoured.
    assert f"env: flavour=mint secret=None cwd={tmp_path}" in info.value.stderr
    assert not client.connected


def test_reconnect_after_close(served: McpClient) -> None:
    client = fixture_client("serve")
    for _ in range(2):
        with client:
            assert client.connected
            assert client.call_tool("add", {"a": 1, "b": 2}).content[0].text == "3"
        assert not client.connected


def test_server_that_never_answers_the_handshake_times_out() -> None:
    started = time.monotonic()
    with pytest.raises(McpTimeoutError) as info:
        fixture_client("silent", timeout=1.5).connect()
    assert info.value.timeout == 1.5
    assert time.monotonic() - started < 12


def test_wrong_protocol_version_is_a_protocol_error() -> None:
    with pytest.raises(McpProtocolError, match="1999-01-01"):
        fixture_client("oldversion", timeout=10).connect()


def test_server_that_crashes_mid_call() -> None:
    with fixture_client("crash") as client:
        assert client.call_tool("ok", {}).content[0].text == "ok ok"
        with pytest.raises(McpConnectionError) as info:
            client.call_tool("die", {})
        assert "went away while calling tool 'die'" in str(info.value)
        assert "crashing on purpose" in info.value.stderr
        assert not client.connected
        with pytest.raises(McpConnectionError):
            client.call_tool("ok", {})


def wait_for_stderr(client: McpClient, text: str) -> str:
    deadline = time.monotonic() + 5
    while text not in client.stderr_tail() and time.monotonic() < deadline:
        time.sleep(0.05)
    return client.stderr_tail()


def test_tool_that_never_answers_times_out_and_the_session_survives() -> None:
    with fixture_client("hang", call_timeout=5) as client:
        started = time.monotonic()
        with pytest.raises(McpTimeoutError) as info:
            client.call_tool("hang", {"n": 1}, timeout=0.5)
        assert info.value.timeout == 0.5
        assert time.monotonic() - started < 4
        # The server was told to stop (notifications/cancelled) and did.
        assert "hang 1 was cancelled" in wait_for_stderr(client, "hang 1 was cancelled")
        # Only that request was abandoned: the connection still works.
        assert client.call_tool("ok", {}).content[0].text == "ok ok"


def test_cancelling_the_callers_task_cancels_the_call_on_the_server() -> None:
    async def main(client: McpClient) -> None:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(client.acall_tool("hang", {"n": 2}), 0.5)

    # The session runs on its own loop thread here: the cancellation crosses loops too.
    with fixture_client("hang") as client:
        asyncio.run(main(client))
        assert "hang 2 was cancelled" in wait_for_stderr(client, "hang 2 was cancelled")
        assert client.call_tool("ok", {}).content[0].text == "ok ok"


def test_not_open_and_bad_arguments() -> None:
    client = fixture_client("serve")
    with pytest.raises(McpError, match="not open"):
        client.list_tools()
    with pytest.raises(ValueError, match="timeout"):
        McpClient.stdio(PY, timeout=0)
    with pytest.raises(TypeError, match="shlex"):
        McpClient.stdio(PY, "-m mcp_server_time")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="http"):
        McpClient.http("ftp://example.invalid/mcp")
