"""Guardrails on the real embedded model (SmolLM2-135M, in-process, temperature 0).

What the small model decides is not the point (it is no moderation model); what is tested is the
machinery on real output: the chat-backed moderation classifier gets a well-formed verdict through
the structured-output path in both call modes, and an output guardrail that reprompts makes the
model answer again and hands back only an answer that passed.

Measured (SmolLM2-135M-Instruct Q4_1, temperature 0, seed 42; 26 s for the file): the classifier returns a
well-formed verdict but flags a harmless sentence too (with a plain ``list[str]`` schema it looped
through invented category names until ``max_tokens``, which is why the verdict schema now carries
``enum`` and ``maxItems``); the city question was answered with Amsterdam, the reprompt produced
"Paris is ...", accepted on attempt 2.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from advisors import OutputGuardrailAdvisor
from chatclient import ChatClient, ChatOptions
from chatclient.errors import OutputGuardrailError
from chatclient.guardrails import (
    DEFAULT_MODERATION_CATEGORIES,
    ChatClientModerationModel,
    GuardrailResult,
    Moderation,
    OutputGuardrail,
    OutputGuardrailRequest,
)

pytestmark = pytest.mark.e2e


def test_chat_backed_moderation_returns_a_wellformed_verdict(default_model: Any) -> None:
    client = ChatClient.builder(default_model).default_options(ChatOptions(temperature=0.0, max_tokens=96)).build()
    moderator = ChatClientModerationModel(client)
    verdicts = [
        moderator.moderate("I will hurt you and burn your house down."),
        asyncio.run(moderator.amoderate("The weather is lovely and I baked bread today.")),
    ]
    for verdict in verdicts:
        assert isinstance(verdict, Moderation)
        assert isinstance(verdict.flagged, bool)
        assert set(verdict.categories) <= set(DEFAULT_MODERATION_CATEGORIES)
    print("verdicts:", verdicts)


class MentionsParis(OutputGuardrail):
    """Accepts only an answer naming Paris; otherwise asks plainly for it."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def validate(self, request: OutputGuardrailRequest) -> GuardrailResult:
        self.seen.append(request.text)
        if "paris" in request.text.lower():
            return self.success()
        return self.reprompt("Paris is not named", "Answer with one word: the capital of France is Paris. Say Paris.")


def test_a_reprompt_makes_the_real_model_answer_again(default_model: Any) -> None:
    guard = MentionsParis()
    client = ChatClient.builder(default_model).default_options(ChatOptions(temperature=0.0, max_tokens=32)).build()
    spec = client.prompt("Name any city in Europe.").advisors(OutputGuardrailAdvisor([guard], max_retries=2))
    try:
        answer = spec.call().content()
    except OutputGuardrailError as exc:
        # The model never said Paris: every attempt was checked and reported.
        assert len(exc.failures) == 3 and len(guard.seen) == 3
        print("never accepted:", guard.seen)
        return
    assert answer is not None and "paris" in answer.lower()
    assert guard.seen[-1] == answer  # the caller got exactly the answer that passed
    print(f"accepted after {len(guard.seen)} attempt(s):", guard.seen)
