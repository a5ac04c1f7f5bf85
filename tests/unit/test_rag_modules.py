"""Modular RAG pieces: Query, transformers, expander, retriever, joiners, augmenter; Document/SearchRequest/embeddings."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import numpy as np
import pytest

from chatclient import ChatClient, ContextKeys
from chatclient.messages import AssistantMessage, SystemMessage, UserMessage
from chatclient.rag import (
    CompressionQueryTransformer,
    ConcatenationDocumentJoiner,
    ContextualQueryAugmenter,
    Document,
    EmbeddingModel,
    HashingEmbeddingModel,
    MultiQueryExpander,
    Query,
    ReciprocalRankFusionJoiner,
    RewriteQueryTransformer,
    SearchRequest,
    SimpleVectorStore,
    TranslationQueryTransformer,
    VectorStoreDocumentRetriever,
)
from chatclient.rag.filters import F
from chatclient.testing import ScriptedChatModel

# -- Document, SearchRequest, embeddings ----------------------------------------------------------


def test_document_defaults_and_immutability() -> None:
    a, b = Document("x"), Document("x")
    assert a.id != b.id and len(a.id) == 36 and a.score is None and dict(a.metadata) == {}
    md = {"k": 1}
    d = Document("t", md, id="i")
    md["k"] = 2
    assert d.metadata["k"] == 1
    with pytest.raises(AttributeError):
        d.text = "y"  # type: ignore[misc]
    assert d.with_score(0.5).score == 0.5 and d.with_score(0.5).id == "i"
    assert Document.from_dict(d.to_dict()) == d
    assert len({d, d.copy()}) == 1
    with pytest.raises(TypeError):
        Document(None)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        Document("t", {"": 1})


def test_search_request_defaults_and_validation() -> None:
    r = SearchRequest()
    assert (r.query, r.top_k, r.similarity_threshold, r.filter_expression) == ("", 4, 0.0, None)
    assert SearchRequest(filter_expression="a == 1").filter_expression == F.eq("a", 1)
    assert SearchRequest(filter_expression="  ").filter_expression is None
    assert SearchRequest(top_k=0).top_k == 0
    for bad in (dict(top_k=-1), dict(similarity_threshold=1.5), dict(similarity_threshold=-0.1), dict(query=None)):
        with pytest.raises(ValueError):
            SearchRequest(**bad)  # type: ignore[arg-type]
    r2 = r.copy(query="q", filter_expression=F.eq("a", 1))
    assert r2 == SearchRequest("q", filter_expression="a == 1") and r.query == ""
    with pytest.raises(AttributeError):
        r.top_k = 3  # type: ignore[misc]


def test_hashing_embedding_model() -> None:
    m = HashingEmbeddingModel(dimensions=64)
    assert isinstance(m, EmbeddingModel)
    v = m.embed(["red apple", "green apple", "fast car", ""])
    assert v.shape == (4, 64) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v[:3], axis=1), 1.0) and not v[3].any()
    assert float(v[0] @ v[1]) > float(v[0] @ v[2])
    assert np.array_equal(asyncio.run(m.aembed(["red apple"]))[0], v[0])
    with pytest.raises(TypeError):
        m.embed("not a list")


def test_importing_chatclient_does_not_load_numpy() -> None:
    code = "import sys, chatclient, chatclient.rag, chatclient.rag.filters; print('numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# -- Query -----------------------------------------------------------------------------------------


def test_query_value_semantics() -> None:
    q = Query("hello", [UserMessage("hi")], {"k": 1})
    assert q == Query("hello", (UserMessage("hi"),), {"k": 1}) and hash(q) == hash(Query("hello"))
    assert q.mutate(text="bye").history == q.history
    with pytest.raises(ValueError):
        Query("  ")


# -- transformers and expander ---------------------------------------------------------------------


def test_rewrite_transformer_prompt_and_result() -> None:
    model = ScriptedChatModel(["  capital of Denmark  ", "   "])
    t = RewriteQueryTransformer(ChatClient.create(model), target_search_system="web search engine")
    q = Query("so, like, what's the capital city of denmark??", context={"x": 1})
    out = t.transform(q)
    assert out.text == "capital of Denmark" and out.context == q.context
    prompt = model.prompts[0].user_message.text
    assert "web search engine" in prompt and "what's the capital city of denmark??" in prompt
    assert t.transform(q) is q  # blank answer -> unchanged


def test_compression_transformer_formats_history() -> None:
    model = ScriptedChatModel(["What is the second largest city in Denmark?"])
    t = CompressionQueryTransformer(ChatClient.builder(model))
    q = Query(
        "And its second largest city?",
        history=[SystemMessage("sys"), UserMessage("What is the capital of Denmark?"), AssistantMessage("Copenhagen.")],
    )
    out = asyncio.run(t.atransform(q))
    assert out.text == "What is the second largest city in Denmark?"
    prompt = model.prompts[0].user_message.text
    assert "USER: What is the capital of Denmark?\nASSISTANT: Copenhagen." in prompt and "sys" not in prompt


def test_translation_transformer_and_template_checks() -> None:
    model = ScriptedChatModel(["Hello"])
    t = TranslationQueryTransformer(ChatClient.create(model), target_language="english")
    assert t.transform(Query("Hallo")).text == "Hello"
    assert "english" in model.prompts[0].user_message.text
    with pytest.raises(ValueError):
        TranslationQueryTransformer(ChatClient.create(model), target_language=" ")
    with pytest.raises(ValueError, match="target_language"):
        TranslationQueryTransformer(ChatClient.create(model), target_language="fr", template="{{ query }}")
    with pytest.raises(TypeError):
        RewriteQueryTransformer(model)  # type: ignore[arg-type]


def test_multi_query_expander() -> None:
    model = ScriptedChatModel(["v1\nv2\nv3", "v1\nv2", "v1\n\nv3", "a\nb\nc"])
    e = MultiQueryExpander(ChatClient.create(model))
    q = Query("orig", context={"c": 1})
    variants = e.expand(q)
    assert [x.text for x in variants] == ["orig", "v1", "v2", "v3"]
    assert all(x.context == q.context for x in variants)
    assert "3" in model.prompts[0].user_message.text and "orig" in model.prompts[0].user_message.text
    assert e.expand(q) == [q]  # two lines for three queries: only the original
    # a blank line inside a correctly counted answer is dropped
    assert [x.text for x in e.expand(q)] == ["orig", "v1", "v3"]
    no_orig = MultiQueryExpander(ChatClient.create(model), include_original=False)
    assert [x.text for x in asyncio.run(no_orig.aexpand(q))] == ["a", "b", "c"]
    with pytest.raises(ValueError):
        MultiQueryExpander(ChatClient.create(model), number_of_queries=0)


def test_multi_query_expander_miscount_returns_original() -> None:
    model = ScriptedChatModel(["only\ntwo"])
    q = Query("orig")
    assert MultiQueryExpander(ChatClient.create(model)).expand(q) == [q]


# -- retriever -------------------------------------------------------------------------------------


@pytest.fixture
def store() -> SimpleVectorStore:
    s = SimpleVectorStore(HashingEmbeddingModel())
    s.add(
        [
            Document("apple pie recipe", {"tenant": "a"}, id="a1"),
            Document("apple tart recipe", {"tenant": "b"}, id="b1"),
            Document("pear recipe", {"tenant": "b"}, id="b2"),
        ]
    )
    return s


def test_retriever_filters_static_callable_and_context(store: SimpleVectorStore) -> None:
    tenant = {"id": "a"}
    r = VectorStoreDocumentRetriever(store, top_k=5, filter_expression=lambda: F.eq("tenant", tenant["id"]))
    assert [d.id for d in r.retrieve(Query("apple"))] == ["a1"]
    tenant["id"] = "b"
    assert {d.id for d in r.retrieve(Query("apple"))} == {"b1", "b2"}
    ctx = Query("apple", context={ContextKeys.FILTER_EXPRESSION: "tenant == 'a'"})
    assert [d.id for d in r.retrieve(ctx)] == ["a1"]
    spring_key = Query("apple", context={VectorStoreDocumentRetriever.FILTER_EXPRESSION: F.eq("tenant", "a")})
    assert [d.id for d in asyncio.run(r.aretrieve(spring_key))] == ["a1"]
    static = VectorStoreDocumentRetriever(store, filter_expression="tenant == 'b'", similarity_threshold=0.3)
    assert [d.id for d in static.retrieve(Query("apple tart"))] == ["b1"]
    with pytest.raises(ValueError):
        VectorStoreDocumentRetriever(store, top_k=0)


# -- joiners ---------------------------------------------------------------------------------------


def d(i: str, score: float | None = None) -> Document:
    return Document(i, id=i, score=score)


def test_concatenation_joiner_dedupes_first_wins_and_sorts() -> None:
    joined = ConcatenationDocumentJoiner().join(
        {Query("q1"): [[d("a", 0.5), d("b", 0.9)]], Query("q2"): [[Document("b-again", id="b", score=0.1), d("c")]]}
    )
    assert [(x.id, x.text, x.score) for x in joined] == [("b", "b", 0.9), ("a", "a", 0.5), ("c", "c", None)]


def test_rrf_joiner_two_stages_and_ties() -> None:
    # LangChain4j's reference example: {home:[[cat,dog,hamster],[cat,parrot]], domestic:[[dog,horse],[cat]]}
    joined = ReciprocalRankFusionJoiner().join(
        {
            Query("home"): [[d("cat"), d("dog"), d("hamster")], [d("cat"), d("parrot")]],
            Query("domestic"): [[d("dog"), d("horse")], [d("cat")]],
        }
    )
    assert [x.id for x in joined] == ["cat", "dog", "parrot", "horse", "hamster"]
    assert joined[0].score == pytest.approx(1 / 61 + 1 / 62)  # 1st for 'home', 2nd for 'domestic'
    with pytest.raises(ValueError):
        ReciprocalRankFusionJoiner(k=0)


# -- augmenter -------------------------------------------------------------------------------------


def test_contextual_augmenter() -> None:
    aug = ContextualQueryAugmenter()
    q = Query("What is X?")
    out = aug.augment(q, [Document("X is {{ y }}."), Document("X rocks.")])
    assert out.text == (
        "Context:\nX is {{ y }}.\nX rocks.\n\nQuestion: What is X?\n\n"
        "Answer the question in one or two sentences, using only the context above."
    )
    assert "outside the knowledge base" in aug.augment(q, []).text
    assert ContextualQueryAugmenter(allow_empty_context=True).augment(q, []) is q
    custom = ContextualQueryAugmenter(
        template="{{ context }}|{{ query }}", document_formatter=lambda ds: "#".join(x.id for x in ds)
    )
    assert custom.augment(q, [d("a"), d("b")]).text == "a#b|What is X?"
    with pytest.raises(ValueError, match="context"):
        ContextualQueryAugmenter(template="{{ query }}")


def test_local_embedding_model_names_the_extra_when_package_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    from chatclient.rag import LocalEmbeddingModel, local_embedding

    # the package is looked up by import name; point it at a name that does not exist
    monkeypatch.setattr(local_embedding, "_PACKAGE", "no_such_minilm_package_xyz")
    model = LocalEmbeddingModel()  # construction is lazy: nothing is loaded yet
    with pytest.raises(ImportError, match=r"'local' extra"):
        model.embed(["hello"])
    with pytest.raises(ValueError):
        LocalEmbeddingModel(max_seq_length=2)
