"""Skill-scoped tools: tools the model is offered only once it has activated their skill.

A skill's instructions often go with tools (a form-filling skill and its ``fill_field`` tool).
Offering them from the first turn costs prompt space and invites the model to use them without the
instructions. ``SkillScopedTools("pdf-forms", fill_field, read_form)`` is a request-aware tool
provider: it offers its tools from the turn after a successful ``activate_skill("pdf-forms")`` call
— in this request or earlier in the remembered conversation — and none before::

    client.prompt("Fill in the form").advisors(SkillsAdvisor(skills)).tools(
        SkillScopedTools("pdf-forms", fill_field)
    ).call()
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from chatclient.messages import AssistantMessage, Message, ToolResponseMessage
from chatclient.skills import ACTIVATE_SKILL, Skill
from chatclient.tools import ToolCallback
from chatclient.tools.decorator import resolve_tools
from chatclient.tools.providers import ToolProviderRequest

_MAX_ARGUMENTS_CHARS = 10_000  # an activate_skill call's arguments are one short name


def skill_activated(messages: Sequence[Message], skill_name: str) -> bool:
    """Whether ``messages`` hold an ``activate_skill`` call for ``skill_name`` that did not fail."""
    calls: set[str] = set()
    for message in messages:
        if isinstance(message, AssistantMessage):
            for call in message.tool_calls:
                if call.name == ACTIVATE_SKILL and _names(call.arguments) == skill_name:
                    calls.add(call.id)
        elif (
            isinstance(message, ToolResponseMessage)
            and calls
            and any(r.id in calls and not r.is_error for r in message.responses)
        ):
            return True
    return False


def _names(arguments: str) -> Any:
    if len(arguments) > _MAX_ARGUMENTS_CHARS:
        return None
    try:
        data = json.loads(arguments or "{}")
    except (ValueError, RecursionError):
        return None
    return data.get("skill_name") if isinstance(data, dict) else None


class SkillScopedTools:
    """A tool provider offering ``tools`` only after the model activated skill ``skill``.

    ``skill`` is a ``Skill`` or its name; ``tools`` are what ``.tools(...)`` accepts (``@tool``
    functions, objects with ``@tool`` methods, callbacks). Use it with ``SkillsAdvisor``, which
    offers ``activate_skill``.
    """

    def __init__(self, skill: Skill | str, *tools: Any) -> None:
        name = skill.name if isinstance(skill, Skill) else skill
        if not isinstance(name, str) or not name:
            raise TypeError(f"SkillScopedTools needs a Skill or a skill name, not {skill!r}")
        if not tools:
            raise ValueError(f"SkillScopedTools({name!r}) needs at least one tool")
        self.skill_name = name
        self._callbacks = tuple(resolve_tools(tools))

    def tool_callbacks(self, request: ToolProviderRequest | None = None) -> tuple[ToolCallback, ...]:
        """The tools when the request's conversation shows the skill activated; otherwise none."""
        if request is None or not skill_activated(request.messages, self.skill_name):
            return ()
        return self._callbacks

    def __repr__(self) -> str:
        names = ", ".join(cb.definition.name for cb in self._callbacks)
        return f"SkillScopedTools({self.skill_name!r}: {names})"
