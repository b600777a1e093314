"""Fixtures of the queue conformance suite: ``harness`` (once per back-end) holds the
fake model server, a shared SQLite store and makes the back-end (a missing broker skips
locally, fails in CI)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from conformance_harness import KINDS, Harness, ModelServer

from lovia.stores import store


@pytest.fixture
def model_server() -> Iterator[ModelServer]:
    server = ModelServer()
    yield server
    server.close()


@pytest.fixture(params=KINDS)
async def harness(
    request: pytest.FixtureRequest, tmp_path: Path, model_server: ModelServer
) -> AsyncIterator[Harness]:
    store_url = f"sqlite:///{tmp_path / 'runs.db'}"
    h = Harness(request.param, store(store_url), store_url, tmp_path, model_server)
    yield h
    for backend in h.made:
        await backend.aclose()
    await h.db.aclose()
