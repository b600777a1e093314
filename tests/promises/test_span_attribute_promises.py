"""The span attributes dashboards read: an error type only when there was an error, and
"usage unknown" carried to the run span."""

from __future__ import annotations

from lovia import events as ev
from lovia.telemetry.mapping import EVENTS
from lovia.usage import Usage

BASE = {"run_id": "r1", "agent": "a", "turn": 0}


def attrs_of(event: ev.Event) -> dict[str, object]:
    phase = EVENTS[type(event)]
    assert phase.attrs is not None
    return dict(phase.attrs(event))


def test_a_plugin_that_set_up_fine_has_no_error_type() -> None:
    for kind in (ev.PluginSetup, ev.PluginClosed):
        fine = attrs_of(kind(**BASE, plugin="todo"))
        assert "error.type" not in fine
        broken = attrs_of(kind(**BASE, plugin="todo", error=ValueError("x")))
        assert broken["error.type"] == "ValueError"


def test_a_checkpoint_write_that_failed_names_its_error_and_only_then() -> None:
    assert "error.type" not in attrs_of(ev.CheckpointSaved(**BASE, kind="progress"))
    failed = attrs_of(ev.CheckpointSaved(**BASE, kind="progress", error=OSError("disk")))
    assert failed["error.type"] == "OSError"


def test_a_run_with_unknown_usage_says_so_on_its_span() -> None:
    done = attrs_of(ev.RunCompleted(**BASE, usage=Usage(missing=True), turns=2))
    assert done["lovia.run.usage.missing"] is True
    failed = attrs_of(
        ev.RunFailed(**BASE, error_type="X", message="m", usage=Usage(input_tokens=1, missing=True))
    )
    assert failed["lovia.run.usage.missing"] is True
    known = attrs_of(ev.RunCompleted(**BASE, usage=Usage(input_tokens=3), turns=1))
    assert "lovia.run.usage.missing" not in known
    assert known["lovia.run.usage.input_tokens"] == 3
    assert known["lovia.run.turns"] == 1


def test_a_call_with_unknown_usage_reports_no_token_counts() -> None:
    """Zero would be a lie: the chat span carries no gen_ai.usage.* when usage is missing."""
    missing = attrs_of(_call_completed(Usage(missing=True)))
    assert not any(k.startswith("gen_ai.usage.") for k in missing)
    known = attrs_of(_call_completed(Usage(input_tokens=7, output_tokens=2)))
    assert known["gen_ai.usage.input_tokens"] == 7
    assert known["gen_ai.usage.output_tokens"] == 2


def _call_completed(usage: Usage) -> ev.MessageCompleted:
    return ev.MessageCompleted(**BASE, usage=usage, finish_reason="stop")


def test_a_turn_with_a_call_of_unknown_cost_says_its_cost_is_a_lower_bound() -> None:
    """Unknown is not zero: the turn span counts the turn's calls of unknown cost."""
    unpriced = attrs_of(ev.TurnEnded(**BASE, usage=Usage(input_tokens=4, unpriced=2)))
    assert unpriced["lovia.cost.unpriced"] == 2
    priced = attrs_of(ev.TurnEnded(**BASE, usage=Usage(input_tokens=4, cost_usd=0.01)))
    assert "lovia.cost.unpriced" not in priced
