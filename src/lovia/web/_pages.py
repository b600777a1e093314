"""Shared page plumbing: rendering, errors, request helpers, the loaded-run cache.

The pages themselves: ``_list`` (runs, sessions), ``_run`` (a run, its trace, live
updates, export), ``_view`` (a turn's exact view, diffs, compare). Everything is read
through the data layer the CLI uses (``lovia.replay``).
"""

from __future__ import annotations

import time
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from ..errors import LoviaError, RunNotFound, UserError
from ..replay import ReplayedView, RunData, require_views, select
from ..stores.base import ReadOnlyStore
from ._cache import Loaded, RunCache, off_loop
from ._config import WebConfig
from ._format import run_id_param

__all__ = [
    "ROUTES",
    "config_of",
    "db_of",
    "error_page",
    "int_param",
    "load_views",
    "loaded_run",
    "pick",
    "render",
]


def config_of(request: Request) -> WebConfig:
    config: WebConfig = request.app.state.config
    return config


def db_of(request: Request) -> ReadOnlyStore:
    db: ReadOnlyStore = request.app.state.db
    return db


def render(request: Request, name: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    """A page from ``templates/`` (autoescaped) with the app-wide context."""
    config = config_of(request)
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


def int_param(text: str | None, name: str, default: int = 0) -> int:
    """A non-negative integer query parameter (``default`` when absent)."""
    if not text:
        return default
    try:
        return max(0, int(text))
    except ValueError:
        raise UserError(f"{name}={text!r} is not a number") from None


async def loaded_run(request: Request, run_id: str | None = None) -> Loaded:
    """The run of the path (or ``run_id``), parsed once and reused while unchanged."""
    cache: RunCache = request.app.state.runs
    return await cache.get(db_of(request), run_id or run_id_param(request.path_params["run_id"]))


async def load_views(request: Request) -> tuple[RunData, list[ReplayedView]]:
    """The run of the path and every view of it (what-if needs only one: see ``pick``)."""
    loaded = await loaded_run(request)
    require_views(loaded.run)
    return loaded.run, await off_loop(loaded.all_views)


def pick(views: list[ReplayedView], turn: int, attempt: int | None) -> ReplayedView:
    chosen = select(views, turn, attempt)
    if not chosen:
        turns_ = ", ".join(str(t) for t in sorted({v.turn for v in views}))
        raise UserError(
            f"this run has no view for turn {turn}", hint=f"Turns with views: {turns_}."
        )
    return chosen[-1]


async def health(request: Request) -> Response:
    return JSONResponse({"ok": True, "time": time.time()})


ROUTES = [Route("/api/health", health)]
