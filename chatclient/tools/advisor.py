"""``ToolCallAdvisor``: the recursive advisor that runs the tool loop, in all four modes.

Each iteration re-runs only the part of the chain after this advisor (``chain.copy(self)``), so
advisors placed after it (inner ones) see every model turn while advisors before it (memory,
RAG, logging at default orders) see the user's turn once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import replace

from chatclient.advisor import (
    HIGHEST_PRECEDENCE,
    LOWEST_PRECEDENCE,
    TOOL_CALL_ORDER,
    AdvisorChain,
    AsyncCallAdvisor,
    AsyncStreamAdvisor,
    CallAdvisor,
    StreamAdvisor,
)
from chatclient.errors import ToolLoopLimitError
from chatclient.messages import AssistantMessage, Message, SystemMessage
from chatclient.models.base import (
    ChatResponse,
    ChatResponseMetadata,
    Generation,
    GenerationMetadata,
    ResponseAggregator,
    Usage,
)
from chatclient.request import ChatClientRequest, ChatClientResponse, ContextKeys, apply_screens, screens_of
from chatclient.tools.manager import ToolCallingManager, ToolExecutionResult
from chatclient.tools.results import ToolExecution

# Values of tool_choice that do not force a call; any other value is dropped after the first
# tool turn, or a forced model would call tools forever.
_UNFORCED = (None, "auto", "none")


class _Loop:
    """The state of one request's tool loop (advisors are shared, so state never lives on them)."""

    __slots__ = ("active", "advisor", "exchange", "executions", "messages", "request", "turns", "usage")

    def __init__(self, advisor: ToolCallAdvisor, request: ChatClientRequest) -> None:
        self.advisor = advisor
        self.request = request
        self.messages: tuple[Message, ...] = request.prompt.messages
        self.exchange: list[Message] = []
        self.executions: list[ToolExecution] = []
        self.usage = Usage()
        self.turns = 0
        # Without tools in the request (an explicitly added advisor, a user-handled call) any tool
        # calls are returned to the caller untouched.
        self.active = bool(request.context.get(ContextKeys.TOOL_CALLBACKS))

    def next_request(self) -> ChatClientRequest:
        prompt = self.request.prompt
        if self.turns:
            options = prompt.options
            if options is not None and options.tool_choice not in _UNFORCED:
                options = replace(options, tool_choice=None)
            prompt = prompt.copy(messages=self.messages, options=options)
        return self.request.mutate(prompt=prompt)

    def count(self, response: ChatResponse | None) -> bool:
        """Add the turn's usage; True when it asks for tools (raises past ``max_iterations``)."""
        if response is None:
            return False
        self.usage = self.usage + response.metadata.usage
        if not self.active or not response.has_tool_calls():
            return False
        self.turns += 1
        limit = self.advisor.max_iterations
        if self.turns > limit:
            names = sorted({c.name for g in response.generations for c in g.output.tool_calls})
            raise ToolLoopLimitError(
                f"the model asked for tools in more than max_iterations={limit} consecutive turns "
                f"(last requested: {', '.join(names)}); raise max_iterations or check the tools' answers"
            )
        return True

    def apply(self, request: ChatClientRequest, result: ToolExecutionResult) -> bool:
        """Record the exchange and prepare the next messages; True when the results go straight back."""
        self.exchange.extend((result.assistant_message, result.tool_response_message))
        self.executions.extend(result.executions)
        if self.advisor.conversation_history:
            self.messages = result.conversation_history
        else:
            system = request.prompt.system_message
            head: tuple[Message, ...] = (system,) if isinstance(system, SystemMessage) and system.text else ()
            self.messages = (*head, result.assistant_message, result.tool_response_message)
        return result.return_direct

    def finish(self, response: ChatClientResponse, chat_response: ChatResponse | None = None) -> ChatClientResponse:
        """The final response: summed usage, the turn's tool exchange and tool executions in the context."""
        cr = chat_response if chat_response is not None else response.chat_response
        if cr is not None:
            cr = cr.with_usage(self.usage)
        return response.mutate(
            chat_response=cr,
            context={
                ContextKeys.TOOL_EXCHANGE: tuple(self.exchange),
                ContextKeys.TOOL_EXECUTIONS: tuple(self.executions),
            },
        )

    def direct(self, response: ChatClientResponse, answer: ChatResponse) -> ChatClientResponse:
        """The final response answering with return-direct tool results.

        Advisors after this one (a safeguard with ``check_response``) never saw this answer: it is
        built here, after they returned. So it goes through the response screens they registered in
        the turn's context, and a screen's refusal replaces it (marked ``REFUSED``).
        """
        refused = apply_screens(screens_of(response.context), answer)
        if refused is None:
            return self.finish(response, answer)
        replacement, by = refused
        return self.finish(response.mutate(context={ContextKeys.REFUSED: by}), replacement)


