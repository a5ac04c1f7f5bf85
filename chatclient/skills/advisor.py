"""``SkillsAdvisor``: skills' names and descriptions in the system prompt, their instructions and
resources loaded on demand through the ``activate_skill`` and ``read_skill_resource`` tools."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from chatclient.advisor import TOOL_CALL_ORDER, AdvisorChain, BaseAdvisor
from chatclient.errors import SkillError, ToolExecutionError
from chatclient.messages import SystemMessage
from chatclient.request import ChatClientRequest, ChatClientResponse, ContextKeys
from chatclient.skills.skill import MAX_RESOURCE_BYTES, Skill, _check_unique
from chatclient.tools.callback import FunctionToolCallback, ToolCallback

__all__ = ["ACTIVATE_SKILL", "READ_SKILL_RESOURCE", "SkillsAdvisor"]

ACTIVATE_SKILL = "activate_skill"
READ_SKILL_RESOURCE = "read_skill_resource"


class SkillsAdvisor(BaseAdvisor):
    """Offers ``skills`` to the model: names and descriptions in the system prompt, bodies on demand.

    The model calls ``activate_skill(skill_name)`` for a skill's instructions and
    ``read_skill_resource(skill_name, relative_path)`` for one of its files; a wrong name or path comes
    back as an error tool response the model can act on. The advisor runs before the tool loop
    (``order = TOOL_CALL_ORDER - 50``) and brings its own tool loop when the request has no tools.
    """

    def __init__(
        self,
        skills: Skill | Iterable[Skill],
        *,
        max_resource_bytes: int = MAX_RESOURCE_BYTES,
        order: int = TOOL_CALL_ORDER - 50,
    ) -> None:
        chosen = (skills,) if isinstance(skills, Skill) else tuple(skills)
        if not chosen:
            raise ValueError("SkillsAdvisor needs at least one Skill (see load_skills(folder))")
        for s in chosen:
            if not isinstance(s, Skill):
                raise TypeError(f"SkillsAdvisor takes Skill objects (Skill.from_dir(path)), not {type(s).__name__}")
        _check_unique(chosen)
        self.skills: dict[str, Skill] = {s.name: s for s in chosen}
        self.max_resource_bytes = max_resource_bytes
        self.order = order

    def catalogue(self) -> str:
        """The text added to the system prompt: one line per skill."""
        lines = "\n".join(f"- {s.name}: {s.description}" for s in self.skills.values())
        files = (
            f"; call {READ_SKILL_RESOURCE} for a file the instructions mention"
            if any(s.resources for s in self.skills.values())
            else ""
        )
        return (
            "You have skills: sets of instructions for particular tasks. When a task matches a skill, call "
            f"{ACTIVATE_SKILL} with the skill's name first and follow what it returns{files}.\n"
            f"Available skills:\n{lines}"
        )

    def tool_callbacks(self) -> tuple[ToolCallback, ...]:
        """The tools bound to this advisor's skills (``read_skill_resource`` only when a skill has resources)."""
        # Built once (their schemas cost ~2 ms), again only when the skills or the cap changed.
        key = (tuple(self.skills.items()), self.max_resource_bytes)
        built = self.__dict__.get("_tools")
        if built is None or built[0] != key:
            built = self._tools = (key, self._build_tools())
        return built[1]

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("_tools", None)  # local functions: rebuilt after unpickling
        return state

    def _build_tools(self) -> tuple[ToolCallback, ...]:
        skills, cap = self.skills, self.max_resource_bytes

        def find(skill_name: str) -> Skill:
            skill = skills.get(skill_name)
            if skill is None:
                raise ToolExecutionError(
                    f"no skill named {skill_name!r}; available: {', '.join(skills)}", ACTIVATE_SKILL
                )
            return skill

        def activate_skill(skill_name: str) -> str:
            skill = find(skill_name)
            listed = "\n".join(f"- {r}" for r in skill.resources)
            more = f"\n\nResources (read with {READ_SKILL_RESOURCE}):\n{listed}" if listed else ""
            return f"# Skill: {skill.name}\n\n{skill.instructions}{more}"

        def read_skill_resource(skill_name: str, relative_path: str) -> str:
            try:
                return find(skill_name).read_resource(relative_path, max_bytes=cap)
            except SkillError as exc:
                raise ToolExecutionError(str(exc), READ_SKILL_RESOURCE) from None

        activate = FunctionToolCallback(
            activate_skill, description="Load the full instructions of one of your skills, by its name."
        )
        if not any(s.resources for s in skills.values()):
            return (activate,)
        read = FunctionToolCallback(
            read_skill_resource,
            description="Read a file of an activated skill, by the skill's name and the file's path in the skill.",
        )
        return (activate, read)

    def before(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientRequest:
        from chatclient.tools.decorator import _check_unique as check_unique_tools

        text = self.catalogue()
        prompt = request.prompt.augment_system_message(
            lambda m: SystemMessage(f"{m.text}\n\n{text}" if m.text else text, m.metadata)
        )
        callbacks = (*tuple(request.context.get(ContextKeys.TOOL_CALLBACKS) or ()), *self.tool_callbacks())
        check_unique_tools(callbacks)
        return request.mutate(
            prompt=prompt.copy(tools=tuple(cb.definition for cb in callbacks)),
            context={ContextKeys.TOOL_CALLBACKS: callbacks},
        )

    def _loop(self, request: ChatClientRequest, chain: AdvisorChain) -> AdvisorChain:
        """``chain`` itself when a tool loop follows; else the rest of it behind a tool loop of our own."""
        from chatclient.tools import ToolCallAdvisor

        if any(isinstance(a, ToolCallAdvisor) for a in chain.remaining):
            return chain
        return AdvisorChain((ToolCallAdvisor(), *chain.remaining), 0, request.context.get(ContextKeys.EVENTS))

    def advise_call(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientResponse:
        request = self.before(request, chain)
        return self._loop(request, chain).next_call(request)

    def advise_stream(self, request: ChatClientRequest, chain: AdvisorChain) -> Iterator[ChatClientResponse]:
        request = self.before(request, chain)
        return self._loop(request, chain).next_stream(request)

    async def advise_acall(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientResponse:
        request = self.before(request, chain)
        return await self._loop(request, chain).next_acall(request)

    def advise_astream(self, request: ChatClientRequest, chain: AdvisorChain) -> Any:
        request = self.before(request, chain)
        return self._loop(request, chain).next_astream(request)

    def __repr__(self) -> str:
        return f"SkillsAdvisor(skills={list(self.skills)}, order={self.order})"
