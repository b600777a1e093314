"""``configure()``: the one-liner that installs an OpenTelemetry SDK for an application.

The library never does this on import. ``configure`` creates a ``TracerProvider`` (and a
``MeterProvider``), sets them as the process-global providers (OpenTelemetry allows
that once per process: call ``configure`` once, at startup) and returns a
:class:`Telemetry` whose ``shutdown()`` flushes and stops the exporters.

Shutdown is bounded: ``Telemetry.shutdown()`` — also run at process exit — waits at most
``shutdown_timeout`` seconds (default 5) for the exporters, so a collector that is down or
hangs never holds a deploy; what was not sent by then is dropped with a warning.
``Telemetry.force_flush()`` is bounded the same way (by default).

Needs the ``otel`` extra (``pip install 'lovia[otel]'``).
"""

from __future__ import annotations

import atexit
import importlib
import logging
import os
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..errors import UserError
from ..pricing import price_table_version
from . import attributes as A
from . import content as C
from .local import path_from_url

__all__ = ["Telemetry", "configure"]

logger = logging.getLogger("lovia.telemetry")

Exporter = Literal["otlp", "console", "local", "none"]
Metrics = bool | Literal["otlp", "console", "prometheus", "none"]
DEFAULT_SHUTDOWN_TIMEOUT = 5.0


@dataclass(slots=True)
class Telemetry:
    """What ``configure`` installed; keep it to flush and shut down at exit."""

    tracer_provider: Any
    meter_provider: Any = None
    logger_provider: Any = None
    """Takes the content events (``EVENT_ONLY`` / ``SPAN_AND_EVENT`` capture); None when
    the exporter has no logs destination."""
    metric_readers: list[Any] = field(default_factory=list[Any])
    prometheus_server: Any = None
    local_path: Path | None = None
    shutdown_timeout: float = DEFAULT_SHUTDOWN_TIMEOUT
    """The longest ``shutdown()`` waits for the exporters, in seconds."""
    _closed: bool = field(default=False, init=False, repr=False)

    def force_flush(self, timeout_millis: int | None = None) -> bool:
        """Export what is buffered, waiting at most ``timeout_millis`` (default:
        ``shutdown_timeout``); False when it was not all sent in time (a collector that
        is down or hangs never holds the caller longer)."""
        limit = self.shutdown_timeout if timeout_millis is None else timeout_millis / 1000
        millis = max(1, int(limit * 1000))

        def flush() -> bool:
            ok = bool(self.tracer_provider.force_flush(millis))
            for provider in (self.meter_provider, self.logger_provider):
                if provider is not None:
                    ok = bool(provider.force_flush(millis)) and ok
            return ok

        return _bounded(flush, limit, "force_flush", "still buffered")

    def shutdown(self) -> bool:
        """Flush and stop exporters (and the Prometheus endpoint), waiting at most
        ``shutdown_timeout`` seconds; False when the exporters did not finish in time
        (their unsent data is dropped, their daemon threads do not hold the process)."""
        if self._closed:
            return True
        self._closed = True
        atexit.unregister(self.shutdown)
        return _bounded(self._stop_all, self.shutdown_timeout, "shutdown", "dropped")

    def _stop_all(self) -> bool:
        self.tracer_provider.shutdown()
        for provider in (self.meter_provider, self.logger_provider):
            if provider is not None:
                provider.shutdown()
        if self.prometheus_server is not None:
            self.prometheus_server.shutdown()
            self.prometheus_server.server_close()
            self.prometheus_server = None
        return True


def _bounded(work: Callable[[], bool], seconds: float, name: str, unsent: str) -> bool:
    """``work()`` in a daemon thread, waiting at most ``seconds``: its result, or False
    (with a warning) when it did not finish; the thread never holds the process."""
    result: list[bool] = []
    done = threading.Event()

    def run() -> None:
        try:
            result.append(work())
        except Exception:
            logger.exception("telemetry %s failed", name)
            result.append(False)
        finally:
            done.set()

    threading.Thread(target=run, name=f"lovia-telemetry-{name}", daemon=True).start()
    if done.wait(seconds):
        return result[0]
    logger.warning(
        "telemetry %s did not finish within %gs (configure(shutdown_timeout=...); is the "
        "collector down or hanging?); unsent spans and metrics were %s",
        name,
        seconds,
        unsent,
    )
    return False


