"""The one HTTP layer under every provider: pooled httpx clients, retries, typed errors, streaming.

``HTTPTransport`` sends JSON requests with the same rules in sync and async code:

* timeouts: a number means that many seconds for reading/writing and at most 10 s to connect; an
  ``httpx.Timeout`` is used as is;
* retries (``max_retries``, default 2) with exponential backoff and jitter on connection errors,
  timeouts and HTTP 408/409/429/5xx, honouring ``Retry-After`` / ``retry-after-ms``; never on other
  4xx, nor on a request that cannot be sent as built (``ModelRequestError``). A streamed request is
  retried only until its response starts; a stream that breaks later raises, because part of it
  has already been handed to the caller;
* errors from ``chatclient.errors`` naming the provider, the URL (without credentials), the status,
  the provider's error code/type and request id, and the likely fix;
* secrets (API keys, credential headers, ``user:password@`` in ``base_url``) travel only in headers
  and are scrubbed, in every representation and in part, from every error text, ``repr`` and log
  line; redirects are followed by the transport itself and never carry them to another origin;
* bounds (``ResponseLimits``) on body size, stream line and event size;
* one pooled ``httpx.Client`` / ``httpx.AsyncClient`` per transport, created lazily and reused
  (or injected by the caller, who then keeps ownership and closes it).

``HTTPChatModel`` is the base class of the chat providers: it drives the four modes from three pure
provider hooks (prompt -> body, payload -> response, stream line -> chunks).
"""

from __future__ import annotations

import asyncio
import base64
import email.utils
import functools
import itertools
import json
import logging
import os
import random
import re
import ssl
import threading
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, ClassVar, Protocol, TypeVar
from urllib.parse import urlsplit, urlunsplit

import httpx

from chatclient import observation
from chatclient.errors import (
    AuthenticationError,
    ModelConnectionError,
    ModelError,
    ModelHTTPError,
    ModelRequestError,
    ModelResponseError,
    ModelTimeoutError,
    RateLimitError,
)
from chatclient.models._pooled import PooledHTTPResource
from chatclient.models.base import BaseChatModel, ChatResponse, ModelCapabilities
from chatclient.models.response_headers import notify_response
from chatclient.models.sse import DEFAULT_MAX_EVENT_BYTES, DEFAULT_MAX_LINE_BYTES, LineDecoder, parse_json
from chatclient.models.stdlib_http import ACCEPT_ENCODING, AsyncStdlibPoster, StdlibPoster
from chatclient.observation import Observation
from chatclient.options import ChatOptions
from chatclient.prompt import Prompt
from chatclient.redaction import _MIN_SECRET, REDACTED, scrub

__all__ = [
    "DEFAULT_TIMEOUT",
    "REDACTED",
    "HTTPChatModel",
    "HTTPTransport",
    "PooledHTTPResource",
    "ResponseLimits",
    "RetryPolicy",
    "StreamParser",
    "assistant_text",
    "env_or",
    "error_for_status",
    "parse_retry_after",
    "redact_url",
    "resolve_api_key",
    "scrub",
    "validate_api_key",
]

logger = logging.getLogger("chatclient.models.http")
_T = TypeVar("_T")

DEFAULT_TIMEOUT = httpx.Timeout(600.0, connect=10.0)
RETRY_STATUSES = frozenset({408, 409, 429})
BODY_EXCERPT_CHARS = 1000
MAX_REDIRECTS = 5
# Statuses followed by re-sending the same POST: a chat API has no GET form of a request, so the
# classic "turn POST into GET" rule would only produce a confusing 404/405 further down.
_REDIRECT_STATUSES = frozenset({301, 302, 307, 308})
_ERROR_BODY_BYTES = 64 * 1024  # enough for any real error body; the excerpt keeps 1000 chars
# After the end marker, what the server already sent is read for at most this long (so the
# connection can go back to the pool); anything slower is cut off by closing the connection.
_DRAIN_GRACE = 0.05
_DRAIN_BYTES = 64 * 1024

# Matches the official SDKs: enough connections for a few hundred concurrent calls.
_LIMITS = httpx.Limits(max_connections=1000, max_keepalive_connections=100)
_SYNC_STRIPES = 8  # sync connection pools per model, picked by thread
_ASYNC_STRIPES = 32  # async connection pools per model and event loop, picked by task


_THREAD_SLOTS = threading.local()
_NEXT_SLOT = itertools.count()


def _thread_slot() -> int:
    """A small number per thread, handed out in turn (thread idents are aligned addresses: no spread)."""
    slot: int | None = getattr(_THREAD_SLOTS, "slot", None)
    if slot is None:
        slot = _THREAD_SLOTS.slot = next(_NEXT_SLOT)  # count() is atomic under the GIL
    return slot


@functools.lru_cache(maxsize=1)
def _ssl_context() -> ssl.SSLContext:
    """One TLS context for every pool chatclient opens: building one (loading the CA bundle) takes
    ~25 ms of CPU, which a fresh pool per thread or task would otherwise pay, blocking its event loop."""
    return httpx.create_ssl_context()


@dataclass(frozen=True, slots=True)
class ResponseLimits:
    """Bounds on what a provider may send back; past one, the call raises ``ModelResponseError``.

    ``max_line_bytes`` bounds one SSE/NDJSON line, ``max_event_bytes`` one SSE event (its data
    lines together), ``max_response_bytes`` a whole body, streamed or not (after decompression).

    >>> ResponseLimits(max_line_bytes=1024).max_event_bytes == DEFAULT_MAX_EVENT_BYTES
    True
    """

    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES
    max_response_bytes: int = 256 * 1024 * 1024

    def __post_init__(self) -> None:
        for name in ("max_line_bytes", "max_event_bytes", "max_response_bytes"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"ResponseLimits.{name} must be a positive int, got {value!r}")


# -- secrets ----------------------------------------------------------------------------------------

_SENSITIVE_HEADER = re.compile(r"authorization|cookie|api[-_]?key|token|secret|password|auth", re.IGNORECASE)
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


def validate_api_key(value: str | None, *, source: str = "api_key") -> str | None:
    """The key with surrounding whitespace stripped, ``None`` if empty; bad keys raise ``ValueError``.

    A key must be printable ASCII (what an HTTP header can carry; ``httpx`` refuses anything
    else). The error names ``source`` and the position, never the key itself.

    >>> validate_api_key("  sk-abc\\n")
    'sk-abc'
    """
    if value is None:
        return None
    if not isinstance(value, str):
        raise TypeError(f"{source} must be a str, got {type(value).__name__}")
    key = value.strip()
    for position, ch in enumerate(key):
        if not (" " <= ch <= "~"):
            kind = "a control character" if ch < " " or ch == "\x7f" else "a non-ASCII character"
            raise ValueError(
                f"the API key from {source} contains {kind} at position {position}; API keys are printable "
                "ASCII - copy the key again (a key read from a file or pasted from a document often carries "
                "stray characters)"
            )
    return key or None


