"""Shared workload definition and measurement harness for the benchmark drivers.

Stdlib only, so importing it costs nothing measurable. Every driver:

1. parses the same command line (:func:`parse_args`),
2. builds an ``async run_once() -> str`` returning the final answer of one agent run,
3. calls :func:`measure`, which warms up outside the timed window, then times
   ``runs`` runs with at most ``concurrency`` in flight and prints ONE JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import resource
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

INSTRUCTIONS = "Use the add tool."
PROMPT = "go"
MAX_TURNS = 1000


def tool_args(turn: int, index: int) -> tuple[int, int]:
    """Arguments ``(a, b)`` of the ``index``-th parallel ``add`` call of ``turn``."""
    return 7 * turn + index + 1, 3 * index + turn + 2


def expected_sum(turns: int, calls: int) -> int:
    """The sum of every ``add`` result over a full run: the correct final figure."""
    return sum(a + b for t in range(turns) for i in range(calls) for a, b in [tool_args(t, i)])


def expected_answer(turns: int, calls: int) -> str:
    """The final text the fake server sends when every tool result reached it."""
    return f"sum={expected_sum(turns, calls)}"


def model_name(turns: int, calls: int) -> str:
    """Model name that tells the fake server the workload shape."""
    return f"bench-t{turns}-c{calls}"


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


ADD_TOOL_SCHEMA = {
    "type": "function",
    "function": {
        "name": "add",
        "description": "Add two integers.",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
            "additionalProperties": False,
        },
    },
}


def parse_args(
    description: str, extra: Callable[[argparse.ArgumentParser], None] | None = None
) -> argparse.Namespace:
    """The command line shared by all drivers, plus driver-specific options."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--base-url", required=True, help="e.g. http://127.0.0.1:PORT/v1")
    parser.add_argument("--mode", choices=["json", "sse"], default="json")
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--turns", type=int, default=5, help="T: tool turns per run")
    parser.add_argument("--calls", type=int, default=2, help="C: parallel tool calls per turn")
    parser.add_argument(
        "--warmup", type=int, default=None, help="untimed runs first (default: the concurrency)"
    )
    parser.add_argument(
        "--per-turn",
        action="store_true",
        help="record process CPU between model requests (one run)",
    )
    parser.add_argument(
        "--max-connections",
        type=int,
        default=None,
        help="HTTP pool size (and keep-alive); default: the client's own (100 / 20)",
    )
    if extra is not None:
        extra(parser)
    return parser.parse_args()


async def _bounded(
    run_once: Callable[[], Awaitable[str]], runs: int, concurrency: int
) -> tuple[list[str], list[str]]:
    """Run ``runs`` runs with at most ``concurrency`` in flight; return answers and errors."""
    gate = asyncio.Semaphore(concurrency)
    answers: list[str] = []
    errors: list[str] = []

    async def one() -> None:
        async with gate:
            try:
                answers.append(await run_once())
            except Exception as exc:  # counted, reported, and it makes ok false
                errors.append(f"{type(exc).__name__}: {exc}"[:300])

    await asyncio.gather(*(one() for _ in range(runs)))
    return answers, errors


async def measure(
    contender: str,
    args: argparse.Namespace,
    run_once: Callable[[], Awaitable[str]],
    import_s: float,
    *,
    flush: Callable[[], Awaitable[None] | None] | None = None,
    cpu_marks: list[float] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Warm up, time the configured runs, print and return the result line.

    ``flush`` (e.g. telemetry force-flush) runs inside the timed window.
    ``cpu_marks`` is filled by a request hook with the process CPU at each model
    request; with ``--per-turn`` it becomes per-turn CPU figures.
    """
    warm = min(args.concurrency, args.runs) if args.warmup is None else args.warmup
    warm_answers, warm_errors = await _bounded(run_once, warm, max(1, warm))
    if cpu_marks is not None:
        cpu_marks.clear()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    answers, errors = await _bounded(run_once, args.runs, args.concurrency)
    if flush is not None:
        pending = flush()
        if pending is not None:
            await pending
    wall_s = time.perf_counter() - wall0
    cpu_s = time.process_time() - cpu0
    expected = expected_answer(args.turns, args.calls)
    roundtrips = args.runs * (args.turns + 1)
    wrong = [a for a in answers + warm_answers if a != expected]
    result: dict[str, Any] = {
        "contender": contender,
        "mode": args.mode,
        "concurrency": args.concurrency,
        "runs": args.runs,
        "turns": args.turns,
        "calls": args.calls,
        "wall_s": round(wall_s, 4),
        "cpu_s": round(cpu_s, 4),
        "cpu_us_per_roundtrip": round(cpu_s / roundtrips * 1e6, 1),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "import_s": round(import_s, 4),
        "errors": len(errors) + len(warm_errors),
        "ok": not errors and not warm_errors and not wrong and len(answers) == args.runs,
    }
    if errors or warm_errors:
        result["first_error"] = (errors or warm_errors)[0]
    if wrong:
        result["first_wrong"] = {"got": str(wrong[0])[:200], "expected": expected}
    if cpu_marks is not None and args.per_turn:
        result["per_turn"] = per_turn_summary(cpu_marks)
    if extra:
        result.update(extra)
    print(json.dumps(result), flush=True)
    return result


def per_turn_summary(marks: list[float]) -> dict[str, Any]:
    """Mean process CPU (µs) per turn over turns 41-60 and 481-500 of the last run.

    ``marks`` holds the process CPU at each model request; turn ``k`` (1-based) costs
    ``marks[k] - marks[k - 1]``: parsing reply ``k``, running its tools, building and
    sending request ``k + 1``.
    """
    deltas = [b - a for a, b in itertools.pairwise(marks)]

    def window(first: int, last: int) -> float | None:
        part = deltas[first - 1 : last]
        return round(sum(part) / len(part) * 1e6, 1) if len(part) == last - first + 1 else None

    early, late = window(41, 60), window(481, 500)
    return {
        "turns_recorded": len(deltas),
        "cpu_us_turns_41_60": early,
        "cpu_us_turns_481_500": late,
        "late_over_early": round(late / early, 2) if early and late else None,
    }


def cpu_request_hook(marks: list[float]) -> Callable[[Any], Awaitable[None]]:
    """An httpx ``request`` event hook appending the process CPU at each request."""

    async def hook(_request: Any) -> None:
        marks.append(time.process_time())

    return hook


def import_timer() -> Callable[[], float]:
    """Start timing framework imports; call the result to read the seconds elapsed."""
    start = time.perf_counter()
    return lambda: time.perf_counter() - start


def die(message: str) -> None:
    """Print a failure line in the result format and exit non-zero."""
    print(json.dumps({"ok": False, "error": message}), flush=True)
    sys.exit(2)
