"""Tool approval across two processes: one pauses and stores the request in SQLite, another resumes it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

COMMON = """
import sys
from advisors import ApprovalDecision, PendingToolCalls, ToolApprovalAdvisor
from chatclient import ChatClient
from chatclient.memory import SqliteChatMemoryRepository
from chatclient.messages import AssistantMessage, ToolCall
from chatclient.testing import ScriptedChatModel
from chatclient.tools import tool

LEDGER = sys.argv[2]

@tool(requires_approval=True)
def refund(order: str, amount: int) -> str:
    '''Refund an order.'''
    with open(LEDGER, "a") as f:
        f.write(f"{order}:{amount}\\n")
    return f"refunded {amount} on {order}"

repo = SqliteChatMemoryRepository(sys.argv[1])
"""

PAUSE = """
model = ScriptedChatModel([AssistantMessage(None, (ToolCall("call-1", "refund", '{"order": "A17", "amount": 80}'),))])
client = ChatClient.builder(model).default_advisors(ToolApprovalAdvisor()).build()
response = client.prompt("Refund order A17, it arrived broken").tools(refund).call().chat_client_response()
pending = ToolApprovalAdvisor.pending(response)
pending.save(repo, "pending:ticket-9")
print("PAUSED", [c.id for c in pending.calls])
"""

RESUME = """
pending = PendingToolCalls.load(repo, "pending:ticket-9")
model = ScriptedChatModel(["I refunded 40 on order A17."])
client = ChatClient.builder(model).default_advisors(ToolApprovalAdvisor()).build()
decision = ApprovalDecision.edit({"order": "A17", "amount": 40})
response = client.prompt().tools(refund).resume(pending, {"call-1": decision}).call().chat_client_response()
repo.delete("pending:ticket-9")
print("ANSWER", response.chat_response.text)
print("PROMPT", [type(m).__name__ for m in model.prompts[0].messages])
"""


def run(script: str, db: Path, ledger: Path) -> str:
    code = textwrap.dedent(COMMON) + textwrap.dedent(script)
    done = subprocess.run(
        [sys.executable, "-c", code, str(db), str(ledger)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_pause_in_one_process_resume_in_another(tmp_path: Path) -> None:
    db, ledger = tmp_path / "memory.sqlite", tmp_path / "ledger.txt"
    out1 = run(PAUSE, db, ledger)
    assert "PAUSED ['call-1']" in out1
    assert not ledger.exists()  # nothing ran before the decision
    out2 = run(RESUME, db, ledger)
    assert "ANSWER I refunded 40 on order A17." in out2
    assert "PROMPT ['UserMessage', 'AssistantMessage', 'ToolResponseMessage']" in out2
    assert ledger.read_text() == "A17:40\n"  # the edited arguments ran, once
    from chatclient.memory import SqliteChatMemoryRepository

    assert SqliteChatMemoryRepository(str(db)).find("pending:ticket-9") == []
