"""MCP tools inside the advisor chain: McpToolProvider driven by ToolCallAdvisor (ScriptedChatModel),
list_changed during a running tool loop, name clashes, malicious servers, crashes, sampling, logging,
progress and resources feeding a vector store."""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from chatclient import ChatClient
from chatclient.errors import McpProtocolError, McpServerError
from chatclient.mcp import McpClient, McpResourceReader, McpToolProvider, SamplingRequest
from chatclient.mcp.tools import McpToolCallback
from chatclient.messages import AssistantMessage, ToolCall, ToolResponseMessage
from chatclient.testing import ScriptedChatModel
from chatclient.tools import ToolCallAdvisor, ToolResult, tool

pytestmark = [pytest.mark.mcp, pytest.mark.integration]

SERVERS = str(Path(__file__).with_name("mcp_servers.py"))
PY = sys.executable


def server(mode: str, **kwargs: object) -> McpClient:
    return McpClient.stdio(PY, [SERVERS, mode], **kwargs)  # type: ignore[arg-type]


def call(name: str, arguments: str = "{}", call_id: str = "c1") -> AssistantMessage:
    return AssistantMessage(None, (ToolCall(call_id, name, arguments),))


def tool_responses(model: ScriptedChatModel, turn: int) -> ToolResponseMessage:
    message = model.prompts[turn].messages[-1]
    assert isinstance(message, ToolResponseMessage)
    return message


@pytest.fixture(scope="module")
def dynamic() -> Iterator[McpClient]:
    with server("dynamic") as client:
        yield client


@pytest.fixture(scope="module")
def malicious() -> Iterator[McpClient]:
    with server("malicious") as client:
        yield client


@tool
def add(a: int, b: int) -> int:
    """Add two integers (the local one)."""
    return a + b


def test_time_server_tools_in_a_tool_loop() -> None:
    model = ScriptedChatModel([call("get_current_time", '{"timezone": "Asia/Tokyo"}'), "It is evening in Tokyo."])
    with McpClient.stdio(PY, ["-m", "mcp_server_time"]) as time_server:
        provider = McpToolProvider(time_server)
        chat = ChatClient.create(model)
        response = chat.prompt("What time is it in Tokyo?").tools(provider).call().chat_client_response()
    offered = {t.name: t for t in model.prompts[0].tools}
    assert set(offered) == {"get_current_time", "convert_time"}
    assert offered["get_current_time"].input_schema["required"] == ["timezone"]
    [execution] = response.tool_executions
    assert not execution.is_error
    assert '"timezone":"Asia/Tokyo"' in execution.result.replace(" ", "")
    assert tool_responses(model, 1).responses[0].response_data == execution.result
    assert response.chat_response is not None
    assert response.chat_response.result.output.text == "It is evening in Tokyo."


def test_is_error_result_is_an_error_response_the_model_sees() -> None:
    model = ScriptedChatModel([call("get_current_time", '{"timezone": "Mars/Olympus"}'), "Sorry."])
    with McpClient.stdio(PY, ["-m", "mcp_server_time"]) as time_server:
        chat = ChatClient.builder(model).default_tools(McpToolProvider(time_server)).build()
        response = chat.prompt("Time on Mars?").call().chat_client_response()
    [execution] = response.tool_executions
    assert execution.is_error
    [sent] = tool_responses(model, 1).responses
    assert sent.is_error
    assert "reported an error" in sent.response_data
    assert "Mars/Olympus" in sent.response_data


def test_list_changed_refreshes_tools_between_model_turns(dynamic: McpClient) -> None:
    model = ScriptedChatModel([call("unlock"), call("secret", '{"word": "swordfish"}', "c2"), "Done."])
    chat = ChatClient.create(model)
    answer = chat.prompt("Unlock and use the secret").tools(McpToolProvider(dynamic), add).call().content()
    first = {t.name for t in model.prompts[0].tools}
    second = {t.name for t in model.prompts[1].tools}
    assert "secret" not in first
    assert "secret" in second
    assert "add" in first and "add" in second  # local tools survive the refresh
    assert tool_responses(model, 2).responses[0].response_data == "the secret word was 'swordfish'"
    assert answer == "Done."
    assert dynamic.tools_version >= 1


def test_list_changed_in_async_mode_on_the_sessions_own_loop() -> None:
    async def main() -> tuple[set[str], set[str], str]:
        model = ScriptedChatModel([call("unlock"), call("secret", '{"word": "w"}', "c2"), "ok"])
        async with server("dynamic") as client:
            chat = ChatClient.create(model)
            await chat.prompt("go").tools(McpToolProvider(client)).acall().content()
        text = tool_responses(model, 2).responses[0].response_data
        return {t.name for t in model.prompts[0].tools}, {t.name for t in model.prompts[1].tools}, text

    first, second, text = asyncio.run(main())
    assert "secret" not in first and "secret" in second
    assert text == "the secret word was 'w'"


