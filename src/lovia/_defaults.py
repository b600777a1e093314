"""Process-wide defaults: ``lovia.configure(store=URL)`` records every run without
touching call sites; and the library's default limits (``DEFAULT_MAX_TURNS``), here so the
engine and the facade read one value without importing each other.

Resolution for one run (``Runner.run``/``stream``/``run_sync``):

1. ``checkpointer=`` / ``session=`` given: they win.
2. ``store=`` given: that store (a URL or a store); ``store=None`` opts the run out.
3. otherwise the configured default: ``lovia.configure(store=...)``, else ``$LOVIA_STORE``.

The default store is the run's checkpointer, and its session store when a
``session_id`` is given.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Sequence
from enum import Enum
from typing import TYPE_CHECKING, Final

from .errors import UserError
from .spend import SpendLimit, set_spend_limits

if TYPE_CHECKING:
    from .stores.base import Store

__all__ = [
    "DEFAULT",
    "DEFAULT_MAX_TURNS",
    "Default",
    "configure",
    "default_store",
    "lease_ttl",
    "tune_gc",
]

ENV_STORE = "LOVIA_STORE"
ENV_LEASE_TTL = "LOVIA_LEASE_TTL_S"

SCALE_GC_THRESHOLD = 20_000
"""First-generation threshold :func:`tune_gc` sets (CPython's default is 700)."""

DEFAULT_MAX_TURNS = 50
"""Model steps per run when ``max_turns`` is not given."""


class Default(Enum):
    """The type of :data:`DEFAULT`: "not given, use the configured default"."""

    DEFAULT = "DEFAULT"

    def __repr__(self) -> str:
        return "DEFAULT"


DEFAULT: Final = Default.DEFAULT

_configured: Store | str | None | Default = DEFAULT


def configure(
    *,
    store: Store | str | None | Default = DEFAULT,
    spend_limits: Sequence[SpendLimit] | Default = DEFAULT,
) -> None:
    """Set process-wide defaults for every run.

    - ``store``: a store URL (``sqlite:///.lovia/lovia.db``, ``postgresql://…``) or a
      store object that every run checkpoints to (and keeps its session in, when a
      ``session_id`` is given) unless the call passes its own. ``None`` turns the
      default off, also ignoring ``$LOVIA_STORE``; ``DEFAULT`` goes back to
      ``$LOVIA_STORE``.
    - ``spend_limits``: :class:`~lovia.SpendLimit` s every run's model calls check
      (replacing those set before; ``[]`` removes them; ``DEFAULT`` keeps them). Given
      without ``store``, the store setting is left as it is.

    Telemetry is configured separately: ``lovia.telemetry.configure(...)``.
    """
    global _configured
    if not (store is None or isinstance(store, str | Default) or hasattr(store, "load")):
        raise UserError(
            f"configure(store=...) needs a store URL or a store, got {store!r}",
            hint='e.g. lovia.configure(store="sqlite:///.lovia/lovia.db")',
        )
    if not isinstance(spend_limits, Default):
        set_spend_limits(spend_limits)
        if isinstance(store, Default):
            return  # configure(spend_limits=...) alone leaves the store as it is
    _configured = store


def default_store() -> Store | str | None:
    """The store runs use when the call names none (None: runs are not recorded)."""
    if not isinstance(_configured, Default):
        return _configured
    return os.environ.get(ENV_STORE) or None


def lease_ttl() -> float:
    """Seconds a run lease lives without renewal: ``$LOVIA_LEASE_TTL_S``, default 60.

    A worker renews its lease every third of this; a lease whose holder died elsewhere
    expires after it. Queues use it to wait before handing a held run to another worker.
    """
    raw = os.environ.get(ENV_LEASE_TTL, "60")
    try:
        ttl = float(raw)
    except ValueError:
        ttl = float("nan")
    if not ttl > 0 or ttl == float("inf"):
        raise UserError(
            f"{ENV_LEASE_TTL}={raw!r} is not a number of seconds above 0",
            hint=f"e.g. export {ENV_LEASE_TTL}=60 (or unset it for the default, 60 s)",
        )
    return ttl


def tune_gc(threshold: int = SCALE_GC_THRESHOLD) -> tuple[int, int, int]:
    """Tune CPython's cyclic garbage collector for a process carrying thousands of runs.

    Each run in flight keeps ~150-250 container objects alive (state, transcript,
    request body, coroutines and async generators), so at 10,000 runs the heap holds
    over a million. CPython collects its youngest generation every 700 net allocations;
    objects of a run waiting its turn survive those passes, reach the oldest generation
    and trigger full passes over the whole heap, which cost more per model round-trip
    the more runs are in flight. A first-generation threshold of ``threshold`` (default
    20,000) lets those objects die young: the collector still runs and still frees
    reference cycles, just in larger batches.

    Call it once at start-up in a process that runs hundreds to thousands of runs at a
    time (a ``lovia.workers.Worker`` with a high ``concurrency``, a web server); ``import
    lovia`` never changes the collector. Returns the previous thresholds, so
    ``gc.set_threshold(*previous)`` undoes it.
    """
    if type(threshold) is not int or threshold < 1:  # untyped callers pass anything (bool too)
        raise UserError(
            f"tune_gc(threshold={threshold!r}) needs a positive number of allocations",
            hint=f"e.g. lovia.tune_gc() (threshold {SCALE_GC_THRESHOLD:,})",
        )
    previous = gc.get_threshold()
    _, older, oldest = previous
    gc.set_threshold(threshold, older, oldest)
    return previous
