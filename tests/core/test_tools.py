from __future__ import annotations

import asyncio
import json

import pytest
from pydantic import BaseModel

from lovia import Agent, RunContext, Runner, ToolError, UserError, tool
from lovia.testing import ScriptedModel, call
from lovia.tools._docstring import parse_docstring


def test_schema_from_signature_and_google_docstring() -> None:
    @tool
    def search(query: str, limit: int = 5, *, exact: bool = False) -> list[str]:
        """Search the catalogue.

        Args:
            query: Words to look for.
            limit: How many results
                at most.
            exact: Match the whole phrase.
        """
        return []

    props = search.parameters["properties"]
    assert search.description == "Search the catalogue."
    assert props["query"] == {"type": "string", "description": "Words to look for."}
    assert props["limit"]["default"] == 5
    assert props["limit"]["description"] == "How many results at most."
    assert search.parameters["required"] == ["query"]
    assert search.parameters["additionalProperties"] is False


def test_numpy_and_sphinx_docstrings() -> None:
    numpy_doc = """Do it.

    Parameters
    ----------
    x : int
        The x value.
    y : str
        The y.
    """
    desc, params = parse_docstring(numpy_doc)
    assert desc == "Do it." and params == {"x": "The x value.", "y": "The y."}
    desc, params = parse_docstring("Do it.\n\n:param x: The x.\n:param str y: The y.\n:returns: z")
    assert desc == "Do it." and params == {"x": "The x.", "y": "The y."}


def test_context_param_any_name_is_injected_not_in_schema() -> None:
    @tool
    async def f(whatever: RunContext[int], a: int) -> int:
        return whatever.deps + a

    assert f.ctx_param == "whatever"
    assert list(f.parameters["properties"]) == ["a"]


def test_bad_tools_are_user_errors() -> None:
    with pytest.raises(UserError, match=r"positional-only|args"):

        @tool
        def g(*args: int) -> None: ...

    with pytest.raises(UserError, match="invalid tool name"):
        tool(name="bad name!")(lambda: None)


class Point(BaseModel):
    x: int
    y: int


async def test_validation_errors_and_unknown_tools_go_back_to_the_model() -> None:
    @tool
    def dist(p: Point) -> float:
        """Distance from origin."""
        return (p.x**2 + p.y**2) ** 0.5

    model = ScriptedModel(
        [
            [call("dist", p={"x": 3}), call("nope"), call("dist", p={"x": 3, "y": 4})],
            "done",
        ]
    )
    result = await Runner.run(Agent(name="a", model=model, tools=[dist]), "go")
    results = [e for e in result.entries if e.type == "tool_result"]
    assert results[0].is_error and "p.y" in results[0].content
    assert results[1].is_error and "Unknown tool 'nope'" in results[1].content
    assert not results[2].is_error and json.loads(results[2].content) == 5.0
    assert result.output == "done"


async def test_tool_exception_becomes_error_result_and_run_continues() -> None:
    @tool
    def boom() -> str:
        raise ValueError("kaputt")

    @tool
    def chosen() -> str:
        raise ToolError("try another id")

    model = ScriptedModel([[call("boom"), call("chosen")], "recovered"])
    result = await Runner.run(Agent(name="a", model=model, tools=[boom, chosen]), "go")
    errs = [e for e in result.entries if e.type == "tool_result"]
    assert all(e.is_error for e in errs)
    assert "ValueError: kaputt" in errs[0].content
    assert errs[1].content == "try another id"
    assert result.output == "recovered"


async def test_timeout_and_retries() -> None:
    attempts = []

    @tool(timeout=0.05)
    async def slow() -> str:
        await asyncio.sleep(5)
        return "never"

    @tool(retries=2)
    def flaky() -> str:
        attempts.append(1)
        if len(attempts) < 3:
            raise RuntimeError("flake")
        return "ok"

    model = ScriptedModel([[call("slow"), call("flaky")], "done"])
    result = await Runner.run(Agent(name="a", model=model, tools=[slow, flaky]), "go")
    slow_r, flaky_r = [e for e in result.entries if e.type == "tool_result"]
    assert slow_r.is_error and "timed out" in slow_r.content
    assert flaky_r.content == "ok" and len(attempts) == 3


