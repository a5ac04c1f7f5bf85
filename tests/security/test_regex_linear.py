"""Every regex-using function of the package runs in (about) linear time on crafted 50 KB input.

Each case is an input built to make a backtracking pattern split a long run every possible way
(runs of spaces, digits, ``#``, word characters, unclosed tags). The old Markdown heading pattern
took seconds on a 2 KB line and the partial parser's trailing-number pattern was quadratic in a
digit run; both would fail the 1 s bound here.
"""

from __future__ import annotations

import contextlib
import importlib
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import chatclient
from chatclient.converters.cleaning import clean_text, strip_thinking
from chatclient.converters.partial import parse_partial_json
from chatclient.errors import FilterExpressionError, ModelHTTPError
from chatclient.memory.sqlite import check_identifier
from chatclient.models.openai import response_format
from chatclient.models.structured_output import NATIVE, TOOL, rejection_reason
from chatclient.rag.embedding import HashingEmbeddingModel
from chatclient.rag.etl import MarkdownReader
from chatclient.rag.etl.readers import resolve_pointer
from chatclient.rag.etl.splitter import SimpleTokenEncoding
from chatclient.rag.filters import Expression, F, parse, to_sql, to_text
from chatclient.rag.stores.sqlite import SqliteVectorStore
from chatclient.tools.callback import FunctionToolCallback
from chatclient.tools.docstrings import parse_docstring

N = 50_000
LIMIT = 1.0


