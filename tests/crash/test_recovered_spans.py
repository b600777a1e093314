"""Recovered is not executed: under random SIGKILLs and stalls, the execute_tool spans
marked executed are exactly the tool executions, process by process.

Each seed plans a random life for one run: SIGKILLs inside a tool (after its side
effect), after a result is checkpointed, or inside a model call, and stalls (the event
loop blocked inside a tool past the lease; a second worker takes the run over while the
first is frozen). Workers (``span_worker.py``) write each finished span to a file the
moment it ends and log every side effect with their pid. Then, for every process:

- the spans it marked ``lovia.tool.outcome=executed`` name calls whose side effect that
  same process performed (a killed process may lose the span of the call it died in,
  never invent one); a process that was not killed lost nothing: equality;
- the calls it answered from the ledger (``lovia.tool.recovered``, outcome ``unknown``)
  had no side effect in it, and its ``lovia.tool.calls`` metric does not count them
  (``lovia.tool.recovered`` does);
- no non-idempotent call ran twice, and every recovered call's result tells the model
  its outcome is unknown.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from lovia.stores import store

WORKER = Path(__file__).with_name("span_worker.py")
TTL = "1.0"
CALLS = 6


def _spawn(url: str, run_id: str, tmp: Path, mode: str) -> subprocess.Popen[str]:
    args = [str(tmp / "effects.log"), str(tmp / "spans.jsonl"), mode]
    return subprocess.Popen(
        [sys.executable, str(WORKER), url, run_id, *args],
        env={**os.environ, "LOVIA_LEASE_TTL_S": TTL},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _plan(seed: int) -> list[str]:
    """Every way to die once, in a random order at random calls, then a clean finish.

    The calls are distinct and increasing, so each death lands ahead of the run's
    progress and really happens."""
    rnd = random.Random(seed)
    kinds = ["tool", "after", "model", "stall", rnd.choice(["tool", "after", "model"])]
    rnd.shuffle(kinds)
    calls = sorted(rnd.sample(range(1, CALLS + 1), len(kinds)))
    return [*(f"{kind}:{n}" for kind, n in zip(kinds, calls, strict=True)), "none"]


def _wake_after_takeover(tmp: Path, frozen: Any, successor: Any) -> None:
    """Let the frozen worker go on once the successor holds the lease (it called the
    model) or has ended."""
    running = tmp / "spans.jsonl.running"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and successor.poll() is None:
        if running.exists() and running.read_text() == str(successor.pid):
            break
        time.sleep(0.02)
    (tmp / "spans.jsonl.go").write_text("go")
    assert frozen.poll() is None, "the frozen worker ended while frozen"


def _live(url: str, run_id: str, tmp: Path, seed: int) -> dict[int, dict[str, Any]]:
    """Run the planned attempts until the run completes: pid -> how that process ended."""
    ended: dict[int, dict[str, Any]] = {}
    plan = _plan(seed)
    stalled = tmp / "spans.jsonl.stalled"
    while plan:
        mode = plan.pop(0)
        proc = _spawn(url, run_id, tmp, mode)
        frozen = None
        if mode.startswith("stall"):
            deadline = time.monotonic() + 60
            while not stalled.exists() and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.02)
            if stalled.exists():  # frozen mid-tool: a successor takes the run over
                stalled.unlink()
                frozen, proc = proc, _spawn(url, run_id, tmp, plan.pop(0) if plan else "none")
                _wake_after_takeover(tmp, frozen, proc)
        for p in (proc, frozen):
            if p is None:
                continue
            out, err = p.communicate(timeout=120)
            killed = p.returncode == -signal.SIGKILL
            assert killed or out.strip(), err[-3000:]
            report = {"killed": True} if killed else json.loads(out.strip().splitlines()[-1])
            report.setdefault("killed", False)
            ended[p.pid] = {**report, "code": p.returncode, "frozen": p is frozen}
        (tmp / "spans.jsonl.go").unlink(missing_ok=True)
        if proc.returncode == 0:
            return ended
        assert proc.returncode in (-signal.SIGKILL, 3), (mode, proc.returncode)
        plan = plan or ["none"]
    raise AssertionError("the run never completed")


def _spans(tmp: Path, prefix: str = "execute_tool") -> list[dict[str, Any]]:
    lines = (tmp / "spans.jsonl").read_text().splitlines()
    return [s for s in map(json.loads, lines) if s["name"].startswith(prefix)]


def _effects(tmp: Path) -> list[tuple[str, int, int]]:
    rows = [line.split() for line in (tmp / "effects.log").read_text().splitlines()]
    return [(kind, int(n), int(pid)) for kind, n, pid in rows]


async def _results(url: str, run_id: str) -> dict[str, str]:
    db = store(url)
    try:
        snapshot = await db.load(run_id)
        assert snapshot is not None and snapshot.info.status == "completed"
        return {e.call_id: e.content for e in snapshot.entries() if e.type == "tool_result"}
    finally:
        await db.aclose()


@pytest.mark.parametrize("seed", [int(os.environ.get("LOVIA_CRASH_SEED", "11"))])
def test_spans_marked_executed_are_the_executions(
    store_url: str, seed: int, tmp_path: Path
) -> None:
    run_id = f"spans-{seed}"
    ended = _live(store_url, run_id, tmp_path, seed)
    spans, effects = _spans(tmp_path), _effects(tmp_path)
    results = asyncio.run(_results(store_url, run_id))
    assert sorted(results) == [f"c{n}" for n in range(1, CALLS + 1)]

    records = Counter(n for kind, n, _ in effects if kind == "record")
    assert all(count == 1 for count in records.values()), f"a record call ran twice: {effects}"
    for pid, end in ended.items():
        done = Counter(f"c{n}" for _, n, p in effects if p == pid)
        executed = Counter(
            s["attrs"]["gen_ai.tool.call.id"]
            for s in spans
            if s["pid"] == pid and s["attrs"].get("lovia.tool.outcome") == "executed"
        )
        recovered = [
            s["attrs"]["gen_ai.tool.call.id"]
            for s in spans
            if s["pid"] == pid and s["attrs"].get("lovia.tool.recovered")
        ]
        assert not executed - done, f"pid {pid} marked a call executed it did not run"
        if not end["killed"]:
            assert executed == done, (pid, executed, done)
        for call_id in recovered:
            assert call_id not in done, f"pid {pid} recovered {call_id} but ran it"
            assert int(call_id[1:]) % 2, "only a non-idempotent call is recovered"
            assert "unknown" in results[call_id]
        if end.get("metrics"):
            calls = sum(end["metrics"]["calls"].values())
            assert calls == sum(executed.values()), (pid, end, executed)
            assert sum(end["metrics"]["recovered"].values()) == len(recovered)
    outcomes = Counter(s["attrs"].get("lovia.tool.outcome") for s in spans)
    assert set(outcomes) <= {"executed", "unknown"}
    assert not [
        s
        for s in spans
        if s["attrs"].get("lovia.tool.recovered")
        and s["attrs"].get("lovia.tool.outcome") == "executed"
    ]
    assert sum(e["killed"] for e in ended.values()) == 4  # every planned death happened
    assert sum(e["frozen"] for e in ended.values()) == 1
    runs = {s["pid"]: s["attrs"] for s in _spans(tmp_path, "invoke_agent")}
    for pid, end in ended.items():  # a worker woken after the takeover was fenced out
        assert not end["frozen"] or end["code"] == 3, end
        if end["code"] == 3:  # its run span: interrupted, not failed
            assert runs[pid]["lovia.run.outcome"] == "interrupted", runs[pid]
            assert runs[pid]["error.type"] == "LeaseLost"
        elif end["code"] == 0:
            assert runs[pid]["lovia.run.outcome"] == "completed"
