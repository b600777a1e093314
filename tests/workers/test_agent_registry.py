"""Whoever can publish to the broker chooses a task's agent name, so workers run only
the agents they were started with: a task naming ``os:abort``, ``builtins:breakpoint``
or any other unregistered path is recorded as failed and dead-lettered, with nothing
imported or called, on both queue back-ends."""

from __future__ import annotations

import builtins
import importlib
import os
from collections import Counter
from typing import Any

import celery
import pytest
from worker_helpers import Start, counting_agent, eventually

from lovia import Agent
from lovia.errors import UserError
from lovia.integrations.celery import CeleryRunQueue
from lovia.testing import ScriptedModel
from lovia.workers import RunQueue, Worker
from lovia.workers.registry import AgentRegistry, UnknownAgent

HOSTILE = ["os:abort", "builtins:breakpoint", "os.system", "nobody"]

registered = Agent(name="registered", model=ScriptedModel([]))
built: list[str] = []


def make_agent() -> Agent[Any, Any]:
    """A registered factory: called once, when the first task names it."""
    built.append("made")
    return Agent(name="made", model=ScriptedModel([]))


@pytest.fixture
def traps(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Records any call of the hostile targets and any import at all."""
    hits: list[str] = []
    real_import = importlib.import_module
    monkeypatch.setattr(os, "abort", lambda: hits.append("os.abort"))
    monkeypatch.setattr(os, "system", lambda *_: hits.append("os.system"))
    monkeypatch.setattr(builtins, "breakpoint", lambda *_, **__: hits.append("breakpoint"))

    def spy(name: str, package: str | None = None) -> Any:
        hits.append(f"import {name}")
        return real_import(name, package)

    monkeypatch.setattr(importlib, "import_module", spy)
    return hits


def _hostile(hits: list[str]) -> list[str]:
    """The calls of hostile targets, and imports of the modules the hostile names name."""
    named = {"import os", "import builtins", "import nobody"}
    return [h for h in hits if not h.startswith("import ") or h in named]


def test_an_unregistered_name_is_refused_without_importing_anything(traps: list[str]) -> None:
    registry = AgentRegistry(
        {"support": registered, "made": f"{__name__}:make_agent"}, owner="Worker"
    )
    for name in [*HOSTILE, ["os:abort"], None, "x" * 10_000]:
        with pytest.raises(UnknownAgent) as info:
            registry.resolve(name, "worker w1")
        assert "registered: made, support" in info.value.message
        assert len(info.value.message) < 300 and info.value.hint
    assert traps == [], "nothing imported or called"
    assert registry.resolve("support", "w") is registered
    built.clear()
    made = registry.resolve("made", "w")
    assert registry.resolve("made", "w") is made and built == ["made"], "factory called once"


def test_a_list_of_paths_allows_exactly_those_paths() -> None:
    registry = AgentRegistry([f"{__name__}:registered"], owner="Worker")
    assert registry.resolve(f"{__name__}:registered", "w") is registered
    with pytest.raises(UnknownAgent):
        registry.resolve(f"{__name__}:make_agent", "w")  # importable, but not allowed


@pytest.mark.parametrize(
    ("agents", "match"),
    [
        ({}, "is empty"),
        ("myapp:agent", "needs a mapping or a list"),
        ({"x": 42}, "maps to a int"),
        ({"": registered}, "is not a name"),
        (["abort"], "is not an import path"),
    ],
)
def test_a_malformed_registry_is_a_user_error_at_start_up(agents: Any, match: str) -> None:
    with pytest.raises(UserError, match=match) as info:
        AgentRegistry(agents, owner="Worker")
    assert "agents={" in (info.value.hint or "")


async def test_redis_worker_dead_letters_hostile_agent_names(
    queue: RunQueue, store_file: str, start: Start, traps: list[str]
) -> None:
    counts: Counter[str] = Counter()
    worker = Worker(queue, {"counter": counting_agent(counts)}, store_file)
    start(worker)
    run_ids = [await queue.submit(name, "hello") for name in HOSTILE]
    good = await queue.submit("counter", "still works")
    snaps = [await queue.result(r, store_file, timeout_s=10) for r in run_ids]
    assert {(s.info.status, s.info.error_type) for s in snaps} == {("failed", "UnknownAgent")}
    assert "registered: counter" in snaps[0].info.extra["error"]
    assert (await queue.result(good, store_file, timeout_s=10)).info.status == "completed"
    await eventually(lambda: worker.stats["unknown_agent"] == len(HOSTILE))
    dead: Any = await queue.client.xrange(f"{queue.stream}:dead")
    assert sorted(f["task"].split('"agent": "')[1].split('"')[0] for _, f in dead) == sorted(
        HOSTILE
    )
    assert {f["reason"] for _, f in dead} == {"unknown_agent"}
    assert await queue.pending() == 0
    assert _hostile(traps) == [], "nothing hostile was imported or called"
    assert counts == Counter({"still works": 1})


def _memory_queue(name: str) -> CeleryRunQueue:
    app = celery.Celery(f"lovia-registry-{name}", broker="memory://")
    app.conf.task_always_eager = True  # the task body runs here; dead letters go to memory
    return CeleryRunQueue(app, f"memory://celery-registry-{name}", agents={"support": registered})


def test_celery_task_naming_an_unregistered_path_is_dead_lettered(traps: list[str]) -> None:
    queue = _memory_queue("hostile")
    for name in HOSTILE:  # as a publisher on the broker sends them, bypassing submit()
        run_id = f"hostile-{name}"
        kwargs = {"run_id": run_id, "agent": name, "input": "hi", "otel": {}}
        assert queue.task.apply(kwargs=kwargs, task_id=run_id).get() == "dead_lettered"
        snap = queue.get(run_id, timeout_s=5)
        assert (snap.info.status, snap.info.error_type) == ("failed", "UnknownAgent")
        assert "registered: support" in snap.info.extra["error"]
    assert _hostile(traps) == [], "nothing hostile was imported or called"
    dead = queue.dead_letters()
    assert sorted(d["agent"] for d in dead) == sorted(HOSTILE)
    assert {d["reason"] for d in dead} == {"unknown_agent"}


def test_celery_submit_refuses_an_unregistered_name() -> None:
    queue = _memory_queue("submit")
    with pytest.raises(UserError, match="no agent named 'os:abort'") as info:
        queue.submit("os:abort", "hi")
    assert "agents={" in (info.value.hint or "")
    with pytest.raises(UserError, match="required"):
        CeleryRunQueue(celery.Celery("x"), "memory://x")
