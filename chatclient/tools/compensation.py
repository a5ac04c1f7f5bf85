"""Undoing tools: when a call of a turn fails, the turn's successful calls are rolled back.

A tool declares how to undo itself with ``@tool(compensate=undo)`` or, in a class of tools, with a
method marked ``@compensates("tool_name")``. The undo function takes the same parameters as the
tool (it receives the same arguments), or one parameter annotated ``ToolExecution`` (it receives
the record of the call, result included — a transaction id, say). When any call of a model turn
fails, the ``ToolCallingManager`` runs the undo functions of that turn's successful calls one at
a time, last call first (even though the calls ran concurrently), and tells the model which calls
were rolled back. An undo function that fails is logged at WARNING and the others still run.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import typing
from collections.abc import Callable
from typing import Any, TypeVar

from chatclient.tools.names import check_tool_name
from chatclient.tools.results import ToolExecution

log = logging.getLogger(__name__)

F = TypeVar("F")
_LINK = "__chatclient_compensates__"


def compensates(tool_name: str) -> Callable[[F], F]:
    """Mark a method of a tools class as the undo function of its tool ``tool_name``.

    >>> class Bank:
    ...     @compensates("withdraw")
    ...     def deposit_back(self, amount: int) -> None: ...
    """
    check_tool_name(tool_name)

    def mark(fn: F) -> F:
        target = fn.__func__ if isinstance(fn, (staticmethod, classmethod)) else fn
        if not callable(target):
            raise TypeError(f"@compensates marks functions and methods, not {type(fn).__name__}")
        setattr(target, _LINK, tool_name)
        return fn

    return mark


def compensated_tool(obj: Any) -> str | None:
    """The tool name a function was marked ``@compensates(...)`` for, if any."""
    name = getattr(obj, _LINK, None)
    return name if isinstance(name, str) else None


def takes_only(fn: Callable[..., Any], record: type) -> bool:
    """Whether ``fn``'s only parameter is annotated ``record`` (an undo function that wants the whole
    record of the call: ``ToolExecution`` here, ``AgentInvocation`` for agents)."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False
    if len(params) != 1:
        return False
    annotation = params[0].annotation
    if isinstance(annotation, str):
        try:
            annotation = typing.get_type_hints(fn).get(params[0].name, annotation)
        except Exception:  # an unresolvable forward reference: judge by its name
            return bool(annotation.rsplit(".", 1)[-1] == record.__name__)
    return annotation is record


def call_undo(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Call an undo function from sync code; an ``async def`` one is run to its end."""
    from chatclient.models.base import run_sync

    result = fn(*args, **kwargs)
    if inspect.isawaitable(result):
        run_sync(_await(result))


async def acall_undo(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Call an undo function from async code: a sync one runs in a worker thread."""
    if inspect.iscoroutinefunction(fn):
        await fn(*args, **kwargs)
        return
    result = await asyncio.to_thread(fn, *args, **kwargs)
    if inspect.isawaitable(result):
        await result


class Compensator:
    """One tool's undo function, and how to call it (with the tool's arguments or the execution)."""

    __slots__ = ("fn", "takes_execution", "tool_name")

    def __init__(self, fn: Callable[..., Any], tool_name: str) -> None:
        if not callable(fn):
            raise TypeError(f"compensate= of tool {tool_name!r} must be a callable, not {fn!r}")
        self.fn = fn
        self.tool_name = tool_name
        self.takes_execution = takes_only(fn, ToolExecution)

    def __repr__(self) -> str:
        return f"Compensator({getattr(self.fn, '__qualname__', self.fn)!r} for {self.tool_name!r})"

    def run(self, bind: Callable[[], tuple[tuple[Any, ...], dict[str, Any]]], execution: ToolExecution) -> None:
        """Call the undo function; ``bind`` gives the tool's (args, kwargs) for this call."""
        call_undo(self.fn, *(((execution,), {}) if self.takes_execution else bind()))

    async def arun(self, bind: Callable[[], tuple[tuple[Any, ...], dict[str, Any]]], execution: ToolExecution) -> None:
        """Async twin of ``run``: a sync undo function runs in a worker thread."""
        await acall_undo(self.fn, *(((execution,), {}) if self.takes_execution else bind()))


async def _await(awaitable: Any) -> Any:
    return await awaitable


def rolled_back_message(tool_name: str, failed_tool: str) -> str:
    """What the model reads for a call that succeeded and was undone."""
    return f"Tool {tool_name!r} was executed successfully but was rolled back due to failure of tool {failed_tool!r}."


def log_failed_compensation(tool_name: str, exc: BaseException) -> None:
    log.warning("undoing tool %r failed (the remaining undo functions still run): %r", tool_name, exc)
