"""OpenTelemetry spans and metrics for chatclient, following the GenAI semantic conventions.

    from chatclient.observability.otel import instrument
    instrument(capture_content=False)   # global tracer/meter providers unless given

What is recorded:

* one span per client call, ``chat {model}`` (kind CLIENT): ``gen_ai.operation.name``,
  ``gen_ai.request.model`` and the request options, ``gen_ai.provider.name``, and when the answer
  arrives ``gen_ai.usage.input_tokens``/``output_tokens`` (plus, when reported,
  ``gen_ai.usage.cache_read.input_tokens``, ``gen_ai.usage.cache_creation.input_tokens``,
  ``gen_ai.usage.reasoning.output_tokens`` and the server's own total as
  ``chatclient.usage.total_tokens``), ``gen_ai.response.finish_reasons``,
  ``gen_ai.response.model``/``id``;
* below it, one span per advisor invocation, ``advisor {name}`` (name and order as attributes), the
  terminal ``ChatModelAdvisor`` included, so the span tree is the advisor stack; recursive
  advisors (tool loop, validation retries) show one child per pass;
* one span per agent invocation (``chatclient.agents``), ``invoke_agent {name}`` (``gen_ai.agent.name``),
  with the agent's chat spans and its sub-agents' spans below it;
* one span per tool execution, ``execute_tool {name}`` (``gen_ai.tool.name``, ``gen_ai.tool.call.id``);
* one span per image, transcription or speech call (``chatclient.models.images`` / ``.audio``),
  ``{operation} {model}`` (kind CLIENT; ``gen_ai.operation.name`` ``generate_image``, ``edit_image``,
  ``transcribe`` or ``speech``, the request's size, quality, format and voice, and on the answer the
  image count, token usage where reported, the audio duration or byte count), recorded in both metrics;
* one span per HTTP attempt (``POST``, with ``chatclient.http.attempt`` and
  ``http.request.resend_count``), so retries are visible;
* metrics ``gen_ai.client.token.usage`` (by ``gen_ai.token.type``) and
  ``gen_ai.client.operation.duration`` (seconds), one record per client call.

Prompt and completion text (``gen_ai.input.messages``, ``gen_ai.output.messages``, tool arguments
and results) is recorded only with ``capture_content=True``: it may hold personal data. A streamed
call is recorded whole: its observation finishes with the aggregate of the chunks.

Parenting. Spans are started with an explicit parent taken from a context variable holding the
chain of open chatclient spans, never by attaching a context inside a generator: a stream's spans
open and close across ``yield``s, and attaching there would leak the stream's span into the
consumer's code. Blocking and async calls, tools and HTTP attempts, which start and finish in one
frame, also make their span the current OpenTelemetry span, so spans of your own (or of an
instrumented HTTP library) started inside a tool or an advisor nest under it. Context variables are
copied into asyncio tasks and tool worker threads, so concurrent calls get separate trees.
Known limit: while a stream is suspended between chunks, a chatclient call made by the consumer
without a span of its own becomes a child of that stream; iterate several streams in separate tasks
(or open a span around the consumer's work) to keep their trees apart.
"""

from __future__ import annotations

import contextvars
import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

try:
    from opentelemetry import context as otel_context
    from opentelemetry import metrics, trace
    from opentelemetry.trace import Span, SpanKind, Status, StatusCode
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "chatclient.observability.otel needs OpenTelemetry; install the extra: pip install 'chatclient[otel]'"
    ) from exc

from chatclient import observation

__all__ = ["OpenTelemetryObserver", "instrument", "uninstrument"]

# Bucket boundaries recommended by the GenAI semantic conventions for the two client metrics.
_TOKEN_BUCKETS = [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864]
_DURATION_BUCKETS = [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92]

_OPTION_ATTRIBUTES = (
    ("temperature", "gen_ai.request.temperature"),
    ("max_tokens", "gen_ai.request.max_tokens"),
    ("top_p", "gen_ai.request.top_p"),
    ("top_k", "gen_ai.request.top_k"),
    ("frequency_penalty", "gen_ai.request.frequency_penalty"),
    ("presence_penalty", "gen_ai.request.presence_penalty"),
    ("seed", "gen_ai.request.seed"),
)


