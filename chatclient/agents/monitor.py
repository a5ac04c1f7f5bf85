"""``AgentMonitor``: the invocation trees of runs, and a self-contained HTML report of them
(LangChain4j: ``AgentMonitor`` and ``HtmlReportGenerator``).

Pass ``monitor=AgentMonitor()`` to ``run`` / ``arun`` / ``stream``; ``monitor.tree(scope_id)`` is the
latest run of that scope as an ``AgentInvocation`` tree (name, inputs, output, duration, usage,
error, children), also while it runs. The monitor keeps the last ``max_sessions`` runs (100 by
default, as LangChain4j). ``monitor.html(path)`` writes one HTML file with inline CSS and SVG, no
script and no external resource; every value is escaped.
"""

from __future__ import annotations

import html
import os
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

from chatclient.agents.scope import AgentInvocation, InvocationNode

_VALUE_CHARS = 2000


class AgentMonitor:
    """Keeps the invocation tree of every run it is passed to (the latest ``max_sessions``)."""

    def __init__(self, *, max_sessions: int = 100) -> None:
        if isinstance(max_sessions, bool) or not isinstance(max_sessions, int) or max_sessions < 1:
            raise ValueError("max_sessions must be a positive int")
        self.max_sessions = max_sessions
        self._runs: OrderedDict[int, tuple[str, InvocationNode]] = OrderedDict()
        self._seq = 0
        self._lock = threading.Lock()

    def _started(self, scope_id: str, node: InvocationNode) -> None:
        with self._lock:
            self._seq += 1
            self._runs[self._seq] = (scope_id, node)
            while len(self._runs) > self.max_sessions:
                self._runs.popitem(last=False)

    def __getstate__(self) -> dict[str, Any]:
        return {"max_sessions": self.max_sessions}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(max_sessions=state["max_sessions"])  # type: ignore[misc]

    def scope_ids(self) -> list[str]:
        """The scope ids of the kept runs, oldest first (an id appears once per run)."""
        with self._lock:
            return [sid for sid, _ in self._runs.values()]

    def runs(self) -> list[tuple[str, AgentInvocation]]:
        """Every kept run as ``(scope_id, tree)``, oldest first."""
        with self._lock:
            items = list(self._runs.values())
        return [(sid, node.freeze()) for sid, node in items]

    def tree(self, scope_id: str) -> AgentInvocation:
        """The latest run of ``scope_id`` (``KeyError`` when this monitor saw none)."""
        with self._lock:
            for sid, node in reversed(self._runs.values()):
                if sid == scope_id:
                    return node.freeze()
        raise KeyError(f"this monitor saw no run of scope {scope_id!r}")

    def html(self, path: str | os.PathLike[str] | None = None, *, title: str = "Agent runs") -> str:
        """The report as HTML text; also written to ``path`` when given."""
        text = render_report(self.runs(), title=title)
        if path is not None:
            Path(path).write_text(text, encoding="utf-8")
        return text


# -- the report -------------------------------------------------------------------------------

_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#1d232a;background:#fafbfc}
h1{font-size:20px} h2{font-size:16px;margin-top:28px}
.run{background:#fff;border:1px solid #d8dee4;border-radius:6px;padding:12px 16px;margin:12px 0}
.node{margin-left:18px;border-left:2px solid #d8dee4;padding-left:10px;margin-top:6px}
.name{font-weight:600} .meta{color:#57606a;font-size:12px;margin-left:8px}
.error{color:#b42318} .skipped{color:#8c6d1f} .recovered{color:#1f6f8c}
.kv{font-family:ui-monospace,monospace;font-size:12px;white-space:pre-wrap;word-break:break-word;
background:#f3f5f7;border-radius:4px;padding:4px 6px;margin:3px 0}
svg{display:block;margin:8px 0} .bar{fill:#4c8bf5} .bar.err{fill:#d1453b} .bar.skip{fill:#c9a227}
"""


def _value(value: Any) -> str:
    text = value if isinstance(value, str) else repr(value)
    if len(text) > _VALUE_CHARS:
        text = text[:_VALUE_CHARS] + " [...]"
    return html.escape(text, quote=True)


def _node(inv: AgentInvocation) -> str:
    cls = "error" if inv.error else "skipped" if inv.skipped else "recovered" if inv.recovered else ""
    meta = []
    if inv.duration is not None:
        meta.append(f"{inv.duration * 1000:.1f} ms")
    if inv.usage is not None:
        meta.append(f"{inv.usage.prompt_tokens}+{inv.usage.completion_tokens} tokens")
    if inv.skipped:
        meta.append("skipped")
    if inv.recovered:
        meta.append("recovered")
    parts = [
        f'<div class="node" data-agent="{html.escape(inv.name, quote=True)}">',
        f'<span class="name {cls}">{html.escape(inv.name)}</span>',
        f'<span class="meta">{html.escape(" · ".join(meta))}</span>',
    ]
    for key, value in inv.inputs.items():
        parts.append(f'<div class="kv input">{html.escape(key)} = {_value(value)}</div>')
    if inv.error:
        parts.append(f'<div class="kv error">{_value(inv.error)}</div>')
    elif inv.output is not None:
        parts.append(f'<div class="kv output">&rarr; {_value(inv.output)}</div>')
    parts.extend(_node(child) for child in inv.children)
    parts.append("</div>")
    return "".join(parts)


def _timeline(root: AgentInvocation) -> str:
    rows = [(depth, inv) for depth, inv in _flatten(root, 0)]
    start = root.started
    end = max((inv.finished or inv.started) for _, inv in rows)
    span = max(end - start, 1e-9)
    width, row_h = 600, 18
    out = [f'<svg width="{width + 200}" height="{row_h * len(rows) + 4}" role="img" aria-label="timeline">']
    for i, (depth, inv) in enumerate(rows):
        x = 200 + (inv.started - start) / span * width
        w = max(((inv.finished or end) - inv.started) / span * width, 2)
        cls = "bar err" if inv.error else "bar skip" if inv.skipped else "bar"
        y = i * row_h + 2
        out.append(
            f'<text x="{4 + depth * 10}" y="{y + 12}" font-size="11">{html.escape(inv.name)}</text>'
            f'<rect class="{cls}" x="{x:.1f}" y="{y}" width="{w:.1f}" height="{row_h - 5}" rx="2"/>'
        )
    out.append("</svg>")
    return "".join(out)


def _flatten(inv: AgentInvocation, depth: int) -> list[tuple[int, AgentInvocation]]:
    out = [(depth, inv)]
    for child in inv.children:
        out.extend(_flatten(child, depth + 1))
    return out


def render_report(runs: list[tuple[str, AgentInvocation]], *, title: str = "Agent runs") -> str:
    """A self-contained HTML page of ``(scope_id, tree)`` runs (inline CSS and SVG, values escaped)."""
    body = [f"<h1>{html.escape(title)}</h1>", f"<p>{len(runs)} run(s)</p>"]
    for scope_id, tree in runs:
        body.append(f'<section class="run" data-scope="{html.escape(scope_id, quote=True)}">')
        body.append(f'<h2>{html.escape(tree.name)} <span class="meta">scope {html.escape(scope_id)}</span></h2>')
        body.append(_timeline(tree))
        body.append(_node(tree))
        body.append("</section>")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">"
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>" + "".join(body) + "</body></html>\n"
    )


__all__ = ["AgentMonitor", "render_report"]
