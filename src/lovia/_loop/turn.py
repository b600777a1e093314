"""One turn: limits → TurnStarted → mailbox → view → model → append → tools or final
output → TurnEnded → pending handoff. The order is fixed."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from .. import events as ev
from .._redact import excerpt
from ..errors import ModelBehaviorError, OutputValidationError
from ..output import OutputParseError
from ..transcript import InputEntry, SystemEntry, TextEntry, ToolCallEntry, TranscriptEntry
from .activate import activate
from .limits import check_cancel, check_limits
from .model_call import model_step, stamp
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
) -> AsyncIterator[ev.Event]:
    """Run one full turn (phases 1–8); ``resumed``: finish the current turn, whose model
    response (with these tool calls) was stored before a crash or a pause."""
    if resumed is None:
        check_limits(state)
        state.turn += 1
    state.ctx.turn = state.turn
    before = state.usage.copy()
    yield ev.TurnStarted(**state.base())
    if resumed is None:
        drain_mailbox(state)
        async for event in model_step(state):
            yield event
        response = state.response
        assert response is not None
        start = len(state.transcript) - len(response.entries)
        entries = [state.transcript[i] for i in range(start, len(state.transcript))]
        calls = [e for e in entries if isinstance(e, ToolCallEntry)]
    else:
        entries, calls = [], list(resumed)
    if calls:
        async for event in tool_phase(state, calls):
            yield event
    else:
        finalize(state, entries)
    check_cancel(state)
    yield ev.TurnEnded(**state.base(), usage=state.usage.minus(before), tool_calls=len(calls))
    if state.pending_handoff is not None:
        async for event in switch_agent(state):
            yield event


def resume_turn(state: RunState, calls: Sequence[ToolCallEntry]) -> AsyncIterator[ev.Event]:
    """Finish a turn whose model response was stored before a crash or a pause."""
    return turn(state, calls)


def finalize(state: RunState, entries: Sequence[TranscriptEntry]) -> None:
    """Phase 7: parse the final output; an invalid structured output gets a repair turn."""
    active = state.active
    assert active is not None and active.output is not None
    texts = [e for e in entries if isinstance(e, TextEntry)]
    text = "".join(e.text for e in texts)
    response = state.response
    if any(e.refusal for e in texts) and not active.output.is_text:
        raise ModelBehaviorError(
            f"the model refused to answer: {excerpt(text, 200)}",
            hint="Rephrase the request or relax the output type.",
        )
    try:
        state.output = active.output.parse(text)
    except OutputParseError as exc:
        if state.repairs_left > 0:
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
            return
        raise OutputValidationError(
            f"the final answer does not validate as {active.output.output_type!r}: {exc.errors}",
            hint="Raise Agent(output_repairs=...) or simplify the output type.",
            raw=text,
            errors=exc.errors,
        ) from None
    state.output_raw = text
    state.finish_reason = response.finish_reason if response else "stop"
    state.done = True


async def switch_agent(state: RunState) -> AsyncIterator[ev.Event]:
    """Phase 8: the pending handoff makes its target the active agent."""
    handoff = state.pending_handoff
    assert handoff is not None and state.active is not None
    state.pending_handoff = None
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
