"""The Celery app a conformance ``celery worker`` process loads (``celery -A celery_app``).

Configured by environment: ``LOVIA_CONFORMANCE_{BROKER,STORE,QUEUE,MAX_DELIVERIES,
RETRY_S,SWEEP_S,DEPS}`` (``DEPS``: the import path of the ``deps`` factory) and
``LOVIA_CONFORMANCE_CELERY_CONF`` (JSON: Celery settings the app makes itself, e.g. to
measure a broker drop with Celery's own defaults); the submitter in the test builds the
same ``CeleryRunQueue``. The worker has an OpenTelemetry SDK tracer (no exporter), so
each stored run carries its trace id.
"""

from __future__ import annotations

import json
import os
from typing import Any

from celery import Celery

from lovia.integrations.celery import CeleryRunQueue


def make(
    broker: str, store: str, queue: str, max_deliveries: int, retry_s: float
) -> tuple[Any, CeleryRunQueue]:
    app = Celery("lovia_conformance", broker=broker)
    app.conf.worker_prefetch_multiplier = 1
    app.conf.broker_connection_retry_on_startup = True
    app.conf.worker_hijack_root_logger = False
    app.conf.update(json.loads(os.environ.get("LOVIA_CONFORMANCE_CELERY_CONF", "{}")))
    runs = CeleryRunQueue(
        app,
        store,
        agents=["conformance_agent:agent"],
        queue=queue,
        max_deliveries=max_deliveries,
        retry_delay_s=retry_s,
        sweep_s=float(os.environ.get("LOVIA_CONFORMANCE_SWEEP_S", "1")),
        deps=os.environ.get("LOVIA_CONFORMANCE_DEPS") or None,
    )
    return app, runs


if "LOVIA_CONFORMANCE_BROKER" in os.environ:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    trace.set_tracer_provider(TracerProvider())  # the worker traces: runs get a trace_id

    app, runs = make(
        os.environ["LOVIA_CONFORMANCE_BROKER"],
        os.environ["LOVIA_CONFORMANCE_STORE"],
        os.environ["LOVIA_CONFORMANCE_QUEUE"],
        int(os.environ["LOVIA_CONFORMANCE_MAX_DELIVERIES"]),
        float(os.environ["LOVIA_CONFORMANCE_RETRY_S"]),
    )
