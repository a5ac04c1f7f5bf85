"""``ToolCallingManager``: runs the tool calls of one model turn and builds the follow-up history."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from chatclient import observation
from chatclient.errors import ToolExecutionError, UnknownToolError
from chatclient.messages import AssistantMessage, Message, ToolCall, ToolResponse, ToolResponseMessage
from chatclient.models.base import ChatResponse, ChatResponseMetadata, Generation, GenerationMetadata
from chatclient.prompt import Prompt
from chatclient.request import ChatClientRequest, ContextKeys
from chatclient.tools.callback import (
    ToolArgumentsError,
    ToolCallback,
    ToolResultConversionError,
    ToolTimeoutError,
    check_timeout,
)
from chatclient.tools.compensation import Compensator, log_failed_compensation, rolled_back_message
from chatclient.tools.context import ToolContext
from chatclient.tools.decorator import resolve_tools
from chatclient.tools.failures import (
    ToolErrorContext,
    ToolErrorHandler,
    check_handler,
    handler_text,
    message_for_model,
    unwrap,
    visible_error,
)
from chatclient.tools.results import MAX_TOOL_RESULT_MEDIA_BYTES, ToolExecution, ToolResult, check_media_size

RETURN_DIRECT = "return_direct"
"""Finish reason of a response built from return-direct tool results."""

DEFAULT_MAX_CONCURRENCY = 8


@dataclass(frozen=True, slots=True)
class ToolExecutionResult:
    """The conversation to send next (prompt messages + assistant tool calls + tool responses).

    ``return_direct`` is true when every tool of the turn is direct and none failed: the caller
    should answer with the tool results instead of asking the model again. ``executions`` holds one
    ``ToolExecution`` record (arguments, result, error flag, duration) per call, in the model's order.
    """

    conversation_history: tuple[Message, ...]
    return_direct: bool = False
    executions: tuple[ToolExecution, ...] = ()
    context_updates: Mapping[str, Any] = field(default_factory=dict)
    """What the turn's tools wrote with ``ToolContext.set`` (merged into the request context)."""
    answer_from: int | None = None
    """The call whose result alone is the direct answer: a ``return_direct_if_last`` tool called
    last finishes the turn with its own result. ``None``: every result answers (all tools direct)."""

    @property
    def assistant_message(self) -> AssistantMessage:
        """The model's message that asked for the tool calls."""
        message = self.conversation_history[-2]
        assert isinstance(message, AssistantMessage)
        return message

    @property
    def tool_response_message(self) -> ToolResponseMessage:
        """The tool responses, in the model's order."""
        message = self.conversation_history[-1]
        assert isinstance(message, ToolResponseMessage)
        return message

    def to_chat_response(self, source: ChatResponse | None = None) -> ChatResponse:
        """A response answering with the tool results: one generation per tool response.

        Each generation's text is the tool's result, its finish reason ``"return_direct"`` and its
        metadata ``tool_id``/``tool_name``. ``source``'s id and model are kept. When a
        ``return_direct_if_last`` tool finished the turn (``answer_from``), its result is the only
        generation: the calls before it were steps towards it.
        """
        responses = self.tool_response_message.responses
        if self.answer_from is not None and 0 <= self.answer_from < len(responses):
            responses = (responses[self.answer_from],)
        generations = tuple(
            Generation(
                AssistantMessage(r.response_data),
                GenerationMetadata(RETURN_DIRECT, {"tool_id": r.id, "tool_name": r.name}),
            )
            for r in responses
        )
        md = source.metadata if source is not None else ChatResponseMetadata()
        return ChatResponse(generations, md)


@dataclass(frozen=True, slots=True)
class _Plan:
    assistant: AssistantMessage
    calls: tuple[tuple[ToolCall, ToolCallback | None], ...]
    context: ToolContext
    available: tuple[str, ...]
    history: tuple[Message, ...]


