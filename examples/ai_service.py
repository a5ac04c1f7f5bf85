"""Declarative AI service: write a typed interface, let ``ai_service`` implement it with a model.

    python examples/ai_service.py

One Protocol declares five methods; the return types decide what each call does: a text answer
with per-user memory, a typed ``Invoice`` (docstring as the prompt), an enum, a stream of text
deltas, and a ``Result`` holding the value, the tool calls run and the usage. Runs offline on
``ScriptedChatModel`` (its scripted answers stand in for a model's); set ``CHATCLIENT_MODEL=local``
or ``OPENAI_API_KEY`` / ``CHATCLIENT_BASE_URL`` for a real model.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from typing import Protocol

from _support import make_model
from pydantic import BaseModel

from chatclient import AssistantMessage, ChatClient, ToolCall
from chatclient.memory import MessageWindowChatMemory
from chatclient.services import MemoryId, Result, ToolArg, ai_service, system, user
from chatclient.testing import ScriptedChatModel
from chatclient.tools import ToolContext, tool


class Invoice(BaseModel):
    number: str
    total: float
    currency: str


class Urgency(enum.Enum):
    LOW = "low"
    HIGH = "high"


@tool
def order_status(order_id: str, ctx: ToolContext) -> str:
    """The shipping status of an order."""
    print(f"[tool] order_status({order_id!r}) for customer {ctx['customer']}")
    return f"order {order_id}: shipped yesterday, arrives Friday"


class SupportDesk(Protocol):
    @system("You are the support desk of {{ shop }}. Answer in one sentence.")
    @user("{{ message }}")
    def chat(self, message: str, customer: MemoryId[str], shop: str = "Acme Books") -> str: ...

    def extract_invoice(self, email: str) -> Invoice:
        """Extract the invoice number, total and currency from this e-mail:

        {{ email }}"""

    def urgency(self, message: str) -> Urgency: ...

    def stream_reply(self, message: str) -> Iterator[str]: ...

    def track(self, question: str, customer: ToolArg[str]) -> Result[str]: ...


SCRIPT = [
    "Hello Ada, welcome to Acme Books!",
    "You told me your name is Ada.",
    '{"number": "INV-2024-117", "total": 249.9, "currency": "EUR"}',
    "high",
    ["We are ", "sorry to hear ", "that."],
    AssistantMessage(None, (ToolCall("call-1", "order_status", '{"order_id": "A-42"}'),)),
    "Your order A-42 shipped yesterday and arrives Friday.",
]


def main() -> None:
    model = make_model(ScriptedChatModel(SCRIPT))
    desk = ai_service(
        SupportDesk,
        client=ChatClient.create(model),
        memory=MessageWindowChatMemory(max_messages=20),
        tools=[order_status],
    )

    # 1. Memory per customer: the second call sees the first turn of the same customer.
    print("chat:", desk.chat("Hi, I am Ada.", customer="ada"))
    print("chat:", desk.chat("What is my name?", customer="ada"))
    if isinstance(model, ScriptedChatModel):
        print("history sent:", [m.text for m in model.last_prompt.messages][1:4])

    # 2. An entity: the docstring is the prompt, the return type the schema.
    invoice = desk.extract_invoice("Dear customer, invoice INV-2024-117 over EUR 249.90 is due on May 1.")
    print("invoice:", invoice)

    # 3. An enum, and a stream of text deltas.
    print("urgency:", desk.urgency("My parcel is lost and I need it tomorrow!"))
    print("stream:", " | ".join(desk.stream_reply("The book arrived damaged.")))

    # 4. A tool call; the customer id reaches the tool through its ToolContext, never the model.
    result = desk.track("Where is my order A-42?", customer="ada")
    print("track:", result.value)
    print("tools run:", [(e.name, e.arguments) for e in result.tool_executions], "finish reason:", result.finish_reason)


if __name__ == "__main__":
    main()
