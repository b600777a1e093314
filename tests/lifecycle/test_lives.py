"""A corpus of lives, lived once; then the store, the CLI and the web tell the same story.

Lives: killed mid-tool (SIGKILL) and resumed at once by ``lovia resume`` on the same host
(the dead worker is still an unreaped zombie); killed mid-model-call and left
interrupted; stalled (SIGSTOP) past a 1 s lease and resumed elsewhere; cancelled; paused
then approved from the web; paused then denied from the CLI; failed on a provider 503
after its retries. Each run's lifecycle from the store (``life_of``) must equal, field by
field, what ``lovia show --json``, ``lovia runs --json`` and the web's JSON say, and the
web's HTML must show the same state.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient

from lovia import Agent, ApprovalPending, CancelToken, RunContext, Runner, tool
from lovia.errors import ProviderError
from lovia.providers._http import RetryPolicy
from lovia.providers.openai_chat import OpenAIChat
from lovia.replay._query import run_dict
from lovia.stores import store
from lovia.stores.lifecycle import life_of
from lovia.testing import FunctionModel, call
from lovia.web import create_app

from . import lives

HERE = Path(__file__).parent
ROOT = HERE.parents[1]
LOCAL = "http://127.0.0.1"
KEY = "sk-lifecycletest0123456789"


@dataclass
class Corpus:
    url: str
    runs: dict[str, str] = field(default_factory=dict[str, str])
    """life name -> run id"""
    notes: dict[str, Any] = field(default_factory=dict[str, Any])


def _env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{HERE}", "NO_COLOR": "1"}
    env.pop("LOVIA_STORE", None)
    env.update(extra)
    return env


def lovia(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lovia.cli", *args],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=120,
        check=False,
    )


def _worker(url: str, run_id: str, mode: str, log: Path, ttl: str = "60") -> subprocess.Popen[str]:
    env = _env(LIFE_MODE=mode, LIFE_LOG=str(log), LOVIA_LEASE_TTL_S=ttl)
    return subprocess.Popen(
        [sys.executable, str(HERE / "lives.py"), url, run_id],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_stopped(proc: subprocess.Popen[str], timeout: float = 60.0) -> None:
    """Until ``proc`` stopped itself (SIGSTOP: state T in /proc)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        stat = Path(f"/proc/{proc.pid}/stat").read_text()
        if stat[stat.rfind(")") + 2] == "T":
            return
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        time.sleep(0.05)
    raise AssertionError("the worker never stalled")


def _provider_503() -> OpenAIChat:
    def answer(request: httpx.Request) -> httpx.Response:
        body = {"error": {"message": f"overloaded; key {KEY} was fine", "type": "overloaded"}}
        return httpx.Response(503, json=body)

    async def no_sleep(delay: float) -> None:
        return None

    client = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    retry = RetryPolicy(max_retries=2, initial_delay=0.001, jitter=False, sleep=no_sleep)
    return OpenAIChat("gpt-4o-mini", api_key=KEY, http_client=client, retry=retry)


@tool
def stop_here(ctx: RunContext[Any]) -> str:
    """The user presses stop while this runs."""
    ctx.cancel_token.cancel("user pressed stop")
    return "stopping"


async def _in_process_lives(c: Corpus) -> None:
    db = store(c.url)
    try:
        # cancelled by the user
        cancel = Agent(
            name="canceller",
            model=FunctionModel(lambda r, i: call("stop_here", id="c_stop")),
            tools=[stop_here],
        )
        with contextlib.suppress(Exception):
            await Runner.run(
                cancel, "go", run_id=c.runs["cancel"], checkpointer=db, cancel_token=CancelToken()
            )
        # a provider that answers 503 until the retries run out
        failing = Agent(name="fragile", model=_provider_503())
        with pytest.raises(ProviderError):
            await Runner.run(failing, "status?", run_id=c.runs["503"], checkpointer=db)
        # two runs that pause for approval
        for name in ("approve", "deny"):
            with pytest.raises(ApprovalPending):
                await Runner.run(
                    lives.approver(), "refund B2", run_id=c.runs[name], checkpointer=db
                )
    finally:
        await db.aclose()


