"""The run lease: exactly one worker runs a given run_id at a time, and only it writes.

A worker takes the lease before it starts or resumes a run and renews it in the
background (every third of the TTL) while the run goes on: one keeper task per event
loop, store and TTL renews the leases of all its runs in one store call
(``renew_many``), instead of a timer and a store commit per run. A lease left by a worker that
died on this same host (its pid is gone, a zombie, or reused: the owner id carries the
pid's start time) is taken over at once; elsewhere it expires after
``LOVIA_LEASE_TTL_S`` seconds (default 60). The takeover is a new grant, so its larger
fencing token refuses any write the old holder might still try.

Fencing: each grant carries a token larger than every earlier one on the run, and every
checkpoint write of the run carries the token; the store refuses a write whose token is
no longer current (:class:`~lovia.errors.LeaseLost`). A worker that stalled past its
lease (SIGSTOP, a long GC pause, a frozen VM) therefore cannot write once another worker
took the run over, and it stops. Before a tool starts and before a model call (it would
be paid for), :func:`confirm_lease` makes sure the lease is still ours: free when the
heartbeat renewed it recently, one store round trip when not (a process that wakes from
a stall has a stale renewal time).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from .._defaults import lease_ttl
from ..errors import LeaseLost, RunLeaseHeld
from ..stores.base import Checkpointer, cancel_requests, lease_lost, renew_many
from ..stores.lifecycle import holder_gone, owner_id
from .state import RunState

__all__ = [
    "cancel_if_asked",
    "confirm_lease",
    "lease_fresh",
    "lease_held",
    "start_heartbeat",
    "stop_heartbeat",
    "take_lease",
]

logger = logging.getLogger("lovia.lease")


async def take_lease(state: RunState) -> bool:
    """Take the run's lease (and its fencing token); False when the store refused it:
    another live worker holds it, or the run is completed."""
    cp = state.checkpointer
    assert cp is not None
    owner, ttl = owner_id(), lease_ttl()
    sent = time.monotonic()
    token = await cp.acquire(state.run_id, owner, ttl)
    if token is None:
        holder = await cp.lease_holder(state.run_id)
        if holder is None or not holder_gone(holder):
            return False
        logger.info("taking over run %s from dead worker %s", state.run_id, holder)
        state.runtime.lease.took_over = holder
        await cp.release(state.run_id, holder)
        sent = time.monotonic()
        token = await cp.acquire(state.run_id, owner, ttl)
        if token is None:
            return False
    state.runtime.lease.owner, state.runtime.lease.token, state.runtime.lease.renewed = (
        owner,
        token,
        sent,
    )
    state.runtime.lease.granted_at = time.time()
    state.runtime.lease.ttl_s = ttl
    return True


async def lease_held(state: RunState) -> RunLeaseHeld:
    """The error for a run whose lease another worker holds."""
    assert state.checkpointer is not None
    holder = await state.checkpointer.lease_holder(state.run_id)
    return RunLeaseHeld(
        f"run {state.run_id} is being run by another worker right now ({holder})",
        hint=f"Wait for it to finish, or resubmit after its lease expires "
        f"(LOVIA_LEASE_TTL_S={lease_ttl():g} s without renewal).",
    )


def _lost(state: RunState) -> LeaseLost:
    assert state.runtime.lease.token is not None
    return lease_lost(state.run_id, state.runtime.lease.token)


async def _renew_once(state: RunState, ttl: float) -> bool:
    cp = state.checkpointer
    assert (
        cp is not None
        and state.runtime.lease.owner is not None
        and state.runtime.lease.token is not None
    )
    sent = time.monotonic()
    if not await cp.renew(state.run_id, state.runtime.lease.owner, state.runtime.lease.token, ttl):
        return False
    state.runtime.lease.renewed = max(state.runtime.lease.renewed, sent)
    return True


def lease_fresh(state: RunState) -> bool:
    """True when a side effect may go ahead without asking the store: the run holds no
    lease, or renewed it less than half its TTL ago (it then has at least that long
    left). Raises LeaseLost once the lease was lost. A sync check, so the common case
    awaits nothing; :func:`confirm_lease` does the rest."""
    lease = state.runtime.lease
    if lease.lost is not None:
        raise lease.lost
    return lease.token is None or time.monotonic() - lease.renewed < lease.ttl_s / 2


async def confirm_lease(state: RunState) -> None:
    """Raise LeaseLost unless the run's lease is still ours (call before a side effect).

    Trusts a fresh lease (:func:`lease_fresh`); otherwise renews it in the store, which
    fails when another worker took it.
    """
    if lease_fresh(state):
        return
    ttl = state.runtime.lease.ttl_s
    if not await _renew_once(state, ttl):
        state.runtime.lease.lost = _lost(state)
        raise state.runtime.lease.lost


@dataclass(eq=False)
class _Keeper:
    """Renews the lease of every run registered with it, in one store call per tick."""

    cp: Checkpointer
    ttl: float
    runs: dict[int, RunState] = field(default_factory=dict[int, RunState])
    task: asyncio.Task[None] | None = None


_Key = tuple[asyncio.AbstractEventLoop, int, float]
_keepers: dict[_Key, _Keeper] = {}
"""One keeper per (event loop, checkpointer, TTL); an entry lives while runs use it."""


async def _keep(key: _Key, keeper: _Keeper) -> None:
    try:
        while keeper.runs:
            await asyncio.sleep(keeper.ttl / 3)
            await _renew_all(keeper)
    finally:
        if _keepers.get(key) is keeper:
            del _keepers[key]


async def _renew_all(keeper: _Keeper) -> None:
    """One tick: renew every registered run's lease; a run whose lease was taken is
    told so and cancelled. A store error renews nobody this tick and is retried on the
    next one (the runs go on; :func:`confirm_lease` still checks before side effects)."""
    states = list(keeper.runs.values())
    leases = [(s.run_id, s.runtime.lease.owner or "", s.runtime.lease.token or 0) for s in states]
    sent = time.monotonic()
    try:
        lost = await renew_many(keeper.cp, leases, keeper.ttl)
    except Exception as exc:
        logger.warning(
            "could not renew the leases of %d run(s) (%s: %s); retrying in %.3g s",
            len(leases), type(exc).__name__, exc, keeper.ttl / 3,
        )  # fmt: skip
        return
    held: list[RunState] = []
    for state in states:
        if keeper.runs.get(id(state)) is not state:
            continue  # it ended while the renewal was in flight
        if state.run_id not in lost:
            state.runtime.lease.renewed = max(state.runtime.lease.renewed, sent)
            held.append(state)
            continue
        del keeper.runs[id(state)]
        logger.warning("run %s: lease lost to another worker; stopping", state.run_id)
        state.runtime.lease.lost = _lost(state)
        state.ctx.cancel_token.cancel("lease lost to another worker")
    await _honour_cancel_requests(keeper, held)


async def _honour_cancel_requests(keeper: _Keeper, states: list[RunState]) -> None:
    """Stop the runs a cancel request was stored for (``lovia cancel``, the web app)
    since this worker took them: one query for all of them, after the renewal. A store
    error is retried on the next tick."""
    live = [s for s in states if not s.ctx.cancel_token.cancelled]
    if not live:
        return
    try:
        asked = await cancel_requests(keeper.cp, [s.run_id for s in live])
    except Exception as exc:
        logger.warning(
            "could not read the cancel requests of %d run(s) (%s: %s)",
            len(live), type(exc).__name__, exc,
        )  # fmt: skip
        return
    for state in live:
        cancel_if_asked(state, asked.get(state.run_id))


def cancel_if_asked(state: RunState, mark: dict[str, Any] | None) -> bool:
    """Set the run's cancel token for a cancel request stored on its row since this
    worker took it (``mark``: the request, or None); whether it did."""
    if mark is None or not _after(mark, state.runtime.lease.granted_at):
        return False
    reason = str(mark.get("reason") or "cancel requested")
    logger.info("run %s: cancel requested (%s); stopping", state.run_id, reason)
    state.runtime.lease.cancel_request = mark
    state.ctx.cancel_token.cancel(reason)
    return True


def _after(mark: dict[str, Any], granted_at: float) -> bool:
    """Whether a stored request is newer than the lease (an older one was overridden
    by resuming the run; a request without a usable time counts as new)."""
    at = mark.get("at")
    return not isinstance(at, (int, float)) or isinstance(at, bool) or at >= granted_at


def _key(state: RunState) -> _Key:
    return (asyncio.get_running_loop(), id(state.checkpointer), state.runtime.lease.ttl_s)


def start_heartbeat(state: RunState) -> None:
    """Have the process's keeper for this store and TTL renew the run's lease (every
    third of the TTL) until :func:`stop_heartbeat`; starts the keeper when needed."""
    assert state.checkpointer is not None and state.runtime.lease.token is not None
    key = _key(state)
    keeper = _keepers.get(key)
    if keeper is None:
        keeper = _keepers[key] = _Keeper(state.checkpointer, state.runtime.lease.ttl_s)
    keeper.runs[id(state)] = state
    if keeper.task is None:
        # its own empty context: the keeper belongs to no run (no run's span or vars)
        keeper.task = key[0].create_task(
            _keep(key, keeper), name="lovia-lease-keeper", context=contextvars.Context()
        )


async def stop_heartbeat(state: RunState) -> None:
    """Stop renewing the run's lease; the keeper ends with its last run."""
    if state.checkpointer is None or state.runtime.lease.token is None:
        return
    key = _key(state)
    keeper = _keepers.get(key)
    if keeper is None or keeper.runs.pop(id(state), None) is None or keeper.runs:
        return
    del _keepers[key]
    if keeper.task is not None:
        keeper.task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await keeper.task
