"""Production control for model calls: fallback with circuit breakers, routing, rate limits, prices.

Every class here that wraps a model is itself a ``ChatModel``, so every advisor works on top of it
unchanged, in all four modes::

    from chatclient.resilience import CircuitBreaker, FallbackChatModel, RateLimiter

    limiter = RateLimiter(requests_per_minute=500, tokens_per_minute=200_000)
    model = FallbackChatModel(limiter.wrap(primary), backup, breaker=CircuitBreaker(failure_threshold=3))

Names load on first access, so importing this package costs nothing until one is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from chatclient._lazy import lazy_getattr

if TYPE_CHECKING:
    from chatclient.resilience.breaker import CircuitBreaker, CircuitState
    from chatclient.resilience.fallback import DEFAULT_TRIGGERS, TRIGGERS, FallbackChatModel, fallback_trigger
    from chatclient.resilience.prices import DEFAULT_PRICES, PRICES_DATE, ModelPrice, PriceTable
    from chatclient.resilience.ratelimit import RateLimitedChatModel, RateLimiter, parse_reset
    from chatclient.resilience.routing import ClassifierRouter, ModelRouter, RoutingChatModel

_WHERE = {
    "CircuitBreaker": "chatclient.resilience.breaker",
    "CircuitState": "chatclient.resilience.breaker",
    "FallbackChatModel": "chatclient.resilience.fallback",
    "TRIGGERS": "chatclient.resilience.fallback",
    "DEFAULT_TRIGGERS": "chatclient.resilience.fallback",
    "fallback_trigger": "chatclient.resilience.fallback",
    "RoutingChatModel": "chatclient.resilience.routing",
    "ClassifierRouter": "chatclient.resilience.routing",
    "ModelRouter": "chatclient.resilience.routing",
    "RateLimiter": "chatclient.resilience.ratelimit",
    "RateLimitedChatModel": "chatclient.resilience.ratelimit",
    "parse_reset": "chatclient.resilience.ratelimit",
    "ModelPrice": "chatclient.resilience.prices",
    "PriceTable": "chatclient.resilience.prices",
    "DEFAULT_PRICES": "chatclient.resilience.prices",
    "PRICES_DATE": "chatclient.resilience.prices",
}

__all__ = [
    "CircuitBreaker",
    "CircuitState",
    "ClassifierRouter",
    "DEFAULT_PRICES",
    "DEFAULT_TRIGGERS",
    "FallbackChatModel",
    "ModelPrice",
    "ModelRouter",
    "PRICES_DATE",
    "PriceTable",
    "RateLimitedChatModel",
    "RateLimiter",
    "RoutingChatModel",
    "TRIGGERS",
    "fallback_trigger",
    "parse_reset",
]

__getattr__ = lazy_getattr("chatclient.resilience", _WHERE, globals())


def __dir__() -> list[str]:
    return __all__
