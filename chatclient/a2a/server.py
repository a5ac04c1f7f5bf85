"""``serve_a2a`` / ``a2a_app``: an agent or workflow as an Agent-to-Agent (A2A) server.

Built on the official SDK: an ``AgentExecutor`` runs the agent for each incoming message, the SDK's
request handler keeps the tasks, and its routes serve the JSON-RPC endpoint and the agent card at
``/.well-known/agent-card.json``. ``serve_a2a`` runs that app with uvicorn in a background thread.

One message is one run: the message text is the run's ``input_key`` input (default ``request``);
within one A2A context the next run starts from the previous run's scope state, so a conversation
carries on. The answer's text is streamed as one artifact (``answer``) from the text deltas of the
agent's last model calls, then the task completes. A run that suspends (``human_input`` without a
responder) puts the task in ``input-required`` with the question; the next message on that task is
the answer (``resume``). An agent error fails the task with the error's type (and its message with
``expose_errors=True``).

Every request first passes ``chatclient.asgi_guard``: a ``Host`` the server is not reached as is
refused with 421 and a foreign browser ``Origin`` with 403 (DNS rebinding), then the ``auth`` hook
(401 when it returns ``None`` or ``False``); its principal names the caller whose conversations and
tasks these are. The agent card stays readable without ``auth`` (clients read it to learn how to call).
"""

from __future__ import annotations

import ipaddress
import socket
import sys
import threading
import uuid
import warnings
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from chatclient.a2a._sdk import EXTRA_HINT, clip, output_text, sdk
from chatclient.agents.base import Agent
from chatclient.asgi_guard import AuthHook, HostOriginGuard, guarded
from chatclient.events import TextDelta

MAX_CONTEXTS = 1_000
"""Default number of conversations (A2A contexts) and waiting tasks a server remembers (oldest dropped)."""
MAX_CONTEXT_BYTES = 64 * 1024 * 1024
"""Default cap on about how many bytes the remembered conversations' states hold (and, apart, the
waiting runs' scopes); the oldest are dropped past it."""
MAX_REQUEST_BYTES = 1_000_000
"""Default cap on the bytes of one request body; larger ones get 413."""
MAX_FINISHED_TASKS = 1_000
"""Default number of finished tasks the in-memory task store keeps (oldest finished dropped first)."""
MAX_FINISHED_BYTES = 64 * 1024 * 1024
"""Default cap on the bytes of the finished tasks kept in memory (history and artifacts included)."""
CARD_PATH = "/.well-known/agent-card.json"
CARD_CACHE_CONTROL = "public, max-age=300"
"""Default ``Cache-Control`` of the agent card: clients and proxies may reuse it for five minutes."""


def _approx_bytes(value: Any, max_objects: int = 100_000) -> int:
    """About how many bytes ``value`` holds: each object's own size, containers and object attributes
    walked (each object once; past ``max_objects`` objects the walk stops, so the figure is a floor)."""
    seen: set[int] = set()
    stack = [value]
    total = 0
    while stack and len(seen) < max_objects:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        total += sys.getsizeof(item)
        if isinstance(item, (str, bytes, bytearray, int, float)):
            continue
        if isinstance(item, Mapping):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple, set, frozenset)):
            stack.extend(item)
        elif hasattr(item, "__dict__"):
            stack.append(vars(item))
    return total


class _Recent:
    """The newest entries, at most ``max_items`` of about ``max_bytes`` in all (oldest dropped first;
    the entry just added stays even alone over ``max_bytes``)."""

    def __init__(self, max_items: int, max_bytes: int, measure: Callable[[Any], int]) -> None:
        self.max_items, self.max_bytes, self.measure = max_items, max_bytes, measure
        self.held_bytes = 0
        self._entries: OrderedDict[str, tuple[Any, int]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._entries))

    def get(self, key: str) -> Any:
        entry = self._entries.get(key)
        return None if entry is None else entry[0]

    def pop(self, key: str) -> Any:
        entry = self._entries.pop(key, None)
        if entry is None:
            return None
        self.held_bytes -= entry[1]
        return entry[0]

    def put(self, key: str, value: Any) -> None:
        self.pop(key)
        size = self.measure(value)
        self._entries[key] = (value, size)
        self.held_bytes += size
        while len(self._entries) > 1 and (len(self._entries) > self.max_items or self.held_bytes > self.max_bytes):
            _, (_, old_size) = self._entries.popitem(last=False)
            self.held_bytes -= old_size


