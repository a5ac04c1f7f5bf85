"""Document readers: turn files into Documents (the first stage of an ETL pipeline)."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from chatclient import jsonsafe
from chatclient.rag.documents import Document


class TextReader:
    """The whole file as one Document; metadata ``source`` (file name), ``charset`` and ``metadata``."""

    def __init__(
        self, path: str | os.PathLike[str], *, encoding: str = "utf-8", metadata: Mapping[str, Any] | None = None
    ) -> None:
        self.path = Path(path)
        self.encoding = encoding
        self.custom_metadata = dict(metadata or {})

    def read(self) -> list[Document]:
        """The file as one document."""
        text = self.path.read_text(encoding=self.encoding)
        return [Document(text, {"charset": self.encoding, "source": self.path.name, **self.custom_metadata})]

    __call__ = read


def resolve_pointer(data: Any, pointer: str) -> Any:
    """Resolve an RFC 6901 JSON pointer (``""`` is the whole document); ``ValueError`` when it does not match."""
    if pointer == "":
        return data
    if not pointer.startswith("/"):
        raise ValueError(f"Invalid JSON pointer {pointer!r}: it must be empty or start with '/'")
    node = data
    for raw in pointer[1:].split("/"):
        token = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping):
            if token not in node:
                raise ValueError(f"JSON pointer {pointer!r} does not match: no key {token!r}")
            node = node[token]
        elif isinstance(node, list):
            if not re.fullmatch(r"0|[1-9][0-9]*", token) or int(token) >= len(node):
                raise ValueError(f"JSON pointer {pointer!r} does not match: bad array index {token!r}")
            node = node[int(token)]
        else:
            raise ValueError(f"JSON pointer {pointer!r} does not match: cannot descend into a {type(node).__name__}")
    return node


class JsonReader:
    """One Document per JSON object (the top-level object, or each item of a top-level array).

    With ``keys``, the text is ``"key: value"`` lines for the keys an object has; without, the
    object's JSON. Metadata: ``source`` (the file name) and what ``metadata_generator(obj)`` returns
    (which may replace ``source``). ``read(pointer)`` reads from the node an RFC 6901 pointer selects
    instead of the root.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        keys: Sequence[str] = (),
        *,
        metadata_generator: Callable[[Any], Mapping[str, Any]] | None = None,
        encoding: str = "utf-8",
    ) -> None:
        self.path = Path(path)
        self.keys = tuple(keys)
        self.metadata_generator = metadata_generator
        self.encoding = encoding

    def _document(self, item: Any) -> Document:
        if isinstance(item, Mapping) and self.keys:
            text = "\n".join(f"{k}: {_scalar(item[k])}" for k in self.keys if k in item)
        else:
            text = item if isinstance(item, str) else json.dumps(item, ensure_ascii=False)
        metadata = {"source": self.path.name}
        if self.metadata_generator:
            metadata.update(self.metadata_generator(item))
        return Document(text, metadata)

    def read(self, pointer: str | None = None) -> list[Document]:
        """Documents from the root, or from the node ``pointer`` selects."""
        # jsonsafe: a deeply nested file is a ValueError (JSONDepthError), not a RecursionError
        data = jsonsafe.loads(self.path.read_text(encoding=self.encoding))
        if pointer is not None:
            data = resolve_pointer(data, pointer)
        items = data if isinstance(data, list) else [data]
        return [self._document(item) for item in items]

    def __call__(self) -> list[Document]:
        return self.read()


def _scalar(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)


_RULE = re.compile(r"^\s{0,3}([-*_])(\s*\1){2,}\s*$")
_FENCE = re.compile(r"^\s{0,3}(```|~~~)\s*([\w+-]*)")


