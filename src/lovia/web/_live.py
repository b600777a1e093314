"""Pages that act: what-if (re-send a view), approvals (resume a paused run), resume,
stop (a cancel request), chat.

All are POST with the CSRF header (checked by the app's guard); none writes to a run
except through ``Runner`` itself (approvals, resume and chat) or, to stop one, the cancel
request ``lovia cancel`` stores, exactly as code would.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from collections.abc import AsyncIterator
from typing import Any, cast

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from .. import events as ev
from ..agent import Agent
from ..errors import ApprovalPending, LoviaError, UserError
from ..replay import load_run, whatif, whatif_dict
from ..runner import Runner, RunOptions, resume_options
from ..stores.base import RunInfo
from ..stores.lifecycle import CANCEL_SAID, request_cancel
from ._config import WebConfig
from ._format import run_id_param
from ._pages import load_views, pick, render

__all__ = ["ROUTES", "web_identity"]

SESSION_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")


def _config(request: Request) -> WebConfig:
    config: WebConfig = request.app.state.config
    return config


def _needs_agent(config: WebConfig) -> None:
    """Acting needs ``--agent`` (the store is writable only then)."""
    if config.agent is None:
        raise UserError(
            "this lovia web has no agent",
            hint="Start it with --agent pkg.module:agent to chat and to decide approvals.",
        )


def agent_of(config: WebConfig) -> Agent[Any, Any]:
    """The ``--agent``: an Agent, or a factory called for each run."""
    _needs_agent(config)
    found: Any = config.agent
    if not isinstance(found, Agent) and callable(found):
        found = found()
    if not isinstance(found, Agent):
        raise UserError(f"--agent is not an Agent: {found!r}")
    return cast("Agent[Any, Any]", found)  # the user's module: checked above


async def body_of(request: Request) -> dict[str, Any]:
    try:
        data: Any = json.loads(await request.body())
    except ValueError:
        raise UserError("the request body is not JSON") from None
    if not isinstance(data, dict):
        raise UserError("the request body must be a JSON object")
    return cast("dict[str, Any]", data)  # request JSON: an object, checked above


def _text(data: dict[str, Any], name: str, *, required: bool = False) -> str | None:
    value = data.get(name)
    if value is None or value == "":
        if required:
            raise UserError(f"{name!r} is required")
        return None
    if not isinstance(value, str):
        raise UserError(f"{name!r} must be a string")
    return value


async def whatif_json(request: Request) -> Response:
    """Re-send one turn's exact view to another model (``lovia replay --model``).

    Only when the server was started with what-if on (and so with an access token);
    the policy decides which hosts it reaches, and a key sent with the request is used
    for that request only."""
    policy = _config(request).whatif
    if policy is None:
        return JSONResponse(
            {
                "error": "what-if is off on this lovia web",
                "hint": "Start it with --whatif (it then asks for its access token on every "
                "request) to re-send views to models.",
            },
            status_code=403,
        )
    data = await body_of(request)
    model = _text(data, "model", required=True)
    assert model is not None
    attempt = data.get("attempt")
    run, views = await load_views(request)
    view = pick(
        views, int(request.path_params["turn"]), attempt if isinstance(attempt, int) else None
    )
    response = await whatif(
        view,
        model,
        base_url=_text(data, "base_url"),
        api_key=_text(data, "api_key"),
        policy=policy,
    )
    return JSONResponse(whatif_dict(run, view, model, response))


def _decisions(data: dict[str, Any]) -> dict[str, bool | str]:
    raw = data.get("decisions")
    if not isinstance(raw, dict) or not raw:
        raise UserError("'decisions' must map call ids to true, false or a reason")
    out: dict[str, bool | str] = {}
    for key, value in cast("dict[object, object]", raw).items():  # request JSON
        if not isinstance(key, str) or not isinstance(value, bool | str):
            raise UserError("'decisions' must map call ids to true, false or a reason")
        out[key] = value
    return out


def web_identity(config: WebConfig) -> str:
    """Who decides through this web app: its access token's fingerprint (never the
    token), or ``web:local`` for a loopback app without a token."""
    if config.token is None:
        return "web:local"
    return "web:token-" + hashlib.sha256(config.token.encode()).hexdigest()[:8]


def _with_reason(decisions: dict[str, bool | str], reason: str | None) -> dict[str, bool | str]:
    """A denial with a reason carries it as its verdict (``approvals=`` semantics)."""
    if not reason:
        return decisions
    return {k: (reason if v is False else v) for k, v in decisions.items()}


async def approvals_json(request: Request) -> Response:
    """Resume a paused run with decisions by call id, as ``Runner.run(approvals=...)``."""
    data = await body_of(request)
    decisions = _with_reason(_decisions(data), _text(data, "reason"))
    agent = agent_of(_config(request))
    db = request.app.state.db
    run = await load_run(run_id_param(request.path_params["run_id"]), db)
    info = run.info
    if info.status != "paused":
        raise UserError(f"run {info.run_id} is {info.status}, not waiting for approval")
    who = web_identity(_config(request))
    options = resume_options(info, db, approvals=decisions, approved_by=who)
    return await _resume(request, info, agent, options)


async def resume_json(request: Request) -> Response:
    """Resume an interrupted (or failed, cancelled) run from its checkpoint."""
    agent = agent_of(_config(request))
    db = request.app.state.db
    run = await load_run(run_id_param(request.path_params["run_id"]), db)
    info, life = run.info, run.life
    if life is None or life.state not in ("interrupted", "failed", "cancelled"):
        state = life.state if life is not None else info.status
        raise UserError(
            f"run {info.run_id} is {state}: only interrupted, failed or cancelled runs "
            "are resumed here",
            hint="A paused run is resumed by deciding its approvals.",
        )
    return await _resume(request, info, agent, resume_options(info, db))


async def cancel_json(request: Request) -> Response:
    """Store a cancel request on the run, as ``lovia cancel`` does: a queued run never
    starts, and the worker running it now stops it at its next lease renewal. The
    request names this web app's identity beside the reason."""
    _needs_agent(_config(request))  # no agent is built: stopping runs none
    data = await body_of(request)
    reason = _text(data, "reason") or "stopped from the web app"
    reason = reason[:500].encode("utf-8", "backslashreplace").decode()  # lone surrogates
    run_id = run_id_param(request.path_params["run_id"])
    who = web_identity(_config(request))
    before = await request_cancel(request.app.state.db, run_id, f"{who}: {reason}")
    request.app.state.runs.forget(run_id)
    request.app.state.run_index = None
    return JSONResponse(
        {
            "run_id": run_id,
            "was": before,
            "cancelled": before != "ended",
            "said": CANCEL_SAID[before],
        }
    )


