"""Filters → RediSearch query text: every operator, kinds, escaping of hostile values, refusals.

No Redis with vector search runs on this machine, so the translation is checked as text here;
tests/integration/test_store_redis.py runs the store live where a server has the search module.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chatclient.errors import FilterExpressionError
from chatclient.rag.filters import F, parse
from chatclient.rag.filters.redis import MAX_EXACT_INT, escape_tag, to_redis_query

FIELDS = {"genre": "tag", "year": "numeric", "ok": "bool", "it's a key": "tag"}


def q(text: str) -> str:
    return to_redis_query(parse(text), FIELDS)


@pytest.mark.parametrize(
    ("text", "query"),
    [
        ("genre == 'drama'", "@m_0:{drama}"),
        ("year == 2020", "@m_1:[2020 2020]"),
        ("year == 2.5", "@m_1:[2.5 2.5]"),
        ("ok == true", "@m_2:{true}"),
        ("year > 3", "@m_1:[(3 +inf]"),
        ("year >= -3", "@m_1:[-3 +inf]"),
        ("year < 1e300", "@m_1:[-inf (1e+300]"),
        ("year <= 0.1", "@m_1:[-inf 0.1]"),
        ("genre != 'drama'", "(-ismissing(@m_0) -@m_0:{drama})"),
        ("genre IN ['a', 'b', 'a']", "@m_0:{a | b}"),
        ("year IN [1, 2]", "(@m_1:[1 1] | @m_1:[2 2])"),
        ("genre NIN ['a']", "(-ismissing(@m_0) -@m_0:{a})"),
        ("genre IS NULL", "ismissing(@m_0)"),
        ("genre IS NOT NULL", "-ismissing(@m_0)"),
        ("NOT genre == 'a'", "-(@m_0:{a})"),
        ("genre == 'a' AND year > 1 AND ok == false", "(@m_0:{a} @m_1:[(1 +inf] @m_2:{false})"),
        ("genre == 'a' OR (year > 1 AND ok == false)", "(@m_0:{a} | (@m_1:[(1 +inf] @m_2:{false}))"),
        ("'it\\'s a key' == 'x'", "@m_3:{x}"),
    ],
)
def test_each_operator(text: str, query: str) -> None:
    assert q(text) == query


def test_booleans_order_false_before_true() -> None:
    assert q("ok > false") == "@m_2:{true}"
    assert q("ok >= false") == "@m_2:{false | true}"
    assert q("ok < true") == "@m_2:{false}"
    assert q("ok <= true") == "@m_2:{false | true}"
    assert q("ok > true") == q("ok < false") == "(ismissing(@m_2) -ismissing(@m_2))"


def test_constants_of_another_kind_match_nothing_or_everything_present() -> None:
    nothing_tag = "(ismissing(@m_0) -ismissing(@m_0))"
    assert q("genre == 1") == nothing_tag
    assert q("genre IN [1, true]") == nothing_tag
    assert q("genre != 1") == f"(-ismissing(@m_0) -{nothing_tag})"
    assert q("year == 'x'") == "(ismissing(@m_1) -ismissing(@m_1))"
    assert q("year == true") == "(ismissing(@m_1) -ismissing(@m_1))"  # a bool is not a number here either
    assert q("ok == 1") == "(ismissing(@m_2) -ismissing(@m_2))"
    assert q("genre IN ['a', 1]") == "@m_0:{a}"
    assert q("year > 'a'") == "(ismissing(@m_1) -ismissing(@m_1))"
    assert q("genre IN []") == nothing_tag


HOSTILE = [
    "a} | @m_1:[0 +inf] | @m_0:{b",
    "x\\",
    "$vec",
    "drop) -(*",
    "=>[KNN 1 @embedding $vec]",
    "tab-less, comma; semi: colon",
    "quote\"s and 'single'",
    "日本語 text",
    "~!@#$%^&*()+=[]{}|;:'\",.<>/?`-",
]

# an escaped character, or one that needs no escape; an unescaped structural character breaks this
_TAG_BODY = re.compile(r"(?:\\[^A-Za-z0-9_]|[A-Za-z0-9_]|[^\x00-\x7f])+")


def _unescape(body: str) -> str:
    return re.sub(r"\\(.)", r"\1", body)


@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_values_stay_inside_their_tag(value: str) -> None:
    out = to_redis_query(F.eq("genre", value), FIELDS)
    assert out.startswith("@m_0:{") and out.endswith("}")
    body = out[len("@m_0:{") : -1]
    assert _TAG_BODY.fullmatch(body), body
    assert _unescape(body) == value


@given(st.text(alphabet=st.characters(min_codepoint=0x20, exclude_characters="\x7f"), min_size=1, max_size=40))
def test_escape_round_trips_any_printable_text(value: str) -> None:
    body = escape_tag(value)
    assert _TAG_BODY.fullmatch(body)
    assert _unescape(body) == value


def test_in_list_of_hostile_values_is_one_tag_set() -> None:
    out = to_redis_query(F.in_("genre", ["a|b", "c} @x:{d"]), FIELDS)
    assert out == "@m_0:{a\\|b | c\\}\\ \\@x\\:\\{d}"


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        (F.eq("undeclared", "x"), "not indexed"),
        (F.gt("genre", "m"), "cannot order TAG"),
        (F.eq("genre", "a\x00b"), "control character"),
        (F.eq("genre", "line\nbreak"), "control character"),
        (F.eq("genre", ""), "empty tag"),
        (F.eq("year", MAX_EXACT_INT + 1), "2\\*\\*53"),
        (F.in_("year", [1, -(2**60)]), "2\\*\\*53"),
    ],
)
def test_refusals_are_filter_errors(expr: object, message: str) -> None:
    with pytest.raises(FilterExpressionError, match=message):
        to_redis_query(expr, FIELDS)  # type: ignore[arg-type]


def test_numbers_render_exactly_and_infinity_is_unbounded() -> None:
    assert to_redis_query(F.gt("year", MAX_EXACT_INT), FIELDS) == f"@m_1:[({MAX_EXACT_INT} +inf]"
    assert to_redis_query(F.lt("year", float("inf")), FIELDS) == "@m_1:[-inf (+inf]"
    assert to_redis_query(F.gte("year", float("-inf")), FIELDS) == "@m_1:[-inf +inf]"
    assert to_redis_query(F.eq("year", 0.1 + 0.2), FIELDS) == "@m_1:[0.30000000000000004 0.30000000000000004]"


def test_long_chains_stay_flat() -> None:
    expr = F.and_(*(F.eq("year", i) for i in range(2000)))
    out = to_redis_query(expr, FIELDS)
    assert out.count("(") == 1 and out.count("@m_1:[") == 2000


def test_bad_field_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="kinds"):
        to_redis_query(F.eq("a", 1), {"a": "text"})


# -- the commands RedisVectorStore sends (no server with search runs here: a recording client stands
# in, answering with replies shaped as RediSearch's RESP2 replies are documented) -------------------


class RecordingRedis:
    """Records commands; answers FT.INFO with a 4-d vector attribute and FT.SEARCH with ``search_reply``."""

    def __init__(self, search_reply: list[object]) -> None:
        self.commands: list[tuple[object, ...]] = []
        self.search_reply = search_reply

    def execute_command(self, *args: object) -> object:
        self.commands.append(args)
        if args[0] == "FT.INFO":
            return [b"index_name", b"kb", b"attributes", [[b"identifier", b"embedding", b"type", b"VECTOR", b"dim", 4]]]
        if args[0] == "FT.SEARCH":
            return self.search_reply
        raise AssertionError(f"unexpected command {args[0]!r}")


def test_search_sends_a_knn_query_with_the_filter_and_parses_the_reply() -> None:
    import json

    import numpy as np

    from chatclient.rag import HashingEmbeddingModel, SearchRequest
    from chatclient.rag.stores.redis import RedisVectorStore

    reply: list[object] = [
        2,
        b"kb:a",
        [
            b"id",
            b"a",
            b"text",
            b"alpha",
            b"metadata",
            json.dumps({"genre": "x y"}).encode(),
            b"vector_distance",
            b"0.25",
        ],
        b"kb:b",
        [b"id", b"b", b"text", b"beta", b"metadata", b"{}", b"vector_distance", b"0.75"],
    ]
    client = RecordingRedis(reply)
    store = RedisVectorStore(
        "redis://unused", HashingEmbeddingModel(dimensions=4), index="kb", client=client,
        metadata_fields={"genre": "tag", "year": "numeric"}, ef_runtime=5,
    )  # fmt: skip
    found = store.similarity_search(
        SearchRequest("query", top_k=7, similarity_threshold=0.5, filter_expression="genre == 'x y' AND year > 2000")
    )
    # cosine distance 0.25 -> similarity 0.75; 0.75 -> 0.25 falls under the 0.5 threshold
    assert [(d.id, d.text, dict(d.metadata), d.score) for d in found] == [("a", "alpha", {"genre": "x y"}, 0.75)]
    search = client.commands[-1]
    assert search[:3] == (
        "FT.SEARCH",
        "kb",
        "((@m_0:{x\\ y} @m_1:[(2000 +inf]))=>[KNN $k @embedding $vec EF_RUNTIME $ef AS vector_distance]",
    )
    params = dict(zip(search[5:11:2], search[6:11:2], strict=True))
    assert params["k"] == "7" and params["ef"] == "7"
    vec = np.frombuffer(params["vec"], dtype=np.float32)  # type: ignore[arg-type]
    assert vec.shape == (4,) and abs(float(np.linalg.norm(vec)) - 1.0) < 1e-6
    assert search[-2:] == ("DIALECT", "2") and "SORTBY" in search


def test_l2_and_inner_product_distances_become_cosine_scores() -> None:
    from chatclient.rag.stores.redis import vector_score

    # unit vectors at cosine 0.6: L2 squared distance 0.8, IP distance 0.4, cosine distance 0.4
    assert vector_score("l2", 0.8) == pytest.approx(0.6)
    assert vector_score("inner_product", 0.4) == pytest.approx(0.6)
    assert vector_score("cosine", 0.4) == pytest.approx(0.6)
