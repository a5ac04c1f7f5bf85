"""SafeGuardAdvisor: refuse requests (and optionally answers) that contain sensitive words."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Iterator

from chatclient.advisor import (
    AdvisorChain,
    AsyncCallAdvisor,
    AsyncStreamAdvisor,
    CallAdvisor,
    StreamAdvisor,
)
from chatclient.models.base import ChatResponse, ResponseAggregator
from chatclient.request import ChatClientRequest, ChatClientResponse

DEFAULT_FAILURE_RESPONSE = (
    "I can't respond to that because it touches on sensitive content. Could you rephrase it or ask something else?"
)


class SafeGuardAdvisor(CallAdvisor, StreamAdvisor, AsyncCallAdvisor, AsyncStreamAdvisor):
    """Short-circuits with ``failure_response`` when any message contains a sensitive word.

    Matching is a case-insensitive substring test over every message text. The model is never called
    for a refused request. With ``check_response=True`` the model's answer is screened too; a stream
    is then buffered and released only once the whole answer passed the screen.
    """

    def __init__(
        self,
        sensitive_words: Iterable[str],
        *,
        failure_response: str = DEFAULT_FAILURE_RESPONSE,
        check_response: bool = False,
        order: int = 0,
    ) -> None:
        if sensitive_words is None:
            raise ValueError("sensitive_words cannot be None")
        if isinstance(sensitive_words, str):
            raise TypeError("sensitive_words must be a collection of words, not a single string")
        if failure_response is None:
            raise ValueError("failure_response cannot be None")
        self.sensitive_words = tuple(w for w in sensitive_words if w)
        self._needles = tuple(w.casefold() for w in self.sensitive_words)
        self.failure_response = failure_response
        self.check_response = check_response
        self.order = order

    def is_sensitive(self, text: str | None) -> bool:
        if not text or not self._needles:
            return False
        haystack = text.casefold()
        return any(n in haystack for n in self._needles)

    def _refusal(self, request: ChatClientRequest) -> ChatClientResponse:
        response = ChatResponse.of_text(self.failure_response, safeguard_blocked=True)
        return ChatClientResponse(response, request.context)

    def _blocked_answer(self, response: ChatClientResponse) -> bool:
        cr = response.chat_response
        return cr is not None and any(self.is_sensitive(g.output.text) for g in cr.generations)

    def advise_call(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientResponse:
        if self.is_sensitive(request.prompt.contents):
            return self._refusal(request)
        response = chain.next_call(request)
        if self.check_response and self._blocked_answer(response):
            return self._refusal(request)
        return response

    async def advise_acall(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientResponse:
        if self.is_sensitive(request.prompt.contents):
            return self._refusal(request)
        response = await chain.next_acall(request)
        if self.check_response and self._blocked_answer(response):
            return self._refusal(request)
        return response

    def advise_stream(self, request: ChatClientRequest, chain: AdvisorChain) -> Iterator[ChatClientResponse]:
        if self.is_sensitive(request.prompt.contents):
            yield self._refusal(request)
            return
        if not self.check_response:
            yield from chain.next_stream(request)
            return
        buffered = list(chain.next_stream(request))
        yield from self._screen(request, buffered)

    async def advise_astream(
        self, request: ChatClientRequest, chain: AdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        if self.is_sensitive(request.prompt.contents):
            yield self._refusal(request)
            return
        if not self.check_response:
            async for chunk in chain.next_astream(request):
                yield chunk
            return
        buffered = [chunk async for chunk in chain.next_astream(request)]
        for chunk in self._screen(request, buffered):
            yield chunk

    def _screen(self, request: ChatClientRequest, chunks: list[ChatClientResponse]) -> list[ChatClientResponse]:
        aggregator = ResponseAggregator()
        for c in chunks:
            aggregator.add(c.chat_response)
        if self.is_sensitive(aggregator.result().text):
            return [self._refusal(request)]
        return chunks
