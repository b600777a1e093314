"""The runs list as a triage tool, and session pages.

Search (agent, model, run id, session; words of the error), facets with counts
(status, error type, agent), sorting (time, cost, duration, tokens, turns), the
filter's totals and failure rate, child runs nested under their parent. The runs'
summary rows are read once and kept for :data:`LIST_FRESH_S` seconds, so filtering,
counting and sorting over thousands of runs is in memory.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, cast

from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..errors import UserError
from ..labels import parse_label
from ..replay import run_dict
from ..stores.base import LABELS_KEY, UNPRICED_KEY, ReadOnlyStore, RunInfo
from ..stores.lifecycle import Life, build_life, list_lives
from ._format import query
from ._pages import config_of, db_of, int_param, render

__all__ = ["ROUTES", "RunIndex", "RunQuery", "forget_index", "run_index", "unpriced"]

SCAN_LIMIT = 10_000
"""Newest runs the list searches, counts and sorts."""
LIST_FRESH_S = 1.0
"""How long the runs' summary rows are reused before the store is read again."""


def _duration(info: RunInfo) -> float:
    return -1.0 if info.ended_at is None else info.ended_at - info.started_at


SORTS: dict[str, Callable[[RunInfo], float]] = {
    "time": lambda i: i.started_at,
    "cost": lambda i: i.cost_usd or 0.0,
    "duration": _duration,
    "tokens": lambda i: i.input_tokens + i.output_tokens,
    "turns": lambda i: i.turns,
}
RANGES = {"15m": 900, "1h": 3600, "24h": 86_400, "7d": 7 * 86_400, "30d": 30 * 86_400}
"""The time-range picker's presets (``?range=``)."""
FAILED = ("failed", "interrupted", "cancelled", "dead_lettered")


@dataclass(slots=True)
class RunIndex:
    """The newest runs' summary rows, by id and in list order (newest first)."""

    runs: list[RunInfo]
    read_at: float
    lives: dict[str, Life] = field(default_factory=dict[str, Life])
    """Each run's lifecycle (its ``state``: a running run nobody holds is interrupted)."""
    by_id: dict[str, RunInfo] = field(default_factory=dict[str, RunInfo])
    children: dict[str, list[RunInfo]] = field(default_factory=dict[str, list[RunInfo]])
    memo: dict[Any, Any] = field(default_factory=dict[Any, Any])
    """What queries found in these rows (a list page asked again costs its rendering)."""

    def __post_init__(self) -> None:
        self.by_id = {i.run_id: i for i in self.runs}
        for info in reversed(self.runs):  # oldest child first
            if info.parent_run_id is not None:
                self.children.setdefault(info.parent_run_id, []).append(info)

    def state(self, info: RunInfo) -> str:
        life = self.lives.get(info.run_id)
        return life.state if life is not None else info.status

    def life(self, info: RunInfo) -> Life:
        return self.lives.get(info.run_id) or build_life(info, None)

    @property
    def truncated(self) -> bool:
        return len(self.runs) >= SCAN_LIMIT


async def run_index(request: Request) -> RunIndex:
    """The runs' summary rows, read at most once per :data:`LIST_FRESH_S`: a stale
    index is served while a fresh one is read in the background (stale-while-revalidate),
    so a page never waits for the store once the first read is done."""
    state = request.app.state
    index: RunIndex | None = getattr(state, "run_index", None)
    db: ReadOnlyStore = db_of(request)

    async def read() -> RunIndex:
        pairs = await list_lives(db, limit=SCAN_LIMIT)
        lives = {info.run_id: life for info, life in pairs}
        fresh = RunIndex([info for info, _ in pairs], time.monotonic(), lives=lives)
        state.run_index = fresh
        return fresh

    if index is None:
        return await read()
    if time.monotonic() - index.read_at >= LIST_FRESH_S:
        task: asyncio.Task[RunIndex] | None = getattr(state, "run_index_task", None)
        if task is None or task.done():
            state.run_index_task = asyncio.create_task(read())
    return index


def forget_index(request: Request) -> None:
    """Read the runs again on the next page (this server just changed one)."""
    request.app.state.run_index = None


def _when(text: str | None, name: str) -> float | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        raise UserError(
            f"{name}={text!r} is not a date", hint="Use YYYY-MM-DD or YYYY-MM-DDTHH:MM."
        ) from None


def iso(ts: float | None) -> str | None:
    return None if ts is None else datetime.fromtimestamp(ts).strftime("%Y-%m-%dT%H:%M")


