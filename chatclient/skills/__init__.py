"""Agent skills: folders of instructions and resources that the model loads only when it needs them.

A skill is a folder holding ``SKILL.md`` — YAML front matter with ``name`` and ``description``, then
the instructions in Markdown — and any other files it refers to (the layout Anthropic's Agent Skills
use)::

    skills/pdf-forms/
        SKILL.md            ---\\nname: pdf-forms\\ndescription: Fill in PDF forms ...\\n---\\n# How to ...
        reference.md        a resource the instructions point to
        scripts/fill.py     never readable through the tools

``SkillsAdvisor(skills)`` puts only each skill's name and description in the system prompt and offers
the model two tools: ``activate_skill(skill_name)`` returns the instructions (and the list of
resources), ``read_skill_resource(skill_name, relative_path)`` returns one resource file. So a client
can carry dozens of skills while the prompt pays only for a line each::

    skills = load_skills("skills/")
    client.prompt("Fill in the attached form").advisors(SkillsAdvisor(skills)).call()

Safety: a resource path that is absolute, leaves the skill folder (``..``, a symlink pointing out),
names ``SKILL.md`` or anything under ``scripts/`` (also through a symlink leading there) gets an error
tool response, never a read; files are
read with size caps; the front matter is parsed without YAML aliases (``chatclient.yamlsafe``).
Reading front matter needs PyYAML (extra ``skills``).
"""

from __future__ import annotations

from chatclient.skills.advisor import ACTIVATE_SKILL, READ_SKILL_RESOURCE, SkillsAdvisor
from chatclient.skills.skill import MAX_RESOURCE_BYTES, MAX_RESOURCES, MAX_SKILL_FILE_BYTES, Skill, load_skills

__all__ = [
    "ACTIVATE_SKILL",
    "MAX_RESOURCES",
    "MAX_RESOURCE_BYTES",
    "MAX_SKILL_FILE_BYTES",
    "READ_SKILL_RESOURCE",
    "Skill",
    "SkillsAdvisor",
    "load_skills",
]