class ToolCallingManager:
    """Executes a model turn's tool calls: validates arguments, runs the tools, collects responses.

    Calls of one turn run concurrently (threads for sync tools in ``execute``; ``asyncio.gather``
    in ``aexecute``), at most ``max_concurrency`` at once, and their responses keep the model's
    order. A tool failure or invalid arguments become an error response the model can react to,
    unless ``raise_on_tool_error``; an unknown tool name becomes an error response listing the
    available tools, unless ``raise_on_unknown_tool``. A result that cannot be converted to text is
    a bug in the tool and always raises ``ToolResultConversionError``.

    ``timeout`` (seconds, default ``None``: no limit) bounds every call of a tool that has no
    limit of its own (``@tool(timeout=...)`` wins). A call past its limit becomes an error tool
    response (``ToolTimeoutError`` with ``raise_on_tool_error``). Async tools are cancelled. A sync
    tool cannot be killed: a timed call runs in its own daemon thread, which keeps running after
    the timeout until the function returns (its result is discarded); being a daemon it never
    blocks interpreter exit, and being its own thread it never occupies a shared pool (neither the
    turn's workers nor asyncio's default executor), so hung tools cannot starve later calls.

    ``on_execution_error`` and ``on_arguments_error`` (``(error, ToolErrorContext) ->
    ToolErrorResult | str``, or raise) decide what the model reads when a tool raises or its
    arguments are invalid; they take precedence over ``raise_on_tool_error`` (see
    ``chatclient.tools.failures`` for the built-in policies). Without them an error derived from
    ``ToolErrorVisibleToModel`` reaches the model verbatim and any other as ``Error: <message>``.
    When a call of a turn fails, the undo functions of the turn's successful calls
    (``@tool(compensate=...)``) run, last call first, and those calls report that they were rolled back.
    """

    def __init__(
        self,
        raise_on_tool_error: bool = False,
        raise_on_unknown_tool: bool = False,
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
        *,
        timeout: float | None = None,
        max_media_bytes: int = MAX_TOOL_RESULT_MEDIA_BYTES,
        on_execution_error: ToolErrorHandler | None = None,
        on_arguments_error: ToolErrorHandler | None = None,
    ) -> None:
        if not isinstance(max_concurrency, int) or max_concurrency < 1:
            raise ValueError("max_concurrency must be an integer >= 1")
        if isinstance(max_media_bytes, bool) or not isinstance(max_media_bytes, int) or max_media_bytes < 0:
            raise ValueError("max_media_bytes must be an integer >= 0")
        self.max_media_bytes = max_media_bytes
        """The most inline media bytes one tool result may return (``ToolMediaTooLargeError`` past it)."""
        self.raise_on_tool_error = raise_on_tool_error
        self.raise_on_unknown_tool = raise_on_unknown_tool
        self.max_concurrency = max_concurrency
        self.timeout = check_timeout(timeout)
        self.on_execution_error = check_handler(on_execution_error, "on_execution_error")
        self.on_arguments_error = check_handler(on_arguments_error, "on_arguments_error")

    def __repr__(self) -> str:
        return (
            f"ToolCallingManager(raise_on_tool_error={self.raise_on_tool_error}, "
            f"raise_on_unknown_tool={self.raise_on_unknown_tool}, max_concurrency={self.max_concurrency}, "
            f"timeout={self.timeout})"
        )

    def timeout_for(self, callback: ToolCallback) -> float | None:
        """The time limit for one call of ``callback``: its own ``timeout`` if set, else the manager's."""
        own = check_timeout(getattr(callback, "timeout", None), f"timeout of tool {callback.definition.name!r}")
        return own if own is not None else self.timeout

    # -- planning ---------------------------------------------------------------------------------

    def _plan(self, prompt: Prompt, chat_response: ChatResponse, context: Any, tools: Iterable[Any] | None) -> _Plan:
        if prompt is None or chat_response is None:
            raise ValueError("prompt and chat_response are required")
        callbacks, values = _split_context(context)
        if tools is not None:
            callbacks = tuple(resolve_tools(tools))
        if callbacks is None:
            raise ValueError(
                "no tools to run: pass tools=[...], or the request context (ChatClientRequest.context) that holds them"
            )
        generation = next((g for g in chat_response.generations if g.output.tool_calls), None)
        if generation is None:
            raise ValueError("the chat response has no tool calls to execute (check has_tool_calls() first)")
        assistant = generation.output
        by_name = {cb.definition.name: cb for cb in callbacks}
        available = tuple(by_name)
        calls = tuple((c, by_name.get(c.name)) for c in assistant.tool_calls)
        if self.raise_on_unknown_tool:
            # Checked before anything runs, so no tool has side effects in a turn that fails.
            for call, cb in calls:
                if cb is None:
                    raise UnknownToolError(_unknown_message(call.name, available), call.name)
        history = (*prompt.messages, assistant)
        return _Plan(assistant, calls, ToolContext(values, history), available, history)

    def _finish(
        self, plan: _Plan, outcomes: Sequence[tuple[ToolResponse, float]], undone: frozenset[int] = frozenset()
    ) -> ToolExecutionResult:
        responses = tuple(r for r, _ in outcomes)
        direct = _immediate(plan.calls) and not any(r.is_error for r in responses)
        executions = tuple(
            ToolExecution(call.id, call.name, call.arguments, r.response_data, r.is_error, duration, i in undone)
            for i, ((call, _), (r, duration)) in enumerate(zip(plan.calls, outcomes, strict=True))
        )
        finishing = direct and bool(getattr(plan.calls[-1][1], "return_direct_if_last", False))
        return ToolExecutionResult(
            (*plan.history, ToolResponseMessage(responses)),
            direct,
            executions,
            dict(plan.context.updates),
            len(responses) - 1 if finishing else None,
        )

    def _on_error(self, call: ToolCall, exc: Exception, plan: _Plan) -> ToolResponse:
        if isinstance(exc, ToolResultConversionError):
            raise exc
        error = exc if isinstance(exc, ToolExecutionError) else _wrap(call.name, exc)
        if error is not exc:
            error.__cause__ = exc
        arguments = isinstance(error, ToolArgumentsError)
        handler = self.on_arguments_error if arguments else self.on_execution_error
        if handler is not None:
            context = ToolErrorContext(
                call.name, call.id, call.arguments, plan.context, error, "arguments" if arguments else "execution"
            )
            text = handler_text(handler, error if arguments else unwrap(error), context)
            return ToolResponse(call.id, call.name, text, is_error=True)
        if self.raise_on_tool_error:
            raise error
        visible = visible_error(error)
        text = message_for_model(visible) if visible is not None else f"Error: {error}"
        return ToolResponse(call.id, call.name, text, is_error=True)

    # -- compensation -----------------------------------------------------------------------------

    def _undo_plan(
        self, plan: _Plan, outcomes: Sequence[_Outcome]
    ) -> tuple[str, list[tuple[int, Compensator, ToolCallback, ToolExecution]]] | None:
        """The failed tool's name and the successful calls to undo, last call first (None: nothing to undo).

        An outcome that is an exception is a call whose failure fails the request (a raising policy)."""
        # A call a person denied did not fail: it never ran, and the approved calls stand.
        failed = next(
            (
                call.name
                for (call, _), outcome in zip(plan.calls, outcomes, strict=True)
                if isinstance(outcome, BaseException) or (outcome[0].is_error and _denial(call) is None)
            ),
            None,
        )
        if failed is None:
            return None
        todo = []
        for i, ((call, cb), outcome) in enumerate(zip(plan.calls, outcomes, strict=True)):
            if isinstance(outcome, BaseException):
                continue
            response, duration = outcome
            compensator = getattr(cb, "compensator", None)
            if cb is not None and isinstance(compensator, Compensator) and not response.is_error:
                record = ToolExecution(call.id, call.name, call.arguments, response.response_data, False, duration)
                todo.append((i, compensator, cb, record))
        return (failed, todo[::-1]) if todo else None

    def _binder(
        self, cb: ToolCallback, call: ToolCall, plan: _Plan
    ) -> Callable[[], tuple[tuple[Any, ...], dict[str, Any]]]:
        bind = getattr(cb, "bind_arguments", None)
        if bind is None:
            raise TypeError(f"tool {call.name!r} has an undo function but cannot bind its arguments")
        return lambda: bind(call.arguments, plan.context)  # type: ignore[no-any-return]

    @staticmethod
    def _undone(outcomes: list[_Outcome], i: int, call: ToolCall, failed: str) -> None:
        done = outcomes[i]  # always a successful call's (response, duration)
        duration = done[1] if isinstance(done, tuple) else 0.0
        outcomes[i] = (
            ToolResponse(call.id, call.name, rolled_back_message(call.name, failed), is_error=True),
            duration,
        )

    def _compensate(
        self, plan: _Plan, outcomes: list[_Outcome]
    ) -> tuple[list[tuple[ToolResponse, float]], frozenset[int]]:
        todo = self._undo_plan(plan, outcomes)
        if todo is None:
            return _raise_first(outcomes), frozenset()
        failed, calls = todo
        for i, compensator, cb, record in calls:
            try:
                compensator.run(self._binder(cb, plan.calls[i][0], plan), record)
            except Exception as exc:  # best effort: one failing undo must not stop the others
                log_failed_compensation(record.name, exc)
            self._undone(outcomes, i, plan.calls[i][0], failed)
        return _raise_first(outcomes), frozenset(i for i, *_ in calls)

    async def _acompensate(
        self, plan: _Plan, outcomes: list[_Outcome]
    ) -> tuple[list[tuple[ToolResponse, float]], frozenset[int]]:
        todo = self._undo_plan(plan, outcomes)
        if todo is None:
            return _raise_first(outcomes), frozenset()
        failed, calls = todo
        for i, compensator, cb, record in calls:
            try:
                await compensator.arun(self._binder(cb, plan.calls[i][0], plan), record)
            except Exception as exc:
                log_failed_compensation(record.name, exc)
            self._undone(outcomes, i, plan.calls[i][0], failed)
        return _raise_first(outcomes), frozenset(i for i, *_ in calls)

    # -- sync -------------------------------------------------------------------------------------

    def _run(self, call: ToolCall, cb: ToolCallback | None, plan: _Plan) -> tuple[ToolResponse, float]:
        start = time.perf_counter()
        if observation._observer is None:
            return self._run_tool(call, cb, plan), time.perf_counter() - start
        obs = observation._observer.start_tool(call.name, call.id, call.arguments)
        try:
            response = self._run_tool(call, cb, plan)
        except BaseException as exc:
            obs.finish(error=exc)
            raise
        obs.finish(response)
        return response, time.perf_counter() - start

    def _run_tool(self, call: ToolCall, cb: ToolCallback | None, plan: _Plan) -> ToolResponse:
        if cb is None:
            return ToolResponse(call.id, call.name, _unknown_message(call.name, plan.available), is_error=True)
        if call.metadata.get("partial"):
            return self._on_error(call, _cut_off(call), plan)
        denied = _denial(call)
        if denied is not None:
            return denied
        try:
            data = self._invoke(call, cb, plan)
        except Exception as exc:
            return self._on_error(call, exc, plan)
        return _response(call, cb, data, self.max_media_bytes)

    def _invoke(self, call: ToolCall, cb: ToolCallback, plan: _Plan) -> Any:
        limit = self.timeout_for(cb)
        if limit is None:
            return cb.call(call.arguments, plan.context)
        work: Callable[[], Any]
        if _native_async(cb):
            # An async tool gets its own loop in the worker and is cancelled there at the limit.
            def work() -> Any:
                return asyncio.run(_bounded(cb.acall(call.arguments, plan.context), limit, call.name))
        else:

            def work() -> Any:
                return cb.call(call.arguments, plan.context)

        future = _start_daemon(work, call.name)
        done, _ = concurrent.futures.wait((future,), timeout=limit)
        if not done:
            raise _timed_out(call.name, limit)
        return future.result()

    def execute(
        self,
        prompt: Prompt,
        chat_response: ChatResponse,
        context: ChatClientRequest | Mapping[str, Any] | ToolContext | None = None,
        *,
        tools: Iterable[Any] | None = None,
    ) -> ToolExecutionResult:
        """Run the tool calls of ``chat_response`` (its first generation with calls).

        ``context`` is the request context (holding the callbacks and tool context the client put
        there), a ``ChatClientRequest``, or a plain mapping / ``ToolContext`` of tool-context values
        when ``tools`` gives the tools (``@tool`` functions, objects, callbacks).
        """
        plan = self._plan(prompt, chat_response, context, tools)
        if len(plan.calls) == 1:
            call, cb = plan.calls[0]
            return self._finish(plan, [self._run(call, cb, plan)])  # a lone call has nothing to undo
        # Workers wait for a timed tool at most its limit (the tool itself runs in a daemon thread),
        # so leaving this block never waits for a hung tool.
        workers = min(self.max_concurrency, len(plan.calls))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="chatclient-tool") as pool:
            # Each tool runs in a copy of the caller's context vars (request ids, tracing spans...).
            futures = [
                pool.submit(contextvars.copy_context().run, self._run, call, cb, plan) for call, cb in plan.calls
            ]
            outcomes = [_outcome(f) for f in futures]
        # A call whose failure fails the request raises from here, after the turn's successful
        # calls are undone (they took effect even though the request fails).
        return self._finish(plan, *self._compensate(plan, outcomes))

    # -- async ------------------------------------------------------------------------------------

    async def _arun(
        self, call: ToolCall, cb: ToolCallback | None, plan: _Plan, gate: asyncio.Semaphore
    ) -> tuple[ToolResponse, float]:
        start = time.perf_counter()
        if observation._observer is None:
            return await self._arun_tool(call, cb, plan, gate), time.perf_counter() - start
        obs = observation._observer.start_tool(call.name, call.id, call.arguments)
        try:
            response = await self._arun_tool(call, cb, plan, gate)
        except BaseException as exc:
            obs.finish(error=exc)
            raise
        obs.finish(response)
        return response, time.perf_counter() - start

    async def _arun_tool(
        self, call: ToolCall, cb: ToolCallback | None, plan: _Plan, gate: asyncio.Semaphore
    ) -> ToolResponse:
        if cb is None:
            return ToolResponse(call.id, call.name, _unknown_message(call.name, plan.available), is_error=True)
        if call.metadata.get("partial"):
            return self._on_error(call, _cut_off(call), plan)
        denied = _denial(call)
        if denied is not None:
            return denied
        async with gate:
            try:
                data = await self._ainvoke(call, cb, plan)
            except Exception as exc:
                return self._on_error(call, exc, plan)
        return _response(call, cb, data, self.max_media_bytes)

    async def _ainvoke(self, call: ToolCall, cb: ToolCallback, plan: _Plan) -> Any:
        limit = self.timeout_for(cb)
        acall = getattr(cb, "acall", None)
        if limit is None:
            if acall is not None:
                return await acall(call.arguments, plan.context)
            return await asyncio.to_thread(cb.call, call.arguments, plan.context)
        if acall is not None and _native_async(cb):
            return await _bounded(acall(call.arguments, plan.context), limit, call.name)
        # A sync tool gets a daemon thread rather than asyncio's default executor: if it hangs, it
        # must not hold one of that small pool's workers (other awaits on to_thread need them).
        future = _start_daemon(lambda: cb.call(call.arguments, plan.context), call.name)
        return await _bounded(asyncio.wrap_future(future), limit, call.name)

    async def aexecute(
        self,
        prompt: Prompt,
        chat_response: ChatResponse,
        context: ChatClientRequest | Mapping[str, Any] | ToolContext | None = None,
        *,
        tools: Iterable[Any] | None = None,
    ) -> ToolExecutionResult:
        """Async twin of ``execute``: the turn's calls run together with ``asyncio.gather``."""
        plan = self._plan(prompt, chat_response, context, tools)
        gate = asyncio.Semaphore(self.max_concurrency)
        outcomes = await asyncio.gather(
            *(self._arun(c, cb, plan, gate) for c, cb in plan.calls), return_exceptions=True
        )
        for outcome in outcomes:
            if isinstance(outcome, BaseException) and not isinstance(outcome, Exception):
                raise outcome  # a cancellation or an exit: no undo, the turn was stopped
        # A call whose failure fails the request raises from here (the first in the model's order),
        # after every call finished and the turn's successful calls are undone.
        return self._finish(plan, *await self._acompensate(plan, list(outcomes)))


