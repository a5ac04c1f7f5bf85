"""``ai_sdk_app``: a ChatClient or an agent behind the Vercel AI SDK's UI message stream (protocol v1).

``POST /`` of ``{id, messages}`` — what ``useChat`` / ``DefaultChatTransport`` send: UI messages made
of parts — is answered with Server-Sent Events of UI message chunks and the header
``x-vercel-ai-ui-message-stream: v1``, so the AI SDK's own reader assembles the answer unchanged.
This module only translates: the messages into a ``ChatTurn``, the turn's events
(``chatclient.events``) into chunks; the edge (``_edge``) does the rest (auth, Host/Origin, body
cap, cancellation, error mapping).

The chunks of one answer::

    start                                   messageId
    start-step / finish-step                around each model turn (a tool loop has several)
    reasoning-start / -delta / -end         the model's readable reasoning
    text-start / text-delta / text-end      the answer
    tool-input-start / -delta / -available  a call of one of the target's tools ...
    tool-output-available (or -error)       ... and its result: the tools run on the server
                                            (providerExecuted: a hosted tool the provider ran)
    source-document / source-url            documents a retrieval advisor found, cited URLs
    data-advisor (transient)                an advisor's own event: name and message
    finish                                  finishReason
    error                                   instead of finish when the answer failed
    data: [DONE]
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from chatclient.asgi_guard import AuthHook
from chatclient.events import (
    AdvisorEvent,
    DocumentsRetrieved,
    Finished,
    HostedToolUsed,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
)
from chatclient.serving._edge import (
    DEFAULT_MAX_BODY_BYTES,
    ChatTurn,
    Edge,
    EdgeError,
    RunSuspended,
    ScopeSnapshot,
    ServingApp,
    check_target,
    error_for,
    error_response,
    has_memory,
    resolve_target,
)
from chatclient.serving._history import answer_text, checked_id, conversation, jsonable

STREAM_HEADER = "x-vercel-ai-ui-message-stream"
"""The response header that tells the AI SDK's transport it reads a UI message stream (value ``v1``)."""
_FIELD_CHARS = 500  # titles and file names of source parts are cut to this length
_SKIPPED_PARTS = ("step-start", "reasoning", "source-url", "source-document")


def ai_sdk_app(
    target: Any,
    *,
    auth: AuthHook | None = None,
    allowed_hosts: Sequence[str] | None = None,
    allowed_origins: Sequence[str] | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    max_duration: float | None = None,
    conversation_namespace: Callable[[Any], str] | None = None,
) -> ServingApp:
    """An ASGI app answering the Vercel AI SDK UI message stream (v1) for ``target`` at ``POST /``.

    ``target``: a ``ChatClient``, an agent, or a mapping name -> either (``POST /{name}`` picks
    one; ``POST /`` a single target). The options are ``openai_app``'s: ``auth(request) ->
    principal | None`` (401 on ``None``; the principal reaches advisors as
    ``ContextKeys.PRINCIPAL``), ``allowed_hosts`` / ``allowed_origins``, ``max_body_bytes`` (413),
    ``max_duration`` (seconds), ``conversation_namespace(principal) -> str`` (the user a principal
    names, when it is not a ``str`` or has no ``id``: conversations are bound to it).

    The body's ``id`` (the chat id) is the memory conversation id: with a memory advisor on the
    target only the newest user message is sent. The target's tools run on the server and show as
    tool parts; documents a retrieval advisor found arrive as ``source-document`` (or
    ``source-url`` when a document's metadata has a ``url``) parts. Errors before the stream are
    the HTTP status with an ``error`` chunk as the body; after it began, an ``error`` chunk.

        // the browser, with the AI SDK
        const chat = useChat({ transport: new DefaultChatTransport({ api: "/chat" }) });
    """
    from starlette.routing import Route

    targets = check_target(target)
    edge = Edge(
        auth=auth,
        allowed_hosts=allowed_hosts,
        allowed_origins=allowed_origins,
        max_body_bytes=max_body_bytes,
        max_duration=max_duration,
        surface="the AI SDK endpoint",
        conversation_namespace=conversation_namespace,
    )

    async def chat(request: Any) -> Any:
        try:
            body = await edge.read_json(request)
            chosen = resolve_target(targets, request.path_params.get("name"))
            turn = _turn(body, chosen)
            events = edge.start_events(chosen, turn, principal=edge.principal(request))
            events = await edge.first_event(request, events)  # a refusal before it is a 429, not a 200
        except Exception as exc:  # EdgeError, or anything else setting the turn up (a 500 in our shape)
            return _error_response(error_for(exc))
        return edge.event_stream(_frames(events), headers={STREAM_HEADER: "v1"})

    routes = [Route("/", chat, methods=["POST"]), Route("/{name:path}", chat, methods=["POST"])]
    return edge.app(routes, render=_error_response)


