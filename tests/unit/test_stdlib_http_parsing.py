"""The socket lane's sans-IO parsers against hostile bytes: only httpx's typed errors, never a bare one.

``_HeadParser`` and ``_Framer`` read whatever a server sends; every failure must be an
``httpx.HTTPError`` (which the HTTP layer turns into chatclient's typed errors) or ``_Stale`` (a closed
connection), and a well-formed body must come out whole however the network cuts it.
"""

from __future__ import annotations

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chatclient.models.http.stdlib_http import _MAX_HEAD, _MAX_HEADERS, _MAX_LINE, _Framer, _HeadParser, _Stale


def lines_of(data: bytes) -> list[bytes]:
    """``data`` cut the way ``readline`` cuts it (line breaks kept; a last line may lack one)."""
    out, start = [], 0
    while start < len(data):
        end = data.find(b"\n", start)
        if end < 0:
            out.append(data[start:])
            break
        out.append(data[start : end + 1])
        start = end + 1
    return [*out, b""]  # then the end of the connection


def parse_head(data: bytes) -> object:
    parser = _HeadParser()
    for line in lines_of(data):
        head = parser.feed(line)
        if head is not None:
            return head
    raise AssertionError("the parser neither finished nor failed")


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=600))
def test_random_heads_end_in_a_typed_error_or_a_head(data: bytes) -> None:
    try:
        parse_head(data)
    except (httpx.HTTPError, _Stale):
        pass


HEAD_LINES = st.lists(
    st.sampled_from(
        [
            b"HTTP/1.1 200 OK\r\n",
            b"HTTP/1.1 100 Continue\r\n",
            b"HTTP/1.0 404 Not Found\n",
            b"content-length: 5\r\n",
            b"Transfer-Encoding: chunked\r\n",
            b"x: y\r\n",
            b" folded\r\n",
            b"bad header\r\n",
            b"\r\n",
            b"\n",
            b"HTTP/2 200\r\n",
        ]
    ),
    max_size=12,
)


@settings(max_examples=300, deadline=None)
@given(HEAD_LINES)
def test_heads_built_from_plausible_lines_never_fail_untyped(lines: list[bytes]) -> None:
    try:
        parse_head(b"".join(lines))
    except (httpx.HTTPError, _Stale):
        pass


def test_bounds_of_the_head() -> None:
    with pytest.raises(httpx.RemoteProtocolError, match="longer than"):
        parse_head(b"HTTP/1.1 200 OK\r\nx: " + b"a" * _MAX_LINE + b"\r\n\r\n")
    many = b"".join(b"h%d: v\r\n" % i for i in range(_MAX_HEADERS + 1))
    with pytest.raises(httpx.RemoteProtocolError, match="more than 100 headers"):
        parse_head(b"HTTP/1.1 200 OK\r\n" + many + b"\r\n")
    big = b"".join(b"h%d: %s\r\n" % (i, b"v" * 4000) for i in range(_MAX_HEAD // 4000 + 1))
    with pytest.raises(httpx.RemoteProtocolError, match="head is larger"):
        parse_head(b"HTTP/1.1 200 OK\r\n" + big + b"\r\n")
    with pytest.raises(httpx.RemoteProtocolError, match="interim"):
        parse_head(b"HTTP/1.1 100 Continue\r\n\r\n" * 12 + b"HTTP/1.1 200 OK\r\n\r\n")
    with pytest.raises(_Stale):
        parse_head(b"")
    for status_line in (b"HTTP/1.1 000 Zero\r\n", b"HTTP/1.1 20 Short\r\n", b"HTTP/2 200\r\n", b"ICY 200 OK\r\n"):
        with pytest.raises(httpx.RemoteProtocolError, match=r"HTTP/1\.x"):
            parse_head(status_line + b"\r\n")


def test_interim_answers_are_skipped_and_bare_lf_is_read() -> None:
    head = parse_head(
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nlink: </x>\r\n\r\nHTTP/1.1 201 Created\nA: 1\n\n"
    )
    assert head == (201, "Created", False, [("A", "1")])


def chunked(body: bytes, sizes: list[int]) -> bytes:
    out, pos, i = [], 0, 0
    while pos < len(body):
        size = max(1, sizes[i % len(sizes)]) if sizes else len(body)
        piece = body[pos : pos + size]
        out.append(b"%x;ext=1\r\n%s\r\n" % (len(piece), piece))
        pos, i = pos + len(piece), i + 1
    return b"".join(out) + b"0\r\ntrailer: t\r\n\r\n"


def run_framer(length: int | None, wire: bytes, cuts: list[int]) -> bytes:
    framer = _Framer(length)
    out, pos, i = [], 0, 0
    while not framer.done and pos < len(wire):
        step = min(framer.want(), max(1, cuts[i % len(cuts)]) if cuts else len(wire))
        out += framer.feed(wire[pos : pos + step])
        pos, i = pos + step, i + 1
    if not framer.done:
        framer.end()
    return b"".join(out)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=3000), st.lists(st.integers(1, 700), max_size=6), st.lists(st.integers(1, 97), max_size=6))
