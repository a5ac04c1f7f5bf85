"""The tools the approval tests pause on: ``send_money`` needs a person's approval, ``balance`` does not.

``SENT`` records every transfer that really ran; each test module clears it before every test.
"""

from __future__ import annotations

from chatclient.tools import tool

SENT: list[tuple[str, int]] = []


@tool(requires_approval=True)
def send_money(to: str, amount: int) -> str:
    """Send money to someone."""
    SENT.append((to, amount))
    return f"sent {amount} to {to}"


@tool
def balance() -> int:
    """The account balance."""
    return 100
