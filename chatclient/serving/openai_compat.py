"""``openai_app``: a ChatClient or an agent behind the OpenAI Chat Completions wire.

``POST /v1/chat/completions`` (streamed as ``chat.completion.chunk`` Server-Sent Events ending with
``data: [DONE]``, or answered whole) and ``GET /v1/models``, so the ``openai`` SDKs, Open WebUI,
LibreChat and other agent frameworks talk to a chatclient pipeline unchanged. This module only
translates: the body into a ``ChatTurn``, the turn's events (``chatclient.events``) into chunks; the
edge (``_edge``) does the rest (auth, Host/Origin, body cap, cancellation, error mapping).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from typing import Any

from chatclient.asgi_guard import AuthHook
from chatclient.events import (
    Finished,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    UsageUpdate,
)
from chatclient.messages import (
    AssistantMessage,
    Media,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from chatclient.options import ChatOptions
from chatclient.prompt import ToolDefinition
from chatclient.serving._edge import (
    DEFAULT_MAX_BODY_BYTES,
    ChatTurn,
    Edge,
    EdgeError,
    JsonAnswer,
    RunSuspended,
    ServingApp,
    ToolCallsReturned,
    check_target,
    error_for,
    error_response,
    resolve_target,
    sse_frame,
)

CONVERSATION_HEADER = "x-conversation-id"
_MAX_CONVERSATION_ID = 256
_ROLES = ("system", "developer", "user", "assistant", "tool")


def openai_app(
    target: Any,
    *,
    auth: AuthHook | None = None,
    allowed_hosts: Sequence[str] | None = None,
    allowed_origins: Sequence[str] | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    max_duration: float | None = None,
    conversation_namespace: Callable[[Any], str] | None = None,
) -> ServingApp:
    """An ASGI app answering the OpenAI Chat Completions API for ``target``.

    ``target``: a ``ChatClient``, an agent, or a mapping name -> either (the request's ``model``
    picks one; a single target is called ``"chatclient"``). ``auth(request) -> principal | None``
    (sync or async) refuses with 401 on ``None``; the principal reaches advisors as
    ``ContextKeys.PRINCIPAL``. ``allowed_hosts`` / ``allowed_origins`` widen the loopback-only
    Host/Origin policy; ``max_body_bytes`` caps the body (413); ``max_duration`` (seconds) bounds
    each request (504). With ``auth``, conversation ids (and an agent's suspended runs) are bound to
    the principal: ``conversation_namespace(principal) -> str`` names the user when the principal is
    neither a ``str`` nor has an ``id``.

    With the header ``X-Conversation-Id`` the id is memory's conversation id and only the newest
    user message of the body is sent; without it the body's messages are the whole conversation.
    Tools in the body are the caller's: when the model calls one, the answer ends with
    ``finish_reason: "tool_calls"`` and the next request's ``role: "tool"`` messages carry results.

        from fastapi import FastAPI
        api = FastAPI()
        api.mount("/openai", openai_app(client, auth=check_token))   # base_url=".../openai/v1"
    """
    from starlette.routing import Route

    targets = check_target(target)
    edge = Edge(
        auth=auth,
        allowed_hosts=allowed_hosts,
        allowed_origins=allowed_origins,
        max_body_bytes=max_body_bytes,
        max_duration=max_duration,
        surface="the OpenAI-compatible endpoint",
        conversation_namespace=conversation_namespace,
    )
    created = int(time.time())

    async def models(request: Any) -> Any:
        from starlette.responses import JSONResponse

        data = [{"id": name, "object": "model", "created": created, "owned_by": "chatclient"} for name in targets]
        return JSONResponse({"object": "list", "data": data})

    async def model(request: Any) -> Any:
        from starlette.responses import JSONResponse

        name = request.path_params["name"]
        try:
            resolve_target(targets, name)
        except EdgeError as exc:
            return _error_response(exc)
        return JSONResponse({"id": name, "object": "model", "created": created, "owned_by": "chatclient"})

    async def completions(request: Any) -> Any:
        try:
            body = await edge.read_json(request)
            parsed = _parse(body, _conversation_header(request.scope))
            chosen = resolve_target(targets, parsed.model)
            if parsed.stream:
                events = edge.start_events(chosen, parsed.turn, principal=edge.principal(request))
                events = await edge.first_event(request, events)  # a refusal before it is a 429, not a 200
        except Exception as exc:  # EdgeError, or anything else setting the turn up (a 500 in our shape)
            return _error_response(error_for(exc))
        headers = {CONVERSATION_HEADER: parsed.turn.conversation_id} if parsed.turn.conversation_id else None
        if parsed.stream:
            return edge.event_stream(_chunks(events, parsed), headers=headers)
        try:
            whole = edge.whole_events(chosen, parsed.turn, principal=edge.principal(request))
            answer = _answer(await edge.until_disconnect(request, whole), parsed)
        except Exception as exc:  # every failure becomes an OpenAI error body
            return _error_response(error_for(exc))
        return JsonAnswer(answer, headers=headers)

    routes = [
        Route("/v1/chat/completions", completions, methods=["POST"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/v1/models/{name:path}", model, methods=["GET"]),
    ]
    return edge.app(routes, render=_error_response)


def _conversation_header(scope: Mapping[str, Any]) -> str | None:
    """The ``X-Conversation-Id`` header, read from the raw ASGI headers (the first one, as Starlette does)."""
    for name, value in scope["headers"]:
        if name == b"x-conversation-id":
            return str(value.decode("latin-1"))
    return None


# -- errors ------------------------------------------------------------------------------------


def _error_body(error: EdgeError) -> dict[str, Any]:
    return {"error": {"message": error.message, "type": error.type, "param": None, "code": error.code}}


def _error_response(error: EdgeError) -> Any:
    return error_response(error, _error_body(error))


# -- parsing -----------------------------------------------------------------------------------


class _Parsed:
    __slots__ = ("completion_id", "include_usage", "model", "schema", "stream", "turn")

    def __init__(
        self, model: str, turn: ChatTurn, stream: bool, include_usage: bool, schema: Mapping[str, Any] | None
    ) -> None:
        self.model = model
        self.turn = turn
        self.stream = stream
        self.include_usage = include_usage
        self.schema = schema
        self.completion_id = f"chatcmpl-{os.urandom(12).hex()}"


def _bad(message: str, param: str | None = None) -> EdgeError:
    return EdgeError(400, message, code="invalid_request" if param is None else f"invalid_{param}")


def _parse(body: Any, conversation_id: str | None) -> _Parsed:
    if not isinstance(body, dict):
        raise _bad("The request body must be a JSON object.")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise _bad("'model' is required: a model name from GET /v1/models.", "model")
    stream = body.get("stream", False)
    if not isinstance(stream, bool) and stream is not None:
        raise _bad("'stream' must be true or false.", "stream")
    stream_options = body.get("stream_options") or {}
    if not isinstance(stream_options, dict):
        raise _bad("'stream_options' must be an object.", "stream_options")
    n = body.get("n")
    if n not in (None, 1):
        raise _bad("Only n=1 is supported.", "n")
    if conversation_id is not None:
        conversation_id = conversation_id.strip()
        if not conversation_id or len(conversation_id) > _MAX_CONVERSATION_ID or not conversation_id.isprintable():
            raise _bad(f"X-Conversation-Id must be 1-{_MAX_CONVERSATION_ID} printable characters.", "conversation_id")
    messages = _messages(body.get("messages"))
    if conversation_id is not None:
        messages = _newest_turn(messages)
    tools = _tools(body.get("tools"))
    context, schema = _response_format(body.get("response_format"))
    turn = ChatTurn(
        tuple(messages),
        conversation_id=conversation_id,
        caller_tools=tools,
        options=_options(body),
        context=context,
    )
    return _Parsed(model, turn, bool(stream), stream_options.get("include_usage") is True, schema)


def _text_of(content: Any, role: str) -> tuple[str, tuple[Any, ...]]:
    """A message's text and media (``content`` is a string or a list of parts)."""
    if content is None:
        return "", ()
    if isinstance(content, str):
        return content, ()
    if not isinstance(content, list):
        raise _bad(f"A {role} message's content must be a string or a list of parts.", "messages")
    texts: list[str] = []
    media: list[Media] = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text" and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif kind == "image_url" and role == "user":
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, dict) else image
            if not isinstance(url, str) or not url:
                raise _bad("An image_url part needs a url.", "messages")
            # The AI SDK and AG-UI name an image's type beside its URL (kept here as media_type): a
            # URL without a file extension is then still an image of known type.
            mime = image.get("media_type") if isinstance(image, dict) else None
            if mime is not None and not _is_image_type(mime):
                raise _bad("An image's media type must be image/<subtype>.", "messages")
            media.append(_media_of(url, mime))
        else:
            raise _bad(f"Unsupported content part in a {role} message: {str(kind)[:40]!r}.", "messages")
    return "".join(texts), tuple(media)


