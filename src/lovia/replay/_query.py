"""Queries over stored runs shared by the CLI and ``lovia web`` (one data layer).

- :func:`info_dict`: a run's summary row as JSON.
- :func:`turns`: the transcript grouped by turn, each tool call paired with its result,
  marks for errors / handoffs / mailbox messages / approvals, usage and cost per turn.
- :func:`render_bodies`: the exact provider request body of views (``--format request``).
- :func:`whatif` / :func:`recorded_answer`: re-send a view to another model
  (``lovia replay --model``) beside what the run recorded.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import UserError
from ..model import ModelResponse, Provider
from ..stores.base import UNPRICED_KEY, USAGE_MISSING_KEY, RunInfo
from ..stores.lifecycle import Life
from ..stores.records import FailedCallRecord
from ..transcript import ToolCallEntry, ToolResultEntry, TranscriptEntry, entry_to_dict
from ..usage import Usage
from ._diff import entry_text
from ._load import RunData
from ._policy import WhatIfPolicy
from ._render import provider_for, redact, render_request, rerun
from ._views import ReplayedView

__all__ = [
    "Item",
    "Turn",
    "brief",
    "entry_label",
    "failed_call",
    "info_dict",
    "recorded_answer",
    "render_bodies",
    "response_dict",
    "run_dict",
    "turns",
    "whatif",
    "whatif_dict",
]


def run_dict(info: RunInfo, life: Life, *, full: bool = False) -> dict[str, Any]:
    """A run's info with its lifecycle (``state`` and why; with ``full``: attempts,
    approvals, failed model calls): the JSON every surface (CLI, web) prints."""
    out = info_dict(info)
    data = life.to_dict()
    keep = data if full else {k: v for k, v in data.items() if k not in _FULL_ONLY}
    out.update({("state_detail" if k == "detail" else k): v for k, v in keep.items()})
    return out


_FULL_ONLY = ("attempts", "approvals", "failed_calls", "active_s")
"""Read from the run's records: only where they are loaded (``lovia show``, a run page)."""


def failed_call(run: RunData, view: ReplayedView) -> FailedCallRecord | None:
    """The failure of the model call ``view`` was sent in, when that call failed."""
    calls = run.life.failed_calls if run.life is not None else []
    return next(
        (
            f
            for f in calls
            if f.view_hash == view.record.hash and f.turn == view.turn and f.attempt == view.attempt
        ),
        None,
    )


def info_dict(info: RunInfo) -> dict[str, Any]:
    """A run's info as JSON."""
    duration = None if info.ended_at is None else max(0.0, info.ended_at - info.started_at)
    return {
        "run_id": info.run_id,
        "agent": info.agent,
        "session_id": info.session_id,
        "status": info.status,
        "finish_reason": info.finish_reason,
        "error_type": info.error_type,
        "error": info.extra.get("error"),
        "hint": info.extra.get("hint"),
        "model": info.extra.get("model"),
        "turns": info.turns,
        "input_tokens": info.input_tokens,
        "output_tokens": info.output_tokens,
        "cost_usd": info.cost_usd,
        "started_at": info.started_at,
        "ended_at": info.ended_at,
        "duration_s": duration,
        "trace_id": info.trace_id,
        "parent_run_id": info.parent_run_id,
        "parent_call_id": info.parent_call_id,
        "records_pruned_at": info.extra.get("records_pruned_at"),
        "unpriced": int(info.extra.get(UNPRICED_KEY, 0)),
        "usage_missing": bool(info.extra.get(USAGE_MISSING_KEY, False)),
        "labels": dict(info.extra.get("labels") or {}),
        "repriced": info.extra.get("repriced"),
    }


