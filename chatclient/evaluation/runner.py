"""Run a dataset through a ChatClient (or any callable) and evaluators, and compare runs.

    report = run_evaluation(client, "tests/data/eval/docs.jsonl", [RelevancyEvaluator(judge)], concurrency=4)
    print(report.pass_rate, report.latency_p95)
    report.save("out/report.json")
    diff = report.compare(EvalReport.load("baseline.json"))   # which cases got better or worse

Every case runs once; a case whose call raises is recorded as an error (failed, score 0) and the
run goes on. Each case's evaluators are the ones given plus the checks its ``expected`` names.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chatclient import jsonsafe
from chatclient.errors import EvaluationError
from chatclient.evaluation.base import EvaluationRequest, EvaluationResult, to_request
from chatclient.evaluation.dataset import EvalCase, load_dataset
from chatclient.models.base import ChatResponse, Usage
from chatclient.request import ChatClientResponse

if TYPE_CHECKING:
    from chatclient.resilience.prices import PriceTable

Prices = Mapping[str, tuple[float, float]]
"""USD per million (input, output) tokens by model name; the key ``"*"`` applies to any other model."""

ProgressCallback = Callable[[int, int, "CaseResult"], None]
_MAX_ANSWER = 20_000
_MAX_REPORT_BYTES = 50 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class CaseResult:
    """The outcome of one case: the answer, each evaluator's result, latency, tokens, cost or the error."""

    id: str
    input: Any
    answer: str | None
    results: tuple[EvaluationResult, ...] = ()
    latency: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    error: str | None = None
    reference: Any = None

    @property
    def passed(self) -> bool:
        """No error, and every evaluator passed (a case with no evaluator passes when it did not fail)."""
        return self.error is None and all(r.passed for r in self.results)

    @property
    def score(self) -> float:
        """The mean evaluator score (0.0 for an error; 1.0 when no evaluator ran)."""
        if self.error is not None:
            return 0.0
        return sum(r.score for r in self.results) / len(self.results) if self.results else 1.0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "id": self.id,
            "input": self.input,
            "reference": self.reference,
            "answer": self.answer,
            "passed": self.passed,
            "score": self.score,
            "latency": self.latency,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cost": self.cost,
            "error": self.error,
            "results": [r.to_dict() for r in self.results],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CaseResult:
        """The inverse of ``to_dict``."""
        return cls(
            str(data["id"]),
            data.get("input"),
            data.get("answer"),
            tuple(EvaluationResult.from_dict(r) for r in data.get("results") or ()),
            float(data.get("latency") or 0.0),
            int(data.get("prompt_tokens") or 0),
            int(data.get("completion_tokens") or 0),
            float(data.get("cost") or 0.0),
            data.get("error"),
            data.get("reference"),
        )


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) by the nearest-rank method; 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


@dataclass(frozen=True, slots=True)
class CaseChange:
    """How one case moved between a baseline run and this one."""

    id: str
    baseline_score: float
    score: float
    baseline_passed: bool
    passed: bool

    @property
    def delta(self) -> float:
        return self.score - self.baseline_score


@dataclass(frozen=True, slots=True)
class RunComparison:
    """Cases that got better or worse (pass/fail flipped or score moved by more than ``tolerance``)."""

    better: tuple[CaseChange, ...]
    worse: tuple[CaseChange, ...]
    unchanged: tuple[CaseChange, ...]
    added: tuple[str, ...]
    removed: tuple[str, ...]
    pass_rate_delta: float
    mean_score_delta: float
    baseline_name: str = ""

    @property
    def regressed(self) -> bool:
        """True when any case got worse."""
        return bool(self.worse)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""

        def rows(changes: Iterable[CaseChange]) -> list[dict[str, Any]]:
            return [
                {"id": c.id, "baseline_score": c.baseline_score, "score": c.score, "baseline_passed": c.baseline_passed, "passed": c.passed}
                for c in changes
            ]

        return {
            "baseline": self.baseline_name,
            "better": rows(self.better),
            "worse": rows(self.worse),
            "unchanged": rows(self.unchanged),
            "added": list(self.added),
            "removed": list(self.removed),
            "pass_rate_delta": self.pass_rate_delta,
            "mean_score_delta": self.mean_score_delta,
        }