class _Node:
    """One open chatclient span in the parent chain.

    ``marker`` is the OpenTelemetry span that was current when this node became the innermost one;
    if the current span has changed since, someone (the user, another library) opened a newer span
    and that one is the better parent.
    """

    __slots__ = ("context", "ended", "marker", "parent", "span")

    def __init__(self, span: Span, context: otel_context.Context, parent: _Node | None, marker: Span) -> None:
        self.span = span
        self.context = context  # the OpenTelemetry context holding ``span``: what children start from
        self.parent = parent
        self.marker = marker
        self.ended = False


_ACTIVE: contextvars.ContextVar[_Node | None] = contextvars.ContextVar("chatclient_otel_active", default=None)


def _live(node: _Node | None) -> _Node | None:
    # Ended nodes can stay in a context that never saw their end (an abandoned stream closed by the
    # garbage collector, an async generator finalised in another task); skip them.
    while node is not None and node.ended:
        node = node.parent
    return node


class _SpanObservation:
    """The Observation returned to chatclient: ends its span (and records metrics) in ``finish``."""

    __slots__ = ("_attrs", "_kind", "_mode", "_node", "_observer", "_start", "_token")

    def __init__(
        self,
        observer: OpenTelemetryObserver,
        kind: str,
        mode: str | None,
        node: _Node,
        token: object | None,
        attrs: dict[str, Any] | None = None,
    ) -> None:
        self._observer = observer
        self._kind = kind
        self._mode = mode
        self._node = node
        self._token = token
        self._start = time.perf_counter()
        self._attrs = attrs

    def finish(self, result: Any = None, error: BaseException | None = None) -> None:
        node = self._node
        if node.ended:
            return
        span = node.span
        try:
            if error is not None:
                _record_error(span, error)
                status = getattr(error, "status", None)
                if self._kind == "http" and isinstance(status, int):
                    # An HTTP error status reaches the hook as the typed error built from the response.
                    span.set_attribute("http.response.status_code", status)
            if result is not None:
                self._observer._on_result(self, span, result, error)
            if self._kind in ("call", "media"):
                self._observer._record_metrics(self, result, error)
        finally:
            node.ended = True
            self._pop()
            span.end()

    def record_event(self, event: Any) -> None:
        """A request event (``chatclient.events``) as a span event on the call span.

        Names follow the GenAI conventions where they have one: a tool result is
        ``gen_ai.tool.message``, the final answer of a call ``gen_ai.choice``. Retrieval, tool calls starting
        and advisors' own events use ``chatclient.*`` names. Text, reasoning and usage deltas are
        not recorded (the span carries the totals). Content only with ``capture_content=True``.
        """
        node = self._node
        kind = getattr(event, "kind", None)
        if node.ended or kind in (None, "text", "reasoning", "usage"):
            return
        content = self._observer.capture_content
        attrs: dict[str, Any] = {}
        if kind == "tool_call_finished":
            attrs = {"gen_ai.tool.call.id": event.id, "gen_ai.tool.name": event.name, "error": event.is_error}
            attrs["chatclient.tool.duration"] = float(event.duration)
            if content:
                attrs["content"] = event.result
            node.span.add_event("gen_ai.tool.message", attrs)
        elif kind == "finished":
            cr = event.response
            attrs = {"index": 0, "finish_reason": ",".join(_finish_reasons(cr)) if cr is not None else ""}
            if content and cr is not None:
                attrs["message"] = _output_json(cr)
            node.span.add_event("gen_ai.choice", attrs)
        elif kind == "tool_call_started":
            attrs = {"gen_ai.tool.call.id": event.id, "gen_ai.tool.name": event.name}
            if content:
                attrs["gen_ai.tool.call.arguments"] = event.arguments
            node.span.add_event("chatclient.tool_call.started", attrs)
        elif kind == "documents_retrieved":
            docs = event.documents
            attrs = {"chatclient.documents.count": len(docs), "chatclient.advisor.name": event.source}
            ids = [str(d.id) for d in docs if getattr(d, "id", None) is not None]
            if ids:
                attrs["chatclient.documents.ids"] = ids
            node.span.add_event("chatclient.documents_retrieved", attrs)
        elif kind == "advisor":
            attrs = {"chatclient.event.name": event.name}
            if content:
                attrs["chatclient.event.message"] = event.message
            node.span.add_event("chatclient.advisor_event", attrs)

    def _pop(self) -> None:
        head = _ACTIVE.get()
        found = head
        while found is not None and found is not self._node:
            found = found.parent
        if found is None:
            # Finished in another context (or after an outer span): nothing of ours is current here.
            return
        _ACTIVE.set(_live(self._node.parent))
        if self._token is not None:
            otel_context.detach(self._token)  # type: ignore[arg-type]