def _is_image_type(mime: Any) -> bool:
    """``image/<subtype>``: ASCII letters, digits and ``.+-``, at most 64 characters after the slash."""
    if not isinstance(mime, str) or not mime.startswith("image/") or not mime.isascii():
        return False
    subtype = mime[6:]
    return 0 < len(subtype) <= 64 and subtype[0].isalnum() and all(c.isalnum() or c in ".+-" for c in subtype)


def _media_of(url: str, mime_type: str | None = None) -> Any:
    import base64
    import binascii

    if url.startswith("data:"):
        head, _, data = url[5:].partition(",")
        mime, _, encoding = head.partition(";")
        if encoding != "base64" or not mime:
            raise _bad("A data: URL image must be base64 with a MIME type.", "messages")
        try:
            return Media(mime, base64.b64decode(data, validate=True))
        except (binascii.Error, ValueError):
            raise _bad("A data: URL image is not valid base64.", "messages") from None
    try:
        return Media.from_url(url, mime_type)
    except ValueError:  # no type to tell from the URL's name: the provider could not be told either
        raise _bad(
            "An image_url must end in a file name with a known image type (.png, .jpg, ...) or be a data: URL.",
            "messages",
        ) from None


def _messages(raw: Any) -> list[Any]:
    if not isinstance(raw, list) or not raw:
        raise _bad("'messages' must be a non-empty list.", "messages")
    system: list[str] = []
    out: list[Any] = []
    names: dict[str, str] = {}  # tool call id -> tool name, for the results that answer them
    results: list[ToolResponse] = []
    for item in raw:
        role = item.get("role") if isinstance(item, dict) else None
        if role not in _ROLES:
            raise _bad(f"Each message needs a role among {', '.join(_ROLES)}.", "messages")
        if role != "tool" and results:
            out.append(ToolResponseMessage(tuple(results)))
            results = []
        if role in ("system", "developer"):
            system.append(_text_of(item.get("content"), role)[0])
        elif role == "user":
            text, media = _text_of(item.get("content"), role)
            out.append(UserMessage(text, media))
        elif role == "assistant":
            text, _ = _text_of(item.get("content"), role)
            calls = []
            for call in item.get("tool_calls") or ():
                function = call.get("function") if isinstance(call, dict) else None
                if not isinstance(function, dict) or not isinstance(call.get("id"), str):
                    raise _bad("An assistant tool call needs an id and a function.", "messages")
                name, arguments = function.get("name"), function.get("arguments", "")
                if not isinstance(name, str) or not isinstance(arguments, str):
                    raise _bad("A tool call's function needs a name and arguments (a JSON string).", "messages")
                names[call["id"]] = name
                calls.append(ToolCall(call["id"], name, arguments))
            out.append(AssistantMessage(text or None, tuple(calls)))
        else:
            call_id = item.get("tool_call_id")
            if not isinstance(call_id, str) or call_id not in names:
                raise _bad("A tool message needs the tool_call_id of an earlier assistant tool call.", "messages")
            text, _ = _text_of(item.get("content"), role)
            results.append(ToolResponse(call_id, names[call_id], text))
    if results:
        out.append(ToolResponseMessage(tuple(results)))
    if not out:
        raise _bad("'messages' needs at least one user message.", "messages")
    if system:
        out.insert(0, SystemMessage("\n\n".join(system)))
    return out


