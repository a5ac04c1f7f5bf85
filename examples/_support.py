"""What the examples share: choosing between the offline model and a real one.

Every example runs offline by default, on a scripted or function-backed model from
``chatclient.testing`` (no network, no key, deterministic output). Set ``OPENAI_API_KEY`` (hosted
OpenAI) or ``CHATCLIENT_BASE_URL`` (any OpenAI-compatible server, e.g. a local llama.cpp or vLLM at
``http://127.0.0.1:8000/v1``) to run the same code on that model; ``CHATCLIENT_MODEL`` picks the
model name (default ``gpt-4o-mini``).
"""

from __future__ import annotations

import os

from chatclient.models import ChatModel


def real_model_configured() -> bool:
    """True when the environment names a real model to use instead of the offline one."""
    return bool(os.environ.get("OPENAI_API_KEY") or os.environ.get("CHATCLIENT_BASE_URL"))


def make_model(offline: ChatModel) -> ChatModel:
    """The real model named by the environment, else ``offline``; prints which one runs."""
    if real_model_configured():
        from chatclient.models.openai import OpenAIChatModel

        model = OpenAIChatModel(
            os.environ.get("CHATCLIENT_MODEL", "gpt-4o-mini"),
            base_url=os.environ.get("CHATCLIENT_BASE_URL") or None,
            api_key=os.environ.get("OPENAI_API_KEY") or "not-needed",
        )
        print(f"model: {model!r}")
        return model
    print(
        f"model: {type(offline).__name__} (offline, from chatclient.testing; "
        "set OPENAI_API_KEY or CHATCLIENT_BASE_URL to use a real model)"
    )
    return offline
