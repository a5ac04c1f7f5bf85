"""Render an ``EvalReport``: a terminal table and a self-contained HTML page with inline SVG charts.

    print(render_table(report, baseline=old))
    Path("report.html").write_text(render_html(report, baseline=old), encoding="utf-8")

The HTML page needs nothing from the network: styles are inline and the four charts (score
distribution, pass rate per evaluator, latency histogram, run-vs-run score changes) are SVG drawn
here. Every text from the run (inputs, answers, reasoning) is HTML-escaped.
"""

from __future__ import annotations

import re
from html import escape
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from chatclient.evaluation.runner import EvalReport, RunComparison

_W, _H = 420, 200  # chart size in px
_PAD_L, _PAD_B, _PAD_T = 40, 28, 12


# C0 and C1 controls, DEL, and the bidirectional overrides/isolates that reorder what a terminal shows
_TERMINAL_UNSAFE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def terminal_safe(text: str) -> str:
    """``text`` without control characters (newlines kept): no ANSI/OSC escape from a model answer,
    case id or file name can recolour, retitle or clear the terminal or CI log it is printed to."""
    return _TERMINAL_UNSAFE.sub("", text)


def _cut(text: object, width: int) -> str:
    value = " ".join(terminal_safe(str(text if text is not None else "")).split())
    return value if len(value) <= width else value[: width - 1] + "…"


def render_table(report: EvalReport, *, baseline: EvalReport | None = None, width: int = 48) -> str:
    """A plain-text table: one row per case, then the aggregates (and the comparison with ``baseline``)."""
    rows = [("case", "pass", "score", "latency", "answer / error")]
    for c in report.cases:
        rows.append((_cut(c.id, 24), "PASS" if c.passed else ("ERR" if c.error else "FAIL"), f"{c.score:.2f}", f"{c.latency:.2f}s", _cut(c.error or c.answer, width)))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    s = report.summary()
    lines += [
        "",
        f"{report.name}: {s['passed']}/{s['total']} passed ({s['pass_rate']:.0%}), mean score {s['mean_score']:.2f}, "
        f"errors {s['errors']}",
        f"latency p50 {s['latency_p50']:.2f}s p95 {s['latency_p95']:.2f}s; tokens {s['prompt_tokens']} in / "
        f"{s['completion_tokens']} out; cost ${s['cost']:.4f}",
    ]
    for evaluator, (passed, total) in report.evaluator_pass_rates().items():
        lines.append(f"  {evaluator}: {passed}/{total} passed")
    if baseline is not None:
        diff = report.compare(baseline)
        lines.append(
            f"vs {baseline.name}: pass rate {diff.pass_rate_delta:+.0%}, mean score {diff.mean_score_delta:+.2f}; "
            f"{len(diff.better)} better, {len(diff.worse)} worse, {len(diff.unchanged)} unchanged"
        )
        for change in diff.worse:
            lines.append(f"  worse:  {change.id} {change.baseline_score:.2f} -> {change.score:.2f}")
        for change in diff.better:
            lines.append(f"  better: {change.id} {change.baseline_score:.2f} -> {change.score:.2f}")
    return terminal_safe("\n".join(lines))


# -- SVG charts ------------------------------------------------------------------------------------


def _svg(chart_id: str, title: str, body: list[str]) -> str:
    return (
        f'<figure class="chart"><figcaption>{escape(title)}</figcaption>'
        f'<svg id="{chart_id}" xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" '
        f'viewBox="0 0 {_W} {_H}" role="img" aria-label="{escape(title)}">'
        f'<line x1="{_PAD_L}" y1="{_H - _PAD_B}" x2="{_W - 8}" y2="{_H - _PAD_B}" class="axis"/>'
        + "".join(body)
        + "</svg></figure>"
    )


