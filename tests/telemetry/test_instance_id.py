"""``configure()`` gives each process its own ``service.instance.id`` (a random UUID) unless
the user set one, so the series of two processes of one service never merge: the
collector's Prometheus exporter turns the id into the ``instance`` label, and without it
two ``lovia reprice`` processes with the same labels wrote one series (the later value
replacing the earlier). OpenTelemetry Python SDKs from mid-2026 on generate one themselves;
older ones (lovia supports them) do not, and lovia adds its own: every test runs against
both ("older sdk" switches the SDK's detector off)."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.request
import uuid
import warnings
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk import resources

from lovia.telemetry import configure
from lovia.telemetry.sdk import process_instance_id

KEY = "service.instance.id"
SRC = Path(__file__).resolve().parents[2] / "src"
PRINT_ID = (
    "from lovia.telemetry import configure\n"
    "h = configure('t', 'none', metrics=False, set_global=False)\n"
    "print(h.tracer_provider.resource.attributes['service.instance.id'])\n"
    "h.shutdown()\n"
)


def _resource(**options: Any) -> dict[str, Any]:
    handle = configure("t", "none", metrics=False, set_global=False, **options)
    try:
        return dict(handle.tracer_provider.resource.attributes)
    finally:
        handle.shutdown()


@pytest.fixture(autouse=True)
def _no_resource_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_RESOURCE_ATTRIBUTES", raising=False)


@pytest.fixture(params=["sdk", "older sdk"])
def sdk(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    detector = getattr(resources, "ServiceInstanceIdResourceDetector", None)
    if request.param == "older sdk" and detector is not None:
        monkeypatch.setattr(detector, "detect", lambda self: resources.Resource.get_empty())
    return request.param


def test_a_process_gets_one_random_instance_id(sdk: str) -> None:
    first, second = _resource()[KEY], _resource()[KEY]
    assert uuid.UUID(first).version == 4 and str(uuid.UUID(first)) == first
    assert first == second  # every configure() of the process
    if sdk == "older sdk":
        assert first == process_instance_id()


def test_the_metrics_carry_it_to_prometheus(sdk: str) -> None:
    """target_info (the resource) names the instance, as the collector's instance label."""
    handle = configure("t", "none", metrics="prometheus", prometheus_port=0, set_global=False)
    try:
        port = handle.prometheus_server.server_port
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
            text = resp.read().decode()
    finally:
        handle.shutdown()
    (info,) = [line for line in text.splitlines() if line.startswith("target_info{")]
    assert f'service_instance_id="{_resource()[KEY]}"' in info


def test_other_processes_get_other_ids() -> None:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    env.pop("OTEL_RESOURCE_ATTRIBUTES", None)
    ids = []
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, "-c", PRINT_ID], env=env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        ids.append(done.stdout.strip())
    assert all(uuid.UUID(i) for i in ids)
    assert len({*ids, _resource()[KEY]}) == 3


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX only")
def test_a_forked_child_gets_its_own_id() -> None:
    """Worker pools fork: a child must not report as its parent."""
    parent = process_instance_id()
    read, write = os.pipe()
    with warnings.catch_warnings():  # Python 3.12+ warns about forking with threads
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child
        os.close(read)
        os.write(write, process_instance_id().encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        child = pipe.read()
    os.waitpid(pid, 0)
    assert uuid.UUID(child) and child != parent
    assert process_instance_id() == parent


def test_the_users_id_wins(sdk: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _resource(resource_attributes={KEY: "worker-7"})[KEY] == "worker-7"
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", f"{KEY}=pod-3,deployment.environment.name=ci")
    resource = _resource()
    assert (resource[KEY], resource["deployment.environment.name"]) == ("pod-3", "ci")
    assert _resource(resource_attributes={KEY: "worker-7"})[KEY] == "worker-7"  # over the env
