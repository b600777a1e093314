"""A task queue for runs on Redis Streams: ``RunQueue`` submits, ``Worker`` executes.

Needs the ``redis`` extra (``pip install 'lovia[redis]'``). A task is one stream entry
(JSON: agent name, input, ``run_id``, ``session_id``, ``deps_key``); workers read it
through one consumer group and run it with the shared store as checkpointer and
session store. Correctness comes from the store, not from the queue:

- A worker runs only the agents of its registry (``agents=``, :class:`AgentRegistry`):
  a task naming anything else is refused and dead-lettered, nothing imported.
- ``run_id`` is the idempotency key: a completed run returns its stored result without
  a model call, an unfinished one resumes from its checkpoint, and the same input
  delivered again is recognised as a retry. Delivering a task twice is harmless.
- The store's lease lets one worker run a ``run_id`` at a time (``RunLeaseHeld``
  otherwise: that delivery stays unacknowledged and is tried again later).
- A worker acknowledges a task when its run ended: completed, failed for a reason a
  retry would not fix, or paused for approval (the caller resumes it with
  ``approvals=``). A retryable provider error, a store error, an unexpected exception
  or a cancelled run leaves it pending.
- Live workers refresh their in-flight tasks every few seconds (``XCLAIM ... JUSTID``);
  a task idle for ``claim_idle_s`` belongs to a dead (or stuck) worker and another one
  takes it over (``XAUTOCLAIM``). The default, the lease TTL + 10 s, lets the dead
  worker's lease expire first, so the run resumes from its last checkpoint at once.
"""

from __future__ import annotations

from .queue import RunQueue
from .registry import AgentRegistry, UnknownAgent
from .worker import Worker

__all__ = ["AgentRegistry", "RunQueue", "UnknownAgent", "Worker"]
