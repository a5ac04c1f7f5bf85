"""Human approval of tool calls: approve, deny with a message the model sees, or edit the arguments.

``ToolApprovalAdvisor`` sits just inside the tool loop (``ToolCallAdvisor``), so it sees every model
turn before its tool calls run. Calls that need approval (tools marked
``@tool(requires_approval=True)``, or matched by ``policy``) are decided

* by ``callback(call) -> ApprovalDecision`` (sync or async), right there, or
* without a callback, by a person later: the request ends with a paused answer (finish reason
  ``"approval_required"``) whose context holds a ``PendingToolCalls``. Store it (``to_json`` or
  ``save`` into a chat-memory repository), and resume with
  ``client.prompt().tools(...).resume(pending, decisions).call()`` — in this process or another.

Decisions are recorded in the tool exchange: each decided call carries
``metadata["approval"]`` (``{"decision": "approve" | "deny" | "edit", ...}``; an edit keeps the
``original_arguments``), a denied call is answered ``"Denied: <message>"`` without running, and an
edited call runs with the edited arguments.

Stored state is input, not trust: a resume runs only the calls that were pending and are decided
now, with the name and arguments that were shown. A decision may be bound to the call a person saw
(``ApprovalDecision.approve(call=call)``, or ``call=call_digest(call)`` when only the digest
travels, e.g. in a web form); a bound decision applied to another name or other arguments, a
decision for a call that is not pending, a call pre-marked as decided, a repeated call id, or an
unmarked call whose tool needs approval is refused with ``ToolApprovalError`` before anything runs.
With ``ToolApprovalAdvisor(signing_key=...)`` the paused state also carries an HMAC-SHA256 over the
whole conversation, checked on resume by an advisor with the same key.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import inspect
import json
from collections.abc import AsyncIterator, Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any, Literal

from chatclient.advisor import (
    TOOL_CALL_ORDER,
    AdvisorChain,
    AsyncCallAdvisor,
    AsyncStreamAdvisor,
    CallAdvisor,
    StreamAdvisor,
)
from chatclient.errors import ToolApprovalError
from chatclient.messages import AssistantMessage, Message, ToolCall, ToolResponseMessage
from chatclient.models.base import (
    ChatResponse,
    ChatResponseMetadata,
    Generation,
    GenerationMetadata,
    ResponseAggregator,
)
from chatclient.request import ChatClientRequest, ChatClientResponse, ContextKeys

__all__ = [
    "APPROVAL_REQUIRED",
    "PENDING_TOOL_CALLS",
    "RESUME_TOOL_CALLS",
    "ApprovalDecision",
    "call_digest",
    "PendingToolCalls",
    "ToolApprovalAdvisor",
]

PENDING_TOOL_CALLS = "chatclient.tool.pending"
"""Response-context key: the ``PendingToolCalls`` of a paused request."""

RESUME_TOOL_CALLS = "chatclient.tool.resume"
"""Request-context key set by ``spec.resume``: the decided assistant tool-call message to run first."""

RESUME_PENDING = "chatclient.tool.resume.pending"
"""Request-context key set by ``spec.resume``: the ``PendingToolCalls`` being resumed (for the signature check)."""

APPROVAL_REQUIRED = "approval_required"
"""Finish reason of the paused answer."""

SIGNATURE_KEY = "approval_signature"
"""Metadata key of the paused tool-call message that holds the HMAC of a signed ``PendingToolCalls``."""

_MAX_MESSAGE = 2000


def call_digest(call: ToolCall) -> str:
    """SHA-256 (hex) of a tool call's id, name and arguments: what a person saw when deciding.

    >>> call_digest(ToolCall("c1", "pay", '{"to": "bob"}')) == call_digest(ToolCall("c1", "pay", '{"to": "eve"}'))
    False
    """
    payload = json.dumps([call.id, call.name, call.arguments], ensure_ascii=True, separators=(",", ":"))
    return hashlib.sha256(payload.encode("ascii")).hexdigest()


def _as_key(key: bytes | str) -> bytes:
    if isinstance(key, str):
        key = key.encode("utf-8")
    if not isinstance(key, bytes) or len(key) < 16:
        raise ValueError("signing_key needs at least 16 bytes (e.g. secrets.token_bytes(32)), kept by the application")
    return key


def _bound_digest(call: ToolCall | str | None) -> str | None:
    if call is None:
        return None
    if isinstance(call, ToolCall):
        return call_digest(call)
    if isinstance(call, str) and len(call) == 64 and all(ch in "0123456789abcdef" for ch in call):
        return call
    raise ValueError("call= takes the ToolCall that was shown or its call_digest() (64 lowercase hex characters)")


@dataclass(frozen=True, slots=True)
class ApprovalDecision:
    """A person's decision on one tool call; build it with ``approve()``, ``deny(message)`` or ``edit(arguments)``."""

    decision: Literal["approve", "deny", "edit"]
    message: str | None = None
    arguments: str | None = None
    call_digest: str | None = None
    """``call_digest()`` of the call this decision was made on; ``None`` = unbound (applies to the id's call)."""

    @classmethod
    def approve(cls, *, call: ToolCall | str | None = None) -> ApprovalDecision:
        """Run the call as the model asked; ``call=`` binds the decision to the call that was shown."""
        return cls("approve", call_digest=_bound_digest(call))

    @classmethod
    def deny(
        cls, message: str = "a person denied this tool call", *, call: ToolCall | str | None = None
    ) -> ApprovalDecision:
        """Do not run the call; the model gets ``message`` as the tool's (error) answer."""
        if not isinstance(message, str) or not message.strip():
            raise ValueError("deny() needs a message for the model, e.g. deny('not on weekends')")
        return cls("deny", message=message[:_MAX_MESSAGE], call_digest=_bound_digest(call))

    @classmethod
    def edit(cls, arguments: Mapping[str, Any] | str, *, call: ToolCall | str | None = None) -> ApprovalDecision:
        """Run the call with these arguments instead (a mapping, or JSON text of an object);
        ``call=`` binds the decision to the call that was shown."""
        text = arguments if isinstance(arguments, str) else json.dumps(dict(arguments))
        try:
            parsed = json.loads(text)
        except ValueError as exc:
            raise ValueError(f"edit() needs a JSON object of arguments: {exc}") from None
        if not isinstance(parsed, dict):
            raise ValueError("edit() needs a JSON object of arguments, e.g. edit({'city': 'Oslo'})")
        return cls("edit", arguments=text, call_digest=_bound_digest(call))

    def apply(self, call: ToolCall) -> ToolCall:
        """``call`` with this decision recorded (and the arguments replaced for an edit)."""
        record: dict[str, Any] = {"decision": self.decision}
        if self.decision == "deny":
            record["message"] = self.message
        arguments = call.arguments
        if self.decision == "edit" and self.arguments is not None:
            record["original_arguments"] = call.arguments
            arguments = self.arguments
        metadata = MappingProxyType({**call.metadata, "approval": record})
        return ToolCall(call.id, call.name, arguments, metadata)


