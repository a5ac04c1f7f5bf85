"""Evaluation: evaluators that explain their verdicts, a dataset runner and run reports.

    from chatclient.evaluation import RelevancyEvaluator, run_evaluation, render_html

    result = RelevancyEvaluator(judge_model).evaluate(client.prompt("What is RAG?").call())
    report = run_evaluation(client, "cases.jsonl", [RelevancyEvaluator(judge_model)])

The command line runs the same: ``python -m chatclient eval cases.jsonl --client app:make_client``.
"""

from chatclient._lazy import lazy_getattr
from chatclient.evaluation.base import EvaluationRequest, EvaluationResult, Evaluator, to_request

_LAZY = {
    "AnswerCorrectnessEvaluator": "chatclient.evaluation.judges",
    "FactCheckingEvaluator": "chatclient.evaluation.judges",
    "LlmJudgeEvaluator": "chatclient.evaluation.judges",
    "RelevancyEvaluator": "chatclient.evaluation.judges",
    "Verdict": "chatclient.evaluation.judges",
    "ContainsEvaluator": "chatclient.evaluation.deterministic",
    "EntityFieldsEvaluator": "chatclient.evaluation.deterministic",
    "ExactMatchEvaluator": "chatclient.evaluation.deterministic",
    "JsonSchemaEvaluator": "chatclient.evaluation.deterministic",
    "RegexEvaluator": "chatclient.evaluation.deterministic",
    "ToolCallEvaluator": "chatclient.evaluation.deterministic",
    "EvalCase": "chatclient.evaluation.dataset",
    "load_dataset": "chatclient.evaluation.dataset",
    "CaseResult": "chatclient.evaluation.runner",
    "EvalReport": "chatclient.evaluation.runner",
    "RunComparison": "chatclient.evaluation.runner",
    "run_evaluation": "chatclient.evaluation.runner",
    "render_html": "chatclient.evaluation.report",
    "render_table": "chatclient.evaluation.report",
}

__getattr__ = lazy_getattr("chatclient.evaluation", _LAZY, globals())

__all__ = [
    "AnswerCorrectnessEvaluator",
    "CaseResult",
    "ContainsEvaluator",
    "EntityFieldsEvaluator",
    "EvalCase",
    "EvalReport",
    "EvaluationRequest",
    "EvaluationResult",
    "Evaluator",
    "ExactMatchEvaluator",
    "FactCheckingEvaluator",
    "JsonSchemaEvaluator",
    "LlmJudgeEvaluator",
    "RegexEvaluator",
    "RelevancyEvaluator",
    "RunComparison",
    "ToolCallEvaluator",
    "Verdict",
    "load_dataset",
    "render_html",
    "render_table",
    "run_evaluation",
    "to_request",
]
