"""Issue 33 item 6: the chat page example accepted a ``text/plain`` POST from any origin.

A cross-site "simple" request (a form or ``fetch`` with ``text/plain``, which needs no CORS
preflight) and a DNS-rebinding page (its own name in ``Host``) must not start a model run; the
page's own JSON request still streams. Probed in process through the ASGI app, counting model calls.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("starlette")

APP = Path(__file__).resolve().parents[2] / "examples" / "chat_ui" / "app.py"
QUESTION = json.dumps(
    {
        "id": "chat-1",
        "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "When are you open?"}]}],
    }
)


def _load() -> Any:
    spec = importlib.util.spec_from_file_location("chat_ui_app_under_test", APP)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


app_module = _load()


def _post(headers: dict[str, str], body: str = QUESTION) -> tuple[int, str, int]:
    model = app_module.SlowScriptedModel(token_delay=0.0)
    app = app_module.create_app(model)
    before = app_module.STATS.streams_open + app_module.STATS.streams_finished

    async def go() -> tuple[int, str]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as client:
            response = await client.post("/api/chat/", content=body.encode(), headers=headers)
            return response.status_code, response.text

    status, text = asyncio.run(go())
    return status, text, app_module.STATS.streams_open + app_module.STATS.streams_finished - before


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"content-type": "text/plain", "origin": "http://evil.example"}, 403),
        ({"content-type": "text/plain"}, 415),  # no Origin sent: the content type still refuses it
        ({"content-type": "application/x-www-form-urlencoded"}, 415),
        ({"content-type": "application/json", "host": "evil.example:8000"}, 421),
        ({"content-type": "application/json", "host": "127.0.0.1.evil.example"}, 421),
        ({"content-type": "application/json", "origin": "http://evil.example"}, 403),
        ({"content-type": "application/json", "origin": "null"}, 403),
    ],
)
def test_a_cross_site_request_starts_no_model_run(headers: dict[str, str], status: int) -> None:
    got, _, streams = _post(headers)
    assert got == status
    assert streams == 0


@pytest.mark.parametrize("host", ["127.0.0.1:8000", "localhost:8000", "[::1]:8000", "localhost"])
def test_the_pages_own_json_request_streams(host: str) -> None:
    headers = {"content-type": "application/json; charset=utf-8", "host": host, "origin": f"http://{host}"}
    status, text, streams = _post(headers)
    assert status == 200 and streams == 1
    assert '"type":"text-delta"' in text and '"type":"finish"' in text
