"""A skill: a folder holding ``SKILL.md`` (front matter ``name``, ``description``; body = instructions)
and the resource files the instructions point to, read with size caps and hostile paths refused."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from chatclient.errors import SkillError

__all__ = ["MAX_RESOURCES", "MAX_RESOURCE_BYTES", "MAX_SKILL_FILE_BYTES", "Skill", "load_skills"]

MAX_SKILL_FILE_BYTES = 1024 * 1024
"""``SKILL.md`` above this size is refused (instructions are meant to be read by a model)."""
MAX_RESOURCE_BYTES = 256 * 1024
"""Default cap on one resource returned to the model."""
MAX_RESOURCES = 1000
"""Files listed per skill folder; a folder with more is refused."""

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_MAX_DESCRIPTION = 1024


@dataclass(frozen=True)
class Skill:
    """One skill: ``name``, ``description``, its ``instructions`` (the body of ``SKILL.md``), the folder it
    came from and the relative POSIX paths of its ``resources`` (every file but ``SKILL.md`` and ``scripts/**``).

    ``metadata`` keeps the other front-matter keys (``license``, ``allowed-tools``, ...) as written.
    A skill can also be built in code: ``Skill("greeting", "How to greet", "Say hello warmly.")``.
    """

    name: str
    description: str
    instructions: str
    path: Path | None = None
    resources: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise SkillError(f"invalid skill name {self.name!r}: use 1-64 letters, digits, '-' or '_'")
        if not isinstance(self.description, str) or not self.description.strip():
            raise SkillError(f"skill {self.name!r} needs a non-empty description (the model chooses skills by it)")
        if len(self.description) > _MAX_DESCRIPTION:
            raise SkillError(f"skill {self.name!r}: the description is over {_MAX_DESCRIPTION} characters")

    @classmethod
    def from_dir(cls, path: str | Path) -> Skill:
        """Read the skill in folder ``path`` (which holds ``SKILL.md``); raises ``SkillError`` when unusable."""
        folder = Path(path)
        skill_file = folder / "SKILL.md"
        if not skill_file.is_file():
            raise SkillError(f"{folder}: no SKILL.md in this folder (a skill folder holds SKILL.md and its resources)")
        try:  # SKILL.md is judged by where it leads, like the resources: a link out of the folder is refused
            leads_out = not skill_file.resolve().is_relative_to(folder.resolve())
        except (OSError, RuntimeError):  # a link loop (RuntimeError before Python 3.13)
            leads_out = True
        if leads_out:
            raise SkillError(
                f"{skill_file}: a symlink leading out of the skill folder; SKILL.md must be a file inside it"
            )
        if skill_file.stat().st_size > MAX_SKILL_FILE_BYTES:
            raise SkillError(
                f"{skill_file}: over {MAX_SKILL_FILE_BYTES // 1024} KiB; keep SKILL.md short, move detail to resources"
            )
        try:
            text = skill_file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise SkillError(f"{skill_file}: cannot be read as UTF-8 text ({exc})") from None
        front, body = _split_front_matter(text, skill_file)
        name, description = front.get("name"), front.get("description")
        if not isinstance(name, str) or not isinstance(description, str):
            raise SkillError(f"{skill_file}: the front matter needs 'name' and 'description' as text")
        others = {k: v for k, v in front.items() if k not in ("name", "description")}
        return cls(name, description.strip(), body.strip(), folder.resolve(), _list_resources(folder), others)

    def read_resource(self, relative_path: str, *, max_bytes: int = MAX_RESOURCE_BYTES) -> str:
        """The text of one resource; ``SkillError`` for a path that is not one of this skill's resources."""
        if self.path is None:
            raise SkillError(f"skill {self.name!r} was built in code and has no resource files")
        rel = _check_relative(relative_path)
        if rel not in self.resources:
            listed = ", ".join(self.resources[:20]) or "none"
            raise SkillError(f"{relative_path!r} is not a resource of skill {self.name!r} (resources: {listed})")
        try:
            target = (self.path / rel).resolve()  # links resolved: what is read is where the path leads
        except (OSError, RuntimeError):  # a link loop (RuntimeError before Python 3.13)
            raise SkillError(
                f"resource {relative_path!r} of skill {self.name!r} cannot be read (a symlink loop)"
            ) from None
        if not target.is_relative_to(self.path):  # a symlink swapped in after the folder was listed
            raise SkillError(f"{relative_path!r} leaves the folder of skill {self.name!r}")
        if _excluded(PurePosixPath(target.relative_to(self.path).as_posix())):
            raise SkillError(f"{relative_path!r} leads to SKILL.md or scripts/, which are not readable as resources")
        try:
            with target.open("rb") as fh:
                data = fh.read(max_bytes + 1)
        except OSError as exc:
            raise SkillError(
                f"resource {relative_path!r} of skill {self.name!r} cannot be read ({exc.strerror})"
            ) from None
        if len(data) > max_bytes:
            raise SkillError(f"resource {relative_path!r} of skill {self.name!r} is over {max_bytes:,} bytes")
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise SkillError(f"resource {relative_path!r} of skill {self.name!r} is not UTF-8 text") from None


def load_skills(root: str | Path) -> tuple[Skill, ...]:
    """Every skill under ``root``: each direct subfolder holding ``SKILL.md`` (or ``root`` itself), by name."""
    base = Path(root)
    if (base / "SKILL.md").is_file():
        return (Skill.from_dir(base),)
    if not base.is_dir():
        raise SkillError(f"{base}: not a folder of skills")
    skills = tuple(Skill.from_dir(d) for d in sorted(base.iterdir()) if (d / "SKILL.md").is_file())
    _check_unique(skills)
    return skills


def _split_front_matter(text: str, where: Path) -> tuple[dict[str, Any], str]:
    from chatclient import yamlsafe

    lines = text.lstrip("\ufeff").splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise SkillError(f"{where}: SKILL.md must start with YAML front matter between '---' lines (name, description)")
    for end in range(1, len(lines)):
        if lines[end].strip() == "---":
            break
    else:
        raise SkillError(f"{where}: the front matter has no closing '---' line")
    try:
        front = yamlsafe.load("".join(lines[1:end]), what=str(where), max_nodes=10_000)
    except ImportError as exc:
        raise SkillError(f"{exc} (pip install 'chatclient[skills]')") from None
    except ValueError as exc:
        raise SkillError(str(exc)) from None
    if not isinstance(front, dict):
        raise SkillError(f"{where}: the front matter must be a mapping with 'name' and 'description'")
    return {str(k): v for k, v in front.items()}, "".join(lines[end + 1 :])


def _excluded(rel: PurePosixPath) -> bool:
    return rel.as_posix() == "SKILL.md" or rel.parts[0] == "scripts"


def _list_resources(folder: Path) -> tuple[str, ...]:
    root = folder.resolve()
    found: list[str] = []
    for file in sorted(root.rglob("*")):
        try:
            target = file.resolve()
        except (OSError, RuntimeError):  # a link loop (RuntimeError before Python 3.13) leads nowhere
            continue
        if not file.is_file() or not target.is_relative_to(root):
            continue  # folders, and symlinks pointing out of the skill, are never resources
        rel = PurePosixPath(file.relative_to(root).as_posix())
        if _excluded(rel) or _excluded(PurePosixPath(target.relative_to(root).as_posix())):
            continue  # a link is judged by where it leads too: one into scripts/ is a script
        found.append(rel.as_posix())
        if len(found) > MAX_RESOURCES:
            raise SkillError(f"{folder}: more than {MAX_RESOURCES} files; a skill folder should stay small")
    return tuple(found)


def _check_relative(relative_path: Any) -> str:
    if not isinstance(relative_path, str) or not relative_path.strip():
        raise SkillError("give the resource's path relative to the skill folder, e.g. 'reference.md'")
    if "\\" in relative_path or "\x00" in relative_path:
        raise SkillError(f"{relative_path!r}: use '/' to separate folders")
    rel = PurePosixPath(relative_path)
    if rel.is_absolute() or ".." in rel.parts:
        raise SkillError(f"{relative_path!r}: absolute paths and '..' are refused; give a path inside the skill folder")
    if _excluded(rel):
        raise SkillError(f"{relative_path!r}: SKILL.md and scripts/ are not readable as resources")
    return rel.as_posix()


def _check_unique(skills: Sequence[Skill]) -> None:
    seen: set[str] = set()
    for s in skills:
        if s.name in seen:
            raise SkillError(f"two skills are named {s.name!r}; skill names must be unique")
        seen.add(s.name)
