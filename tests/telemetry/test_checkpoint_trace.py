"""Checkpoint writes in a trace: always span events on the enclosing span, never spans —
a slow write with its duration and the time it ended, a failed one with its error — and
every reader (hooks as span processor, ``lovia trace``'s rows) sees them."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

import pytest
from telemetry_helpers import Otel

from lovia import Agent, AgentHooks, Runner, events, tool
from lovia.errors import StoreError
from lovia.replay._spans import build_tree, normalize_all
from lovia.stores import MemoryStore
from lovia.stores.base import CheckpointRecord
from lovia.telemetry import attributes as A
from lovia.telemetry import content
from lovia.telemetry.tracer import make_run_tracer
from lovia.testing import ScriptedModel, call


@tool
def lookup(q: str) -> str:
    """Look something up."""
    return "found " + q


def _agent(hooks: AgentHooks | None = None) -> Agent[Any, Any]:
    model = ScriptedModel([call("lookup", q="a"), "done"])
    return Agent(name="a", model=model, tools=[lookup], hooks=hooks)


class FailingStore(MemoryStore):
    """Refuses its ``fail_at``-th checkpoint append (1-based)."""

    def __init__(self, fail_at: int) -> None:
        super().__init__()
        self.appends = 0
        self.fail_at = fail_at

    async def append(
        self, run_id: str, records: Sequence[CheckpointRecord], *, fence: int | None = None
    ) -> int:
        self.appends += 1
        if self.appends == self.fail_at:
            raise StoreError("disk full")
        return await super().append(run_id, records, fence=fence)


def _watch(
    otel: Otel, live_type: type[events.Event] = events.CheckpointSaved
) -> tuple[AgentHooks, list[Any], list[events.CheckpointSaved]]:
    """Hooks on the agent (what a run emits live) and the same hooks as a span processor
    (``CheckpointSaved`` rebuilt from the trace): (agent hooks, live, rebuilt)."""
    live: list[Any] = []
    rebuilt: list[events.CheckpointSaved] = []
    hooks, span_hooks = AgentHooks(), AgentHooks()
    hooks.on(live_type)(lambda e, ctx: live.append(e))
    span_hooks.on(events.CheckpointSaved)(lambda e, ctx: rebuilt.append(e))
    otel.tp.add_span_processor(span_hooks)
    return hooks, live, rebuilt


async def test_fast_writes_are_events_on_the_enclosing_span(otel: Otel) -> None:
    live: list[events.CheckpointSaved] = []
    hooks = AgentHooks()
    hooks.on(events.CheckpointSaved)(lambda e, ctx: live.append(e))
    await Runner.run(_agent(hooks), "go", checkpointer=MemoryStore(), tracer_provider=otel.tp)
    spans = otel.spans()
    assert not [s for s in spans if s.name == A.SPAN_CHECKPOINT]
    noted = [
        (s.name.split(" ")[0], dict(e.attributes or {}))
        for s in spans
        for e in s.events
        if e.name == A.EVENT_CHECKPOINT
    ]
    assert len(noted) == len(live) >= 4
    carriers = [name for name, _ in noted]
    assert set(carriers) == {"invoke_agent", "lovia.turn"}
    by_kind = {attrs[A.CHECKPOINT_KIND]: (name, attrs) for name, attrs in noted}
    assert by_kind["start"][0] == "invoke_agent"
    assert by_kind["complete"][0] == "invoke_agent"
    assert by_kind["tool_result"][0] == "lovia.turn"
    assert sorted(
        (e.kind, e.entries, e.bytes, e.store, e.duration_s, e.turn) for e in live
    ) == sorted(
        (
            a[A.CHECKPOINT_KIND],
            a[A.CHECKPOINT_ENTRIES],
            a[A.CHECKPOINT_BYTES],
            a[A.STORE],
            a[A.CHECKPOINT_DURATION],
            a.get(A.TURN_INDEX, 0),
        )
        for _, a in noted
    )
    assert {a[A.AGENT_NAME] for _, a in noted} == {"a"}


class SlowStore(MemoryStore):
    """Takes ``delay`` seconds over its ``slow_at``-th checkpoint append (1-based) and
    notes when that append started and ended (ns)."""

    def __init__(self, slow_at: int, delay: float) -> None:
        super().__init__()
        self.appends = 0
        self.slow_at = slow_at
        self.delay = delay
        self.window: tuple[int, int] = (0, 0)

    async def append(
        self, run_id: str, records: Sequence[CheckpointRecord], *, fence: int | None = None
    ) -> int:
        self.appends += 1
        if self.appends != self.slow_at:
            return await super().append(run_id, records, fence=fence)
        started = time.time_ns()
        await asyncio.sleep(self.delay)
        found = await super().append(run_id, records, fence=fence)
        self.window = (started, time.time_ns())
        return found


def _written(spans: Sequence[Any]) -> list[tuple[Any, Any]]:
    """Every checkpoint write's span event, with the span carrying it, in time order."""
    found = [(s, e) for s in spans for e in s.events if e.name == A.EVENT_CHECKPOINT]
    return sorted(found, key=lambda pair: pair[1].timestamp)