def _record_error(span: Span, error: BaseException) -> None:
    if isinstance(error, GeneratorExit):
        # The consumer stopped reading a stream early: a normal way to end, not a failure.
        span.set_attribute("chatclient.stream.closed_early", True)
        return
    span.record_exception(error)
    span.set_attribute("error.type", type(error).__qualname__)
    span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"[:500]))


def _chat_response(result: Any) -> Any:
    """The ChatResponse inside a ChatClientResponse (or the result itself if it already is one)."""
    return getattr(result, "chat_response", result)


def _set_structured_output(span: Span, cr: Any) -> None:
    """The structured-output rung the terminal advisor used, and why (from the response metadata)."""
    extra = getattr(getattr(cr, "metadata", None), "extra", None) or {}
    for key, attribute in (
        ("structured_output_mode", "chatclient.structured_output.mode"),
        ("structured_output_reason", "chatclient.structured_output.reason"),
    ):
        value = extra.get(key)
        if isinstance(value, str) and value:
            span.set_attribute(attribute, value)
    # Production control (chatclient.resilience, advisors.budget): which model answered, the cost.
    for key, attribute in (
        ("fallback_model", "chatclient.fallback.model"),
        ("routed_model", "chatclient.routing.model"),
        ("cost", "chatclient.cost"),
    ):
        value = extra.get(key)
        if (isinstance(value, str) and value) or (isinstance(value, float) and not isinstance(value, bool)):
            span.set_attribute(attribute, value)


def _finish_reasons(cr: Any) -> list[str]:
    return [g.metadata.finish_reason for g in getattr(cr, "generations", ()) if g.metadata.finish_reason]


def _message_parts(message: Any) -> list[dict[str, Any]]:
    responses = getattr(message, "responses", None)
    if responses is not None:
        return [{"type": "tool_call_response", "id": r.id, "response": r.response_data} for r in responses]
    parts: list[dict[str, Any]] = []
    if message.text:
        parts.append({"type": "text", "content": message.text})
    for call in getattr(message, "tool_calls", ()):
        parts.append({"type": "tool_call", "id": call.id, "name": call.name, "arguments": call.arguments})
    for media in getattr(message, "media", ()):
        # Only the kind of attachment: inline bytes would bloat the span.
        kind = "uri" if isinstance(media.data, str) else "blob"
        parts.append({"type": kind, "mime_type": media.mime_type})
    return parts


def _messages_json(messages: Sequence[Any]) -> str:
    return json.dumps([{"role": str(m.type.value), "parts": _message_parts(m)} for m in messages], ensure_ascii=False)


def _output_json(cr: Any) -> str:
    out = []
    for g in cr.generations:
        entry: dict[str, Any] = {"role": "assistant", "parts": _message_parts(g.output)}
        if g.metadata.finish_reason:
            entry["finish_reason"] = g.metadata.finish_reason
        out.append(entry)
    return json.dumps(out, ensure_ascii=False)


def _provider_name(model: Any) -> str | None:
    """``gen_ai.provider.name``: the model's semantic-convention name (``otel_provider``, e.g.
    ``aws.bedrock``), else its ``provider`` in lower case."""
    name = getattr(model, "otel_provider", None) or getattr(model, "provider", None)
    return name.lower() if isinstance(name, str) and name else None