def resolve_api_key(
    api_key: str | None, env_var: str, *, provider: str, required: bool, where: str = ""
) -> tuple[str | None, str]:
    """The validated key (argument, else ``env_var``) and a description of where it came from.

    ``required`` makes a missing key a ``ValueError`` naming ``env_var`` at construction, instead
    of an HTTP 401 at the first call. An explicit ``api_key=""`` means "send no key".
    """
    source = "the api_key argument" if api_key is not None else f"the {env_var} environment variable"
    raw = api_key if api_key is not None else os.environ.get(env_var)
    key = validate_api_key(raw, source=source)
    if key is None and required:
        raise ValueError(
            f"{provider} needs an API key{where}: set the {env_var} environment variable or pass api_key=...; "
            "for a local or self-hosted server pass its base_url (the key is then optional)"
        )
    return key, (source if key else f"no API key (set {env_var} or pass api_key=...)")


def redact_url(url: str) -> str:
    """``url`` without ``user:password@`` (the OpenTelemetry rule for ``url.full``).

    >>> redact_url("https://me:pw@example.com:8443/v1?x=1")
    'https://example.com:8443/v1?x=1'
    """
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<invalid URL>"
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def _credential_headers(headers: Mapping[str, str]) -> list[str]:
    """Header names whose values are credentials, judged by name."""
    return [name for name in headers if _SENSITIVE_HEADER.search(name)]


def _header_secrets(headers: Mapping[str, str]) -> list[str]:
    found: list[str] = []
    for name in _credential_headers(headers):
        value = headers[name]
        found.append(value)
        scheme, _, token = value.partition(" ")
        if token and scheme.lower() in ("bearer", "basic", "token", "apikey"):
            found.append(token)
    return found


def _check_headers(headers: Mapping[str, str]) -> None:
    for name, value in headers.items():
        if not isinstance(name, str) or not _HEADER_NAME.fullmatch(name):
            raise ValueError(f"header name {name!r} is not a valid HTTP header name")
        if not isinstance(value, str):
            raise TypeError(f"the value of header {name!r} must be a str, got {type(value).__name__}")
        if any(not (" " <= ch <= "~") and ch != "\t" for ch in value):
            raise ValueError(
                f"the value of header {name!r} contains a control or non-ASCII character; header values must "
                "be printable ASCII (look for a trailing newline)"
            )


class _Secrets(tuple[str, ...]):
    """The secret values themselves; their repr never shows them."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"<{len(self)} secret(s)>"


class _RedactedHeaders(dict[str, str]):
    """Request headers whose repr hides values, so tracebacks with locals never show a key."""

    def __repr__(self) -> str:
        return "{" + ", ".join(f"{k!r}: '…'" for k in self) + "}"


# -- errors -------------------------------------------------------------------------------------------


def parse_retry_after(headers: Mapping[str, str] | httpx.Headers) -> float | None:
    """Seconds to wait as the server asked (``retry-after-ms``, ``Retry-After`` seconds or date)."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


@dataclass(frozen=True, slots=True)
class _ErrorBody:
    message: str | None = None
    code: str | None = None
    type: str | None = None


def _short(value: Any) -> str | None:
    if isinstance(value, str | int) and not isinstance(value, bool) and str(value):
        return str(value)[:100]
    return None


def _error_body(body: str) -> _ErrorBody:
    """Message, code and type of an OpenAI / Anthropic / Ollama (or FastAPI ``detail``) error body."""
    try:
        payload = parse_json(body)
    except ModelResponseError:
        return _ErrorBody()
    if not isinstance(payload, dict):
        return _ErrorBody()
    err = payload.get("error", payload.get("detail"))
    if isinstance(err, str):  # Ollama, and servers in its style
        return _ErrorBody(err, _short(payload.get("code")), _short(payload.get("type")))
    if isinstance(err, dict):  # OpenAI {"error": {...}} and Anthropic {"type": "error", "error": {...}}
        message = err.get("message")
        return _ErrorBody(
            message if isinstance(message, str) else None, _short(err.get("code")), _short(err.get("type"))
        )
    if isinstance(err, list) and err and isinstance(err[0], dict) and isinstance(err[0].get("msg"), str):
        return _ErrorBody(str(err[0]["msg"]))  # FastAPI validation errors (vLLM, llama-cpp-python)
    return _ErrorBody()


def _not_found_hint(url: str | None, detail: str) -> str | None:
    """The likely base_url fix for a 404, judged from the request path."""
    if url is None or "model" in detail.lower():
        return None  # "model not found" is about the model name, not the path
    parts = urlsplit(url)
    path = parts.path.rstrip("/")
    for suffix in ("/chat/completions", "/embeddings", "/completions", "/api/chat", "/api/embed", "/v1/messages"):
        if path.endswith(suffix):
            base = path[: -len(suffix)]
            break
    else:
        return None
    root = urlunsplit(parts._replace(path=base, query="", fragment=""))
    if suffix in ("/chat/completions", "/embeddings", "/completions") and not base.endswith("/v1"):
        return f"OpenAI-compatible servers serve /v1{suffix}: try base_url='{root}/v1'"
    if suffix in ("/api/chat", "/api/embed", "/v1/messages") and base.endswith("/v1"):
        fix = "Ollama's native API lives at /api/..." if suffix.startswith("/api") else "the path already has /v1"
        return f"{fix}: try base_url='{root[:-3]}' (without /v1)"
    return "check base_url: the server has no such endpoint"


def error_for_status(
    provider: str,
    status: int,
    body: str,
    headers: Mapping[str, str] | httpx.Headers | None = None,
    secrets: Sequence[str] = (),
    *,
    url: str | None = None,
    credential: str | None = None,
) -> ModelHTTPError:
    """The typed error for an HTTP error status (or one a provider reported mid-stream).

    ``url`` (credentials are removed) and ``credential`` (where the key came from, e.g. "the
    OPENAI_API_KEY environment variable"; never the key) make the message say what to fix. Texts are
    scrubbed of ``secrets`` before they are cut to excerpts. A stream parser that sees an
    ``overloaded_error`` event raises ``error_for_status(provider, 529, event_data)``: that is
    retried like an HTTP 529 when nothing has been emitted yet.
    """
    headers = headers if headers is not None else {}
    head = scrub(body[: BODY_EXCERPT_CHARS + 512], secrets)
    excerpt = head[:BODY_EXCERPT_CHARS]
    parsed = _error_body(body)
    detail = scrub(parsed.message[:800], secrets)[:300] if parsed.message else excerpt[:300]
    code = scrub(parsed.code, secrets) if parsed.code else None
    kind = scrub(parsed.type, secrets) if parsed.type else None
    request_id = _short(headers.get("x-request-id") or headers.get("request-id"))
    where = f" for POST {scrub(redact_url(url), secrets)}" if url else ""
    message = f"{provider} returned HTTP {status}{where}" + (f": {detail}" if detail else "")
    tags = [t for t in (f"type {kind}" if kind else None, f"code {code}" if code else None) if t]
    if request_id:
        tags.append(f"request id {request_id}")
    if tags:
        message += f" ({', '.join(tags)})"
    fields: dict[str, Any] = {"status": status, "body": excerpt, "code": code, "type": kind, "request_id": request_id}
    if status in (401, 403):
        sent = f"the key sent came from {credential}" if credential else "check the API key"
        if credential and credential.startswith("no API key"):
            sent = f"{credential} was sent"
        return AuthenticationError(f"{message} - {sent}; check the key and its permissions", **fields)
    if status == 429:
        return RateLimitError(message, retry_after=parse_retry_after(headers), **fields)
    if status == 404:
        hint = _not_found_hint(url, detail)
        if hint:
            message += f" - {hint}"
    return ModelHTTPError(message, **fields)


