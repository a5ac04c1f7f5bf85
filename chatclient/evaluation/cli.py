"""``python -m chatclient eval``: run a dataset from the command line and write the reports.

    python -m chatclient eval cases.jsonl --client myapp.bot:make_client --out eval-out \\
        --baseline eval-out/previous.json --fail-on-regression

``--client`` names a factory (``module:function``, called with no arguments) that returns a
``ChatClient`` or a callable taking a case's input; ``--evaluators`` names one returning a list of
evaluators; ``--judge`` one returning a judge model or client, which adds the answer-correctness
evaluator for cases that have a reference. The table goes to stdout, progress to stderr (a bar on a
terminal, one line per case otherwise), and ``report.json`` / ``report.html`` to ``--out``. Exit
status: 0, or 1 when ``--fail-under`` or ``--fail-on-regression`` is not met, 2 for a usage error.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from chatclient.errors import ChatClientError


def load_object(spec: str) -> Any:
    """The object named by ``module:attribute`` (the current directory is importable)."""
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise ValueError(f"{spec!r} is not in the form module:function (for example myapp.bot:make_client)")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"cannot import {module_name!r} for {spec!r}: {exc}") from None
    value: Any = module
    for part in attribute.split("."):
        if not hasattr(value, part):
            raise ValueError(f"{module_name!r} has no attribute {attribute!r} (from {spec!r})")
        value = getattr(value, part)
    return value


def _made(spec: str) -> Any:
    value = load_object(spec)
    from chatclient.client import ChatClient

    if isinstance(value, ChatClient):
        return value
    return value() if callable(value) and not hasattr(value, "evaluate") else value


class Progress:
    """The run's progress on ``stream``: the project's tqdm bar (``chatclient.progress``) on a
    terminal, one plain line per finished case elsewhere (CI logs), each naming the last case.
    ``width`` is accepted for compatibility; the bar sizes itself."""

    def __init__(self, stream: TextIO, *, width: int | None = None) -> None:
        self.stream = stream
        self.width = width
        self.passed = 0
        self.done = 0
        self.total: int | None = None
        self._bar: Any = None

    def __call__(self, done: int, total: int, case: Any) -> None:
        from chatclient.evaluation.report import _cut
        from chatclient.progress import progress_bar

        if self._bar is None:
            self._bar = progress_bar(total=total, desc="eval", unit="case", stream=self.stream, interval=0)
        self.done, self.total = done, total
        self.passed += int(case.passed)
        status = "PASS" if case.passed else ("ERROR" if case.error else "FAIL")
        # the id cut short and on one line: a long or multi-line id would make the log line unbounded
        last = f"{_cut(case.id, 40)} {status} score={case.score:.2f} {case.latency:.2f}s"
        self._bar.set_postfix_str(f"{self.passed} passed, last {last}", refresh=False)
        self._bar.update(max(done - self._bar.n, 0))
        if done >= total:
            self.close()

    def close(self) -> None:
        """End the bar (at the end of the run, or when it is interrupted)."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None


EXIT_INTERRUPTED = 130
"""The exit status after Ctrl-C (128 + SIGINT, what shells report for a program stopped by Ctrl-C)."""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``python -m chatclient``."""
    parser = argparse.ArgumentParser(prog="python -m chatclient", description="chatclient command line tools")
    commands = parser.add_subparsers(dest="command", required=True)
    ev = commands.add_parser("eval", help="run an evaluation dataset and write reports")
    ev.add_argument("dataset", help="a .jsonl, .json or .yaml file of cases {id, input, expected}")
    ev.add_argument("--client", required=True, help="module:factory returning a ChatClient or a callable")
    ev.add_argument("--evaluators", help="module:factory returning a list of evaluators")
    ev.add_argument("--judge", help="module:factory returning a judge model/client (adds answer correctness)")
    ev.add_argument("--baseline", help="a report.json of an earlier run to compare with")
    ev.add_argument("--out", help="directory for report.json and report.html")
    ev.add_argument("--name", help="a name for this run (default: the dataset's file name)")
    ev.add_argument("--concurrency", type=int, default=4, help="cases run at the same time (default 4)")
    ev.add_argument("--fail-under", type=float, help="exit 1 when the pass rate (0-1) is below this")
    ev.add_argument("--fail-on-regression", action="store_true", help="exit 1 when a case got worse than the baseline")
    return parser


def run_eval(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Run the ``eval`` command; returns the exit status."""
    from chatclient.evaluation.report import render_html, render_table, terminal_safe
    from chatclient.evaluation.runner import EvalReport, run_evaluation

    target = _made(args.client)
    evaluators = list(_made(args.evaluators)) if args.evaluators else []
    if args.judge:
        from chatclient.evaluation.judges import AnswerCorrectnessEvaluator

        evaluators.append(_ReferenceOnly(AnswerCorrectnessEvaluator(_made(args.judge))))
    baseline = EvalReport.load(args.baseline) if args.baseline else None
    progress = Progress(err)
    try:
        report = run_evaluation(
            target, args.dataset, evaluators, concurrency=args.concurrency, name=args.name, progress=progress
        )
    except KeyboardInterrupt:
        progress.close()
        of = f" of {progress.total}" if progress.total is not None else ""
        err.write(
            f"eval interrupted after {progress.done}{of} cases ({progress.passed} passed); nothing was written "
            "(an evaluation keeps no checkpoint): run the same command again to evaluate every case\n"
        )
        return EXIT_INTERRUPTED
    out.write(render_table(report, baseline=baseline) + "\n")
    if args.out:
        directory = Path(args.out)
        json_path = report.save(directory / "report.json")
        html_path = directory / "report.html"
        html_path.write_text(render_html(report, baseline=baseline), encoding="utf-8")
        out.write(f"wrote {json_path} and {html_path}\n")
    status = 0
    if args.fail_under is not None and report.pass_rate < args.fail_under:
        err.write(f"pass rate {report.pass_rate:.0%} is below --fail-under {args.fail_under:.0%}\n")
        status = 1
    if args.fail_on_regression and baseline is not None:
        worse = report.compare(baseline).worse
        if worse:
            ids = terminal_safe(", ".join(c.id for c in worse[:20]))
            err.write(f"{len(worse)} case(s) got worse than the baseline: {ids}\n")
            status = 1
    return status


class _ReferenceOnly:
    """Runs a reference-needing evaluator only on cases that have a reference."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = inner.name

    def evaluate(self, response_or_request: Any, **parts: Any) -> Any:
        from chatclient.evaluation.base import to_request

        request = to_request(response_or_request, **parts)
        if not isinstance(request.reference, str):
            return None  # no reference answer: the runner leaves this evaluator out of the case
        return self.inner.evaluate(request)


def main(argv: Sequence[str] | None = None, *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Entry point of ``python -m chatclient``; returns the exit status."""
    out = out or sys.stdout
    err = err or sys.stderr
    args = build_parser().parse_args(argv)
    try:
        if args.command == "eval":
            return run_eval(args, out, err)
    except (ValueError, TypeError, ChatClientError) as exc:
        from chatclient.evaluation.report import terminal_safe

        err.write(f"error: {terminal_safe(str(exc))}\n")
        return 2
    except KeyboardInterrupt:  # before the first case (loading the client, the dataset)
        err.write("eval interrupted before any case ran; nothing was written\n")
        return EXIT_INTERRUPTED
    return 2  # pragma: no cover - argparse rejects unknown commands


__all__ = ["EXIT_INTERRUPTED", "Progress", "build_parser", "load_object", "main"]