def _decision_of(call: ToolCall) -> str | None:
    approval = call.metadata.get("approval")
    return str(approval.get("decision")) if isinstance(approval, Mapping) else None


@dataclass(frozen=True, slots=True)
class PendingToolCalls:
    """A request paused for approval: the conversation up to the model's tool-call message.

    ``calls`` are the calls waiting for a decision (marked ``{"decision": "pending"}``). Decide them
    with ``spec.resume(pending, decisions)``; ``decisions`` maps a call id to an ``ApprovalDecision``
    (or is a sequence in the order of ``calls``).
    """

    messages: tuple[Message, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "messages", tuple(self.messages))
        if not self.messages or not isinstance(self.messages[-1], AssistantMessage) or not self.messages[-1].tool_calls:
            raise ValueError("PendingToolCalls needs the conversation ending with the assistant's tool-call message")

    @property
    def assistant_message(self) -> AssistantMessage:
        message = self.messages[-1]
        assert isinstance(message, AssistantMessage)
        return message

    @property
    def calls(self) -> tuple[ToolCall, ...]:
        """The calls waiting for a decision."""
        return tuple(c for c in self.assistant_message.tool_calls if _decision_of(c) == "pending")

    def resolve(
        self,
        decisions: Mapping[str, ApprovalDecision] | Sequence[ApprovalDecision],
        *,
        signing_key: bytes | str | None = None,
    ) -> AssistantMessage:
        """The tool-call message with ``decisions`` applied; every pending call needs exactly one.

        Refuses with ``ToolApprovalError`` (nothing runs): a repeated call id, a call stored as
        already decided, a decision for an id that is not pending, a missing decision, a bound
        decision whose call digest differs from the stored call, and (with ``signing_key``) a
        missing or wrong signature.
        """
        if signing_key is not None:
            self.verify(signing_key)
        all_calls = self.assistant_message.tool_calls
        ids = [c.id for c in all_calls]
        if len(set(ids)) != len(ids):
            raise ToolApprovalError("the paused tool-call message repeats a call id; the stored state was altered")
        for c in all_calls:
            state = _decision_of(c)
            if state is not None and state != "pending":
                raise ToolApprovalError(
                    f"call {c.id!r} ({c.name}) is stored as already decided ({state!r}); a paused request holds "
                    "only pending calls, so the stored state was altered"
                )
        pending = self.calls
        if isinstance(decisions, Mapping):
            by_id = dict(decisions)
        else:
            if len(decisions) != len(pending):
                raise ToolApprovalError(f"{len(pending)} call(s) wait for a decision, got {len(decisions)} decision(s)")
            by_id = {c.id: d for c, d in zip(pending, decisions, strict=True)}
        for d in by_id.values():
            if not isinstance(d, ApprovalDecision):
                raise TypeError(f"decisions must be ApprovalDecision objects, got {type(d).__name__}")
        pending_ids = {c.id for c in pending}
        unknown = [str(k) for k in by_id if k not in pending_ids]
        if unknown:
            raise ToolApprovalError(
                f"decision(s) for {', '.join(map(repr, unknown))}, which wait for no decision; "
                f"pending: {', '.join(map(repr, sorted(pending_ids))) or 'none'}"
            )
        missing = [c.name for c in pending if c.id not in by_id]
        if missing:
            raise ToolApprovalError(f"no decision for the pending call(s) of {', '.join(missing)}")
        for c in pending:
            bound = by_id[c.id].call_digest
            if bound is not None and not hmac.compare_digest(bound, call_digest(c)):
                raise ToolApprovalError(
                    f"the decision for call {c.id!r} was made on another name or other arguments than the "
                    f"stored call ({c.name}); show the stored call and decide again"
                )
        calls = tuple(by_id[c.id].apply(c) if c.id in by_id else c for c in all_calls)
        return replace(self.assistant_message, tool_calls=calls)

    # -- signing ----------------------------------------------------------------------------------

    def _mac(self, key: bytes | str) -> str:
        from chatclient.memory.serialization import message_to_dict

        last = self.assistant_message
        unsigned = replace(last, metadata={k: v for k, v in last.metadata.items() if k != SIGNATURE_KEY})
        body = [message_to_dict(m) for m in (*self.messages[:-1], unsigned)]
        canonical = json.dumps(body, sort_keys=True, ensure_ascii=True, separators=(",", ":"))
        return hmac.new(_as_key(key), canonical.encode("ascii"), hashlib.sha256).hexdigest()

    def sign(self, key: bytes | str) -> PendingToolCalls:
        """A copy carrying an HMAC-SHA256 of the whole paused conversation under ``key``."""
        last = self.assistant_message
        signed = replace(last, metadata={**last.metadata, SIGNATURE_KEY: self._mac(key)})
        return PendingToolCalls((*self.messages[:-1], signed))

    def verify(self, key: bytes | str) -> None:
        """``ToolApprovalError`` unless this state carries a valid signature under ``key``."""
        stored = self.assistant_message.metadata.get(SIGNATURE_KEY)
        if not isinstance(stored, str):
            raise ToolApprovalError("the paused state carries no signature, but a signing key is set: refusing it")
        if not hmac.compare_digest(stored, self._mac(key)):
            raise ToolApprovalError("the paused state's signature does not match: it was altered or signed with another key")

    # -- persistence ----------------------------------------------------------------------------

    def to_json(self) -> str:
        """JSON text of the paused conversation (the memory serialisation format)."""
        from chatclient.memory.serialization import messages_to_json

        return messages_to_json(self.messages)

    @classmethod
    def from_json(cls, text: str | bytes) -> PendingToolCalls:
        from chatclient.memory.serialization import messages_from_json

        return cls(tuple(messages_from_json(text)))

    def save(self, repository: Any, key: str) -> None:
        """Store in a chat-memory repository (SQLite, PostgreSQL, Redis …) under ``key``."""
        repository.save_all(key, list(self.messages))

    @classmethod
    def load(cls, repository: Any, key: str) -> PendingToolCalls:
        """Read what ``save`` stored; ``LookupError`` when nothing is pending under ``key``."""
        messages = tuple(repository.find(key))
        if not messages:
            raise LookupError(f"no paused request is stored under {key!r}")
        return cls(messages)