# -- errors ------------------------------------------------------------------------------------


def _error_response(error: EdgeError) -> Any:
    """An error before the stream began: the HTTP status, with an ``error`` chunk as the body."""
    return error_response(error, {"type": "error", "errorText": error.message})


# -- the request -------------------------------------------------------------------------------


def _bad(message: str) -> EdgeError:
    return EdgeError(400, message, code="invalid_messages")


def _turn(body: Any, target: Any) -> ChatTurn:
    """The ``ChatTurn`` of ``{id, messages}``."""
    if not isinstance(body, dict):
        raise EdgeError(400, "The request body must be a JSON object {id, messages}.", code="invalid_request")
    chat_id = checked_id(body.get("id"), "id")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _bad("'messages' must be a non-empty list of UI messages.")
    raw: list[dict[str, Any]] = []
    for message in messages:
        raw.extend(_openai_messages(message))
    if not raw:
        raise _bad("'messages' has nothing to answer.")
    inputs = body.get("inputs")  # an agent's inputs by name (useChat's `body` option), when it reads several
    agent_inputs = dict(inputs) if isinstance(inputs, dict) else None
    return ChatTurn(conversation(raw, memory=has_memory(target)), conversation_id=chat_id, agent_inputs=agent_inputs)


def _text_parts(parts: list[Any]) -> str:
    return "".join(p["text"] for p in parts if isinstance(p, dict) and p.get("type") == "text" and _is_str(p, "text"))


def _is_str(part: dict[str, Any], key: str) -> bool:
    return isinstance(part.get(key), str)


def _openai_messages(message: Any) -> list[dict[str, Any]]:
    """One UI message as OpenAI-shaped messages (an assistant turn with tools becomes several)."""
    if not isinstance(message, dict) or message.get("role") not in ("system", "user", "assistant"):
        raise _bad("Each UI message needs a role among system, user, assistant.")
    parts = message.get("parts")
    if not isinstance(parts, list):
        raise _bad("Each UI message needs a list of parts.")
    role = message["role"]
    if role == "system":
        return [{"role": "system", "content": _text_parts(parts)}]
    if role == "user":
        return [{"role": "user", "content": _user_content(parts)}]
    return _assistant_messages(parts)


def _user_content(parts: list[Any]) -> list[dict[str, Any]]:
    content: list[dict[str, Any]] = []
    for part in parts:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text" and _is_str(part, "text"):
            content.append({"type": "text", "text": part["text"]})
        elif kind == "file" and _is_str(part, "url") and str(part.get("mediaType", "")).startswith("image/"):
            content.append({"type": "image_url", "image_url": {"url": part["url"], "media_type": part["mediaType"]}})
        elif kind == "file":
            raise _bad("Only image files are accepted in a user message.")
        elif not (isinstance(kind, str) and (kind in _SKIPPED_PARTS or kind.startswith("data-"))):
            raise _bad(f"Unsupported part in a user message: {str(kind)[:40]!r}.")
    return content


def _tool_name(part: dict[str, Any]) -> str | None:
    kind = part["type"]
    if kind == "dynamic-tool":
        name = part.get("toolName")
        return name if isinstance(name, str) else None
    return kind[len("tool-") :] if kind.startswith("tool-") else None


