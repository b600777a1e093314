"""Pin: turn a recorded run (or one turn of it) into a :class:`Case`."""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit, urlunsplit

from .._redact import MASK, redact
from .._version import __version__
from ..errors import UserError
from ..replay import RunData, StoreLike, load_run, open_store, require_views
from ..transcript import (
    ReasoningEntry,
    TextEntry,
    ToolCallEntry,
    ToolResultEntry,
    TranscriptEntry,
    entry_from_dict,
    entry_to_dict,
)
from ..usage import Usage
from ..view.record import ViewRecord, stored_records
from ._case import Case, PinnedResponse, PinnedToolResult

__all__ = ["mask_url", "parse_ref", "pin", "pin_run", "safe_name"]

_RESPONSE_KINDS = (TextEntry, ReasoningEntry, ToolCallEntry)


def parse_ref(ref: str) -> tuple[str, int | None]:
    """``RUN`` or ``RUN:TURN`` -> (run id, turn or None)."""
    run, sep, turn = ref.rpartition(":")
    if not sep or not turn.isdigit():
        return ref, None
    if not run:
        raise UserError(f"{ref!r} names no run", hint="Write RUN or RUN:TURN, e.g. 3f9c2a:4.")
    return run, int(turn)


_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


def safe_name(name: str) -> str:
    """A case name usable as one folder name: no separators, no leading dot."""
    clean = _UNSAFE.sub("_", name).lstrip(".")[:120]
    if not clean:
        raise UserError(f"{name!r} cannot name a case folder", hint="Pass --name NAME.")
    return clean


def mask_url(url: str) -> str:
    """A store URL with its password (and any key-shaped text) masked."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return redact(url)
    if parts.password:
        host = parts.hostname or ""
        if parts.port:
            host = f"{host}:{parts.port}"
        netloc = f"{parts.username or ''}:{MASK}@{host}"
        url = urlunsplit(parts._replace(netloc=netloc))
    return redact(url)


async def pin(
    ref: str,
    store: StoreLike,
    *,
    turn: int | None = None,
    to: str | Path | None = None,
    name: str | None = None,
) -> Case:
    """Pin run ``ref`` (``RUN`` or ``RUN:TURN``; a unique id prefix works) as a case.

    With ``to`` the case is also written to ``to/<name>/``. Secrets stay redacted: the
    store URL's password is masked and key-shaped text in the recorded data is too (a
    case whose data had to be masked says so in its ``notes``).
    """
    run_id, ref_turn = parse_ref(ref)
    turn = turn if turn is not None else ref_turn
    async with open_store(store) as db:
        run = await load_run(run_id, db)
    require_views(run)
    url = store if isinstance(store, str) else f"<{type(store).__name__}>"
    case = pin_run(run, turn=turn, store_url=mask_url(url), name=safe_name(name) if name else None)
    if to is not None:
        case.save(Path(to) / case.name)
    return case


def pin_run(
    run: RunData, *, turn: int | None = None, store_url: str = "", name: str | None = None
) -> Case:
    """The case of a loaded run (``turn``: start at that turn; default: the first)."""
    views = run.views
    turns = sorted({v.turn for v in stored_records(views)})
    start = turn if turn is not None else turns[0]
    if start not in turns:
        raise UserError(
            f"run {run.info.run_id} has no view of turn {start}",
            hint=f"Its turns are {turns[0]}..{turns[-1]}.",
        )
    pinned = [views[i] for i, v in enumerate(stored_records(views)) if v.turn >= start]
    notes: list[str] = []
    transcript = _redacted(run.transcript, notes)
    history = len(run.history)
    before = sum(1 for e in run.entries if e.turn < start)
    first = pinned[0]
    return Case(
        name=name
        or safe_name(run.info.run_id if turn is None else f"{run.info.run_id}-turn{start}"),
        source=_source(run, turn, store_url),
        start_turn=start,
        start_entries=history + before,
        start_usage=_usage_before(run, start),
        start_agent=first.agent,
        agent={
            "name": first.agent,
            "model": first.model,
            "provider": first.provider,
            "system": redact(first.system),
            "tools": first.tools,
            "settings": first.settings,
            "output_schema": first.output_schema,
        },
        transcript=transcript,
        views=[_redacted_view(v, notes) for v in pinned],
        responses=_responses(run, pinned),
        tool_results=_tool_results(run.entries, notes),
        expected=_expected(run),
        notes=sorted(set(notes)),
    )


def _source(run: RunData, turn: int | None, store_url: str) -> dict[str, Any]:
    info = run.info
    return {
        "run_id": info.run_id,
        "trace_id": info.trace_id,
        "span_id": info.span_id,
        "session_id": info.session_id,
        "parent_run_id": info.parent_run_id,
        "agent": info.agent,
        "status": info.status,
        "turn": turn,
        "store": store_url,
        "pinned_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "lovia_version": __version__,
    }


def _expected(run: RunData) -> dict[str, Any]:
    result = run.result or {}
    return {
        "output": result.get("output"),
        "finish_reason": result.get("finish_reason", run.info.finish_reason),
        "status": run.info.status,
        "turns": result.get("turns", run.info.turns),
        "final_agent": result.get("final_agent"),
    }


def _usage_before(run: RunData, start: int) -> Usage:
    usage = Usage()
    for state in run.states:
        if state.turn < start:
            usage = state.usage
    return usage.copy()


def _turn_usage(run: RunData) -> dict[int, Usage]:
    """Each turn's usage (the cumulative usage of its last state record, differenced)."""
    last: dict[int, Usage] = {}
    for state in run.states:
        last[state.turn] = state.usage
    out: dict[int, Usage] = {}
    before = Usage()
    for turn in sorted(last):
        out[turn] = last[turn].minus(before)
        before = last[turn]
    return out


