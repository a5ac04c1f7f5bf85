"""One error hierarchy for the whole library.

Caller mistakes (bad arguments) are plain ``ValueError``/``TypeError``; everything that goes wrong
while talking to a model, rendering a template, converting output or running tools is a
``ChatClientError``. No message here ever contains an API key: providers pass only status codes
and body excerpts, which they scrub.
"""

from __future__ import annotations

from collections.abc import Iterable


class ChatClientError(Exception):
    """Base class of every error raised by chatclient."""


class TemplateError(ChatClientError):
    """A template could not be rendered; ``missing`` lists every undefined variable."""

    def __init__(self, message: str, missing: Iterable[str] = ()) -> None:
        super().__init__(message)
        self.missing: tuple[str, ...] = tuple(missing)


class AdvisorChainError(ChatClientError):
    """The advisor chain was misused: an exhausted chain, or an advisor that cannot serve a mode."""


class OutputConversionError(ChatClientError):
    """Model output could not be converted to the requested type."""

    def __init__(self, message: str, text: str | None = None, target: object = None) -> None:
        super().__init__(message)
        self.text = text
        self.target = target


class RefusalError(OutputConversionError):
    """The model declined to answer (OpenAI ``message.refusal``), so there is no output to convert.

    ``refusal`` is the model's own explanation; it is also on ``AssistantMessage.refusal``. Catching
    ``OutputConversionError`` catches this too, so ``entity()`` callers need no new ``except``.
    """

    def __init__(self, refusal: str, message: str | None = None, target: object = None) -> None:
        super().__init__(
            message or f"the model refused to answer: {refusal[:300]}; rephrase the request or handle the refusal",
            text=None,
            target=target,
        )
        self.refusal = refusal


class FilterExpressionError(ChatClientError):
    """A filter expression is malformed; ``position`` is the 0-based offset of the problem."""

    def __init__(self, message: str, position: int | None = None) -> None:
        super().__init__(message if position is None else f"{message} (at position {position})")
        self.position = position


class ModelError(ChatClientError):
    """A model call failed."""


class ModelHTTPError(ModelError):
    """The provider answered with an HTTP error status (or reported one mid-stream).

    ``body`` is a scrubbed excerpt of the error body. ``code`` and ``type`` are the provider's own
    error code and error type when its body carried them (OpenAI ``error.code`` / ``error.type``,
    Anthropic ``error.type`` such as ``"overloaded_error"``); ``request_id`` comes from the
    ``x-request-id`` / ``request-id`` response header: quote it when contacting the provider.
    """

    def __init__(
        self,
        message: str,
        status: int | None = None,
        body: str | None = None,
        *,
        code: str | None = None,
        type: str | None = None,  # the provider's own name for it
        request_id: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.body = body
        self.code = code
        self.type = type
        self.request_id = request_id


class AuthenticationError(ModelHTTPError):
    """The provider rejected the credentials (401/403)."""


class RateLimitError(ModelHTTPError):
    """The provider throttled the call (429); ``retry_after`` is in seconds when it said so."""

    def __init__(
        self,
        message: str,
        status: int | None = 429,
        body: str | None = None,
        retry_after: float | None = None,
        *,
        code: str | None = None,
        type: str | None = None,  # the provider's own name for it
        request_id: str | None = None,
    ) -> None:
        super().__init__(message, status=status, body=body, code=code, type=type, request_id=request_id)
        self.retry_after = retry_after


class ModelTimeoutError(ModelError):
    """The provider did not answer in time."""


class ModelConnectionError(ModelError):
    """The connection to the provider failed or broke mid-response."""


class ModelResponseError(ModelError):
    """The provider's payload was malformed, incomplete, or larger/deeper than the configured bounds."""


class ModelRequestError(ModelError):
    """The request could not be sent as built (an invalid header value, URL or protocol).

    Never retried: sending the same request again cannot succeed. The message names what to fix
    and never quotes a header value.
    """


class ToolError(ChatClientError):
    """A tool could not be resolved or executed."""


class ToolExecutionError(ToolError):
    """A tool raised, or its arguments were invalid (raised only with ``raise_on_tool_error``)."""

    def __init__(self, message: str, tool_name: str | None = None) -> None:
        super().__init__(message)
        self.tool_name = tool_name


class UnknownToolError(ToolError):
    """The model asked for a tool that was not offered."""

    def __init__(self, message: str, tool_name: str | None = None) -> None:
        super().__init__(message)
        self.tool_name = tool_name


class ToolLoopLimitError(ToolError):
    """The model kept asking for tools beyond ``max_iterations``."""


__all__ = [
    "AdvisorChainError",
    "AuthenticationError",
    "ChatClientError",
    "FilterExpressionError",
    "ModelConnectionError",
    "ModelError",
    "ModelHTTPError",
    "ModelRequestError",
    "ModelResponseError",
    "ModelTimeoutError",
    "OutputConversionError",
    "RateLimitError",
    "RefusalError",
    "TemplateError",
    "ToolError",
    "ToolExecutionError",
    "ToolLoopLimitError",
    "UnknownToolError",
]
