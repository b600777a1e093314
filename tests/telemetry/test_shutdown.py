"""A failing collector never holds a deploy: ``Telemetry.shutdown()`` and process exit
return within ``shutdown_timeout`` against a collector that accepts connections and never
answers, and against a closed port. The OpenTelemetry exporters alone wait 10 s per
signal (plus retries); the bounds below are the configured limit with generous slack."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from lovia.errors import UserError
from lovia.telemetry import Telemetry, configure

SHUTDOWN_S = 1.0
SLACK_S = 4.0  # the unbounded shutdown takes 10-20 s
SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.fixture
def hanging_collector() -> Iterator[str]:
    """Accepts TCP connections (the kernel backlog does) and never reads or answers."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    sock.close()


@pytest.fixture
def closed_port() -> str:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now: connection refused
    return f"http://127.0.0.1:{port}"


def _emit(handle: object) -> None:
    tp = handle.tracer_provider  # type: ignore[attr-defined]
    tp.get_tracer("test").start_span("work").end()
    meter = handle.meter_provider.get_meter("test")  # type: ignore[attr-defined]
    meter.create_counter("lovia.test.count").add(1)


@pytest.mark.parametrize("collector", ["hanging_collector", "closed_port"])
def test_shutdown_returns_within_the_bound(
    collector: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", request.getfixturevalue(collector))
    handle = configure("t", "otlp", set_global=False, shutdown_timeout=SHUTDOWN_S)
    _emit(handle)
    t0 = time.monotonic()
    flushed = handle.shutdown()
    elapsed = time.monotonic() - t0
    assert elapsed < SHUTDOWN_S + SLACK_S, f"shutdown took {elapsed:.1f}s"
    assert flushed is False  # nothing could be delivered: it says so
    assert handle.shutdown() is True  # a second call is a no-op


CHILD = textwrap.dedent(
    """
    import sys
    from lovia.telemetry import Telemetry, configure
    handle = configure("t", "otlp", set_global=True, shutdown_timeout={timeout})
    handle.tracer_provider.get_tracer("t").start_span("work").end()
    print("exiting", flush=True)
    """
)


def test_process_exit_is_bounded_without_an_explicit_shutdown(hanging_collector: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(SRC), "OTEL_EXPORTER_OTLP_ENDPOINT": hanging_collector}
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD.format(timeout=SHUTDOWN_S)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "exiting"
    t0 = time.monotonic()  # from the end of the program: imports are not counted
    try:
        proc.wait(timeout=60)
    finally:
        proc.kill()
    elapsed = time.monotonic() - t0
    assert elapsed < SHUTDOWN_S + SLACK_S, f"exit took {elapsed:.1f}s"
    assert proc.returncode == 0
    assert proc.stderr is not None and "shutdown_timeout" in proc.stderr.read()


def test_shutdown_timeout_is_validated() -> None:
    with pytest.raises(UserError) as info:
        configure("t", "none", set_global=False, shutdown_timeout=0)
    assert "shutdown_timeout" in info.value.message


class _StuckProvider:
    """A provider whose flush hangs like an exporter talking to a dead collector (until
    the test lets it go, at most HANG_S)."""

    HANG_S = 30.0

    def __init__(self) -> None:
        self.release = threading.Event()
        self.asked: list[int] = []

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        self.asked.append(timeout_millis)
        self.release.wait(self.HANG_S)
        return True


def test_force_flush_is_bounded_by_shutdown_timeout() -> None:
    """``force_flush()`` (its default was 30 s per signal) gives up at
    ``shutdown_timeout`` like ``shutdown()``, says it did not finish, and hands the
    bound down to the SDK."""
    tracer, meter = _StuckProvider(), _StuckProvider()
    handle = Telemetry(tracer_provider=tracer, meter_provider=meter, shutdown_timeout=0.2)
    try:
        assert handle.force_flush() is False  # returned while the flush still hangs
        assert not tracer.release.is_set() and tracer.asked == [200]
    finally:
        tracer.release.set()
        meter.release.set()
    explicit = Telemetry(tracer_provider=_StuckProvider())
    explicit.tracer_provider.release.set()
    assert explicit.force_flush(timeout_millis=1500) is True
    assert explicit.tracer_provider.asked == [1500]
