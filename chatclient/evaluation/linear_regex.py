"""A regular-expression matcher that runs in time linear in the text, for patterns from datasets.

Python's ``re`` backtracks: ``\\w*x`` searched in 20,000 letters takes about half a second, nested
repeats take exponential time. Answers come from a model, so a check on them must not depend on
their shape. ``LinearPattern`` parses the pattern with Python's own regex parser (same syntax)
and runs it as a Thompson NFA, one step per character holding every live state at once: the cost is
O(len(text) x len(pattern)), whatever the text.

Supported: literals, ``.``, classes (``[a-z]``, ``\\d``, ``\\w``, ``\\s`` and negations), groups,
alternation, greedy and lazy repeats (``* + ? {m,n}``), anchors ``^ $ \\A \\Z \\b \\B`` and the
``i``/``s``/``m`` flags. Backreferences and lookaround are refused (they have no linear algorithm).
The result is a yes/no answer with the span of the leftmost match.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

_MAX_PATTERN = 1_000
_MAX_PROGRAM = 20_000  # instructions after expanding counted repeats


@dataclass(slots=True)
class _Inst:
    op: str  # "char", "split", "jmp", "assert", "match"
    test: Callable[[str], bool] | None = None
    x: int = 0
    y: int = 0
    kind: str = ""


def _category(cat: Any) -> Callable[[str], bool]:
    name = str(cat)
    if "DIGIT" in name:
        base: Callable[[str], bool] = str.isdecimal
    elif "WORD" in name:
        base = _is_word
    elif "SPACE" in name:
        base = str.isspace
    elif "LINEBREAK" in name:
        base = lambda ch: ch == "\n"  # noqa: E731
    else:
        raise ValueError(f"unsupported character category {name}")
    if "NOT_" in name:
        return lambda ch: not base(ch)
    return base


def _is_word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def _in_range(low: int, high: int, ignore_case: bool) -> Callable[[str], bool]:
    if ignore_case:
        return lambda t: any(low <= ord(v) <= high for v in (t, t.lower(), t.upper()))
    return lambda t: low <= ord(t) <= high


class _Compiler:
    def __init__(self, flags: int) -> None:
        self.prog: list[_Inst] = []
        self.ignore_case = bool(flags & re.IGNORECASE)
        self.dotall = bool(flags & re.DOTALL)
        self.multiline = bool(flags & re.MULTILINE)
        from re import _constants as c  # type: ignore[attr-defined]  # the parser's opcodes

        self.c = c

    def emit(self, inst: _Inst) -> int:
        if len(self.prog) >= _MAX_PROGRAM:
            raise ValueError("pattern expands to too many states (large counted repeats); simplify it")
        self.prog.append(inst)
        return len(self.prog) - 1

    def literal(self, code: int, negate: bool = False) -> Callable[[str], bool]:
        ch = chr(code)
        if self.ignore_case:
            folded = ch.casefold()
            return (lambda t: t.casefold() != folded) if negate else (lambda t: t.casefold() == folded)
        return (lambda t: t != ch) if negate else (lambda t: t == ch)

    def char_class(self, items: list[tuple[Any, Any]]) -> Callable[[str], bool]:
        c = self.c
        negate = False
        tests: list[Callable[[str], bool]] = []
        for op, arg in items:
            if op is c.NEGATE:
                negate = True
            elif op is c.LITERAL:
                tests.append(self.literal(arg))
            elif op is c.RANGE:
                tests.append(_in_range(arg[0], arg[1], self.ignore_case))
            elif op is c.CATEGORY:
                tests.append(_category(arg))
            else:
                raise ValueError(f"unsupported item {op} in a character class")
        if negate:
            return lambda t: not any(f(t) for f in tests)
        return lambda t: any(f(t) for f in tests)

    def seq(self, items: Any) -> None:
        for op, arg in items:
            self.node(op, arg)

    def node(self, op: Any, arg: Any) -> None:
        c = self.c
        if op is c.LITERAL:
            self.emit(_Inst("char", self.literal(arg)))
        elif op is c.NOT_LITERAL:
            self.emit(_Inst("char", self.literal(arg, negate=True)))
        elif op is c.ANY:
            self.emit(_Inst("char", (lambda t: True) if self.dotall else (lambda t: t != "\n")))
        elif op is c.IN:
            self.emit(_Inst("char", self.char_class(list(arg))))
        elif op is c.SUBPATTERN:
            self.seq(arg[-1])
        elif op is c.BRANCH:
            self.branch(arg[1])
        elif op in (c.MAX_REPEAT, c.MIN_REPEAT, getattr(c, "POSSESSIVE_REPEAT", c.MAX_REPEAT)):
            self.repeat(arg[0], arg[1], arg[2], greedy=op is not c.MIN_REPEAT)
        elif op is c.AT:
            self.emit(_Inst("assert", kind=str(arg)))
        else:
            raise ValueError(f"the pattern uses {str(op).lower()}, which cannot be matched in linear time")

    def branch(self, alternatives: list[Any]) -> None:
        jumps: list[int] = []
        for i, alt in enumerate(alternatives):
            if i < len(alternatives) - 1:
                split = self.emit(_Inst("split"))
                self.prog[split].x = len(self.prog)
                self.seq(alt)
                jumps.append(self.emit(_Inst("jmp")))
                self.prog[split].y = len(self.prog)
            else:
                self.seq(alt)
        for j in jumps:
            self.prog[j].x = len(self.prog)

    def optional(self, body: Any, greedy: bool) -> None:
        split = self.emit(_Inst("split"))
        start = len(self.prog)
        self.seq(body)
        end = len(self.prog)
        self.prog[split].x, self.prog[split].y = (start, end) if greedy else (end, start)

    def repeat(self, low: int, high: int, body: Any, greedy: bool) -> None:
        for _ in range(low):
            self.seq(body)
        if high == self.c.MAXREPEAT:
            loop = self.emit(_Inst("split"))
            start = len(self.prog)
            self.seq(body)
            self.emit(_Inst("jmp", x=loop))
            end = len(self.prog)
            self.prog[loop].x, self.prog[loop].y = (start, end) if greedy else (end, start)
        else:
            for _ in range(high - low):
                self.optional(body, greedy)


IGNORECASE = re.IGNORECASE
DOTALL = re.DOTALL
MULTILINE = re.MULTILINE


class LinearPattern:
    """A compiled pattern whose ``search`` / ``fullmatch`` run in O(len(text) x len(pattern)).

    >>> LinearPattern(r"\\bord(er)?\\b", re.IGNORECASE).search("Advisors run in ORDER.")
    (16, 21)
    """

    def __init__(self, pattern: str, flags: int = 0) -> None:
        if not isinstance(pattern, str) or not pattern:
            raise ValueError("pattern must be a non-empty string")
        if len(pattern) > _MAX_PATTERN:
            raise ValueError(f"pattern is longer than {_MAX_PATTERN} characters; use a shorter pattern")
        from re import _parser  # type: ignore[attr-defined]

        try:
            parsed = _parser.parse(pattern, flags)
        except re.error as exc:
            raise ValueError(f"pattern {pattern!r} is not a valid regular expression: {exc}") from None
        compiler = _Compiler(flags | parsed.state.flags)
        try:
            compiler.seq(parsed)
        except ValueError as exc:
            raise ValueError(f"pattern {pattern!r}: {exc}") from None
        compiler.emit(_Inst("match"))
        self.pattern = pattern
        self.multiline = compiler.multiline
        self._prog = compiler.prog

    def _holds(self, kind: str, text: str, i: int) -> bool:
        n = len(text)
        if kind == "AT_BEGINNING":
            return i == 0 or (self.multiline and text[i - 1] == "\n")
        if kind == "AT_BEGINNING_STRING":
            return i == 0
        if kind == "AT_END":
            return i == n or (i == n - 1 and text[i] == "\n") or (self.multiline and text[i] == "\n")
        if kind == "AT_END_STRING":
            return i == n
        before = i > 0 and _is_word(text[i - 1])
        after = i < n and _is_word(text[i])
        if kind == "AT_BOUNDARY":
            return before != after
        if kind == "AT_NON_BOUNDARY":
            return before == after
        raise ValueError(f"unsupported anchor {kind}")

    def _add(self, states: list[tuple[int, int]], seen: set[int], pc: int, start: int, text: str, i: int) -> None:
        # Iterative epsilon closure; `seen` keeps each state once per position (the linear bound).
        stack = [pc]
        while stack:
            pc = stack.pop()
            if pc in seen:
                continue
            seen.add(pc)
            inst = self._prog[pc]
            if inst.op == "jmp":
                stack.append(inst.x)
            elif inst.op == "split":
                stack.append(inst.y)  # pushed first so x (the preferred branch) is explored first
                stack.append(inst.x)
            elif inst.op == "assert":
                if self._holds(inst.kind, text, i):
                    stack.append(pc + 1)
            else:
                states.append((pc, start))

    def _run(self, text: str, anchored: bool, whole: bool) -> tuple[int, int] | None:
        current: list[tuple[int, int]] = []
        seen: set[int] = set()
        self._add(current, seen, 0, 0, text, 0)
        best: tuple[int, int] | None = None
        for i in range(len(text) + 1):
            for pc, start in current:
                done = self._prog[pc].op == "match" and (not whole or i == len(text))
                if done and (best is None or start <= best[0]):
                    best = (start, i)
            if best is not None and not whole and all(s > best[0] for pc, s in current if self._prog[pc].op != "match"):
                return best
            if i == len(text):
                break
            ch = text[i]
            following: list[tuple[int, int]] = []
            seen = set()
            for pc, start in current:
                inst = self._prog[pc]
                if inst.op == "char" and inst.test is not None and inst.test(ch) and (best is None or start <= best[0]):
                    self._add(following, seen, pc + 1, start, text, i + 1)
            if not anchored and best is None:
                self._add(following, seen, 0, i + 1, text, i + 1)
            current = following
            if not current and (anchored or best is not None):
                break
        return best

    def search(self, text: str) -> tuple[int, int] | None:
        """The span of the leftmost (longest for greedy patterns) match, or ``None``."""
        return self._run(text, anchored=False, whole=False)

    def fullmatch(self, text: str) -> bool:
        """True when the whole text matches."""
        return self._run(text, anchored=True, whole=True) is not None


__all__ = ["DOTALL", "IGNORECASE", "MULTILINE", "LinearPattern"]
