"""The parent → child run link (agents as tools): stored, filtered, and migrated into stores
created before it existed (the v1 corpus written into a store without the link columns)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from store_backends import BACKENDS, Backend, pg_query
from test_conformance import PERSISTENT, info

from lovia.stores import RunInfo, Store

V1 = Path(__file__).parent / "corpus" / "v1.json"


async def _write_corpus(db: Store, corpus: dict[str, Any]) -> None:
    from test_corpus import _write  # pyright: ignore[reportPrivateUsage]

    await _write(db, corpus)


async def _link_columns(backend: Backend) -> set[str]:
    if backend.name == "sqlite":
        return {row[1] for row in await backend.raw("PRAGMA table_info(runs)")} & {
            "parent_run_id",
            "parent_call_id",
        }
    rows = await pg_query(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = $1 "
        "AND table_name = $2 AND column_name LIKE 'parent_%'",
        backend.schema,
        "lovia_runs",
    )
    return {row[0] for row in rows}


@pytest.mark.parametrize("backend", PERSISTENT, indirect=True)
async def test_a_v1_store_without_the_link_is_migrated_and_keeps_its_data(
    backend: Backend,
) -> None:
    corpus = json.loads(V1.read_text(encoding="utf-8"))
    db = backend.open()
    await _write_corpus(db, corpus)
    await db.aclose()
    # turn it into a store as v1 lovia made it: no link columns, no index
    await backend.raw("DROP INDEX IF EXISTS lovia_runs_parent")
    await backend.raw("ALTER TABLE lovia_runs DROP COLUMN parent_run_id")
    await backend.raw("ALTER TABLE lovia_runs DROP COLUMN parent_call_id")
    assert await _link_columns(backend) == set()

    db = backend.open()
    try:
        for run in corpus["runs"]:
            snap = await db.load(run["info"]["run_id"])
            assert snap is not None
            assert snap.info == RunInfo(**run["info"])
            assert snap.info.parent_run_id is None
            assert [r.model_dump() for r in snap.records] == run["records"]
        assert await _link_columns(backend) == {"parent_run_id", "parent_call_id"}
        parent = corpus["runs"][0]["info"]["run_id"]
        await db.begin(info("child-1", parent_run_id=parent, parent_call_id="call_9"))
        loaded = await db.load("child-1")
        assert loaded is not None
        assert (loaded.info.parent_run_id, loaded.info.parent_call_id) == (parent, "call_9")
        assert [r.run_id for r in await db.list_runs(parent_run_id=parent)] == ["child-1"]
        top = [r.run_id for r in await db.list_runs(top_level=True, limit=100)]
        assert "child-1" not in top and parent in top
    finally:
        await db.aclose()
    reopened = backend.open()  # a second open finds the columns there: nothing to redo
    try:
        assert [r.run_id for r in await reopened.list_runs(parent_run_id=parent)] == ["child-1"]
    finally:
        await reopened.aclose()


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
async def test_list_runs_filters_children(db: Store) -> None:
    await db.begin(info("root", started_at=1.0))
    await db.begin(info("kid-a", started_at=2.0, parent_run_id="root", parent_call_id="c1"))
    await db.begin(info("kid-b", started_at=3.0, parent_run_id="root", parent_call_id="c2"))
    await db.begin(info("grandkid", started_at=4.0, parent_run_id="kid-a", parent_call_id="c1"))
    await db.begin(info("other", started_at=5.0))

    async def ids(**kw: Any) -> list[str]:
        return [r.run_id for r in await db.list_runs(**kw)]

    assert await ids() == ["other", "grandkid", "kid-b", "kid-a", "root"]
    assert await ids(top_level=True) == ["other", "root"]
    assert await ids(parent_run_id="root") == ["kid-b", "kid-a"]
    assert await ids(parent_run_id="kid-a") == ["grandkid"]
    kid = await db.load("kid-b")
    assert kid is not None and kid.info.parent_call_id == "c2"