def _strip_finish(response: ChatClientResponse) -> ChatClientResponse:
    """An intermediate chunk without its finish reason, so outer advisors do not treat it as the end."""
    cr = response.chat_response
    if cr is None or not cr.has_finish_reason():
        return response
    generations = tuple(Generation(g.output, replace(g.metadata, finish_reason=None)) for g in cr.generations)
    return response.mutate(chat_response=ChatResponse(generations, cr.metadata))


class ToolCallAdvisor(CallAdvisor, StreamAdvisor, AsyncCallAdvisor, AsyncStreamAdvisor):
    """Runs the tool loop: call the model, run the tools it asks for, call it again, until it answers.

    ``conversation_history=False`` sends only the system message and the latest tool exchange on
    follow-up turns (for setups where an inner advisor supplies history). More than
    ``max_iterations`` model turns with tool calls raise ``ToolLoopLimitError``. When every tool of
    a turn is ``return_direct`` the tool results are the answer (finish reason ``"return_direct"``).
    Streams emit the final answer's chunks; tool-call chunks only with
    ``stream_tool_call_responses=True`` (without their finish reason). The turn's assistant
    tool-call messages and tool responses go into the response context under
    ``ContextKeys.TOOL_EXCHANGE``, and one ``ToolExecution`` record per tool call of every
    iteration under ``ContextKeys.TOOL_EXECUTIONS`` (read it as ``response.tool_executions``); the
    final response's usage is the sum over all turns. A forcing ``tool_choice`` ("required", a
    named tool) applies to the first turn only. A return-direct answer passes the response screens
    (``ContextKeys.RESPONSE_SCREENS``) of the advisors it bypassed, e.g. ``SafeGuardAdvisor(check_response=True)``.
    """

    def __init__(
        self,
        *,
        tool_calling_manager: ToolCallingManager | None = None,
        conversation_history: bool = True,
        max_iterations: int = 20,
        stream_tool_call_responses: bool = False,
        order: int = TOOL_CALL_ORDER,
    ) -> None:
        if not isinstance(max_iterations, int) or max_iterations < 1:
            raise ValueError("max_iterations must be an integer >= 1")
        if not HIGHEST_PRECEDENCE < order < LOWEST_PRECEDENCE:
            raise ValueError("order must be strictly between HIGHEST_PRECEDENCE and LOWEST_PRECEDENCE")
        self.tool_calling_manager = tool_calling_manager or ToolCallingManager()
        self.conversation_history = conversation_history
        self.max_iterations = max_iterations
        self.stream_tool_call_responses = stream_tool_call_responses
        self.order = order

    # -- call -------------------------------------------------------------------------------------

    def advise_call(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientResponse:
        loop = _Loop(self, request)
        while True:
            processed = loop.next_request()
            response = chain.copy(self).next_call(processed)
            cr = response.chat_response
            if not loop.count(cr):
                return loop.finish(response)
            assert cr is not None
            result = self.tool_calling_manager.execute(processed.prompt, cr, processed.context)
            if loop.apply(processed, result):
                return loop.direct(response, result.to_chat_response(cr))

    async def advise_acall(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientResponse:
        loop = _Loop(self, request)
        while True:
            processed = loop.next_request()
            response = await chain.copy(self).next_acall(processed)
            cr = response.chat_response
            if not loop.count(cr):
                return loop.finish(response)
            assert cr is not None
            result = await self.tool_calling_manager.aexecute(processed.prompt, cr, processed.context)
            if loop.apply(processed, result):
                return loop.direct(response, result.to_chat_response(cr))

    # -- streams ----------------------------------------------------------------------------------

    def _passes(self, loop: _Loop, response: ChatClientResponse) -> bool:
        """Whether a chunk goes out while its turn is still streaming (finish chunks wait for the turn's end)."""
        cr = response.chat_response
        if cr is None:
            return True
        show_calls = self.stream_tool_call_responses or not loop.active
        return not cr.has_finish_reason() and (show_calls or not cr.has_tool_calls())

    def _end_of_turn(
        self, loop: _Loop, held: list[ChatClientResponse], last: ChatClientResponse | None, aggregate: ChatResponse
    ) -> tuple[list[ChatClientResponse], bool]:
        """Chunks to emit when a turn's stream ends, and whether the loop is done."""
        if not loop.count(aggregate):
            if not held:
                # No chunk carried a finish reason: close the stream with one that carries the totals.
                end = ChatResponse(
                    (Generation(AssistantMessage(None), GenerationMetadata(None)),),
                    ChatResponseMetadata(aggregate.metadata.id, aggregate.metadata.model),
                )
                base = last if last is not None else ChatClientResponse(None, loop.request.context)
                return [loop.finish(base, end)], True
            return [*held[:-1], loop.finish(held[-1])], True
        if self.stream_tool_call_responses:
            return [_strip_finish(h) for h in held], False
        return [], False

    def advise_stream(self, request: ChatClientRequest, chain: AdvisorChain) -> Iterator[ChatClientResponse]:
        loop = _Loop(self, request)
        while True:
            processed = loop.next_request()
            aggregator = ResponseAggregator()
            held: list[ChatClientResponse] = []
            last: ChatClientResponse | None = None
            for response in chain.copy(self).next_stream(processed):
                aggregator.add(response.chat_response)
                last = response
                if self._passes(loop, response):
                    yield response
                elif response.chat_response is not None and response.chat_response.has_finish_reason():
                    held.append(response)
            aggregate = aggregator.result()
            out, done = self._end_of_turn(loop, held, last, aggregate)
            yield from out
            if done:
                return
            result = self.tool_calling_manager.execute(processed.prompt, aggregate, processed.context)
            if loop.apply(processed, result):
                yield loop.direct(
                    last or ChatClientResponse(None, processed.context), result.to_chat_response(aggregate)
                )
                return

    async def advise_astream(
        self, request: ChatClientRequest, chain: AdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        loop = _Loop(self, request)
        while True:
            processed = loop.next_request()
            aggregator = ResponseAggregator()
            held: list[ChatClientResponse] = []
            last: ChatClientResponse | None = None
            async for response in chain.copy(self).next_astream(processed):
                aggregator.add(response.chat_response)
                last = response
                if self._passes(loop, response):
                    yield response
                elif response.chat_response is not None and response.chat_response.has_finish_reason():
                    held.append(response)
            aggregate = aggregator.result()
            out, done = self._end_of_turn(loop, held, last, aggregate)
            for item in out:
                yield item
            if done:
                return
            result = await self.tool_calling_manager.aexecute(processed.prompt, aggregate, processed.context)
            if loop.apply(processed, result):
                yield loop.direct(
                    last or ChatClientResponse(None, processed.context), result.to_chat_response(aggregate)
                )
                return

    def __repr__(self) -> str:
        return (
            f"ToolCallAdvisor(order={self.order}, max_iterations={self.max_iterations}, "
            f"conversation_history={self.conversation_history})"
        )
