"""Decision services: declare questions as typed methods, get an implementation backed by a ``DecisionModel``.

    class Team(Enum):
        BILLING = "payments, payouts, invoices, refunds"
        SUPPORT = "problems using the product"

    class SupportDesk(Protocol):
        @decide("Is this message spam?")
        def is_spam(self, message: str) -> bool: ...

        @decide("Which team should handle this ticket?")
        def route(self, ticket: str) -> ChoiceAnswer[Team]: ...

    desk = decision_service(SupportDesk, model=OpenAIChatModel("gpt-4o-mini"))
    desk.is_spam("You won a cruise!")          # True when P(yes) >= threshold (0.5)

Return types: ``bool``, ``YesNoAnswer``, an ``Enum`` (the chosen member), ``ChoiceAnswer[E]``,
``ScaleAnswer[E]`` (levels = ``E``'s members, lowest first), or a pydantic model whose fields each
carry ``decide("...")`` (``Annotated[bool, decide("...")]`` or ``Field(json_schema_extra=decide("..."))``):
one question per field, all about the same input. The method's arguments are the input, sent as a
mapping of parameter name to value (``None`` left out). ``async def`` methods use ``adecide``.
Declarations are checked when the service is built (``AiServiceDefinitionError``).
"""

from __future__ import annotations

import abc
import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any, TypeVar

from chatclient.decisions.answers import ChoiceAnswer, ScaleAnswer, YesNoAnswer, check_threshold
from chatclient.decisions.model import DecisionModel, as_decision_model
from chatclient.decisions.questions import ChoiceQuestion, Question, ScaleQuestion, YesNoQuestion
from chatclient.errors import AiServiceDefinitionError, InvalidDecisionQuestionError, RefusalError
from chatclient.models.base import ChatModel

__all__ = ["Decide", "decide", "decision_service"]

T = TypeVar("T")

_DECIDE_ATTR = "__chatclient_decide__"


@dataclass(frozen=True, slots=True)
class Decide:
    """The question of a decision method or field; made by :func:`decide`.

    Used as a decorator on a method, as ``Annotated`` metadata, or as pydantic's
    ``json_schema_extra`` (where it adds ``"x-decide": question`` to the field's schema).
    """

    question: str

    def __call__(self, target: Any, *_: Any) -> Any:
        if isinstance(target, dict):  # pydantic calls json_schema_extra with the field's schema
            target["x-decide"] = self.question
            return None
        if callable(target):
            setattr(target, _DECIDE_ATTR, self)
            return target
        raise TypeError("decide(...) decorates a method, or goes in Annotated[...] / Field(json_schema_extra=...)")


def decide(question: str) -> Decide:
    """The question a decision-service method (or a field of its pydantic return type) answers."""
    if not isinstance(question, str) or not question.strip():
        raise TypeError("decide() takes the question text, e.g. @decide('Is this message spam?')")
    return Decide(question)


# -- analysis -------------------------------------------------------------------------------------

# How an answer becomes the declared value.
_BOOL, _YES_NO, _ENUM, _CHOICE, _SCALE = "bool", "yes_no", "enum", "choice", "scale"


@dataclass(frozen=True, slots=True)
class _Asked:
    """One question of a method and how its answer is returned."""

    name: str
    question: Question
    kind: str


@dataclass(frozen=True, slots=True)
class _Plan:
    name: str
    signature: inspect.Signature
    asked: tuple[_Asked, ...]
    model_type: Any  # a pydantic model class, or None for a single question
    is_async: bool


def _fail(where: str, message: str, method: str, parameter: str | None = None) -> AiServiceDefinitionError:
    return AiServiceDefinitionError(f"{where}: {message}", method=method, parameter=parameter)


def _enum_arg(tp: Any, wrapper: str, where: str, method: str) -> type[Enum]:
    args = typing.get_args(tp)
    if len(args) != 1 or not (isinstance(args[0], type) and issubclass(args[0], Enum)):
        raise _fail(where, f"{wrapper} needs an Enum type: {wrapper}[MyEnum]", method)
    enum: type[Enum] = args[0]
    return enum


