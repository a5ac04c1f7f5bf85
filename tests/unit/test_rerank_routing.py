"""Rerankers (LLM listwise/pointwise, local embeddings) and the query router (rules and LLM)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from advisors import RetrievalAugmentationAdvisor
from chatclient import ChatClient, ContextKeys
from chatclient.errors import ModelConnectionError
from chatclient.messages import AssistantMessage, UserMessage
from chatclient.rag import (
    BM25DocumentRetriever,
    Document,
    DocumentPostProcessor,
    DocumentRetriever,
    EmbeddingReranker,
    LlmReranker,
    LocalEmbeddingModel,
    Query,
    QueryRouter,
    Route,
)
from chatclient.testing import FunctionChatModel, ScriptedChatModel

DOCS = [
    Document("The office opens at nine.", id="hours"),
    Document("Refunds are paid within 14 days of the return.", id="refund"),
    Document("Our mascot is a penguin.", id="mascot"),
    Document("Returned items must be unused.", id="returns"),
]
Q = Query("How long does a refund take?")


def ids(docs: list[Document]) -> list[str]:
    return [d.id for d in docs]


# -- EmbeddingReranker ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def minilm() -> LocalEmbeddingModel:
    return LocalEmbeddingModel()


def test_embedding_reranker_orders_by_meaning_and_sets_cosine_scores(minilm: LocalEmbeddingModel) -> None:
    reranker = EmbeddingReranker(minilm, top_n=2)
    assert isinstance(reranker, DocumentPostProcessor)
    out = reranker.process(Q, DOCS)
    assert ids(out) == ["refund", "returns"]
    assert 0 < (out[1].score or 0) < (out[0].score or 0) <= 1.0
    assert reranker.process(Q, []) == []
    strict = EmbeddingReranker(minilm, min_score=0.99)
    assert strict.process(Q, DOCS) == []


# -- LlmReranker ---------------------------------------------------------------------------------


def test_listwise_one_call_reorders_and_drops_unranked() -> None:
    model = ScriptedChatModel(['{"ranking": [2, 4, 2, 99]}'])
    reranker = LlmReranker(ChatClient.create(model))
    out = reranker.process(Q, DOCS)
    assert ids(out) == ["refund", "returns"]  # repeats and out-of-range numbers are ignored
    assert [d.score for d in out] == [1.0, 0.75]
    sent = model.last_prompt.user_message.text
    assert "[1] The office opens at nine." in sent and "[4] Returned items must be unused." in sent
    assert "How long does a refund take?" in sent
    assert reranker.calls == 1 and reranker.usage is not None and reranker.usage.total_tokens > 0


def test_listwise_bounds_the_cost_and_keeps_the_rest_in_order() -> None:
    model = ScriptedChatModel(['{"ranking": [2, 1]}'])
    long_docs = [Document("x" * 5000, id="long"), *DOCS]
    reranker = LlmReranker(ChatClient.create(model), max_documents=2, max_chars=100, keep_unranked=True, top_n=4)
    out = reranker.process(Q, long_docs)
    assert ids(out) == ["hours", "long", "refund", "mascot"]
    sent = model.last_prompt.user_message.text
    assert "x" * 100 + "…" in sent and "x" * 101 not in sent and "Refunds" not in sent


def test_pointwise_scores_each_document_and_filters() -> None:
    scores = {"nine": 1, "Refunds": 9, "penguin": 0, "unused": 6}

    def judge(prompt):  # type: ignore[no-untyped-def]
        text = prompt.user_message.text
        score = next(v for k, v in scores.items() if k in text)
        return f'{{"score": {score}}}'

    model = FunctionChatModel(judge)
    reranker = LlmReranker(ChatClient.create(model), mode="pointwise", min_score=5, max_concurrency=2)
    out = reranker.process(Q, DOCS)
    assert ids(out) == ["refund", "returns"] and [d.score for d in out] == [0.9, 0.6]
    assert reranker.calls == 4 and len(model.prompts) == 4


def test_model_failure_keeps_the_retrieval_order_or_raises(caplog: pytest.LogCaptureFixture) -> None:
    broken = ScriptedChatModel(["not json at all", ModelConnectionError("down")])
    reranker = LlmReranker(ChatClient.create(broken))
    with caplog.at_level(logging.WARNING):
        assert ids(reranker.process(Q, DOCS)) == ids(DOCS)
    assert "keeping the retrieval order" in caplog.text
    strict = LlmReranker(ChatClient.create(broken), on_error="raise")
    with pytest.raises(ModelConnectionError):
        strict.process(Q, DOCS)


def test_pointwise_failure_sorts_that_document_last() -> None:
    model = ScriptedChatModel(['{"score": 2}', "garbage", '{"score": 8}'])
    reranker = LlmReranker(ChatClient.create(model), mode="pointwise", max_concurrency=1)
    out = reranker.process(Q, DOCS[:3])
    assert ids(out) == ["mascot", "hours", "refund"] and out[2].score is None


def test_llm_reranker_validates_arguments() -> None:
    client = ChatClient.create(ScriptedChatModel())
    with pytest.raises(ValueError, match="mode"):
        LlmReranker(client, mode="pairwise")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="top_n"):
        LlmReranker(client, top_n=0)
    with pytest.raises(ValueError, match="placeholders"):
        LlmReranker(client, template="no variables here")


def test_reranker_as_a_post_processor_in_the_advisor() -> None:
    model = ScriptedChatModel(['{"ranking": [2]}', "Within 14 days."])
    client = ChatClient.create(model)
    advisor = RetrievalAugmentationAdvisor(
        document_retriever=Fixed(*DOCS), document_post_processors=[LlmReranker(client)]
    )
    response = client.prompt().user("How long does a refund take?").advisors(advisor).call().chat_client_response()
    assert ids(response.context[ContextKeys.DOCUMENT_CONTEXT]) == ["refund"]
    assert "Refunds are paid within 14 days" in model.last_prompt.user_message.text
    assert "office" not in model.last_prompt.user_message.text


# -- QueryRouter ---------------------------------------------------------------------------------


class Fixed:
    def __init__(self, *docs: Document) -> None:
        self.docs = list(docs)
        self.calls = 0

    def retrieve(self, query: Query) -> list[Document]:
        self.calls += 1
        return list(self.docs)


def test_rule_based_routing_picks_matching_routes_and_fuses() -> None:
    billing, products, general = Fixed(DOCS[1], DOCS[3]), Fixed(DOCS[2]), Fixed(DOCS[0])
    router = QueryRouter(
        [
            Route(billing, "billing", when=r"\b(refund|invoice)\b", name="billing"),
            Route(products, "products", when=lambda q: "mascot" in q.text.lower(), name="products"),
            Route(general, "everything else", name="general"),
        ]
    )
    assert isinstance(router, DocumentRetriever)
    assert ids(router.retrieve(Q)) == ["refund", "returns"] and router.last_routes == ("billing",)
    both = router.retrieve(Query("Refund for the MASCOT plush?"))
    assert set(ids(both)) == {"refund", "returns", "mascot"} and router.last_routes == ("billing", "products")
    assert ids(router.retrieve(Query("hello"))) == ["hours"] and router.last_routes == ("general",)
    assert (billing.calls, products.calls, general.calls) == (2, 1, 1)


def test_rule_based_fallbacks() -> None:
    a, b = Fixed(DOCS[0]), Fixed(DOCS[1])
    routes = [Route(a, when="alpha"), Route(b, when="beta")]
    assert QueryRouter(routes).retrieve(Query("gamma")) == []  # no defaults: nothing
    assert set(ids(QueryRouter(routes, fallback="all").retrieve(Query("gamma")))) == {"hours", "refund"}
    assert QueryRouter(routes, fallback="none", top_k=1).retrieve(Query("alpha beta")) == [DOCS[0].with_score(1 / 61)]


def test_llm_routing_uses_descriptions_and_history() -> None:
    docs_r, tickets_r = Fixed(DOCS[0]), Fixed(DOCS[1])
    model = ScriptedChatModel(['{"sources": [2]}', '{"sources": []}'])
    router = QueryRouter(
        [Route(docs_r, "product manuals"), Route(tickets_r, "past support tickets")],
        chat_client=ChatClient.create(model),
    )
    q = Query("and what happened last time?", history=[UserMessage("my printer broke"), AssistantMessage("Sorry!")])
    assert ids(router.retrieve(q)) == ["refund"] and router.last_routes == ("route2",)
    sent = model.last_prompt.user_message.text
    assert "1: product manuals" in sent and "2: past support tickets" in sent and "my printer broke" in sent
    assert router.retrieve(Query("Hi!")) == [] and docs_r.calls == 0  # an empty choice: no retrieval
    assert router.usage is not None and router.usage.total_tokens > 0


def test_llm_routing_failure_falls_back(caplog: pytest.LogCaptureFixture) -> None:
    a, b = Fixed(DOCS[0]), Fixed(DOCS[1])
    model = ScriptedChatModel([ModelConnectionError("down"), '{"sources": [7]}'])
    router = QueryRouter([Route(a, "a"), Route(b, "b")], chat_client=ChatClient.create(model), fallback="all")
    with caplog.at_level(logging.WARNING):
        assert set(ids(router.retrieve(Q))) == {"hours", "refund"}
        assert len(router.retrieve(Q)) == 2
    assert "using fallback='all'" in caplog.text
    with pytest.raises(ValueError, match="description"):
        QueryRouter([Route(a)], chat_client=ChatClient.create(model))


def test_router_async_and_validation() -> None:
    router = QueryRouter([Route(Fixed(DOCS[0]), when="x"), Route(BM25DocumentRetriever(DOCS), when="refund")])
    assert ids(asyncio.run(router.aretrieve(Q)))[0] == "refund"
    with pytest.raises(ValueError, match="routes"):
        QueryRouter([])
    with pytest.raises(TypeError, match="when"):
        Route(Fixed(), when=42)  # type: ignore[arg-type]
