"""Synthetic lovia workload exposing metrics on a Prometheus scrape endpoint.

Run as a separate process by ``test_prometheus_live.py``::

    python tests/ops/workload.py --port 9464

``LOVIA_OPS_WORKLOAD`` selects the source of the telemetry:

* ``lovia`` (default): run scripted lovia agents with lovia's own telemetry
  (``emit_with_lovia``): what the dashboards see is what lovia really emits.
* ``sdk``: emit the same metric contract with the OpenTelemetry SDK directly
  (``emit_with_sdk``), a reference for the contract itself.

The workload keeps emitting until it is terminated. 20 % of runs fail (a few others
pause for approval), so every SLO burn-rate alert (thresholds 14.4 %, 6 %, 3 % and 1 %
at a 99 % objective) fires against it; runs also produce tool calls, tool errors,
provider retries, compactions, cost and tokens. Every completed run is scored by two
evaluators (online evaluation: ``lovia.eval.results`` and ``lovia.eval.score``).

The ``lovia`` workload also feeds a lovia Redis Streams queue (``REDIS_URL``, a stream of
its own) that a ``lovia.workers.Worker`` in the same process executes: one task a second
(slow runs, so the worker is busy at every scrape), every ``DEAD_LETTER_EVERY``-th naming
an agent no worker runs (dead-lettered), so the queue metrics (deliveries, dead letters,
runs in flight, depth) come from real deliveries. At start it reprices one run priced
after the fact, so ``lovia.cost.correction`` has a series too.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import secrets
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass

from opentelemetry.metrics import (
    CallbackOptions,
    Counter,
    Histogram,
    Meter,
    Observation,
    UpDownCounter,
)

AGENTS = ("triage", "researcher")
HELPER = "helper"  # the child agent both use as a tool (lovia workload)
MODELS = (("openai", "gpt-4o-mini"), ("anthropic", "claude-sonnet-4"))
TOOLS = ("search", "fetch_url")
FAILURES = (("ProviderError", "error"), ("MaxTurnsExceeded", "max_turns"))
TOKEN_BUCKETS = tuple(float(4**i) for i in range(14))  # 1 .. 67108864
CLIENT_BUCKETS = tuple(0.01 * 2**i for i in range(14))  # 0.01 .. 81.92
AGENT_BUCKETS = tuple(0.1 * 2**i for i in range(13))  # 0.1 .. 409.6
TURN_BUCKETS = tuple(float(2**i) for i in range(10))  # 1 .. 512
FAILURE_EVERY = 5  # one run in five fails -> failure ratio 0.2
EVALUATORS = ("exact_match", "judge")
SCORE_BUCKETS = (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0)
REDIS_URL = os.environ.get("LOVIA_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
QUEUE_TASK_EVERY_S = 1.0  # one queued task a second; a run makes three model calls ...
SLOW_MODEL_S = 1.0  # ... this slow: 3 s, longer than the 2 s between runs around a dead
# letter, so a run is in flight at every scrape (two or three at once)
DEAD_LETTER_EVERY = 4  # every 4th task names an agent the worker does not run
RETIRED_AGENT = "retired-agent"
QUEUE_EVERY = 20  # sdk workload: one run in 20 is also a queued task (one a second)
REPRICED = "llama-repriced"  # lovia workload: a model priced after its run (reprice)
SDK_QUEUE = {"lovia.queue.backend": "redis", "lovia.queue.name": "lovia-ops:sdk:runs"}


def eval_score(index: int, evaluator: str) -> float:
    """The index-th completed run's score by ``evaluator`` (one in four fails each)."""
    if evaluator == "exact_match":
        return 0.0 if index % 4 == 0 else 1.0
    return (0.3, 0.8, 0.9, 1.0)[index % 4]


