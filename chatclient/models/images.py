"""Image models: generate and edit images from a prompt.

    from chatclient.models.images import OpenAIImageModel

    with OpenAIImageModel() as images:                            # OPENAI_API_KEY, gpt-image-1
        response = images.generate("A watercolour fox in the snow", size="1024x1024", quality="low")
        response.images[0].save("fox.png")
        media = response.images[0].to_media()                      # into a message or a tool result

``ImageModel`` is the protocol (``generate`` / ``agenerate``; ``edit`` / ``aedit`` where the model
can edit). ``OpenAIImageModel`` speaks OpenAI's ``/images/generations`` and ``/images/edits``
(``gpt-image-1``, ``dall-e-3``, ``dall-e-2`` and OpenAI-compatible servers through ``base_url``);
``AzureOpenAIImageModel`` the same on an Azure OpenAI deployment. Both run on the HTTP layer of
the chat models (retries, limits, typed errors, secrets scrubbed, cassettes, pickling, spans) and
raise ``RefusalError`` when the content policy rejects a prompt.

Inputs are checked before any HTTP call: an empty prompt, ``n < 1`` and a parameter the model is
known not to take (``style`` on gpt-image-1, ``n > 1`` on dall-e-3, ``output_format`` on DALL-E)
raise ``ValueError``; sizes and qualities the table does not know are passed through, since the
vendors add values.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol, Unpack, runtime_checkable

from chatclient.errors import ModelResponseError
from chatclient.messages import Media
from chatclient.models.base import Usage
from chatclient.models.openai_media import (
    AzureDeployment,
    MediaCall,
    MediaModelOptions,
    OpenAIMediaModel,
    form_value,
    sniff_mime,
    upload,
)

if TYPE_CHECKING:
    from chatclient.models.azure import TokenProvider
    from chatclient.models.media_prices import MediaPrice

__all__ = [
    "AzureOpenAIImageModel",
    "GeneratedImage",
    "ImageModel",
    "ImageResponse",
    "OpenAIImageModel",
]

_MAX_IMAGES = 16  # images kept from one answer (OpenAI makes at most 10)
_MAX_IMAGE_BYTES = 50 * 1024 * 1024  # an input image, as gpt-image-1 takes them
_MAX_DALLE2_BYTES = 4 * 1024 * 1024
_MAX_EDIT_IMAGES = 16
_FORMATS = {"png": "image/png", "jpeg": "image/jpeg", "jpg": "image/jpeg", "webp": "image/webp"}


@dataclass(frozen=True, slots=True)
class _Rules:
    """What one model family is known not to take (checked before HTTP)."""

    max_n: int = 10
    style: bool = False
    output_format: bool = False  # output_format, background, output_compression (gpt-image-1)
    response_format: bool = True


_RULES = {
    "gpt-image-1": _Rules(style=False, output_format=True, response_format=False),
    "dall-e-3": _Rules(max_n=1, style=True),
    "dall-e-2": _Rules(),
}


def _rules(model: str) -> _Rules | None:
    name = model.lower()
    for key, rules in _RULES.items():
        if name.startswith(key):
            return rules
    return None  # an OpenAI-compatible server's model: nothing is known, everything passes


@dataclass(frozen=True, slots=True)
class GeneratedImage:
    """One generated image: inline ``data`` (bytes) or a ``url`` (DALL-E's ``response_format="url"``,
    valid for an hour), its ``mime_type`` and the ``revised_prompt`` the model drew from (dall-e-3)."""

    data: bytes | None = None
    url: str | None = None
    mime_type: str = "image/png"
    revised_prompt: str | None = None

    def __post_init__(self) -> None:
        if self.data is None and self.url is None:
            raise ValueError("a GeneratedImage needs data or a url")

    def __repr__(self) -> str:
        what = f"{len(self.data)} bytes" if self.data is not None else f"url={self.url!r}"
        return f"GeneratedImage({what}, mime_type={self.mime_type!r})"

    def to_media(self) -> Media:
        """The image as ``Media``: its bytes, else its URL (for a message or a tool result)."""
        if self.data is not None:
            return Media(self.mime_type, self.data)
        assert self.url is not None
        return Media.from_url(self.url, self.mime_type)

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the image's bytes to ``path`` and return it. An image known only by URL raises
        ``ValueError``: ask for ``response_format="b64_json"`` (nothing is downloaded here)."""
        if self.data is None:
            raise ValueError(
                "this image is a URL, not bytes; generate with response_format='b64_json' to save it, "
                "or download the URL yourself"
            )
        target = Path(path)
        target.write_bytes(self.data)
        return target


