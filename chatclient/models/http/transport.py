"""``HTTPTransport``: pooled JSON-over-HTTP with retries, redirects and typed errors, sync and async.

One transport per model. It picks the path of each POST (``lane.py``), follows redirects itself
(``redirects.py``), retries by its ``RetryPolicy`` (``retry.py``), maps failures to typed errors
(``error_mapping.py``) and hands streamed answers out as line streams (``streams.py``).
"""

from __future__ import annotations

import asyncio
import base64
import functools
import itertools
import json
import logging
import ssl
import threading
import time
from collections.abc import AsyncGenerator, Callable, Collection, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

import httpx

from chatclient import observation
from chatclient.errors import ModelError, ModelHTTPError, ModelResponseError
from chatclient.models.http.credentials import (
    _check_headers,
    _credential_headers,
    _header_secrets,
    _per_request_secrets,
    _RedactedHeaders,
    _Secrets,
    redact_url,
    with_secrets,
)
from chatclient.models.http.error_mapping import BODY_EXCERPT_CHARS, _transport_error, error_for_status, server_label
from chatclient.models.http.lane import (
    _Answer,
    _AsyncAnswer,
    _direct_poster,
    _DirectAnswer,
    _log_answer,
    _SyncAnswer,
    env_lane_setting,
    lane_allowed,
)
from chatclient.models.http.limits import DEFAULT_TIMEOUT, ERROR_BODY_BYTES, ResponseLimits, _Body, as_timeout
from chatclient.models.http.multipart import EncodedBody
from chatclient.models.http.redirects import next_request
from chatclient.models.http.response_headers import notify_response
from chatclient.models.http.retry import RetryPolicy
from chatclient.models.http.sse import parse_json
from chatclient.models.http.stdlib_http import ACCEPT_ENCODING, KEEPALIVE_EXPIRY, AsyncStdlibPoster, StdlibPoster
from chatclient.models.http.streams import AsyncLineStream, LineStream
from chatclient.observation import Observation
from chatclient.redaction import _MIN_SECRET, scrub

logger = logging.getLogger("chatclient.models.http")

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
class BinaryAnswer:
    """A whole answer as bytes (``post_binary``): ``content`` and the server's ``content_type``."""

    content: bytes
    content_type: str | None

    def __repr__(self) -> str:
        return f"BinaryAnswer(content_type={self.content_type!r}, {len(self.content)} bytes)"