def _host_port(url: str) -> str:
    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return "<invalid URL>"
    return f"{parts.hostname}:{port}"


def _transport_error(provider: str, exc: Exception, secrets: Sequence[str], url: str) -> ModelError:
    shown = scrub(redact_url(url), secrets)
    if isinstance(exc, httpx.LocalProtocolError | httpx.UnsupportedProtocol):
        # The text of these quotes the offending header value: never show it, and never retry.
        return ModelRequestError(
            f"the request to {provider} at {shown} could not be sent ({type(exc).__name__}): an invalid header, "
            "URL or protocol - check base_url and the api_key / headers= values for stray characters"
        )
    text = scrub(str(exc) or type(exc).__name__, secrets)[:300]
    if isinstance(exc, httpx.ConnectTimeout):
        return ModelTimeoutError(
            f"could not connect to {provider} at {_host_port(url)} in time ({shown}): is the host reachable and "
            "base_url right?"
        )
    if isinstance(exc, httpx.TimeoutException):
        return ModelTimeoutError(f"{provider} did not answer in time ({type(exc).__name__} at {shown}: {text})")
    if isinstance(exc, httpx.DecodingError | httpx.TooManyRedirects):
        return ModelResponseError(f"{provider} sent an unusable response ({type(exc).__name__} at {shown}: {text})")
    if isinstance(exc, httpx.ConnectError):
        lowered = text.lower()
        if "refused" in lowered:
            why = "connection refused - is the server running, and is base_url right?"
        elif "name" in lowered or "address" in lowered or "resolution" in lowered:
            why = f"the host name could not be resolved ({text}) - check base_url"
        else:
            why = f"{text} - is the server running, and is base_url right?"
        return ModelConnectionError(f"could not connect to {provider} at {_host_port(url)} ({shown}): {why}")
    return ModelConnectionError(f"connection to {provider} at {shown} failed ({type(exc).__name__}: {text})")


# -- retries ------------------------------------------------------------------------------------------


class RetryPolicy:
    """When to retry and how long to wait.

    The n-th retry waits ``backoff_base * 2**n`` seconds (at most ``backoff_max``), scaled by a
    random factor in [0.5, 1) so that many clients do not retry in lockstep. A server's
    ``Retry-After`` wins when it is at most ``max_retry_after``; a longer one ends the retries at
    once, since silently blocking for minutes is worse than raising ``RateLimitError``.
    """

    __slots__ = ("backoff_base", "backoff_max", "max_retries", "max_retry_after")

    def __init__(
        self,
        max_retries: int = 2,
        backoff_base: float = 0.5,
        backoff_max: float = 8.0,
        max_retry_after: float = 60.0,
    ) -> None:
        if max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        if backoff_base < 0 or backoff_max < 0:
            raise ValueError("backoff delays must be >= 0")
        self.max_retries = max_retries
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.max_retry_after = max_retry_after

    @staticmethod
    def is_retryable(error: ModelError, headers: Mapping[str, str] | httpx.Headers | None = None) -> bool:
        """Whether a failure is worth another attempt."""
        if isinstance(error, ModelRequestError | AuthenticationError):
            return False  # the same request cannot succeed, whatever the server hints
        if headers is not None:
            # OpenAI and Anthropic tell clients explicitly; respect it either way.
            hint = headers.get("x-should-retry")
            if hint == "true":
                return True
            if hint == "false":
                return False
        if isinstance(error, ModelTimeoutError | ModelConnectionError):
            return True
        if isinstance(error, ModelHTTPError) and error.status is not None:
            return error.status in RETRY_STATUSES or error.status >= 500
        return False

    def delay(
        self, retries_done: int, error: ModelError, headers: Mapping[str, str] | httpx.Headers | None = None
    ) -> float | None:
        """Seconds to wait before the next attempt, or ``None`` to give up and raise ``error``."""
        if retries_done >= self.max_retries or not self.is_retryable(error, headers):
            return None
        asked = parse_retry_after(headers) if headers is not None else None
        if asked is None and isinstance(error, RateLimitError):
            asked = error.retry_after
        if asked is not None:
            return asked if asked <= self.max_retry_after else None
        base = min(self.backoff_max, self.backoff_base * (2.0**retries_done))
        return base * (0.5 + random.random() / 2)


# -- transport ----------------------------------------------------------------------------------------


def as_timeout(timeout: float | httpx.Timeout | None) -> httpx.Timeout:
    """Normalise the ``timeout`` constructor argument."""
    if isinstance(timeout, httpx.Timeout):
        return timeout
    if timeout is None:
        return httpx.Timeout(None)
    if timeout <= 0:
        raise ValueError("timeout must be positive")
    return httpx.Timeout(float(timeout), connect=min(float(timeout), 10.0))


def _same_origin(a: httpx.URL, b: httpx.URL) -> bool:
    return (a.scheme, a.host, a.port or (443 if a.scheme == "https" else 80)) == (
        b.scheme,
        b.host,
        b.port or (443 if b.scheme == "https" else 80),
    )


class _Answer(Protocol):
    """What the HTTP layer reads of an answer: an ``httpx.Response``, or the lighter response of a
    direct path (``aiohttp_transport.DirectResponse``, ``stdlib_http.StdlibResponse``)."""

    @property
    def status_code(self) -> int: ...

    @property
    def headers(self) -> Mapping[str, str]: ...

    @property
    def encoding(self) -> str | None: ...

    @property
    def url(self) -> object: ...

    @property
    def reason_phrase(self) -> str: ...


class _AsyncAnswer(_Answer, Protocol):
    def aiter_bytes(self) -> AsyncIterator[bytes]: ...

    async def aclose(self) -> None: ...


class _SyncAnswer(_Answer, Protocol):
    def iter_bytes(self) -> Iterator[bytes]: ...

    def close(self) -> None: ...


class _DirectAnswer(_AsyncAnswer, Protocol):
    def as_httpx(self, request: httpx.Request) -> httpx.Response: ...


class _DirectPoster(Protocol):
    async def direct_post(
        self, url: str, headers: Mapping[str, str], content: bytes, timeout: httpx.Timeout
    ) -> _DirectAnswer: ...


def _log_answer(url: str, answer: _Answer) -> None:
    # The line httpx logs for every response, for the answers that bypass it (same logger level, same
    # wording), so a log that showed requests before still does.
    if logger.isEnabledFor(logging.INFO):
        logger.info('HTTP Request: POST %s "HTTP/1.1 %d %s"', url, answer.status_code, answer.reason_phrase)


