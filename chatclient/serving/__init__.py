"""Serve a ``ChatClient`` or an agent to the clients people already use (extra ``serve``).

* ``openai_app(target)`` — the OpenAI Chat Completions wire (``POST /v1/chat/completions``,
  ``GET /v1/models``), for the ``openai`` SDKs, Open WebUI, LibreChat and other agent frameworks;
* ``ag_ui_app(target)`` — the AG-UI protocol (CopilotKit and other AG-UI front ends);
* ``ai_sdk_app(target)`` — the Vercel AI SDK UI message stream (``useChat``);
* ``serve(app_or_target)`` — run one of them (or, for a bare target, all three) on Uvicorn.

Every app is a plain ASGI app: mount it into FastAPI or Starlette, or run it with ``serve``::

    from chatclient.serving import openai_app, serve
    serve(openai_app(client, auth=check_token), port=8000)

Starlette, Uvicorn and ``ag-ui-protocol`` are imported on first use. See docs/guide/serving.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from chatclient._lazy import lazy_getattr

if TYPE_CHECKING:
    from chatclient.serving.ag_ui import ag_ui_app
    from chatclient.serving.ai_sdk import ai_sdk_app
    from chatclient.serving.openai_compat import openai_app
    from chatclient.serving.server import serve

_WHERE = {
    "openai_app": "chatclient.serving.openai_compat",
    "ag_ui_app": "chatclient.serving.ag_ui",
    "ai_sdk_app": "chatclient.serving.ai_sdk",
    "serve": "chatclient.serving.server",
}

__getattr__ = lazy_getattr(__name__, _WHERE, globals())

__all__ = ["ag_ui_app", "ai_sdk_app", "openai_app", "serve"]