_Outcome: TypeAlias = "tuple[ToolResponse, float] | BaseException"
"""One call's response and duration, or the exception that fails the request."""


def _outcome(future: concurrent.futures.Future[tuple[ToolResponse, float]]) -> _Outcome:
    """A worker's outcome; an ``Exception`` is kept (to undo the other calls first), anything else raised."""
    try:
        return future.result()
    except Exception as exc:
        return exc


def _raise_first(outcomes: list[_Outcome]) -> list[tuple[ToolResponse, float]]:
    """``outcomes`` when none is an exception; else the first exception (in the model's order) is raised."""
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome
    return outcomes  # type: ignore[return-value]


def _denial(call: ToolCall) -> ToolResponse | None:
    """The response for a call a person denied (``ToolApprovalAdvisor`` marks it); the tool never runs."""
    approval = call.metadata.get("approval")
    if not isinstance(approval, Mapping) or approval.get("decision") != "deny":
        return None
    message = str(approval.get("message") or "a person denied this tool call")[:2000]
    return ToolResponse(call.id, call.name, f"Denied: {message}", is_error=True)


def _immediate(calls: Sequence[tuple[ToolCall, ToolCallback | None]]) -> bool:
    """Whether a turn's results answer directly: every tool is direct (``return_direct`` or
    ``return_direct_if_last``), or the last call's tool is ``return_direct_if_last`` (LangChain4j's
    IMMEDIATE / IMMEDIATE_IF_LAST rule; errors are checked by the caller)."""
    if not calls or any(cb is None for _, cb in calls):
        return False
    if_last = [bool(getattr(cb, "return_direct_if_last", False)) for _, cb in calls]
    if if_last[-1]:
        return True
    return all(cb is not None and (cb.return_direct or il) for (_, cb), il in zip(calls, if_last, strict=True))


