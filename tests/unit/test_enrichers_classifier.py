"""Keyword and summary metadata enrichers (through a ChatClient) and the embedding text classifier."""

from __future__ import annotations

from enum import Enum
from typing import Any

import numpy as np
import pytest

from chatclient import ChatClient
from chatclient.rag import Document, HashingEmbeddingModel
from chatclient.rag.classification import EmbeddingModelTextClassifier, ScoredLabel
from chatclient.rag.enrichers import (
    EXCERPT_KEYWORDS,
    NEXT_SECTION_SUMMARY,
    PREV_SECTION_SUMMARY,
    SECTION_SUMMARY,
    KeywordMetadataEnricher,
    SummaryMetadataEnricher,
    SummaryType,
)
from chatclient.rag.local_embedding import LocalEmbeddingModel
from chatclient.testing import ScriptedChatModel

DOCS = [
    Document("Oslo is the capital of Norway.", {"source": "a"}),
    Document("Bergen is known for rain.", {"source": "b"}),
    Document("Tromso sees the northern lights.", {"source": "c"}),
]


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_keywords_are_asked_per_document_and_stored(mode: str) -> None:
    model = ScriptedChatModel(["oslo, capital ,norway,", "bergen, rain", "tromso, aurora"])
    enricher = KeywordMetadataEnricher(ChatClient.builder(model), keyword_count=3)
    out = enricher.transform(DOCS) if mode == "sync" else await enricher.atransform(DOCS)
    assert [d.metadata[EXCERPT_KEYWORDS] for d in out] == ["oslo, capital, norway", "bergen, rain", "tromso, aurora"]
    assert out[0].metadata["source"] == "a" and out[0].id == DOCS[0].id and out[0].text == DOCS[0].text
    asked = model.prompts[0].messages[-1].text or ""
    assert "Oslo is the capital of Norway." in asked and "3 distinct keywords" in asked


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_summaries_previous_current_next(mode: str) -> None:
    model = ScriptedChatModel(["S1", "S2", "S3"])
    enricher = SummaryMetadataEnricher(
        ChatClient.create(model), [SummaryType.PREVIOUS, SummaryType.CURRENT, SummaryType.NEXT]
    )
    out = enricher.transform(DOCS) if mode == "sync" else await enricher.atransform(DOCS)
    first, middle, last = (dict(d.metadata) for d in out)
    assert first == {"source": "a", SECTION_SUMMARY: "S1", NEXT_SECTION_SUMMARY: "S2"}
    assert middle == {"source": "b", PREV_SECTION_SUMMARY: "S1", SECTION_SUMMARY: "S2", NEXT_SECTION_SUMMARY: "S3"}
    assert last == {"source": "c", PREV_SECTION_SUMMARY: "S2", SECTION_SUMMARY: "S3"}
    assert first[SECTION_SUMMARY] == middle[PREV_SECTION_SUMMARY]
    assert len(model.prompts) == 3  # one call per document, whatever the summary types