def _markdown() -> None:
    reader = MarkdownReader("unused.md")
    # "# a" + spaces + "b" took 2 s at 1000 spaces with the old heading regex (cubic)
    lines = ("# a" + " " * N + "b", "# a" + " #" * (N // 2) + "x", "#" + " " * N + "x #", "- " * (N // 2) + "x")
    for line in (*lines, "```" + " " * N + "x"):
        reader.parse(line)


def _partial() -> None:
    parse_partial_json('{"a": ' + "1" * N + "x")
    parse_partial_json('{"a": [' + "1," * (N // 2))
    parse_partial_json("1" * N)


def _incremental() -> None:
    from chatclient.converters.incremental import IncrementalJSON

    for text in ('["' + "a" * N, '["' + "\\n" * (N // 2) + "\x01", '{"' + "a" * N + '":"' + "b" * N):
        IncrementalJSON().feed(text)


def _mcp_names() -> None:
    from chatclient.mcp.client import _slug
    from chatclient.mcp.tools import safe_tool_name

    for text in ("a!" * (N // 2), "-" * N + "x", "é" * N):
        _slug(text)
        safe_tool_name(text)


def _resilience() -> None:
    from chatclient.errors import ModelHTTPError
    from chatclient.resilience.fallback import fallback_trigger
    from chatclient.resilience.ratelimit import parse_reset
    from chatclient.resilience.routing import ClassifierRouter

    for text in ("context " * (N // 8) + "x", "overloade" * (N // 9), "1" * N + "m", "1." * (N // 2) + "s"):
        fallback_trigger(ModelHTTPError(text, status=400, body=text))
        parse_reset(text)
    router = ClassifierRouter(None, {"billing": (None, "money questions")})  # type: ignore[arg-type]
    for answer in ("a." * (N // 2), "!" * N, "billin" * (N // 6)):
        assert router._pick(answer) == "billing"  # the default route: nothing matched


def _store_names() -> None:
    from advisors.tool_search import _words
    from chatclient.rag.filters import postgres as pg_filter
    from chatclient.rag.filters.redis import escape_tag
    from chatclient.rag.stores import chroma, pgvector, qdrant, redis

    hostile = ("a" * N + "!", "_" * N + " ", "1" * N + "kB!", "a." * (N // 2) + "-!")
    for text in hostile:
        escape_tag(text)
        _words(text + "Ab" * (N // 4))
        for pattern in (redis._NAME, pgvector._IDENT, pgvector._MEMORY, pg_filter._COLUMN, chroma._NAME, qdrant._PLAIN_KEY):
            pattern.match(text)
    pgvector._version("1." * (N // 2))


def _retrieval() -> None:
    from chatclient.rag.bm25 import tokenize
    from chatclient.rag.etl.html import HtmlReader
    from chatclient.rag.fts import SqliteFtsDocumentRetriever
    from chatclient.rag.query import Query
    from chatclient.rag.routing import Route

    # "<a " repeated with no ">": the tag scan of the HTML reader was quadratic here (60 kB: 10 s)
    for page in ("<a " * (N // 3), "<" * N + ">", "<p>" + "x " * (N // 2) + "\n" * N):
        HtmlReader(page).read()
    tokenize("a_" * (N // 2) + "!" + "é" * N)
    fts = SqliteFtsDocumentRetriever(table="t_" + "a" * 40)
    fts._match("word_" * (N // 5) + "é" * N)
    for table in ("a" * N + "!", "_" * N + " "):
        try:
            SqliteFtsDocumentRetriever(table=table)
        except ValueError:
            pass  # refused, as it should be: only the time of the check matters here
    route = Route(retriever=object(), when=r"\brefund\b")  # type: ignore[arg-type]
    route.matches(Query("refun " * (N // 6)))


def _cleaning() -> None:
    strip_thinking("<think>" * (N // 7))
    strip_thinking("<think>" + "</think " * (N // 8))
    strip_thinking("<!-- thinking:" + "-" * N)
    clean_text("```" + "a" * N)
    clean_text(" " * N + "<thinking" + " " * N)


def _splitter() -> None:
    SimpleTokenEncoding().encode(("a" * 100 + " " * 100 + "!?") * (N // 202))


def _embedding() -> None:
    HashingEmbeddingModel(dimensions=16).embed(["a" * N, "a " * (N // 2)])


def _filters() -> None:
    for text in ("k == " + "1" * N + ".", "k == 1" + "e" * N, "k" * N + " == 1", "k == '" + "\\u00e9" * (N // 6) + "'"):
        try:
            parse(text)
        except FilterExpressionError:
            pass
    to_text(F.eq("a." * (N // 2) + "b", 1))
    to_text(F.eq(" " * N, 1))
    for column in ("a" * N + ".", "a." + "b" * N + "!"):
        with pytest.raises(ValueError):
            to_sql(F.eq("k", 1), column)


def _sqlite_names() -> None:
    with pytest.raises(ValueError):
        SqliteVectorStore(":memory:", HashingEmbeddingModel(dimensions=8), table="a" * N + "!")
    with pytest.raises(ValueError):
        check_identifier("a" * N)


def _pointer() -> None:
    with pytest.raises(ValueError):
        resolve_pointer([1], "/" + "1" * N + "x")


def _docstrings() -> None:
    parse_docstring("Do it.\n\nArgs:\n    a" + " " * N + "x\n")
    parse_docstring("Do it.\n\n:param" + " " * N + "x\n")
    parse_docstring("Do it.\n\n:param " + "a " * (N // 2) + "x\n")
    parse_docstring("Do it.\n\nParameters\n----------\n" + "a" + " " * N + "x\n")


def _tool_names() -> None:
    def f() -> None:
        """Nothing."""

    with pytest.raises(ValueError):
        FunctionToolCallback(f, name="a" * N)


def _openai_names() -> None:
    response_format({"type": "object", "title": "é" * N, "properties": {}})


def _rejections() -> None:
    for rung in (NATIVE, TOOL):
        error = ModelHTTPError("bad request", status=400, body="tool" * (N // 4) + "_" + "format" * (N // 6))
        rejection_reason(error, rung)


def _http_headers() -> None:
    from chatclient.models import http

    http._credential_headers({"x-" + "a" * N: "v", "authx" * (N // 5): "v"})
    with pytest.raises(ValueError):
        http._check_headers({"a" * N + " ": "v"})


def _safeguard() -> None:
    from advisors.safeguard import normalize_for_matching

    normalize_for_matching("\u200b" * N + "a\u00ad" * (N // 2))


def _guardrails() -> None:
    from chatclient.guardrails import PiiRedactionGuardrail, PromptInjectionGuardrail, redact_pii

    hostile = (
        "a" * N + "@",
        "a@" + "b." * (N // 2),
        "a@" * (N // 2),
        "1" * N,
        "1 " * (N // 2),
        "+(" * (N // 2),
        "1-" * (N // 2) + "x",
        ("x" * 70 + "@") * (N // 71),
        "ignore " * (N // 7),
        "ignore all " + "previous " * (N // 9),
        "you are now " * (N // 12),
        "A" * N,
        "<|" * (N // 2),
        "#" * N,
        "### " * (N // 4),
        "show " * (N // 5),
        "what is " * (N // 8),
        "system: " * (N // 8),
        ("a" * 199 + " ") * (N // 200),
    )
    guard = PromptInjectionGuardrail()
    for text in hostile:
        redact_pii(text)
        guard.findings(text)
    PiiRedactionGuardrail().redact("4111 1111 1111 1111 " * (N // 20))


def _gbnf() -> None:
    from chatclient.models.llamacpp import strict_json_gbnf

    strict_json_gbnf(("char ::= [^" + '"' * 10 + "\n") * (N // 20))


def _eval_regex() -> None:
    # Patterns that backtrack badly in `re` ((a+)+b is exponential, \s*\d+\s*x quadratic in a search);
    # user-supplied patterns run on RE2, linear in the answer (tests/security/test_regex_re2.py: 1 MB).
    from chatclient.evaluation.deterministic import RegexEvaluator
    from chatclient.patterns import LinearPattern

    assert not RegexEvaluator(r"(a+)+b").evaluate("a" * N).passed
    assert not RegexEvaluator(r"\s*\d+\s*x").evaluate(" " * (N // 2) + "1" * (N // 2)).passed
    assert LinearPattern(r"(\w|\d)*!").search("a" * 5_000) is None


def _terminal_and_cassette() -> None:
    from chatclient.evaluation.report import terminal_safe
    from chatclient.testing.cassette import _CREDENTIAL_NAME, _redact_query

    terminal_safe("\x1b[" * (N // 2) + "a" * N)
    for text in ("k" * N, "sig" * (N // 3), "ke" * (N // 2)):
        _CREDENTIAL_NAME.search(text)
    _redact_query("http://h/p?" + "key=1&" * (N // 6))


def _round3() -> None:
    # The round-3 modules' patterns; the progress line filter took cubic time on a digit run before.
    from chatclient.agents.agent import _PLACEHOLDER
    from chatclient.agents.tool import _tool_name
    from chatclient.batch.anthropic import _REQUEST_INDEX
    from chatclient.batch.jobs import _ID
    from chatclient.models.openai_responses import _REASONING_MODEL, text_format
    from chatclient.progress import _CLOCK
    from chatclient.skills.skill import _NAME

    for text in ("1" * N, "1." * (N // 2), "{{ " + "a" * N, "{{" * (N // 2), "requests." * (N // 9), "item-1" * (N // 6)):
        _CLOCK.sub("", text)
        _CLOCK.sub("", "?" + text)
        list(_PLACEHOLDER.finditer(text))
        _tool_name(text)
        _REQUEST_INDEX.search(text)
        _ID.search(text)
        _REASONING_MODEL.search(text)
        _NAME.match(text)
        text_format({"title": text})


def _a2a_names() -> None:
    pytest.importorskip("a2a", reason="the A2A client needs the a2a extra")
    from chatclient.a2a.client import _slug

    for text in ("a" * N, "-" * N, "a-" * (N // 2), "é " * (N // 2)):
        _slug(text)


def _plugin_names() -> None:
    from chatclient.testing.pytest_plugin import _SAFE_NAME

    _SAFE_NAME.sub("_", "[" * N + "a" * N)


def _memory_errors() -> None:
    from chatclient.memory._errors import connection_secrets, scrub_text

    for text in ("a" * N, "a://" * (N // 4), "://" + "x" * N, "password='" * (N // 10), "password" + " " * N):
        connection_secrets(text)
        scrub_text(text, ["s3cret-pass"])


def _round4() -> None:
    from chatclient._pickling import _SECRET_ARGUMENT

    assert _SECRET_ARGUMENT.search("a" * N + "_api") is None
    from chatclient.agents.patterns import unanimous_last_word

    assert unanimous_last_word(["a-" * (N // 2) + "AGREE", "x " * (N // 2) + "agree."])


CASES: dict[str, Callable[[], None]] = {
    "chatclient/_pickling.py": _round4,
    "chatclient/agents/patterns.py": _round4,
    "chatclient/memory/_errors.py": _memory_errors,
    "chatclient/patterns.py": _eval_regex,
    "chatclient/evaluation/report.py": _terminal_and_cassette,
    "chatclient/testing/cassette.py": _terminal_and_cassette,
    "chatclient/progress.py": _round3,
    "chatclient/agents/agent.py": _round3,
    "chatclient/agents/tool.py": _round3,
    "chatclient/batch/anthropic.py": _round3,
    "chatclient/batch/jobs.py": _round3,
    "chatclient/models/openai_responses.py": _round3,
    "chatclient/skills/skill.py": _round3,
    "chatclient/testing/pytest_plugin.py": _plugin_names,
    "chatclient/a2a/client.py": _a2a_names,
    "chatclient/rag/etl/readers.py": _markdown,
    "chatclient/converters/partial.py": _partial,
    "chatclient/converters/cleaning.py": _cleaning,
    "chatclient/rag/bm25.py": _retrieval,
    "chatclient/rag/etl/html.py": _retrieval,
    "chatclient/rag/fts.py": _retrieval,
    "chatclient/rag/routing.py": _retrieval,
    "chatclient/resilience/fallback.py": _resilience,
    "chatclient/resilience/ratelimit.py": _resilience,
    "chatclient/resilience/routing.py": _resilience,
    "advisors/tool_search.py": _store_names,
    "chatclient/rag/filters/postgres.py": _store_names,
    "chatclient/rag/filters/redis.py": _store_names,
    "chatclient/rag/stores/chroma.py": _store_names,
    "chatclient/rag/stores/pgvector.py": _store_names,
    "chatclient/rag/stores/qdrant.py": _store_names,
    "chatclient/rag/stores/redis.py": _store_names,
    "chatclient/mcp/client.py": _mcp_names,
    "chatclient/mcp/tools.py": _mcp_names,
    "chatclient/converters/incremental.py": _incremental,
    "chatclient/rag/etl/splitter.py": _splitter,
    "chatclient/rag/embedding.py": _embedding,
    "chatclient/rag/filters/parser.py": _filters,
    "chatclient/rag/filters/ast.py": _filters,
    "chatclient/rag/filters/sql.py": _filters,
    "chatclient/rag/stores/sqlite.py": _sqlite_names,
    "chatclient/memory/sqlite.py": _sqlite_names,
    "chatclient/rag/etl/readers.py#pointer": _pointer,
    "chatclient/tools/docstrings.py": _docstrings,
    "chatclient/tools/names.py": _tool_names,
    "chatclient/models/openai.py": _openai_names,
    "chatclient/models/structured_output.py": _rejections,
    "chatclient/models/http/credentials.py": _http_headers,
    "advisors/safeguard.py": _safeguard,
    "chatclient/normalize.py": _safeguard,
    "chatclient/guardrails.py": _guardrails,
    "chatclient/models/llamacpp.py": _gbnf,
}


@pytest.mark.parametrize(("module", "case"), CASES.items(), ids=CASES.keys())
def test_regex_user_is_linear_on_hostile_input(module: str, case: Callable[[], None]) -> None:
    # Import the module first, untimed: the bound is on the patterns, not on importing an SDK.
    with contextlib.suppress(ImportError):
        importlib.import_module(module.split("#")[0].removesuffix(".py").removesuffix("/__init__").replace("/", "."))
    start = time.perf_counter()
    case()
    assert time.perf_counter() - start < LIMIT


def test_every_module_using_regexes_has_a_case() -> None:
    """A new regex in the package must come with a hostile-input case above."""
    root = Path(chatclient.__file__).parent.parent
    using = set()
    for package in ("chatclient", "advisors"):
        for path in (root / package).rglob("*.py"):
            source = path.read_text(encoding="utf-8")
            if "import re\n" in source or "from re import" in source or "import regex" in source:
                using.add(path.relative_to(root).as_posix())
    assert using, "the scan found no module at all; the test itself is broken"
    covered = {name.split("#")[0] for name in CASES}
    assert using <= covered, f"regexes without a linear-time case: {sorted(using - covered)}"


def test_the_markdown_heading_still_parses() -> None:
    docs = MarkdownReader("unused.md").parse("## Title ##\ntext\n# C#\nmore")
    assert [(d.metadata.get("title"), d.metadata.get("category"), d.text) for d in docs] == [
        ("Title", "header_2", "text"),
        ("C", "header_1", "more"),
    ]


def test_partial_numbers_are_still_held_back() -> None:
    assert not isinstance(parse_partial_json('{"a": 12'), dict)  # 12 may still become 123
    assert parse_partial_json('{"a": 12,') == {"a": 12}
    assert not isinstance(parse_partial_json('{"a": -'), dict)
    assert parse_partial_json('{"a": "12"') == {"a": "12"}
    assert isinstance(F.eq("k", 1), Expression)
