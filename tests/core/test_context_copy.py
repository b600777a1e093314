"""RunContext.for_call copies field by field (hot path): every field, subclasses too."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from lovia import Agent
from lovia.context import RunContext
from lovia.tools.tool import serialize_result
from lovia.transcript import ToolCallEntry


def _ctx(cls: type[RunContext[Any]] = RunContext, **extra: Any) -> RunContext[Any]:
    return cls(
        deps={"d": 1},
        agent=Agent(name="a"),
        run_id="r1",
        session_id="s1",
        workspace=object(),
        turn=4,
        **extra,
    )


def test_for_call_copies_every_field_and_sets_only_the_call() -> None:
    ctx = _ctx()
    call = ToolCallEntry(call_id="c1", name="t")
    sub = ctx.for_call(call)
    assert sub is not ctx and type(sub) is RunContext
    assert sub.tool_call is call and ctx.tool_call is None
    for f in fields(RunContext):
        if f.name != "tool_call":
            assert getattr(sub, f.name) is getattr(ctx, f.name), f.name  # shared, not copied
    sub.turn = 9
    assert ctx.turn == 4


@dataclass(slots=True, kw_only=True)
class _Mine(RunContext[Any]):
    note: str = ""


def test_for_call_keeps_a_subclass_and_its_own_fields() -> None:
    ctx = _ctx(_Mine, note="kept")
    sub = ctx.for_call(ToolCallEntry(call_id="c2", name="t"))
    assert type(sub) is _Mine and sub.note == "kept"  # pyright: ignore[reportAttributeAccessIssue] -- the subclass's own field, checked by type above


def test_int_results_read_as_json_numbers() -> None:
    assert [serialize_result(v) for v in (0, -5, 10**30, True)] == ["0", "-5", str(10**30), "true"]
