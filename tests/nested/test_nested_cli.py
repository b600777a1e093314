"""The CLI shows child runs under the tool call that started them, hides them from
``lovia runs`` unless ``--all``, replays them with ``--child`` and traces them in one tree."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

from test_nested_runs import team

from lovia import Runner
from lovia.agent_tool import child_run_id
from lovia.stores import store
from lovia.telemetry import configure

ROOT = Path(__file__).resolve().parents[2]


async def _recorded(url: str) -> str:
    telemetry = configure(
        service_name="nested", exporter="local", local_path=url, metrics=False, set_global=False
    )
    db = store(url)
    result = await Runner.run(
        team(), "write about moths", checkpointer=db, tracer_provider=telemetry.tracer_provider
    )
    telemetry.shutdown()
    await db.aclose()
    return result.run_id


def cli(*args: str) -> tuple[int, str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "NO_COLOR": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "lovia.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    return proc.returncode, proc.stdout, proc.stderr


def test_show_runs_replay_and_trace_of_child_runs(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'nested.db'}"
    parent = asyncio.run(_recorded(url))
    c1, c2 = child_run_id(parent, "c1"), child_run_id(parent, "c2")

    code, out, _ = cli("runs", "--store", url)
    assert code == 0
    assert parent in out and c1 not in out and c2 not in out
    code, out, _ = cli("runs", "--all", "--store", url)
    assert code == 0
    assert f"└ {c1}" in out and f"└ {c2}" in out and f"└ {parent}" not in out

    code, out, _ = cli("show", parent, "--store", url)
    assert code == 0
    lines = out.splitlines()
    call = next(i for i, line in enumerate(lines) if "research(" in line and "[c1]" in line)
    assert "-> moths like lamps" in lines[call + 1]
    assert f"child run {c1} · research · completed (stop) · 1 turn" in lines[call + 2]

    code, out, _ = cli("replay", parent, "--store", url)
    assert code == 0, out
    assert "2/2 views rebuilt with the recorded hash (all verified)" in out
    for call_id, child in (("c1", c1), ("c2", c2)):
        code, out, _ = cli("replay", parent[:10], "--child", call_id, "--store", url)
        assert code == 0, out
        assert f"run {child}" in out
        assert "1/1 views rebuilt with the recorded hash (all verified)" in out
    code, _, err = cli("replay", parent, "--child", "c9", "--store", url)
    assert code != 0
    assert "no child run started by tool call 'c9'" in err and "c1, c2" in err

    code, out, _ = cli("trace", parent, "--store", url)
    assert code == 0, out
    tree = [line for line in out.splitlines() if "execute_tool" in line or "invoke_agent" in line]
    depth = [len(line) - len(line.lstrip("│├└─ ")) for line in tree]
    names = [line.lstrip("│├└─ ").split("  ")[0] for line in tree]
    assert names == [
        "invoke_agent manager",
        "execute_tool research",
        "invoke_agent research",
        "execute_tool write",
        "invoke_agent write",
    ]
    assert depth[2] > depth[1] and depth[4] > depth[3] and depth[1] > depth[0]
