"""``lovia web`` without a browser: JSON endpoints over the shared data layer, the
security guard (token, CSRF, Host), the extra's install hint, and the CLI server."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from lovia import replay
from lovia.providers.registry import register_provider
from lovia.replay._policy import WhatIfPolicy
from lovia.testing import ScriptedModel
from lovia.web import create_app, redact_url

from .conftest import ROOT, Recorded, run_async

LOCAL = "http://127.0.0.1:8765"


@pytest.fixture
def client(recorded: Recorded) -> Iterator[TestClient]:
    with TestClient(create_app(recorded.url), base_url=LOCAL) as opened:
        yield opened


def csrf(client: TestClient) -> str:
    match = re.search(r'name="lovia-csrf" content="([^"]+)"', client.get("/").text)
    assert match
    return match.group(1)


def test_json_twins_come_from_the_replay_data_layer(client: TestClient, recorded: Recorded) -> None:
    runs = client.get("/api/runs").json()["runs"]
    assert recorded.run_id in [r["run_id"] for r in runs]
    run = client.get(f"/api/runs/{recorded.run_id}").json()
    assert run["run"]["status"] == "completed"
    assert any(i["mark"] == "handoff" for t in run["turns"] for i in t["items"])
    view = client.get(f"/api/runs/{recorded.run_id}/turns/2").json()
    views = run_async(lambda: replay.views(recorded.run_id, recorded.url))
    assert view["view"]["rebuilt_hash"] == replay.select(views, 2)[-1].rebuilt_hash
    assert view["view"]["ok"] is True and view["mismatch"] is None
    diff = client.get(f"/api/runs/{recorded.run_id}/diff?a=1&b=3").json()
    expected = replay.diff_views(replay.select(views, 1)[-1], replay.select(views, 3)[-1])
    assert diff == json.loads(json.dumps(expected.to_dict()))
    assert diff["added"] and diff["summarized"]  # turn 3 summarized the greeting


def test_runs_filters_and_errors(client: TestClient) -> None:
    failed = client.get("/api/runs?status=failed").json()["runs"]
    assert [r["run_id"] for r in failed] == ["run-failed-1"]
    assert failed[0]["error_type"] == "ProviderServerError" and failed[0]["error"]
    assert client.get("/api/runs?model=nosuch").json()["runs"] == []
    assert len(client.get("/api/runs?model=test:").json()["runs"]) >= 4
    future = client.get("/api/runs?since=2999-01-01").json()["runs"]
    assert future == []
    # statuses are shown generically (a newer lovia may add some): an unknown one
    # filters to nothing instead of failing
    assert client.get("/api/runs?status=weird").json()["runs"] == []
    bad = client.get("/api/runs?sort=weird")
    assert bad.status_code == 400 and "cost" in bad.json()["hint"]
    missing = client.get("/runs/no-such-run")
    assert missing.status_code == 404 and "no run" in missing.text


def test_runs_are_paged(recorded: Recorded) -> None:
    from lovia.web import WebConfig

    config = WebConfig(store=recorded.url, runs_per_page=2)
    with TestClient(create_app(recorded.url, config=config), base_url=LOCAL) as client:
        first = client.get("/api/runs").json()
        second = client.get("/api/runs?page=1").json()
    assert len(first["runs"]) == 2 and first["has_next"]
    assert not {r["run_id"] for r in first["runs"]} & {r["run_id"] for r in second["runs"]}


@pytest.fixture
def whatif_client(recorded: Recorded) -> Iterator[TestClient]:
    """A server with what-if on: it needs its access token, on loopback too."""
    app = create_app(recorded.url, token="t0ken-for-whatif", whatif=WhatIfPolicy())
    with TestClient(app, base_url=LOCAL) as opened:
        opened.headers["authorization"] = "Bearer t0ken-for-whatif"
        yield opened


def test_post_needs_the_csrf_token(whatif_client: TestClient, recorded: Recorded) -> None:
    client = whatif_client
    url = f"/api/runs/{recorded.run_id}/turns/2/whatif"
    assert client.post(url, json={"model": "x:y"}).status_code == 403
    token = csrf(client)
    evil = client.post(
        url, json={"model": "x:y"}, headers={"x-lovia-csrf": token, "origin": "http://evil.test"}
    )
    assert evil.status_code == 403
    ok = client.post(url, json={"model": "nosuch:model"}, headers={"x-lovia-csrf": token})
    assert ok.status_code == 400 and "nosuch" in ok.json()["error"]  # past the guard


def test_whatif_uses_the_replay_model_path(whatif_client: TestClient, recorded: Recorded) -> None:
    client = whatif_client
    register_provider("webtest", lambda model: ScriptedModel(["B2 is on its way."]), replace=True)
    url = f"/api/runs/{recorded.run_id}/turns/2/whatif"
    data = client.post(
        url, json={"model": "webtest:m"}, headers={"x-lovia-csrf": csrf(client)}
    ).json()
    assert data["view_ok"] is True
    assert data["recorded"]["entries"][0]["type"] == "tool_call"
    assert data["rerun"]["entries"] == [{"type": "assistant", "text": "B2 is on its way."}]


def test_unknown_host_header_is_refused(client: TestClient) -> None:
    """DNS rebinding: a page on evil.test that resolves to 127.0.0.1 gets nothing."""
    assert client.get("/", headers={"host": "evil.test:8765"}).status_code == 421
    assert client.get("/", headers={"host": "localhost:8765"}).status_code == 200
    assert client.get("/", headers={"host": "[::1]:8765"}).status_code == 200
    assert client.get("/", headers={"host": "127.0.0.1.evil.test"}).status_code == 421


def test_token_is_required_when_set(recorded: Recorded) -> None:
    app = create_app(recorded.url, token="s3cret-token", allowed_hosts=("*",))
    with TestClient(app, base_url="http://10.0.0.5:8765") as client:
        assert client.get("/api/runs").status_code == 401
        assert client.get("/api/runs", headers={"authorization": "Bearer wrong"}).status_code == 401
        ok = client.get("/api/runs", headers={"authorization": "Bearer s3cret-token"})
        assert ok.status_code == 200
        traded = client.get("/?token=s3cret-token", follow_redirects=False)
        assert traded.status_code == 303 and "token" not in traded.headers["location"]
        assert client.get("/").status_code == 200  # the cookie now carries it


def test_security_headers_and_no_store_password(client: TestClient) -> None:
    page = client.get("/")
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert page.headers["x-content-type-options"] == "nosniff"
    assert (
        redact_url("postgresql://lovia:hunter2@db:5432/runs")
        == "postgresql://lovia:***@db:5432/runs"
    )
    assert redact_url("sqlite:///x.db") == "sqlite:///x.db"


def test_trace_link_only_for_hex_ids_into_http() -> None:
    from lovia.web._trace import trace_link

    tid = "0af7651916cd43dd8448eb211c80319c"
    assert (
        trace_link("http://jaeger:16686/trace/{trace_id}", tid)
        == f"http://jaeger:16686/trace/{tid}"
    )
    assert trace_link("{trace_id}", "javascript:alert(1)") is None
    assert trace_link("javascript:{trace_id}", tid) is None


def _env() -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    env.pop("LOVIA_WEB_TOKEN", None)
    return env


def test_import_lovia_does_not_import_the_web_stack() -> None:
    code = (
        "import sys, lovia, lovia.cli\n"
        "heavy = [m for m in ('starlette', 'uvicorn', 'jinja2', 'lovia.web') if m in sys.modules]\n"
        "print(heavy)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=_env(), check=True
    )
    assert out.stdout.strip() == "[]"


def test_missing_extra_gives_the_install_hint(recorded: Recorded) -> None:
    code = (
        "import sys\n"
        "sys.modules['starlette'] = None  # as if lovia[web] were not installed\n"
        "from lovia.cli import main\n"
        f"sys.exit(main(['web', '--store', {recorded.url!r}]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=_env(), check=False
    )
    assert out.returncode == 2
    assert "hint: pip install 'lovia[web]'" in out.stderr
    assert "Traceback" not in out.stderr


def _start(*args: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "lovia.cli", "web", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    assert proc.stdout is not None
    lines = []
    while True:
        line = proc.stdout.readline()
        if not line:
            raise AssertionError(f"lovia web exited: {proc.stderr.read() if proc.stderr else ''}")
        lines.append(line)
        if "lovia web on" in line:
            break
    if "--host" in args:
        lines.extend(proc.stdout.readline() for _ in range(2))
    return proc, "".join(lines)


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url, headers=headers or {})
    for _ in range(100):
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()
        except urllib.error.URLError:
            time.sleep(0.05)
    raise AssertionError(f"{url} never answered")


def test_cli_serves_on_loopback_without_token(recorded: Recorded) -> None:
    proc, banner = _start("--store", recorded.url)
    try:
        address = re.search(r"(http://127\.0\.0\.1:\d+/)", banner)
        assert address and "token" not in banner
        status, body = _get(address.group(1))
        assert status == 200 and recorded.run_id in body
    finally:
        proc.terminate()
        proc.wait(10)


def test_cli_on_another_address_requires_the_token(recorded: Recorded) -> None:
    proc, banner = _start("--store", recorded.url, "--host", "0.0.0.0")
    try:
        assert "every request needs this access token" in banner
        token = re.search(r"\?token=(\S+)", banner)
        port = re.search(r":(\d+)/", banner)
        assert token and port
        url = f"http://127.0.0.1:{port.group(1)}/api/runs"
        assert _get(url)[0] == 401
        status, body = _get(url, {"authorization": f"Bearer {token.group(1)}"})
        assert status == 200 and json.loads(body)["runs"]
    finally:
        proc.terminate()
        proc.wait(10)


def test_waterfall_from_the_span_store_and_trace_link(tmp_path: Path) -> None:
    """A traced run's page draws every stored span once, nested as stored, and links
    the trace to Jaeger/Tempo through $LOVIA_TRACE_URL."""
    from cli.test_golden import _traced_run
    from lovia.telemetry import load_spans

    url = f"sqlite:///{tmp_path / 'traced.db'}"
    run_id = run_async(lambda: _traced_run(url))
    stored = load_spans(url, run_id=run_id)
    app = create_app(url, trace_url="http://jaeger.local:16686/trace/{trace_id}")
    with TestClient(app, base_url=LOCAL) as client:
        data = client.get(f"/api/runs/{run_id}").json()
        page = client.get(f"/runs/{run_id}").text
    assert data["span_source"] == "span store"
    # every stored span once, plus a row per checkpoint write recorded as a span event
    # (a write that took 10 ms or more on a loaded machine is a span of its own)
    noted = sum(e["name"] == "lovia.checkpoint.write" for s in stored for e in s["events"])
    spans = sum(s["name"] == "lovia.checkpoint.write" for s in stored)
    # the golden run's writes: start; the model turn with the ledger, the result; the
    # run's end with the final answer
    assert noted + spans == 4
    assert len(data["bars"]) == len(stored) + noted > 4
    assert sum(b["name"] == "lovia.checkpoint.write" for b in data["bars"]) == noted + spans
    ids = {b["span_id"]: b for b in data["bars"]}
    for bar in data["bars"]:
        parent = ids.get(bar["parent_id"] or "")
        assert bar["depth"] == (0 if parent is None else parent["depth"] + 1)
    assert {b["name"] for b in data["bars"] if b["depth"] == 2} >= {"execute_tool lookup"}
    trace_id = data["run"]["trace_id"]
    assert data["trace_link"] == f"http://jaeger.local:16686/trace/{trace_id}"
    assert f'href="http://jaeger.local:16686/trace/{trace_id}"' in page


def test_runs_in_flight_refresh_and_finished_do_not(tmp_path: Path) -> None:
    from lovia.stores import RunInfo, store
    from lovia.stores.lifecycle import owner_id

    url = f"sqlite:///{tmp_path / 'live.db'}"

    async def begin(lease: bool) -> None:
        db = store(url)
        await db.begin(RunInfo(run_id="live-1", agent="a", started_at=time.time()))
        if lease:  # a live worker (this process) holds it
            assert await db.acquire("live-1", owner_id(), 60.0) is not None
        else:
            await db.release("live-1", (await db.lease_holder("live-1")) or "")
        await db.aclose()

    run_async(lambda: begin(True))
    with TestClient(create_app(url), base_url=LOCAL) as client:
        # pages in flight ask for updates (in place, no reload); finished ones do not
        assert 'id="results" data-live="on"' in client.get("/").text
        assert 'data-live-url="/api/runs/live-1/live"' in client.get("/runs/live-1").text
        assert 'id="results" data-live="off"' in client.get("/?status=completed").text
        assert "data-refresh" not in client.get("/").text  # never a full reload
        live = client.get("/api/runs/live-1/live").json()
        assert live["live"] is True and live["status"] == "running" and live["holder"]
    run_async(lambda: begin(False))  # its worker is gone: nothing to wait for
    with TestClient(create_app(url), base_url=LOCAL) as client:
        page = client.get("/").text
        assert 'data-live="off"' in page and 'data-state="interrupted"' in page
        assert "data-live-url" not in client.get("/runs/live-1").text
        assert client.get("/api/runs?status=interrupted").json()["runs"][0]["state"] == (
            "interrupted"
        )
        # nobody holds the run's lease: shown interrupted, and the page stops asking
        live = client.get("/api/runs/live-1/live").json()
        assert live == {
            "status": "interrupted",
            "detail": "no worker holds its lease (it expired unrenewed)",
            "turns": 0,
            "version": 0,
            "holder": None,
            "orphaned": True,
            "live": False,
        }


def test_live_run_with_a_holder_keeps_updating(tmp_path: Path) -> None:
    from lovia.stores import RunInfo, store

    url = f"sqlite:///{tmp_path / 'held.db'}"

    async def begin() -> None:
        db = store(url)
        await db.begin(RunInfo(run_id="held-1", agent="a", started_at=time.time()))
        assert await db.acquire("held-1", "worker-7", 60.0) is not None
        await db.aclose()

    run_async(begin)
    with TestClient(create_app(url), base_url=LOCAL) as client:
        live = client.get("/api/runs/held-1/live").json()
    assert live["live"] is True and live["holder"] == "worker-7" and live["status"] == "running"


@pytest.mark.lovia_unconsumed  # the run ends before the script does, on purpose
def test_deny_resumes_the_run_with_the_reason(tmp_path: Path) -> None:
    from lovia.stores import store

    from .scenarios import record_paused, support_agent

    url = f"sqlite:///{tmp_path / 'deny.db'}"
    run_async(lambda: record_paused(url))
    app = create_app(url, agent=lambda: support_agent(ScriptedModel(["No refund, sorry."])))
    with TestClient(app, base_url=LOCAL) as client:
        token = csrf(client)
        bad = client.post(
            "/api/runs/run-paused/approvals",
            json={"decisions": {"c_refund": 3}},
            headers={"x-lovia-csrf": token},
        )
        assert bad.status_code == 400 and "decisions" in bad.json()["error"]
        done = client.post(
            "/api/runs/run-paused/approvals",
            json={"decisions": {"c_refund": "over the limit"}},
            headers={"x-lovia-csrf": token},
        ).json()
        assert done["status"] == "completed" and done["output"] == "No refund, sorry."
        again = client.post(
            "/api/runs/run-paused/approvals",
            json={"decisions": {"c_refund": True}},
            headers={"x-lovia-csrf": token},
        )
        assert again.status_code == 400 and "not waiting for approval" in again.json()["error"]

    async def results() -> dict[str, tuple[str, bool]]:
        db = store(url)
        snap = await db.load("run-paused")
        await db.aclose()
        assert snap is not None
        return {
            e.call_id: (e.content, e.is_error) for e in snap.entries() if e.type == "tool_result"
        }

    found = run_async(results)
    assert found["c_look"] == ("A1: shipped", False)  # needed no approval: ran on resume
    assert found["c_refund"][1] is True and "over the limit" in found["c_refund"][0]
