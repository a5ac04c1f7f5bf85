"""Pure mapping of the OpenAI Responses API: request bodies, responses, stream events (no I/O)."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from chatclient.errors import ModelHTTPError, RateLimitError, UnsupportedFeatureError
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
from chatclient.models.base import aggregate
from chatclient.models.openai_responses import (
    OUTPUT_KEY,
    PROVIDER,
    ResponsesStreamParser,
    build_responses_body,
    parse_response,
    responses_input,
)
from chatclient.options import ChatOptions
from chatclient.prompt import Prompt, ToolDefinition
from chatclient.tools.builtin import CodeExecution, WebFetch, WebSearch
from tests.support.openai_replay import load
from tests.support.responses_replay import check, sse_bytes

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 8


def body(prompt: Prompt, **kw: Any) -> dict[str, Any]:
    options = ChatOptions(model=kw.pop("model", "gpt-4.1")).merge(prompt.options)
    return build_responses_body(prompt, options, stream=kw.pop("stream", False), **kw)


def test_messages_become_input_items() -> None:
    items = responses_input(
        [
            SystemMessage("Be brief."),
            UserMessage(
                "What is this?", media=(Media("image/png", PNG), Media("application/pdf", "https://x.org/a.pdf"))
            ),
            AssistantMessage(None, (ToolCall("call_1", "look", '{"q":1}'),)),
            ToolResponseMessage((ToolResponse("call_1", "look", "a cat"),)),
        ]
    )
    assert items[0] == {"role": "system", "content": "Be brief."}
    content = items[1]["content"]
    assert content[0] == {"type": "input_text", "text": "What is this?"}
    assert content[1]["type"] == "input_image" and content[1]["image_url"].startswith("data:image/png;base64,")
    assert content[2] == {"type": "input_file", "file_url": "https://x.org/a.pdf"}
    assert items[2] == {"type": "function_call", "call_id": "call_1", "name": "look", "arguments": '{"q":1}'}
    assert items[3] == {"type": "function_call_output", "call_id": "call_1", "output": "a cat"}


def test_tool_result_media_go_inside_the_function_call_output() -> None:
    response = ToolResponse(
        "call_1", "chart", "the chart", media=(Media("image/png", PNG), Media("application/pdf", b"%PDF-1.7"))
    )
    (item,) = responses_input([ToolResponseMessage((response,))])
    output = item["output"]
    assert output[0] == {"type": "input_text", "text": "the chart"}
    assert output[1]["type"] == "input_image"
    assert output[2]["type"] == "input_file" and output[2]["filename"] == "attachment.pdf"
    assert output[2]["file_data"].startswith("data:application/pdf;base64,")


def test_reasoning_of_another_provider_is_not_sent() -> None:
    message = AssistantMessage(
        "ok",
        reasoning=(Reasoning("mine", "rs_1", "enc", PROVIDER), Reasoning("theirs", "sig", None, "anthropic")),
    )
    items = responses_input([message])
    assert items == [
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "mine"}],
            "encrypted_content": "enc",
        },
        {"role": "assistant", "content": "ok"},
    ]


def test_options_tools_and_formats() -> None:
    strict = {
        "type": "object",
        "properties": {"a": {"type": "string"}},
        "required": ["a"],
        "additionalProperties": False,
    }
    loose = {"type": "object", "properties": {"a": {"type": "string"}}}
    prompt = Prompt(
        "hi",
        ChatOptions(
            tool_choice="f", parallel_tool_calls=False, output_schema={**strict, "title": "My Thing"}, top_p=0.5
        ),
        tools=(ToolDefinition("f", "F", strict), ToolDefinition("g", "G", loose)),
    )
    b = body(prompt, stream=True)
    assert b["stream"] is True and b["top_p"] == 0.5
    assert [t["strict"] for t in b["tools"]] == [True, False]
    assert b["tool_choice"] == {"type": "function", "name": "f"} and b["parallel_tool_calls"] is False
    assert b["text"]["format"] == {
        "type": "json_schema",
        "name": "My_Thing",
        "schema": {**strict, "title": "My Thing"},
        "strict": True,
    }


@pytest.mark.parametrize(
    ("model", "extra", "store", "reasoning", "included"),
    [
        ("gpt-5-mini", None, False, None, True),
        ("o4-mini", None, False, None, True),
        ("gpt-4.1", None, False, None, False),
        ("gpt-4.1", {"reasoning": {"effort": "low"}}, False, None, True),
        ("my-proxy-name", None, False, True, True),
        ("gpt-5-mini", None, True, None, False),
    ],
)
def test_encrypted_reasoning_is_asked_for_when_not_stored(
    model: str, extra: Any, store: bool, reasoning: bool | None, included: bool
) -> None:
    b = body(Prompt("hi", ChatOptions(extra=extra)), model=model, store=store, reasoning=reasoning)
    assert ("reasoning.encrypted_content" in b.get("include", ())) is included
    assert b["store"] is store


def test_hosted_tools_are_declared_with_only_the_keys_that_are_set() -> None:
    prompt = Prompt("hi", tools=(WebSearch(allowed_domains=["python.org"]).definition, CodeExecution().definition))
    assert body(prompt)["tools"] == [
        {"type": "web_search", "filters": {"allowed_domains": ["python.org"]}},
        {"type": "code_interpreter", "container": {"type": "auto"}},
    ]
    assert body(Prompt("hi", tools=(WebSearch().definition,)))["tools"] == [{"type": "web_search"}]


@pytest.mark.parametrize("hosted", [WebFetch(), WebSearch(max_uses=2)])
def test_a_hosted_tool_the_api_lacks_fails_before_http(hosted: Any) -> None:
    with pytest.raises(UnsupportedFeatureError) as info:
        body(Prompt("hi", tools=(hosted.definition,)))
    assert info.value.provider == "OpenAI Responses"


@pytest.mark.parametrize(
    "name",
    [
        "responses_text",
        "responses_reasoning_tool_call",
        "responses_web_search",
        "responses_code_interpreter_unknown_item",
        "responses_refusal",
        "responses_incomplete_tool_call",
    ],
)
def test_recorded_responses_parse(name: str) -> None:
    fixture = load("responses", name)
    check(parse_response(fixture["body"]), fixture["expect"])


def _feed_bytes(data: bytes, sizes: list[int]) -> list[Any]:
    from chatclient.models.http.sse import LineDecoder

    parser = ResponsesStreamParser()
    decoder = LineDecoder()
    chunks: list[Any] = []
    pos = 0
    i = 0
    while pos < len(data):
        piece = data[pos : pos + sizes[i % len(sizes)]]
        pos += len(piece)
        i += 1
        for line in decoder.feed(piece):
            chunks.extend(parser.feed(line))
            if parser.done:
                return chunks + parser.finish()
    for line in decoder.flush():
        chunks.extend(parser.feed(line))
    assert parser.done
    return chunks + parser.finish()


@pytest.mark.parametrize(
    "name", ["responses_text_stream", "responses_reasoning_tool_stream", "responses_web_search_stream"]
)
@pytest.mark.parametrize("seed", range(5))
def test_recorded_streams_parse_when_cut_anywhere(name: str, seed: int) -> None:
    fixture = load("responses", name)
    rng = random.Random(seed)
    sizes = [rng.randint(1, 23) for _ in range(50)]
    chunks = _feed_bytes(sse_bytes(fixture["events"]), sizes)
    check(aggregate(chunks), fixture["expect"])
    # the streamed answer matches the one parsed from the final response object
    whole = parse_response(fixture["events"][-1]["response"]).generations[0].output
    streamed = aggregate(chunks).generations[0].output
    assert (streamed.text, streamed.tool_calls, streamed.reasoning, streamed.citations) == (
        whole.text,
        whole.tool_calls,
        whole.reasoning,
        whole.citations,
    )


def test_unknown_items_and_events_are_kept_not_fatal() -> None:
    events = load("responses", "responses_text_stream")["events"]
    novel = {"type": "response.novel_thing.delta", "sequence_number": 99, "delta": {"x": 1}}
    done = events[-1]
    final = {
        **done,
        "response": {
            **done["response"],
            "output": [{"type": "future_item", "id": "fut_1", "blob": [1, 2]}, *done["response"]["output"]],
        },
    }
    chunks = _feed_bytes(sse_bytes([*events[:5], novel, *events[5:-1], final]), [7])
    message = aggregate(chunks).generations[0].output
    assert message.metadata[OUTPUT_KEY][0] == {"type": "future_item", "id": "fut_1", "blob": [1, 2]}
    assert responses_input([message])[0] == {"type": "future_item", "id": "fut_1", "blob": [1, 2]}


def test_error_codes_map_to_typed_errors() -> None:
    parser = ResponsesStreamParser()
    line = "data: " + json.dumps({"type": "error", "code": "rate_limit_exceeded", "message": "slow down"})
    parser.feed(line)
    with pytest.raises(RateLimitError):
        parser.feed("")
    failed = {"id": "r", "status": "failed", "error": {"code": "server_error", "message": "boom"}, "output": []}
    with pytest.raises(ModelHTTPError) as info:
        parse_response(failed)
    assert info.value.status == 500


def test_streamed_partial_tool_call_is_flagged_when_cut_by_max_output_tokens() -> None:
    events = [
        {"type": "response.created", "response": {"id": "r1", "model": "m"}},
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f", "arguments": ""},
        },
        {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 0, "delta": '{"a": "x'},
        {
            "type": "response.incomplete",
            "response": {
                "id": "r1",
                "status": "incomplete",
                "incomplete_details": {"reason": "max_output_tokens"},
                "output": [],
            },
        },
    ]
    result = aggregate(_feed_bytes(sse_bytes(events), [1000]))
    g = result.generations[0]
    assert g.finish_reason == "length"
    assert g.output.tool_calls[0].metadata.get("partial") is True


def test_text_deltas_without_item_ids_are_not_repeated_when_the_item_is_done() -> None:
    """A compatible server that leaves item_id out of its deltas: the text is streamed once."""
    item = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Hi you", "annotations": []}]}
    events = [
        {"type": "response.output_text.delta", "delta": "Hi"},
        {"type": "response.output_text.delta", "delta": " you"},
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        {"type": "response.completed", "response": {"id": "r", "status": "completed", "output": [item]}},
    ]
    assert aggregate(_feed_bytes(sse_bytes(events), [5])).text == "Hi you"
