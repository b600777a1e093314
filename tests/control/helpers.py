"""Run one scenario through ``Runner.run`` and ``Runner.stream`` and compare the two.

A scenario is built twice by a factory (scripted models are consumed by a run), once
per mode. In run mode the events are observed with ``lovia.testing.capture_events`` (every
event passes through it before a consumer could see it), in stream mode by iterating
the handle. Both runs must agree on the output (or the error type), on the event
types, and the stream must end with exactly one terminal event.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lovia import Agent, Runner, events
from lovia.result import RunResult
from lovia.testing import capture_events

TERMINAL = (events.RunCompleted, events.RunFailed)


@dataclass
class Scenario:
    """One run to perform: agent, input, Runner options, and anything to inspect later."""

    agent: Agent[Any, Any]
    input: Any = None
    options: dict[str, Any] = field(default_factory=dict[str, Any])
    extra: Any = None


@dataclass
class Outcome:
    scenario: Scenario
    events: list[events.Event]
    result: RunResult[Any] | None = None
    error: BaseException | None = None

    @property
    def types(self) -> list[str]:
        return [type(e).__name__ for e in self.events]

    def of(self, kind: type[events.Event]) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]


async def run_mode(s: Scenario) -> Outcome:
    with capture_events() as seen:
        try:
            result = await Runner.run(s.agent, s.input, **s.options)
        except Exception as exc:
            return Outcome(s, list(seen), error=exc)
    return Outcome(s, list(seen), result=result)


async def stream_mode(
    s: Scenario, on_event: Callable[[Any, events.Event], Any] | None = None
) -> Outcome:
    handle = Runner.stream(s.agent, s.input, **s.options)
    seen: list[events.Event] = []
    async for event in handle:  # must never raise because of the run
        seen.append(event)
        if on_event is not None:
            on_event(handle, event)
    terminals = [e for e in seen if isinstance(e, TERMINAL)]
    assert len(terminals) == 1 and seen[-1] is terminals[0], "one terminal event, last"
    try:
        result = await handle.result()
    except Exception as exc:
        return Outcome(s, seen, error=exc)
    return Outcome(s, seen, result=result)


async def both(
    make: Callable[[], Scenario], *, same_events: bool = True
) -> tuple[Outcome, Outcome]:
    """Run ``make()`` with ``Runner.run`` and again with ``Runner.stream``; compare."""
    a = await run_mode(make())
    b = await stream_mode(make())
    assert type(a.error) is type(b.error), (a.error, b.error)
    if a.result is not None and b.result is not None:
        assert a.result.output == b.result.output
        assert a.result.turns == b.result.turns
        assert a.result.finish_reason == b.result.finish_reason
        assert a.result.final_agent.name == b.result.final_agent.name
        assert [e.type for e in a.result.entries] == [e.type for e in b.result.entries]
    if a.error is not None and b.error is not None:
        assert b.types[-1] == "RunFailed"
        assert b.events[-1].error_type == type(b.error).__name__  # type: ignore[attr-defined]
    else:
        assert b.types[-1] == "RunCompleted"
    if same_events:
        assert a.types == b.types
    return a, b
