"""Read-only pages and their JSON twins: runs, a run, a turn's view, a diff.

Everything is read through the data layer the CLI uses (``lovia.replay``): the same
``load_run``, ``rebuild_views``/``verify``, ``diff_views``, ``render_bodies`` and spans.
"""

from __future__ import annotations

import re
import time
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from ..errors import LoviaError, RunNotFound, UserError
from ..replay import (
    ReplayedView,
    RunData,
    diff_views,
    find_view,
    load_run,
    parse_ref,
    rebuild_views,
    require_views,
    select,
    verify,
)
from ..replay._query import (
    Turn,
    failed_call,
    info_dict,
    recorded_answer,
    render_bodies,
    run_dict,
    turns,
)
from ..replay._spans import (
    SpanRow,
    attempt_parts,
    build_tree,
    load_run_spans,
    normalize_all,
    spans_from_run,
)
from ..stores.base import RunInfo, Store
from ..stores.lifecycle import STATES, Attempt, build_life, list_lives
from ..transcript import entry_from_dict, entry_to_dict
from ._app import WebConfig
from ._format import run_id_param

__all__ = ["ROUTES", "error_page", "render"]

STATUSES = STATES
"""The ``status`` filter: the lifecycle states (``interrupted``: what needs resuming)."""
SCAN_LIMIT = 10_000
"""Runs scanned when filtering by model or time (the stores filter the other fields)."""


def _config(request: Request) -> WebConfig:
    config: WebConfig = request.app.state.config
    return config


def _db(request: Request) -> Store:
    db: Store = request.app.state.db
    return db


def render(request: Request, name: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    """A page from ``templates/`` (autoescaped) with the app-wide context."""
    config = _config(request)
    template = request.app.state.templates.get_template(name)
    html = template.render(
        csrf=config.csrf,
        store_label=config.store_label,
        has_agent=config.agent is not None,
        whatif_on=config.whatif is not None,
        **context,
    )
    return HTMLResponse(html, status_code=status_code)


async def error_page(request: Request, exc: Exception) -> Response:
    """A LoviaError as a page (or JSON under /api): its message and hint, never a trace."""
    assert isinstance(exc, LoviaError)
    status = 404 if isinstance(exc, RunNotFound) else 400
    if request.url.path.startswith("/api/"):
        return JSONResponse({"error": exc.message, "hint": exc.hint}, status_code=status)
    return render(request, "error.html", status, message=exc.message, hint=exc.hint)


# -- runs -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class RunFilter:
    agent: str | None = None
    session: str | None = None
    status: str | None = None
    model: str | None = None
    since: float | None = None
    until: float | None = None
    page: int = 0

    def query(self, page: int) -> str:
        """The query string of this filter at another page."""
        from urllib.parse import urlencode

        fields = {
            "agent": self.agent,
            "session": self.session,
            "status": self.status,
            "model": self.model,
            "since": _iso(self.since),
            "until": _iso(self.until),
            "page": page or None,
        }
        return urlencode({k: v for k, v in fields.items() if v})

    def keeps(self, info: RunInfo) -> bool:
        model = str(info.extra.get("model") or "")
        return (
            (self.model is None or self.model in model)
            and (self.since is None or info.started_at >= self.since)
            and (self.until is None or info.started_at <= self.until)
        )


def _iso(ts: float | None) -> str | None:
    return None if ts is None else datetime.fromtimestamp(ts).strftime("%Y-%m-%dT%H:%M")


def _when(text: str | None, name: str) -> float | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        raise UserError(
            f"{name}={text!r} is not a date", hint="Use YYYY-MM-DD or YYYY-MM-DDTHH:MM."
        ) from None


def _int(text: str | None, name: str, default: int = 0) -> int:
    if not text:
        return default
    try:
        return max(0, int(text))
    except ValueError:
        raise UserError(f"{name}={text!r} is not a number") from None


def run_filter(request: Request) -> RunFilter:
    q = request.query_params
    status = q.get("status") or None
    if status is not None and status not in STATUSES:
        raise UserError(f"unknown status {status!r}", hint=f"One of {', '.join(STATUSES)}.")
    return RunFilter(
        agent=q.get("agent") or None,
        session=q.get("session") or None,
        status=status,
        model=q.get("model") or None,
        since=_when(q.get("since"), "since"),
        until=_when(q.get("until"), "until"),
        page=_int(q.get("page"), "page"),
    )


async def runs_data(request: Request) -> dict[str, Any]:
    """One page of runs, newest first, and whether there is a next page."""
    flt, size = run_filter(request), _config(request).runs_per_page
    scan = flt.model is not None or flt.since is not None or flt.until is not None
    found = await list_lives(
        _db(request),
        session_id=flt.session,
        agent=flt.agent,
        state=flt.status,
        limit=SCAN_LIMIT if scan else (flt.page + 1) * size + 1,
    )
    kept = [(i, life) for i, life in found if flt.keeps(i)]
    page = kept[flt.page * size : (flt.page + 1) * size]
    return {
        "runs": [run_dict(i, life) for i, life in page],
        "page": flt.page,
        "has_next": len(kept) > (flt.page + 1) * size,
        # reload only while a worker is on a run: an interrupted run waits for a resume
        "in_flight": any(life.state == "running" for _, life in page),
        "filter": flt,
    }


async def runs_html(request: Request) -> Response:
    data = await runs_data(request)
    flt: RunFilter = data["filter"]
    return render(
        request,
        "runs.html",
        statuses=STATUSES,
        since_text=_iso(flt.since),
        until_text=_iso(flt.until),
        **data,
    )


async def runs_json(request: Request) -> Response:
    data = await runs_data(request)
    data.pop("filter")
    return JSONResponse(data)


# -- one run ------------------------------------------------------------------------


@dataclass(slots=True, kw_only=True)
class Bar:
    """One row of the waterfall: a span, its depth and its place on the time axis."""

    span: SpanRow
    depth: int
    left: float
    width: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.span.name,
            "span_id": self.span.span_id,
            "parent_id": self.span.parent_id,
            "depth": self.depth,
            "start": self.span.start,
            "duration_s": self.span.duration,
            "error": self.span.error,
            "retries": self.span.attributes.get("lovia.retries"),
        }