class _AgentExecutor:
    """Runs a chatclient ``Agent`` for each A2A message (the SDK's ``AgentExecutor`` interface)."""

    def __init__(
        self,
        agent: Agent,
        *,
        input_key: str,
        expose_errors: bool,
        max_contexts: int,
        max_context_bytes: int,
        max_duration: float | None,
    ) -> None:
        self.agent = agent
        self.max_duration = max_duration
        self.input_key = input_key
        self.expose_errors = expose_errors
        # context key -> the last run's scope state; task key -> the suspended scope waiting for an answer
        self._contexts = _Recent(max_contexts, max_context_bytes, _approx_bytes)
        self._waiting = _Recent(max_contexts, max_context_bytes, lambda scope: _approx_bytes(scope.state))

    async def execute(self, context: Any, event_queue: Any) -> None:
        a2a = sdk()
        types = a2a.types
        task_id, context_id = context.task_id, context.context_id
        if context.current_task is None:
            await event_queue.enqueue_event(
                types.Task(
                    id=task_id,
                    context_id=context_id,
                    status=types.TaskStatus(state=types.TaskState.TASK_STATE_SUBMITTED),
                    history=[context.message] if context.message is not None else [],
                )
            )
        from a2a.server.tasks import TaskUpdater

        updater = TaskUpdater(event_queue, task_id, context_id)
        await updater.start_work()
        text = context.get_user_input()
        agent = self.agent
        # Conversations belong to the caller the server's authentication names (one anonymous caller
        # without authentication): a context id sent by someone else does not reach them.
        try:
            owner = str(context.call_context.user.user_name)
        except Exception:  # no call context (a direct executor call)
            owner = ""
        context_key, task_key = f"{owner}\x00{context_id}", f"{owner}\x00{task_id}"
        waiting = self._waiting.pop(task_key)
        current = context.current_task
        if (
            waiting is None
            and current is not None
            and current.status.state == types.TaskState.TASK_STATE_INPUT_REQUIRED
        ):
            note = (
                "this server no longer holds the run waiting for this answer (restarted, or more than "
                "max_contexts / max_context_bytes waiting)"
            )
            await updater.failed(updater.new_agent_message([types.Part(text=note)]))
            return
        if waiting is not None:
            stream = agent.aresume_stream(waiting, text, max_duration=self.max_duration)
        else:
            inputs = dict(self._contexts.get(context_key) or {})
            inputs[self.input_key] = text
            # the carried state as one mapping: its keys may be any names, also arun_stream's own keywords
            stream = agent.arun_stream(inputs, max_duration=self.max_duration)
        artifact_id = uuid.uuid4().hex
        streamed: list[str] = []

        token = _join_trace(context)  # the caller's trace, when OpenTelemetry observes this process
        try:
            async with stream:  # leaving early (a cancelled task) cancels the run
                while True:
                    try:
                        event = await anext(stream)
                    except StopAsyncIteration:
                        break
                    except Exception as exc:
                        reason = f"{type(exc).__name__}: {clip(str(exc))}" if self.expose_errors else type(exc).__name__
                        message = updater.new_agent_message([types.Part(text=f"the agent failed: {reason}")])
                        await updater.failed(message)
                        return
                    if isinstance(event, TextDelta) and event.text:
                        await updater.add_artifact(
                            [types.Part(text=event.text)], artifact_id=artifact_id, name="answer", append=bool(streamed)
                        )
                        streamed.append(event.text)
            result = stream.result
            assert result is not None  # the stream ran to its end
            if result.suspended is not None:
                self._waiting.put(task_key, result.scope)
                await updater.requires_input(updater.new_agent_message([types.Part(text=result.suspended.question)]))
                return
            self._contexts.put(context_key, dict(result.scope.state))
            answer = output_text(result.output)
            if "".join(streamed) != answer:  # nothing streamed, or the workflow's output is not its last text
                await updater.add_artifact(
                    [types.Part(text=answer)], artifact_id=artifact_id, name="answer", append=False, last_chunk=True
                )
            await updater.complete()
        finally:
            if token is not None:
                from opentelemetry import context as otel_context

                otel_context.detach(token)

    async def cancel(self, context: Any, event_queue: Any) -> None:
        from a2a.server.tasks import TaskUpdater

        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        for key in [k for k in self._waiting if k.endswith(f"\x00{context.task_id}")]:
            self._waiting.pop(key)
        await updater.cancel()


