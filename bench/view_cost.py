"""CPU per view build as a compacted run grows: turns 41–60 vs 481–500.

A 500-turn run on a fake model with a 16k-token window: every turn calls a tool that
returns ~2.5 kB (every fifth result is 60 kB and gets evicted), a plugin injects a
reminder, the default Compaction clears and summarizes, and a MemoryStore checkpoints
(including one view record per call). The CPU time (this thread) between the loop's
``ViewStarted`` and ``ViewBuilt`` events is the view build: strategy + injectors +
request + hash + record. Turns where a summary was made include that (fake) model call
and are reported apart. Target: median ratio late/early ≈ 1 (≤ 1.3).

    python bench/view_cost.py [--turns 500] [--window 16000]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

from lovia import Agent, PluginInstance, RunContext, Runner, events, tool
from lovia.providers.base import ModelProfile, ModelRequest
from lovia.stores import MemoryStore, store
from lovia.testing import FunctionModel, call
from lovia.view import DEFAULT_SUMMARY_PROMPT, Compaction


@tool
def fetch(n: int) -> str:
    """Fetch page n."""
    return f"page {n}: " + ("lorem ipsum " * (5_000 if n % 5 == 0 else 200))


class Reminder:
    name = "reminder"

    async def setup(self, ctx: RunContext[Any]) -> PluginInstance:
        return PluginInstance(view_injectors=[lambda c: [f"reminder: turn {c.turn}"]])


def model_for(turns: int, window: int) -> FunctionModel:
    def reply(req: ModelRequest, info: Any) -> Any:
        if req.system == DEFAULT_SUMMARY_PROMPT:
            return "summary: pages fetched so far, nothing failed, keep going"
        k = sum(r.system != DEFAULT_SUMMARY_PROMPT for r in info.requests)
        return call("fetch", n=k) if k <= turns else "done"

    return FunctionModel(reply, profile=ModelProfile(context_window=window))


TURN_CPU: dict[int, float] = {}
"""turn -> process CPU seconds of the whole turn (TurnStarted -> TurnEnded): the loop,
the tool, the view and the checkpoint writes (the SQLite writer thread included)."""


async def measure(
    turns: int, window: int, store_url: str = "memory://"
) -> dict[int, tuple[float, bool, int]]:
    """turn -> (CPU seconds of its view build, summarized?, messages in the view)."""
    agent = Agent(
        name="bench",
        model=model_for(turns, window),
        tools=[fetch],
        plugins=[Reminder()],
        context=Compaction(),
    )
    out: dict[int, tuple[float, bool, int]] = {}
    t0, turn_t0, summarized = 0.0, 0.0, False
    TURN_CPU.clear()
    checkpointer = MemoryStore() if store_url == "memory://" else store(store_url)
    handle = Runner.stream(agent, "crawl", checkpointer=checkpointer, max_turns=turns + 5)
    async for event in handle:
        if isinstance(event, events.TurnStarted):  # process CPU: includes the store's thread
            turn_t0 = time.process_time()
        elif isinstance(event, events.TurnEnded):
            TURN_CPU[event.turn] = time.process_time() - turn_t0
        elif isinstance(event, events.ViewStarted):
            t0, summarized = time.thread_time(), False
        elif isinstance(event, events.CompactionApplied) and event.kind == "summarize":
            summarized = True
        elif isinstance(event, events.ViewBuilt):
            out[event.turn] = (time.thread_time() - t0, summarized, event.entries)
    await handle.result()
    return out


def window_stats(data: dict[int, tuple[float, bool, int]], lo: int, hi: int) -> dict[str, float]:
    plain = [data[t][0] for t in range(lo, hi + 1) if not data[t][1]]
    return {
        "median_us": statistics.median(plain) * 1e6,
        "mean_us": statistics.fmean(plain) * 1e6,
        "views": len(plain),
        "summaries": sum(data[t][1] for t in range(lo, hi + 1)),
        "entries": statistics.fmean(data[t][2] for t in range(lo, hi + 1)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=500)
    parser.add_argument("--window", type=int, default=16_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--store", default="memory://", help="checkpointer URL (sqlite:///…)")
    parser.add_argument("--json", action="store_true", help="one JSON line with the medians")
    args = parser.parse_args()
    early, late = (41, 60), (args.turns - 19, args.turns)
    ratios: list[float] = []
    turn_ratios: list[float] = []
    summary: dict[str, float] = {}
    for i in range(args.repeat):
        data = asyncio.run(measure(args.turns, args.window, args.store))
        a, b = window_stats(data, *early), window_stats(data, *late)
        ratio = b["median_us"] / a["median_us"]
        ratios.append(ratio)
        plain = {t for t in data if not data[t][1]}
        te = statistics.median(TURN_CPU[t] for t in range(*early) if t in plain) * 1e6
        tl = statistics.median(TURN_CPU[t] for t in range(late[0], late[1] + 1) if t in plain)
        turn_ratios.append(tl * 1e6 / te)
        summary = {
            "view_us_early": a["median_us"],
            "view_us_late": b["median_us"],
            "turn_us_early": te,
            "turn_us_late": tl * 1e6,
        }
        if args.json:
            continue
        print(
            f"run {i + 1}: turns {early[0]}-{early[1]}: median {a['median_us']:.0f} us, "
            f"mean {a['mean_us']:.0f} us ({a['entries']:.0f} msgs/view, "
            f"{a['summaries']} summaries) | turns {late[0]}-{late[1]}: median "
            f"{b['median_us']:.0f} us, mean {b['mean_us']:.0f} us ({b['entries']:.0f} "
            f"msgs/view, {b['summaries']} summaries) | ratio {ratio:.2f}"
        )
    best = statistics.median(ratios)
    turn_best = statistics.median(turn_ratios)
    if args.json:
        import json

        print(
            json.dumps(
                {
                    **summary,
                    "view_ratio": round(best, 2),
                    "turn_ratio": round(turn_best, 2),
                    "turns": args.turns,
                    "window": args.window,
                    "store": args.store.split(":", 1)[0],
                }
            )
        )
        return
    verdict = "ok" if best <= 1.3 else "ABOVE TARGET"
    print(f"median ratio late/early, view build: {best:.2f} (target <= 1.3: {verdict})")
    verdict = "ok" if turn_best <= 1.3 else "ABOVE TARGET"
    print(
        f"median ratio late/early, whole turn (loop, tools, checkpoint; no HTTP): "
        f"{turn_best:.2f} (target <= 1.3: {verdict})"
    )


if __name__ == "__main__":
    main()