def _direct_poster(client: httpx.AsyncClient) -> _DirectPoster | None:
    """The transport under ``client`` if a POST can go to it straight, past httpx's client layer.

    Only a transport that offers ``direct_post`` (``AiohttpTransport``), and only while the client
    adds nothing of its own to a request: no auth, event hooks, cookies, query parameters or
    mounted transports (the client's default headers are merged in by the caller).
    """
    transport = getattr(client, "_transport", None)
    if getattr(transport, "direct_post", None) is None:
        return None
    hooks = client.event_hooks
    if client.auth is not None or hooks["request"] or hooks["response"] or client.params or client.cookies:
        return None
    if getattr(client, "_mounts", None):
        return None
    return transport  # type: ignore[return-value]


class _Body:
    """Bounded accumulation of a response body (after content decoding)."""

    __slots__ = ("_limit", "_parts", "_size", "what")

    def __init__(self, limit: int, what: str) -> None:
        self._limit = limit
        self._parts: list[bytes] = []
        self._size = 0
        self.what = what

    def add(self, chunk: bytes) -> None:
        self._size += len(chunk)
        if self._size > self._limit:
            raise ModelResponseError(
                f"{self.what} is larger than {self._limit} bytes (raise ResponseLimits.max_response_bytes if "
                "such answers are expected)"
            )
        self._parts.append(chunk)

    def text(self, response: _Answer) -> str:
        data = b"".join(self._parts)
        try:
            return data.decode(response.encoding or "utf-8", "replace")
        except LookupError:  # a charset Python does not know: UTF-8, as httpx falls back (direct paths pass it raw)
            return data.decode("utf-8", "replace")