@dataclass(frozen=True, slots=True)
class EvalReport:
    """A finished run: per-case results and the aggregates computed from them."""

    name: str
    cases: tuple[CaseResult, ...]
    created: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))
    duration: float = 0.0

    @property
    def total(self) -> int:
        return len(self.cases)

    @property
    def passed(self) -> int:
        return sum(1 for c in self.cases if c.passed)

    @property
    def errors(self) -> int:
        return sum(1 for c in self.cases if c.error is not None)

    @property
    def pass_rate(self) -> float:
        """Share of cases that passed (0.0 to 1.0)."""
        return self.passed / self.total if self.cases else 0.0

    @property
    def mean_score(self) -> float:
        return sum(c.score for c in self.cases) / self.total if self.cases else 0.0

    @property
    def latencies(self) -> list[float]:
        return [c.latency for c in self.cases if c.error is None]

    @property
    def latency_p50(self) -> float:
        return percentile(self.latencies, 50)

    @property
    def latency_p95(self) -> float:
        return percentile(self.latencies, 95)

    @property
    def prompt_tokens(self) -> int:
        return sum(c.prompt_tokens for c in self.cases)

    @property
    def completion_tokens(self) -> int:
        return sum(c.completion_tokens for c in self.cases)

    @property
    def cost(self) -> float:
        return sum(c.cost for c in self.cases)

    def evaluator_pass_rates(self) -> dict[str, tuple[int, int]]:
        """``{evaluator name: (passed, total)}`` over every case it judged, in first-seen order."""
        out: dict[str, list[int]] = {}
        for case in self.cases:
            for r in case.results:
                entry = out.setdefault(r.evaluator or "unnamed", [0, 0])
                entry[0] += int(r.passed)
                entry[1] += 1
        return {k: (v[0], v[1]) for k, v in out.items()}

    def summary(self) -> dict[str, Any]:
        """The aggregates as a dict."""
        return {
            "total": self.total,
            "passed": self.passed,
            "errors": self.errors,
            "pass_rate": self.pass_rate,
            "mean_score": self.mean_score,
            "latency_p50": self.latency_p50,
            "latency_p95": self.latency_p95,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cost": self.cost,
            "evaluators": {k: {"passed": p, "total": t} for k, (p, t) in self.evaluator_pass_rates().items()},
        }

    def compare(self, baseline: EvalReport, *, tolerance: float = 0.05) -> RunComparison:
        """How this run differs from ``baseline``, case by case (matched by id)."""
        before = {c.id: c for c in baseline.cases}
        better: list[CaseChange] = []
        worse: list[CaseChange] = []
        same: list[CaseChange] = []
        for case in self.cases:
            old = before.get(case.id)
            if old is None:
                continue
            change = CaseChange(case.id, old.score, case.score, old.passed, case.passed)
            if (case.passed and not old.passed) or (case.passed == old.passed and change.delta > tolerance):
                better.append(change)
            elif (old.passed and not case.passed) or (case.passed == old.passed and change.delta < -tolerance):
                worse.append(change)
            else:
                same.append(change)
        ids = {c.id for c in self.cases}
        return RunComparison(
            tuple(better),
            tuple(worse),
            tuple(same),
            tuple(c.id for c in self.cases if c.id not in before),
            tuple(c.id for c in baseline.cases if c.id not in ids),
            self.pass_rate - baseline.pass_rate,
            self.mean_score - baseline.mean_score,
            baseline.name,
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: name, created, duration, summary and cases."""
        return {
            "format": "chatclient-eval-report/1",
            "name": self.name,
            "created": self.created,
            "duration": self.duration,
            "summary": self.summary(),
            "cases": [c.to_dict() for c in self.cases],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EvalReport:
        """The inverse of ``to_dict``."""
        if not isinstance(data, Mapping) or not isinstance(data.get("cases"), list):
            raise EvaluationError("not an evaluation report: expected an object with a 'cases' list (from EvalReport.save)")
        cases = []
        for number, raw in enumerate(data["cases"], 1):
            if not isinstance(raw, Mapping) or not isinstance(raw.get("id"), str) or not raw["id"]:
                raise EvaluationError(f"report case {number} has no 'id' (a string): not a report from EvalReport.save")
            try:
                cases.append(CaseResult.from_dict(raw))
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                raise EvaluationError(f"report case {number} ({raw['id']!r}) is malformed ({type(exc).__name__}: {exc})") from None
        try:
            duration = float(data.get("duration") or 0.0)
        except (TypeError, ValueError):
            raise EvaluationError("the report's 'duration' is not a number") from None
        return cls(str(data.get("name") or "run"), tuple(cases), str(data.get("created") or ""), duration)

    def save(self, path: str | Path) -> Path:
        """Write the JSON report to ``path`` (parents created) and return the path."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(self.to_dict(), indent=2, ensure_ascii=False, default=str), encoding="utf-8")
        return target

    @classmethod
    def load(cls, path: str | Path) -> EvalReport:
        """Read a report written by ``save``."""
        source = Path(path)
        try:
            if source.stat().st_size > _MAX_REPORT_BYTES:
                raise EvaluationError(f"the report {str(source)!r} is larger than {_MAX_REPORT_BYTES} bytes")
            data = jsonsafe.loads(source.read_text(encoding="utf-8"))
        except OSError as exc:
            raise EvaluationError(f"cannot read the report {str(source)!r}: {exc.strerror}") from None
        except ValueError as exc:
            raise EvaluationError(f"the report {str(source)!r} is not valid JSON ({getattr(exc, 'msg', exc)})") from None
        return cls.from_dict(data)


# -- running ------------------------------------------------------------------------------------


def _cost(model: str | None, usage: Usage | None, prices: Prices | PriceTable | None) -> float:
    if prices is None or usage is None:
        return 0.0
    if not isinstance(prices, Mapping):  # the library's PriceTable (chatclient.resilience.prices)
        return float(prices.cost(model, usage) or 0.0)
    prompt_tokens, completion_tokens = usage.prompt_tokens, usage.completion_tokens
    price = prices.get(model or "") or prices.get("*")
    if price is None:
        return 0.0
    return (prompt_tokens * price[0] + completion_tokens * price[1]) / 1_000_000


def _call_target(target: Any, case: EvalCase) -> EvaluationRequest:
    """Run one case through the target and collect what evaluators look at."""
    from chatclient.client import ChatClient

    if isinstance(target, ChatClient):
        if not isinstance(case.input, str):
            raise EvaluationError(f"case {case.id!r}: a ChatClient target takes text input, got {type(case.input).__name__}")
        spec = target.prompt(case.input).call()
        return to_request(spec.chat_client_response(), question=case.input, reference=case.reference)
    if not callable(target):
        raise TypeError(f"the evaluation target must be a ChatClient or a callable, got {type(target).__name__}")
    out = target(case.input)
    if inspect.isawaitable(out):
        out = asyncio.run(_await(out))
    question = case.input if isinstance(case.input, str) else json.dumps(case.input, default=str)
    if out is None or isinstance(out, str):
        return EvaluationRequest(question=question, answer=out, reference=case.reference)
    if isinstance(out, (ChatClientResponse, ChatResponse)) or hasattr(out, "chat_client_response") or hasattr(out, "response"):
        return to_request(out, question=question, reference=case.reference)
    # a typed value (an AI service returning an entity): evaluators see it and its JSON text
    dumped = out.model_dump(mode="json") if hasattr(out, "model_dump") else out
    return EvaluationRequest(
        question=question, answer=json.dumps(dumped, default=str, ensure_ascii=False), reference=case.reference, entity=out
    )


async def _await(awaitable: Any) -> Any:
    return await awaitable


def _evaluate(evaluator: Any, request: EvaluationRequest) -> EvaluationResult | None:
    name = str(getattr(evaluator, "name", type(evaluator).__name__))
    try:
        result = evaluator.evaluate(request)
    except EvaluationError as exc:
        return EvaluationResult(False, 0.0, f"the evaluator could not judge this case: {exc}", "", name, {"error": True})
    if result is None:  # the evaluator does not apply to this case
        return None
    if not isinstance(result, EvaluationResult):
        raise TypeError(f"{name}.evaluate() must return an EvaluationResult, got {type(result).__name__}")
    return result if result.evaluator else EvaluationResult(
        result.passed, result.score, result.reasoning, result.feedback, name, result.metadata
    )


def run_case(
    target: Any, case: EvalCase, evaluators: Sequence[Any] = (), *, prices: Prices | PriceTable | None = None
) -> CaseResult:
    """Run one case and its evaluators; an exception of the target becomes the case's ``error``.

    An evaluator returning ``None`` does not apply to the case and is left out of its results; one
    raising ``EvaluationError`` counts as a failed result whose reasoning says why.
    """
    start = time.perf_counter()
    try:
        request = _call_target(target, case)
    except Exception as exc:  # the run goes on; the report shows the failure
        return CaseResult(case.id, case.input, None, (), time.perf_counter() - start, error=f"{type(exc).__name__}: {str(exc)[:500]}", reference=case.reference)
    latency = time.perf_counter() - start
    chat = request.response.chat_response if request.response is not None else None
    usage = chat.metadata.usage if chat is not None else None
    prompt_tokens = usage.prompt_tokens if usage is not None else 0
    completion_tokens = usage.completion_tokens if usage is not None else 0
    model = chat.metadata.model if chat is not None else None
    judged = (_evaluate(e, request) for e in [*evaluators, *case.checks()])
    results = tuple(r for r in judged if r is not None)
    answer = request.answer if request.answer is None or len(request.answer) <= _MAX_ANSWER else request.answer[:_MAX_ANSWER]
    return CaseResult(
        case.id,
        case.input,
        answer,
        results,
        latency,
        prompt_tokens,
        completion_tokens,
        _cost(model, usage, prices),
        None,
        case.reference,
    )


def run_evaluation(
    target: Any,
    dataset: str | Path | Iterable[Any],
    evaluators: Sequence[Any] = (),
    *,
    concurrency: int = 4,
    name: str | None = None,
    prices: Prices | PriceTable | None = None,
    progress: ProgressCallback | None = None,
) -> EvalReport:
    """Run every case of ``dataset`` through ``target`` with at most ``concurrency`` at a time.

    ``target`` is a ``ChatClient`` (each case's input becomes the user text) or a callable taking the
    input (an AI service method, a function around your pipeline) and returning text, a response, a
    call spec, an AI-service ``Result`` or a typed value. ``prices`` is a ``PriceTable``
    (``chatclient.resilience.prices.DEFAULT_PRICES``) or ``{model: (input, output)}`` in USD per
    million tokens (``"*"`` for any model). ``progress(done, total, case_result)`` is
    called after each case, from one thread at a time. The report keeps the dataset's order.
    """
    if not isinstance(concurrency, int) or concurrency < 1:
        raise ValueError("concurrency must be a positive int")
    cases = load_dataset(dataset)
    started = time.perf_counter()
    results: list[CaseResult | None] = [None] * len(cases)
    lock = threading.Lock()
    done = 0

    def one(index: int) -> None:
        nonlocal done
        result = run_case(target, cases[index], evaluators, prices=prices)
        with lock:
            results[index] = result
            done += 1
            if progress is not None:
                progress(done, len(cases), result)

    if concurrency == 1 or len(cases) <= 1:
        for i in range(len(cases)):
            one(i)
    else:
        with ThreadPoolExecutor(max_workers=min(concurrency, len(cases)), thread_name_prefix="chatclient-eval") as pool:
            for future in [pool.submit(one, i) for i in range(len(cases))]:
                future.result()
    label = name or (Path(dataset).stem if isinstance(dataset, (str, Path)) else "run")
    return EvalReport(label, tuple(r for r in results if r is not None), duration=time.perf_counter() - started)


__all__ = ["CaseChange", "CaseResult", "EvalReport", "Prices", "RunComparison", "percentile", "run_case", "run_evaluation"]
