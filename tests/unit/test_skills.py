"""Skills: SKILL.md folders, the catalogue in the prompt, bodies and resources loaded through tools."""

from __future__ import annotations

import asyncio
import json
import os
import pickle
from pathlib import Path

import pytest

from chatclient import ChatClient
from chatclient.errors import SkillError, ToolExecutionError
from chatclient.messages import AssistantMessage, SystemMessage, ToolCall, ToolResponseMessage
from chatclient.skills import Skill, SkillsAdvisor, load_skills
from chatclient.testing import ScriptedChatModel
from chatclient.tools import tool

pytest.importorskip("yaml", reason="skill front matter needs PyYAML (extra skills)")


def _skill(root: Path, name: str, description: str, body: str, files: dict[str, str] | None = None) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\nlicense: MIT\n---\n{body}\n")
    for rel, text in (files or {}).items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text)
    return folder


@pytest.fixture
def skills_dir(tmp_path: Path) -> Path:
    root = tmp_path / "skills"
    _skill(
        root,
        "invoices",
        "Read and total invoices",
        "# Invoices\nAdd up every line item, then read reference.md.",
        {"reference.md": "VAT is 20 %.", "data/rates.csv": "a,1", "scripts/run.py": "print('x')"},
    )
    _skill(root, "haiku", "Write haiku poems", "Three lines: 5, 7, 5 syllables.")
    (tmp_path / "secret.txt").write_text("TOP SECRET")
    return root


def test_from_dir_reads_front_matter_body_and_resources(skills_dir: Path) -> None:
    skill = Skill.from_dir(skills_dir / "invoices")
    assert skill.name == "invoices"
    assert skill.description == "Read and total invoices"
    assert skill.instructions.startswith("# Invoices")
    assert skill.resources == ("data/rates.csv", "reference.md")  # SKILL.md and scripts/** are not resources
    assert skill.metadata == {"license": "MIT"}
    assert skill.read_resource("reference.md") == "VAT is 20 %."


def test_load_skills_finds_every_folder(skills_dir: Path) -> None:
    assert [s.name for s in load_skills(skills_dir)] == ["haiku", "invoices"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("no front matter", "must start with YAML front matter"),
        ("---\nname: x\n", "no closing"),
        ("---\nname: x\n---\nbody", "'name' and 'description'"),
        ("---\n- a\n- b\n---\nbody", "must be a mapping"),
        ("---\nname: a b\ndescription: d\n---\n", "invalid skill name"),
        ("---\nname: ok\ndescription: &a [x]\nlicense: *a\n---\n", "aliases"),
        ("---\nname: [unclosed\n---\n", "not valid YAML"),
    ],
)
def test_bad_skill_files_are_typed_errors(tmp_path: Path, content: str, message: str) -> None:
    (tmp_path / "SKILL.md").write_text(content)
    with pytest.raises(SkillError, match=message):
        Skill.from_dir(tmp_path)


def test_missing_skill_file_and_duplicate_names(tmp_path: Path) -> None:
    with pytest.raises(SkillError, match=r"no SKILL\.md"):
        Skill.from_dir(tmp_path)
    s = Skill("same", "d", "b")
    with pytest.raises(SkillError, match="unique"):
        SkillsAdvisor([s, Skill("same", "other", "b")])


@pytest.mark.parametrize(
    "path",
    ["/etc/passwd", "../secret.txt", "data/../../secret.txt", "SKILL.md", "scripts/run.py", "missing.md", "", "a\\b"],
)
def test_paths_outside_the_resources_are_refused(skills_dir: Path, path: str) -> None:
    skill = Skill.from_dir(skills_dir / "invoices")
    with pytest.raises(SkillError):
        skill.read_resource(path)


def test_symlink_leaving_the_folder_is_not_a_resource(skills_dir: Path) -> None:
    folder = skills_dir / "invoices"
    os.symlink(skills_dir.parent / "secret.txt", folder / "leak.md")
    skill = Skill.from_dir(folder)
    assert "leak.md" not in skill.resources
    with pytest.raises(SkillError):
        skill.read_resource("leak.md")


def test_a_skill_md_linked_from_outside_the_folder_is_refused(tmp_path: Path) -> None:
    # SKILL.md goes into the prompt as instructions: like a resource, it may not lead out of its folder
    outside = tmp_path / "elsewhere.md"
    outside.write_text("---\nname: leak\ndescription: read from outside\n---\nsecret instructions\n")
    folder = tmp_path / "skills" / "leak"
    folder.mkdir(parents=True)
    os.symlink(outside, folder / "SKILL.md")
    with pytest.raises(SkillError, match="out of the skill folder"):
        Skill.from_dir(folder)
    inside = tmp_path / "skills" / "linked"
    inside.mkdir()
    (inside / "real.md").write_text(outside.read_text())
    os.symlink(inside / "real.md", inside / "SKILL.md")  # a link within the folder is fine
    assert Skill.from_dir(inside).instructions == "secret instructions"


