"""ToolSearchAdvisor with 200 tools: the first prompt holds only the search tool and the
always-visible ones; searched tools appear on later turns and can be called."""

from __future__ import annotations

import json

import pytest

from advisors import ToolSearchAdvisor
from advisors.tool_search import Bm25ToolRanker
from chatclient import ChatClient, Prompt
from chatclient.messages import AssistantMessage, ToolCall
from chatclient.prompt import ToolDefinition
from chatclient.testing import FunctionChatModel, ScriptedChatModel
from chatclient.tools import FunctionToolCallback, tool
from tests.conftest import run_spec

TOPICS = [
    "invoice",
    "shipment",
    "customer",
    "inventory",
    "payroll",
    "ticket",
    "calendar",
    "email",
    "report",
    "warehouse",
    "refund",
    "contract",
    "lead",
    "campaign",
    "budget",
    "asset",
    "vendor",
    "license",
    "backup",
    "alert",
]
VERBS = ["create", "delete", "list", "update", "archive", "export", "import", "approve", "cancel", "summarize"]


def make_tools() -> list[FunctionToolCallback]:
    out = []
    for topic in TOPICS:
        for verb in VERBS:

            def fn(id: str, _v: str = verb, _t: str = topic) -> str:
                return f"{_v} {_t} {id}: done"

            out.append(
                FunctionToolCallback(
                    fn, name=f"{verb}_{topic}", description=f"{verb.capitalize()} a {topic} record by its id."
                )
            )
    return out


@tool
def get_time() -> str:
    """The current time."""
    return "12:00"


TOOLS = make_tools()


def test_two_hundred_tools_first_prompt_holds_only_search_and_always_visible(mode: str) -> None:
    assert len(TOOLS) == 200
    model = ScriptedChatModel(
        [
            AssistantMessage(None, (ToolCall("s1", "search_tools", '{"query": "cancel a refund"}'),)),
            AssistantMessage(None, (ToolCall("t1", "cancel_refund", '{"id": "R-7"}'),)),
            "Refund R-7 is cancelled.",
        ]
    )
    spec = (
        ChatClient.create(model)
        .prompt("Please cancel refund R-7")
        .tools(*TOOLS, get_time)
        .advisors(ToolSearchAdvisor(always_visible=["get_time"], top_k=5))
    )
    response = run_spec(spec, mode)
    first, second, third = model.prompts
    assert sorted(t.name for t in first.tools) == ["get_time", "search_tools"]
    found = json.loads(response.tool_executions[0].result)["tools"]
    names = [t["name"] for t in found]
    assert len(names) == 5 and "cancel_refund" in names
    assert sorted(t.name for t in second.tools) == sorted(["get_time", "search_tools", *names])
    assert any(t.name == "cancel_refund" and t.input_schema["properties"] for t in second.tools)
    assert response.tool_executions[1].result == "cancel refund R-7: done"
    assert {t.name for t in third.tools} == {t.name for t in second.tools}  # discoveries accumulate
    assert response.chat_response is not None and response.chat_response.text == "Refund R-7 is cancelled."


def test_a_tool_called_without_searching_still_runs_and_no_tools_means_no_search() -> None:
    model = ScriptedChatModel([AssistantMessage(None, (ToolCall("t1", "export_report", '{"id": "Q3"}'),)), "ok"])
    spec = ChatClient.create(model).prompt("export Q3").tools(*TOOLS).advisors(ToolSearchAdvisor())
    r = spec.call().chat_client_response()
    assert r.tool_executions[0].result == "export report Q3: done"
    plain = FunctionChatModel(lambda p: f"{len(p.tools)} tools")
    assert ChatClient.create(plain).prompt("hi").advisors(ToolSearchAdvisor()).call().content() == "0 tools"


def test_bm25_ranking_prefers_name_and_description_matches() -> None:
    defs = [cb.definition for cb in TOOLS]
    ranker = Bm25ToolRanker()
    assert ranker("approve vendor", defs, 3)[0] == "approve_vendor"
    assert ranker("zzz qqq", defs, 3) == []
    assert ranker("listInvoice", defs, 1) == ["list_invoice"]  # camelCase splits into words


def test_custom_ranker_and_validation() -> None:
    seen: list[str] = []

    def ranker(query: str, definitions: object, top_k: int) -> list[str]:
        seen.append(query)
        return ["list_email"]

    advisor = ToolSearchAdvisor(ranker=ranker)
    (search,) = advisor.loop_tools(tuple(TOOLS))
    assert json.loads(search.call('{"query": "mail"}'))["tools"][0]["name"] == "list_email"
    assert seen == ["mail"]
    with pytest.raises(TypeError, match="collection of tool names"):
        ToolSearchAdvisor(always_visible="get_time")
    with pytest.raises(ValueError, match="top_k"):
        ToolSearchAdvisor(top_k=0)
    assert isinstance(Prompt("x").tools, tuple) and ToolDefinition("a", "b").name == "a"
