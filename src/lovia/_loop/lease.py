"""The run lease: exactly one worker runs a given run_id at a time, and only it writes.

A worker takes the lease before it starts or resumes a run and renews it in the
background (every third of the TTL) while the run goes on. A lease left by a worker that
died on this same host (its pid is gone) is taken over at once; elsewhere it expires
after ``LOVIA_LEASE_TTL_S`` seconds (default 60).

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
import logging
import os
import secrets
import socket
import time

from .._defaults import lease_ttl
from ..errors import LeaseLost, RunLeaseHeld
from ..stores.base import lease_lost
from .state import RunState

__all__ = [
    "confirm_lease",
    "lease_held",
    "start_heartbeat",
    "stop_heartbeat",
    "take_lease",
]

logger = logging.getLogger("lovia.lease")
_HOST = socket.gethostname()


def _owner_id() -> str:
    return f"{_HOST}:{os.getpid()}:{secrets.token_hex(4)}"


def _dead_local(owner: str) -> bool:
    """True when ``owner`` is a process on this host that no longer exists."""
    host, _, rest = owner.partition(":")
    pid_text = rest.split(":", 1)[0]
    if host != _HOST or not pid_text.isdigit():
        return False
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


async def take_lease(state: RunState) -> bool:
    """Take the run's lease (and its fencing token); False when the store refused it:
    another live worker holds it, or the run is completed."""
    cp = state.checkpointer
    assert cp is not None
    owner, ttl = _owner_id(), lease_ttl()
    sent = time.monotonic()
    token = await cp.acquire(state.run_id, owner, ttl)
    if token is None:
        holder = await cp.lease_holder(state.run_id)
        if holder is None or not _dead_local(holder):
            return False
        logger.info("taking over run %s from dead worker %s", state.run_id, holder)
        await cp.release(state.run_id, holder)
        sent = time.monotonic()
        token = await cp.acquire(state.run_id, owner, ttl)
        if token is None:
            return False
    state.lease_owner, state.lease_token, state.lease_renewed = owner, token, sent
    state.lease_ttl_s = ttl
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
    assert state.lease_token is not None
    return lease_lost(state.run_id, state.lease_token)


async def _renew_once(state: RunState, ttl: float) -> bool:
    cp = state.checkpointer
    assert cp is not None and state.lease_owner is not None and state.lease_token is not None
    sent = time.monotonic()
    if not await cp.renew(state.run_id, state.lease_owner, state.lease_token, ttl):
        return False
    state.lease_renewed = max(state.lease_renewed, sent)
    return True


async def confirm_lease(state: RunState) -> None:
    """Raise LeaseLost unless the run's lease is still ours (call before a side effect).

    Trusts a renewal younger than half the TTL (the lease then has at least that long
    left); otherwise renews it in the store, which fails when another worker took it.
    """
    if state.lease_lost is not None:
        raise state.lease_lost
    if state.lease_token is None:
        return
    ttl = state.lease_ttl_s
    if time.monotonic() - state.lease_renewed < ttl / 2:
        return
    if not await _renew_once(state, ttl):
        state.lease_lost = _lost(state)
        raise state.lease_lost


async def _heartbeat(state: RunState, ttl: float) -> None:
    while True:
        await asyncio.sleep(ttl / 3)
        if not await _renew_once(state, ttl):
            logger.warning("run %s: lease lost to another worker; stopping", state.run_id)
            state.lease_lost = _lost(state)
            state.ctx.cancel_token.cancel("lease lost to another worker")
            return


def start_heartbeat(state: RunState) -> asyncio.Task[None]:
    return asyncio.get_running_loop().create_task(_heartbeat(state, state.lease_ttl_s))


async def stop_heartbeat(task: asyncio.Task[None] | None) -> None:
    if task is None:
        return
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task
