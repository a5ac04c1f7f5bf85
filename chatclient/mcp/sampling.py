"""Answering a server's ``sampling/createMessage`` request with a ``ChatClient`` the user chose."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

from chatclient.mcp._sdk import types
from chatclient.messages import AssistantMessage, Media, Message, UserMessage
from chatclient.options import ChatOptions

if TYPE_CHECKING:
    from chatclient.client import ChatClient

MAX_SAMPLING_TOKENS = 16_384
"""A server's ``maxTokens`` is capped here: the user pays for sampling, not the server."""
MAX_SAMPLING_MESSAGES = 200
MAX_MEDIA_BYTES = 20_000_000
DENIED = -1
"""JSON-RPC error code sent to a server whose sampling request was refused."""
_log = logging.getLogger("chatclient.mcp")


@dataclass(frozen=True, slots=True)
class SamplingRequest:
    """What a server asked the client's model to do, as chatclient messages (shown to the approval hook)."""

    server: str
    messages: tuple[Message, ...]
    system_prompt: str | None
    max_tokens: int
    temperature: float | None = None
    stop_sequences: tuple[str, ...] = ()


SamplingApproval: TypeAlias = Callable[[SamplingRequest], "bool | Awaitable[bool]"]
"""``approve(request) -> bool`` (or ``async``): ``True`` lets the model answer, ``False`` refuses the server."""


def _to_message(message: types.SamplingMessage) -> Message:
    from chatclient.mcp._blobs import decode_blob

    texts: list[str] = []
    media: list[Media] = []
    for block in message.content_as_list:
        if isinstance(block, types.TextContent):
            texts.append(block.text)
        elif isinstance(block, (types.ImageContent, types.AudioContent)):
            media.append(Media(block.mime_type, decode_blob(block.data, MAX_MEDIA_BYTES)))
        else:
            texts.append(f"[{block.type} content]")
    text = "\n".join(texts)
    if message.role == "assistant":
        return AssistantMessage(text)
    return UserMessage(text, tuple(media))


def sampling_request(params: types.CreateMessageRequestParams, server: str) -> SamplingRequest:
    """The server's parameters as a ``SamplingRequest`` (bounded: messages and ``max_tokens`` are capped)."""
    if len(params.messages) > MAX_SAMPLING_MESSAGES:
        raise ValueError(f"a sampling request may carry at most {MAX_SAMPLING_MESSAGES} messages")
    return SamplingRequest(
        server=server,
        messages=tuple(_to_message(m) for m in params.messages),
        system_prompt=params.system_prompt,
        max_tokens=max(1, min(int(params.max_tokens), MAX_SAMPLING_TOKENS)),
        temperature=params.temperature,
        stop_sequences=tuple(params.stop_sequences or ()),
    )


async def answer_sampling(
    client: ChatClient,
    params: types.CreateMessageRequestParams,
    approve: SamplingApproval | None,
    *,
    server: str,
) -> types.CreateMessageResult | types.ErrorData:
    """Run the approval hook, then ``client``; a refusal or failure becomes an error the server receives."""
    try:
        request = sampling_request(params, server)
    except Exception as exc:
        return types.ErrorData(code=types.INVALID_PARAMS, message=f"invalid sampling request: {exc}")
    if approve is not None:
        try:
            verdict: Any = approve(request)
            if inspect.isawaitable(verdict):
                verdict = await verdict
        except Exception as exc:
            _log.exception("the sampling approval hook raised; the request is refused")
            return types.ErrorData(
                code=DENIED, message=f"sampling refused: the approval hook failed ({type(exc).__name__})"
            )
        if verdict is not True:
            return types.ErrorData(code=DENIED, message="sampling refused by the user")
    spec = client.prompt().messages(*request.messages)
    if request.system_prompt:
        spec = spec.system(request.system_prompt)
    wanted = ChatOptions(
        max_tokens=request.max_tokens,
        temperature=request.temperature,
        stop=list(request.stop_sequences) or None,
    )
    defaults = getattr(getattr(client, "_defaults", None), "options", None)
    spec = spec.options(defaults.merge(wanted) if isinstance(defaults, ChatOptions) else wanted)
    try:
        response = await spec.acall().chat_response()
    except Exception as exc:
        _log.warning("the sampling model failed for MCP server %s: %s", server, exc)
        return types.ErrorData(code=types.INTERNAL_ERROR, message=f"the client's model failed: {type(exc).__name__}")
    if response is None or not response.generations:
        return types.ErrorData(code=types.INTERNAL_ERROR, message="the client's model returned no answer")
    generation = response.generations[0]
    finish = (generation.metadata.finish_reason or "").lower()
    stop = "maxTokens" if finish in ("length", "max_tokens") else "endTurn"
    return types.CreateMessageResult(
        role="assistant",
        content=types.TextContent(text=generation.output.text or ""),
        model=response.metadata.model or "chatclient",
        stop_reason=stop,
    )


__all__ = ["SamplingApproval", "SamplingRequest", "answer_sampling", "sampling_request"]
