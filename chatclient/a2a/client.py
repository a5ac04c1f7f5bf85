"""``a2a_agent``: a remote Agent-to-Agent (A2A) agent as a local ``Agent``.

The agent renders its ``user`` template over the scope (by default ``{{ request }}``), sends the text
to the remote agent as an A2A message with the official SDK's client (streaming when the remote agent's
card says it can) and returns the remote answer's text. The remote conversation's context id is written
to the scope (``context_key``), so the next call on the same scope (a loop, a later agent, a later run
given that value) continues the same remote conversation.

Remote task states map as follows: ``completed`` gives the output; ``input-required`` asks
``responder(question, scope)`` when one is given, otherwise suspends the run like ``human_input``
(``AgentResult.suspended``; ``workflow.resume(scope, answer)`` sends the answer to the same remote
task); ``failed``, ``rejected``, ``canceled`` and ``auth-required`` raise ``A2AError`` with that
``reason``. Answers are bounded in bytes on the wire, in events and in characters.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from chatclient.a2a._sdk import clip, json_format, sdk
from chatclient.agents.agent import _Template
from chatclient.agents.base import Agent, RunCancelled, Step, SuspendRun, check_key, check_name
from chatclient.agents.scope import AgenticScope
from chatclient.errors import A2AError
from chatclient.events import TextDelta

MAX_RESPONSE_BYTES = 8_000_000
"""Default cap on the bytes of one HTTP response from the remote agent (the card, an answer, a stream)."""
MAX_ANSWER_CHARS = 1_000_000
"""Default cap on the characters of the remote answer's text."""
MAX_EVENTS = 10_000
"""Default cap on the events of one streamed answer."""
MAX_TURNS = 20
"""Most input-required rounds one call answers with a ``responder`` before giving up."""

BINDINGS = ("JSONRPC", "HTTP+JSON")
"""The A2A protocol bindings the client speaks (the remote card's preference decides among them)."""
CANCEL_POLL = 0.05
"""Seconds between two looks at a sync stream's "closed" flag while a remote call is in flight."""
CANCEL_TIMEOUT = 5.0
"""Seconds a cancelled call waits for the remote agent to accept the cancellation of its task."""

# The SDK reports an answer it could not parse as a plain A2AClientError (the same class as a network
# failure), sometimes with no cause to tell them apart: these openings of its messages say "not A2A".
_UNREADABLE = ("Invalid JSON-RPC response", "JSON Decode Error")
_RUNNING = {"TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"}
_END_STATES = {
    "TASK_STATE_FAILED": "failed",
    "TASK_STATE_REJECTED": "rejected",
    "TASK_STATE_CANCELED": "canceled",
    "TASK_STATE_AUTH_REQUIRED": "auth-required",
}


class _TooLarge(Exception):
    """A response passed ``max_response_bytes`` (raised inside httpx's byte stream, mapped to ``A2AError``)."""


class _BoundedStream(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream, limit: int) -> None:
        self._inner = inner
        self._limit = limit

    async def __aiter__(self) -> Any:
        seen = 0
        async for chunk in self._inner:
            seen += len(chunk)
            if seen > self._limit:
                raise _TooLarge(f"the remote agent's response passed max_response_bytes={self._limit:,}")
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class _BoundedTransport(httpx.AsyncBaseTransport):
    """httpx's transport, with every response body cut off at ``limit`` bytes."""

    def __init__(self, limit: int) -> None:
        from chatclient.models.http.transport import _ssl_context  # one CA bundle load per process

        self._inner = httpx.AsyncHTTPTransport(verify=_ssl_context())
        self._limit = limit

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._inner.handle_async_request(request)
        stream = response.stream
        assert isinstance(stream, httpx.AsyncByteStream)
        response.stream = _BoundedStream(stream, self._limit)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


@dataclass
class _Answer:
    """What one message exchange produced, folded from the SDK's stream of events."""

    state: str = ""
    task_id: str = ""
    context_id: str = ""
    status_text: str = ""
    message_text: str | None = None
    artifacts: dict[str, str] = field(default_factory=dict)  # artifact id -> text, in arrival order
    chars: int = 0

    def text(self) -> str:
        if self.message_text is not None:
            return self.message_text
        joined = "\n".join(t for t in self.artifacts.values() if t)
        return joined or self.status_text


def _slug(name: str) -> str:
    return re.sub(r"\W+", "_", name).strip("_").lower() or "a2a"