def test_name_clash_with_a_local_tool_gets_the_server_prefix(malicious: McpClient) -> None:
    model = ScriptedChatModel([call("add", '{"a": 2, "b": 3}'), call("fixture-malicious_add", "{}", "c2"), "ok"])
    chat = ChatClient.create(model)
    chat.prompt("add").tools(add, McpToolProvider(malicious)).call().content()
    names = [t.name for t in model.prompts[0].tools]
    assert names.count("add") == 1
    assert "fixture-malicious_add" in names
    assert tool_responses(model, 1).responses[0].response_data == "5"  # the local tool kept its name
    assert tool_responses(model, 2).responses[0].response_data == "hostile add called"


def test_name_clash_across_servers_and_name_prefix(dynamic: McpClient) -> None:
    with server("dynamic", name="second") as other:
        other.call_tool("chatty", {})  # a fresh server: its tool list is the initial one
        provider = McpToolProvider(dynamic, other)
        names = {cb.definition.name for cb in provider.tool_callbacks()}
        assert "fixture-dynamic_unlock" in names and "second_unlock" in names
        assert "unlock" not in names
        prefixed = McpToolProvider(other, name_prefix="x_", tool_filter=["unlock", "chatty"])
        assert sorted(cb.definition.name for cb in prefixed.tool_callbacks()) == ["x_chatty", "x_unlock"]
        custom = McpToolProvider(other, name_prefix=lambda client, name: f"{client.name}.{name}")
        assert "second_unlock" in {cb.definition.name for cb in custom.tool_callbacks()}  # "." is not allowed
        # The same objects while nothing changed: the tool loop can skip rebuilding the request.
        assert provider.tool_callbacks(reserved=()) is provider.tool_callbacks(reserved=())


def test_malicious_schemas_are_skipped_with_a_warning(malicious: McpClient, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="chatclient.mcp"):
        names = {cb.definition.name for cb in McpToolProvider(malicious).tool_callbacks()}
    assert names == {"huge", "add", "fine"}
    assert "tool 'bad_type' skipped: the input schema is not valid JSON Schema" in caplog.text
    assert "tool 'bad_minimum' skipped: the input schema is not valid JSON Schema" in caplog.text
    assert "tool 'too_deep' skipped: the input schema nests deeper than 32 levels" in caplog.text
    with pytest.raises(McpProtocolError, match="bad_type"):
        McpToolProvider(malicious, strict=True).tool_callbacks()


def test_a_listing_the_sdk_rejects_is_a_protocol_error(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="chatclient.mcp"), server("arrayschema") as client:
        # Connecting still works (resources and prompts may be fine); the tools are not offered.
        assert "sent a malformed tool list" in caplog.text
        assert McpToolProvider(client).tool_callbacks() == ()
        with pytest.raises(McpProtocolError, match="malformed message while listing tools"):
            client.list_tools()


def test_ten_megabyte_result_is_cut_with_a_marker(malicious: McpClient) -> None:
    model = ScriptedChatModel([call("huge"), "ok"])
    provider = McpToolProvider(malicious, max_result_chars=50_000)
    started = time.monotonic()
    response = ChatClient.create(model).prompt("huge").tools(provider).call().chat_client_response()
    assert time.monotonic() - started < 20
    [execution] = response.tool_executions
    assert len(execution.result) < 50_200
    assert execution.result.startswith("x" * 1000)
    assert execution.result.endswith("[... result truncated: 10485760 characters, only the first 50000 are shown]")


def test_crash_mid_call_becomes_an_error_response() -> None:
    model = ScriptedChatModel([call("die"), "The tool crashed."])
    with server("crash") as crashing:
        answer = ChatClient.create(model).prompt("die").tools(McpToolProvider(crashing)).call().content()
        assert answer == "The tool crashed."
    [sent] = tool_responses(model, 1).responses
    assert sent.is_error
    assert "McpConnectionError" in sent.response_data
    assert "went away while calling tool 'die'" in sent.response_data


def test_images_become_media(dynamic: McpClient) -> None:
    image = next(cb for cb in McpToolProvider(dynamic).tool_callbacks() if cb.definition.name == "image")
    assert isinstance(image, McpToolCallback)
    result = image.call_result({})
    assert result.media[0].mime_type == "image/png"
    assert result.media[0].data.startswith(b"\x89PNG")
    assert result.text == f"a tiny picture\n[image/png attachment, {len(result.media[0].data)} bytes]"
    # The tool loop gets the image itself, not only its text marker.
    passed = image.call("{}")
    assert isinstance(passed, ToolResult) and (passed.text, passed.media) == (result.text, result.media)
    model = ScriptedChatModel([call("image"), "A tiny picture."])
    ChatClient.create(model).prompt("show").tools(McpToolProvider(dynamic)).call().content()
    [sent] = tool_responses(model, 1).responses
    assert sent.media == result.media and not sent.is_error


