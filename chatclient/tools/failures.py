"""What the model hears when a tool fails: the failure policy of the ``ToolCallingManager``.

A tool can fail in two ways: the model's arguments are unusable (not JSON, wrong types, missing
fields: a ``ToolArgumentsError``), or the tool itself raises. Each way has its own handler,
``on_execution_error`` and ``on_arguments_error``, a callable ``(error, ToolErrorContext)`` that
returns the text the model sees (a ``ToolErrorResult`` or a ``str``) or raises to fail the request::

    def polite(error: Exception, ctx: ToolErrorContext) -> ToolErrorResult:
        return ToolErrorResult(f"{ctx.tool_name} is unavailable right now; try another way")

    ToolCallingManager(on_execution_error=polite)

Without a handler the documented default holds: the error's text reaches the model, after
``Error:`` (or it raises with ``raise_on_tool_error=True``). An exception derived from
``ToolErrorVisibleToModel`` (or carrying ``visible_to_model = True``) is written *for* the model, so
it reaches it verbatim under every built-in policy; ``send_generic_message_unless_visible`` keeps
every other exception's text (SQL, paths, personal data) out of the prompt, memory and provider.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from chatclient.errors import ToolExecutionError
from chatclient.tools.context import ToolContext

log = logging.getLogger(__name__)

_MAX_CAUSES = 16  # how far down a __cause__ chain a visible error is looked for


class ToolErrorVisibleToModel(ToolExecutionError):
    """A tool failure written for the model: its message reaches the model verbatim.

    Raise it (or a subclass) from a tool when the model can act on the reason — a missing
    parameter, an unknown id, "the date must be in the future". Override ``message_for_model`` to
    keep a longer message for logs and a shorter one for the model.

    >>> ToolErrorVisibleToModel("no order 42; ask the user for the order number").message_for_model
    'no order 42; ask the user for the order number'
    """

    @property
    def message_for_model(self) -> str:
        """The text the model sees (by default the exception's message)."""
        return str(self)


@dataclass(frozen=True, slots=True)
class ToolErrorContext:
    """Where a tool failure happened, handed to ``on_execution_error`` / ``on_arguments_error``.

    ``raw_error`` is the outer ``ToolExecutionError`` before unwrapping (the handler's ``error`` is
    what the tool itself raised, or the ``ToolArgumentsError`` for bad arguments); ``kind`` says
    which of the two handlers was asked.
    """

    tool_name: str
    call_id: str
    arguments: str
    tool_context: ToolContext
    raw_error: ToolExecutionError
    kind: Literal["execution", "arguments"]


@dataclass(frozen=True, slots=True)
class ToolErrorResult:
    """What the model reads instead of the tool's result (the response is marked ``is_error``)."""

    text: str

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise TypeError(f"ToolErrorResult text must be a str, not {type(self.text).__name__}")


ToolErrorHandler: TypeAlias = Callable[[BaseException, ToolErrorContext], "ToolErrorResult | str"]
"""``(error, context) -> ToolErrorResult | str``; raise to fail the request instead."""


def visible_error(error: BaseException | None) -> BaseException | None:
    """The first exception in ``error``'s ``__cause__`` chain that is meant for the model, if any."""
    for _ in range(_MAX_CAUSES):
        if error is None:
            return None
        if isinstance(error, ToolErrorVisibleToModel) or getattr(error, "visible_to_model", False) is True:
            return error
        error = error.__cause__
    return None


def message_for_model(error: BaseException) -> str:
    """The text of an error meant for the model (``message_for_model`` when it has one)."""
    text = getattr(error, "message_for_model", None)
    return text if isinstance(text, str) else (str(error) or type(error).__name__)


def unwrap(error: ToolExecutionError) -> BaseException:
    """What the tool raised: a plain ``ToolExecutionError`` that only wraps another exception
    (``FunctionToolCallback`` wraps everything a function raises) gives way to its cause."""
    cause = error.__cause__
    if type(error) is ToolExecutionError and cause is not None:
        return cause
    return error


def send_message_to_model(error: BaseException, context: ToolErrorContext) -> ToolErrorResult:
    """The default policy: a visible error verbatim, any other as ``Error: <its message>``."""
    visible = visible_error(context.raw_error)
    if visible is not None:
        return ToolErrorResult(message_for_model(visible))
    return ToolErrorResult(f"Error: {context.raw_error}")


def send_generic_message_unless_visible(
    message: str = "Error: the tool failed. The details were not shared; try another way or tell the user.",
) -> ToolErrorHandler:
    """A policy that tells the model only ``message``, unless the error is visible to the model.

    The hidden error is logged at WARNING (logger ``chatclient.tools.failures``) with the tool's
    name, so the application still learns what happened.
    """
    if not isinstance(message, str) or not message.strip():
        raise ValueError("the generic message must be non-empty text")

    def generic(error: BaseException, context: ToolErrorContext) -> ToolErrorResult:
        visible = visible_error(context.raw_error)
        if visible is not None:
            return ToolErrorResult(message_for_model(visible))
        log.warning("tool %r failed (hidden from the model): %s", context.tool_name, context.raw_error)
        return ToolErrorResult(message)

    return generic


def fail_unless_visible(error: BaseException, context: ToolErrorContext) -> ToolErrorResult:
    """A policy that fails the request (raising the ``ToolExecutionError``) unless the error is visible."""
    visible = visible_error(context.raw_error)
    if visible is not None:
        return ToolErrorResult(message_for_model(visible))
    raise context.raw_error


def fail_invocation(error: BaseException, context: ToolErrorContext) -> ToolErrorResult:
    """A policy that always fails the request with the ``ToolExecutionError``."""
    raise context.raw_error


def check_handler(handler: Any, what: str) -> ToolErrorHandler | None:
    """``None`` or a callable, else ``TypeError`` naming the parameter."""
    if handler is not None and not callable(handler):
        raise TypeError(f"{what} must be a callable (error, ToolErrorContext) -> ToolErrorResult, not {handler!r}")
    return handler  # type: ignore[no-any-return]


def handler_text(handler: ToolErrorHandler, error: BaseException, context: ToolErrorContext) -> str:
    """Run ``handler`` and return the text for the model; a wrong return type is a ``TypeError``."""
    result = handler(error, context)
    if isinstance(result, ToolErrorResult):
        return result.text
    if isinstance(result, str):
        return result
    name = getattr(handler, "__name__", type(handler).__name__)
    raise TypeError(
        f"tool error handler {name} returned {type(result).__name__}; return a ToolErrorResult (or str), or raise"
    )
