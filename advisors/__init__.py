"""Built-in advisors. Each lives in its own module and is imported on first use.

from advisors import SimpleLoggerAdvisor, ReReadingAdvisor, SafeGuardAdvisor
"""

from __future__ import annotations

from chatclient._lazy import lazy_getattr

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
    "PromptCachingAdvisor": "advisors.prompt_caching",
    "BudgetAdvisor": "advisors.budget",
    "Budget": "advisors.budget",
    "ToolApprovalAdvisor": "advisors.approval",
    "ApprovalDecision": "advisors.approval",
    "PendingToolCalls": "advisors.approval",
    "call_digest": "advisors.approval",
    "ToolSearchAdvisor": "advisors.tool_search",
    "InputGuardrailAdvisor": "advisors.guardrails",
    "OutputGuardrailAdvisor": "advisors.guardrails",
    "SkillsAdvisor": "chatclient.skills",
    "ContextWindowAdvisor": "chatclient.context_window",
}

__all__ = sorted(_WHERE)


__getattr__ = lazy_getattr("advisors", _WHERE, globals())


def __dir__() -> list[str]:
    return __all__