def _native_async(cb: ToolCallback) -> bool:
    """Whether ``cb.acall`` is a real coroutine (cancellable), not ``call`` pushed to a thread."""
    flag = getattr(cb, "is_async", None)
    if isinstance(flag, bool):
        return flag
    acall = getattr(type(cb), "acall", None)
    return acall is not None and acall is not ToolCallback.acall


def _start_daemon(work: Callable[[], Any], name: str) -> concurrent.futures.Future[Any]:
    """Run ``work`` in a new daemon thread (in a copy of the caller's context vars); its future."""
    future: concurrent.futures.Future[Any] = concurrent.futures.Future()
    context = contextvars.copy_context()

    def target() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            result = context.run(work)
        except BaseException as exc:  # handed to the waiting caller, who re-raises it
            future.set_exception(exc)
        else:
            future.set_result(result)

    # Daemon: a tool that never returns must not keep the interpreter alive at exit.
    threading.Thread(target=target, name=f"chatclient-tool-{name}", daemon=True).start()
    return future


async def _bounded(awaitable: Any, limit: float, name: str) -> Any:
    """Await ``awaitable`` for at most ``limit`` seconds; past it, cancel it and raise ``ToolTimeoutError``."""
    scope = asyncio.timeout(limit)
    try:
        async with scope:
            return await awaitable
    except TimeoutError:
        if scope.expired():
            raise _timed_out(name, limit) from None
        raise  # the tool's own TimeoutError, not our limit


