"""A view is hashed and recorded only where someone can read it.

The view record (what makes a model call replayable) and its hash go to a store, to
the ``chat`` span and to the ``ViewBuilt`` / ``ModelCallStarted`` events. Under
``Runner.run`` without a store, a tracer, a hook or an observer none of them is read,
so the loop neither hashes nor records the views; the result is the same. A store, a
tracer, a stream's consumer, a hook or an observer each get every view recorded, and
once a run's views are recorded they stay recorded, so the chain a reader sees has no
gap (a delta record always follows the record it is a delta of).
"""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider

from lovia import Agent, AgentHooks, Runner, events, tool
from lovia.stores import MemoryStore
from lovia.testing import ScriptedModel, call, capture_events
from lovia.view import ViewHasher, resolve_records, view_records


@tool(concurrency_safe=True)
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def agent(hooks: AgentHooks | None = None, **kw: Any) -> Agent[Any, Any]:
    model = ScriptedModel([call("add", a=1, b=2), call("add", a=3, b=4), "sum=10"])
    if hooks is not None:
        kw["hooks"] = hooks
    return Agent(name="a", model=model, tools=[add], **kw)


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The ``seq`` of every view record the loop made, in order."""
    made: list[int] = []
    real = ViewHasher.record

    def counting(self: ViewHasher, **kw: Any) -> Any:
        record = real(self, **kw)
        made.append(record.seq)
        return record

    monkeypatch.setattr(ViewHasher, "record", counting)
    return made


async def test_run_hashes_and_records_no_view_nobody_reads(recorded: list[int]) -> None:
    result = await Runner.run(agent(), "go")
    assert result.output == "sum=10" and result.turns == 3
    assert recorded == []


async def test_hooks_without_a_handler_read_nothing(recorded: list[int]) -> None:
    """``hooks=AgentHooks()`` with no handler registered is no reader of views."""
    result = await Runner.run(agent(AgentHooks()), "go")
    assert result.output == "sum=10"
    assert recorded == []


async def test_a_store_gets_every_view_recorded(recorded: list[int]) -> None:
    store = MemoryStore()
    result = await Runner.run(agent(), "go", checkpointer=store)
    assert recorded == [0, 1, 2]
    snapshot = await store.load(result.run_id)
    assert snapshot is not None
    views = resolve_records(view_records(snapshot.records))
    assert [v.turn for v in views] == [1, 2, 3]


async def test_a_tracer_gets_every_view_hashed(recorded: list[int]) -> None:
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    await Runner.run(agent(), "go", tracer_provider=tp)
    assert recorded == [0, 1, 2]
    hashes = [
        s.attributes.get("lovia.view.hash")
        for s in exporter.get_finished_spans()
        if s.name.startswith("chat") and s.attributes
    ]
    assert len(hashes) == 3 and all(isinstance(h, str) and len(h) == 64 for h in hashes)


async def test_a_stream_an_observer_and_a_hook_each_get_every_view(recorded: list[int]) -> None:
    stream = Runner.stream(agent(), "go")
    built = [e async for e in stream if isinstance(e, events.ViewBuilt)]
    assert [e.record.seq for e in built] == [0, 1, 2]
    assert all(len(e.view_hash) == 64 and e.view_hash == e.record.hash for e in built)

    with capture_events() as seen:
        await Runner.run(agent(), "go")
    assert [e.record.seq for e in seen if isinstance(e, events.ViewBuilt)] == [0, 1, 2]
    started = [e for e in seen if isinstance(e, events.ModelCallStarted)]
    assert all(len(e.view_hash) == 64 for e in started)

    hooks = AgentHooks()
    hashes: list[str] = []

    @hooks.on(events.ViewBuilt)
    def on_view(event: events.ViewBuilt, ctx: Any) -> None:
        hashes.append(event.view_hash)

    recorded.clear()
    await Runner.run(agent(hooks), "go")
    assert recorded == [0, 1, 2] and len(hashes) == 3 and all(len(h) == 64 for h in hashes)


async def test_views_recorded_once_a_hooked_agent_runs_stay_recorded(
    recorded: list[int],
) -> None:
    """A → B (hooks) → A: nothing before B; from B's view on, every view, as one chain."""
    model = ScriptedModel(
        [call("transfer_to_b"), call("transfer_to_a"), call("add", a=1, b=2), "done"]
    )
    hooks = AgentHooks()
    seen: list[Any] = []

    @hooks.on(events.ViewBuilt)
    def on_view(event: events.ViewBuilt, ctx: Any) -> None:
        seen.append(event.record)

    b = Agent(name="b", model=model, hooks=hooks, handoffs=[lambda: a])
    a = Agent(name="a", model=model, tools=[add], handoffs=[b])
    result = await Runner.run(a, "go")
    assert result.output == "done" and result.turns == 4
    assert recorded == [0, 1, 2]  # turns 2, 3 and 4: the first full, then deltas
    assert [r.seq for r in seen] == [0]  # B's own hooks see B's one view
    assert not seen[0].delta