async def _resume_stalled(c: Corpus) -> None:
    db = store(c.url)
    try:
        result = await Runner.run(lives.crashy(), None, run_id=c.runs["stall"], checkpointer=db)
        c.notes["stall_output"] = result.output
    finally:
        await db.aclose()


async def _life(url: str, run_id: str) -> tuple[dict[str, Any], Any]:
    db = store(url, read_only=True)
    try:
        snapshot = await db.load(run_id)
        assert snapshot is not None
        life = await life_of(db, snapshot.info, snapshot)
        return run_dict(snapshot.info, life, full=True), life
    finally:
        await db.aclose()


def _csrf(client: TestClient) -> str:
    found = re.search(r'name="lovia-csrf" content="([^"]+)"', client.get("/").text)
    assert found is not None
    return found.group(1)


def _live(c: Corpus, tmp: Path) -> None:
    log = tmp / "effects.log"
    # killed mid-tool, then resumed at once by `lovia resume` while it is still a zombie
    killed = _worker(c.url, c.runs["kill_tool"], "tool", log)
    deadline = time.monotonic() + 120
    while not _dead(killed.pid):  # not reaped (no poll/wait): a zombie holds the lease
        assert time.monotonic() < deadline, "the worker never died"
        time.sleep(0.02)
    c.notes["kill_tool_resume"] = lovia(
        "resume", c.runs["kill_tool"], "--agent", "lives:crashy", "--store", c.url, "--json"
    )
    killed.wait()
    # killed mid-model-call and left for someone to resume
    model_kill = _worker(c.url, c.runs["kill_model"], "model", log, ttl="1")  # expired: stable
    model_kill.wait(timeout=120)
    # stalled past its 1 s lease; resumed by another worker (this process)
    stalled = _worker(c.url, c.runs["stall"], "stall", log, ttl="1")
    _wait_stopped(stalled)
    time.sleep(1.5)  # its lease expires unrenewed
    c.notes["stall_while_stopped"] = asyncio.run(_life(c.url, c.runs["stall"]))[1]
    try:
        asyncio.run(_resume_stalled(c))
    finally:
        stalled.send_signal(signal.SIGKILL)
        stalled.wait()
    asyncio.run(_in_process_lives(c))
    # denied from the CLI, approved from the web
    c.notes["deny"] = lovia(
        "resume", c.runs["deny"], "--agent", "lives:approver", "--deny", "c_refund",
        "--reason", "not this customer", "--store", c.url, "--json",
    )  # fmt: skip
    with TestClient(create_app(c.url, agent=lives.approver), base_url=LOCAL) as client:
        c.notes["approve"] = client.post(
            f"/api/runs/{c.runs['approve']}/approvals",
            json={"decisions": {"c_refund": True}},
            headers={"x-lovia-csrf": _csrf(client)},
        ).json()


def _dead(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rfind(")") + 2] == "Z"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    tmp = tmp_path_factory.mktemp("lives")
    c = Corpus(url=f"sqlite:///{tmp / 'lives.db'}")
    names = ("kill_tool", "kill_model", "stall", "cancel", "approve", "deny", "503")
    c.runs = {n: f"life-{n}" for n in names}
    _live(c, tmp)
    return c


EXPECTED = {
    "kill_tool": ("completed", ["killed", "finished"]),
    "kill_model": ("interrupted", ["killed"]),
    "stall": ("completed", ["lease_lost", "finished"]),
    "cancel": ("cancelled", ["cancelled"]),
    "approve": ("completed", ["paused", "finished"]),
    "deny": ("completed", ["paused", "finished"]),
    "503": ("failed", ["failed"]),
}


