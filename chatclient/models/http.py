"""The one HTTP layer under every provider: pooled httpx clients, retries, typed errors, streaming.

``HTTPTransport`` sends JSON requests with the same rules in sync and async code:

* timeouts: a number means that many seconds for reading/writing and at most 10 s to connect; an
  ``httpx.Timeout`` is used as is;
* retries (``max_retries``, default 2) with exponential backoff and jitter on connection errors,
  timeouts and HTTP 408/409/429/5xx, honouring ``Retry-After`` / ``retry-after-ms``; never on other
  4xx. A streamed request is retried only until its response starts; a stream that breaks later
  raises, because part of it has already been handed to the caller;
* errors from ``chatclient.errors`` carrying the status and a body excerpt;
* secrets (API keys) travel only in headers and are scrubbed from every error text and log line;
* one pooled ``httpx.Client`` / ``httpx.AsyncClient`` per transport, created lazily and reused
  (or injected by the caller, who then keeps ownership and closes it).

``HTTPChatModel`` is the base class of the chat providers: it drives the four modes from three pure
provider hooks (prompt -> body, payload -> response, stream line -> chunks).
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import os
import random
import threading
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Generator, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, ClassVar, Protocol, Self, TypeVar

import httpx

from chatclient import observation
from chatclient.errors import (
    AuthenticationError,
    ModelConnectionError,
    ModelError,
    ModelHTTPError,
    ModelResponseError,
    ModelTimeoutError,
    RateLimitError,
)
from chatclient.models.base import BaseChatModel, ChatResponse, ModelCapabilities
from chatclient.models.sse import parse_json
from chatclient.observation import Observation
from chatclient.options import ChatOptions
from chatclient.prompt import Prompt

__all__ = [
    "DEFAULT_TIMEOUT",
    "HTTPChatModel",
    "HTTPTransport",
    "RetryPolicy",
    "StreamParser",
    "assistant_text",
    "env_or",
    "error_for_status",
    "parse_retry_after",
    "scrub",
]

logger = logging.getLogger("chatclient.models.http")
_T = TypeVar("_T")

DEFAULT_TIMEOUT = httpx.Timeout(600.0, connect=10.0)
RETRY_STATUSES = frozenset({408, 409, 429})
BODY_EXCERPT_CHARS = 1000
REDACTED = "[REDACTED]"

# Matches the official SDKs: enough connections for a few hundred concurrent calls.
_LIMITS = httpx.Limits(max_connections=1000, max_keepalive_connections=100)


# -- secrets ----------------------------------------------------------------------------------------


def scrub(text: str, secrets: Sequence[str]) -> str:
    """Replace every occurrence of each secret in ``text``.

    >>> scrub("bad key sk-123456", ["sk-123456"])
    'bad key [REDACTED]'
    """
    for secret in secrets:
        if secret and len(secret) >= 4 and secret in text:
            text = text.replace(secret, REDACTED)
    return text


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
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def _error_message(body: str) -> str | None:
    """The human message inside an OpenAI/Anthropic/Ollama style error body, if there is one."""
    try:
        payload = json.loads(body)
    except ValueError:
        return None
    if not isinstance(payload, dict):
        return None
    err = payload.get("error", payload.get("detail"))
    if isinstance(err, str):
        return err
    if isinstance(err, dict) and isinstance(err.get("message"), str):
        return str(err["message"])
    return None


def error_for_status(
    provider: str, status: int, body: str, headers: Mapping[str, str] | httpx.Headers, secrets: Sequence[str] = ()
) -> ModelHTTPError:
    """The typed error for an HTTP error response; texts are scrubbed of ``secrets``."""
    excerpt = scrub(body[:BODY_EXCERPT_CHARS], secrets)
    detail = _error_message(body)
    detail = scrub(detail[:300], secrets) if detail else excerpt[:300]
    message = f"{provider} returned HTTP {status}" + (f": {detail}" if detail else "")
    if status in (401, 403):
        return AuthenticationError(message + " (check the API key and its permissions)", status=status, body=excerpt)
    if status == 429:
        return RateLimitError(message, status=status, body=excerpt, retry_after=parse_retry_after(headers))
    return ModelHTTPError(message, status=status, body=excerpt)


def _transport_error(provider: str, exc: Exception, secrets: Sequence[str]) -> ModelError:
    text = scrub(str(exc) or type(exc).__name__, secrets)
    if isinstance(exc, httpx.TimeoutException):
        return ModelTimeoutError(f"{provider} did not answer in time ({type(exc).__name__}: {text})")
    if isinstance(exc, httpx.DecodingError | httpx.TooManyRedirects):
        return ModelResponseError(f"{provider} sent an unusable response ({type(exc).__name__}: {text})")
    return ModelConnectionError(f"connection to {provider} failed ({type(exc).__name__}: {text})")


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


class HTTPTransport:
    """Pooled JSON-over-HTTP with retries and typed errors, shared by sync and async callers.

    ``secrets`` are values (API keys) that must never appear in an error or log text; they are
    only sent inside ``headers``.
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
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, got {base_url!r}")
        self.provider = provider
        self.base_url = base_url.rstrip("/")
        self.timeout = as_timeout(timeout)
        self.retry = retry or RetryPolicy()
        self._headers = _RedactedHeaders(
            {"accept": "application/json", "content-type": "application/json", "user-agent": "chatclient"}
        )
        self._headers.update(headers or {})
        self._secrets = _Secrets(s for s in secrets if s)
        self._client = http_client
        self._owns_client = http_client is None
        self._aclient = async_http_client
        self._owns_aclient = async_http_client is None
        self._aclient_loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()
        self._closed = False

    def __repr__(self) -> str:
        return f"HTTPTransport(provider={self.provider!r}, base_url={self.base_url!r})"

    # -- clients --------------------------------------------------------------------------------

    def _sync_client(self) -> httpx.Client:
        if self._closed:
            raise RuntimeError(f"{self.provider} model is closed")
        client = self._client
        if client is None:
            with self._lock:
                if self._client is None:
                    self._client = httpx.Client(timeout=self.timeout, limits=_LIMITS)
                client = self._client
        return client

    def _async_client(self) -> httpx.AsyncClient:
        if self._closed:
            raise RuntimeError(f"{self.provider} model is closed")
        if not self._owns_aclient:
            assert self._aclient is not None
            return self._aclient
        loop = asyncio.get_running_loop()
        # An AsyncClient's pooled connections belong to the loop that opened them; a model used
        # from several asyncio.run() calls needs a fresh pool per loop.
        if self._aclient is None or self._aclient_loop is not loop or self._aclient.is_closed:
            self._aclient = httpx.AsyncClient(timeout=self.timeout, limits=_LIMITS)
            self._aclient_loop = loop
        return self._aclient

    def close(self) -> None:
        """Close the clients this transport created (injected clients stay open)."""
        self._closed = True
        if self._owns_client and self._client is not None:
            self._client.close()
        if self._owns_aclient and self._aclient is not None and not self._aclient.is_closed:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                loop = None
            owner = self._aclient_loop
            if loop is None and owner is not None and not owner.is_closed() and not owner.is_running():
                owner.run_until_complete(self._aclient.aclose())
            elif loop is not None and loop is self._aclient_loop:
                loop.create_task(self._aclient.aclose())

    async def aclose(self) -> None:
        """Close the clients this transport created, from async code."""
        self._closed = True
        aclient = self._aclient
        # A pool opened on another (finished) loop cannot be closed from this one.
        same_loop = self._aclient_loop is asyncio.get_running_loop()
        if self._owns_aclient and aclient is not None and not aclient.is_closed and same_loop:
            await aclient.aclose()
        if self._owns_client and self._client is not None:
            self._client.close()

    # -- requests -------------------------------------------------------------------------------

    def _build(self, client: httpx.Client | httpx.AsyncClient, path: str, body: Any) -> httpx.Request:
        return client.build_request(
            "POST",
            self.base_url + path,
            content=json.dumps(body, ensure_ascii=False).encode("utf-8"),
            headers=self._headers,
            timeout=self.timeout,
        )

    def scrub(self, text: str) -> str:
        """``text`` with this transport's secrets removed."""
        return scrub(text, self._secrets)

    def _fail(self, response: httpx.Response) -> ModelHTTPError:
        return error_for_status(self.provider, response.status_code, response.text, response.headers, self._secrets)

    def _decode(self, response: httpx.Response) -> Any:
        try:
            return parse_json(response.text, what=f"{self.provider} response")
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

    def _send(self, path: str, body: Any, *, stream: bool) -> httpx.Response:
        client = self._sync_client()
        retries = 0
        error: ModelError
        while True:
            headers: httpx.Headers | None = None
            obs = self._observe_attempt(path, retries)
            try:
                response = client.send(self._build(client, path, body), stream=stream)
                if response.status_code < 400:
                    if obs is not None:
                        obs.finish(response)
                    return response
                try:
                    response.read()
                finally:
                    response.close()
                error, headers = self._fail(response), response.headers
                if obs is not None:
                    obs.finish(response)
            except httpx.RequestError as exc:
                error = _transport_error(self.provider, exc, self._secrets)
                if obs is not None:
                    obs.finish(error=error)
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

    async def _asend(self, path: str, body: Any, *, stream: bool) -> httpx.Response:
        client = self._async_client()
        retries = 0
        error: ModelError
        while True:
            headers: httpx.Headers | None = None
            obs = self._observe_attempt(path, retries)
            try:
                response = await client.send(self._build(client, path, body), stream=stream)
                if response.status_code < 400:
                    if obs is not None:
                        obs.finish(response)
                    return response
                try:
                    await response.aread()
                finally:
                    await response.aclose()
                error, headers = self._fail(response), response.headers
                if obs is not None:
                    obs.finish(response)
            except httpx.RequestError as exc:
                error = _transport_error(self.provider, exc, self._secrets)
                if obs is not None:
                    obs.finish(error=error)
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

    def post(self, path: str, body: Any) -> Any:
        """POST ``body`` as JSON and return the decoded JSON answer."""
        return self._decode(self._send(path, body, stream=False))

    async def apost(self, path: str, body: Any) -> Any:
        """Async ``post``."""
        return self._decode(await self._asend(path, body, stream=False))

    def stream_lines(self, path: str, body: Any) -> Generator[str, None, None]:
        """POST ``body`` and yield the answer's text lines as they arrive.

        Closing the iterator early closes the response (and returns its connection to the pool).
        """
        response = self._send(path, body, stream=True)
        try:
            yield from response.iter_lines()
        except httpx.RequestError as exc:
            raise _transport_error(self.provider, exc, self._secrets) from None
        finally:
            response.close()

    async def astream_lines(self, path: str, body: Any) -> AsyncGenerator[str, None]:
        """Async ``stream_lines``."""
        response = await self._asend(path, body, stream=True)
        try:
            async for line in response.aiter_lines():
                yield line
        except httpx.RequestError as exc:
            raise _transport_error(self.provider, exc, self._secrets) from None
        finally:
            await response.aclose()


