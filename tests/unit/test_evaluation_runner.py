"""The eval runner, its reports and the CLI, on the 30+-case dataset built from the project's docs.

The model under test answers from the docs themselves (the lines that share the most words with
the question), so two configurations — one line vs three lines of context — give two honestly
different runs to compare.
"""

from __future__ import annotations

import io
import json
import re
import threading
import time
from pathlib import Path

import pytest

from chatclient import ChatClient
from chatclient.errors import EvaluationError
from chatclient.evaluation import (
    EvalReport,
    ExactMatchEvaluator,
    load_dataset,
    render_html,
    render_table,
    run_evaluation,
)
from chatclient.evaluation.cli import main
from chatclient.evaluation.runner import percentile
from chatclient.prompt import Prompt
from chatclient.resilience.prices import ModelPrice, PriceTable
from chatclient.testing import FunctionChatModel

ROOT = Path(__file__).resolve().parents[2]
DATASET = ROOT / "tests" / "data" / "eval" / "docs.jsonl"
_WORD = re.compile(r"[a-z0-9_]+")


def _lines() -> list[str]:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return [line.strip() for f in files for line in f.read_text(encoding="utf-8").splitlines() if len(line.strip()) > 20]


LINES = _lines()


def answer_from_docs(question: str, top: int) -> str:
    words = set(_WORD.findall(question.lower())) - {"the", "a", "of", "do", "does", "is", "i", "how", "what", "which"}
    ranked = sorted(LINES, key=lambda line: -len(words & set(_WORD.findall(line.lower()))))
    return " ".join(ranked[:top])


def make_client(top: int = 3) -> ChatClient:
    """The app under test (also the CLI's --client factory)."""
    return ChatClient.create(FunctionChatModel(lambda p: answer_from_docs(p.user_message.text, top)))


def make_weak_client() -> ChatClient:
    return make_client(1)


def test_the_docs_dataset_has_30_cases_with_checks() -> None:
    cases = load_dataset(DATASET)
    assert len(cases) >= 30
    assert all(case.checks() and case.reference for case in cases)


def test_two_runs_report_and_compare() -> None:
    weak = run_evaluation(make_client(1), DATASET, name="one-line", concurrency=4)
    strong = run_evaluation(make_client(3), DATASET, name="three-lines", concurrency=4)
    for report in (weak, strong):
        assert report.total == len(load_dataset(DATASET))
        assert [c.id for c in report.cases] == [c.id for c in load_dataset(DATASET)]  # dataset order kept
        assert report.passed == sum(all(r.passed for r in c.results) for c in report.cases)
        assert report.pass_rate == pytest.approx(report.passed / report.total)
        assert all(c.results and c.results[0].evaluator == "contains" for c in report.cases)
        assert report.prompt_tokens > 0 and report.completion_tokens > 0
        assert 0 < report.latency_p50 <= report.latency_p95
    assert strong.pass_rate > weak.pass_rate  # more context answers more questions

    diff = strong.compare(weak)
    assert diff.better, "three lines of context should fix some cases"
    by_id = {c.id: c for c in weak.cases}
    for change in diff.better:
        assert change.score > by_id[change.id].score or (change.passed and not by_id[change.id].passed)
    assert len(diff.better) + len(diff.worse) + len(diff.unchanged) == strong.total
    assert diff.pass_rate_delta == pytest.approx(strong.pass_rate - weak.pass_rate)

    table = render_table(strong, baseline=weak)
    assert "case" in table.splitlines()[0] and "better" in table and "three-lines" in table
    page = render_html(strong, baseline=weak)
    for chart in ("chart-scores", "chart-evaluators", "chart-latency", "chart-diff"):
        assert f'id="{chart}"' in page
    assert "<script" not in page and " src=" not in page and " href=" not in page  # self-contained


def test_json_round_trip(tmp_path: Path) -> None:
    report = run_evaluation(make_client(), DATASET, [ExactMatchEvaluator()], concurrency=2)
    path = report.save(tmp_path / "out" / "report.json")
    loaded = EvalReport.load(path)
    assert loaded.summary() == report.summary()
    assert [c.to_dict() for c in loaded.cases] == [c.to_dict() for c in report.cases]
    data = json.loads(path.read_text())
    assert data["summary"]["evaluators"]["exact_match"]["total"] == report.total


