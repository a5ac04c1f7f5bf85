"""Evaluation datasets: cases with an id, an input and what is expected, from JSONL, YAML or Python.

A JSONL line is ``{"id": "...", "input": "...", "expected": ...}``; ``expected`` is a reference
answer (text), or a dict of checks that become deterministic evaluators for that case:

    {"contains": ["advisor", "order"], "regex": "\\\\border\\\\b", "exact": "...",
     "json_schema": {...}, "fields": {"name": "Ada"}, "tool_calls": ["weather"], "reference": "..."}

``reference`` (or a plain-text ``expected``) is what ``AnswerCorrectnessEvaluator`` compares with.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from chatclient import jsonsafe
from chatclient.errors import EvaluationError

MAX_DATASET_BYTES = 20 * 1024 * 1024
MAX_CASES = 100_000
_CHECKS = ("contains", "any_of", "regex", "exact", "json_schema", "fields", "tool_calls", "reference")


@dataclass(frozen=True, slots=True)
class EvalCase:
    """One case: ``input`` (the user text, or a dict for an AI service), ``expected`` and free ``metadata``."""

    id: str
    input: Any
    expected: Any = None
    metadata: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id.strip():
            raise ValueError("a case id must be a non-empty string")
        if self.input is None or (isinstance(self.input, str) and not self.input.strip()):
            raise ValueError(f"case {self.id!r} has no input")

    @property
    def reference(self) -> Any:
        """The reference answer: ``expected`` when it is text, else ``expected["reference"]``."""
        if isinstance(self.expected, Mapping):
            return self.expected.get("reference")
        return self.expected

    def checks(self) -> list[Any]:
        """The deterministic evaluators this case's ``expected`` asks for (none for plain text)."""
        from chatclient.evaluation import deterministic as d

        exp = self.expected
        if not isinstance(exp, Mapping):
            return []
        unknown = sorted(set(exp) - set(_CHECKS))
        if unknown:
            raise EvaluationError(
                f"case {self.id!r}: unknown check(s) {unknown} in expected; use any of {list(_CHECKS)}"
            )
        out: list[Any] = []
        if "contains" in exp:
            out.append(d.ContainsEvaluator(exp["contains"]))
        if "any_of" in exp:
            out.append(d.ContainsEvaluator(exp["any_of"], any_of=True))
        if "regex" in exp:
            try:
                out.append(d.RegexEvaluator(str(exp["regex"])))
            except ValueError as exc:
                raise EvaluationError(f"case {self.id!r}: {exc}") from None
        if "exact" in exp:
            out.append(d.ExactMatchEvaluator(str(exp["exact"])))
        if "json_schema" in exp:
            out.append(d.JsonSchemaEvaluator(exp["json_schema"]))
        if "fields" in exp:
            out.append(d.EntityFieldsEvaluator(exp["fields"]))
        if "tool_calls" in exp:
            out.append(d.ToolCallEvaluator(list(exp["tool_calls"])))
        return out


def _case(raw: Any, where: str) -> EvalCase:
    if isinstance(raw, EvalCase):
        return raw
    if not isinstance(raw, Mapping):
        raise EvaluationError(f"{where}: a case must be an object with id, input and expected, got {type(raw).__name__}")
    if "input" not in raw:
        raise EvaluationError(f"{where}: the case has no 'input'")
    known = {"id", "input", "expected", "metadata"}
    extra = {k: v for k, v in raw.items() if k not in known}
    metadata = {**dict(raw.get("metadata") or {}), **extra}
    try:
        return EvalCase(str(raw.get("id") or where), raw["input"], raw.get("expected"), MappingProxyType(metadata))
    except ValueError as exc:
        raise EvaluationError(f"{where}: {exc}") from None


def _read(path: Path) -> str:
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise EvaluationError(f"cannot read the dataset {str(path)!r}: {exc.strerror}") from None
    if size > MAX_DATASET_BYTES:
        raise EvaluationError(f"the dataset {str(path)!r} is larger than {MAX_DATASET_BYTES} bytes; split it")
    return path.read_text(encoding="utf-8")


def _load_yaml(text: str, name: str) -> Any:
    """A YAML dataset through ``chatclient.yamlsafe``: no aliases (an alias bomb expands a few hundred
    bytes into billions of nodes), bounded nodes and nesting; refusals are ``EvaluationError``s."""
    from chatclient.yamlsafe import YAMLSafetyError, load

    try:
        return load(text, what=name)
    except YAMLSafetyError as exc:
        raise EvaluationError(str(exc)) from None
    except ImportError:  # pragma: no cover - pyyaml ships with the dev extra
        raise EvaluationError("reading YAML datasets needs PyYAML: pip install pyyaml") from None


def load_dataset(source: str | Path | Iterable[Any]) -> list[EvalCase]:
    """Cases from a ``.jsonl`` / ``.json`` / ``.yaml`` file, or from Python objects (dicts or ``EvalCase``).

    Ids must be unique; a case without an id gets its position (``line 3``). Errors say which
    line or case is wrong.
    """
    cases: list[EvalCase] = []
    if isinstance(source, (str, Path)):
        path = Path(source)
        text = _read(path)
        suffix = path.suffix.lower()
        if suffix == ".jsonl":
            for number, line in enumerate(text.splitlines(), 1):
                if not line.strip() or line.lstrip().startswith("//"):
                    continue
                try:
                    raw = jsonsafe.loads(line)
                except ValueError as exc:
                    raise EvaluationError(f"{path.name} line {number}: not valid JSON ({getattr(exc, 'msg', exc)})") from None
                cases.append(_case(raw, f"{path.name} line {number}"))
        elif suffix in (".yaml", ".yml"):
            data = _load_yaml(text, path.name)
            items = data.get("cases") if isinstance(data, Mapping) else data
            if not isinstance(items, list):
                raise EvaluationError(f"{path.name}: expected a list of cases (or a 'cases:' list)")
            cases = [_case(item, f"{path.name} case {i}") for i, item in enumerate(items, 1)]
        elif suffix == ".json":
            try:
                data = jsonsafe.loads(text)
            except ValueError as exc:
                raise EvaluationError(f"{path.name}: not valid JSON ({getattr(exc, 'msg', exc)})") from None
            items = data.get("cases") if isinstance(data, Mapping) else data
            if not isinstance(items, list):
                raise EvaluationError(f"{path.name}: expected a list of cases (or a 'cases' list)")
            cases = [_case(item, f"{path.name} case {i}") for i, item in enumerate(items, 1)]
        else:
            raise EvaluationError(f"{path.name}: unknown dataset format; use .jsonl, .json, .yaml or .yml")
    else:
        cases = [_case(item, f"case {i}") for i, item in enumerate(source, 1)]
    if len(cases) > MAX_CASES:
        raise EvaluationError(f"the dataset has more than {MAX_CASES} cases; split it")
    seen: set[str] = set()
    for case in cases:
        if case.id in seen:
            raise EvaluationError(f"the dataset has two cases with id {case.id!r}; ids must be unique")
        seen.add(case.id)
        case.checks()  # fail on a bad check now, not halfway through a run
    return cases


def as_cases(cases: Sequence[Any] | str | Path) -> list[EvalCase]:
    """``load_dataset`` for anything a runner accepts."""
    return load_dataset(cases)


__all__ = ["EvalCase", "load_dataset"]