def test_each_life_ends_in_its_state_with_its_attempts(corpus: Corpus) -> None:
    assert corpus.notes["kill_tool_resume"].returncode == 0, corpus.notes["kill_tool_resume"].stderr
    for name, (state, hows) in EXPECTED.items():
        data, life = asyncio.run(_life(corpus.url, corpus.runs[name]))
        assert (name, life.state) == (name, state)
        assert (name, [a.how for a in life.attempts]) == (name, hows)
        assert [a.attempt for a in life.attempts] == list(range(1, len(hows) + 1))
        # started_at is the first attempt's; the run's wall time covers every attempt
        assert data["started_at"] == pytest.approx(life.attempts[0].started_at, abs=0.5)
        assert life.wall_s is not None and life.active_s is not None
        assert life.active_s <= life.wall_s + 1e-6


def test_a_resume_keeps_the_first_start_and_says_how_the_attempt_before_ended(
    corpus: Corpus,
) -> None:
    data, life = asyncio.run(_life(corpus.url, corpus.runs["kill_tool"]))
    first, second = life.attempts
    assert first.end_estimated and first.ended_at is not None
    assert first.started_at <= first.ended_at <= second.started_at
    assert first.pid != second.pid and first.host == second.host
    assert data["started_at"] < second.started_at  # never rewritten by the resume
    out = json.loads(corpus.notes["kill_tool_resume"].stdout)
    assert out == {
        "run_id": corpus.runs["kill_tool"],
        "state": "completed",
        "output": out["output"],
    }
    assert "recorded 1" in out["output"]


def test_a_stalled_worker_is_interrupted_once_its_lease_expires(corpus: Corpus) -> None:
    stopped = corpus.notes["stall_while_stopped"]
    assert stopped.state == "interrupted"
    assert "expired" in stopped.detail
    assert [a.how for a in stopped.attempts] == ["lease_lost"]  # its process still exists
    assert "recorded 1" in corpus.notes["stall_output"]


def test_runs_status_interrupted_lists_what_needs_resuming(corpus: Corpus) -> None:
    res = lovia("runs", "--status", "interrupted", "--store", corpus.url, "--json")
    assert res.returncode == 0, res.stderr
    assert [r["run_id"] for r in json.loads(res.stdout)] == [corpus.runs["kill_model"]]
    text = lovia("runs", "--status", "interrupted", "--store", corpus.url)
    assert corpus.runs["kill_model"] in text.stdout and "lovia resume" in text.stdout
    cancelled = lovia("runs", "--status", "cancelled", "--store", corpus.url, "--json")
    assert [r["run_id"] for r in json.loads(cancelled.stdout)] == [corpus.runs["cancel"]]
    failed = lovia("runs", "--status", "failed", "--store", corpus.url, "--json")
    assert [r["run_id"] for r in json.loads(failed.stdout)] == [corpus.runs["503"]]


def test_cancelled_is_its_own_state_and_says_by_whom(corpus: Corpus) -> None:
    data, life = asyncio.run(_life(corpus.url, corpus.runs["cancel"]))
    assert data["status"] == "cancelled" and data["error_type"] == "RunCancelled"
    assert life.cancelled_by == "user pressed stop"
    assert "user pressed stop" in life.detail


def test_a_failed_model_call_is_in_the_record_and_replays(corpus: Corpus) -> None:
    run_id = corpus.runs["503"]
    data, life = asyncio.run(_life(corpus.url, run_id))
    (failed,) = life.failed_calls
    assert (failed.turn, failed.attempt, failed.status, failed.retries) == (1, 1, 503, 2)
    assert failed.error_type == data["error_type"]
    assert KEY not in failed.message and "***" in failed.message
    replay = lovia("replay", run_id, "--turn", "1", "--store", corpus.url, "--format", "json")
    assert replay.returncode == 0, replay.stderr  # the view that was sent verifies
    (view,) = json.loads(replay.stdout)["views"]
    assert view["recorded_hash"] == failed.view_hash == view["rebuilt_hash"]
    assert view["failed_call"]["retries"] == 2 and view["failed_call"]["status"] == 503
    text = lovia("replay", run_id, "--turn", "1", "--store", corpus.url).stdout
    assert "this call FAILED after 2 retries" in text and "HTTP 503" in text
    show = lovia("show", run_id, "--store", corpus.url)
    assert f"lovia replay {run_id} --turn 1" in show.stdout and "HTTP 503" in show.stdout
    with TestClient(create_app(corpus.url), base_url=LOCAL) as client:
        page = client.get(f"/runs/{run_id}").text
        assert 'class="failed-view"' in page and f"/runs/{run_id}/turns/1" in page
        view = client.get(f"/runs/{run_id}/turns/1").text
        assert 'id="call-failed"' in view and "HTTP 503" in view
        assert client.get(f"/api/runs/{run_id}/turns/1").json()["failed_call"]["retries"] == 2


