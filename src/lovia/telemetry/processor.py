"""Hooks as span processors: lovia spans that end are turned back into typed events.

``tracer_provider.add_span_processor(hooks)`` makes an :class:`~lovia.AgentHooks`
receive, for every lovia span that ends in the process (any agent, any run), the event
the span stands for — ``RunCompleted`` / ``RunFailed`` from ``invoke_agent`` spans,
``TurnEnded``, ``MessageCompleted`` / ``ModelCallFailed``, ``ToolCallCompleted``,
``GuardrailCompleted`` / ``GuardrailTriggered``, ``HandoffOccurred``,
``CompactionApplied``, ``CheckpointSaved``, ``SessionWritten``, ``ViewBuilt``,
``PluginSetup`` / ``PluginClosed`` — rebuilt from the span's attributes with the same
table the tracer uses (``mapping.SPANS``). Handlers get ``ctx=None``. Events rebuilt
this way carry no content (no output, no tool result text, no exception object).

A checkpoint write (a span event ``lovia.checkpoint.write`` on the view, turn or run
span) becomes its ``CheckpointSaved`` when that span ends, delivered before the span's
own event (so a turn's writes arrive just before its ``TurnEnded``, the run's first and
last write just before ``RunCompleted``); a failed write's ``error`` is a ``RuntimeError``
with the event's ``error.message``.

Sync handlers run in the thread that ended the span. Async handlers are scheduled on
the running event loop if there is one, else run to completion right away.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from opentelemetry.trace import StatusCode

from ..events import Event
from . import attributes as A
from .mapping import SPANS, Finished, checkpoint_from_event, span_base

__all__ = ["deliver", "event_from_span", "events_from_span"]

logger = logging.getLogger("lovia.hooks")

_pending: set[asyncio.Task[Any]] = set()


def event_from_span(span: Any) -> Event | None:
    """The typed event a finished lovia span stands for (None for other spans)."""
    finished = _finished(span)
    return _own_event(span, finished) if finished is not None else None


def events_from_span(span: Any) -> list[Event]:
    """Every event a finished lovia span stands for: the checkpoint writes recorded as
    its span events, then its own event (``event_from_span``); [] for other spans."""
    finished = _finished(span)
    if finished is None:
        return []
    out: list[Event] = []
    for item in getattr(span, "events", None) or ():
        if item.name == A.EVENT_CHECKPOINT:
            try:
                out.append(checkpoint_from_event(finished, item.attributes or {}))
            except Exception:
                logger.exception("could not rebuild an event from a span event of %r", span.name)
    own = _own_event(span, finished)
    if own is not None:
        out.append(own)
    return out


def _finished(span: Any) -> Finished | None:
    attrs = getattr(span, "attributes", None)
    if not attrs or A.VERSION not in attrs:
        return None
    status = getattr(span, "status", None)
    failed = status is not None and status.status_code == StatusCode.ERROR
    start, end = getattr(span, "start_time", None), getattr(span, "end_time", None)
    duration = (end - start) / 1e9 if start and end else 0.0
    message = (status.description or "") if status is not None else ""
    return Finished(attrs, failed, message, duration)


def _own_event(span: Any, finished: Finished) -> Event | None:
    build = SPANS.get(span_base(str(span.name)))
    if build is None or finished.attrs.get(A.SPAN_INTERRUPTED):
        return None  # a phase the run's end cut short: the live stream emitted no end
    try:
        return build(finished)
    except Exception:
        logger.exception("could not rebuild an event from span %r", span.name)
        return None


def deliver(hooks: Any, event: Event) -> None:
    """Run ``hooks``' handlers for ``event`` with ``ctx=None`` (see module docs)."""
    for fn, is_async in hooks.handlers_for(type(event)):
        try:
            if is_async:
                _run_async(fn(event, None))
            else:
                result = fn(event, None)
                if asyncio.iscoroutine(result):
                    _run_async(result)
        except Exception as exc:
            error = hooks._failure(fn, event, exc, plugin=None, where=" (from a span)")
            if error is not None:
                raise error from exc


def _run_async(coro: Any) -> None:
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(coro)
        return
    task = loop.create_task(coro)
    _pending.add(task)
    task.add_done_callback(_done)


def _done(task: asyncio.Task[Any]) -> None:
    _pending.discard(task)
    if not task.cancelled() and task.exception() is not None:
        logger.error("async hook failed (from a span)", exc_info=task.exception())