class HTTPTransport:
    """Pooled JSON-over-HTTP with retries and typed errors, shared by sync and async callers.

    ``secrets`` are values (API keys) that must never appear in an error or log text; they are
    only sent inside ``headers``. Values of credential-like headers (``authorization``,
    ``x-api-key``, ``api-key``, anything naming a key, token, secret or password) and the
    ``user:password`` of ``base_url`` are treated as secrets too. ``credential`` says where the
    key came from, for the 401 message. ``limits`` bounds what the server may send back.
    """

    def __init__(
        self,
        *,
        provider: str,
        base_url: str,
        headers: Mapping[str, str] | None = None,
        secrets: Sequence[str] = (),
        timeout: float | httpx.Timeout | None = DEFAULT_TIMEOUT,
        retry: RetryPolicy | None = None,
        http_client: httpx.Client | None = None,
        async_http_client: httpx.AsyncClient | None = None,
        limits: ResponseLimits | None = None,
        credential: str | None = None,
    ) -> None:
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            shown = redact_url(base_url) if isinstance(base_url, str) else type(base_url).__name__
            raise ValueError(f"base_url must start with http:// or https://, got {shown!r}")
        self.provider = provider
        self.timeout = as_timeout(timeout)
        self.retry = retry or RetryPolicy()
        self.limits = limits or ResponseLimits()
        self.credential = credential
        extra = dict(headers or {})
        _check_headers(extra)
        found = [s for s in secrets if s]
        parts = urlsplit(base_url.rstrip("/"))
        if "@" in parts.netloc:
            # Credentials in the URL become a Basic auth header (what httpx would do), so the URL
            # itself never carries them: not in repr, errors, logs or spans, nor across redirects.
            userinfo, _, hostport = parts.netloc.rpartition("@")
            from urllib.parse import unquote

            user, _, password = userinfo.partition(":")
            user, password = unquote(user), unquote(password)
            token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
            extra["authorization"] = f"Basic {token}"
            found += [userinfo, user, password, token]
            parts = parts._replace(netloc=hostport)
        self.base_url = urlunsplit(parts)
        self._headers = _RedactedHeaders(
            {"accept": "application/json", "content-type": "application/json", "user-agent": "chatclient"}
        )
        # Names are case-insensitive on the wire: one spelling each, so a caller's "User-Agent" replaces
        # the default and an explicit api_key's "authorization" replaces a caller's "Authorization"
        # (the later entry wins) instead of both going out.
        self._headers.update({name.lower(): value for name, value in extra.items()})
        self._secrets = _Secrets(s for s in [*found, *_header_secrets(extra)] if len(s) >= _MIN_SECRET)
        self._client = http_client
        self._owns_client = http_client is None
        self._stripes: list[httpx.Client | None] = [None] * _SYNC_STRIPES
        self._aclient = async_http_client
        self._owns_aclient = async_http_client is None
        self._aclient_loop: asyncio.AbstractEventLoop | None = None
        self._astripes: list[httpx.AsyncClient | None] = [None] * _ASYNC_STRIPES
        self._direct_headers_for: tuple[list[tuple[bytes, bytes]], dict[str, str]] | None = None
        self._lane_ok: bool | None = None  # see _fast_lane
        self._lane_headers: dict[str, str] = {}
        self._stdlib: StdlibPoster | None = None
        self._astdlib: AsyncStdlibPoster | None = None
        self._astdlib_loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()
        self._closed = False

    def __repr__(self) -> str:
        return f"HTTPTransport(provider={self.provider!r}, base_url={self.base_url!r})"

    # -- clients --------------------------------------------------------------------------------

    def _sync_client(self) -> httpx.Client:
        if self._closed:
            raise RuntimeError(f"{self.provider} model is closed")
        if not self._owns_client:
            assert self._client is not None
            return self._client
        # Calls from many threads share one pool per stripe instead of one for all: httpcore's pool
        # serialises every request and response on one lock, which makes 64 threads slower than 16.
        stripe = _thread_slot() % _SYNC_STRIPES
        client = self._stripes[stripe]
        if client is None:
            with self._lock:
                if self._closed:
                    raise RuntimeError(f"{self.provider} model is closed")
                client = self._stripes[stripe]
                if client is None:
                    client = self._stripes[stripe] = httpx.Client(
                        timeout=self.timeout, limits=_LIMITS, verify=_ssl_context()
                    )
        return client

    def _async_client(self) -> httpx.AsyncClient:
        if self._closed:
            raise RuntimeError(f"{self.provider} model is closed")
        if not self._owns_aclient:
            assert self._aclient is not None
            return self._aclient
        loop = asyncio.get_running_loop()
        # An AsyncClient's pooled connections belong to the loop that opened them; a model used
        # from several asyncio.run() calls needs fresh pools per loop.
        if self._aclient_loop is not loop:
            self._astripes = [None] * _ASYNC_STRIPES
            self._aclient_loop = loop
        # Tasks share one of a few pools, picked by task: httpcore's pool scans every waiting request
        # on each change, so one pool for hundreds of concurrent calls spends its time queueing
        # (256 callers: ~560 -> ~1,000 requests/s with 16 pools in benchmarks/http_throughput.py).
        task = asyncio.current_task()
        stripe = (id(task) >> 6) % _ASYNC_STRIPES if task is not None else 0
        client = self._astripes[stripe]
        if client is None or client.is_closed:
            client = self._astripes[stripe] = httpx.AsyncClient(
                timeout=self.timeout, limits=_LIMITS, verify=_ssl_context()
            )
        return client

    def close(self) -> None:
        """Close the clients this transport created (injected clients stay open)."""
        self._closed = True
        self._close_sync_clients()
        self._close_async_lane()
        open_clients = [c for c in self._astripes if c is not None and not c.is_closed]
        if self._owns_aclient and open_clients:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                loop = None
            owner = self._aclient_loop
            for client in open_clients:
                if loop is None and owner is not None and not owner.is_closed() and not owner.is_running():
                    owner.run_until_complete(client.aclose())
                elif loop is not None and loop is owner:
                    loop.create_task(client.aclose())

    async def aclose(self) -> None:
        """Close the clients this transport created, from async code."""
        self._closed = True
        # A pool opened on another (finished) loop cannot be closed from this one.
        same_loop = self._aclient_loop is asyncio.get_running_loop()
        if self._owns_aclient and same_loop:
            for client in self._astripes:
                if client is not None and not client.is_closed:
                    await client.aclose()
        self._close_async_lane()
        self._close_sync_clients()

    def _close_async_lane(self) -> None:
        # The lane's connections belong to the loop that opened them; one that has finished took
        # them with it.
        owner = self._astdlib_loop
        if self._astdlib is not None and owner is not None and not owner.is_closed():
            self._astdlib.close()

    def _close_sync_clients(self) -> None:
        if not self._owns_client:
            return
        if self._stdlib is not None:
            self._stdlib.close()
        with self._lock:
            clients = [c for c in self._stripes if c is not None]
            self._stripes = [None] * _SYNC_STRIPES
        for client in clients:
            client.close()

    # -- requests -------------------------------------------------------------------------------

    def _build(self, client: httpx.Client | httpx.AsyncClient, path: str, content: bytes) -> httpx.Request:
        return client.build_request(
            "POST", self.base_url + path, content=content, headers=self._headers, timeout=self.timeout
        )

    @staticmethod
    def _encode(body: Any) -> bytes:
        return json.dumps(body, ensure_ascii=False).encode("utf-8")

    def _redirect(self, request: httpx.Request, response: httpx.Response, hops: int) -> httpx.Request | None:
        """The next request of a redirect, or ``None`` when ``response`` is not one to follow.

        Followed here rather than by httpx (every request is sent with ``follow_redirects=False``,
        whatever the client says) so that no credential header ever reaches another origin: httpx
        itself only strips ``Authorization``, and only when it follows.
        """
        if response.status_code not in _REDIRECT_STATUSES or "location" not in response.headers:
            return None
        target = request.url.join(response.headers["location"])
        if hops >= MAX_REDIRECTS:
            raise ModelResponseError(
                f"{self.provider} redirected more than {MAX_REDIRECTS} times (last to "
                f"{self.scrub(redact_url(str(target)))}); set base_url to the final address"
            )
        if target.scheme not in ("http", "https"):
            raise ModelResponseError(f"{self.provider} redirected to an unsupported URL scheme {target.scheme!r}")
        headers = httpx.Headers(request.headers)
        headers.pop("host", None)
        if not _same_origin(target, request.url):
            for name in [*_credential_headers(self._headers), "authorization", "proxy-authorization", "cookie"]:
                headers.pop(name, None)
            for name, value in list(headers.items()):
                if self.scrub(value) != value:  # a custom header carrying a secret under a plain name
                    headers.pop(name, None)
        if target.userinfo:
            target = target.copy_with(username=None, password=None)
        return httpx.Request("POST", target, content=request.content, headers=headers, extensions=request.extensions)

    def scrub(self, text: str) -> str:
        """``text`` with this transport's secrets removed."""
        return scrub(text, self._secrets)

    def _fail(self, response: httpx.Response, text: str) -> ModelHTTPError:
        return error_for_status(
            self.provider,
            response.status_code,
            text,
            response.headers,
            self._secrets,
            url=str(response.request.url),
            credential=self.credential,
        )

    def _decode(self, text: str) -> Any:
        try:
            return parse_json(text, what=f"{self.provider} response")
        except ModelResponseError as exc:
            raise ModelResponseError(scrub(str(exc), self._secrets)) from None

    def _log_retry(self, error: ModelError, delay: float, attempt: int) -> None:
        logger.warning(
            "retrying %s request after %s (attempt %d of %d, waiting %.3fs)",
            self.provider,
            scrub(str(error), self._secrets),
            attempt + 1,
            self.retry.max_retries + 1,
            delay,
        )

    def _observe_attempt(self, path: str, retries: int) -> Observation | None:
        # One observation per HTTP attempt, so retries are visible in traces.
        observer = observation._observer
        if observer is None:
            return None
        return observer.start_http_attempt(self.provider, "POST", self.base_url + path, retries + 1)

    def _error_limit(self) -> int:
        return min(_ERROR_BODY_BYTES, self.limits.max_response_bytes)

    def _read(self, response: _SyncAnswer, limit: int, what: str) -> str:
        body = _Body(limit, what)
        try:
            for chunk in response.iter_bytes():
                body.add(chunk)
                if limit == self._error_limit() and body._size >= limit:
                    break  # an error body: the first part says all we need
        except ModelResponseError as exc:
            raise ModelResponseError(self.scrub(str(exc))) from None
        finally:
            response.close()
        return body.text(response)

    async def _aread(self, response: _AsyncAnswer, limit: int, what: str) -> str:
        body = _Body(limit, what)
        try:
            async for chunk in response.aiter_bytes():
                body.add(chunk)
                if limit == self._error_limit() and body._size >= limit:
                    break
        except ModelResponseError as exc:
            raise ModelResponseError(self.scrub(str(exc))) from None
        finally:
            await response.aclose()
        return body.text(response)

    def _too_large(self, response: _Answer) -> bool:
        length = response.headers.get("content-length")
        return bool(length and length.isdigit() and int(length) > self.limits.max_response_bytes)

    def _fast_lane(self) -> bool:
        """Whether this transport's own non-streaming POSTs may take the socket lane (``stdlib_http``).

        Not when proxy settings are in the environment: httpx's own clients follow them, the lane
        would not. Decided once per transport; the lane's request headers are fixed with it.
        """
        if self._lane_ok is None:
            with self._lock:
                if self._lane_ok is None:
                    from urllib.request import getproxies

                    self._lane_headers = {"accept-encoding": ACCEPT_ENCODING, **self._headers}
                    # NO_PROXY alone (listed as "no") sends nothing through a proxy.
                    self._lane_ok = not any(scheme != "no" for scheme in getproxies())
        return self._lane_ok

    def _poster(self) -> StdlibPoster | None:
        """The sync socket lane, unless the caller passed a client (its transport is theirs)."""
        if not self._owns_client or not self._fast_lane():
            return None
        if self._stdlib is None:
            with self._lock:
                if self._stdlib is None:
                    self._stdlib = StdlibPoster(ssl_context=_ssl_context())
        return self._stdlib

    def _aposter(self) -> AsyncStdlibPoster | None:
        """The async socket lane of the running loop (connections belong to one loop)."""
        if not self._owns_aclient or not self._fast_lane():
            return None
        if self._closed:
            raise RuntimeError(f"{self.provider} model is closed")
        loop = asyncio.get_running_loop()
        if self._astdlib_loop is not loop or self._astdlib is None:
            self._astdlib = AsyncStdlibPoster(ssl_context=_ssl_context())
            self._astdlib_loop = loop
        return self._astdlib

    def _exchange(self, client: httpx.Client, path: str, content: bytes, *, stream: bool) -> _SyncAnswer:
        """One attempt: send, follow redirects, and return the final answer with its body unread."""
        poster = None if stream else self._poster()
        if poster is not None:
            answer = poster.post(self.base_url + path, self._lane_headers, content, self.timeout)
            _log_answer(self.base_url + path, answer)
            if 200 <= answer.status_code < 300:
                notify_response(answer.status_code, answer.headers)
                return answer
            # Redirects and errors take the ordinary path from here, with an httpx request/response pair.
            request = self._build(client, path, content)
            response = answer.as_httpx(request)
        else:
            request = self._build(client, path, content)
            response = client.send(request, stream=True, follow_redirects=False)
        hops = 0
        while True:
            notify_response(response.status_code, response.headers)
            following = self._redirect(request, response, hops) if response.status_code < 400 else None
            if following is None:
                return response
            self._read(response, self._error_limit(), "redirect body")  # keeps the connection
            request, hops = following, hops + 1
            response = client.send(request, stream=True, follow_redirects=False)

    def _send(self, path: str, body: Any, *, stream: bool = False) -> _SyncAnswer:
        """Send with retries and redirects; return a successful response whose body is still unread."""
        client = self._sync_client()
        content = self._encode(body)
        retries = 0
        error: ModelError
        while True:
            headers: Mapping[str, str] | None = None
            obs = self._observe_attempt(path, retries)
            try:
                response = self._exchange(client, path, content, stream=stream)
                if response.status_code < 300:
                    if obs is not None:
                        obs.finish(response)
                    return response
                assert isinstance(response, httpx.Response)  # only 2xx answers come back direct
                text = self._read(response, self._error_limit(), f"{self.provider} error body")
                error, headers = self._unexpected(response, text), response.headers
                if obs is not None:
                    obs.finish(response)
            except httpx.RequestError as exc:
                error = _transport_error(self.provider, exc, self._secrets, self.base_url + path)
                if obs is not None:
                    obs.finish(error=error)
            except ModelError as exc:
                if obs is not None:
                    obs.finish(error=exc)
                raise
            except BaseException as exc:  # cancellation and the like: end the attempt, then let it go
                if obs is not None:
                    obs.finish(error=exc)
                raise
            delay = self.retry.delay(retries, error, headers)
            if delay is None:
                raise error
            self._log_retry(error, delay, retries)
            time.sleep(delay)
            retries += 1

    def _direct_headers(self, client: httpx.AsyncClient) -> dict[str, str]:
        """The headers httpx would send for ``client``: its defaults under this transport's own."""
        raw = client.headers.raw
        cached = self._direct_headers_for
        if cached is not None and cached[0] == raw:
            return cached[1]
        merged = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in raw}
        merged.update(self._headers)
        if "accept-encoding" not in self._headers:
            merged["accept-encoding"] = ACCEPT_ENCODING  # what the direct path decodes, as the lane
        self._direct_headers_for = (raw, merged)
        return merged

    async def _aexchange(self, client: httpx.AsyncClient, path: str, content: bytes, *, stream: bool) -> _AsyncAnswer:
        """One attempt: send, follow redirects, and return the final answer with its body unread."""
        lane = None if stream else self._aposter()
        direct = _direct_poster(client) if lane is None else None
        answer: _DirectAnswer | None = None
        if lane is not None:
            answer = await lane.post(self.base_url + path, self._lane_headers, content, self.timeout)
        elif direct is not None:
            answer = await direct.direct_post(self.base_url + path, self._direct_headers(client), content, self.timeout)
        if answer is not None:
            _log_answer(self.base_url + path, answer)
            if 200 <= answer.status_code < 300:
                notify_response(answer.status_code, answer.headers)
                return answer
            # Redirects and errors take the ordinary path from here, with an httpx request/response pair.
            request = self._build(client, path, content)
            response = answer.as_httpx(request)
        else:
            request = self._build(client, path, content)
            response = await client.send(request, stream=True, follow_redirects=False)
        hops = 0
        while True:
            notify_response(response.status_code, response.headers)
            following = self._redirect(request, response, hops) if response.status_code < 400 else None
            if following is None:
                return response
            await self._aread(response, self._error_limit(), "redirect body")
            request, hops = following, hops + 1
            response = await client.send(request, stream=True, follow_redirects=False)

    async def _asend(self, path: str, body: Any, *, stream: bool = False) -> _AsyncAnswer:
        """Async ``_send``."""
        client = self._async_client()
        content = self._encode(body)
        retries = 0
        error: ModelError
        while True:
            headers: Mapping[str, str] | None = None
            obs = self._observe_attempt(path, retries)
            try:
                response = await self._aexchange(client, path, content, stream=stream)
                if response.status_code < 300:
                    if obs is not None:
                        obs.finish(response)
                    return response
                assert isinstance(response, httpx.Response)  # only 2xx answers come back direct
                text = await self._aread(response, self._error_limit(), f"{self.provider} error body")
                error, headers = self._unexpected(response, text), response.headers
                if obs is not None:
                    obs.finish(response)
            except httpx.RequestError as exc:
                error = _transport_error(self.provider, exc, self._secrets, self.base_url + path)
                if obs is not None:
                    obs.finish(error=error)
            except ModelError as exc:
                if obs is not None:
                    obs.finish(error=exc)
                raise
            except BaseException as exc:  # cancellation and the like: end the attempt, then let it go
                if obs is not None:
                    obs.finish(error=exc)
                raise
            delay = self.retry.delay(retries, error, headers)
            if delay is None:
                raise error
            self._log_retry(error, delay, retries)
            await asyncio.sleep(delay)
            retries += 1

    def _unexpected(self, response: httpx.Response, text: str) -> ModelHTTPError:
        if response.status_code >= 400:
            return self._fail(response, text)
        # A 3xx that is not followed (303, 304, no Location): say where it pointed.
        location = response.headers.get("location")
        target = self.scrub(redact_url(str(response.request.url.join(location)))) if location else "nowhere"
        return ModelHTTPError(
            f"{self.provider} answered HTTP {response.status_code} (a redirect to {target}) for POST "
            f"{self.scrub(redact_url(str(response.request.url)))}; set base_url to the address that serves the API",
            status=response.status_code,
            body=self.scrub(text[: BODY_EXCERPT_CHARS + 512])[:BODY_EXCERPT_CHARS],
        )

    def post(self, path: str, body: Any) -> Any:
        """POST ``body`` as JSON and return the decoded JSON answer."""
        response = self._send(path, body)
        if self._too_large(response):
            response.close()
            raise ModelResponseError(f"{self.provider} response is larger than {self.limits.max_response_bytes} bytes")
        try:
            text = self._read(response, self.limits.max_response_bytes, f"{self.provider} response")
        except httpx.RequestError as exc:  # the connection failed after the status line
            raise _transport_error(self.provider, exc, self._secrets, str(response.url)) from None
        return self._decode(text)

    async def apost(self, path: str, body: Any) -> Any:
        """Async ``post``."""
        response = await self._asend(path, body)
        if self._too_large(response):
            await response.aclose()
            raise ModelResponseError(f"{self.provider} response is larger than {self.limits.max_response_bytes} bytes")
        try:
            text = await self._aread(response, self.limits.max_response_bytes, f"{self.provider} response")
        except httpx.RequestError as exc:  # the connection failed after the status line
            raise _transport_error(self.provider, exc, self._secrets, str(response.url)) from None
        return self._decode(text)

    def _stream_checks(self, response: _Answer) -> tuple[LineDecoder, _Body, _EventBound | None]:
        lines = LineDecoder(self.limits.max_line_bytes)
        total = _Body(self.limits.max_response_bytes, f"{self.provider} stream")
        sse = "text/event-stream" in response.headers.get("content-type", "")
        return lines, total, _EventBound(self.limits.max_event_bytes) if sse else None

    def open_stream(self, path: str, body: Any) -> LineStream:
        """POST ``body`` and return its answer as a ``LineStream`` of text lines."""
        response = self._send(path, body, stream=True)
        assert isinstance(response, httpx.Response)  # streams stay on httpx (see LineStream.finish)
        return LineStream(self, response)

    async def aopen_stream(self, path: str, body: Any) -> AsyncLineStream:
        """Async ``open_stream``."""
        return AsyncLineStream(self, await self._asend(path, body, stream=True))

    def stream_lines(self, path: str, body: Any) -> Generator[str, None, None]:
        """POST ``body`` and yield the answer's text lines as they arrive.

        Closing the iterator early closes the response (and its connection).
        """
        stream = self.open_stream(path, body)
        try:
            yield from stream
        finally:
            stream.close()

    async def astream_lines(self, path: str, body: Any) -> AsyncGenerator[str, None]:
        """Async ``stream_lines``."""
        stream = await self.aopen_stream(path, body)
        try:
            async for line in stream:
                yield line
        finally:
            await stream.aclose()


