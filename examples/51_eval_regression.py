"""From postmortem to regression test: pin a recorded run, prove the baseline, catch a
prompt change that breaks it (offline).

1. A support agent answers a refund question with two tool calls; the run is stored.
2. ``evals.pin`` turns it into a case folder (the exact views, the recorded answers
   and tool results, where it came from).
3. ``evaluate(baseline=True)`` re-runs it with the recorded answers only: every view
   reproduces its recorded hash, with no model call and no tool call made.
4. A candidate (a new prompt with a model that now skips the policy lookup) is re-run
   from the pinned start, its tool calls answered from the pinned results, and scored.

The same from a shell, with the store URL and folder this script prints:

    lovia pin RUN --to DIR --store URL
    lovia eval DIR --baseline
    lovia eval DIR --agent mymodule:candidate --format junit

Run: python examples/51_eval_regression.py
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from lovia import Agent, Runner, evals, tool
from lovia.stores import store
from lovia.testing import ScriptedModel, call

TOOL_RUNS: list[str] = []


@tool
async def lookup_order(order_id: str) -> str:
    """Look up an order by id."""
    TOOL_RUNS.append(order_id)
    return f"{order_id}: delivered 40 days ago, 80.00 EUR"


@tool
async def refund_policy(days: int) -> str:
    """The refund policy for an order delivered ``days`` ago."""
    TOOL_RUNS.append(f"policy {days}")
    return "refunds within 30 days only" if days > 30 else "refund allowed"


def support(model: ScriptedModel, instructions: str) -> Agent[None, str]:
    return Agent(
        name="support",
        instructions=instructions,
        model=model,
        tools=[lookup_order, refund_policy],
    )


async def main() -> None:
    folder = Path(tempfile.mkdtemp(prefix="lovia-eval-"))
    url = f"sqlite:///{folder / 'lovia.db'}"
    db = store(url)
    recorded = ScriptedModel(
        [
            call("lookup_order", order_id="A-17"),
            call("refund_policy", days=40),
            "Sorry: order A-17 is past the 30-day refund window.",
        ]
    )
    run = await Runner.run(
        support(recorded, "Check the refund policy before answering."),
        "Can I get a refund for A-17?",
        checkpointer=db,
    )
    await db.aclose()
    print(f"store: {url}")
    print(f"recorded run {run.run_id}: {run.output}")

    case = await evals.pin(run.run_id, url, to=folder / "cases", name="refund-window")
    print(f"pinned: {case.name}, {len(case.views)} views, {len(case.tool_results)} tool results")

    TOOL_RUNS.clear()
    baseline = await evals.evaluate(folder / "cases", baseline=True)
    sample = baseline.cases[0].samples[0]
    print(
        f"baseline: {sample.execution.views_reproduced}/{len(case.views)} view hashes "
        f"reproduced, live tool calls {len(TOOL_RUNS)}, ok={baseline.ok()}"
    )

    # The new prompt drops the policy check; this model then promises a refund.
    lazy = ScriptedModel(
        [call("lookup_order", order_id="A-17"), "Sure, your refund for A-17 is on its way."]
    )
    report = await evals.evaluate(
        folder / "cases",
        agent=support(lazy, "Be helpful and quick."),
        evaluators=[evals.ToolCalled("refund_policy"), evals.Contains("30-day")],
    )
    result = report.cases[0]
    print(f"candidate: pass rate {report.pass_rate:.0%}, ok={report.ok()}")
    print(f"live tool calls {len(TOOL_RUNS)} (answered from the pinned results)")
    print("diff:")
    for line in result.diff().splitlines():
        print("  " + line)


if __name__ == "__main__":
    asyncio.run(main())
