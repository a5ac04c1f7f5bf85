"""Evaluators that need no model: exact match, substrings, regex, JSON schema, entity fields, tool calls.

Each compares against what its constructor was given or, when that is left out, the case's
reference (``expected`` in a dataset). They return the same ``EvaluationResult`` as the judged ones,
with a ``reasoning`` that says what was compared.

    ExactMatchEvaluator().evaluate("Paris", reference="paris").passed   # True (case-insensitive)
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from chatclient.errors import EvaluationError
from chatclient.evaluation.base import EvaluationResult, require, to_request

_SHOW = 80  # characters of a value quoted in a reasoning


def _show(value: Any) -> str:
    """A short rendering: strings quoted, other values as JSON."""
    if isinstance(value, str):
        return repr(value if len(value) <= _SHOW else value[: _SHOW - 1] + "…")
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= _SHOW else text[: _SHOW - 1] + "…"


def _normalise(text: str, case_sensitive: bool) -> str:
    text = " ".join(text.split())
    return text if case_sensitive else text.casefold()


class ExactMatchEvaluator:
    """The answer equals ``expected`` (or the reference), ignoring surrounding and repeated whitespace.

    ``case_sensitive=False`` (the default) also ignores letter case.
    """

    name = "exact_match"

    def __init__(self, expected: str | None = None, *, case_sensitive: bool = False) -> None:
        self.expected = expected
        self.case_sensitive = case_sensitive

    def evaluate(self, response_or_request: Any, **parts: Any) -> EvaluationResult:
        """Compare the answer with the expected text."""
        request = to_request(response_or_request, **parts)
        expected = str(require(self.expected or request.reference, "an expected text", self.name, "pass expected="))
        answer = request.answer or ""
        ok = _normalise(answer, self.case_sensitive) == _normalise(expected, self.case_sensitive)
        why = f"the answer {_show(answer)} {'equals' if ok else 'differs from'} the expected {_show(expected)}"
        return EvaluationResult(ok, 1.0 if ok else 0.0, why, "" if ok else f"answer exactly {_show(expected)}", self.name)


class ContainsEvaluator:
    """The answer contains every one of ``phrases`` (case-insensitive); the score is the share found.

    ``any_of=True`` passes when at least one is found. Without phrases, the reference is used (a
    string or a list of strings).
    """

    name = "contains"

    def __init__(self, phrases: Sequence[str] | str | None = None, *, any_of: bool = False) -> None:
        self.phrases = [phrases] if isinstance(phrases, str) else (list(phrases) if phrases is not None else None)
        self.any_of = any_of

    def evaluate(self, response_or_request: Any, **parts: Any) -> EvaluationResult:
        """Look for the phrases in the answer."""
        request = to_request(response_or_request, **parts)
        phrases = self.phrases
        if phrases is None:
            ref = require(request.reference, "phrases to look for", self.name, "pass phrases=[...] or a reference")
            phrases = [ref] if isinstance(ref, str) else [str(p) for p in ref]
        if not phrases:
            raise EvaluationError(f"{self.name}: the list of phrases is empty; give at least one phrase")
        answer = _normalise(request.answer or "", False)
        found = [p for p in phrases if _normalise(p, False) in answer]
        missing = [p for p in phrases if p not in found]
        ok = bool(found) if self.any_of else not missing
        score = len(found) / len(phrases)
        why = f"found {len(found)} of {len(phrases)} phrase(s)" + (f"; missing {_show(missing)}" if missing else "")
        return EvaluationResult(ok, score, why, "" if ok else f"mention {_show(missing)}", self.name)


# -- regex ----------------------------------------------------------------------------------------


class RegexEvaluator:
    """The answer matches ``pattern`` somewhere (``full=True``: as a whole).

    The pattern uses Python's syntax but runs on RE2 (``chatclient.patterns.LinearPattern``), whose
    time is linear in the answer's length whatever the answer holds, so a hostile or unlucky answer
    cannot hang an eval run; backreferences and lookaround are refused when the evaluator is built.
    """

    name = "regex"

    def __init__(self, pattern: str, *, full: bool = False, ignore_case: bool = True) -> None:
        from chatclient.patterns import IGNORECASE, LinearPattern

        self.pattern = LinearPattern(pattern, IGNORECASE if ignore_case else 0)
        self.full = full

    def evaluate(self, response_or_request: Any, **parts: Any) -> EvaluationResult:
        """Match the pattern against the answer."""
        request = to_request(response_or_request, **parts)
        answer = request.answer or ""
        if self.full:
            span = (0, len(answer.strip())) if self.pattern.fullmatch(answer.strip()) else None
            answer = answer.strip()
        else:
            span = self.pattern.search(answer)
        ok = span is not None
        how = "matches" if ok else "does not match"
        why = f"the answer {how} /{self.pattern.pattern}/" + (f" (at {_show(answer[span[0]:span[1]])})" if span else "")
        return EvaluationResult(ok, 1.0 if ok else 0.0, why, "" if ok else f"answer in the form /{self.pattern.pattern}/", self.name)


# -- JSON -----------------------------------------------------------------------------------------


def _answer_json(answer: str | None, name: str) -> tuple[Any, str | None]:
    from chatclient.converters import clean_text, first_json_value
    from chatclient.jsonsafe import JSONDepthError, loads

    if not answer or not answer.strip():
        return None, "the answer is empty"
    segment = first_json_value(clean_text(answer))
    if segment is None:
        return None, "the answer holds no JSON value"
    try:
        return loads(segment), None
    except (JSONDepthError, ValueError) as exc:
        return None, f"the answer's JSON is not usable ({str(exc)[:120]})"


class JsonSchemaEvaluator:
    """The answer is JSON that validates against ``schema`` (a JSON Schema dict, or a type with one).

    The score is 1.0 for a valid value, else 1 / (1 + number of problems).
    """

    name = "json_schema"

    def __init__(self, schema: Mapping[str, Any] | type | None = None) -> None:
        if schema is not None and not isinstance(schema, Mapping):
            from pydantic import TypeAdapter

            schema = TypeAdapter(schema).json_schema()
        self.schema = dict(schema) if schema is not None else None

    def evaluate(self, response_or_request: Any, **parts: Any) -> EvaluationResult:
        """Validate the answer's JSON."""
        from jsonschema import Draft202012Validator  # type: ignore[import-untyped]

        request = to_request(response_or_request, **parts)
        schema = self.schema if self.schema is not None else request.reference
        if not isinstance(schema, Mapping):
            raise EvaluationError(f"{self.name} needs a JSON Schema (a dict): pass schema= or a reference schema")
        value, problem = _answer_json(request.answer, self.name)
        if problem:
            return EvaluationResult(False, 0.0, problem, "answer with a JSON value only", self.name)
        errors = [
            f"at {'/'.join(str(p) for p in e.absolute_path) or '$'}: {e.message[:150]}"
            for e in list(Draft202012Validator(schema).iter_errors(value))[:20]
        ]
        if not errors:
            return EvaluationResult(True, 1.0, "the answer's JSON matches the schema", "", self.name)
        why = f"{len(errors)} schema problem(s): " + "; ".join(errors[:5])
        return EvaluationResult(False, 1.0 / (1 + len(errors)), why, "fix: " + "; ".join(errors[:3]), self.name)


