"""``lovia cancel RUN``: store a cancel request on a run, queued, running or interrupted.

A queue worker (Redis Streams or Celery) reads it before it starts a delivery, so a
queued or interrupted run never starts again. A run executing right now, on a queue or
not, is stopped by its own worker: the lease heartbeat reads the cancel requests of its
runs every third of the lease TTL. A queue's ``cancel`` (``RunQueue.cancel`` /
``CeleryRunQueue.cancel``) stores the same request and also signals the worker at once.
"""

from __future__ import annotations

import argparse

from ..replay import open_store
from ..stores.lifecycle import request_cancel
from ._common import store_url
from ._out import Out, safe_name

__all__ = ["cancel"]

_SAID = {
    "queued": "cancelled before it started: no worker will start it",
    "running": "cancelled: no worker will start it again; a worker running it now stops "
    "it at its next lease renewal (within a third of LOVIA_LEASE_TTL_S)",
    "paused": "cancelled while it waited for approval",
    "ended": "already finished: nothing to cancel",
}


async def cancel(args: argparse.Namespace, out: Out) -> int:
    async with open_store(store_url(args), read_only=False) as db:
        before = await request_cancel(db, str(args.run), str(args.reason))
    if out.json_mode:
        out.json({"run_id": args.run, "was": before, "cancelled": before != "ended"})
        return 0
    out.line(f"run {safe_name(str(args.run))}: {_SAID[before]}")
    return 0
