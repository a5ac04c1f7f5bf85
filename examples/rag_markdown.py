"""RAG over a folder of Markdown: load, split and index the files, then answer from them.

    python examples/rag_markdown.py [folder]

Reads ``examples/data/kettle/*.md`` (or the folder given) with ``MarkdownReader`` (one document per
section), splits long sections with ``TokenTextSplitter``, indexes them in a ``SimpleVectorStore``
and answers questions with ``QuestionAnswerAdvisor``, which puts the best-matching sections into
the prompt. A metadata filter restricts one question to one file.

Offline (the default) it embeds with ``HashingEmbeddingModel`` over content words (a lexical
stand-in for a real embedding model: deterministic, instant, no download) and answers with
``FunctionChatModel`` quoting the best section it was given, so the output shows what retrieval found. Set ``OPENAI_API_KEY`` or ``CHATCLIENT_BASE_URL`` to answer with a real
model; the MiniLM embedding model is then used if the ``local`` extra is installed.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from _support import make_model, real_model_configured
from numpy.typing import NDArray

from advisors import QuestionAnswerAdvisor
from chatclient import ChatClient, ContextKeys, Prompt
from chatclient.rag import (
    Document,
    EmbeddingModel,
    HashingEmbeddingModel,
    MarkdownReader,
    SearchRequest,
    SimpleVectorStore,
    TokenTextSplitter,
)
from chatclient.testing import FunctionChatModel

DATA = Path(__file__).parent / "data" / "kettle"
def context_of(text: str) -> str:
    """The retrieved text the advisor put between "Context:" and "Question:" in the user message."""
    if "Context:\n" not in text:
        return ""
    return text.split("Context:\n", 1)[1].split("\n\nQuestion:", 1)[0].strip()


def quote_best_section(prompt: Prompt) -> str:
    """Stands in for a model: answers with the first line of the context the advisor supplied."""
    context = context_of(prompt.user_message.text)
    return f"According to the manual: {context.splitlines()[0]}" if context else "I have no documents to answer from."


STOP_WORDS = frozenset(
    {"a", "an", "and", "are", "at", "be", "by", "can", "do", "does", "for", "from", "how", "i", "in", "is", "it"}
    | {"its", "my", "of", "on", "or", "should", "the", "to", "what", "when", "which", "who", "why", "with", "you"}
)


class ContentWordEmbedding(HashingEmbeddingModel):
    """Word hashing without stop words, so "the" and "is" do not decide what is similar."""

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        kept = [" ".join(w for w in re.findall(r"\w+", t.lower()) if w not in STOP_WORDS) or t for t in texts]
        return super().embed(kept)


def embedding_model() -> EmbeddingModel:
    if real_model_configured():
        try:
            from chatclient.rag import LocalEmbeddingModel

            model = LocalEmbeddingModel()
            model.embed(["warm-up"])  # loads the weights now, or fails here if they are missing
            return model
        except Exception as exc:  # the local extra is optional
            print(f"(LocalEmbeddingModel unavailable: {type(exc).__name__}; using HashingEmbeddingModel)")
    return ContentWordEmbedding(dimensions=1024, char_ngrams=True)


def load(folder: Path) -> list[Document]:
    splitter = TokenTextSplitter(chunk_size=200, min_chunk_size_chars=50)
    documents: list[Document] = []
    for path in sorted(folder.glob("*.md")):
        sections = MarkdownReader(path).read()  # each section's metadata names its file ("source")
        documents.extend(splitter.transform(sections))
    return documents


def main() -> None:
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else DATA
    store = SimpleVectorStore(embedding_model())
    documents = load(folder)
    store.add(documents)
    print(f"indexed {len(documents)} sections from {len(list(folder.glob('*.md')))} files in {folder.name}/")

    client = ChatClient.create(make_model(FunctionChatModel(quote_best_section)))
    qa = QuestionAnswerAdvisor(store, SearchRequest(top_k=2))

    for question in (
        "How often should I descale the kettle?",
        "What temperature is best for green tea?",
        "How long is the warranty?",
    ):
        response = client.prompt(question).advisors(qa).call().chat_client_response()
        sources = [d.metadata.get("title") for d in response.context[ContextKeys.RETRIEVED_DOCUMENTS]]
        print(f"Q: {question}\nA: {response.chat_response.text if response.chat_response else None}")
        print(f"   sources: {sources}")

    # A metadata filter: only sections of warranty.md are searched for this question.
    filtered = (
        client.prompt("When can I reach support?")
        .advisors(qa, params={ContextKeys.FILTER_EXPRESSION: "source == 'warranty.md'"})
        .call()
        .chat_client_response()
    )
    files = {d.metadata.get("source") for d in filtered.context[ContextKeys.RETRIEVED_DOCUMENTS]}
    print(
        f"filtered: {filtered.chat_response.text if filtered.chat_response else None}\n   from files: {sorted(files)}"
    )


if __name__ == "__main__":
    main()