def _newest_turn(messages: list[Any]) -> list[Any]:
    """With a conversation id, memory holds the history: keep the system text and the newest user
    message, or the tool results that end the body (memory holds the calls they answer)."""
    head = [messages[0]] if isinstance(messages[0], SystemMessage) else []
    if isinstance(messages[-1], ToolResponseMessage):
        return [*head, messages[-1]]
    for message in reversed(messages):
        if isinstance(message, UserMessage):
            return [*head, message]
    raise _bad("With X-Conversation-Id the body needs a user message.", "messages")


def _tools(raw: Any) -> tuple[Any, ...]:
    if raw is None:
        return ()
    from chatclient.tools.names import check_tool_name

    if not isinstance(raw, list):
        raise _bad("'tools' must be a list.", "tools")
    out = []
    for tool in raw:
        function = tool.get("function") if isinstance(tool, dict) and tool.get("type") == "function" else None
        if not isinstance(function, dict):
            raise _bad("Each tool must be {'type': 'function', 'function': {...}}.", "tools")
        try:
            name = check_tool_name(function.get("name"))
        except ValueError as exc:
            raise _bad(str(exc)[:200], "tools") from None
        parameters = function.get("parameters") or {"type": "object", "properties": {}}
        if not isinstance(parameters, dict):
            raise _bad("A tool's parameters must be a JSON schema object.", "tools")
        description = function.get("description") or ""
        out.append(ToolDefinition(name, str(description), parameters))
    return tuple(out)