def test_server_logs_go_to_structlog_and_progress_passes_through(
    dynamic: McpClient, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[tuple[float, float | None, str | None]] = []
    with caplog.at_level(logging.DEBUG, logger="chatclient.mcp.server"):
        result = dynamic.call_tool("chatty", {}, progress=lambda p, t, m: seen.append((p, t, m)))
        deadline = time.monotonic() + 2
        while "chatty is working" not in caplog.text and time.monotonic() < deadline:
            time.sleep(0.02)
    assert result.content[0].text == "chatty done"
    assert seen == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]
    [record] = [r for r in caplog.records if "chatty is working" in r.getMessage()]
    assert record.levelno == logging.WARNING
    assert record.chatclient["server"] == "fixture-dynamic"  # type: ignore[attr-defined]
    assert record.chatclient["logger"] == "fixture"  # type: ignore[attr-defined]


def test_progress_of_tools_run_by_the_tool_loop(dynamic: McpClient) -> None:
    seen: list[tuple[str, float, float | None, str | None]] = []
    provider = McpToolProvider(dynamic, tool_filter=["chatty"], progress=lambda *p: seen.append(p))
    model = ScriptedChatModel([call("chatty"), "ok"])
    ChatClient.create(model).prompt("go").tools(provider).call().content()
    assert seen == [("chatty", 1, 3, "step 1"), ("chatty", 2, 3, "step 2"), ("chatty", 3, 3, "step 3")]


def test_sampling_answered_by_a_chat_client_after_approval() -> None:
    model = ScriptedChatModel(["Paris."])
    approved: list[SamplingRequest] = []

    def approve(request: SamplingRequest) -> bool:
        approved.append(request)
        return True

    sampler = ChatClient.create(model)
    with server("dynamic", sampling=sampler, approve_sampling=approve) as client:
        result = client.call_tool("ask_model", {"question": "Capital of France?"})
    assert result.content[0].text == "the model said: Paris."
    [request] = approved
    assert request.server == "fixture-dynamic"
    assert request.max_tokens == 50
    prompt = model.last_prompt
    assert prompt.system_message is not None and prompt.system_message.text == "Answer briefly."
    assert prompt.user_message.text == "Capital of France?"
    assert prompt.options is not None and prompt.options.max_tokens == 50


def test_sampling_denied_never_reaches_the_model() -> None:
    model = ScriptedChatModel(["should not be used"])
    with server("dynamic", sampling=ChatClient.create(model), approve_sampling=lambda r: False) as client:
        # The server's create_message fails with our refusal, and its handler reports that error back.
        with pytest.raises(McpServerError, match="sampling refused by the user"):
            client.call_tool("ask_model", {"question": "Anything?"})
        assert client.call_tool("chatty", {}).content[0].text == "chatty done"  # the session is fine
    assert model.prompts == []


def test_resources_feed_a_vector_store() -> None:
    from chatclient.rag import DocumentPipeline, HashingEmbeddingModel, SimpleVectorStore

    store = SimpleVectorStore(HashingEmbeddingModel())
    with server("serve") as served:
        everything = McpResourceReader(served).read()
        assert {d.metadata["source"] for d in everything} == {"docs://guide", "docs://faq"}
        reader = McpResourceReader(served, ["docs://guide", "notes://{topic}"], template_values={"topic": "vectors"})
        DocumentPipeline(reader, [], store).run()
    found = store.similarity_search("Notes about vectors")
    assert found[0].text == "Notes about vectors: it matters."
    assert found[0].metadata["source"] == "notes://vectors"


def test_provider_needs_open_clients() -> None:
    closed = server("serve")
    chat = ChatClient.create(ScriptedChatModel(["x"]))
    spec = chat.prompt("hi").tools(McpToolProvider(closed))  # accepted before connecting
    with pytest.raises(Exception, match="not connected"):
        spec.call()
    with pytest.raises(ValueError, match="at least one"):
        McpToolProvider()
    with pytest.raises(TypeError, match="one string"):
        McpToolProvider(closed, tool_filter="add")  # type: ignore[arg-type]


def test_tool_loop_keeps_working_with_a_tool_call_advisor_placed_explicitly(dynamic: McpClient) -> None:
    model = ScriptedChatModel([call("fine_not_here"), "ok"])
    chat = ChatClient.create(model)
    chat.prompt("x").tools(McpToolProvider(dynamic)).advisors(ToolCallAdvisor(max_iterations=3)).call().content()
    [sent] = tool_responses(model, 1).responses
    assert sent.is_error and "no tool named 'fine_not_here'" in sent.response_data