# -- chat model base ----------------------------------------------------------------------------------


class StreamParser(Protocol):
    """Turns the lines of one streamed answer into ``ChatResponse`` chunks.

    ``done`` becomes true once the provider's end marker arrived; only then is ``finish`` called for
    the last chunk(s). A stream that ends without the marker raises ``ModelResponseError``.
    """

    done: bool

    def feed(self, line: str) -> list[ChatResponse]:
        """Consume one line of the stream; return the chunks it completes."""
        ...

    def finish(self) -> list[ChatResponse]:
        """The last chunk(s), called once ``done`` is true."""
        ...


class PooledHTTPResource:
    """Closing and context-manager support for anything that owns an ``HTTPTransport`` as ``_http``.

    ``close()``/``aclose()`` release pooled connections; clients injected by the caller are left to
    their owner.
    """

    _http: HTTPTransport

    def close(self) -> None:
        """Release pooled connections."""
        self._http.close()

    async def aclose(self) -> None:
        """Async ``close``."""
        await self._http.aclose()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


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

        After the end marker the rest of the body is drained (as the official SDKs do), so the
        connection goes back to the pool instead of being dropped.
        """
        parser = self.stream_parser()
        lines = self._http.stream_lines(self.chat_path, self.build_body(prompt, stream=True))
        try:
            for line in lines:
                yield from self._feed(parser, line)
                if parser.done:
                    yield from parser.finish()
                    _drain(lines)
                    return
            _raise_incomplete(self.provider)
        finally:
            lines.close()

    async def astream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
        """Async ``stream``."""
        parser = self.stream_parser()
        lines = self._http.astream_lines(self.chat_path, self.build_body(prompt, stream=True))
        try:
            async for line in lines:
                for chunk in self._feed(parser, line):
                    yield chunk
                if parser.done:
                    for chunk in parser.finish():
                        yield chunk
                    await _adrain(lines)
                    return
            _raise_incomplete(self.provider)
        finally:
            await lines.aclose()


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


def _drain(lines: Iterator[str]) -> None:
    # The answer is complete; a failure while reading what trails it changes nothing.
    try:
        for _ in lines:
            pass
    except ModelError:
        pass


async def _adrain(lines: AsyncIterator[str]) -> None:
    try:
        async for _ in lines:
            pass
    except ModelError:
        pass