def _timed_out(name: str, limit: float) -> ToolTimeoutError:
    return ToolTimeoutError(
        f"tool {name!r} did not finish within its timeout of {limit:g} s and was abandoned; make the tool "
        "faster or raise the limit with @tool(timeout=...) or ToolCallingManager(timeout=...)",
        name,
        limit,
    )


def _split_context(context: Any) -> tuple[tuple[ToolCallback, ...] | None, Mapping[str, Any]]:
    if context is None:
        return None, {}
    if isinstance(context, ChatClientRequest):
        context = context.context
    if isinstance(context, ToolContext):
        return None, context.context
    if not isinstance(context, Mapping):
        raise TypeError(f"context must be a request context mapping or a ToolContext, not {type(context).__name__}")
    if ContextKeys.TOOL_CALLBACKS in context or ContextKeys.TOOL_CONTEXT in context:
        callbacks = context.get(ContextKeys.TOOL_CALLBACKS)
        return (tuple(callbacks) if callbacks is not None else None), dict(context.get(ContextKeys.TOOL_CONTEXT) or {})
    return None, context


def _unknown_message(name: str, available: Sequence[str]) -> str:
    listed = ", ".join(available) if available else "(none)"
    return f"Error: there is no tool named {name!r}. Available tools: {listed}."


