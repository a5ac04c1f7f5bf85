"""``ToolCallAdvisor``: the recursive advisor that runs the tool loop, in all four modes.

Each iteration re-runs only the part of the chain after this advisor (``chain.copy(self)``), so
advisors placed after it (inner ones) see every model turn while advisors before it (memory,
RAG, logging at default orders) see the user's turn once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from typing import Any

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
from chatclient.events import ToolCallFinished, ToolCallStarted, flush_marker
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
from chatclient.tools.decorator import _check_unique as check_unique_tools
from chatclient.tools.decorator import refresh_provided_tools
from chatclient.tools.failures import ToolErrorHandler
from chatclient.tools.guards import ToolLoopGuard
from chatclient.tools.manager import ToolCallingManager, ToolExecutionResult
from chatclient.tools.results import ToolExecution

# Values of tool_choice that do not force a call; any other value is dropped after the first
# tool turn, or a forced model would call tools forever.
_UNFORCED = (None, "auto", "none")


class _Loop:
    """The state of one request's tool loop (advisors are shared, so state never lives on them)."""

    __slots__ = (
        "active",
        "advisor",
        "exchange",
        "executions",
        "guard",
        "messages",
        "request",
        "turns",
        "updates",
        "usage",
    )

    def __init__(self, advisor: ToolCallAdvisor, request: ChatClientRequest) -> None:
        self.advisor = advisor
        self.request = request
        self.messages: tuple[Message, ...] = request.prompt.messages
        self.exchange: list[Message] = []
        self.executions: list[ToolExecution] = []
        self.updates: dict[str, Any] = {}  # what tools wrote with ToolContext.set
        self.usage = Usage()
        self.turns = 0
        # Without tools in the request (an explicitly added advisor, a user-handled call) any tool
        # calls are returned to the caller untouched.
        # A provider may offer no tools yet (skill-scoped tools before activate_skill): still active.
        self.active = bool(
            request.context.get(ContextKeys.TOOL_CALLBACKS) or request.context.get(ContextKeys.TOOL_PROVIDERS)
        )
        self.guard = advisor.loop_guard.start() if advisor.loop_guard is not None and self.active else None

    def next_request(self) -> ChatClientRequest:
        if self.active:
            # Tool providers (MCP servers) may have changed their tools during the last turn, and
            # request-aware ones see the conversation as it stands (memory included, on turn one).
            self.request = refresh_provided_tools(self.request, self.messages, only_request_aware=not self.turns)
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
        if self.guard is not None:
            self.guard.check(response)  # raises before a call over a repeat/cap limit runs
        return True

    def apply(self, request: ChatClientRequest, result: ToolExecutionResult) -> bool:
        """Record the exchange and prepare the next messages; True when the results go straight back."""
        if self.guard is not None:
            result = self.guard.annotate(result)
        if result.context_updates:
            # Tools wrote to the request context: later turns, inner advisors and the response see it.
            self.updates.update(result.context_updates)
            tool_context = {**(self.request.context.get(ContextKeys.TOOL_CONTEXT) or {}), **result.context_updates}
            self.request = self.request.mutate(context={**result.context_updates, ContextKeys.TOOL_CONTEXT: tool_context})
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
                **self.updates,
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


def _with_advisor_tools(request: ChatClientRequest, chain: AdvisorChain) -> ChatClientRequest:
    """The request plus the tools that advisors inside the loop contribute (``loop_tools``).

    An inner advisor with a ``loop_tools(callbacks) -> Sequence[ToolCallback]`` method (for
    example ``ToolSearchAdvisor``'s search tool) adds tools the manager can run, built for this
    request's tools; they are offered only when the request has tools.
    """
    callbacks = tuple(request.context.get(ContextKeys.TOOL_CALLBACKS) or ())
    if not callbacks:
        return request
    extra: list[Any] = []
    for advisor in chain.remaining:
        contribute = getattr(advisor, "loop_tools", None)
        if callable(contribute):
            extra.extend(contribute(callbacks))
    if not extra:
        return request
    merged = (*callbacks, *extra)
    check_unique_tools(merged)
    return request.mutate(
        prompt=request.prompt.copy(tools=tuple(cb.definition for cb in merged)),
        context={ContextKeys.TOOL_CALLBACKS: merged},
    )


def _started(request: ChatClientRequest, response: ChatResponse) -> None:
    """Emit ``ToolCallStarted`` for each tool call the model asked for (nothing when nobody listens)."""
    if request.context.get(ContextKeys.EVENTS) is None:
        return
    for generation in response.generations:
        for call in generation.output.tool_calls:
            request.emit(ToolCallStarted(call.id, call.name, call.arguments))