def _question_for(tp: Any, text: str, name: str, where: str, method: str) -> _Asked:
    """The question a value of type ``tp`` answers."""
    from chatclient.services.analysis import unwrap_annotation

    tp = unwrap_annotation(tp)[0]
    origin = typing.get_origin(tp)
    try:
        if tp is bool:
            return _Asked(name, YesNoQuestion(text), _BOOL)
        if tp is YesNoAnswer:
            return _Asked(name, YesNoQuestion(text), _YES_NO)
        if isinstance(tp, type) and issubclass(tp, Enum):
            return _Asked(name, ChoiceQuestion(text, list(tp)), _ENUM)
        if origin is ChoiceAnswer or tp is ChoiceAnswer:
            return _Asked(name, ChoiceQuestion(text, list(_enum_arg(tp, "ChoiceAnswer", where, method))), _CHOICE)
        if origin is ScaleAnswer or tp is ScaleAnswer:
            return _Asked(name, ScaleQuestion(text, list(_enum_arg(tp, "ScaleAnswer", where, method))), _SCALE)
    except InvalidDecisionQuestionError as exc:
        raise _fail(where, f"{name}: {exc}", method) from None
    shown = getattr(tp, "__name__", repr(tp))
    raise _fail(
        where,
        f"{name} is declared as {shown}; a decision returns bool, YesNoAnswer, an Enum, ChoiceAnswer[E], "
        "ScaleAnswer[E], or a pydantic model whose fields are those types",
        method,
    )


def _field_question(info: Any) -> str | None:
    for meta in info.metadata or ():
        if isinstance(meta, Decide):
            return meta.question
    extra = info.json_schema_extra
    if isinstance(extra, Decide):
        return extra.question
    if isinstance(extra, dict) and isinstance(extra.get("decide"), str):
        return str(extra["decide"])
    return None


def _is_pydantic_model(tp: Any) -> bool:
    return isinstance(tp, type) and hasattr(tp, "model_fields") and hasattr(tp, "model_validate")


def _plan(interface: type, fn: Callable[..., Any]) -> _Plan:
    name = fn.__name__
    where = f"{interface.__name__}.{name}"
    try:
        signature = inspect.signature(fn, eval_str=True)
    except (NameError, TypeError, ValueError, SyntaxError) as exc:
        raise _fail(
            where, f"cannot read its type hints ({type(exc).__name__}: {exc}); define them at module level", name
        ) from None
    params = list(signature.parameters.values())
    if not params or params[0].kind not in (params[0].POSITIONAL_ONLY, params[0].POSITIONAL_OR_KEYWORD):
        raise _fail(where, "a service method needs `self` as its first parameter", name)
    if len(params) == 1:
        raise _fail(where, "it has no parameters; the arguments are what the decision is about", name)
    for p in params[1:]:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise _fail(where, f"parameter {p.name!r} is *args/**kwargs; name each input", name, p.name)
    marker: Decide | None = getattr(fn, _DECIDE_ATTR, None)
    returned = signature.return_annotation
    if _is_pydantic_model(returned):
        if marker is not None:
            raise _fail(
                where,
                "returns a model of several decisions, so put decide('...') on its fields, not on the method",
                name,
            )
        asked = []
        for field_name, info in returned.model_fields.items():
            text = _field_question(info)
            if text is None:
                raise _fail(
                    where,
                    f"field {field_name!r} of {returned.__name__} has no question; declare it as "
                    f"Annotated[..., decide('...')] or Field(json_schema_extra=decide('...'))",
                    name,
                )
            asked.append(_question_for(info.annotation, text, field_name, where, name))
        if not asked:
            raise _fail(where, f"{returned.__name__} has no fields to decide", name)
        return _Plan(name, signature, tuple(asked), returned, inspect.iscoroutinefunction(fn))
    if marker is None:
        raise _fail(where, "has no question: decorate it with @decide('...')", name)
    if returned is inspect.Signature.empty:
        raise _fail(
            where, "declares no return type; return bool, YesNoAnswer, an Enum, ChoiceAnswer[E] or ScaleAnswer[E]", name
        )
    asked_one = _question_for(returned, marker.question, name, where, name)
    return _Plan(name, signature, (asked_one,), None, inspect.iscoroutinefunction(fn))


