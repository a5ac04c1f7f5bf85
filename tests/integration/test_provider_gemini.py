"""GeminiChatModel over real HTTP against the loopback server replaying Gemini API payloads.

Recorded bodies (tests/data/providers/gemini/) are served whole and cut into small irregular HTTP
chunks; the tool loop runs end to end through ``ChatClient`` and the follow-up request is checked
part by part (thought signatures back on the parts they came on, function responses).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from chatclient import ChatClient
from chatclient.errors import AuthenticationError, ModelResponseError, RefusalError, UnsupportedFeatureError
from chatclient.messages import (
    AssistantMessage,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from chatclient.models.base import ChatResponse, Usage
from chatclient.models.gemini import PARTS_KEY, SIGNATURE_KEY, GeminiChatModel, build_gemini_body, gemini_schema
from chatclient.options import ChatOptions
from chatclient.prompt import Prompt, ToolDefinition
from chatclient.tools import tool
from tests.support import invoke, server_fixtures
from tests.support.loopback import LoopbackServer, Reply
from tests.support.recorded import recorded_file

pytestmark = pytest.mark.integration
loopback_server, server = server_fixtures()

DATA = Path(__file__).resolve().parent.parent / "data" / "providers" / "gemini"
KEY = "AIzaSyTest-0123456789abcdefghijklmnopq"
CALL = "/v1beta/models/gemini-2.5-flash:generateContent"
STREAM = "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
CALLS = ("call", "acall")
STREAMS = ("stream", "astream")
SIG_CALL = "CiQBcsjafB1uG4ZqkPp6Yb3D8sIw0Zr2kG1a6Gm0h9t1u3xJ9Q=="
SIG_TEXT = "CsYBAdHtim9Vx0wQ3tN7Ky5dbXl9b1nnHZ1pXq3T0nTxRzQ=="


def recorded(name: str, *, whole: bool = False, seed: int = 0) -> Reply:
    """The fixture as an HTTP answer: whole, or split into random 1..23 byte chunks."""
    return recorded_file(DATA / name, seed=f"{name}-{seed}", whole=whole)


def make_model(srv: LoopbackServer, **kw: Any) -> GeminiChatModel:
    kw.setdefault("backoff_base", 0.001)
    kw.setdefault("timeout", 10.0)
    return GeminiChatModel("gemini-2.5-flash", api_key=KEY, base_url=srv.url, **kw)


def path_for(mode: str) -> str:
    return CALL if mode in CALLS else STREAM


def fixture_for(stem: str, mode: str) -> str:
    return f"{stem}.json" if mode in CALLS else f"{stem}.sse"


def output(response: ChatResponse) -> AssistantMessage:
    assert response.result is not None
    return response.result.output


@pytest.mark.parametrize("whole", [True, False], ids=["whole", "chunked"])
@pytest.mark.parametrize("mode", CALLS + STREAMS)
def test_plain_text(server: LoopbackServer, mode: str, whole: bool) -> None:
    server.script(path_for(mode), recorded(fixture_for("text", mode), whole=whole, seed=len(mode)))
    with make_model(server) as model:
        response, chunks = invoke(model, Prompt([SystemMessage("Be kind."), UserMessage("hi")]), mode)
    message = output(response)
    assert message.text == "Hello! How can I help you today? 😊"
    assert message.tool_calls == () and message.reasoning == ()
    # The text part's thought signature is kept on the turn's parts, to go back verbatim.
    (part,) = message.metadata[PARTS_KEY]
    assert part == {"text": "Hello! How can I help you today? 😊", "thoughtSignature": SIG_TEXT}
    assert response.result is not None and response.result.finish_reason == "stop"
    # completion = candidatesTokenCount + thoughtsTokenCount; total as reported.
    assert response.metadata.usage == Usage(8, 51, 0, 0, 41)
    assert response.metadata.usage.total_tokens == 59
    assert response.metadata.model == "gemini-2.5-flash"
    if mode in STREAMS:
        assert [c.text for c in chunks if c.text] == ["Hello! How", " can I help you today? 😊"]
    (request,) = server.requests_to(path_for(mode))
    assert request.headers["x-goog-api-key"] == KEY
    assert request.body == {
        "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
        "systemInstruction": {"parts": [{"text": "Be kind."}]},
    }


@pytest.mark.parametrize("mode", CALLS + STREAMS)
def test_parallel_function_calls_with_thoughts(server: LoopbackServer, mode: str) -> None:
    server.script(path_for(mode), recorded(fixture_for("parallel_calls", mode), seed=len(mode)))
    with make_model(server) as model:
        response, _ = invoke(model, Prompt("Weather in Paris and Tokyo?"), mode)
    message = output(response)
    assert response.result is not None and response.result.finish_reason == "tool_calls"  # Gemini said STOP
    assert [(c.name, json.loads(c.arguments)) for c in message.tool_calls] == [
        ("get_weather", {"city": "Paris"}),
        ("get_weather", {"city": "Tokyo"}),
    ]
    first, second = message.tool_calls
    assert first.metadata[SIGNATURE_KEY] == SIG_CALL and SIGNATURE_KEY not in second.metadata
    assert first.id != second.id
    assert message.text is None
    (thought,) = message.reasoning
    assert thought.provider == "gemini"
    assert thought.text.startswith("**Checking two cities**") and thought.text.endswith("call the tool twice.")
    assert response.metadata.usage == Usage(74, 152, 0, 0, 122)


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return {"Paris": "18C and sunny", "Tokyo": "24C, light rain"}[city]


@pytest.mark.parametrize("mode", ["call", "stream"])
def test_tool_loop_end_to_end_sends_signatures_back(server: LoopbackServer, mode: str) -> None:
    path = path_for(mode)
    server.script(path, recorded(fixture_for("parallel_calls", mode)), recorded(fixture_for("final_answer", mode)))
    with make_model(server) as model:
        spec = ChatClient.create(model).prompt().user("Weather in Paris and Tokyo?").tools(get_weather)
        text = spec.call().content() if mode == "call" else "".join(spec.stream().content())
    assert text == "Paris is 18°C and sunny; Tokyo is 24°C with light rain."
    first, follow_up = (r.body for r in server.requests_to(path))
    declaration = first["tools"][0]["functionDeclarations"][0]
    assert declaration["name"] == "get_weather"
    assert declaration["parameters"]["properties"]["city"]["type"] == "string"
    assert "additionalProperties" not in json.dumps(declaration)
    contents = follow_up["contents"]
    assert [c["role"] for c in contents] == ["user", "model", "user"]
    model_parts = contents[1]["parts"]
    # The model turn goes back as received: the thought part, then the calls, the signature on the first.
    assert model_parts[0]["thought"] is True
    assert model_parts[1] == {
        "functionCall": {"name": "get_weather", "args": {"city": "Paris"}},
        "thoughtSignature": SIG_CALL,
    }
    assert model_parts[2] == {"functionCall": {"name": "get_weather", "args": {"city": "Tokyo"}}}
    assert contents[2]["parts"] == [
        {"functionResponse": {"name": "get_weather", "response": {"result": "18C and sunny"}}},
        {"functionResponse": {"name": "get_weather", "response": {"result": "24C, light rain"}}},
    ]


def test_a_rebuilt_turn_keeps_call_signatures_and_native_ids() -> None:
    call = ToolCall("fc-1", "get_weather", '{"city": "Paris"}', {SIGNATURE_KEY: "sig-A"})
    generated = ToolCall("gemini-call-x", "get_weather", "{}", {"generated_id": True})
    prompt = Prompt(
        [
            UserMessage("hi"),
            AssistantMessage("Let me check.", (call, generated)),
            ToolResponseMessage((ToolResponse("fc-1", "get_weather", '{"temp": 18}'),
                                 ToolResponse("gemini-call-x", "get_weather", "boom", is_error=True))),
        ]
    )  # fmt: skip
    body = build_gemini_body(prompt, ChatOptions())
    assert body["contents"][1]["parts"] == [
        {"text": "Let me check."},
        {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}, "id": "fc-1"}, "thoughtSignature": "sig-A"},
        {"functionCall": {"name": "get_weather", "args": {}}},
    ]
    assert body["contents"][2]["parts"] == [
        {"functionResponse": {"name": "get_weather", "response": {"temp": 18}, "id": "fc-1"}},
        {"functionResponse": {"name": "get_weather", "response": {"error": "boom"}}},
    ]


@pytest.mark.parametrize("mode", CALLS + STREAMS)
def test_a_blocked_prompt_is_a_refusal(server: LoopbackServer, mode: str) -> None:
    server.script(path_for(mode), recorded(fixture_for("blocked_prompt", mode)))
    with make_model(server) as model, pytest.raises(RefusalError, match="blocked the prompt: SAFETY") as caught:
        invoke(model, Prompt("something nasty"), mode)
    assert "HARASSMENT HIGH" in str(caught.value)


@pytest.mark.parametrize("mode", CALLS + STREAMS)
def test_a_safety_stop_is_never_an_empty_success(server: LoopbackServer, mode: str) -> None:
    server.script(path_for(mode), recorded(fixture_for("safety_stop", mode)))
    with make_model(server) as model, pytest.raises(RefusalError, match="finish reason SAFETY") as caught:
        invoke(model, Prompt("how to make something dangerous"), mode)
    assert "DANGEROUS_CONTENT HIGH" in str(caught.value)


def test_a_malformed_function_call_is_a_response_error(server: LoopbackServer) -> None:
    server.script(CALL, recorded("malformed_call.json"))
    with make_model(server) as model, pytest.raises(ModelResponseError, match="MALFORMED_FUNCTION_CALL"):
        model.call(Prompt("weather?"))


@pytest.mark.parametrize("mode", CALLS + STREAMS)
def test_an_invalid_key_is_an_authentication_error(server: LoopbackServer, mode: str) -> None:
    server.script(path_for(mode), recorded("error_400_api_key.json"))
    with make_model(server) as model, pytest.raises(AuthenticationError, match="API key") as caught:
        invoke(model, Prompt("hi"), mode)
    assert KEY not in str(caught.value) and KEY[:12] not in str(caught.value)
    assert len(server.requests_to(path_for(mode))) == 1  # never retried


def test_rate_limits_are_retried(server: LoopbackServer) -> None:
    server.script(CALL, recorded("error_429.json"), recorded("text.json"))
    with make_model(server) as model:
        assert model.call(Prompt("hi")).text == "Hello! How can I help you today? 😊"
    assert len(server.requests_to(CALL)) == 2


def test_count_tokens(server: LoopbackServer) -> None:
    path = "/v1beta/models/gemini-2.5-flash:countTokens"
    server.script(path, recorded("count_tokens.json"), recorded("count_tokens.json"))
    prompt = Prompt([SystemMessage("Be brief."), UserMessage("How many tokens is this?")], ChatOptions(temperature=0.1))
    with make_model(server) as model:
        assert model.count_tokens(prompt) == 31
        assert asyncio.run(model.acount_tokens(prompt)) == 31
    body = server.requests_to(path)[0].body
    assert body == {
        "generateContentRequest": {
            "model": "models/gemini-2.5-flash",
            "contents": [{"role": "user", "parts": [{"text": "How many tokens is this?"}]}],
            "systemInstruction": {"parts": [{"text": "Be brief."}]},
        }
    }


def test_the_prompt_model_picks_the_path(server: LoopbackServer) -> None:
    path = "/v1beta/models/gemini-2.5-pro:generateContent"
    server.script(path, recorded("text.json"))
    with make_model(server) as model:
        assert model.call(Prompt("hi", ChatOptions(model="gemini-2.5-pro"))).text
    assert len(server.requests_to(path)) == 1


class City(BaseModel):
    name: str
    country: str
    population: int | None = None


def test_entity_uses_response_schema(server: LoopbackServer) -> None:
    answer = {"candidates": [{"content": {"parts": [{"text": '{"name": "Paris", "country": "France"}'}], "role": "model"},
                              "finishReason": "STOP", "index": 0}],
              "usageMetadata": {"promptTokenCount": 20, "candidatesTokenCount": 12, "totalTokenCount": 32}}  # fmt: skip
    server.script(CALL, Reply(json=answer))
    with make_model(server) as model:
        city = ChatClient.create(model).prompt("Capital of France?").call().entity(City)
    assert city == City(name="Paris", country="France")
    config = server.requests_to(CALL)[0].body["generationConfig"]
    assert config["responseMimeType"] == "application/json"
    schema = config["responseSchema"]
    assert schema["type"] == "object" and {"name", "country"} <= set(schema["required"])
    assert schema["properties"]["population"]["type"] == "integer"
    assert schema["properties"]["population"]["nullable"] is True
    assert "anyOf" not in json.dumps(schema) and "additionalProperties" not in json.dumps(schema)


def test_generation_settings_and_tool_choice() -> None:
    prompt = Prompt(
        "hi",
        ChatOptions(temperature=0.2, top_p=0.9, top_k=40, max_tokens=256, stop=("END",), seed=7, tool_choice="get_weather",
                    extra={"generationConfig": {"candidateCount": 1}}),
    ).copy(tools=(ToolDefinition("get_weather", "weather", {"type": "object", "properties": {"city": {"type": "string"}}}),))  # fmt: skip
    body = build_gemini_body(
        prompt, prompt.options or ChatOptions(), thinking={"thinkingBudget": 512, "includeThoughts": True}
    )
    assert body["generationConfig"] == {
        "temperature": 0.2, "topP": 0.9, "topK": 40, "maxOutputTokens": 256, "seed": 7, "stopSequences": ["END"],
        "thinkingConfig": {"thinkingBudget": 512, "includeThoughts": True}, "candidateCount": 1,
    }  # fmt: skip
    assert body["toolConfig"] == {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["get_weather"]}}


def test_schema_conversion_inlines_refs_and_refuses_recursion() -> None:
    schema = {
        "$defs": {
            "Pet": {"type": "object", "properties": {"kind": {"enum": ["cat", "dog"]}}, "additionalProperties": False}
        },
        "type": "object",
        "properties": {
            "pet": {"$ref": "#/$defs/Pet"},
            "tags": {"type": "array", "items": {"type": ["string", "null"]}},
        },
        "required": ["pet"],
    }
    assert gemini_schema(schema) == {
        "type": "object",
        "properties": {
            "pet": {"type": "object", "properties": {"kind": {"enum": ["cat", "dog"], "type": "string"}}},
            "tags": {"type": "array", "items": {"type": "string", "nullable": True}},
        },
        "required": ["pet"],
    }
    recursive = {"$defs": {"Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}}},
                 "$ref": "#/$defs/Node"}  # fmt: skip
    with pytest.raises(UnsupportedFeatureError, match="recursion"):
        gemini_schema(recursive)


def test_a_missing_key_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    with pytest.raises(ValueError, match="GEMINI_API_KEY or GOOGLE_API_KEY"):
        GeminiChatModel("gemini-2.5-flash")
    monkeypatch.setenv("GOOGLE_API_KEY", "AIzaSyFromGoogleEnv-0123456789")
    assert GeminiChatModel("gemini-2.5-flash")._http._headers["x-goog-api-key"] == "AIzaSyFromGoogleEnv-0123456789"
    monkeypatch.setenv("GEMINI_API_KEY", "AIzaSyFromGeminiEnv-0123456789")
    assert GeminiChatModel("gemini-2.5-flash")._http._headers["x-goog-api-key"] == "AIzaSyFromGeminiEnv-0123456789"


def test_the_model_pickles(server: LoopbackServer) -> None:
    import pickle

    server.script(CALL, recorded("text.json"))
    model = pickle.loads(pickle.dumps(make_model(server, thinking={"thinkingBudget": 0})))
    with model:
        assert model.call(Prompt("hi")).text == "Hello! How can I help you today? 😊"
    assert server.requests_to(CALL)[0].body["generationConfig"] == {"thinkingConfig": {"thinkingBudget": 0}}


@pytest.mark.parametrize("mode", STREAMS)
def test_an_overloaded_error_event_before_any_chunk_is_retried(server: LoopbackServer, mode: str) -> None:
    overloaded = {
        "error": {"code": 503, "message": "The model is overloaded. Please try again later.", "status": "UNAVAILABLE"}
    }
    event = Reply(200, body=f"data: {json.dumps(overloaded)}\n\n", headers={"content-type": "text/event-stream"})
    server.script(STREAM, event, recorded("text.sse"))
    with make_model(server) as model:
        response, _ = invoke(model, Prompt("hi"), mode)
    assert output(response).text == "Hello! How can I help you today? 😊"
    assert len(server.requests_to(STREAM)) == 2


def test_media_a_tool_returned_follow_its_function_response() -> None:
    from chatclient.messages import Media

    result = ToolResponse("gemini-call-1", "chart", "", media=(Media("image/png", b"\x89PNG"),))
    prompt = Prompt(
        [
            UserMessage("Plot it"),
            AssistantMessage(None, (ToolCall("gemini-call-1", "chart", "{}", {"generated_id": True}),)),
            ToolResponseMessage((result,)),
        ]
    )
    parts = build_gemini_body(prompt, ChatOptions())["contents"][2]["parts"]
    assert parts[0] == {
        "functionResponse": {"name": "chart", "response": {"result": "[1 attachment(s) follow in the next message]"}}
    }
    assert parts[1] == {"text": "Media returned by the tool call(s) chart (call gemini-call-1):"}
    assert parts[2] == {"inlineData": {"mimeType": "image/png", "data": "iVBORw=="}}
