"""``HTTPChatModel``: the base class of the HTTP chat providers, driving the four modes from pure hooks."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import Any, ClassVar, Protocol, TypeVar

import httpx

from chatclient.errors import ModelHTTPError, ModelResponseError
from chatclient.models.base import BaseChatModel, ChatResponse, ModelCapabilities
from chatclient.models.http._pooled import PooledHTTPResource
from chatclient.models.http.limits import ResponseLimits
from chatclient.models.http.retry import RetryPolicy
from chatclient.models.http.stdlib_http import KEEPALIVE_EXPIRY
from chatclient.models.http.transport import HTTPTransport
from chatclient.options import ChatOptions
from chatclient.prompt import Prompt

_T = TypeVar("_T")


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
        """Consume one line of the stream (body bytes when the parser sets ``raw_bytes = True``);
        return the chunks it completes."""
        ...

    def finish(self) -> list[ChatResponse]:
        """The last chunk(s), called once ``done`` is true."""
        ...


class HTTPChatModel(BaseChatModel, PooledHTTPResource):
    """Base class of the httpx chat providers; subclasses supply the wire format.

    Subclasses implement ``build_body`` (prompt and merged options -> request body),
    ``parse_response`` (JSON payload -> ``ChatResponse``) and ``stream_parser`` (a fresh
    ``StreamParser``); those are pure, so sync and async share them.

    ``socket_lane=False`` sends this model's requests through httpx instead of the socket lane
    (``None``: the ``CHATCLIENT_SOCKET_LANE`` environment variable decides; on by default);
    ``keepalive_expiry`` (seconds, default 30) is how long an idle lane connection is kept for reuse.
    """

    provider: ClassVar[str] = "HTTP"
    _http: HTTPTransport
    vendor_hosts: ClassVar[tuple[str, ...] | None] = None
    """The vendor's own API hosts (None: ``VENDOR_HOSTS[provider]``); errors from any other host name
    that server by its address."""
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
        socket_lane: bool | None = None,
        keepalive_expiry: float = KEEPALIVE_EXPIRY,
        request_headers: Callable[[str, bytes], Mapping[str, str]] | None = None,
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
            request_headers=request_headers,
            credential=credential,
            vendor_hosts=self.vendor_hosts,
            socket_lane=socket_lane,
            keepalive_expiry=keepalive_expiry,
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

    def request_path(self, prompt: Prompt, *, stream: bool) -> str:
        """The path a request for ``prompt`` goes to (``chat_path`` unless a provider puts the model
        or the mode in it)."""
        return self.chat_path

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

    def _feed_batch(self, parser: StreamParser, batch: Sequence[Any], out: list[ChatResponse]) -> None:
        """Feed ``batch`` until the end marker, adding the chunks to ``out``; failures mapped as
        ``_guarded`` maps them (chunks of the lines before a failing one stay in ``out``)."""
        feed = parser.feed
        try:
            for line in batch:
                chunks = feed(line)
                if chunks:
                    out += chunks
                if parser.done:
                    return
        except Exception as exc:
            raise self._mapped(exc, "stream event") from None

    def _guarded(self, fn: Callable[[Any], _T], arg: Any, what: str) -> _T:
        """Run a pure mapping step; any failure becomes a ModelResponseError with secrets scrubbed."""
        try:
            return fn(arg)
        except Exception as exc:
            raise self._mapped(exc, what) from None

    def _mapped(self, exc: Exception, what: str) -> Exception:
        """The typed, scrubbed error a failed mapping step raises (other exceptions unchanged)."""
        if isinstance(exc, ModelResponseError):
            return ModelResponseError(self._http.scrub(str(exc)))
        if isinstance(exc, ModelHTTPError):  # an error event mid-stream, typed like its HTTP status
            exc.args = (self._http.scrub(str(exc)),)
            exc.body = self._http.scrub(exc.body) if exc.body else exc.body
            return exc
        if isinstance(exc, KeyError | TypeError | ValueError | AttributeError | IndexError):
            text = self._http.scrub(f"{type(exc).__name__}: {exc}")
            return ModelResponseError(f"unexpected {self.provider} {what} ({text})")
        return exc

    # -- the four modes ---------------------------------------------------------------------------

    def call(self, prompt: Prompt) -> ChatResponse:
        """Send the prompt and wait for the whole answer."""
        return self._parse(
            self._http.post(self.request_path(prompt, stream=False), self.build_body(prompt, stream=False))
        )

    async def acall(self, prompt: Prompt) -> ChatResponse:
        """Async ``call``."""
        return self._parse(
            await self._http.apost(self.request_path(prompt, stream=False), self.build_body(prompt, stream=False))
        )

    def stream(self, prompt: Prompt) -> Iterator[ChatResponse]:
        """Stream the answer as delta chunks; the last chunk carries finish reason and usage.

        The stream ends as soon as the provider's end marker arrives: what the server already sent
        after it is read so the connection can be pooled, but nothing more is waited for. A provider
        error event before the first chunk is retried like the HTTP status it stands for.
        """
        body = self.build_body(prompt, stream=True)
        path = self.request_path(prompt, stream=True)
        retries = 0
        while True:
            parser = self.stream_parser()
            lines = self._http.open_stream(path, body)
            emitted = False
            failure: ModelHTTPError | None = None
            try:
                batches = _each_alone(lines.chunks()) if getattr(parser, "raw_bytes", False) else lines.batches()
                for batch in batches:
                    out: list[ChatResponse] = []
                    error: Exception | None = None
                    try:
                        self._feed_batch(parser, batch, out)
                    except Exception as exc:  # raised after the chunks of the lines before it
                        error = exc
                    if isinstance(error, ModelHTTPError) and not (emitted or out):
                        failure = error  # nothing was emitted yet: retried like its status
                        break
                    if out:
                        emitted = True
                        yield from out
                    if error is not None:
                        raise error
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
        path = self.request_path(prompt, stream=True)
        retries = 0
        while True:
            parser = self.stream_parser()
            lines = await self._http.aopen_stream(path, body)
            emitted = False
            failure: ModelHTTPError | None = None
            try:
                batches = _aeach_alone(lines.chunks()) if getattr(parser, "raw_bytes", False) else lines.batches()
                async for batch in batches:
                    out: list[ChatResponse] = []
                    error: Exception | None = None
                    try:
                        self._feed_batch(parser, batch, out)
                    except Exception as exc:  # raised after the chunks of the lines before it
                        error = exc
                    if isinstance(error, ModelHTTPError) and not (emitted or out):
                        failure = error  # nothing was emitted yet: retried like its status
                        break
                    if out:
                        emitted = True
                        for chunk in out:
                            yield chunk
                    if error is not None:
                        raise error
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


def _each_alone(items: Iterator[bytes]) -> Iterator[list[bytes]]:
    for item in items:
        yield [item]


async def _aeach_alone(items: AsyncIterator[bytes]) -> AsyncIterator[list[bytes]]:
    async for item in items:
        yield [item]


def _raise_incomplete(provider: str) -> None:
    raise ModelResponseError(f"{provider} stream ended before its end marker: the answer is incomplete")
