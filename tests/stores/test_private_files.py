"""Store files are private under umask 022: ``.lovia/`` is 0700 and the database, its
-wal and -shm and the span store are 0600; an existing world-readable store loses the
access of others (its group's is kept); a folder that cannot be made is a StoreError."""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from lovia import Agent, Runner
from lovia._files import private_file
from lovia.errors import StoreError
from lovia.stores import store
from lovia.telemetry import configure
from lovia.testing import ScriptedModel


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


async def _one_run(url: str, spans_url: str) -> None:
    telemetry = configure(
        service_name="perm", exporter="local", local_path=spans_url, metrics=False, set_global=False
    )
    db = store(url)
    try:
        await Runner.run(
            Agent(name="a", model=ScriptedModel(["hi"])),
            "x",
            checkpointer=db,
            session=db,
            session_id="s",
            tracer_provider=telemetry.tracer_provider,
        )
        telemetry.tracer_provider.force_flush()
        folder = Path(url.removeprefix("sqlite:///")).parent
        seen = {p.name: mode(p) for p in folder.iterdir()}  # while the WAL is open
    finally:
        telemetry.shutdown()
        await db.aclose()
    assert seen == {
        "lovia.db": 0o600,
        "lovia.db-wal": 0o600,
        "lovia.db-shm": 0o600,
        "spans.db": 0o600,
        "spans.db-wal": 0o600,
        "spans.db-shm": 0o600,
    }


def test_new_store_and_span_files_are_private(tmp_path: Path, umask_022: None) -> None:
    folder = tmp_path / "proj" / ".lovia"
    asyncio.run(_one_run(f"sqlite:///{folder / 'lovia.db'}", f"sqlite:///{folder / 'spans.db'}"))
    assert mode(folder) == 0o700
    assert mode(folder.parent) == 0o700  # every folder lovia created


def test_existing_folder_keeps_its_mode(tmp_path: Path, umask_022: None) -> None:
    tmp_path.chmod(0o755)
    private_file(tmp_path / "lovia.db")
    assert mode(tmp_path) == 0o755 and mode(tmp_path / "lovia.db") == 0o600


def test_existing_world_readable_store_loses_others_access(tmp_path: Path, umask_022: None) -> None:
    db = tmp_path / "lovia.db"
    asyncio.run(_create(db))
    db.chmod(0o664)
    asyncio.run(_create(db))  # opened again for writing
    assert mode(db) == 0o660
    sidecars = [tmp_path / "lovia.db-wal", tmp_path / "lovia.db-shm"]
    for path in sidecars:  # left by a crashed process
        path.touch()
        path.chmod(0o646)
    private_file(db)
    assert [mode(p) for p in sidecars] == [0o640, 0o640]


async def _create(db: Path) -> None:
    opened = store(f"sqlite:///{db}")
    await opened.list_runs()
    await opened.aclose()


def test_read_only_opening_changes_no_mode(tmp_path: Path, umask_022: None) -> None:
    db = tmp_path / "lovia.db"
    asyncio.run(_create(db))
    db.chmod(0o644)

    async def read() -> None:
        opened = store(f"sqlite:///{db}", read_only=True)
        await opened.list_runs()
        await opened.aclose()

    asyncio.run(read())
    assert mode(db) == 0o644


def _read_only_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    parent = tmp_path / "ro"
    parent.mkdir()
    parent.chmod(0o555)
    try:
        (parent / "probe").mkdir()
    except PermissionError:
        return parent  # a real read-only folder (not running as root)
    (parent / "probe").rmdir()
    real_mkdir = Path.mkdir

    def denied(self: Path, mode: int = 0o777, *args: bool) -> None:
        if self.parent == parent:
            raise PermissionError(13, "Permission denied", str(self))
        real_mkdir(self, mode, *args)

    monkeypatch.setattr(Path, "mkdir", denied)  # root ignores the mode: the same error
    return parent


def test_missing_subfolder_under_read_only_folder_is_a_store_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parent = _read_only_folder(tmp_path, monkeypatch)
    url = f"sqlite:///{parent / 'sub' / 'deeper' / 'lovia.db'}"

    async def open_it() -> None:
        opened = store(url)
        try:
            await opened.list_runs()
        finally:
            await opened.aclose()

    with pytest.raises(StoreError) as info:
        asyncio.run(open_it())
    assert info.value.message == (
        f"cannot create the folder {parent / 'sub'} for the lovia store: Permission denied"
    )
    assert info.value.hint is not None and "--store" in info.value.hint
    parent.chmod(0o755)


def test_a_file_in_the_way_of_the_folder_is_a_store_error(tmp_path: Path) -> None:
    (tmp_path / "blocker").write_text("not a folder")
    with pytest.raises(StoreError, match="a file with that name is in the way"):
        private_file(tmp_path / "blocker" / "lovia.db")
    with pytest.raises(StoreError, match="blocker/sub for the lovia store: Not a directory"):
        private_file(tmp_path / "blocker" / "sub" / "lovia.db")