def _model_name(request: Any, model: Any) -> str | None:
    options = getattr(getattr(request, "prompt", None), "options", None)
    name = getattr(options, "model", None)
    if not name:
        defaults = getattr(model, "default_options", None)
        name = getattr(defaults, "model", None)
    if not name:
        for attr in ("model", "model_name", "name"):
            value = getattr(model, attr, None)
            if isinstance(value, str) and value:
                return value
    return name if isinstance(name, str) and name else None


def _server(model: Any) -> tuple[str | None, int | None]:
    base_url = getattr(model, "base_url", None)
    if not isinstance(base_url, str):
        return None, None
    from urllib.parse import urlsplit

    parts = urlsplit(base_url)
    return parts.hostname, parts.port


class OpenTelemetryObserver:
    """An ``Observer`` that reports chatclient's work as OpenTelemetry spans and metrics.

    ``tracer_provider``/``meter_provider`` default to the global providers. ``capture_content``
    records prompt and completion text and tool arguments/results on the spans (off by default:
    they may contain personal data). Install with ``chatclient.observation.set_observer`` or, more
    simply, ``instrument()``.
    """

    def __init__(
        self,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
        capture_content: bool = False,
    ) -> None:
        version = _version()
        self.capture_content = capture_content
        self._tracer = trace.get_tracer("chatclient", version, tracer_provider=tracer_provider)
        meter = metrics.get_meter("chatclient", version or "", meter_provider=meter_provider)
        self._token_usage = meter.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Number of input and output tokens used per client call",
            explicit_bucket_boundaries_advisory=_TOKEN_BUCKETS,
        )
        self._duration = meter.create_histogram(
            "gen_ai.client.operation.duration",
            unit="s",
            description="Duration of client calls, from the request to the last byte of the answer",
            explicit_bucket_boundaries_advisory=_DURATION_BUCKETS,
        )

    def __repr__(self) -> str:
        return f"OpenTelemetryObserver(capture_content={self.capture_content})"

    # -- span plumbing --------------------------------------------------------------------------------

    def _start(
        self,
        kind: str,
        mode: str | None,
        name: str,
        span_kind: SpanKind,
        attributes: dict[str, Any],
        *,
        make_current: bool,
        metric_attrs: dict[str, Any] | None = None,
    ) -> _SpanObservation:
        head = _live(_ACTIVE.get())
        current = otel_context.get_current()
        current_span = trace.get_current_span(current)
        # The innermost open chatclient span is the parent, unless there is none here or a newer
        # span (the user's, another library's) became current since it started.
        parent = head.context if head is not None and current_span is head.marker else current
        span = self._tracer.start_span(name, context=parent, kind=span_kind, attributes=attributes)
        context = trace.set_span_in_context(span, current)
        token = otel_context.attach(context) if make_current else None
        node = _Node(span, context, head, span if make_current else current_span)
        _ACTIVE.set(node)
        return _SpanObservation(self, kind, mode, node, token, metric_attrs)

    # -- Observer protocol ----------------------------------------------------------------------------

    def start_call(self, mode: str, request: Any, model: Any) -> _SpanObservation:
        """A client call: ``chat {model}``."""
        model_name = _model_name(request, model)
        attrs: dict[str, Any] = {"gen_ai.operation.name": "chat", "chatclient.mode": mode}
        metric_attrs: dict[str, Any] = {"gen_ai.operation.name": "chat"}
        provider = _provider_name(model)
        if provider:
            attrs["gen_ai.provider.name"] = metric_attrs["gen_ai.provider.name"] = provider
        if model_name:
            attrs["gen_ai.request.model"] = metric_attrs["gen_ai.request.model"] = model_name
        host, port = _server(model)
        if host:
            attrs["server.address"] = metric_attrs["server.address"] = host
            if port:
                attrs["server.port"] = port
        prompt = getattr(request, "prompt", None)
        options = getattr(prompt, "options", None)
        if options is not None:
            for field, key in _OPTION_ATTRIBUTES:
                value = getattr(options, field, None)
                if value is not None:
                    attrs[key] = value
            if options.stop:
                attrs["gen_ai.request.stop_sequences"] = list(options.stop)
        if self.capture_content and prompt is not None:
            attrs["gen_ai.input.messages"] = _messages_json(prompt.messages)
        name = f"chat {model_name}" if model_name else "chat"
        # Streams open and close across yields: their span must not become the ambient one.
        make_current = mode in ("call", "acall")
        return self._start(
            "call", mode, name, SpanKind.CLIENT, attrs, make_current=make_current, metric_attrs=metric_attrs
        )

    def start_advisor(self, advisor: Any, mode: str) -> _SpanObservation:
        """One advisor invocation: ``advisor {name}``."""
        name = str(getattr(advisor, "name", type(advisor).__name__))
        attrs: dict[str, Any] = {
            "chatclient.advisor.name": name,
            "chatclient.advisor.order": int(getattr(advisor, "order", 0)),
            "chatclient.mode": mode,
        }
        kind = "model_advisor" if type(advisor).__name__ == "ChatModelAdvisor" else "advisor"
        make_current = mode in ("call", "acall")
        return self._start(kind, mode, f"advisor {name}", SpanKind.INTERNAL, attrs, make_current=make_current)

    def start_agent(self, name: str, description: str = "") -> _SpanObservation:
        """One agent invocation (``chatclient.agents``): ``invoke_agent {name}``; the chat spans of the
        agent's model calls and the spans of its sub-agents nest below it."""
        attrs: dict[str, Any] = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name}
        if description:
            attrs["gen_ai.agent.description"] = description
        return self._start("agent", None, f"invoke_agent {name}", SpanKind.INTERNAL, attrs, make_current=True)

    def start_tool(self, name: str, call_id: str, arguments: str) -> _SpanObservation:
        """One tool execution: ``execute_tool {name}``."""
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.type": "function",
        }
        if self.capture_content:
            attrs["gen_ai.tool.call.arguments"] = arguments
        return self._start("tool", None, f"execute_tool {name}", SpanKind.INTERNAL, attrs, make_current=True)

    def start_http_attempt(self, provider: str, method: str, url: str, attempt: int) -> _SpanObservation:
        """One HTTP attempt; ``attempt`` counts from 1, so a retry is a sibling span with a higher number."""
        from urllib.parse import urlsplit, urlunsplit

        parts = urlsplit(url)
        if "@" in parts.netloc:
            # OTel semantic conventions: url.full must not carry user:password credentials.
            url = urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
        attrs: dict[str, Any] = {
            "http.request.method": method,
            "url.full": url,
            "chatclient.http.attempt": attempt,
            "chatclient.provider": provider,
        }
        if parts.hostname:
            attrs["server.address"] = parts.hostname
        if parts.port:
            attrs["server.port"] = parts.port
        if attempt > 1:
            attrs["http.request.resend_count"] = attempt - 1
        return self._start("http", None, method, SpanKind.CLIENT, attrs, make_current=True)

    def start_embedding(self, model: Any, count: int) -> _SpanObservation:
        """One embedding call: ``embeddings {model}`` (``gen_ai.operation.name`` = ``embeddings``)."""
        model_name = getattr(model, "model", None)
        if not isinstance(model_name, str) or not model_name:
            model_name = type(model).__name__
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": "embeddings",
            "gen_ai.request.model": model_name,
            "chatclient.embeddings.input_count": count,
        }
        provider = _provider_name(model)
        if provider:
            attrs["gen_ai.provider.name"] = provider
        return self._start("embedding", None, f"embeddings {model_name}", SpanKind.CLIENT, attrs, make_current=True)

    def start_media(self, model: Any, operation: str, attributes: Mapping[str, Any]) -> _SpanObservation:
        """One image, transcription or speech call: ``{operation} {model}`` with the request's
        low-cardinality ``attributes`` (size, quality, format, voice); recorded in the metrics."""
        model_name = getattr(model, "model", None)
        if not isinstance(model_name, str) or not model_name:
            model_name = type(model).__name__
        metric_attrs: dict[str, Any] = {"gen_ai.operation.name": operation, "gen_ai.request.model": model_name}
        provider = _provider_name(model)
        if provider:
            metric_attrs["gen_ai.provider.name"] = provider
        host, port = _server(model)
        if host:
            metric_attrs["server.address"] = host
        attrs: dict[str, Any] = {**metric_attrs, **attributes}
        if port:
            attrs["server.port"] = port
        name = f"{operation} {model_name}"
        return self._start("media", None, name, SpanKind.CLIENT, attrs, make_current=True, metric_attrs=metric_attrs)

    def start_retrieval(self, store: Any, request: Any) -> _SpanObservation:
        """One vector-store search: ``retrieval {store}``, with ``top_k`` and, on finish, the result count."""
        store_name = str(getattr(store, "name", type(store).__name__))
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": "retrieval",
            "chatclient.vector_store.name": store_name,
            "gen_ai.request.top_k": int(request.top_k),
            "chatclient.vector_store.similarity_threshold": float(request.similarity_threshold),
            "chatclient.vector_store.filtered": request.filter_expression is not None,
        }
        for field in ("table", "collection_name", "index_name"):
            value = getattr(store, field, None)
            if isinstance(value, str) and value:
                attrs["db.collection.name"] = value
                break
        if self.capture_content:
            # query text and filter values may hold personal data: only with capture_content
            attrs["chatclient.vector_store.query"] = request.query
            if request.filter_expression is not None:
                attrs["chatclient.vector_store.filter"] = str(request.filter_expression)
        return self._start("retrieval", None, f"retrieval {store_name}", SpanKind.INTERNAL, attrs, make_current=True)

    # -- results --------------------------------------------------------------------------------------

    def _on_result(self, obs: _SpanObservation, span: Span, result: Any, error: BaseException | None) -> None:
        kind = obs._kind
        if kind == "retrieval":
            span.set_attribute("chatclient.vector_store.result_count", len(result))
            ids = [str(d.id) for d in result if getattr(d, "id", None) is not None]
            if ids:
                span.set_attribute("chatclient.documents.ids", ids)
            return
        if kind == "media":
            _on_media_result(span, result)
            return
        if kind == "embedding":
            shape = getattr(result, "shape", None)
            if shape is not None and len(shape) == 2:
                span.set_attribute("gen_ai.embeddings.dimension.count", int(shape[1]))
            return
        if kind == "call":
            # Streams finish with the aggregate of their chunks, so every mode has the whole completion.
            self._on_call_result(span, _chat_response(result), content=True)
        elif kind == "model_advisor":
            cr = _chat_response(result)
            reasons = _finish_reasons(cr)
            if reasons:
                span.set_attribute("gen_ai.response.finish_reasons", reasons)
            _set_structured_output(span, cr)
        elif kind == "tool":
            self._on_tool_result(span, result)
        elif kind == "http":
            status = getattr(result, "status_code", None)
            if isinstance(status, int):
                span.set_attribute("http.response.status_code", status)
                if status >= 400 and error is None:
                    span.set_attribute("error.type", str(status))
                    span.set_status(Status(StatusCode.ERROR))

    def _on_call_result(self, span: Span, cr: Any, *, content: bool) -> None:
        if cr is None:
            return
        md = cr.metadata
        usage = md.usage
        if not usage.is_empty():
            span.set_attribute("gen_ai.usage.input_tokens", usage.prompt_tokens)
            span.set_attribute("gen_ai.usage.output_tokens", usage.completion_tokens)
            # The details are parts of the two totals above (semantic conventions: cache reads and
            # writes are included in input_tokens, reasoning in output_tokens); set only when
            # the provider reported them, so "0" never claims a cache miss nobody measured.
            for attribute, value in (
                ("gen_ai.usage.cache_read.input_tokens", usage.cached_input_tokens),
                ("gen_ai.usage.cache_creation.input_tokens", usage.cache_write_tokens),
                ("gen_ai.usage.reasoning.output_tokens", usage.reasoning_tokens),
            ):
                if value:
                    span.set_attribute(attribute, value)
            if usage.reported_total_tokens is not None:
                span.set_attribute("chatclient.usage.total_tokens", usage.reported_total_tokens)
        reasons = _finish_reasons(cr)
        if reasons:
            span.set_attribute("gen_ai.response.finish_reasons", reasons)
        if md.model:
            span.set_attribute("gen_ai.response.model", md.model)
        if md.id:
            span.set_attribute("gen_ai.response.id", md.id)
        _set_structured_output(span, cr)
        if self.capture_content and content:
            span.set_attribute("gen_ai.output.messages", _output_json(cr))

    def _on_tool_result(self, span: Span, result: Any) -> None:
        text = getattr(result, "response_data", result)
        if self.capture_content and isinstance(text, str):
            span.set_attribute("gen_ai.tool.call.result", text)
        if getattr(result, "is_error", False):
            # The model gets the error as the tool's answer; the span still shows the failure.
            span.set_attribute("error.type", "tool_error")
            span.set_status(Status(StatusCode.ERROR, str(text)[:500]))

    def _record_metrics(self, obs: _SpanObservation, result: Any, error: BaseException | None) -> None:
        attrs = dict(obs._attrs or {})
        cr = _chat_response(result) if result is not None else None
        response_model = getattr(getattr(cr, "metadata", None), "model", None)
        if response_model:
            attrs["gen_ai.response.model"] = response_model
        if error is not None and not isinstance(error, GeneratorExit):
            attrs["error.type"] = type(error).__qualname__
        self._duration.record(time.perf_counter() - obs._start, attrs)
        usage = getattr(getattr(cr, "metadata", None), "usage", None)
        if obs._kind == "media":
            usage = getattr(result, "usage", None)
        if usage is not None and not usage.is_empty():
            self._token_usage.record(usage.prompt_tokens, {**attrs, "gen_ai.token.type": "input"})
            self._token_usage.record(usage.completion_tokens, {**attrs, "gen_ai.token.type": "output"})


