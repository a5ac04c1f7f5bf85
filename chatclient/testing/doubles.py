"""Scripted and function-backed chat models and a recording advisor: the test doubles of ``chatclient.testing``."""


from __future__ import annotations

import threading
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from typing import Any, TypeAlias

from chatclient._pickling import PicklesWithoutLocks
from chatclient.advisor import BaseAdvisor
from chatclient.errors import ChatClientError
from chatclient.messages import AssistantMessage
from chatclient.models.base import (
    BaseChatModel,
    ChatResponse,
    ChatResponseMetadata,
    Generation,
    GenerationMetadata,
    ModelCapabilities,
    Usage,
    aggregate,
)
from chatclient.options import ChatOptions
from chatclient.prompt import Prompt
from chatclient.request import ChatClientRequest, ChatClientResponse

ScriptEntry: TypeAlias = str | AssistantMessage | ChatResponse | BaseException | list[str]


class ScriptExhaustedError(ChatClientError):
    """A ScriptedChatModel was called more often than its script has entries."""


def _count_tokens(text: str | None) -> int:
    return len(text.split()) if text else 0


def _finish_reason(message: AssistantMessage) -> str:
    return "tool_calls" if message.tool_calls else "stop"


def _usage(prompt: Prompt, text: str | None) -> Usage:
    return Usage(_count_tokens(prompt.contents), _count_tokens(text))


def response_for(
    prompt: Prompt, value: str | AssistantMessage | ChatResponse, model: str | None = None
) -> ChatResponse:
    """A complete response (finish reason and usage set) for a scripted value."""
    if isinstance(value, ChatResponse):
        return value
    message = value if isinstance(value, AssistantMessage) else AssistantMessage(value)
    return ChatResponse(
        (Generation(message, GenerationMetadata(_finish_reason(message))),),
        ChatResponseMetadata(id=None, model=model, usage=_usage(prompt, message.text)),
    )


def _chunks_for(prompt: Prompt, entry: Any, model: str | None) -> list[ChatResponse]:
    if isinstance(entry, list):
        pieces = [str(p) for p in entry]
        out = [ChatResponse((Generation(AssistantMessage(p)),), ChatResponseMetadata(model=model)) for p in pieces[:-1]]
        last = pieces[-1] if pieces else ""
        out.append(
            ChatResponse(
                (Generation(AssistantMessage(last), GenerationMetadata("stop")),),
                ChatResponseMetadata(model=model, usage=_usage(prompt, "".join(pieces))),
            )
        )
        return out
    return [response_for(prompt, entry, model)]


class ScriptedChatModel(PicklesWithoutLocks, BaseChatModel):
    """A chat model that answers from a script, first in first out.

    Entries: ``str``, ``AssistantMessage``, ``ChatResponse``, an exception (raised), or a list of
    strings (streamed chunk by chunk by ``stream``/``astream``, joined by ``call``/``acall``). Every
    prompt is recorded in ``prompts``. Calling past the end raises ``ScriptExhaustedError``.
    """

    def __init__(
        self,
        responses: Iterable[ScriptEntry] = (),
        *,
        capabilities: ModelCapabilities | None = None,
        default_options: ChatOptions | None = None,
        model_name: str = "scripted",
    ) -> None:
        self._script: deque[Any] = deque(responses)
        self._lock = threading.Lock()
        self.prompts: list[Prompt] = []
        self.capabilities = capabilities or ModelCapabilities(native_structured_output=False)
        self.default_options = default_options
        self.model_name = model_name

    def add(self, *entries: ScriptEntry) -> ScriptedChatModel:
        """Append entries to the script."""
        with self._lock:
            self._script.extend(entries)
        return self

    @property
    def remaining(self) -> int:
        return len(self._script)

    @property
    def last_prompt(self) -> Prompt:
        if not self.prompts:
            raise AssertionError("the scripted model was never called")
        return self.prompts[-1]

    def _take(self, prompt: Prompt) -> Any:
        with self._lock:
            self.prompts.append(prompt)
            if not self._script:
                raise ScriptExhaustedError(
                    f"ScriptedChatModel ran out of responses after {len(self.prompts) - 1} call(s); "
                    f"the unanswered prompt's last user text was {prompt.user_message.text!r}. "
                    "Add more entries to the script."
                )
            entry = self._script.popleft()
        if isinstance(entry, BaseException):
            raise entry
        return entry

    def call(self, prompt: Prompt) -> ChatResponse:
        entry = self._take(prompt)
        if isinstance(entry, list):
            return aggregate(_chunks_for(prompt, entry, self.model_name))
        return response_for(prompt, entry, self.model_name)

    async def acall(self, prompt: Prompt) -> ChatResponse:
        return self.call(prompt)

    def stream(self, prompt: Prompt) -> Iterator[ChatResponse]:
        entry = self._take(prompt)
        yield from _chunks_for(prompt, entry, self.model_name)

    async def astream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
        entry = self._take(prompt)
        for chunk in _chunks_for(prompt, entry, self.model_name):
            yield chunk


class FunctionChatModel(BaseChatModel):
    """A chat model backed by a function ``fn(prompt) -> str | AssistantMessage | ChatResponse``."""

    def __init__(
        self,
        fn: Callable[[Prompt], str | AssistantMessage | ChatResponse],
        *,
        capabilities: ModelCapabilities | None = None,
        default_options: ChatOptions | None = None,
    ) -> None:
        if fn is None:
            raise ValueError("fn cannot be None")
        self._fn = fn
        self.prompts: list[Prompt] = []
        self.capabilities = capabilities or ModelCapabilities()
        self.default_options = default_options

    def call(self, prompt: Prompt) -> ChatResponse:
        self.prompts.append(prompt)
        return response_for(prompt, self._fn(prompt), "function")

    async def acall(self, prompt: Prompt) -> ChatResponse:
        return self.call(prompt)


class RecordingAdvisor(BaseAdvisor):
    """Appends ``"<name>:before"`` and ``"<name>:after"`` to a shared log, to assert advisor order."""

    def __init__(self, name: str, log: list[str], order: int = 0) -> None:
        self.name = name
        self.order = order
        self.log = log

    def before(self, request: ChatClientRequest, chain: Any) -> ChatClientRequest:
        self.log.append(f"{self.name}:before")
        return request

    def after(self, response: ChatClientResponse, chain: Any) -> ChatClientResponse:
        self.log.append(f"{self.name}:after")
        return response


__all__ = ["FunctionChatModel", "RecordingAdvisor", "ScriptEntry", "ScriptExhaustedError", "ScriptedChatModel", "response_for"]