class A2AAgent(Agent):
    """A remote A2A agent as a local leaf agent (built by ``a2a_agent``).

    Holds only the URL, the card's JSON and settings, so it pickles; each call opens its own HTTP
    client. Header values (``headers=``, for authentication) are sent with every request and never
    appear in ``repr`` or error messages.
    """

    def __init__(
        self,
        url_or_card: Any,
        *,
        name: str | None = None,
        description: str | None = None,
        user: str = "{{ request }}",
        output_key: str | None = None,
        context_key: str | None = None,
        headers: Mapping[str, str] | None = None,
        responder: Callable[[str, AgenticScope], Any] | None = None,
        streaming: bool = True,
        timeout: float = 300.0,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
        max_answer_chars: int = MAX_ANSWER_CHARS,
        max_events: int = MAX_EVENTS,
        optional: bool = False,
    ) -> None:
        for label, value in (
            ("max_response_bytes", max_response_bytes),
            ("max_answer_chars", max_answer_chars),
            ("max_events", max_events),
        ):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{label} must be a positive integer, got {value!r}")
        if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or not timeout > 0:
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
        if responder is not None and not callable(responder):
            raise TypeError("responder must be a callable taking (question, scope)")
        if not isinstance(user, str) or not user.strip():
            raise ValueError("user must be a template string, e.g. '{{ request }}'")
        self.headers = {str(k): str(v) for k, v in (headers or {}).items()}
        self.streaming = bool(streaming)
        self.timeout = float(timeout)
        self.max_response_bytes = max_response_bytes
        self.max_answer_chars = max_answer_chars
        self.max_events = max_events
        self.responder = responder
        self.optional = bool(optional)
        self.user = user
        self._card: Any = None  # the SDK's AgentCard, rebuilt from _card_json after unpickling
        self._card_json: str | None = None
        if isinstance(url_or_card, str) and not url_or_card.lstrip().startswith("{"):
            if not url_or_card.startswith(("http://", "https://")):
                raise ValueError(f"a2a_agent takes an http(s) URL or an AgentCard, got {url_or_card!r}")
            self.url = url_or_card
        else:
            self._set_card(_as_card(url_or_card))
        if name is None or description is None:
            from chatclient.models.base import run_sync

            card = run_sync(self._resolve())
            name = card.name if name is None else name
            description = card.description if description is None else description
        self.name = check_name(name)
        self.description = description or ""
        self.output_key = check_key(output_key)
        key = check_key(context_key or f"{_slug(self.name)}_context_id", "context_key")
        assert key is not None
        self.context_key: str = key
        self._template = _Template(user)
        self._inputs = tuple(sorted(_template_variables(user)))

    # -- pickling: settings and the card's JSON, never a live client ---------------------------------

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_card"] = None
        state.pop("_template", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._template = _Template(self.user)

    def __repr__(self) -> str:
        from chatclient.models.http.credentials import redact_url

        return f"<A2AAgent {self.name!r} at {redact_url(self.url)!r}>"

    # -- Agent ------------------------------------------------------------------------------------

    def input_names(self) -> tuple[str, ...]:
        return self._inputs

    def _missing(self, scope: AgenticScope) -> list[str]:
        return [k for k in self._inputs if not scope.has(k)]

    def _invoke(self, step: Step) -> Any:
        from chatclient.models.base import run_sync

        return run_sync(self._ainvoke(step))

    async def _ainvoke(self, step: Step) -> Any:
        run, key, scope = step.run, step.key, step.scope
        emit = run.emit if run.emit is not None and step.tail else None
        # A suspended input-required round leaves "<key>#a2a-pending-<n>" in the journal (the remote
        # task's ids and question); resume() puts the person's answer under "<key>#a2a-answer-<n>".
        rounds = 0
        pending: dict[str, Any] | None = None
        while (entry := run.journal_get(f"{key}#a2a-pending-{rounds + 1}")) is not None:
            rounds += 1
            pending = entry["output"]
        if pending is not None:
            answered = run.journal_get(f"{key}#a2a-answer-{rounds}")
            if answered is None:  # restored from a store without an answer: still waiting
                raise SuspendRun(str(pending["question"]), f"{key}#a2a-answer-{rounds}", None)
            text = _answer_text(answered["output"])
            task_id, context_id = str(pending["task_id"]), str(pending["context_id"])
        else:
            text = self._template.render(scope)
            stored = scope.read(self.context_key)
            task_id, context_id = "", stored if isinstance(stored, str) else ""
        for _ in range(MAX_TURNS):
            answer = await self._exchange(text, task_id, context_id, emit, run)
            if answer.context_id:
                scope.write(self.context_key, answer.context_id)
            if answer.state != "TASK_STATE_INPUT_REQUIRED":
                return answer.text()
            question = answer.status_text or answer.text()  # the question is the status message
            if self.responder is None:
                rounds += 1
                ids = {"task_id": answer.task_id, "context_id": answer.context_id, "question": question}
                run.journal_put(f"{key}#a2a-pending-{rounds}", ids, {})
                raise SuspendRun(question, f"{key}#a2a-answer-{rounds}", None)
            reply = await _ask(self.responder, question, scope)
            text, task_id, context_id = _answer_text(reply), answer.task_id, answer.context_id
        raise self._fail(
            f"remote agent {self.name!r} still asks for input after {MAX_TURNS} answers from the responder",
            "input-required",
            task_id,
            context_id,
        )

    # -- the wire ---------------------------------------------------------------------------------

    def _fail(self, message: str, reason: str, task_id: str | None = "", context_id: str | None = "") -> A2AError:
        """An ``A2AError`` whose text holds no header value and no password of the URL, even when the
        remote agent echoed them back."""
        from chatclient.models.http.credentials import redact_url
        from chatclient.redaction import scrub

        secrets = [*self.headers.values(), *_url_secrets(self.url)]
        return A2AError(
            scrub(message, secrets),
            reason=reason,
            url=redact_url(self.url),
            task_id=task_id or None,
            context_id=context_id or None,
        )

    def _set_card(self, card: Any) -> None:
        interfaces = list(card.supported_interfaces)
        if not interfaces or not interfaces[0].url:
            raise A2AError("the agent card names no interface URL to send messages to", reason="protocol")
        self._card = card
        self._card_json = json_format().MessageToJson(card)
        self.url = getattr(self, "url", None) or str(interfaces[0].url)

    def _http(self, extra: Mapping[str, str] | None = None) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            transport=_BoundedTransport(self.max_response_bytes),
            headers={**self.headers, **(extra or {})},
            timeout=httpx.Timeout(self.timeout),
        )

    async def _resolve(self) -> Any:
        """The remote agent's card: given, unpickled, or fetched from ``<url>/.well-known/agent-card.json``."""
        if self._card is not None:
            return self._card
        if self._card_json is not None:
            card = sdk().types.AgentCard()
            json_format().Parse(self._card_json, card, ignore_unknown_fields=True)
            self._card = card
            return card
        a2a = sdk()
        async with self._http() as http:
            card = await self._guard(a2a.client.A2ACardResolver(http, self.url).get_agent_card(), "", "")
        self._set_card(card)
        return card

    async def _guard(self, work: Any, task_id: str, context_id: str) -> Any:
        """Await ``work`` within the timeout, turning the SDK's and httpx's errors into ``A2AError``."""
        try:
            async with asyncio.timeout(self.timeout):
                return await work
        except BaseException as exc:
            error = self._error(exc, task_id, context_id)
            if error is exc:
                raise
            raise error from exc

    def _error(self, exc: BaseException, task_id: str, context_id: str) -> BaseException:
        if isinstance(exc, (A2AError, asyncio.CancelledError)) or not isinstance(exc, Exception):
            return exc
        client_errors = sdk().client
        from chatclient.models.http.credentials import redact_url

        where = f"remote agent at {redact_url(self.url)}"
        cause: BaseException | None = exc
        seen: set[int] = set()
        unreadable = isinstance(exc, client_errors.A2AClientError) and str(exc).startswith(_UNREADABLE)
        while cause is not None and id(cause) not in seen:  # the SDK wraps httpx's errors; our cut-off may be inside
            seen.add(id(cause))
            if isinstance(cause, _TooLarge):
                return self._fail(
                    f"{where}: {cause}; raise max_response_bytes if this is expected", "too-large", task_id, context_id
                )
            unreadable = unreadable or isinstance(cause, (ValueError, json_format().ParseError))  # JSON, UTF-8
            cause = cause.__cause__ or cause.__context__
        if isinstance(exc, (TimeoutError, client_errors.A2AClientTimeoutError, httpx.TimeoutException)):
            return self._fail(f"{where} did not answer within {self.timeout:g} s", "timeout", task_id, context_id)
        if not unreadable and isinstance(exc, (client_errors.A2AClientError, httpx.HTTPError, OSError)):
            return self._fail(f"{where} could not be reached: {clip(str(exc))}", "connection", task_id, context_id)
        return self._fail(
            f"{where} sent an answer that could not be read: {type(exc).__name__}: {clip(str(exc))}",
            "protocol",
            task_id,
            context_id,
        )

    async def _exchange(
        self, text: str, task_id: str, context_id: str, emit: Callable[[Any], None] | None, run: Any = None
    ) -> _Answer:
        """Send one message and fold the answer's events; raise ``A2AError`` for a failed task."""
        a2a = sdk()
        types = a2a.types
        card = await self._resolve()
        message = types.Message(
            role=types.Role.ROLE_USER,
            message_id=uuid.uuid4().hex,
            parts=[types.Part(text=text)],
            task_id=task_id,
            context_id=context_id,
        )
        answer = _Answer(task_id=task_id, context_id=context_id)
        emitted: list[bool] = [False]

        async def exchange() -> None:
            async with self._http(_trace_headers()) as http:
                config = a2a.client.ClientConfig(
                    streaming=self.streaming, httpx_client=http, supported_protocol_bindings=list(BINDINGS)
                )
                client = a2a.client.ClientFactory(config).create(card)
                try:
                    events = 0
                    async for event in client.send_message(types.SendMessageRequest(message=message)):
                        events += 1
                        if events > self.max_events:
                            raise self._fail(
                                f"remote agent {self.name!r} sent more than max_events={self.max_events:,} events",
                                "too-large",
                                answer.task_id,
                                answer.context_id,
                            )
                        self._fold(answer, event, emit, emitted)
                except BaseException:
                    # Cancelled here (a closed stream, a timeout) or cut off: stop the remote task too.
                    if answer.task_id and answer.state in _RUNNING:
                        await _cancel_remote(client, answer.task_id)
                    raise
                finally:
                    await client.close()

        work = asyncio.ensure_future(self._guard(exchange(), task_id, context_id))
        if run is not None and run.emit is not None and not run.is_async:
            # A sync stream's consumer that closes the stream only sets run.cancelled (this loop runs
            # in the stream's worker thread): watch it, and cancel the call (and the remote task).
            while not work.done():
                await asyncio.wait({work}, timeout=CANCEL_POLL)
                if run.cancelled and not work.done():
                    work.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await work
                    raise RunCancelled()
        await work
        state = answer.state
        if state in _END_STATES:
            detail = clip(answer.status_text or answer.text()) or "no reason given"
            raise self._fail(
                f"remote agent {self.name!r} ended its task as {_END_STATES[state]}: {detail}",
                _END_STATES[state],
                answer.task_id,
                answer.context_id,
            )
        if state not in ("TASK_STATE_COMPLETED", "TASK_STATE_INPUT_REQUIRED"):
            raise self._fail(
                f"remote agent {self.name!r} stopped answering while its task was {state or 'not started'}",
                "protocol",
                answer.task_id,
                answer.context_id,
            )
        if emit is not None and not emitted[0] and state == "TASK_STATE_COMPLETED" and answer.text():
            emit(TextDelta(answer.text()))  # nothing was streamed: the whole answer as one delta
        return answer

    def _fold(self, answer: _Answer, event: Any, emit: Callable[[Any], None] | None, emitted: list[bool]) -> None:
        a2a = sdk()
        text_of = a2a.helpers.get_message_text

        def artifact_text(artifact: Any) -> str:  # the parts of one artifact are pieces of one text
            return str(a2a.helpers.get_artifact_text(artifact, ""))

        state_name = a2a.types.TaskState.Name
        if event.HasField("message"):
            msg = event.message
            self._count(answer, text_of(msg))
            answer.message_text = text_of(msg)
            answer.state = "TASK_STATE_COMPLETED"
            answer.context_id = msg.context_id or answer.context_id
            return
        if event.HasField("task"):
            task = event.task
            answer.task_id, answer.context_id = task.id or answer.task_id, task.context_id or answer.context_id
            answer.state = state_name(task.status.state)
            answer.artifacts = {}
            for artifact in task.artifacts:
                self._count(answer, artifact_text(artifact))
                answer.artifacts[artifact.artifact_id] = artifact_text(artifact)
            if task.status.HasField("message"):
                answer.status_text = text_of(task.status.message)
            return
        if event.HasField("status_update"):
            update = event.status_update
            answer.task_id = update.task_id or answer.task_id
            answer.context_id = update.context_id or answer.context_id
            answer.state = state_name(update.status.state)
            if update.status.HasField("message"):
                answer.status_text = text_of(update.status.message)
                self._count(answer, answer.status_text)
            return
        if event.HasField("artifact_update"):
            update = event.artifact_update
            answer.task_id = update.task_id or answer.task_id
            answer.context_id = update.context_id or answer.context_id
            aid = update.artifact.artifact_id
            chunk = artifact_text(update.artifact)
            self._count(answer, chunk)
            old = answer.artifacts.get(aid, "")
            new = old + chunk if update.append else chunk
            answer.artifacts[aid] = new
            if emit is not None and new.startswith(old) and len(new) > len(old):
                emit(TextDelta(new[len(old) :]))
                emitted[0] = True

    def _count(self, answer: _Answer, text: str) -> None:
        answer.chars += len(text)
        if answer.chars > self.max_answer_chars:
            raise self._fail(
                f"remote agent {self.name!r} sent more than max_answer_chars={self.max_answer_chars:,} characters",
                "too-large",
                answer.task_id,
                answer.context_id,
            )


