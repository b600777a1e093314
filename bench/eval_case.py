"""Pin-to-scored-result: a recorded T-turn run pinned, baseline-proved, re-run and scored.

Records a T-turn run (a scripted model, a tool call per turn) in a temporary SQLite
store, then times each step a user takes after a postmortem, end to end:

- ``pin``: load the run from SQLite and write its case folder;
- ``baseline``: re-run the case with the recorded answers (every view hash checked);
- ``candidate``: re-run it with a scripted candidate (tool calls answered from the
  pinned results) and score it with three evaluators.

    python bench/eval_case.py [--turns 20] [--repeat 5] [--json]

Prints the median of ``--repeat`` runs of each step and their sum.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))


def _steps(turns: int) -> list[Any]:
    from lovia.testing import call, reply

    steps: list[Any] = [
        reply(f"Checking order O{i}.", tool_calls=[call("lookup", order=f"O{i}")])
        for i in range(turns - 1)
    ]
    steps.append("All orders shipped.")
    return steps


def _agent(steps: list[Any]) -> Any:
    from lovia import Agent, tool
    from lovia.testing import ScriptedModel

    @tool
    async def lookup(order: str) -> str:
        """Look up an order."""
        return f"{order}: shipped on time, tracking number 1Z{order}"

    return Agent(
        name="orders", instructions="Check every order.", model=ScriptedModel(steps), tools=[lookup]
    )


async def measure(turns: int, repeat: int) -> dict[str, Any]:
    from lovia import Runner, evals
    from lovia.stores import store

    folder = Path(tempfile.mkdtemp(prefix="lovia-bench-eval-"))
    url = f"sqlite:///{folder / 'lovia.db'}"
    db = store(url)
    agent = _agent(_steps(turns))
    run = await Runner.run(agent, "check the orders", checkpointer=db, max_turns=turns + 1)
    await db.aclose()
    times: dict[str, list[float]] = {"pin": [], "baseline": [], "candidate": []}
    scorers = [
        evals.Equals(),
        evals.ToolCalled("lookup", {"order": "O3"}),
        evals.Within(max_turns=turns),
    ]
    for i in range(repeat):
        t0 = time.perf_counter()
        case = await evals.pin(run.run_id, url, to=folder / "cases", name=f"c{i}")
        t1 = time.perf_counter()
        base = await evals.evaluate([case], baseline=True)
        t2 = time.perf_counter()
        cand = await evals.evaluate([case], agent=_agent(_steps(turns)), evaluators=scorers)
        t3 = time.perf_counter()
        assert base.ok() and cand.ok(), (base.cases[0].diff(), cand.cases[0].diff())
        times["pin"].append(t1 - t0)
        times["baseline"].append(t2 - t1)
        times["candidate"].append(t3 - t2)
    medians = {k: statistics.median(v) for k, v in times.items()}
    return {
        "turns": turns,
        "views": len(case.views),
        "repeat": repeat,
        **{f"{k}_s": round(v, 4) for k, v in medians.items()},
        "total_s": round(sum(medians.values()), 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = asyncio.run(measure(args.turns, args.repeat))
    if args.json:
        print(json.dumps(result))
        return
    print(
        f"{result['turns']}-turn run ({result['views']} views), median of {result['repeat']}: "
        f"pin {result['pin_s']:.3f} s, baseline {result['baseline_s']:.3f} s, "
        f"candidate + 3 evaluators {result['candidate_s']:.3f} s; total {result['total_s']:.3f} s"
    )


if __name__ == "__main__":
    main()
