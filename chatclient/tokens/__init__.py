"""Counting prompt tokens with real tokenizers, and the context windows of known models.

A :class:`TokenCounter` answers ``count(messages, tools=()) -> int``: the tokens the prompt will
take once the provider has wrapped each message in its chat format. Counters here:

- :class:`TiktokenTokenCounter` — OpenAI's BPE (tiktoken), with OpenAI's published per-message and
  per-tool overheads;
- :class:`HuggingFaceTokenCounter` — a ``tokenizer.json`` (Hugging Face ``tokenizers``) and the model's
  own Jinja chat template (from ``tokenizer_config.json`` beside it, or given);
- :class:`TemplateTokenCounter` — the same template logic over any ``encode(text) -> ids`` (the
  embedded llama.cpp model's tokenizer uses it);
- :class:`EstimatingTokenCounter` — about four characters a token, offline, for when nothing better exists;
- :func:`message_counter` — adapts a ``chatclient.memory.TokenCounter`` (``count(message)``).

Counters never fetch a tokenizer over the network: they read files you ship, or a package's files.
Each keeps a bounded per-message cache, so counting a long conversation again as it grows costs
only the new messages.

``CONTEXT_WINDOWS`` is a dated table of context windows (input + output tokens) by model name;
:func:`context_window` looks a model up (its ``capabilities.context_window`` first). The advisor
that fits a prompt under the window is ``ContextWindowAdvisor`` (``chatclient.context_window``, also
importable from here and from ``advisors``).
"""

from __future__ import annotations

from typing import Any

from chatclient.tokens.counters import (
    CONTEXT_WINDOWS,
    CONTEXT_WINDOWS_DATE,
    EstimatingTokenCounter,
    HuggingFaceTokenCounter,
    TemplateTokenCounter,
    TiktokenTokenCounter,
    TokenCounter,
    TokenCounterUnavailableError,
    context_window,
    message_counter,
    tools_cost,
)

__all__ = [
    "CONTEXT_WINDOWS",
    "CONTEXT_WINDOWS_DATE",
    "ContextWindowAdvisor",
    "EstimatingTokenCounter",
    "HuggingFaceTokenCounter",
    "TemplateTokenCounter",
    "TiktokenTokenCounter",
    "TokenCounter",
    "TokenCounterUnavailableError",
    "context_window",
    "message_counter",
    "tools_cost",
]


def __getattr__(name: str) -> Any:
    # The advisor lives in chatclient.context_window, which imports the counters module (not this face),
    # so handing it on here lazily keeps `import chatclient.tokens` light and the layers acyclic.
    if name == "ContextWindowAdvisor":
        from chatclient.context_window import ContextWindowAdvisor

        return ContextWindowAdvisor
    raise AttributeError(f"module 'chatclient.tokens' has no attribute {name!r}")
