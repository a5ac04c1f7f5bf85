"""HTTP failures mapped to the typed errors of ``chatclient.errors``, with messages that say what to fix.

Statuses become ``ModelHTTPError`` and its subclasses (401/403 -> ``AuthenticationError``, 429 ->
``RateLimitError``); transport failures of httpx (and of the socket lane, which raises the same httpx
exception types) become ``ModelConnectionError`` / ``ModelTimeoutError`` / ``ModelRequestError`` /
``ModelResponseError``. Every text is scrubbed of secrets before it is cut to an excerpt.
"""

from __future__ import annotations

import email.utils
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

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
from chatclient.models.http.credentials import redact_url
from chatclient.models.http.sse import parse_json
from chatclient.redaction import scrub

BODY_EXCERPT_CHARS = 1000


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


_OPENAI_PATHS = (
    "/chat/completions",
    "/embeddings",
    "/completions",
    "/images/generations",
    "/images/edits",
    "/audio/transcriptions",
    "/audio/speech",
)


def _not_found_hint(url: str | None, detail: str) -> str | None:
    """The likely base_url fix for a 404, judged from the request path."""
    if url is None or "model" in detail.lower():
        return None  # "model not found" is about the model name, not the path
    parts = urlsplit(url)
    path = parts.path.rstrip("/")
    for suffix in (*_OPENAI_PATHS, "/api/chat", "/api/embed", "/v1/messages"):
        if path.endswith(suffix):
            base = path[: -len(suffix)]
            break
    else:
        return None
    root = urlunsplit(parts._replace(path=base, query="", fragment=""))
    # Azure's deployment paths have no /v1: only an OpenAI-style root is told to add it.
    if suffix in _OPENAI_PATHS and not base.endswith("/v1") and "/openai/deployments/" not in base:
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


# The API hosts of vendors whose wire format other servers speak too (vLLM, llama.cpp, LM Studio,
# proxies); a provider without an entry is named as is, wherever its base_url points.
VENDOR_HOSTS: Mapping[str, tuple[str, ...]] = {
    "OpenAI": ("api.openai.com",),
    "OpenAI moderation": ("api.openai.com",),
    "Anthropic": ("api.anthropic.com",),
}


def server_label(provider: str, base_url: str, vendor_hosts: Collection[str] | None = None) -> str:
    """How error messages name the server behind ``base_url``.

    The vendor's name (``provider``) when the host is one of ``vendor_hosts`` (by default the
    provider's entry in ``VENDOR_HOSTS``; a subdomain counts) or when there is no host to compare
    with; otherwise the server's own address, so that an error from a local or self-hosted server
    that speaks a vendor's API does not read as the vendor's.

    >>> server_label("OpenAI", "https://api.openai.com/v1")
    'OpenAI'
    >>> server_label("OpenAI", "http://127.0.0.1:8080/v1")
    'the server at 127.0.0.1:8080 (OpenAI API)'
    """
    if vendor_hosts is None:
        vendor_hosts = VENDOR_HOSTS.get(provider, ())
    if not vendor_hosts:
        return provider
    host = (urlsplit(base_url).hostname or "").lower()
    if any(host == vendor or host.endswith("." + vendor) for vendor in vendor_hosts):
        return provider
    return f"the server at {_host_port(base_url)} ({provider} API)"


def _transport_error(provider: str, exc: Exception, secrets: Sequence[str], url: str) -> ModelError:
    """The typed error for a failed exchange; ``provider`` is how the server is named (``server_label``)."""
    shown = scrub(redact_url(url), secrets)
    at = "" if _host_port(url) in provider else f" at {_host_port(url)}"
    if isinstance(exc, httpx.LocalProtocolError | httpx.UnsupportedProtocol):
        # The text of these quotes the offending header value: never show it, and never retry.
        return ModelRequestError(
            f"the request to {provider} at {shown} could not be sent ({type(exc).__name__}): an invalid header, "
            "URL or protocol - check base_url and the api_key / headers= values for stray characters"
        )
    text = scrub(str(exc) or type(exc).__name__, secrets)[:300]
    if isinstance(exc, httpx.ConnectTimeout):
        return ModelTimeoutError(
            f"could not connect to {provider}{at} in time ({shown}): is the host reachable and base_url right?"
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
        return ModelConnectionError(f"could not connect to {provider}{at} ({shown}): {why}")
    return ModelConnectionError(f"connection to {provider} at {shown} failed ({type(exc).__name__}: {text})")
