"""Resuming a run rebuilds the view the crashed worker would have built.

One deterministic scenario (evictions, clears and summaries before the crash point) runs
uninterrupted, then crashed at each turn and resumed with a fresh model object: every
view sent after the resume equals the uninterrupted run's view of the same turn, no
extra summary call is made, and ``lovia.replay.verify_run`` still verifies the run.
"""

from __future__ import annotations

import dataclasses
import re
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import lovia.replay
from lovia import Agent, Runner, tool
from lovia.errors import ProviderServerError
from lovia.providers.base import ModelProfile, ModelRequest
from lovia.stores import CheckpointRecord, MemoryStore, store
from lovia.testing import FunctionModel, call
from lovia.testing._models import CallInfo
from lovia.transcript import TranscriptEntry
from lovia.view import DEFAULT_SUMMARY_PROMPT, Compaction, view_records

TURNS = 20
"""Model turns of the scenario: 19 tool turns, then the final answer."""
PAGE = re.compile(r"page (\d+):")
ENTRY_ID = re.compile(r"\b[a-z]+_[0-9a-f]{16}\b")


@tool(idempotent=True)
def fetch(n: int) -> str:
    """Fetch page n (every fourth page is huge; safe to run again after a crash)."""
    return f"page {n}: " + ("y" * 12_000 if n % 4 == 0 else "x" * 3_600)


def is_summary(request: ModelRequest) -> bool:
    return request.system == DEFAULT_SUMMARY_PROMPT


def decide(request: ModelRequest, crash_at: int | None = None) -> Any:
    """The next step, from the request only (ids and counters play no part)."""
    if is_summary(request):
        pages = sorted({int(n) for m in request.messages for n in PAGE.findall(_text(m))})
        return f"pages read so far: {pages}"
    last = request.messages[-1]
    found = PAGE.findall(_text(last)) if last.type == "tool_result" else []
    n = int(found[0]) + 1 if found else 1
    if n == crash_at:
        raise ProviderServerError("503 from the test", status=503)
    if n >= TURNS:
        return f"read {n - 1} pages"
    return call("fetch", n=n, id=f"c{n}")


def model(crash_at: int | None = None) -> FunctionModel:
    def fn(request: ModelRequest, info: CallInfo) -> Any:
        return decide(request, crash_at)

    return FunctionModel(fn, profile=ModelProfile(context_window=4_000))


def agent(m: FunctionModel) -> Agent[Any, Any]:
    return Agent(
        name="reader",
        instructions="Read the pages one by one.",
        model=m,
        tools=[fetch],
        context=Compaction(keep_recent_turns=2, clear_after_turns=3),
    )


def _text(entry: TranscriptEntry) -> str:
    return str(getattr(entry, "content", "") or getattr(entry, "text", "") or "")


def norm_entry(entry: TranscriptEntry) -> tuple[Any, ...]:
    """An entry modulo ids, timestamps and run ids."""
    text = (
        getattr(entry, "content", None)
        or getattr(entry, "text", None)
        or getattr(entry, "arguments", None)
        or ""
    )
    return (
        entry.type,
        ENTRY_ID.sub("<id>", text),
        getattr(entry, "name", None),
        getattr(entry, "call_id", None),
        getattr(entry, "is_error", None),
        getattr(entry, "origin", None),
    )


def norm(request: ModelRequest) -> tuple[Any, ...]:
    return (
        request.system,
        tuple(t.name for t in request.tools),
        tuple(norm_entry(m) for m in request.messages),
    )


def main_requests(m: FunctionModel) -> list[ModelRequest]:
    return [r for r in m.requests if not is_summary(r)]


def summaries(m: FunctionModel) -> int:
    return sum(1 for r in m.requests if is_summary(r))


async def uninterrupted() -> tuple[FunctionModel, MemoryStore]:
    m, store = model(), MemoryStore()
    result = await Runner.run(agent(m), "go", run_id="whole", checkpointer=store)
    assert result.output == f"read {TURNS - 1} pages"
    return m, store


async def test_the_scenario_evicts_clears_and_summarizes() -> None:
    m, store = await uninterrupted()
    snap = await store.load("whole")
    assert snap is not None
    records = view_records(snap.records)
    assert len(main_requests(m)) == TURNS
    assert summaries(m) >= 2
    stubs = [e for r in main_requests(m) for e in r.messages if "from view:" in _text(e)]
    assert any("evicted from view" in _text(e) for e in stubs)
    assert any("cleared from view" in _text(e) for e in stubs)
    assert summary_turns(records)[0] < TURNS // 2
    assert (await lovia.replay.verify_run("whole", store)).ok