class _EventBound:
    """Bytes of one SSE event so far (non-comment lines since the last blank line)."""

    __slots__ = ("_limit", "_size")

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._size = 0

    def check(self, line: str) -> None:
        if not line:
            self._size = 0
            return
        if line.startswith(":"):
            return
        self._size += len(line) + 1
        if self._size > self._limit:
            raise ModelResponseError(
                f"a stream event is larger than {self._limit} bytes "
                "(raise ResponseLimits.max_event_bytes if such events are expected)"
            )


class LineStream:
    """The text lines of one streamed answer, read lazily with the transport's bounds.

    ``finish()`` is for after the provider's end marker: whatever the server already sent is read
    so the connection can return to the pool, but nothing is waited for; a server that keeps the
    stream open (keep-alive comments after ``[DONE]``) gets its connection closed instead.
    """

    def __init__(self, transport: HTTPTransport, response: httpx.Response) -> None:
        self._t = transport
        self._response = response
        self._lines, self._total, self._events = transport._stream_checks(response)
        self._chunks = response.iter_bytes()

    def __iter__(self) -> Iterator[str]:
        t = self._t
        try:
            for chunk in self._chunks:
                self._total.add(chunk)
                for line in self._lines.feed(chunk):
                    if self._events is not None:
                        self._events.check(line)
                    yield line
            for line in self._lines.flush():
                if self._events is not None:
                    self._events.check(line)
                yield line
            if self._events is not None:
                yield ""  # a last event without its blank line is still dispatched
        except httpx.RequestError as exc:
            raise _transport_error(t.provider, exc, t._secrets, str(self._response.request.url)) from None
        except ModelResponseError as exc:
            raise ModelResponseError(t.scrub(f"{t.provider}: {exc}")) from None

    def finish(self) -> None:
        """Read what already arrived (briefly), then release the connection."""
        stream: Any = self._response.extensions.get("network_stream")
        read = getattr(stream, "read", None)
        if read is None:
            self.close()
            return
        deadline = time.monotonic() + _DRAIN_GRACE
        me = threading.get_ident()
        active = True

        # httpcore fixes the read timeout when the body starts; for the drain, reads on this
        # connection get what is left of the grace period instead. Only this thread, and only
        # while draining: once the body is complete the connection may serve another thread.
        def bounded(max_bytes: int, timeout: float | None = None) -> Any:
            if not active or threading.get_ident() != me:
                return read(max_bytes, timeout=timeout)
            left = max(deadline - time.monotonic(), 0.001)
            return read(max_bytes, timeout=left if timeout is None else min(timeout, left))

        try:
            stream.read = bounded
        except AttributeError:
            self.close()
            return
        try:
            drained = 0
            for chunk in self._chunks:
                drained += len(chunk)
                if drained >= _DRAIN_BYTES or time.monotonic() >= deadline:
                    break
        except (httpx.HTTPError, OSError):
            pass  # the answer is complete; trouble after it changes nothing
        finally:
            active = False
            try:
                del stream.read
            except AttributeError:
                pass
            self.close()

    def close(self) -> None:
        """Close the response (a connection with unread data is dropped, not pooled)."""
        self._response.close()