def _sdk() -> None:
    try:
        importlib.import_module("opentelemetry.sdk")
    except ImportError as exc:
        raise UserError(
            "lovia.telemetry.configure needs the OpenTelemetry SDK",
            hint="pip install 'lovia[otel]'",
        ) from exc


def _span_processor(exporter: Exporter, local_path: Path | None) -> Any:
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    if exporter == "otlp":
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError as exc:
            raise UserError(
                "exporter='otlp' needs opentelemetry-exporter-otlp-proto-http",
                hint="pip install 'lovia[otel]'",
            ) from exc
        return BatchSpanProcessor(OTLPSpanExporter())  # endpoint/headers from OTEL_* env
    if exporter == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return SimpleSpanProcessor(ConsoleSpanExporter())
    if exporter == "local":
        from .local import DEFAULT_PATH, SQLiteSpanExporter

        return BatchSpanProcessor(SQLiteSpanExporter(local_path or DEFAULT_PATH))  # pyright: ignore[reportArgumentType] -- a duck-typed SpanExporter: the SDK loads only when used
    if exporter == "none":
        return None
    raise UserError(
        f"unknown exporter {exporter!r}", hint="Use 'otlp', 'console', 'local' or 'none'."
    )


def _logger_provider(exporter: Exporter, resource: Any) -> Any:
    """A LoggerProvider for content events (log-based events), or None (local/none)."""
    if exporter not in ("otlp", "console"):
        return None
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor, SimpleLogRecordProcessor

    provider = LoggerProvider(resource=resource, shutdown_on_exit=False)
    if exporter == "otlp":
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter

        provider.add_log_record_processor(BatchLogRecordProcessor(OTLPLogExporter()))
    else:
        from opentelemetry.sdk._logs.export import ConsoleLogRecordExporter

        provider.add_log_record_processor(SimpleLogRecordProcessor(ConsoleLogRecordExporter()))
    return provider


def _metric_reader(kind: str, port: int, addr: str) -> tuple[Any, Any]:
    """(reader, prometheus http server or None)."""
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

    if kind == "otlp":
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

        return PeriodicExportingMetricReader(OTLPMetricExporter()), None
    if kind == "console":
        from opentelemetry.sdk.metrics.export import ConsoleMetricExporter

        return PeriodicExportingMetricReader(ConsoleMetricExporter()), None
    if kind == "prometheus":
        try:
            from opentelemetry.exporter.prometheus import PrometheusMetricReader
            from prometheus_client import start_http_server
        except ImportError as exc:
            raise UserError(
                "metrics='prometheus' needs opentelemetry-exporter-prometheus",
                hint="pip install 'lovia[otel]'",
            ) from exc
        reader = PrometheusMetricReader()
        server, _thread = start_http_server(port, addr=addr)
        return reader, server
    raise UserError(
        f"unknown metrics option {kind!r}",
        hint="Use True, False, 'otlp', 'console' or 'prometheus'.",
    )


INSTANCE_ID = "service.instance.id"
_instance: tuple[int, str] | None = None


def process_instance_id() -> str:
    """A random ``service.instance.id`` for this process: the same for every
    :func:`configure` call in it, a new one in a forked child.

    Without it every process of a service reports the same resource, so the collector's
    Prometheus exporter gives two processes' series the same labels (the later one
    replaces the earlier); with it each process's series carry their own ``instance``.
    """
    global _instance
    pid = os.getpid()
    if _instance is None or _instance[0] != pid:
        _instance = (pid, str(uuid.uuid4()))
    return _instance[1]


def _resource(service_name: str, extra: Mapping[str, Any] | None) -> Any:
    """The process's resource: ``OTEL_RESOURCE_ATTRIBUTES``, lovia's attributes and
    ``extra`` over them, and a ``service.instance.id`` when none of them set one."""
    from opentelemetry.sdk.resources import Resource

    attrs: dict[str, Any] = {
        "service.name": service_name,
        A.PRICE_TABLE_VERSION: price_table_version(),
        A.VERSION: A.TELEMETRY_VERSION,
        **(extra or {}),
    }
    resource = Resource.create(attrs)  # OTEL_RESOURCE_ATTRIBUTES, then attrs on top
    if not resource.attributes.get(INSTANCE_ID):  # older SDKs add none of their own
        resource = resource.merge(Resource({INSTANCE_ID: process_instance_id()}))
    return resource


def _metrics_kind(metrics: Metrics, exporter: Exporter) -> str | None:
    if metrics is False or metrics == "none":
        return None
    if metrics is True:
        return {"otlp": "otlp", "console": "console"}.get(exporter)
    return str(metrics)


