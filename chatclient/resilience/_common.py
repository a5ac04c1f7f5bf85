"""Helpers shared by the wrapper models: labels, capability intersection, span annotation."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from chatclient.models.base import ModelCapabilities


def model_label(model: Any) -> str:
    """A short name for ``model``: its ``model`` / ``model_name`` string, else its class name."""
    for attr in ("model", "model_name"):
        try:
            value = getattr(model, attr, None)
        except Exception:  # a property that needs configuration; the class name will do
            value = None
        if isinstance(value, str) and value:
            return value
    return type(model).__name__


def unique_labels(models: Sequence[Any]) -> tuple[str, ...]:
    """``model_label`` of each model; repeated labels get ``#2``, ``#3`` … so each is distinct."""
    out: list[str] = []
    for model in models:
        base = model_label(model)
        label, n = base, 1
        while label in out:
            n += 1
            label = f"{base}#{n}"
        out.append(label)
    return tuple(out)


def common_capabilities(models: Sequence[Any]) -> ModelCapabilities:
    """What every one of ``models`` can do: a wrapper may hand a prompt to any of them."""
    caps = [getattr(m, "capabilities", None) or ModelCapabilities() for m in models]
    if not caps:
        return ModelCapabilities()
    first = caps[0]
    rungs = tuple(r for r in (first.structured_output or ()) if all(r in (c.structured_output or ()) for c in caps))
    return ModelCapabilities(
        tools=all(c.tools for c in caps),
        streaming=all(c.streaming for c in caps),
        vision=all(c.vision for c in caps),
        structured_output=rungs,
        logprobs=all(c.logprobs for c in caps),
    )


def annotate_span(attribute: str, value: str | float | int) -> None:
    """Set ``attribute`` on the current OpenTelemetry span when an observer is installed (else nothing)."""
    from chatclient.observation import get_observer

    if get_observer() is None:
        return
    try:
        from opentelemetry.trace import get_current_span
    except ImportError:  # observation without OpenTelemetry: the response metadata carries it
        return
    span = get_current_span()
    if span.is_recording():
        span.set_attribute(attribute, value)