@dataclass(frozen=True, slots=True)
class ImageResponse:
    """The images of one call, the token ``usage`` the vendor reported (gpt-image-1) and
    ``metadata`` (``created``, the ``size``/``quality``/``output_format`` the server chose, ``cost``
    in dollars when a budget counts the call)."""

    images: list[GeneratedImage]
    usage: Usage = field(default_factory=Usage)
    metadata: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        object.__setattr__(self, "images", list(self.images))
        object.__setattr__(self, "metadata", MappingProxyType(dict(self.metadata)))

    @property
    def image(self) -> GeneratedImage:
        """The first image."""
        if not self.images:
            raise ValueError("the response has no images")
        return self.images[0]


@runtime_checkable
class ImageModel(Protocol):
    """Anything that draws images from a prompt, blocking and async.

    Models that can change an existing image also have ``edit(prompt, images, *, mask=None,
    **options)`` and ``aedit``; ``image_tool`` offers editing only where they exist.
    """

    def generate(
        self,
        prompt: str,
        *,
        n: int = 1,
        size: str | None = None,
        quality: str | None = None,
        style: str | None = None,
        output_format: str | None = None,
        **options: Any,
    ) -> ImageResponse:
        """``n`` images for ``prompt``."""
        ...

    async def agenerate(
        self,
        prompt: str,
        *,
        n: int = 1,
        size: str | None = None,
        quality: str | None = None,
        style: str | None = None,
        output_format: str | None = None,
        **options: Any,
    ) -> ImageResponse:
        """Async ``generate``."""
        ...


# -- requests and answers --------------------------------------------------------------------------


def _check_prompt(prompt: Any, n: Any) -> None:
    if not isinstance(prompt, str):
        raise TypeError(f"the prompt must be a str, not {type(prompt).__name__}")
    if not prompt.strip():
        raise ValueError("the prompt is empty; describe the image to make")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n (the number of images) must be an int >= 1, got {n!r}")


def _parameters(
    model: str, n: int, size: str | None, quality: str | None, style: str | None, output_format: str | None,
    options: Mapping[str, Any],
) -> dict[str, Any]:  # fmt: skip
    """The request's parameters beside the prompt, checked against what ``model`` is known to take."""
    rules = _rules(model)
    if rules is not None:
        if n > rules.max_n:
            raise ValueError(f"{model} makes at most {rules.max_n} image(s) per request, asked for n={n}")
        if style is not None and not rules.style:
            raise ValueError(f"{model} takes no style (only dall-e-3 does); describe the style in the prompt")
        if not rules.output_format:
            for name in ("output_format", "background", "output_compression"):
                if (output_format if name == "output_format" else options.get(name)) is not None:
                    raise ValueError(f"{model} takes no {name} (gpt-image-1 does); DALL-E answers in PNG")
        if not rules.response_format and options.get("response_format") is not None:
            raise ValueError(f"{model} always answers with base64 images; drop response_format")
    body: dict[str, Any] = {"model": model, "n": n}
    for name, value in (("size", size), ("quality", quality), ("style", style), ("output_format", output_format)):
        if value is not None:
            body[name] = value
    for name, value in options.items():
        if value is not None:
            body[name] = value
    return body


def _mime_of(output_format: Any, data: bytes | None) -> str:
    if isinstance(output_format, str) and output_format.lower() in _FORMATS:
        return _FORMATS[output_format.lower()]
    sniffed = sniff_mime(data) if data else None
    return sniffed or "image/png"


def parse_images(payload: Any, output_format: str | None = None) -> ImageResponse:
    """The ``ImageResponse`` of an OpenAI ``/images/generations`` or ``/images/edits`` answer."""
    data = payload.get("data") if isinstance(payload, Mapping) else None
    if not isinstance(data, list) or not data:
        raise ModelResponseError("the image response has no 'data' list; is base_url an OpenAI-compatible image API?")
    fmt = payload.get("output_format") or output_format
    images = []
    for item in data[:_MAX_IMAGES]:
        if not isinstance(item, Mapping):
            raise ModelResponseError("an image in the response is not an object")
        revised = item.get("revised_prompt")
        revised = revised if isinstance(revised, str) else None
        encoded, url = item.get("b64_json"), item.get("url")
        if isinstance(encoded, str):
            try:
                raw = base64.b64decode(encoded, validate=True)
            except (binascii.Error, ValueError):
                raise ModelResponseError("an image's b64_json is not valid base64") from None
            images.append(GeneratedImage(raw, None, _mime_of(fmt, raw), revised))
        elif isinstance(url, str) and url.startswith(("https://", "http://")):
            images.append(GeneratedImage(None, url, _mime_of(fmt, None), revised))
        else:
            raise ModelResponseError("an image in the response has neither b64_json nor an http(s) url")
    metadata = {
        k: payload[k]
        for k in ("created", "background", "output_format", "quality", "size")
        if isinstance(payload.get(k), (str, int)) and not isinstance(payload.get(k), bool)
    }
    return ImageResponse(images, _usage(payload.get("usage")), metadata)