_OPTION_FIELDS = (
    "temperature",
    "top_p",
    "stop",
    "seed",
    "frequency_penalty",
    "presence_penalty",
    "parallel_tool_calls",
)
"""Request fields that are ``ChatOptions`` fields of the same name."""


def _options(body: Mapping[str, Any]) -> Any:
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    tool_choice = body.get("tool_choice")
    if isinstance(tool_choice, dict):
        function = tool_choice.get("function")
        tool_choice = function.get("name") if isinstance(function, dict) else None
    given = {name: body[name] for name in _OPTION_FIELDS if body.get(name) is not None}
    if max_tokens is not None:
        given["max_tokens"] = max_tokens
    if tool_choice is not None:
        given["tool_choice"] = tool_choice
    if not given:
        return None
    try:
        return ChatOptions(**given)
    except (TypeError, ValueError) as exc:
        raise _bad(str(exc)[:300]) from None


def _response_format(raw: Any) -> tuple[dict[str, Any], Mapping[str, Any] | None]:
    """The request-context entries that ask for a JSON answer, and the schema to check it against."""
    if raw is None:
        return {}, None
    from chatclient.client import structured_output_context
    from chatclient.converters.core import MapOutputConverter

    kind = raw.get("type") if isinstance(raw, dict) else None
    if kind == "text":
        return {}, None
    if kind == "json_object":
        return structured_output_context(MapOutputConverter(), {}), None
    if kind == "json_schema":
        spec = raw.get("json_schema")
        schema = spec.get("schema") if isinstance(spec, dict) else None
        if not isinstance(schema, dict):
            raise _bad("response_format.json_schema needs a 'schema' object.", "response_format")
        return structured_output_context(_SchemaFormat(schema), {}), schema
    raise _bad("response_format.type must be 'text', 'json_object' or 'json_schema'.", "response_format")


class _SchemaFormat:
    """The caller's JSON schema as the client's structured-output request (instructions + native schema)."""

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self.json_schema = dict(schema)

    @property
    def format(self) -> str:
        from chatclient.converters.core import _INSTRUCTIONS

        return _INSTRUCTIONS + json.dumps(self.json_schema, indent=2, ensure_ascii=False)

    def convert(self, text: str) -> Any:
        return json.loads(_checked_json(text, self.json_schema))


