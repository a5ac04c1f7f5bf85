"""The shared state of an agentic run, its invocation record and its JSON form.

An ``AgenticScope`` is what the agents of one run share: a mapping of named values (``state``) that
agents read their inputs from and write their outputs to, plus the tree of invocations the run
made. It travels as JSON (``to_json`` / ``AgenticScope.from_json``) to a store, to another process
(human-in-the-loop resume) or to a worker; values keep their types through a registry of allowed
types (``register_type``). Decoding never imports anything: a type name in the JSON that is not
registered in this process is an ``AgenticScopeError``.

Values that round-trip without registration: ``None``, ``bool``, ``int``, ``float``, ``str``,
lists, tuples, dicts (any keys of those scalar types), ``bytes``, ``date``, ``datetime``, ``time``,
``timedelta``, ``Decimal``, ``UUID`` and chat messages. Pydantic models, dataclasses and enums
are registered with ``register_type`` (agents register their ``output_type`` themselves, and the
scope registers the class of such a value when it is written).
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import decimal
import enum
import json
import os
import threading
import uuid
from _thread import RLock as _RLock
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from chatclient import jsonsafe
from chatclient.errors import AgenticScopeError

if TYPE_CHECKING:
    from chatclient.models.base import Usage

FORMAT = "chatclient.agentic_scope"
FORMAT_VERSION = 1
MAX_SCOPE_JSON_CHARS = 64 * 1024 * 1024
"""Largest scope JSON text ``from_json`` reads by default (characters)."""
MAX_SCOPE_JSON_DEPTH = 128
"""Deepest nesting ``from_json`` accepts by default."""

_MISSING = object()


# -- the type registry ------------------------------------------------------------------------


@dataclass(frozen=True)
class _TypeEntry:
    name: str
    cls: type
    encode: Callable[[Any], Any]
    decode: Callable[[Any], Any]


_BY_NAME: dict[str, _TypeEntry] = {}
_RESERVED_TAGS = frozenset({"tuple", "dict", "set", "frozenset", "float", "repr"})
_BY_CLASS: dict[type, _TypeEntry] = {}
_REGISTRY_LOCK = threading.Lock()


def _is_pydantic(cls: type) -> bool:
    return callable(getattr(cls, "model_validate", None)) and callable(getattr(cls, "model_dump", None))


def register_type(
    cls: type,
    *,
    name: str | None = None,
    encode: Callable[[Any], Any] | None = None,
    decode: Callable[[Any], Any] | None = None,
) -> type:
    """Allow values of ``cls`` in scopes that go through JSON; returns ``cls`` (usable as a decorator).

    Pydantic models, dataclasses and enums need no ``encode``/``decode``; any other class needs
    both (``encode(value)`` returns something JSON-ready, ``decode(data)`` rebuilds the value).
    ``name`` (default ``module.QualName``) is what the JSON records; registering the same class
    again is a no-op, another class under a taken name is a ``ValueError``.

    >>> from enum import Enum
    >>> @register_type
    ... class Mood(Enum):
    ...     HAPPY = "happy"
    >>> AgenticScope.from_json(AgenticScope(state={"m": Mood.HAPPY}).to_json()).read("m") is Mood.HAPPY
    True
    """
    if not isinstance(cls, type):
        raise TypeError(f"register_type takes a class, got {type(cls).__name__}")
    key = name or f"{cls.__module__}.{cls.__qualname__}"
    if key in _RESERVED_TAGS:
        raise ValueError(f"{key!r} is a tag of the scope's own JSON forms; pass another name=")
    if encode is None or decode is None:
        if encode is not None or decode is not None:
            raise ValueError("give both encode= and decode=, or neither")
        if _is_pydantic(cls):
            encode = _pydantic_encoder
            decode = cls.model_validate  # type: ignore[attr-defined]
        elif dataclasses.is_dataclass(cls):
            encode = _dataclass_encoder
            decode = _dataclass_decoder(cls)
        elif issubclass(cls, enum.Enum):
            encode = _enum_encoder
            decode = _enum_decoder(cls)
        else:
            raise TypeError(
                f"{cls.__qualname__} is not a pydantic model, dataclass or enum: pass encode= and decode= to "
                "register_type"
            )
    with _REGISTRY_LOCK:
        existing = _BY_CLASS.get(cls)
        if existing is not None and existing.name == key:
            return cls
        taken = _BY_NAME.get(key)
        if taken is not None and taken.cls is not cls:
            raise ValueError(f"the scope type name {key!r} is already registered for another class; pass name=")
        entry = _TypeEntry(key, cls, encode, decode)
        _BY_NAME[key] = entry
        _BY_CLASS[cls] = entry
    return cls


def registered(cls: type) -> bool:
    """True when values of ``cls`` can be written to scope JSON (built-in or registered)."""
    return cls in _BY_CLASS


def auto_register(tp: Any) -> None:
    """Register ``tp`` when it is a pydantic model, dataclass or enum class (agents call this for
    their output and parameter types); anything else is left alone."""
    if not isinstance(tp, type) or tp in _BY_CLASS:
        return
    if _is_pydantic(tp) or (dataclasses.is_dataclass(tp)) or (issubclass(tp, enum.Enum)):
        try:
            register_type(tp)
        except ValueError:  # another class holds the name: the user registers this one by hand
            pass


def _pydantic_encoder(value: Any) -> Any:
    return value.model_dump(mode="json")


def _dataclass_encoder(value: Any) -> Any:
    return {f.name: _encode(getattr(value, f.name), "") for f in dataclasses.fields(value) if f.init}


def _dataclass_decoder(cls: type) -> Callable[[Any], Any]:
    def decode(data: Any) -> Any:
        if not isinstance(data, dict):
            raise ValueError("a dataclass value must be a JSON object")
        return cls(**{k: _decode(v, 1) for k, v in data.items()})

    return decode


def _enum_encoder(value: Any) -> Any:
    return _encode(value.value, "")


def _enum_decoder(cls: type) -> Callable[[Any], Any]:
    def decode(data: Any) -> Any:
        return cls(_decode(data, 1))

    return decode


def _register_builtins() -> None:
    from chatclient.memory.serialization import message_from_dict, message_to_dict
    from chatclient.messages import MESSAGE_CLASSES

    register_type(
        datetime.datetime, name="datetime", encode=lambda v: v.isoformat(), decode=datetime.datetime.fromisoformat
    )
    register_type(datetime.date, name="date", encode=lambda v: v.isoformat(), decode=datetime.date.fromisoformat)
    register_type(datetime.time, name="time", encode=lambda v: v.isoformat(), decode=datetime.time.fromisoformat)
    register_type(
        datetime.timedelta,
        name="timedelta",
        encode=lambda v: v.total_seconds(),
        decode=lambda d: datetime.timedelta(seconds=float(d)),
    )
    register_type(decimal.Decimal, name="decimal", encode=str, decode=decimal.Decimal)
    register_type(uuid.UUID, name="uuid", encode=str, decode=uuid.UUID)
    register_type(bytes, name="bytes", encode=lambda v: base64.b64encode(v).decode("ascii"), decode=base64.b64decode)
    for cls in MESSAGE_CLASSES:
        register_type(cls, name=f"message.{cls.__name__}", encode=message_to_dict, decode=message_from_dict)


# -- encoding ---------------------------------------------------------------------------------

_SCALARS = (str, int, float, bool, type(None))
_TAG = "$t"


def _encode(value: Any, where: str) -> Any:
    """The JSON-ready form of ``value``: JSON scalars and lists as they are, other things tagged."""
    if isinstance(value, _SCALARS) and type(value) in _SCALARS:
        if (isinstance(value, float) and value != value) or value in (float("inf"), float("-inf")):
            return {_TAG: "float", "v": repr(value)}
        return value
    if type(value) is list:
        return [_encode(v, where) for v in value]
    if type(value) is tuple:
        return {_TAG: "tuple", "v": [_encode(v, where) for v in value]}
    if type(value) is dict:
        if all(type(k) is str for k in value) and _TAG not in value:
            return {k: _encode(v, where) for k, v in value.items()}
        return {_TAG: "dict", "v": [[_encode(k, where), _encode(v, where)] for k, v in value.items()]}
    if type(value) in (set, frozenset):
        return {_TAG: type(value).__name__, "v": [_encode(v, where) for v in value]}
    entry = _BY_CLASS.get(type(value))
    if entry is None:
        auto_register(type(value))
        entry = _BY_CLASS.get(type(value))
    if entry is None:
        raise AgenticScopeError(
            f"the scope value {where or 'written'} is a {type(value).__qualname__}, which has no JSON form: register "
            "it with chatclient.agents.register_type (pydantic models, dataclasses and enums need nothing more), "
            "or store a JSON-ready value instead"
        )
    return {_TAG: entry.name, "v": entry.encode(value)}


def _decode(data: Any, depth: int) -> Any:
    if isinstance(data, list):
        return [_decode(v, depth + 1) for v in data]
    if not isinstance(data, dict):
        return data
    if _TAG not in data:
        return {k: _decode(v, depth + 1) for k, v in data.items()}
    tag = data[_TAG]
    raw = data.get("v")
    if tag == "tuple":
        return tuple(_decode(v, depth + 1) for v in _as_list(raw, tag))
    if tag == "dict":
        return {_decode(k, depth + 1): _decode(v, depth + 1) for k, v in (_pair(p) for p in _as_list(raw, tag))}
    if tag in ("set", "frozenset"):
        items = [_decode(v, depth + 1) for v in _as_list(raw, tag)]
        return set(items) if tag == "set" else frozenset(items)
    if tag == "float":
        return float(str(raw))
    if tag == "repr":
        return str(raw)
    entry = _BY_NAME.get(tag) if isinstance(tag, str) else None
    if entry is None:
        raise AgenticScopeError(
            f"scope JSON holds a value of type {str(tag)[:100]!r}, which is not registered in this process; "
            "register it with chatclient.agents.register_type (types are never imported from the JSON)"
        )
    try:
        return entry.decode(raw)
    except AgenticScopeError:
        raise
    except Exception as exc:
        raise AgenticScopeError(
            f"scope JSON holds a {entry.name} value that does not decode: {str(exc)[:300]}"
        ) from None


def _as_list(raw: Any, tag: str) -> list[Any]:
    if not isinstance(raw, list):
        raise AgenticScopeError(f"scope JSON holds a malformed {tag} value (expected a list)")
    return raw


def _pair(raw: Any) -> tuple[Any, Any]:
    if not isinstance(raw, list) or len(raw) != 2:
        raise AgenticScopeError("scope JSON holds a malformed dict entry (expected [key, value])")
    return raw[0], raw[1]


def encode_value(value: Any, where: str = "") -> Any:
    """The JSON-ready form of one scope value (``AgenticScopeError`` for an unregistered type)."""
    try:
        return _encode(value, where)
    except RecursionError:
        raise AgenticScopeError(f"the scope value {where} nests too deeply to store; flatten it") from None


def decode_value(data: Any) -> Any:
    """Rebuild a value from :func:`encode_value` output (``AgenticScopeError`` when it is malformed)."""
    try:
        return _decode(data, 0)
    except RecursionError:
        raise AgenticScopeError("scope JSON nests too deeply to read") from None
    except (ValueError, TypeError, OverflowError) as exc:  # e.g. a float tag holding no number, an unhashable key
        raise _malformed(exc) from None


def _malformed(exc: BaseException) -> AgenticScopeError:
    return AgenticScopeError(f"scope JSON holds a malformed value ({type(exc).__name__}: {str(exc)[:200]})")


def _lenient(value: Any) -> Any:
    """Encode for the invocation record: what has no JSON form is kept as its (cut) repr."""
    try:
        return encode_value(value)
    except AgenticScopeError:
        return {_TAG: "repr", "v": repr(value)[:500]}


# -- the invocation record --------------------------------------------------------------------


@dataclass(frozen=True)
class AgentInvocation:
    """One agent's invocation in a run: what it read, what it answered, when, and what it called.

    ``error`` is ``"ErrorType: message"`` when it failed; ``skipped`` is true for an optional agent
    whose inputs were missing; ``recovered`` is true when its result was taken from the scope's
    journal (a resumed or recovered run) instead of invoking it again. ``usage`` sums the tokens of
    its model calls and of its children's. ``finished`` is ``None`` while it runs.
    """

    name: str
    inputs: Mapping[str, Any] = field(default_factory=dict)
    output: Any = None
    started: float = 0.0
    finished: float | None = None
    error: str | None = None
    children: tuple[AgentInvocation, ...] = ()
    skipped: bool = False
    recovered: bool = False
    usage: Usage | None = None

    @property
    def duration(self) -> float | None:
        """Seconds from start to finish (``None`` while running)."""
        return None if self.finished is None else self.finished - self.started

    def walk(self) -> Iterator[AgentInvocation]:
        """This invocation and all below it, depth first."""
        yield self
        for child in self.children:
            yield from child.walk()

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (values without a JSON form are kept as their repr)."""
        usage = self.usage
        return {
            "name": self.name,
            "inputs": {k: _lenient(v) for k, v in self.inputs.items()},
            "output": _lenient(self.output),
            "started": self.started,
            "finished": self.finished,
            "error": self.error,
            "children": [c.to_dict() for c in self.children],
            "skipped": self.skipped,
            "recovered": self.recovered,
            "usage": None if usage is None else [usage.prompt_tokens, usage.completion_tokens],
        }

    @staticmethod
    def from_dict(data: Any) -> AgentInvocation:
        """Rebuild from :meth:`to_dict` output (``AgenticScopeError`` when malformed)."""
        from chatclient.models.base import Usage

        if not isinstance(data, dict) or not isinstance(data.get("name"), str):
            raise AgenticScopeError("scope JSON holds a malformed invocation record")
        inputs = data.get("inputs") or {}
        children = data.get("children") or []
        usage = data.get("usage")
        if not isinstance(inputs, dict) or not isinstance(children, list):
            raise AgenticScopeError("scope JSON holds a malformed invocation record")
        started, finished = data.get("started", 0.0), data.get("finished")
        if not isinstance(started, (int, float)) or not (finished is None or isinstance(finished, (int, float))):
            raise AgenticScopeError("scope JSON holds an invocation record with bad times")
        try:
            started, finished = float(started), None if finished is None else float(finished)
        except OverflowError:  # an integer too large for a float
            raise AgenticScopeError("scope JSON holds an invocation record with bad times") from None
        return AgentInvocation(
            name=data["name"],
            inputs={str(k): decode_value(v) for k, v in inputs.items()},
            output=decode_value(data.get("output")),
            started=started,
            finished=finished,
            error=data.get("error") if isinstance(data.get("error"), str) else None,
            children=tuple(AgentInvocation.from_dict(c) for c in children),
            skipped=bool(data.get("skipped", False)),
            recovered=bool(data.get("recovered", False)),
            usage=Usage(int(usage[0]), int(usage[1]))
            if isinstance(usage, list) and len(usage) == 2 and all(isinstance(u, int) for u in usage)
            else None,
        )