def test_a_symlink_into_scripts_is_not_a_resource(skills_dir: Path) -> None:
    """Issue 36 item 8: a link inside the folder pointing into scripts/ exposed the script's text."""
    folder = skills_dir / "invoices"
    os.symlink(folder / "scripts" / "run.py", folder / "notes.md")
    os.symlink(folder / "scripts", folder / "tools")  # a linked folder too
    os.symlink(folder / "SKILL.md", folder / "copy.md")
    skill = Skill.from_dir(folder)
    assert skill.resources == ("data/rates.csv", "reference.md")
    for path in ("notes.md", "tools/run.py", "copy.md"):
        with pytest.raises(SkillError, match=r"scripts/|SKILL\.md|not a resource"):
            skill.read_resource(path)
    advisor = SkillsAdvisor([skill])
    read = {cb.definition.name: cb for cb in advisor.tool_callbacks()}["read_skill_resource"]
    with pytest.raises(ToolExecutionError, match="not a resource") as refused:  # an error tool response
        read.call(json.dumps({"skill_name": "invoices", "relative_path": "notes.md"}))
    assert "print('x')" not in str(refused.value)


def test_a_link_swapped_in_after_listing_is_refused_by_where_it_leads(skills_dir: Path) -> None:
    folder = skills_dir / "invoices"
    skill = Skill.from_dir(folder)
    assert "reference.md" in skill.resources
    (folder / "reference.md").unlink()
    os.symlink(folder / "scripts" / "run.py", folder / "reference.md")
    with pytest.raises(SkillError, match="scripts/"):
        skill.read_resource("reference.md")


def test_a_symlink_loop_is_skipped_when_listing_and_a_skill_error_when_read(skills_dir: Path) -> None:
    # Resolving a link loop raises RuntimeError (Python 3.11/3.12) or OSError: never past the skill API.
    folder = skills_dir / "invoices"
    os.symlink(folder / "loop2", folder / "loop1")
    os.symlink(folder / "loop1", folder / "loop2")
    skill = Skill.from_dir(folder)
    assert skill.resources == ("data/rates.csv", "reference.md")
    (folder / "reference.md").unlink()
    os.symlink(folder / "loop1", folder / "reference.md")  # a listed resource swapped for a loop
    with pytest.raises(SkillError, match="cannot be read"):
        skill.read_resource("reference.md")


def test_a_link_to_another_resource_inside_the_skill_is_read_through(skills_dir: Path) -> None:
    folder = skills_dir / "invoices"
    os.symlink(folder / "reference.md", folder / "vat.md")
    skill = Skill.from_dir(folder)
    assert "vat.md" in skill.resources
    assert skill.read_resource("vat.md") == "VAT is 20 %."


def test_resource_size_cap(skills_dir: Path) -> None:
    skill = Skill.from_dir(skills_dir / "invoices")
    with pytest.raises(SkillError, match="over 3 bytes"):
        skill.read_resource("reference.md", max_bytes=3)


def _calls(*specs: tuple[str, dict[str, str]]) -> AssistantMessage:
    return AssistantMessage("", tuple(ToolCall(f"c{i}", n, json.dumps(a)) for i, (n, a) in enumerate(specs)))


def _tool_texts(model: ScriptedChatModel) -> list[tuple[str, bool]]:
    last = model.prompts[-1].messages
    return [(r.response_data, r.is_error) for m in last if isinstance(m, ToolResponseMessage) for r in m.responses]


def test_advisor_shows_only_the_catalogue_and_loads_bodies_on_demand(skills_dir: Path) -> None:
    model = ScriptedChatModel(
        [
            _calls(("activate_skill", {"skill_name": "invoices"})),
            _calls(("read_skill_resource", {"skill_name": "invoices", "relative_path": "reference.md"})),
            "Total with VAT: 120.",
        ]
    )
    client = ChatClient.builder(model).default_system("Be brief.").build()
    answer = client.prompt("Total this invoice").advisors(SkillsAdvisor(load_skills(skills_dir))).call().content()
    assert answer == "Total with VAT: 120."

    first = model.prompts[0]
    system = next(m for m in first.messages if isinstance(m, SystemMessage)).text
    assert system.startswith("Be brief.")
    assert "- invoices: Read and total invoices" in system and "- haiku: Write haiku poems" in system
    assert "Add up every line item" not in system  # the body is not in the prompt until activated
    assert {t.name for t in first.tools} == {"activate_skill", "read_skill_resource"}

    texts = _tool_texts(model)
    assert texts[0][0].startswith("# Skill: invoices") and "reference.md" in texts[0][0]
    assert "scripts/run.py" not in texts[0][0]
    assert texts[1] == ("VAT is 20 %.", False)


