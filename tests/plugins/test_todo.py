"""Todo: tools, the per-turn reminder (view only), per-run state under concurrency."""

from __future__ import annotations

import asyncio

import pytest

from lovia import Agent, Runner
from lovia.plugins.todo import Todo
from lovia.providers.base import ModelRequest
from lovia.stores.memory import MemoryStore
from lovia.testing import ScriptedModel, call
from lovia.transcript import InputEntry

from .conftest import results


def reminder(request: ModelRequest) -> str | None:
    last = request.messages[-1]
    if isinstance(last, InputEntry) and last.content.startswith("<system-reminder>"):
        return last.content
    return None


async def test_todo_tools_and_reminder_every_turn() -> None:
    model = ScriptedModel(
        [
            call("todo_add", items=["write tests", "write code", "  "]),
            call("todo_update", {"id": 1, "status": "in_progress"}),
            [
                call("todo_update", {"id": 1, "status": "done"}),
                call("todo_update", {"id": 9, "status": "done"}),
            ],
            call("todo_list"),
            "all set",
        ]
    )
    store = MemoryStore()
    agent = Agent(name="a", model=model, plugins=[Todo()])
    result = await Runner.run(agent, "plan", session=store, session_id="s")
    assert reminder(model.requests[0]) is None  # empty list: nothing injected
    assert "[ ] 1. write tests" in (reminder(model.requests[1]) or "")
    assert "[~] 1. write tests" in (reminder(model.requests[2]) or "")
    last = reminder(model.requests[4]) or ""
    assert "Todo list (1/2 done)" in last and "[x] 1. write tests" in last
    assert "[ ] 2. write code" in last
    outs = results(result.entries)
    assert outs[3].is_error and "No todo item 9" in outs[3].content
    assert outs[4].content.startswith("Todo list (1/2 done)")
    for request in model.requests:  # re-shown, never accumulated
        assert (
            sum("<system-reminder>" in str(getattr(m, "content", "")) for m in request.messages)
            <= 1
        )

    def injected(entries: object) -> bool:
        return any(isinstance(e, InputEntry) and "<system-reminder>" in e.content for e in entries)  # type: ignore[attr-defined]

    assert not injected(result.entries)
    assert not injected(await store.load_session("s"))
    assert "## Todo list" in model.requests[0].system


async def test_invalid_status_is_an_error_result() -> None:
    model = ScriptedModel(
        [
            [call("todo_add", items=["x"]), call("todo_update", {"id": 1, "status": "finished"})],
            "ok",
        ]
    )
    result = await Runner.run(Agent(name="a", model=model, plugins=[Todo()]), "go")
    assert results(result.entries)[1].is_error


async def test_concurrent_runs_keep_separate_lists() -> None:
    todo = Todo()

    async def one(k: int) -> ScriptedModel:
        model = ScriptedModel(
            [
                call("todo_add", items=[f"task-{k}"]),
                call("todo_list"),
                "done",
            ]
        )
        await Runner.run(Agent(name="a", model=model, plugins=[todo]), "go")
        return model

    models = await asyncio.gather(*(one(k) for k in range(5)))
    for k, model in enumerate(models):
        shown = reminder(model.requests[2]) or ""
        assert f"task-{k}" in shown
        assert all(f"task-{j}" not in shown for j in range(5) if j != k)
        assert "1. " in shown and "2. " not in shown


async def test_a_resumed_run_gets_its_todo_list_back() -> None:
    """The list lives in the run; after a crash it is rebuilt from the transcript."""
    from lovia.errors import ProviderServerError
    from lovia.stores import MemoryStore

    store = MemoryStore()
    crashing = ScriptedModel(
        [
            call("todo_add", items=["write the parser", "test it"]),
            call("todo_update", {"id": 1, "status": "done"}),
            ProviderServerError("upstream 502", status=502),
        ]
    )
    agent = Agent(name="planner", model=crashing, plugins=[Todo()])
    with pytest.raises(ProviderServerError):
        await Runner.run(agent, "plan it", run_id="todo-r1", checkpointer=store)

    fresh = ScriptedModel([call("todo_update", {"id": 2, "status": "in_progress"}), "on it"])
    result = await Runner.run(agent.clone(model=fresh), None, run_id="todo-r1", checkpointer=store)
    first_view = fresh.requests[0].messages[-1]
    assert "[x] 1. write the parser" in first_view.content  # type: ignore[union-attr]
    assert "[ ] 2. test it" in first_view.content  # type: ignore[union-attr]
    last = [e for e in result.entries if e.type == "tool_result"][-1]
    assert "[~] 2. test it" in last.content and "[x] 1." in last.content
    assert result.output == "on it"
