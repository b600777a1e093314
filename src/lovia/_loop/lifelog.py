"""What a postmortem needs beside the transcript: failed model calls and approvals.

A model call that failed after its retries leaves a ``failed_call`` record next to the
view record of the request that was sent (same turn and attempt, its hash), so the
failure can be replayed and re-sent to another model. A decision on a tool call that
needed approval leaves an ``approval`` record: approved or denied, by whom, when, why.
Both are queued like every other record and written with the run's next write (a
failing run's last write included).
"""

from __future__ import annotations

import time
from typing import Literal

from .. import events as ev
from .._redact import excerpt, redact
from ..errors import ProviderError
from ..stores.records import ApprovalRecord, FailedCallRecord
from .state import RunState

__all__ = ["MESSAGE_CHARS", "approval_event", "note_approval", "note_failed_call"]

MESSAGE_CHARS = 2000
"""The provider's message is kept up to this many characters (redacted first)."""


def note_failed_call(
    state: RunState, failed: ev.ModelCallFailed, *, view_hash: str, attempt: int, retries: int
) -> None:
    """Queue the record of a failed model call (not for the run's own cancellation)."""
    if failed.error_type == "RunCancelled" or state.runtime.lease.lost is not None:
        return
    error = failed.error
    status = error.status if isinstance(error, ProviderError) else None
    state.note(
        FailedCallRecord(
            turn=state.progress.turn,
            attempt=attempt,
            view_hash=view_hash,
            error_type=failed.error_type,
            message=excerpt(redact(failed.message), MESSAGE_CHARS),
            status=status,
            retries=retries,
            provider=failed.provider,
            model=failed.model,
            at=time.time(),
        )
    )


def note_approval(
    state: RunState,
    call_id: str,
    tool: str,
    decision: Literal["approved", "denied"],
    actor: str,
    reason: str | None,
) -> ApprovalRecord:
    """Queue the record of one approval decision; returns it (for its event)."""
    record = ApprovalRecord(
        call_id=call_id, tool=tool, decision=decision, actor=actor, at=time.time(), reason=reason
    )
    state.note(record)
    return record


def approval_event(state: RunState, record: ApprovalRecord) -> ev.ApprovalDecided:
    """The event (a span event on the turn) for a recorded decision."""
    return ev.ApprovalDecided(
        **state.base(),
        call_id=record.call_id,
        tool=record.tool,
        decision=record.decision,
        actor=record.actor,
        reason=record.reason,
    )
