"""Helpers for decision tests: OpenAI-shaped ``logprobs`` payloads and a model that answers with them."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from chatclient.messages import AssistantMessage
from chatclient.models.base import (
    BaseChatModel,
    ChatResponse,
    ChatResponseMetadata,
    Generation,
    GenerationMetadata,
    ModelCapabilities,
)
from chatclient.prompt import Prompt
from chatclient.testing import FunctionChatModel

LOGPROBS = ModelCapabilities(logprobs=True)


def logprobs_payload(probs: Mapping[str, float]) -> dict[str, Any]:
    """OpenAI's ``choices[0].logprobs`` for a one-token answer whose top tokens have these probabilities."""
    tops = [
        {"token": t, "logprob": math.log(p), "bytes": list(t.encode())}
        for t, p in sorted(probs.items(), key=lambda kv: -kv[1])
    ]
    first = tops[0] if tops else {"token": "", "logprob": 0.0, "bytes": []}
    return {"content": [{**first, "top_logprobs": tops}], "refusal": None}


def lp_response(probs: Mapping[str, float]) -> ChatResponse:
    """A ``ChatResponse`` like the OpenAI parser builds for that payload."""
    payload = logprobs_payload(probs)
    text = payload["content"][0]["token"]
    return ChatResponse(
        (Generation(AssistantMessage(text), GenerationMetadata("length", MappingProxyType({"logprobs": payload}))),),
        ChatResponseMetadata(model="scripted-lp"),
    )


def decision_model(answer: Callable[[str], Mapping[str, float] | ChatResponse | BaseException]) -> FunctionChatModel:
    """A chat model reporting log-probabilities; ``answer(user_text)`` gives the top-token probabilities."""

    def fn(prompt: Prompt) -> ChatResponse:
        got = answer(prompt.user_message.text)
        if isinstance(got, BaseException):
            raise got
        return got if isinstance(got, ChatResponse) else lp_response(got)

    return FunctionChatModel(fn, capabilities=LOGPROBS)


class FixedLogprobModel(BaseChatModel):
    """A picklable model that always answers with the same top-token probabilities."""

    capabilities = LOGPROBS

    def __init__(self, probs: Mapping[str, float]) -> None:
        self.probs = dict(probs)

    def call(self, prompt: Prompt) -> ChatResponse:
        return lp_response(self.probs)
