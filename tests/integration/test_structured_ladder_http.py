"""The structured-output ladder over real HTTP: every rung and every rejection, in all four modes.

The loopback server answers like the real servers do: OpenAI's ``json_schema`` answer, llama-cpp-python's
HTTP 500 naming ``response_format`` when it gets a ``json_schema`` form, a forced tool call, Anthropic's
``tool_use`` block, Ollama's ``format``.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from pydantic import BaseModel

from chatclient import BaseAdvisor, ChatClient, ChatClientResponse
from chatclient.errors import ModelHTTPError
from chatclient.models.anthropic import AnthropicChatModel
from chatclient.models.ollama import OllamaChatModel
from chatclient.models.openai import OpenAIChatModel
from chatclient.models.structured_output import ANSWER_TOOL_NAME, rejected_rungs
from tests.support import MODES, server_fixtures
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

OPENAI = "/v1/chat/completions"
ANTHROPIC = "/v1/messages"
OLLAMA = "/api/chat"


class City(BaseModel):
    name: str
    country: str


CITY = City(name="Lisbon", country="Portugal")
CITY_JSON = '{"name": "Lisbon", "country": "Portugal"}'
# What llama-cpp-python's server answers to response_format json_schema (a pydantic validation
# error turned into HTTP 500 by its error handler).
LLAMA_CPP_PYTHON_500 = {
    "error": {
        "message": "1 validation error for CreateChatCompletionRequest\nresponse_format.type\n  Input should be "
        "'text' or 'json_object' [type=literal_error, input_value='json_schema', input_type=str]",
        "type": "internal_server_error",
    }
}
NO_JSON_MODE_400 = {"error": {"message": "response_format json_object is not supported by this server", "type": "x"}}
NO_TOOLS_400 = {"error": {"message": "tool_choice is not supported", "type": "invalid_request_error"}}


class Recorder(BaseAdvisor):
    """Keeps the metadata of the finished response (after() runs once, on the finishing chunk)."""

    def __init__(self) -> None:
        self.extra: dict[str, Any] = {}

    def after(self, response: ChatClientResponse, chain: Any) -> ChatClientResponse:
        if response.chat_response is not None:
            self.extra = dict(response.chat_response.metadata.extra)
        return response


def run_entity(model: Any, how: str, **kw: Any) -> tuple[Any, dict[str, Any]]:
    """entity(City) run the ``how`` way (streams: the last, fully validated, item) and the response metadata."""
    recorder = Recorder()
    spec = ChatClient.create(model).prompt("Which city is the capital of Portugal?").advisors(recorder)
    if how == "call":
        value = spec.call().entity(City, **kw)
    elif how == "acall":
        value = asyncio.run(spec.acall().entity(City, **kw))
    elif how == "stream":
        value = list(spec.stream().entity(City, **kw))[-1]
    else:

        async def collect() -> list[Any]:
            return [c async for c in spec.astream().entity(City, **kw)]

        value = asyncio.run(collect())[-1]
    return value, recorder.extra


def openai_model(srv: LoopbackServer, **kw: Any) -> OpenAIChatModel:
    kw.setdefault("max_retries", 0)
    return OpenAIChatModel("gpt-test", base_url=srv.url + "/v1", api_key="", timeout=10.0, **kw)


def openai_answer(srv: LoopbackServer, mode: str, text: str = CITY_JSON) -> None:
    if mode.endswith("stream"):
        srv.script(OPENAI, SSE(openai_stream([text[:9], text[9:]])))
    else:
        srv.script(OPENAI, Reply(json=openai_completion(text)))


def openai_tool_answer(srv: LoopbackServer, mode: str) -> None:
    if mode.endswith("stream"):
        frags = [CITY_JSON[:5], CITY_JSON[5:20], CITY_JSON[20:]]
        srv.script(OPENAI, SSE(openai_stream([], tool_calls=[("call_1", ANSWER_TOOL_NAME, frags)])))
    else:
        completion = openai_completion(None, tool_calls=[("call_1", ANSWER_TOOL_NAME, CITY_JSON)])
        srv.script(OPENAI, Reply(json=completion))


def bodies(srv: LoopbackServer, path: str) -> list[dict[str, Any]]:
    return [r.body for r in srv.requests_to(path)]


def last_user_text(body: dict[str, Any]) -> str:
    return str([m for m in body["messages"] if m["role"] == "user"][-1]["content"])


# -- OpenAI-compatible --------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_openai_native_rung_sends_json_schema_by_default(server: LoopbackServer, mode: str) -> None:
    with openai_model(server) as model:
        openai_answer(server, mode)
        value, extra = run_entity(model, mode)
    assert value == CITY
    [body] = bodies(server, OPENAI)
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["schema"]["properties"].keys() == {"name", "country"}
    assert "JSON Schema" not in last_user_text(body)  # the server enforces it: no instructions needed
    assert extra["structured_output_mode"] == "native"
    assert extra["structured_output_reason"] == "model capabilities"


@pytest.mark.parametrize("mode", MODES)
def test_openai_rejected_json_schema_falls_back_to_json_object_and_is_remembered(
    server: LoopbackServer, mode: str
) -> None:
    with openai_model(server) as model:
        server.script(OPENAI, Reply(500, json=LLAMA_CPP_PYTHON_500))
        openai_answer(server, mode)
        value, extra = run_entity(model, mode)
        assert value == CITY
        first, second = bodies(server, OPENAI)
        assert first["response_format"]["type"] == "json_schema"
        assert second["response_format"] == {
            "type": "json_object",
            "schema": first["response_format"]["json_schema"]["schema"],
        }
        assert "JSON Schema" in last_user_text(second)  # JSON mode also gets the instructions
        assert extra["structured_output_mode"] == "json_object"
        # A loopback server is not OpenAI: the error names it by its address (issue 27, item 5).
        assert extra["structured_output_reason"].startswith("rejected: native (the server at 127.0.0.1:")
        assert "(OpenAI API) returned HTTP 500" in extra["structured_output_reason"]
        assert "native" in rejected_rungs(model, "gpt-test")

        # The next request on the same model starts at json_object: no second failure.
        server.reset()
        openai_answer(server, mode)
        value, extra = run_entity(model, mode)
        assert value == CITY
        [only] = bodies(server, OPENAI)
        assert only["response_format"]["type"] == "json_object"
        assert extra["structured_output_mode"] == "json_object"
        assert "native was rejected: native" in extra["structured_output_reason"]


@pytest.mark.parametrize("mode", MODES)
def test_openai_tool_rung_after_both_response_formats_are_rejected(server: LoopbackServer, mode: str) -> None:
    with openai_model(server) as model:
        server.script(OPENAI, Reply(500, json=LLAMA_CPP_PYTHON_500), Reply(400, json=NO_JSON_MODE_400))
        openai_tool_answer(server, mode)
        value, extra = run_entity(model, mode)
    assert value == CITY
    third = bodies(server, OPENAI)[2]
    assert "response_format" not in third
    assert [t["function"]["name"] for t in third["tools"]] == [ANSWER_TOOL_NAME]
    assert third["tools"][0]["function"]["parameters"]["required"] == ["name", "country"]
    assert third["tool_choice"] == {"type": "function", "function": {"name": ANSWER_TOOL_NAME}}
    assert extra["structured_output_mode"] == "tool"
    reason = extra["structured_output_reason"]
    assert "rejected: native" in reason and "rejected: json_object" in reason


@pytest.mark.parametrize("mode", MODES)
def test_openai_instructions_when_every_schema_rung_is_rejected(server: LoopbackServer, mode: str) -> None:
    with openai_model(server) as model:
        server.script(
            OPENAI,
            Reply(500, json=LLAMA_CPP_PYTHON_500),
            Reply(400, json=NO_JSON_MODE_400),
            Reply(400, json=NO_TOOLS_400),
        )
        openai_answer(server, mode, "```json\n" + CITY_JSON + "\n```")
        value, extra = run_entity(model, mode)
    assert value == CITY
    last = bodies(server, OPENAI)[3]
    assert "response_format" not in last and "tools" not in last
    assert "JSON Schema" in last_user_text(last)
    assert extra["structured_output_mode"] == "instructions"
    assert "rejected: tool" in extra["structured_output_reason"]


@pytest.mark.parametrize("mode", MODES)
def test_an_unrelated_server_error_is_not_a_rejection(server: LoopbackServer, mode: str) -> None:
    with openai_model(server) as model:
        server.script(OPENAI, Reply(500, json={"error": {"message": "CUDA out of memory", "type": "server_error"}}))
        with pytest.raises(ModelHTTPError, match="out of memory"):
            run_entity(model, mode)
        assert len(bodies(server, OPENAI)) == 1
        assert rejected_rungs(model, "gpt-test") == {}


@pytest.mark.parametrize("mode", MODES)
def test_a_pinned_rung_is_the_only_one_tried(server: LoopbackServer, mode: str) -> None:
    with openai_model(server) as model:
        openai_answer(server, mode)
        value, extra = run_entity(model, mode, mode="json_object")
        assert value == CITY
        [body] = bodies(server, OPENAI)
        assert body["response_format"]["type"] == "json_object"
        assert extra["structured_output_reason"] == "pinned by the request"

        server.reset()
        server.script(OPENAI, Reply(500, json=LLAMA_CPP_PYTHON_500))
        with pytest.raises(ModelHTTPError, match="response_format"):
            run_entity(model, mode, mode="native")
        assert len(bodies(server, OPENAI)) == 1


def test_json_object_constructor_style_starts_the_ladder_at_json_mode(server: LoopbackServer) -> None:
    with openai_model(server, structured_output="json_object") as model:
        openai_answer(server, "call")
        value, extra = run_entity(model, "call")
    assert value == CITY
    [body] = bodies(server, OPENAI)
    assert body["response_format"]["type"] == "json_object"
    assert extra["structured_output_mode"] == "json_object"


def test_rejection_survives_the_http_retries(server: LoopbackServer) -> None:
    # Default max_retries: the 500 is retried (it may be transient), then the ladder moves on.
    with openai_model(server, max_retries=1, backoff_base=0.001) as model:
        server.script(OPENAI, Reply(500, json=LLAMA_CPP_PYTHON_500), Reply(500, json=LLAMA_CPP_PYTHON_500))
        openai_answer(server, "call")
        value, extra = run_entity(model, "call")
    assert value == CITY
    assert [b["response_format"]["type"] for b in bodies(server, OPENAI)] == [
        "json_schema",
        "json_schema",
        "json_object",
    ]
    assert extra["structured_output_mode"] == "json_object"


def test_request_with_its_own_tools_skips_the_tool_rung(server: LoopbackServer) -> None:
    from chatclient.tools import tool

    @tool
    def population(city: str) -> int:
        """Population of a city."""
        return 545_000

    with openai_model(server) as model:
        server.script(OPENAI, Reply(500, json=LLAMA_CPP_PYTHON_500), Reply(400, json=NO_JSON_MODE_400))
        openai_answer(server, "call")
        value = ChatClient.create(model).prompt("Capital of Portugal?").tools(population).call().entity(City)
    assert value == CITY
    last = bodies(server, OPENAI)[2]
    assert [t["function"]["name"] for t in last["tools"]] == ["population"]  # no forced answer tool
    assert "tool_choice" not in last
    assert "JSON Schema" in last_user_text(last)


# -- Anthropic: the tool rung is the native path --------------------------------------------------------


def anthropic_model(srv: LoopbackServer) -> AnthropicChatModel:
    return AnthropicChatModel("claude-test", base_url=srv.url, api_key="k-test", max_retries=0, timeout=10.0)


@pytest.mark.parametrize("mode", MODES)
def test_anthropic_uses_a_forced_answer_tool(server: LoopbackServer, mode: str) -> None:
    if mode.endswith("stream"):
        frags = [CITY_JSON[:7], CITY_JSON[7:]]
        server.script(
            ANTHROPIC, SSE(anthropic_stream([], tool_uses=[("toolu_1", ANSWER_TOOL_NAME, frags)]), done=False)
        )
    else:
        message = anthropic_message(None, tool_uses=[("toolu_1", ANSWER_TOOL_NAME, json.loads(CITY_JSON))])
        server.script(ANTHROPIC, Reply(json=message))
    with anthropic_model(server) as model:
        value, extra = run_entity(model, mode)
    assert value == CITY
    [body] = bodies(server, ANTHROPIC)
    assert [t["name"] for t in body["tools"]] == [ANSWER_TOOL_NAME]
    assert body["tools"][0]["input_schema"]["properties"].keys() == {"name", "country"}
    assert "$schema" not in body["tools"][0]["input_schema"]
    assert body["tool_choice"] == {"type": "tool", "name": ANSWER_TOOL_NAME}
    assert extra["structured_output_mode"] == "tool"


@pytest.mark.parametrize("mode", ["call", "astream"])
def test_anthropic_rejected_tool_falls_back_to_instructions(server: LoopbackServer, mode: str) -> None:
    rejection = {"type": "error", "error": {"type": "invalid_request_error", "message": "tool_choice: unsupported"}}
    server.script(ANTHROPIC, Reply(400, json=rejection))
    if mode.endswith("stream"):
        server.script(ANTHROPIC, SSE(anthropic_stream([CITY_JSON[:4], CITY_JSON[4:]]), done=False))
    else:
        server.script(ANTHROPIC, Reply(json=anthropic_message(CITY_JSON)))
    with anthropic_model(server) as model:
        value, extra = run_entity(model, mode)
    assert value == CITY
    second = bodies(server, ANTHROPIC)[1]
    assert "tools" not in second and "tool_choice" not in second
    assert extra["structured_output_mode"] == "instructions"
    assert extra["structured_output_reason"].startswith("rejected: tool")


# -- Ollama: format schema, then format "json" ------------------------------------------------------------


def ollama_model(srv: LoopbackServer) -> OllamaChatModel:
    return OllamaChatModel("llama-test", base_url=srv.url, max_retries=0, timeout=10.0)


def ollama_answer(srv: LoopbackServer, mode: str) -> None:
    if mode.endswith("stream"):
        srv.script(OLLAMA, NDJSON(ollama_stream([CITY_JSON[:6], CITY_JSON[6:]])))
    else:
        srv.script(OLLAMA, Reply(json=ollama_chat(CITY_JSON)))


@pytest.mark.parametrize("mode", MODES)
def test_ollama_native_format_schema(server: LoopbackServer, mode: str) -> None:
    ollama_answer(server, mode)
    with ollama_model(server) as model:
        value, extra = run_entity(model, mode)
    assert value == CITY
    [body] = bodies(server, OLLAMA)
    assert body["format"]["properties"].keys() == {"name", "country"}
    assert extra["structured_output_mode"] == "native"


@pytest.mark.parametrize("mode", MODES)
def test_ollama_rejected_schema_format_falls_back_to_json_mode(server: LoopbackServer, mode: str) -> None:
    server.script(OLLAMA, Reply(400, json={"error": 'invalid format: expected "json" or a JSON schema'}))
    ollama_answer(server, mode)
    with ollama_model(server) as model:
        value, extra = run_entity(model, mode)
    assert value == CITY
    second = bodies(server, OLLAMA)[1]
    assert second["format"] == "json"
    assert "JSON Schema" in last_user_text(second)
    assert extra["structured_output_mode"] == "json_object"
