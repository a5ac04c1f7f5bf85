"""Built-in advisors. Each lives in its own module and is imported on first use.

from advisors import SimpleLoggerAdvisor, ReReadingAdvisor, SafeGuardAdvisor
"""

from __future__ import annotations

import importlib
from typing import Any

# public name -> module that defines it (kept lazy so importing one advisor does not pull in all)
_WHERE = {
    "SimpleLoggerAdvisor": "advisors.logging",
    "ReReadingAdvisor": "advisors.reread",
    "SafeGuardAdvisor": "advisors.safeguard",
    "MessageChatMemoryAdvisor": "advisors.memory",
    "PromptChatMemoryAdvisor": "advisors.memory",
    "VectorStoreChatMemoryAdvisor": "advisors.vector_memory",
    "QuestionAnswerAdvisor": "advisors.qa",
    "RetrievalAugmentationAdvisor": "advisors.rag",
    "ToolCallAdvisor": "chatclient.tools",
    "StructuredOutputValidationAdvisor": "advisors.validation",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'advisors' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
