"""Issue 33 items 3 and 5: hostile evaluation datasets, baselines and model answers.

A YAML alias bomb (a few hundred bytes that expand to billions of nodes) is refused while loading;
the terminal table and the CLI's progress and error lines carry no control characters from a model
answer, a case id or a file; a baseline whose case lacks an id ends in exit 2 with a message.
"""

from __future__ import annotations

import io
import json
import time
from pathlib import Path

import pytest

from chatclient.errors import EvaluationError
from chatclient.evaluation import load_dataset
from chatclient.evaluation.cli import Progress, main
from chatclient.evaluation.report import render_table, terminal_safe
from chatclient.evaluation.runner import EvalReport, run_evaluation

# 9 levels of 9 aliases: 9**9 (387 million) leaves once expanded; one more level exhausts memory.
BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8)
) + "cases: [{id: one, input: *i}]\n"

ESCAPES = "\x1b]0;pwned\x07\x1b[2J\x1b[31mred\x9b1m\u202eevil\x00"


def test_a_yaml_alias_bomb_is_refused_fast(tmp_path: Path) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(BOMB, encoding="utf-8")
    assert len(BOMB.encode()) < 1000
    started = time.perf_counter()
    with pytest.raises(EvaluationError, match=r"bomb\.yaml line 2: YAML aliases"):
        load_dataset(path)
    assert time.perf_counter() - started < 2


def test_a_yaml_merge_key_alias_is_refused_too(tmp_path: Path) -> None:
    path = tmp_path / "merge.yaml"
    path.write_text("base: &b {input: hi}\ncases:\n  - <<: *b\n    id: one\n", encoding="utf-8")
    with pytest.raises(EvaluationError, match="aliases"):
        load_dataset(path)


def test_deep_yaml_nesting_is_a_typed_error(tmp_path: Path) -> None:
    path = tmp_path / "deep.yaml"
    path.write_text("cases: " + "[" * 5000 + "]" * 5000 + "\n", encoding="utf-8")
    with pytest.raises(EvaluationError, match="deeper than"):
        load_dataset(path)


def test_a_plain_yaml_dataset_still_loads(tmp_path: Path) -> None:
    path = tmp_path / "ok.yaml"
    path.write_text("cases:\n  - id: one\n    input: hi\n    expected: {contains: [hello]}\n", encoding="utf-8")
    [case] = load_dataset(path)
    assert (case.id, case.input, case.expected) == ("one", "hi", {"contains": ["hello"]})


def _report_with_escapes() -> EvalReport:
    return run_evaluation(lambda question: f"answer {ESCAPES}", [{"id": f"case{ESCAPES}", "input": "q"}], name=f"run{ESCAPES}")


def test_the_terminal_table_carries_no_control_characters() -> None:
    report = _report_with_escapes()
    table = render_table(report, baseline=report)
    assert not any((ch < " " and ch != "\n") or "\x7f" <= ch <= "\x9f" or ch == "\u202e" for ch in table)
    assert "answer ]0;pwned" in table  # the text stays readable, only the controls go


def test_progress_lines_and_cli_errors_carry_no_control_characters(tmp_path: Path) -> None:
    report = _report_with_escapes()
    err = io.StringIO()
    Progress(err)(1, 1, report.cases[0])
    assert "\x1b" not in err.getvalue() and err.getvalue().endswith("\n")
    dataset = tmp_path / "d.jsonl"
    dataset.write_text(json.dumps({"id": "x", "input": "q", "expected": {"bogus\x1b[2J": 1}}) + "\n", encoding="utf-8")
    err = io.StringIO()
    assert main(["eval", str(dataset), "--client", "tests.security.test_eval_inputs:make_target"], out=io.StringIO(), err=err) == 2
    assert "unknown check" in err.getvalue() and "\x1b" not in err.getvalue()


def make_target() -> object:
    return lambda question: "answer"


@pytest.mark.parametrize(
    "cases",
    [
        [{"input": "q", "passed": True}],
        [{"id": None}],
        ["not an object"],
        [{"id": "a", "latency": "fast"}],
        [{"id": "a", "results": [{"passed": True, "score": "high"}]}],
    ],
)
def test_a_malformed_baseline_ends_with_exit_2_and_a_message(tmp_path: Path, cases: list[object]) -> None:
    baseline = tmp_path / "baseline.json"
    baseline.write_text(json.dumps({"name": "old", "cases": cases}), encoding="utf-8")
    dataset = tmp_path / "d.jsonl"
    dataset.write_text(json.dumps({"id": "x", "input": "q"}) + "\n", encoding="utf-8")
    err = io.StringIO()
    status = main(
        ["eval", str(dataset), "--client", "tests.security.test_eval_inputs:make_target", "--baseline", str(baseline)],
        out=io.StringIO(),
        err=err,
    )
    assert status == 2
    assert err.getvalue().startswith("error: report case 1")


def test_terminal_safe_keeps_newlines_and_text() -> None:
    assert terminal_safe("a\x1b[1mb\nc\td\r") == "a[1mb\ncd"