def _on_media_result(span: Span, result: Any) -> None:
    """What an image, transcription or speech call produced: counts and sizes, never the content."""
    usage = getattr(result, "usage", None)
    if usage is not None and not usage.is_empty():
        span.set_attribute("gen_ai.usage.input_tokens", usage.prompt_tokens)
        span.set_attribute("gen_ai.usage.output_tokens", usage.completion_tokens)
    images = getattr(result, "images", None)
    if isinstance(images, list):
        span.set_attribute("chatclient.images.count", len(images))
    duration = getattr(result, "duration", None)
    if isinstance(duration, float):
        span.set_attribute("chatclient.audio.duration", duration)
    audio = getattr(result, "audio", None)
    if isinstance(audio, bytes):
        span.set_attribute("chatclient.audio.bytes", len(audio))
    elif isinstance(result, int) and not isinstance(result, bool):  # a streamed answer: its byte count
        span.set_attribute("chatclient.audio.bytes", result)


def _version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("chatclient")
    except PackageNotFoundError:
        return None


def instrument(
    tracer_provider: trace.TracerProvider | None = None,
    meter_provider: metrics.MeterProvider | None = None,
    capture_content: bool = False,
) -> OpenTelemetryObserver:
    """Install an ``OpenTelemetryObserver`` process-wide and return it (replaces any observer)."""
    observer = OpenTelemetryObserver(tracer_provider, meter_provider, capture_content)
    observation.set_observer(observer)
    return observer


def uninstrument() -> None:
    """Remove the installed ``OpenTelemetryObserver``; another kind of observer is left in place."""
    if isinstance(observation.get_observer(), OpenTelemetryObserver):
        observation.set_observer(None)


def _conforms(observer: OpenTelemetryObserver) -> observation.Observer:
    return observer  # never called: mypy checks here that the class satisfies the Observer protocol
