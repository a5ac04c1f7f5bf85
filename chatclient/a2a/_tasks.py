"""What ``a2a_app`` adds to the SDK's task handling (imported only with the SDK, by ``a2a_app``).

* ``BoundedTaskStore``: the SDK's in-memory store keeps every task, with its whole history, for as
  long as the process lives. This one keeps at most ``max_tasks`` finished tasks (completed,
  failed, canceled, rejected) holding at most ``max_bytes`` in all, dropping the oldest finished
  first. Tasks still running or waiting for input are never dropped: their caller is not done.
* ``TaskContextBuilder``: a follow-up message that names its task but no context gets the stored
  task's context id (the SDK would make up a new one, and refuse the follow-up for the mismatch).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from a2a.server.agent_execution import SimpleRequestContextBuilder
from a2a.server.owner_resolver import resolve_user_scope
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import TaskState

_FINISHED = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_REJECTED,
    }
)


class BoundedTaskStore(InMemoryTaskStore):  # type: ignore[misc]
    """An in-memory task store holding at most ``max_tasks`` finished tasks of ``max_bytes`` in all.

    Sizes are the tasks' serialized (protobuf) sizes, history and artifacts included. The task
    finishing right now is kept even alone over ``max_bytes`` (its caller may still read it); it is
    the first dropped when the next one finishes. ``finished_tasks`` / ``finished_bytes`` tell what
    is held.
    """

    def __init__(self, max_tasks: int, max_bytes: int) -> None:
        super().__init__(owner_resolver=resolve_user_scope)
        self.max_tasks = max_tasks
        self.max_bytes = max_bytes
        self.finished_bytes = 0
        # (owner, task id) -> (size, the call context of its last save: a delete must name the owner)
        self._finished: OrderedDict[tuple[str, str], tuple[int, Any]] = OrderedDict()

    @property
    def finished_tasks(self) -> int:
        """How many finished tasks the store holds now."""
        return len(self._finished)

    def _forget(self, key: tuple[str, str]) -> None:
        held = self._finished.pop(key, None)
        if held is not None:
            self.finished_bytes -= held[0]

    async def save(self, task: Any, context: Any) -> None:
        await super().save(task, context)
        key = (resolve_user_scope(context), task.id)
        self._forget(key)  # a task saved again is measured again (and moves to the young end)
        if task.status.state not in _FINISHED:
            return
        size = task.ByteSize()
        self._finished[key] = (size, context)
        self.finished_bytes += size
        dropped: list[tuple[str, Any]] = []
        while len(self._finished) > 1 and (
            len(self._finished) > self.max_tasks or self.finished_bytes > self.max_bytes
        ):
            (_, task_id), (old_size, old_context) = self._finished.popitem(last=False)
            self.finished_bytes -= old_size
            dropped.append((task_id, old_context))
        for task_id, old_context in dropped:  # the books are right before the first await
            await super().delete(task_id, old_context)

    async def delete(self, task_id: str, context: Any) -> None:
        self._forget((resolve_user_scope(context), task_id))
        await super().delete(task_id, context)


class TaskContextBuilder(SimpleRequestContextBuilder):  # type: ignore[misc]
    """The SDK's request context builder, but a message naming only its task continues that task's context."""

    def __init__(self, task_store: Any) -> None:
        super().__init__(should_populate_referred_tasks=False, task_store=task_store)
        self._tasks = task_store

    async def build(
        self,
        context: Any,
        params: Any = None,
        task_id: str | None = None,
        context_id: str | None = None,
        task: Any = None,
    ) -> Any:
        if params is not None and task_id and not context_id:
            stored = await self._tasks.get(task_id, context)  # the caller's own tasks only
            if stored is not None and stored.context_id:
                context_id = stored.context_id
        return await super().build(context, params, task_id, context_id, task)
