"""Prices of image, transcription and speech models: per image, per audio minute, per character.

The vendors bill these kinds by the unit they produce or consume, not (only) by tokens. The shipped
table (``DEFAULT_MEDIA_PRICES``) lists OpenAI's models as its price page showed them on
``MEDIA_PRICES_DATE``; prices change, so check them and pass your own table for anything that matters::

    prices = DEFAULT_MEDIA_PRICES.with_prices({"my-tts": MediaPrice(per_million_characters=20.0)})
    model = OpenAISpeechModel("my-tts", budget=budget, prices=prices)

Images are priced by ``"quality:size"`` (``"high:1024x1536"``); a request that leaves quality or
size to the server (``None`` / ``"auto"``) is planned at the dearest matching entry. The chat-token
table is ``chatclient.resilience.prices`` (which re-exports these names).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TypeVar

__all__ = ["DEFAULT_MEDIA_PRICES", "MEDIA_PRICES_DATE", "MediaPrice", "MediaPriceTable", "find_price"]

MEDIA_PRICES_DATE = "2025-08-15"
"""The day the shipped media prices were read from OpenAI's price page."""

_T = TypeVar("_T")
_ANY = ("", "auto", None)


def find_price(table: Mapping[str, _T], by_length: Sequence[str], model: str) -> _T | None:
    """The entry of ``model`` in ``table`` (lower-case keys): exact, else the longest key that
    prefixes it (``by_length`` lists the keys longest first); ``None`` when none matches."""
    name = model.lower()
    exact = table.get(name)
    if exact is not None:
        return exact
    for key in by_length:
        if name.startswith(key):
            return table[key]
    return None


def _positive(label: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ValueError(f"MediaPrice.{label} must be a number >= 0 (dollars), got {value!r}")


@dataclass(frozen=True, slots=True)
class MediaPrice:
    """A media model's prices in dollars: ``per_image`` by ``"quality:size"``, ``per_audio_minute``
    (transcription), ``per_million_characters`` (speech input)."""

    per_image: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    per_audio_minute: float | None = None
    per_million_characters: float | None = None

    def __post_init__(self) -> None:
        for key, value in self.per_image.items():
            if not isinstance(key, str) or key.count(":") != 1:
                raise ValueError(f"MediaPrice.per_image keys are 'quality:size' (e.g. 'high:1024x1024'), got {key!r}")
            _positive(f"per_image[{key!r}]", value)
        for label in ("per_audio_minute", "per_million_characters"):
            value = getattr(self, label)
            if value is not None:
                _positive(label, value)
        object.__setattr__(self, "per_image", MappingProxyType({k.lower(): float(v) for k, v in self.per_image.items()}))

    def image(self, quality: str | None = None, size: str | None = None) -> float | None:
        """The price of one image; an unset (or ``"auto"``) quality or size takes the dearest match."""
        q = None if quality in _ANY else str(quality).lower()
        s = None if size in _ANY else str(size).lower()
        matches = [
            price
            for key, price in self.per_image.items()
            if (q is None or key.split(":")[0] == q) and (s is None or key.split(":")[1] == s)
        ]
        return max(matches) if matches else None

    def audio(self, seconds: float) -> float | None:
        """The price of transcribing ``seconds`` of audio (billed per minute, pro rata)."""
        return None if self.per_audio_minute is None else self.per_audio_minute * max(seconds, 0.0) / 60.0

    def characters(self, count: int) -> float | None:
        """The price of speaking ``count`` characters."""
        return None if self.per_million_characters is None else self.per_million_characters * count / 1_000_000


class MediaPriceTable:
    """``MediaPrice`` by model name, matched as ``PriceTable`` matches (exact, then longest prefix,
    case-insensitively)."""

    def __init__(self, prices: Mapping[str, MediaPrice], *, date: str | None = None) -> None:
        table: dict[str, MediaPrice] = {}
        for name, price in prices.items():
            if not isinstance(name, str) or not name:
                raise ValueError(f"price table keys must be model names, got {name!r}")
            if not isinstance(price, MediaPrice):
                raise TypeError(f"the price of {name!r} must be a MediaPrice, got {type(price).__name__}")
            table[name.lower()] = price
        self._prices = MappingProxyType(table)
        self._by_length = sorted(table, key=len, reverse=True)
        self.date = date

    @property
    def prices(self) -> Mapping[str, MediaPrice]:
        """Every entry, by lower-case model name."""
        return self._prices

    def __repr__(self) -> str:
        return f"MediaPriceTable({len(self._prices)} models, date={self.date!r})"

    def find(self, model: str | None) -> MediaPrice | None:
        """The price of ``model`` (exact, then longest prefix), or ``None``."""
        return find_price(self._prices, self._by_length, model) if model else None

    def with_prices(self, prices: Mapping[str, MediaPrice]) -> MediaPriceTable:
        """A copy with ``prices`` added or replaced."""
        return MediaPriceTable({**self._prices, **{k.lower(): v for k, v in prices.items()}}, date=self.date)


def _images(**by_variant: float) -> MediaPrice:
    # keyword names cannot hold ':' or 'x': "high_1024x1536" -> "high:1024x1536"
    return MediaPrice(per_image={k.replace("_", ":", 1): v for k, v in by_variant.items()})


DEFAULT_MEDIA_PRICES = MediaPriceTable(
    {
        # Images, per image by quality and size.
        "gpt-image-1": _images(
            low_1024x1024=0.011, low_1024x1536=0.016, low_1536x1024=0.016,
            medium_1024x1024=0.042, medium_1024x1536=0.063, medium_1536x1024=0.063,
            high_1024x1024=0.167, high_1024x1536=0.25, high_1536x1024=0.25,
        ),
        "dall-e-3": _images(
            standard_1024x1024=0.04, standard_1024x1792=0.08, standard_1792x1024=0.08,
            hd_1024x1024=0.08, hd_1024x1792=0.12, hd_1792x1024=0.12,
        ),
        "dall-e-2": _images(standard_256x256=0.016, standard_512x512=0.018, standard_1024x1024=0.02),
        # Transcription, per audio minute.
        "whisper-1": MediaPrice(per_audio_minute=0.006),
        "gpt-4o-transcribe": MediaPrice(per_audio_minute=0.006),
        "gpt-4o-mini-transcribe": MediaPrice(per_audio_minute=0.003),
        # Speech, per character of input. tts-1 and tts-1-hd are billed so; gpt-4o-mini-tts is billed by
        # tokens, which the page estimates at $0.015 a minute: at about 1,000 characters a minute of
        # speech that is $15 per million characters (an estimate; pass your own price to be exact).
        "tts-1": MediaPrice(per_million_characters=15.0),
        "tts-1-hd": MediaPrice(per_million_characters=30.0),
        "gpt-4o-mini-tts": MediaPrice(per_million_characters=15.0),
    },
    date=MEDIA_PRICES_DATE,
)
"""The shipped media prices (dollars, read on ``MEDIA_PRICES_DATE``)."""
