"""The conformance suite's harness: the fake model server and one back-end per test."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from backends import Backend, CeleryRabbitMQ, RedisStreams
from worker_helpers import in_ci

from lovia.stores import Store

BENCH_SERVER = Path(__file__).resolve().parents[3] / "bench" / "fake_server.py"
KINDS = ["redis-streams", "celery-rabbitmq"]


class ModelServer:
    """The bench fake OpenAI-compatible server, in its own process on 127.0.0.1."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(BENCH_SERVER), "--port", "0"], stdout=subprocess.PIPE
        )
        assert self.proc.stdout is not None
        self.port = int(self.proc.stdout.readline())
        self.url = f"http://127.0.0.1:{self.port}/v1"

    def requests(self) -> int:
        """Model calls served so far."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/stats", timeout=5) as r:
            return int(json.loads(r.read())["requests"])

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


@dataclass
class Harness:
    """One test's back-end kind, its shared store, files and model server."""

    kind: str
    db: Store
    store_url: str
    dir: Path
    model: ModelServer
    made: list[Any] = field(default_factory=list[Any])

    async def backend(self, max_deliveries: int = 10, retry_s: float = 1.0) -> Backend:
        """The back-end under test; ``retry_s``: claim idle time / retry countdown."""
        common = (self.dir, self.model.url, self.store_url, self.db, max_deliveries)
        if self.kind == "redis-streams":
            backend: Any = RedisStreams(*common, claim_idle_s=retry_s)
        else:
            backend = CeleryRabbitMQ(*common, retry_s=retry_s)
        self.made.append(backend)
        try:
            await backend.ready()
        except Exception as exc:
            if in_ci():
                pytest.fail(f"{backend.name}: broker unreachable: {exc}")
            pytest.skip(f"{backend.name}: broker unreachable: {exc}")
        return backend

    def lines(self, name: str) -> list[str]:
        """The lines the workers appended to ``name`` (``tools.log``, ``completed.log``)."""
        path = self.dir / name
        return path.read_text().splitlines() if path.exists() else []
