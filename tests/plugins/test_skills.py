"""Skills: real Agent Skills from the shared fixtures, validation rules, confinement."""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

import pytest

from lovia import Agent, Runner, UserError
from lovia.plugins.skills import Skills, parse_skill
from lovia.testing import ScriptedModel, call

from .conftest import results

FIXTURE_NAMES = ["brand-guidelines", "internal-comms", "mcp-builder", "theme-factory"]


def make_skill(root: Path, folder: str, front: str, body: str = "Do the thing.") -> Path:
    path = root / folder
    path.mkdir(parents=True)
    (path / "SKILL.md").write_text(f"---\n{front}\n---\n{body}\n", encoding="utf-8")
    return path


async def test_real_skills_index_lists_only_names_and_descriptions(skills_root: Path) -> None:
    skills = Skills(skills_root).load()
    assert list(skills) == FIXTURE_NAMES
    model = ScriptedModel(["ok"])
    await Runner.run(Agent(name="a", model=model, plugins=[Skills(skills_root)]), "hi")
    system = model.requests[0].system
    for skill in skills.values():
        assert f"- {skill.name}: " in system
        assert skill.body[:200] not in system  # bodies are disclosed on demand only
    assert {t.name for t in model.requests[0].tools} == {"load_skill", "read_skill_file"}


async def test_load_body_and_read_files_through_a_run(skills_root: Path) -> None:
    model = ScriptedModel(
        [
            call("load_skill", name="mcp-builder"),
            [
                call(
                    "read_skill_file", name="mcp-builder", path="./reference/mcp_best_practices.md"
                ),
                call("read_skill_file", name="theme-factory", path="theme-showcase.pdf"),
                call(
                    "read_skill_file",
                    name="internal-comms",
                    path="examples/../../mcp-builder/SKILL.md",
                ),
                call("read_skill_file", name="mcp-builder", path="scripts/evaluation.py"),
                call("load_skill", name="nope"),
            ],
            "done",
        ]
    )
    agent = Agent(name="a", model=model, plugins=[Skills([skills_root])])
    result = await Runner.run(agent, "build an MCP server")
    body, ref, pdf, escape, dangling, unknown = results(result.entries)
    expected = (skills_root / "mcp-builder" / "SKILL.md").read_text(encoding="utf-8")
    assert not body.is_error and expected.split("---", 2)[2].strip()[:300] in body.content
    assert "reference/node_mcp_server.md" in body.content  # the file list
    best = (skills_root / "mcp-builder/reference/mcp_best_practices.md").read_text("utf-8")
    assert not ref.is_error and ref.content == best
    assert not pdf.is_error and "binary file" in pdf.content
    assert escape.is_error and "'..'" in escape.content
    assert dangling.is_error and "no file 'scripts/evaluation.py'" in dangling.content
    assert unknown.is_error and "No skill named 'nope'" in unknown.content


@pytest.mark.parametrize(
    ("folder", "front", "rule"),
    [
        ("Bad-Name", "name: Bad-Name\ndescription: x", "lowercase"),
        ("a--b", "name: a--b\ndescription: x", "doubled"),
        ("-lead", "name: -lead\ndescription: x", "leading"),
        ("x" * 65, f"name: {'x' * 65}\ndescription: x", "longer than 64"),
        ("other", "name: mine\ndescription: x", "must equal its folder name 'other'"),
        ("nodesc", "name: nodesc", "'description' is required"),
        ("emptydesc", "name: emptydesc\ndescription: ''", "'description' must be a non-empty"),
        ("longdesc", f"name: longdesc\ndescription: {'d' * 1025}", "at most 1024"),
        ("compat", f"name: compat\ndescription: x\ncompatibility: {'c' * 501}", "at most 500"),
        ("meta", "name: meta\ndescription: x\nmetadata: {a: 1}", "string values"),
        ("extra", "name: extra\ndescription: x\nversion: 2", "unknown front-matter key"),
        ("yaml", "name: [unclosed\ndescription: x", "not valid YAML"),
        ("tools", "name: tools\ndescription: x\nallowed-tools: 3", "allowed-tools"),
    ],
)
def test_invalid_skill_names_the_file_and_rule(
    tmp_path: Path, folder: str, front: str, rule: str
) -> None:
    make_skill(tmp_path, folder, front)
    with pytest.raises(UserError) as info:
        Skills(tmp_path).load()
    assert rule in info.value.message
    assert str(tmp_path / folder / "SKILL.md") in info.value.message


