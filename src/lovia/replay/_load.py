"""Load a stored run: its transcript (session history + checkpoint entries) and views.

The transcript a run's views were built from is the session history that preceded
the run (the first ``RunInfo.history_len`` entries of its session) followed by the
entries the run appended, as folded from its checkpoint records.
"""

from __future__ import annotations

import difflib
import time
from collections.abc import AsyncGenerator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar, overload

from ..errors import LoviaError, RunNotFound
from ..stores.base import PRUNED_KEY, ReadOnlyStore, RunInfo, RunSnapshot, Store, Tombstone
from ..stores.lifecycle import Life, life_of
from ..stores.records import StateRecord, read_records
from ..transcript import TranscriptEntry
from ..view.record import ResolvedRecords, ViewRecord, view_records

__all__ = [
    "NoViewRecords",
    "RunData",
    "StoreLike",
    "load_run",
    "open_store",
    "resolve_run_id",
    "run_from_snapshot",
]

StoreLike = ReadOnlyStore | str
"""A store object (a read-only one will do), or a store URL (``sqlite:///…``,
``postgresql://…``, ``memory://``)."""

RECENT_RUNS = 200
"""How many recent runs are searched for id prefixes and close matches."""


class NoViewRecords(LoviaError):
    """The run exists but has no view records to replay."""


@dataclass(slots=True, kw_only=True)
class RunData:
    """One stored run, as replay sees it."""

    info: RunInfo
    history: list[TranscriptEntry]
    """Session entries that preceded the run (what its first view could include)."""
    entries: list[TranscriptEntry]
    """Entries the run appended (from its checkpoint records)."""
    views: Sequence[ViewRecord]
    """One self-contained record per model call, in call order (overflow retries
    included); stored delta records are resolved against the ones before them when
    read (:class:`~lovia.view.record.ResolvedRecords`: loading is linear in the run's
    length; ``stored_records(views)`` reads turns and attempts without resolving)."""
    result: dict[str, Any] | None = None
    session_copies: dict[str, TranscriptEntry] = field(default_factory=dict[str, TranscriptEntry])
    """This run's entries as written to its session segment (a second copy, for diffs)."""
    states: list[StateRecord] = field(default_factory=list[StateRecord])
    """The run's ``state`` checkpoint records (turn, cumulative usage, agent), in order."""
    life: Life | None = None
    """Its lifecycle state, attempts, approvals and failed model calls (``load_run``)."""

    @property
    def transcript(self) -> list[TranscriptEntry]:
        """Session history followed by the run's own entries."""
        return [*self.history, *self.entries]


_R = TypeVar("_R", bound=ReadOnlyStore)


@overload
def open_store(target: str, *, read_only: bool = True) -> AbstractAsyncContextManager[Store]: ...
@overload
def open_store(target: _R, *, read_only: bool = True) -> AbstractAsyncContextManager[_R]: ...
def open_store(
    target: StoreLike, *, read_only: bool = True
) -> AbstractAsyncContextManager[ReadOnlyStore]:
    """Yield ``target`` itself, or open the store its URL names (closed on exit):
    read-only unless the caller writes (``lovia prune``, the web app's chat/approvals)."""
    return _opened(target, read_only)


@asynccontextmanager
async def _opened(target: StoreLike, read_only: bool) -> AsyncGenerator[ReadOnlyStore]:
    if not isinstance(target, str):
        yield target
        return
    from ..stores import store

    opened = store(target, read_only=read_only)
    try:
        yield opened
    finally:
        await opened.aclose()


async def resolve_run_id(run_id: str, db: ReadOnlyStore) -> str:
    """``run_id`` itself, ``last`` (the most recent run), or the one recent run it is a
    unique prefix of.

    Raises :class:`RunNotFound` naming the closest recent ids when nothing matches.
    """
    if await db.load(run_id) is not None:
        return run_id
    recent = [info.run_id for info in await db.list_runs(limit=RECENT_RUNS)]
    if run_id == "last" and recent:
        return recent[0]
    prefixed = [rid for rid in recent if rid.startswith(run_id)]
    if len(prefixed) == 1 and run_id:
        return prefixed[0]
    await _raise_if_pruned(run_id, db)
    raise _not_found(run_id, recent, prefixed)