def _usage(raw: Any) -> Usage:
    if not isinstance(raw, Mapping):
        return Usage()

    def count(name: str) -> int:
        value = raw.get(name)
        return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0

    total = raw.get("total_tokens")
    reported = total if isinstance(total, int) and not isinstance(total, bool) and total >= 0 else None
    return Usage(count("input_tokens"), count("output_tokens"), reported_total_tokens=reported)


# -- OpenAI ------------------------------------------------------------------------------------------


class OpenAIImageModel(OpenAIMediaModel):
    """OpenAI images (``POST {base_url}/images/generations`` and ``/images/edits``) on the shared HTTP layer.

    ``api_key`` defaults to ``OPENAI_API_KEY`` and ``base_url`` to ``OPENAI_BASE_URL`` or the
    OpenAI API (a compatible server needs no key). ``budget`` (an ``advisors.Budget``) is checked
    before each call at the dearest price the request may cost (``prices``, default
    ``DEFAULT_MEDIA_PRICES``, per image by quality and size) and charged after it, to ``budget_key``.

    >>> OpenAIImageModel(api_key="sk-test")
    OpenAIImageModel(model='gpt-image-1', base_url='https://api.openai.com/v1')
    """

    def __init__(
        self,
        model: str = "gpt-image-1",
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        **options: Unpack[MediaModelOptions],
    ) -> None:
        self._connect(model, (base_url, api_key), **options)

    # -- generations ---------------------------------------------------------------------------------

    def _generation(
        self, prompt: str, n: int, size: str | None, quality: str | None, style: str | None,
        output_format: str | None, options: Mapping[str, Any],
    ) -> dict[str, Any]:  # fmt: skip
        _check_prompt(prompt, n)
        body = _parameters(self.model, n, size, quality, style, output_format, options)
        return {"prompt": prompt, **body, "model": self._wire_model()}

    def generate(
        self,
        prompt: str,
        *,
        n: int = 1,
        size: str | None = None,
        quality: str | None = None,
        style: str | None = None,
        output_format: str | None = None,
        **options: Any,
    ) -> ImageResponse:
        """``n`` images for ``prompt``; ``options`` are passed on (``background``, ``moderation``,
        ``output_compression``, ``response_format``, ``user``)."""
        return self._request(self._generate_call(prompt, n, size, quality, style, output_format, options))

    async def agenerate(
        self,
        prompt: str,
        *,
        n: int = 1,
        size: str | None = None,
        quality: str | None = None,
        style: str | None = None,
        output_format: str | None = None,
        **options: Any,
    ) -> ImageResponse:
        """Async ``generate``."""
        return await self._arequest(self._generate_call(prompt, n, size, quality, style, output_format, options))

    def _generate_call(
        self, prompt: str, n: int, size: str | None, quality: str | None, style: str | None,
        output_format: str | None, options: Mapping[str, Any],
    ) -> MediaCall[ImageResponse]:  # fmt: skip
        body = self._generation(prompt, n, size, quality, style, output_format, options)
        return self._images_call("generate_image", "images/generations", body, body)

    # -- edits ---------------------------------------------------------------------------------------

    def _edit_body(
        self, prompt: str, images: Any, mask: Any, n: int, size: str | None, quality: str | None,
        options: Mapping[str, Any],
    ) -> tuple[Any, dict[str, Any]]:  # fmt: skip
        from chatclient.models.http.multipart import multipart_body

        _check_prompt(prompt, n)
        fields = {
            "prompt": prompt,
            **_parameters(self.model, n, size, quality, None, None, options),
            "model": self._wire_model(),
        }
        items = [images] if isinstance(images, (Media, bytes, bytearray, memoryview, str, os.PathLike)) else list(images)
        if not items:
            raise ValueError("edit() needs at least one image to change")
        if len(items) > _MAX_EDIT_IMAGES:
            raise ValueError(f"edit() takes at most {_MAX_EDIT_IMAGES} images, got {len(items)}")
        dalle2 = self.model.lower().startswith("dall-e-2")
        limit = _MAX_DALLE2_BYTES if dalle2 else _MAX_IMAGE_BYTES
        who = "dall-e-2 image edits" if dalle2 else "OpenAI image edits"
        field_name = "image" if len(items) == 1 else "image[]"
        files = [
            upload(item, field=field_name, what="image", max_bytes=limit, limit_name=who, index=i)
            for i, item in enumerate(items)
        ]
        if mask is not None:
            files.append(upload(mask, field="mask", what="mask", max_bytes=limit, limit_name=who))
        text = {k: form_value(v, "an image edit option") for k, v in fields.items()}
        return multipart_body(text, files), fields

    def edit(
        self,
        prompt: str,
        images: Any,
        *,
        mask: Any = None,
        n: int = 1,
        size: str | None = None,
        quality: str | None = None,
        **options: Any,
    ) -> ImageResponse:
        """Change ``images`` (one or several: ``Media``, bytes or paths) as ``prompt`` says; ``mask``
        (a PNG with an alpha channel) marks where. ``options`` are passed on as form fields."""
        return self._request(self._edit_call(prompt, images, mask, n, size, quality, options))

    async def aedit(
        self,
        prompt: str,
        images: Any,
        *,
        mask: Any = None,
        n: int = 1,
        size: str | None = None,
        quality: str | None = None,
        **options: Any,
    ) -> ImageResponse:
        """Async ``edit``."""
        return await self._arequest(self._edit_call(prompt, images, mask, n, size, quality, options))

    def _edit_call(
        self, prompt: str, images: Any, mask: Any, n: int, size: str | None, quality: str | None,
        options: Mapping[str, Any],
    ) -> MediaCall[ImageResponse]:  # fmt: skip
        body, fields = self._edit_body(prompt, images, mask, n, size, quality, options)
        return self._images_call("edit_image", "images/edits", body, fields)

    def _images_call(
        self, operation: str, endpoint: str, body: Any, fields: Mapping[str, Any]
    ) -> MediaCall[ImageResponse]:
        """The checked request's call, its cost planned against the budgets first (at the ``n``,
        quality and size asked for)."""
        n, quality, size = fields["n"], fields.get("quality"), fields.get("size")
        planned = self._plan(lambda price: _image_cost(price, n, quality, size))
        return MediaCall(
            operation,
            self._path(endpoint),
            body,
            lambda payload: self._answer(payload, fields, planned),
            _span_attributes(fields),
        )

    def _answer(self, payload: Any, body: Mapping[str, Any], planned: float | None) -> ImageResponse:
        try:
            response = parse_images(payload, body.get("output_format"))
        except ModelResponseError as exc:
            raise ModelResponseError(self._http.scrub(str(exc))) from None
        cost: float | None = None
        if self._metered():
            price = self._price()
            quality = response.metadata.get("quality") or body.get("quality")
            size = response.metadata.get("size") or body.get("size")
            cost = _image_cost(price, len(response.images), quality, size) if price is not None else None
            cost = planned if cost is None else cost
            self._charge(response.usage, cost)
            return ImageResponse(response.images, response.usage, {**response.metadata, "cost": cost})
        return response