@dataclass
class Instruments:
    """lovia's metric contract (OTel instrument names, units and buckets)."""

    token_usage: Histogram
    client_duration: Histogram
    first_chunk: Histogram
    agent_duration: Histogram
    tool_duration: Histogram
    runs: Counter
    turns: Histogram
    cost: Counter
    tokens: Counter
    tool_calls: Counter
    tool_errors: Counter
    retries: Counter
    compactions: Counter
    unpriced: Counter
    eval_results: Counter
    eval_score: Histogram
    queue_deliveries: Counter
    queue_dead_letters: Counter
    queue_in_flight: UpDownCounter
    queue_depth: dict[str, int]  # lovia.queue.state -> tasks, read by an observable gauge


def _views() -> list:
    from opentelemetry.sdk.metrics.view import ExplicitBucketHistogramAggregation, View

    buckets = {
        "gen_ai.client.token.usage": TOKEN_BUCKETS,
        "gen_ai.client.operation.duration": CLIENT_BUCKETS,
        "gen_ai.client.operation.time_to_first_chunk": CLIENT_BUCKETS,
        "gen_ai.invoke_agent.duration": AGENT_BUCKETS,
        "gen_ai.execute_tool.duration": CLIENT_BUCKETS,
        "lovia.turns": TURN_BUCKETS,
        "lovia.eval.score": SCORE_BUCKETS,
    }
    return [
        View(instrument_name=name, aggregation=ExplicitBucketHistogramAggregation(bounds))
        for name, bounds in buckets.items()
    ]


def make_instruments(meter: Meter) -> Instruments:
    hist, counter = meter.create_histogram, meter.create_counter
    depth: dict[str, int] = {}

    def observe(options: CallbackOptions) -> list[Observation]:
        return [Observation(n, {**SDK_QUEUE, "lovia.queue.state": s}) for s, n in depth.items()]

    meter.create_observable_gauge("lovia.queue.depth", [observe], unit="{task}")
    return Instruments(
        token_usage=hist("gen_ai.client.token.usage", unit="{token}"),
        client_duration=hist("gen_ai.client.operation.duration", unit="s"),
        first_chunk=hist("gen_ai.client.operation.time_to_first_chunk", unit="s"),
        agent_duration=hist("gen_ai.invoke_agent.duration", unit="s"),
        tool_duration=hist("gen_ai.execute_tool.duration", unit="s"),
        runs=counter("lovia.runs", unit="{run}"),
        turns=hist("lovia.turns", unit="{turn}"),
        cost=counter("lovia.cost", unit="{USD}"),
        tokens=counter("lovia.tokens", unit="{token}"),
        tool_calls=counter("lovia.tool.calls", unit="{call}"),
        tool_errors=counter("lovia.tool.errors", unit="{error}"),
        retries=counter("lovia.provider.retries", unit="{retry}"),
        compactions=counter("lovia.compactions", unit="{compaction}"),
        unpriced=counter("lovia.cost.unpriced", unit="{call}"),
        eval_results=counter("lovia.eval.results", unit="{result}"),
        eval_score=hist("lovia.eval.score"),
        queue_deliveries=counter("lovia.queue.deliveries", unit="{delivery}"),
        queue_dead_letters=counter("lovia.queue.dead_letters", unit="{task}"),
        queue_in_flight=meter.create_up_down_counter("lovia.queue.runs_in_flight", unit="{run}"),
        queue_depth=depth,
    )


def _labels(index: int) -> dict[str, str]:
    """Attribution labels of run ``index`` (lovia.label.*: the spend-by-tenant panels)."""
    return {"tenant": ("acme", "globex", "initech")[index % 3], "user": f"u{index % 5}"}