def _finished(request: ChatClientRequest, result: ToolExecutionResult) -> None:
    """Emit ``ToolCallFinished`` for each tool call the manager ran."""
    if request.context.get(ContextKeys.EVENTS) is None:
        return
    for e in result.executions:
        request.emit(ToolCallFinished(e.id, e.name, e.result, e.is_error, e.duration))


def _strip_finish(response: ChatClientResponse) -> ChatClientResponse:
    """An intermediate chunk without its finish reason, so outer advisors do not treat it as the end."""
    cr = response.chat_response
    if cr is None or not cr.has_finish_reason():
        return response
    generations = tuple(Generation(g.output, replace(g.metadata, finish_reason=None)) for g in cr.generations)
    return response.mutate(chat_response=ChatResponse(generations, cr.metadata))


_DEFAULT_GUARD = object()


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
    ``loop_guard=ToolLoopGuard(max_repeats=3, max_calls_per_tool=...)`` hints, then stops the loop with
    ``ToolLoopRepeatError``, when the model repeats an identical call or goes over a tool's cap.
    ``on_execution_error`` / ``on_arguments_error`` set the default manager's tool failure policy
    (see ``ToolCallingManager``).
    """

    def __init__(
        self,
        *,
        tool_calling_manager: ToolCallingManager | None = None,
        conversation_history: bool = True,
        max_iterations: int = 20,
        stream_tool_call_responses: bool = False,
        order: int = TOOL_CALL_ORDER,
        loop_guard: ToolLoopGuard | object | None = _DEFAULT_GUARD,
        on_execution_error: ToolErrorHandler | None = None,
        on_arguments_error: ToolErrorHandler | None = None,
    ) -> None:
        if not isinstance(max_iterations, int) or max_iterations < 1:
            raise ValueError("max_iterations must be an integer >= 1")
        if not HIGHEST_PRECEDENCE < order < LOWEST_PRECEDENCE:
            raise ValueError("order must be strictly between HIGHEST_PRECEDENCE and LOWEST_PRECEDENCE")
        if tool_calling_manager is not None and (on_execution_error is not None or on_arguments_error is not None):
            raise ValueError(
                "give on_execution_error / on_arguments_error to the ToolCallingManager you pass, not to the advisor"
            )
        self.tool_calling_manager = tool_calling_manager or ToolCallingManager(
            on_execution_error=on_execution_error, on_arguments_error=on_arguments_error
        )
        self.conversation_history = conversation_history
        self.max_iterations = max_iterations
        self.stream_tool_call_responses = stream_tool_call_responses
        self.order = order
        # On by default: a model that repeats the very same call gets a hint, then the loop stops with
        # ToolLoopRepeatError instead of spending max_iterations turns. loop_guard=None turns it off.
        self.loop_guard: ToolLoopGuard | None = ToolLoopGuard() if loop_guard is _DEFAULT_GUARD else loop_guard  # type: ignore[assignment]

    # -- call -------------------------------------------------------------------------------------

    def advise_call(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientResponse:
        loop = _Loop(self, _with_advisor_tools(request, chain))
        while True:
            processed = loop.next_request()
            response = chain.copy(self).next_call(processed)
            cr = response.chat_response
            if not loop.count(cr):
                return loop.finish(response)
            assert cr is not None
            _started(processed, cr)
            result = self.tool_calling_manager.execute(processed.prompt, cr, processed.context)
            _finished(processed, result)
            if loop.apply(processed, result):
                return loop.direct(response, result.to_chat_response(cr))

    async def advise_acall(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientResponse:
        loop = _Loop(self, _with_advisor_tools(request, chain))
        while True:
            processed = loop.next_request()
            response = await chain.copy(self).next_acall(processed)
            cr = response.chat_response
            if not loop.count(cr):
                return loop.finish(response)
            assert cr is not None
            _started(processed, cr)
            result = await self.tool_calling_manager.aexecute(processed.prompt, cr, processed.context)
            _finished(processed, result)
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
        loop = _Loop(self, _with_advisor_tools(request, chain))
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
            _started(processed, aggregate)
            marker = flush_marker(processed)
            if marker is not None:
                yield marker  # the consumer sees ToolCallStarted while the tools run
            result = self.tool_calling_manager.execute(processed.prompt, aggregate, processed.context)
            _finished(processed, result)
            if loop.apply(processed, result):
                yield loop.direct(
                    last or ChatClientResponse(None, processed.context), result.to_chat_response(aggregate)
                )
                return

    async def advise_astream(
        self, request: ChatClientRequest, chain: AdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        loop = _Loop(self, _with_advisor_tools(request, chain))
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
            _started(processed, aggregate)
            marker = flush_marker(processed)
            if marker is not None:
                yield marker
            result = await self.tool_calling_manager.aexecute(processed.prompt, aggregate, processed.context)
            _finished(processed, result)
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