def _responses(run: RunData, views: Sequence[ViewRecord]) -> list[PinnedResponse]:
    by_turn: dict[int, list[str]] = {}
    for entry in run.entries:
        if isinstance(entry, _RESPONSE_KINDS):
            by_turn.setdefault(entry.turn, []).append(entry.id)
    usage = _turn_usage(run)
    final = (run.result or {}).get("finish_reason")
    out: list[PinnedResponse] = []
    for index, view in enumerate(views):
        retried = index + 1 < len(views) and views[index + 1].turn == view.turn
        if retried:
            out.append(
                PinnedResponse(
                    turn=view.turn, attempt=view.attempt, entry_ids=(), error="context_overflow"
                )
            )
            continue
        ids = tuple(by_turn.get(view.turn, ()))
        calls = any(isinstance(e, ToolCallEntry) for e in run.entries if e.id in set(ids))
        used = usage.get(view.turn, Usage())
        reason = (
            "tool_calls" if calls else str(final or "stop") if index == len(views) - 1 else "stop"
        )
        out.append(
            PinnedResponse(
                turn=view.turn,
                attempt=view.attempt,
                entry_ids=ids,
                usage=Usage(
                    input_tokens=used.input_tokens,
                    output_tokens=used.output_tokens,
                    cache_read_tokens=used.cache_read_tokens,
                    cache_write_tokens=used.cache_write_tokens,
                    reasoning_tokens=used.reasoning_tokens,
                    requests=1,
                    cost_usd=used.cost_usd,
                ),
                finish_reason=reason,
            )
        )
    return out


def _tool_results(entries: Sequence[TranscriptEntry], notes: list[str]) -> list[PinnedToolResult]:
    calls = {e.call_id: e for e in entries if isinstance(e, ToolCallEntry)}
    out: list[PinnedToolResult] = []
    for entry in entries:
        if not isinstance(entry, ToolResultEntry):
            continue
        call = calls.get(entry.call_id)
        if call is None:
            continue
        content = redact(entry.content)
        if content != entry.content:
            notes.append(f"a secret was masked in the result of tool call {entry.call_id}")
        out.append(
            PinnedToolResult(
                call_id=entry.call_id,
                name=entry.name,
                arguments=redact(call.arguments),
                content=content,
                is_error=entry.is_error,
                turn=entry.turn,
            )
        )
    return out


def _scrub(value: Any) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: _scrub(v) for k, v in cast(dict[str, Any], value).items()}
    if isinstance(value, list):
        return [_scrub(v) for v in cast(list[Any], value)]
    return value


def _redacted(entries: Sequence[TranscriptEntry], notes: list[str]) -> list[TranscriptEntry]:
    out: list[TranscriptEntry] = []
    for entry in entries:
        data = entry_to_dict(entry)
        clean = _scrub(data)
        if clean != data:
            notes.append(f"a secret was masked in transcript entry {entry.id}")
            out.append(entry_from_dict(clean))
        else:
            out.append(entry)
    return out


def _redacted_view(view: ViewRecord, notes: list[str]) -> ViewRecord:
    data = view.to_data()
    clean = _scrub(data)
    if clean == data:
        return view
    notes.append(f"a secret was masked in the view of turn {view.turn}")
    return ViewRecord.from_data(clean)