def waterfall(spans: list[SpanRow], window: tuple[float, float] | None = None) -> list[Bar]:
    """Depth-first rows with x positions in per-mille of the run's time span.

    ``window``: only spans that start inside it (and their ancestors), for paged runs.
    """
    roots = build_tree(spans)
    if not roots:
        return []
    t0 = min(s.start for s in spans)
    t1 = max([*(s.end or s.start for s in spans), t0 + 1e-6])
    scale = 1000.0 / (t1 - t0)
    bars: list[Bar] = []

    def inside(span: SpanRow) -> bool:
        if window is None or window[0] <= span.start <= window[1]:
            return True
        return any(inside(c) for c in span.children)

    def walk(span: SpanRow, depth: int) -> None:
        if not inside(span):
            return
        left = (span.start - t0) * scale
        width = max(2.0, ((span.end or t1) - span.start) * scale)
        bars.append(Bar(span=span, depth=depth, left=left, width=min(width, 1000.0 - left)))
        for child in span.children:
            walk(child, depth + 1)

    for root in roots:
        walk(root, 0)
    return bars


async def run_spans(request: Request, run: RunData) -> tuple[list[SpanRow], str]:
    """The run's spans from the local span store, else rebuilt from its records."""
    config = _config(request)
    if isinstance(config.store, str) and config.store.lower().startswith("sqlite:"):
        stored = await load_run_spans(config.store, run.info.run_id, run.info.trace_id)
        if stored:
            return normalize_all(stored), "span store"
    return spans_from_run(run), "run records"


def needs_approval(config: WebConfig, waiting: list[Any]) -> list[Any]:
    """The waiting calls of a paused run that wait for a human: with ``--agent``, those
    whose tool requires approval (the others just run on resume); else all of them."""
    if config.agent is None or not waiting:
        return waiting
    from ._live import agent_of

    tools = {t.name: t for t in agent_of(config).tools if hasattr(t, "requires_approval")}
    return [
        i
        for i in waiting
        if i.entry.name not in tools or tools[i.entry.name].requires_approval is not False
    ]