def test_missing_front_matter(tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "SKILL.md").write_text("# just markdown\n", encoding="utf-8")
    with pytest.raises(UserError, match="front matter"):
        parse_skill(tmp_path / "plain")


def test_optional_fields_are_parsed(tmp_path: Path) -> None:
    make_skill(
        tmp_path,
        "full",
        "name: full\ndescription: Does x. Use when y.\nlicense: MIT\n"
        "compatibility: needs git\nmetadata: {author: me, version: '1'}\n"
        "allowed-tools: Bash(git:*) Read",
    )
    skill = Skills(tmp_path / "full").load()["full"]  # a single skill folder works too
    assert skill.license == "MIT" and skill.compatibility == "needs git"
    assert skill.metadata == {"author": "me", "version": "1"}
    assert skill.allowed_tools == ("Bash(git:*)", "Read")


async def test_invalid_skill_errors_at_setup_by_default(tmp_path: Path) -> None:
    make_skill(tmp_path, "good", "name: good\ndescription: fine")
    make_skill(tmp_path, "bad", "name: wrong\ndescription: fine")
    agent = Agent(name="a", model=ScriptedModel([]), plugins=[Skills(tmp_path)])
    with pytest.raises(UserError, match="must equal its folder name"):
        await Runner.run(agent, "hi")


async def test_skip_mode_leaves_bad_skills_out_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    make_skill(tmp_path, "good", "name: good\ndescription: fine")
    make_skill(tmp_path, "bad", "name: wrong\ndescription: fine")
    model = ScriptedModel(["ok"])
    agent = Agent(name="a", model=model, plugins=[Skills(tmp_path, on_invalid="skip")])
    with caplog.at_level(logging.WARNING, logger="lovia.plugins.skills"):
        await Runner.run(agent, "hi")
    assert "- good: fine" in model.requests[0].system and "wrong" not in model.requests[0].system
    assert any("bad/SKILL.md" in r.getMessage() for r in caplog.records)


def test_duplicate_names_across_paths(tmp_path: Path) -> None:
    make_skill(tmp_path / "one", "same", "name: same\ndescription: a")
    make_skill(tmp_path / "two", "same", "name: same\ndescription: b")
    with pytest.raises(UserError, match="already used"):
        Skills([tmp_path / "one", tmp_path / "two"]).load()


async def test_symlink_out_of_the_skill_is_refused(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret", encoding="utf-8")
    folder = make_skill(tmp_path / "skills", "s", "name: s\ndescription: d")
    os.symlink(secret, folder / "link.md")
    os.symlink(tmp_path, folder / "up")
    model = ScriptedModel(
        [
            [
                call("read_skill_file", name="s", path="link.md"),
                call("read_skill_file", name="s", path="up/secret.txt"),
                call("read_skill_file", name="s", path=str(secret)),
                call("read_skill_file", name="s", path="SKILL.md"),
            ],
            "done",
        ]
    )
    result = await Runner.run(
        Agent(name="a", model=model, plugins=[Skills(tmp_path / "skills")]), "hi"
    )
    link, up, absolute, own = results(result.entries)
    assert link.is_error and up.is_error and "outside" in link.content
    assert absolute.is_error and "absolute" in absolute.content
    assert not own.is_error and "Do the thing." in own.content
    assert all("top secret" not in r.content for r in (link, up, absolute))


async def test_no_skills_contributes_nothing(tmp_path: Path) -> None:
    model = ScriptedModel(["ok"])
    await Runner.run(Agent(name="a", model=model, plugins=[Skills(tmp_path)]), "hi")
    assert model.requests[0].tools == () or not model.requests[0].tools


async def test_concurrent_runs(skills_root: Path) -> None:
    plugin = Skills(skills_root)

    async def one(name: str) -> str:
        model = ScriptedModel([call("load_skill", name=name), "ok"])
        result = await Runner.run(Agent(name="a", model=model, plugins=[plugin]), "hi")
        return results(result.entries)[0].content

    bodies = await asyncio.gather(*(one(n) for n in FIXTURE_NAMES))
    for name, body in zip(FIXTURE_NAMES, bodies, strict=True):
        assert body.startswith(f'<skill name="{name}">')
