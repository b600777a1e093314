"""Pin a run (or one turn) as an evaluation case from the browser.

``POST /api/runs/{run_id}/pin`` with ``{"turn": N}`` (optional) writes the case folder to
``$LOVIA_EVAL_DIR`` (default ``evals`` in the working directory) — the same folder
``lovia pin RUN --to DIR`` writes — and answers with its name and path. Behind the
app's CSRF guard like every POST; it only reads the store.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..errors import UserError
from ..evals import pin

__all__ = ["ROUTES", "cases_dir"]


def cases_dir() -> Path:
    return Path(os.environ.get("LOVIA_EVAL_DIR") or "evals")


async def pin_json(request: Request) -> Response:
    from ._live import body_of

    data: dict[str, Any] = await body_of(request)
    turn = data.get("turn")
    if turn is not None and (not isinstance(turn, int) or isinstance(turn, bool) or turn < 1):
        raise UserError("'turn' must be a positive integer", hint="Omit it to pin the whole run.")
    folder = cases_dir()
    case = await pin(request.path_params["run_id"], request.app.state.db, turn=turn, to=folder)
    return JSONResponse(
        {
            "case": case.name,
            "path": str(folder / case.name),
            "turn": case.start_turn,
            "views": len(case.views),
            "tool_results": len(case.tool_results),
            "notes": case.notes,
        }
    )


ROUTES = [Route("/api/runs/{run_id}/pin", pin_json, methods=["POST"])]