def _image_cost(price: MediaPrice, n: int, quality: Any, size: Any) -> float | None:
    one = price.image(quality if isinstance(quality, str) else None, size if isinstance(size, str) else None)
    return None if one is None else one * n


def _span_attributes(body: Mapping[str, Any]) -> dict[str, Any]:
    """Low-cardinality request attributes for the span (Spring AI's image observation keys)."""
    out: dict[str, Any] = {"gen_ai.request.image.count": body.get("n", 1)}
    for name in ("size", "quality", "style", "output_format", "response_format"):
        value = body.get(name)
        if isinstance(value, str):
            out[f"gen_ai.request.image.{name}"] = value
    return out


# -- Azure -------------------------------------------------------------------------------------------


class AzureOpenAIImageModel(OpenAIImageModel):
    """``OpenAIImageModel`` on an Azure OpenAI deployment.

    ``endpoint`` defaults to ``AZURE_OPENAI_ENDPOINT``; the key is ``api_key`` (else
    ``AZURE_OPENAI_API_KEY``), sent as ``api-key``, or a ``token_provider`` gives an Entra ID bearer
    token for every request (asked again once after a 401). With ``api_version`` requests go to
    ``/openai/deployments/{deployment}/images/...?api-version=``; without, to the v1 path.
    ``model`` names the model family behind the deployment (for the parameter checks and prices).

    >>> AzureOpenAIImageModel("img", endpoint="https://r.openai.azure.com", api_key="k" * 32, api_version="2025-04-01-preview")
    AzureOpenAIImageModel(deployment='img', base_url='https://r.openai.azure.com/openai/deployments/img')
    """

    provider = "Azure OpenAI"
    otel_provider = "azure.ai.openai"

    def __init__(
        self,
        deployment: str,
        *,
        endpoint: str | None = None,
        api_version: str | None = None,
        api_key: str | None = None,
        token_provider: TokenProvider | None = None,
        model: str = "gpt-image-1",
        **options: Unpack[MediaModelOptions],
    ) -> None:
        self._connect(model, (endpoint, AzureDeployment(deployment, api_version, token_provider), api_key), **options)