class HTTPTransport:
    """Pooled JSON-over-HTTP with retries and typed errors, shared by sync and async callers.

    ``secrets`` are values (API keys) that must never appear in an error or log text; they are
    only sent inside ``headers``. Values of credential-like headers (``authorization``,
    ``x-api-key``, ``api-key``, anything naming a key, token, secret or password) and the
    ``user:password`` of ``base_url`` are treated as secrets too. ``credential`` says where the
    key came from, for the 401 message. ``limits`` bounds what the server may send back.
    ``socket_lane=False`` sends every request through httpx (``None``: the
    ``CHATCLIENT_SOCKET_LANE`` environment variable decides, on by default); ``keepalive_expiry``
    is how long (seconds) an idle lane connection may wait for its next request before it is closed.
    ``vendor_hosts`` are the vendor's own API hosts (default: ``VENDOR_HOSTS[provider]``): at any
    other host, error messages name the server by its address instead of by ``provider`` (``server``).
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
        vendor_hosts: Collection[str] | None = None,
        socket_lane: bool | None = None,
        keepalive_expiry: float = KEEPALIVE_EXPIRY,
        request_headers: Callable[[str, bytes], Mapping[str, str]] | None = None,
    ) -> None:
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            shown = redact_url(base_url) if isinstance(base_url, str) else type(base_url).__name__
            raise ValueError(f"base_url must start with http:// or https://, got {shown!r}")
        if socket_lane is None:
            env_lane_setting()  # a value it does not understand fails here, not at the first call
        elif not isinstance(socket_lane, bool):
            raise TypeError(f"socket_lane must be True, False or None, got {type(socket_lane).__name__}")
        if isinstance(keepalive_expiry, bool) or not isinstance(keepalive_expiry, int | float) or keepalive_expiry <= 0:
            raise ValueError(f"keepalive_expiry must be a positive number of seconds, got {keepalive_expiry!r}")
        self.provider = provider
        self.timeout = as_timeout(timeout)
        self._socket_lane = socket_lane
        self._keepalive_expiry = float(keepalive_expiry)
        self.retry = retry or RetryPolicy()
        self.limits = limits or ResponseLimits()
        self.credential = credential
        # Headers computed for each attempt from its URL and body (SigV4 signatures, fresh bearer tokens).
        self.request_headers = request_headers
        extra = dict(headers or {})
        _check_headers(extra)
        found = [s for s in secrets if s]
        parts = urlsplit(base_url.rstrip("/"))
        if "@" in parts.netloc:
            # Credentials in the URL become a Basic auth header (what httpx would do), so the URL
            # itself never carries them: not in repr, errors, logs or spans, nor across redirects.
            userinfo, _, hostport = parts.netloc.rpartition("@")
            user, _, password = userinfo.partition(":")
            user, password = unquote(user), unquote(password)
            token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
            extra["authorization"] = f"Basic {token}"
            found += [userinfo, user, password, token]
            parts = parts._replace(netloc=hostport)
        self.base_url = urlunsplit(parts)
        self.server = server_label(provider, self.base_url, vendor_hosts)
        self._headers = _RedactedHeaders(
            {"accept": "application/json", "content-type": "application/json", "user-agent": "chatclient"}
        )
        # Names are case-insensitive on the wire: one spelling each, so a caller's "User-Agent" replaces
        # the default and an explicit api_key's "authorization" replaces a caller's "Authorization"
        # (the later entry wins) instead of both going out.
        self._headers.update({name.lower(): value for name, value in extra.items()})
        self._secrets = _Secrets(s for s in [*found, *_header_secrets(extra)] if len(s) >= _MIN_SECRET)
        self._fixed_secrets = len(self._secrets)
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

    def _build(
        self,
        client: httpx.Client | httpx.AsyncClient,
        path: str,
        content: bytes,
        extra: Mapping[str, str] | None = None,
    ) -> httpx.Request:
        headers = _RedactedHeaders({**self._headers, **extra}) if extra else self._headers
        return client.build_request(
            "POST", self.base_url + path, content=content, headers=headers, timeout=self.timeout
        )

    def _attempt_headers(self, path: str, content: bytes, content_type: str | None = None) -> dict[str, str]:
        """The ``request_headers`` hook's headers for one attempt (none without a hook), and the
        body's own content type when it is not JSON."""
        extra: dict[str, str] = {}
        if self.request_headers is not None:
            hooked = self.request_headers(self.base_url + path, content).items()
            extra = {name.lower(): value for name, value in hooked}
            _check_headers(extra)
            self.add_secrets(_per_request_secrets(extra))
        if content_type is not None:
            extra["content-type"] = content_type
        return extra

    @staticmethod
    def _encode(body: Any) -> tuple[bytes, str | None]:
        """The bytes of ``body`` and their content type when it is not the default JSON."""
        if isinstance(body, EncodedBody):
            return body.content, body.content_type
        return json.dumps(body, ensure_ascii=False).encode("utf-8"), None

    def _redirect(self, request: httpx.Request, response: httpx.Response, hops: int) -> httpx.Request | None:
        return next_request(
            self.server,
            request,
            response,
            hops,
            scrub=self.scrub,
            credential_headers=_credential_headers(request.headers),
        )

    def add_secrets(self, values: Sequence[str]) -> None:
        """Make the scrubber know credentials that appear after construction (a token provider's
        tokens, credentials from botocore's chain): no error text, log line or span shows them."""
        self._secrets = with_secrets(self._secrets, getattr(self, "_fixed_secrets", 0), list(values))

    def scrub(self, text: str) -> str:
        """``text`` with this transport's secrets removed."""
        return scrub(text, self._secrets)

    def _fail(self, response: httpx.Response, text: str) -> ModelHTTPError:
        return error_for_status(
            self.server,
            response.status_code,
            text,
            response.headers,
            self._secrets,
            url=str(response.request.url),
            credential=self.credential,
        )

    def _decode(self, text: str) -> Any:
        try:
            return parse_json(text, what=f"{self.server} response")
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
        return min(ERROR_BODY_BYTES, self.limits.max_response_bytes)

    def _read(self, response: _SyncAnswer, limit: int, what: str) -> str:
        return self._collect(response, limit, what).text(response)

    async def _aread(self, response: _AsyncAnswer, limit: int, what: str) -> str:
        return (await self._acollect(response, limit, what)).text(response)

    def _collect(self, response: _SyncAnswer, limit: int, what: str) -> _Body:
        """The body of ``response``, bounded by ``limit`` bytes; the response is closed after."""
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
        return body

    async def _acollect(self, response: _AsyncAnswer, limit: int, what: str) -> _Body:
        """Async ``_collect``."""
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
        return body

    def _too_large(self, response: _Answer) -> bool:
        length = response.headers.get("content-length")
        return bool(length and length.isascii() and length.isdigit() and int(length) > self.limits.max_response_bytes)

    def _fast_lane(self) -> bool:
        """Whether this transport's own POSTs (calls and streams) may take the socket lane (``stdlib_http``).

        Not when it is switched off (``socket_lane=False``, ``CHATCLIENT_SOCKET_LANE=0``) or proxy
        settings are in the environment (see ``lane_allowed``). Decided once per transport; the lane's
        request headers are fixed with it.
        """
        if self._lane_ok is None:
            with self._lock:
                if self._lane_ok is None:
                    self._lane_headers = {"accept-encoding": ACCEPT_ENCODING, **self._headers}
                    self._lane_ok = lane_allowed(self._socket_lane)
        return self._lane_ok

    def _poster(self) -> StdlibPoster | None:
        """The sync socket lane, unless the caller passed a client (its transport is theirs)."""
        if not self._owns_client or not self._fast_lane():
            return None
        if self._stdlib is None:
            with self._lock:
                if self._stdlib is None:
                    self._stdlib = StdlibPoster(ssl_context=_ssl_context(), keepalive_expiry=self._keepalive_expiry)
        return self._stdlib

    def _aposter(self) -> AsyncStdlibPoster | None:
        """The async socket lane of the running loop (connections belong to one loop)."""
        if not self._owns_aclient or not self._fast_lane():
            return None
        if self._closed:
            raise RuntimeError(f"{self.provider} model is closed")
        loop = asyncio.get_running_loop()
        if self._astdlib_loop is not loop or self._astdlib is None:
            self._astdlib = AsyncStdlibPoster(ssl_context=_ssl_context(), keepalive_expiry=self._keepalive_expiry)
            self._astdlib_loop = loop
        return self._astdlib

    def _exchange(self, client: httpx.Client, path: str, content: bytes, content_type: str | None) -> _SyncAnswer:
        """One attempt: send, follow redirects, and return the final answer with its body unread."""
        extra = self._attempt_headers(path, content, content_type)
        poster = self._poster()
        if poster is not None:
            lane_headers = {**self._lane_headers, **extra} if extra else self._lane_headers
            answer = poster.post(self.base_url + path, lane_headers, content, self.timeout)
            _log_answer(self.base_url + path, answer)
            if 200 <= answer.status_code < 300:
                notify_response(answer.status_code, answer.headers)
                return answer
            # Redirects and errors take the ordinary path from here, with an httpx request/response pair.
            request = self._build(client, path, content, extra)
            response = answer.as_httpx(request)
        else:
            request = self._build(client, path, content, extra)
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

    def _send(self, path: str, body: Any) -> _SyncAnswer:
        """Send with retries and redirects; return a successful response whose body is still unread."""
        client = self._sync_client()
        content, content_type = self._encode(body)
        retries = 0
        error: ModelError
        while True:
            headers: Mapping[str, str] | None = None
            obs = self._observe_attempt(path, retries)
            try:
                response = self._exchange(client, path, content, content_type)
                if response.status_code < 300:
                    if obs is not None:
                        obs.finish(response)
                    return response
                assert isinstance(response, httpx.Response)  # only 2xx answers come back direct
                text = self._read(response, self._error_limit(), f"{self.server} error body")
                error, headers = self._unexpected(response, text), response.headers
                if obs is not None:
                    obs.finish(response)
            except httpx.RequestError as exc:
                error = _transport_error(self.server, exc, self._secrets, self.base_url + path)
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

    async def _aexchange(
        self, client: httpx.AsyncClient, path: str, content: bytes, content_type: str | None
    ) -> _AsyncAnswer:
        """One attempt: send, follow redirects, and return the final answer with its body unread."""
        extra = self._attempt_headers(path, content, content_type)
        lane = self._aposter()
        direct = _direct_poster(client) if lane is None else None
        answer: _DirectAnswer | None = None
        if lane is not None:
            lane_headers = {**self._lane_headers, **extra} if extra else self._lane_headers
            answer = await lane.post(self.base_url + path, lane_headers, content, self.timeout)
        elif direct is not None:
            direct_headers = {**self._direct_headers(client), **extra} if extra else self._direct_headers(client)
            answer = await direct.direct_post(self.base_url + path, direct_headers, content, self.timeout)
        if answer is not None:
            _log_answer(self.base_url + path, answer)
            if 200 <= answer.status_code < 300:
                notify_response(answer.status_code, answer.headers)
                return answer
            # Redirects and errors take the ordinary path from here, with an httpx request/response pair.
            request = self._build(client, path, content, extra)
            response = answer.as_httpx(request)
        else:
            request = self._build(client, path, content, extra)
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

    async def _asend(self, path: str, body: Any) -> _AsyncAnswer:
        """Async ``_send``."""
        client = self._async_client()
        content, content_type = self._encode(body)
        retries = 0
        error: ModelError
        while True:
            headers: Mapping[str, str] | None = None
            obs = self._observe_attempt(path, retries)
            try:
                response = await self._aexchange(client, path, content, content_type)
                if response.status_code < 300:
                    if obs is not None:
                        obs.finish(response)
                    return response
                assert isinstance(response, httpx.Response)  # only 2xx answers come back direct
                text = await self._aread(response, self._error_limit(), f"{self.server} error body")
                error, headers = self._unexpected(response, text), response.headers
                if obs is not None:
                    obs.finish(response)
            except httpx.RequestError as exc:
                error = _transport_error(self.server, exc, self._secrets, self.base_url + path)
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
            f"{self.server} answered HTTP {response.status_code} (a redirect to {target}) for POST "
            f"{self.scrub(redact_url(str(response.request.url)))}; set base_url to the address that serves the API",
            status=response.status_code,
            body=self.scrub(text[: BODY_EXCERPT_CHARS + 512])[:BODY_EXCERPT_CHARS],
        )

    def post(self, path: str, body: Any) -> Any:
        """POST ``body`` as JSON and return the decoded JSON answer."""
        response = self._send(path, body)
        if self._too_large(response):
            response.close()
            raise ModelResponseError(f"{self.server} response is larger than {self.limits.max_response_bytes} bytes")
        try:
            text = self._read(response, self.limits.max_response_bytes, f"{self.server} response")
        except httpx.RequestError as exc:  # the connection failed after the status line
            raise _transport_error(self.server, exc, self._secrets, str(response.url)) from None
        return self._decode(text)

    async def apost(self, path: str, body: Any) -> Any:
        """Async ``post``."""
        response = await self._asend(path, body)
        if self._too_large(response):
            await response.aclose()
            raise ModelResponseError(f"{self.server} response is larger than {self.limits.max_response_bytes} bytes")
        try:
            text = await self._aread(response, self.limits.max_response_bytes, f"{self.server} response")
        except httpx.RequestError as exc:  # the connection failed after the status line
            raise _transport_error(self.server, exc, self._secrets, str(response.url)) from None
        return self._decode(text)

    def post_binary(self, path: str, body: Any) -> BinaryAnswer:
        """POST ``body`` and return the answer's raw bytes with its content type (audio, images)."""
        response = self._send(path, body)
        if self._too_large(response):
            response.close()
            raise ModelResponseError(f"{self.server} response is larger than {self.limits.max_response_bytes} bytes")
        try:
            data = self._collect(response, self.limits.max_response_bytes, f"{self.server} response").data()
        except httpx.RequestError as exc:  # the connection failed after the status line
            raise _transport_error(self.server, exc, self._secrets, str(response.url)) from None
        return BinaryAnswer(data, response.headers.get("content-type"))

    async def apost_binary(self, path: str, body: Any) -> BinaryAnswer:
        """Async ``post_binary``."""
        response = await self._asend(path, body)
        if self._too_large(response):
            await response.aclose()
            raise ModelResponseError(f"{self.server} response is larger than {self.limits.max_response_bytes} bytes")
        try:
            data = (await self._acollect(response, self.limits.max_response_bytes, f"{self.server} response")).data()
        except httpx.RequestError as exc:  # the connection failed after the status line
            raise _transport_error(self.server, exc, self._secrets, str(response.url)) from None
        return BinaryAnswer(data, response.headers.get("content-type"))

    def stream_bytes(self, path: str, body: Any) -> Generator[bytes, None, None]:
        """POST ``body`` and yield the answer's bytes as they arrive (bounded by ``max_response_bytes``).

        Retried like any request until the answer starts; closing the iterator early closes the
        response (and its connection).
        """
        stream = self.open_stream(path, body)
        try:
            yield from stream.chunks()
        finally:
            stream.close()

    async def astream_bytes(self, path: str, body: Any) -> AsyncGenerator[bytes, None]:
        """Async ``stream_bytes``."""
        stream = await self.aopen_stream(path, body)
        try:
            async for chunk in stream.chunks():
                yield chunk
        finally:
            await stream.aclose()

    def open_stream(self, path: str, body: Any) -> LineStream:
        """POST ``body`` and return its answer as a ``LineStream`` of text lines."""
        response = self._send(path, body)
        return LineStream(self.server, self._secrets, self.limits, response)

    async def aopen_stream(self, path: str, body: Any) -> AsyncLineStream:
        """Async ``open_stream``."""
        response = await self._asend(path, body)
        return AsyncLineStream(self.server, self._secrets, self.limits, response)

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
