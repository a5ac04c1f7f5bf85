"""What OpenAI's image and audio models share: endpoint, keys, Azure deployments, refusals, budgets, spans.

``OpenAIMediaModel`` is the base of ``OpenAIImageModel``, ``OpenAITranscriptionModel`` and
``OpenAISpeechModel`` (and, through ``azure=``, their Azure twins). It owns one ``HTTPTransport``
(retries, limits, redirects, typed errors, secrets scrubbed, pooled connections, pickling by
constructor arguments) and sends each request through ``_request``, which

* maps a content-policy refusal (OpenAI ``content_policy_violation`` / ``moderation_blocked``,
  Azure ``content_filter``) to ``RefusalError``; every other failure keeps the chat models' type;
* asks a token provider again once after a 401 (Azure Entra ID, as the chat model does);
* plans the call's cost against a ``budget`` (and the ``BudgetAdvisor`` of a request whose tool
  makes the call) before it is sent and charges it after;
* reports the call to the installed observer (an OpenTelemetry span ``{operation} {model}``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, TypedDict, TypeVar, runtime_checkable
from urllib.parse import quote

from chatclient import jsonsafe
from chatclient.errors import AuthenticationError, BudgetExceededError, ModelHTTPError, RefusalError
from chatclient.models.base import Usage
from chatclient.models.http._pooled import PooledHTTPResource
from chatclient.models.http.limits import DEFAULT_TIMEOUT
from chatclient.models.media_prices import DEFAULT_MEDIA_PRICES, MediaPrice, MediaPriceTable
from chatclient.observation import observe_media, observed
from chatclient.usage_meter import media_meters

if TYPE_CHECKING:
    import httpx

    from chatclient.models.azure import TokenProvider
    from chatclient.models.http import HTTPTransport, ResponseLimits
    from chatclient.models.http.multipart import FilePart

__all__ = [
    "AzureDeployment",
    "MediaCall",
    "MediaModelOptions",
    "OpenAIMediaModel",
    "SpendingBudget",
    "form_value",
    "media_refusal",
    "sniff_mime",
    "upload",
]

_T = TypeVar("_T")
REFUSAL_CODES = frozenset({"content_policy_violation", "moderation_blocked", "content_filter"})


@runtime_checkable
class SpendingBudget(Protocol):
    """What a media model needs of a budget: ``advisors.Budget`` has both methods."""

    def check(self, key: str, tokens: int, cost: float | None) -> None:
        """Raise ``BudgetExceededError`` when ``cost`` more would go over the budget of ``key``."""
        ...

    def add(self, key: str, usage: Usage, cost: float | None) -> None:
        """Charge one call to ``key``."""
        ...


class MediaModelOptions(TypedDict, total=False):
    """The settings every OpenAI (and Azure OpenAI) image and audio model takes as keywords beside
    its model and endpoint; each model's constructor passes them on as they are.

    ``timeout`` (default ``DEFAULT_TIMEOUT``) and ``max_retries`` (default 2) as the chat models
    take them; your own ``http_client`` / ``async_http_client`` (left open on ``close()``); extra
    ``headers``; ``response_limits``; a ``budget`` (an ``advisors.Budget``) checked before each call
    and charged after it to ``budget_key`` (default ``"default"``), at ``prices`` (default
    ``DEFAULT_MEDIA_PRICES``).
    """

    timeout: float | httpx.Timeout | None
    max_retries: int
    http_client: httpx.Client | None
    async_http_client: httpx.AsyncClient | None
    headers: Mapping[str, str] | None
    response_limits: ResponseLimits | None
    budget: SpendingBudget | None
    budget_key: str
    prices: MediaPriceTable | None


@dataclass(frozen=True, slots=True)
class AzureDeployment:
    """An Azure OpenAI deployment: where requests go and how they authenticate.

    With ``api_version`` the paths are ``/openai/deployments/{deployment}/...?api-version=``;
    without, the v1 paths ``/openai/v1/...`` with the deployment as ``model``.
    """

    deployment: str
    api_version: str | None
    token_provider: TokenProvider | None


@dataclass(frozen=True, slots=True)
class MediaCall(Generic[_T]):
    """One request of a media model, built and checked before any I/O (the sans-IO part): where it
    goes, what it sends, whether the answer is raw bytes (``binary``), how the answer becomes the
    result (``finish``; for a stream, of the streamed size) and what its span records.
    ``OpenAIMediaModel._request`` / ``_arequest`` (``_stream`` / ``_astream``) send it: the sync
    and async shells share everything else."""

    operation: str
    path: str
    body: Any
    finish: Callable[[Any], _T]
    attributes: Mapping[str, Any]
    binary: bool = False

    def finished(self, answer: Any, done: Callable[[Any], None]) -> _T:
        """``finish(answer)``, reported to the observation as the call's result."""
        result = self.finish(answer)
        done(result)
        return result


