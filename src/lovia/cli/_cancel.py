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
from ..stores.lifecycle import CANCEL_SAID, request_cancel
from ._common import store_url
from ._out import Out, safe_name

__all__ = ["cancel"]


async def cancel(args: argparse.Namespace, out: Out) -> int:
    async with open_store(store_url(args), read_only=False) as db:
        before = await request_cancel(db, str(args.run), str(args.reason))
    if out.json_mode:
        out.json({"run_id": args.run, "was": before, "cancelled": before != "ended"})
        return 0
    out.line(f"run {safe_name(str(args.run))}: {CANCEL_SAID[before]}")
    return 0