async def test_parallel_safe_tools_run_concurrently_results_paired_by_id() -> None:
    running = 0
    peak = 0

    @tool(concurrency_safe=True)
    async def wait(ms: int) -> int:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(ms / 1000)
        running -= 1
        return ms

    model = ScriptedModel([[call("wait", ms=60, id="a"), call("wait", ms=10, id="b")], "ok"])
    result = await Runner.run(Agent(name="a", model=model, tools=[wait]), "go")
    res = [e for e in result.entries if e.type == "tool_result"]
    assert peak == 2
    assert [(r.call_id, r.content) for r in res] == [("b", "10"), ("a", "60")]  # completion order


async def test_unsafe_tools_run_one_at_a_time_in_request_order() -> None:
    order: list[str] = []
    running = 0
    peak = 0

    @tool
    async def step(name: str) -> str:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.01)
        order.append(name)
        running -= 1
        return name

    model = ScriptedModel(
        [[call("step", name="1"), call("step", name="2"), call("step", name="3")], "ok"]
    )
    await Runner.run(Agent(name="a", model=model, tools=[step]), "go")
    assert order == ["1", "2", "3"] and peak == 1


async def test_idempotency_key_visible_to_tools() -> None:
    seen: list[str | None] = []

    @tool
    def keyed(ctx: RunContext[None]) -> str:
        seen.append(ctx.idempotency_key)
        return "ok"

    model = ScriptedModel([call("keyed", id="c1"), "done"])
    result = await Runner.run(Agent(name="a", model=model, tools=[keyed]), "go", run_id="r1")
    assert seen == ["r1:c1"] and result.run_id == "r1"


async def test_odd_return_values_become_clear_results() -> None:
    @tool
    def raw() -> bytes:
        """Binary data."""
        return b"\xff\xfe\x00ok"

    @tool
    def text_bytes() -> bytes:
        """UTF-8 bytes."""
        return "héllo".encode()

    @tool
    def cyclic() -> dict:  # type: ignore[type-arg]
        """A cyclic structure."""
        d: dict = {}  # type: ignore[type-arg]
        d["self"] = d
        return d

    model = ScriptedModel([[call("raw"), call("text_bytes"), call("cyclic")], "ok"])
    result = await Runner.run(Agent(name="a", model=model, tools=[raw, text_bytes, cyclic]), "go")
    raw_r, text_r, cyc_r = [e for e in result.entries if e.type == "tool_result"]
    assert not raw_r.is_error and raw_r.content.startswith("[5 bytes of binary data")
    assert "//4Ab2s=" in raw_r.content  # base64 of the bytes: nothing lost
    assert not text_r.is_error and text_r.content == "héllo"
    assert cyc_r.is_error and "cannot be sent to the model" in cyc_r.content
    assert result.output == "ok"


async def test_repeated_or_empty_call_ids_are_made_unique() -> None:
    """Some servers send `call_0` every turn, or no id: pairing and the ledger need unique ids."""
    seen: list[int] = []

    @tool
    def step(n: int) -> str:
        """A step."""
        seen.append(n)
        return f"done {n}"

    model = ScriptedModel(
        [
            call("step", n=1, id="call_0"),
            [call("step", n=2, id="call_0"), call("step", n=3, id="")],
            "finished",
        ]
    )
    result = await Runner.run(Agent(name="a", model=model, tools=[step]), "go")
    calls = [e.call_id for e in result.entries if e.type == "tool_call"]
    results = [e.call_id for e in result.entries if e.type == "tool_result"]
    assert len(set(calls)) == 3 and calls[0] == "call_0"
    assert sorted(calls) == sorted(results)  # every call paired with its own result
    assert seen == [1, 2, 3]  # none skipped as "already completed"
    assert result.output == "finished"
