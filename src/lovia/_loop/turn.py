"""One turn: limits → TurnStarted → mailbox → view → model → append → tools or final
output → TurnEnded → pending handoff. The order is fixed."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import assert_never

from .. import events as ev
from .._redact import excerpt
from ..agent import Handoff
from ..errors import ModelBehaviorError, OutputValidationError
from ..model import ModelResponse
from ..output import OutputParseError
from ..transcript import InputEntry, SystemEntry, TextEntry, ToolCallEntry, TranscriptEntry
from .activate import activate
from .checkpoint import commit, rides_with_tools
from .limits import check_cancel, check_limits
from .model_call import model_step, stamp
from .outcomes import Answer, Final, Repair, Step, ToolCalls, Transfer
from .state import RunState
from .tool_calls import tool_phase

__all__ = ["finalize", "resume_turn", "turn"]


def drain_mailbox(state: RunState) -> None:
    mail = [stamp(state, m) for m in state.ctx.mailbox.drain()]
    if mail:
        state.transcript.extend(mail)
        state.note_entries(mail)


async def turn(
    state: RunState, resumed: Sequence[ToolCallEntry] | None = None
) -> AsyncIterator[ev.Event | Final]:
    """Run one full turn (phases 1–8); ends with the :class:`Final` output when the run
    is done. ``resumed``: finish the current turn, whose model response (with these tool
    calls) was stored before a crash or a pause."""
    if resumed is None:
        check_limits(state)
        state.progress.turn += 1
    state.ctx.turn = state.progress.turn
    before = state.progress.usage.copy()
    started = ev.TurnStarted(**state.base())
    yield started
    span = state.span_of(started)  # the turn's span: TurnEnded is built with it
    step: Step = ToolCalls(tuple(resumed or ()))
    rides = False
    if resumed is None:
        drain_mailbox(state)
        answer: Answer | None = None
        async for item in model_step(state):
            if isinstance(item, Answer):
                answer = item
            else:
                yield item
        assert answer is not None
        calls = answer.calls()
        rides = rides_with_tools(state, calls)
        step = ToolCalls(calls) if calls else finalize(state, answer.entries, answer.response)
        # commit point: the answer is durable before anything acts on it
        if not rides and not _rides_with_end(state, step):
            async for event in commit(state, "progress"):
                yield event
    transfer: Transfer | None = None
    match step:
        case ToolCalls(calls):
            async for item in tool_phase(state, calls, rides=rides):
                if isinstance(item, Transfer):
                    transfer = item
                else:
                    yield item
        case Final() | Repair():
            calls = ()
        case _:
            assert_never(step)
    check_cancel(state)
    usage = state.progress.usage.minus(before)
    yield ev.TurnEnded(**state.base(), usage=usage, tool_calls=len(calls), span=span)
    if transfer is not None:
        async for event in switch_agent(state, transfer.handoff):
            yield event
    if isinstance(step, Final):
        yield step


def _rides_with_end(state: RunState, step: Step) -> bool:
    """True when a final answer may go out with the run's end (one transaction instead
    of two): nothing between the two waits on user code, as no output guardrail runs.
    A crash before that write is a crash during the answer's own write: resume asks the
    model again, and nothing had acted on the answer."""
    return (
        isinstance(step, Final)
        and state.active is not None
        and not (state.active.output_guardrails)
    )


def resume_turn(state: RunState, calls: Sequence[ToolCallEntry]) -> AsyncIterator[ev.Event | Final]:
    """Finish a turn whose model response was stored before a crash or a pause."""
    return turn(state, calls)


def finalize(
    state: RunState, entries: Sequence[TranscriptEntry], response: ModelResponse | None
) -> Final | Repair:
    """Phase 7: parse the final output; an invalid structured output gets a repair turn
    (its request appended and noted)."""
    active = state.active
    assert active is not None and active.output is not None
    texts = [e for e in entries if isinstance(e, TextEntry)]
    text = "".join(e.text for e in texts)
    if any(e.refusal for e in texts) and not active.output.is_text:
        raise ModelBehaviorError(
            f"the model refused to answer: {excerpt(text, 200)}",
            hint="Rephrase the request or relax the output type.",
        )
    try:
        output = active.output.parse(text)
    except OutputParseError as exc:
        if state.repairs_left <= 0:
            raise OutputValidationError(
                f"the final answer does not validate as {active.output.output_type!r}: "
                f"{exc.errors}",
                hint="Raise Agent(output_repairs=...) or simplify the output type.",
                raw=text,
                errors=exc.errors,
            ) from None
        state.repairs_left -= 1
        repair = stamp(
            state,
            InputEntry(
                role="user",
                origin="repair",
                content=(
                    f"Your answer did not match the required output format: {exc.errors}. "
                    "Answer again with only the corrected JSON."
                ),
            ),
        )
        state.transcript.append(repair)
        state.note_entries([repair])
        return Repair(repair)
    return Final(output, text, response.finish_reason if response else "stop")


async def switch_agent(state: RunState, handoff: Handoff) -> AsyncIterator[ev.Event]:
    """Phase 8: the handoff called in this turn makes its target the active agent."""
    assert state.active is not None
    from_name = state.active.agent.name
    async for event in activate(state, handoff.agent):
        yield event
    state.active.handoff_filter = handoff.input_filter
    system = stamp(state, SystemEntry(content=state.active.system))
    state.transcript.append(system)
    state.note_entries([system])
    state.note_state(handoff.agent.name)
    yield ev.HandoffOccurred(
        **state.base(),
        from_agent=from_name,
        to_agent=handoff.agent.name,
    )
