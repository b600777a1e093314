"""``lovia resume RUN --agent pkg.module:agent``: continue an interrupted, paused or
failed run from its checkpoint (what ``lovia runs --status interrupted`` lists).

A paused run needs a decision on each call it waits on: ``--approve CALL`` /
``--deny CALL`` (with ``--reason``); each is recorded with the deciding user
(``cli:USER``). The resume is traced when telemetry is configured (see
:mod:`lovia.cli._telemetry`).
"""

from __future__ import annotations

import argparse
import getpass
from typing import Any, cast

from ..agent import Agent
from ..errors import ApprovalPending, UserError
from ..replay import load_run, open_store
from ..runner import Runner, resume_options
from ..stores.lifecycle import Life
from ._common import store_url
from ._out import Out
from ._telemetry import setup_telemetry
from ._web import load_agent

__all__ = ["resolve_agent", "resume"]


def resolve_agent(found: Any) -> Agent[Any, Any]:
    """An ``--agent`` object: an Agent, or a factory returning one."""
    if not isinstance(found, Agent) and callable(found):
        found = found()
    if not isinstance(found, Agent):
        raise UserError(
            f"--agent is not an Agent: {found!r}",
            hint="Point --agent at an Agent or a function returning one (pkg.module:attr).",
        )
    return cast("Agent[Any, Any]", found)  # the user's module: checked above


def _decisions(args: argparse.Namespace) -> dict[str, bool | str]:
    out: dict[str, bool | str] = {str(c): True for c in args.approve or ()}
    for call in args.deny or ():
        if call in out:
            raise UserError(f"call {call} is both approved and denied")
        out[str(call)] = str(args.reason) if args.reason else False
    return out


def _check(life: Life, run_id: str, decisions: dict[str, bool | str]) -> None:
    if life.state == "completed":
        raise UserError(f"run {run_id} is completed: there is nothing to resume")
    if life.state == "running":
        raise UserError(
            f"run {run_id} is running ({life.detail})",
            hint="Only interrupted, paused, failed or cancelled runs are resumed.",
        )
    if life.state == "paused":
        waiting = [str(w.get("call_id")) for w in life.waits_on]
        undecided = [c for c in waiting if c not in decisions]
        if undecided:
            raise UserError(
                f"run {run_id} is {life.detail}",
                hint="Decide each: "
                + " ".join(f"--approve {c} | --deny {c}" for c in undecided)
                + " (optionally --reason TEXT).",
            )


async def resume(args: argparse.Namespace, out: Out) -> int:
    url = store_url(args)
    decisions = _decisions(args)
    agent = resolve_agent(load_agent(str(args.agent)))
    telemetry = setup_telemetry(args.telemetry, url)
    try:
        async with open_store(url, read_only=False) as db:
            run = await load_run(args.run, db)
            info = run.info
            assert run.life is not None
            _check(run.life, info.run_id, decisions)
            who = f"cli:{getpass.getuser()}" if decisions else None
            options = resume_options(info, db, approvals=decisions, approved_by=who)
            try:
                result = await Runner.run(agent, None, **options)
            except ApprovalPending as exc:
                calls = ", ".join(f"{c.name} ({c.call_id})" for c in exc.pending)
                _report(out, info.run_id, "paused", f"waiting for approval of {calls}")
                return 0
        _report(out, info.run_id, "completed", str(result.output))
        return 0
    finally:
        if telemetry is not None:
            telemetry.shutdown()


def _report(out: Out, run_id: str, state: str, text: str) -> None:
    if out.json_mode:
        key = "output" if state == "completed" else "detail"
        out.json({"run_id": run_id, "state": state, key: text})
        return
    out.line(f"run {run_id}: {state}")
    out.line(text)