def _model_call(
    ins: Instruments, agent: str, provider: str, model: str, rnd, who: dict[str, str]
) -> None:
    base = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": provider,
        "gen_ai.request.model": model,
        "gen_ai.response.model": model,
        "gen_ai.agent.name": agent,
    }
    input_tokens, output_tokens = rnd.randint(200, 4000), rnd.randint(20, 600)
    ins.token_usage.record(input_tokens, {**base, "gen_ai.token.type": "input"})
    ins.token_usage.record(output_tokens, {**base, "gen_ai.token.type": "output"})
    ins.client_duration.record(rnd.uniform(0.2, 3.0), base)
    ins.first_chunk.record(rnd.uniform(0.05, 0.8), base)
    short = {"gen_ai.agent.name": agent, "gen_ai.provider.name": provider}
    short["gen_ai.request.model"] = model
    short.update({f"lovia.label.{k}": v for k, v in who.items()})
    split = {
        "input": input_tokens,
        "output": output_tokens,
        "cache_read": input_tokens // 2,
        "cache_write": input_tokens // 10,
        "reasoning": output_tokens // 4,
    }
    for kind, count in split.items():
        ins.tokens.add(count, {**short, "gen_ai.token.type": kind})
    ins.cost.add(input_tokens * 2.5e-6 + output_tokens * 1e-5, short)
    if rnd.random() < 0.05:  # a call to a model without a price
        ins.unpriced.add(1, {**short, "lovia.run.nested": False})


def _tool_call(ins: Instruments, agent: str, tool: str, fail: bool, rnd) -> None:
    attrs = {"gen_ai.tool.name": tool, "gen_ai.agent.name": agent}
    ins.tool_calls.add(1, attrs)
    if fail:
        ins.tool_errors.add(1, {**attrs, "error.type": "ToolError"})
        ins.tool_duration.record(rnd.uniform(0.01, 0.5), {**attrs, "error.type": "ToolError"})
    else:
        ins.tool_duration.record(rnd.uniform(0.01, 0.5), attrs)


def _retry_and_failed_call(ins: Instruments, provider: str, model: str, agent: str) -> None:
    """A rate-limited model call that lovia retried."""
    error = {"gen_ai.request.model": model, "error.type": "RateLimitError"}
    ins.retries.add(1, {**error, "gen_ai.provider.name": provider})
    attrs = {**error, "gen_ai.operation.name": "chat", "gen_ai.provider.name": provider}
    ins.client_duration.record(0.05, {**attrs, "gen_ai.agent.name": agent})