def test_custom_templates_and_bad_input() -> None:
    model = ScriptedChatModel(["k1, k2"])
    enricher = KeywordMetadataEnricher(ChatClient.create(model), template="Keywords for: {{ document }}")
    enricher([Document("text")])
    assert model.prompts[0].messages[-1].text == "Keywords for: text"
    client = ChatClient.create(ScriptedChatModel([]))
    with pytest.raises(ValueError, match="keyword_count"):
        KeywordMetadataEnricher(client, keyword_count=0)
    with pytest.raises(ValueError, match=r"placeholders must be present.*document"):
        KeywordMetadataEnricher(client, template="no placeholder")
    with pytest.raises(ValueError, match="at least one"):
        SummaryMetadataEnricher(client, [])
    with pytest.raises(ValueError, match="'sideways' is not a valid SummaryType"):
        SummaryMetadataEnricher(client, ["sideways"])
    with pytest.raises(TypeError, match="not a single one"):
        KeywordMetadataEnricher(client).transform(Document("x"))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="take Documents, not str"):
        SummaryMetadataEnricher(client).transform(["x"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="ChatClient"):
        KeywordMetadataEnricher(object())  # type: ignore[arg-type]


def test_stored_answers_are_bounded() -> None:
    # A model that runs on (no max_tokens on a local model, say) must not fill every row's metadata.
    runaway_keywords = ", ".join(f"keyword{i}" for i in range(5_000))
    runaway_summary = "word " * 20_000
    client = ChatClient.create(ScriptedChatModel([runaway_keywords, runaway_summary, "short one"]))
    (doc,) = KeywordMetadataEnricher(client, max_chars=100).transform([Document("text")])
    kept = doc.metadata[EXCERPT_KEYWORDS]
    assert len(kept) <= 100 and kept.startswith("keyword0, keyword1") and kept.split(", ")[-1].startswith("keyword")
    summaries = SummaryMetadataEnricher(client, [SummaryType.CURRENT, SummaryType.NEXT])
    first, second = summaries.transform([Document("a"), Document("b")])
    assert second.metadata[SECTION_SUMMARY] == "short one" and NEXT_SECTION_SUMMARY not in second.metadata
    cut = first.metadata[SECTION_SUMMARY]
    assert len(cut) <= 4_000 and cut.endswith("word…") and first.metadata[NEXT_SECTION_SUMMARY] == "short one"
    with pytest.raises(ValueError, match="max_chars"):
        SummaryMetadataEnricher(client, max_chars=0)


def test_empty_answer_gives_empty_keywords() -> None:
    out = KeywordMetadataEnricher(ChatClient.create(ScriptedChatModel([""]))).transform([Document("x")])
    assert out[0].metadata[EXCERPT_KEYWORDS] == ""


# -- classifier -------------------------------------------------------------------------------------


class Sentiment(Enum):
    POSITIVE = "positive"
    NEUTRAL = "neutral"
    NEGATIVE = "negative"


EXAMPLES = {
    Sentiment.POSITIVE: ["This is great!", "I love it, wonderful experience.", "Fantastic, thank you so much!"],
    Sentiment.NEUTRAL: ["The parcel arrived on Tuesday.", "It is a blue box.", "The meeting is at noon."],
    Sentiment.NEGATIVE: ["This is awful.", "I hate it, terrible service.", "Worst purchase ever, very disappointed."],
}


@pytest.fixture(scope="module")
def local_model() -> LocalEmbeddingModel:
    return LocalEmbeddingModel()


def test_local_embeddings_classify_sentiment(local_model: LocalEmbeddingModel) -> None:
    classifier = EmbeddingModelTextClassifier(local_model, EXAMPLES)
    assert classifier.classify("I really love this, it is wonderful") == [Sentiment.POSITIVE]
    assert classifier.classify("Horrible, I am so disappointed with this") == [Sentiment.NEGATIVE]
    scored = EmbeddingModelTextClassifier(local_model, EXAMPLES, max_results=3).classify_with_scores("Terrible.")
    assert scored[0].label is Sentiment.NEGATIVE and len(scored) == 3
    assert all(0.0 <= s.score <= 1.0 for s in scored) and scored == sorted(scored, key=lambda s: -s.score)


async def test_async_classify(local_model: LocalEmbeddingModel) -> None:
    classifier = EmbeddingModelTextClassifier(local_model, EXAMPLES)
    assert await classifier.aclassify("Thank you, this is fantastic") == [Sentiment.POSITIVE]


class Fixed:
    """Embeds known texts to fixed vectors, to check the score formula exactly."""

    dimensions = 2
    VECTORS = {"a1": (1.0, 0.0), "a2": (0.0, 1.0), "b1": (-1.0, 0.0), "q": (1.0, 0.0)}

    def embed(self, texts: Any) -> Any:
        return np.asarray([self.VECTORS[t] for t in texts], dtype=np.float32)


def test_score_is_the_blend_of_mean_and_max_and_min_score_filters() -> None:
    classifier = EmbeddingModelTextClassifier(Fixed(), {"A": ["a1", "a2"], "B": ["b1"]}, max_results=2)
    # A: relevances 1.0 (a1) and 0.5 (a2): 0.5 * 0.75 + 0.5 * 1.0 = 0.875; B: relevance 0.0.
    assert classifier.classify_with_scores("q") == [ScoredLabel("A", 0.875), ScoredLabel("B", 0.0)]
    only_max = EmbeddingModelTextClassifier(Fixed(), {"A": ["a1", "a2"], "B": ["b1"]}, mean_to_max_score_ratio=0.0)
    assert only_max.classify_with_scores("q") == [ScoredLabel("A", 1.0)]
    strict = EmbeddingModelTextClassifier(Fixed(), {"A": ["a1", "a2"], "B": ["b1"]}, max_results=2, min_score=0.9)
    assert strict.classify("q") == []


def test_classifier_bad_input() -> None:
    model = HashingEmbeddingModel(32)
    with pytest.raises(ValueError, match="at least one label"):
        EmbeddingModelTextClassifier(model, {})
    with pytest.raises(ValueError, match="non-empty list of example texts"):
        EmbeddingModelTextClassifier(model, {"A": "just a string"})
    with pytest.raises(ValueError, match="non-empty list of example texts"):
        EmbeddingModelTextClassifier(model, {"A": []})
    with pytest.raises(ValueError, match="not non-empty text"):
        EmbeddingModelTextClassifier(model, {"A": ["ok", " "]})
    with pytest.raises(ValueError, match="max_results"):
        EmbeddingModelTextClassifier(model, {"A": ["x"]}, max_results=0)
    with pytest.raises(ValueError, match="min_score must be a number between 0 and 1"):
        EmbeddingModelTextClassifier(model, {"A": ["x"]}, min_score=1.5)
    with pytest.raises(ValueError, match="mean_to_max_score_ratio"):
        EmbeddingModelTextClassifier(model, {"A": ["x"]}, mean_to_max_score_ratio=-0.1)
    with pytest.raises(TypeError, match="must have embed"):
        EmbeddingModelTextClassifier(object(), {"A": ["x"]})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="non-empty text"):
        EmbeddingModelTextClassifier(model, {"A": ["x"]}).classify("")