ApprovalCallback = Callable[[ToolCall], "ApprovalDecision | Any"]
ApprovalPolicy = Callable[[ToolCall], bool] | Collection[str]


class ToolApprovalAdvisor(CallAdvisor, StreamAdvisor, AsyncCallAdvisor, AsyncStreamAdvisor):
    """Pauses tool calls that need a person's decision (see the module docs).

    ``policy``: ``None`` (tools marked ``@tool(requires_approval=True)``), a collection of tool
    names, or ``fn(call) -> bool``. ``callback(call) -> ApprovalDecision`` (may be async) decides
    at once; without it the request ends with a ``PendingToolCalls`` in the response context under
    ``PENDING_TOOL_CALLS`` (read it with ``ToolApprovalAdvisor.pending(response)``).

    ``signing_key`` (bytes or text, at least 16 bytes, kept by the application): paused state is
    signed with HMAC-SHA256, and a resume through this advisor refuses state that is unsigned or
    whose signature fails (``ToolApprovalError``). Put the same advisor on the resuming client.
    """

    def __init__(
        self,
        policy: ApprovalPolicy | None = None,
        callback: ApprovalCallback | None = None,
        *,
        order: int = TOOL_CALL_ORDER + 1,
        signing_key: bytes | str | None = None,
    ) -> None:
        if policy is not None and not callable(policy) and isinstance(policy, (str, bytes)):
            raise TypeError("policy must be a collection of tool names or a function, not a single string")
        self.policy = policy
        self.callback = callback
        self.order = order
        self.signing_key = _as_key(signing_key) if signing_key is not None else None

    def __repr__(self) -> str:
        signed = ", signed" if self.signing_key is not None else ""
        return f"ToolApprovalAdvisor(policy={self.policy!r}, order={self.order}{signed})"

    @staticmethod
    def pending(response: ChatClientResponse) -> PendingToolCalls | None:
        """The ``PendingToolCalls`` of a paused response, else ``None``."""
        value = response.context.get(PENDING_TOOL_CALLS)
        return value if isinstance(value, PendingToolCalls) else None

    # -- deciding ---------------------------------------------------------------------------------

    def _needs(self, call: ToolCall, request: ChatClientRequest) -> bool:
        if _decision_of(call) is not None:
            return False  # decided already (a resumed call)
        policy = self.policy
        if policy is None:
            for cb in request.context.get(ContextKeys.TOOL_CALLBACKS) or ():
                if cb.definition.name == call.name:
                    return bool(getattr(cb, "requires_approval", False))
            return False
        if callable(policy):
            return bool(policy(call))
        return call.name in policy

    def _resume(self, request: ChatClientRequest) -> ChatClientResponse | None:
        """On the first turn of a resumed request: the decided tool-call message instead of a model call."""
        message = request.context.get(RESUME_TOOL_CALLS)
        if not isinstance(message, AssistantMessage):
            return None
        ids = {c.id for c in message.tool_calls}
        for m in request.prompt.messages:
            if isinstance(m, ToolResponseMessage) and any(r.id in ids for r in m.responses):
                return None  # those calls have run: this is a later turn
        if self.signing_key is not None:
            stored = request.context.get(RESUME_PENDING)
            if not isinstance(stored, PendingToolCalls):
                raise ToolApprovalError("a signed resume needs the PendingToolCalls from spec.resume(...)")
            stored.verify(self.signing_key)
        for call in message.tool_calls:
            if _decision_of(call) is None and self._needs(call, request):
                raise ToolApprovalError(
                    f"call {call.id!r} ({call.name}) needs approval but was not pending in the stored state; "
                    "nothing ran"
                )
        response = ChatResponse((Generation(message, GenerationMetadata("tool_calls")),), ChatResponseMetadata())
        return ChatClientResponse(response, request.context)

    @staticmethod
    def _calls_of(cr: ChatResponse | None) -> tuple[int, AssistantMessage] | None:
        if cr is None:
            return None
        for index, g in enumerate(cr.generations):
            if g.output.tool_calls:
                return index, g.output
        return None

    def _paused(
        self, request: ChatClientRequest, response: ChatClientResponse, message: AssistantMessage, needs: set[str]
    ) -> ChatClientResponse:
        marked = tuple(
            ToolCall(c.id, c.name, c.arguments, MappingProxyType({**c.metadata, "approval": {"decision": "pending"}}))
            if c.id in needs
            else c
            for c in message.tool_calls
        )
        pending = PendingToolCalls((*request.prompt.messages, replace(message, tool_calls=marked)))
        if self.signing_key is not None:
            pending = pending.sign(self.signing_key)
        cr = response.chat_response
        md = cr.metadata if cr is not None else ChatResponseMetadata()
        names = ", ".join(sorted({c.name for c in message.tool_calls if c.id in needs}))
        paused = ChatResponse(
            (
                Generation(
                    AssistantMessage(None, metadata={"pending_tool_calls": names}),
                    GenerationMetadata(APPROVAL_REQUIRED),
                ),
            ),
            md,
        )
        return response.mutate(chat_response=paused, context={PENDING_TOOL_CALLS: pending})

    def _decided(
        self,
        response: ChatClientResponse,
        index: int,
        message: AssistantMessage,
        decisions: Mapping[str, ApprovalDecision],
    ) -> ChatClientResponse:
        cr = response.chat_response
        assert cr is not None
        calls = tuple(decisions[c.id].apply(c) if c.id in decisions else c for c in message.tool_calls)
        gens = list(cr.generations)
        gens[index] = Generation(replace(message, tool_calls=calls), gens[index].metadata)
        return response.mutate(chat_response=ChatResponse(tuple(gens), cr.metadata))

    def _check(self, decision: Any, call: ToolCall) -> ApprovalDecision:
        if not isinstance(decision, ApprovalDecision):
            raise TypeError(
                f"the approval callback must return an ApprovalDecision for {call.name}, got {type(decision).__name__}"
            )
        return decision

    def _review(self, request: ChatClientRequest, response: ChatClientResponse) -> ChatClientResponse:
        found = self._calls_of(response.chat_response)
        if found is None:
            return response
        index, message = found
        needs = {c.id for c in message.tool_calls if self._needs(c, request)}
        if not needs:
            return response
        if self.callback is None:
            return self._paused(request, response, message, needs)
        from chatclient.models.base import run_sync

        decisions: dict[str, ApprovalDecision] = {}
        for call in message.tool_calls:
            if call.id in needs:
                value = self.callback(call)
                if inspect.isawaitable(value):
                    value = run_sync(value)
                decisions[call.id] = self._check(value, call)
        return self._decided(response, index, message, decisions)

    async def _areview(self, request: ChatClientRequest, response: ChatClientResponse) -> ChatClientResponse:
        found = self._calls_of(response.chat_response)
        if found is None:
            return response
        index, message = found
        needs = {c.id for c in message.tool_calls if self._needs(c, request)}
        if not needs:
            return response
        if self.callback is None:
            return self._paused(request, response, message, needs)
        callback = self.callback
        decisions: dict[str, ApprovalDecision] = {}
        for call in message.tool_calls:
            if call.id in needs:
                if inspect.iscoroutinefunction(callback):
                    value = await callback(call)
                else:
                    # A sync callback may block on a person: keep the event loop free.
                    value = await asyncio.to_thread(callback, call)
                    if inspect.isawaitable(value):
                        value = await value
                decisions[call.id] = self._check(value, call)
        return self._decided(response, index, message, decisions)

    # -- the four modes ---------------------------------------------------------------------------

    def advise_call(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientResponse:
        resumed = self._resume(request)
        if resumed is not None:
            return resumed
        return self._review(request, chain.next_call(request))

    async def advise_acall(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientResponse:
        resumed = self._resume(request)
        if resumed is not None:
            return resumed
        return await self._areview(request, await chain.next_acall(request))

    def advise_stream(self, request: ChatClientRequest, chain: AdvisorChain) -> Iterator[ChatClientResponse]:
        resumed = self._resume(request)
        if resumed is not None:
            yield resumed
            return
        held: list[ChatClientResponse] = []
        for response in chain.next_stream(request):
            cr = response.chat_response
            if held or (cr is not None and cr.has_tool_calls()):
                held.append(response)  # a turn with tool calls is decided once it is complete
            else:
                yield response
        if held:
            yield from self._after_turn(request, held, self._review)

    async def advise_astream(
        self, request: ChatClientRequest, chain: AdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        resumed = self._resume(request)
        if resumed is not None:
            yield resumed
            return
        held: list[ChatClientResponse] = []
        async for response in chain.next_astream(request):
            cr = response.chat_response
            if held or (cr is not None and cr.has_tool_calls()):
                held.append(response)
            else:
                yield response
        if held:
            whole = _merge(held)
            reviewed = await self._areview(request, whole)
            for item in held if reviewed is whole else [reviewed]:
                yield item

    def _after_turn(
        self,
        request: ChatClientRequest,
        held: list[ChatClientResponse],
        review: Callable[[ChatClientRequest, ChatClientResponse], ChatClientResponse],
    ) -> list[ChatClientResponse]:
        whole = _merge(held)
        reviewed = review(request, whole)
        # Unchanged: the original chunks go on; changed: one chunk with the decided (or paused) turn.
        return held if reviewed is whole else [reviewed]


def _merge(held: list[ChatClientResponse]) -> ChatClientResponse:
    aggregator = ResponseAggregator()
    for response in held:
        aggregator.add(response.chat_response)
    return held[-1].mutate(chat_response=aggregator.result())
