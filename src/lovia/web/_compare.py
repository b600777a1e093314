"""Two runs, or two turns (of one run or two), side by side: outcome, cost, timing,
output; for turns, the views (and what changed between them when they share a run)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..replay import ReplayedView, diff_views, entry_text, info_dict, recorded_answer, require_views
from ._cache import Loaded, off_loop
from ._format import clip
from ._pages import int_param, loaded_run, render
from ._view import MESSAGES_SHOWN, message_rows

__all__ = ["ROUTES"]


def _output(loaded: Loaded) -> str:
    texts = [e for e in loaded.run.entries if e.type == "text"]
    return clip(entry_text(texts[-1])) if texts else ""


async def _side(request: Request, run_id: str, turn: int | None) -> dict[str, Any]:
    loaded = await loaded_run(request, run_id)
    side: dict[str, Any] = {"run": info_dict(loaded.run.info), "output": _output(loaded)}
    if turn is None:
        return side
    require_views(loaded.run)
    index = loaded.view_index(turn, None)
    if index is None:
        from ..errors import UserError

        raise UserError(f"run {loaded.run.info.run_id} has no view for turn {turn}")
    view = await off_loop(loaded.view, index)
    total = len(view.messages)
    usage = {t.turn: t for t in loaded.turns()}.get(turn)
    side.update(
        turn=turn,
        view=view,
        messages=message_rows(view, max(0, total - MESSAGES_SHOWN), total, 600),
        hidden=max(0, total - MESSAGES_SHOWN),
        answer=[
            {"type": e.type, "text": clip(entry_text(e), 1000)}
            for e in recorded_answer(loaded.run, view)
        ],
        usage=None if usage is None else usage.to_dict() | {"items": None},
    )
    return side


async def compare_data(request: Request) -> dict[str, Any]:
    q = request.query_params
    a, b = (q.get("a") or "").strip(), (q.get("b") or "").strip()
    ta = int_param(q.get("ta"), "ta", -1)
    tb = int_param(q.get("tb"), "tb", -1)
    data: dict[str, Any] = {
        "a": a,
        "b": b,
        "ta": ta if ta >= 0 else None,
        "tb": tb if tb >= 0 else None,
    }
    if not a or not b:
        return data | {"sides": None, "diff": None}
    left = await _side(request, a, data["ta"])
    right = await _side(request, b, data["tb"])
    diff = None
    if "view" in left and "view" in right and left["run"]["run_id"] == right["run"]["run_id"]:
        diff = diff_views(left["view"], right["view"]).to_dict()
    return data | {"sides": [left, right], "diff": diff}


async def compare_html(request: Request) -> Response:
    return render(request, "compare.html", **await compare_data(request))


async def compare_json(request: Request) -> Response:
    data = await compare_data(request)
    sides: list[dict[str, Any]] = data["sides"] or []
    for side in sides:
        view: ReplayedView | None = side.get("view")
        if view is not None:
            side["view"] = view.to_dict() | {"messages": None}
    return JSONResponse(data)


ROUTES = [Route("/compare", compare_html), Route("/api/compare", compare_json)]
