"""Content by reference: a 50-turn run with tools in ``REFERENCE`` capture. Chat spans carry
``lovia.content.ref`` instead of messages; every reference resolves to its verified view
through the replay API, ``lovia replay``, ``lovia show`` and ``lovia web``."""

from __future__ import annotations

import asyncio
import json
import statistics
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from lovia import Agent, Runner, replay, tool
from lovia.errors import RunNotFound, UserError
from lovia.stores import store
from lovia.telemetry import attributes as A
from lovia.telemetry import content
from lovia.testing import ScriptedModel, call

from .conftest import lovia

TURNS = 50
MAX_MEDIAN = 2048
CONTENT_KEYS = {A.INPUT_MESSAGES, A.OUTPUT_MESSAGES, A.SYSTEM_INSTRUCTIONS, A.TOOL_DEFINITIONS}


@tool
async def read_page(n: int) -> str:
    """Read page n of the manual."""
    return f"page {n}: " + "the quick brown fox jumps over the lazy dog " * 6


@dataclass
class Recorded:
    url: str
    run_id: str
    chats: list[ReadableSpan]


def _record(path: Path, mode: str) -> Recorded:
    content.set_policy(mode, None)
    tp = TracerProvider()
    spans = InMemorySpanExporter()
    tp.add_span_processor(SimpleSpanProcessor(spans))
    script: list[Any] = [call("read_page", n=n) for n in range(TURNS - 1)] + ["all read"]
    agent = Agent(
        name="reader", model=ScriptedModel(script), tools=[read_page], instructions="Be brief."
    )
    url = f"sqlite:///{path}"

    async def go() -> str:
        db = store(url)
        try:
            result = await Runner.run(
                agent, "read the manual", max_turns=TURNS + 1, checkpointer=db, tracer_provider=tp
            )
        finally:
            await db.aclose()
        return result.run_id

    try:
        run_id = asyncio.run(go())
    finally:
        content.set_policy(None, None)
    chats = [s for s in spans.get_finished_spans() if s.name.startswith("chat ")]
    assert len(chats) == TURNS
    return Recorded(url, run_id, chats)


def _size(span: ReadableSpan) -> int:
    """The span's bytes in an OTLP export (its own protobuf message)."""
    return encode_spans([span]).resource_spans[0].scope_spans[0].spans[0].ByteSize()


@pytest.fixture(scope="module")
def by_ref(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Recorded]:
    mp = pytest.MonkeyPatch()
    mp.setenv(content.URL_ENV, "http://127.0.0.1:8765/ref/{run_id}/{view_hash}")
    try:
        yield _record(tmp_path_factory.mktemp("ref") / "ref.db", "REFERENCE")
    finally:
        mp.undo()


def test_chat_spans_stay_small_and_carry_no_content(
    by_ref: Recorded, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sizes = [_size(s) for s in by_ref.chats]
    median = statistics.median(sizes)
    inline = statistics.median(_size(s) for s in _record(tmp_path / "inline.db", "SPAN_ONLY").chats)
    with capsys.disabled():
        print(f"\nmedian chat span: {median:.0f} B by reference, {inline:.0f} B inline")
    assert median < MAX_MEDIAN < inline  # the same run with the messages on its spans
    for span in by_ref.chats:
        assert not set(span.attributes or {}) & CONTENT_KEYS
        assert not span.events


def test_every_reference_resolves_to_its_verified_view(by_ref: Recorded) -> None:
    run, views = asyncio.run(replay.replay_run(by_ref.run_id, by_ref.url))
    resolved = 0
    for span in by_ref.chats:
        attrs = span.attributes or {}
        ref = replay.parse_ref(str(attrs[A.CONTENT_REF]))
        assert ref is not None and ref.run_id == run.info.run_id
        view = replay.find_view(views, ref)
        assert view.ok and view.recorded_hash == attrs[A.VIEW_HASH] == ref.view_hash
        first, last = str(attrs[A.CONTENT_ENTRIES]).split("..")
        assert (view.messages[0].id, view.messages[-1].id) == (first, last)
        assert attrs[A.CONTENT_URL] == (
            f"http://127.0.0.1:8765/ref/{by_ref.run_id}/{view.recorded_hash}"
        )
        resolved += 1
    assert resolved == TURNS  # 100 % of the references
    last_ref = str((by_ref.chats[-1].attributes or {})[A.CONTENT_REF])
    _run, view = asyncio.run(replay.resolve_ref(last_ref, by_ref.url))
    assert view.turn == TURNS and len(view.messages) == 2 * TURNS - 1


def test_the_cli_resolves_a_reference(by_ref: Recorded) -> None:
    ref = str((by_ref.chats[2].attributes or {})[A.CONTENT_REF])
    shown = lovia("show", ref, "--store", by_ref.url)
    assert shown.code == 0, shown.err
    assert "turn 3 · test:scripted" in shown.out and "verified" in shown.out
    assert "page 1: the quick brown fox" in shown.out and "page 2:" not in shown.out
    data = json.loads(lovia("show", ref, "--json", "--store", by_ref.url).out)
    assert data["view"]["ok"] and data["view"]["turn"] == 3
    replayed = lovia("replay", ref, "--store", by_ref.url)
    assert replayed.code == 0, replayed.err
    assert "1/1 views rebuilt with the recorded hash (all verified)" in replayed.out
    assert ref.rsplit("/", 1)[1] in replayed.out


def test_bad_references_are_clear_errors(by_ref: Recorded) -> None:
    with pytest.raises(UserError) as bad:
        replay.parse_ref("lovia:run/abc/view/not-a-hash\x1b[31m")
    assert bad.value.hint
    unknown = f"lovia:run/{by_ref.run_id}/view/{'0' * 64}"
    with pytest.raises(RunNotFound) as missing:
        asyncio.run(replay.resolve_ref(unknown, by_ref.url))
    assert "turn 1" in (missing.value.hint or "")
    res = lovia("show", unknown, "--store", by_ref.url)
    assert res.code == 2 and "no model call with view hash" in res.err


def test_lovia_web_follows_a_reference(by_ref: Recorded) -> None:
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from lovia.web import create_app

    url = str((by_ref.chats[4].attributes or {})[A.CONTENT_URL])
    with TestClient(create_app(by_ref.url), base_url="http://127.0.0.1:8765") as client:
        hop = client.get(url, follow_redirects=False)
        assert hop.status_code == 303
        assert hop.headers["location"] == f"/runs/{by_ref.run_id}/turns/5"
        page = client.get(url)
        assert page.status_code == 200 and "page 3: the quick brown fox" in page.text
        assert client.get(f"/ref/{by_ref.run_id}/{'f' * 64}").status_code == 404
        hostile = client.get("/ref/%1b%5b31m/not-a-hash")  # a terminal escape, no hash
        assert hostile.status_code == 400 and "\x1b" not in hostile.text