@dataclass(slots=True, kw_only=True)
class Item:
    """One line of a turn: an entry, and for a tool call its result."""

    entry: TranscriptEntry
    label: str
    text: str
    result: ToolResultEntry | None = None
    mark: str = ""
    """``error``, ``handoff``, ``mailbox``, ``reminder``, ``approval`` (waiting) or ""."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "mark": self.mark,
            "text": self.text,
            "entry": entry_to_dict(self.entry),
            "result": None if self.result is None else entry_to_dict(self.result),
        }


@dataclass(slots=True, kw_only=True)
class Turn:
    """The entries of one turn of one agent, with the turn's own usage."""

    turn: int
    agent: str
    items: list[Item] = field(default_factory=list[Item])
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    unpriced: int = 0
    """Model calls of this turn whose cost is unknown (``cost_usd`` is a lower bound)."""
    usage_missing: bool = False
    """A model call of this turn reported no usage (its tokens are unknown)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "turn": self.turn,
            "agent": self.agent,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": self.cost_usd,
            "unpriced": self.unpriced,
            "usage_missing": self.usage_missing,
            "items": [i.to_dict() for i in self.items],
        }


def entry_label(entry: TranscriptEntry) -> str:
    """Who an entry speaks as (``user``, ``user[mailbox]``, ``assistant``, ``tool``…),
    the same in ``lovia show`` and ``lovia web``."""
    if entry.type == "input":
        origin = str(getattr(entry, "origin", "input"))
        role = str(getattr(entry, "role", "user"))
        return role if origin in ("input", "history") else f"{role}[{origin}]"
    return {
        "system": "system",
        "text": "assistant",
        "reasoning": "reasoning",
        "tool_call": "tool",
        "tool_result": "result",
        "handoff": "handoff",
    }[entry.type]


def _mark(entry: TranscriptEntry, result: ToolResultEntry | None, paused: bool) -> str:
    if entry.type == "handoff":
        return "handoff"
    if entry.type == "input":
        origin = str(getattr(entry, "origin", "input"))
        return "mailbox" if origin == "mailbox" else ("reminder" if origin != "input" else "")
    if isinstance(entry, ToolResultEntry):
        return "error" if entry.is_error else ""
    if isinstance(entry, ToolCallEntry):
        if result is None:
            return "approval" if paused else "error"
        return "error" if result.is_error else ""
    return ""


def _open(entry: TranscriptEntry, result: ToolResultEntry | None) -> bool:
    return isinstance(entry, ToolCallEntry) and result is None


def in_flight(run: RunData) -> bool:
    """True while the run's holder may still be working (its calls without a result are
    running, not failed)."""
    return run.info.status == "running"


def _usage_by_turn(run: RunData) -> dict[int, TurnUsage]:
    """Each turn's own tokens and cost (the state records hold running totals)."""
    out: dict[int, TurnUsage] = {}
    before = Usage()
    for state in run.states:
        usage = state.usage
        turn = state.turn
        delta = usage.minus(before)
        used = delta.input_tokens or delta.output_tokens or delta.cost_usd or delta.unpriced
        if used or (delta.requests and usage.missing):
            old = out.get(turn, TurnUsage())
            out[turn] = TurnUsage(
                old.input_tokens + delta.input_tokens,
                old.output_tokens + delta.output_tokens,
                old.cost_usd + delta.cost_usd,
                old.unpriced + delta.unpriced,
                # a call that reported no usage: this turn's tokens are not all known
                old.missing or (usage.missing and not before.missing),
            )
        before = usage
    return out


@dataclass(frozen=True, slots=True)
class TurnUsage:
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    unpriced: int = 0
    missing: bool = False


def turns(run: RunData) -> list[Turn]:
    """The run's transcript grouped by (turn, agent); tool results under their calls."""
    entries = run.entries or list(run.session_copies.values())
    results = {e.call_id: e for e in entries if isinstance(e, ToolResultEntry)}
    calls = {e.call_id for e in entries if isinstance(e, ToolCallEntry)}
    paused = run.info.status == "paused"
    running = in_flight(run)
    usage = _usage_by_turn(run)
    out: list[Turn] = []
    for entry in entries:
        if isinstance(entry, ToolResultEntry) and entry.call_id in calls:
            continue
        if not out or (out[-1].turn, out[-1].agent) != (entry.turn, entry.agent):
            own = usage.pop(entry.turn, None)
            out.append(
                Turn(
                    turn=entry.turn,
                    agent=entry.agent,
                    input_tokens=None if own is None else own.input_tokens,
                    output_tokens=None if own is None else own.output_tokens,
                    cost_usd=None if own is None else own.cost_usd,
                    unpriced=0 if own is None else own.unpriced,
                    usage_missing=own is not None and own.missing,
                )
            )
        result = results.get(entry.call_id) if isinstance(entry, ToolCallEntry) else None
        mark = "running" if running and _open(entry, result) else _mark(entry, result, paused)
        out[-1].items.append(
            Item(
                entry=entry,
                label=entry_label(entry),
                text=entry_text(entry),
                result=result,
                mark=mark,
            )
        )
    return out


