"""Structured output: native JSON schema vs prompted contract, repair turns, failures."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import BaseModel
from typing_extensions import TypedDict

from lovia import Agent, ModelProfile, OutputValidationError, UserError, events
from lovia.testing import ScriptedModel

from .helpers import Scenario, both


class Weather(BaseModel):
    city: str
    celsius: float


@dataclass
class Point:
    x: int
    y: int


class Person(TypedDict):
    name: str
    age: int


class Cat(BaseModel):
    meow: str


class Dog(BaseModel):
    woof: str


CASES: list[tuple[str, Any, str, Any]] = [
    ("pydantic", Weather, '{"city": "Oslo", "celsius": 3.5}', Weather(city="Oslo", celsius=3.5)),
    ("dataclass", Point, '{"x": 1, "y": 2}', Point(1, 2)),
    ("typeddict", Person, '{"name": "Ann", "age": 41}', {"name": "Ann", "age": 41}),
    ("union", Cat | Dog, '{"result": {"woof": "wuf"}}', Dog(woof="wuf")),
    ("int", int, '{"result": 42}', 42),
    ("list", list[int], '{"result": [1, 2, 3]}', [1, 2, 3]),
]


def scenario(
    output_type: Any, steps: list[Any], *, native: bool = False, repairs: int = 1
) -> Scenario:
    model = ScriptedModel(steps, profile=ModelProfile(native_json_schema=native))
    agent = Agent(
        name="extractor",
        instructions="Extract the data.",
        model=model,
        output_type=output_type,
        output_repairs=repairs,
    )
    return Scenario(agent, "the input", extra=model)


@pytest.mark.parametrize("native", [True, False], ids=["native", "prompted"])
@pytest.mark.parametrize(
    ("kind", "output_type", "answer", "expected"), CASES, ids=[c[0] for c in CASES]
)
async def test_output_types(
    kind: str, output_type: Any, answer: str, expected: Any, native: bool
) -> None:
    a, b = await both(lambda: scenario(output_type, [answer], native=native))
    for out in (a, b):
        assert out.result is not None
        assert out.result.output == expected
        assert type(out.result.output) is type(expected)
        assert out.result.turns == 1
        request = out.scenario.extra.requests[0]
        if native:
            assert request.output_schema is not None
            assert "JSON Schema" not in request.system
            schema = dict(request.output_schema.schema)
            assert schema["type"] == "object"
        else:
            assert request.output_schema is None
            assert "JSON Schema" in request.system
            assert request.system.startswith("Extract the data.")
        completed = out.of(events.RunCompleted)[0]
        assert completed.output == expected


def test_contract_carries_the_schema() -> None:
    from lovia.output import output_mode

    mode = output_mode(Weather, native=False)
    contract = mode.contract()
    assert contract is not None
    schema = json.loads(contract.split("\n", 1)[1])
    assert schema["properties"]["city"]["type"] == "string"
    assert output_mode(Weather, native=True).contract() is None
    wrapped = output_mode(list[int], native=False)
    assert wrapped.schema is not None and wrapped.schema.schema["required"] == ["result"]


@pytest.mark.parametrize(
    "answer",
    [
        '```json\n{"city": "Oslo", "celsius": 3}\n```',
        '```\n{"city": "Oslo", "celsius": 3}\n```',
        '  {"city": "Oslo", "celsius": 3}\n',
    ],
)
async def test_code_fences_tolerated(answer: str) -> None:
    a, _ = await both(lambda: scenario(Weather, [answer]))
    assert a.result is not None and a.result.output == Weather(city="Oslo", celsius=3)


async def test_repair_turn_fixes_invalid_output() -> None:
    a, b = await both(
        lambda: scenario(
            Weather, ['{"city": "Oslo", "celsius": "warm"}', '{"city": "Oslo", "celsius": 3}']
        )
    )
    for out in (a, b):
        assert out.result is not None
        assert out.result.output == Weather(city="Oslo", celsius=3)
        assert out.result.turns == 2
        model = out.scenario.extra
        assert len(model.requests) == 2
        repair = model.requests[1].messages[-1]
        assert repair.type == "input" and repair.origin == "repair"
        assert "celsius" in repair.content and "valid number" in repair.content
        # the repair request is recorded in the transcript, after the bad answer
        kinds = [(e.type, getattr(e, "origin", None)) for e in out.result.entries]
        assert kinds[-3:] == [("text", None), ("input", "repair"), ("text", None)]
        assert out.types.count("TurnStarted") == 2


async def test_second_failure_raises_output_validation_error() -> None:
    a, b = await both(lambda: scenario(Weather, ["not json", '{"city": 1}']))
    for out in (a, b):
        err = out.error
        assert isinstance(err, OutputValidationError)
        assert err.raw == '{"city": 1}'
        assert "city" in str(err.errors) and "celsius" in str(err.errors)
        assert err.turn == 2 and err.run_id
        assert len(out.scenario.extra.requests) == 2
    failed = b.of(events.RunFailed)[0]
    assert failed.error_type == "OutputValidationError"


async def test_no_repairs_fails_at_once() -> None:
    a, b = await both(lambda: scenario(int, ['{"result": "many"}'], repairs=0))
    for out in (a, b):
        assert isinstance(out.error, OutputValidationError)
        assert out.error.raw == '{"result": "many"}'
        assert len(out.scenario.extra.requests) == 1


async def test_wrapped_output_without_result_key_is_repaired() -> None:
    a, _ = await both(lambda: scenario(list[int], ["[1, 2]", '{"result": [1, 2]}']))
    assert a.result is not None and a.result.output == [1, 2]
    assert '"result"' in a.scenario.extra.requests[1].messages[-1].content


async def test_text_output_is_the_default() -> None:
    a, _ = await both(lambda: scenario(str, ["just text"]))
    assert a.result is not None and a.result.output == "just text"
    request = a.scenario.extra.requests[0]
    assert request.output_schema is None and request.system == "Extract the data."


def test_type_without_schema_is_a_user_error() -> None:
    from lovia.output import output_mode

    with pytest.raises(UserError):
        output_mode(object(), native=False)
