"""Issue 26 item 14: every user-supplied pattern runs on RE2, in time linear in the text.

Catastrophic patterns (exponential and quadratic in a backtracking engine) meet 1 MB inputs under a
time bound in each place that takes a pattern as a string: the regex evaluator and dataset checks,
``KeywordGuardrail``, ``PromptInjectionGuardrail(patterns=...)`` and a retrieval route's ``when``.
Backreferences and lookaround are refused with an error that says why.
"""

from __future__ import annotations

import pickle
import re
import time
from collections.abc import Callable

import pytest

from chatclient.errors import EvaluationError
from chatclient.evaluation import RegexEvaluator, load_dataset
from chatclient.guardrails import KeywordGuardrail, PromptInjectionGuardrail
from chatclient.patterns import IGNORECASE, LinearPattern
from chatclient.rag.query import Query
from chatclient.rag.routing import Route

MB = 1_000_000
LIMIT = 2.0  # seconds for a whole case; RE2 takes milliseconds, `re` would take longer than the universe

# (pattern, hostile text): each is exponential or polynomial for a backtracking engine.
CATASTROPHIC: list[tuple[str, str]] = [
    (r"(a+)+b", "a" * MB),
    (r"(a|aa)*c", "a" * MB),
    (r"(\w|\d)*!", "1" * MB),
    (r"\s*\d+\s*x", " " * (MB // 2) + "1" * (MB // 2)),
    (r"(x+x+)+y", "x" * MB),
    (r"^(([a-z])+.)+[A-Z]([a-z])+$", "a" * MB + "!"),
]


def _timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


@pytest.mark.parametrize(("pattern", "text"), CATASTROPHIC, ids=[p for p, _ in CATASTROPHIC])
def test_catastrophic_patterns_on_1mb_inputs_finish_in_time(pattern: str, text: str) -> None:
    compiled = LinearPattern(pattern)

    def run() -> None:
        assert compiled.search(text) is None
        assert not compiled.fullmatch(text)
        # (the evaluator reads at most 20,000 characters of an answer and marks the cut: match it whole)
        assert not RegexEvaluator(pattern, full=True).evaluate(text).passed
        assert KeywordGuardrail(patterns=[pattern]).matches(text) == []
        assert PromptInjectionGuardrail(patterns={"custom": pattern}).findings(text) == []
        assert not Route(object(), when=pattern).matches(Query(text))  # type: ignore[arg-type]

    assert _timed(run) < LIMIT


def test_matches_are_still_found_with_python_syntax() -> None:
    assert LinearPattern(r"\bord(er)?\b", IGNORECASE).search("Advisors run in ORDER.") == (16, 21)
    assert LinearPattern(r"(?P<year>\d{4})").search("born 1815") == (5, 9)
    assert LinearPattern(r"é+").search("café é") == (3, 4)  # spans count characters, not bytes
    assert RegexEvaluator(r"\d{4}").evaluate("Ada Lovelace was born in 1815.").reasoning.endswith("(at '1815')")
    assert KeywordGuardrail(patterns=[r"(?i)drop\s+table"]).matches("DROP  table x") == ["pattern '(?i)drop\\\\s+table'"]
    assert Route(object(), when=r"\binstall\b").matches(Query("How do I INSTALL it?"))  # type: ignore[arg-type]
    assert LinearPattern("a.b", re.DOTALL).fullmatch("a\nb") and not LinearPattern("a.b").fullmatch("a\nb")
    assert LinearPattern("^b$", re.MULTILINE).search("a\nb\nc") == (2, 3)


@pytest.mark.parametrize(
    ("pattern", "why"),
    [
        (r"(a)\1", "backreference"),
        (r"(?P<x>a)(?P=x)", "not a valid regular expression"),
        (r"foo(?=bar)", "lookaround"),
        (r"foo(?!bar)", "lookaround"),
        (r"(?<=a)b", "lookaround"),
        (r"(?<!a)b", "lookaround"),
        (r"end\Z", r"\\z"),
        (r"a{5000}", "not a valid regular expression"),
        ("(", "not a valid regular expression"),
    ],
)
def test_unsupported_patterns_are_refused_with_the_reason(pattern: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        LinearPattern(pattern)
    with pytest.raises(ValueError, match=why):
        KeywordGuardrail(patterns=[pattern])


def test_a_dataset_with_a_backreference_is_an_evaluation_error() -> None:
    with pytest.raises(EvaluationError, match=r"case 'x'.*backreference"):
        load_dataset([{"id": "x", "input": "q", "expected": {"regex": r"(\w+) \1"}}])


def test_bounds_and_flags_are_checked() -> None:
    with pytest.raises(ValueError, match="longer than"):
        LinearPattern("a" * 5000)
    with pytest.raises(ValueError, match="only the flags"):
        LinearPattern("a", re.VERBOSE)
    with pytest.raises(ValueError, match="non-empty"):
        LinearPattern("")


def test_patterns_and_the_components_holding_them_pickle() -> None:
    pattern = LinearPattern(r"\bx+\b", IGNORECASE)
    again = pickle.loads(pickle.dumps(pattern))
    assert again == pattern and again.search("a XX b") == (2, 4)
    guard = pickle.loads(pickle.dumps(KeywordGuardrail(patterns=[r"(?i)secret"])))
    assert guard.matches("a SECRET") == ["pattern '(?i)secret'"]
    assert pickle.loads(pickle.dumps(RegexEvaluator(r"\d+"))).evaluate("a 12").passed


def test_a_compiled_python_pattern_is_still_accepted_as_given() -> None:
    # An explicit re.Pattern is the caller's choice of Python's engine (documented); strings go to RE2.
    guard = KeywordGuardrail(patterns=[re.compile(r"foo(?=bar)")])
    assert guard.matches("foobar") == ["pattern 'foo(?=bar)'"]
