"""The run lease: exactly one worker runs a given run_id at a time.

A worker takes the lease before it starts or resumes a run and renews it in the
background (every third of the TTL) while the run goes on. A lease left by a worker that
died on this same host (its pid is gone) is taken over at once; elsewhere it expires
after ``LOVIA_LEASE_TTL_S`` seconds (default 60). A worker that loses its lease cancels
its run, leaving the checkpoint to the new holder.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import socket

from ..errors import RunLeaseHeld
from .state import RunState

__all__ = ["lease_ttl", "start_heartbeat", "stop_heartbeat", "take_lease"]

logger = logging.getLogger("lovia.lease")
_HOST = socket.gethostname()


def lease_ttl() -> float:
    return float(os.environ.get("LOVIA_LEASE_TTL_S", "60"))


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


async def take_lease(state: RunState) -> None:
    cp = state.checkpointer
    assert cp is not None
    owner, ttl = _owner_id(), lease_ttl()
    if not await cp.acquire(state.run_id, owner, ttl):
        holder = await cp.lease_holder(state.run_id)
        if holder is not None and _dead_local(holder):
            logger.info("taking over run %s from dead worker %s", state.run_id, holder)
            await cp.release(state.run_id, holder)
        if holder is None or _dead_local(holder):
            acquired = await cp.acquire(state.run_id, owner, ttl)
        else:
            acquired = False
        if not acquired:
            raise RunLeaseHeld(
                f"run {state.run_id} is being run by another worker right now ({holder})",
                hint=f"Wait for it to finish, or resubmit after its lease expires "
                f"(LOVIA_LEASE_TTL_S={ttl:g} s without renewal).",
            )
    state.lease_owner = owner


async def _renew(state: RunState, ttl: float) -> None:
    cp = state.checkpointer
    assert cp is not None and state.lease_owner is not None
    while True:
        await asyncio.sleep(ttl / 3)
        if not await cp.acquire(state.run_id, state.lease_owner, ttl):
            logger.warning("run %s: lease lost to another worker; cancelling", state.run_id)
            state.ctx.cancel_token.cancel("lease lost to another worker")
            return


def start_heartbeat(state: RunState) -> asyncio.Task[None]:
    return asyncio.get_running_loop().create_task(_renew(state, lease_ttl()))


async def stop_heartbeat(task: asyncio.Task[None] | None) -> None:
    if task is None:
        return
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task
