"""The edges of a run's life in spans and metrics: cancelled is not failed, child runs
are labelled and counted once, unknown cost is not zero, recovered tool calls are not
executions, and lovia.runs exists before any run ends."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from telemetry_helpers import Otel

from lovia import Agent, CancelToken, Runner, tool
from lovia.errors import RunCancelled
from lovia.stores import MemoryStore
from lovia.telemetry import attributes as A
from lovia.telemetry import clear_prices, set_price
from lovia.testing import FunctionModel, ScriptedModel, call, reply
from lovia.usage import Usage


@pytest.fixture
def prices() -> Iterator[None]:
    set_price("fake", "boss", input_per_mtok=2.0, output_per_mtok=8.0)
    set_price("fake", "aide", input_per_mtok=1.0, output_per_mtok=4.0)
    yield
    clear_prices()


def _points(otel: Otel, name: str) -> list[tuple[dict[str, Any], float]]:
    metric = otel.metrics().get(name)
    if metric is None:
        return []
    return [
        (dict(p.attributes), p.value if hasattr(p, "value") else p.count)
        for p in metric.data.data_points
    ]


def _attrs(otel: Otel, prefix: str) -> list[dict[str, Any]]:
    return [dict(s.attributes or {}) for s in otel.spans() if s.name.startswith(prefix)]


# -- cancelled ---------------------------------------------------------------------------


async def test_a_cancelled_run_is_cancelled_not_failed(otel: Otel) -> None:
    token = CancelToken()

    def stall(request: Any, info: Any) -> Any:
        token.cancel("the user pressed stop")
        return reply("never", delay=10)

    agent = Agent(name="stopped", model=FunctionModel(stall, provider="fake", model="boss"))
    with pytest.raises(RunCancelled):
        await Runner.run(agent, "go", cancel_token=token, tracer_provider=otel.tp)
    (run,) = _attrs(otel, "invoke_agent")
    assert run[A.RUN_OUTCOME] == "cancelled"
    assert run[A.ERROR_TYPE] == "RunCancelled"  # kept for dashboards that want it
    runs = [(a, v) for a, v in _points(otel, A.M_RUNS) if a.get(A.AGENT_NAME) == "stopped"]
    assert runs == [
        (
            {
                A.AGENT_NAME: "stopped",
                A.RUN_OUTCOME: "cancelled",
                A.RUN_FINISH_REASON: "cancelled",
                A.ERROR_TYPE: "RunCancelled",
                A.RUN_NESTED: False,
            },
            1,
        )
    ]
    # the cut-off model call is no model-call error and no latency
    (chat,) = _attrs(otel, "chat")
    assert chat[A.ERROR_TYPE] == "RunCancelled"
    assert _points(otel, A.M_OPERATION_DURATION) == []


async def test_a_failed_model_call_still_records_its_duration(otel: Otel) -> None:
    from lovia.errors import ProviderError

    def broken(request: Any, info: Any) -> Any:
        return ProviderError("upstream 503", status=503)

    agent = Agent(name="broken", model=FunctionModel(broken, provider="fake", model="boss"))
    with pytest.raises(ProviderError):
        await Runner.run(agent, "go", tracer_provider=otel.tp)
    durations = _points(otel, A.M_OPERATION_DURATION)
    assert [a[A.ERROR_TYPE] for a, _ in durations] == ["ProviderError"]
    (run,) = _attrs(otel, "invoke_agent")
    assert run[A.RUN_OUTCOME] == "failed"


# -- nested runs -------------------------------------------------------------------------


def _boss_and_aide(aide_model: str = "aide") -> Agent[Any, Any]:
    def aide_says(request: Any, info: Any) -> Any:
        return reply("noted", usage=Usage(input_tokens=400, output_tokens=50))

    aide = Agent(name="aide", model=FunctionModel(aide_says, provider="fake", model=aide_model))

    def boss_says(request: Any, info: Any) -> Any:
        if not any(m.type == "tool_result" for m in request.messages):
            calls = [call("ask_aide", input="x", id="c1"), call("ask_aide", input="y", id="c2")]
            return reply(tool_calls=calls, usage=Usage(input_tokens=1000, output_tokens=100))
        return reply("done", usage=Usage(input_tokens=1500, output_tokens=120))

    return Agent(
        name="boss",
        model=FunctionModel(boss_says, provider="fake", model="boss"),
        tools=[aide.as_tool(name="ask_aide")],
    )


async def test_nested_runs_cost_once_on_spans_and_metrics(otel: Otel, prices: None) -> None:
    result = await Runner.run(_boss_and_aide(), "go", tracer_provider=otel.tp)
    boss_own = (2500 * 2.0 + 220 * 8.0) / 1e6
    aide_each = (400 * 1.0 + 50 * 4.0) / 1e6
    assert result.usage.cost_usd == pytest.approx(boss_own + 2 * aide_each)

    runs = {s.name: dict(s.attributes or {}) for s in otel.spans() if s.name == "invoke_agent boss"}
    boss = runs["invoke_agent boss"]
    aides = _attrs(otel, "invoke_agent aide")
    assert boss[A.COST_USD] == pytest.approx(boss_own)  # its own calls only
    assert boss[A.COST_TOTAL_USD] == pytest.approx(result.usage.cost_usd)  # with children
    assert [a[A.COST_USD] for a in aides] == pytest.approx([aide_each, aide_each])
    # one rule that cannot double count: own costs over every run span = the chat spans
    own = sum(a[A.COST_USD] for a in [boss, *aides])
    chats = sum(a[A.COST_USD] for a in _attrs(otel, "chat"))
    assert own == pytest.approx(chats) == pytest.approx(result.usage.cost_usd)

    # metrics: every run-level series says nested or not; a child's spend is its root's
    runs_metric = _points(otel, A.M_RUNS)
    nested = {a[A.AGENT_NAME]: a[A.RUN_NESTED] for a, _ in runs_metric if A.AGENT_NAME in a}
    assert nested == {"boss": False, "aide": True}
    for name in (A.M_TURNS, A.M_AGENT_DURATION):
        assert {a[A.RUN_NESTED] for a, _ in _points(otel, name)} == {False, True}
    spend = {(a[A.AGENT_NAME], a[A.RUN_NESTED]): v for a, v in _points(otel, A.M_COST)}
    assert spend.keys() == {("boss", False), ("boss", True)}
    assert spend[("boss", True)] == pytest.approx(2 * aide_each)
    assert sum(spend.values()) == pytest.approx(result.usage.cost_usd)
    top_runs = sum(v for a, v in runs_metric if a.get(A.AGENT_NAME) and not a[A.RUN_NESTED])
    assert top_runs == 1


# -- unknown is not zero -----------------------------------------------------------------


async def test_unpriced_calls_are_counted_not_priced_at_zero(otel: Otel, prices: None) -> None:
    store = MemoryStore()
    result = await Runner.run(
        _boss_and_aide("no-price"), "go", run_id="u1", checkpointer=store, tracer_provider=otel.tp
    )
    assert result.usage.unpriced == 2  # the two aide calls
    chats = _attrs(otel, "chat")
    unpriced = [c for c in chats if c.get(A.COST_UNPRICED)]
    assert len(unpriced) == 2 and all(A.COST_USD not in c for c in unpriced)
    assert all(A.COST_UNPRICED not in c for c in chats if c[A.REQUEST_MODEL] == "boss")
    (boss,) = _attrs(otel, "invoke_agent boss")
    assert boss[A.COST_UNPRICED] == 2
    counted = {
        (a[A.AGENT_NAME], a[A.REQUEST_MODEL], a[A.RUN_NESTED]): v
        for a, v in _points(otel, A.M_COST_UNPRICED)
    }
    assert counted == {("boss", "no-price", True): 2}
    info = (await store.load("u1")).info  # type: ignore[union-attr]
    assert info.extra["unpriced"] == 2


async def test_a_run_without_usage_says_so(otel: Otel) -> None:
    def silent(request: Any, info: Any) -> Any:
        return reply("hi", usage=Usage(missing=True))

    store = MemoryStore()
    agent = Agent(name="quiet", model=FunctionModel(silent, provider="fake", model="boss"))
    result = await Runner.run(agent, "go", run_id="q1", checkpointer=store, tracer_provider=otel.tp)
    assert result.usage.missing and result.usage.unpriced == 1
    info = (await store.load("q1")).info  # type: ignore[union-attr]
    assert info.extra["usage_missing"] is True and info.extra["unpriced"] == 1
    (chat,) = _attrs(otel, "chat")
    assert A.USAGE_INPUT not in chat and A.COST_USD not in chat
    assert chat[A.COST_UNPRICED] == 1


# -- recovered, not executed -------------------------------------------------------------


async def test_a_recovered_call_is_marked_and_not_counted_as_executed(otel: Otel) -> None:
    """A crash while a non-idempotent tool ran: the resumed run answers it from the
    ledger (outcome unknown) without running it; its span and metrics say so."""
    store = MemoryStore()
    ran: list[str] = []
    crash = asyncio.Event()

    @tool
    async def charge(amount: int) -> str:
        """Charge a card (not idempotent)."""
        ran.append(f"charge {amount}")
        if not crash.is_set():
            crash.set()
            raise asyncio.CancelledError  # the worker dies mid-call
        return "charged"

    model = ScriptedModel([call("charge", amount=5, id="c1"), "ok"])
    agent = Agent(name="payer", model=model, tools=[charge])
    with pytest.raises(BaseException):  # noqa: B017 - the simulated crash
        await Runner.run(agent, "pay", run_id="p1", checkpointer=store, tracer_provider=otel.tp)
    otel.exporter.clear()
    result = await Runner.run(agent, None, run_id="p1", checkpointer=store, tracer_provider=otel.tp)
    assert ran == ["charge 5"]  # not run again
    assert "unknown" in next(e.content for e in result.entries if e.type == "tool_result")
    (span,) = _attrs(otel, "execute_tool")
    assert span[A.TOOL_RECOVERED] is True and span[A.TOOL_OUTCOME] == "unknown"
    recovered = _points(otel, A.M_TOOL_RECOVERED)
    assert [(a[A.TOOL_NAME], a[A.TOOL_OUTCOME], v) for a, v in recovered] == [
        ("charge", "unknown", 1)
    ]
    calls = [v for a, v in _points(otel, A.M_TOOL_CALLS) if a[A.TOOL_NAME] == "charge"]
    assert calls == []  # the first attempt died before counting; the second ran nothing


# -- metrics exist from the start ---------------------------------------------------------


def test_configure_serves_lovia_runs_at_zero_before_any_run() -> None:
    """An idle deploy exports lovia_runs_total (0) from configure on, so the
    LoviaRunsMetricAbsent alert means a broken pipeline, not a quiet hour."""
    import urllib.request

    from lovia.telemetry import configure

    handle = configure(exporter="none", metrics="prometheus", prometheus_port=0, set_global=False)
    try:
        port = handle.prometheus_server.server_port
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
            text = resp.read().decode()
    finally:
        handle.shutdown()
    (runs,) = [line for line in text.splitlines() if line.startswith("lovia_runs_total{")]
    assert runs.startswith(
        'lovia_runs_total{lovia_run_nested="false",lovia_run_outcome="completed"'
    )
    assert runs.endswith("} 0.0")
