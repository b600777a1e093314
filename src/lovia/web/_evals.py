"""Evaluation from the browser: pin a run as a case, read eval reports side by side.

``POST /api/runs/{run_id}/pin`` with ``{"turn": N}`` (optional) writes the case folder to
``$LOVIA_EVAL_DIR`` (default ``evals`` in the working directory) — the same folder
``lovia pin RUN --to DIR`` writes — and answers with its name and path. Behind the
app's CSRF guard like every POST; it only reads the store.

``/evals`` lists the JSON reports in ``$LOVIA_EVAL_DIR/reports/`` (``lovia eval CASES
--model M --format json --output evals/reports/NAME.json``); ``/evals/NAME`` shows each
case's recorded (baseline) answer next to the candidate's, with the verdicts, scores and
the diff. Reports are read by name from that folder only, at most :data:`REPORT_LIMIT`
bytes; their text reaches the page escaped, cut, and with invisible characters shown.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, cast

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..errors import UserError
from ..evals import pin
from ._cache import off_loop
from ._pages import render

__all__ = ["REPORT_LIMIT", "ROUTES", "cases_dir", "read_report", "reports_dir"]

REPORT_LIMIT = 32 * 1024 * 1024
"""The largest report read (bytes)."""
REPORT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
ANSWER_LIMIT = 4_000
"""Characters of an answer printed (the JSON twin has it whole)."""


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


def reports_dir() -> Path:
    return cases_dir() / "reports"


def _report_path(name: str) -> Path:
    stem = name[:-5] if name.endswith(".json") else name
    if not REPORT_NAME.fullmatch(stem) or ".." in stem:
        raise UserError(
            f"no eval report {stem[:80]!r}",
            hint="Report names are letters, digits and _.- (the /evals page lists them).",
        )
    return reports_dir() / f"{stem}.json"


def read_report(name: str) -> dict[str, Any]:
    """The report ``name`` of the reports folder, checked enough to show (never raised
    as a server error: a missing, huge, non-UTF-8 or non-JSON file is a clear one)."""
    path = _report_path(name)
    try:
        with path.open("rb") as f:
            raw = f.read(REPORT_LIMIT + 1)
    except OSError:
        raise UserError(
            f"no eval report {path.stem!r} in {reports_dir()}",
            hint="Write one with lovia eval CASES --format json --output "
            f"{reports_dir()}/NAME.json.",
        ) from None
    if len(raw) > REPORT_LIMIT:
        raise UserError(f"eval report {path.stem!r} is over {REPORT_LIMIT // 2**20} MB")
    try:
        data: Any = json.loads(raw.decode("utf-8", "replace"))
    except ValueError as exc:
        raise UserError(f"eval report {path.stem!r} is not JSON ({exc})") from None
    if not isinstance(data, dict) or not isinstance(
        cast("dict[str, Any]", data).get("cases"), list
    ):
        raise UserError(
            f"eval report {path.stem!r} is not a lovia eval report",
            hint="lovia eval --format json writes one.",
        )
    return cast("dict[str, Any]", data)  # a report: checked field by field where shown


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, indent=2, default=str)


def case_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    """Per case: its name, verdicts, and the recorded answer next to each sample's."""
    rows: list[dict[str, Any]] = []
    for raw in cast("list[Any]", report["cases"]):
        case = cast("dict[str, Any]", raw) if isinstance(raw, dict) else {}
        samples = _list(case.get("samples"))
        rows.append(
            {
                "name": str(case.get("case") or "?"),
                "passed": case.get("passed") is True,
                "baseline_passed": case.get("baseline_passed"),
                "mean_score": _number(case.get("mean_score")),
                "recorded": _text(case.get("recorded_output")),
                "has_recorded": "recorded_output" in case,
                "diff": _text(case.get("diff")),
                "samples": [_sample(s) for s in samples if isinstance(s, dict)],
            }
        )
    return rows


def _list(value: Any) -> list[Any]:
    return cast("list[Any]", value) if isinstance(value, list) else []


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _sample(raw: Any) -> dict[str, Any]:
    sample = cast("dict[str, Any]", raw)
    scores = _list(sample.get("scores"))
    return {
        "passed": sample.get("passed") is True,
        "score": _number(sample.get("score")),
        "output": _text(sample.get("output")),
        "error": _text(sample.get("error")),
        "scores": [_score(cast("dict[str, Any]", s)) for s in scores if isinstance(s, dict)],
    }


def _score(score: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": str(score.get("name") or "?"),
        "value": _number(score.get("value")),
        "passed": score.get("passed") is True,
        "explanation": _text(score.get("explanation")),
    }


def report_names() -> list[str]:
    folder = reports_dir()
    if not folder.is_dir():
        return []
    names = (p.stem for p in folder.glob("*.json") if p.is_file())
    return sorted(n for n in names if REPORT_NAME.fullmatch(n))


async def evals_html(request: Request) -> Response:
    return render(
        request, "evals.html", reports=await off_loop(report_names), folder=str(reports_dir())
    )


async def eval_data(request: Request) -> dict[str, Any]:
    name = request.path_params["name"]
    report = await off_loop(read_report, name)
    return {
        "report": _report_path(name).stem,
        "mode": str(report.get("mode") or "?"),
        "pass_rate": _number(report.get("pass_rate")),
        "baseline_pass_rate": _number(report.get("baseline_pass_rate")),
        "mean_score": _number(report.get("mean_score")),
        "cases": case_rows(report),
    }


async def eval_html(request: Request) -> Response:
    return render(request, "eval.html", answer_limit=ANSWER_LIMIT, **await eval_data(request))


async def eval_json(request: Request) -> Response:
    return JSONResponse(await eval_data(request))


ROUTES = [
    Route("/api/runs/{run_id}/pin", pin_json, methods=["POST"]),
    Route("/evals", evals_html),
    Route("/evals/{name}", eval_html),
    Route("/api/evals/{name}", eval_json),
]