class InvocationNode:
    """The mutable invocation record of a running agent; frozen into ``AgentInvocation``."""

    __slots__ = (
        "children",
        "error",
        "finished",
        "inputs",
        "name",
        "output",
        "recovered",
        "skipped",
        "started",
        "usage",
    )

    def __init__(self, name: str, inputs: Mapping[str, Any], started: float) -> None:
        self.name = name
        self.inputs = inputs
        self.started = started
        self.output: Any = None
        self.finished: float | None = None
        self.error: str | None = None
        self.children: list[InvocationNode | AgentInvocation] = []
        self.skipped = False
        self.recovered = False
        self.usage: Usage | None = None

    def freeze(self) -> AgentInvocation:
        kids = self.children
        children: tuple[AgentInvocation, ...] = ()
        if kids:
            frozen: list[AgentInvocation] = []
            for c in list(kids):  # a copy: a running parallel branch may still append
                if isinstance(c, AgentInvocation):
                    frozen.append(c)
                elif c.children:
                    frozen.append(c.freeze())
                else:  # a leaf (most of a tree) frozen here, as below: one call less per agent
                    leaf = object.__new__(AgentInvocation)
                    leaf.__dict__.update(
                        name=c.name,
                        inputs=MappingProxyType(c.inputs),
                        output=c.output,
                        started=c.started,
                        finished=c.finished,
                        error=c.error,
                        children=(),
                        skipped=c.skipped,
                        recovered=c.recovered,
                        usage=c.usage,
                    )
                    frozen.append(leaf)
            children = tuple(frozen)
        # Built without the frozen dataclass's __init__ (one object.__setattr__ per field): a run
        # freezes every node of its tree once, and this is the hot path of small agents.
        inv = object.__new__(AgentInvocation)
        inv.__dict__.update(
            name=self.name,
            inputs=MappingProxyType(self.inputs),
            output=self.output,
            started=self.started,
            finished=self.finished,
            error=self.error,
            children=children,
            skipped=self.skipped,
            recovered=self.recovered,
            usage=self.usage,
        )
        return inv