async def test_a_slow_write_is_an_event_with_its_duration_and_real_time(otel: Otel) -> None:
    """A write far slower than a fast store's (the 10 ms that once made it a span) is
    still an event on its carrier: its duration, stamped when it ended, before hooks."""
    hooks, live, rebuilt = _watch(otel)
    seen: list[int] = []

    def slow_hook(e: events.CheckpointSaved, ctx: Any) -> None:
        seen.append(time.time_ns())  # the hooks run after the tracer stamped the event
        time.sleep(0.02)

    hooks.on(events.CheckpointSaved)(slow_hook)
    store = SlowStore(slow_at=3, delay=0.05)  # start, model turn + ledger, the result
    await Runner.run(_agent(hooks), "go", checkpointer=store, tracer_provider=otel.tp)
    spans = otel.spans()
    assert not [s for s in spans if s.name == A.SPAN_CHECKPOINT]
    written = _written(spans)
    assert len(written) == len(live) == len(rebuilt) == 4
    carrier, event = written[2]
    slow = live[2]
    attrs = dict(event.attributes or {})
    assert carrier.name == A.SPAN_TURN
    assert attrs[A.CHECKPOINT_KIND] == slow.kind == "tool_result"
    assert attrs[A.CHECKPOINT_DURATION] == slow.duration_s >= 0.05
    assert A.ERROR_TYPE not in attrs and A.ERROR_MESSAGE not in attrs
    started, ended = store.window
    duration_ns = int(slow.duration_s * 1e9)
    # stamped when the write ended, before the hooks that saw it (which took 20 ms each);
    # the duration is the write's own
    assert started < ended <= event.timestamp <= seen[2]
    assert ended - started <= duration_ns < ended - started + 500_000_000
    assert carrier.start_time <= event.timestamp - duration_ns
    assert sorted((e.kind, e.duration_s, e.error) for e in rebuilt) == sorted(
        (e.kind, e.duration_s, None) for e in live
    )


