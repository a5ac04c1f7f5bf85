"""The one progress bar of the project (``run_many``, batch jobs, the evaluation CLI, the document pipeline).

It is ``tqdm`` writing to stderr. On a terminal that is the usual redrawn bar; elsewhere (CI logs,
a file, a pipe) every redraw becomes one plain line, at most one per ``interval`` seconds plus the
last one, so a log holds a readable history instead of carriage returns.

    with progress_bar(total=len(items), desc="extract", unit="item") as bar:
        for item in items:
            ...
            bar.update(1)
"""

from __future__ import annotations

import re
import sys
from typing import Any, TextIO

__all__ = ["LineStream", "NullBar", "progress_bar", "report_interrupt"]

# The bar as a log line: a 20-column bar, then the counts, clock, rate and postfix in full.
_LINE_FORMAT = "{l_bar}{bar:20}{r_bar}"

# The clock ("00:01<00:02") and the rate ("1.23case/s", "?it/s") of a tqdm line. Each match starts
# where a digit run starts and the unit is letters only: with ``\w*`` after ``[\d.]+`` a long digit
# run (a case id, say) took cubic time (1,000 digits: 6 s; 4,000: 6 min).
_CLOCK = re.compile(r"(?<![\d.])(?:\d+(?::\d\d)+|[\d.]+\s*[A-Za-z]*/s)|\?\s*\w*/s")


def report_interrupt(line: str, exc: BaseException) -> None:
    """Say on stderr, in one line, what an interrupted run saved and how to resume it.

    The ``KeyboardInterrupt`` then goes on up (a library does not swallow Ctrl-C: the caller's
    ``except KeyboardInterrupt`` and ``finally`` still run). If nothing catches it, the program
    ends as Python ends on Ctrl-C (killed by SIGINT: the shell reports status 130) but without the
    traceback: that line said everything. A command-line tool catches it and exits 130 itself.
    """
    sys.stderr.write(line.rstrip("\n") + "\n")
    sys.stderr.flush()
    exc.__dict__["_chatclient_reported"] = True
    if not getattr(sys.excepthook, "_chatclient_quiet_interrupts", False):
        sys.excepthook = _quiet_reported_interrupts(sys.excepthook)


def _quiet_reported_interrupts(previous: Any) -> Any:
    def hook(kind: type[BaseException], value: BaseException, tb: Any) -> None:
        if isinstance(value, KeyboardInterrupt) and value.__dict__.get("_chatclient_reported"):
            return  # already told in one line; the interpreter still exits by SIGINT (status 130)
        previous(kind, value, tb)

    hook._chatclient_quiet_interrupts = True  # type: ignore[attr-defined]
    return hook


class LineStream:
    """A file-like wrapper that turns a bar's carriage-return redraws into whole lines."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self._last = ""

    def write(self, text: str) -> int:
        for part in text.replace("\n", "\r").split("\r"):
            line = part.strip()
            # a bar's close repeats its last state (only the clock and the rate moved, and the rate's
            # padding with it: " 9.99/s" then "10.00/s"): skip that
            key = " ".join(_CLOCK.sub("", line).split())
            if line and key != self._last:
                self.stream.write(line + "\n")
                self._last = key
        return len(text)

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        return False


class NullBar:
    """What ``progress_bar(enabled=False)`` returns: the same methods, no output."""

    n = 0

    def update(self, n: int = 1) -> None:
        self.n += n

    def set_postfix_str(self, text: str, refresh: bool = True) -> None:
        return None

    def close(self) -> None:
        return None

    def __enter__(self) -> NullBar:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def progress_bar(
    *,
    total: int | None,
    desc: str,
    unit: str = "it",
    enabled: bool | None = True,
    stream: TextIO | None = None,
    interval: float = 1.0,
    initial: int = 0,
    postfix: str | None = None,
) -> Any:
    """A ``tqdm`` bar on ``stream`` (default ``sys.stderr``), or a silent stand-in when disabled.

    ``enabled=None`` draws only on a terminal (and stays silent elsewhere); ``True`` always reports
    (lines when not a terminal); ``False`` never. ``interval`` is the least time between two lines
    when the stream is not a terminal. ``initial`` counts work already done (a resumed run): it is
    shown but not counted as speed. ``postfix`` is text after the counts (``"4 from checkpoint"``).
    """
    out = stream if stream is not None else sys.stderr
    tty = bool(getattr(out, "isatty", lambda: False)())
    if enabled is False or (enabled is None and not tty):
        bar = NullBar()
        bar.n = initial
        return bar
    from tqdm import tqdm  # type: ignore[import-untyped,unused-ignore]

    if tty:
        return tqdm(total=total, desc=desc, unit=unit, file=out, initial=initial, dynamic_ncols=True, postfix=postfix)
    return tqdm(
        total=total,
        desc=desc,
        unit=unit,
        file=LineStream(out),
        initial=initial,
        postfix=postfix,
        # A fixed-width bar and no total width: with ``ncols`` the bar (and a cut-off postfix) grew or
        # shrank as the rate's digits changed, so a close repeating the last state printed a second line.
        bar_format=_LINE_FORMAT,
        ascii=True,
        mininterval=interval,
        maxinterval=max(interval, 10.0),
        miniters=1,
    )