async def _raise_if_pruned(run_id: str, db: ReadOnlyStore) -> None:
    """A run ``prune`` deleted is "pruned", not "no run" (its tombstone says when)."""
    lookup = getattr(db, "tombstone", None)  # the bundled stores keep tombstones
    found = await lookup(run_id) if lookup is not None else None
    if not isinstance(found, Tombstone):
        return
    ended = "" if found.ended_at is None else f", ended {_when(found.ended_at)}"
    raise RunNotFound(
        f"run {run_id!r} was pruned at {_when(found.pruned_at)} ({found.status}{ended}); "
        "only its tombstone is left",
        hint="Its transcript, views and tool ledger were deleted by `lovia prune` (or "
        "store.prune()); its session segment, if any, is still in the session "
        "(`lovia show` of a later run of that session). Keep runs you may replay longer "
        "(--older-than).",
    )


def _when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


def _not_found(run_id: str, recent: list[str], prefixed: list[str]) -> RunNotFound:
    if len(prefixed) > 1:
        return RunNotFound(
            f"run id prefix {run_id!r} is ambiguous",
            hint=f"It matches {', '.join(prefixed[:5])}; give more characters.",
        )
    close = difflib.get_close_matches(run_id, recent, n=3, cutoff=0.5)
    if close:
        hint = f"Did you mean {' or '.join(close)}? (`lovia runs` lists recent runs)"
    elif recent:
        hint = "List recent runs with `lovia runs`; check --store / $LOVIA_STORE."
    else:
        hint = "This store has no runs; check --store / $LOVIA_STORE."
    return RunNotFound(f"no run {run_id!r} in this store", hint=hint)


async def load_run(run_id: str, db: ReadOnlyStore) -> RunData:
    """Load a run's info, transcript and view records (``run_id`` may be a prefix)."""
    run_id = await resolve_run_id(run_id, db)
    snapshot = await db.load(run_id)
    if snapshot is None:  # deleted between the two reads
        raise RunNotFound(f"no run {run_id!r} in this store", hint="It may have been pruned.")
    info = snapshot.info
    session = None if info.session_id is None else await db.load_session(info.session_id)
    return run_from_snapshot(snapshot, session, await life_of(db, info, snapshot))


def run_from_snapshot(
    snapshot: RunSnapshot, session: list[TranscriptEntry] | None, life: Life | None = None
) -> RunData:
    """A loaded snapshot (its session's entries, its lifecycle) as :class:`RunData`: the
    CPU-bound half of :func:`load_run`, which a server may run off its event loop."""
    info = snapshot.info
    history: list[TranscriptEntry] = []
    copies: dict[str, TranscriptEntry] = {}
    if session is not None:
        history = session[: info.history_len]
        copies = {e.id: e for e in session[info.history_len :] if e.run_id == info.run_id}
    entries, views = snapshot.entries(), ResolvedRecords(view_records(snapshot.records))
    return RunData(
        info=info,
        history=history,
        entries=entries,
        views=views,
        result=snapshot.result,
        session_copies=copies,
        states=[r for r in read_records(snapshot, ("state",)) if isinstance(r, StateRecord)],
        life=life,
    )


def require_views(run: RunData) -> None:
    """Raise :class:`NoViewRecords` when the run has nothing to replay."""
    if run.views:
        return
    pruned = run.info.extra.get(PRUNED_KEY)
    if pruned is not None:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(pruned)))
        raise NoViewRecords(
            f"run {run.info.run_id}'s checkpoint records were dropped at {when} "
            "(pruned after it finished); its views cannot be replayed",
            hint="Its summary row stays (`lovia runs`); `lovia show` prints its "
            "transcript if its session kept it. Keep the records of runs you may need "
            "to replay: prune_records=False, or a longer `lovia prune --older-than`.",
        )
    raise NoViewRecords(
        f"run {run.info.run_id} has no view records",
        hint="It was run without a checkpointer, by an older lovia, or its checkpoint "
        "was pruned; `lovia show` still prints its transcript if the session kept it.",
    )