def _field(value: Any, path: str) -> tuple[bool, Any]:
    current = value
    for part in path.split("."):
        if isinstance(current, Mapping):
            if part not in current:
                return False, None
            current = current[part]
        elif isinstance(current, Sequence) and not isinstance(current, str) and part.isdigit():
            index = int(part)
            if index >= len(current):
                return False, None
            current = current[index]
        elif hasattr(current, part):
            current = getattr(current, part)
        else:
            return False, None
    return True, current


class EntityFieldsEvaluator:
    """Named fields of the answer equal expected values: ``EntityFieldsEvaluator({"name": "Ada", "born": 1815})``.

    The entity is the request's ``entity`` (a converted value) or the answer's JSON. Paths may use
    dots (``"author.name"``, ``"items.0"``). The score is the share of fields that match.
    """

    name = "entity_fields"

    def __init__(self, expected: Mapping[str, Any] | None = None) -> None:
        self.expected = dict(expected) if expected is not None else None

    def evaluate(self, response_or_request: Any, **parts: Any) -> EvaluationResult:
        """Compare the entity's fields with the expected ones."""
        request = to_request(response_or_request, **parts)
        expected = self.expected if self.expected is not None else request.reference
        if not isinstance(expected, Mapping) or not expected:
            raise EvaluationError(f"{self.name} needs expected fields (a non-empty dict): pass expected={{...}}")
        entity = request.entity
        if entity is None:
            entity, problem = _answer_json(request.answer, self.name)
            if problem:
                return EvaluationResult(False, 0.0, problem, "answer with a JSON object", self.name)
        if hasattr(entity, "model_dump"):
            entity = entity.model_dump()
        wrong: list[str] = []
        for path, want in expected.items():
            present, got = _field(entity, str(path))
            if not present:
                wrong.append(f"{path} is missing (expected {_show(want)})")
            elif got != want:
                wrong.append(f"{path} is {_show(got)}, expected {_show(want)}")
        ok = not wrong
        score = (len(expected) - len(wrong)) / len(expected)
        why = f"all {len(expected)} field(s) match" if ok else "; ".join(wrong[:10])
        return EvaluationResult(ok, score, why, "" if ok else "correct: " + "; ".join(wrong[:5]), self.name)


