"""A run's ``deps_key``: checked where it enters (submit, a worker, ``Runner``), stored
with the run (``RunInfo.extra["deps_key"]``) for the sweep, and never quoted in errors.
A hostile key from the queue dead-letters its run; the ``deps`` factory never sees it."""

from __future__ import annotations

import json
import logging
from collections import Counter
from typing import Any

import pytest
from worker_helpers import Start, counting_agent, eventually

from lovia import Agent, Runner, tool
from lovia.errors import ApprovalPending, UserError
from lovia.runner import check_deps_key, resume_options
from lovia.stores import MemoryStore, store
from lovia.stores.base import DEPS_KEY
from lovia.testing import ScriptedModel, call
from lovia.workers import RunQueue, Worker

SECRET = "s3cr3t-tenant-token"
HOSTILE: list[Any] = [SECRET * 20, f"{SECRET}\x00", 42, {"tenant": SECRET}]
"""Too long (380 characters), a NUL, not a str (a number, an object)."""


@pytest.mark.parametrize(
    ("value", "said"),
    [
        (HOSTILE[0], "deps_key is 380 characters long (at most 256)"),
        (HOSTILE[1], "deps_key contains a control character (e.g. NUL)"),
        (HOSTILE[2], "deps_key must be a str, got int"),
        (HOSTILE[3], "deps_key must be a str, got dict"),
        ("\ud800", "deps_key is not valid Unicode (it holds a lone surrogate)"),
    ],
)
def test_a_bad_deps_key_is_refused_without_quoting_it(value: Any, said: str) -> None:
    with pytest.raises(UserError) as info:
        check_deps_key(value)
    assert info.value.message == said
    assert "deps factory" in (info.value.hint or "")


def test_a_good_deps_key_is_kept_as_given() -> None:
    for value in (None, "", "tenant-7", "t" * 256, "ünïcode ключ"):
        assert check_deps_key(value) == value


async def test_submit_refuses_a_bad_deps_key_before_reaching_redis() -> None:
    queue = RunQueue("redis://127.0.0.1:1/0")  # nothing listens there: never contacted
    with pytest.raises(UserError, match="deps_key is 380 characters long"):
        await queue.submit("counter", "x", deps_key=HOSTILE[0])
    assert queue._client is None  # pyright: ignore[reportPrivateUsage]


@tool(requires_approval=True)
def refund(amount: int) -> str:
    """Refund money."""
    return f"refunded {amount}"


async def test_a_run_stores_its_deps_key_and_a_resume_keeps_it() -> None:
    """Stored from the first checkpoint (a paused run has it); a resume that does not
    give the key keeps the stored one; a run without a key stores none."""
    db = MemoryStore()
    model = ScriptedModel([call("refund", amount=5, id="c1"), "refunded"])
    agent = Agent(name="desk", tools=[refund], model=model)
    with pytest.raises(ApprovalPending):
        await Runner.run(agent, "refund", run_id="r-deps", store=db, deps_key="tenant-7")
    paused = await db.load("r-deps")
    assert paused is not None and paused.info.extra[DEPS_KEY] == "tenant-7"
    await Runner.run(agent, None, **resume_options(paused.info, db, approvals={"c1": True}))
    done = await db.load("r-deps")
    assert done is not None and done.info.status == "completed"
    assert done.info.extra[DEPS_KEY] == "tenant-7", "the resume kept the stored key"
    plain = await Runner.run(counting_agent(Counter()), "b", run_id="r-plain", store=db)
    plain_snap = await db.load(plain.run_id)
    assert plain_snap is not None and DEPS_KEY not in plain_snap.info.extra
    with pytest.raises(UserError, match="deps_key contains a control character"):
        Runner.stream(agent, "c", store=db, deps_key=HOSTILE[1])


async def test_a_task_with_a_hostile_deps_key_is_dead_lettered_unbuilt(
    queue: RunQueue, store_file: str, start: Start, caplog: pytest.LogCaptureFixture
) -> None:
    """Tasks written to the stream by anyone (not through ``submit``): each bad key
    dead-letters its run with the reason, the factory is called only for the good
    task, which completes with its key stored; the key shows up in no log line."""
    caplog.set_level(logging.INFO)
    db = store(store_file)
    built: list[Any] = []

    def deps(key: str | None) -> str | None:
        built.append(key)
        return key

    for n, bad in enumerate(HOSTILE):
        task = {"v": 1, "run_id": f"bad-{n}", "agent": "counter", "input": "x", "deps_key": bad}
        await queue.client.xadd(queue.stream, {"task": json.dumps(task)})
    good = await queue.submit("counter", "y", run_id="good", deps_key="tenant-7")
    worker = Worker(queue, {"counter": counting_agent(Counter())}, db, deps=deps, concurrency=1)
    start(worker)
    snap = await queue.result(good, db, timeout_s=15)
    assert snap.info.status == "completed" and snap.info.extra[DEPS_KEY] == "tenant-7"
    await eventually(lambda: worker.stats["bad_deps_key"] == len(HOSTILE))
    assert built == ["tenant-7"], "the factory never saw a bad key"
    dead = await queue.dead_letters()
    assert sorted((d["run_id"], d["reason"]) for d in dead) == [
        (f"bad-{n}", "bad_deps_key") for n in range(len(HOSTILE))
    ]
    for n, said in enumerate(["is 380 characters long", "control character", "got int", "dict"]):
        bad_snap = await db.load(f"bad-{n}")
        assert bad_snap is not None and bad_snap.info.error_type == "DeadLettered"
        mark = bad_snap.info.extra["dead_letter"]
        assert mark["reason"] == "bad_deps_key" and said in mark["last_error"]
        assert DEPS_KEY not in bad_snap.info.extra and bad_snap.records == []
    assert await queue.pending() == 0
    assert SECRET not in caplog.text
    await db.aclose()