def _heading(line: str) -> tuple[int, str] | None:
    """``(level, title)`` of an ATX heading (``## Title ##``), or None.

    Plain code: the regex ``^(#{1,6})\\s+(.*?)\\s*#*\\s*$`` took seconds on a 2 KB line
    (its lazy title and the optional trailing runs split long space/``#`` runs every way).
    """
    level = len(line) - len(line.lstrip("#"))
    if not 1 <= level <= 6 or len(line) == level or not line[level].isspace():
        return None
    # the title without surrounding space and without a closing run of '#'
    return level, line[level:].strip().rstrip("#").rstrip()


class MarkdownReader:
    """Splits Markdown into Documents at headings (and, optionally, horizontal rules).

    Each document's metadata carries ``source`` (the file name), ``title`` (its heading) and
    ``category`` (``header_<level>``), plus ``additional_metadata`` (which may replace any of them). Code blocks and blockquotes become separate documents
    (``category`` ``code_block`` with ``lang``, or ``blockquote``) unless ``include_code_block`` /
    ``include_blockquote`` keep them in the surrounding text. Paragraphs are joined with ``\\n``.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        horizontal_rule_creates_document: bool = False,
        include_code_block: bool = False,
        include_blockquote: bool = False,
        additional_metadata: Mapping[str, Any] | None = None,
        encoding: str = "utf-8",
    ) -> None:
        self.path = Path(path)
        self.horizontal_rule_creates_document = horizontal_rule_creates_document
        self.include_code_block = include_code_block
        self.include_blockquote = include_blockquote
        self.additional_metadata = dict(additional_metadata or {})
        self.encoding = encoding

    def read(self) -> list[Document]:
        """Documents for the file's Markdown."""
        return self.parse(self.path.read_text(encoding=self.encoding))

    __call__ = read

    def parse(self, markdown: str) -> list[Document]:
        """Documents for Markdown text (what :meth:`read` does with the file's content)."""
        docs: list[Document] = []
        source = {"source": self.path.name}
        header: dict[str, Any] = {}
        paragraphs: list[str] = []
        current: list[str] = []

        def end_paragraph() -> None:
            if current:
                paragraphs.append(" ".join(s.strip() for s in current))
                current.clear()

        def flush() -> None:
            end_paragraph()
            text = "\n".join(p for p in paragraphs if p)
            if text.strip():
                docs.append(Document(text, {**source, **header, **self.additional_metadata}))
            paragraphs.clear()

        def separate(text: str, metadata: dict[str, Any]) -> None:
            flush()
            if text.strip():
                docs.append(Document(text, {**source, **metadata, **self.additional_metadata}))

        lines = markdown.splitlines()
        i = 0
        while i < len(lines):
            line = lines[i]
            fence = _FENCE.match(line)
            if fence:
                marker, lang = fence.group(1), fence.group(2)
                body: list[str] = []
                i += 1
                while i < len(lines) and not lines[i].strip().startswith(marker):
                    body.append(lines[i])
                    i += 1
                i += 1  # the closing fence
                code = "\n".join(body)
                if self.include_code_block:
                    end_paragraph()
                    paragraphs.append(code)
                else:
                    separate(code, {"category": "code_block", "lang": lang} if lang else {"category": "code_block"})
                continue
            heading = _heading(line)
            if heading:
                flush()
                header = {"category": f"header_{heading[0]}", "title": heading[1]}
            elif _RULE.match(line):
                if self.horizontal_rule_creates_document:
                    flush()
                else:
                    end_paragraph()
            elif line.lstrip().startswith(">"):
                quote: list[str] = []
                while i < len(lines) and lines[i].lstrip().startswith(">"):
                    quote.append(lines[i].lstrip()[1:].strip())
                    i += 1
                text = " ".join(q for q in quote if q)
                if self.include_blockquote:
                    end_paragraph()
                    paragraphs.append(text)
                else:
                    separate(text, {"category": "blockquote"})
                continue
            elif not line.strip():
                end_paragraph()
            else:
                current.append(line)
            i += 1
        flush()
        return docs
