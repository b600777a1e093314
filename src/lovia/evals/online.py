"""Online evaluation: score a sample of completed production runs, off the request path.

A worker (``run_online``, or ``lovia``'s own schedulers) reads finished runs from the
store, keeps those an evaluator samples (deterministic: a hash of the run id, so every
worker agrees and a run is scored at most once per evaluator), scores their recorded
output and emits the same ``gen_ai.evaluation.result`` events and ``lovia.eval.*``
metrics (``lovia.eval.mode=online``) the quality SLO is computed from.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import UserError
from ..replay import StoreLike, load_run, open_store
from ._evaluators import Evaluator, Score, score_sample
from ._pin import pin_run
from ._run import recorded_sample
from ._telemetry import emit_result, record_metrics

__all__ = ["Sampled", "run_online", "sampled"]


def sampled(run_id: str, rate: float, salt: str = "") -> bool:
    """True for a ``rate`` share of run ids (sha256 of salt + id; stable everywhere)."""
    if not 0.0 <= rate <= 1.0:
        raise UserError(f"sampling rate {rate} is not between 0 and 1", hint="1% is 0.01.")
    digest = hashlib.sha256(f"{salt}:{run_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") < rate * 2**64


@dataclass(frozen=True, slots=True)
class Sampled:
    """An evaluator and the share of completed runs it scores."""

    evaluator: Evaluator
    rate: float


async def run_online(
    store: StoreLike,
    evaluators: Sequence[Sampled],
    *,
    limit: int = 200,
    seen: set[tuple[str, str]] | None = None,
    meter_provider: Any = None,
    logger_provider: Any = None,
) -> list[tuple[str, Score]]:
    """Score the sampled ones among the ``limit`` most recent completed runs (once each:
    ``seen`` remembers ``(run_id, evaluator)`` pairs across calls)."""
    done = seen if seen is not None else set[tuple[str, str]]()
    out: list[tuple[str, Score]] = []
    async with open_store(store) as db:
        for info in await db.list_runs(limit=limit, status="completed"):
            todo = [
                s
                for s in evaluators
                if (info.run_id, s.evaluator.name) not in done
                and sampled(info.run_id, s.rate, s.evaluator.name)
            ]
            if not todo:
                continue
            run = await load_run(info.run_id, db)
            if not run.views:
                continue
            sample = recorded_sample(pin_run(run))
            for s, score in zip(
                todo, await score_sample([s.evaluator for s in todo], sample), strict=True
            ):
                done.add((info.run_id, s.evaluator.name))
                emit_result(
                    score,
                    trace_id=info.trace_id,
                    span_id=info.span_id,
                    agent=info.agent,
                    logger_provider=logger_provider,
                )
                record_metrics(
                    score, mode="online", agent=info.agent, meter_provider=meter_provider
                )
                out.append((info.run_id, score))
    return out
