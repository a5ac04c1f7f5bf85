"""Agents: a support desk with a supervisor, a person's approval and crash recovery.

1. A supervisor's planner picks which agent handles a customer request (an order lookup or a refund,
   both plain functions) until it is done.
2. The reply is drafted by a model agent, then waits for a person's approval: the run suspends, its
   scope travels as JSON (to a queue, a database, another process), and ``resume`` finishes it
   without calling the drafting model again.
3. A job stored in SQLite crashes halfway; running it again with the same scope id continues after
   the last completed agent.

Run: .venv/bin/python examples/agents_human_recovery.py   (offline by default; see examples/_support.py)
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _support import make_model

from chatclient import ChatClient, ChatOptions, ContextKeys, Prompt
from chatclient.agents import SqliteScopeStore, agent, agent_function, human_input, sequence, supervisor
from chatclient.testing import FunctionChatModel

ORDERS = {"A-17": "shipped on Monday", "B-42": "lost in transit"}


def offline_answer(prompt: Prompt) -> str:
    """Deterministic answers for the offline run: the planner's steps and the drafted reply."""
    text = prompt.user_message.text
    if text.startswith("Request:"):  # the supervisor's planner
        if "lookup_order" not in text.split("Results so far:")[1]:
            return json.dumps({"agent_name": "lookup_order", "arguments": {"order_id": "B-42"}})
        if "refund" not in text.split("Results so far:")[1]:
            return json.dumps({"agent_name": "refund", "arguments": {"order_id": "B-42", "amount": "19.90"}})
        return json.dumps({"agent_name": "done", "arguments": {"response": "Order B-42 was lost; refunded."}})
    if text.startswith("Draft a short reply"):
        return "Dear customer, your order B-42 was lost; we refunded 19.90 EUR."
    return "I do not know."


@agent_function(output_key="order_status", description="Looks up the status of an order by its id.")
def lookup_order(order_id: str) -> str:
    return ORDERS.get(order_id, "unknown order")


@agent_function(output_key="refund_note", description="Refunds an amount (EUR) for an order.")
def refund(order_id: str, amount: float) -> str:
    return f"refunded {amount:.2f} EUR for {order_id}"


def main() -> None:
    model = make_model(FunctionChatModel(offline_answer))
    client = ChatClient.builder(model).default_options(ChatOptions(temperature=0.0, max_tokens=200)).build()
    planner = client.mutate().default_advisors(params={ContextKeys.NATIVE_STRUCTURED_OUTPUT: True}).build()

    # 1. a supervisor chooses the agents
    desk = supervisor(lookup_order, refund, planner=planner, max_steps=5, response="summary", name="desk")
    result = desk.run(request="My order B-42 never arrived, I want my money back.")
    print("supervisor chose:", [c.name for c in result.invocations[0].children])
    print("supervisor answer:", result.output)
    print("refund note:", result.scope.read("refund_note"))

    # 2. a person approves the reply before it is sent
    @agent_function(output_key="sent", name="send")
    def send(reply: str, approval: str) -> str:
        return f"sent ({approval}): {reply}"

    writer = agent(client, name="writer", user="Draft a short reply to: {{ request }}", output_key="reply")
    reply_flow = sequence(writer, human_input(question="Send this reply? {{ reply }}", output_key="approval"), send)
    first = reply_flow.run(request="Where is my order B-42?")
    assert first.suspended is not None
    print("waiting for a person:", first.suspended.question)
    saved = first.suspended.scope.to_json()
    print(f"scope saved as {len(saved)} characters of JSON")
    done = reply_flow.resume(saved, "yes, approved by Ada")
    print("after resume:", done.output)
    print("writer replayed, not called again:", done.invocations[0].children[0].recovered)

    # 3. crash recovery with a SQLite store
    calls: list[str] = []

    @agent_function(output_key="invoice", name="make_invoice")
    def make_invoice(order_id: str) -> str:
        calls.append("make_invoice")
        return f"invoice for {order_id}"

    @agent_function(output_key="mailed", name="mail_invoice")
    def mail_invoice(invoice: str) -> str:
        calls.append("mail_invoice")
        if calls.count("mail_invoice") == 1:
            raise ConnectionError("the mail server went away")
        return f"mailed {invoice}"

    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteScopeStore(Path(tmp) / "jobs.db")
        job = sequence(make_invoice, mail_invoice, name="billing")
        try:
            job.run(order_id="A-17", scope_id="billing-A-17", scope_store=store)
        except Exception as exc:  # the crash
            print("first run failed:", type(exc).__name__, "-", exc)
        again = job.run(scope_id="billing-A-17", scope_store=store)
        print("second run:", again.output)
        print("calls:", calls)
        store.close()


if __name__ == "__main__":
    main()
