"""``ag_ui_app``: a ChatClient or an agent behind the AG-UI protocol (CopilotKit and other AG-UI front ends).

``POST /`` of a ``RunAgentInput`` is answered with a Server-Sent Events stream of AG-UI events. The
event types and their encoding are the ``ag-ui-protocol`` package's own (``ag_ui.core``,
``ag_ui.encoder.EventEncoder``): this module only translates — the input into a ``ChatTurn``, the
turn's events (``chatclient.events``) into AG-UI events. The edge (``_edge``) does the rest (auth,
Host/Origin, body cap, cancellation, error mapping).

What a run looks like on the wire::

    RUN_STARTED
    STEP_STARTED / STEP_FINISHED            one pair per agent (agent targets)
    TEXT_MESSAGE_START / _CONTENT / _END    the answer; a new message after each tool call
    REASONING_*                             the model's readable reasoning
    TOOL_CALL_START / _ARGS / _END          a call of a tool ...
    TOOL_CALL_RESULT                        ... the target's own tools run here and answer
    STATE_SNAPSHOT                          an agent's scope at the end
    RUN_FINISHED                            outcome success (pendingToolCallIds: the caller's tools to run)
                                            or interrupt (a human_input step waits)
    RUN_ERROR                               instead of RUN_FINISHED when the run failed
"""

from __future__ import annotations

import json
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from chatclient.asgi_guard import AuthHook
from chatclient.events import (
    Finished,
    HostedToolUsed,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    UsageUpdate,
)
from chatclient.serving._edge import (
    DEFAULT_MAX_BODY_BYTES,
    ChatTurn,
    Edge,
    EdgeError,
    RunSuspended,
    ScopeSnapshot,
    ServingApp,
    ToolCallsReturned,
    check_target,
    error_for,
    error_response,
    has_memory,
    resolve_target,
)
from chatclient.serving._history import answer_text, checked_id, conversation, jsonable

HUMAN_INPUT_REASON = "human_input"
"""The ``reason`` of the interrupt a waiting ``human_input`` step ends its run with."""
MAX_PENDING_INTERRUPTS = 10_000
"""Open interrupts remembered (by conversation) to check the resume entries that answer them."""


def _require_ag_ui() -> None:
    try:
        import ag_ui.core  # noqa: F401
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        raise ImportError("ag_ui_app needs the ag-ui-protocol package: pip install 'chatclient[serve]'") from exc


def ag_ui_app(
    target: Any,
    *,
    auth: AuthHook | None = None,
    allowed_hosts: Sequence[str] | None = None,
    allowed_origins: Sequence[str] | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    max_duration: float | None = None,
    conversation_namespace: Callable[[Any], str] | None = None,
) -> ServingApp:
    """An ASGI app answering the AG-UI protocol for ``target`` at ``POST /``.

    ``target``: a ``ChatClient``, an agent, or a mapping name -> either (``POST /{name}`` picks
    one; ``POST /`` a single target). The options are ``openai_app``'s: ``auth(request) ->
    principal | None`` (401 on ``None``; the principal reaches advisors as
    ``ContextKeys.PRINCIPAL``), ``allowed_hosts`` / ``allowed_origins``, ``max_body_bytes`` (413),
    ``max_duration`` (seconds), ``conversation_namespace(principal) -> str`` (the user a principal
    names, when it is not a ``str`` or has no ``id``: conversations are bound to it).

    The ``threadId`` is the memory conversation id (with a memory advisor only the newest user
    message is sent). ``tools`` in the input are the caller's: when the model calls one, the run
    ends with the call's ``TOOL_CALL_*`` events and ``RUN_FINISHED`` (``pendingToolCallIds``), and
    the next run's ``role: "tool"`` messages are the results. An agent's ``human_input`` step ends
    the run with an interrupt (``RUN_FINISHED`` outcome ``interrupt``); the next run of the thread
    resumes it, its answer taken from the ``resume`` entry's payload (or the newest user message).

        from fastapi import FastAPI
        api = FastAPI()
        api.mount("/agent", ag_ui_app(client))   # new HttpAgent({url: ".../agent/"})
    """
    _require_ag_ui()
    from starlette.routing import Route

    targets = check_target(target)
    edge = Edge(
        auth=auth,
        allowed_hosts=allowed_hosts,
        allowed_origins=allowed_origins,
        max_body_bytes=max_body_bytes,
        max_duration=max_duration,
        surface="the AG-UI endpoint",
        conversation_namespace=conversation_namespace,
    )
    # The id of each conversation's open interrupt. Keyed like memory and agent scopes
    # (Edge.conversation_key): with an auth hook, a thread id is bound to its user.
    interrupts: OrderedDict[str, str] = OrderedDict()

    async def run(request: Any) -> Any:
        from ag_ui.encoder import EventEncoder

        try:
            body = await edge.read_json(request)
            run_input = _parse(body)
            chosen = resolve_target(targets, request.path_params.get("name"))
            principal = edge.principal(request)
            key = edge.conversation_key(run_input.thread_id, principal)
            turn = _turn(run_input, chosen, interrupts, key, edge)
            events = edge.start_events(chosen, turn, principal=principal)
            events = await edge.first_event(request, events)  # a refusal before it is a 429, not a 200
        except Exception as exc:  # EdgeError, or a principal that names nobody (a 500)
            return _error_response(error_for(exc))
        encoder = EventEncoder(accept=request.headers.get("accept"))
        frames = _frames(events, _Translation(run_input.thread_id, run_input.run_id, interrupts, key), encoder)
        return edge.event_stream(frames, media_type=encoder.get_content_type())

    routes = [Route("/", run, methods=["POST"]), Route("/{name:path}", run, methods=["POST"])]
    return edge.app(routes, render=_error_response)


