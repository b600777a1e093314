"""Tool calls reported "outcome unknown" per 100 runs under a kill schedule.

Each round starts a worker process running ``--per-process`` runs (their starts spread
over one second), SIGKILLs it at a random moment (uniform in ``[0, --kill-window]``
seconds after it is ready; the seed makes the schedule repeatable), then resumes every run in a fresh process and
counts the tool results that say the outcome is unknown — and, of those, the calls that
had never executed (their side-effect log has no line for them). Every tool writes one
line per execution, so the bench also checks that no non-idempotent call ran twice.

A run: the model (20 ms) asks for four concurrency-safe ``notify`` calls at once
(``max_parallel_tools=2``, 30 ms each), then one ``charge`` (40 ms), then answers.
With ``--key-tools`` both tools hand ``ctx.idempotency_key`` to the (fake) API they call,
which applies a key once, and are declared ``idempotent=True``: a resume runs them again
instead of reporting them unknown.

    python bench/unknown_outcomes.py                       # this checkout
    python bench/unknown_outcomes.py --key-tools           # tools that pass the key
    python bench/unknown_outcomes.py --src /path/to/src    # another lovia (before/after)

``--store`` takes a PostgreSQL URL (a schema per round is created and dropped) instead
of the default SQLite file per round.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

UNKNOWN_PREFIX = "The outcome of this tool call is unknown"
STAGGER_S = 1.0
"""The runs of a worker start spread over this many seconds."""


# -- the worker (a subprocess) -------------------------------------------------------------


def worker(store_url: str, mode: str, run_ids: list[str], key_tools: bool, effects: str) -> None:
    from lovia import Agent, RunContext, Runner, tool
    from lovia.stores import store
    from lovia.testing import FunctionModel, call

    def effect(kind: str, key: str | None) -> None:
        with open(effects, "a") as f:  # one write(): a SIGKILL cannot split it
            f.write(f"{kind} {key}\n")

    async def notify(ctx: RunContext[Any], to: str) -> str:
        effect("notify", ctx.idempotency_key)
        await asyncio.sleep(0.03)
        return f"notified {to}"

    async def charge(ctx: RunContext[Any], amount: int) -> str:
        effect("charge", ctx.idempotency_key)
        await asyncio.sleep(0.04)
        return f"charged {amount}"

    notify_tool = tool(concurrency_safe=True, idempotent=key_tools)(notify)
    charge_tool = tool(idempotent=key_tools)(charge)

    async def decide(request: Any, info: Any) -> Any:
        await asyncio.sleep(0.02)
        results = [m for m in request.messages if m.type == "tool_result"]
        if not results:
            return [call("notify", to=to, id=f"n{i}") for i, to in enumerate("abcd")]
        if len(results) == 4:
            return [call("charge", amount=5, id="c1")]
        return f"done after {len(results)} results"

    agent = Agent(
        name="payer",
        model=FunctionModel(decide),
        tools=[notify_tool, charge_tool],
        max_parallel_tools=2,
    )

    async def one(i: int, run_id: str) -> Any:
        if mode == "run":  # staggered: the kill finds the runs in different phases
            await asyncio.sleep(STAGGER_S * i / len(run_ids))
        return await Runner.run(
            agent, None if mode == "resume" else "go", run_id=run_id, checkpointer=db
        )

    db = store(store_url)

    async def main() -> None:
        await Runner.run(agent, "warm up", run_id=f"warm-{mode}", checkpointer=db)
        print("ready", flush=True)
        outs = await asyncio.gather(*(one(i, r) for i, r in enumerate(run_ids)))
        summary = {}
        for run_id, result in zip(run_ids, outs, strict=True):
            unknown = [
                e.call_id
                for e in result.entries
                if e.type == "tool_result" and e.content.startswith(UNKNOWN_PREFIX)
            ]
            summary[run_id] = unknown
        print(json.dumps(summary), flush=True)
        await db.aclose()

    asyncio.run(main())


# -- the schedule ------------------------------------------------------------------------


def _spawn(args: argparse.Namespace, store_url: str, mode: str, ids: list[str], effects: Path):
    env = dict(os.environ)
    if args.src:
        env["PYTHONPATH"] = args.src
    cmd = [sys.executable, __file__, "--worker", store_url, mode, ",".join(ids), effects.as_posix()]
    if args.key_tools:
        cmd.append("--key-tools")
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _round(args: argparse.Namespace, n: int, rng: random.Random, tmp: Path) -> dict[str, Any]:
    ids = [f"r{n}-{i}" for i in range(args.per_process)]
    effects = tmp / f"effects-{n}.log"
    store_url = _store_url(args, n, tmp)
    first = _spawn(args, store_url, "run", ids, effects)
    assert first.stdout is not None
    line = first.stdout.readline()
    if line.strip() != "ready":
        raise SystemExit(
            f"worker failed to start: {line}{first.stderr.read() if first.stderr else ''}"
        )
    time.sleep(rng.uniform(0, args.kill_window))
    first.send_signal(signal.SIGKILL)
    first.wait()
    second = _spawn(args, store_url, "resume", ids, effects)
    out, err = second.communicate(timeout=120)
    if second.returncode != 0:
        raise SystemExit(f"resume failed: {err[-2000:]}")
    unknown: dict[str, list[str]] = json.loads(out.strip().splitlines()[-1])
    lines = effects.read_text().splitlines() if effects.exists() else []
    executed = [line.split(" ", 1)[1] for line in lines]
    twice = sum(1 for k in set(executed) if executed.count(k) > 1)
    never = 0
    for run_id, calls in unknown.items():
        for call_id in calls:
            if f"{run_id}:{call_id}" not in executed:
                never += 1
    _drop_store(args, n)
    return {"unknown": sum(len(c) for c in unknown.values()), "never": never, "twice": twice}


def _store_url(args: argparse.Namespace, n: int, tmp: Path) -> str:
    if not args.store:
        return f"sqlite:///{tmp / f'round-{n}.db'}"
    return f"{args.store}?schema=bench_unknown_{os.getpid()}_{n}"


def _drop_store(args: argparse.Namespace, n: int) -> None:
    if not args.store:
        return
    import asyncpg  # type: ignore[import-untyped]

    async def drop() -> None:
        conn = await asyncpg.connect(args.store)
        await conn.execute(f'DROP SCHEMA IF EXISTS "bench_unknown_{os.getpid()}_{n}" CASCADE')
        await conn.close()

    asyncio.run(drop())


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        store_url, mode, ids, effects = sys.argv[2:6]
        worker(store_url, mode, ids.split(","), "--key-tools" in sys.argv, effects)
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--per-process", type=int, default=10)
    parser.add_argument("--kill-window", type=float, default=1.6, help="seconds")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--key-tools", action="store_true")
    parser.add_argument("--src", help="PYTHONPATH of the lovia to measure")
    parser.add_argument("--store", help="a PostgreSQL URL (default: SQLite files)")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    totals = {"unknown": 0, "never": 0, "twice": 0}
    rounds = max(1, args.runs // args.per_process)
    with tempfile.TemporaryDirectory() as tmp:
        for n in range(rounds):
            for key, value in _round(args, n, rng, Path(tmp)).items():
                totals[key] += value
    runs = rounds * args.per_process
    per100 = {k: round(v * 100 / runs, 1) for k, v in totals.items()}
    print(
        f"{runs} runs, kill window {args.kill_window} s, seed {args.seed}, "
        f"key tools: {args.key_tools}, lovia from: {args.src or 'this checkout'}"
    )
    print(f"unknown outcomes per 100 runs: {per100['unknown']}")
    print(f"  of which never executed:    {per100['never']}")
    if args.key_tools:  # expected: the API applies a key once
        print(f"calls re-sent with their key:  {totals['twice']} (applied once each)")
    else:  # the ledger's promise: never a second execution
        print(f"calls executed twice:          {totals['twice']}")


if __name__ == "__main__":
    main()
