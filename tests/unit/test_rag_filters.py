"""Filter expressions: parser, F builder, text round-trip, evaluator, and SQL translation run in real SQLite."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatclient.errors import FilterExpressionError
from chatclient.rag.filters import Expression, F, Key, Op, Value, evaluate, parse, to_sql, to_text

# -- parser -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("country == 'UK'", F.eq("country", "UK")),
        ("year >= 2020", F.gte("year", 2020)),
        ("year > -5", F.gt("year", -5)),
        ("price < 9.5", F.lt("price", 9.5)),
        ("price <= 1e3", F.lte("price", 1000.0)),
        ("n != 3L", F.ne("n", 3)),
        ("isActive == true", F.eq("isActive", True)),
        ("isActive == FALSE", F.eq("isActive", False)),
        ("genre in ['comedy', 'documentary', 'drama']", F.in_("genre", "comedy", "documentary", "drama")),
        ("genre NIN ['a']", F.nin("genre", ["a"])),
        ("genre NOT IN ['a', 1, true]", F.nin("genre", "a", 1, True)),
        ("year IS NULL", F.is_null("year")),
        ("year is not null", F.is_not_null("year")),
        ("meta.author == 'x'", F.eq("meta.author", "x")),
        ("'odd key' == \"v\"", F.eq("odd key", "v")),
        ("WHERE a == 1", F.eq("a", 1)),
        ("date >= '2024-01-01T00:00:00Z'", F.gte("date", "2024-01-01T00:00:00Z")),
        ("x IN []", F.in_("x", [])),
    ],
)
def test_parse_examples(text: str, expected: Expression) -> None:
    assert parse(text) == expected


def test_string_escapes() -> None:
    assert parse(r"a == 'it\'s \\ \"q\" \n \u00e9'") == F.eq("a", 'it\'s \\ "q" \n é')
    assert parse(r'a == "say \"hi\""') == F.eq("a", 'say "hi"')


def test_precedence_not_over_and_over_or() -> None:
    a, b, c = F.eq("a", 1), F.eq("b", 2), F.eq("c", 3)
    assert parse("a == 1 OR b == 2 AND c == 3") == F.or_(a, F.and_(b, c))
    assert parse("a == 1 AND b == 2 OR c == 3") == F.or_(F.and_(a, b), c)
    assert parse("NOT a == 1 AND b == 2") == F.and_(F.not_(a), b)
    assert parse("NOT (a == 1 AND b == 2)") == F.not_(F.and_(a, b))
    assert parse("(a == 1 || b == 2) && c == 3") == F.and_(F.or_(a, b), c)
    assert parse("a == 1 && b == 2 && c == 3") == F.and_(F.and_(a, b), c)  # left-associative
    assert parse("a == 1 and not not b == 2") == F.and_(a, F.not_(F.not_(b)))


def test_builder_matches_parser_and_operators() -> None:
    text = "genre == 'drama' && year >= 2020"
    assert parse(text) == F.and_(F.eq("genre", "drama"), F.gte("year", 2020))
    assert F.eq("g", "d") & ~F.lt("y", 2020) == parse("g == 'd' AND NOT y < 2020")
    assert (F.eq("a", 1) | F.eq("b", 2)) == parse("a == 1 OR b == 2")
    assert F.group(F.eq("a", 1)) == F.eq("a", 1)
    assert F.and_(F.eq("a", 1), F.eq("b", 2), F.eq("c", 3)) == parse("a == 1 AND b == 2 AND c == 3")


@pytest.mark.parametrize(
    ("text", "position"),
    [
        ("", 0),
        ("a ==", 4),
        ("a == 'unterminated", 5),
        ("a = 1", 2),
        ("a == 1 AND", 10),
        ("(a == 1", 7),
        ("a IN [1, 2", 10),
        ("a == 1 b == 2", 7),
        ("a IS 5", 5),
        ("a == 'x\\q'", 7),
        ("== 1", 0),
        ("a == 1.5L", 5),
        ("a == foo", 5),
    ],
)
def test_malformed_text_reports_position(text: str, position: int) -> None:
    with pytest.raises(FilterExpressionError) as info:
        parse(text)
    assert info.value.position == position
    assert f"position {position}" in str(info.value)


def test_ast_validates_shapes() -> None:
    with pytest.raises(TypeError):
        Expression(Op.AND, Key("a"), Value(1))
    with pytest.raises(TypeError):
        Expression(Op.IN, Key("a"), Value(1))
    with pytest.raises(TypeError):
        Value(None)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        Value(float("nan"))


# -- round trip: random trees -> text -> tree ------------------------------------------------------

keys = st.sampled_from(["a", "b", "c", "year", "meta.x", "and", "odd key", "it's"])
scalars = st.one_of(
    st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x00"), max_size=6),
    st.integers(min_value=-(2**53), max_value=2**53),
    st.floats(allow_nan=False, allow_infinity=False, width=64),
    st.booleans(),
)


def leaves(values: st.SearchStrategy[Any]) -> st.SearchStrategy[Expression]:
    cmp = st.builds(
        lambda op, k, v: Expression(op, Key(k), Value(v)),
        st.sampled_from([Op.EQ, Op.NE, Op.GT, Op.GTE, Op.LT, Op.LTE]),
        keys,
        values,
    )
    sets = st.builds(
        lambda op, k, vs: Expression(op, Key(k), Value(tuple(vs))),
        st.sampled_from([Op.IN, Op.NIN]),
        keys,
        st.lists(values, max_size=3),
    )
    nulls = st.builds(lambda op, k: Expression(op, Key(k)), st.sampled_from([Op.IS_NULL, Op.IS_NOT_NULL]), keys)
    return st.one_of(cmp, sets, nulls)


def trees(values: st.SearchStrategy[Any]) -> st.SearchStrategy[Expression]:
    return st.recursive(
        leaves(values),
        lambda sub: st.one_of(
            st.builds(lambda a, b: Expression(Op.AND, a, b), sub, sub),
            st.builds(lambda a, b: Expression(Op.OR, a, b), sub, sub),
            st.builds(lambda a: Expression(Op.NOT, a), sub),
        ),
        max_leaves=8,
    )


@given(trees(scalars))
@settings(max_examples=200, deadline=None)
def test_text_round_trip(expr: Expression) -> None:
    assert parse(to_text(expr)) == expr


# -- evaluator semantics ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "metadata", "expected"),
    [
        ("genre == 'drama' && year >= 2020", {"genre": "drama", "year": 2021}, True),
        ("genre == 'drama' && year >= 2020", {"genre": "drama", "year": 2019}, False),
        ("genre != 'drama'", {}, False),  # a missing key fails every comparison
        ("NOT genre == 'drama'", {}, True),
        ("genre NIN ['drama']", {}, False),
        ("genre NIN ['drama']", {"genre": "comedy"}, True),
        ("year == '2020'", {"year": 2020}, False),  # kinds do not mix
        ("year != '2020'", {"year": 2020}, True),
        ("year > 'a'", {"year": 2020}, False),
        ("flag == 1", {"flag": True}, False),  # booleans are not numbers
        ("flag == true", {"flag": True}, True),
        ("n == 1", {"n": 1.0}, True),
        ("n IN [1, 2]", {"n": 2}, True),
        ("x IS NULL", {"x": None}, True),
        ("x IS NULL", {}, True),
        ("x IS NOT NULL", {"x": 0}, True),
        ("tags == 'a'", {"tags": ["a"]}, False),
    ],
)
def test_evaluate(text: str, metadata: dict[str, Any], expected: bool) -> None:
    assert evaluate(parse(text), metadata) is expected


# -- SQL translation agrees with the evaluator in real SQLite ---------------------------------------

sql_values = st.one_of(
    st.text(alphabet="ab'\"\\ é%_", max_size=3),
    st.integers(min_value=-3, max_value=3),
    st.sampled_from([-1.5, 0.0, 0.5, 2.0, 1e10]),
    st.booleans(),
)
metadata_strategy = st.lists(
    st.dictionaries(
        st.sampled_from(["a", "b", "c", "year", "meta.x", "and", "odd key", "it's"]),
        st.one_of(sql_values, st.none(), st.just(["a", 1])),
        max_size=5,
    ),
    min_size=1,
    max_size=8,
)


@pytest.fixture(scope="module")
def conn() -> Any:
    c = sqlite3.connect(":memory:")
    c.execute("CREATE TABLE docs (idx INTEGER, metadata TEXT)")
    yield c
    c.close()


@given(trees(sql_values), metadata_strategy)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_sql_translation_agrees_with_evaluator(conn: Any, expr: Expression, rows: list[dict[str, Any]]) -> None:
    conn.execute("DELETE FROM docs")
    conn.executemany("INSERT INTO docs VALUES (?, ?)", [(i, json.dumps(m)) for i, m in enumerate(rows)])
    where, params = to_sql(expr)
    selected = {i for (i,) in conn.execute(f"SELECT idx FROM docs WHERE {where}", params)}
    expected = {i for i, m in enumerate(rows) if evaluate(expr, m)}
    assert selected == expected, (to_text(expr), where, rows)


def test_sql_binds_values_and_never_inlines_them() -> None:
    evil = "x'); DROP TABLE docs; --"
    where, params = to_sql(F.and_(F.eq("genre", evil), F.in_("k", "a", 1)))
    assert evil not in where and "genre" not in where
    assert evil in params and '$."genre"' in params
    assert where.count("?") == len(params)


def test_sql_rejects_unaddressable_key_and_bad_column() -> None:
    with pytest.raises(FilterExpressionError):
        to_sql(F.eq('we"ird', 1))
    with pytest.raises(ValueError):
        to_sql(F.eq("a", 1), column="metadata; DROP TABLE x")
