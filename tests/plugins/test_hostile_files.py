"""Hostile bytes on disk and hostile patterns.

File names that are not UTF-8 (created with ``os.open(b"...")``) and names with control
characters in Workspace, Memory and Skills folders; a catastrophic regular expression
given to ``grep``; folders and files too large to handle whole. Every run is
checkpointed to SQLite so a failed write would show.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lovia import Agent, Runner
from lovia.plugins._fs import show_name, unescape_name
from lovia.plugins.memory import Memory
from lovia.plugins.skills import Skills
from lovia.plugins.workspace import MAX_LISTED, Workspace
from lovia.stores import store
from lovia.testing import ScriptedModel, call

from .conftest import results

CAFE = b"caf\xe9.txt"  # Latin-1 bytes: not UTF-8
SHOWN = "caf\\xe9.txt"  # what the model sees (and may pass back)


def _make(folder: Path, name: bytes, data: bytes) -> None:
    fd = os.open(os.path.join(os.fsencode(folder), name), os.O_CREAT | os.O_WRONLY, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


async def _run(tmp_path: Path, model: ScriptedModel, **options: object) -> list[str]:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    result = await Runner.run(Agent(name="a", model=model), "go", checkpointer=url, **options)
    snapshot = await store(url).load(result.run_id)
    assert snapshot is not None and snapshot.info.status == "completed"
    assert snapshot.entries() == list(result.entries)  # every tool result was stored
    return [r.content for r in results(result.entries)]


@given(st.binary(min_size=1, max_size=40))
def test_every_byte_name_is_shown_as_printable_text_that_reads_back(raw: bytes) -> None:
    name = os.fsdecode(raw)
    shown = show_name(name)
    shown.encode("utf-8")  # valid text: storable, printable
    assert not any(c < " " or c == "\x7f" for c in shown)  # no newline can fake a row
    assert unescape_name(shown) == name


async def test_workspace_shows_non_utf8_names_escaped_and_opens_them(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    _make(root, CAFE, b"hello from cafe\n")
    _make(root, b"two\nlines.txt", b"hello again\n")  # a newline would fake a listing row
    (root / "back\\slash.txt").write_text("x\n", encoding="utf-8")
    model = ScriptedModel(
        [
            [
                call("list_dir"),
                call("glob", pattern="*.txt"),
                call("grep", pattern="hello"),
                call("read_file", path=SHOWN),
                call("read_file", path="two\\x0alines.txt"),
            ],
            call("write_file", path=SHOWN, content="rewritten\n"),
            call("read_file", path="back\\\\slash.txt"),
            "done",
        ]
    )
    listing, globbed, grep, read, read_nl, write, read_bs = await _run(
        tmp_path, model, workspace=Workspace(root)
    )
    shown = ["back\\\\slash.txt", SHOWN, "two\\x0alines.txt"]
    assert listing.splitlines() == shown and globbed.splitlines() == shown
    assert sorted(grep.splitlines()) == [
        f"{SHOWN}:1:hello from cafe",
        "two\\x0alines.txt:1:hello again",
    ]
    assert read == "     1\thello from cafe" and read_nl == "     1\thello again"
    assert write == f"Wrote 10 characters to {SHOWN}."
    assert (root / os.fsdecode(CAFE)).read_bytes() == b"rewritten\n"  # the same file
    assert read_bs == "     1\tx"


async def test_memory_and_skills_with_non_utf8_names(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    memory.mkdir()
    _make(memory, CAFE, b"remember this\n")
    skill = tmp_path / "skills" / "brew"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: brew\ndescription: Brew coffee.\n---\nRead the recipe file.\n",
        encoding="utf-8",
    )
    _make(skill, CAFE, b"grind, pour\n")
    model = ScriptedModel(
        [
            [call("memory_view"), call("memory_view", path=SHOWN)],
            [call("load_skill", name="brew"), call("read_skill_file", name="brew", path=SHOWN)],
            "done",
        ]
    )
    agent_plugins = [Memory(memory), Skills(tmp_path / "skills")]
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    result = await Runner.run(
        Agent(name="a", model=model, plugins=agent_plugins), "go", checkpointer=url
    )
    listing, note, loaded, recipe = [r.content for r in results(result.entries)]
    assert listing.splitlines()[1].endswith(f"  {SHOWN}")
    assert note == "     1\tremember this"
    assert loaded.endswith(f"<skill-files>\n- {SHOWN}\n</skill-files>")
    assert recipe == "grind, pour\n"
    snapshot = await store(url).load(result.run_id)
    assert snapshot is not None and snapshot.info.status == "completed"


CATASTROPHIC = "^(a+)+$"
"""Backtracks 2^n steps on a run of n 'a' with no match: minutes at n=40, in one C call."""


async def test_catastrophic_grep_is_stopped_and_the_process_keeps_running(
    tmp_path: Path,
) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "bait.txt").write_text("a" * 40 + "!\n", encoding="utf-8")
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.02)
            ticks += 1

    model = ScriptedModel([call("grep", pattern=CATASTROPHIC), "done"])
    background = asyncio.create_task(ticker())
    try:
        (out,) = await _run(tmp_path, model, workspace=Workspace(root, search_timeout=1))
    finally:
        background.cancel()
    assert "grep was stopped after 1 s (search_timeout)" in out
    assert "(a+)+" in out and "Found before the stop:\n(nothing)" in out
    # the event loop ran all along: in-process, the match holds the GIL until it ends
    assert ticks >= 5


async def test_grep_reports_matches_found_before_the_stop(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "a_first.txt").write_text("aaa\n", encoding="utf-8")
    (root / "b_bait.txt").write_text("a" * 40 + "!\n", encoding="utf-8")
    workspace = Workspace(root, search_timeout=1)
    model = ScriptedModel([call("grep", pattern="^(a+)+$"), "done"])
    result = await Runner.run(Agent(name="a", model=model), "go", workspace=workspace)
    (out,) = results(result.entries)
    assert out.is_error and out.content.endswith("Found before the stop:\na_first.txt:1:aaa")


async def test_grep_bad_pattern_and_search_timeout_validation(tmp_path: Path) -> None:
    model = ScriptedModel([call("grep", pattern="(unclosed"), "done"])
    result = await Runner.run(Agent(name="a", model=model), "go", workspace=Workspace(tmp_path))
    (out,) = results(result.entries)
    assert out.is_error and out.content.startswith("invalid regular expression: ")
    with pytest.raises(Exception, match="search_timeout"):
        Workspace(tmp_path, search_timeout=0)


async def test_list_dir_of_a_huge_folder_is_capped(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / "many").mkdir(parents=True)
    for i in range(MAX_LISTED + 5):
        (root / "many" / f"f{i:05d}").touch()
    model = ScriptedModel([call("list_dir", path="many"), "done"])
    result = await Runner.run(Agent(name="a", model=model), "go", workspace=Workspace(root))
    rows = results(result.entries)[0].content.splitlines()
    assert rows[0] == "f00000" and rows[MAX_LISTED - 1] == f"f{MAX_LISTED - 1:05d}"
    assert rows[MAX_LISTED:] == ["(… 5 more; use glob or shell to narrow it)"]


async def test_memory_view_refuses_a_huge_file(tmp_path: Path) -> None:
    (tmp_path / "mem").mkdir()
    (tmp_path / "mem" / "huge.md").write_text("line\n" * 1_000_000, encoding="utf-8")
    model = ScriptedModel([call("memory_view", path="huge.md"), "done"])
    agent = Agent(name="a", model=model, plugins=[Memory(tmp_path / "mem")])
    result = await Runner.run(agent, "go")
    (out,) = results(result.entries)
    assert out.is_error and "is 5000000 bytes; a memory file is read only up to" in out.content