def test_approvals_are_recorded_with_who_when_and_why(corpus: Corpus) -> None:
    assert corpus.notes["approve"]["status"] == "completed"
    deny = corpus.notes["deny"]
    assert deny.returncode == 0, deny.stderr
    _, approved = asyncio.run(_life(corpus.url, corpus.runs["approve"]))
    _, denied = asyncio.run(_life(corpus.url, corpus.runs["deny"]))
    (a,) = approved.approvals
    assert (a.call_id, a.decision, a.actor, a.reason) == ("c_refund", "approved", "web:local", None)
    (d,) = denied.approvals
    assert (d.decision, d.actor, d.reason) == (
        "denied",
        f"cli:{getpass.getuser()}",
        "not this customer",
    )
    assert a.at > approved.attempts[0].started_at
    show = lovia("show", corpus.runs["deny"], "--store", corpus.url)
    assert (
        f"denied by cli:{getpass.getuser()}" in show.stdout and "not this customer" in show.stdout
    )
    with TestClient(create_app(corpus.url), base_url=LOCAL) as client:
        page = client.get(f"/runs/{corpus.runs['approve']}").text
        assert "approved by" in page and "web:local" in page
        assert 'id="run-error"' not in page  # no red ApprovalPending bar once approved


_LIST_FIELDS = ("run_id", "status", "state", "state_detail", "error_type", "started_at", "ended_at",
                "turns", "waits_on", "cancelled_by")  # fmt: skip


def test_store_cli_and_web_agree_field_by_field(corpus: Corpus) -> None:
    listed = json.loads(lovia("runs", "--all", "--store", corpus.url, "--json").stdout)
    cli_rows = {r["run_id"]: r for r in listed}
    with TestClient(create_app(corpus.url), base_url=LOCAL) as client:
        web_rows = {r["run_id"]: r for r in client.get("/api/runs").json()["runs"]}
        for name, run_id in corpus.runs.items():
            stored, _ = asyncio.run(_life(corpus.url, run_id))
            shown = json.loads(lovia("show", run_id, "--store", corpus.url, "--json").stdout)
            web = client.get(f"/api/runs/{run_id}").json()["run"]
            for key, value in stored.items():
                if key in ("wall_s", "active_s", "holder"):
                    continue  # clocks: compared below with a tolerance
                assert (name, key, shown["run"][key]) == (name, key, value)
                assert (name, key, web[key]) == (name, key, value)
            # an unfinished run's wall time runs on while the CLI starts (seconds here)
            slack = 0.5 if stored["ended_at"] is not None else 30.0
            for key in ("wall_s", "active_s"):
                assert shown["run"][key] == pytest.approx(stored[key], abs=slack)
                assert web[key] == pytest.approx(stored[key], abs=slack)
            for key in _LIST_FIELDS:
                assert (name, key, cli_rows[run_id][key]) == (name, key, stored[key])
                assert (name, key, web_rows[run_id][key]) == (name, key, stored[key])
            listed_slack = slack if stored["ended_at"] is not None else 300.0  # listed earlier
            for rows in (cli_rows, web_rows):
                assert rows[run_id]["wall_s"] == pytest.approx(stored["wall_s"], abs=listed_slack)
            html = client.get(f"/runs/{run_id}").text
            assert f'id="run-status">{stored["state"]}<' in html
            assert ('data-refresh="3"' in html) == (stored["state"] == "running")
        listing = client.get("/").text
        assert 'data-refresh="3"' not in listing  # nothing runs: no reload, not even for
        assert 'data-state="interrupted"' in listing  # the interrupted run
