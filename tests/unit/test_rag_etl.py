"""ETL: readers, TokenTextSplitter, DocumentPipeline into a vector store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chatclient.rag import (
    Document,
    DocumentPipeline,
    HashingEmbeddingModel,
    JsonReader,
    MarkdownReader,
    SearchRequest,
    SimpleVectorStore,
    TextReader,
    TokenTextSplitter,
)
from chatclient.rag.etl import SimpleTokenEncoding, resolve_pointer


def test_text_reader(tmp_path: Path) -> None:
    p = tmp_path / "notes.txt"
    p.write_text("héllo\nworld", encoding="utf-8")
    [doc] = TextReader(p, metadata={"team": "x"}).read()
    assert doc.text == "héllo\nworld"
    assert dict(doc.metadata) == {"charset": "utf-8", "source": "notes.txt", "team": "x"}
    p.write_bytes("café".encode("latin-1"))
    assert TextReader(p, encoding="latin-1")()[0].text == "café"


@pytest.fixture
def bikes(tmp_path: Path) -> Path:
    p = tmp_path / "bikes.json"
    data = {
        "shop": {"name": "Velo"},
        "bikes": [
            {"name": "Swift", "price": 900, "description": "A light road bike.", "tags": ["road"]},
            {"name": "Trail", "price": 1200, "description": "A sturdy mountain bike."},
        ],
        "a/b": {"~x": [{"name": "deep"}]},
    }
    p.write_text(json.dumps(data))
    return p


def test_json_reader_keys_metadata_and_pointer(bikes: Path) -> None:
    reader = JsonReader(bikes, ["name", "description", "missing"], metadata_generator=lambda o: {"price": o["price"]})
    docs = reader.read("/bikes")
    assert [x.text for x in docs] == [
        "name: Swift\ndescription: A light road bike.",
        "name: Trail\ndescription: A sturdy mountain bike.",
    ]
    assert [x.metadata["price"] for x in docs] == [900, 1200]
    [shop] = JsonReader(bikes).read("/shop")
    assert json.loads(shop.text) == {"name": "Velo"} and dict(shop.metadata) == {"source": bikes.name}
    assert [x.text for x in JsonReader(bikes, ["name"]).read("/a~1b/~0x")] == ["name: deep"]
    assert [x.text for x in JsonReader(bikes, ["name"]).read("/bikes/1")] == ["name: Trail"]
    [whole] = JsonReader(bikes).read()
    assert "Velo" in whole.text
    for bad in ("/nope", "bikes", "/bikes/7", "/bikes/01", "/shop/name/x"):
        with pytest.raises(ValueError):
            reader.read(bad)


def test_resolve_pointer_root() -> None:
    assert resolve_pointer({"a": 1}, "") == {"a": 1}


MARKDOWN = """# Guide
Intro line one
continues here.

Second paragraph.

```python
print("hi")
```

> A wise quote.

---