class AsyncLineStream:
    """Async ``LineStream``."""

    def __init__(self, transport: HTTPTransport, response: _AsyncAnswer) -> None:
        self._t = transport
        self._response = response
        self._lines, self._total, self._events = transport._stream_checks(response)
        self._chunks = response.aiter_bytes()

    async def __aiter__(self) -> AsyncIterator[str]:
        t = self._t
        try:
            async for chunk in self._chunks:
                self._total.add(chunk)
                for line in self._lines.feed(chunk):
                    if self._events is not None:
                        self._events.check(line)
                    yield line
            for line in self._lines.flush():
                if self._events is not None:
                    self._events.check(line)
                yield line
            if self._events is not None:
                yield ""
        except httpx.RequestError as exc:
            raise _transport_error(t.provider, exc, t._secrets, str(self._response.url)) from None
        except ModelResponseError as exc:
            raise ModelResponseError(t.scrub(f"{t.provider}: {exc}")) from None

    async def finish(self) -> None:
        """Read what already arrived (briefly), then release the connection."""

        async def drain() -> None:
            drained = 0
            async for chunk in self._chunks:
                drained += len(chunk)
                if drained >= _DRAIN_BYTES:
                    break

        try:
            await asyncio.wait_for(drain(), _DRAIN_GRACE)
        except (TimeoutError, httpx.HTTPError, OSError):
            pass
        finally:
            await self.aclose()

    async def aclose(self) -> None:
        """Close the response."""
        await self._response.aclose()


# -- chat model base ----------------------------------------------------------------------------------


class StreamParser(Protocol):
    """Turns the lines of one streamed answer into ``ChatResponse`` chunks.

    ``done`` becomes true once the provider's end marker arrived (OpenAI ``[DONE]``, Anthropic
    ``message_stop``, Ollama ``done: true``); the model then stops reading at once, calls ``finish``
    for the last chunk(s) and releases the connection. A stream that ends without the marker raises
    ``ModelResponseError``. A provider error event mid-stream is raised from ``feed`` as the error
    an HTTP status would give (``error_for_status(provider, 529, data)`` for "overloaded",
    429 for a rate limit): it is retried like one when no chunk has been emitted yet.
    """

    done: bool

    def feed(self, line: str) -> list[ChatResponse]:
        """Consume one line of the stream; return the chunks it completes."""
        ...

    def finish(self) -> list[ChatResponse]:
        """The last chunk(s), called once ``done`` is true."""
        ...