def test_framed_bodies_come_out_whole_however_they_are_cut(body: bytes, sizes: list[int], cuts: list[int]) -> None:
    assert run_framer(None, chunked(body, sizes), cuts) == body
    assert run_framer(len(body), body, cuts) == body
    assert run_framer(-1, body, cuts) == body


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=400), st.lists(st.integers(1, 50), max_size=5))
def test_random_chunked_bytes_end_in_a_typed_error_or_a_body(wire: bytes, cuts: list[int]) -> None:
    try:
        run_framer(None, wire, cuts)
    except httpx.HTTPError:
        pass


def test_framing_errors_are_typed() -> None:
    with pytest.raises(httpx.RemoteProtocolError, match="closed before the end"):
        run_framer(10, b"12345", [])
    with pytest.raises(httpx.RemoteProtocolError, match="invalid chunk size"):
        run_framer(None, b"zz\r\nabc\r\n0\r\n\r\n", [])
    with pytest.raises(httpx.RemoteProtocolError, match="longer than its announced size"):
        run_framer(None, b"2\r\nabcd\r\n0\r\n\r\n", [])
    with pytest.raises(httpx.RemoteProtocolError, match="more bytes than"):
        run_framer(None, b"1\r\na\r\n0\r\n\r\nEXTRA", [])
    with pytest.raises(httpx.RemoteProtocolError, match="invalid chunk size"):
        run_framer(None, b"1" * 17 + b"\r\n", [])
    with pytest.raises(httpx.RemoteProtocolError, match="longer than"):
        run_framer(None, b"1" * (_MAX_LINE + 2), [])


def test_folded_lines_continue_the_previous_header() -> None:
    head = parse_head(b"HTTP/1.1 200 OK\r\nx-a: one\r\n two\r\n\t three \r\nx-b:\r\n later\r\n\r\n")
    assert head == (200, "OK", False, [("x-a", "one two three"), ("x-b", "later")])
    with pytest.raises(httpx.RemoteProtocolError, match="continuation line before any header"):
        parse_head(b"HTTP/1.1 200 OK\r\n folded\r\n\r\n")
    with pytest.raises(httpx.RemoteProtocolError, match="control character"):
        parse_head(b"HTTP/1.1 200 OK\r\nx-a: one\r\n t\x00wo\r\n\r\n")


@pytest.mark.parametrize("control", [*range(0x00, 0x09), *range(0x0B, 0x20), 0x7F])
def test_every_control_character_but_tab_is_refused_in_a_value(control: int) -> None:
    with pytest.raises(httpx.RemoteProtocolError, match="control character"):
        parse_head(b"HTTP/1.1 200 OK\r\nx-a: a%cb\r\n\r\n" % control)
    # (LF ends the line: what follows it is a line of its own, and not a header either.)


def test_header_names_must_be_tokens() -> None:
    for name in (b"a b", b"a\tb", b"a(b", b"a/b", b"a\x00b", b"\xe9t\xe9", b"a ", b" a", b"a\"b"):
        with pytest.raises(httpx.RemoteProtocolError):
            parse_head(b"HTTP/1.1 200 OK\r\n%s: v\r\n\r\n" % name)
    head = parse_head(b"HTTP/1.1 200 OK\r\nX-Weird!#$%&'*+-.^_`|~9: v\tw\r\nlatin: caf\xe9\r\n\r\n")
    assert head == (200, "OK", False, [("X-Weird!#$%&'*+-.^_`|~9", "v\tw"), ("latin", "caf\u00e9")])


def test_request_heads_built_per_request_are_not_all_kept() -> None:
    from chatclient.models.http.stdlib_http import _MAX_CACHED_HEADS, StdlibPoster

    poster = StdlibPoster()
    for i in range(_MAX_CACHED_HEADS * 3):  # a fresh headers mapping each time, as a signing hook makes
        origin, head = poster._head("http://127.0.0.1:9/v1/x", {"x-signature": str(i)})
        assert origin == ("http", "127.0.0.1", 9) and b"x-signature: %d\r\n" % i in head
    assert len(poster._heads) <= _MAX_CACHED_HEADS
    fixed = {"a": "1"}
    assert poster._head("http://h/x", fixed) is not None and poster._heads[("http://h/x", id(fixed))][2] is fixed
