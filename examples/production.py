"""Production control: fallback with a circuit breaker, a rate limit, a cost budget, tool search and
a person approving a tool call — one stack, every piece a model wrapper or an advisor.

    python examples/production.py

The primary model is down (it raises connection errors), so a backup answers every call and the
primary's breaker opens. The backup is rate-limited, each request has a cost budget, the model
finds its tools with a search tool instead of seeing all 40, and the refund tool needs a person's
approval (here a function that denies refunds over 50). Runs offline on ``ScriptedChatModel``; set
``OPENAI_API_KEY`` or ``CHATCLIENT_BASE_URL`` to put a real model behind the fallback.
"""

from __future__ import annotations

import asyncio
import json
import time

from _support import make_model

from advisors import ApprovalDecision, BudgetAdvisor, ToolApprovalAdvisor, ToolSearchAdvisor
from chatclient import ChatClient, Prompt
from chatclient.errors import ModelConnectionError
from chatclient.messages import AssistantMessage, ToolCall
from chatclient.resilience import CircuitBreaker, FallbackChatModel, RateLimiter
from chatclient.testing import ScriptedChatModel
from chatclient.tools import FunctionToolCallback, ToolCallAdvisor, tool
from chatclient.tools.guards import ToolLoopGuard


@tool(requires_approval=True)
def refund_order(order_id: str, amount: int) -> str:
    """Refund part or all of an order."""
    return f"refunded {amount} EUR on {order_id}"


def catalogue() -> list[FunctionToolCallback]:
    """39 ordinary back-office tools the model should not have to read on every turn."""

    def make(verb: str, topic: str) -> FunctionToolCallback:
        def run(id: str) -> str:
            return f"{verb} {topic} {id}: ok"

        return FunctionToolCallback(run, name=f"{verb}_{topic}", description=f"{verb.capitalize()} a {topic} by id.")

    verbs = ("create", "list", "archive")
    topics = (
        "invoice",
        "shipment",
        "customer",
        "ticket",
        "report",
        "vendor",
        "asset",
        "lead",
        "budget",
        "license",
        "contract",
        "campaign",
        "alert",
    )
    return [make(v, t) for v in verbs for t in topics]


SCRIPT = [
    AssistantMessage(None, (ToolCall("s1", "search_tools", '{"query": "refund an order"}'),)),
    AssistantMessage(None, (ToolCall("r1", "refund_order", '{"order_id": "A17", "amount": 80}'),)),
    "I could not refund 80 EUR on A17: refunds over 50 EUR need a manager. I have opened a request.",
    "Your order A17 left the warehouse this morning.",
]


def approve(call: ToolCall) -> ApprovalDecision:
    amount = json.loads(call.arguments).get("amount", 0)
    print(f"approval asked: {call.name}({call.arguments})")
    return ApprovalDecision.approve() if amount <= 50 else ApprovalDecision.deny("refunds over 50 EUR need a manager")


def main() -> None:
    primary = ScriptedChatModel([ModelConnectionError("connection refused")] * 3, model_name="primary-model")
    backup = make_model(ScriptedChatModel(SCRIPT, model_name="gpt-4o-mini"))
    limiter = RateLimiter(requests_per_minute=1200)  # 20 calls per second for the backup
    model = FallbackChatModel(
        primary, limiter.wrap(backup), breaker=CircuitBreaker(failure_threshold=2, window=60.0, reset_timeout=30.0)
    )
    client = (
        ChatClient.builder(model)
        .default_advisors(
            BudgetAdvisor(max_cost=0.05),
            ToolCallAdvisor(loop_guard=ToolLoopGuard(max_repeats=2)),
            ToolApprovalAdvisor(callback=approve),
            ToolSearchAdvisor(top_k=3),
        )
        .build()
    )

    # 1. A tool loop: search -> refund (denied by the approval function) -> answer.
    response = client.prompt("Please refund 80 EUR on order A17.").tools(refund_order, *catalogue()).call()
    ccr = response.chat_client_response()
    cr = ccr.chat_response
    assert cr is not None
    print("answer:", cr.text)
    for e in ccr.tool_executions:
        print(f"tool: {e.name} -> {e.result[:80]}")
    if isinstance(backup, ScriptedChatModel):
        print("first turn offered:", sorted(t.name for t in backup.prompts[0].tools))
    print("answered by:", cr.metadata.extra["fallback_model"])
    print("primary breaker:", model.breakers[0].state.value)
    cost = cr.metadata.extra["cost"]
    print(f"request cost: ${cost:.6f} for {cr.metadata.extra['budget_usage'].total_tokens} tokens")

    # 2. The open breaker skips the primary without calling it.
    before = len(primary.prompts)
    r = client.prompt("Where is my order A17?").call().chat_response()
    assert r is not None
    print("second answer:", r.text, "| primary called again:", len(primary.prompts) > before)

    # 3. The limiter spaces concurrent calls evenly (no polling, first come first served).
    paced = limiter.wrap(ScriptedChatModel(["ok"] * 5))

    async def burst() -> float:
        start = time.monotonic()
        await asyncio.gather(*(paced.acall(Prompt(f"q{i}")) for i in range(5)))
        return time.monotonic() - start

    print(f"5 calls at 20/s took {asyncio.run(burst()):.1f} s")


if __name__ == "__main__":
    main()