def _cut_off(call: ToolCall) -> ToolExecutionError:
    # Providers flag a call whose arguments were cut off by max_tokens ("partial"); running the
    # tool on half its arguments would act on input the model never finished writing.
    return ToolExecutionError(
        f"tool {call.name!r} was not run: the model's call was cut off by max_tokens before its arguments "
        "were complete; raise max_tokens or ask for a shorter call",
        call.name,
    )


def _wrap(name: str, exc: Exception) -> ToolExecutionError:
    return ToolExecutionError(f"tool {name!r} failed: {type(exc).__name__}: {str(exc) or '(no message)'}", name)


def _response(call: ToolCall, cb: ToolCallback, data: Any, limit: int) -> ToolResponse:
    """The response for what a tool's ``call`` returned: text, or a ``ToolResult`` with media (capped)."""
    if isinstance(data, ToolResult):
        check_media_size(cb.definition.name, data.media, limit)
        return ToolResponse(call.id, call.name, data.text, media=data.media)
    return ToolResponse(call.id, call.name, _text(cb, data))


def _text(cb: ToolCallback, data: Any) -> str:
    if not isinstance(data, str):
        name = cb.definition.name
        raise ToolResultConversionError(f"tool {name!r}: call() returned {type(data).__name__}, not str", name)
    return data
