"""Azure OpenAI: Chat Completions on an Azure resource, with an API key or an Entra ID token.

    model = AzureOpenAIChatModel("gpt-4o-mini", endpoint="https://my-resource.openai.azure.com",
                                 api_version="2024-10-21")                    # AZURE_OPENAI_API_KEY
    from azure.identity import DefaultAzureCredential, get_bearer_token_provider
    provider = get_bearer_token_provider(DefaultAzureCredential(), "https://cognitiveservices.azure.com/.default")
    model = AzureOpenAIChatModel("gpt-4o-mini", endpoint=..., token_provider=provider)   # the v1 path

The wire format is OpenAI's (this class is an ``OpenAIChatModel``); what differs:

* the path: ``{endpoint}/openai/deployments/{deployment}/chat/completions?api-version=...`` when
  ``api_version`` is given, else the v1 path ``{endpoint}/openai/v1/chat/completions`` with the
  deployment as ``model``;
* authentication: the ``api-key`` header (``api_key``, else ``AZURE_OPENAI_API_KEY``), or
  ``Authorization: Bearer`` with a token from ``token_provider``, called for every request (the
  provider caches and refreshes, as azure.identity's does). A token the service refuses (HTTP 401,
  e.g. expired) is asked for again once and the request retried; a second refusal raises
  ``AuthenticationError``;
* content filtering: the filter results are kept in metadata (``prompt_filter_results`` in the
  response's, ``content_filter_results`` in each generation's); a prompt the filter rejects (HTTP 400,
  code ``content_filter``) and an answer it stops (finish reason ``content_filter``) raise
  ``RefusalError`` naming the filtered categories, never an empty success.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any
from urllib.parse import quote

import httpx

from chatclient import jsonsafe
from chatclient.errors import AuthenticationError, ModelHTTPError, RefusalError
from chatclient.models.base import ChatResponse, ChatResponseMetadata, Generation, GenerationMetadata, ModelCapabilities
from chatclient.models.http import DEFAULT_TIMEOUT, ResponseLimits, env_or, resolve_api_key, validate_api_key
from chatclient.models.http.sse import SSEDecoder, SSEEvent
from chatclient.models.openai import OpenAIChatModel, OpenAIStreamParser, StructuredOutputStyle
from chatclient.options import ChatOptions
from chatclient.prompt import Prompt

__all__ = [
    "AzureOpenAIChatModel",
    "AzureStreamParser",
    "azure_auth",
    "azure_base_url",
    "bearer_header",
    "content_filter_refusal",
]

TokenProvider = Callable[[], str]
VENDOR_HOSTS = ("openai.azure.com", "cognitiveservices.azure.com", "services.ai.azure.com")


def azure_base_url(endpoint: str | None, deployment: str, api_version: str | None) -> str:
    """The API root of ``deployment``: ``{endpoint}/openai/deployments/{deployment}`` with an
    ``api_version``, else the v1 root ``{endpoint}/openai/v1`` (``endpoint`` defaults to
    ``AZURE_OPENAI_ENDPOINT``)."""
    if not isinstance(deployment, str) or not deployment.strip():
        raise ValueError("deployment must name the Azure OpenAI deployment (the name chosen when deploying)")
    root = env_or(endpoint, "AZURE_OPENAI_ENDPOINT")
    if not root:
        raise ValueError(
            "Azure OpenAI needs the resource endpoint: pass endpoint='https://<resource>.openai.azure.com' "
            "or set AZURE_OPENAI_ENDPOINT"
        )
    root = root.rstrip("/")
    if root.endswith("/openai") or root.endswith("/openai/v1"):
        root = root.rsplit("/openai", 1)[0]
    return f"{root}/openai/deployments/{quote(deployment, safe='')}" if api_version else f"{root}/openai/v1"


def azure_auth(
    api_key: str | None, token_provider: TokenProvider | None, where: str
) -> tuple[dict[str, str], str | None, str]:
    """(headers, key, where the credential comes from) for an API key (``api_key``, else
    ``AZURE_OPENAI_API_KEY``) or a ``token_provider``, which are exclusive."""
    if token_provider is not None and api_key is not None:
        raise ValueError("pass either api_key or token_provider, not both")
    if token_provider is not None:
        if not callable(token_provider):
            raise TypeError("token_provider must be a callable returning a bearer token string")
        return {}, None, "the token_provider (Entra ID bearer token)"
    key, credential = resolve_api_key(
        api_key, "AZURE_OPENAI_API_KEY", provider="Azure OpenAI", required=True, where=f" for {where}"
    )
    assert key is not None
    return {"api-key": key}, key, credential


def bearer_header(token_provider: TokenProvider) -> dict[str, str]:
    """The ``Authorization`` header of one attempt, from a fresh call of ``token_provider``."""
    token = token_provider()
    if inspect.isawaitable(token):
        close = getattr(token, "close", None)
        if callable(close):
            close()  # never awaited: say so instead of leaving a warning behind
        raise TypeError(
            "token_provider returned an awaitable; pass a synchronous provider "
            "(azure.identity.get_bearer_token_provider, not the .aio one)"
        )
    value = getattr(token, "token", token)  # an azure.core AccessToken works too
    checked = validate_api_key(value if isinstance(value, str) else None, source="the token_provider")
    if checked is None:
        raise AuthenticationError("the token_provider returned no token; check the Azure credential it wraps")
    return {"authorization": f"Bearer {checked}"}


def refused_token(exc: AuthenticationError) -> AuthenticationError:
    """The error of a token the service refused twice (asked again after the first 401)."""
    return AuthenticationError(
        f"{exc} - the token_provider's token was refused twice (asked again after the first 401); "
        "check the Azure credential and its role on the resource (Cognitive Services OpenAI User)",
        status=exc.status,
        body=exc.body,
        code=exc.code,
        type=exc.type,
        request_id=exc.request_id,
    )


def _filtered(results: Any) -> list[str]:
    """``"hate (high)"``-style names of the categories a ``content_filter_results`` object filtered."""
    if not isinstance(results, Mapping):
        return []
    names = []
    for category, verdict in results.items():
        if isinstance(verdict, Mapping) and verdict.get("filtered"):
            severity = verdict.get("severity")
            names.append(f"{category} ({severity})" if isinstance(severity, str) else str(category))
    return names


def content_filter_refusal(where: str, results: Any) -> RefusalError:
    """The ``RefusalError`` for a content-filter verdict on the prompt or the answer."""
    categories = _filtered(results)
    what = f": {', '.join(categories)}" if categories else ""
    refusal = f"Azure's content filter stopped the {where}{what}"
    return RefusalError(refusal, f"{refusal}; rephrase the request or review the deployment's content filter policy")


def _merge_filters(into: dict[str, Any], results: Any) -> None:
    # A category once filtered stays filtered; otherwise the latest verdict wins.
    if not isinstance(results, Mapping):
        return
    for category, verdict in results.items():
        earlier = into.get(category)
        if isinstance(earlier, Mapping) and earlier.get("filtered"):
            continue
        into[category] = verdict


def _with_filters(response: ChatResponse, prompt_results: Any, choice_results: Mapping[int, Any]) -> ChatResponse:
    """``response`` with the filter verdicts in its metadata; a filtered answer raises ``RefusalError``."""
    generations = []
    for index, g in enumerate(response.generations):
        results = choice_results.get(index)
        if g.finish_reason == "content_filter":
            raise content_filter_refusal("answer", results)
        if results:
            extra = MappingProxyType({**g.metadata.extra, "content_filter_results": results})
            g = Generation(g.output, GenerationMetadata(g.metadata.finish_reason, extra))
        generations.append(g)
    md = response.metadata
    if prompt_results is not None:
        extra = MappingProxyType({**md.extra, "prompt_filter_results": prompt_results})
        md = ChatResponseMetadata(md.id, md.model, md.usage, extra)
    return ChatResponse(tuple(generations), md)


def _prompt_refusal(exc: ModelHTTPError) -> RefusalError | None:
    if exc.code != "content_filter":
        return None
    results: Any = None
    try:
        body = jsonsafe.loads(exc.body or "")
        error = body.get("error") if isinstance(body, Mapping) else None
        inner = error.get("innererror") if isinstance(error, Mapping) else None
        results = inner.get("content_filter_result") if isinstance(inner, Mapping) else None
    except ValueError:
        pass  # a cut excerpt: the refusal just names no categories
    return content_filter_refusal("prompt", results)


class _RecordingSSE(SSEDecoder):
    """An SSE decoder that remembers the event it dispatched last (the parser reads its filter results)."""

    __slots__ = ("last",)

    def __init__(self) -> None:
        super().__init__()
        self.last: SSEEvent | None = None

    def feed(self, line: str) -> SSEEvent | None:
        self.last = event = super().feed(line)
        return event


class AzureStreamParser(OpenAIStreamParser):
    """The OpenAI stream parser plus Azure's filter verdicts (kept in the last chunk's metadata);
    a stream the content filter stopped raises ``RefusalError`` at its end."""

    def __init__(self, think_tags: Sequence[str] | None = None) -> None:
        super().__init__(think_tags)
        self._sse = self._recorder = _RecordingSSE()
        self._prompt_filters: Any = None
        self._choice_filters: dict[int, dict[str, Any]] = {}

    def feed(self, line: str) -> list[ChatResponse]:
        """Consume one line of the stream; return the chunks it completes."""
        chunks = super().feed(line)
        event = self._recorder.last
        if event is not None and "filter_results" in event.data and event.data.strip() != "[DONE]":
            payload = event.json()  # parsed a second time only for events that carry verdicts
            if isinstance(payload, Mapping):
                if payload.get("prompt_filter_results") is not None:
                    self._prompt_filters = payload["prompt_filter_results"]
                for choice in payload.get("choices") or ():
                    if isinstance(choice, Mapping):
                        index = int(choice.get("index") or 0)
                        _merge_filters(self._choice_filters.setdefault(index, {}), choice.get("content_filter_results"))
        return chunks

    def finish(self) -> list[ChatResponse]:
        """The last chunk with the filter verdicts, unless the filter stopped the answer."""
        return [_with_filters(c, self._prompt_filters, self._choice_filters) for c in super().finish()]


class AzureOpenAIChatModel(OpenAIChatModel):
    """Chat Completions on an Azure OpenAI deployment (see the module docstring).

    ``endpoint`` defaults to ``AZURE_OPENAI_ENDPOINT``; ``api_key`` and ``token_provider`` are
    exclusive. The other keywords are ``OpenAIChatModel``'s.

    >>> AzureOpenAIChatModel("gpt-4o", endpoint="https://r.openai.azure.com", api_key="k" * 32, api_version="2024-10-21")
    AzureOpenAIChatModel(deployment='gpt-4o', base_url='https://r.openai.azure.com/openai/deployments/gpt-4o')
    """

    provider = "Azure OpenAI"
    vendor_hosts = VENDOR_HOSTS
    otel_provider = "azure.ai.openai"  # gen_ai.provider.name in OpenTelemetry spans (semantic conventions)

    def __init__(
        self,
        deployment: str,
        *,
        endpoint: str | None = None,
        api_version: str | None = None,
        api_key: str | None = None,
        token_provider: TokenProvider | None = None,
        options: ChatOptions | None = None,
        timeout: float | httpx.Timeout | None = DEFAULT_TIMEOUT,
        max_retries: int = 2,
        http_client: httpx.Client | None = None,
        async_http_client: httpx.AsyncClient | None = None,
        capabilities: ModelCapabilities | None = None,
        headers: Mapping[str, str] | None = None,
        backoff_base: float = 0.5,
        backoff_max: float = 8.0,
        structured_output: StructuredOutputStyle | None = None,
        response_limits: ResponseLimits | None = None,
    ) -> None:
        base = azure_base_url(endpoint, deployment, api_version)
        auth, _, credential = azure_auth(api_key, token_provider, base.rsplit("/openai", 1)[0])
        all_headers = {**(headers or {}), **auth}
        self.deployment = deployment
        self.api_version = api_version
        self.token_provider = token_provider
        super().__init__(
            deployment,
            api_key="",  # the key (if any) travels in api-key, set above
            base_url=base,
            options=options,
            timeout=timeout,
            max_retries=max_retries,
            http_client=http_client,
            async_http_client=async_http_client,
            capabilities=capabilities,
            headers=all_headers,
            backoff_base=backoff_base,
            backoff_max=backoff_max,
            structured_output=structured_output,
            response_limits=response_limits,
        )
        self._http.credential = credential
        if token_provider is not None:
            self._http.request_headers = self._bearer

    def __repr__(self) -> str:
        return f"AzureOpenAIChatModel(deployment={self.deployment!r}, base_url={self.base_url!r})"

    def _bearer(self, url: str, content: bytes) -> dict[str, str]:
        """The ``Authorization`` header of one attempt, from a fresh call of the token provider."""
        assert self.token_provider is not None
        return bearer_header(self.token_provider)

    def request_path(self, prompt: Prompt, *, stream: bool) -> str:
        """``/chat/completions``, with ``?api-version=`` on the deployments path."""
        if self.api_version:
            return f"/chat/completions?api-version={quote(self.api_version, safe='')}"
        return "/chat/completions"

    def parse_response(self, payload: Any) -> ChatResponse:
        """The OpenAI mapping plus the filter verdicts; a filtered answer raises ``RefusalError``."""
        choices = {
            int(c.get("index") or 0): c.get("content_filter_results")
            for c in payload.get("choices") or ()
            if isinstance(c, Mapping)
        }
        return _with_filters(super().parse_response(payload), payload.get("prompt_filter_results"), choices)

    def stream_parser(self) -> AzureStreamParser:
        """A fresh parser for one streamed answer."""
        return AzureStreamParser(self.think_tags)

    # -- refusals and token refresh -------------------------------------------------------------------

    def _retry_auth(self, exc: ModelHTTPError, attempt: int) -> bool:
        refusal = _prompt_refusal(exc)
        if refusal is not None:
            raise refusal from None
        if isinstance(exc, AuthenticationError) and exc.status == 401 and self.token_provider is not None:
            if attempt == 0:
                return True
            raise refused_token(exc) from None
        return False

    def call(self, prompt: Prompt) -> ChatResponse:
        """Send the prompt and wait for the whole answer."""
        for attempt in range(2):
            try:
                return super().call(prompt)
            except ModelHTTPError as exc:
                if not self._retry_auth(exc, attempt):
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def acall(self, prompt: Prompt) -> ChatResponse:
        """Async ``call``."""
        for attempt in range(2):
            try:
                return await super().acall(prompt)
            except ModelHTTPError as exc:
                if not self._retry_auth(exc, attempt):
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    def stream(self, prompt: Prompt) -> Iterator[ChatResponse]:
        """Stream the answer as delta chunks; the last chunk carries finish reason and usage."""
        for attempt in range(2):
            emitted = False
            try:
                for chunk in super().stream(prompt):
                    emitted = True
                    yield chunk
                return
            except ModelHTTPError as exc:
                if emitted or not self._retry_auth(exc, attempt):
                    raise

    async def astream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
        """Async ``stream``."""
        for attempt in range(2):
            emitted = False
            try:
                async for chunk in super().astream(prompt):
                    emitted = True
                    yield chunk
                return
            except ModelHTTPError as exc:
                if emitted or not self._retry_auth(exc, attempt):
                    raise