def _join_trace(context: Any) -> Any:
    """Make the caller's W3C trace context (``traceparent``) current, when OpenTelemetry observes this
    process: the served run's spans then continue the caller's trace. Returns the token to detach."""
    from chatclient import observation

    if observation.get_observer() is None:
        return None
    try:
        from opentelemetry import context as otel_context
        from opentelemetry import propagate
    except ImportError:
        return None
    headers = getattr(getattr(context, "call_context", None), "state", {}).get("headers") or {}
    if "traceparent" not in headers:
        return None
    return otel_context.attach(propagate.extract(headers))


def _executor_class() -> type:
    from a2a.server.agent_execution import AgentExecutor

    return type("ChatClientAgentExecutor", (_AgentExecutor, AgentExecutor), {})


def agent_card(
    agent: Agent,
    *,
    url: str,
    name: str | None = None,
    description: str | None = None,
    version: str = "1.0.0",
    streaming: bool = True,
) -> Any:
    """The A2A ``AgentCard`` for ``agent`` served at ``url``: one skill named after the agent (and, for
    a workflow, one per sub-agent that has a description), JSON-RPC, text in and out."""
    types = sdk().types
    skills = [
        types.AgentSkill(
            id=agent.name,
            name=name or agent.name,
            description=description or agent.description or agent.name,
            tags=["chatclient"],
        )
    ]
    for child in agent.children:
        if child.description and child.name not in {s.id for s in skills}:
            skills.append(
                types.AgentSkill(id=child.name, name=child.name, description=child.description, tags=["step"])
            )
    return types.AgentCard(
        name=name or agent.name,
        description=description or agent.description or f"chatclient agent {agent.name}",
        version=version,
        supported_interfaces=[types.AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")],
        capabilities=types.AgentCapabilities(streaming=streaming),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=skills,
    )


class _BodyLimit:
    """ASGI middleware: a request whose body passes ``limit`` bytes gets 413 before the SDK reads it."""

    def __init__(self, app: Any, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Any, receive: Callable[[], Any], send: Callable[[Any], Any]) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for key, value in scope.get("headers", ()):
            if key == b"content-length" and value.isdigit() and int(value) > self.limit:
                await _too_large(send, self.limit)
                return
        # Read the whole body first (at most ``limit`` bytes), then hand it to the app in one piece:
        # the SDK turns any error raised while it reads into a JSON-RPC answer, so refuse before.
        chunks: list[bytes] = []
        seen = 0
        while True:
            message = await receive()
            if message.get("type") != "http.request":
                return  # the client went away
            chunk = message.get("body", b"")
            seen += len(chunk)
            if seen > self.limit:
                await _too_large(send, self.limit)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        sent = False

        async def replay() -> Any:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


async def _too_large(send: Callable[[Any], Any], limit: int) -> None:
    body = f"request body larger than {limit:,} bytes".encode()
    await send({"type": "http.response.start", "status": 413, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": body})


def a2a_app(
    agent: Agent,
    *,
    url: str,
    name: str | None = None,
    description: str | None = None,
    version: str = "1.0.0",
    input_key: str = "request",
    streaming: bool = True,
    expose_errors: bool = False,
    max_contexts: int = MAX_CONTEXTS,
    max_context_bytes: int = MAX_CONTEXT_BYTES,
    max_request_bytes: int = MAX_REQUEST_BYTES,
    max_duration: float | None = None,
    task_store: Any = None,
    max_finished_tasks: int = MAX_FINISHED_TASKS,
    max_finished_bytes: int = MAX_FINISHED_BYTES,
    card_cache_control: str | None = CARD_CACHE_CONTROL,
    allowed_hosts: Sequence[str] | None = None,
    allowed_origins: Sequence[str] | None = None,
    auth: AuthHook | None = None,
) -> Any:
    """An ASGI app serving ``agent`` over A2A (JSON-RPC at ``url``'s path, the card at
    ``/.well-known/agent-card.json``), to mount or run with any ASGI server.

    ``url`` is the public address written in the card. ``max_duration`` (seconds) bounds each run
    (past it the task fails with ``DeadlineExceededError``). ``task_store`` is an SDK ``TaskStore``;
    by default tasks live in memory, where at most ``max_finished_tasks`` finished tasks of
    ``max_finished_bytes`` in all are kept (the oldest finished go first; running tasks and tasks
    waiting for input are never dropped). ``card_cache_control`` is the card's ``Cache-Control``
    header (``None``: none; an ``ETag`` is sent either way).

    The ``Host`` header must name ``url``'s host, a loopback name when ``url`` is on loopback, or one
    of ``allowed_hosts`` (``"agents.example.com"``, ``"name:*"`` for any port): 421 otherwise. A
    browser ``Origin`` must be ``url``'s own, a loopback one on loopback, or one of
    ``allowed_origins``: 403 otherwise. ``url`` on a wildcard address (``0.0.0.0``, ``::``) accepts
    any ``Host`` and warns (``UserWarning``) unless ``allowed_hosts`` or ``auth`` is given.
    ``auth(request) -> principal | None`` (sync or async, a Starlette ``Request``) runs on every
    request but the card's; ``None`` or ``False`` answers 401; the principal's ``str()`` (or a
    Starlette ``BaseUser`` returned as is) names the caller that owns the conversations and tasks.
    """
    if not isinstance(agent, Agent):
        raise TypeError(f"a2a_app serves a chatclient Agent, got {type(agent).__name__}")
    for label, value in (
        ("max_contexts", max_contexts),
        ("max_context_bytes", max_context_bytes),
        ("max_request_bytes", max_request_bytes),
        ("max_finished_tasks", max_finished_tasks),
        ("max_finished_bytes", max_finished_bytes),
    ):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{label} must be a positive integer, got {value!r}")
    sdk()
    try:
        from a2a.server.request_handlers import DefaultRequestHandler
        from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
        from starlette.applications import Starlette

        from chatclient.a2a._tasks import BoundedTaskStore, TaskContextBuilder
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise ImportError(EXTRA_HINT) from exc
    parts = urlsplit(url)
    bind = parts.hostname or ""
    try:
        port = parts.port
    except ValueError:
        raise ValueError(f"a2a_app: {url!r} is not a URL with a valid port") from None
    try:
        wildcard = not bind or ipaddress.ip_address(bind).is_unspecified
    except ValueError:
        wildcard = False  # a name, not an address
    if wildcard:  # no name to check Host against: only allowed_hosts or auth protect it
        guard = HostOriginGuard.for_bind(
            bind or "0.0.0.0", allowed_hosts, allowed_origins, has_auth=auth is not None, surface="A2A", strict=False
        )
    else:  # the card's own address is a name this server is reached as, and its origin may call it
        named = f"[{bind}]" if ":" in bind else bind
        own_origin = f"{parts.scheme.lower()}://{named}" + (f":{port}" if port is not None else "")
        guard = HostOriginGuard.for_bind(
            bind,
            [*(allowed_hosts or ()), f"{named}:*"],
            [*(allowed_origins or ()), own_origin],
            has_auth=auth is not None,
            surface="A2A",
            strict=False,
        )
    card = agent_card(agent, url=url, name=name, description=description, version=version, streaming=streaming)
    if max_duration is not None:
        from chatclient.events import check_max_duration

        max_duration = check_max_duration(max_duration)
    executor = _executor_class()(
        agent,
        input_key=input_key,
        expose_errors=expose_errors,
        max_contexts=max_contexts,
        max_context_bytes=max_context_bytes,
        max_duration=max_duration,
    )
    if task_store is None:
        task_store = BoundedTaskStore(max_finished_tasks, max_finished_bytes)
    handler = DefaultRequestHandler(
        agent_executor=executor,
        task_store=task_store,
        agent_card=card,
        request_context_builder=TaskContextBuilder(task_store),
    )
    path = parts.path or "/"
    card_routes = create_agent_card_routes(card, card_url=CARD_PATH, cache_control=card_cache_control)
    routes = [*card_routes, *create_jsonrpc_routes(handler, rpc_url=path)]
    inner = _BodyLimit(Starlette(routes=routes), max_request_bytes)
    return _App(inner, guard, auth, card, task_store)


def _as_user(scope: dict[str, Any], principal: Any) -> None:
    """Give the SDK the caller ``auth`` named, as Starlette's ``scope["user"]`` (its call context reads it)."""
    # An authentication middleware outside that named the caller wins; one that named nobody (Starlette
    # sets an UnauthenticatedUser on every request it does not know) must not make every principal of
    # the hook the same anonymous owner of each other's conversations and tasks.
    if getattr(scope.get("user"), "is_authenticated", False):
        return
    from starlette.authentication import BaseUser, SimpleUser

    scope["user"] = principal if isinstance(principal, BaseUser) else SimpleUser(str(principal))


class _App:
    """The ASGI app ``a2a_app`` returns: the Host/Origin/auth gate, the body limit, the SDK's routes.

    ``card`` is the served ``AgentCard``, ``task_store`` the SDK ``TaskStore`` holding its tasks. The
    card's path passes the Host/Origin check but not ``auth``.
    """

    def __init__(self, inner: Any, guard: HostOriginGuard, auth: AuthHook | None, card: Any, task_store: Any) -> None:
        self.card = card
        self.task_store = task_store
        self._gate = guarded(inner, guard, auth, on_principal=_as_user)
        self._open = guarded(inner, guard) if auth is not None else self._gate

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        public = scope["type"] == "http" and scope.get("method") in ("GET", "HEAD") and _route_path(scope) == CARD_PATH
        await (self._open if public else self._gate)(scope, receive, send)


def _route_path(scope: Any) -> str:
    """The request's path inside this app (mounted under a prefix, Starlette keeps the prefix in ``path``)."""
    path, root = str(scope.get("path", "")), str(scope.get("root_path", ""))
    return path[len(root) :] if root and path.startswith(root) else path


class A2AServer:
    """A running A2A server (from ``serve_a2a``): ``url``, ``card``, ``stop()``; a context manager."""

    def __init__(self, server: Any, thread: threading.Thread, url: str, card: Any) -> None:
        self._server = server
        self._thread = thread
        self.url = url
        self.card = card

    def stop(self, timeout: float = 10.0) -> None:
        """Stop accepting requests, let those in flight finish (up to ``timeout`` seconds) and return."""
        self._server.should_exit = True
        self._thread.join(timeout)
        if self._thread.is_alive():
            self._server.force_exit = True
            self._thread.join(timeout)

    def __enter__(self) -> A2AServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<A2AServer {self.url}>"


def serve_a2a(
    agent: Agent,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    name: str | None = None,
    description: str | None = None,
    startup_timeout: float = 10.0,
    **options: Any,
) -> A2AServer:
    """Serve ``agent`` (any agent or workflow) over A2A with uvicorn in a background thread.

    ``port=0`` picks a free port (see ``server.url``). ``options`` go to ``a2a_app`` (``input_key``,
    ``expose_errors``, ``max_contexts``, ``max_context_bytes``, ``max_request_bytes``, ``max_duration``, ``task_store``,
    ``max_finished_tasks``, ``max_finished_bytes``, ``card_cache_control``, ``version``,
    ``streaming``, ``allowed_hosts``, ``allowed_origins``, ``auth``). Returns an ``A2AServer``; call
    ``stop()`` or use it as a context manager.

    On loopback (the default) only loopback ``Host`` and ``Origin`` headers pass (DNS rebinding);
    ``host="0.0.0.0"`` without ``allowed_hosts`` or ``auth`` warns (``UserWarning``) at start, since
    anyone who reaches the port, web pages included, can then run the agent.
    """
    try:
        import uvicorn
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise ImportError(EXTRA_HINT) from exc
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{bound}/"
    try:
        with warnings.catch_warnings(record=True) as said:  # said again below, at the caller's line
            warnings.simplefilter("always")
            app = a2a_app(agent, url=url, name=name, description=description, **options)
    except BaseException:
        sock.close()
        raise
    for warning in said:
        try:
            warnings.warn(warning.message, warning.category, stacklevel=2)
        except BaseException:  # a filter turned it into an error: nothing was started yet
            sock.close()
            raise
    config = uvicorn.Config(app, log_level="warning", lifespan="off", timeout_graceful_shutdown=5)
    server = uvicorn.Server(config)
    failure: list[BaseException] = []

    def work() -> None:
        try:
            server.run(sockets=[sock])
        except BaseException as exc:  # surfaced by the startup wait below
            failure.append(exc)
        finally:
            sock.close()

    thread = threading.Thread(target=work, name=f"a2a-server-{agent.name}", daemon=True)
    thread.start()
    waited = 0.0
    while not server.started:
        if failure or not thread.is_alive():
            raise RuntimeError(
                f"the A2A server for {agent.name!r} did not start: {failure[0] if failure else 'exited'}"
            )
        if waited >= startup_timeout:
            server.should_exit = True
            raise RuntimeError(f"the A2A server for {agent.name!r} did not start within {startup_timeout:g} s")
        threading.Event().wait(0.02)
        waited += 0.02
    return A2AServer(server, thread, url, app.card)


__all__ = ["A2AServer", "a2a_app", "agent_card", "serve_a2a"]
