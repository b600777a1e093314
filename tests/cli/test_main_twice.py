"""``lovia.cli.main`` runs in-process any number of times (tests, notebooks, wrappers)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from lovia import Agent, Runner
from lovia.cli import main
from lovia.stores.sqlite import SQLiteStore
from lovia.testing import ScriptedModel


async def _record(db: Path) -> None:
    store = SQLiteStore(f"sqlite:///{db}")
    agent = Agent(name="a", model=ScriptedModel(["hi"]))
    await Runner.run(agent, "go", run_id="r1", checkpointer=store)
    await store.aclose()


def test_main_can_run_twice_in_one_process(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "runs.db"
    asyncio.run(_record(db))
    url = f"sqlite:///{db}"
    outputs: list[list[str]] = []
    for _ in range(2):  # the second call once met a submodule shadowing a helper
        assert main(["runs", "--store", url, "--json"]) == 0
        outputs.append([r["run_id"] for r in json.loads(capsys.readouterr().out)])
    assert outputs == [["r1"], ["r1"]]
