"""Parallel child runs share the token and cost budgets of the runs above them.

A call's usage is known only when it returns, so children that check their parent's
budget at the same moment all see room, and all spend (eight children, one call each,
spent 4,800 tokens of a 1,000-token budget). So each model call reserves its estimated
tokens and cost in every run above it (itself included) whose ``RunBudget`` limits
tokens or cost, and starts only while the usage plus the reservations of the calls in
flight leave room for it — or when nothing else of that run's tree is in flight: one
call may always start, the budget check before it passed. Otherwise it waits until a
call in flight returns, and checks the budget again with the real usage. The overspend
is bounded by the calls already in flight when the limit was reached.

The estimate is the run's last input tokens (its first call: the request's characters
/ 4) plus the request's ``max_tokens``; it only orders the calls, the limit is always
checked against real usage.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..pricing import price_usage
from ..usage import RunBudget, Usage
from .limits import check_budget

if TYPE_CHECKING:
    from ..model import ModelRequest, Provider
    from .state import RunState

__all__ = ["BudgetShare", "Hold", "budgeted_runs", "estimate", "reserve"]

_LIMITS = ("max_input_tokens", "max_output_tokens", "max_total_tokens", "max_cost_usd")


@dataclass(slots=True)
class BudgetShare:
    """The reservations of the calls in flight in one budgeted run's tree."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    inflight: int = 0
    returned: asyncio.Event = field(default_factory=asyncio.Event)
    """Set (and replaced) each time a call in flight returns: waiting calls check again."""


class Hold:
    """What one call reserved; :meth:`release` once it returned (idempotent)."""

    __slots__ = ("_amount", "_shares")

    def __init__(self, shares: list[BudgetShare], amount: Usage) -> None:
        self._shares = shares
        self._amount = amount
        for share in shares:
            share.input_tokens += amount.input_tokens
            share.output_tokens += amount.output_tokens
            share.cost_usd += amount.cost_usd
            share.inflight += 1

    def release(self) -> None:
        shares, self._shares = self._shares, []
        amount = self._amount
        for share in shares:
            share.input_tokens -= amount.input_tokens
            share.output_tokens -= amount.output_tokens
            share.cost_usd -= amount.cost_usd
            share.inflight -= 1
            returned, share.returned = share.returned, asyncio.Event()
            returned.set()


def _shared(budget: RunBudget | None) -> bool:
    return budget is not None and any(getattr(budget, name) is not None for name in _LIMITS)


def _estimate(state: RunState, request: ModelRequest, provider: Provider) -> Usage:
    if state.progress.last_input_tokens is not None:
        tokens_in = state.progress.last_input_tokens
    else:
        chars = len(request.system)
        for entry in request.messages:
            chars += len(getattr(entry, "content", "") or getattr(entry, "text", "") or "")
            chars += len(getattr(entry, "arguments", "") or "")
        tokens_in = chars // 4
    usage = Usage(input_tokens=tokens_in, output_tokens=request.settings.max_tokens or 0)
    try:
        usage.cost_usd = price_usage(provider.name, provider.model, usage)
    except Exception:  # no price: the cost limit's own check says so, with its hint
        usage.cost_usd = 0.0
    return usage


def _fits(run: RunState, share: BudgetShare, amount: Usage) -> bool:
    """Whether ``run``'s budget has room for ``amount`` beside the calls in flight."""
    if share.inflight == 0:
        return True
    budget = run.params.budget
    assert budget is not None
    used = run.total_usage()
    tokens_in = used.input_tokens + share.input_tokens + amount.input_tokens
    tokens_out = used.output_tokens + share.output_tokens + amount.output_tokens
    for name, value in (
        ("max_input_tokens", tokens_in),
        ("max_output_tokens", tokens_out),
        ("max_total_tokens", tokens_in + tokens_out),
        ("max_cost_usd", used.cost_usd + share.cost_usd + amount.cost_usd),
    ):
        limit = getattr(budget, name)
        if limit is not None and value > limit:
            return False
    return True


def budgeted_runs(state: RunState) -> list[RunState]:
    """``state`` and the runs above it that limit tokens or cost: where a call's estimate
    is reserved (:func:`reserve`). A sync walk, so a run without such limits awaits
    nothing per call."""
    runs: list[RunState] = []
    run: RunState | None = state
    while run is not None:
        if _shared(run.params.budget):
            runs.append(run)
        link = run.params.parent
        run = link.state if link is not None else None
    return runs


async def reserve(
    state: RunState, runs: list[RunState], request: ModelRequest, provider: Provider
) -> Hold:
    """Reserve this call's estimate in ``runs`` (:func:`budgeted_runs`, not empty),
    waiting while one has no room beside the calls in flight."""
    amount = _estimate(state, request, provider)
    while True:
        shares = [_share(r) for r in runs]
        full = next((s for r, s in zip(runs, shares, strict=True) if not _fits(r, s, amount)), None)
        if full is None:
            return Hold(shares, amount)
        await _wait(state, full.returned)
        check_budget(state, before="call")  # with the usage of now: may end the run


def _share(run: RunState) -> BudgetShare:
    if run.runtime.budget_share is None:
        run.runtime.budget_share = BudgetShare()
    return run.runtime.budget_share


async def _wait(state: RunState, returned: asyncio.Event) -> None:
    """Wait for ``returned``; cancelling the run (or its deadline) interrupts the wait."""
    assert state.runtime.watch is not None
    async with state.runtime.watch.armed():
        await returned.wait()


estimate = _estimate
"""A call's estimated usage and cost (spend limits reserve it too: ``_loop/spend.py``)."""