def form_value(value: Any, what: str) -> str:
    """A multipart form field's text: bools as ``true``/``false``, numbers as written; ``what``
    names the option in the ``TypeError`` for anything else."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    raise TypeError(f"{what} must be text, a number or a bool, not {type(value).__name__}")


def media_refusal(exc: ModelHTTPError) -> RefusalError | None:
    """The ``RefusalError`` of a content-policy rejection, or ``None`` for any other failure."""
    if exc.code not in REFUSAL_CODES:
        return None
    message: str | None = None
    results: Any = None
    try:
        body = jsonsafe.loads(exc.body or "")
        error = body.get("error") if isinstance(body, Mapping) else None
        if isinstance(error, Mapping):
            message = error.get("message") if isinstance(error.get("message"), str) else None
            inner = error.get("innererror")
            if isinstance(inner, Mapping):
                results = inner.get("content_filter_result") or inner.get("content_filter_results")
    except ValueError:
        pass  # a cut excerpt: the refusal says less
    if results is not None:
        from chatclient.models.azure import content_filter_refusal

        return content_filter_refusal("prompt", results)
    reason = (message or f"the request was rejected by the content policy ({exc.code})")[:300]
    return RefusalError(
        reason, f"the provider refused the request under its content policy ({exc.code}): {reason}; rephrase it"
    )


class OpenAIMediaModel(PooledHTTPResource):
    """Base of the OpenAI (and Azure OpenAI) image and audio models; see the module docstring."""

    provider: ClassVar[str] = "OpenAI"
    otel_provider: ClassVar[str] = "openai"
    _http: HTTPTransport

    def _connect(
        self,
        model: str,
        target: tuple[str | None, str | None] | tuple[str | None, AzureDeployment, str | None],
        /,
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float | httpx.Timeout | None = DEFAULT_TIMEOUT,
        max_retries: int = 2,
        http_client: httpx.Client | None = None,
        async_http_client: httpx.AsyncClient | None = None,
        response_limits: ResponseLimits | None = None,
        budget: SpendingBudget | None = None,
        budget_key: str = "default",
        prices: MediaPriceTable | None = None,
        **unexpected: Any,
    ) -> None:
        """Build the transport: OpenAI (``target=(base_url, api_key)``) or an Azure deployment
        (``target=(endpoint, deployment, api_key)``); the keywords are ``MediaModelOptions``."""
        from chatclient.models.http import HTTPTransport, RetryPolicy

        if unexpected:
            _refuse_keywords(type(self).__name__, unexpected)

        if not isinstance(model, str) or not model.strip():
            raise ValueError("model must name the model (e.g. 'gpt-image-1')")
        if budget is not None and not isinstance(budget, SpendingBudget):
            raise TypeError("budget must have check(key, tokens, cost) and add(key, usage, cost), like advisors.Budget")
        if prices is not None and not isinstance(prices, MediaPriceTable):
            raise TypeError(f"prices must be a MediaPriceTable, got {type(prices).__name__}")
        all_headers = dict(headers or {})
        self.azure: AzureDeployment | None = None
        vendor_hosts: tuple[str, ...] | None = None
        if len(target) == 2:
            from chatclient.models.openai import openai_endpoint

            url, key, credential = openai_endpoint(*target)
            if key:
                all_headers["authorization"] = f"Bearer {key}"
        else:
            from chatclient.models.azure import VENDOR_HOSTS, azure_auth, azure_base_url

            endpoint, self.azure, azure_key = target
            url = azure_base_url(endpoint, self.azure.deployment, self.azure.api_version)
            auth, key, credential = azure_auth(azure_key, self.azure.token_provider, url.rsplit("/openai", 1)[0])
            all_headers.update(auth)
            vendor_hosts = VENDOR_HOSTS
        self.model = model
        self.budget = budget
        self.budget_key = budget_key
        self.prices = prices if prices is not None else DEFAULT_MEDIA_PRICES
        self._http = HTTPTransport(
            provider=self.provider,
            base_url=url,
            headers=all_headers,
            secrets=[key] if key else [],
            credential=credential,
            timeout=timeout,
            retry=RetryPolicy(max_retries=max_retries),
            http_client=http_client,
            async_http_client=async_http_client,
            limits=response_limits,
            vendor_hosts=vendor_hosts,
            request_headers=self._bearer if self.azure is not None and self.azure.token_provider else None,
        )

    @property
    def base_url(self) -> str:
        """The API root every request path is appended to."""
        return self._http.base_url

    def __repr__(self) -> str:
        if self.azure is not None:
            return f"{type(self).__name__}(deployment={self.azure.deployment!r}, base_url={self.base_url!r})"
        return f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r})"

    def _wire_model(self) -> str:
        """The ``model`` field of a request: the model, or on Azure the deployment."""
        return self.azure.deployment if self.azure is not None else self.model

    def _bearer(self, url: str, content: bytes) -> dict[str, str]:
        from chatclient.models.azure import bearer_header

        assert self.azure is not None and self.azure.token_provider is not None
        return bearer_header(self.azure.token_provider)

    def _path(self, endpoint: str) -> str:
        """``/images/generations`` and the like, with ``?api-version=`` on an Azure deployments path."""
        if self.azure is not None and self.azure.api_version:
            return f"/{endpoint}?api-version={quote(self.azure.api_version, safe='')}"
        return f"/{endpoint}"

    # -- budgets ------------------------------------------------------------------------------------

    def _price(self) -> MediaPrice | None:
        return self.prices.find(self.model)

    def _metered(self) -> bool:
        """Whether this call is counted: a ``budget`` of its own, or a request's meter in scope
        (a ``BudgetAdvisor`` whose request runs the tool that calls this model)."""
        return self.budget is not None or bool(media_meters())

    def _plan(self, cost: Callable[[MediaPrice], float | None]) -> float | None:
        """Check the budgets for a call that may cost ``cost(price)``; return that estimate."""
        meters = media_meters()
        if self.budget is None and not meters:
            return None
        price = self._price()
        estimate = cost(price) if price is not None else None
        if self.budget is not None:
            if estimate is None and getattr(self.budget, "max_cost", None) is not None:
                raise BudgetExceededError(
                    f"cannot keep a cost budget: no {type(self).__name__} price for model {self.model!r}; pass "
                    f"prices=DEFAULT_MEDIA_PRICES.with_prices({{{self.model!r}: MediaPrice(...)}})",
                    Usage(),
                    limit="prices",
                )
            self.budget.check(self.budget_key, 0, estimate)
        for meter in meters:
            meter.before_media(self.model, estimate)
        return estimate

    def _charge(self, usage: Usage, cost: float | None) -> None:
        if self.budget is not None:
            self.budget.add(self.budget_key, usage, cost)
        for meter in media_meters():
            meter.after_media(self.model, usage, cost)

    # -- requests -----------------------------------------------------------------------------------

    def _request(self, call: MediaCall[_T]) -> _T:
        """Send ``call`` and finish its answer, observed as its operation (the observation ends
        with the finished result), with refusals typed and one token refresh after a 401."""
        post = self._http.post_binary if call.binary else self._http.post
        with observed(observe_media(self, call.operation, call.attributes)) as done:
            for attempt in range(2):
                try:
                    answer = post(call.path, call.body)
                    break
                except ModelHTTPError as exc:
                    if not self._again(exc, attempt):
                        raise
            return call.finished(answer, done)

    async def _arequest(self, call: MediaCall[_T]) -> _T:
        """Async ``_request``."""
        post = self._http.apost_binary if call.binary else self._http.apost
        with observed(observe_media(self, call.operation, call.attributes)) as done:
            for attempt in range(2):
                try:
                    answer = await post(call.path, call.body)
                    break
                except ModelHTTPError as exc:
                    if not self._again(exc, attempt):
                        raise
            return call.finished(answer, done)

    def _stream(self, call: MediaCall[Any]) -> Iterator[bytes]:
        """The answer's bytes as they arrive, with the failures of ``_request`` typed the same way;
        once they end, ``call.finish`` gets their total size (outside the observation, which ends
        with that size)."""
        size = 0
        with observed(observe_media(self, call.operation, call.attributes)) as done:
            for attempt in range(2):
                started = False
                try:
                    for chunk in self._http.stream_bytes(call.path, call.body):
                        started = True
                        size += len(chunk)
                        yield chunk
                    break
                except ModelHTTPError as exc:
                    if started or not self._again(exc, attempt):
                        raise
            done(size)
        call.finish(size)

    async def _astream(self, call: MediaCall[Any]) -> AsyncIterator[bytes]:
        """Async ``_stream``."""
        size = 0
        with observed(observe_media(self, call.operation, call.attributes)) as done:
            for attempt in range(2):
                started = False
                try:
                    async for chunk in self._http.astream_bytes(call.path, call.body):
                        started = True
                        size += len(chunk)
                        yield chunk
                    break
                except ModelHTTPError as exc:
                    if started or not self._again(exc, attempt):
                        raise
            done(size)
        call.finish(size)

    def _again(self, exc: ModelHTTPError, attempt: int) -> bool:
        """Whether to send once more (a refused Entra token, asked again); raise a refusal typed."""
        refusal = media_refusal(exc)
        if refusal is not None:
            raise refusal from None
        if (
            isinstance(exc, AuthenticationError)
            and exc.status == 401
            and self.azure is not None
            and self.azure.token_provider is not None
        ):
            if attempt == 0:
                return True
            from chatclient.models.azure import refused_token

            raise refused_token(exc) from None
        return False


# -- uploads ------------------------------------------------------------------------------------------

_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF8", "image/gif"),
    (b"ID3", "audio/mpeg"),
    (b"\xff\xfb", "audio/mpeg"),
    (b"\xff\xf3", "audio/mpeg"),
    (b"fLaC", "audio/flac"),
    (b"OggS", "audio/ogg"),
    (b"\x1a\x45\xdf\xa3", "audio/webm"),
)
_EXTENSIONS = {
    "image/png": "png",
    "image/jpeg": "jpg",
    "image/webp": "webp",
    "image/gif": "gif",
    "audio/mpeg": "mp3",
    "audio/mp3": "mp3",
    "audio/wav": "wav",
    "audio/x-wav": "wav",
    "audio/wave": "wav",
    "audio/flac": "flac",
    "audio/ogg": "ogg",
    "audio/webm": "webm",
    "audio/mp4": "m4a",
    "audio/m4a": "m4a",
    "audio/x-m4a": "m4a",
    "video/mp4": "mp4",
}


def sniff_mime(data: bytes) -> str | None:
    """The mime type of common image and audio files, read from their first bytes."""
    if data[:4] == b"RIFF" and data[8:12] in (b"WAVE", b"WEBP"):
        return "audio/wav" if data[8:12] == b"WAVE" else "image/webp"
    if data[4:8] == b"ftyp":
        return "audio/mp4"
    for magic, mime in _MAGIC:
        if data.startswith(magic):
            return mime
    return None


def _megabytes(limit: int) -> str:
    mib = 1024 * 1024
    return f"{limit // mib} MB ({limit:,} bytes)" if limit % mib == 0 else f"{limit:,} bytes"


def upload(
    item: Any, *, field: str, what: str, max_bytes: int, limit_name: str, mime_type: str | None = None, index: int = 0
) -> FilePart:
    """One file of a multipart upload from ``Media`` (inline bytes or a ``data:`` URL), bytes (with
    ``mime_type``, else sniffed) or a path; over ``max_bytes`` raises ``ValueError`` naming the limit
    before anything is read whole or sent."""
    import base64
    import binascii
    import os

    from chatclient.messages import Media
    from chatclient.models.http.multipart import FilePart

    def too_big(size: int) -> ValueError:
        return ValueError(f"the {what} is {size:,} bytes; {limit_name} takes at most {_megabytes(max_bytes)}")

    name = f"{what.replace(' ', '_')}{index or ''}"
    if isinstance(item, Media):
        data = item.data
        mime = mime_type or item.mime_type
        if isinstance(data, str):
            if not data.startswith("data:") or ";base64," not in data[:200]:
                raise ValueError(
                    f"the {what} is a URL ({data[:60]!r}); it must be uploaded as bytes: pass Media.from_path(...) "
                    "or the bytes themselves"
                )
            encoded = data.split(",", 1)[1]
            if len(encoded) * 3 // 4 > max_bytes:
                raise too_big(len(encoded) * 3 // 4)
            try:
                data = base64.b64decode(encoded, validate=True)
            except (binascii.Error, ValueError):
                raise ValueError(f"the {what}'s data: URL is not valid base64") from None
    elif isinstance(item, (bytes, bytearray, memoryview)):
        data = bytes(item)
        if not data:
            raise ValueError(f"the {what} is empty")
        mime = mime_type or sniff_mime(data) or ""
        if not mime:
            raise ValueError(f"cannot tell the {what}'s format from its bytes; pass mime_type='...' or a Media")
    elif isinstance(item, (str, os.PathLike)):
        path = os.fspath(item)
        if not os.path.isfile(path):
            raise ValueError(f"the {what} file {path!r} does not exist (pass bytes, a Media or a file path)")
        size = os.path.getsize(path)
        if size > max_bytes:
            raise too_big(size)
        media = Media.from_path(path, mime_type, max_bytes=max_bytes)
        data, mime = media.data, media.mime_type
        name = os.path.splitext(os.path.basename(path))[0] or name
    else:
        raise TypeError(f"the {what} must be Media, bytes or a file path, not {type(item).__name__}")
    assert isinstance(data, bytes)
    if not data:
        raise ValueError(f"the {what} is empty")
    if len(data) > max_bytes:
        raise too_big(len(data))
    extension = _EXTENSIONS.get(mime.lower().split(";")[0].strip(), "bin")
    return FilePart(field, f"{name}.{extension}", mime, data)


def _refuse_keywords(owner: str, unexpected: Mapping[str, Any]) -> None:
    """A ``TypeError`` naming the constructor the user called (not this module's helper) and the closest option."""
    import inspect

    from chatclient._suggest import closest

    known = [
        n
        for n in inspect.signature(OpenAIMediaModel._connect).parameters
        if n not in ("self", "model", "target", "unexpected")
    ]
    name = next(iter(unexpected))
    near = closest(name, known)
    hint = f"; did you mean {near[0]!r}?" if near else ""
    raise TypeError(f"{owner}() got an unexpected keyword argument {name!r}{hint} (its options: {', '.join(known)})")