def _bars(chart_id: str, title: str, labels: list[str], values: list[float], *, top: float | None = None, fmt: str = "{:g}", classes: list[str] | None = None) -> str:
    """A vertical bar chart; a zero value still gets a 1px bar so the bin is visible."""
    if not values:
        return _svg(chart_id, title, [f'<text x="{_W // 2}" y="{_H // 2}" class="empty">no data</text>'])
    top = top if top is not None else max(max(values), 1e-9)
    plot_w, plot_h = _W - _PAD_L - 8, _H - _PAD_B - _PAD_T
    step = plot_w / len(values)
    body: list[str] = [f'<text x="4" y="{_PAD_T + 8}" class="tick">{escape(fmt.format(top))}</text>']
    for i, (label, value) in enumerate(zip(labels, values, strict=True)):
        h = max(1.0, plot_h * max(value, 0.0) / top)
        x = _PAD_L + i * step + step * 0.1
        y = _H - _PAD_B - h
        cls = classes[i] if classes else "bar"
        body.append(
            f'<rect class="{cls}" x="{x:.1f}" y="{y:.1f}" width="{step * 0.8:.1f}" height="{h:.1f}">'
            f"<title>{escape(label)}: {escape(fmt.format(value))}</title></rect>"
        )
        if len(values) <= 12:
            body.append(f'<text x="{x + step * 0.4:.1f}" y="{_H - _PAD_B + 14}" class="label">{escape(_cut(label, 12))}</text>')
    return _svg(chart_id, title, body)


def score_distribution_svg(report: EvalReport) -> str:
    """Histogram of case scores in ten bins from 0.0 to 1.0."""
    bins = [0] * 10
    for c in report.cases:
        bins[min(int(c.score * 10), 9)] += 1
    labels = [f"{i / 10:.1f}" for i in range(10)]
    return _bars("chart-scores", "Score distribution (cases per score bin)", labels, [float(b) for b in bins])


def evaluator_pass_rates_svg(report: EvalReport) -> str:
    """One bar per evaluator: the share of cases it passed."""
    rates = report.evaluator_pass_rates()
    labels = list(rates)
    values = [p / t if t else 0.0 for p, t in rates.values()]
    return _bars("chart-evaluators", "Pass rate per evaluator", labels, values, top=1.0, fmt="{:.0%}")


def latency_histogram_svg(report: EvalReport) -> str:
    """Histogram of case latencies in up to ten equal-width bins."""
    values = report.latencies
    if not values:
        return _bars("chart-latency", "Latency (cases per bin, seconds)", [], [])
    low, high = min(values), max(values)
    n = 10
    width = (high - low) / n or 1e-3
    bins = [0] * n
    for v in values:
        bins[min(int((v - low) / width), n - 1)] += 1
    labels = [f"{low + i * width:.2f}s" for i in range(n)]
    return _bars("chart-latency", "Latency (cases per bin, seconds)", labels, [float(b) for b in bins])


def comparison_svg(diff: RunComparison) -> str:
    """Score change per case against the baseline: bars up (better) and down (worse) from a zero line."""
    changes = sorted([*diff.better, *diff.worse, *diff.unchanged], key=lambda c: c.delta)
    title = f"Score change per case vs {diff.baseline_name or 'baseline'}"
    if not changes:
        return _bars("chart-diff", title, [], [])
    plot_w = _W - _PAD_L - 8
    mid = _PAD_T + (_H - _PAD_B - _PAD_T) / 2
    half = (_H - _PAD_B - _PAD_T) / 2
    step = plot_w / len(changes)
    body = [
        f'<line x1="{_PAD_L}" y1="{mid:.1f}" x2="{_W - 8}" y2="{mid:.1f}" class="zero"/>',
        f'<text x="4" y="{_PAD_T + 8}" class="tick">+1</text>',
        f'<text x="4" y="{_H - _PAD_B}" class="tick">-1</text>',
    ]
    worse = {c.id for c in diff.worse}
    better = {c.id for c in diff.better}
    for i, c in enumerate(changes):
        h = max(1.0, abs(c.delta) * half)
        y = mid - h if c.delta >= 0 else mid
        cls = "worse" if c.id in worse else ("better" if c.id in better else "same")
        body.append(
            f'<rect class="{cls}" x="{_PAD_L + i * step + step * 0.1:.1f}" y="{y:.1f}" width="{max(step * 0.8, 1.0):.1f}" '
            f'height="{h:.1f}"><title>{escape(c.id)}: {c.baseline_score:.2f} → {c.score:.2f}</title></rect>'
        )
    return _svg("chart-diff", title, body)