def _error_text(info: RunInfo) -> str:
    extra = info.extra
    parts = (info.error_type, extra.get("error"), extra.get("hint"), info.finish_reason)
    return " ".join(str(p) for p in parts if p).lower()


@dataclass(frozen=True, slots=True, kw_only=True)
class RunQuery:
    """What the list shows: every field is a query parameter (empty ones are left out)."""

    q: str | None = None
    """Substring of the agent, model, run id or session."""
    error: str | None = None
    """Words that must all appear in the error type, message or hint."""
    agent: str | None = None
    session: str | None = None
    status: str | None = None
    error_type: str | None = None
    model: str | None = None
    label: tuple[str, str] | None = None
    """``?label=tenant=acme``: runs with this attribution label (totals follow)."""
    range: str | None = None
    since: float | None = None
    until: float | None = None
    sort: str = "time"
    asc: bool = False
    page: int = 0

    def url(self, **changes: Any) -> str:
        """``/?…`` for this query with ``changes`` (page 0 unless a page is given)."""
        target = replace(self, **{"page": 0, **changes})
        return "/?" + query(
            q=target.q,
            error=target.error,
            agent=target.agent,
            session=target.session,
            status=target.status,
            error_type=target.error_type,
            model=target.model,
            label=None if target.label is None else "=".join(target.label),
            range=target.range,
            since=None if target.range else iso(target.since),
            until=None if target.range else iso(target.until),
            sort=None if target.sort == "time" else target.sort,
            asc=target.asc,
            page=target.page,
        )

    def keeps(self, info: RunInfo, now: float, *, facet: str = "", state: str = "") -> bool:
        """Whether ``info`` passes (ignoring the facet being counted)."""
        text = self.q.lower() if self.q else None
        model = str(info.extra.get("model") or "")
        if text is not None and not any(
            text in str(v).lower() for v in (info.agent, model, info.run_id, info.session_id or "")
        ):
            return False
        if self.error and not all(w in _error_text(info) for w in self.error.lower().split()):
            return False
        since = now - RANGES[self.range] if self.range else self.since
        return (
            (facet == "agent" or self.agent is None or info.agent == self.agent)
            and (facet == "status" or self.status in (None, state or info.status))
            and (
                facet == "error_type"
                or self.error_type is None
                or info.error_type == self.error_type
            )
            and (self.session is None or info.session_id == self.session)
            and (self.model is None or self.model in model)
            and (self.label is None or _has_label(info, self.label))
            and (since is None or info.started_at >= since)
            and (self.until is None or info.started_at <= self.until)
        )


def _has_label(info: RunInfo, label: tuple[str, str]) -> bool:
    labels = info.extra.get(LABELS_KEY)
    return isinstance(labels, dict) and cast("dict[str, str]", labels).get(label[0]) == label[1]


def run_query(request: Request) -> RunQuery:
    q = request.query_params
    sort = q.get("sort") or "time"
    if sort not in SORTS:
        raise UserError(f"cannot sort by {sort!r}", hint=f"One of {', '.join(SORTS)}.")
    span = q.get("range") or None
    if span is not None and span not in RANGES:
        raise UserError(f"unknown range {span!r}", hint=f"One of {', '.join(RANGES)}.")
    return RunQuery(
        q=(q.get("q") or "").strip() or None,
        error=(q.get("error") or "").strip() or None,
        agent=q.get("agent") or None,
        session=q.get("session") or None,
        status=q.get("status") or None,
        error_type=q.get("error_type") or None,
        model=q.get("model") or None,
        label=parse_label(q["label"]) if q.get("label") else None,
        range=span,
        since=_when(q.get("since"), "since"),
        until=_when(q.get("until"), "until"),
        sort=sort,
        asc=q.get("asc") in ("1", "true", "True"),
        page=int_param(q.get("page"), "page"),
    )


def facets(rq: RunQuery, index: RunIndex, now: float) -> dict[str, list[tuple[str, int]]]:
    """Counts per status, error type and agent of the runs the rest of the filter keeps."""
    out: dict[str, list[tuple[str, int]]] = {}
    for name in ("status", "error_type", "agent"):
        counts: Counter[str] = Counter()
        for i in index.runs:
            state = index.state(i)
            value = state if name == "status" else getattr(i, name)
            if value and rq.keeps(i, now, facet=name, state=state):
                counts[str(value)] += 1
        out[name] = counts.most_common(12)
    return out


def unpriced(info: RunInfo) -> int:
    """How many of the run's model calls have no known price (its cost is a lower bound)."""
    value: Any = info.extra.get(UNPRICED_KEY, 0)
    return value if isinstance(value, int) and value > 0 else 0