def test_hostile_tool_arguments_become_error_responses(skills_dir: Path) -> None:
    model = ScriptedChatModel(
        [
            _calls(
                ("read_skill_resource", {"skill_name": "invoices", "relative_path": "../secret.txt"}),
                ("read_skill_resource", {"skill_name": "invoices", "relative_path": "scripts/run.py"}),
                ("activate_skill", {"skill_name": "nope"}),
            ),
            "ok",
        ]
    )
    client = ChatClient.create(model)
    client.prompt("x").advisors(SkillsAdvisor(load_skills(skills_dir))).call().content()
    texts = _tool_texts(model)
    assert [e for _, e in texts] == [True, True, True]
    assert all("TOP SECRET" not in t and "print(" not in t for t, _ in texts)
    assert "available: haiku, invoices" in texts[2][0]


def test_skills_join_the_requests_own_tools_and_loop(skills_dir: Path) -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    model = ScriptedChatModel(
        [_calls(("activate_skill", {"skill_name": "haiku"}), ("add", {"a": "2", "b": "3"})), "done"]
    )
    client = ChatClient.create(model)
    client.prompt("x").tools(add).advisors(SkillsAdvisor(load_skills(skills_dir))).call().content()
    assert {t.name for t in model.prompts[0].tools} == {"add", "activate_skill", "read_skill_resource"}
    assert [t for t, _ in _tool_texts(model)][1] == "5"


def test_async_and_stream_modes(skills_dir: Path) -> None:
    script = [_calls(("activate_skill", {"skill_name": "haiku"})), "An old pond."]
    advisor = SkillsAdvisor(load_skills(skills_dir))
    model = ScriptedChatModel(list(script))
    text = asyncio.run(ChatClient.create(model).prompt("x").advisors(advisor).acall().content())
    assert text == "An old pond." and "5, 7, 5" in _tool_texts(model)[0][0]

    model = ScriptedChatModel(list(script))
    streamed = "".join(ChatClient.create(model).prompt("x").advisors(advisor).stream().content())
    assert streamed == "An old pond." and "5, 7, 5" in _tool_texts(model)[0][0]


def test_advisor_pickles_and_repr(skills_dir: Path) -> None:
    advisor = SkillsAdvisor(load_skills(skills_dir))
    copy = pickle.loads(pickle.dumps(advisor))
    assert list(copy.skills) == ["haiku", "invoices"]
    assert copy.skills["invoices"].read_resource("reference.md") == "VAT is 20 %."
    assert "haiku" in repr(advisor)


def test_the_skill_tools_are_built_once_and_the_advisor_still_pickles_after_use(skills_dir: Path) -> None:
    # Building the two tools (their JSON schemas) took ~2 ms: not once per request.
    advisor = SkillsAdvisor(load_skills(skills_dir))
    first = advisor.tool_callbacks()
    assert [a is b for a, b in zip(first, advisor.tool_callbacks(), strict=True)] == [True, True]
    copy = pickle.loads(pickle.dumps(advisor))
    read = {cb.definition.name: cb for cb in copy.tool_callbacks()}["read_skill_resource"]
    assert "20 %" in str(read.call(json.dumps({"skill_name": "invoices", "relative_path": "reference.md"})))
    advisor.max_resource_bytes = 3  # a setting changed after use is honoured
    read = {cb.definition.name: cb for cb in advisor.tool_callbacks()}["read_skill_resource"]
    with pytest.raises(ToolExecutionError, match="over 3 bytes"):
        read.call(json.dumps({"skill_name": "invoices", "relative_path": "reference.md"}))


def test_without_resources_only_activate_skill_is_offered() -> None:
    model = ScriptedChatModel(["hi"])
    ChatClient.create(model).prompt("x").advisors(SkillsAdvisor(Skill("greet", "Greet people", "Wave."))).call().content()
    assert [t.name for t in model.prompts[0].tools] == ["activate_skill"]
    system = next(m for m in model.prompts[0].messages if isinstance(m, SystemMessage)).text
    assert "read_skill_resource" not in system and "- greet: Greet people" in system
