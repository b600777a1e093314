"""Candidate agents for `lovia eval --agent` in the CLI tests."""

from __future__ import annotations

from lovia import Agent
from lovia.testing import FunctionModel, call

from .conftest import lookup


def _same(request, info):  # type: ignore[no-untyped-def]
    steps = [call("lookup", order_id="A0"), call("lookup", order_id="B0"), "Both shipped (0)."]
    return steps[info.index]


def _broken(request, info):  # type: ignore[no-untyped-def]
    if "lookup" not in {t.name for t in request.tools}:
        return "no tools"
    return call("lookup", order_id="A0") if info.index == 0 else "Only A0 shipped."


same = Agent(name="support", instructions="Be brief.", model=FunctionModel(_same), tools=[lookup])
broken = Agent(
    name="support", instructions="Be terse.", model=FunctionModel(_broken), tools=[lookup]
)
