"""The embedded model counts its own tokens: its GGUF's tokenizer and chat template, offline."""

from __future__ import annotations

import random
from typing import Any

from advisors import ContextWindowAdvisor
from chatclient import ChatClient
from chatclient.errors import ContextWindowExceededError
from chatclient.messages import AssistantMessage, Message, SystemMessage, UserMessage
from chatclient.prompt import Prompt
from chatclient.tokens import context_window

WORDS = ["the", "weather", "in", "Paris", "is", "sunny", "today", "émigré", "東京", "42", "tokens", "window", "answer"]


def _conversation(rng: random.Random, system: bool) -> list[Message]:
    msgs: list[Message] = [SystemMessage("You are brief.")] if system else []
    for i in range(rng.randint(1, 10)):
        text = " ".join(rng.choices(WORDS, k=rng.randint(1, 40)))
        msgs.append(UserMessage(text) if i % 2 == 0 else AssistantMessage(text))
    return msgs


def test_counter_tracks_the_rendered_template(default_model: Any) -> None:
    counter = default_model.token_counter()
    rng = random.Random(11)
    diffs = []
    for i in range(30):
        msgs = _conversation(rng, system=i % 2 == 0)
        diffs.append(abs(counter.count(msgs) - default_model.count_tokens(Prompt(msgs))))
    print(f"\nSmolLM2 template counter vs full render: mean |diff| {sum(diffs) / len(diffs):.2f}, max {max(diffs)}")
    assert max(diffs) <= 3
    # SmolLM2's template adds a default system prompt when none is given: that costs tokens
    assert default_model.count_tokens(Prompt([UserMessage("hi")])) > default_model.count_tokens(
        Prompt([SystemMessage("x"), UserMessage("hi")])
    )


def test_window_comes_from_the_loaded_context(default_model: Any) -> None:
    assert context_window(default_model) == default_model.llama.n_ctx()
    client = ChatClient.create(default_model)
    advisor = ContextWindowAdvisor(default_model.token_counter(), reserve_output=256)
    huge = "word " * 5000
    try:
        client.prompt(huge).advisors(advisor).call().content()
    except ContextWindowExceededError as exc:
        assert exc.limit == default_model.llama.n_ctx() - 256 and exc.tokens > exc.limit
    else:  # pragma: no cover - the assertion below explains
        raise AssertionError("a 5,000-word prompt fitted a 4,096-token window")