# -- errors ------------------------------------------------------------------------------------


def _error_event(error: EdgeError) -> Any:
    from ag_ui.core import RunErrorEvent

    return RunErrorEvent(message=error.message, code=error.code)


def _error_response(error: EdgeError) -> Any:
    """An error before the stream began: the HTTP status, with a ``RUN_ERROR`` event as the body."""
    return error_response(error, _error_event(error).model_dump(mode="json", by_alias=True))


# -- the input ---------------------------------------------------------------------------------


def _parse(body: Any) -> Any:
    """The body as a ``RunAgentInput`` (``EdgeError`` 400 naming the first problem)."""
    from ag_ui.core import RunAgentInput
    from pydantic import ValidationError

    if not isinstance(body, dict):
        raise EdgeError(400, "The request body must be a RunAgentInput JSON object.", code="invalid_request")
    try:
        run_input = RunAgentInput.model_validate(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))[:120]
        raise EdgeError(
            400,
            f"The body is not a valid RunAgentInput: {where}: {str(first.get('msg'))[:200]}.",
            code="invalid_request",
        ) from None
    checked_id(run_input.thread_id, "threadId")
    checked_id(run_input.run_id, "runId")
    return run_input


def _turn(run_input: Any, target: Any, interrupts: OrderedDict[str, str], key: str, edge: Edge) -> ChatTurn:
    """The ``ChatTurn`` of one run: resume answers first, then the conversation, tools and inputs."""
    from chatclient.messages import UserMessage
    from chatclient.prompt import ToolDefinition
    from chatclient.tools.names import check_tool_name

    thread = run_input.thread_id
    tools = []
    for tool in run_input.tools or ():
        try:
            name = check_tool_name(tool.name)
        except ValueError as exc:
            raise EdgeError(400, str(exc)[:200], code="invalid_tools") from None
        parameters = tool.parameters if isinstance(tool.parameters, dict) else {"type": "object", "properties": {}}
        tools.append(ToolDefinition(name, tool.description or "", parameters))
    forwarded = run_input.forwarded_props if isinstance(run_input.forwarded_props, dict) else {}
    inputs = forwarded.get("inputs")
    agent_inputs = dict(inputs) if isinstance(inputs, dict) else None

    resumed = _resume_answer(run_input, interrupts, key, edge)
    if resumed is not None:
        return ChatTurn((UserMessage(resumed),), conversation_id=thread, caller_tools=tuple(tools))
    raw = [m for m in (_openai_message(message) for message in run_input.messages) if m is not None]
    if not raw:
        raise EdgeError(400, "The run has no messages to answer.", code="invalid_messages")
    messages = conversation(raw, memory=has_memory(target))
    return ChatTurn(messages, conversation_id=thread, caller_tools=tuple(tools), agent_inputs=agent_inputs)


def _resume_answer(run_input: Any, interrupts: OrderedDict[str, str], key: str, edge: Edge) -> str | None:
    """The answer a run's ``resume`` entries give the thread's open interrupt (``None``: no resume).

    A ``cancelled`` entry drops the waiting run: the thread starts afresh with the run's messages.
    """
    entries = run_input.resume or ()
    if not entries:
        interrupts.pop(key, None)  # a plain run answers (or replaces) whatever waited
        return None
    expected = interrupts.get(key)
    entry = entries[0]
    if expected is None or len(entries) != 1 or entry.interrupt_id != expected:
        raise EdgeError(400, "The resume entry answers no open interrupt of this thread.", code="unknown_interrupt")
    del interrupts[key]
    if entry.status == "cancelled":
        edge.scope_store.delete(key)
        return None
    if entry.payload is None:
        raise EdgeError(400, "A resolved resume entry needs a payload: the answer.", code="invalid_resume")
    return answer_text(entry.payload)


