"""Decision questions: yes/no, one choice among options, a position on an ordered scale.

    YesNoQuestion("Is this message spam?", yes_when="it promotes a product or a website")
    ChoiceQuestion("Which team should handle this ticket?", ["billing", "support", "sales"])
    ScaleQuestion("How urgent is it?", ["low", "medium", "high"])

Options and levels are strings or ``Enum`` members; a member is shown as its name followed by its
description (its ``description`` attribute, else its value). Questions are checked when they are
made: a bad one raises :class:`~chatclient.errors.InvalidDecisionQuestionError`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import KW_ONLY, dataclass
from enum import Enum
from typing import Any

from chatclient.errors import InvalidDecisionQuestionError

LABELS = "ABCDEFGHIJKLMNOPQRST"
"""The single-token labels options and levels are asked with, in order (20: OpenAI's ``top_logprobs`` cap)."""

YES, NO = "yes", "no"
"""The answer tokens of a yes/no question."""

MAX_TEXT_CHARS = 4000
"""The longest question text, option or criterion (characters)."""


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidDecisionQuestionError(f"{what} must be a non-empty string, got {value!r}"[:300])
    if len(value) > MAX_TEXT_CHARS:
        raise InvalidDecisionQuestionError(
            f"{what} is {len(value)} characters long; keep it under {MAX_TEXT_CHARS} (put long material in the input)"
        )
    return value


def option_name(option: Any) -> str:
    """How an option is named to the model: the string itself, or an enum member's name."""
    return option.name if isinstance(option, Enum) else str(option)


def option_description(option: Any) -> str | None:
    """An enum member's description (its ``description`` attribute, else its value); ``None`` for a string."""
    if not isinstance(option, Enum):
        return None
    described = getattr(option, "description", None)
    text = described if isinstance(described, str) and described.strip() else str(option.value)
    return None if text == option.name else text


def _options(values: Any, what: str) -> tuple[Any, ...]:
    if isinstance(values, type) and issubclass(values, Enum):
        values = list(values)
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise InvalidDecisionQuestionError(
            f"{what} must be a list of strings or enum members (or an Enum class), got {type(values).__name__}"
        )
    items = tuple(values)
    if len(items) < 2:
        raise InvalidDecisionQuestionError(f"{what} needs at least two entries, got {len(items)}; add another")
    if len(items) > len(LABELS):
        raise InvalidDecisionQuestionError(
            f"{what} has {len(items)} entries, but only {len(LABELS)} single-token labels (A-{LABELS[-1]}) "
            "exist; group them, or split the question in two"
        )
    seen: dict[str, Any] = {}
    for item in items:
        if not isinstance(item, (str, Enum)):
            raise InvalidDecisionQuestionError(
                f"{what} entries must be strings or enum members, got {type(item).__name__} {item!r}"[:300]
            )
        name = _text(option_name(item), f"{what} entry")
        key = name.strip().casefold()
        if key in seen:
            raise InvalidDecisionQuestionError(
                f"{what} lists {name!r} twice (labels are compared ignoring case); give each entry its own name"
            )
        seen[key] = item
    return items


@dataclass(frozen=True, slots=True)
class YesNoQuestion:
    """A question answered with a probability of "yes"; ``yes_when`` / ``no_when`` describe the two cases."""

    text: str
    _: KW_ONLY
    yes_when: str | None = None
    no_when: str | None = None

    def __post_init__(self) -> None:
        _text(self.text, "the question text")
        for name in ("yes_when", "no_when"):
            value = getattr(self, name)
            if value is not None:
                _text(value, name)


@dataclass(frozen=True, slots=True, init=False)
class ChoiceQuestion:
    """Pick exactly one of ``options`` (at least two, at most 20; strings or enum members).

    ``by_name=True`` asks for the option's name instead of its letter: the probability of an option
    is that of the answer tokens its name starts with. Small models copy a name they read (the one a
    request mentions) far more readily than they map it to a letter.
    """

    text: str
    options: tuple[Any, ...]
    by_name: bool

    def __init__(self, text: str, options: Iterable[Any] | type[Enum], *, by_name: bool = False) -> None:
        object.__setattr__(self, "text", _text(text, "the question text"))
        object.__setattr__(self, "options", _options(options, "the options"))
        object.__setattr__(self, "by_name", bool(by_name))


@dataclass(frozen=True, slots=True, init=False)
class ScaleQuestion:
    """Place the input on ordered ``levels`` (lowest first; level ``i`` counts as ``i`` in the mean)."""

    text: str
    levels: tuple[Any, ...]

    def __init__(self, text: str, levels: Iterable[Any] | type[Enum]) -> None:
        object.__setattr__(self, "text", _text(text, "the question text"))
        object.__setattr__(self, "levels", _options(levels, "the levels"))


Question = YesNoQuestion | ChoiceQuestion | ScaleQuestion
"""Any decision question."""


def labels_of(question: Question) -> tuple[str, ...]:
    """The answers a question is asked with: ``("yes", "no")``, ``("A", "B", ...)``, or the option
    names of a ``ChoiceQuestion(by_name=True)``."""
    if isinstance(question, YesNoQuestion):
        return (YES, NO)
    if isinstance(question, ChoiceQuestion) and question.by_name:
        return tuple(option_name(o) for o in question.options)
    entries = question.options if isinstance(question, ChoiceQuestion) else question.levels
    return tuple(LABELS[: len(entries)])


def listing(question: Question) -> str:
    """The ``A: option`` lines of a choice or scale question (empty for yes/no)."""
    if isinstance(question, YesNoQuestion):
        return ""
    entries = question.options if isinstance(question, ChoiceQuestion) else question.levels
    if isinstance(question, ChoiceQuestion) and question.by_name:
        return "\n".join(
            f"- {option_name(o)}" + (f" ({d})" if (d := option_description(o)) else "") for o in question.options
        )
    lines = []
    for label, entry in zip(LABELS, entries, strict=False):
        described = option_description(entry)
        lines.append(f"{label}: {option_name(entry)}" + (f" ({described})" if described else ""))
    return "\n".join(lines)


__all__ = [
    "LABELS",
    "NO",
    "YES",
    "ChoiceQuestion",
    "Question",
    "ScaleQuestion",
    "YesNoQuestion",
    "labels_of",
    "listing",
    "option_description",
    "option_name",
]