## Install
Run the installer.
"""


def test_markdown_reader_defaults(tmp_path: Path) -> None:
    p = tmp_path / "guide.md"
    p.write_text(MARKDOWN)
    docs = MarkdownReader(p, additional_metadata={"src": "guide"}).read()
    assert [(x.text, dict(x.metadata)) for x in docs] == [
        (
            "Intro line one continues here.\nSecond paragraph.",
            {"source": "guide.md", "category": "header_1", "title": "Guide", "src": "guide"},
        ),
        ('print("hi")', {"source": "guide.md", "category": "code_block", "lang": "python", "src": "guide"}),
        ("A wise quote.", {"source": "guide.md", "category": "blockquote", "src": "guide"}),
        ("Run the installer.", {"source": "guide.md", "category": "header_2", "title": "Install", "src": "guide"}),
    ]


def test_markdown_and_json_readers_name_their_file_as_source(tmp_path: Path) -> None:
    # Printed sources were "?" because only TextReader set it; every file reader now does.
    md = tmp_path / "kettle.md"
    md.write_text("# Care\nDescale monthly.\n")
    assert [d.metadata["source"] for d in MarkdownReader(md).read()] == ["kettle.md"]
    # what the caller gives still wins
    assert MarkdownReader(md, additional_metadata={"source": "manual"}).read()[0].metadata["source"] == "manual"
    js = tmp_path / "items.json"
    js.write_text('[{"a": 1}, {"a": 2}]')
    assert [d.metadata["source"] for d in JsonReader(js).read()] == ["items.json", "items.json"]
    generated = JsonReader(js, metadata_generator=lambda o: {"source": f"row{o['a']}"}).read()
    assert [d.metadata["source"] for d in generated] == ["row1", "row2"]


def test_default_encoding_never_reaches_the_network(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Offline, tiktoken's first use tries to download its BPE file (a DNS error was printed before
    # the fallback). With an empty cache the splitter must fall back without opening a socket.
    import socket

    import chatclient.rag.etl.splitter as splitter

    def no_network(*args: object, **kwargs: object) -> None:
        raise AssertionError("TokenTextSplitter tried the network")

    monkeypatch.setattr(socket, "getaddrinfo", no_network)
    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(splitter, "_default_encoding", None)
    assert isinstance(splitter.default_encoding(), SimpleTokenEncoding)
    assert TokenTextSplitter(chunk_size=5).split_text("One two three four five six seven.")


def test_markdown_reader_options() -> None:
    reader = MarkdownReader(
        "unused", include_code_block=True, include_blockquote=True, horizontal_rule_creates_document=True
    )
    docs = reader.parse(MARKDOWN + "\n---\nAfter the rule.\n")
    assert docs[0].text == 'Intro line one continues here.\nSecond paragraph.\nprint("hi")\nA wise quote.'
    assert [x.text for x in docs[1:]] == ["Run the installer.", "After the rule."]


SENTENCES = " ".join(f"Sentence number {i} talks about topic {i % 7}." for i in range(60))


def test_splitter_defaults() -> None:
    s = TokenTextSplitter()
    assert (s.chunk_size, s.min_chunk_size_chars, s.min_chunk_length_to_embed, s.max_num_chunks, s.keep_separator) == (
        800,
        350,
        5,
        10000,
        True,
    )
    assert s.punctuation_marks == (".", "?", "!", "\n")


def test_splitter_chunks_cut_at_sentence_ends() -> None:
    s = TokenTextSplitter(chunk_size=50, min_chunk_size_chars=20, encoding="simple")
    enc = SimpleTokenEncoding()
    chunks = s.split_text(SENTENCES)
    assert len(chunks) > 5
    assert all(len(enc.encode(c)) <= 50 for c in chunks)
    assert all(c.endswith(".") for c in chunks)
    assert " ".join(chunks) == SENTENCES  # nothing lost, nothing duplicated


def test_splitter_short_text_is_one_chunk_and_tiny_text_dropped() -> None:
    s = TokenTextSplitter(chunk_size=50, min_chunk_size_chars=5, encoding="simple")
    assert s.split_text("One. Two! Three? And a tail without an end") == ["One. Two! Three? And a tail without an end"]
    assert s.split_text("Hi.") == []  # not longer than min_chunk_length_to_embed
    assert s.split_text("   \n  ") == []


def test_splitter_separator_and_max_chunks() -> None:
    text = "Line one is here.\nLine two is here.\n" * 20
    kept = TokenTextSplitter(chunk_size=12, min_chunk_size_chars=5, encoding="simple").split_text(text)
    assert any("\n" in c for c in kept)
    flat = TokenTextSplitter(chunk_size=12, min_chunk_size_chars=5, keep_separator=False, encoding="simple").split_text(
        text
    )
    assert flat and not any("\n" in c for c in flat)
    limited = TokenTextSplitter(chunk_size=12, min_chunk_size_chars=5, max_num_chunks=3, encoding="simple").split_text(
        text
    )
    # three regular chunks plus the remainder as one final chunk
    assert len(limited) == 4 and len(limited[-1]) > len(limited[0])


def test_splitter_documents_keep_metadata() -> None:
    s = TokenTextSplitter(chunk_size=50, min_chunk_size_chars=20, encoding="simple")
    parent = Document(SENTENCES, {"source": "s.txt"}, id="p")
    chunks = s.split([parent])
    assert all(c.metadata["source"] == "s.txt" and c.metadata["parent_document_id"] == "p" for c in chunks)
    assert [c.metadata["chunk_index"] for c in chunks] == list(range(len(chunks)))
    assert {c.metadata["total_chunks"] for c in chunks} == {len(chunks)}
    assert len({c.id for c in chunks}) == len(chunks)
    with pytest.raises(ValueError):
        TokenTextSplitter(encoding="bpe")


def test_pipeline_reads_splits_and_writes(tmp_path: Path) -> None:
    p = tmp_path / "story.txt"
    p.write_text(SENTENCES + " The secret password is swordfish.")
    store = SimpleVectorStore(HashingEmbeddingModel())
    written = DocumentPipeline(
        TextReader(p), [TokenTextSplitter(chunk_size=40, min_chunk_size_chars=20, encoding="simple")], store
    ).run()
    assert len(written) > 3 and len(store) == len(written)
    hit = store.similarity_search(SearchRequest("secret password swordfish", top_k=1))[0]
    assert "swordfish" in hit.text and hit.metadata["source"] == "story.txt"


def test_pipeline_accepts_callables() -> None:
    out: list[Document] = []
    docs = DocumentPipeline(lambda: [Document("a"), Document("b")], [lambda ds: ds[:1]], out.extend).run()
    assert [x.text for x in docs] == ["a"] and out == docs