def _image_url(source: Any) -> str:
    if source.type == "data":
        return f"data:{source.mime_type};base64,{source.value}"
    if source.type == "url":
        return str(source.value)
    raise EdgeError(400, "An image part must carry its data or a URL.", code="invalid_messages")


def _parts(content: Any) -> Any:
    """AG-UI content (a string or parts) as OpenAI content."""
    if isinstance(content, str):
        return content
    out: list[dict[str, Any]] = []
    for part in content:
        if part.type == "text":
            out.append({"type": "text", "text": part.text})
        elif part.type == "image":
            image = {"url": _image_url(part.source)}
            if part.source.type == "url" and part.source.mime_type:
                image["media_type"] = part.source.mime_type  # a URL without an extension still has a type
            out.append({"type": "image_url", "image_url": image})
        else:
            out.append({"type": part.type})  # refused, naming the part type
    return out


def _openai_message(message: Any) -> dict[str, Any] | None:
    """An AG-UI message in the OpenAI shape ``_history.conversation`` reads (activity and reasoning: none)."""
    role = message.role
    if role in ("system", "developer", "user"):
        return {"role": role, "content": _parts(message.content)}
    if role == "assistant":
        calls = [
            {"id": c.id, "type": "function", "function": {"name": c.function.name, "arguments": c.function.arguments}}
            for c in message.tool_calls or ()
        ]
        return {"role": "assistant", "content": message.content, "tool_calls": calls}
    if role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": _parts(message.content)}
    return None


# -- the events --------------------------------------------------------------------------------