def summary_turns(records: Sequence[Any]) -> list[int]:
    return [r.turn for r in records if r.summary is not None]


@pytest.mark.parametrize("crash_at", range(2, TURNS + 1))
async def test_resume_after_a_failed_model_call_sends_the_same_views(crash_at: int) -> None:
    whole, whole_store = await uninterrupted()
    expected = [norm(r) for r in main_requests(whole)]

    store = MemoryStore()
    crashed = model(crash_at)
    with pytest.raises(ProviderServerError):
        await Runner.run(agent(crashed), "go", run_id="r1", checkpointer=store)
    # the crashed worker sent the same views up to and including the failed call
    assert [norm(r) for r in main_requests(crashed)] == expected[:crash_at]

    resumed = model()
    result = await Runner.run(agent(resumed), None, run_id="r1", checkpointer=store)
    assert result.output == f"read {TURNS - 1} pages"
    assert [norm(r) for r in main_requests(resumed)] == expected[crash_at - 1 :]
    # no summary is made again: the crashed worker's is reused
    assert summaries(crashed) + summaries(resumed) == summaries(whole)

    verification = await lovia.replay.verify_run("r1", store)
    assert verification.ok, [m.details for m in verification.mismatches]
    snap = await store.load("r1")
    assert snap is not None
    records = view_records(snap.records)
    whole_snap = await whole_store.load("whole")
    assert whole_snap is not None
    assert summary_turns(records) == summary_turns(view_records(whole_snap.records))
    # the chain goes on after the resume: one full record, then deltas
    assert [r.seq for r in records] == list(range(len(records)))
    assert [r.delta for r in records].count(False) == 1


class CuttableStore(MemoryStore):
    """A MemoryStore remembering where each append ended (a crash keeps a prefix)."""

    def __init__(self) -> None:
        super().__init__()
        self.cuts: list[int] = []

    async def append(
        self, run_id: str, records: Sequence[CheckpointRecord], *, fence: int | None = None
    ) -> int:
        written = await super().append(run_id, records, fence=fence)
        self.cuts.append((self.cuts[-1] if self.cuts else 0) + len(records))
        return written


async def test_resume_after_a_hard_crash_at_every_checkpoint_write() -> None:
    """SIGKILL-like: the checkpoint keeps whole appends only; the in-flight view is lost."""
    whole, source = model(), CuttableStore()
    await Runner.run(agent(whole), "go", run_id="whole", checkpointer=source)
    expected = [norm(r) for r in main_requests(whole)]
    snap = await source.load("whole")
    assert snap is not None
    made_at = summary_turns(view_records(snap.records))
    for cut in source.cuts[:-1]:
        store = MemoryStore()
        await store.begin(dataclasses.replace(snap.info, status="running", ended_at=None))
        await store.append("whole", snap.records[:cut])
        resumed = model()
        result = await Runner.run(agent(resumed), None, run_id="whole", checkpointer=store)
        assert result.output == f"read {TURNS - 1} pages"
        sent = [norm(r) for r in main_requests(resumed)]
        assert sent == expected[len(expected) - len(sent) :], f"cut after record {cut}"
        first_turn = TURNS - len(sent) + 1
        assert summaries(resumed) == sum(1 for t in made_at if t >= first_turn), cut
        verification = await lovia.replay.verify_run("whole", store)
        assert verification.ok, (cut, [m.details for m in verification.mismatches])


WORKER = Path(__file__).with_name("_resume_worker.py")


async def test_resume_after_sigkill_with_sqlite(tmp_path: Path) -> None:
    """A real crash: the worker process dies inside the model call after a summary."""
    whole, whole_store = await uninterrupted()
    expected = [norm(r) for r in main_requests(whole)]
    whole_snap = await whole_store.load("whole")
    assert whole_snap is not None
    made_at = summary_turns(view_records(whole_snap.records))
    kill_at = made_at[0] + 2
    url = f"sqlite:///{tmp_path / 'resume.db'}"
    proc = subprocess.run(
        [sys.executable, str(WORKER), url, "r-sql", str(kill_at)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr

    db = store(url)
    try:
        resumed = model()
        result = await Runner.run(agent(resumed), None, run_id="r-sql", checkpointer=db)
        assert result.output == f"read {TURNS - 1} pages"
        assert [norm(r) for r in main_requests(resumed)] == expected[kill_at - 1 :]
        assert summaries(resumed) == sum(1 for t in made_at if t >= kill_at)
        verification = await lovia.replay.verify_run("r-sql", db)
        assert verification.ok, [m.details for m in verification.mismatches]
    finally:
        await db.aclose()
