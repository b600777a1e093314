"""Golden output (plain mode) of ``lovia runs``, ``lovia show``, ``lovia replay``, ``lovia trace``.

Run ids, entry ids, hashes, times and durations are normalized; column padding is
collapsed to two spaces (widths follow the ids). The scripted model has no price: its
runs' cost is unknown (``?``), never ``-`` or $0; a run whose only call failed cost
nothing (``-``).
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from lovia.stores import store

from .conftest import Recorded, lovia, normalize

RUNS = """\
RUN  AGENT  SESSION  STATE  TURNS  TOKENS  COST  STARTED  WALL
<run2>  support  sess-2  failed/ProviderServerError  1  0  -  <time>  <dur>
<run1>  billing  sess-1  completed/stop  4  177  ?  <time>  <dur>
<run0>  support  sess-1  completed/stop  1  18  ?  <time>  <dur>
"""

RUNS_FILTERED = """\
RUN  AGENT  SESSION  STATE  TURNS  TOKENS  COST  STARTED  WALL
<run1>  billing  sess-1  completed/stop  4  177  ?  <time>  <dur>
"""

SHOW = """\
run <run1>
agent support -> billing · session sess-1 · completed/stop · 4 turns · 153+24 tokens · ? · \
<time> · <dur>
(3 earlier entries from session sess-1 precede this run)
turn 0 · support
  system  You help with orders.
  user  where are A1 and B2? refund B2
turn 1 · support
  tool  lookup_order({"order_id": "A1"})  [call_a1]
      -> A1: shipped
turn 2 · support
  tool  lookup_order({"order_id": "B2"})  [call_b2]
      -> B2: shipped
turn 3 · support
  tool  transfer_to_billing({})  [call_tx]
      -> Transferred to billing.
  handoff  support -> billing
turn 3 · billing
  system  You handle refunds.
turn 4 · billing
  assistant Refund issued for B2.
"""

SHOW_FAILED = """\
run <run2>
agent support · session sess-2 · failed/ProviderServerError · 1 turn · 0+0 tokens · - · \
<time> · <dur>
failed: ProviderServerError: upstream 502
turn 0 · support
  system  You help with orders.
  user  status?
turn 1: model call failed after 0 retries: ProviderServerError: upstream 502  \
(its view: lovia replay <run2> --turn 1)
"""

REPLAY_TURN_3 = """\
run <run1> · 4 views · session sess-1 · completed

turn 3 · support · test:scripted
  recorded  <hash>
  rebuilt  <hash>  ok (same hash as span attribute lovia.view.hash)
  system  You help with orders.
  tools  lookup_order, transfer_to_billing
  settings  {}
  summary  Earlier, the user greeted the agent.
  view  8 entries (2 replaced, 1 injected)
    user  Earlier, the user greeted the agent. (replaced)
    assistant  Hello! How can I help?
    user  where are A1 and B2? refund B2
    tool_call  lookup_order({"order_id": "A1"})
    tool_result [evicted: recall <e>] (replaced)
    tool_call  lookup_order({"order_id": "B2"})
    tool_result B2: shipped
    user  <reminder>be brief</reminder> (injected)

1/1 views rebuilt with the recorded hash (all verified)
"""


def _ids(recorded: Recorded) -> list[str]:
    return [recorded.first_run_id, recorded.run_id, "run-failed-1"]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["runs"], RUNS),
        (["runs", "--session", "sess-1", "--limit", "1"], RUNS_FILTERED),
        (["show", "<run1>"], SHOW),
        (["show", "<run2>"], SHOW_FAILED),
        (["replay", "<run1>", "--turn", "3"], REPLAY_TURN_3),
    ],
)
def test_golden(recorded: Recorded, args: list[str], expected: str) -> None:
    ids = _ids(recorded)
    real = [ids[int(a[4])] if a.startswith("<run") else a for a in args]
    res = lovia(*real, "--store", recorded.url)
    assert res.code == 0, res.err
    assert normalize(res.out, ids) == expected


async def _traced_run(url: str) -> str:
    """One run with a tool, recorded in the store and traced into its span table."""
    from lovia import Agent, Runner, tool
    from lovia.telemetry import configure
    from lovia.testing import ScriptedModel, call

    @tool
    def lookup(order: str) -> str:
        """Look an order up."""
        return f"{order}: shipped"

    telemetry = configure(
        service_name="golden", exporter="local", local_path=url, metrics=False, set_global=False
    )
    db = store(url)
    model = ScriptedModel([call("lookup", order="A1"), "A1 has shipped."], model="gm-1")
    agent = Agent(name="support", model=model, tools=[lookup])
    result = await Runner.run(
        agent,
        "where is A1?",
        checkpointer=db,
        session=db,
        session_id="s-trace",
        tracer_provider=telemetry.tracer_provider,
    )
    telemetry.shutdown()
    await db.aclose()
    return result.run_id


GOLDEN_TRACE = """\
trace <id32>  (search this trace id in Jaeger / Grafana Tempo)
invoke_agent support  <dur>  tokens 12+8  ?  finish=stop
├─ lovia.checkpoint.write  <dur>
├─ lovia.turn  <dur>  tokens 3+5  ?
│  ├─ lovia.view  <dur>  view=<view>
│  ├─ chat gm-1  <dur>  tokens 3+5  ?  finish=tool_calls  view=<view>
│  ├─ execute_tool lookup  <dur>
│  ├─ lovia.checkpoint.write  <dur>
│  └─ lovia.checkpoint.write  <dur>
├─ lovia.turn  <dur>  tokens 9+3  ?
│  ├─ lovia.view  <dur>  view=<view>
│  └─ chat gm-1  <dur>  tokens 9+3  ?  finish=stop  view=<view>
├─ lovia.checkpoint.write  <dur>
└─ lovia.session.write  <dur>
"""


def test_golden_trace(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'trace.db'}"
    run_id = asyncio.run(_traced_run(url))
    res = lovia("trace", run_id, "--store", url)
    assert res.code == 0, res.err
    out = normalize(res.out, [run_id])
    out = re.sub(r"view=[0-9a-f]{12}", "view=<view>", out)
    assert out == GOLDEN_TRACE
