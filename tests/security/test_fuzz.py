"""Fuzzing the parsers that read outside input: only the library's errors or valid results, quickly.

Random text plus adversarial input assembled from each grammar's own tokens (which reaches far
deeper into a parser than random characters do). Every example must finish within ``LIMIT``.
"""

from __future__ import annotations

import json
import sqlite3
import time
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from chatclient.converters import EntityOutputConverter
from chatclient.converters.cleaning import clean_text, first_json_value, strip_code_fence, strip_thinking
from chatclient.converters.partial import parse_partial_json, stream_entities
from chatclient.errors import FilterExpressionError, ModelResponseError, OutputConversionError
from chatclient.models.http.sse import LineDecoder, NDJSONDecoder, SSEDecoder
from chatclient.rag.filters import Expression, evaluate, parse, to_sql, to_text

LIMIT = 1.0
FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


class _Timer:
    def __enter__(self) -> None:
        self.start = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        elapsed = time.perf_counter() - self.start
        assert elapsed < LIMIT, f"took {elapsed:.2f} s"


# -- the filter language -------------------------------------------------------------------------

FILTER_TOKENS = st.sampled_from(
    [
        "a", "b", "'x'", '"y"', "1", "-2", "3.5", "1e3", "7L", "99999999999999999999", "true", "false",
        "==", "!=", ">", ">=", "<", "<=", "&&", "||", "AND", "OR", "NOT", "IN", "NIN", "IS", "NULL",
        "(", ")", "[", "]", ",", "WHERE", "'\\u00e9'", "'\\ud83d\\ude00'", "'\\ud800'", "'\\q'", "'", " ",
    ]
)  # fmt: skip
FILTER_TEXT = st.one_of(st.text(max_size=80), st.lists(FILTER_TOKENS, max_size=40).map(" ".join))
METADATA = st.dictionaries(
    st.sampled_from(["a", "b", "c"]),
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**63), 2**63 - 1),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(alphabet=st.characters(codec="utf-8"), max_size=5),
        st.sampled_from(["x", "y", "é", "😀"]),
    ),
)


def _sql_matches(expr: Expression, metadata: dict[str, Any]) -> bool | None:
    """What SQLite says about ``expr`` on one row, or None when the SQL translation refuses it."""
    try:
        where, params = to_sql(expr)
    except FilterExpressionError:
        return None
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute("CREATE TABLE t (metadata TEXT)")
        conn.execute("INSERT INTO t VALUES (?)", (json.dumps(metadata, ensure_ascii=False),))
        return bool(conn.execute(f"SELECT COUNT(*) FROM t WHERE {where}", params).fetchone()[0] == 1)
    finally:
        conn.close()


@FUZZ
@given(text=FILTER_TEXT, metadata=METADATA)
def test_filter_parser(text: str, metadata: dict[str, Any]) -> None:
    with _Timer():
        try:
            expr = parse(text)
        except FilterExpressionError:
            return
        assert parse(to_text(expr)) == expr
        expected = evaluate(expr, metadata)
        assert isinstance(expected, bool)
        in_sql = _sql_matches(expr, metadata)
        assert in_sql is None or in_sql == expected, (to_text(expr), metadata)


# -- the SSE / NDJSON decoders -------------------------------------------------------------------

SSE_PIECES = st.sampled_from(
    [b"data: ", b"data:", b"event: x", b"id: 1", b": comment", b"retry: 5", b"\n", b"\r\n", b"\r", b"\n\n",
     b'{"a": 1}', b"[" * 50, b"\xff\xfe", b"\xef\xbb\xbf", b"[DONE]", b"data: " + b"[" * 600, b"x" * 300]
)  # fmt: skip
SSE_BYTES = st.one_of(st.binary(max_size=400), st.lists(SSE_PIECES, max_size=40).map(b"".join))


@FUZZ
@given(body=SSE_BYTES, cut=st.integers(1, 64), small=st.booleans())
def test_sse_and_ndjson_decoders(body: bytes, cut: int, small: bool) -> None:
    limit = 256 if small else 1 << 20
    with _Timer():
        lines = LineDecoder(max_line_bytes=limit)
        sse = SSEDecoder(max_event_bytes=limit)
        ndjson = NDJSONDecoder()
        try:
            got: list[str] = []
            for i in range(0, len(body), cut):
                got += lines.feed(body[i : i + cut])
            got += lines.flush()
            events = [e for e in (sse.feed(line) for line in got) if e is not None]
            last = sse.flush()
            events += [last] if last is not None else []
        except ModelResponseError:
            return
        assert all(isinstance(line, str) and "\n" not in line and "\r" not in line for line in got)
        for event in events:
            assert len(event.data) <= limit
            try:
                event.json()
            except ModelResponseError:
                pass
        for line in got:
            try:
                ndjson.feed(line)
            except ModelResponseError:
                pass


# -- partial JSON and text cleaning --------------------------------------------------------------

JSON_PIECES = st.sampled_from(
    ['{', '}', '[', ']', '"', '\\', ':', ',', '"k"', '"v', '1', '-', '1e', '.5', 'true', 'nul', ' ', '\n',
     '<think>', '</think>', '```', '```json\n', '<!-- thinking:', '-->', '\u0000', '\ud800', '😀']
)  # fmt: skip
JSON_TEXT = st.one_of(st.text(max_size=120), st.lists(JSON_PIECES, max_size=80).map("".join))


class Item(BaseModel):
    k: Any = None
    v: list[int] = []


@FUZZ
@given(text=JSON_TEXT, parts=st.integers(1, 6))
def test_partial_json_parser_and_entity_streams(text: str, parts: int) -> None:
    with _Timer():
        parse_partial_json(text)  # never raises
        size = max(1, len(text) // parts)
        deltas = [text[i : i + size] for i in range(0, len(text), size)] or [""]
        for target in (Item, list[Any], dict[str, Any]):
            try:
                states = list(stream_entities(EntityOutputConverter(target), deltas))
            except OutputConversionError:
                continue
            assert states, "a stream that did not fail must end in its final value"


@FUZZ
@given(text=JSON_TEXT)
def test_text_cleaning(text: str) -> None:
    with _Timer():
        cleaned = clean_text(text)
        assert isinstance(cleaned, str) and len(cleaned) <= len(text)
        assert isinstance(strip_thinking(text), str)
        assert isinstance(strip_code_fence(text), str)
        value = first_json_value(cleaned)
        if value is not None:
            assert cleaned.startswith(value)
            json.loads(value)  # what it returns is one complete JSON value
