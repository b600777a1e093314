"""``lovia reprice``: recompute stored runs' cost from their per-call usage.

Every model call that returned left a ``usage`` record (tokens, the model priced, the
price source). Repricing prices each again with the prices in force now (the table,
overrides, ``LOVIA_PRICES``) and, when the cost changed:

- appends a ``reprice`` record to the run (before, after, which prices, when) — the
  transcript and the call records are never rewritten;
- updates the run's row: ``cost_usd`` (children included, as always), the unpriced
  count, and ``extra["repriced"]`` (the original cost, when, which prices), which
  ``lovia show``, ``lovia runs`` and the web app show as a note.

A run without usage records (recorded before lovia kept them, or pruned) is skipped
and said so. Child runs are repriced with their parent, deepest first. Exported
metrics are not rewritten: see :func:`correction_metric`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..pricing import price_call, price_table_version
from ..stores.base import PRUNED_KEY, UNPRICED_KEY, RunSnapshot, Store
from ..stores.records import CallUsageRecord, RepriceRecord, read_records, to_checkpoint
from ..telemetry.attributes import AGENT_NAME

__all__ = ["REPRICED_KEY", "Repriced", "correction_metric", "reprice_runs"]

REPRICED_KEY = "repriced"
"""``RunInfo.extra`` key: ``{"original_usd", "at", "prices"}`` of a repriced run."""
_EPS = 1e-12


@dataclass(slots=True, kw_only=True)
class Repriced:
    """One run's cost before and after (``skipped``: why it was not repriced)."""

    run_id: str
    agent: str
    before: float
    after: float
    unpriced_before: int = 0
    unpriced_after: int = 0
    skipped: str | None = None
    labels: dict[str, str] = field(default_factory=dict[str, str])
    parent_run_id: str | None = None

    @property
    def changed(self) -> bool:
        return self.skipped is None and (
            abs(self.after - self.before) > _EPS or self.unpriced_after != self.unpriced_before
        )


@dataclass(slots=True)
class _Own:
    """A run's own calls: their cost as stored now, and priced again."""

    stored: float
    stored_unpriced: int
    cost: float
    unpriced: int


async def reprice_runs(
    db: Store,
    run_ids: Sequence[str],
    *,
    dry_run: bool = False,
    now: float | None = None,
) -> list[Repriced]:
    """Reprice the top-level runs of ``run_ids`` (a child run id stands for its top-level
    run: a parent's cost includes its children's) with their child runs; one
    :class:`Repriced` per run repriced, top-level runs first in the order given, then
    their children. ``dry_run``: compute only, write nothing."""
    done: dict[str, Repriced] = {}
    at = time.time() if now is None else now
    prices = price_table_version()
    roots: list[str] = []
    for run_id in run_ids:
        root = await _root(db, run_id)
        if root is not None and root not in roots:
            roots.append(root)
    for root in roots:
        await _reprice(db, root, done, dry_run=dry_run, at=at, prices=prices)
    return [done[r] for r in roots] + [r for k, r in done.items() if k not in roots]


async def _root(db: Store, run_id: str) -> str | None:
    """The top-level run above ``run_id`` (itself for a top-level run; None: no run)."""
    seen: set[str] = set()
    while run_id not in seen:
        seen.add(run_id)
        snapshot = await db.load(run_id)
        if snapshot is None:
            return None
        parent = snapshot.info.parent_run_id
        if parent is None:
            return run_id
        run_id = parent
    return run_id


