"""Model prices and the cost of a ``Usage``.

Prices are in US dollars per million tokens. The shipped table (``DEFAULT_PRICES``) lists common
OpenAI and Anthropic models as their public price pages showed them on ``PRICES_DATE``; prices
change, so check them and pass your own table (or overrides) for anything that matters::

    prices = DEFAULT_PRICES.with_prices({"my-finetune": ModelPrice(input=3.0, output=12.0)})
    prices.cost("gpt-4o-mini-2024-07-18", usage)    # longest known prefix: "gpt-4o-mini"

Image, transcription and speech models are priced per image, per audio minute and per character
(``MediaPrice``, ``DEFAULT_MEDIA_PRICES``, defined in ``chatclient.models.media_prices`` and
re-exported here).

Cost of one call: uncached input x ``input`` + cached input x ``cached_input`` + cache writes x
``cache_write`` + non-reasoning output x ``output`` + reasoning x ``reasoning`` (each per 1M).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from chatclient.models.base import Usage
from chatclient.models.media_prices import (
    DEFAULT_MEDIA_PRICES,
    MEDIA_PRICES_DATE,
    MediaPrice,
    MediaPriceTable,
    find_price,
)

__all__ = [
    "DEFAULT_MEDIA_PRICES",
    "DEFAULT_PRICES",
    "MEDIA_PRICES_DATE",
    "PRICES_DATE",
    "MediaPrice",
    "MediaPriceTable",
    "ModelPrice",
    "PriceTable",
]

PRICES_DATE = "2025-08-15"
"""The day the shipped prices were read from the providers' price pages."""

_MILLION = 1_000_000.0


@dataclass(frozen=True, slots=True)
class ModelPrice:
    """One model's prices in dollars per million tokens.

    ``cached_input`` defaults to ``input``, ``cache_write`` to ``input`` and ``reasoning`` to
    ``output`` (providers bill thinking as output).
    """

    input: float
    output: float
    cached_input: float | None = None
    cache_write: float | None = None
    reasoning: float | None = None

    def __post_init__(self) -> None:
        for label in ("input", "output", "cached_input", "cache_write", "reasoning"):
            value = getattr(self, label)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0):
                raise ValueError(f"ModelPrice.{label} must be a number >= 0 (dollars per 1M tokens), got {value!r}")

    def cost(self, usage: Usage) -> float:
        """The cost of ``usage`` at these prices, in dollars."""
        cached = min(usage.cached_input_tokens, usage.prompt_tokens)
        writes = min(usage.cache_write_tokens, usage.prompt_tokens - cached)
        plain_in = usage.prompt_tokens - cached - writes
        reasoning = min(usage.reasoning_tokens, usage.completion_tokens)
        plain_out = usage.completion_tokens - reasoning
        total = (
            plain_in * self.input
            + cached * (self.input if self.cached_input is None else self.cached_input)
            + writes * (self.input if self.cache_write is None else self.cache_write)
            + plain_out * self.output
            + reasoning * (self.output if self.reasoning is None else self.reasoning)
        )
        return total / _MILLION


class PriceTable:
    """Prices by model name; a name matches its entry exactly or by the longest entry that prefixes it
    (``"gpt-4o-2024-08-06"`` -> ``"gpt-4o"``), case-insensitively.

    ``default`` prices models not in the table (``None``: unknown models raise ``KeyError`` from
    ``get``, and ``cost`` returns ``None`` for them).
    """

    def __init__(
        self, prices: Mapping[str, ModelPrice], *, date: str | None = None, default: ModelPrice | None = None
    ) -> None:
        table: dict[str, ModelPrice] = {}
        for name, price in prices.items():
            if not isinstance(name, str) or not name:
                raise ValueError(f"price table keys must be model names, got {name!r}")
            if not isinstance(price, ModelPrice):
                raise TypeError(f"the price of {name!r} must be a ModelPrice, got {type(price).__name__}")
            table[name.lower()] = price
        self._prices = MappingProxyType(table)
        self._by_length = sorted(table, key=len, reverse=True)
        self.date = date
        self.default = default

    @property
    def prices(self) -> Mapping[str, ModelPrice]:
        return self._prices

    def __contains__(self, model: object) -> bool:
        return isinstance(model, str) and self.find(model) is not None

    def __repr__(self) -> str:
        return f"PriceTable({len(self._prices)} models, date={self.date!r})"

    def find(self, model: str | None) -> ModelPrice | None:
        """The price for ``model`` (exact, then longest prefix, then ``default``), or ``None``."""
        found = find_price(self._prices, self._by_length, model) if model else None
        return self.default if found is None else found

    def get(self, model: str) -> ModelPrice:
        """Like ``find``, but an unknown model raises ``KeyError`` naming what to do."""
        price = self.find(model)
        if price is None:
            raise KeyError(
                f"no price for model {model!r}; add it with PriceTable.with_prices({{{model!r}: ModelPrice(...)}})"
            )
        return price

    def cost(self, model: str | None, usage: Usage) -> float | None:
        """The cost of ``usage`` on ``model`` in dollars, or ``None`` when the model has no price."""
        price = self.find(model)
        return None if price is None else price.cost(usage)

    def with_prices(self, prices: Mapping[str, ModelPrice], *, default: ModelPrice | None = None) -> PriceTable:
        """A copy with ``prices`` added or replaced (and ``default`` set when given)."""
        return PriceTable(
            {**self._prices, **{k.lower(): v for k, v in prices.items()}},
            date=self.date,
            default=default if default is not None else self.default,
        )


def _p(inp: float, cached: float, out: float, write: float | None = None) -> ModelPrice:
    return ModelPrice(input=inp, output=out, cached_input=cached, cache_write=write)


DEFAULT_PRICES = PriceTable(
    {
        # OpenAI (cached input = prompt-cache hits; reasoning billed as output)
        "gpt-5": _p(1.25, 0.125, 10.0),
        "gpt-5-mini": _p(0.25, 0.025, 2.0),
        "gpt-5-nano": _p(0.05, 0.005, 0.40),
        "gpt-4.1": _p(2.0, 0.50, 8.0),
        "gpt-4.1-mini": _p(0.40, 0.10, 1.60),
        "gpt-4.1-nano": _p(0.10, 0.025, 0.40),
        "gpt-4o": _p(2.50, 1.25, 10.0),
        "gpt-4o-mini": _p(0.15, 0.075, 0.60),
        "o3": _p(2.0, 0.50, 8.0),
        "o4-mini": _p(1.10, 0.275, 4.40),
        # Anthropic (cache reads 0.1x input, 5-minute cache writes 1.25x input)
        "claude-opus-4": _p(15.0, 1.50, 75.0, 18.75),
        "claude-sonnet-4": _p(3.0, 0.30, 15.0, 3.75),
        "claude-3-7-sonnet": _p(3.0, 0.30, 15.0, 3.75),
        "claude-3-5-haiku": _p(0.80, 0.08, 4.0, 1.0),
    },
    date=PRICES_DATE,
)
"""The shipped prices (dollars per 1M tokens, read on ``PRICES_DATE``)."""
