"""Child run ids and idempotency keys: derived from an unambiguous encoding of the
parent run id and the call id, so two different (parent, call) pairs never share a
child run (and its stored answer), while the same pair always finds its own again."""

from __future__ import annotations

from typing import Any

from lovia import Agent, Runner, events, tool
from lovia.agent_tool import child_run_id
from lovia.context import RunContext, call_key
from lovia.model import ModelRequest
from lovia.stores.memory import MemoryStore
from lovia.testing import FunctionModel, ScriptedModel, call
from lovia.testing._models import CallInfo


def _echo(request: ModelRequest, info: CallInfo) -> str:
    return f"answer to: {request.messages[-1].content}"


def _boss(question: str, call_id: str, advisor: Agent[Any, Any]) -> Agent[Any, Any]:
    steps = [call("advisor", input=question, id=call_id), "done"]
    return Agent(name="boss", model=ScriptedModel(steps), tools=[advisor.as_tool()])


def test_the_key_is_unambiguous_and_keeps_plain_ids_readable() -> None:
    assert call_key("a:b", "c") != call_key("a", "b:c")
    assert child_run_id("a:b", "c") != child_run_id("a", "b:c")
    assert call_key("a%3Ab", "c") != call_key("a:b", "c")  # the escape is escaped too
    assert call_key("3f2a9c", "call_1") == "3f2a9c:call_1"
    assert child_run_id("p", "c1") == child_run_id("p", "c1")  # deterministic: resume finds it
    pairs = [("a:b", "c"), ("a", "b:c"), ("a%3Ab", "c"), ("a", "b%3Ac"), ("a:", "b:c")]
    assert len({call_key(*p) for p in pairs}) == len({child_run_id(*p) for p in pairs}) == 5


async def test_a_second_parent_gets_its_own_answer_not_the_first_tenants() -> None:
    db = MemoryStore()
    advisor = Agent(name="advisor", model=FunctionModel(_echo))
    outputs: dict[str, str] = {}
    for parent, call_id, question in (
        ("a:b", "c", "SECRET question of tenant a:b"),
        ("a", "b:c", "question of tenant a"),
    ):
        stream = Runner.stream(
            _boss(question, call_id, advisor), "go", run_id=parent, checkpointer=db
        )
        seen = [e async for e in stream]
        await stream.result()
        done = next(e for e in seen if isinstance(e, events.ToolCallCompleted))
        outputs[parent] = done.result.content
    assert outputs == {
        "a:b": "answer to: SECRET question of tenant a:b",
        "a": "answer to: question of tenant a",
    }
    first = await db.load(child_run_id("a:b", "c"))
    second = await db.load(child_run_id("a", "b:c"))
    assert first is not None and second is not None
    assert (first.info.parent_run_id, second.info.parent_run_id) == ("a:b", "a")


async def test_tools_see_the_same_unambiguous_key() -> None:
    seen: list[str | None] = []

    @tool
    def charge(ctx: RunContext[Any]) -> str:
        """Charge."""
        seen.append(ctx.idempotency_key)
        return "ok"

    for run_id, call_id in (("a:b", "c"), ("a", "b:c")):
        agent = Agent(
            name="payer", model=ScriptedModel([call("charge", id=call_id), "ok"]), tools=[charge]
        )
        await Runner.run(agent, "pay", run_id=run_id)
    assert seen == ["a%3Ab:c", "a:b:c"]
