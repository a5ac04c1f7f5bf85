"""Metadata filter expressions: parse text, build in code, evaluate in memory, translate to SQL.

from chatclient.rag.filters import parse, F, evaluate, to_sql
expr = parse("genre == 'drama' && year >= 2020")
assert expr == F.and_(F.eq("genre", "drama"), F.gte("year", 2020))
evaluate(expr, {"genre": "drama", "year": 2021})   # True
to_sql(expr)   # ("(... AND ...)", [params...]) for SQLite json_extract
"""

from __future__ import annotations

from chatclient.errors import FilterExpressionError
from chatclient.rag.filters.ast import MAX_FILTER_DEPTH, Expression, Key, Op, Value, to_text
from chatclient.rag.filters.builder import F
from chatclient.rag.filters.evaluator import compile_filter, evaluate
from chatclient.rag.filters.parser import as_expression, parse
from chatclient.rag.filters.sql import to_sql

__all__ = [
    "MAX_FILTER_DEPTH",
    "Expression",
    "F",
    "FilterExpressionError",
    "Key",
    "Op",
    "Value",
    "as_expression",
    "compile_filter",
    "evaluate",
    "parse",
    "to_sql",
    "to_text",
]
