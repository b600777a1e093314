"""Checkpoint writes in a trace: span events on the enclosing span when fast; a span of
their own (real start and end time) when slow, an ERROR span when the write failed —
and every reader (hooks as span processor, ``lovia trace``'s rows) sees them."""

from __future__ import annotations

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


async def test_a_slow_write_is_a_span_with_its_real_start_and_end(
    otel: Otel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(A, "CHECKPOINT_SPAN_MIN_S", 0.0)  # every write counts as slow
    hooks, live, rebuilt = _watch(otel)
    await Runner.run(_agent(hooks), "go", checkpointer=MemoryStore(), tracer_provider=otel.tp)
    spans = otel.spans()
    writes = [s for s in spans if s.name == A.SPAN_CHECKPOINT]
    assert not [e for s in spans for e in s.events if e.name == A.EVENT_CHECKPOINT]
    assert len(writes) == len(live)
    for span, event in zip(sorted(writes, key=lambda s: s.start_time or 0), live, strict=True):
        assert span.attributes is not None
        assert span.attributes[A.CHECKPOINT_KIND] == event.kind
        assert span.end_time is not None and span.start_time is not None
        # the write's own duration, whatever the hooks that saw the event took after it
        assert span.end_time - span.start_time == int(event.duration_s * 1e9)
    parents = {s.context.span_id: s.name.split(" ")[0] for s in spans}
    turn_writes = [s for s in writes if s.parent and parents[s.parent.span_id] == "lovia.turn"]
    assert turn_writes
    assert [(e.kind, e.entries, e.bytes) for e in rebuilt] == [
        (e.kind, e.entries, e.bytes) for e in live
    ]


@pytest.mark.lovia_unconsumed  # the run fails before the model's second answer
async def test_a_failed_write_is_an_error_span_and_the_run_fails(otel: Otel) -> None:
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
    (span,) = [s for s in spans if s.name == A.SPAN_CHECKPOINT]
    assert span.status.status_code.name == "ERROR"
    assert span.attributes is not None
    assert span.attributes[A.ERROR_TYPE] == "StoreError"
    assert span.attributes[A.CHECKPOINT_KIND] == failed[0].kind
    (turn,) = [s for s in spans if s.name == A.SPAN_TURN]
    assert span.parent is not None
    assert span.parent.span_id == turn.context.span_id
    # the span processor sees the two good writes (events) and the failed one (span)
    assert len(rebuilt) == 3
    assert [e.error is not None for e in rebuilt].count(True) == 1


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