# -- calls ----------------------------------------------------------------------------------------


def _value(asked: _Asked, answer: Any, threshold: float) -> Any:
    if answer.is_refused:
        raise RefusalError(answer.refusal, f"the model refused the decision {asked.name!r}: {answer.refusal[:200]}")
    if asked.kind == _BOOL:
        return answer.is_yes(threshold)
    if asked.kind == _ENUM:
        return answer.value
    return answer


def _inputs(plan: _Plan, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    bound = plan.signature.bind(None, *args, **kwargs)
    bound.apply_defaults()
    values = {k: v for k, v in list(bound.arguments.items())[1:] if v is not None}
    if not values:
        raise InvalidDecisionQuestionError(f"{plan.name}(): every argument is None; there is nothing to decide about")
    return values


def _result(plan: _Plan, answers: dict[str, Any], threshold: float) -> Any:
    values = {a.name: _value(a, answers[a.name], threshold) for a in plan.asked}
    if plan.model_type is None:
        return values[plan.name]
    return plan.model_type.model_validate(values)


def _method(plan: _Plan, decisions: DecisionModel, threshold: float) -> Callable[..., Any]:
    questions = {a.name: a.question for a in plan.asked}
    if plan.is_async:

        async def amethod(self: Any, *args: Any, **kwargs: Any) -> Any:
            answers = await decisions.adecide(_inputs(plan, args, kwargs), questions)
            return _result(plan, answers, threshold)

        method: Callable[..., Any] = amethod
    else:

        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            answers = decisions.decide(_inputs(plan, args, kwargs), questions)
            return _result(plan, answers, threshold)

    method.__name__ = plan.name
    setattr(method, "__signature__", plan.signature)  # noqa: B010 - help() shows the declared signature
    return method


def decision_service(interface: type[T], *, model: DecisionModel | ChatModel, threshold: float = 0.5) -> T:
    """Implement ``interface`` (a ``typing.Protocol`` or an ABC) with decisions (see the module docstring).

    ``model`` is a ``DecisionModel`` or a chat model that reports log-probabilities (wrapped);
    ``threshold`` is the P(yes) at which a ``bool`` method answers ``True``.
    """
    from chatclient.services.service import _declared_methods

    if not isinstance(interface, type):
        raise TypeError(f"decision_service needs an interface class, got {type(interface).__name__}")
    if not getattr(interface, "_is_protocol", False) and not isinstance(interface, abc.ABCMeta):
        raise AiServiceDefinitionError(
            f"{interface.__name__} is neither a typing.Protocol nor an abstract class; declare it as "
            f"`class {interface.__name__}(Protocol)` with @decide methods"
        )
    limit = check_threshold(threshold)
    declared = _declared_methods(interface)
    if not declared:
        raise AiServiceDefinitionError(f"{interface.__name__} declares no methods to implement")
    plans = {name: _plan(interface, fn) for name, fn in declared.items()}
    decisions = as_decision_model(model)
    namespace: dict[str, Any] = {name: _method(plan, decisions, limit) for name, plan in plans.items()}
    namespace["__init__"] = lambda self: None
    namespace["__repr__"] = lambda self: f"<decision_service {interface.__qualname__}>"
    namespace["__module__"] = interface.__module__
    namespace["decision_model"] = decisions
    cls = type(f"{interface.__name__}DecisionService", (interface,), namespace)
    try:
        instance = cls()
    except TypeError as exc:
        raise AiServiceDefinitionError(f"{interface.__name__} cannot be implemented: {exc}") from None
    return instance  # type: ignore[no-any-return]