def test_concurrency_is_bounded_and_errors_do_not_stop_the_run() -> None:
    live, peak, lock = 0, 0, threading.Lock()

    def answer(prompt: Prompt) -> str:
        nonlocal live, peak
        with lock:
            live += 1
            peak = max(peak, live)
        time.sleep(0.02)
        with lock:
            live -= 1
        if "boom" in prompt.user_message.text:
            raise RuntimeError("the model fell over")
        return "ok"

    cases = [{"id": f"c{i}", "input": "boom" if i == 3 else f"q{i}", "expected": {"exact": "ok"}} for i in range(12)]
    report = run_evaluation(ChatClient.create(FunctionChatModel(answer)), cases, concurrency=3)
    assert peak == 3
    assert report.errors == 1 and report.cases[3].error and "fell over" in report.cases[3].error
    assert report.passed == 11 and report.cases[3].score == 0.0


def test_callable_targets_costs_and_percentiles() -> None:
    report = run_evaluation(
        make_client(), [{"id": "a", "input": "In which order do advisors run?"}], prices={"*": (1_000_000.0, 0.0)}
    )
    assert report.cost == pytest.approx(report.prompt_tokens)  # $1 per input token at that price
    table = PriceTable({}).with_prices({"function": ModelPrice(input=2_000_000.0, output=1_000_000.0)})
    priced = run_evaluation(make_client(), [{"id": "a", "input": "In which order do advisors run?"}], prices=table)
    assert priced.cost == pytest.approx(2 * priced.prompt_tokens + priced.completion_tokens)
    plain = run_evaluation(lambda text: text.upper(), [{"id": "x", "input": "hi", "expected": {"exact": "HI"}}])
    assert plain.passed == 1
    assert percentile([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 95) == 10 and percentile([], 50) == 0.0


def test_dataset_errors_name_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "input": "x"}\n{not json}\n')
    with pytest.raises(EvaluationError, match="line 2"):
        load_dataset(bad)
    dup = tmp_path / "dup.yaml"
    dup.write_text("cases:\n  - {id: a, input: x}\n  - {id: a, input: y}\n")
    with pytest.raises(EvaluationError, match="two cases with id 'a'"):
        load_dataset(dup)
    with pytest.raises(EvaluationError, match="unknown check"):
        load_dataset([{"id": "a", "input": "x", "expected": {"containz": ["y"]}}])
    yaml_ok = tmp_path / "ok.yml"
    yaml_ok.write_text("- id: a\n  input: hello\n  expected: {regex: 'h.llo'}\n")
    assert load_dataset(yaml_ok)[0].checks()[0].name == "regex"


