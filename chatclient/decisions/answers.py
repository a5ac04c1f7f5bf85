"""Decision answers: probabilities read from the model's token log-probabilities.

    answer.is_yes(0.8)                  # YesNoAnswer: P(yes) >= 0.8
    choice.value, choice.margin()       # ChoiceAnswer: the likeliest option, its lead over the next
    scale.mean(), scale.value           # ScaleAnswer: expected level index, likeliest level

A refused answer (the model declined the question) carries ``refusal`` and ``is_refused``; reading
anything else from it raises :class:`~chatclient.errors.RefusalError`, so a refusal is never taken
for a "no".
"""

from __future__ import annotations

import math
import typing
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, Generic, TypeVar

from chatclient.errors import InvalidDecisionQuestionError, RefusalError

T = TypeVar("T")

_OPEN = frozenset({"refusal", "is_refused"})


def check_threshold(value: Any, name: str = "threshold") -> float:
    """``value`` as a float in 0..1, else ``InvalidDecisionQuestionError``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= float(value) <= 1.0:
        raise InvalidDecisionQuestionError(f"{name} must be a number between 0 and 1, got {value!r}")
    return float(value)


class _Answer:
    """Shared part: the refusal guard."""

    __slots__ = ("refusal",)
    refusal: str | None

    def __getattribute__(self, name: str) -> Any:
        if name[0] != "_" and name not in _OPEN:
            refusal = object.__getattribute__(self, "refusal")
            if refusal is not None:
                raise RefusalError(
                    refusal,
                    f"the model refused this decision ({refusal[:200]}); check answer.is_refused before "
                    "reading it, and treat a refusal as a failed check rather than a 'no'",
                )
        return object.__getattribute__(self, name)

    @property
    def is_refused(self) -> bool:
        """True when the model declined to answer (``refusal`` says why)."""
        return self.refusal is not None

    def __reduce__(self) -> Any:
        names = [n for klass in type(self).__mro__ for n in getattr(klass, "__slots__", ())]
        return (_restore, (type(self), {n: object.__getattribute__(self, n) for n in names}))

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        # Lets a pydantic model (a decision service's multi-question result) hold answers as fields.
        from pydantic_core import core_schema

        return core_schema.is_instance_schema(typing.get_origin(source) or cls)


class YesNoAnswer(_Answer):
    """``probability`` is P(yes), 0..1."""

    __slots__ = ("probability",)
    probability: float

    def __init__(self, probability: float, *, refusal: str | None = None) -> None:
        object.__setattr__(self, "refusal", refusal)
        object.__setattr__(
            self, "probability", check_threshold(probability, "probability") if refusal is None else math.nan
        )

    def is_yes(self, threshold: float = 0.5) -> bool:
        """Whether P(yes) reaches ``threshold``."""
        return self.probability >= check_threshold(threshold)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("answers are immutable")

    def __repr__(self) -> str:
        r = object.__getattribute__(self, "refusal")
        return f"YesNoAnswer(refused={r!r})" if r is not None else f"YesNoAnswer({self.probability:.4f})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, YesNoAnswer) and _state(self) == _state(other)

    def __hash__(self) -> int:
        return hash(_state(self))


def _state(answer: Any) -> tuple[Any, ...]:
    names = [n for klass in type(answer).__mro__ for n in getattr(klass, "__slots__", ())]
    return tuple(repr(object.__getattribute__(answer, n)) for n in names)


def _distribution(entries: Sequence[Any], probabilities: Sequence[float]) -> tuple[float, ...]:
    if len(entries) != len(probabilities):
        raise InvalidDecisionQuestionError(f"{len(entries)} entries but {len(probabilities)} probabilities")
    return tuple(check_threshold(p, "a probability") for p in probabilities)


def _index(entries: Sequence[Any], entry: Any, what: str) -> int:
    for i, e in enumerate(entries):
        if e == entry:
            return i
    shown = ", ".join(repr(e) for e in entries)
    raise InvalidDecisionQuestionError(f"{entry!r} is not one of the {what} ({shown})"[:400])


def _argmax(probabilities: Sequence[float]) -> int:
    return max(range(len(probabilities)), key=lambda i: (probabilities[i], -i))


class ChoiceAnswer(_Answer, Generic[T]):
    """The chosen option (``value``) and each option's probability (``probabilities``, option -> p, in option order).

    ``ChoiceAnswer(Team.BILLING, {Team.BILLING: 0.8, Team.SUPPORT: 0.2})`` builds one (in a test,
    for a decision service's stand-in); ``value`` must be one of the options.
    """

    __slots__ = ("chosen", "options", "probabilities_by_index")
    chosen: T | None
    options: tuple[T, ...]
    probabilities_by_index: tuple[float, ...]

    def __init__(self, value: T | None, probabilities: Mapping[T, float], *, refusal: str | None = None) -> None:
        if not isinstance(probabilities, Mapping):
            raise InvalidDecisionQuestionError("probabilities must be a mapping of option -> probability")
        object.__setattr__(self, "refusal", refusal)
        object.__setattr__(self, "options", tuple(probabilities))
        if refusal is not None:
            object.__setattr__(self, "chosen", None)
            object.__setattr__(self, "probabilities_by_index", ())
            return
        values = tuple(check_threshold(p, "a probability") for p in probabilities.values())
        object.__setattr__(self, "probabilities_by_index", values)
        object.__setattr__(self, "chosen", self.options[_index(self.options, value, "options")])

    @property
    def value(self) -> T:
        """The chosen option (the likeliest one, when the answer comes from a model)."""
        chosen: T = self.chosen  # type: ignore[assignment]
        return chosen

    @property
    def probabilities(self) -> Mapping[T, float]:
        """Option -> probability (they sum to 1)."""
        return MappingProxyType(dict(zip(self.options, self.probabilities_by_index, strict=True)))

    def probability_of(self, option: T) -> float:
        """The probability of ``option`` (an option not in the question raises ``InvalidDecisionQuestionError``)."""
        return self.probabilities_by_index[_index(self.options, option, "options")]

    def margin(self) -> float:
        """The difference between the two highest probabilities (small = the model hesitates)."""
        top = sorted(self.probabilities_by_index, reverse=True)
        return top[0] - (top[1] if len(top) > 1 else 0.0)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("answers are immutable")

    def __repr__(self) -> str:
        g = object.__getattribute__
        if g(self, "refusal") is not None:
            return f"{type(self).__name__}(refused={g(self, 'refusal')!r})"
        shown = ", ".join(f"{o!r}: {p:.3f}" for o, p in zip(self.options, self.probabilities_by_index, strict=True))
        return f"{type(self).__name__}({{{shown}}})"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and _state(self) == _state(other)

    def __hash__(self) -> int:
        return hash(_state(self))


class ScaleAnswer(ChoiceAnswer[T]):
    """A position on an ordered scale: ``probabilities`` per level (lowest first), ``mean()``, ``value``.

    ``ScaleAnswer({Severity.LOW: 0.1, Severity.HIGH: 0.9})`` builds one; ``value`` is the likeliest level.
    """

    __slots__ = ()

    def __init__(self, probabilities: Mapping[T, float], *, refusal: str | None = None) -> None:
        if refusal is not None or not isinstance(probabilities, Mapping) or not probabilities:
            super().__init__(None, probabilities, refusal=refusal)
            return
        levels = list(probabilities)
        super().__init__(levels[_argmax(list(probabilities.values()))], probabilities)

    @property
    def levels(self) -> tuple[T, ...]:
        """The levels, lowest first."""
        return self.options

    def mean(self) -> float:
        """The probability-weighted mean level index, 0..n-1 (it may fall between two levels)."""
        return sum(i * p for i, p in enumerate(self.probabilities_by_index))

    def probability_at_least(self, level: T) -> float:
        """The probability of ``level`` or any higher one."""
        return sum(self.probabilities_by_index[_index(self.options, level, "levels") :])


def _restore(cls: type[_Answer], state: dict[str, Any]) -> Any:
    answer = object.__new__(cls)
    for name, value in state.items():
        object.__setattr__(answer, name, value)
    return answer


Answer = YesNoAnswer | ChoiceAnswer[Any] | ScaleAnswer[Any]
"""Any decision answer."""

__all__ = ["Answer", "ChoiceAnswer", "ScaleAnswer", "YesNoAnswer", "check_threshold"]
