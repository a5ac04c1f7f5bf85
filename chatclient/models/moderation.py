"""Moderation models: classify a text as harmful or not, by category.

    from chatclient.models.moderation import OpenAIModerationModel

    with OpenAIModerationModel() as moderator:          # OPENAI_API_KEY from the environment
        verdict = moderator.moderate("some user text")
        verdict.flagged, verdict.categories              # False, ()

``ModerationModel`` is the protocol (``moderate`` and ``amoderate``); ``ModerationGuardrail`` in
``chatclient.guardrails`` turns any of them into a guardrail, and ``ChatClientModerationModel``
there uses a chat model as the classifier.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from chatclient.errors import ModelResponseError
from chatclient.models.http._pooled import PooledHTTPResource

if TYPE_CHECKING:
    import httpx

    from chatclient.models.http import HTTPTransport

OPENAI_BASE_URL = "https://api.openai.com/v1"
_MAX_CATEGORIES = 64  # categories kept from one result (OpenAI sends 13)
_MAX_NAME = 100  # characters of a category name


@dataclass(frozen=True, slots=True)
class Moderation:
    """A moderation verdict: ``flagged``, the flagged ``categories`` and every category's score (0..1)."""

    flagged: bool
    categories: tuple[str, ...] = ()
    scores: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    model: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "categories", tuple(self.categories))
        object.__setattr__(self, "scores", MappingProxyType(dict(self.scores)))


@runtime_checkable
class ModerationModel(Protocol):
    """Anything that can moderate a text, blocking and async."""

    def moderate(self, text: str) -> Moderation:
        """The verdict for ``text``."""
        ...

    async def amoderate(self, text: str) -> Moderation:
        """The verdict for ``text`` (async)."""
        ...


class OpenAIModerationModel(PooledHTTPResource):
    """OpenAI's moderation endpoint (``POST {base_url}/moderations``) over the shared HTTP layer.

    Works with any server speaking the same format (pass ``base_url``; the key is then optional).
    Retries, timeouts and secret scrubbing are those of ``HTTPTransport``; a response body larger
    than ``max_response_bytes`` (default 1 MiB, a verdict is a few hundred bytes) is refused.
    A result with a malformed shape raises ``ModelResponseError``.
    """

    def __init__(
        self,
        model: str = "omni-moderation-latest",
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float | httpx.Timeout | None = 30.0,
        max_retries: int = 2,
        http_client: httpx.Client | None = None,
        async_http_client: httpx.AsyncClient | None = None,
        max_response_bytes: int = 1024 * 1024,
    ) -> None:
        from chatclient.models.http import HTTPTransport, ResponseLimits, RetryPolicy, env_or, resolve_api_key

        url = env_or(base_url, "OPENAI_BASE_URL") or OPENAI_BASE_URL
        key, credential = resolve_api_key(
            api_key, "OPENAI_API_KEY", provider="OpenAI", required=url.rstrip("/") == OPENAI_BASE_URL
        )
        self.model = model
        self._http: HTTPTransport = HTTPTransport(
            provider="OpenAI moderation",
            base_url=url,
            headers={"authorization": f"Bearer {key}"} if key else {},
            secrets=[key] if key else [],
            credential=credential,
            timeout=timeout,
            retry=RetryPolicy(max_retries=max_retries),
            http_client=http_client,
            async_http_client=async_http_client,
            limits=ResponseLimits(max_response_bytes=max_response_bytes),
        )

    def __repr__(self) -> str:
        return f"OpenAIModerationModel(model={self.model!r}, base_url={self._http.base_url!r})"

    def _body(self, text: str) -> dict[str, Any]:
        if not isinstance(text, str):
            raise TypeError(f"moderate() takes a str, got {type(text).__name__}")
        return {"model": self.model, "input": text}

    def moderate(self, text: str) -> Moderation:
        """Ask the endpoint about ``text``."""
        return parse_moderation(self._http.post("/moderations", self._body(text)))

    async def amoderate(self, text: str) -> Moderation:
        """Async ``moderate``."""
        return parse_moderation(await self._http.apost("/moderations", self._body(text)))


def parse_moderation(payload: Any) -> Moderation:
    """The ``Moderation`` of an OpenAI ``/moderations`` response body (its first result)."""
    results = payload.get("results") if isinstance(payload, dict) else None
    if not isinstance(results, list) or not results or not isinstance(results[0], dict):
        raise ModelResponseError(
            "The moderation response has no results list; is base_url an OpenAI-compatible moderation server?"
        )
    first = results[0]
    flagged = first.get("flagged")
    if not isinstance(flagged, bool):
        raise ModelResponseError("The moderation result has no boolean 'flagged' field")
    categories = first.get("categories", {})
    scores = first.get("category_scores", {})
    if not isinstance(categories, dict) or not isinstance(scores, dict):
        raise ModelResponseError("The moderation result's 'categories' and 'category_scores' must be objects")
    names = [str(k)[:_MAX_NAME] for k, v in list(categories.items())[:_MAX_CATEGORIES] if v is True]
    kept = {
        str(k)[:_MAX_NAME]: float(v)
        for k, v in list(scores.items())[:_MAX_CATEGORIES]
        if isinstance(v, (int, float)) and not isinstance(v, bool)
    }
    model = payload.get("model")
    return Moderation(flagged, tuple(names), kept, model if isinstance(model, str) else None)


__all__ = ["Moderation", "ModerationModel", "OpenAIModerationModel", "parse_moderation"]