def _checked_json(text: str, schema: Mapping[str, Any]) -> str:
    """The answer as compact JSON text when it is a valid instance of ``schema``; 502 otherwise."""
    from jsonschema import Draft202012Validator  # type: ignore[import-untyped]  # no stubs in deps

    from chatclient.converters.cleaning import clean_text

    try:
        value = json.loads(clean_text(text))
        problem = next(iter(Draft202012Validator(schema).iter_errors(value)), None)
    except Exception:  # not JSON, a malformed schema, or one too deep to check (RecursionError)
        problem = True
    if problem is not None:
        raise EdgeError(
            502,
            "The model's answer is not valid JSON of the requested schema.",
            type="upstream_error",
            code="invalid_model_output",
        )
    return json.dumps(value, ensure_ascii=False)


# -- answering ---------------------------------------------------------------------------------


def _finish_reason(finished: Finished | None, returned: bool) -> str:
    if returned:
        return "tool_calls"
    response = finished.response if finished is not None else None
    result = response.result if response is not None else None
    reason = (result.metadata.finish_reason or "").lower() if result is not None else ""
    if reason in ("length", "max_tokens"):
        return "length"
    if reason in ("content_filter", "safety", "refusal"):
        return "content_filter"
    return "stop"


def _usage(finished: Finished | None, last: UsageUpdate | None) -> dict[str, int]:
    usage = None
    if finished is not None and finished.response is not None:
        usage = finished.response.metadata.usage
    if (usage is None or usage.is_empty()) and last is not None:
        usage = last.usage
    prompt = (usage.prompt_tokens or 0) if usage is not None else 0
    completion = (usage.completion_tokens or 0) if usage is not None else 0
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _tool_calls(event: ToolCallsReturned) -> list[dict[str, Any]]:
    return [
        {"index": i, "id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
        for i, c in enumerate(event.calls)
    ]


def _answer_text(finished: Finished | None) -> str:
    """The text of a whole answer (runs without streaming carry it on ``Finished`` only)."""
    response = finished.response if finished is not None else None
    result = response.result if response is not None else None
    return (result.output.text or "") if result is not None else ""


def _agent_output_text(event: StreamEvent) -> str | None:
    """The output of the root agent (the last ``AgentFinished``) as text, for agents that streamed none."""
    output = getattr(event, "output", None)
    if output is None:
        return None
    return output if isinstance(output, str) else json.dumps(output, ensure_ascii=False, default=str)


class _Outcome:
    """What a run produced, gathered from its events."""

    __slots__ = ("agent_text", "finished", "returned", "streamed_text", "usage")

    def __init__(self) -> None:
        self.finished: Finished | None = None
        self.returned: ToolCallsReturned | None = None
        self.usage: UsageUpdate | None = None
        self.agent_text: str | None = None
        self.streamed_text = False

    def see(self, event: StreamEvent) -> None:
        if isinstance(event, Finished):
            self.finished = event
        elif isinstance(event, ToolCallsReturned):
            self.returned = event
        elif isinstance(event, UsageUpdate):
            self.usage = event
        elif isinstance(event, RunSuspended):
            self.agent_text = event.question
        elif event.kind == "agent_finished":
            self.agent_text = _agent_output_text(event)


def _answer(events: Iterable[StreamEvent], parsed: _Parsed) -> bytes:
    """The ``chat.completion`` object of a whole answer, from the run's events, as JSON bytes."""
    texts: list[str] = []
    reasoning: list[str] = []
    outcome = _Outcome()
    for event in events:
        if isinstance(event, TextDelta):
            texts.append(event.text)
        elif isinstance(event, ReasoningDelta):
            reasoning.append(event.text)
        else:
            outcome.see(event)
    text = "".join(texts)
    if not text and outcome.returned is None:
        text = outcome.agent_text or _answer_text(outcome.finished)
    if parsed.schema is not None and outcome.returned is None:
        text = _checked_json(text, parsed.schema)
    message: dict[str, Any] = {"role": "assistant", "content": text or None, "refusal": None}
    if reasoning:
        message["reasoning_content"] = "".join(reasoning)
    if outcome.returned is not None:
        message["content"] = outcome.returned.text or None
        message["tool_calls"] = [
            {k: v for k, v in call.items() if k != "index"} for call in _tool_calls(outcome.returned)
        ]
    finish = _finish_reason(outcome.finished, outcome.returned is not None)
    usage = _usage(outcome.finished, outcome.usage)
    # The envelope from fixed pieces (its values are ids, ints and a finish reason of our own): only
    # the model name and the message go through json.dumps, a third of the cost of dumping it all.
    return (
        f'{{"id":"{parsed.completion_id}","object":"chat.completion","created":{int(time.time())},'
        f'"model":{json.dumps(parsed.model)},"choices":[{{"index":0,"message":{json.dumps(message)},'
        f'"logprobs":null,"finish_reason":"{finish}"}}],"usage":{{"prompt_tokens":{usage["prompt_tokens"]},'
        f'"completion_tokens":{usage["completion_tokens"]},"total_tokens":{usage["total_tokens"]}}}}}'
    ).encode()


async def _chunks(events: AsyncIterator[StreamEvent], parsed: _Parsed) -> AsyncIterator[bytes]:
    """The SSE frames of a streamed completion; a failure after the first frame is sent in-stream."""
    head = json.dumps(
        {
            "id": parsed.completion_id,
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": parsed.model,
        }
    )[:-1]
    # The frame of a text delta, built from fixed pieces: the hot path of every streamed answer.
    text_open = f'data: {head},"choices":[{{"index":0,"delta":{{"content":'.encode()
    text_close = b'},"logprobs":null,"finish_reason":null}]}\n\n'

    def frame(choice: dict[str, Any] | None, usage: dict[str, int] | None = None) -> bytes:
        body = {"choices": [choice] if choice is not None else []}
        if usage is not None:
            body["usage"] = usage  # type: ignore[assignment]
        return sse_frame(head + "," + json.dumps(body)[1:])

    yield frame({"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None})
    outcome = _Outcome()
    texts: list[str] | None = [] if parsed.schema is not None else None
    try:
        async for event in events:
            if isinstance(event, TextDelta):
                outcome.streamed_text = True
                if texts is not None:
                    texts.append(event.text)
                yield text_open + json.dumps(event.text).encode() + text_close
            elif isinstance(event, ReasoningDelta):
                yield frame(
                    {"index": 0, "delta": {"reasoning_content": event.text}, "logprobs": None, "finish_reason": None}
                )
            else:
                outcome.see(event)
        if outcome.returned is not None:
            calls: dict[str, Any] = {"tool_calls": _tool_calls(outcome.returned)}
            if outcome.returned.text:
                calls["content"] = outcome.returned.text
            yield frame({"index": 0, "delta": calls, "logprobs": None, "finish_reason": None})
        elif not outcome.streamed_text and outcome.agent_text:
            if texts is not None:
                texts.append(outcome.agent_text)
            yield frame({"index": 0, "delta": {"content": outcome.agent_text}, "logprobs": None, "finish_reason": None})
        if texts is not None and parsed.schema is not None and outcome.returned is None:
            _checked_json("".join(texts), parsed.schema)
    except Exception as exc:  # after the first frame, errors travel in the stream
        yield sse_frame(json.dumps(_error_body(error_for(exc))))
        return
    finish = _finish_reason(outcome.finished, outcome.returned is not None)
    yield frame({"index": 0, "delta": {}, "logprobs": None, "finish_reason": finish})
    if parsed.include_usage:
        yield frame(None, _usage(outcome.finished, outcome.usage))
    yield b"data: [DONE]\n\n"


__all__ = ["openai_app"]
