"""``DecisionToolFilter``: offer the model only the tools a decision model judges relevant to the conversation.

    client.prompt(question).tools(*mcp_tools).advisors(DecisionToolFilter(model, always_include=["get_time"]))

It runs once per request, before the tool loop (order ``TOOL_CALL_ORDER - 50``): one yes/no question
per tool ("is this tool needed to respond?") about the latest user/assistant messages, and every
tool with P(yes) >= ``min_probability`` stays, plus ``always_include`` and every tool already called
in the conversation (providers reject a history that calls a tool the request does not offer).
When the decision fails, every tool is kept (a warning is logged): the filter saves tokens, it is
not access control. Sending a different tool list per request defeats prompt caching of the tools.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from chatclient.advisor import TOOL_CALL_ORDER, AdvisorChain, BaseAdvisor
from chatclient.decisions.answers import YesNoAnswer, check_threshold
from chatclient.decisions.model import DecisionModel, as_decision_model
from chatclient.decisions.questions import YesNoQuestion
from chatclient.messages import AssistantMessage, Message, UserMessage
from chatclient.models.base import ChatModel
from chatclient.prompt import ToolDefinition
from chatclient.request import ChatClientRequest, ContextKeys

__all__ = ["DEFAULT_TOOL_QUESTION", "DecisionToolFilter"]

log = logging.getLogger(__name__)

DEFAULT_TOOL_QUESTION = "Is this tool needed to respond to the user's latest message? Tool: {name}: {description}"
"""The question asked per tool; ``{name}`` and ``{description}`` are the tool's."""

_MAX_DESCRIPTION = 1000


def _called(messages: Sequence[Message]) -> set[str]:
    return {c.name for m in messages if isinstance(m, AssistantMessage) for c in m.tool_calls}


class DecisionToolFilter(BaseAdvisor):
    """Keeps the tools relevant to the conversation (see the module docstring).

    ``max_messages`` is how many of the latest user/assistant text messages the decision sees;
    ``question`` replaces :data:`DEFAULT_TOOL_QUESTION`. ``last_kept`` names the tools kept for
    the latest request (for logs and tests).
    """

    def __init__(
        self,
        model: DecisionModel | ChatModel,
        *,
        always_include: Collection[str] = (),
        min_probability: float = 0.5,
        max_messages: int = 3,
        question: str = DEFAULT_TOOL_QUESTION,
        order: int = TOOL_CALL_ORDER - 50,
    ) -> None:
        if isinstance(always_include, str):
            raise TypeError("always_include is a collection of tool names, e.g. ['get_time'], not one string")
        if not isinstance(max_messages, int) or max_messages < 1:
            raise ValueError("max_messages must be an int >= 1")
        if "{name}" not in question:
            raise ValueError("question must contain {name}")
        self.decisions = as_decision_model(model)
        self.always_include = frozenset(always_include)
        self.min_probability = check_threshold(min_probability, "min_probability")
        self.max_messages = max_messages
        self.question = question
        self.order = order

    def _input(self, messages: Sequence[Message]) -> list[Message]:
        said: list[Message] = [
            m
            for m in messages
            if (isinstance(m, UserMessage) and m.text) or (isinstance(m, AssistantMessage) and m.text)
        ]
        return said[-self.max_messages :]

    def _candidates(self, request: ChatClientRequest) -> tuple[list[ToolDefinition], set[str]]:
        keep = set(self.always_include) | _called(request.prompt.messages)
        return [t for t in request.prompt.tools if t.name not in keep], keep

    def _questions(self, tools: Sequence[ToolDefinition]) -> dict[str, YesNoQuestion]:
        return {
            t.name: YesNoQuestion(
                self.question.replace("{name}", t.name).replace(
                    "{description}", (t.description or "no description")[:_MAX_DESCRIPTION]
                )
            )
            for t in tools
        }

    def _apply(self, request: ChatClientRequest, chosen: set[str]) -> ChatClientRequest:
        tools = request.prompt.tools
        shown = tuple(t for t in tools if t.name in chosen)
        kept = {t.name for t in shown}
        callbacks = request.context.get(ContextKeys.TOOL_CALLBACKS)
        context: dict[str, Any] = {}
        if callbacks:
            context[ContextKeys.TOOL_CALLBACKS] = tuple(cb for cb in callbacks if cb.definition.name in kept)
        log.debug("DecisionToolFilter: kept %d of %d tools: %s", len(shown), len(tools), sorted(kept))
        return request.mutate(prompt=request.prompt.copy(tools=shown), context=context)

    def _chosen(self, answers: Mapping[str, Any], keep: set[str]) -> set[str]:
        chosen = set(keep)
        for name, answer in answers.items():
            if answer.is_refused:
                raise ValueError(f"the model refused to judge the tool {name!r}")
            assert isinstance(answer, YesNoAnswer)
            if answer.is_yes(self.min_probability):
                chosen.add(name)
        return chosen

    def _failed(self, exc: BaseException) -> None:
        log.warning("DecisionToolFilter: the decision failed (%s: %s); keeping every tool", type(exc).__name__, exc)

    def before(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientRequest:
        candidates, keep = self._candidates(request)
        said = self._input(request.prompt.messages)
        if not candidates or not said:
            return request
        try:
            chosen = self._chosen(self.decisions.decide(said, self._questions(candidates)), keep)
        except Exception as exc:
            self._failed(exc)
            return request
        return self._apply(request, chosen)

    async def abefore(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientRequest:
        candidates, keep = self._candidates(request)
        said = self._input(request.prompt.messages)
        if not candidates or not said:
            return request
        try:
            chosen = self._chosen(await self.decisions.adecide(said, self._questions(candidates)), keep)
        except Exception as exc:
            self._failed(exc)
            return request
        return self._apply(request, chosen)

    def __repr__(self) -> str:
        return (
            f"DecisionToolFilter(min_probability={self.min_probability}, always_include={sorted(self.always_include)})"
        )