def test_cli_writes_reports_compares_and_fails_on_regression(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    out, err = io.StringIO(), io.StringIO()
    module = "tests.unit.test_evaluation_runner"
    status = main(["eval", str(DATASET), "--client", f"{module}:make_client", "--out", str(tmp_path / "base")], out=out, err=err)
    assert status == 0, err.getvalue()
    assert (tmp_path / "base" / "report.json").exists() and (tmp_path / "base" / "report.html").exists()
    progress = err.getvalue().splitlines()  # the bar's first state, then one line per case
    total = len(load_dataset(DATASET))
    assert len(progress) == total + 1 and f"| 0/{total} " in progress[0]
    assert progress[-1].startswith("eval: 100%") and f"| {total}/{total} " in progress[-1]

    out, err = io.StringIO(), io.StringIO()
    status = main(
        ["eval", str(DATASET), "--client", f"{module}:make_weak_client", "--baseline", str(tmp_path / "base" / "report.json"),
         "--out", str(tmp_path / "new"), "--fail-on-regression"],
        out=out, err=err,
    )
    assert status == 1 and "got worse than the baseline" in err.getvalue()
    assert "worse:" in out.getvalue()
    assert 'id="chart-diff"' in (tmp_path / "new" / "report.html").read_text()

    err = io.StringIO()
    assert main(["eval", str(DATASET), "--client", "nope_module:make"], out=io.StringIO(), err=err) == 2
    assert "cannot import 'nope_module'" in err.getvalue()


def test_progress_is_a_bar_on_a_terminal() -> None:
    from chatclient.evaluation.cli import Progress

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    screen = Terminal()
    report = run_evaluation(make_client(), list(load_dataset(DATASET))[:4], concurrency=1, progress=Progress(screen, width=8))
    text = screen.getvalue()
    # the project's one bar (tqdm): redrawn in place on a terminal, a newline only at the end
    assert text.count("\r") >= 2 and text.count("\n") == 1 and text.endswith("\n")
    last = text.rstrip("\n").rsplit("\r", 1)[-1]
    assert last.startswith("eval: 100%") and "4/4" in last and f"{report.passed} passed" in last
    assert "0/4" in text


def test_progress_is_one_line_per_case_in_a_log() -> None:
    from chatclient.evaluation.cli import Progress

    log = io.StringIO()
    report = run_evaluation(make_client(), list(load_dataset(DATASET))[:3], concurrency=1, progress=Progress(log))
    lines = log.getvalue().splitlines()
    assert "\r" not in log.getvalue()
    assert [line.split("|")[-1].split()[0] for line in lines[-3:]] == ["1/3", "2/3", "3/3"]
    assert lines[-1].startswith("eval: 100%") and report.cases[-1].id in lines[-1]


def test_python_dash_m_chatclient_eval(tmp_path: Path) -> None:
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-m", "chatclient", "eval", str(DATASET), "--client", "tests.unit.test_evaluation_runner:make_client",
         "--out", str(tmp_path), "--fail-under", "0.5"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "docs: " in result.stdout and "passed" in result.stdout
    assert EvalReport.load(tmp_path / "report.json").total == len(load_dataset(DATASET))


def _strict_judge(prompt: Prompt) -> str:
    """A judge that passes an answer when it repeats the reference's first word (a real, if simple, rule)."""
    text = prompt.user_message.text
    reference = text.split("Reference answer:\n", 1)[1].split("\n", 1)[0]
    answer = text.split("Answer to grade:\n", 1)[1].split("\n", 1)[0]
    ok = reference.split()[0].strip(".,:").lower() in answer.lower()
    return json.dumps({"reasoning": f"first word {'found' if ok else 'missing'}", "passed": ok, "score": float(ok), "feedback": ""})


def make_judge() -> FunctionChatModel:
    return FunctionChatModel(_strict_judge)


def make_evaluators() -> list[object]:
    from chatclient.evaluation import RegexEvaluator

    return [RegexEvaluator(r"\w+")]


def test_cli_judge_and_evaluators(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    module = "tests.unit.test_evaluation_runner"
    out, err = io.StringIO(), io.StringIO()
    status = main(
        ["eval", str(DATASET), "--client", f"{module}:make_client", "--judge", f"{module}:make_judge",
         "--evaluators", f"{module}:make_evaluators", "--out", str(tmp_path), "--concurrency", "2"],
        out=out, err=err,
    )
    assert status == 0, err.getvalue()
    report = EvalReport.load(tmp_path / "report.json")
    rates = report.evaluator_pass_rates()
    assert set(rates) == {"regex", "answer_correctness", "contains"}
    assert rates["answer_correctness"][1] == report.total  # every case has a reference
    judged = [r for c in report.cases for r in c.results if r.evaluator == "answer_correctness"]
    assert {r.reasoning for r in judged} <= {"first word found", "first word missing"}


def test_a_hostile_dataset_line_nested_too_deep_is_a_typed_error(tmp_path: Path) -> None:
    from chatclient.errors import EvaluationError
    from chatclient.evaluation import load_dataset

    path = tmp_path / "deep.jsonl"
    path.write_text('{"id": "a", "input": ' + "[" * 100_000 + "\n", encoding="utf-8")
    with pytest.raises(EvaluationError, match=r"line 1: not valid JSON .*deeper than"):
        load_dataset(path)
