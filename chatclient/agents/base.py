"""``Agent``, the result of a run, agent events, error recovery and the machinery every agent runs on.

Every agent (a model-backed agent, a function agent, a workflow) is an ``Agent``. Running one
(``run`` / ``arun`` / ``stream`` / ``astream``) creates or restores an ``AgenticScope`` and walks the
tree of agents. Each step of the walk has a key (its position in the tree: ``"1/0"`` is the first
agent of the second agent of the root, loop iterations and map items add their own parts), and
each leaf agent (one that does work itself, not a workflow) writes its result and the values it
wrote into the scope's journal under that key. A run restored from a store, or resumed after a
human answered, starts again from the run's inputs and replays the journal: a leaf found there is
not invoked again, its recorded writes are applied instead, so every workflow decides exactly as
it did the first time and continues after the last completed agent.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import queue
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn

from chatclient import observation
from chatclient.agents.scope import AgenticScope, AgentInvocation, InvocationNode
from chatclient.agents.stores import ScopeStore, claim_run, release_run, spent_resumes
from chatclient.errors import (
    AgentExecutionError,
    AgenticScopeError,
    AgentInputError,
    DeadlineExceededError,
    RunClaimedError,
)
from chatclient.events import Deadline, StreamEvent, check_max_duration
from chatclient.models.base import Usage

if TYPE_CHECKING:
    from chatclient.agents.monitor import AgentMonitor

MAX_DEPTH = 64
"""Deepest nesting of workflows accepted when a workflow is built."""
MAX_ATTEMPTS = 100
"""Most attempts ``Recovery.retry()`` gets for one agent before the error is thrown anyway."""

_RESERVED = frozenset({"scope_store", "scope_id", "monitor", "max_duration", "advisor_params"})


# -- events -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AgentStarted(StreamEvent):
    """An agent is about to run; ``inputs`` are the scope values it reads."""

    name: str
    inputs: Mapping[str, Any] = field(default_factory=dict)
    kind = "agent_started"


@dataclass(frozen=True, slots=True)
class AgentFinished(StreamEvent):
    """An agent ended: its ``output`` (``None`` on error), ``duration`` in seconds, ``error`` if it failed."""

    name: str
    output: Any = None
    duration: float = 0.0
    error: BaseException | None = None
    kind = "agent_finished"


# -- results ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Suspended:
    """A run waiting for a human: ``question`` to show them, ``scope`` to resume from
    (``agent.resume(scope, answer)`` or ``agent.resume(scope.to_json(), answer)`` in another process)."""

    question: str
    scope: AgenticScope


@dataclass(frozen=True)
class AgentResult:
    """What a run produced: the root agent's ``output``, the ``scope`` it ran on, this run's
    ``invocations`` (one tree: the root agent's invocation and everything below it), the summed token
    ``usage`` of every model call, and ``suspended`` when a human-input step is waiting for an answer
    (``output`` is then ``None``)."""

    output: Any
    scope: AgenticScope
    invocations: tuple[AgentInvocation, ...]
    usage: Usage
    suspended: Suspended | None = None

    if not TYPE_CHECKING:  # hidden from the type checker: every other attribute stays checked

        def __getattr__(self, name: str) -> Any:
            # A run's result freezes its invocation tree when ``invocations`` is first read, not
            # at every run (most callers read only the output); the tree is kept then.
            if name != "invocations" or "_tree" not in self.__dict__:
                raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
            tree = self.__dict__["_tree"]
            frozen = (tree.freeze() if isinstance(tree, InvocationNode) else tree,) if tree is not None else ()
            self.__dict__["invocations"] = frozen
            return frozen


# -- error recovery ---------------------------------------------------------------------------


@dataclass(frozen=True)
class AgentErrorContext:
    """What an ``on_error`` handler sees: the failing agent's name, the scope, the error and the
    attempt number (1 for the first failure)."""

    agent_name: str
    scope: AgenticScope
    error: BaseException
    attempt: int


@dataclass(frozen=True)
class Recovery:
    """What an ``on_error`` handler decides: ``Recovery.retry()``, ``Recovery.result(value)`` (the value
    stands in for the agent's output) or ``Recovery.throw()`` (the default)."""

    action: str
    value: Any = None

    @staticmethod
    def retry() -> Recovery:
        """Invoke the failing agent again (at most ``MAX_ATTEMPTS`` times)."""
        return Recovery("retry")

    @staticmethod
    def result(value: Any) -> Recovery:
        """Use ``value`` as the agent's output and go on."""
        return Recovery("result", value)

    @staticmethod
    def throw() -> Recovery:
        """Fail the workflow with ``AgentExecutionError``."""
        return Recovery("throw")


ErrorHandler = Callable[[AgentErrorContext], Recovery]


# -- control flow signals ---------------------------------------------------------------------


class SuspendRun(Exception):
    """Raised by a human-input step that has no answer yet; the run stops and returns ``Suspended``."""

    def __init__(self, question: str, key: str, output_key: str | None) -> None:
        super().__init__(question)
        self.question = question
        self.key = key
        self.output_key = output_key


class RunCancelled(BaseException):
    """The consumer closed the run's stream; running agents stop at their next step."""


_PASS_THROUGH = (SuspendRun, DeadlineExceededError, RunClaimedError)
_now = time.time
_NO_USAGE = Usage()  # frozen: one shared empty usage for runs that report none


# -- the run ----------------------------------------------------------------------------------


class Run:
    """One execution of an agent tree: scope, store, monitor, event sink, cancellation and deadline."""

    __slots__ = (
        "advisor_params",
        "cancelled",
        "deadline",
        "emit",
        "is_async",
        "monitor",
        "replaying",
        "scope",
        "store",
        "streaming",
    )

    def __init__(
        self,
        scope: AgenticScope,
        *,
        store: ScopeStore | None = None,
        monitor: AgentMonitor | None = None,
        emit: Callable[[StreamEvent], None] | None = None,
        max_duration: float | None = None,
        is_async: bool = False,
        advisor_params: Mapping[str, Any] | None = None,
    ) -> None:
        self.scope = scope
        # A recovered or resumed run replays its journal; a fresh one (empty journal) never looks in it,
        # not even after its own first steps are journalled (every step of a run has its own key).
        self.replaying = bool(scope._journal)
        # Request-context entries for every model call of the run (the caller's principal, say):
        # never stored with the scope, so a resumed run gets them from its own caller.
        self.advisor_params: Mapping[str, Any] = dict(advisor_params) if advisor_params else {}
        self.store = store
        self.monitor = monitor
        self.emit = emit
        self.streaming = emit is not None
        self.cancelled = False  # set by the stream consumer that closed the run's stream
        self.deadline = Deadline.start(max_duration) if max_duration is not None else None
        self.is_async = is_async

    def check(self, where: str) -> None:
        """Stop here when the stream was closed or the run's ``max_duration`` has passed."""
        if self.cancelled:
            raise RunCancelled()
        if self.deadline is not None:
            self.deadline.check(f"before agent {where!r}")

    def journal_get(self, key: str) -> dict[str, Any] | None:
        return self.scope._journal.get(key)

    def journal_put(self, key: str, output: Any, writes: dict[str, Any]) -> None:
        """Record a completed step and, with a store, save the scope (the crash-recovery point).

        ``writes`` is kept as it is: callers hand over a dict of their own, not copied per step."""
        root = self.scope
        if self.store is None:
            root._journal[key] = {"output": output, "writes": writes}  # one store into a dict: atomic
            return
        with root._lock:
            root._journal[key] = {"output": output, "writes": writes}
            self.store.save(root)

    def save(self) -> None:
        if self.store is not None:
            with self.scope._lock:
                self.store.save(self.scope)


class Step(InvocationNode):
    """Where an agent runs, and its record: the run, the scope (a branch's view inside ``parallel``),
    the step key, the names of the workflows above it and whether its text is the stream's; the
    step is also the agent's invocation record in the run's tree (``node`` is the step itself), so
    a step makes one object, not two. When the agent ends, the step lets go of its run and scope
    (the tree outlives the run: it must not hold the scope that holds it)."""

    __slots__ = ("key", "path", "run", "scope", "tail")

    def __init__(
        self,
        run: Run,
        scope: AgenticScope,
        key: str,
        path: tuple[str, ...],
        name: str,
        inputs: Mapping[str, Any],
        started: float,
        tail: bool,
    ) -> None:
        self.run = run
        self.scope = scope
        self.key = key
        self.path = path
        self.tail = tail
        # InvocationNode's fields, set here rather than by its __init__: one call per step, not two.
        self.name = name
        self.inputs = inputs
        self.started = started
        self.output = None
        self.finished = None
        self.error = None
        self.children = []
        self.skipped = False
        self.recovered = False
        self.usage = None

    @property
    def node(self) -> InvocationNode:
        """The invocation record of this step (the step itself)."""
        return self


def _start_span(agent: Agent) -> Any:
    observer = observation._observer
    start = getattr(observer, "start_agent", None) if observer is not None else None
    return start(agent.name, agent.description) if start is not None else None


def _started(agent: Agent, run: Run, node: InvocationNode, parent: InvocationNode | None) -> Any:
    """The parts of starting a step that only some runs need: the root's record in the scope and the
    monitor, the ``AgentStarted`` event, the observer's span (returned)."""
    if parent is None:
        with run.scope._lock:
            run.scope._runs.append(node)
        if run.monitor is not None:
            run.monitor._started(run.scope.id, node)
    if run.emit is not None:
        run.emit(AgentStarted(agent.name, node.inputs))
    return _start_span(agent) if observation._observer is not None else None


def _total_usage(own: Usage | None, children: list[InvocationNode | AgentInvocation]) -> Usage | None:
    """A workflow's usage: its own calls (a supervisor's planner), then its agents'; summed field by
    field in one pass (no ``Usage`` built per child)."""
    usages: list[Usage] = [] if own is None else [own]
    for child in children:
        if child.usage is not None:
            usages.append(child.usage)
    if len(usages) < 2:
        return usages[0] if usages else None
    prompt = completion = cached = written = reasoning = 0
    reported = False
    for u in usages:
        prompt += u.prompt_tokens
        completion += u.completion_tokens
        cached += u.cached_input_tokens
        written += u.cache_write_tokens
        reasoning += u.reasoning_tokens
        reported = reported or u.reported_total_tokens is not None
    total = sum(u.total_tokens for u in usages) if reported else None
    return type(usages[0])(prompt, completion, cached, written, reasoning, total)


def _end(agent: Agent, run: Run, node: InvocationNode, output: Any, error: BaseException | None, obs: Any) -> None:
    node.finished = _now()
    if error is not None:
        if isinstance(error, SuspendRun):
            node.error = f"suspended: {error.question}"
        elif isinstance(error, (RunCancelled, asyncio.CancelledError)):
            node.error = "cancelled"
        else:
            node.error = f"{type(error).__name__}: {error}"
    else:
        node.output = output
    if node.children:
        node.usage = _total_usage(node.usage, list(node.children))
    if obs is not None:
        # A suspension waits for a person; it is not a failure of the span.
        obs.finish(output if error is None else None, None if isinstance(error, SuspendRun) else error)
    if run.emit is not None:
        run.emit(AgentFinished(agent.name, output if error is None else None, node.finished - node.started, error))


def _replayed(agent: Agent, step: Step) -> tuple[bool, Any]:
    """Apply a journalled result of this leaf, if the journal has one."""
    journal = step.run.scope._journal
    entry = journal.get(step.key) if journal else None  # a fresh run's journal is empty: no lookup
    if entry is None:
        return False, None
    for key, value in entry.get("writes", {}).items():
        step.scope.write(key, value)
    step.recovered = True
    return True, entry.get("output")


def _skipped_or_missing(agent: Agent, step: Step) -> bool:
    missing = agent._missing(step.scope)
    if not missing:
        return False
    if agent.optional:
        step.skipped = True
        return True
    raise AgentInputError(agent.name, missing)


def _skip(agent: Agent, step: Step, inputs: dict[str, Any]) -> bool:
    """Whether this leaf does not run: replayed from the journal (its output in ``step.output``),
    or skipped (optional, inputs missing); ``AgentInputError`` when a required input is missing.

    ``inputs`` are the values the step read: when the agent reads exactly its required inputs
    (``_n_required``) and all are there, nothing is looked up again."""
    if step.run.replaying:
        done, output = _replayed(agent, step)
        if done:
            step.output = output
            return True
    if len(inputs) == agent._n_required:
        return False
    return bool(agent._missing(step.scope)) and _skipped_or_missing(agent, step)


def execute(
    agent: Agent,
    run: Run,
    scope: AgenticScope,
    key: str,
    path: tuple[str, ...],
    parent: InvocationNode | None,
    tail: bool,
) -> Any:
    """Run one agent of the tree (sync): record it, replay it from the journal or invoke it.

    The usual step (a child, no event sink, observer, deadline or journal to replay) costs the
    record, the step and the agent's own call: everything else is behind one test each."""
    if run.cancelled or run.deadline is not None:
        run.check(agent.name)
    reads = agent._reads
    if reads is None:
        inputs = agent._inputs_of(scope)
    else:  # _inputs_of, inline: the values of the names it reads that the scope holds
        state = scope._state
        inputs = {}
        for name in reads:
            if name in state:
                inputs[name] = state[name]
    node = step = Step(run, scope, key, path, agent.name, inputs, _now(), tail)
    if parent is not None and run.emit is None and observation._observer is None:
        parent.children.append(node)
        obs = None
    else:
        if parent is not None:
            parent.children.append(node)
        obs = _started(agent, run, node, parent)
    try:
        if not agent._leaf:
            output = agent._invoke(step)
            if agent.output_key is not None:
                scope.write(agent.output_key, output)
        elif (run.replaying or len(inputs) != agent._n_required) and _skip(agent, step, inputs):
            output = node.output
        else:
            writes: dict[str, Any] = {}
            scope._recording = writes
            try:
                output = agent._invoke(step)
            finally:
                scope._recording = None
            output_key = agent.output_key
            if output_key is not None:
                if type(scope) is AgenticScope:
                    scope._state[output_key] = output  # the key was checked when the agent was built
                else:
                    scope.write(output_key, output)
                writes[output_key] = output
            if run.store is None:
                run.scope._journal[key] = {"output": output, "writes": writes}  # one store into a dict: atomic
            else:  # the crash-recovery point: saved before the next step starts
                run.journal_put(key, output, writes)
    except BaseException as exc:
        _end(agent, run, node, None, exc, obs)
        del step.run, step.scope
        raise
    if obs is None and run.emit is None and not node.children:
        node.finished = _now()
        node.output = output
    else:
        _end(agent, run, node, output, None, obs)
    del step.run, step.scope
    return output


async def aexecute(
    agent: Agent,
    run: Run,
    scope: AgenticScope,
    key: str,
    path: tuple[str, ...],
    parent: InvocationNode | None,
    tail: bool,
) -> Any:
    """Async ``execute``."""
    if run.cancelled or run.deadline is not None:
        run.check(agent.name)
    reads = agent._reads
    if reads is None:
        inputs = agent._inputs_of(scope)
    else:  # _inputs_of, inline: the values of the names it reads that the scope holds
        state = scope._state
        inputs = {}
        for name in reads:
            if name in state:
                inputs[name] = state[name]
    node = step = Step(run, scope, key, path, agent.name, inputs, _now(), tail)
    if parent is not None and run.emit is None and observation._observer is None:
        parent.children.append(node)
        obs = None
    else:
        if parent is not None:
            parent.children.append(node)
        obs = _started(agent, run, node, parent)
    try:
        if not agent._leaf:
            output = await agent._ainvoke(step)
            if agent.output_key is not None:
                scope.write(agent.output_key, output)
        elif (run.replaying or len(inputs) != agent._n_required) and _skip(agent, step, inputs):
            output = node.output
        else:
            writes: dict[str, Any] = {}
            scope._recording = writes
            try:
                output = await agent._ainvoke(step)
            finally:
                scope._recording = None
            output_key = agent.output_key
            if output_key is not None:
                if type(scope) is AgenticScope:
                    scope._state[output_key] = output  # the key was checked when the agent was built
                else:
                    scope.write(output_key, output)
                writes[output_key] = output
            if run.store is None:
                run.scope._journal[key] = {"output": output, "writes": writes}  # one store into a dict: atomic
            else:  # the crash-recovery point: saved before the next step starts
                run.journal_put(key, output, writes)
    except BaseException as exc:
        _end(agent, run, node, None, exc, obs)
        del step.run, step.scope
        raise
    if obs is None and run.emit is None and not node.children:
        node.finished = _now()
        node.output = output
    else:
        _end(agent, run, node, output, None, obs)
    del step.run, step.scope
    return output


def _save_quietly(run: Run) -> None:
    """Save the scope of a failed run and end its claim; a failure to save must not hide the run's
    own error."""
    try:
        run.save()
    except Exception:  # the run's error is the one to report; each step was saved already
        pass
    try:
        release_run(run.store, run.scope.id)
    except Exception:  # an unreleased claim ends with its lease
        pass


# -- Agent ------------------------------------------------------------------------------------


def check_name(name: Any, what: str = "name") -> str:
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"an agent's {what} must be a non-empty string, got {name!r}")
    return name


def check_key(key: Any, what: str = "output_key") -> str | None:
    if key is None:
        return None
    if not isinstance(key, str) or not key:
        raise ValueError(f"{what} must be a non-empty string or None, got {key!r}")
    if key in _RESERVED:
        raise ValueError(f"{what} {key!r} is reserved by run(); pick another name")
    return key


class Agent:
    """Something that reads the scope, does work and writes its output under ``output_key``.

    Build agents with ``agent(...)``, ``@agent_function``, ``service_agent(...)``, ``human_input(...)``
    and the workflow factories (``sequence``, ``loop``, ``parallel``, ``parallel_map``,
    ``conditional``, ``supervisor``); each result is an ``Agent`` and can be run alone or nested.
    """

    name: str
    description: str
    output_key: str | None
    optional: bool = False
    compensate: Callable[..., Any] | None = None
    """The undo function run by ``compensating(...)`` when a later agent fails (``compensate=``)."""
    _leaf: bool = True
    _reads: tuple[str, ...] | None = None
    """The scope keys a leaf reads when they are all it records as its inputs (``execute`` then reads
    them itself, without calling ``_inputs_of``); ``None``: ask ``_inputs_of``."""
    _n_required: int = -1
    """How many inputs a leaf needs when ``_inputs_of`` reads exactly its required inputs (those
    present) and ``_missing`` is those absent: a step that read this many has none missing and
    skips the ``_missing`` look-up. ``-1``: always ask ``_missing``."""

    # -- what subclasses provide ------------------------------------------------------------------

    def _invoke(self, step: Step) -> Any:
        raise NotImplementedError

    async def _ainvoke(self, step: Step) -> Any:
        raise NotImplementedError

    def input_names(self) -> tuple[str, ...]:
        """The scope keys this agent reads (for a workflow: those its agents need from outside)."""
        return ()

    def input_types(self) -> dict[str, tuple[Any, bool]]:
        """Each input's annotated type (``None`` when unknown) and whether it is required."""
        return {k: (None, True) for k in self.input_names()}

    def _missing(self, scope: AgenticScope) -> list[str]:
        return []

    def _inputs_of(self, scope: AgenticScope) -> dict[str, Any]:
        state = scope._state
        names = self._reads if self._reads is not None else self.input_names()
        return {k: state[k] for k in names if k in state}

    @property
    def children(self) -> tuple[Agent, ...]:
        """The agents this one runs (empty for a leaf)."""
        return ()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"

    # -- argument errors that say what to do ------------------------------------------------------

    def _required_inputs(self) -> list[str]:
        return [k for k, (_, required) in self.input_types().items() if required]

    def call_hint(self, method: str = "run") -> str:
        """How to run this agent, with its inputs by name: ``writer.run(topic=...)``."""
        owner = self.name if self.name.isidentifier() else "agent"
        names = self._required_inputs() or list(self.input_names())
        return f"{owner}.{method}({', '.join(f'{k}=...' for k in names)})"

    def _check_call(self, method: str, args: tuple[Any, ...], inputs: Mapping[str, Any], fresh: bool) -> None:
        """Refuse positional inputs, and unknown input names given while required ones are missing,
        saying how to call the agent (only for a fresh run: a recovered one has its stored inputs)."""
        if args:
            raise TypeError(f"{self.name}.{method}() takes its inputs by name: {self.call_hint(method)}")
        if not fresh or self.optional:
            return
        known = self.input_names()
        unknown = [k for k in inputs if k not in known]
        if not unknown:  # the usual call: the required inputs are not looked up at all
            return
        missing = [k for k in self._required_inputs() if k not in inputs]
        if missing:
            raise AgentInputError(
                self.name,
                missing,
                f"{self.name}.{method}() got {', '.join(map(repr, unknown))}; expected "
                f"{', '.join(map(repr, missing))}: {self.call_hint(method)}",
            )

    # -- running ----------------------------------------------------------------------------------

    def _prepare(
        self,
        inputs: dict[str, Any],
        scope_store: ScopeStore | None,
        scope_id: str | None,
        monitor: AgentMonitor | None,
        max_duration: float | None,
        emit: Callable[[StreamEvent], None] | None,
        is_async: bool,
        scope: AgenticScope | None = None,
        advisor_params: Mapping[str, Any] | None = None,
    ) -> Run:
        if max_duration is not None:
            max_duration = check_max_duration(max_duration)
        fresh: AgenticScope | None = None
        if scope is None and scope_store is not None:
            # One claimant per run: the stored scope (recovery) or this fresh one, claimed in the store.
            fresh = AgenticScope(inputs, id=scope_id)
            claimed, scope_store = claim_run(scope_store, fresh)
            scope = None if claimed is fresh else claimed
        if scope is not None:
            # Recovery or resume: start again from the run's inputs and replay the journal.
            with scope._lock:
                for key, value in inputs.items():
                    scope._initial.setdefault(key, value)
                scope._state = dict(scope._initial)
        else:
            scope = fresh if fresh is not None else AgenticScope(inputs, id=scope_id)
        return Run(
            scope,
            store=scope_store,
            monitor=monitor,
            emit=emit,
            max_duration=max_duration,
            is_async=is_async,
            advisor_params=advisor_params,
        )

    def _result(self, run: Run, output: Any, suspended: SuspendRun | None) -> AgentResult:
        scope = run.scope
        with scope._lock:
            node = scope._runs[-1] if scope._runs else None
            if suspended is not None:
                before = scope._pending
                # The token names this suspension; a resume spends it (a re-run that stops at the
                # same question keeps the token, so the question already handed out stays valid).
                same = before is not None and before.get("key") == suspended.key and before.get("token")
                scope._pending = {
                    "key": suspended.key,
                    "question": suspended.question,
                    "output_key": suspended.output_key,
                    "token": before["token"] if same and before is not None else os.urandom(16).hex(),
                }
            else:
                scope._pending = None
        if run.store is not None:
            try:
                run.save()
            finally:
                release_run(run.store, scope.id)
        # Built without the frozen dataclass's __init__: ``invocations`` is frozen from ``_tree``
        # when first read (see ``AgentResult.__getattr__``).
        result = object.__new__(AgentResult)
        result.__dict__.update(
            output=None if suspended is not None else output,
            scope=scope,
            usage=(node.usage if node is not None else None) or _NO_USAGE,
            suspended=Suspended(suspended.question, scope) if suspended is not None else None,
            _tree=node,
        )
        return result

    def _run_sync(self, run: Run) -> AgentResult:
        try:
            output = execute(self, run, run.scope, "", (), None, run.streaming)
        except SuspendRun as signal:
            return self._result(run, None, signal)
        except BaseException:
            _save_quietly(run)
            raise
        return self._result(run, output, None)

    async def _run_async(self, run: Run) -> AgentResult:
        try:
            work = aexecute(self, run, run.scope, "", (), None, run.streaming)
            if run.deadline is None:
                output = await work
            else:
                # In async runs the deadline cancels the agents in flight, not only the next one.
                timeout = asyncio.timeout(run.deadline.remaining())
                try:
                    async with timeout:
                        output = await work
                except TimeoutError:
                    if timeout.expired():
                        raise DeadlineExceededError(run.deadline.seconds, "while agents ran") from None
                    raise
        except SuspendRun as signal:
            return self._result(run, None, signal)
        except BaseException:
            if run.store is not None:
                await asyncio.to_thread(_save_quietly, run)
            raise
        return self._result(run, output, None)

    def run(
        self,
        *args: Any,
        scope_store: ScopeStore | None = None,
        scope_id: str | None = None,
        monitor: AgentMonitor | None = None,
        max_duration: float | None = None,
        advisor_params: Mapping[str, Any] | None = None,
        **inputs: Any,
    ) -> AgentResult:
        """Run with ``inputs`` as the scope's initial state.

        ``scope_id`` names the scope; with a ``scope_store`` holding that id, the run continues the
        stored one (after a crash: completed agents are not invoked again, their recorded results are
        replayed; inputs already stored are kept). ``monitor`` records the invocation tree;
        ``max_duration`` (seconds) bounds the whole run (``DeadlineExceededError``);
        ``advisor_params`` are added to the request context of every model call the run's agents
        make (``ContextKeys.PRINCIPAL``, say, for a budget or rate limit per user); they are never
        stored with the scope.
        """
        self._check_call("run", args, inputs, scope_store is None or scope_id is None)
        run = self._prepare(inputs, scope_store, scope_id, monitor, max_duration, None, False, None, advisor_params)
        return self._run_sync(run)

    async def arun(
        self,
        *args: Any,
        scope_store: ScopeStore | None = None,
        scope_id: str | None = None,
        monitor: AgentMonitor | None = None,
        max_duration: float | None = None,
        advisor_params: Mapping[str, Any] | None = None,
        **inputs: Any,
    ) -> AgentResult:
        """Async ``run``: model calls use ``acall``, ``parallel`` branches run as tasks."""
        self._check_call("arun", args, inputs, scope_store is None or scope_id is None)
        run = self._prepare(inputs, scope_store, scope_id, monitor, max_duration, None, True, None, advisor_params)
        return await self._run_async(run)

    def stream(
        self,
        *args: Any,
        scope_store: ScopeStore | None = None,
        scope_id: str | None = None,
        monitor: AgentMonitor | None = None,
        max_duration: float | None = None,
        advisor_params: Mapping[str, Any] | None = None,
        **inputs: Any,
    ) -> Iterator[StreamEvent]:
        """Run, yielding ``AgentStarted`` / ``AgentFinished`` for every agent, the tool and advisor
        events of every agent's model calls, and the text deltas of the agents in last position (see
        the guide). The root's ``AgentFinished`` carries the result. Closing the iterator stops the
        run at the next chunk or agent boundary and waits for the agent in flight to return.
        """
        self._check_call("stream", args, inputs, scope_store is None or scope_id is None)
        events: queue.SimpleQueue[Any] = queue.SimpleQueue()
        run = self._prepare(
            inputs, scope_store, scope_id, monitor, max_duration, events.put, False, None, advisor_params
        )
        done = object()
        box: list[BaseException] = []

        def work() -> None:
            try:
                self._run_sync(run)
            except RunCancelled:
                pass
            except BaseException as exc:
                box.append(exc)
            finally:
                events.put(done)

        context = contextvars.copy_context()
        worker = threading.Thread(target=context.run, args=(work,), name=f"agent-stream-{self.name}", daemon=True)
        worker.start()
        try:
            while True:
                item = events.get()
                if item is done:
                    break
                yield item
            if box:
                raise box[0]
        finally:
            run.cancelled = True
            worker.join()

    async def astream(
        self,
        *args: Any,
        scope_store: ScopeStore | None = None,
        scope_id: str | None = None,
        monitor: AgentMonitor | None = None,
        max_duration: float | None = None,
        advisor_params: Mapping[str, Any] | None = None,
        **inputs: Any,
    ) -> AsyncIterator[StreamEvent]:
        """Async ``stream``; closing it (``aclose()``, cancelling the consuming task) cancels the run's
        task, which cancels every agent in flight (model calls, parallel branches).
        ``arun_stream`` is the same stream with the run's result at the end."""
        self._check_call("astream", args, inputs, scope_store is None or scope_id is None)
        events = self.arun_stream(
            scope_store=scope_store,
            scope_id=scope_id,
            monitor=monitor,
            max_duration=max_duration,
            advisor_params=advisor_params,
            **inputs,
        )
        try:
            async for event in events:
                yield event
        finally:
            await events.aclose()

    def arun_stream(
        self,
        state: Mapping[str, Any] | None = None,
        /,
        *,
        scope_store: ScopeStore | None = None,
        scope_id: str | None = None,
        monitor: AgentMonitor | None = None,
        max_duration: float | None = None,
        advisor_params: Mapping[str, Any] | None = None,
        **inputs: Any,
    ) -> AgentRunStream:
        """The async run as an ``AgentRunStream``: the events of ``astream``, then ``stream.result``
        (an ``AgentResult``: output, scope, and ``suspended`` when a ``human_input`` step waits).

        ``state`` (a mapping, positional) gives initial scope values whose names may be anything, also
        this method's own keywords (``max_duration``...): servers pass a carried-over state this way;
        ``inputs`` given by keyword are added over it.

        The run is set up here (a claim in ``scope_store`` is taken now) and starts on the first
        ``__anext__``; leave it with ``aclose()`` or ``async with``, which cancels the run's task."""
        if state is not None:
            if not isinstance(state, Mapping):
                raise TypeError(
                    f"{self.name}.arun_stream() takes its inputs by name, or one mapping of them: "
                    f"{self.call_hint('arun_stream')}"
                )
            inputs = {**state, **inputs}
        run = self._prepare(inputs, scope_store, scope_id, monitor, max_duration, None, True, None, advisor_params)
        return AgentRunStream(self, run)

    # -- human in the loop --------------------------------------------------------------------------

    def _resume_run(
        self,
        scope_or_json: AgenticScope | str | bytes,
        answer: Any,
        scope_store: ScopeStore | None,
        monitor: AgentMonitor | None,
        is_async: bool,
        max_duration: float | None = None,
        advisor_params: Mapping[str, Any] | None = None,
    ) -> Run:
        if isinstance(scope_or_json, AgenticScope):
            scope = scope_or_json
        elif isinstance(scope_or_json, (str, bytes)):
            scope = AgenticScope.from_json(scope_or_json)
        else:
            raise TypeError(f"resume takes an AgenticScope or its JSON, got {type(scope_or_json).__name__}")
        if max_duration is not None:
            # Checked before the claim: a refused argument must not spend the suspension.
            max_duration = check_max_duration(max_duration)
        pending = scope._pending
        if not pending or not isinstance(pending.get("key"), str):
            raise AgenticScopeError(f"scope {scope.id!r} is not waiting for an answer; there is nothing to resume")
        # Resume once: claim the run in the store (the stored scope must still wait on this very
        # suspension), or, without a store, spend the suspension in this process.
        if scope_store is not None:
            scope, scope_store = claim_run(scope_store, scope, resume=True)
            pending = scope._pending or pending
        else:
            spent_resumes.spend(scope.id, pending)
        writes = {pending["output_key"]: answer} if isinstance(pending.get("output_key"), str) else {}
        with scope._lock:
            scope._journal[pending["key"]] = {"output": answer, "writes": writes}
            scope._pending = None
        if scope_store is not None:
            try:
                scope_store.save(scope)  # the suspension is spent in the store before any agent runs
            except BaseException:
                release_run(scope_store, scope.id)
                raise
        return self._prepare(
            {}, scope_store, scope.id, monitor, max_duration, None, is_async, scope=scope, advisor_params=advisor_params
        )

    def resume(
        self,
        scope_or_json: AgenticScope | str | bytes,
        answer: Any,
        *,
        scope_store: ScopeStore | None = None,
        monitor: AgentMonitor | None = None,
        advisor_params: Mapping[str, Any] | None = None,
    ) -> AgentResult:
        """Continue a suspended run with the human's ``answer`` (the scope, or its JSON from another
        process). Completed agents are replayed from the journal, not invoked again.
        ``advisor_params`` as for ``run`` (a resume gets its own: they are not stored)."""
        return self._run_sync(
            self._resume_run(scope_or_json, answer, scope_store, monitor, False, advisor_params=advisor_params)
        )

    async def aresume(
        self,
        scope_or_json: AgenticScope | str | bytes,
        answer: Any,
        *,
        scope_store: ScopeStore | None = None,
        monitor: AgentMonitor | None = None,
        advisor_params: Mapping[str, Any] | None = None,
    ) -> AgentResult:
        """Async ``resume``."""
        return await self._run_async(
            self._resume_run(scope_or_json, answer, scope_store, monitor, True, advisor_params=advisor_params)
        )

    def aresume_stream(
        self,
        scope_or_json: AgenticScope | str | bytes,
        answer: Any,
        *,
        scope_store: ScopeStore | None = None,
        monitor: AgentMonitor | None = None,
        max_duration: float | None = None,
        advisor_params: Mapping[str, Any] | None = None,
    ) -> AgentRunStream:
        """``aresume`` as an ``AgentRunStream`` (the events as ``astream`` yields them, then ``result``).

        The suspension is spent here (``AgenticScopeError`` when the scope waits for nothing,
        ``RunClaimedError`` when another resume took it); ``max_duration`` bounds the resumed run."""
        run = self._resume_run(
            scope_or_json, answer, scope_store, monitor, True, max_duration=max_duration, advisor_params=advisor_params
        )
        return AgentRunStream(self, run)

    # -- as a tool ------------------------------------------------------------------------------------

    def as_tool(self, *, name: str | None = None, description: str | None = None) -> Any:
        """This agent as a ``ToolCallback`` another ChatClient can offer its model: the arguments are
        the agent's inputs, the result is its output (JSON for non-text outputs)."""
        from chatclient.agents.tool import AgentTool

        return AgentTool(self, name=name, description=description)


class AgentRunStream:
    """The events of one async agent run (``Agent.arun_stream`` / ``Agent.aresume_stream``), then its
    result: an async iterator of the events ``astream`` yields; once it is exhausted, ``result`` is
    the run's ``AgentResult`` (``result.suspended`` when a ``human_input`` step waits, ``result.scope``
    the scope). A failed run raises its error from the iteration. ``aclose()`` (or leaving
    ``async with``) before the end cancels the run's task and every agent in flight."""

    __slots__ = ("_ended", "_events", "_run", "_task", "agent", "result")

    def __init__(self, agent: Agent, run: Run) -> None:
        self.agent = agent
        self.result: AgentResult | None = None
        self._run = run
        self._events: asyncio.Queue[Any] = asyncio.Queue()
        self._task: asyncio.Future[AgentResult] | None = None
        self._ended = False
        run.emit = self._events.put_nowait
        run.streaming = True

    @property
    def scope(self) -> AgenticScope:
        """The scope the run works on (its ``id`` names the run in a store)."""
        return self._run.scope

    def __aiter__(self) -> AgentRunStream:
        return self

    async def __anext__(self) -> StreamEvent:
        if self._ended:
            raise StopAsyncIteration
        task = self._task
        if task is None:
            task = self._task = asyncio.ensure_future(self.agent._run_async(self._run))
            task.add_done_callback(self._events.put_nowait)  # the end mark, after every event
        item = await self._events.get()
        if item is task:
            self._ended = True
            self.result = task.result()  # the run's error, if any, is raised here
            raise StopAsyncIteration
        return item  # type: ignore[no-any-return]

    async def aclose(self) -> None:
        """Stop the run if it is still going (its agents are cancelled) and wait for it to end."""
        run, task = self._run, self._task
        self._ended = True
        if task is None:
            if not run.cancelled:
                run.cancelled = True
                release_run(run.store, run.scope.id)  # set up, never started: give its claim back
            return
        if not task.done():
            run.cancelled = True
            task.cancel()
            try:
                await task
            except BaseException:
                pass

    async def __aenter__(self) -> AgentRunStream:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


# -- workflows --------------------------------------------------------------------------------


def check_agents(agents: Sequence[Any], where: str) -> tuple[Agent, ...]:
    out = []
    for item in agents:
        if isinstance(item, Agent):
            out.append(item)
        elif callable(item):
            raise TypeError(
                f"{where} takes agents; {getattr(item, '__name__', type(item).__name__)} is a plain callable: "
                "decorate it with @agent_function (or build a model agent with agent(client, ...))"
            )
        else:
            raise TypeError(f"{where} takes agents, got {type(item).__name__}")
    return tuple(out)


def _check_tree(root: Agent) -> None:
    """Refuse a workflow that contains itself or nests deeper than ``MAX_DEPTH``."""

    def visit(agent: Agent, path: tuple[int, ...], names: tuple[str, ...]) -> None:
        if len(path) > MAX_DEPTH:
            raise ValueError(f"workflow {root.name!r} nests deeper than {MAX_DEPTH} levels")
        for child in agent.children:
            if id(child) in path or child is root:
                raise ValueError(
                    f"workflow {root.name!r} contains itself ({' > '.join((*names, child.name))}): a workflow "
                    "cannot be its own sub-agent"
                )
            visit(child, (*path, id(child)), (*names, child.name))

    visit(root, (id(root),), (root.name,))


def wrap_error(agent: Agent, exc: BaseException, path: tuple[str, ...]) -> AgentExecutionError:
    if isinstance(exc, AgentExecutionError):
        return exc
    return AgentExecutionError(agent.name, exc, path=path)


def _throw(agent: Agent, exc: Exception, path: tuple[str, ...]) -> NoReturn:
    error = wrap_error(agent, exc, path)
    if error is exc:
        raise exc  # already names the deepest failing agent and its path
    raise error from exc


class Workflow(Agent):
    """Base of the workflow agents: holds the sub-agents, ``output``, ``on_error``, and runs one child
    with the error policy."""

    _leaf = False

    def __init__(
        self,
        agents: Sequence[Any],
        *,
        name: str,
        description: str = "",
        output_key: str | None = None,
        output: Callable[[AgenticScope], Any] | None = None,
        on_error: ErrorHandler | None = None,
        where: str = "workflow",
    ) -> None:
        self.name = check_name(name)
        self.description = description or ""
        self.output_key = check_key(output_key)
        if output is not None and not callable(output):
            raise TypeError("output must be a callable taking the scope")
        if on_error is not None and not callable(on_error):
            raise TypeError("on_error must be a callable taking an AgentErrorContext and returning a Recovery")
        self.output = output
        self.on_error = on_error
        self.agents = check_agents(agents, where)
        _check_tree(self)

    @property
    def children(self) -> tuple[Agent, ...]:
        return self.agents

    def _types(self) -> dict[str, tuple[Any, bool]]:
        # Asked at every run (the call check): computed once per tuple of agents; never handed out.
        cached = self.__dict__.get("_input_types")
        if cached is None or cached[0] is not self.agents:
            cached = self.__dict__["_input_types"] = (self.agents, self._walk_input_types())
        types: dict[str, tuple[Any, bool]] = cached[1]
        return types

    def input_types(self) -> dict[str, tuple[Any, bool]]:
        return dict(self._types())

    def _walk_input_types(self) -> dict[str, tuple[Any, bool]]:
        # What the agents read before an earlier agent of this workflow wrote it.
        produced: set[str] = set()
        out: dict[str, tuple[Any, bool]] = {}
        for agent in self.agents:
            for key, (tp, required) in agent.input_types().items():
                if key in produced:
                    continue
                known = out.get(key)
                out[key] = (tp if known is None or known[0] is None else known[0], required or bool(known and known[1]))
            if agent.output_key:
                produced.add(agent.output_key)
        return out

    def input_names(self) -> tuple[str, ...]:
        # A workflow kind with its own input_types (conditional, parallel, ...) is asked through it.
        walked = type(self).input_types is Workflow.input_types
        return tuple(self._types() if walked else self.input_types())

    def _inputs_of(self, scope: AgenticScope) -> dict[str, Any]:
        return {}

    def _final(self, step: Step, last: Any) -> Any:
        return self.output(step.scope) if self.output is not None else last

    def _decide(
        self, agent: Agent, step: Step, scope: AgenticScope, key: str, exc: Exception, attempt: int
    ) -> Recovery:
        path = (*step.path, self.name)
        if self.on_error is None:
            _throw(agent, exc, path)
        recovery = self.on_error(AgentErrorContext(agent.name, scope, exc, attempt))
        if not isinstance(recovery, Recovery):
            raise TypeError(f"on_error of {self.name!r} must return a Recovery, got {type(recovery).__name__}")
        if recovery.action == "throw" or (recovery.action == "retry" and attempt >= MAX_ATTEMPTS):
            _throw(agent, exc, path)
        if recovery.action == "result":
            if agent.output_key is not None:
                scope.write(agent.output_key, recovery.value)
            if agent._leaf:
                writes = {agent.output_key: recovery.value} if agent.output_key is not None else {}
                step.run.journal_put(key, recovery.value, writes)
        return recovery

    def _child(
        self, step: Step, agent: Agent, part: str, *, scope: AgenticScope | None = None, tail: bool = False
    ) -> Any:
        """Run ``agent`` as the child ``part`` of this workflow's step, under the error policy."""
        key = f"{step.key}/{part}" if step.key else part
        return self._step(step, agent, key, (*step.path, self.name), step.scope if scope is None else scope, tail)

    def _step(self, step: Step, agent: Agent, key: str, path: tuple[str, ...], scope: AgenticScope, tail: bool) -> Any:
        """``_child`` with the child's ``key`` and ``path`` (this workflow's path and name) made by the
        caller, once per run of this workflow for all its children."""
        try:
            return execute(agent, step.run, scope, key, path, step, tail and step.tail)
        except _PASS_THROUGH:
            raise
        except Exception as exc:
            return self._recover(step, agent, key, path, scope, tail, exc)

    def _recover(
        self,
        step: Step,
        agent: Agent,
        key: str,
        path: tuple[str, ...],
        scope: AgenticScope,
        tail: bool,
        exc: Exception,
    ) -> Any:
        attempt = 1
        while True:
            recovery = self._decide(agent, step, scope, key, exc, attempt)
            if recovery.action == "result":
                return recovery.value
            attempt += 1
            try:
                return execute(agent, step.run, scope, key, path, step, tail and step.tail)
            except _PASS_THROUGH:
                raise
            except Exception as again:
                exc = again

    async def _achild(
        self, step: Step, agent: Agent, part: str, *, scope: AgenticScope | None = None, tail: bool = False
    ) -> Any:
        """Async ``_child``."""
        key = f"{step.key}/{part}" if step.key else part
        return await self._astep(
            step, agent, key, (*step.path, self.name), step.scope if scope is None else scope, tail
        )

    async def _astep(
        self, step: Step, agent: Agent, key: str, path: tuple[str, ...], scope: AgenticScope, tail: bool
    ) -> Any:
        """Async ``_step``."""
        try:
            return await aexecute(agent, step.run, scope, key, path, step, tail and step.tail)
        except _PASS_THROUGH:
            raise
        except Exception as exc:
            return await self._arecover(step, agent, key, path, scope, tail, exc)

    async def _arecover(
        self,
        step: Step,
        agent: Agent,
        key: str,
        path: tuple[str, ...],
        scope: AgenticScope,
        tail: bool,
        exc: Exception,
    ) -> Any:
        """Async ``_recover``."""
        attempt = 1
        while True:
            recovery = self._decide(agent, step, scope, key, exc, attempt)
            if recovery.action == "result":
                return recovery.value
            attempt += 1
            try:
                return await aexecute(agent, step.run, scope, key, path, step, tail and step.tail)
            except _PASS_THROUGH:
                raise
            except Exception as again:
                exc = again


__all__ = [
    "Agent",
    "AgentErrorContext",
    "AgentFinished",
    "AgentResult",
    "AgentStarted",
    "Recovery",
    "Suspended",
    "Workflow",
]
