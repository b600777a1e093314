"""Runner's public signatures are typed: every option of ``stream`` is a typed keyword
of ``run`` and ``run_sync`` (``RunOptions``), and none is ``Any`` where a type exists."""

from __future__ import annotations

import dataclasses
import inspect
import subprocess
import sys
import typing

import pytest

from lovia import Agent, Runner, UserError
from lovia._defaults import DEFAULT_MAX_TURNS
from lovia.runner import OPTION_NAMES, RunOptions, run_params
from lovia.testing import FunctionModel


def _options() -> dict[str, str]:
    return {n: getattr(a, "__forward_arg__", a) for n, a in RunOptions.__annotations__.items()}


def test_stream_run_and_run_sync_take_exactly_run_options() -> None:
    assert RunOptions.__total__ is False
    for entry in (Runner.stream, Runner.run, Runner.run_sync):
        params = inspect.signature(entry).parameters
        assert list(params) == ["agent", "input", "options"]
        assert params["input"].default is None
        assert params["options"].kind is inspect.Parameter.VAR_KEYWORD
        assert params["options"].annotation == "Unpack[RunOptions]"


def test_the_option_list_exists_once_with_its_defaults_on_the_run_parameters() -> None:
    from lovia._loop.state import RunParams

    fields = {f.name for f in dataclasses.fields(RunParams)}
    # ``store`` is resolved into checkpointer/session; agent, input and parent are not
    # options, nor ``drained`` (set by ``Runner.run``, whose caller only awaits the result)
    assert set(_options()) == (fields - {"agent", "input", "parent", "drained"}) | {"store"}
    assert set(_options()) == OPTION_NAMES


def test_provider_and_approval_options_are_typed() -> None:
    options = _options()
    assert options["tracer_provider"] == "TracerProvider | None"
    assert options["meter_provider"] == "MeterProvider | None"
    assert options["approval"] == "Approver | None"
    assert options["approvals"] == "Mapping[str, ApprovalVerdict] | None"
    typed = {n for n, a in options.items() if "Any" not in a}
    assert set(options) - typed == {"deps", "workspace"}  # the caller's own objects


def test_an_unknown_option_is_refused_with_the_closest_name() -> None:
    agent = Agent(name="a", model=FunctionModel(lambda request, info: "ok"))
    with pytest.raises(UserError) as err:
        Runner.stream(agent, "hi", max_turn=3)  # type: ignore[call-arg]
    assert "unknown option 'max_turn'" in str(err.value)
    assert err.value.hint is not None and err.value.hint.startswith("Did you mean 'max_turns'?")
    with pytest.raises(UserError, match="unknown option 'zzz'") as err:
        Runner.run_sync(agent, "hi", zzz=1)  # type: ignore[call-arg]
    assert err.value.hint is not None and "Did you mean" not in err.value.hint
    assert "max_turns" in err.value.hint


def test_options_not_given_take_the_run_parameters_defaults() -> None:
    agent = Agent(name="a", model=FunctionModel(lambda request, info: "ok"))
    params = run_params(agent, "hi", {"store": None})
    assert params.max_turns == DEFAULT_MAX_TURNS
    assert params.checkpointer is None and params.session is None
    assert params.labels == {} and params.deps_key is None
    given = run_params(agent, "hi", {"store": None, "cancel_token": None, "mailbox": None})
    assert given.cancel_token is not params.cancel_token  # a fresh token per run
    assert not given.cancel_token.cancelled
    with pytest.raises(UserError, match="max_turns must be at least 1"):
        run_params(agent, "hi", {"store": None, "max_turns": 0})


def test_importing_lovia_does_not_import_the_otel_sdk() -> None:
    code = "import sys, lovia, lovia.runner; print('opentelemetry.sdk' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_context_strategy_is_generic_in_its_state() -> None:
    from lovia.view import Compaction, CompactionState, ContextStrategy, FullView

    assert typing.get_origin(ContextStrategy[CompactionState]) is ContextStrategy
    assert isinstance(Compaction(), ContextStrategy)
    assert isinstance(FullView(), ContextStrategy)