async def _resume(
    request: Request, info: RunInfo, agent: Agent[Any, Any], options: RunOptions
) -> Response:
    try:
        result = await Runner.run(agent, None, **options)
    except ApprovalPending:
        return JSONResponse({"run_id": info.run_id, "status": "paused"})
    except LoviaError as exc:
        return JSONResponse(
            {"run_id": info.run_id, "status": "failed", "error": exc.message, "hint": exc.hint}
        )
    finally:
        request.app.state.runs.forget(info.run_id)  # the pages show what the resume wrote
        request.app.state.run_index = None
    return JSONResponse(
        {"run_id": info.run_id, "status": "completed", "output": str(result.output)}
    )


async def chat_html(request: Request) -> Response:
    agent = agent_of(_config(request))
    return render(request, "chat.html", agent_name=agent.name, session=secrets.token_hex(8))


def _line(data: dict[str, Any]) -> bytes:
    return (json.dumps(data, ensure_ascii=False, default=str) + "\n").encode()


def _event_line(event: ev.Event) -> dict[str, Any] | None:
    if isinstance(event, ev.TextDelta):
        return {"type": "text", "text": event.text}
    if isinstance(event, ev.MessageCompleted):
        calls = event.tool_calls
        return (
            {"type": "tool_calls", "calls": [[c.name, c.arguments] for c in calls]}
            if calls
            else None
        )
    if isinstance(event, ev.ToolCallCompleted):
        return {
            "type": "tool_result",
            "name": event.call.name,
            "content": event.result.content,
            "is_error": event.is_error,
        }
    if isinstance(event, ev.RunCompleted):
        return {"type": "done", "run_id": event.run_id}
    if isinstance(event, ev.RunFailed) and isinstance(event.error, ApprovalPending):
        return paused_line(event.run_id, event.error)
    if isinstance(event, ev.RunFailed):
        error = event.error
        hint = error.hint if isinstance(error, LoviaError) else None
        return {
            "type": "error",
            "run_id": event.run_id,
            "error": f"{event.error_type}: {event.message}",
            "hint": hint,
        }
    return None


def paused_line(run_id: str, error: ApprovalPending) -> dict[str, Any]:
    """A run paused for approval: the calls to decide (the chat shows approve/deny)."""
    calls = [
        {
            "call_id": str(getattr(c, "call_id", "")),
            "name": str(getattr(c, "name", "?")),
            "arguments": str(getattr(c, "arguments", "")),
        }
        for c in error.pending
    ]
    return {"type": "paused", "run_id": run_id, "calls": calls}


async def chat_history(request: Request) -> Response:
    """``/api/chat/history?session_id=S``: the session's user and assistant messages (the
    chat page shows them again after a reload)."""
    session_id = request.query_params.get("session_id") or ""
    if not SESSION_ID.match(session_id):
        raise UserError("session_id must be 1-128 letters, digits or _.:-")
    from ..replay import entry_text

    entries = await request.app.state.db.load_session(session_id)
    messages = [
        {"role": "user" if e.type == "input" else "assistant", "text": entry_text(e)}
        for e in entries[-200:]
        if e.type in ("input", "text")
    ]
    return JSONResponse({"session_id": session_id, "messages": messages})


async def chat_json(request: Request) -> Response:
    """Run the agent on one message; stream text, tool calls and results as NDJSON."""
    data = await body_of(request)
    message = _text(data, "message", required=True)
    session_id = _text(data, "session_id", required=True)
    assert session_id is not None
    if not SESSION_ID.match(session_id):
        raise UserError("session_id must be 1-128 letters, digits or _.:-")
    db = request.app.state.db
    stream = Runner.stream(
        agent_of(_config(request)), message, checkpointer=db, session=db, session_id=session_id
    )

    async def lines() -> AsyncIterator[bytes]:
        try:
            async for event in stream:
                line = _event_line(event)
                if line is None:
                    continue
                if line["type"] == "tool_calls":
                    for name, arguments in line["calls"]:
                        yield _line({"type": "tool_call", "name": name, "arguments": arguments})
                else:
                    yield _line(line)
        finally:
            await stream.aclose()

    return StreamingResponse(lines(), media_type="application/x-ndjson")


ROUTES = [
    Route("/api/runs/{run_id}/turns/{turn:int}/whatif", whatif_json, methods=["POST"]),
    Route("/api/runs/{run_id}/approvals", approvals_json, methods=["POST"]),
    Route("/api/runs/{run_id}/resume", resume_json, methods=["POST"]),
    Route("/api/runs/{run_id}/cancel", cancel_json, methods=["POST"]),
    Route("/chat", chat_html),
    Route("/api/chat", chat_json, methods=["POST"]),
    Route("/api/chat/history", chat_history),
]