def _queue_task(ins: Instruments, index: int) -> None:
    """The index-th run came from a queue (one in ``QUEUE_EVERY``): a delivery, or a
    dead letter for every ``DEAD_LETTER_EVERY``-th task; one run is always in flight."""
    task = index // QUEUE_EVERY
    if task == 0:
        ins.queue_in_flight.add(1, SDK_QUEUE)
    ins.queue_deliveries.add(1, {**SDK_QUEUE, "lovia.queue.redelivery": False})
    if task % DEAD_LETTER_EVERY == 0:
        reason = {**SDK_QUEUE, "lovia.queue.dead_letter_reason": "unknown_agent"}
        ins.queue_dead_letters.add(1, reason)
    ins.queue_depth.update(waiting=0, pending=1, dead=task // DEAD_LETTER_EVERY + 1)


def _run_result(index: int) -> tuple[str, str, str]:
    """(outcome, finish_reason, error_type) of the index-th run."""
    if index % FAILURE_EVERY == 0:
        error_type, finish_reason = FAILURES[index % len(FAILURES)]
        return "failed", finish_reason, error_type
    if index % 11 == 0:
        return "paused", "approval_pending", ""
    if index % 13 == 1:  # a user pressed stop (not in the SLI)
        return "cancelled", "cancelled", "RunCancelled"
    return "completed", "stop", ""


def one_run(ins: Instruments, index: int, rnd: random.Random) -> None:
    """Emit the telemetry of one scripted agent run."""
    agent = AGENTS[index % len(AGENTS)]
    provider, model = MODELS[(index // 2) % len(MODELS)]
    if index % QUEUE_EVERY == 0:
        _queue_task(ins, index)
    turns = rnd.randint(1, 6)
    for turn in range(turns):
        _model_call(ins, agent, provider, model, rnd, _labels(index))
        _tool_call(ins, agent, TOOLS[turn % len(TOOLS)], fail=(index + turn) % 7 == 0, rnd=rnd)
    if index % 3 == 0:
        _retry_and_failed_call(ins, provider, model, agent)
    if index % 4 == 0:
        kind = ("evict", "clear", "summarize")[index % 3]
        ins.compactions.add(1, {"gen_ai.agent.name": agent, "lovia.compaction.kind": kind})
    outcome, finish, error_type = _run_result(index)
    run_attrs = {
        "gen_ai.agent.name": agent,
        "lovia.run.outcome": outcome,
        "lovia.run.finish_reason": finish,
        "lovia.run.nested": False,
    }
    duration_attrs = {
        "gen_ai.agent.name": agent,
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.request.model": model,
    }
    if error_type:
        run_attrs["error.type"] = error_type
        duration_attrs["error.type"] = error_type
    ins.runs.add(1, run_attrs)
    if outcome == "completed":
        for evaluator in EVALUATORS:
            value = eval_score(index, evaluator)
            labels = {
                "lovia.eval.mode": "online",
                "gen_ai.agent.name": agent,
                "gen_ai.evaluation.name": evaluator,
            }
            label = "pass" if value >= 0.5 else "fail"
            ins.eval_results.add(1, {**labels, "gen_ai.evaluation.score.label": label})
            ins.eval_score.record(value, labels)
    ins.turns.record(turns, {"gen_ai.agent.name": agent, "lovia.run.outcome": outcome})
    ins.agent_duration.record(rnd.uniform(0.5, 30.0), duration_attrs)


def emit_with_sdk(port: int, runs_per_second: float, stop: Callable[[], bool]) -> None:
    """Emit lovia's metric contract with the OpenTelemetry SDK (no lovia code)."""
    from opentelemetry.exporter.prometheus import PrometheusMetricReader
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.resources import Resource
    from prometheus_client import start_http_server

    resource = Resource.create(
        {"service.name": "lovia-ops-workload", "deployment.environment.name": "ci"}
    )
    provider = MeterProvider(
        resource=resource, metric_readers=[PrometheusMetricReader()], views=_views()
    )
    ins = make_instruments(provider.get_meter("lovia", "0.0.0"))
    correction = provider.get_meter("lovia", "0.0.0").create_up_down_counter(
        "lovia.cost.correction", unit="{USD}"
    )
    correction.add(0.5, {"gen_ai.agent.name": AGENTS[0], "lovia.label.tenant": "acme"})
    start_http_server(port, addr="127.0.0.1")
    rnd = random.Random(42)
    index = 0
    while not stop():
        one_run(ins, index, rnd)
        index += 1
        time.sleep(1.0 / runs_per_second)


def _lovia_agents() -> list:
    """Two agents on two providers' scripted models, with tools that succeed and fail."""
    from lovia import Agent, Compaction, ModelProfile, RunContext, tool
    from lovia.errors import RateLimited
    from lovia.providers.base import RetryNotice
    from lovia.testing import FunctionModel, call, reply
    from lovia.usage import Usage

    def usage(done: int) -> Usage:  # cache and reasoning tokens, as real providers report
        n = 300 + 200 * done
        return Usage(
            input_tokens=n,
            output_tokens=60,
            cache_read_tokens=n // 2,
            cache_write_tokens=n // 10,
            reasoning_tokens=15,
        )

    @tool
    def search(query: str) -> str:
        """Search (returns a long page, so compaction evicts it)."""
        return f"results for {query}: " + "lorem ipsum " * 200

    @tool
    def fetch_url(url: str) -> str:
        """Fetch a URL (fails for bad ones)."""
        if "bad" in url:
            raise ValueError(f"cannot fetch {url}")
        return f"page {url}"

    @tool(requires_approval=True)
    def send_email(to: str) -> str:
        """Send an email (needs approval)."""
        return f"sent to {to}"

    class Retrying(FunctionModel):
        """A model that is rate limited once per call before it answers (a provider retry)."""

        async def stream(self, request):  # type: ignore[no-untyped-def]
            yield RetryNotice(attempt=1, error=RateLimited("429 slow down"), delay=0.0)
            async for item in super().stream(request):
                yield item

    def decide(request, info):  # type: ignore[no-untyped-def]
        text = " ".join(getattr(m, "content", "") for m in request.messages[:1])
        done = sum(1 for m in request.messages if m.type == "tool_result")
        if "fail-provider" in text:
            return RateLimited("still rate limited", status=429)
        if "pause" in text and done == 0:
            return reply(tool_calls=[call("send_email", to="ops@example.com")], usage=usage(done))
        if "cancel" in text and done == 0:
            return reply(tool_calls=[call("stop_run")], usage=usage(done))
        if "helper" in text and done == 0:
            return reply(tool_calls=[call("ask_helper", input="summarize")], usage=usage(done))
        if "loop" in text or done < 2:
            url = "bad.example" if "toolerror" in text else "ok.example"
            calls = [call("search", query=f"q{done}"), call("fetch_url", url=url)]
            return reply(tool_calls=calls, usage=usage(done))
        return reply("done", usage=usage(done))

    @tool
    def stop_run(ctx: RunContext) -> str:
        """Stop this run (a user pressing cancel)."""
        ctx.cancel_token.cancel("the user pressed stop")
        return "stopping"

    async def slow_decide(request, info):  # type: ignore[no-untyped-def]
        """``decide``, answering slowly to the queued runs (a busy worker)."""
        if "slow" in " ".join(getattr(m, "content", "") for m in request.messages[:1]):
            await asyncio.sleep(SLOW_MODEL_S)
        return decide(request, info)

    def helper_answer(request, info):  # type: ignore[no-untyped-def]
        return reply("helped", usage=Usage(input_tokens=120, output_tokens=30))

    profile = ModelProfile(context_window=100_000)
    # a child agent on a model without a price: nested runs and unpriced calls
    helper = Agent(
        name=HELPER,
        model=FunctionModel(helper_answer, provider="local", model="llama-local", profile=profile),
    )
    models = [
        FunctionModel(slow_decide, provider="openai", model="gpt-4o-mini", profile=profile),
        Retrying(slow_decide, provider="anthropic", model="claude-sonnet-4", profile=profile),
    ]
    context = Compaction(max_result_tokens=100)
    tools = [search, fetch_url, send_email, stop_run, helper.as_tool(name="ask_helper")]
    return [
        Agent(name=name, model=model, tools=tools, context=context)
        for name, model in zip(AGENTS, models, strict=True)
    ]


def _lovia_input(index: int) -> tuple[str, int]:
    """(input, max_turns) of the index-th run: one in five fails, some pause, some are
    cancelled, some ask a child agent (on a model without a price) for help."""
    if index % FAILURE_EVERY == 0:
        return ("fail-provider" if index % 2 else "loop"), 2
    if index % 11 == 0:
        return "pause", 10
    if index % 13 == 1:
        return "cancel", 10
    if index % 3 == 1:
        return "helper", 10
    return ("toolerror" if index % 7 == 0 else "work"), 10


async def feed_queue(agents: list, stop: asyncio.Event) -> None:
    """Run a lovia Worker on a Redis stream of its own and queue tasks for it until
    ``stop``: slow runs of the workload's agents and, every ``DEAD_LETTER_EVERY``-th
    task, one naming an agent the worker does not run (dead-lettered, ``unknown_agent``).
    The stream and its keys are deleted at the end."""
    from lovia.stores import store
    from lovia.workers import RunQueue, Worker

    tag = f"{os.getpid()}-{secrets.token_hex(3)}"
    queue = RunQueue(
        REDIS_URL, stream=f"lovia-ops:{tag}:runs", group=f"lovia-ops-{tag}", done_ttl_s=600
    )
    registry = {agent.name: agent for agent in agents}
    worker = Worker(queue, registry, store("memory://"), drain_timeout_s=1.0)
    running = asyncio.create_task(worker.run(stop))
    try:
        index = 0
        while not stop.is_set() and not running.done():
            if index % DEAD_LETTER_EVERY == DEAD_LETTER_EVERY - 1:
                await queue.submit(RETIRED_AGENT, "work")
            else:
                await queue.submit(agents[index % len(agents)].name, "slow work")
            index += 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), QUEUE_TASK_EVERY_S)
    finally:
        stop.set()
        await running  # raises what stopped the worker early
        await queue.delete()
        await queue.aclose()


async def reprice_once() -> None:
    """One run on a model nobody priced, priced afterwards and repriced as ``lovia reprice``
    does: its change goes to ``lovia.cost.correction`` (the cost board's correction row)."""
    from lovia import Agent, Runner
    from lovia.replay.reprice import correction_metric, reprice_runs
    from lovia.stores import MemoryStore
    from lovia.telemetry import set_price
    from lovia.testing import FunctionModel, reply
    from lovia.usage import Usage

    def answer(request, info):  # type: ignore[no-untyped-def]
        return reply("ok", usage=Usage(input_tokens=1_000_000, output_tokens=0))

    db = MemoryStore()
    agent = Agent(name=AGENTS[0], model=FunctionModel(answer, provider="local", model=REPRICED))
    run = await Runner.run(agent, "work", store=db, labels=_labels(0))
    set_price("local", REPRICED, input_per_mtok=0.5, output_per_mtok=0.0)
    correction_metric(await reprice_runs(db, [run.run_id]))  # +0.50 USD


def emit_with_lovia(port: int, runs_per_second: float, stop: Callable[[], bool]) -> None:
    """Run scripted lovia agents with lovia's own telemetry on a Prometheus endpoint."""
    from lovia import LoviaError, Runner
    from lovia.evals import Score
    from lovia.evals._telemetry import record_metrics
    from lovia.telemetry import configure

    telemetry = configure(
        service_name="lovia-ops-workload",
        exporter="none",
        metrics="prometheus",
        prometheus_port=port,
        resource_attributes={"deployment.environment.name": "ci"},
    )
    agents = _lovia_agents()

    async def loop() -> None:
        stopped = asyncio.Event()  # SIGTERM (the test's teardown) stops both loops
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stopped.set)
        await reprice_once()
        feeding = asyncio.create_task(feed_queue(agents, stopped))
        try:
            await run_agents(stopped)
        finally:
            stopped.set()
            await feeding

    async def run_agents(stopped: asyncio.Event) -> None:
        index = 0
        while not stop() and not stopped.is_set():
            text, max_turns = _lovia_input(index)
            agent = agents[index % len(agents)]
            try:
                await Runner.run(agent, text, max_turns=max_turns, labels=_labels(index))
            except LoviaError:
                pass  # failures and pauses are part of the workload
            else:  # online evaluation of the completed run, as lovia.evals.online records it
                for evaluator in EVALUATORS:
                    value = eval_score(index, evaluator)
                    score = Score(name=evaluator, value=value, passed=value >= 0.5)
                    record_metrics(score, mode="online", agent=agent.name)
            index += 1
            await asyncio.sleep(1.0 / runs_per_second)

    try:
        asyncio.run(loop())
    finally:
        telemetry.shutdown()


WORKLOADS = {"sdk": emit_with_sdk, "lovia": emit_with_lovia}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--runs-per-second", type=float, default=20.0)
    parser.add_argument("--seconds", type=float, default=0.0, help="0 = until killed")
    args = parser.parse_args(argv)
    kind = os.environ.get("LOVIA_OPS_WORKLOAD", "lovia")
    if kind not in WORKLOADS:
        parser.error(f"LOVIA_OPS_WORKLOAD must be one of {sorted(WORKLOADS)}, got {kind!r}")
    deadline = time.monotonic() + args.seconds if args.seconds else float("inf")
    WORKLOADS[kind](args.port, args.runs_per_second, lambda: time.monotonic() > deadline)


if __name__ == "__main__":
    main()