def trace_link(template: str | None, trace_id: str | None) -> str | None:
    """``$LOVIA_TRACE_URL`` with the run's trace id; only a hex id into an http(s) URL."""
    if not template or not trace_id or not re.fullmatch(r"[0-9a-f]{32}", trace_id):
        return None
    link = template.replace("{trace_id}", trace_id)
    return link if link.startswith(("http://", "https://")) else None


def _page_window(page: list[Turn]) -> tuple[float, float] | None:
    stamps = [i.entry.ts for t in page for i in t.items]
    return (min(stamps), max(stamps)) if stamps else None


async def run_data(request: Request) -> dict[str, Any]:
    """A run: info, one page of turns, the waterfall of that page, pending approvals."""
    config = _config(request)
    run = await load_run(run_id_param(request.path_params["run_id"]), _db(request))
    all_turns = turns(run)
    size = config.turns_per_page
    pages = max(1, -(-len(all_turns) // size))
    page = min(_int(request.query_params.get("page"), "page"), pages - 1)
    shown = all_turns[page * size : (page + 1) * size]
    spans, source = await run_spans(request, run)
    window = _page_window(shown) if pages > 1 else None
    pending = needs_approval(
        config, [i for t in all_turns for i in t.items if i.mark == "approval"]
    )
    life = run.life if run.life is not None else build_life(run.info, None)
    return {
        "run": run_dict(run.info, life, full=True),
        "first_agent": run.info.extra.get("first_agent", run.info.agent),
        "history_len": len(run.history),
        "turns": shown,
        "page": page,
        "pages": pages,
        "bars": waterfall(spans, window),
        "span_source": source,
        "trace_link": trace_link(config.trace_url, run.info.trace_id),
        "pending": pending,
        "view_turns": sorted({v.turn for v in run.views}),
        "approvals": {a.call_id: asdict(a) for a in life.approvals},
        "span_notes": span_notes(life.attempts, spans) if source == "span store" else [],
    }


def span_notes(attempts: list[Attempt], spans: list[SpanRow]) -> list[dict[str, Any]]:
    """Per attempt whose spans (or root span) died with its process: what is missing."""
    if len(attempts) < 2 and all(a.how not in ("killed", "lease_lost") for a in attempts):
        return []
    return [
        {"attempt": p.attempt, "how": p.how, "note": p.note}
        for p in attempt_parts(attempts, spans)
        if p.note
    ]


async def run_html(request: Request) -> Response:
    return render(request, "run.html", **await run_data(request))


async def run_json(request: Request) -> Response:
    data = await run_data(request)
    data["turns"] = [t.to_dict() for t in data["turns"]]
    data["bars"] = [b.to_dict() for b in data["bars"]]
    data["pending"] = [i.to_dict() for i in data["pending"]]
    return JSONResponse(data)


# -- one turn's view --------------------------------------------------------------------


async def load_views(request: Request) -> tuple[RunData, list[ReplayedView]]:
    run = await load_run(run_id_param(request.path_params["run_id"]), _db(request))
    require_views(run)
    return run, rebuild_views(run)


def pick(views: list[ReplayedView], turn: int, attempt: int | None) -> ReplayedView:
    chosen = select(views, turn, attempt)
    if not chosen:
        turns_ = ", ".join(str(t) for t in sorted({v.turn for v in views}))
        raise UserError(
            f"this run has no view for turn {turn}", hint=f"Turns with views: {turns_}."
        )
    return chosen[-1]


def _messages(view: ReplayedView) -> list[dict[str, Any]]:
    origin = [
        *("replaced" if i in view.record.replaced else "" for i in view.record.order),
        *("injected" for _ in view.record.injected),
    ]
    out: list[dict[str, Any]] = []
    for entry, how in zip(view.messages, origin, strict=False):
        data = entry_to_dict(entry)
        out.append({"how": how, "entry": data, "text": _text(data)})
    return out


def _text(data: dict[str, Any]) -> str:
    from ..replay import entry_text

    return entry_text(entry_from_dict(data))


async def request_body(view: ReplayedView) -> tuple[Any, str | None]:
    """The provider request body of a view (``--format request``), or why there is none."""
    try:
        return (await render_bodies([view]))[0], None
    except LoviaError as exc:
        return None, f"{exc.message} ({exc.hint})" if exc.hint else exc.message


async def view_data(request: Request, *, body: bool = True) -> dict[str, Any]:
    """The exact view of a turn, verified, with compaction, reminders, diff and body.

    ``body=False`` leaves the request body out (the page loads it on demand: it repeats
    every message of the view)."""
    run, views = await load_views(request)
    q = request.query_params
    attempt = _int(q.get("attempt"), "attempt") or None
    view = pick(views, int(request.path_params["turn"]), attempt)
    report = verify(run, views)
    mismatch = next((m.details for m in report.mismatches if m.view is view), None)
    other = _int(q.get("diff"), "diff", -1)
    base = pick(views, other, None) if other >= 0 else None
    diff = diff_views(base, view) if base is not None else None
    known = {e.id: e for e in [*(base.messages if base else []), *view.messages, *run.transcript]}
    rendered, body_error = await request_body(view) if body else (None, None)
    replaced = {i: _text(stub) for i, stub in view.record.replaced.items()}
    return {
        "run": info_dict(run.info),
        "view": view.to_dict(),
        "label": view.label,
        "mismatch": mismatch,
        "attempts": [v.attempt for v in select(views, view.turn)],
        "turns": sorted({v.turn for v in views}),
        "messages": _messages(view),
        "replaced": replaced,
        "injected": [_text(e) for e in view.record.injected],
        "diff": None if diff is None else diff.to_dict(),
        "diff_turn": other if other >= 0 else None,
        "diff_text": {i: _text(entry_to_dict(e)) for i, e in known.items()} if diff else {},
        "body": rendered,
        "body_error": body_error,
        "recorded": [
            {"type": e.type, "text": _text(entry_to_dict(e))} for e in recorded_answer(run, view)
        ],
        "failed_call": failed_call_of(run, view),
    }


def failed_call_of(run: RunData, view: ReplayedView) -> dict[str, Any] | None:
    """The failure of the model call this view was sent in, if it failed."""
    found = failed_call(run, view)
    return None if found is None else asdict(found)


async def view_html(request: Request) -> Response:
    return render(request, "view.html", **await view_data(request, body=False))


async def body_json(request: Request) -> Response:
    """``/api/runs/{id}/turns/{n}/request``: the exact provider request body."""
    _run, views = await load_views(request)
    attempt = _int(request.query_params.get("attempt"), "attempt") or None
    body, error = await request_body(pick(views, int(request.path_params["turn"]), attempt))
    if error is not None:
        raise UserError(error)
    return JSONResponse(body)


async def view_json(request: Request) -> Response:
    return JSONResponse(await view_data(request))


async def diff_json(request: Request) -> Response:
    """``/api/runs/{id}/diff?a=A&b=B``: what changed between the views of turns A and B."""
    _run, views = await load_views(request)
    q = request.query_params
    a = pick(views, _int(q.get("a"), "a"), None)
    b = pick(views, _int(q.get("b"), "b"), None)
    return JSONResponse(diff_views(a, b).to_dict())


async def content_ref(request: Request) -> Response:
    """A content reference (``lovia.content.ref``, or ``LOVIA_CONTENT_URL`` pointing here):
    the page of the turn whose view it names (a summary call's: the turn it was made for)."""
    ref = parse_ref(
        f"lovia:run/{request.path_params['run_id']}/view/{request.path_params['view_hash']}"
    )
    assert ref is not None
    run, views = await load_views(request)
    found = find_view(views, ref)
    attempt = f"?attempt={found.attempt}" if found.attempt > 1 else ""
    url = f"/runs/{run.info.run_id}/turns/{found.turn}{attempt}"
    return RedirectResponse(url, status_code=303)


async def health(request: Request) -> Response:
    return JSONResponse({"ok": True, "time": time.time()})


ROUTES = [
    Route("/", runs_html),
    Route("/api/runs", runs_json),
    Route("/runs/{run_id}", run_html),
    Route("/api/runs/{run_id}", run_json),
    Route("/runs/{run_id}/turns/{turn:int}", view_html),
    Route("/api/runs/{run_id}/turns/{turn:int}", view_json),
    Route("/api/runs/{run_id}/turns/{turn:int}/request", body_json),
    Route("/api/runs/{run_id}/diff", diff_json),
    Route("/ref/{run_id}/{view_hash}", content_ref),
    Route("/api/health", health),
]
