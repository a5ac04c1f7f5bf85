"""SimpleLoggerAdvisor: log each request and response as structured events (structlog)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import structlog

from chatclient.advisor import (
    AdvisorChain,
    AsyncCallAdvisor,
    AsyncStreamAdvisor,
    CallAdvisor,
    StreamAdvisor,
)
from chatclient.models.base import ChatResponse, ResponseAggregator
from chatclient.request import ChatClientRequest, ChatClientResponse


def describe_request(request: ChatClientRequest) -> str:
    """Default request formatter: message roles and texts, options and context keys."""
    lines = [f"{m.type.value}: {m.text}" for m in request.prompt.messages]
    if request.prompt.options is not None:
        lines.append(f"options: {request.prompt.options}")
    if request.prompt.tools:
        lines.append("tools: " + ", ".join(t.name for t in request.prompt.tools))
    if request.context:
        lines.append("context keys: " + ", ".join(sorted(map(str, request.context))))
    return "\n".join(lines)


def describe_response(response: ChatResponse | None) -> str:
    """Default response formatter: text, tool calls, finish reason, usage, model."""
    if response is None:
        return "no response"
    parts = []
    for g in response.generations:
        parts.append(f"text: {g.output.text}")
        for call in g.output.tool_calls:
            parts.append(f"tool call: {call.name}({call.arguments})")
        parts.append(f"finish_reason: {g.metadata.finish_reason}")
    u = response.metadata.usage
    parts.append(f"usage: prompt={u.prompt_tokens} completion={u.completion_tokens} total={u.total_tokens}")
    if response.metadata.model:
        parts.append(f"model: {response.metadata.model}")
    return "\n".join(parts)


class SimpleLoggerAdvisor(CallAdvisor, StreamAdvisor, AsyncCallAdvisor, AsyncStreamAdvisor):
    """Logs ``chat_client.request`` before the call and ``chat_client.response`` after it (debug level).

    Streams are logged once, on the aggregate of all chunks. Pass ``request_to_str`` /
    ``response_to_str`` to change what is logged and ``logger`` to use your own structlog logger.
    Requests carry no credentials (providers keep API keys in their HTTP headers), so nothing secret
    can reach the log through this advisor.
    """

    def __init__(
        self,
        *,
        request_to_str: Callable[[ChatClientRequest], str] | None = None,
        response_to_str: Callable[[ChatResponse | None], str] | None = None,
        logger: Any = None,
        order: int = 0,
    ) -> None:
        self.request_to_str = request_to_str or describe_request
        self.response_to_str = response_to_str or describe_response
        self.logger = logger if logger is not None else structlog.get_logger("chatclient")
        self.order = order

    def _log_request(self, request: ChatClientRequest) -> None:
        self.logger.debug("chat_client.request", advisor=self.name, request=self.request_to_str(request))

    def _log_response(self, response: ChatResponse | None) -> None:
        self.logger.debug("chat_client.response", advisor=self.name, response=self.response_to_str(response))

    def advise_call(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientResponse:
        self._log_request(request)
        response = chain.next_call(request)
        self._log_response(response.chat_response)
        return response

    async def advise_acall(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientResponse:
        self._log_request(request)
        response = await chain.next_acall(request)
        self._log_response(response.chat_response)
        return response

    def advise_stream(self, request: ChatClientRequest, chain: AdvisorChain) -> Iterator[ChatClientResponse]:
        self._log_request(request)
        aggregator = ResponseAggregator()
        for response in chain.next_stream(request):
            aggregator.add(response.chat_response)
            yield response
        self._log_response(aggregator.result())

    async def advise_astream(
        self, request: ChatClientRequest, chain: AdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        self._log_request(request)
        aggregator = ResponseAggregator()
        async for response in chain.next_astream(request):
            aggregator.add(response.chat_response)
            yield response
        self._log_response(aggregator.result())
