"""``lovia cancel RUN``: store a cancel request on a run, queued, running or interrupted.

A queue worker (Redis Streams or Celery) reads it before it starts a delivery, so a
queued or interrupted run never starts again. A run executing right now is stopped by
its queue's ``cancel`` (``RunQueue.cancel`` / ``CeleryRunQueue.cancel``), which stores
the same request and signals its worker.
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
    "running": "cancelled: no worker will start it again; a worker running it now is "
    "stopped through its queue (RunQueue.cancel / CeleryRunQueue.cancel)",
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
