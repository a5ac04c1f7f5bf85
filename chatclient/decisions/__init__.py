"""Decision models and decision services: typed answers with probabilities read from token log-probabilities.

    from chatclient.decisions import DecisionModel, YesNoQuestion, ChoiceQuestion

    decisions = DecisionModel(LlamaCppChatModel())          # or any OpenAI-compatible model
    answers = decisions.decide("I was charged twice!", {
        "refund": YesNoQuestion("Does the customer ask for money back?"),
        "team": ChoiceQuestion("Which team should handle this?", ["billing", "support", "sales"]),
    })
    answers["refund"].probability, answers["team"].value, answers["team"].margin()

Built on it: :func:`decision_service` with :func:`decide` (typed interfaces), decision guardrails,
a query router, a tool filter advisor and a scoring model for reranking. See ``docs/guide/decisions.md``.
"""

from typing import TYPE_CHECKING

from chatclient._lazy import lazy_getattr
from chatclient.decisions.answers import Answer, ChoiceAnswer, ScaleAnswer, YesNoAnswer
from chatclient.decisions.model import DecisionModel
from chatclient.decisions.questions import ChoiceQuestion, Question, ScaleQuestion, YesNoQuestion
from chatclient.decisions.service import Decide, decide, decision_service

_LAZY = {
    "DecisionInputGuardrail": "chatclient.decisions.guardrails",
    "DecisionOutputGuardrail": "chatclient.decisions.guardrails",
    "DecisionQueryRouter": "chatclient.decisions.routing",
    "DecisionScoringModel": "chatclient.decisions.scoring",
    "DecisionToolFilter": "chatclient.decisions.tools",
}

__getattr__ = lazy_getattr(__name__, _LAZY, globals())

__all__ = [
    "Answer",
    "ChoiceAnswer",
    "ChoiceQuestion",
    "Decide",
    "DecisionInputGuardrail",
    "DecisionModel",
    "DecisionOutputGuardrail",
    "DecisionQueryRouter",
    "DecisionScoringModel",
    "DecisionToolFilter",
    "Question",
    "ScaleAnswer",
    "ScaleQuestion",
    "YesNoAnswer",
    "YesNoQuestion",
    "decide",
    "decision_service",
]

if TYPE_CHECKING:
    from chatclient.decisions.guardrails import DecisionInputGuardrail as DecisionInputGuardrail
    from chatclient.decisions.guardrails import DecisionOutputGuardrail as DecisionOutputGuardrail
    from chatclient.decisions.routing import DecisionQueryRouter as DecisionQueryRouter
    from chatclient.decisions.scoring import DecisionScoringModel as DecisionScoringModel
    from chatclient.decisions.tools import DecisionToolFilter as DecisionToolFilter
