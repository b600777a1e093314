# pyright: reportUnnecessaryIsInstance=false
# (runtime checks of user input are deliberate: not every caller runs a type checker)
"""``AgentHooks``: typed handlers for run events.

```python
hooks = AgentHooks()

@hooks.on(events.ToolCallCompleted)
def track(ev: events.ToolCallCompleted, ctx: RunContext[Any]) -> None: ...
```

Handlers may be sync or async; for one event they run in registration order, agent
hooks before plugin hooks. A handler registered for a base class (``events.Event``)
sees every event.

A failing handler does not corrupt the run: by default the exception is logged (logger
``lovia.hooks``) and the run goes on. ``AgentHooks(strict=True)`` on the agent itself
makes a failing handler end the run with :class:`~lovia.errors.HookError` (useful in
tests). Hooks a plugin contributes are always fail-open, strict or not: a plugin cannot
stop the run (they are logged with the plugin's name).

The same object doubles as an OpenTelemetry span processor: register it with
``tracer_provider.add_span_processor(hooks)`` and every lovia span that ends in the
process is turned back into its typed event and delivered to the handlers, with
``ctx=None`` (see ``lovia.telemetry``).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from .errors import HookError, UserError
from .events import Event

__all__ = ["AgentHooks", "Handler"]

logger = logging.getLogger("lovia.hooks")

E = TypeVar("E", bound=Event)
Handler = Callable[[Any, Any], "None | Awaitable[None]"]


class AgentHooks:
    """A registry of event handlers; share it between agents freely (it holds no run state)."""

    def __init__(self, *, strict: bool = False) -> None:
        self.strict = strict
        self._handlers: list[tuple[type[Event], Handler, bool]] = []
        self._cache: dict[type[Event], tuple[tuple[Handler, bool], ...]] = {}

    def on(
        self, event_type: type[E]
    ) -> Callable[[Callable[[E, Any], Any]], Callable[[E, Any], Any]]:
        """Register the decorated function for ``event_type`` (and its subclasses)."""
        if not (isinstance(event_type, type) and issubclass(event_type, Event)):
            raise UserError(
                f"hooks.on() needs an event class from lovia.events, got {event_type!r}",
                hint="Write @hooks.on(events.ToolCallCompleted).",
            )

        def register(fn: Callable[[E, Any], Any]) -> Callable[[E, Any], Any]:
            is_async = inspect.iscoroutinefunction(fn)
            self._handlers.append((event_type, fn, is_async))
            self._cache.clear()
            return fn

        return register

    def handlers_for(self, event_type: type[Event]) -> tuple[tuple[Handler, bool], ...]:
        found = self._cache.get(event_type)
        if found is None:
            found = tuple((fn, a) for t, fn, a in self._handlers if issubclass(event_type, t))
            self._cache[event_type] = found
        return found

    def __bool__(self) -> bool:
        return bool(self._handlers)

    async def dispatch(self, event: Event, ctx: Any, *, plugin: str | None = None) -> None:
        """Deliver ``event`` to every matching handler, in registration order.

        ``plugin``: the name of the plugin that contributed these hooks (always
        fail-open); None for the agent's own hooks (``strict`` applies).
        """
        for fn, _ in self.handlers_for(type(event)):
            try:
                result = fn(event, ctx)  # an async handler returns its coroutine
                if inspect.isawaitable(result):
                    await result
            except Exception as exc:
                error = self._failure(fn, event, exc, plugin=plugin)
                if error is not None:
                    raise error from exc

    def _failure(
        self, fn: Any, event: Event, exc: Exception, *, plugin: str | None, where: str = ""
    ) -> HookError | None:
        """A handler raised ``exc``: the :class:`HookError` to raise (the agent's own
        ``strict`` hooks), else None after logging it (fail-open). ``where`` tags the
        log line (e.g. ``" (from a span)"``)."""
        name = str(getattr(fn, "__qualname__", None) or fn)
        if self.strict and plugin is None:
            return HookError(
                f"hook {name} failed on {type(event).__name__}: {type(exc).__name__}: {exc}",
                hint="The agent's AgentHooks(strict=True) ends the run when a "
                "handler raises; fix the handler or drop strict=True.",
                hook=name,
                event=type(event).__name__,
            )
        owner = "" if plugin is None else f" of plugin {plugin!r}"
        logger.exception(
            "hook %s%s failed on %s (run %s)%s; the run continues",
            name,
            owner,
            type(event).__name__,
            event.run_id,
            where,
            exc_info=exc,
        )
        return None

    # -- OpenTelemetry SpanProcessor protocol (see lovia.telemetry.processor) --
    # SDK 1.45 calls on_start, _on_ending, on_end, shutdown and force_flush.

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        return None

    def _on_ending(self, span: Any) -> None:
        return None

    def on_end(self, span: Any) -> None:
        """A span ended somewhere in the process: deliver its event (``ctx=None``)."""
        if not self._handlers:
            return
        from .telemetry.processor import deliver, events_from_span

        for event in events_from_span(span):
            deliver(self, event)

    def shutdown(self) -> None:
        return None

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True