class ToolCallEvaluator:
    """The tool loop ran the expected tools: ``ToolCallEvaluator(["weather"], arguments={"weather": {"city": "Oslo"}})``.

    ``expected`` lists tool names that must have been called (``ordered=True``: in this order, as a
    subsequence); ``arguments`` maps a tool name to arguments that one of its calls must have had
    (a subset match); ``forbidden`` lists tools that must not run. Without ``expected``, the
    reference is used (a list of names).
    """

    name = "tool_calls"

    def __init__(
        self,
        expected: Sequence[str] | None = None,
        *,
        arguments: Mapping[str, Mapping[str, Any]] | None = None,
        forbidden: Sequence[str] = (),
        ordered: bool = False,
    ) -> None:
        self.expected = list(expected) if expected is not None else None
        self.arguments = {k: dict(v) for k, v in (arguments or {}).items()}
        self.forbidden = list(forbidden)
        self.ordered = ordered

    def evaluate(self, response_or_request: Any, **parts: Any) -> EvaluationResult:
        """Check the tool calls recorded on the response."""
        request = to_request(response_or_request, **parts)
        expected = self.expected
        if expected is None:
            ref = request.reference
            expected = [ref] if isinstance(ref, str) else [str(x) for x in (ref or [])]
        calls = [(e.name, _arguments(e.arguments)) for e in request.tool_executions]
        names = [n for n, _ in calls]
        problems: list[str] = []
        checks = 0
        for tool_name in expected:
            checks += 1
            if tool_name not in names:
                problems.append(f"{tool_name} was not called")
        if self.ordered and not problems and not _is_subsequence(expected, names):
            checks += 1
            problems.append(f"the calls ran in the order {names}, expected {expected}")
        for tool_name, want in self.arguments.items():
            checks += 1
            if not any(n == tool_name and all(args.get(k) == v for k, v in want.items()) for n, args in calls):
                seen = [args for n, args in calls if n == tool_name]
                problems.append(f"no {tool_name} call had arguments {_show(want)} (saw {_show(seen)})")
        for tool_name in self.forbidden:
            checks += 1
            if tool_name in names:
                problems.append(f"{tool_name} was called but must not be")
        ok = not problems
        score = 1.0 if checks == 0 else (checks - len(problems)) / checks
        why = f"tool calls {names} meet every expectation" if ok else "; ".join(problems)
        return EvaluationResult(ok, max(score, 0.0), why, "" if ok else "; ".join(problems), self.name)


def _arguments(text: Any) -> dict[str, Any]:
    if isinstance(text, Mapping):
        return dict(text)
    try:
        from chatclient.jsonsafe import loads

        value = loads(text) if isinstance(text, str) else None
    except ValueError:
        return {}
    return dict(value) if isinstance(value, Mapping) else {}


def _is_subsequence(wanted: Sequence[str], seen: Sequence[str]) -> bool:
    it = iter(seen)
    return all(any(w == s for s in it) for w in wanted)


__all__ = [
    "ContainsEvaluator",
    "EntityFieldsEvaluator",
    "ExactMatchEvaluator",
    "JsonSchemaEvaluator",
    "RegexEvaluator",
    "ToolCallEvaluator",
]
