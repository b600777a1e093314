"""Telemetry for the commands that run an agent (``lovia resume``, ``lovia web --agent``)
and for ``lovia reprice`` (its ``lovia.cost.correction`` metric).

A resume is traced whenever telemetry is configured: by the agent's own module (it
called ``lovia.telemetry.configure``), by ``--telemetry EXPORTER`` or
``$LOVIA_TELEMETRY``, by the standard ``OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT``
variables, or — the local exporter — by a ``lovia_spans`` table in the run's own SQLite
store (``configure(exporter="local")`` put it there). A reprice exports metrics the same
way, with ``OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`` too and no local exporter (it keeps
spans only).
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

__all__ = ["has_span_table", "setup_telemetry"]


def has_span_table(url: str) -> bool:
    """True when the SQLite store at ``url`` holds the local exporter's span table."""
    if not url.lower().startswith("sqlite:"):
        return False
    from ..telemetry.local import path_from_url

    path = path_from_url(url)
    if not Path(path).is_file():
        return False
    try:
        conn = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error:
        return False
    try:
        row = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'lovia_spans'"
        ).fetchone()
    except sqlite3.Error:
        return False
    finally:
        conn.close()
    return row is not None


def _sdk_installed() -> bool:
    """True when this process already has an OpenTelemetry SDK tracer provider."""
    from opentelemetry import trace

    return type(trace.get_tracer_provider()).__module__.startswith("opentelemetry.sdk")


def _chosen(flag: str | None, url: str, metrics: bool) -> tuple[str, dict[str, Any]] | None:
    exporter = flag or os.environ.get("LOVIA_TELEMETRY") or None
    if exporter == "none":
        return None
    if exporter is None:
        signal = "METRICS" if metrics else "TRACES"
        otlp = ("OTEL_EXPORTER_OTLP_ENDPOINT", f"OTEL_EXPORTER_OTLP_{signal}_ENDPOINT")
        if any(os.environ.get(v) for v in otlp):
            exporter = "otlp"
        elif not metrics and has_span_table(url):
            exporter = "local"
    if exporter is None:
        return None
    options: dict[str, Any] = {}
    if exporter == "local":
        from ..telemetry.local import path_from_url

        options["local_path"] = path_from_url(url)
    return exporter, options


def setup_telemetry(flag: str | None, url: str, *, metrics: bool = False) -> Any:
    """Configure telemetry as described in the module docs (``metrics``: for a command
    that exports metrics only); the handle, or None when it was already configured or
    nothing asks for it."""
    if _sdk_installed():
        return None
    chosen = _chosen(flag, url, metrics)
    if chosen is None:
        return None
    from ..telemetry import configure

    exporter, options = chosen
    return configure(exporter=exporter, **options)  # pyright: ignore[reportArgumentType] -- checked by configure
