"""Store protocols: Session (conversation history) and Checkpoint (run progress).

| | Session | Checkpoint |
|---|---|---|
| answers | what was said in this conversation so far? | how far did this run get? |
| key | ``session_id`` (yours) | ``run_id`` (unique per checkpointer) |
| holds | one segment per completed run | the run that may need resuming |
| written | once, when the run completes | after each model turn and tool result |

Both are append-only. A checkpoint is a sequence of small :class:`CheckpointRecord`
deltas (entries, tool-ledger changes, view records, run state), so its storage grows
with the number of entries, never with turns squared. Every record carries a schema
``version``; a store refuses records newer than it understands.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from ..errors import SchemaVersionError
from ..transcript import TranscriptEntry, entry_from_dict

__all__ = [
    "SCHEMA_VERSION",
    "CheckpointRecord",
    "Checkpointer",
    "RunInfo",
    "RunSnapshot",
    "RunStatus",
    "SessionStore",
    "Store",
    "check_version",
]

SCHEMA_VERSION = 1
"""Version of persisted records. Bump on any incompatible change and keep a corpus."""

RunStatus = Literal["running", "completed", "failed", "paused"]

RecordKind = Literal["entries", "ledger", "view", "state"]


class CheckpointRecord(BaseModel):
    """One append-only delta of a run's checkpoint.

    - ``entries``: ``data = {"entries": [entry dicts]}`` appended to the transcript
    - ``ledger``: ``data = {"call_id", "status": started|completed|failed, "key"}``
    - ``view``: ``data = ViewRecord dict`` for one model call
    - ``state``: ``data = {"turn", "usage", "agent", ...}`` run counters after a turn
    """

    model_config = ConfigDict(extra="forbid", defer_build=True)

    version: int = SCHEMA_VERSION
    kind: RecordKind
    data: dict[str, Any] = Field(default_factory=dict[str, Any])


@dataclass(slots=True, kw_only=True)
class RunInfo:
    """One row of ``lovia runs``: a run's identity and outcome."""

    run_id: str
    agent: str
    session_id: str | None = None
    status: RunStatus = "running"
    finish_reason: str | None = None
    error_type: str | None = None
    turns: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    started_at: float = 0.0
    ended_at: float | None = None
    trace_id: str | None = None
    span_id: str | None = None
    history_len: int = 0
    """Session entries that preceded this run (resume reloads exactly these)."""
    version: int = SCHEMA_VERSION
    extra: dict[str, Any] = field(default_factory=dict[str, Any])
    parent_run_id: str | None = None
    """Set for a child run (an agent run as a tool): the run whose tool call started it."""
    parent_call_id: str | None = None
    """The parent's tool call that started this child run."""


@dataclass(slots=True, kw_only=True)
class RunSnapshot:
    """A run as stored: its info, its records in order, and its result when finished."""

    info: RunInfo
    records: list[CheckpointRecord]
    result: dict[str, Any] | None = None

    def entries(self) -> list[TranscriptEntry]:
        """The run's transcript entries, in the order they were checkpointed."""
        return [
            entry_from_dict(e)
            for r in self.records
            if r.kind == "entries"
            for e in r.data.get("entries", ())
        ]


def check_version(version: int, what: str) -> None:
    """Fail fast on records written by a newer lovia."""
    if version > SCHEMA_VERSION:
        raise SchemaVersionError(
            f"{what} has schema version {version}; this lovia understands up to {SCHEMA_VERSION}",
            hint="Upgrade lovia to read this store (pip install -U lovia).",
        )


@runtime_checkable
class Checkpointer(Protocol):
    """Run progress, keyed by ``run_id``; append-only deltas."""

    async def begin(self, info: RunInfo) -> None:
        """Create the run (no-op when it exists: resume)."""
        ...

    async def append(self, run_id: str, records: Sequence[CheckpointRecord]) -> int:
        """Append deltas in order; return bytes written."""
        ...

    async def load(self, run_id: str) -> RunSnapshot | None: ...

    async def finish(self, info: RunInfo, result: dict[str, Any] | None) -> None:
        """Mark the run completed / failed / paused with its result."""
        ...

    async def acquire(self, run_id: str, owner: str, ttl_s: float) -> bool:
        """Take (or renew) the lease on a run; False when another owner holds it."""
        ...

    async def release(self, run_id: str, owner: str) -> None: ...

    async def lease_holder(self, run_id: str) -> str | None:
        """The owner of the unexpired lease on ``run_id``, if any."""
        ...

    async def list_runs(
        self,
        *,
        session_id: str | None = None,
        agent: str | None = None,
        status: str | None = None,
        limit: int = 50,
        parent_run_id: str | None = None,
        top_level: bool = False,
    ) -> list[RunInfo]:
        """Newest first; ``parent_run_id``: the child runs of that run; ``top_level``:
        only runs that are not child runs."""
        ...

    async def delete_run(self, run_id: str) -> None: ...

    async def prune(self, older_than_s: float) -> int:
        """Delete finished runs that ended more than ``older_than_s`` ago; return count."""
        ...

    async def find_run_by_trace(self, trace_id: str) -> RunInfo | None:
        """The newest run recorded with this OpenTelemetry trace id (``lovia replay``)."""
        ...


@runtime_checkable
class SessionStore(Protocol):
    """Conversation history, keyed by ``session_id``; one segment per completed run."""

    async def load_session(self, session_id: str) -> list[TranscriptEntry]: ...

    async def append_segment(
        self, session_id: str, run_id: str, entries: Sequence[TranscriptEntry]
    ) -> bool:
        """Write a run's segment once; False (and no change) if it already exists."""
        ...


@runtime_checkable
class Store(Checkpointer, SessionStore, Protocol):
    """A store that is both (every built-in store is)."""

    url: str

    async def aclose(self) -> None: ...