def totals(kept: list[RunInfo], state: Callable[[RunInfo], str]) -> dict[str, Any]:
    states = [state(i) for i in kept]
    failed = sum(1 for s in states if s in FAILED)
    ended = sum(1 for s in states if s not in ("running", "paused"))
    return {
        "count": len(kept),
        "tokens": sum(i.input_tokens + i.output_tokens for i in kept),
        "cost_usd": sum(i.cost_usd or 0.0 for i in kept),
        "unpriced": sum(unpriced(i) for i in kept),
        "failed": failed,
        "failure_rate": None if not ended else failed / ended,
        "running": sum(1 for s in states if s == "running"),
    }


def row(info: RunInfo, index: RunIndex) -> dict[str, Any]:
    """A run's summary row, with its children's cost and count."""
    data = run_dict(info, index.life(info))
    kids = index.children.get(info.run_id, [])
    data["children"] = [run_dict(c, index.life(c)) for c in kids]
    data["children_cost_usd"] = sum(c.cost_usd or 0.0 for c in kids)
    data["children_unpriced"] = sum(unpriced(c) for c in kids)
    data["first_agent"] = info.extra.get("first_agent")
    return data


def found(rq: RunQuery, index: RunIndex, now: float) -> dict[str, Any]:
    """The query's sorted top-level runs, totals and facets (kept with the index; a
    relative time range is re-evaluated every 10 s)."""
    key = (replace(rq, page=0), int(now // 10) if rq.range else None)
    memo: dict[str, Any] | None = index.memo.get(key)
    if memo is None:
        kept = [i for i in index.runs if rq.keeps(i, now, state=index.state(i))]
        ids = {i.run_id for i in kept}
        top = [i for i in kept if i.parent_run_id is None or i.parent_run_id not in ids]
        top.sort(key=SORTS[rq.sort], reverse=not rq.asc)
        memo = index.memo[key] = {
            "top": top,
            "in_flight": any(index.state(i) == "running" for i in kept),
            "totals": totals(kept, index.state),
            "facets": facets(rq, index, now),
        }
    return memo


async def runs_data(request: Request) -> dict[str, Any]:
    """One page of the filtered, sorted runs; parents carry their children."""
    rq, size = run_query(request), config_of(request).runs_per_page
    index = await run_index(request)
    memo = found(rq, index, time.time())
    top: list[RunInfo] = memo["top"]
    shown = top[rq.page * size : (rq.page + 1) * size]
    return {
        "runs": [row(i, index) for i in shown],
        "page": rq.page,
        "pages": max(1, -(-len(top) // size)),
        "has_next": len(top) > (rq.page + 1) * size,
        "in_flight": memo["in_flight"],
        "totals": memo["totals"],
        "facets": memo["facets"],
        "scanned": len(index.runs),
        "truncated": index.truncated,
        "query": rq,
    }


def rows_html(request: Request, index: RunIndex, runs: list[dict[str, Any]]) -> list[Any]:
    """Each run's table row (with its children's), rendered once per read of the runs."""
    macro = request.app.state.templates.get_template("_macros.html").module.run_row
    out: list[Any] = []
    for data in runs:
        key = ("row", data["run_id"])
        html = index.memo.get(key)
        if html is None:
            parts = [macro(data), *(macro(c, child=True) for c in data["children"])]
            html = index.memo[key] = Markup("").join(parts)  # autoescaped by the macro
        out.append(html)
    return out


async def runs_html(request: Request) -> Response:
    data = await runs_data(request)
    rq: RunQuery = data["query"]
    index = await run_index(request)
    return render(
        request,
        "runs.html",
        row_html=rows_html(request, index, data["runs"]),
        sorts=list(SORTS),
        ranges=list(RANGES),
        since_text=iso(rq.since),
        until_text=iso(rq.until),
        **data,
    )


async def runs_json(request: Request) -> Response:
    data = await runs_data(request)
    data.pop("query")
    return JSONResponse(data)


async def session_html(request: Request) -> Response:
    """A session: its runs oldest first, with their totals."""
    session_id = request.path_params["session_id"]
    found = await db_of(request).list_runs(session_id=session_id, limit=SCAN_LIMIT)
    if not found:
        raise UserError(f"no runs in session {session_id!r}", hint="The runs list names sessions.")
    index = await run_index(request)
    runs = [row(i, index) for i in reversed(found) if i.parent_run_id is None]
    summary = totals(found, index.state)
    return render(request, "session.html", session_id=session_id, runs=runs, totals=summary)


ROUTES = [
    Route("/", runs_html),
    Route("/api/runs", runs_json),
    Route("/sessions/{session_id}", session_html),
]
