"""Stream events on the real local model (SmolLM2, in-process)."""

from __future__ import annotations

from typing import Any

import pytest

from advisors import QuestionAnswerAdvisor
from chatclient import ChatClient, ChatOptions
from chatclient.events import DocumentsRetrieved, Finished, TextDelta, UsageUpdate
from chatclient.rag import Document, HashingEmbeddingModel, SearchRequest, SimpleVectorStore

pytestmark = pytest.mark.e2e

OPTIONS = ChatOptions(temperature=0.0, seed=42, max_tokens=64)


def test_events_on_the_embedded_model(default_model: Any) -> None:
    store = SimpleVectorStore(HashingEmbeddingModel(dimensions=256, char_ngrams=True))
    store.add([Document("The Riverside Library opens at 9:00 on weekdays.", id="hours")])
    qa = QuestionAnswerAdvisor(store, SearchRequest(top_k=1))
    spec = ChatClient.create(default_model).prompt("When does the library open?").options(OPTIONS).advisors(qa)
    events = list(spec.stream().events())
    kinds = [type(e).__name__ for e in events]
    assert isinstance(events[0], DocumentsRetrieved) and events[0].documents[0].id == "hours"
    assert kinds.count("TextDelta") >= 3, kinds  # the answer arrived in pieces
    assert isinstance(events[-1], Finished) and events[-1].response is not None
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text == events[-1].response.text and text.strip()
    usage = [e for e in events if isinstance(e, UsageUpdate)]
    assert usage and usage[-1].usage.completion_tokens > 0