def configure(
    service_name: str = "lovia",
    exporter: Exporter = "otlp",
    *,
    capture_content: str | bool | None = None,
    scrub: C.Scrubber | None = None,
    metrics: Metrics = True,
    local_path: str | Path | None = None,
    resource_attributes: Mapping[str, Any] | None = None,
    prometheus_port: int = 9464,
    prometheus_addr: str = "127.0.0.1",
    set_global: bool = True,
    shutdown_timeout: float = DEFAULT_SHUTDOWN_TIMEOUT,
) -> Telemetry:
    """Install tracing (and metrics) for this process and return the handle.

    - ``exporter``: ``otlp`` (OTLP/HTTP; endpoint, headers, timeouts from the standard
      ``OTEL_EXPORTER_OTLP_*`` variables), ``console``, ``local`` (SQLite table
      ``lovia_spans`` in ``local_path``, default ``.lovia/lovia.db``) or ``none``.
    - ``metrics``: True = same destination as ``exporter`` (otlp/console; none for
      local), or ``"otlp"`` / ``"console"`` / ``"prometheus"`` (scrape endpoint on
      ``prometheus_addr:prometheus_port``, loopback by default) / False.
    - ``capture_content`` / ``scrub``: see ``lovia.telemetry.content``. With ``otlp`` (or
      ``console``) a ``LoggerProvider`` is set up too: content events (``EVENT_ONLY`` /
      ``SPAN_AND_EVENT``) go to the OTLP logs endpoint (``OTEL_EXPORTER_OTLP_*``).
    - ``resource_attributes`` go on top of ``OTEL_RESOURCE_ATTRIBUTES``; without a
      ``service.instance.id`` from either, the process gets a random one (a UUID, the
      same for every call in the process), so each process's series stay its own.
    - ``set_global=False`` only builds the providers (pass them to ``Runner.run``).
    - ``shutdown_timeout``: the longest ``Telemetry.shutdown()`` — which also runs at
      process exit — waits for exporters (seconds, default 5).
    """
    _sdk()
    if not shutdown_timeout > 0:
        raise UserError(
            f"shutdown_timeout={shutdown_timeout!r} must be a positive number of seconds.",
            hint="Pass e.g. shutdown_timeout=5.0.",
        )
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.trace import TracerProvider

    resource = _resource(service_name, resource_attributes)
    path = path_from_url(local_path) if local_path is not None else None
    processor = _span_processor(exporter, path)
    # our own exit hook replaces the SDK's unbounded ones (shutdown_on_exit=False)
    tp = TracerProvider(resource=resource, shutdown_on_exit=False)
    if processor is not None:
        tp.add_span_processor(processor)
    handle = Telemetry(
        tracer_provider=tp,
        local_path=path if exporter == "local" else None,
        shutdown_timeout=shutdown_timeout,
    )
    handle.logger_provider = _logger_provider(exporter, resource)
    if handle.logger_provider is not None:
        from .events_log import pair

        pair(tp, handle.logger_provider)  # content events of runs traced by tp go there
    if handle.local_path is None and exporter == "local":
        from .local import DEFAULT_PATH

        handle.local_path = Path(DEFAULT_PATH)
    kind = _metrics_kind(metrics, exporter)
    if kind is not None:
        reader, handle.prometheus_server = _metric_reader(kind, prometheus_port, prometheus_addr)
        handle.metric_readers.append(reader)
        handle.meter_provider = MeterProvider(
            resource=resource, metric_readers=[reader], shutdown_on_exit=False
        )
        from .metrics import instruments_for

        instruments_for(handle.meter_provider)  # lovia.runs exists at 0 before any run
    if capture_content is not None or scrub is not None:
        C.set_policy(capture_content, scrub)
    if set_global:
        _install(handle)
    atexit.register(handle.shutdown)
    return handle


def _install(handle: Telemetry) -> None:
    from opentelemetry import metrics, trace

    if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        logger.warning(
            "a global TracerProvider is already set; lovia.telemetry.configure "
            "cannot replace it (call configure once, at startup)"
        )
    trace.set_tracer_provider(handle.tracer_provider)
    if handle.meter_provider is not None:
        metrics.set_meter_provider(handle.meter_provider)
    if handle.logger_provider is not None:
        from opentelemetry import _logs

        _logs.set_logger_provider(handle.logger_provider)
