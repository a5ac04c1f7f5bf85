"""Human approval of tool calls (the classes live in ``chatclient.tools.approval``; re-exported here).

from advisors import ToolApprovalAdvisor, ApprovalDecision
"""

from __future__ import annotations

from chatclient.tools.approval import (
    APPROVAL_REQUIRED,
    PENDING_TOOL_CALLS,
    RESUME_TOOL_CALLS,
    ApprovalDecision,
    PendingToolCalls,
    ToolApprovalAdvisor,
    call_digest,
)

__all__ = [
    "APPROVAL_REQUIRED",
    "PENDING_TOOL_CALLS",
    "RESUME_TOOL_CALLS",
    "ApprovalDecision",
    "PendingToolCalls",
    "ToolApprovalAdvisor",
    "call_digest",
]
