"""``Skills(path)``: Agent Skills folders with progressive disclosure.

A skill is a folder holding ``SKILL.md`` — YAML front matter (``name``,
``description``, optional ``license``, ``compatibility``, ``metadata``,
``allowed-tools``) followed by Markdown. Disclosure happens in three levels:

1. the system prompt lists only each skill's name and description;
2. ``load_skill(name)`` returns the body of ``SKILL.md`` (and the skill's file list);
3. ``read_skill_file(name, path)`` returns one file of the skill, confined to its folder.

``Skills`` takes one path or several; each is either a skill folder or a folder of
skill folders. Skills are (re)read in ``setup()``, so edits show up in the next run.

Invalid skills: by default a :class:`~lovia.UserError` at setup naming the file and the
broken rule (``on_invalid="error"``); ``on_invalid="skip"`` logs a warning (logger
``lovia.plugins.skills``) and leaves the skill out. A reference in a body that points to
a missing file is not an error: reading it gives the model an error result.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

import yaml

from ..context import RunContext
from ..errors import ToolError, UserError
from ..tools import tool
from ._fs import confine, is_binary, relative, show_name
from .base import PluginInstance

__all__ = ["Skill", "Skills", "load_skills", "parse_skill"]

logger = logging.getLogger("lovia.plugins.skills")

NAME_RE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
KNOWN_KEYS = frozenset(
    {"name", "description", "license", "compatibility", "metadata", "allowed-tools"}
)
MAX_FILE_BYTES = 256_000
"""Largest skill file ``read_skill_file`` returns."""
MAX_LISTED_FILES = 200


@dataclass(frozen=True, slots=True)
class Skill:
    """One parsed, valid skill."""

    name: str
    description: str
    root: Path
    """The skill's folder (resolved)."""
    body: str
    license: str | None = None
    compatibility: str | None = None
    metadata: dict[str, str] = field(default_factory=dict[str, str])
    allowed_tools: tuple[str, ...] = ()

    def files(self, limit: int | None = None) -> list[str]:
        """The files in the skill folder except ``SKILL.md`` (relative POSIX paths, a
        name that is not UTF-8 escaped as in a Workspace); at most ``limit`` of them."""
        out: list[str] = []
        for dirpath, dirnames, filenames in os.walk(self.root):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for name in sorted(filenames):
                rel = relative(self.root, Path(dirpath) / name)
                if rel != "SKILL.md" and not name.startswith("."):
                    out.append(rel)
                    if limit is not None and len(out) >= limit:
                        return out
        return out


class _Invalid(Exception):
    """A rule a SKILL.md breaks (message names the rule)."""


def _front_matter(text: str) -> tuple[dict[str, Any], str]:
    text = text.removeprefix("\ufeff")
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise _Invalid("it must start with YAML front matter between '---' lines")
    end = next((i for i, line in enumerate(lines[1:], 1) if line.strip() == "---"), None)
    if end is None:
        raise _Invalid("the front matter has no closing '---' line")
    try:
        data = yaml.safe_load("".join(lines[1:end]))
    except yaml.YAMLError as exc:
        raise _Invalid(f"the front matter is not valid YAML ({exc})") from None
    if not isinstance(data, dict):
        raise _Invalid("the front matter must be a YAML mapping (key: value lines)")
    return cast(dict[str, Any], data), "".join(lines[end + 1 :]).strip("\n")


def _check_name(data: dict[str, Any], folder: str) -> str:
    name = data.get("name")
    if not isinstance(name, str) or not name:
        raise _Invalid("'name' is required and must be a non-empty string")
    if len(name) > 64:
        raise _Invalid(f"'name' {name!r} is longer than 64 characters")
    if not NAME_RE.match(name):
        raise _Invalid(
            f"'name' {name!r} may use only lowercase a-z, digits and single '-' "
            "(no leading, trailing or doubled '-')"
        )
    if name != folder:
        raise _Invalid(f"'name' {name!r} must equal its folder name {folder!r}")
    return name


def _optional_str(data: dict[str, Any], key: str, limit: int | None = None) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise _Invalid(f"{key!r} must be a non-empty string")
    if limit is not None and len(value) > limit:
        raise _Invalid(f"{key!r} must be at most {limit} characters (it has {len(value)})")
    return value


def _metadata(data: dict[str, Any]) -> dict[str, str]:
    value = data.get("metadata")
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _Invalid("'metadata' must be a mapping of strings to strings")
    items = cast(dict[Any, Any], value)
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in items.items()):
        raise _Invalid("'metadata' must map string keys to string values")
    return cast(dict[str, str], items)


def _allowed_tools(data: dict[str, Any]) -> tuple[str, ...]:
    value = data.get("allowed-tools")
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(value.split())
    if isinstance(value, list) and all(isinstance(v, str) for v in cast(list[Any], value)):
        return tuple(cast(list[str], value))
    raise _Invalid("'allowed-tools' must be a space-separated string or a list of strings")