def _encode_entry(key: str, entry: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "output": encode_value(entry.get("output"), f"(output of step {key})"),
        "writes": {k: encode_value(v, repr(k)) for k, v in entry.get("writes", {}).items()},
    }
    return out


def _decode_entry(data: Any) -> dict[str, Any]:
    if not isinstance(data, dict) or not isinstance(data.get("writes", {}), dict):
        raise AgenticScopeError("scope JSON holds a malformed journal entry")
    return {
        "output": decode_value(data.get("output")),
        "writes": {str(k): decode_value(v) for k, v in data.get("writes", {}).items()},
    }


# -- the scope --------------------------------------------------------------------------------


def _check_key(key: Any) -> str:
    if not isinstance(key, str) or not key:
        raise ValueError(f"scope keys are non-empty strings, got {key!r}")
    return key


class AgenticScope:
    """The state shared by the agents of one run, and its record.

    >>> scope = AgenticScope(state={"topic": "otters"})
    >>> scope.write("story", "Once upon a time...")
    >>> scope.read("story"), scope.has("title"), scope.read("title", "untitled")
    ('Once upon a time...', False, 'untitled')
    >>> AgenticScope.from_json(scope.to_json()).state == scope.state
    True

    ``state`` is a read-only view; ``invocations`` holds one ``AgentInvocation`` tree per run (or
    resume) of this scope, oldest first. Besides the state, the JSON form keeps the run's inputs and
    journal (the completed agents' results), which is what recovery and ``resume`` replay.
    """

    def __init__(self, state: Mapping[str, Any] | None = None, *, id: str | None = None) -> None:
        if id is not None and (not isinstance(id, str) or not id or len(id) > 200):
            raise ValueError("a scope id is a non-empty string of at most 200 characters")
        self.id: str = id or os.urandom(16).hex()
        self._state: dict[str, Any] = dict(state) if state else {}
        for key in self._state:
            if type(key) is not str or not key:  # every run makes a scope: the check inline
                _check_key(key)
        self._recording: dict[str, Any] | None = None
        # Root-only parts: the run's inputs, the journal of completed steps, the invocation trees
        # and a pending human-input question.
        self._initial: dict[str, Any] = dict(self._state)
        self._journal: dict[str, dict[str, Any]] = {}
        self._runs: list[InvocationNode | AgentInvocation] = []
        self._pending: dict[str, Any] | None = None
        self._lock = _RLock()  # the C lock threading.RLock() returns, without its wrapper call

    @property
    def _root(self) -> AgenticScope:
        # The scope holding the run's journal and records: this one (a branch returns its parent's).
        # A property, not an attribute pointing at itself: that cycle would leave every finished
        # run's scope, journal and invocation records to the cyclic garbage collector.
        return self

    # -- the state --------------------------------------------------------------------------------

    def read(self, key: str, default: Any = None) -> Any:
        """The value under ``key``, or ``default``."""
        return self._state.get(key, default)

    def write(self, key: str, value: Any) -> None:
        """Set ``key`` to ``value`` (pydantic models, dataclasses and enums register their class)."""
        _check_key(key)
        self._state[key] = value
        recording = self._recording
        if recording is not None:
            recording[key] = value

    def has(self, key: str) -> bool:
        """True when ``key`` holds a value (``None`` included)."""
        return key in self._state

    @property
    def state(self) -> Mapping[str, Any]:
        """A read-only view of every key and value."""
        return MappingProxyType(self._state)

    @property
    def pending_question(self) -> str | None:
        """The question a suspended run of this scope waits on (``None``: nothing waits); answer it
        with ``agent.resume(scope, answer)``."""
        pending = self._root._pending
        question = pending.get("question") if pending else None
        return str(question) if question is not None else None

    @property
    def invocations(self) -> tuple[AgentInvocation, ...]:
        """One invocation tree per run of this scope, oldest first."""
        root = self._root
        with root._lock:
            runs = list(root._runs)
        return tuple(r if isinstance(r, AgentInvocation) else r.freeze() for r in runs)

    def __repr__(self) -> str:
        return f"AgenticScope(id={self.id!r}, keys={sorted(self._state)!r})"

    def __getstate__(self) -> dict[str, Any]:
        return {"json": self.to_json()}

    def __setstate__(self, data: dict[str, Any]) -> None:
        other = AgenticScope.from_json(data["json"])
        self.__dict__.update(other.__dict__)

    # -- JSON -------------------------------------------------------------------------------------

    def to_json(self) -> str:
        """The whole scope as JSON text (``AgenticScopeError`` when a value has no JSON form)."""
        root = self._root
        with root._lock:
            data = {
                "format": FORMAT,
                "v": FORMAT_VERSION,
                "id": self.id,
                "state": {k: encode_value(v, repr(k)) for k, v in self._state.items()},
                "initial": {k: encode_value(v, repr(k)) for k, v in root._initial.items()},
                "journal": {k: _encode_entry(k, e) for k, e in root._journal.items()},
                "invocations": [(r if isinstance(r, AgentInvocation) else r.freeze()).to_dict() for r in root._runs],
                "pending": root._pending,
            }
            try:
                return json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
            except (TypeError, ValueError) as exc:  # an encoder returned something JSON cannot hold
                raise AgenticScopeError(f"the scope could not be written as JSON: {exc}") from None

    @staticmethod
    def from_json(
        text: str | bytes, *, max_chars: int = MAX_SCOPE_JSON_CHARS, max_depth: int = MAX_SCOPE_JSON_DEPTH
    ) -> AgenticScope:
        """Rebuild a scope from :meth:`to_json` output.

        Hostile input is refused with ``AgenticScopeError``: text longer than ``max_chars``, nesting
        deeper than ``max_depth``, malformed parts, and any type name not registered here.
        """
        if not isinstance(text, (str, bytes)):
            raise TypeError(f"from_json takes the JSON text, got {type(text).__name__}")
        if len(text) > max_chars:
            raise AgenticScopeError(
                f"scope JSON of {len(text):,} characters is larger than max_chars={max_chars:,}; raise the limit if "
                "it is trusted"
            )
        try:
            data = jsonsafe.loads(text, max_depth=max_depth)
        except jsonsafe.JSONDepthError:
            raise AgenticScopeError(f"scope JSON nests deeper than max_depth={max_depth}") from None
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:  # also an integer longer than Python reads
            raise AgenticScopeError(f"scope JSON is not valid JSON: {str(exc)[:200]}") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise AgenticScopeError("this JSON is not an agentic scope (no 'format': 'chatclient.agentic_scope')")
        if data.get("v") != FORMAT_VERSION:
            raise AgenticScopeError(f"unsupported agentic scope format version {data.get('v')!r}; upgrade chatclient")
        state, initial, journal = data.get("state"), data.get("initial", {}), data.get("journal", {})
        runs, pending, scope_id = data.get("invocations", []), data.get("pending"), data.get("id")
        if not (
            isinstance(state, dict)
            and isinstance(initial, dict)
            and isinstance(journal, dict)
            and isinstance(runs, list)
            and (pending is None or isinstance(pending, dict))
            and isinstance(scope_id, str)
            and scope_id
        ):
            raise AgenticScopeError("scope JSON is malformed: state, initial, journal, invocations or id")
        if pending is not None and not (
            isinstance(pending.get("key"), str)
            and isinstance(pending.get("question"), str)
            and (pending.get("output_key") is None or isinstance(pending.get("output_key"), str))
            and (
                pending.get("token") is None or (isinstance(pending.get("token"), str) and len(pending["token"]) <= 200)
            )
        ):
            raise AgenticScopeError("scope JSON holds a malformed pending question")
        scope = AgenticScope(id=scope_id[:200])
        try:
            scope._state = {str(k): decode_value(v) for k, v in state.items()}
            scope._initial = {str(k): decode_value(v) for k, v in initial.items()}
            scope._journal = {str(k): _decode_entry(v) for k, v in journal.items()}
            scope._runs = [AgentInvocation.from_dict(r) for r in runs]
        except RecursionError:
            raise AgenticScopeError("scope JSON nests too deeply to read") from None
        except (ValueError, TypeError, OverflowError) as exc:  # the last guard: every failure here is typed
            raise _malformed(exc) from None
        scope._pending = pending
        return scope

    # -- used by the run machinery ----------------------------------------------------------------

    def branch(self) -> AgenticScope:
        """A scope that reads through to this one and keeps its own writes (a parallel branch)."""
        return _BranchScope(self)

    def merge(self, branch: AgenticScope) -> None:
        """Write a branch's own writes into this scope."""
        assert isinstance(branch, _BranchScope)
        for key, value in branch._local.items():
            self.write(key, value)


class _BranchScope(AgenticScope):
    """A parallel branch's view: reads fall through to the parent; writes stay local until merged."""

    def __init__(self, parent: AgenticScope) -> None:
        self.id = parent.id
        self._parent = parent
        self._local: dict[str, Any] = {}
        self._recording = None
        self._lock = parent._root._lock

    def read(self, key: str, default: Any = None) -> Any:
        value = self._local.get(key, _MISSING)
        return self._parent.read(key, default) if value is _MISSING else value

    def write(self, key: str, value: Any) -> None:
        _check_key(key)
        self._local[key] = value
        if self._recording is not None:
            self._recording[key] = value

    def has(self, key: str) -> bool:
        return key in self._local or self._parent.has(key)

    @property
    def _root(self) -> AgenticScope:
        return self._parent._root

    @property
    def _state(self) -> dict[str, Any]:  # type: ignore[override]
        merged = dict(self._parent.state)
        merged.update(self._local)
        return merged

    @_state.setter
    def _state(self, value: dict[str, Any]) -> None:
        raise AttributeError("a branch scope's state is its parent's plus its own writes")


_register_builtins()

__all__ = ["AgentInvocation", "AgenticScope", "register_type"]