class _Translation:
    """Turns one run's ``chatclient.events`` into AG-UI events, keeping the open message in order."""

    def __init__(self, thread_id: str, run_id: str, interrupts: OrderedDict[str, str], key: str) -> None:
        self.thread_id = thread_id
        self.run_id = run_id
        self.interrupts = interrupts
        self.key = key  # the conversation's key in ``interrupts``
        self.message_id: str | None = None  # the open text message
        self.reasoning_id: str | None = None  # the open reasoning message
        self.last_message_id: str | None = None  # the assistant message tool calls belong to
        self.streamed_text = False
        self.root_output: Any = None
        self.pending: list[str] = []
        self.suspended: RunSuspended | None = None
        self.finished: Finished | None = None
        self.usage: UsageUpdate | None = None

    # opening and closing the text and reasoning messages

    def text(self, delta: str) -> list[Any]:
        from ag_ui.core import TextMessageContentEvent, TextMessageStartEvent

        if not delta:
            return []
        out = self.close_reasoning()
        if self.message_id is None:
            self.message_id = self.last_message_id = f"msg-{uuid.uuid4().hex}"
            out.append(TextMessageStartEvent(message_id=self.message_id, role="assistant"))
        self.streamed_text = True
        out.append(TextMessageContentEvent(message_id=self.message_id, delta=delta))
        return out

    def close_text(self) -> list[Any]:
        from ag_ui.core import TextMessageEndEvent

        if self.message_id is None:
            return []
        done, self.message_id = self.message_id, None
        return [TextMessageEndEvent(message_id=done)]

    def reasoning(self, delta: str) -> list[Any]:
        from ag_ui.core import ReasoningMessageContentEvent, ReasoningMessageStartEvent, ReasoningStartEvent

        if not delta:
            return []
        out = self.close_text()
        if self.reasoning_id is None:
            self.reasoning_id = f"reasoning-{uuid.uuid4().hex}"
            out.append(ReasoningStartEvent(message_id=self.reasoning_id))
            out.append(ReasoningMessageStartEvent(message_id=self.reasoning_id, role="reasoning"))
        out.append(ReasoningMessageContentEvent(message_id=self.reasoning_id, delta=delta))
        return out

    def close_reasoning(self) -> list[Any]:
        from ag_ui.core import ReasoningEndEvent, ReasoningMessageEndEvent

        if self.reasoning_id is None:
            return []
        done, self.reasoning_id = self.reasoning_id, None
        return [ReasoningMessageEndEvent(message_id=done), ReasoningEndEvent(message_id=done)]

    def close(self) -> list[Any]:
        return self.close_reasoning() + self.close_text()

    def tool_call(self, call_id: str, name: str, arguments: str) -> list[Any]:
        from ag_ui.core import ToolCallArgsEvent, ToolCallEndEvent, ToolCallStartEvent

        out = self.close()
        out.append(
            ToolCallStartEvent(tool_call_id=call_id, tool_call_name=name, parent_message_id=self.last_message_id)
        )
        if arguments:
            out.append(ToolCallArgsEvent(tool_call_id=call_id, delta=arguments))
        out.append(ToolCallEndEvent(tool_call_id=call_id))
        return out

    # the translation

    def start(self) -> list[Any]:
        from ag_ui.core import RunStartedEvent

        return [RunStartedEvent(thread_id=self.thread_id, run_id=self.run_id)]

    def see(self, event: StreamEvent) -> list[Any]:
        from ag_ui.core import StateSnapshotEvent, StepFinishedEvent, StepStartedEvent, ToolCallResultEvent

        if isinstance(event, TextDelta):
            return self.text(event.text)
        if isinstance(event, ReasoningDelta):
            return self.reasoning(event.text)
        if isinstance(event, ToolCallStarted):
            return self.tool_call(event.id, event.name, event.arguments)
        if isinstance(event, ToolCallFinished):
            result_id = f"tool-{uuid.uuid4().hex}"
            return [ToolCallResultEvent(message_id=result_id, tool_call_id=event.id, content=event.result, role="tool")]
        if isinstance(event, HostedToolUsed):  # a tool the provider ran (web search, code execution)
            hosted = event.call
            content = json.dumps(jsonable(dict(hosted.output)), ensure_ascii=False)
            result = ToolCallResultEvent(message_id=f"tool-{uuid.uuid4().hex}", tool_call_id=hosted.id, content=content)
            return [*self.tool_call(hosted.id, hosted.name, json.dumps(jsonable(dict(hosted.input)))), result]
        if isinstance(event, ToolCallsReturned):
            out = [] if self.streamed_text or not event.text else self.text(event.text)
            for call in event.calls:
                out += self.tool_call(call.id, call.name, call.arguments)
                self.pending.append(call.id)
            return out
        if event.kind == "agent_started":
            return [*self.close(), StepStartedEvent(step_name=str(getattr(event, "name", "agent")))]
        if event.kind == "agent_finished":
            self.root_output = getattr(event, "output", None)  # the last to finish is the root agent
            return [*self.close(), StepFinishedEvent(step_name=str(getattr(event, "name", "agent")))]
        if isinstance(event, RunSuspended):
            self.suspended = event
            return self.close()
        if isinstance(event, ScopeSnapshot):
            out = self.close()
            if self.suspended is None and not self.streamed_text and self.root_output is not None:
                out += [*self.text(answer_text(self.root_output)), *self.close_text()]
            out.append(StateSnapshotEvent(snapshot=jsonable(dict(event.state))))
            return out
        if isinstance(event, Finished):
            self.finished = event
        elif isinstance(event, UsageUpdate):
            self.usage = event
        return []

    def finish(self) -> list[Any]:
        from ag_ui.core import (
            Interrupt,
            RunFinishedEvent,
            RunFinishedInterruptOutcome,
            RunFinishedSuccessOutcome,
        )

        out = self.close()
        outcome: Any
        if self.suspended is not None:
            interrupt_id = f"interrupt-{uuid.uuid4().hex}"
            self.interrupts[self.key] = interrupt_id
            self.interrupts.move_to_end(self.key)
            while len(self.interrupts) > MAX_PENDING_INTERRUPTS:
                self.interrupts.popitem(last=False)
            outcome = RunFinishedInterruptOutcome(
                interrupts=[Interrupt(id=interrupt_id, reason=HUMAN_INPUT_REASON, message=self.suspended.question)]
            )
        else:
            outcome = RunFinishedSuccessOutcome(pending_tool_call_ids=self.pending or None)
        out.append(RunFinishedEvent(thread_id=self.thread_id, run_id=self.run_id, outcome=outcome, usage=self._usage()))
        return out

    def _usage(self) -> list[Any] | None:
        from ag_ui.core import TokenUsage

        response = self.finished.response if self.finished is not None else None
        usage = response.metadata.usage if response is not None else None
        if (usage is None or usage.is_empty()) and self.usage is not None:
            usage = self.usage.usage
        if usage is None or usage.is_empty():
            return None
        prompt, completion = usage.prompt_tokens or 0, usage.completion_tokens or 0
        model = response.metadata.model if response is not None else None
        return [
            TokenUsage(model=model, input_tokens=prompt, output_tokens=completion, total_tokens=prompt + completion)
        ]


async def _frames(events: AsyncIterator[StreamEvent], run: _Translation, encoder: Any) -> AsyncIterator[bytes]:
    """The encoded AG-UI events of one run; a failure after ``RUN_STARTED`` is a ``RUN_ERROR`` in the stream."""
    for item in run.start():
        yield encoder.encode(item).encode()
    try:
        async for event in events:
            for item in run.see(event):
                yield encoder.encode(item).encode()
        for item in run.finish():
            yield encoder.encode(item).encode()
    except Exception as exc:  # after RUN_STARTED, errors travel in the stream
        yield encoder.encode(_error_event(error_for(exc))).encode()


__all__ = ["ag_ui_app"]
