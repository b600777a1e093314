"""Spend limits (:mod:`lovia.spend`) before each model call, shared by every run; and
each returned call's usage recorded for ``lovia reprice`` (:func:`note_usage`).

:func:`check_spend` reserves the call's estimated cost under each limit that applies to
the run's labels, in the store's spend ledger (:mod:`lovia.stores.spend`), and raises
:class:`~lovia.errors.SpendLimitExceeded` when one has no room left; :func:`settle`
replaces the reservation with the call's real cost once it returned. The estimate is
the one parallel child runs reserve (``share``): the last input tokens plus the
request's ``max_tokens``, priced.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ..errors import SpendLimitExceeded, UserError
from ..pricing import has_price, price_source
from ..spend import SpendLimit, spend_limits
from ..stores.records import CallUsageRecord
from ..stores.spend import SpendLedger
from ..usage import Usage
from .share import estimate

if TYPE_CHECKING:
    from ..model import ModelRequest, ModelResponse, Provider
    from .state import RunState

__all__ = ["SpendHold", "check_spend", "note_usage", "settle"]


class SpendHold:
    """What one call reserved, to settle when it returns."""

    __slots__ = ("amount", "held", "ledger")

    def __init__(self, ledger: SpendLedger, amount: float) -> None:
        self.ledger = ledger
        self.amount = amount
        self.held: list[tuple[str, float]] = []
        """``(key, window_start)`` of each reservation made."""


async def check_spend(
    state: RunState, request: ModelRequest, provider: Provider
) -> SpendHold | None:
    """Reserve this call's estimate under every limit on the run's labels (None: no
    limit applies); ``SpendLimitExceeded`` naming the first one without room."""
    labels = state.params.labels
    limits = spend_limits()
    if not labels or not limits:
        return None
    applying = [(limit, value) for limit in limits if (value := limit.applies(labels))]
    if not applying:
        return None
    ledger = state.checkpointer
    if not isinstance(ledger, SpendLedger):
        first = applying[0][0].describe(applying[0][1])
        raise UserError(
            f"run {state.run_id} is under a spend limit ({first}) but has no store to "
            "count spend in",
            hint="Record the run in a store (store=..., lovia.configure(store=...) or "
            "LOVIA_STORE): spend limits are counted there, shared by every run.",
        )
    if not has_price(provider.name, provider.model):
        raise UserError(
            f"run {state.run_id} is under a spend limit but {provider.name}:{provider.model} "
            "has no known price, so its spend cannot be counted",
            hint="Register a price (lovia.set_price or a price file), or remove the label.",
        )
    hold = SpendHold(ledger, estimate(state, request, provider).cost_usd)
    now = time.time()
    for limit, value in applying:
        start = limit.window_start(now)
        key = limit.key(value)
        refused = await ledger.reserve_spend(key, start, hold.amount, limit.max_usd)
        if refused is not None:
            await settle(hold, None)  # what this call reserved under other limits
            raise _reached(state, limit, value, refused, start)
        hold.held.append((key, start))
    return hold


async def settle(hold: SpendHold | None, response: ModelResponse | None) -> None:
    """The call returned (``response``) or failed (None): its real cost replaces its
    reservation (a failed or unpriced call adds nothing)."""
    if hold is None:
        return
    actual = 0.0
    if response is not None and not response.usage.unpriced:
        actual = response.usage.cost_usd
    held, hold.held = hold.held, []
    for key, start in held:
        await hold.ledger.settle_spend(key, start, hold.amount, actual)


def note_usage(state: RunState, purpose: str, provider: str, model: str, usage: Usage) -> None:
    """Record one returned call's usage and price source (``lovia reprice`` reads it)."""
    if state.checkpointer is None:
        return
    source = None if usage.unpriced else price_source(provider, model)
    state.note(
        CallUsageRecord(
            turn=state.progress.turn,
            purpose=purpose,
            provider=provider,
            model=model,
            usage=usage.copy(),
            source=source,
        )
    )


def _reached(
    state: RunState, limit: SpendLimit, value: str, spent: float, start: float
) -> SpendLimitExceeded:
    since = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(start))
    error = SpendLimitExceeded(
        f"run {state.run_id} stopped before a model call: spend limit "
        f"{limit.describe(value)} reached (${spent:.4f} spent or in flight since {since})",
        hint=f"Wait for the next window, raise SpendLimit(label={limit.label!r}, "
        "max_usd=...) in lovia.configure(spend_limits=...), or check who spends "
        f"(lovia runs --label {limit.label}={value}).",
        limit=limit,
        spent_usd=spent,
        window_start=start,
    )
    return error