def parse_skill(folder: Path) -> Skill:
    """Parse and validate ``folder/SKILL.md``; raise :class:`UserError` naming the rule."""
    path = folder / "SKILL.md"
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"invalid skill {show_name(str(path))}: cannot read it ({exc})") from None
    try:
        data, body = _front_matter(text)
        unknown = sorted(set(data) - KNOWN_KEYS)
        if unknown:
            raise _Invalid(f"unknown front-matter key(s) {unknown}; put extras under 'metadata'")
        name = _check_name(data, folder.name)
        description = _optional_str(data, "description", 1024)
        if description is None:
            raise _Invalid("'description' is required (1-1024 characters)")
        return Skill(
            name=name,
            description=description.strip(),
            root=folder.resolve(),
            body=body,
            license=_optional_str(data, "license"),
            compatibility=_optional_str(data, "compatibility", 500),
            metadata=_metadata(data),
            allowed_tools=_allowed_tools(data),
        )
    except _Invalid as exc:
        raise UserError(
            f"invalid skill {show_name(str(path))}: {exc}",
            hint="See the Agent Skills format (docs/skills.md), or pass "
            "Skills(..., on_invalid='skip') to leave bad skills out with a warning.",
        ) from None


def _skill_folders(path: Path) -> list[Path]:
    if not path.is_dir():
        raise UserError(
            f"skills path {path} is not a folder",
            hint="Pass a skill folder or a folder of skill folders.",
        )
    if (path / "SKILL.md").is_file():
        return [path]
    return sorted(p for p in path.iterdir() if p.is_dir() and (p / "SKILL.md").is_file())


def load_skills(
    paths: Sequence[Path], on_invalid: Literal["error", "skip"] = "error"
) -> dict[str, Skill]:
    """Read every skill under ``paths`` (see :class:`Skills`), in name order."""
    found: dict[str, Skill] = {}
    for base in paths:
        for folder in _skill_folders(base):
            try:
                skill = parse_skill(folder)
                if skill.name in found:
                    raise UserError(
                        f"invalid skill {folder / 'SKILL.md'}: the name {skill.name!r} is "
                        f"already used by {found[skill.name].root / 'SKILL.md'}",
                        hint="Skill names must be unique across all Skills paths.",
                    )
            except UserError as exc:
                if on_invalid == "error":
                    raise
                logger.warning("skipping skill: %s", exc.message)
                continue
            found[skill.name] = skill
    return dict(sorted(found.items()))


INTRO = """\
## Skills
You have skills: packs of instructions for specific tasks. When a task matches a
skill's description, call `load_skill` with its name before you start, then follow it.
Read a file a skill refers to (paths relative to the skill folder) with
`read_skill_file`. Available skills:"""


def _render_index(skills: dict[str, Skill]) -> str:
    lines = [INTRO, *(f"- {s.name}: {' '.join(s.description.split())}" for s in skills.values())]
    return "\n".join(lines)


def _read_file(skill: Skill, path: str) -> str:
    target = confine(skill.root, path, what=f"skill folder of {skill.name!r}")
    if not target.is_file():
        shown = ", ".join(skill.files(MAX_LISTED_FILES)) or "(none)"
        raise ToolError(f"Skill {skill.name!r} has no file {path!r}. Its files: {shown}.")
    size = target.stat().st_size
    if size > MAX_FILE_BYTES:
        raise ToolError(f"{path} is {size} bytes; the limit is {MAX_FILE_BYTES} bytes.")
    data = target.read_bytes()
    if is_binary(data):
        return (
            f"{path} is a binary file ({size} bytes) and cannot be shown as text. "
            f"Its location on disk: {show_name(str(target))}"
        )
    return data.decode("utf-8")


@dataclass(frozen=True, slots=True, init=False)
class Skills:
    """Agent Skills from one or more folders, disclosed progressively."""

    paths: tuple[Path, ...]
    on_invalid: Literal["error", "skip"]
    name: str

    def __init__(
        self,
        paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
        *,
        on_invalid: Literal["error", "skip"] = "error",
        name: str = "skills",
    ) -> None:
        items = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
        if on_invalid not in ("error", "skip"):
            raise UserError(f"Skills(on_invalid={on_invalid!r}) must be 'error' or 'skip'")
        object.__setattr__(self, "paths", tuple(Path(p) for p in items))
        object.__setattr__(self, "on_invalid", on_invalid)
        object.__setattr__(self, "name", name)

    def load(self) -> dict[str, Skill]:
        """Read and validate the skills now (``setup`` does this every run)."""
        return load_skills(self.paths, self.on_invalid)

    async def setup(self, ctx: RunContext[Any]) -> PluginInstance:
        skills = await asyncio.to_thread(self.load)
        if not skills:
            return PluginInstance()

        def find(name: str) -> Skill:
            skill = skills.get(name)
            if skill is None:
                raise ToolError(f"No skill named {name!r}. Available: {', '.join(skills)}.")
            return skill

        @tool(name="load_skill", concurrency_safe=True)
        async def load_skill(name: str) -> str:
            """Load a skill's full instructions (do this before using the skill).

            Args:
                name: The skill's name, as listed in your instructions.
            """
            skill = find(name)
            files = await asyncio.to_thread(skill.files, MAX_LISTED_FILES)
            listing = "\n".join(f"- {f}" for f in files)
            extra = f"\n\n<skill-files>\n{listing}\n</skill-files>" if files else ""
            return f'<skill name="{skill.name}">\n{skill.body}\n</skill>{extra}'

        @tool(name="read_skill_file", concurrency_safe=True)
        async def read_skill_file(name: str, path: str) -> str:
            """Read a file that belongs to a skill (e.g. one its instructions point to).

            Args:
                name: The skill's name.
                path: The file's path relative to the skill folder, e.g. `reference/x.md`.
            """
            return await asyncio.to_thread(_read_file, find(name), path.removeprefix("./"))

        return PluginInstance(
            tools=[load_skill, read_skill_file], instructions=_render_index(skills)
        )