@pytest.mark.parametrize("mode", ["NO_CONTENT", "SPAN_ONLY"])
@pytest.mark.lovia_unconsumed  # the run fails before the model's second answer
async def test_a_failed_write_is_an_event_with_its_error_and_the_run_fails(
    otel: Otel, mode: content.Mode
) -> None:
    content.set_policy(mode, None)
    hooks, live, rebuilt = _watch(otel, events.Event)
    store = FailingStore(fail_at=3)  # start, model turn + ledger, then the result fails
    with pytest.raises(StoreError, match="disk full"):
        await Runner.run(_agent(hooks), "go", checkpointer=store, tracer_provider=otel.tp)
    failed = [e for e in live if isinstance(e, events.CheckpointSaved) and e.error is not None]
    assert len(failed) == 1
    assert isinstance(failed[0].error, StoreError)
    assert isinstance(live[-1], events.RunFailed)
    assert live[-1].error_type == "StoreError"
    spans = otel.spans()
    assert not [s for s in spans if s.name == A.SPAN_CHECKPOINT]
    written = _written(spans)
    assert len(written) == 3
    carrier, event = written[2]
    (turn,) = [s for s in spans if s.name == A.SPAN_TURN]
    assert carrier.context.span_id == turn.context.span_id
    attrs = dict(event.attributes or {})
    message = "disk full" if mode == "SPAN_ONLY" else "StoreError"  # content: text or type
    assert attrs == {
        A.CHECKPOINT_KIND: failed[0].kind,
        A.CHECKPOINT_ENTRIES: failed[0].entries,
        A.CHECKPOINT_BYTES: 0,
        A.STORE: failed[0].store,
        A.ERROR_TYPE: "StoreError",
        A.CHECKPOINT_DURATION: failed[0].duration_s,
        A.AGENT_NAME: "a",
        A.TURN_INDEX: 1,
        A.ERROR_MESSAGE: message,
    }
    assert turn.start_time <= event.timestamp <= (turn.end_time or 0)
    assert [
        a.get(A.ERROR_TYPE) for _, a in ((s, dict(e.attributes or {})) for s, e in written)
    ] == [
        None,
        None,
        "StoreError",
    ]
    # the span processor sees the three writes, the failed one with its error text
    writes = {e.kind: e for e in rebuilt if isinstance(e, events.CheckpointSaved)}
    assert {k: None if e.error is None else str(e.error) for k, e in writes.items()} == {
        "start": None,
        "ledger": None,
        "tool_result": message,
    }
    assert writes["tool_result"].duration_s == failed[0].duration_s


def test_a_write_with_no_open_span_is_not_recorded(otel: Otel) -> None:
    tracer = make_run_tracer(otel.tp)
    assert tracer is not None
    saved = events.CheckpointSaved(run_id="r", agent="a", turn=0, kind="start", error=OSError())
    assert tracer.record(saved) is None
    assert otel.spans() == ()


async def test_trace_rows_show_event_writes_as_children_of_their_carrier(otel: Otel) -> None:
    await Runner.run(_agent(), "go", checkpointer=MemoryStore(), tracer_provider=otel.tp)
    rows = normalize_all(otel.spans())
    writes = [r for r in rows if r.name == A.SPAN_CHECKPOINT]
    assert writes and all(r.from_event for r in writes)
    (root,) = build_tree(rows)
    names = [c.name for c in root.children]
    assert names[0] == A.SPAN_CHECKPOINT  # the run's first write, before any turn
    turn = next(c for c in root.children if c.name == A.SPAN_TURN)
    assert A.SPAN_CHECKPOINT in [c.name for c in turn.children]
    for row in writes:
        assert row.end is not None and row.end >= row.start
        assert row.error is None


def _end(row: Any) -> float:
    return float(row.end or 0.0)


@pytest.mark.lovia_unconsumed  # the run fails before the model's second answer
async def test_trace_rows_mark_a_failed_write_as_an_error(otel: Otel) -> None:
    content.set_policy("SPAN_ONLY", None)
    with pytest.raises(StoreError):
        await Runner.run(_agent(), "go", checkpointer=FailingStore(3), tracer_provider=otel.tp)
    writes = sorted((r for r in normalize_all(otel.spans()) if r.from_event), key=_end)
    assert [r.error for r in writes] == [None, None, "StoreError: disk full"]
    content.set_policy("NO_CONTENT", None)
    otel.exporter.clear()
    with pytest.raises(StoreError):
        await Runner.run(_agent(), "go", checkpointer=FailingStore(3), tracer_provider=otel.tp)
    writes = sorted((r for r in normalize_all(otel.spans()) if r.from_event), key=_end)
    assert [r.error for r in writes] == [None, None, "StoreError"]  # the type, said once
