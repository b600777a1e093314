"""Queue metrics, the same for both back-ends (OpenTelemetry instruments; Prometheus
names in brackets):

- ``lovia.queue.deliveries`` (``lovia_queue_deliveries_total``), a counter by queue,
  backend and ``redelivery``: tasks a worker received; ``redelivery="true"`` when taken
  over from a lost worker, handed back or retried.
- ``lovia.queue.dead_letters`` (``lovia_queue_dead_letters_total``), a counter by queue,
  backend and reason (``max_deliveries``, ``poison``, ``unknown_agent``).
- ``lovia.queue.runs_in_flight`` (``lovia_queue_runs_in_flight``), an up-down counter by
  queue and backend: runs this process executes now (a worker is busy while above 0).
- ``lovia.queue.depth`` (``lovia_queue_depth``), a gauge by queue, backend and state:
  tasks ``waiting`` (not delivered yet), ``pending`` (delivered, not acknowledged; Redis
  Streams) and ``dead``.

Labels are the queue's name (the operator's, a handful per deployment), never run ids,
so cardinality stays bounded. The instruments are made once per process on the global
meter provider (``lovia.telemetry.setup`` or the application's own SDK setup).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, Observation

__all__ = ["QueueMetrics", "queue_metrics"]

M_DELIVERIES = "lovia.queue.deliveries"
M_DEAD_LETTERS = "lovia.queue.dead_letters"
M_IN_FLIGHT = "lovia.queue.runs_in_flight"
M_DEPTH = "lovia.queue.depth"
QUEUE, BACKEND, REDELIVERY, REASON, STATE = (
    "lovia.queue.name",
    "lovia.queue.backend",
    "lovia.queue.redelivery",
    "lovia.queue.dead_letter_reason",
    "lovia.queue.state",
)


class _Instruments:
    """The process's queue instruments and the depths its gauge reports."""

    def __init__(self, meter: metrics.Meter) -> None:
        self.deliveries = meter.create_counter(
            M_DELIVERIES, unit="{delivery}", description="Run tasks delivered to a worker"
        )
        self.dead = meter.create_counter(
            M_DEAD_LETTERS, unit="{task}", description="Run tasks dead-lettered"
        )
        self.in_flight = meter.create_up_down_counter(
            M_IN_FLIGHT, unit="{run}", description="Runs this worker process executes now"
        )
        self._lock = threading.Lock()
        self._depths: dict[tuple[str, str, str], int] = {}
        meter.create_observable_gauge(
            M_DEPTH, [self._observe], unit="{task}", description="Run tasks in the queue"
        )

    def set_depth(self, backend: str, queue: str, state: str, value: int) -> None:
        with self._lock:
            self._depths[(backend, queue, state)] = value

    def _observe(self, options: CallbackOptions | None = None) -> Iterable[Observation]:
        with self._lock:
            items = list(self._depths.items())
        return [Observation(v, {BACKEND: b, QUEUE: q, STATE: s}) for (b, q, s), v in items]


_made: _Instruments | None = None
_guard = threading.Lock()


def _instruments() -> _Instruments:
    global _made
    with _guard:
        if _made is None:
            _made = _Instruments(metrics.get_meter("lovia.workers"))
        return _made


class QueueMetrics:
    """The instruments bound to one queue of one back-end (``redis`` or ``celery``)."""

    __slots__ = ("_labels", "_m")

    def __init__(self, backend: str, queue: str) -> None:
        self._m = _instruments()
        self._labels: dict[str, Any] = {BACKEND: backend, QUEUE: queue}

    def delivered(self, *, redelivery: bool) -> None:
        self._m.deliveries.add(1, {**self._labels, REDELIVERY: redelivery})

    def dead_lettered(self, reason: str) -> None:
        self._m.dead.add(1, {**self._labels, REASON: reason})

    def busy(self, delta: int) -> None:
        self._m.in_flight.add(delta, self._labels)

    def depth(self, waiting: int, pending: int | None, dead: int) -> None:
        backend, queue = self._labels[BACKEND], self._labels[QUEUE]
        self._m.set_depth(backend, queue, "waiting", waiting)
        if pending is not None:
            self._m.set_depth(backend, queue, "pending", pending)
        self._m.set_depth(backend, queue, "dead", dead)


def queue_metrics(backend: str, queue: str) -> QueueMetrics:
    """The metrics of ``queue`` on ``backend``."""
    return QueueMetrics(backend, queue)
