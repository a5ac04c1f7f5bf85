"""ResponseAggregator: reasoning merge rule, n>1 choices, refusals, tool-call metadata, usage."""

from __future__ import annotations

import time

from hypothesis import given, settings
from hypothesis import strategies as st

from chatclient.messages import AssistantMessage, Reasoning, ToolCall
from chatclient.models.base import (
    ChatResponse,
    ChatResponseMetadata,
    Generation,
    GenerationMetadata,
    ResponseAggregator,
    Usage,
    aggregate,
)


def delta(
    text: str | None = None,
    *,
    reasoning: tuple[Reasoning, ...] = (),
    calls: tuple[ToolCall, ...] = (),
    refusal: str | None = None,
    finish: str | None = None,
    usage: Usage | None = None,
    metadata: dict[str, object] | None = None,
    extra: dict[str, object] | None = None,
) -> ChatResponse:
    message = AssistantMessage(text, calls, metadata or {}, reasoning, refusal)
    gen = Generation(message, GenerationMetadata(finish, extra or {}))
    return ChatResponse((gen,), ChatResponseMetadata("id-1", "m", usage or Usage()))


def test_reasoning_deltas_merge_until_the_block_is_signed_then_a_new_block_starts() -> None:
    chunks = [
        delta(reasoning=(Reasoning("Let me ", provider="anthropic"),)),
        delta(reasoning=(Reasoning("think.", provider="anthropic"),)),
        delta(reasoning=(Reasoning("", signature="sig-1", provider="anthropic"),)),
        delta("Calling the tool."),
        delta(reasoning=(Reasoning("Second ", provider="anthropic"),)),
        delta(reasoning=(Reasoning("thought", provider="anthropic"),)),
        delta(reasoning=(Reasoning("", signature="sig-2", provider="anthropic"),)),
        delta(reasoning=(Reasoning("", redacted="ENCRYPTED", provider="anthropic"),)),
        delta(reasoning=(Reasoning("after redacted", provider="anthropic"),), finish="stop"),
    ]
    out = aggregate(chunks).result
    assert out is not None
    assert out.output.reasoning == (
        Reasoning("Let me think.", "sig-1", None, "anthropic"),
        Reasoning("Second thought", "sig-2", None, "anthropic"),
        Reasoning("", None, "ENCRYPTED", "anthropic"),
        Reasoning("after redacted", None, None, "anthropic"),
    )
    assert out.output.text == "Calling the tool."
    assert out.output.reasoning_text == "Let me think.Second thoughtafter redacted"


def test_unsigned_reasoning_of_one_provider_is_one_block_and_another_provider_starts_a_new_one() -> None:
    chunks = [
        delta(reasoning=(Reasoning("a", provider="openai"),)),
        delta(reasoning=(Reasoning("b"),)),
        delta(reasoning=(Reasoning("c", provider="openrouter"),)),
    ]
    out = aggregate(chunks).result
    assert out is not None
    assert out.output.reasoning == (Reasoning("ab", provider="openai"), Reasoning("c", provider="openrouter"))


def test_choices_are_aggregated_by_position() -> None:
    empty = Generation(AssistantMessage(None))
    md = ChatResponseMetadata("x", "m")
    chunks = [
        ChatResponse((Generation(AssistantMessage("Red")),), md),
        ChatResponse((empty, Generation(AssistantMessage("Blue"))), md),
        ChatResponse((Generation(AssistantMessage(" apple")),), md),
        ChatResponse((empty, Generation(AssistantMessage(" sky"))), md),
        ChatResponse(
            (
                Generation(AssistantMessage(None), GenerationMetadata("length")),
                Generation(AssistantMessage(None), GenerationMetadata("stop")),
            ),
            ChatResponseMetadata("x", "m", Usage(3, 4)),
        ),
    ]
    response = aggregate(chunks)
    assert [(g.output.text, g.finish_reason) for g in response.generations] == [
        ("Red apple", "length"),
        ("Blue sky", "stop"),
    ]
    assert response.metadata.usage == Usage(3, 4)


def test_refusal_deltas_are_concatenated_and_absent_refusal_stays_none() -> None:
    out = aggregate([delta(refusal="I can't"), delta(refusal=" help."), delta("", finish="stop")]).result
    assert out is not None and out.output.refusal == "I can't help." and out.output.text == ""
    plain = aggregate([delta("hi", finish="stop")]).result
    assert plain is not None and plain.output.refusal is None


def test_tool_call_metadata_is_kept_and_merged() -> None:
    sig = {"extra_content": {"google": {"thought_signature": "TS"}}}
    chunks = [
        delta(calls=(ToolCall("c1", "get_weather", '{"ci', sig),)),
        delta(calls=(ToolCall("c1", "", 'ty": "Pa'),)),
        delta(calls=(ToolCall("c2", "get_time", "{}"),)),
        delta(calls=(ToolCall("c1", "", "", {"partial": True}),), finish="length"),
    ]
    out = aggregate(chunks).result
    assert out is not None
    assert out.output.tool_calls == (
        ToolCall("c1", "get_weather", '{"city": "Pa', {**sig, "partial": True}),
        ToolCall("c2", "get_time", "{}"),
    )


def test_every_usage_field_survives_and_metadata_merges() -> None:
    usage = Usage(100, 20, cached_input_tokens=64, cache_write_tokens=8, reasoning_tokens=12, reported_total_tokens=150)
    chunks = [
        delta("a", metadata={"reasoning_details": [{"type": "reasoning.text"}]}, extra={"logprobs": {"content": []}}),
        delta("b", finish="stop", usage=usage, extra={"raw_finish_reason": "stop"}),
        ChatResponse((), ChatResponseMetadata(extra={"service_tier": "default"})),
    ]
    response = aggregate(chunks)
    assert response.metadata.usage == usage and response.metadata.usage.total_tokens == 150
    assert response.metadata.extra["service_tier"] == "default"
    result = response.result
    assert result is not None
    assert result.output.metadata["reasoning_details"] == [{"type": "reasoning.text"}]
    assert dict(result.metadata.extra) == {"logprobs": {"content": []}, "raw_finish_reason": "stop"}


def test_an_empty_stream_aggregates_to_one_empty_generation() -> None:
    response = ResponseAggregator().result()
    assert len(response.generations) == 1 and response.text is None


@settings(max_examples=60, deadline=None)
@given(
    text=st.text(max_size=30),
    thought=st.text(min_size=1, max_size=30),
    cuts=st.lists(st.integers(min_value=0, max_value=30), max_size=6),
)
def test_any_cut_of_text_and_reasoning_aggregates_to_the_whole(text: str, thought: str, cuts: list[int]) -> None:
    def pieces(s: str) -> list[str]:
        points = sorted({min(c, len(s)) for c in cuts})
        return [s[a:b] for a, b in zip([0, *points], [*points, len(s)], strict=True)]

    chunks = [delta(reasoning=(Reasoning(p, provider="ollama"),)) for p in pieces(thought)]
    chunks += [delta(p) for p in pieces(text)]
    out = aggregate(chunks).result
    assert out is not None
    assert out.output.reasoning == (Reasoning(thought, provider="ollama"),)
    assert out.output.text == text


def test_long_reasoning_streams_aggregate_in_linear_time() -> None:
    chunks = [delta(reasoning=(Reasoning("word ", provider="openai"),)) for _ in range(8_000)]
    start = time.perf_counter()
    out = aggregate(chunks).result
    elapsed = time.perf_counter() - start
    assert out is not None and len(out.output.reasoning_text) == 40_000
    assert elapsed < 1.0, elapsed
