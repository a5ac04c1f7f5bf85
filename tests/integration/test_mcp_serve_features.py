"""serve()'s logging, progress, completion, resource subscriptions and image / embedded-resource content,
reached by McpClient over streamable HTTP (a real server subprocess on loopback) and over stdio."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chatclient.errors import McpError, McpServerError
from chatclient.mcp import EmbeddedResource, McpClient, ResourceChanges, build_server, mcp_server_context
from chatclient.mcp._sdk import types
from chatclient.tools import ToolContext
from tests.support.serving import child_server, free_port

pytestmark = [pytest.mark.mcp, pytest.mark.integration]

SERVER = str(Path(__file__).with_name("mcp_feature_server.py"))


@contextlib.contextmanager
def http_server() -> Iterator[str]:
    port = free_port()
    with child_server([sys.executable, SERVER, "http", str(port)], [port], "the fixture server"):
        yield f"http://127.0.0.1:{port}/mcp"


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with http_server() as started:
        yield started


class Logs:
    """Stands in for the structlog logger McpClient writes server log messages to."""

    def __init__(self) -> None:
        self.entries: list[dict[str, Any]] = []

    def log(self, level: int, event: str, **fields: Any) -> None:
        self.entries.append({"level": level, "event": event, **fields})

    def data(self) -> list[str]:
        return [e["data"] for e in self.entries]


def wait_for(predicate: Any, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return bool(predicate())


# -- logging ------------------------------------------------------------------------------------------


def test_log_messages_follow_the_level_the_client_set(url: str) -> None:
    logs = Logs()
    with McpClient.http(url, logger=logs) as client:
        assert client.call_tool("chatty").content[0].text == "logged"
        # default level: info and above
        assert wait_for(lambda: len(logs.entries) >= 3)
        assert logs.data() == ["info message", "warning message", "error message"]
        assert {e["logger"] for e in logs.entries} == {"chatty"}
        logs.entries.clear()
        client.set_logging_level("debug")
        client.call_tool("chatty")
        assert wait_for(lambda: len(logs.entries) >= 4)
        assert logs.data() == ["debug message", "info message", "warning message", "error message"]
        logs.entries.clear()
        client.set_logging_level("error")
        client.call_tool("chatty")
        assert wait_for(lambda: len(logs.entries) >= 1)
        time.sleep(0.2)
        assert logs.data() == ["error message"]


def test_levels_are_per_connection(url: str) -> None:
    quiet_logs, loud_logs = Logs(), Logs()
    with McpClient.http(url, logger=quiet_logs) as quiet, McpClient.http(url, logger=loud_logs) as loud:
        quiet.set_logging_level("emergency")
        loud.set_logging_level("debug")
        quiet.call_tool("chatty")
        loud.call_tool("chatty")
        assert wait_for(lambda: len(loud_logs.entries) >= 4)
        time.sleep(0.2)
        assert quiet_logs.entries == []


def test_an_unknown_level_is_refused_by_the_client(url: str) -> None:
    with McpClient.http(url) as client, pytest.raises(ValueError, match="level must be one of"):
        client.set_logging_level("loud")


def test_a_huge_log_message_is_cut_before_it_is_sent(url: str) -> None:
    logs = Logs()
    with McpClient.http(url, logger=logs) as client:
        client.call_tool("shout")
        assert wait_for(lambda: len(logs.entries) >= 1)
    # the server cuts at 16 384 characters; the client's own view cuts at 2 000
    assert logs.entries[0]["data"].startswith("xxxx")
    assert len(logs.entries[0]["data"]) <= 2000


# -- progress ---------------------------------------------------------------------------------------------


def test_progress_from_an_async_tool(url: str) -> None:
    seen: list[tuple[float, float | None, str | None]] = []
    with McpClient.http(url) as client:
        result = client.call_tool("steps", progress=lambda p, t, m: seen.append((p, t, m)))
    assert result.content[0].text == "stepped"
    assert seen == [(1.0, 3.0, "step 1"), (2.0, 3.0, "step 2"), (3.0, 3.0, "step 3")]


def test_progress_and_logs_from_a_sync_tool(url: str) -> None:
    seen: list[tuple[float, float | None, str | None]] = []
    logs = Logs()
    with McpClient.http(url, logger=logs) as client:
        result = client.call_tool("sync_steps", progress=lambda p, t, m: seen.append((p, t, m)))
        assert wait_for(lambda: len(logs.entries) >= 1)
    assert result.content[0].text == "sync stepped"
    assert seen == [(1.0, 2.0, "first half"), (2.0, 2.0, None)]
    assert logs.data() == ["from a thread"]


def test_oversized_notifications_are_cut_or_ignored(url: str) -> None:
    seen: list[str | None] = []
    updates: list[str] = []
    with McpClient.http(url) as client:
        client.subscribe("notes://todo", updates.append)
        result = client.call_tool("flood", progress=lambda p, t, m: seen.append(m))
        client.ping()
    assert result.content[0].text == "flooded"  # type: ignore[union-attr]
    [message] = seen
    assert message is not None and len(message) <= 4096 + 6 and message.endswith("[...]")
    assert updates == []  # an update of a URI nobody subscribed to reaches no callback


def test_no_progress_token_means_no_notifications_and_no_failure(url: str) -> None:
    with McpClient.http(url) as client:
        assert client.call_tool("steps").content[0].text == "stepped"


def test_a_blocking_method_in_an_async_tool_is_a_clear_error(url: str) -> None:
    with McpClient.http(url) as client:
        result = client.call_tool("wrong_mode")
    assert result.is_error
    assert "await the 'a' method" in result.content[0].text


def test_the_context_outside_serve_is_a_typed_error() -> None:
    with pytest.raises(McpError, match=r"not running under chatclient\.mcp\.serve"):
        mcp_server_context(ToolContext({}))
    with pytest.raises(McpError):
        mcp_server_context(ToolContext({"chatclient.mcp.server": "forged"}))


# -- completion -------------------------------------------------------------------------------------------


def test_completion_from_literal_and_enum_annotations(url: str) -> None:
    with McpClient.http(url) as client:
        assert client.complete("language", "", prompt="review") == ["python", "rust", "go"]
        assert client.complete("language", "r", prompt="review") == ["rust"]
        assert client.complete("colour", "g", prompt="paint") == ["green"]
        assert client.complete("code", "x", prompt="review") == []  # a free-text argument
        assert client.complete("anything", "", prompt="no-such-prompt") == []


def test_completion_functions_see_the_context_and_templates_complete(url: str) -> None:
    with McpClient.http(url) as client:
        assert client.complete("shade", "", prompt="paint", context={"colour": "red"}) == ["red-light", "red-dark"]
        assert client.complete("shade", "red-d", prompt="paint", context={"colour": "red"}) == ["red-dark"]
        assert client.complete("name", "to", template="notes://{name}") == ["todo"]


def test_a_failing_completion_function_answers_an_error(url: str) -> None:
    with McpClient.http(url) as client:
        with pytest.raises(McpServerError, match="completing 'topic' failed") as caught:
            client.complete("topic", "", template="docs://{topic}")
        # The function's own text stays on the server: it may quote a backend's URL or key.
        assert "backend down" not in str(caught.value)
        assert client.complete("language", "g", prompt="review") == ["go"]  # the session lives on


def test_complete_needs_exactly_one_reference(url: str) -> None:
    with McpClient.http(url) as client:
        with pytest.raises(ValueError, match="exactly one of prompt"):
            client.complete("a", "")
        with pytest.raises(ValueError, match="exactly one of prompt"):
            client.complete("a", "", prompt="review", template="notes://{name}")


def test_completions_for_unknown_prompts_are_refused_at_build_time() -> None:
    with pytest.raises(ValueError, match="unknown prompts or templates: nope"):
        build_server(prompts=[lambda: "x"], completions={"nope": {"a": ["b"]}})


def test_completion_values_are_capped_at_100() -> None:
    import asyncio

    from chatclient.mcp.serving import complete_values

    def endless(value: str, context: object) -> Iterator[str]:
        n = 0
        while True:
            n += 1
            yield str(n)

    values, total = asyncio.run(complete_values(endless, "", {}))
    assert len(values) == 100 and total == 10_000


# -- subscriptions ----------------------------------------------------------------------------------------


def test_subscribe_receives_updates_until_unsubscribed(url: str) -> None:
    updates: list[str] = []
    with McpClient.http(url) as client, McpClient.http(url) as editor:
        client.subscribe("notes://todo", updates.append)
        editor.call_tool("edit_note", {"name": "todo", "text": "buy bread"})
        assert wait_for(lambda: updates == ["notes://todo"])
        [doc] = client.read_resource("notes://todo")
        assert doc.text == "buy bread"
        editor.call_tool("edit_note", {"name": "shopping", "text": "eggs"})  # not subscribed
        client.unsubscribe("notes://todo")
        editor.call_tool("edit_note", {"name": "todo", "text": "buy jam"})
        time.sleep(0.3)
        assert updates == ["notes://todo"]


def test_async_callbacks_and_templated_uris(url: str) -> None:
    updates: list[str] = []

    async def on_update(uri: str) -> None:
        updates.append(uri)

    with McpClient.http(url) as client:
        client.subscribe("notes://ideas", on_update)
        client.call_tool("edit_note", {"name": "ideas", "text": "a better mousetrap"})
        assert wait_for(lambda: updates == ["notes://ideas"])


def test_a_failing_callback_does_not_break_the_session(url: str) -> None:
    def explode(uri: str) -> None:
        raise RuntimeError("boom")

    good: list[str] = []
    with McpClient.http(url) as client:
        client.subscribe("notes://todo", explode)
        client.subscribe("notes://todo", good.append)
        client.call_tool("edit_note", {"name": "todo", "text": "x"})
        assert wait_for(lambda: good == ["notes://todo"])
        client.ping()


def test_subscribing_to_an_unknown_resource_is_refused(url: str) -> None:
    with McpClient.http(url) as client:
        with pytest.raises(McpServerError, match="unknown resource"):
            client.subscribe("nowhere://x", print)
        with pytest.raises(ValueError, match="resource URI with a scheme"):
            client.subscribe("no-scheme", print)
        with pytest.raises(ValueError, match="at most 8192"):
            client.subscribe("notes://" + "x" * 9000, print)
        with pytest.raises(TypeError):
            client.subscribe("notes://todo", "not callable")  # type: ignore[arg-type]


def test_subscriptions_are_bounded(url: str) -> None:
    # the fixture keeps at most 50; a template matches endless URIs, so a client could otherwise grow the table
    with McpClient.http(url) as client:
        with pytest.raises(McpServerError, match="at most 50 resource subscriptions"):
            for n in range(60):
                client.subscribe(f"notes://flood-{n}", print)
        for n in range(60):
            client.unsubscribe(f"notes://flood-{n}")
        client.subscribe("notes://after-the-flood", print)  # unsubscribing freed the room
        client.unsubscribe("notes://after-the-flood")
    # a client fills the table, then leaves without unsubscribing
    with McpClient.http(url) as flooder, pytest.raises(McpServerError, match="at most 50"):
        for n in range(60):
            flooder.subscribe(f"notes://flood-{n}", print)
    with McpClient.http(url) as later:
        later.subscribe("notes://todo", print)  # the departed client's subscriptions were forgotten


def test_resource_changes_without_subscribers_is_a_no_op() -> None:
    changes = ResourceChanges()
    changes.changed("notes://todo")  # before any server ran: nothing to tell, no error
    assert changes.subscribed("notes://todo") == 0


# -- content ----------------------------------------------------------------------------------------------


def test_media_and_embedded_resources_become_mcp_content(url: str) -> None:
    with McpClient.http(url) as client:
        [image] = client.call_tool("picture").content
        assert isinstance(image, types.ImageContent) and image.mime_type == "image/png"
        text, markdown, raw, link = client.call_tool("report").content
    assert isinstance(text, types.TextContent) and text.text == "the report"
    assert isinstance(markdown, types.EmbeddedResource)
    assert isinstance(markdown.resource, types.TextResourceContents)
    assert (str(markdown.resource.uri), markdown.resource.text) == ("reports://1", "# Report")
    assert isinstance(raw, types.EmbeddedResource) and isinstance(raw.resource, types.BlobResourceContents)
    assert raw.resource.blob == "AAEC"
    assert isinstance(link, types.ResourceLink) and str(link.uri) == "https://example.com/report.pdf"


def test_an_embedded_resource_needs_a_uri() -> None:
    with pytest.raises(ValueError, match="needs a URI with a scheme"):
        EmbeddedResource("text/plain", b"x")


# -- stdio ------------------------------------------------------------------------------------------------


def test_the_same_features_over_stdio() -> None:
    seen: list[float] = []
    updates: list[str] = []
    logs = Logs()
    with McpClient.stdio(sys.executable, [SERVER, "stdio"], logger=logs) as client:
        client.call_tool("steps", progress=lambda p, t, m: seen.append(p))
        client.subscribe("notes://todo", updates.append)
        client.call_tool("edit_note", {"name": "todo", "text": "stdio"})
        client.call_tool("chatty")
        assert client.complete("language", "p", prompt="review") == ["python"]
        assert wait_for(lambda: updates == ["notes://todo"] and len(logs.entries) >= 3)
    assert seen == [1.0, 2.0, 3.0]
