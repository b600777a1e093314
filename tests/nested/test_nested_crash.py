"""A worker is SIGKILLed while a child run (agent as a tool) is mid-model-call; a second
process finishes the parent, the child resumes from its checkpoint, and no tool of either
run runs twice. SQLite and PostgreSQL (the crash tests' store fixture)."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from pathlib import Path

from lovia.agent_tool import child_run_id
from lovia.stores import store

sys.path.insert(0, str(Path(__file__).parents[1] / "crash"))
from crash_stores import store_url  # noqa: F401  (the SQLite/PostgreSQL fixture)

WORKER = Path(__file__).with_name("nested_worker.py")


def _run(url: str, run_id: str, kill: str, log: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(WORKER), url, run_id, kill, str(log)],
        capture_output=True,
        text=True,
        timeout=60,
    )


async def _stored(url: str, run_id: str) -> dict[str, tuple[str, list[str]]]:
    """Per run (parent, child): status and tool results in order."""
    db = store(url)
    try:
        out: dict[str, tuple[str, list[str]]] = {}
        for name, rid in (("parent", run_id), ("child", child_run_id(run_id, "p2"))):
            snap = await db.load(rid)
            assert snap is not None, name
            results = [e.call_id for e in snap.entries() if e.type == "tool_result"]
            out[name] = (snap.info.status, results)
            if name == "child":
                assert (snap.info.parent_run_id, snap.info.parent_call_id) == (run_id, "p2")
        return out
    finally:
        await db.aclose()


def test_sigkill_while_a_child_is_mid_model_call(store_url: str, tmp_path: Path) -> None:  # noqa: F811
    log = tmp_path / "log.txt"
    first = _run(store_url, "nested-crash", "child_model", log)
    assert first.returncode == -signal.SIGKILL, first.stderr
    second = _run(store_url, "nested-crash", "none", log)
    assert second.returncode == 0, second.stderr
    assert second.stdout.startswith("report: noted parent | found: noted child")

    lines = log.read_text().split()
    tools = [line for line in lines if line.startswith("tool:")]
    assert sorted(tools) == ["tool:child", "tool:parent"], f"a tool ran twice: {lines}"
    # the child's first model call was not redone: it resumed at its second call
    assert [line for line in lines if line.startswith("model:child")] == [
        "model:child:0",
        "model:child:1",
        "model:child:1",
    ]
    # the parent's first model call was not redone either
    assert lines.count("model:parent:0") == 1 and lines.count("model:parent:2") == 1

    stored = asyncio.run(_stored(store_url, "nested-crash"))
    assert stored["parent"] == ("completed", ["p1", "p2"])
    assert stored["child"] == ("completed", ["k1"])
    # the parent's result counts the child's calls, both attempts' model calls included once
    assert second.stdout.splitlines()[1] == "usage 4 ['p2']"


def test_a_completed_child_is_never_rerun(store_url: str, tmp_path: Path) -> None:  # noqa: F811
    log = tmp_path / "log.txt"
    first = _run(store_url, "nested-done", "child_done", log)
    assert first.returncode == -signal.SIGKILL, first.stderr
    second = _run(store_url, "nested-done", "none", log)
    assert second.returncode == 0, second.stderr
    assert second.stdout.startswith("report: noted parent | found: noted child")
    lines = log.read_text().split()
    # the resumed parent re-ran the agent tool: the child's stored result came back
    assert [line for line in lines if line.startswith(("model:child", "tool:"))] == [
        "tool:parent",
        "model:child:0",
        "tool:child",
        "model:child:1",
    ]
    assert second.stdout.splitlines()[1] == "usage 4 ['p2']"


def test_a_child_recorded_by_the_parent_keeps_its_usage_after_a_crash(
    store_url: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    log = tmp_path / "log.txt"
    first = _run(store_url, "nested-final", "parent_final", log)
    assert first.returncode == -signal.SIGKILL, first.stderr
    second = _run(store_url, "nested-final", "none", log)
    assert second.returncode == 0, second.stderr
    lines = log.read_text().split()
    assert lines.count("model:child:0") == 1 and lines.count("tool:child") == 1
    assert lines.count("model:parent:2") == 2  # the killed final call, then the real one
    # the child's usage came back from the parent's checkpoint (the child did not run)
    assert second.stdout.splitlines()[1] == "usage 4 ['p2']"