async def _cancel_remote(client: Any, task_id: str) -> None:
    """Ask the remote agent to cancel ``task_id``; best effort, within ``CANCEL_TIMEOUT`` seconds."""
    try:
        async with asyncio.timeout(CANCEL_TIMEOUT):
            await client.cancel_task(sdk().types.CancelTaskRequest(id=task_id))
    except Exception:  # the task may have ended meanwhile, or the agent be gone: the original error counts
        pass


def _trace_headers() -> dict[str, str]:
    """The W3C trace context (``traceparent``) of the current span when OpenTelemetry observes this
    process, so the remote agent's spans join this trace."""
    from chatclient import observation

    if observation.get_observer() is None:
        return {}
    try:
        from opentelemetry import propagate
    except ImportError:
        return {}
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier


def _url_secrets(url: str) -> list[str]:
    """The user name and password written in ``url`` (``https://user:pw@host/``), if any."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
    except ValueError:
        return []
    return [x for x in (parts.username, parts.password) if x]


def _template_variables(text: str) -> frozenset[str]:
    from chatclient.templates import default_renderer

    return frozenset(default_renderer().variables(text))


def _answer_text(value: Any) -> str:
    from chatclient.a2a._sdk import output_text

    return output_text(value)


async def _ask(responder: Callable[[str, AgenticScope], Any], question: str, scope: AgenticScope) -> Any:
    if inspect.iscoroutinefunction(responder):
        return await responder(question, scope)
    reply = await asyncio.to_thread(responder, question, scope)
    if inspect.isawaitable(reply):
        reply = await reply
    return reply


def _as_card(value: Any) -> Any:
    """An ``AgentCard`` from the SDK's card or the card's JSON (a dict or a string)."""
    import json

    types = sdk().types
    if isinstance(value, types.AgentCard):
        return value
    if isinstance(value, Mapping):
        value = json.dumps(dict(value))
    if isinstance(value, (str, bytes)):
        card = types.AgentCard()
        try:
            json_format().Parse(value, card, ignore_unknown_fields=True)
        except (json_format().ParseError, ValueError) as exc:
            raise A2AError(f"the agent card could not be read: {clip(str(exc))}", reason="protocol") from None
        return card
    raise TypeError(f"a2a_agent takes an http(s) URL, an AgentCard or the card's JSON, got {type(value).__name__}")


def a2a_agent(
    url_or_card: Any,
    *,
    name: str | None = None,
    description: str | None = None,
    user: str = "{{ request }}",
    output_key: str | None = None,
    context_key: str | None = None,
    headers: Mapping[str, str] | None = None,
    responder: Callable[[str, AgenticScope], Any] | None = None,
    streaming: bool = True,
    timeout: float = 300.0,
    max_response_bytes: int = MAX_RESPONSE_BYTES,
    max_answer_chars: int = MAX_ANSWER_CHARS,
    max_events: int = MAX_EVENTS,
    optional: bool = False,
) -> A2AAgent:
    """A remote A2A agent as a local ``Agent`` that can run alone or inside any workflow.

    ``url_or_card`` is the agent's base URL (its card is read from ``/.well-known/agent-card.json``),
    the SDK's ``AgentCard`` or the card's JSON. ``name`` / ``description`` default to the card's (the
    card is then fetched now). ``user`` is the jinja template of the message sent (its variables are
    the agent's inputs); the remote answer's text is the output (``output_key``). The remote
    context id is kept in the scope under ``context_key`` (default ``"<name>_context_id"``) for
    multi-turn conversations. ``headers`` go with every request (authentication), ``responder``
    answers input-required questions (otherwise the run suspends), ``timeout`` bounds each exchange
    in seconds, and ``max_response_bytes`` / ``max_answer_chars`` / ``max_events`` bound what the
    remote agent may send (``A2AError`` with ``reason="too-large"``).
    """
    return A2AAgent(
        url_or_card,
        name=name,
        description=description,
        user=user,
        output_key=output_key,
        context_key=context_key,
        headers=headers,
        responder=responder,
        streaming=streaming,
        timeout=timeout,
        max_response_bytes=max_response_bytes,
        max_answer_chars=max_answer_chars,
        max_events=max_events,
        optional=optional,
    )


__all__ = ["A2AAgent", "a2a_agent"]
