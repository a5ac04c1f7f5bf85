"""``HtmlReader``: the main text of a web page as one Document, with its ``title`` (extra ``rag``)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from chatclient.errors import DocumentReadError
from chatclient.rag.documents import Document
from chatclient.rag.etl._files import read_bounded

DEFAULT_MAX_BYTES = 16 * 1024 * 1024
DEFAULT_MAX_NODES = 2_000_000
DEFAULT_MAX_DEPTH = 4_000

# Void elements never nest; these close implicitly, so unclosed ones in old HTML are not nesting.
_NO_DEPTH = frozenset(
    [
        "area",
        "base",
        "br",
        "col",
        "embed",
        "hr",
        "img",
        "input",
        "link",
        "meta",
        "param",
        "source",
        "track",
        "wbr",
        "p",
        "li",
        "td",
        "th",
        "tr",
        "dt",
        "dd",
        "option",
        "optgroup",
        "thead",
        "tbody",
        "tfoot",
        "colgroup",
        "rt",
        "rp",
    ]
)

# Page furniture and non-text content: never part of the main text.
_DROP = frozenset(
    [
        "script",
        "style",
        "noscript",
        "template",
        "svg",
        "math",
        "canvas",
        "iframe",
        "object",
        "embed",
        "head",
        "nav",
        "header",
        "footer",
        "aside",
        "form",
        "button",
        "select",
        "option",
        "input",
        "textarea",
        "dialog",
    ]
)
# Elements that start a new line (paragraph-like); inline ones flow into the surrounding text.
_BLOCK = frozenset(
    [
        "p",
        "div",
        "section",
        "article",
        "main",
        "blockquote",
        "pre",
        "ul",
        "ol",
        "li",
        "dl",
        "dt",
        "dd",
        "table",
        "thead",
        "tbody",
        "tfoot",
        "tr",
        "caption",
        "figure",
        "figcaption",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "hr",
        "address",
        "details",
        "summary",
        "center",
    ]
)
_CELL = frozenset(("td", "th"))
_SECTIONING = frozenset(("header", "footer"))
_MAIN_SELECTORS = ("main", "article", "[role=main]")
_SPACES = re.compile(r"[ \t\r\f\v\u00a0]+")
_BLANKS = re.compile(r"\n{3,}")


def _require_selectolax() -> Any:
    try:
        from selectolax.lexbor import LexborHTMLParser
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        raise ImportError("HtmlReader needs the 'selectolax' package: pip install 'chatclient[rag]'") from exc
    return LexborHTMLParser


class HtmlReader:
    """Reads an HTML page (a file path, or the HTML text itself) into one Document of its main text.

    The main text is the ``<main>`` element, else ``<article>``, else ``[role=main]``, else the
    body (or ``selector`` when given); scripts, styles, navigation, asides and forms are dropped,
    and so are headers and footers of the page (those inside ``<main>``/``<article>`` belong to
    the content and stay). Block elements start new lines; headings, list items and table rows stay
    readable as plain text. Links: by default only their text is kept; ``keep_links=True`` writes
    ``text (url)`` and lists the URLs in metadata ``links``.

    Metadata: ``title`` (the ``<title>``, else the first ``<h1>``), ``source`` (file name, or
    ``"<html>"`` for text), plus ``metadata``. ``path_or_text`` is read as HTML text when it is a
    ``str`` starting with ``<`` (after whitespace), otherwise as a path.

    Bounded: input over ``max_bytes``, nested deeper than ``max_depth`` open elements, or with more
    than ``max_nodes`` nodes raises :class:`~chatclient.errors.DocumentReadError` (the parser's time
    grows with the square of the nesting depth, so depth is checked before parsing).
    """

    def __init__(
        self,
        path_or_text: str | os.PathLike[str],
        *,
        keep_links: bool = False,
        selector: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        encoding: str = "utf-8",
        max_bytes: int = DEFAULT_MAX_BYTES,
        max_nodes: int = DEFAULT_MAX_NODES,
        max_depth: int = DEFAULT_MAX_DEPTH,
    ) -> None:
        if max_bytes <= 0 or max_nodes <= 0 or max_depth <= 0:
            raise ValueError("max_bytes, max_nodes and max_depth must be positive")
        is_text = isinstance(path_or_text, str) and path_or_text.lstrip().startswith("<")
        self._text: str | None = path_or_text if is_text else None  # type: ignore[assignment]
        self.path: Path | None = None if is_text else Path(path_or_text)
        self.keep_links = keep_links
        self.selector = selector
        self.custom_metadata = dict(metadata or {})
        self.encoding = encoding
        self.max_bytes = max_bytes
        self.max_nodes = max_nodes
        self.max_depth = max_depth

    @property
    def source(self) -> str:
        """The file name, or ``"<html>"`` for text."""
        return self.path.name if self.path is not None else "<html>"

    def _html(self) -> str:
        if self._text is not None:
            if len(self._text) > self.max_bytes:
                raise DocumentReadError(
                    f"the HTML text is longer than max_bytes={self.max_bytes}; raise max_bytes", self.source
                )
            return self._text
        assert self.path is not None
        return read_bounded(self.path, self.max_bytes, self.source).decode(self.encoding, errors="replace")

    def read(self) -> list[Document]:
        """The page as one Document (none when it has no text)."""
        parser = _require_selectolax()
        html = self._html()
        self._check_depth(html)
        tree = parser(html)
        title = _first_text(tree, "title") or _first_text(tree, "h1")
        root = None
        if self.selector:
            root = tree.css_first(self.selector)
        else:
            for sel in _MAIN_SELECTORS:
                root = tree.css_first(sel)
                if root is not None:
                    break
        # inside <main>/<article> a <header> or <footer> belongs to the content (the article's own
        # heading, its byline); only around the whole page are they site furniture
        drop = _DROP - _SECTIONING if root is not None else _DROP
        root = root if root is not None else (tree.body if tree.body is not None else tree.root)
        links: list[str] = []
        text = self._extract(root, links, drop) if root is not None else ""
        if not text:
            return []
        metadata: dict[str, Any] = {"source": self.source}
        if title:
            metadata["title"] = title
        if self.keep_links and links:
            metadata["links"] = list(dict.fromkeys(links))
        return [Document(text, {**metadata, **self.custom_metadata})]

    __call__ = read

    def _check_depth(self, html: str) -> None:
        depth = 0
        for closing, name, self_closing in _tags(html):
            tag = name.lower()
            if tag in _NO_DEPTH or self_closing:
                continue
            if closing:
                depth = max(depth - 1, 0)
                continue
            depth += 1
            if depth > self.max_depth:
                raise DocumentReadError(
                    f"{self.source} nests elements more than max_depth={self.max_depth} deep; "
                    "raise max_depth if the page is genuine",
                    self.source,
                )

    def _extract(self, root: Any, links: list[str], drop: frozenset[str] = _DROP) -> str:
        out: list[str] = []
        seen = 0
        # (node, None) enters a node; (None, text) writes text when the walk leaves an element
        stack: list[tuple[Any, str | None]] = [(root, None)]
        while stack:
            node, closing = stack.pop()
            if node is None:
                out.append(closing or "")
                continue
            seen += 1
            if seen > self.max_nodes:
                raise DocumentReadError(
                    f"{self.source} has more than max_nodes={self.max_nodes} nodes; raise max_nodes", self.source
                )
            tag = node.tag
            if tag == "-text":
                out.append(node.text(deep=False))
                continue
            if tag in drop or tag.startswith("-"):  # also comments and doctype
                continue
            if tag == "br":
                out.append("\n")
                continue
            if tag in _BLOCK:
                out.append("\n")
                stack.append((None, "\n"))
            elif tag in _CELL:
                stack.append((None, " | "))
            elif tag == "a" and self.keep_links:
                href = (node.attributes.get("href") or "").strip()
                if href and not href.startswith(("#", "javascript:")):
                    links.append(href)
                    stack.append((None, f" ({href})"))
            if tag == "li":
                out.append("- ")
            children = []
            child = node.child
            while child is not None:
                children.append(child)
                child = child.next
            stack.extend((c, None) for c in reversed(children))
        lines = (_SPACES.sub(" ", line).strip() for line in "".join(out).split("\n"))
        text = "\n".join(line.removesuffix(" |") for line in lines)
        return _BLANKS.sub("\n\n", text).strip()

    def __repr__(self) -> str:
        return f"HtmlReader({self.source!r}, keep_links={self.keep_links})"


def _first_text(tree: Any, selector: str) -> str | None:
    node = tree.css_first(selector)
    if node is None:
        return None
    text = _SPACES.sub(" ", node.text(deep=True)).strip()
    return text[:500] or None


def _tags(html: str) -> Iterator[tuple[bool, str, bool]]:
    """``(closing, name, self_closing)`` of every tag ``<name ...>``, ``</name>``, ``<name/>``, in order.

    A scan in linear time: the tag pattern this replaces (``<(/?)([A-Za-z][A-Za-z0-9-]*)[^>]*?(/?)>``)
    looked for a ``>`` again from every ``<``, quadratic on text with many ``<`` and no ``>``
    (60 kB took 10 s). The next ``>`` is found once and reused until the scan passes it.
    """
    n = len(html)
    gt = -1
    i = html.find("<")
    while i >= 0:
        if gt < i:
            gt = html.find(">", i)
            if gt < 0:
                return  # no tag can close any more
        k = i + 1
        closing = k < n and html[k] == "/"
        if closing:
            k += 1
        if k < gt and html[k].isascii() and html[k].isalpha():
            end = k + 1
            while end < gt and html[end].isascii() and (html[end].isalnum() or html[end] == "-"):
                end += 1
            yield closing, html[k:end], html[gt - 1] == "/" and gt - 1 >= end
            i = html.find("<", gt + 1)
        else:
            i = html.find("<", i + 1)