async def _close(provider: Provider) -> None:
    close = getattr(provider, "aclose", None)
    if close is not None:
        await close()


def _render_one(
    view: ReplayedView, prefix: str, cache: dict[str, Provider], **options: Any
) -> dict[str, Any]:
    if prefix == "test" and view.request is not None:
        from ..view.base import canonical_request  # what lovia.testing models "send"

        body: Any = redact({"model": view.model, **canonical_request(view.request)})
        return body
    spec = f"{prefix}:{view.model}"
    if spec not in cache:
        cache[spec] = provider_for(spec, for_render=True, **options)
    return render_request(view, cache[spec])


async def render_bodies(
    views: Sequence[ReplayedView],
    *,
    provider: str | None = None,
    base_url: str | None = None,
    stream: bool | None = None,
) -> list[dict[str, Any]]:
    """The exact request body of each view for its recorded provider (or ``provider``)."""
    cache: dict[str, Provider] = {}
    try:
        return [
            _render_one(v, provider or v.provider, cache, base_url=base_url, stream=stream)
            for v in views
        ]
    finally:
        for opened in cache.values():
            await _close(opened)


def recorded_answer(run: RunData, view: ReplayedView) -> list[TranscriptEntry]:
    """The model entries the run recorded for the turn of ``view``."""
    return [
        e
        for e in run.entries
        if e.turn == view.turn
        and e.agent == view.agent
        and e.type in ("text", "reasoning", "tool_call")
    ]


async def whatif(
    view: ReplayedView,
    model: str | Provider,
    *,
    base_url: str | None = None,
    stream: bool | None = None,
    api_key: str | None = None,
    policy: WhatIfPolicy | None = None,
) -> ModelResponse:
    """Send ``view`` to ``model`` (``provider:model`` or a provider); nothing is written.

    ``policy`` decides which hosts a ``base_url`` may name (default: the configured
    providers' own base URLs and ``$LOVIA_WHATIF_ALLOW_HOSTS``); a configured API key
    never goes to another host, ``api_key`` is used for this call only.
    """
    if not isinstance(model, str):
        return await rerun(view, model)
    if not model.strip():
        raise UserError("which model?", hint="Write it as 'provider:model'.")
    policy = policy if policy is not None else WhatIfPolicy.from_env()
    provider, owned = policy.provider(model, base_url=base_url, api_key=api_key, stream=stream)
    try:
        return await rerun(view, provider)
    finally:
        if owned:
            await _close(provider)


def brief(entry: TranscriptEntry) -> dict[str, Any]:
    """``{"type", "text"}`` of a model entry (assistant for text)."""
    kind = "assistant" if entry.type == "text" else entry.type
    return {"type": kind, "text": entry_text(entry)}


def response_dict(response: ModelResponse) -> dict[str, Any]:
    """A what-if answer as JSON."""
    return {
        "entries": [brief(e) for e in response.entries],
        "finish_reason": response.finish_reason,
        "usage": {
            "input_tokens": response.usage.input_tokens,
            "output_tokens": response.usage.output_tokens,
            "cost_usd": response.usage.cost_usd,
        },
    }


def whatif_dict(
    run: RunData, view: ReplayedView, model: str, response: ModelResponse
) -> dict[str, Any]:
    """A what-if as JSON: the view, the recorded answer and the new one side by side."""
    return {
        "turn": view.turn,
        "attempt": view.attempt,
        "view_hash": view.rebuilt_hash,
        "view_ok": view.ok,
        "recorded": {
            "model": f"{view.provider}:{view.model}",
            "entries": [brief(e) for e in recorded_answer(run, view)],
        },
        "rerun": {"model": model, **response_dict(response)},
    }
