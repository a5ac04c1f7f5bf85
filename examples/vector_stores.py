"""One corpus, several vector stores, the same answers: in memory, SQLite, Chroma and (optionally) pgvector.

    python examples/vector_stores.py

Indexes a small product FAQ in every store available here, runs the same filtered searches on each
and checks they return the same documents (one filter language for all stores), then answers a
question with ``QuestionAnswerAdvisor`` over the Chroma store. Chroma runs in-process (``pip install
'chatclient[chroma]'``; skipped without it). Set ``CHATCLIENT_PGVECTOR_DSN`` to a PostgreSQL with
pgvector (``pip install 'chatclient[pgvector]'``) to add ``PgVectorStore`` to the comparison; the
example then creates and drops a table ``example_vector_stores``.

Offline (the default) the answer comes from ``FunctionChatModel`` quoting the best passage it was
given; set ``OPENAI_API_KEY`` or ``CHATCLIENT_BASE_URL`` for a real model.
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
from pathlib import Path

from _support import make_model

from advisors import QuestionAnswerAdvisor
from chatclient import ChatClient, Prompt
from chatclient.rag import Document, HashingEmbeddingModel, SearchRequest, SimpleVectorStore, SqliteVectorStore
from chatclient.rag.stores.base import BaseVectorStore
from chatclient.testing import FunctionChatModel

FAQ = [
    Document("The kettle boils one litre in about three minutes.", {"product": "kettle", "year": 2024}, id="k-boil"),
    Document(
        "Descale the kettle every four weeks with citric acid.", {"product": "kettle", "year": 2023}, id="k-scale"
    ),
    Document("The kettle switches itself off when it runs dry.", {"product": "kettle", "year": 2022}, id="k-dry"),
    Document(
        "The toaster has six browning levels and a bagel mode.", {"product": "toaster", "year": 2024}, id="t-level"
    ),
    Document("Empty the toaster crumb tray once a week.", {"product": "toaster", "year": 2021}, id="t-crumb"),
    Document(
        "The old toaster model is no longer sold.",
        {"product": "toaster", "year": 2019, "discontinued": True},
        id="t-old",
    ),
]

SEARCHES = [
    ("how many minutes to boil a litre", "product == 'kettle'"),
    ("cleaning and maintenance", "year >= 2022 AND NOT (product == 'kettle')"),
    ("which models can I buy", "discontinued IS NULL AND year IN [2019, 2021, 2024]"),
]

def context_of(text: str) -> str:
    """The retrieved text the advisor put between "Context:" and "Question:" in the user message."""
    if "Context:\n" not in text:
        return ""
    return text.split("Context:\n", 1)[1].split("\n\nQuestion:", 1)[0].strip()


def quote_best_passage(prompt: Prompt) -> str:
    """Stands in for a model: answers with the first passage the advisor put into the prompt."""
    context = context_of(prompt.user_message.text)
    return f"From the FAQ: {context.splitlines()[0]}" if context else "I have no passage to answer from."


def stores(folder: Path) -> dict[str, BaseVectorStore]:
    model = HashingEmbeddingModel(dimensions=512, char_ngrams=True)
    found: dict[str, BaseVectorStore] = {
        "memory": SimpleVectorStore(model),
        "sqlite": SqliteVectorStore(folder / "faq.db", model),
    }
    if importlib.util.find_spec("chromadb") is not None:
        from chatclient.rag import ChromaVectorStore

        found["chroma"] = ChromaVectorStore(model, collection="faq")  # in-process, telemetry off
    else:
        print("chroma: skipped (pip install 'chatclient[chroma]')")
    dsn = os.environ.get("CHATCLIENT_PGVECTOR_DSN")
    if dsn:
        from chatclient.rag import PgVectorStore

        found["pgvector"] = PgVectorStore(dsn, model, table="example_vector_stores")
    else:
        print("pgvector: skipped (set CHATCLIENT_PGVECTOR_DSN to a PostgreSQL with pgvector)")
    return found


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        by_name = stores(Path(tmp))
        for store in by_name.values():
            store.add(FAQ)
        print(f"stores: {', '.join(by_name)}")
        for query, flt in SEARCHES:
            results = {
                name: [d.id for d in s.similarity_search(SearchRequest(query, top_k=3, filter_expression=flt))]
                for name, s in by_name.items()
            }
            first = next(iter(results.values()))
            verdict = "all stores agree" if all(r == first for r in results.values()) else f"stores differ: {results}"
            print(f"{flt}\n   -> {first} ({verdict})")

        store = by_name.get("chroma", by_name["memory"])
        client = ChatClient.create(make_model(FunctionChatModel(quote_best_passage)))
        qa = QuestionAnswerAdvisor(store, SearchRequest(top_k=1, filter_expression="product == 'kettle'"))
        answer = client.prompt("How often should I descale it?").advisors(qa).call().content()
        print(f"Q: How often should I descale it?\nA: {answer}")

        pg = by_name.get("pgvector")
        if pg is not None:
            pg.drop()  # type: ignore[attr-defined]
            pg.close()  # type: ignore[attr-defined]
        sqlite = by_name["sqlite"]
        assert isinstance(sqlite, SqliteVectorStore)
        sqlite.close()


if __name__ == "__main__":
    main()
