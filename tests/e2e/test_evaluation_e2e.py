"""The embedded local model (Gemma 3 270M, in-process llama.cpp) as the judge of a tiny dataset.

What must hold whatever the judge's quality: every verdict arrives as a typed ``Verdict`` through
``entity()`` (llama.cpp's grammar holds the model to the schema), with a score in range and a
reasoning text, and the runner turns them into a report. How often a 270M judge agrees with a
person is printed, not asserted.
"""

from __future__ import annotations

from typing import Any

import pytest

from chatclient import ChatClient, ChatOptions
from chatclient.evaluation import AnswerCorrectnessEvaluator, EvaluationResult, render_table, run_evaluation
from chatclient.testing import FunctionChatModel

pytestmark = pytest.mark.e2e

CASES = [
    {"id": "capital", "input": "What is the capital of France?", "expected": "Paris is the capital of France."},
    {"id": "water", "input": "At what temperature does water boil at sea level?", "expected": "100 degrees Celsius."},
    {"id": "wrong", "input": "How many legs does a spider have?", "expected": "A spider has eight legs."},
]
ANSWERS = {
    "What is the capital of France?": "The capital of France is Paris.",
    "At what temperature does water boil at sea level?": "Water boils at 100 °C at sea level.",
    "How many legs does a spider have?": "Spiders have six legs.",
}


def test_local_model_judges_a_tiny_dataset(local_model: Any) -> None:
    app = ChatClient.create(FunctionChatModel(lambda p: ANSWERS[p.user_message.text]))
    judge = AnswerCorrectnessEvaluator(local_model, options=ChatOptions(temperature=0.0, seed=42, max_tokens=160))

    report = run_evaluation(app, CASES, [judge], concurrency=1, name="local-judge")

    print("\n" + render_table(report))
    assert report.total == 3 and report.errors == 0
    for case in report.cases:
        (result,) = case.results
        assert isinstance(result, EvaluationResult) and result.evaluator == "answer_correctness"
        assert 0.0 <= result.score <= 1.0
        assert result.reasoning.strip(), "the judge must explain its verdict"
        assert "could not judge" not in result.reasoning  # a malformed verdict would say so
