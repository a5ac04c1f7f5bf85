"""What the three wire protocols of ``chatclient.serving`` share: the edge between HTTP and a target.

Each protocol module (``openai_compat``, ``ag_ui``, ``ai_sdk``) is a translation and nothing else: it
parses its body into a ``ChatTurn``, runs the turn through an ``Edge``, and turns the events into
its own wire format. Everything else lives here, once:

``Edge(auth=, allowed_hosts=, allowed_origins=, max_body_bytes=, max_duration=, surface=,
conversation_namespace=)``
    The options every app takes. ``edge.app(routes, render=...)`` builds the ASGI app: the routes
    on Starlette, behind the Host/Origin/auth gate of ``chatclient.asgi_guard`` (``render`` turns a
    refusal — 401/403/421 — into the protocol's own error shape) and an explicit CORS policy (the
    loopback origins and ``allowed_origins``, nothing else). The result is a ``ServingApp`` (an ASGI
    callable that remembers its edge, so ``serve`` can warn about an unprotected public bind).
``await edge.read_json(request)``
    The body as JSON: ``EdgeError`` 413 when it is over ``max_body_bytes`` (refused from
    ``Content-Length`` before reading, or as soon as a chunked body passes the cap), 400 when it is
    not JSON (or nested deeper than ``MAX_JSON_DEPTH``).
``edge.principal(request)``
    What the ``auth`` hook returned for this request (``None`` without a hook).
``edge.conversation_key(conversation_id, principal)``
    The memory conversation id (and agent scope id) of a caller's id: with a principal, bound to
    its identity (``principal_identity``: a ``str`` principal, its ``id``, or the app's
    ``conversation_namespace(principal)``) as ``namespaced_conversation_id(identity, id)``, so one
    user never reaches another's conversation or suspended run; without one, the id as given;
    ``None``, a fresh random id. ``run_events`` / ``start_events`` / ``whole_events`` apply it.
``edge.run_events(target, turn, principal=..., stream=True)`` / ``edge.start_events(...)``
    Runs one turn (a ``ChatTurn``) on a ``ChatClient`` or an agent and yields ``chatclient.events``
    events: ``TextDelta``, ``ReasoningDelta``, ``ToolCallStarted``/``ToolCallFinished`` (the
    target's own tools, run here), ``DocumentsRetrieved``, ``UsageUpdate``, ``AdvisorEvent``, and
    ``Finished`` (the whole answer) last; agents add ``AgentStarted``/``AgentFinished``. Three events
    of this module complete the picture: ``ToolCallsReturned`` (the model called tools the CALLER
    sent: the turn ends and the calls go back), ``RunSuspended`` (an agent's ``human_input`` waits;
    the next turn of the same conversation id is the answer) and ``ScopeSnapshot`` (an agent's scope
    at the end of its run). The principal is in the request context as ``ContextKeys.PRINCIPAL``;
    the conversation id is memory's (``ContextKeys.CONVERSATION_ID``); a turn without one gets a
    fresh id, so callers never share a memory conversation by accident. With a conversation id, the
    caller's tool calls a turn returned are added to the target's memory after the question.
    ``stream=False`` calls the model without streaming (the events come at the end, the answer on
    ``Finished``). ``start_events`` sets the run up before returning, so a turn the target cannot
    take raises ``EdgeError`` (400) while an HTTP status can still say so; ``run_events`` raises
    everything while iterating. ``await edge.whole_events(target, turn, principal=...)`` is the
    ``stream=False`` run as one sequence of events, for answers sent whole (no stream to drive).
    An agent target runs through its public ``arun_stream`` / ``aresume_stream``, the principal
    in every model call of its agents (``advisor_params``).
``edge.event_stream(frames, headers=...)``
    An ASGI response that sends each ``bytes`` frame as it comes and cancels the producer (and so
    the model call) as soon as the client disconnects — not at the next write, which may be long in
    coming. What a cancelled turn leaves in memory is the question only (the round-2 rule).
``await edge.until_disconnect(request, awaitable)``
    The same cancellation for a non-streaming answer (the client is watched from the moment the
    work first waits). ``JsonAnswer(body_bytes, status=, headers=)`` sends a pre-rendered JSON body.
``error_for(exc) -> EdgeError``
    What to tell the caller about any exception: 429 + ``retry_after`` (a rate limiter's wait, or
    the seconds left in a refusing budget's period; ``BUDGET_RETRY_AFTER`` when it names none), 502 (the upstream model failed; the message names the failure, never its text, which
    may quote a provider's body), 504 (``max_duration`` passed), 400 (an input guardrail refused),
    500 (``"internal error"``, nothing more) for anything else. Protocols render it in their shape,
    as an HTTP error before streaming began and in-stream after.
``resolve_target(target, name)`` / ``target_names(target)`` / ``has_memory(target)``
    A target is a ``ChatClient``, an agent, or a mapping name -> either; a single target is named
    ``"chatclient"``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from chatclient.asgi_guard import AuthHook, HostOriginGuard, Refusal, guarded
from chatclient.errors import ChatClientError
from chatclient.events import Finished, StreamEvent, check_max_duration
from chatclient.request import ContextKeys

if TYPE_CHECKING:
    from chatclient.client import ChatClient
    from chatclient.messages import Message, ToolCall
    from chatclient.options import ChatOptions
    from chatclient.prompt import ToolDefinition

T = TypeVar("T")
_log = logging.getLogger("chatclient.serving")

DEFAULT_MAX_BODY_BYTES = 1_048_576
BODY_READ_SECONDS = 30.0
"""How long a request body may take to arrive in full (408 after): a client that sends its body a byte at
a time must not hold a connection and a worker for ever."""
SINGLE_TARGET_NAME = "chatclient"
"""The model name of a single (unnamed) target."""
BUDGET_RETRY_AFTER = 60
"""``Retry-After`` seconds of a budget refusal that names no reset time (a budget without a period,
a per-request limit): a hint to come back later, since the contract asks every 429 for one."""
MAX_JSON_DEPTH = 64
"""Deepest nesting accepted in a request body."""
MAX_SUSPENDED_RUNS = 10_000
"""Agent runs waiting for a human an app keeps (callers pick conversation ids; the oldest go first)."""
_PRINCIPAL_SCOPE_KEY = "chatclient.principal"
_STREAM_HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}


def _require_starlette() -> None:
    try:
        import starlette  # noqa: F401
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        raise ImportError("chatclient.serving needs Starlette and Uvicorn: pip install 'chatclient[serve]'") from exc


# -- errors -------------------------------------------------------------------------------------


class EdgeError(ChatClientError):
    """A failure to report to the caller: HTTP ``status``, a ``message`` safe to show, an OpenAI-style
    ``type`` and ``code``, and ``retry_after`` seconds for 429s."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        code: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.code = code
        self.retry_after = retry_after

    def headers(self) -> dict[str, str]:
        """The response headers this error needs (``Retry-After`` for 429s)."""
        if self.retry_after is None:
            return {}
        return {"retry-after": str(max(1, int(-(-self.retry_after // 1))))}  # whole seconds, rounded up

    @staticmethod
    def from_refusal(refusal: Refusal) -> EdgeError:
        """The gate's refusal (401 / 403 / 421) as an ``EdgeError``."""
        kinds = {401: ("authentication_error", "invalid_api_key"), 403: ("permission_error", "forbidden_origin")}
        kind, code = kinds.get(refusal.status, ("invalid_request_error", "misdirected_request"))
        return EdgeError(refusal.status, refusal.message, type=kind, code=code)


def error_response(error: EdgeError, body: Any) -> Any:
    """``body`` as the JSON answer to ``error`` before any stream began: its HTTP status, its headers
    (``Retry-After`` for 429s) and ``WWW-Authenticate: Bearer`` on a 401."""
    from starlette.responses import JSONResponse

    headers = error.headers()
    if error.status == 401:
        headers["www-authenticate"] = "Bearer"
    return JSONResponse(body, status_code=error.status, headers=headers)


def error_for(exc: BaseException) -> EdgeError:
    """What to report for ``exc`` (see the module docs); the causes of wrapped errors count."""
    from chatclient.errors import (
        BudgetExceededError,
        CircuitOpenError,
        DeadlineExceededError,
        InputGuardrailError,
        ModelError,
        ModelHTTPError,
        RateLimitError,
    )

    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, EdgeError):
            return current
        if isinstance(current, RateLimitError):
            return EdgeError(
                429,
                "Rate limit reached: retry later.",
                type="rate_limit_error",
                code="rate_limit_exceeded",
                retry_after=current.retry_after if current.retry_after else 1.0,
            )
        if isinstance(current, BudgetExceededError):
            return EdgeError(
                429,
                "Budget exhausted: retry later.",
                type="rate_limit_error",
                code="budget_exceeded",
                retry_after=current.retry_after if current.retry_after else BUDGET_RETRY_AFTER,
            )
        if isinstance(current, DeadlineExceededError):
            return EdgeError(504, "The request ran past its time limit.", type="timeout", code="timeout")
        if isinstance(current, InputGuardrailError):
            return EdgeError(400, "The request was refused by an input guardrail.", code="guardrail_refused")
        if isinstance(current, CircuitOpenError):
            return EdgeError(
                502, "The upstream model is unavailable.", type="upstream_error", code="upstream_unavailable"
            )
        if isinstance(current, ModelError):
            # Never the exception's text: it may quote a provider's body. Its kind and status are safe.
            detail = type(current).__name__
            if isinstance(current, ModelHTTPError) and current.status:
                detail += f", HTTP {current.status}"
            return EdgeError(
                502, f"The upstream model failed ({detail}).", type="upstream_error", code="upstream_error"
            )
        current = current.__cause__ or current.__context__
    # The caller sees nothing of it; the operator gets the traceback (as Starlette logs an unhandled error).
    # Model failures never reach this line: they are 502s above, whose provider text is never shown.
    _log.error("serving: unexpected %s while answering a request", type(exc).__name__, exc_info=exc)
    return EdgeError(500, "Internal error.", type="server_error", code="internal_error")


# -- conversations bound to principals ----------------------------------------------------------

_NAMESPACE_PREFIX = "p-"


def principal_identity(principal: Any, namespace: Callable[[Any], Any] | None = None) -> str:
    """The identity that namespaces a principal's conversations: ``namespace(principal)`` when the app
    has a ``conversation_namespace`` hook, else a ``str`` principal itself, else ``principal.id`` (or
    ``principal["id"]`` of a mapping). ``TypeError`` for a principal that names nobody (``True``, an
    object without ``id``): such a hook needs ``conversation_namespace=``, or every user would share
    every conversation id."""
    if namespace is not None:
        value = namespace(principal)
    elif isinstance(principal, str):
        value = principal
    elif isinstance(principal, Mapping):
        value = principal.get("id")
    else:
        value = getattr(principal, "id", None)
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value:
        raise TypeError(
            f"the auth hook's principal ({type(principal).__name__}) names no user to bind conversations to: "
            "return the user's id (a str), an object with an 'id', or pass conversation_namespace=(principal) -> str"
        )
    return value


def namespaced_conversation_id(identity: str, conversation_id: str) -> str:
    """``conversation_id`` as one user's: ``"p-" + sha256(identity)[:32 hex] + ":" + conversation_id``.

    The identity is hashed to a fixed-length hex part, so no identity or id can forge another pair's
    result (no separator in an identity can shift the split), and the stored ids do not show who the
    user is. Deterministic: the same user and id give the same conversation in every process.
    """
    digest = hashlib.sha256(identity.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return f"{_NAMESPACE_PREFIX}{digest}:{conversation_id}"


# -- the turn and the events this module adds ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ChatTurn:
    """One request to run, as the protocol parsed it.

    ``messages``: the conversation to send (system, user, assistant with tool calls, tool results),
    last user message last or followed by tool results; ``conversation_id``: memory's conversation
    (``None``: a fresh one); ``caller_tools``: tool definitions the caller sent, offered to the
    model and returned when called (``ToolCallsReturned``); ``options``: the caller's sampling
    options; ``context``: extra request-context entries (structured output); ``agent_inputs``: an
    agent's scope inputs (default: the newest user text under the agent's single input).
    """

    messages: tuple[Message, ...]
    conversation_id: str | None = None
    caller_tools: tuple[ToolDefinition, ...] = ()
    options: ChatOptions | None = None
    context: Mapping[str, Any] = field(default_factory=dict)
    agent_inputs: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class ToolCallsReturned(StreamEvent):
    """The model called tools the caller sent: the turn ends and these ``calls`` go back to the caller."""

    calls: tuple[ToolCall, ...]
    text: str = ""
    """Any text the model wrote in the same turn."""
    kind = "tool_calls_returned"


@dataclass(frozen=True, slots=True)
class RunSuspended(StreamEvent):
    """An agent's ``human_input`` step waits: ``question`` to show; the next turn of the conversation answers it."""

    question: str
    kind = "run_suspended"


@dataclass(frozen=True, slots=True)
class ScopeSnapshot(StreamEvent):
    """An agent's scope (its state) at the end of the run (suspended or not)."""

    state: Mapping[str, Any]
    kind = "scope_snapshot"


# -- targets -----------------------------------------------------------------------------------


def _is_agent(target: Any) -> bool:
    from chatclient.agents.base import Agent

    return isinstance(target, Agent)


def _is_client(target: Any) -> bool:
    from chatclient.client import ChatClient

    return isinstance(target, ChatClient)


def check_target(target: Any) -> Mapping[str, Any]:
    """The targets by name; ``TypeError`` for anything that is not a ChatClient, an agent or a mapping of them."""
    targets = dict(target) if isinstance(target, Mapping) else {SINGLE_TARGET_NAME: target}
    if not targets:
        raise ValueError("serving needs at least one target: a ChatClient, an agent or a mapping name -> either")
    for name, value in targets.items():
        if not isinstance(name, str) or not name:
            raise TypeError(f"target names are non-empty strings, got {name!r}")
        if not (_is_client(value) or _is_agent(value)):
            raise TypeError(
                f"a serving target is a ChatClient or an agent (chatclient.agents), got {type(value).__name__} "
                f"for {name!r}"
            )
    return targets


def target_names(targets: Mapping[str, Any]) -> list[str]:
    """The model names a caller may ask for."""
    return list(targets)


def resolve_target(targets: Mapping[str, Any], name: str | None) -> Any:
    """The target called ``name``; ``None`` or an unknown name with a single target picks it only when
    ``name`` is ``None``. Raises ``EdgeError`` 404 ``model_not_found`` otherwise."""
    if name is None and len(targets) == 1:
        return next(iter(targets.values()))
    if isinstance(name, str) and name in targets:
        return targets[name]
    shown = repr(name)[:80]
    raise EdgeError(
        404,
        f"The model {shown} does not exist; available: {', '.join(sorted(targets))[:500]}.",
        code="model_not_found",
    )


def has_memory(target: Any) -> bool:
    """Whether a ChatClient target keeps a chat memory (an advisor with a ``chat_memory``)."""
    if not _is_client(target):
        return False
    return any(hasattr(a, "chat_memory") for a in target._defaults.advisors)


# -- the app -----------------------------------------------------------------------------------


class ServingApp:
    """An ASGI app built by ``chatclient.serving``, with the ``Edge`` it was built with."""

    __slots__ = ("_asgi", "edge")

    def __init__(self, asgi: Any, edge: Edge) -> None:
        self._asgi = asgi
        self.edge = edge

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self._asgi(scope, receive, send)


class _Dispatch:
    """The app's routes: a POST or GET to a fixed path goes straight to its (async) endpoint; the
    rest (path parameters, 404, 405, HEAD) to Starlette's ``Router``, which answers the same way
    for them, with a few more layers per request."""

    __slots__ = ("exact", "router")

    def __init__(self, routes: Sequence[Any], router: Any) -> None:
        import inspect

        from starlette.routing import Route

        self.router = router
        self.exact: dict[tuple[str, str], Any] = {}
        for route in routes:
            if (
                type(route) is Route
                and not route.param_convertors
                and inspect.iscoroutinefunction(route.endpoint)
                and route.methods
            ):
                for method in route.methods & {"GET", "POST"}:
                    self.exact.setdefault((route.path, method), route.endpoint)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            path: str = scope["path"]
            root = scope.get("root_path", "")
            if root and path.startswith(root + "/"):  # mounted: the route path is below the mount
                path = path[len(root) :]
            endpoint = self.exact.get((path, scope["method"]))
            if endpoint is not None:
                from starlette.requests import Request

                response = await endpoint(Request(scope, receive, send))
                await response(scope, receive, send)
                return
        await self.router(scope, receive, send)


class JsonAnswer:
    """A JSON response whose body is already bytes: two ASGI messages, nothing else."""

    __slots__ = ("body", "headers", "status")

    def __init__(self, body: bytes, *, status: int = 200, headers: Mapping[str, str] | None = None) -> None:
        self.body = body
        self.status = status
        self.headers = headers

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        raw = [(b"content-type", b"application/json"), (b"content-length", str(len(self.body)).encode())]
        if self.headers:
            raw.extend((k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in self.headers.items())
        await send({"type": "http.response.start", "status": self.status, "headers": raw})
        await send({"type": "http.response.body", "body": self.body})


class Edge:
    """The options and shared machinery of one serving app (see the module docs)."""

    def __init__(
        self,
        *,
        auth: AuthHook | None = None,
        allowed_hosts: Sequence[str] | None = None,
        allowed_origins: Sequence[str] | None = None,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        max_duration: float | None = None,
        surface: str = "a chatclient app",
        bind_host: str | None = None,
        conversation_namespace: Callable[[Any], Any] | None = None,
    ) -> None:
        if auth is not None and not callable(auth):
            raise TypeError("auth takes a function auth(request) -> principal | None (sync or async)")
        if conversation_namespace is not None and not callable(conversation_namespace):
            raise TypeError("conversation_namespace takes a function (principal) -> str, the user's identity")
        if isinstance(max_body_bytes, bool) or not isinstance(max_body_bytes, int) or max_body_bytes < 1:
            raise ValueError(f"max_body_bytes must be a positive int, got {max_body_bytes!r}")
        for label, value in (("allowed_hosts", allowed_hosts), ("allowed_origins", allowed_origins)):
            if isinstance(value, str):
                raise TypeError(f"{label} takes a list of strings, not one string")
        self.auth = auth
        self.conversation_namespace = conversation_namespace
        self.allowed_hosts = tuple(allowed_hosts or ())
        self.allowed_origins = tuple(allowed_origins or ())
        self.max_body_bytes = max_body_bytes
        self.max_duration = check_max_duration(max_duration) if max_duration is not None else None
        self.surface = surface
        self.guard = HostOriginGuard.for_bind(
            bind_host,
            self.allowed_hosts,
            self.allowed_origins,
            has_auth=auth is not None,
            surface=surface,
            guide="docs/guide/serving.md",
            strict=False,
        )
        from chatclient.agents.stores import InMemoryScopeStore

        # Scopes of agent runs waiting for a human (AG-UI interrupts), by conversation id; a run that
        # ends without waiting deletes its scope, so only suspended runs are kept.
        self.scope_store = InMemoryScopeStore()
        self._suspended: OrderedDict[str, None] = OrderedDict()  # their ids, oldest first
        # Agent conversations with a turn being answered now (in this process): a second turn of one
        # of them is refused, not run beside the first on the same stored scope.
        self._answering: set[str] = set()

    # -- building ------------------------------------------------------------------------------

    def app(self, routes: Sequence[Any], *, render: Any) -> ServingApp:
        """Starlette ``routes`` behind the gate (``render(EdgeError) -> Response``) and CORS."""
        _require_starlette()
        from starlette.middleware.cors import CORSMiddleware
        from starlette.routing import Router

        # A bare Router, not a Starlette app: its middleware (error pages, exception handlers) would
        # cost every request and do nothing here, where every failure is already answered.
        inner = _Dispatch(routes, Router(routes=list(routes)))
        gate = guarded(inner, self.guard, self.auth, render=lambda refusal: render(EdgeError.from_refusal(refusal)))
        origins = self.guard.origins
        if not origins:
            return ServingApp(gate, self)
        guard = self.guard

        class GuardedCORS(CORSMiddleware):
            def is_allowed_origin(self, origin: str) -> bool:
                return guard.allows_origin(origin)  # the gate's own rule: one matcher for both

        # Preflights carry no credentials, so CORS answers them before the auth hook runs.
        cors = GuardedCORS(
            gate,
            allow_methods=["GET", "POST", "OPTIONS"],
            allow_headers=["*"],
            allow_credentials=True,
            expose_headers=["x-conversation-id", "retry-after", "x-vercel-ai-ui-message-stream"],
        )

        async def asgi(scope: Any, receive: Any, send: Any) -> None:
            # CORS concerns browsers, which always send Origin: other callers (SDKs, servers) skip it.
            if scope["type"] == "http" and any(name == b"origin" for name, _ in scope.get("headers") or ()):
                await cors(scope, receive, send)
            else:
                await gate(scope, receive, send)

        return ServingApp(asgi, self)

    # -- reading -------------------------------------------------------------------------------

    async def read_body(self, request: Any) -> bytes:
        """The raw body, at most ``max_body_bytes`` (``EdgeError`` 413 past it)."""
        length = _content_length(request.scope)
        if length is not None:
            length = length.strip()
            if not (length.isascii() and length.isdigit()):  # "\xb2".isdigit(), yet int() refuses it
                raise EdgeError(400, "Invalid Content-Length header.")
            if int(length) > self.max_body_bytes:
                raise self._too_large()
        try:
            async with asyncio.timeout(BODY_READ_SECONDS):
                return await self._receive_body(request.receive)
        except TimeoutError:
            raise EdgeError(
                408, f"The request body did not arrive within {BODY_READ_SECONDS:g} seconds.", code="request_timeout"
            ) from None

    async def _receive_body(self, receive: Any) -> bytes:
        # the raw ASGI messages: cheaper than Starlette's body stream
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise EdgeError(499, "The client closed the connection.", code="client_closed")
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                raise self._too_large()
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    def _too_large(self) -> EdgeError:
        return EdgeError(
            413,
            f"The request body is larger than this server accepts ({self.max_body_bytes} bytes).",
            code="request_too_large",
        )

    async def read_json(self, request: Any) -> Any:
        """The body parsed as JSON (``EdgeError`` 413 over the cap, 400 when malformed or too deep)."""
        body = await self.read_body(request)
        try:
            data = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            raise EdgeError(400, "The request body is not valid JSON.", code="invalid_json") from None
        except RecursionError:
            raise EdgeError(400, "The request body is nested too deeply.", code="invalid_json") from None
        # Fewer openers than the limit cannot nest past it: the walk is only for bodies that might.
        if body.count(b"[") + body.count(b"{") > MAX_JSON_DEPTH and _depth(data) > MAX_JSON_DEPTH:
            raise EdgeError(
                400, f"The request body is nested deeper than {MAX_JSON_DEPTH} levels.", code="invalid_json"
            )
        return data

    @staticmethod
    def principal(request: Any) -> Any:
        """What the ``auth`` hook returned for this request (``None`` without a hook)."""
        return request.scope.get(_PRINCIPAL_SCOPE_KEY)

    def conversation_key(self, conversation_id: str | None, principal: Any = None) -> str:
        """The memory conversation id (and agent scope id) of the caller's ``conversation_id``.

        ``None``: a fresh random id (a turn without an id shares nothing). Without a principal (no
        ``auth`` hook) the caller's id as given. With one, the id is bound to the principal's identity
        (``principal_identity``): ``namespaced_conversation_id(identity, conversation_id)``, so one
        user can never continue, read or resume another user's conversation by sending its id.
        """
        if conversation_id is None:
            return f"serving-{os.urandom(16).hex()}"
        if principal is None:
            return conversation_id
        return namespaced_conversation_id(principal_identity(principal, self.conversation_namespace), conversation_id)

    # -- running -------------------------------------------------------------------------------

    def run_events(
        self, target: Any, turn: ChatTurn, *, principal: Any = None, stream: bool = True
    ) -> AsyncIterator[StreamEvent]:
        """Run ``turn`` on ``target`` (a ChatClient or an agent) and yield its events (see the module docs).

        ``stream=False`` (for answers sent whole) calls a ChatClient's model without streaming: the
        events then come at the end, without ``TextDelta``s (``Finished`` carries the answer).
        Everything, a turn the target refuses included (an ``EdgeError`` 400), is raised while
        iterating; ``start_events`` raises those before returning, to answer them with an HTTP status.
        """
        return self._lazily(target, turn, principal, stream)

    async def _lazily(self, target: Any, turn: ChatTurn, principal: Any, stream: bool) -> AsyncIterator[StreamEvent]:
        events = self.start_events(target, turn, principal=principal, stream=stream)
        try:
            async for event in events:
                yield event
        finally:
            await events.aclose()  # type: ignore[attr-defined]

    def start_events(
        self, target: Any, turn: ChatTurn, *, principal: Any = None, stream: bool = True
    ) -> AsyncIterator[StreamEvent]:
        """``run_events``, with the turn checked and the run set up first: a turn the target cannot
        take raises ``EdgeError`` (400) here or, for an agent (whose run starts with its first event),
        from the first event; ``first_event`` makes either an answer before anything is sent."""
        conversation_id = self._conversation_key(turn, principal)
        if _is_agent(target):
            return self._agent_events(target, turn, conversation_id, principal, turn.conversation_id is not None)
        runner = self._client_runner(target, turn, principal, conversation_id, stream)
        return self._client_events(target, runner, turn, conversation_id)

    async def whole_events(self, target: Any, turn: ChatTurn, *, principal: Any = None) -> Sequence[StreamEvent]:
        """The events of ``turn`` answered whole: what ``start_events(..., stream=False)`` yields, as one
        sequence once the answer is complete, without a stream to drive (the cheaper path for
        answers sent whole). Raises what the run raises (``EdgeError`` for a turn the target refuses)."""
        conversation_id = self._conversation_key(turn, principal)
        if _is_agent(target):
            return [
                event
                async for event in self._agent_events(
                    target, turn, conversation_id, principal, turn.conversation_id is not None
                )
            ]
        runner = self._client_runner(target, turn, principal, conversation_id, False)
        events: Sequence[StreamEvent] = (await runner.chat_client_response()).events
        if turn.conversation_id is not None and turn.caller_tools:
            await _remember_returned_calls(target, conversation_id, events)
        return events

    def _client_runner(
        self, client: ChatClient, turn: ChatTurn, principal: Any, conversation_id: str, stream: bool
    ) -> Any:
        spec = self._client_spec(client, turn, principal, conversation_id)
        try:
            return spec.astream() if stream else spec.acall()
        except ValueError as exc:
            # The one request-building error a caller causes: a tool of theirs named like a server tool.
            if turn.caller_tools and str(exc).startswith("duplicate tool name"):
                raise EdgeError(
                    400, "A tool in the request has the name of a tool of the server: rename it.", code="invalid_tools"
                ) from None
            raise

    def _conversation_key(self, turn: ChatTurn, principal: Any) -> str:
        try:
            return self.conversation_key(turn.conversation_id, principal)
        except TypeError as exc:  # the app's auth hook returned a principal that names nobody
            _log.error("%s: %s", self.surface, exc)
            raise EdgeError(500, "Internal error.", type="server_error", code="internal_error") from None

    def _client_spec(self, client: ChatClient, turn: ChatTurn, principal: Any, conversation_id: str) -> Any:
        from chatclient.messages import SystemMessage

        spec = client.prompt()
        messages = list(turn.messages)
        if not client._defaults.system_text and messages and isinstance(messages[0], SystemMessage):
            # The caller's system text becomes the system text only when the target has none of its
            # own: a served prompt's instructions are the server's, not the caller's to replace.
            spec.system(messages.pop(0).text)
        spec.messages(*messages)
        spec.advisors(
            params={**turn.context, ContextKeys.CONVERSATION_ID: conversation_id, ContextKeys.PRINCIPAL: principal}
        )
        if turn.options is not None:
            spec.options(_merged_options(client, turn.options))
        if turn.caller_tools:
            spec.tools(*(_CallerTool(d) for d in turn.caller_tools))
            spec.advisors(_return_caller_tools(frozenset(d.name for d in turn.caller_tools)))
        if self.max_duration is not None:
            spec.max_duration(self.max_duration)
        return spec

    async def _client_events(
        self, client: ChatClient, runner: Any, turn: ChatTurn, conversation_id: str
    ) -> AsyncIterator[StreamEvent]:
        remember = turn.conversation_id is not None and turn.caller_tools
        if not hasattr(runner, "events"):  # a whole answer (acall)
            response = await runner.chat_client_response()
            for event in response.events:
                if remember and isinstance(event, Finished):
                    await _remember_returned_calls(client, conversation_id, response.events)
                yield event
            return
        events = runner.events()
        returned: list[StreamEvent] = []
        try:
            async for event in events:
                if remember and isinstance(event, ToolCallsReturned):
                    returned.append(event)
                elif returned and isinstance(event, Finished):
                    await _remember_returned_calls(client, conversation_id, returned)
                yield event
        finally:
            await events.aclose()  # closes the chain and the model's response now

    def _agent_run(self, agent: Any, turn: ChatTurn, scope_id: str, principal: Any) -> Any:
        """The agent's run for this turn (an ``AgentRunStream``): a resume of the conversation's
        suspended run, or a new one. The principal reaches every model call of the run's agents."""
        store = self.scope_store
        params = {ContextKeys.PRINCIPAL: principal} if principal is not None else None
        stored = store.load(scope_id)
        answer = _newest_user_text(turn.messages)
        if stored is not None and stored.pending_question is not None:
            return agent.aresume_stream(
                stored, answer, scope_store=store, max_duration=self.max_duration, advisor_params=params
            )
        inputs = dict(turn.agent_inputs) if turn.agent_inputs is not None else _agent_inputs(agent, answer)
        if stored is not None:
            store.delete(scope_id)  # a finished run's scope: a new turn starts afresh
        # The inputs as one mapping, never as keywords: a caller's input named like one of arun_stream's
        # own keywords (monitor, max_duration, scope_store...) is then an input, not a run setting.
        return agent.arun_stream(
            inputs, scope_store=store, scope_id=scope_id, max_duration=self.max_duration, advisor_params=params
        )

    async def _agent_events(
        self, agent: Any, turn: ChatTurn, scope_id: str, principal: Any, resumable: bool
    ) -> AsyncIterator[StreamEvent]:
        """The events of the agent's run for ``turn`` under ``scope_id``; the run starts (its stored
        scope looked up, resumed or replaced) only when the first event is asked for."""
        if scope_id in self._answering:
            # Checked and marked with no await between: two turns of one conversation cannot both pass.
            raise EdgeError(
                409,
                "This conversation is still answering an earlier turn; send the next one when it has ended.",
                code="conversation_busy",
                retry_after=1.0,
            )
        self._answering.add(scope_id)
        try:
            run = self._agent_run(agent, turn, scope_id, principal)
            ended = False
            try:
                async for event in run:
                    yield event
                ended = True
            finally:
                await run.aclose()  # a client gone mid-run: the run's agents are cancelled now
                if not ended:
                    # Failed or left before its end: no answer will resume it, so its scope (stored
                    # when the run was claimed) must not stay in the store for ever.
                    self.scope_store.delete(scope_id)
                    self._suspended.pop(scope_id, None)
            result = run.result
            if result.suspended is None or not resumable:
                # Kept only while an answer can reach it: a turn without a conversation id ran under a
                # fresh random id no later turn can name.
                self.scope_store.delete(result.scope.id)
                self._suspended.pop(result.scope.id, None)
            else:
                self._keep_suspended(result.scope.id)
        finally:
            self._answering.discard(scope_id)
        if result.suspended is not None:
            yield RunSuspended(result.suspended.question)
        yield ScopeSnapshot(dict(result.scope.state))

    def _keep_suspended(self, scope_id: str) -> None:
        """Note a run now waiting under ``scope_id``; past ``MAX_SUSPENDED_RUNS`` drop the oldest waiting."""
        self._suspended[scope_id] = None
        self._suspended.move_to_end(scope_id)
        while len(self._suspended) > MAX_SUSPENDED_RUNS:
            oldest, _ = self._suspended.popitem(last=False)
            stored = self.scope_store.load(oldest)
            # Only if it still waits: since noted, it may have been answered and its id be running again.
            if stored is not None and stored.pending_question is not None:
                self.scope_store.delete(oldest)

    # -- answering -----------------------------------------------------------------------------

    @staticmethod
    def event_stream(
        frames: AsyncIterator[bytes], *, headers: Mapping[str, str] | None = None, media_type: str = "text/event-stream"
    ) -> Any:
        """An ASGI response streaming ``frames``; a client disconnect cancels the producer at once."""
        return _EventStream(frames, {**_STREAM_HEADERS, **(headers or {})}, media_type)

    async def first_event(self, request: Any, events: AsyncIterator[StreamEvent]) -> AsyncIterator[StreamEvent]:
        """``events`` once its first event has come: a failure before it (a budget or rate limit
        refusing the call, the upstream model refusing the connection) raises here, before a byte of
        the stream is sent, so it is answered with its own status (429 with ``Retry-After``, 502)
        instead of a 200 carrying an error. A client leaving meanwhile cancels the run."""
        iterator = aiter(events)
        try:
            first = await self.until_disconnect(request, anext(iterator))
        except StopAsyncIteration:
            return _events_from(None, iterator)
        except BaseException:
            aclose = getattr(iterator, "aclose", None)
            if aclose is not None:
                await aclose()  # the run's own clean-up (its claim, its scope) before the error answer
            raise
        return _events_from(first, iterator)

    @staticmethod
    async def until_disconnect(request: Any, awaitable: Awaitable[T]) -> T:
        """Await ``awaitable``, cancelling it when the client disconnects first (``EdgeError`` 499)."""
        current = asyncio.current_task()
        assert current is not None
        watch: asyncio.Future[None] | None = None

        def start_watching() -> None:
            nonlocal watch
            watch = asyncio.ensure_future(_disconnected(request.receive))
            # The work runs in this task (no second task per request); a disconnect cancels this task.
            watch.add_done_callback(lambda done: None if done.cancelled() else current.cancel())

        try:
            # The watch starts when the work first waits: work that never waits (an answer from a
            # cache, an instant model) is done before any other code could run, a disconnect included.
            return await _OnSuspend(awaitable, start_watching)
        except asyncio.CancelledError:
            if watch is not None and watch.done() and not watch.cancelled():
                current.uncancel()
                raise EdgeError(499, "The client closed the connection.", code="client_closed") from None
            raise
        finally:
            if watch is not None:
                watch.cancel()


async def _events_from(first: StreamEvent | None, rest: AsyncIterator[StreamEvent]) -> AsyncIterator[StreamEvent]:
    """``first`` (when there is one), then the rest; closing this closes the rest."""
    try:
        if first is not None:
            yield first
        async for event in rest:
            yield event
    finally:
        aclose = getattr(rest, "aclose", None)
        if aclose is not None:
            await aclose()


class _OnSuspend(Generic[T]):
    """Awaits ``awaitable`` as ``await`` does, calling ``on_suspend()`` before it first yields to the loop."""

    __slots__ = ("awaitable", "on_suspend")

    def __init__(self, awaitable: Awaitable[T], on_suspend: Callable[[], None]) -> None:
        self.awaitable = awaitable
        self.on_suspend = on_suspend

    def __await__(self) -> Generator[Any, Any, T]:
        inner = self.awaitable.__await__()
        try:
            signal = inner.send(None)
        except StopIteration as done:
            return cast(T, done.value)
        self.on_suspend()
        # What ``yield from inner`` does, for an iterator already started.
        while True:
            try:
                sent = yield signal
            except GeneratorExit:
                inner.close()
                raise
            except BaseException as exc:  # a cancellation (or anything thrown in) goes to the work
                try:
                    signal = inner.throw(exc)
                except StopIteration as done:
                    return cast(T, done.value)
            else:
                try:
                    signal = inner.send(sent)
                except StopIteration as done:
                    return cast(T, done.value)


async def _disconnected(receive: Any) -> None:
    """Return once the client has gone (the body was read already: only ``http.disconnect`` is left)."""
    while True:
        message = await receive()
        if message.get("type") == "http.disconnect":
            return


_HIGH_WATER = 64 * 1024  # bytes a stream may hold for a slow client before its producer waits


class _Outbox:
    """Frames produced and not yet sent; whatever is ready when the sender runs goes out as one write."""

    __slots__ = ("closed", "frames", "ready", "room", "size")

    def __init__(self) -> None:
        self.frames: list[bytes] = []
        self.size = 0
        self.closed = False
        self.ready = asyncio.Event()
        self.room = asyncio.Event()


class _EventStream:
    """A streaming response whose producer is cancelled when the client disconnects.

    The producer (the model call and the protocol's translation) and the sender run as two tasks:
    frames that are ready together (a fast model, a burst of tool events) are sent in one write,
    which costs the server far less than one write per frame and delays nothing, since a frame
    waits only while the sender is busy.
    """

    __slots__ = ("frames", "headers", "media_type")

    def __init__(self, frames: AsyncIterator[bytes], headers: Mapping[str, str], media_type: str) -> None:
        self.frames = frames
        self.headers = headers
        self.media_type = media_type

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        raw = [(b"content-type", f"{self.media_type}; charset=utf-8".encode())]
        raw.extend((k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in self.headers.items())
        await send({"type": "http.response.start", "status": 200, "headers": raw})
        outbox = _Outbox()
        produce = asyncio.ensure_future(self._produce(outbox))
        deliver = asyncio.ensure_future(_deliver(outbox, send))
        watch = asyncio.ensure_future(_disconnected(receive))
        tasks = (produce, deliver, watch)
        try:
            await asyncio.wait((deliver, watch), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                if not task.done():
                    task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            aclose = getattr(self.frames, "aclose", None)
            if aclose is not None:
                await aclose()
        if watch.done() and not watch.cancelled():
            return  # the client left: what failed on the way (a write to a closed socket) concerns nobody
        for task in (produce, deliver):
            if not task.cancelled() and task.exception() is not None:
                raise task.exception()  # type: ignore[misc]

    async def _produce(self, outbox: _Outbox) -> None:
        try:
            async for frame in self.frames:
                outbox.frames.append(frame)
                outbox.size += len(frame)
                outbox.ready.set()
                if outbox.size >= _HIGH_WATER:
                    outbox.room.clear()
                    await outbox.room.wait()
        finally:
            outbox.closed = True
            outbox.ready.set()


async def _deliver(outbox: _Outbox, send: Any) -> None:
    while True:
        if not outbox.frames and not outbox.closed:
            await outbox.ready.wait()
            outbox.ready.clear()
        if outbox.frames:
            body = b"".join(outbox.frames)
            outbox.frames.clear()
            outbox.size = 0
            outbox.room.set()
            await send({"type": "http.response.body", "body": body, "more_body": True})
        elif outbox.closed:
            break
    await send({"type": "http.response.body", "body": b"", "more_body": False})


# -- helpers -----------------------------------------------------------------------------------


def _content_length(scope: Mapping[str, Any]) -> str | None:
    """The first ``Content-Length`` of the raw ASGI headers (as Starlette's ``headers.get`` reads it)."""
    for name, value in scope.get("headers") or ():
        if name == b"content-length":
            return str(value.decode("latin-1"))
    return None


def _depth(value: Any, limit: int = MAX_JSON_DEPTH + 1) -> int:
    """Nesting depth of parsed JSON, counted up to ``limit`` (iteratively: no recursion on hostile input)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, (dict, list)):
            deepest = max(deepest, level)
            if level >= limit:
                return level
            children = node.values() if isinstance(node, dict) else node
            stack.extend((child, level + 1) for child in children)
    return deepest


def _newest_user_text(messages: Sequence[Message]) -> str:
    from chatclient.messages import UserMessage

    for message in reversed(messages):
        if isinstance(message, UserMessage):
            return message.text
    return ""


def _agent_inputs(agent: Any, text: str) -> dict[str, Any]:
    names = agent.input_names()
    if not names:
        return {}  # an agent that reads nothing (a human_input step first): the text is not an input
    if len(names) == 1:
        return {names[0]: text}
    for name in ("message", "question", "input", "prompt", "request", "topic"):
        if name in names:
            return {name: text}
    raise EdgeError(
        400,
        f"The agent {agent.name!r} takes several inputs ({', '.join(names)}): send them as the run's inputs.",
        code="agent_inputs_required",
    )


async def _remember_returned_calls(client: ChatClient, conversation_id: str, events: Sequence[StreamEvent]) -> None:
    """Store the caller's tool calls a turn returned in the target's memory, after its question.

    The calls ended the turn before any answer, so memory would otherwise hold the question alone,
    and the results the caller sends next (``role: "tool"``) would answer calls it never saw.
    """
    from chatclient.messages import AssistantMessage

    calls = [e for e in events if isinstance(e, ToolCallsReturned)]
    if not calls:
        return
    message = AssistantMessage(calls[-1].text or None, calls[-1].calls)
    for advisor in client._defaults.advisors:
        memory = getattr(advisor, "chat_memory", None)
        if memory is not None:
            await asyncio.to_thread(memory.add, conversation_id, [message])


def _merged_options(client: ChatClient, options: ChatOptions) -> ChatOptions:
    """The caller's sampling options over the target's defaults (a caller never removes a default)."""
    from dataclasses import fields, replace

    base = client._defaults.options
    if base is None:
        return options
    given = {f.name: getattr(options, f.name) for f in fields(options) if getattr(options, f.name) is not None}
    return replace(base, **given)


class _CallerTool:
    """A tool the caller sent: offered to the model, never run here (``_ReturnCallerTools`` stops the turn)."""

    def __init__(self, definition: ToolDefinition) -> None:
        self.definition = definition
        self.return_direct = False

    def call(self, arguments: str, context: Any = None) -> str:
        raise EdgeError(500, "a caller's tool cannot run on the server")

    async def acall(self, arguments: str, context: Any = None) -> str:
        return self.call(arguments, context)


def _return_caller_tools_class() -> type:
    from chatclient.tools.approval import ToolApprovalAdvisor

    class ReturnCallerTools(ToolApprovalAdvisor):
        """Ends the turn when the model calls a caller's tool (the approval advisor's pause, with the
        calls emitted as ``ToolCallsReturned`` instead of being kept for a resume)."""

        def _paused(self, request: Any, response: Any, message: Any, needs: set[str]) -> Any:
            paused = super()._paused(request, response, message, needs)
            calls = tuple(c for c in message.tool_calls if c.id in needs)
            request.emit(ToolCallsReturned(calls, message.text or ""))
            return paused

    return ReturnCallerTools


_RETURN_CLASS: type | None = None


def _return_caller_tools(names: frozenset[str]) -> Any:
    global _RETURN_CLASS
    if _RETURN_CLASS is None:
        _RETURN_CLASS = _return_caller_tools_class()
    return _RETURN_CLASS(policy=names)


def sse_frame(data: str, event: str | None = None) -> bytes:
    """One Server-Sent Events frame (``data`` must not contain newlines: JSON text never does)."""
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {data}\n\n".encode()


__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "SINGLE_TARGET_NAME",
    "ChatTurn",
    "Edge",
    "JsonAnswer",
    "EdgeError",
    "RunSuspended",
    "ScopeSnapshot",
    "ServingApp",
    "ToolCallsReturned",
    "check_target",
    "error_for",
    "has_memory",
    "namespaced_conversation_id",
    "principal_identity",
    "resolve_target",
    "sse_frame",
    "target_names",
]