_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#1d2330;background:#fff}
h1{font-size:20px;margin:0 0 4px} .meta{color:#5a6275;margin-bottom:16px}
.cards{display:flex;gap:12px;flex-wrap:wrap;margin-bottom:16px}
.card{border:1px solid #d9dde6;border-radius:6px;padding:8px 12px;min-width:110px}
.card b{display:block;font-size:18px}
.charts{display:flex;flex-wrap:wrap;gap:16px}
figure.chart{margin:0;border:1px solid #d9dde6;border-radius:6px;padding:8px}
figcaption{font-weight:600;margin-bottom:4px}
svg .axis,svg .zero{stroke:#8a93a6;stroke-width:1}
svg .bar{fill:#3b6fd8} svg .better{fill:#2c9a5a} svg .worse{fill:#d2453b} svg .same{fill:#9aa3b5}
svg .label,svg .tick,svg .empty{font-size:10px;fill:#5a6275} svg .label{text-anchor:middle}
table{border-collapse:collapse;margin-top:16px;width:100%}
th,td{border-bottom:1px solid #e5e8ef;padding:4px 6px;text-align:left;vertical-align:top}
td.pass{color:#2c9a5a;font-weight:600} td.fail{color:#d2453b;font-weight:600}
details{max-width:60ch} .small{color:#5a6275;font-size:12px}
"""


def render_html(report: EvalReport, *, baseline: EvalReport | None = None) -> str:
    """A self-contained HTML page for ``report`` (with a run-vs-run section when ``baseline`` is given)."""
    s = report.summary()
    cards = [
        ("cases", str(s["total"])),
        ("pass rate", f"{s['pass_rate']:.0%}"),
        ("mean score", f"{s['mean_score']:.2f}"),
        ("latency p50", f"{s['latency_p50']:.2f}s"),
        ("latency p95", f"{s['latency_p95']:.2f}s"),
        ("tokens in/out", f"{s['prompt_tokens']}/{s['completion_tokens']}"),
        ("cost", f"${s['cost']:.4f}"),
        ("errors", str(s["errors"])),
    ]
    charts = [score_distribution_svg(report), evaluator_pass_rates_svg(report), latency_histogram_svg(report)]
    diff = report.compare(baseline) if baseline is not None else None
    diff_html = ""
    if diff is not None:
        charts.append(comparison_svg(diff))
        cards.append((f"vs {_cut(diff.baseline_name, 20)}", f"{len(diff.better)} better / {len(diff.worse)} worse"))
        worse_rows = "".join(
            f"<li>{escape(c.id)}: {c.baseline_score:.2f} → {c.score:.2f}</li>" for c in diff.worse
        )
        diff_html = f'<h2>Cases that got worse</h2><ul id="worse">{worse_rows or "<li>none</li>"}</ul>'
    rows = []
    for c in report.cases:
        status = "pass" if c.passed else "fail"
        verdicts = "".join(
            f"<li><b>{escape(r.evaluator)}</b> {'✓' if r.passed else '✗'} {r.score:.2f}: {escape(_cut(r.reasoning, 400))}"
            + (f' <span class="small">feedback: {escape(_cut(r.feedback, 300))}</span>' if r.feedback else "")
            + "</li>"
            for r in c.results
        )
        answer = escape(_cut(c.error, 500)) if c.error else escape(_cut(c.answer, 2000))
        rows.append(
            f'<tr data-case="{escape(c.id)}"><td>{escape(c.id)}</td><td class="{status}">{status.upper()}</td>'
            f"<td>{c.score:.2f}</td><td>{c.latency:.2f}s</td><td>{escape(_cut(c.input, 300))}</td>"
            f"<td><details><summary>{escape(_cut(c.error or c.answer, 60))}</summary>{answer}<ul>{verdicts}</ul></details></td></tr>"
        )
    card_html = "".join(f'<div class="card">{escape(k)}<b>{escape(v)}</b></div>' for k, v in cards)
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>Evaluation: {escape(report.name)}</title><style>{_STYLE}</style></head><body>"
        f"<h1>Evaluation: {escape(report.name)}</h1>"
        f'<div class="meta">{escape(report.created)} · {report.duration:.1f}s</div>'
        f'<div class="cards">{card_html}</div><div class="charts">{"".join(charts)}</div>{diff_html}'
        "<table><thead><tr><th>case</th><th>result</th><th>score</th><th>latency</th><th>input</th><th>answer</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table></body></html>\n"
    )


__all__ = [
    "comparison_svg",
    "evaluator_pass_rates_svg",
    "latency_histogram_svg",
    "render_html",
    "render_table",
    "score_distribution_svg",
]
