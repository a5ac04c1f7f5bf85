"""Assertions for tests of chatclient code, with failure messages that show what actually happened.

    assert_advisor_order(log, ["memory", "rag", "logger"])
    assert_prompt(model, contains="Paris", system="You are terse.")
    assert_tool_calls(response, ["get_weather"], arguments={"get_weather": {"city": "Oslo"}})

Each raises ``AssertionError`` (so pytest shows it as a test failure) whose message lists the
expected and the actual values side by side.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from chatclient import jsonsafe
from chatclient.prompt import Prompt


def _names_from_log(log: Sequence[str], phase: str) -> list[str]:
    return [entry.rsplit(":", 1)[0] for entry in log if entry.endswith(f":{phase}")]


def assert_advisor_order(log: Sequence[str], expected: Sequence[str]) -> None:
    """The advisors ran in ``expected`` order on the way in and in reverse on the way out.

    ``log`` is the shared list that ``RecordingAdvisor`` (or the ``recording_advisor`` fixture)
    appends ``"<name>:before"`` / ``"<name>:after"`` to. Every pass counts: an advisor placed after
    a recursive one (the tool loop, output validation) runs once per iteration, and appears so.
    """
    __tracebackhide__ = True  # pytest shows the failure at the caller
    before = _names_from_log(log, "before")
    after = _names_from_log(log, "after")
    want = list(expected)
    problems = []
    if before != want:
        problems.append(f"  on the way in:  expected {want}\n                  actual   {before}")
    if after and after != want[::-1]:
        problems.append(f"  on the way out: expected {want[::-1]}\n                  actual   {after}")
    if problems:
        raise AssertionError("advisors ran in an unexpected order:\n" + "\n".join(problems) + f"\n  full log: {list(log)}")


def _prompts_of(model_or_prompt: Any) -> list[Prompt]:
    if isinstance(model_or_prompt, Prompt):
        return [model_or_prompt]
    prompts = getattr(model_or_prompt, "prompts", None)
    if prompts is None:
        raise TypeError("pass a Prompt or a model that records its prompts (ScriptedChatModel, FunctionChatModel)")
    if not prompts:
        raise AssertionError("the model was never called, so there is no prompt to check")
    return list(prompts)


def _render(prompt: Prompt) -> str:
    return "\n".join(f"  [{m.type.value}] {m.text!r}" for m in prompt.messages)


def assert_prompt(
    model_or_prompt: Any,
    *,
    contains: str | Sequence[str] = (),
    user: str | None = None,
    system: str | None = None,
    not_contains: str | Sequence[str] = (),
    call: int = -1,
) -> None:
    """The prompt the model received (the last call by default, ``call=i`` for another) looks as expected.

    ``user`` / ``system`` compare the last user / the system message exactly; ``contains`` /
    ``not_contains`` look for text anywhere in the prompt.
    """
    __tracebackhide__ = True  # pytest shows the failure at the caller
    prompts = _prompts_of(model_or_prompt)
    try:
        prompt = prompts[call]
    except IndexError:
        raise AssertionError(f"the model was called {len(prompts)} time(s); there is no call {call}") from None
    problems: list[str] = []
    text = prompt.contents
    for piece in [contains] if isinstance(contains, str) else contains:
        if piece not in text:
            problems.append(f"expected the prompt to contain {piece!r}")
    for piece in [not_contains] if isinstance(not_contains, str) else not_contains:
        if piece in text:
            problems.append(f"expected the prompt NOT to contain {piece!r}")
    if user is not None and prompt.user_message.text != user:
        problems.append(f"user message: expected {user!r}, actual {prompt.user_message.text!r}")
    if system is not None:
        actual = prompt.system_message.text
        if actual != system:
            problems.append(f"system message: expected {system!r}, actual {actual!r}")
    if problems:
        raise AssertionError("; ".join(problems) + f"\nthe prompt the model received (call {call}):\n" + _render(prompt))


def _arguments(text: Any) -> Any:
    if isinstance(text, str):
        try:
            return jsonsafe.loads(text)
        except ValueError:
            return text
    return text


def assert_tool_calls(
    response: Any,
    expected: Sequence[str],
    *,
    arguments: Mapping[str, Mapping[str, Any]] | None = None,
    exact: bool = True,
) -> None:
    """The tool loop ran the ``expected`` tools (in this order; ``exact=False``: at least these).

    ``response`` is a ``ChatClientResponse`` (or a call spec); ``arguments`` maps a tool name to
    arguments one of its calls must have had (a subset match).
    """
    __tracebackhide__ = True  # pytest shows the failure at the caller
    cr = response.chat_client_response() if callable(getattr(response, "chat_client_response", None)) else response
    calls = [(e.name, _arguments(e.arguments)) for e in cr.tool_executions]
    names = [n for n, _ in calls]
    problems = []
    if exact and names != list(expected):
        problems.append(f"expected tool calls {list(expected)}, actual {names}")
    if not exact and any(n not in names for n in expected):
        problems.append(f"expected at least the tool calls {list(expected)}, actual {names}")
    for name, want in (arguments or {}).items():
        seen = [args for n, args in calls if n == name]
        if not any(isinstance(a, Mapping) and all(a.get(k) == v for k, v in want.items()) for a in seen):
            problems.append(f"expected a {name} call with arguments {dict(want)}, saw {seen}")
    if problems:
        shown = "\n".join(f"  {n}({json.dumps(a, default=str)})" for n, a in calls) or "  (none)"
        raise AssertionError("; ".join(problems) + "\ntool calls made:\n" + shown)


__all__ = ["assert_advisor_order", "assert_prompt", "assert_tool_calls"]
