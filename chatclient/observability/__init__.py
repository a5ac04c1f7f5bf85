"""Observability integrations for chatclient.

The hooks themselves live in ``chatclient.observation`` (an ``Observer`` protocol and
``set_observer``). This package holds ready-made observers; each lives in its own module so that
importing ``chatclient`` never imports an optional dependency:

* ``chatclient.observability.otel`` — OpenTelemetry spans and metrics following the GenAI semantic
  conventions (extra ``otel``: ``pip install 'chatclient[otel]'``).

    from chatclient.observability.otel import instrument
    instrument()  # uses the global tracer and meter providers
"""

from __future__ import annotations

__all__: list[str] = []
