"""BedrockChatModel over real HTTP against the loopback server replaying Converse / ConverseStream payloads.

Streams are real ``application/vnd.amazon.eventstream`` bodies (frames with CRCs, built from the
recorded events) sent whole and cut into small irregular chunks. Every request's SigV4 signature is
recomputed here from what the server received, so a request that was not signed exactly as sent
fails. The tool loop runs end to end through ``ChatClient``.
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from chatclient import ChatClient
from chatclient.errors import (
    AuthenticationError,
    ModelHTTPError,
    ModelResponseError,
    RateLimitError,
    UnsupportedFeatureError,
)
from chatclient.messages import (
    AssistantMessage,
    Media,
    Reasoning,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from chatclient.models.base import ChatResponse, Usage
from chatclient.models.bedrock import BedrockChatModel, build_converse_body
from chatclient.models.http import ResponseLimits
from chatclient.models.http.sigv4 import AWSCredentials, sign
from chatclient.options import ChatOptions
from chatclient.prompt import Prompt, ToolDefinition
from chatclient.tools import tool
from tests.support import invoke, server_fixtures
from tests.support.eventstream import event, stream_body
from tests.support.loopback import LoopbackServer, Recorded, Reply

pytestmark = pytest.mark.integration
loopback_server, server = server_fixtures()

DATA = Path(__file__).resolve().parent.parent / "data" / "providers" / "bedrock"
MODEL_ID = "anthropic.claude-3-5-haiku-20241022-v1:0"
CALL = "/model/anthropic.claude-3-5-haiku-20241022-v1%3A0/converse"
STREAM = "/model/anthropic.claude-3-5-haiku-20241022-v1%3A0/converse-stream"
CREDS = ("AKIDLOOPBACKTEST01", "loopback-secret-access-key-0123456789", "loopback-session-token-abcdef")
CALLS = ("call", "acall")
STREAMS = ("stream", "astream")
EVENTSTREAM = "application/vnd.amazon.eventstream"


def sizes(name: str, whole: bool) -> tuple[int, ...]:
    rng = random.Random(name)
    return () if whole else tuple(rng.randint(1, 23) for _ in range(64))


def recorded(name: str, *, whole: bool = False) -> Reply:
    """A fixture as the HTTP answer: JSON as is, ``*_stream.json`` as event-stream frames."""
    if name.endswith("_stream.json"):
        events = json.loads((DATA / name).read_text())
        return Reply(200, body=stream_body(events), headers={"content-type": EVENTSTREAM}, split=sizes(name, whole))
    status = int(name.split("_")[1].split(".")[0]) if name.startswith("error_") else 200
    kind = {400: "ValidationException", 403: "UnrecognizedClientException", 429: "ThrottlingException"}.get(status)
    headers = {"x-amzn-errortype": f"{kind}:http://internal.amazon.com/coral/com.amazon.bedrock/"} if kind else {}
    return Reply(status, body=(DATA / name).read_bytes(), headers=headers, split=sizes(name, whole))


def make_model(srv: LoopbackServer, **kw: Any) -> BedrockChatModel:
    kw.setdefault("backoff_base", 0.001)
    kw.setdefault("timeout", 10.0)
    kw.setdefault("credentials", CREDS)
    return BedrockChatModel(MODEL_ID, region="us-east-1", base_url=srv.url, **kw)


def path_for(mode: str) -> str:
    return CALL if mode in CALLS else STREAM


def check_signature(request: Recorded, creds: tuple[str, ...] = CREDS, region: str = "us-east-1") -> None:
    """Recompute the SigV4 signature from the request as received: it must match the one sent."""
    stamp = request.headers["x-amz-date"]
    when = datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    expected = sign("POST", f"http://{request.headers['host']}{request.path}", {"content-type": request.headers["content-type"]},
                    request.raw, AWSCredentials.of(creds), region=region, service="bedrock", now=when)  # fmt: skip
    assert request.headers["authorization"] == expected["authorization"]
    assert "SignedHeaders=content-type;host;x-amz-date;x-amz-security-token," in request.headers["authorization"]
    assert request.headers["x-amz-security-token"] == creds[2]


def output(response: ChatResponse) -> AssistantMessage:
    assert response.result is not None
    return response.result.output


@pytest.mark.parametrize("whole", [True, False], ids=["whole", "chunked"])
@pytest.mark.parametrize("mode", CALLS + STREAMS)
def test_plain_text(server: LoopbackServer, mode: str, whole: bool) -> None:
    server.script(path_for(mode), recorded("text.json" if mode in CALLS else "text_stream.json", whole=whole))
    with make_model(server) as model:
        response, chunks = invoke(model, Prompt([SystemMessage("Be kind."), UserMessage("hi")]), mode)
    message = output(response)
    expected = "Hello! How can I help you today?" + (" éè" if mode in STREAMS else "")
    assert message.text == expected and message.tool_calls == () and message.refusal is None
    assert response.result is not None and response.result.finish_reason == "stop"
    assert response.result.metadata.extra["raw_finish_reason"] == "end_turn"
    assert response.metadata.usage == Usage(12, 9)
    assert response.metadata.model == MODEL_ID
    assert response.metadata.extra["metrics"]["latencyMs"] in (523, 498)
    if mode in STREAMS:
        assert [c.text for c in chunks if c.text] == ["Hello", "! How can I help", " you today? éè"]
    (request,) = server.requests_to(path_for(mode))
    check_signature(request)
    assert request.body == {
        "messages": [{"role": "user", "content": [{"text": "hi"}]}],
        "system": [{"text": "Be kind."}],
    }


@pytest.mark.parametrize("mode", CALLS + STREAMS)
def test_parallel_tool_use(server: LoopbackServer, mode: str) -> None:
    server.script(path_for(mode), recorded("tool_use.json" if mode in CALLS else "tool_stream.json"))
    with make_model(server) as model:
        response, _ = invoke(model, Prompt("Weather in Paris and Tokyo?"), mode)
    message = output(response)
    assert response.result is not None and response.result.finish_reason == "tool_calls"
    assert message.text == "I'll look up the weather in both cities."
    assert [(c.id, c.name, json.loads(c.arguments)) for c in message.tool_calls] == [
        ("tooluse_kZJMlvQmRJ6eAyJE5GIl7Q", "get_weather", {"city": "Paris"}),
        ("tooluse_Hn2TqX9aSSiQnQ8q1y3G9w", "get_weather", {"city": "Tokyo"}),
    ]
    assert response.metadata.usage == Usage(410, 118)


@pytest.mark.parametrize("mode", CALLS + STREAMS)
def test_reasoning_is_kept_with_its_signature(server: LoopbackServer, mode: str) -> None:
    server.script(path_for(mode), recorded("thinking_tool_use.json" if mode in CALLS else "thinking_stream.json"))
    with make_model(server) as model:
        response, _ = invoke(model, Prompt("Weather in Paris?"), mode)
    message = output(response)
    assert message.reasoning == (
        Reasoning("The user asks for Paris weather; I should call get_weather.", "ErUBCkYIBRgCIkD1eYpLMgE1bEDRockSig==",
                  None, "bedrock"),
    )  # fmt: skip
    assert [c.name for c in message.tool_calls] == ["get_weather"]


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return {"Paris": "18C and sunny", "Tokyo": "24C, light rain"}[city]


@pytest.mark.parametrize("mode", ["call", "stream"])
def test_tool_loop_end_to_end(server: LoopbackServer, mode: str) -> None:
    path = path_for(mode)
    first = "tool_use.json" if mode == "call" else "tool_stream.json"
    final = "final_answer.json" if mode == "call" else "text_stream.json"
    server.script(path, recorded(first), recorded(final))
    with make_model(server) as model:
        spec = ChatClient.create(model).prompt().user("Weather in Paris and Tokyo?").tools(get_weather)
        text = spec.call().content() if mode == "call" else "".join(spec.stream().content())
    # A stream's content() carries the text of every turn of the loop.
    assert text.endswith(("Tokyo is 24°C with light rain.", "How can I help you today? éè"))
    requests = server.requests_to(path)
    for request in requests:
        check_signature(request)
    first_body, follow_up = (r.body for r in requests)
    assert first_body["toolConfig"]["tools"][0]["toolSpec"]["name"] == "get_weather"
    assert (
        first_body["toolConfig"]["tools"][0]["toolSpec"]["inputSchema"]["json"]["properties"]["city"]["type"]
        == "string"
    )
    messages = follow_up["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[1]["content"] == [
        {"text": "I'll look up the weather in both cities."},
        {"toolUse": {"toolUseId": "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q", "name": "get_weather", "input": {"city": "Paris"}}},
        {"toolUse": {"toolUseId": "tooluse_Hn2TqX9aSSiQnQ8q1y3G9w", "name": "get_weather", "input": {"city": "Tokyo"}}},
    ]
    assert messages[2]["content"] == [
        {"toolResult": {"toolUseId": "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q", "content": [{"text": "18C and sunny"}]}},
        {"toolResult": {"toolUseId": "tooluse_Hn2TqX9aSSiQnQ8q1y3G9w", "content": [{"text": "24C, light rain"}]}},
    ]


def test_signed_reasoning_goes_back_with_the_tool_turn() -> None:
    thought = Reasoning("thinking...", "sig-1", None, "bedrock")
    foreign = Reasoning("other", "sig-x", None, "anthropic")
    prompt = Prompt(
        [
            UserMessage("hi"),
            AssistantMessage(None, (ToolCall("t1", "get_weather", '{"city":"Paris"}'),), reasoning=(thought, foreign)),
            ToolResponseMessage((ToolResponse("t1", "get_weather", '{"temp": 18}'),)),
        ]
    )
    body = build_converse_body(prompt, ChatOptions())
    assert body["messages"][1]["content"] == [
        {"reasoningContent": {"reasoningText": {"text": "thinking...", "signature": "sig-1"}}},
        {"toolUse": {"toolUseId": "t1", "name": "get_weather", "input": {"city": "Paris"}}},
    ]
    assert body["messages"][2]["content"] == [{"toolResult": {"toolUseId": "t1", "content": [{"json": {"temp": 18}}]}}]


def test_cache_points_images_documents_and_settings() -> None:
    marker = {"cache_control": {"type": "ephemeral"}}
    prompt = Prompt(
        [
            SystemMessage("You read contracts.", metadata=marker),
            UserMessage("Summarise", media=(Media("application/pdf", b"%PDF-1.7"), Media("image/png", b"\x89PNG")),
                        metadata=marker),
        ],
        ChatOptions(max_tokens=300, temperature=0.1, top_p=0.9, stop=("END",), tool_choice="required",
                    extra={"additionalModelRequestFields": {"top_k": 50}}),
    ).copy(tools=(ToolDefinition("lookup", "Look up a clause", {"type": "object", "properties": {"q": {"type": "string"}}}),))  # fmt: skip
    body = build_converse_body(
        prompt, prompt.options or ChatOptions(), guardrail={"guardrailIdentifier": "g1", "guardrailVersion": "1"}
    )
    assert body["system"] == [{"text": "You read contracts."}, {"cachePoint": {"type": "default"}}]
    assert body["messages"][0]["content"] == [
        {"text": "Summarise"},
        {"document": {"format": "pdf", "name": "document-1", "source": {"bytes": "JVBERi0xLjc="}}},
        {"image": {"format": "png", "source": {"bytes": "iVBORw=="}}},
        {"cachePoint": {"type": "default"}},
    ]
    assert body["toolConfig"]["tools"][-1] == {"cachePoint": {"type": "default"}}
    assert body["toolConfig"]["toolChoice"] == {"any": {}}
    assert body["inferenceConfig"] == {"maxTokens": 300, "temperature": 0.1, "topP": 0.9, "stopSequences": ["END"]}
    assert body["additionalModelRequestFields"] == {"top_k": 50}
    assert body["guardrailConfig"] == {"guardrailIdentifier": "g1", "guardrailVersion": "1"}
    with pytest.raises(UnsupportedFeatureError, match="s3:// URIs"):
        build_converse_body(
            Prompt([UserMessage("x", media=(Media("image/png", "https://example.com/a.png"),))]), ChatOptions()
        )


def test_cache_usage_counts_the_whole_input(server: LoopbackServer) -> None:
    server.script(CALL, recorded("cache_usage.json"))
    with make_model(server) as model:
        usage = model.call(Prompt("When does the contract end?")).metadata.usage
    assert usage == Usage(3114, 12, 3100, 0, 0)
    assert usage.total_tokens == 3126


@pytest.mark.parametrize("mode", CALLS + STREAMS)
def test_guardrail_intervention_is_a_refusal_with_its_trace(server: LoopbackServer, mode: str) -> None:
    server.script(path_for(mode), recorded("guardrail.json" if mode in CALLS else "guardrail_stream.json"))
    with make_model(server) as model:
        response, _ = invoke(model, Prompt("Which stock should I buy?"), mode)
    message = output(response)
    assert response.result is not None and response.result.finish_reason == "content_filter"
    assert message.refusal == "Sorry, I can't help with investment advice."
    topics = response.metadata.extra["trace"]["guardrail"]["inputAssessment"]["1abcd2ef34gh"]["topicPolicy"]["topics"]
    assert topics[0]["action"] == "BLOCKED"


@pytest.mark.parametrize("mode", STREAMS)
def test_a_stream_exception_before_any_chunk_is_retried(server: LoopbackServer, mode: str) -> None:
    server.script(STREAM, recorded("throttling_stream.json"), recorded("text_stream.json"))
    with make_model(server) as model:
        response, _ = invoke(model, Prompt("hi"), mode)
    assert output(response).text == "Hello! How can I help you today? éè"
    assert len(server.requests_to(STREAM)) == 2


def test_a_stream_exception_after_text_is_raised_typed(server: LoopbackServer) -> None:
    events = json.loads((DATA / "text_stream.json").read_text())[:2]
    body = stream_body([*events, ("!exception", ("throttlingException", "Too many tokens"))])
    server.script(STREAM, Reply(200, body=body, headers={"content-type": EVENTSTREAM}))
    with make_model(server) as model, pytest.raises(RateLimitError, match="throttlingException"):
        list(model.stream(Prompt("hi")))


def test_a_corrupted_frame_is_a_typed_error(server: LoopbackServer) -> None:
    good = bytearray(event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Hi"}}))
    good[-6] ^= 0x40  # a payload byte: the message CRC no longer matches
    server.script(STREAM, Reply(200, body=bytes(good), headers={"content-type": EVENTSTREAM}))
    with make_model(server) as model, pytest.raises(ModelResponseError, match="CRC mismatch"):
        list(model.stream(Prompt("hi")))


def test_an_oversized_frame_is_a_typed_error(server: LoopbackServer) -> None:
    big = event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "x" * 5000}})
    server.script(STREAM, Reply(200, body=big, headers={"content-type": EVENTSTREAM}))
    limits = ResponseLimits(max_event_bytes=4096)
    with (
        make_model(server, response_limits=limits) as model,
        pytest.raises(ModelResponseError, match="4096-byte bound"),
    ):
        list(model.stream(Prompt("hi")))


def test_a_stream_cut_mid_frame_is_incomplete(server: LoopbackServer) -> None:
    body = recorded("text_stream.json", whole=True).body
    assert isinstance(body, bytes)
    server.script(STREAM, Reply(200, body=body[:-40], headers={"content-type": EVENTSTREAM}))
    with make_model(server) as model, pytest.raises(ModelResponseError, match="incomplete"):
        list(model.stream(Prompt("hi")))


@pytest.mark.parametrize(
    ("name", "error"), [("error_403.json", AuthenticationError), ("error_400.json", ModelHTTPError)]
)
def test_http_errors_are_typed_and_scrubbed(server: LoopbackServer, name: str, error: type[Exception]) -> None:
    server.script(CALL, recorded(name))
    with make_model(server) as model, pytest.raises(error) as caught:
        model.call(Prompt("hi"))
    text = str(caught.value)
    assert CREDS[1] not in text and CREDS[2] not in text and CREDS[1][:10] not in text
    if error is AuthenticationError:
        assert "access key AKID" in text  # says which key was used, never the secret
    assert len(server.requests_to(CALL)) == 1


def test_throttling_is_retried(server: LoopbackServer) -> None:
    server.script(CALL, recorded("error_429.json"), recorded("text.json"))
    with make_model(server) as model:
        assert model.call(Prompt("hi")).text == "Hello! How can I help you today?"
    requests = server.requests_to(CALL)
    assert len(requests) == 2
    for request in requests:
        check_signature(request)  # each attempt signed on its own


def test_credentials_from_the_environment(server: LoopbackServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDFROMENV0000")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "env-secret-access-key-000")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "env-session-token-000")
    monkeypatch.setenv("AWS_REGION", "eu-central-1")
    server.script(CALL, recorded("text.json"))
    model = BedrockChatModel(MODEL_ID, base_url=server.url, timeout=10.0)
    assert model.region == "eu-central-1"
    with model:
        model.call(Prompt("hi"))
    check_signature(server.requests_to(CALL)[0], ("AKIDFROMENV0000", "env-secret-access-key-000", "env-session-token-000"),
                    region="eu-central-1")  # fmt: skip
    assert BedrockChatModel(MODEL_ID, region="us-west-2").base_url == "https://bedrock-runtime.us-west-2.amazonaws.com"


def test_the_prompt_caching_advisor_places_cache_points(server: LoopbackServer) -> None:
    from advisors import PromptCachingAdvisor

    server.script(CALL, recorded("cache_usage.json"))
    with make_model(server) as model:
        client = (
            ChatClient.builder(model).default_system("You read contracts.").default_advisors(PromptCachingAdvisor())
        )
        response = client.build().prompt("When does the contract end?").call().chat_response()
    body = server.requests_to(CALL)[0].body
    assert body["system"] == [{"text": "You read contracts."}, {"cachePoint": {"type": "default"}}]
    assert body["messages"] == [
        {"role": "user", "content": [{"text": "When does the contract end?"}, {"cachePoint": {"type": "default"}}]}
    ]
    assert response.metadata.usage.cached_input_tokens == 3100


def test_a_redirect_to_another_origin_never_carries_the_signature_or_token(server: LoopbackServer) -> None:
    with LoopbackServer() as other:
        other.script(CALL, recorded("text.json"))
        server.script(CALL, Reply(307, headers={"location": f"{other.url}{CALL}"}))
        with make_model(server) as model:
            model.call(Prompt("hi"))
        (sent,) = other.requests_to(CALL)
    check_signature(server.requests_to(CALL)[0])
    assert "authorization" not in sent.headers and "x-amz-security-token" not in sent.headers


def test_the_model_pickles_and_keeps_signing(server: LoopbackServer) -> None:
    import pickle

    server.script(CALL, recorded("text.json"))
    model = pickle.loads(pickle.dumps(make_model(server)))
    with model:
        assert model.call(Prompt("hi")).text == "Hello! How can I help you today?"
    check_signature(server.requests_to(CALL)[0])
    assert CREDS[1] not in repr(model)


def test_count_tokens(server: LoopbackServer) -> None:
    import asyncio

    path = "/model/anthropic.claude-3-5-haiku-20241022-v1%3A0/count-tokens"
    server.script(path, Reply(json={"inputTokens": 27}), Reply(json={"inputTokens": 27}))
    prompt = Prompt([SystemMessage("Be brief."), UserMessage("How many tokens is this?")])
    with make_model(server) as model:
        assert model.count_tokens(prompt) == 27
        assert asyncio.run(model.acount_tokens(prompt)) == 27
    request = server.requests_to(path)[0]
    check_signature(request)
    assert request.body == {
        "input": {
            "converse": {
                "messages": [{"role": "user", "content": [{"text": "How many tokens is this?"}]}],
                "system": [{"text": "Be brief."}],
            }
        }
    }
    server.script(path, Reply(json={"tokens": "many"}))
    with make_model(server) as model, pytest.raises(ModelResponseError, match="without a token count"):
        model.count_tokens(prompt)


def test_entity_through_the_forced_answer_tool(server: LoopbackServer) -> None:
    from pydantic import BaseModel

    class City(BaseModel):
        name: str
        country: str

    answer = {
        "output": {
            "message": {
                "role": "assistant",
                "content": [
                    {
                        "toolUse": {
                            "toolUseId": "tooluse_answer01",
                            "name": "structured_answer",
                            "input": {"name": "Paris", "country": "France"},
                        }
                    }
                ],
            }
        },
        "stopReason": "tool_use",
        "usage": {"inputTokens": 300, "outputTokens": 20, "totalTokens": 320},
    }
    server.script(CALL, Reply(json=answer))
    with make_model(server) as model:
        city = ChatClient.create(model).prompt("Capital of France?").call().entity(City)
    assert city == City(name="Paris", country="France")
    tool_config = server.requests_to(CALL)[0].body["toolConfig"]
    assert tool_config["toolChoice"] == {"tool": {"name": "structured_answer"}}
    assert tool_config["tools"][0]["toolSpec"]["name"] == "structured_answer"


def test_media_a_tool_returned_go_inside_its_result() -> None:
    result = ToolResponse("t1", "chart", "", media=(Media("image/png", b"\x89PNG"), Media("application/pdf", b"%PDF")))
    prompt = Prompt(
        [
            UserMessage("Plot it"),
            AssistantMessage(None, (ToolCall("t1", "chart", "{}"),)),
            ToolResponseMessage((result,)),
        ]
    )
    content = build_converse_body(prompt, ChatOptions())["messages"][2]["content"]
    assert content == [
        {
            "toolResult": {
                "toolUseId": "t1",
                "content": [
                    {"image": {"format": "png", "source": {"bytes": "iVBORw=="}}},
                    {"document": {"format": "pdf", "name": "document-2", "source": {"bytes": "JVBERg=="}}},
                ],
            }
        }
    ]
