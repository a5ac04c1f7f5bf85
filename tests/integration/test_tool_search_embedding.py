"""ToolSearchAdvisor ranked by the real local embedding model (all-MiniLM-L6-v2, offline on the CPU)."""

from __future__ import annotations

import importlib.util
import json

import pytest

from advisors import ToolSearchAdvisor
from advisors.tool_search import EmbeddingToolRanker
from chatclient import ChatClient
from chatclient.messages import AssistantMessage, ToolCall
from chatclient.testing import ScriptedChatModel
from chatclient.tools import FunctionToolCallback

_MISSING = [m for m in ("all_minilm_l6_v2", "tokenizers", "safetensors") if importlib.util.find_spec(m) is None]
pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(bool(_MISSING), reason=f"the 'local' extra is not installed (missing: {', '.join(_MISSING)})"),
]

# Descriptions that share no keyword with the queries below: only meaning can match them.
DESCRIPTIONS = {
    "issue_reimbursement": "Send a customer their money back for a purchase.",
    "book_flight": "Reserve a seat on an airplane trip.",
    "forecast_weather": "Tell whether it will rain or be sunny tomorrow.",
    "translate_text": "Turn a sentence into another language.",
    "reset_password": "Let a user choose new login credentials.",
    "track_parcel": "Find out where a package is on its way to the buyer.",
    "schedule_meeting": "Put an appointment with colleagues in the calendar.",
    "convert_currency": "Change an amount from dollars to euros or other money.",
}


def tools() -> list[FunctionToolCallback]:
    def make(name: str, description: str) -> FunctionToolCallback:
        def run(detail: str) -> str:
            return f"{name}({detail}): done"

        return FunctionToolCallback(run, name=name, description=description)

    return [make(n, d) for n, d in DESCRIPTIONS.items()]


@pytest.fixture(scope="module")
def ranker() -> EmbeddingToolRanker:
    from chatclient.rag import LocalEmbeddingModel

    return EmbeddingToolRanker(LocalEmbeddingModel())


def test_embedding_ranker_finds_tools_by_meaning(ranker: EmbeddingToolRanker) -> None:
    defs = [cb.definition for cb in tools()]
    assert ranker("refund my order", defs, 1) == ["issue_reimbursement"]
    assert ranker("where is my delivery?", defs, 1) == ["track_parcel"]
    assert ranker("will I need an umbrella", defs, 2)[0] == "forecast_weather"


def test_tool_search_with_the_embedding_ranker(ranker: EmbeddingToolRanker) -> None:
    model = ScriptedChatModel(
        [
            AssistantMessage(None, (ToolCall("s", "search_tools", '{"query": "give the customer a refund"}'),)),
            AssistantMessage(None, (ToolCall("t", "issue_reimbursement", '{"detail": "order 9"}'),)),
            "Refunded.",
        ]
    )
    spec = (
        ChatClient.create(model)
        .prompt("refund order 9")
        .tools(*tools())
        .advisors(ToolSearchAdvisor(top_k=2, ranker=ranker))
    )
    r = spec.call().chat_client_response()
    assert [t.name for t in model.prompts[0].tools] == ["search_tools"]
    found = [t["name"] for t in json.loads(r.tool_executions[0].result)["tools"]]
    assert found[0] == "issue_reimbursement"
    assert r.tool_executions[1].result == "issue_reimbursement(order 9): done"
