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
from chatclient.events import AdvisorEvent
from chatclient.models.base import ChatResponse, ResponseAggregator
from chatclient.normalize import normalize_for_matching
from chatclient.request import ChatClientRequest, ChatClientResponse, ContextKeys, ResponseScreen

DEFAULT_FAILURE_RESPONSE = (
    "I can't respond to that because it touches on sensitive content. Could you rephrase it or ask something else?"
)


class SafeGuardAdvisor(CallAdvisor, StreamAdvisor, AsyncCallAdvisor, AsyncStreamAdvisor):
    """Short-circuits with ``failure_response`` when any message contains a sensitive word.

    Matching is a substring test over every message text after ``normalize_for_matching`` on both
    sides (invisible characters removed, NFKC, case-folded): ``"pass\\u200bword"`` and fullwidth
    ``"\\uff30\\uff21\\uff33\\uff33..."`` match ``"password"``. The model is never called for a refused request.

    With ``check_response=True`` every answer that reaches the caller is screened: the model's
    answer (a stream is buffered and released only once the whole answer passed), and answers built
    by advisors around this one after it returned, such as a ``return_direct`` tool result — this
    advisor registers its check under ``ContextKeys.RESPONSE_SCREENS`` and the tool loop applies it.

    A refusal carries ``ContextKeys.REFUSED`` (this advisor's name) in its context and
    ``safeguard_blocked=True`` in its metadata. Memory advisors never store a refused turn, neither
    the question nor the refusal, so one refused message does not get every later turn of the
    conversation refused (the screen covers the whole history the model would see).
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
        # A word made only of invisible characters would normalise to "" and match everything.
        self._needles = tuple(dict.fromkeys(n for w in self.sensitive_words if (n := normalize_for_matching(w))))
        self.failure_response = failure_response
        self.check_response = check_response
        self.order = order

    def is_sensitive(self, text: str | None) -> bool:
        """Whether ``text`` contains a sensitive word once both are normalised."""
        if not text or not self._needles:
            return False
        haystack = normalize_for_matching(text)
        return any(n in haystack for n in self._needles)

    def screen(self, chat_response: ChatResponse) -> ChatResponse | None:
        """The refusal to send instead of ``chat_response`` when any of its answers is sensitive, else ``None``.

        This is the ``ResponseScreen`` the advisor registers when ``check_response`` is on.
        """
        if any(self.is_sensitive(g.output.text) for g in chat_response.generations):
            return self._refusal_response()
        return None

    # -- helpers --------------------------------------------------------------------------------

    def _refusal_response(self) -> ChatResponse:
        return ChatResponse.of_text(self.failure_response, safeguard_blocked=True)

    def _refusal(self, request: ChatClientRequest) -> ChatClientResponse:
        request.emit(AdvisorEvent("safeguard.refused", {"advisor": self.name, "message": "the request was refused"}))
        context = {**request.context, ContextKeys.REFUSED: self.name}
        return ChatClientResponse(self._refusal_response(), context)

    def _screens(self, context: ChatClientRequest | ChatClientResponse) -> dict[str, tuple[ResponseScreen, ...]]:
        existing = context.context.get(ContextKeys.RESPONSE_SCREENS)
        screens: tuple[ResponseScreen, ...] = tuple(existing) if isinstance(existing, (tuple, list)) else ()
        mine: ResponseScreen = self.screen
        return {ContextKeys.RESPONSE_SCREENS: screens if mine in screens else (*screens, mine)}

    def _inward(self, request: ChatClientRequest) -> ChatClientRequest:
        # Advisors inside this one (memory) screen what they persist with this advisor's check.
        return request.mutate(context=self._screens(request)) if self.check_response else request

    def _outward(self, response: ChatClientResponse) -> ChatClientResponse:
        # Advisors outside this one (the tool loop) screen answers they build after it returned.
        return response.mutate(context=self._screens(response))

    def _checked(self, request: ChatClientRequest, response: ChatClientResponse) -> ChatClientResponse:
        cr = response.chat_response
        if cr is not None and self.screen(cr) is not None:
            return self._refusal(request)
        return self._outward(response)

    # -- the four modes -------------------------------------------------------------------------

    def advise_call(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientResponse:
        if self.is_sensitive(request.prompt.contents):
            return self._refusal(request)
        response = chain.next_call(self._inward(request))
        return self._checked(request, response) if self.check_response else response

    async def advise_acall(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientResponse:
        if self.is_sensitive(request.prompt.contents):
            return self._refusal(request)
        response = await chain.next_acall(self._inward(request))
        return self._checked(request, response) if self.check_response else response

    def advise_stream(self, request: ChatClientRequest, chain: AdvisorChain) -> Iterator[ChatClientResponse]:
        if self.is_sensitive(request.prompt.contents):
            yield self._refusal(request)
            return
        if not self.check_response:
            yield from chain.next_stream(request)
            return
        buffered = list(chain.next_stream(self._inward(request)))
        yield from self._screen_stream(request, buffered)

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
        buffered = [chunk async for chunk in chain.next_astream(self._inward(request))]
        for chunk in self._screen_stream(request, buffered):
            yield chunk

    def _screen_stream(self, request: ChatClientRequest, chunks: list[ChatClientResponse]) -> list[ChatClientResponse]:
        aggregator = ResponseAggregator()
        for c in chunks:
            aggregator.add(c.chat_response)
        # Every generation of the whole answer, not only the first (return-direct answers have several).
        if self.screen(aggregator.result()) is not None:
            return [self._refusal(request)]
        return [self._outward(c) for c in chunks]


__all__ = ["DEFAULT_FAILURE_RESPONSE", "SafeGuardAdvisor", "normalize_for_matching"]
