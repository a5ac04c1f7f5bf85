"""Evaluation: grade answers with a judge model and with plain checks, run a dataset twice, compare.

    python examples/evaluation.py

1. ``RelevancyEvaluator`` grades one answer; the judge's verdict (passed, score, reasoning,
   feedback) comes back typed through ``entity()``, never parsed from a YES/NO text.
2. Deterministic evaluators need no model: a regex (run in linear time) and a JSON-schema check.
3. ``run_evaluation`` runs a small dataset against two versions of an app and the report says which
   cases got better or worse; ``report.json`` and a self-contained ``report.html`` are written to a
   temporary folder (the same as ``python -m chatclient eval``).

Runs offline: the app is a ``FunctionChatModel`` and the judge a ``ScriptedChatModel``; set
``OPENAI_API_KEY`` or ``CHATCLIENT_BASE_URL`` for a real judge.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from _support import make_model

from chatclient import ChatClient
from chatclient.evaluation import (
    JsonSchemaEvaluator,
    RegexEvaluator,
    RelevancyEvaluator,
    render_html,
    render_table,
    run_evaluation,
)
from chatclient.prompt import Prompt
from chatclient.testing import FunctionChatModel, ScriptedChatModel

FACTS = {
    "capital of france": "Paris is the capital of France.",
    "boil": "Water boils at 100 degrees Celsius at sea level.",
    "spider": "A spider has eight legs.",
    "planet": "Jupiter is the largest planet in the solar system.",
    "speed of light": "Light travels at about 300,000 km per second.",
}

CASES = [
    {"id": "france", "input": "What is the capital of France?", "expected": {"contains": ["Paris"]}},
    {"id": "water", "input": "When does water boil?", "expected": {"contains": ["100"]}},
    {"id": "spider", "input": "How many legs does a spider have?", "expected": {"contains": ["eight"]}},
    {"id": "planet", "input": "Which planet is the largest?", "expected": {"regex": r"\bjupiter\b"}},
    {"id": "light", "input": "How fast is the speed of light?", "expected": {"contains": ["300,000"]}},
]


def app_v1(prompt: Prompt) -> str:
    """The first version only knows three facts."""
    question = prompt.user_message.text.lower()
    known = {k: v for k, v in list(FACTS.items())[:3]}
    return next((v for k, v in known.items() if k in question), "I do not know.")


def app_v2(prompt: Prompt) -> str:
    """The second version knows all five, but got sloppy about spiders."""
    question = prompt.user_message.text.lower()
    if "spider" in question:
        return "Spiders have many legs."
    for key, value in FACTS.items():
        if key in question or key.split()[0] in question:
            return value
    return "I do not know."


def main() -> None:
    verdict = {"reasoning": "It names Paris, which answers the question.", "passed": True, "score": 0.95, "feedback": ""}
    judge = make_model(ScriptedChatModel([json.dumps(verdict)]))
    app = ChatClient.create(FunctionChatModel(app_v1))

    result = RelevancyEvaluator(judge).evaluate(app.prompt("What is the capital of France?").call())
    print(f"relevancy: passed={result.passed} score={result.score} reasoning={result.reasoning!r}")

    print("regex:", RegexEvaluator(r"\b\d+ degrees\b").evaluate(FACTS["boil"]).reasoning)
    schema = JsonSchemaEvaluator({"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}})
    print("json schema:", schema.evaluate('{"town": "Paris"}').reasoning)

    before = run_evaluation(ChatClient.create(FunctionChatModel(app_v1)), CASES, name="v1")
    after = run_evaluation(ChatClient.create(FunctionChatModel(app_v2)), CASES, name="v2")
    print(render_table(after, baseline=before))

    out = Path(tempfile.mkdtemp(prefix="chatclient-eval-"))
    after.save(out / "report.json")
    (out / "report.html").write_text(render_html(after, baseline=before), encoding="utf-8")
    diff = after.compare(before)
    print(f"better: {[c.id for c in diff.better]} worse: {[c.id for c in diff.worse]}")
    print(f"reports written: {sorted(p.name for p in out.iterdir())} in {out}")


if __name__ == "__main__":
    main()