class HTTPChatModel(BaseChatModel, PooledHTTPResource):
    """Base class of the httpx chat providers; subclasses supply the wire format.

    Subclasses implement ``build_body`` (prompt and merged options -> request body),
    ``parse_response`` (JSON payload -> ``ChatResponse``) and ``stream_parser`` (a fresh
    ``StreamParser``); those are pure, so sync and async share them.
    """

    provider: ClassVar[str] = "HTTP"
    chat_path: ClassVar[str] = ""

    def __init__(
        self,
        *,
        model: str,
        base_url: str,
        headers: Mapping[str, str],
        secrets: Sequence[str],
        options: ChatOptions | None,
        timeout: float | httpx.Timeout | None,
        max_retries: int,
        http_client: httpx.Client | None,
        async_http_client: httpx.AsyncClient | None,
        capabilities: ModelCapabilities,
        backoff_base: float,
        backoff_max: float,
        response_limits: ResponseLimits | None = None,
        credential: str | None = None,
    ) -> None:
        self.default_options: ChatOptions | None = ChatOptions(model=model).merge(options)
        self.capabilities = capabilities
        self._http = HTTPTransport(
            provider=self.provider,
            base_url=base_url,
            headers=headers,
            secrets=secrets,
            timeout=timeout,
            retry=RetryPolicy(max_retries=max_retries, backoff_base=backoff_base, backoff_max=backoff_max),
            http_client=http_client,
            async_http_client=async_http_client,
            limits=response_limits,
            credential=credential,
        )

    @property
    def model(self) -> str:
        """The default model name."""
        assert self.default_options is not None and self.default_options.model is not None
        return self.default_options.model

    @property
    def base_url(self) -> str:
        """The API root every request path is appended to."""
        return self._http.base_url

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r})"

    # -- provider hooks ---------------------------------------------------------------------------

    def options_for(self, prompt: Prompt) -> ChatOptions:
        """The constructor's options with the prompt's non-None options on top."""
        base = self.default_options or ChatOptions()
        return base.merge(prompt.options)

    def build_body(self, prompt: Prompt, *, stream: bool) -> dict[str, Any]:
        """The provider request body for ``prompt``."""
        raise NotImplementedError

    def parse_response(self, payload: Any) -> ChatResponse:
        """The response for a provider JSON payload."""
        raise NotImplementedError

    def stream_parser(self) -> StreamParser:
        """A parser for one streamed answer."""
        raise NotImplementedError

    def _parse(self, payload: Any) -> ChatResponse:
        return self._guarded(self.parse_response, payload, "response shape")

    def _feed(self, parser: StreamParser, line: str) -> list[ChatResponse]:
        return self._guarded(parser.feed, line, "stream event")

    def _guarded(self, fn: Callable[[Any], _T], arg: Any, what: str) -> _T:
        """Run a pure mapping step; any failure becomes a ModelResponseError with secrets scrubbed."""
        try:
            return fn(arg)
        except ModelResponseError as exc:
            raise ModelResponseError(self._http.scrub(str(exc))) from None
        except ModelHTTPError as exc:  # an error event mid-stream, typed like its HTTP status
            exc.args = (self._http.scrub(str(exc)),)
            exc.body = self._http.scrub(exc.body) if exc.body else exc.body
            raise
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            text = self._http.scrub(f"{type(exc).__name__}: {exc}")
            raise ModelResponseError(f"unexpected {self.provider} {what} ({text})") from None

    # -- the four modes ---------------------------------------------------------------------------

    def call(self, prompt: Prompt) -> ChatResponse:
        """Send the prompt and wait for the whole answer."""
        return self._parse(self._http.post(self.chat_path, self.build_body(prompt, stream=False)))

    async def acall(self, prompt: Prompt) -> ChatResponse:
        """Async ``call``."""
        return self._parse(await self._http.apost(self.chat_path, self.build_body(prompt, stream=False)))

    def stream(self, prompt: Prompt) -> Iterator[ChatResponse]:
        """Stream the answer as delta chunks; the last chunk carries finish reason and usage.

        The stream ends as soon as the provider's end marker arrives: what the server already sent
        after it is read so the connection can be pooled, but nothing more is waited for. A provider
        error event before the first chunk is retried like the HTTP status it stands for.
        """
        body = self.build_body(prompt, stream=True)
        retries = 0
        while True:
            parser = self.stream_parser()
            lines = self._http.open_stream(self.chat_path, body)
            emitted = False
            failure: ModelHTTPError | None = None
            try:
                for line in lines:
                    try:
                        chunks = self._feed(parser, line)
                    except ModelHTTPError as exc:
                        if emitted:
                            raise
                        failure = exc
                        break
                    for chunk in chunks:
                        emitted = True
                        yield chunk
                    if parser.done:
                        yield from parser.finish()
                        lines.finish()
                        return
                if failure is None:
                    _raise_incomplete(self.provider)
            finally:
                lines.close()
            assert failure is not None
            delay = self._http.retry.delay(retries, failure)
            if delay is None:
                raise failure
            self._http._log_retry(failure, delay, retries)
            time.sleep(delay)
            retries += 1

    async def astream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
        """Async ``stream``."""
        body = self.build_body(prompt, stream=True)
        retries = 0
        while True:
            parser = self.stream_parser()
            lines = await self._http.aopen_stream(self.chat_path, body)
            emitted = False
            failure: ModelHTTPError | None = None
            try:
                async for line in lines:
                    try:
                        chunks = self._feed(parser, line)
                    except ModelHTTPError as exc:
                        if emitted:
                            raise
                        failure = exc
                        break
                    for chunk in chunks:
                        emitted = True
                        yield chunk
                    if parser.done:
                        for chunk in parser.finish():
                            yield chunk
                        await lines.finish()
                        return
                if failure is None:
                    _raise_incomplete(self.provider)
            finally:
                await lines.aclose()
            assert failure is not None
            delay = self._http.retry.delay(retries, failure)
            if delay is None:
                raise failure
            self._http._log_retry(failure, delay, retries)
            await asyncio.sleep(delay)
            retries += 1


def assistant_text(text: str | None, has_tool_calls: bool) -> str | None:
    """One rule for empty answers, so a streamed answer aggregates to the same text as a call.

    A tool-calling turn without prose has ``None`` text; any other turn has a string (maybe ``""``).
    """
    if text:
        return text
    return None if has_tool_calls else ""


def env_or(value: str | None, *names: str) -> str | None:
    """``value`` if given, else the first non-empty environment variable of ``names``."""
    if value is not None:
        return value
    for name in names:
        found = os.environ.get(name)
        if found:
            return found
    return None


def _raise_incomplete(provider: str) -> None:
    raise ModelResponseError(f"{provider} stream ended before its end marker: the answer is incomplete")
