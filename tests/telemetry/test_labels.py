"""Attribution labels on spans and spend metrics, with a cardinality cap; a child run
carries its parent's labels; hostile labels are refused before anything runs."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from telemetry_helpers import Otel

from lovia import Agent, Runner, UserError, labels
from lovia.labels import OTHER, LabelCap
from lovia.telemetry import attributes as A
from lovia.telemetry import clear_prices, set_price
from lovia.testing import FunctionModel, ScriptedModel, call, reply
from lovia.usage import Usage


@pytest.fixture(autouse=True)
def _priced(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    set_price("test", "lab", input_per_mtok=1.0, output_per_mtok=1.0)
    monkeypatch.setattr(labels, "_cap", LabelCap(limit=2))  # a fresh cap of 2 per key
    yield
    clear_prices()


def _agent() -> Agent[Any, Any]:
    return Agent(
        name="a",
        model=FunctionModel(lambda r, i: reply("ok", usage=Usage(input_tokens=10)), model="lab"),
    )


def _cost_points(otel: Otel) -> dict[str, float]:
    points = otel.metrics()[A.M_COST].data.data_points
    return {str(p.attributes.get("lovia.label.tenant")): p.value for p in points}


async def test_labels_land_on_the_run_span_and_the_cost_metric(otel: Otel) -> None:
    run = {"tenant": "acme", "user": "u-1"}
    await Runner.run(_agent(), "go", labels=run, tracer_provider=otel.tp, meter_provider=otel.mp)
    tree = otel.tree(keep=("lovia.label.tenant", "lovia.label.user"))
    assert tree == [
        {
            "name": "invoke_agent a",
            "attrs": {"lovia.label.tenant": "acme", "lovia.label.user": "u-1"},
            "children": [
                {
                    "name": "lovia.turn",
                    "children": [{"name": "lovia.view"}, {"name": "chat lab", "kind": "CLIENT"}],
                }
            ],
        }
    ]
    (point,) = otel.metrics()[A.M_COST].data.data_points
    assert point.attributes["lovia.label.tenant"] == "acme"
    assert point.attributes["lovia.label.user"] == "u-1"
    assert point.value == pytest.approx(10 / 1e6)


async def test_values_past_the_cap_are_counted_as_other(otel: Otel) -> None:
    for tenant in ("t1", "t2", "t3", "t4", "t1"):
        await Runner.run(
            _agent(), "go", labels={"tenant": tenant}, tracer_provider=otel.tp,
            meter_provider=otel.mp,
        )  # fmt: skip
    costs = _cost_points(otel)
    assert set(costs) == {"t1", "t2", OTHER}  # first two kept, the rest folded
    assert costs["t1"] == pytest.approx(2 * 10 / 1e6)
    assert costs[OTHER] == pytest.approx(2 * 10 / 1e6)
    runs = [s for s in otel.spans() if s.name.startswith("invoke_agent")]
    assert (runs[2].attributes or {})["lovia.label.tenant"] == "t3"  # spans keep the value


async def test_a_child_run_carries_its_parents_labels(otel: Otel) -> None:
    helper = Agent(name="helper", model=ScriptedModel(["42"]))
    steps = [call("helper", input="q", id="c1"), "done"]
    boss = Agent(name="boss", model=ScriptedModel(steps), tools=[helper.as_tool()])
    await Runner.run(boss, "go", labels={"tenant": "acme"}, tracer_provider=otel.tp)
    runs = {
        s.name: (s.attributes or {}).get("lovia.label.tenant")
        for s in otel.spans()
        if s.name.startswith("invoke_agent")
    }
    assert runs == {"invoke_agent boss": "acme", "invoke_agent helper": "acme"}


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ({"Tenant": "x"}, "label key 'Tenant'"),
        ({"tenant": ""}, "is empty"),
        ({"tenant": "a\x00b"}, "control character"),
        ({"tenant": "a\u202eb"}, "control character"),
        ({"tenant": "x" * 129}, "129 characters long (at most 128; never truncated)"),
        ({"tenant": "\ud800"}, "lone surrogate"),
        ({"tenant": 7}, "is a int, not a str"),
        ({f"k{i}": "v" for i in range(9)}, "9 labels (at most 8)"),
    ],
)
def test_hostile_labels_are_refused_before_the_run(given: Any, said: str) -> None:
    model = ScriptedModel([])  # never called
    with pytest.raises(UserError, match="label") as caught:
        Runner.stream(Agent(name="a", model=model), "go", labels=given)
    assert said in caught.value.message
    assert caught.value.hint
