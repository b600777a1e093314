"""A corpus of lives told the same way by every surface: completed, cancelled, failed on a
provider 503, nested (agents as tools), unpriced, and a server that sends no usage.

Each run is made once; then the store, ``lovia runs --json``, the web JSON, the
``invoke_agent`` spans and the metrics are compared field by field: outcome, cost (with
children), unknown cost, unknown tokens, and top-level run counts.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from telemetry_helpers import Otel

from lovia import Agent, LoviaError, RunContext, Runner, tool
from lovia.errors import ProviderServerError
from lovia.stores import store
from lovia.telemetry import attributes as A
from lovia.telemetry import clear_prices, set_price
from lovia.testing import FunctionModel, call, reply
from lovia.usage import Usage


@pytest.fixture
def prices() -> Iterator[None]:
    set_price("fake", "priced", input_per_mtok=3.0, output_per_mtok=15.0)
    yield
    clear_prices()


@tool
def stop(ctx: RunContext) -> str:
    """Stop the run (the user pressed cancel)."""
    ctx.cancel_token.cancel("the user pressed stop")
    return "stopping"


def _agents() -> dict[str, Agent[Any, Any]]:
    def priced(text: str, n: int) -> FunctionModel:
        usage = Usage(input_tokens=100 * n, output_tokens=10 * n)
        return FunctionModel(lambda r, i: reply(text, usage=usage), provider="fake", model="priced")

    helper = Agent(name="helper", model=priced("helped", 2))

    def manager_says(request: Any, info: Any) -> Any:
        usage = Usage(input_tokens=500, output_tokens=40)
        if not any(m.type == "tool_result" for m in request.messages):
            return reply(tool_calls=[call("ask", input="x")], usage=usage)
        return reply("managed", usage=usage)

    def canceller(request: Any, info: Any) -> Any:
        return reply(tool_calls=[call("stop")], usage=Usage(input_tokens=50, output_tokens=5))

    def overloaded(request: Any, info: Any) -> Any:
        return ProviderServerError("503 the server is overloaded", status=503)

    return {
        "done": Agent(name="done", model=priced("ok", 1)),
        "cancelled": Agent(
            name="cancelled",
            model=FunctionModel(canceller, provider="fake", model="priced"),
            tools=[stop],
        ),
        "failed503": Agent(
            name="failed503", model=FunctionModel(overloaded, provider="fake", model="priced")
        ),
        "nested": Agent(
            name="nested",
            model=FunctionModel(manager_says, provider="fake", model="priced"),
            tools=[helper.as_tool(name="ask")],
        ),
        "unpriced": Agent(
            name="unpriced",
            model=FunctionModel(
                lambda r, i: reply("?", usage=Usage(input_tokens=70, output_tokens=7)),
                provider="fake",
                model="no-price",
            ),
        ),
        "nousage": Agent(
            name="nousage",
            model=FunctionModel(
                lambda r, i: reply("hi", usage=Usage(missing=True)), provider="fake", model="priced"
            ),
        ),
    }


async def _live(url: str, otel: Otel) -> None:
    db = store(url)
    try:
        for run_id, agent in _agents().items():
            try:
                await Runner.run(
                    agent, "go", run_id=run_id, checkpointer=db, tracer_provider=otel.tp
                )
            except LoviaError:
                pass  # cancelled and failed lives are part of the corpus
    finally:
        await db.aclose()


def _cli_runs(url: str) -> dict[str, dict[str, Any]]:
    env = {**os.environ, "NO_COLOR": "1"}
    env.pop("LOVIA_STORE", None)
    proc = subprocess.run(
        [sys.executable, "-m", "lovia.cli", "runs", "--json", "--store", url],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return {r["run_id"]: r for r in json.loads(proc.stdout)}


def _outcome(run: dict[str, Any]) -> str:
    if run["status"] == "cancelled" or run["error_type"] == "RunCancelled":
        return "cancelled"
    return str(run["status"])


def test_every_surface_tells_the_same_story(otel: Otel, prices: None, tmp_path: Path) -> None:
    from starlette.testclient import TestClient

    from lovia.web import create_app

    url = f"sqlite:///{tmp_path / 'lives.db'}"
    asyncio.run(_live(url, otel))
    cli = _cli_runs(url)
    with TestClient(create_app(url), base_url="http://127.0.0.1:8765") as client:
        web = {rid: client.get(f"/api/runs/{rid}").json()["run"] for rid in _agents()}
    spans = {
        str((s.attributes or {})[A.RUN_ID]): dict(s.attributes or {})
        for s in otel.spans()
        if s.name.startswith("invoke_agent") and A.RUN_PARENT_ID not in (s.attributes or {})
    }
    assert set(spans) == set(web) == set(_agents())
    assert {rid for rid, r in cli.items() if r["parent_run_id"] is None} == set(web)

    expected_outcomes = {
        "done": "completed",
        "cancelled": "cancelled",
        "failed503": "failed",
        "nested": "completed",
        "unpriced": "completed",
        "nousage": "completed",
    }
    for rid, outcome in expected_outcomes.items():
        run, span = web[rid], spans[rid]
        # the CLI and the web agree on every field both show (the run page also loads the
        # run's records: attempts, approvals, failed calls)
        shared = run.keys() & cli[rid].keys()
        assert {"state", "status", "cost_usd", "unpriced", "usage_missing"} <= shared, rid
        assert {k: run[k] for k in shared} == {k: cli[rid][k] for k in shared}, rid
        assert _outcome(run) == span[A.RUN_OUTCOME] == outcome, rid
        assert span[A.COST_TOTAL_USD] == pytest.approx(run["cost_usd"]), rid
        assert span.get(A.COST_UNPRICED, 0) == run["unpriced"], rid
        assert bool(span.get(A.RUN_USAGE_PREFIX + "missing")) == run["usage_missing"], rid
        assert span[A.RUN_USAGE_PREFIX + "input_tokens"] == run["input_tokens"], rid
    assert web["unpriced"]["unpriced"] == 1 and web["unpriced"]["cost_usd"] == 0.0
    assert web["nousage"]["usage_missing"] and web["nousage"]["unpriced"] == 1
    assert spans["cancelled"][A.ERROR_TYPE] == "RunCancelled"
    nested = spans["nested"]
    assert nested[A.COST_TOTAL_USD] > nested[A.COST_USD] > 0  # the helper's cost is in total

    # metrics: top-level runs by outcome, spend and unknown spend equal the store's
    runs: Counter[tuple[str, str]] = Counter()
    for point in otel.metrics()[A.M_RUNS].data.data_points:
        attrs = dict(point.attributes)
        if A.AGENT_NAME in attrs and not attrs[A.RUN_NESTED]:
            runs[(attrs[A.AGENT_NAME], attrs[A.RUN_OUTCOME])] += point.value
    assert runs == Counter(dict.fromkeys(expected_outcomes.items(), 1))
    cost: Counter[str] = Counter()
    for point in otel.metrics()[A.M_COST].data.data_points:
        cost[dict(point.attributes)[A.AGENT_NAME]] += point.value
    for rid, run in web.items():
        assert cost.get(rid, 0.0) == pytest.approx(run["cost_usd"]), rid
    unpriced = sum(p.value for p in otel.metrics()[A.M_COST_UNPRICED].data.data_points)
    assert unpriced == sum(r["unpriced"] for r in web.values()) == 2
    durations = otel.metrics()[A.M_OPERATION_DURATION].data.data_points
    errors = {dict(p.attributes).get(A.ERROR_TYPE) for p in durations} - {None}
    assert errors == {"ProviderServerError"}  # the 503 is a model-call error; cancel is not
