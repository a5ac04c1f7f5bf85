"""``serve``: run a serving app (or a bare target with all three protocols) on Uvicorn."""

from __future__ import annotations

import warnings
from typing import Any

from chatclient.asgi_guard import is_loopback


def _is_target(value: Any) -> bool:
    from collections.abc import Mapping

    from chatclient.agents.base import Agent
    from chatclient.client import ChatClient

    if isinstance(value, Mapping):
        return bool(value) and all(isinstance(v, (ChatClient, Agent)) for v in value.values())
    return isinstance(value, (ChatClient, Agent))


def all_protocols_app(target: Any) -> Any:
    """One ASGI app with every protocol for ``target``: ``/v1/...`` (OpenAI), ``/ag-ui``, ``/ai-sdk``.

    ``POST /ag-ui`` and ``POST /ag-ui/`` both reach the AG-UI app (a mount alone would answer the
    first with a redirect, which not every client follows for a POST); likewise ``/ai-sdk``.
    """
    from chatclient.serving.ag_ui import ag_ui_app
    from chatclient.serving.ai_sdk import ai_sdk_app
    from chatclient.serving.openai_compat import openai_app

    openai = openai_app(target)
    mounted = (("/ag-ui", ag_ui_app(target)), ("/ai-sdk", ai_sdk_app(target)))

    async def app(scope: Any, receive: Any, send: Any) -> None:
        path = scope.get("path", "")
        for prefix, sub in mounted:
            if path == prefix or path.startswith(prefix + "/"):
                # As Starlette's Mount does: the prefix moves to root_path, the rest is the app's path.
                root = scope.get("root_path", "") + prefix
                full = path if path != prefix else prefix + "/"
                await sub({**scope, "root_path": root, "path": scope.get("root_path", "") + full}, receive, send)
                return
        await openai(scope, receive, send)

    return app


def serve(app_or_target: Any, *, host: str = "127.0.0.1", port: int = 8000, **uvicorn_options: Any) -> None:
    """Serve an ASGI app (``openai_app(...)``, ``ag_ui_app(...)``, ``ai_sdk_app(...)``, a FastAPI app)
    on Uvicorn until interrupted.

    A bare target (a ``ChatClient``, an agent or a mapping name -> either) is served with all three
    protocols mounted: ``/v1/chat/completions`` and ``/v1/models``, ``/ag-ui``, ``/ai-sdk``; such an
    app answers loopback names only (build the apps yourself to pass ``auth`` / ``allowed_hosts``).
    On a non-loopback ``host``, an app built here without ``auth`` or ``allowed_hosts`` gets a
    ``UserWarning``: it answers only requests whose ``Host`` is a loopback name.
    ``uvicorn_options`` go to ``uvicorn.run`` (``log_level``, ``workers`` need an import string, ...).

        serve(openai_app(client, auth=check_token, allowed_hosts=["api.example.com"]), host="0.0.0.0")
    """
    try:
        import uvicorn
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        raise ImportError("serve() needs Uvicorn: pip install 'chatclient[serve]'") from exc
    app = all_protocols_app(app_or_target) if _is_target(app_or_target) else app_or_target
    if not callable(app):
        raise TypeError(f"serve() takes an ASGI app or a ChatClient / agent target, got {type(app).__name__}")
    edge = getattr(app, "edge", None)
    if not is_loopback(host) and (edge is None or (edge.auth is None and not edge.allowed_hosts)):
        warnings.warn(
            f"serving on the non-loopback address {host!r}: build the app with auth=... and allowed_hosts=[...] "
            "(a chatclient.serving app without them answers loopback Host names only, and anything in front "
            "of it must check who calls); see docs/guide/serving.md",
            UserWarning,
            stacklevel=2,
        )
    uvicorn.run(app, host=host, port=port, **uvicorn_options)


__all__ = ["all_protocols_app", "serve"]
