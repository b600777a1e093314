"""docker-compose.yml and deploy/ configs: structure, pinned images, collector exporters."""

from __future__ import annotations

import shutil

import pytest
import yaml
from ops_helpers import REPO, datasource_uids, run

COMPOSE = REPO / "docker-compose.yml"
COLLECTOR = REPO / "deploy/otel-collector/config.yaml"
SERVICES = {"otel-collector", "jaeger", "prometheus", "alertmanager", "grafana"}
PORTS = {
    "otel-collector": {"4317", "4318", "8889"},
    "jaeger": {"16686"},
    "prometheus": {"9090"},
    "alertmanager": {"9093"},
    "grafana": {"3000"},
}


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def _docker_compose_works() -> bool:
    if not shutil.which("docker"):
        return False
    return run(["docker", "compose", "version"], timeout=20).returncode == 0


@pytest.mark.skipif(not _docker_compose_works(), reason="docker compose plugin not available")
def test_docker_compose_config() -> None:
    result = run(["docker", "compose", "-f", str(COMPOSE), "config", "-q"], timeout=60)
    assert result.returncode == 0, result.stderr


def test_services_present(compose: dict) -> None:
    assert set(compose["services"]) >= SERVICES


def test_images_pinned(compose: dict) -> None:
    for name, service in compose["services"].items():
        image = service["image"]
        repository, _, tag = image.rpartition(":")
        assert repository, f"{name}: image {image!r} has no tag"
        assert "/" not in tag, f"{name}: image {image!r} has no tag"
        assert tag not in {"latest", "main", "master", "nightly"}, f"{name}: {image}"
        assert any(ch.isdigit() for ch in tag), f"{name}: tag {tag!r} is not a version"
    assert compose["services"]["jaeger"]["image"].startswith("jaegertracing/jaeger:2.")


def test_ports_published_on_loopback(compose: dict) -> None:
    for name, expected in PORTS.items():
        published = compose["services"][name].get("ports", [])
        assert all(str(p).startswith("127.0.0.1:") for p in published), name
        assert {str(p).rsplit(":", 1)[-1] for p in published} >= expected, name


def test_volume_sources_exist(compose: dict) -> None:
    checked = 0
    for name, service in compose["services"].items():
        for volume in service.get("volumes", []):
            source = volume.split(":", 1)[0]
            if source.startswith("."):
                assert (REPO / source).exists(), f"{name}: {source} does not exist"
                checked += 1
            else:
                assert source in compose.get("volumes", {}), f"{name}: undeclared {source}"
    assert checked >= 7


def test_collector_uses_new_exporter_names() -> None:
    config = yaml.safe_load(COLLECTOR.read_text())
    types = {key.split("/", 1)[0] for key in config["exporters"]}
    assert not types & {"otlp", "otlphttp"}, "deprecated exporter names"
    assert types & {"otlp_grpc", "otlp_http"}
    pipelines = config["service"]["pipelines"]
    traces = pipelines["traces"]["exporters"]
    assert traces
    assert all(e.split("/")[0] in {"otlp_grpc", "otlp_http"} for e in traces)
    jaeger = config["exporters"][traces[0]]["endpoint"]
    assert jaeger.startswith(("jaeger:", "http://jaeger:"))
    assert pipelines["metrics"]["exporters"] == ["prometheus"]
    assert config["exporters"]["prometheus"]["endpoint"].endswith(":8889")
    protocols = config["receivers"]["otlp"]["protocols"]
    assert protocols["grpc"]["endpoint"].endswith(":4317")
    assert protocols["http"]["endpoint"].endswith(":4318")


def test_prometheus_config_wires_collector_rules_and_alertmanager(compose: dict) -> None:
    config = yaml.safe_load((REPO / "deploy/prometheus/prometheus.yml").read_text())
    targets = [t for job in config["scrape_configs"] for sc in job["static_configs"]
               for t in sc["targets"]]  # fmt: skip
    assert "otel-collector:8889" in targets
    am = config["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"]
    assert am == ["alertmanager:9093"]
    mounts = compose["services"]["prometheus"]["volumes"]
    assert "./dashboards/alerts:/etc/prometheus/rules:ro" in mounts
    assert config["rule_files"] == [
        "/etc/prometheus/rules/*.yml",
        "/etc/prometheus/rules/quality/*.yml",
    ]


def test_promtool_check_prometheus_config(promtool: str) -> None:
    result = run([promtool, "check", "config", str(REPO / "deploy/prometheus/prometheus.yml")])
    assert result.returncode == 0, result.stdout + result.stderr


def test_grafana_provisioning(compose: dict) -> None:
    assert datasource_uids() == {"prometheus", "jaeger"}
    sources = yaml.safe_load(
        (REPO / "deploy/grafana/provisioning/datasources/datasources.yml").read_text()
    )["datasources"]
    urls = {s["uid"]: s["url"] for s in sources}
    assert urls == {"prometheus": "http://prometheus:9090", "jaeger": "http://jaeger:16686"}
    providers = yaml.safe_load(
        (REPO / "deploy/grafana/provisioning/dashboards/dashboards.yml").read_text()
    )["providers"]
    mounts = compose["services"]["grafana"]["volumes"]
    assert f"./dashboards:{providers[0]['options']['path']}:ro" in mounts
