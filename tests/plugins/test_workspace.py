"""Workspace: instructions, confined file tools, and the shell (exit codes, timeout kill)."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from lovia import Agent, Runner, UserError
from lovia.plugins.workspace import Workspace
from lovia.testing import ScriptedModel, call

from .conftest import results, sleepers, unique_token


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "AGENTS.md").write_text("Always run the tests.\n", encoding="utf-8")
    (root / "src" / "app.py").write_text("def f():\n    return 1\n# end\n", encoding="utf-8")
    (tmp_path / "secret.txt").write_text("TOPSECRET", encoding="utf-8")
    os.symlink(tmp_path / "secret.txt", root / "leak.txt")
    return root


async def test_instructions_and_file_tools(ws: Path) -> None:
    model = ScriptedModel(
        [
            [
                call("read_file", path="src/app.py", start_line=2, end_line=2),
                call("list_dir", path="."),
                call("glob", pattern="**/*.py"),
                call("grep", pattern=r"return \d"),
            ],
            call("edit_file", path="src/app.py", old_string="return 1", new_string="return 2"),
            call("write_file", path="docs/notes.md", content="hello\n"),
            "done",
        ]
    )
    workspace = Workspace(ws)
    agent = Agent(name="a", model=model)
    result = await Runner.run(agent, "go", workspace=workspace)
    assert "Always run the tests." in model.requests[0].system
    assert "## Workspace instructions (AGENTS.md)" in model.requests[0].system
    read, listing, globbed, grep, edit, write = results(result.entries)
    assert read.content == "     2\t    return 1"
    assert "src/" in listing.content and "AGENTS.md" in listing.content
    assert globbed.content == "src/app.py"
    assert grep.content == "src/app.py:2:    return 1"
    assert not edit.is_error and "return 2" in (ws / "src/app.py").read_text(encoding="utf-8")
    assert not write.is_error and (ws / "docs/notes.md").read_text(encoding="utf-8") == "hello\n"


@pytest.mark.parametrize(
    "path", ["../secret.txt", "/etc/passwd", "leak.txt", "a/../../x", "nul\x00", "x" * 300]
)
async def test_path_traversal_refused(ws: Path, path: str) -> None:
    model = ScriptedModel(
        [
            [
                call("read_file", path=path),
                call("write_file", path=path, content="pwned"),
                call("edit_file", path=path, old_string="secret", new_string="pwned"),
                call("list_dir", path=path),
                call("grep", pattern="secret", path=path),
            ],
            "done",
        ]
    )
    result = await Runner.run(Agent(name="a", model=model), "go", workspace=Workspace(ws))
    outs = results(result.entries)
    assert len(outs) == 5 and all(r.is_error for r in outs)
    assert all("TOPSECRET" not in r.content for r in outs)
    assert (ws.parent / "secret.txt").read_text(encoding="utf-8") == "TOPSECRET"


async def test_glob_and_grep_do_not_follow_links_out(ws: Path) -> None:
    model = ScriptedModel(
        [[call("glob", pattern="../*"), call("grep", pattern="TOPSECRET")], "done"]
    )
    result = await Runner.run(Agent(name="a", model=model), "go", workspace=Workspace(ws))
    globbed, grep = results(result.entries)
    assert globbed.is_error
    assert grep.content == "(no matches)"


async def test_nonzero_exit_is_output_not_an_error(ws: Path) -> None:
    model = ScriptedModel([call("shell", command="echo out; echo err >&2; pwd; exit 3"), "ok"])
    result = await Runner.run(Agent(name="a", model=model), "go", workspace=Workspace(ws))
    (out,) = results(result.entries)
    assert not out.is_error
    assert out.content.startswith("exit code: 3")
    assert f"out\n{ws}\n" in out.content and "<stderr>\nerr\n</stderr>" in out.content


async def test_output_cap(ws: Path) -> None:
    workspace = Workspace(ws, output_cap=100)
    text = await workspace.shell_run("yes x | head -c 5000")
    assert "exit code: 0" in text and "4900 more bytes not shown" in text
    assert "(output truncated)" in text


async def test_timeout_kills_the_whole_process_group(ws: Path) -> None:
    # The shell starts a child `sleep` in the background, then waits. (Found by its
    # unique argument: a pid the command prints may be one of its own PID namespace.)
    token = unique_token()
    command = f"sleep {token} & wait"
    model = ScriptedModel([call("shell", command=command), "ok"])
    t0 = time.monotonic()
    result = await Runner.run(
        Agent(name="a", model=model), "go", workspace=Workspace(ws, shell_timeout=1)
    )
    assert time.monotonic() - t0 < 10
    (out,) = results(result.entries)
    assert out.is_error and "timed out after 1 s" in out.content
    assert await _all_gone(token)


async def _all_gone(token: str) -> bool:
    for _ in range(100):
        if not sleepers(token):
            return True
        await asyncio.sleep(0.05)
    return False


async def test_cancellation_kills_the_process_group(ws: Path) -> None:
    token = unique_token()
    workspace = Workspace(ws, shell_timeout=60)
    task = asyncio.create_task(workspace.shell_run(f"sleep {token} & wait"))
    for _ in range(250):
        if sleepers(token):
            break
        await asyncio.sleep(0.02)
    assert sleepers(token), "the command did not start"
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await _all_gone(token)


async def test_ctx_workspace_and_concurrent_runs(ws: Path) -> None:
    workspace = Workspace(ws)
    from lovia import RunContext, tool

    @tool
    async def where(ctx: RunContext[None]) -> str:
        """Report the workspace."""
        assert ctx.workspace is workspace
        return str(ctx.workspace.root)

    async def one(k: int) -> str:
        model = ScriptedModel([[call("where"), call("shell", command=f"echo run-{k}")], "ok"])
        result = await Runner.run(
            Agent(name="a", model=model, tools=[where]), "go", workspace=workspace
        )
        return results(result.entries)[1].content

    outs = await asyncio.gather(*(one(k) for k in range(4)))
    assert [f"run-{k}" in o for k, o in enumerate(outs)] == [True] * 4


def test_bad_folder(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="not a folder"):
        Workspace(tmp_path / "missing")


async def test_session_bound_workspace_continues_its_conversation(tmp_path: Path) -> None:
    """Workspace(session=True): runs in that folder share one conversation, stored there."""
    from lovia import Agent, Runner
    from lovia.plugins.workspace import Workspace
    from lovia.stores import store
    from lovia.testing import ScriptedModel

    ws = Workspace(tmp_path, session=True)
    assert ws.session and ws.session.startswith("workspace-")
    assert Workspace(tmp_path, session=True).session == ws.session  # stable per folder
    model = ScriptedModel(["first answer", "second answer"])
    agent = Agent(name="coder", model=model)
    await Runner.run(agent, "one", workspace=ws)
    second = await Runner.run(agent, "two", workspace=ws)
    assert second.session_id == ws.session
    seen = [m.content for m in model.requests[1].messages if m.type == "input"]
    assert seen == ["one", "two"]  # the second run saw the first run's conversation
    db = store(ws.session_store_url())
    history = await db.load_session(ws.session)
    await db.aclose()
    assert [e.type for e in history].count("input") == 2
    assert (tmp_path / ".lovia" / "lovia.db").is_file()