async def _reprice(
    db: Store, run_id: str, done: dict[str, Repriced], *, dry_run: bool, at: float, prices: str
) -> Repriced | None:
    if run_id in done:
        return done[run_id]
    snapshot = await db.load(run_id)
    if snapshot is None:
        return None
    info = snapshot.info
    labels: dict[str, str] = dict(info.extra.get("labels") or {})
    unpriced = int(info.extra.get(UNPRICED_KEY, 0))
    result = Repriced(
        run_id=run_id,
        agent=info.agent,
        before=info.cost_usd,
        after=info.cost_usd,
        unpriced_before=unpriced,
        unpriced_after=unpriced,
        labels=labels,
        parent_run_id=info.parent_run_id,
    )
    done[run_id] = result
    own = _own(snapshot, info.extra)
    if own is None:
        result.skipped = (
            "its records were pruned" if PRUNED_KEY in info.extra else "no per-call usage recorded"
        )
        return result
    delta, delta_unpriced = own.cost - own.stored, own.unpriced - own.stored_unpriced
    for child in await db.list_runs(parent_run_id=run_id, limit=1_000_000):
        sub = await _reprice(db, child.run_id, done, dry_run=dry_run, at=at, prices=prices)
        if sub is not None and sub.skipped is None:
            delta += sub.after - sub.before
            delta_unpriced += sub.unpriced_after - sub.unpriced_before
    result.after = max(info.cost_usd + delta, 0.0)
    result.unpriced_after = max(unpriced + delta_unpriced, 0)
    if result.changed and not dry_run:
        record = RepriceRecord(
            at=at,
            prices=prices,
            own_before=own.stored,
            own_after=own.cost,
            cost_before=result.before,
            cost_after=result.after,
            unpriced_before=result.unpriced_before,
            unpriced_after=result.unpriced_after,
        )
        await db.append(run_id, [to_checkpoint(record)])
        await _rewrite_row(db, snapshot, result, own, prices, at)
    return result


def _own(snapshot: RunSnapshot, extra: dict[str, Any]) -> _Own | None:
    """The run's own calls (None when it has no usage records)."""
    calls = [r for r in read_records(snapshot, ("usage",)) if isinstance(r, CallUsageRecord)]
    if not calls:
        return None
    cost, unpriced = 0.0, 0
    for call in calls:
        priced = price_call(call.provider, call.model, call.usage)
        if priced is None:
            unpriced += 1
        else:
            cost += priced
    earlier: dict[str, Any] = extra.get(REPRICED_KEY) or {}
    stored = float(earlier.get("own_usd", sum(c.usage.cost_usd for c in calls)))
    stored_unpriced = int(earlier.get("own_unpriced", sum(c.usage.unpriced for c in calls)))
    return _Own(stored=stored, stored_unpriced=stored_unpriced, cost=cost, unpriced=unpriced)


async def _rewrite_row(
    db: Store, snapshot: RunSnapshot, result: Repriced, own: _Own, prices: str, at: float
) -> None:
    info = snapshot.info
    earlier: dict[str, Any] = info.extra.get(REPRICED_KEY) or {}
    info.extra[REPRICED_KEY] = {
        "original_usd": earlier.get("original_usd", result.before),
        "own_usd": own.cost,
        "own_unpriced": own.unpriced,
        "at": at,
        "prices": prices,
    }
    if result.unpriced_after:
        info.extra[UNPRICED_KEY] = result.unpriced_after
    else:
        info.extra.pop(UNPRICED_KEY, None)
    info.cost_usd = result.after
    await db.finish(info, snapshot.result)


def correction_metric(changed: Sequence[Repriced], meter_provider: Any = None) -> None:
    """Add each top-level run's change to ``lovia.cost.correction`` (unit ``{USD}`` like
    ``lovia.cost``; an up-down counter: corrections go both ways), labelled like
    ``lovia.cost`` (agent, ``lovia.label.*``, capped). In Prometheus it is the gauge
    ``lovia_cost_correction`` (a ``{…}`` unit adds no suffix); dashboards add it to
    ``lovia_cost_total``, whose points exported at the time are never rewritten."""
    from opentelemetry import metrics

    from .._version import __version__
    from ..labels import label_cap

    provider = meter_provider if meter_provider is not None else metrics.get_meter_provider()
    counter = provider.get_meter("lovia", __version__).create_up_down_counter(
        "lovia.cost.correction", unit="{USD}", description="Cost changes made by lovia reprice."
    )
    for run in changed:
        if run.changed and run.parent_run_id is None:  # a parent's change includes its children's
            attrs = {AGENT_NAME: run.agent, **label_cap().attributes(run.labels)}
            counter.add(run.after - run.before, attrs)
