"""PDF, HTML and directory readers: content, metadata, and bounded handling of hostile input."""

from __future__ import annotations

import importlib.util
import os
import time
from pathlib import Path

import pytest

from chatclient.errors import ChatClientError, DocumentReadError
from chatclient.rag import DirectoryReader, DocumentPipeline, HtmlReader, PdfReader

DATA = Path(__file__).resolve().parents[1] / "data" / "rag"
SAMPLE_PDF = DATA / "sample.pdf"
PAGE_HTML = DATA / "page.html"


def _make_pdf_module():  # the generator that wrote sample.pdf, reused to build hostile variants
    spec = importlib.util.spec_from_file_location("make_pdf", DATA / "make_pdf.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


make_pdf = _make_pdf_module()


# -- PDF -----------------------------------------------------------------------------------------


def test_pdf_one_document_per_page_with_one_based_page_numbers() -> None:
    docs = PdfReader(SAMPLE_PDF, metadata={"team": "docs"}).read()
    assert [d.metadata["page_number"] for d in docs] == [1, 2, 4]  # page 3 is blank and skipped
    assert docs[0].text.splitlines()[0] == "Chatclient ingestion manual"
    assert "Content hashes become document ids." in docs[2].text
    md = dict(docs[1].metadata)
    assert md == {
        "source": "sample.pdf",
        "page_number": 2,
        "total_pages": 4,
        "title": "Ingestion Manual",
        "team": "docs",
    }


def test_generated_sample_matches_the_generator() -> None:
    assert SAMPLE_PDF.read_bytes() == make_pdf.build(make_pdf.PAGES)


def test_pdf_from_bytes() -> None:
    [doc] = PdfReader(make_pdf.build([["only page"]])).read()
    assert doc.text == "only page" and doc.metadata["source"] == "<bytes>"


@pytest.mark.parametrize(
    "mangle",
    [
        pytest.param(lambda good: b"this is not a PDF at all" * 4, id="garbage"),
        pytest.param(lambda good: good[: len(good) // 2], id="truncated"),
        pytest.param(lambda good: good.replace(b"/Kids [4 0 R]", b"/Kids [2 0 R]"), id="cyclic-page-tree"),
        pytest.param(lambda good: b"%PDF-1.4\n1 0 obj\n" + b"[" * 50_000 + b"\nendobj\n%%EOF", id="deep-nesting"),
    ],
)
def test_hostile_pdf_fails_fast_with_the_typed_error(mangle: object) -> None:
    good = make_pdf.build([["hello"]])
    started = time.monotonic()
    with pytest.raises(DocumentReadError, match="not a readable PDF") as info:
        PdfReader(mangle(good)).read()  # type: ignore[operator]
    assert time.monotonic() - started < 5
    assert isinstance(info.value, ChatClientError) and info.value.source == "<bytes>"


def test_pdf_limits(tmp_path: Path) -> None:
    with pytest.raises(DocumentReadError, match="max_bytes"):
        PdfReader(SAMPLE_PDF, max_bytes=100).read()
    with pytest.raises(DocumentReadError, match="max_pages=2"):
        PdfReader(SAMPLE_PDF, max_pages=2).read()
    with pytest.raises(DocumentReadError, match="max_chars"):
        PdfReader(SAMPLE_PDF, max_chars=50).read()
    with pytest.raises(DocumentReadError, match=r"cannot read missing\.pdf"):
        PdfReader(tmp_path / "missing.pdf").read()
    with pytest.raises(ValueError):
        PdfReader(SAMPLE_PDF, timeout=0)


# -- HTML ----------------------------------------------------------------------------------------


def test_html_main_text_title_and_dropped_furniture() -> None:
    [doc] = HtmlReader(PAGE_HTML).read()
    assert doc.metadata["title"] == "Hybrid search in chatclient"
    assert doc.metadata["source"] == "page.html" and "links" not in doc.metadata
    text = doc.text
    assert text.startswith("Hybrid search\n")
    assert "Keyword search finds exact names like E1042; vector search finds" in text
    assert "- Fuse both rankings with reciprocal rank fusion." in text
    assert "hybrid | 0.9" in text
    assert "fusion paper for details" in text and "https://example.org" not in text
    for furniture in ("tracker", "Home", "Docs", "Related posts", "Copyright", "footer script", "font-family"):
        assert furniture not in text


def test_html_keeps_links_by_option() -> None:
    [doc] = HtmlReader(PAGE_HTML, keep_links=True).read()
    assert "fusion paper (https://example.org/rrf) for details" in doc.text
    assert doc.metadata["links"] == ["https://example.org/rrf"]


def test_html_from_text_falls_back_to_body_and_first_h1() -> None:
    [doc] = HtmlReader("<html><body><h1>Only  heading</h1><p>one<br>two</p><!-- hidden --></body></html>").read()
    assert doc.text == "Only heading\n\none\ntwo"
    assert doc.metadata == {"source": "<html>", "title": "Only heading"}
    assert HtmlReader("<html><body><script>x()</script></body></html>").read() == []
    [picked] = HtmlReader("<div id=a>skip</div><div id=b>pick me</div>", selector="#b").read()
    assert picked.text == "pick me"


def test_header_inside_the_article_is_content_but_the_page_header_is_not() -> None:
    html = (
        "<body><header>Site menu</header><article><header><h1>Release 2.0</h1><p>by Ada</p></header>"
        "<p>New hybrid search.</p><footer>Filed under search</footer></article><footer>Site footer</footer></body>"
    )
    [doc] = HtmlReader(html).read()
    assert doc.text == "Release 2.0\n\nby Ada\n\nNew hybrid search.\nFiled under search"
    [body_only] = HtmlReader("<body><header>Site menu</header><p>Text</p><footer>Footer</footer></body>").read()
    assert body_only.text == "Text"


def test_hostile_html_is_bounded() -> None:
    started = time.monotonic()
    with pytest.raises(DocumentReadError, match="max_depth"):
        HtmlReader("<div>" * 300_000).read()  # the parser is quadratic in depth: refused before parsing
    assert time.monotonic() - started < 5
    assert HtmlReader("<div>" * 1_000 + "deep" + "</div>" * 1_000).read()[0].text == "deep"
    with pytest.raises(DocumentReadError, match="max_bytes"):
        HtmlReader("<p>" + "x" * 2000, max_bytes=1000).read()
    with pytest.raises(DocumentReadError, match="max_nodes"):
        HtmlReader("<p>a</p>" * 100, max_nodes=50).read()
    # unclosed paragraphs and list items are not nesting
    assert HtmlReader("<ul>" + "<li>item" * 10_000 + "</ul>", max_depth=100).read()[0].text.count("item") == 10_000


# -- directories ---------------------------------------------------------------------------------


def test_directory_reader_dispatches_by_suffix_and_records_relative_paths(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.txt").write_text("plain text file")
    (tmp_path / "sub" / "b.md").write_text("# Title\n\nMarkdown body")
    (tmp_path / "sub" / "c.pdf").write_bytes(SAMPLE_PDF.read_bytes())
    (tmp_path / "d.html").write_text(PAGE_HTML.read_text())
    (tmp_path / "e.bin").write_bytes(b"\x00\x01")
    docs = DirectoryReader(tmp_path).read()
    assert [d.metadata["path"] for d in docs] == ["a.txt", "d.html", "sub/b.md", "sub/c.pdf", "sub/c.pdf", "sub/c.pdf"]
    assert docs[2].metadata["title"] == "Title" and docs[3].metadata["page_number"] == 1
    only_pdf = DirectoryReader(tmp_path, "**/*.pdf").read()
    assert {d.metadata["path"] for d in only_pdf} == {"sub/c.pdf"}
    with pytest.raises(DocumentReadError, match="no reader"):
        DirectoryReader(tmp_path, skip_unknown=False).read()


def test_directory_reader_limits_errors_and_symlinks(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    for i in range(3):
        (root / f"{i}.txt").write_text(f"file {i}")
    outside = tmp_path / "secret.txt"
    outside.write_text("outside the root")
    os.symlink(outside, root / "link.txt")
    assert "outside the root" not in " ".join(d.text for d in DirectoryReader(root).read())
    with pytest.raises(DocumentReadError, match="max_files=2"):
        DirectoryReader(root, max_files=2).read()
    (root / "bad.pdf").write_bytes(b"not a pdf")
    with pytest.raises(DocumentReadError, match=r"bad\.pdf"):
        DirectoryReader(root).read()
    assert len(DirectoryReader(root, on_error="skip").read()) == 3
    with pytest.raises(DocumentReadError, match="max_file_bytes"):
        DirectoryReader(root, "*.txt", max_file_bytes=3).read()
    with pytest.raises(DocumentReadError, match="not a directory"):
        DirectoryReader(outside).read()


def test_readers_feed_the_pipeline(tmp_path: Path) -> None:
    out: list[object] = []
    docs = DocumentPipeline([PdfReader(SAMPLE_PDF), HtmlReader(PAGE_HTML)], writer=out.extend, progress=False).run()
    assert len(docs) == 4 and len(out) == 4