def _assistant_messages(parts: list[Any]) -> list[dict[str, Any]]:
    """An assistant UI message: its text, and its finished tool calls as calls plus their results."""
    out: list[dict[str, Any]] = []
    text: list[str] = []
    calls: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []

    def flush() -> None:
        if text or calls:
            out.append({"role": "assistant", "content": "".join(text) or None, "tool_calls": list(calls)})
            out.extend(results)
        text.clear()
        calls.clear()
        results.clear()

    for part in parts:
        kind = part.get("type") if isinstance(part, dict) else None
        if not isinstance(kind, str):
            raise _bad("Each part needs a type.")
        if kind == "text" and _is_str(part, "text"):
            if calls:
                flush()  # text after a tool call belongs to the next model turn
            text.append(part["text"])
        elif kind == "dynamic-tool" or kind.startswith("tool-"):
            name, call_id, state = _tool_name(part), part.get("toolCallId"), part.get("state")
            if not isinstance(name, str) or not isinstance(call_id, str):
                raise _bad("A tool part needs a toolCallId and a tool name.")
            if state not in ("output-available", "output-error"):
                continue  # a call without a result is not history yet
            arguments = json.dumps(part.get("input"), ensure_ascii=False)
            calls.append({"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}})
            output = part.get("output") if state == "output-available" else part.get("errorText", "")
            results.append({"role": "tool", "tool_call_id": call_id, "content": answer_text(output)})
    flush()
    return out


# -- the stream --------------------------------------------------------------------------------


def _chunk(data: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode() + b"\n\n"


def _parsed(text: str) -> Any:
    """Tool arguments or output as JSON when they are JSON, else the text itself."""
    from chatclient import jsonsafe

    try:
        return jsonsafe.loads(text)
    except ValueError:
        return text


def _cut(text: str) -> str:
    return text if len(text) <= _FIELD_CHARS else text[: _FIELD_CHARS - 1] + "…"


class _Translation:
    """Turns one answer's ``chatclient.events`` into UI message chunks, keeping the open parts in order."""

    def __init__(self) -> None:
        self.text_id: str | None = None
        self.delta_head = b""  # the bytes every text-delta chunk of the open text part starts with
        self.reasoning_id: str | None = None
        self.after_tool = False  # a tool result was sent: the next output starts a new step
        self.streamed_text = False
        self.root_output: Any = None
        self.suspended: str | None = None
        self.sources: set[str] = set()
        self.finished: Finished | None = None
        self.counter = 0

    def _id(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}-{self.counter}"

    def close(self) -> list[dict[str, Any]]:
        out = []
        if self.reasoning_id is not None:
            out.append({"type": "reasoning-end", "id": self.reasoning_id})
            self.reasoning_id = None
        if self.text_id is not None:
            out.append({"type": "text-end", "id": self.text_id})
            self.text_id = None
        return out

    def _next_step(self) -> list[dict[str, Any]]:
        if not self.after_tool:
            return []
        self.after_tool = False
        return [*self.close(), {"type": "finish-step"}, {"type": "start-step"}]

    def text(self, delta: str) -> list[dict[str, Any]]:
        if not delta:
            return []
        out = self._next_step()
        if self.reasoning_id is not None:
            out += self.close()
        if self.text_id is None:
            self.text_id = self._id("text")
            self.delta_head = b'data: {"type":"text-delta","id":' + json.dumps(self.text_id).encode() + b',"delta":'
            out.append({"type": "text-start", "id": self.text_id})
        self.streamed_text = True
        out.append({"type": "text-delta", "id": self.text_id, "delta": delta})
        return out

    def reasoning(self, delta: str) -> list[dict[str, Any]]:
        if not delta:
            return []
        out = self._next_step()
        if self.text_id is not None:
            out += self.close()
        if self.reasoning_id is None:
            self.reasoning_id = self._id("reasoning")
            out.append({"type": "reasoning-start", "id": self.reasoning_id})
        out.append({"type": "reasoning-delta", "id": self.reasoning_id, "delta": delta})
        return out

    def tool_call(self, event: ToolCallStarted) -> list[dict[str, Any]]:
        out = [*self._next_step(), *self.close()]
        out.append({"type": "tool-input-start", "toolCallId": event.id, "toolName": event.name})
        if event.arguments:
            out.append({"type": "tool-input-delta", "toolCallId": event.id, "inputTextDelta": event.arguments})
        out.append(
            {
                "type": "tool-input-available",
                "toolCallId": event.id,
                "toolName": event.name,
                "input": _parsed(event.arguments) if event.arguments else {},
            }
        )
        return out

    def tool_result(self, event: ToolCallFinished) -> list[dict[str, Any]]:
        self.after_tool = True
        if event.is_error:
            return [{"type": "tool-output-error", "toolCallId": event.id, "errorText": event.result}]
        return [{"type": "tool-output-available", "toolCallId": event.id, "output": _parsed(event.result)}]

    def hosted_tool(self, event: HostedToolUsed) -> list[dict[str, Any]]:
        """A tool the provider ran (web search, code execution): input and output at once, provider-executed."""
        call = event.call
        common = {"toolCallId": call.id, "providerExecuted": True}
        return [
            *self._next_step(),
            *self.close(),
            {"type": "tool-input-available", **common, "toolName": call.name, "input": jsonable(dict(call.input))},
            {"type": "tool-output-available", **common, "output": jsonable(dict(call.output))},
        ]

    def documents(self, event: DocumentsRetrieved) -> list[dict[str, Any]]:
        out = []
        for document in event.documents:
            if document.id in self.sources:
                continue
            self.sources.add(document.id)
            metadata = document.metadata
            url = metadata.get("url")
            title = metadata.get("title") or metadata.get("source") or document.id
            if isinstance(url, str) and url.startswith(("http://", "https://")):
                out.append({"type": "source-url", "sourceId": document.id, "url": url, "title": _cut(str(title))})
                continue
            part = {
                "type": "source-document",
                "sourceId": document.id,
                "mediaType": str(metadata.get("media_type") or "text/plain"),
                "title": _cut(str(title)),
            }
            filename = metadata.get("filename") or metadata.get("file_name")
            if isinstance(filename, str):
                part["filename"] = _cut(filename)
            out.append(part)
        return out

    def citations(self) -> list[dict[str, Any]]:
        response = self.finished.response if self.finished is not None else None
        result = response.result if response is not None else None
        out = []
        for citation in result.output.citations if result is not None else ():
            if citation.url in self.sources:
                continue
            self.sources.add(citation.url)
            part = {"type": "source-url", "sourceId": citation.url, "url": citation.url}
            if citation.title:
                part["title"] = _cut(citation.title)
            out.append(part)
        return out

    def see(self, event: StreamEvent) -> list[dict[str, Any]]:
        if isinstance(event, TextDelta):
            return self.text(event.text)
        if isinstance(event, ReasoningDelta):
            return self.reasoning(event.text)
        if isinstance(event, ToolCallStarted):
            return self.tool_call(event)
        if isinstance(event, ToolCallFinished):
            return self.tool_result(event)
        if isinstance(event, HostedToolUsed):
            return self.hosted_tool(event)
        if isinstance(event, DocumentsRetrieved):
            return self.documents(event)
        if isinstance(event, AdvisorEvent):
            # Transient: the page's onData callback sees it (a status line), the message keeps no part.
            data = {"name": event.name, "message": _cut(event.message)}
            return [{"type": "data-advisor", "data": data, "transient": True}]
        if isinstance(event, Finished):
            self.finished = event
        elif isinstance(event, RunSuspended):
            self.suspended = event.question
        elif event.kind == "agent_finished":
            self.root_output = getattr(event, "output", None)  # the last to finish is the root agent
        elif isinstance(event, ScopeSnapshot) and not self.streamed_text:
            # An agent that streamed no text answers with its question (waiting) or its output.
            shown = self.suspended if self.suspended is not None else self.root_output
            if shown is not None:
                return self.text(answer_text(shown))
        return []

    def finish(self) -> list[dict[str, Any]]:
        reason = "stop"
        response = self.finished.response if self.finished is not None else None
        result = response.result if response is not None else None
        given = (result.metadata.finish_reason or "").lower() if result is not None else ""
        if given in ("length", "max_tokens"):
            reason = "length"
        elif given in ("content_filter", "safety", "refusal"):
            reason = "content-filter"
        return [*self.close(), *self.citations(), {"type": "finish-step"}, {"type": "finish", "finishReason": reason}]


async def _frames(events: AsyncIterator[StreamEvent]) -> AsyncIterator[bytes]:
    """The UI message chunks of one answer; a failure after ``start`` is an ``error`` chunk."""
    run = _Translation()
    yield _chunk({"type": "start", "messageId": f"msg-{uuid.uuid4().hex}"})
    yield _chunk({"type": "start-step"})
    try:
        async for event in events:
            if type(event) is TextDelta and event.text and run.text_id is not None and not run.after_tool:
                # The hot path of every answer: a delta of the open text part, from fixed pieces.
                yield run.delta_head + json.dumps(event.text, ensure_ascii=False).encode() + b"}\n\n"
                continue
            for chunk in run.see(event):
                yield _chunk(chunk)
        for chunk in run.finish():
            yield _chunk(chunk)
    except Exception as exc:  # after the first chunk, errors travel in the stream
        yield _chunk({"type": "error", "errorText": error_for(exc).message})
    yield b"data: [DONE]\n\n"


__all__ = ["ai_sdk_app"]
