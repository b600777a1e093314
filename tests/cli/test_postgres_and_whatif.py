"""The same run replayed from PostgreSQL; the what-if rerun against a local server."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import sqlite3
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from lovia.stores import store

from .conftest import Recorded, lovia

PG_URL = os.environ.get("LOVIA_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
WIRE = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "wire"
CANNED = WIRE / "openai_chat" / "nonstream_text" / "response.body"


async def _pg(sql: str) -> None:
    import asyncpg  # type: ignore[import-untyped]

    conn = await asyncpg.connect(PG_URL, timeout=3)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


@pytest.fixture
def pg_url() -> Iterator[str]:
    schema = f"lovia_cli_{secrets.token_hex(4)}"
    try:
        asyncio.run(_pg("SELECT 1"))
    except Exception as exc:
        message = f"PostgreSQL at {PG_URL} is unreachable: {exc!r}"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    yield f"{PG_URL}?schema={schema}"
    asyncio.run(_pg(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))


async def _copy(src_url: str, dst_url: str) -> None:
    """Copy every run and session segment as stored (same ids, times, records)."""
    src, dst = store(src_url), store(dst_url)
    try:
        for info in reversed(await src.list_runs(limit=100)):
            snapshot = await src.load(info.run_id)
            assert snapshot is not None
            await dst.begin(snapshot.info)
            await dst.append(info.run_id, snapshot.records)
            await dst.finish(snapshot.info, snapshot.result)
        for session in ("sess-1", "sess-2"):
            entries = await src.load_session(session)
            for run_id in dict.fromkeys(e.run_id for e in entries):
                await dst.append_segment(
                    session, run_id, [e for e in entries if e.run_id == run_id]
                )
    finally:
        await src.aclose()
        await dst.aclose()


def test_same_output_from_postgres(recorded: Recorded, pg_url: str) -> None:
    asyncio.run(_copy(recorded.url, pg_url))
    for args in (
        ["replay", recorded.run_id],
        ["replay", recorded.run_id, "--format", "json"],
        ["show", recorded.run_id],
        ["runs"],
        ["replay", recorded.run_id, "--diff", "1", "4"],
    ):
        lite = lovia(*args, "--store", recorded.url)
        pg = lovia(*args, "--store", pg_url)
        assert lite.code == 0 and pg.code == 0, (lite.err, pg.err)
        assert pg.out == lite.out


class _Canned(BaseHTTPRequestHandler):
    bodies: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length", 0))
        _Canned.bodies.append(json.loads(self.rfile.read(length)))
        data = CANNED.read_bytes()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        return


@pytest.fixture
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Canned)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()
    httpd.server_close()


def _counts(path: Path) -> tuple[int, ...]:
    conn = sqlite3.connect(path)
    try:
        return tuple(
            conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
            for t in ("runs", "records", "sessions")
        )
    finally:
        conn.close()


def test_whatif_rerun_writes_nothing(recorded: Recorded, server: str) -> None:
    before = _counts(recorded.path)
    _Canned.bodies.clear()
    res = lovia(
        "replay",
        recorded.run_id,
        "--turn",
        "2",
        "--model",
        "openai:gpt-4o",
        "--base-url",
        server,
        "--no-stream",
        "--store",
        recorded.url,
    )
    assert res.code == 0, res.err
    assert "what-if: turn 2" in res.out and "nothing is written to the run" in res.out
    recorded_part, rerun_part = res.out.split("rerun (openai:gpt-4o):")
    assert "recorded (test:scripted):" in recorded_part
    assert 'lookup_order({"order_id": "B2"})' in recorded_part
    assert "4200 + 42 = 4242" in rerun_part and "finish stop" in rerun_part
    (body,) = _Canned.bodies
    assert body["model"] == "gpt-4o" and body["messages"][0] == {
        "role": "system",
        "content": "You help with orders.",
    }
    assert _counts(recorded.path) == before
    as_json = lovia(
        "replay",
        recorded.run_id,
        "--turn",
        "2",
        "--model",
        "openai:gpt-4o",
        "--base-url",
        server,
        "--no-stream",
        "--json",
        "--store",
        recorded.url,
    )
    data = json.loads(as_json.out)
    assert data["view_ok"] is True and data["rerun"]["finish_reason"] == "stop"
