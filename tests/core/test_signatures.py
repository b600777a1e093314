"""Runner's public signatures are typed: every option of ``stream`` is a typed keyword
of ``run`` and ``run_sync`` (``RunOptions``), and none is ``Any`` where a type exists."""

from __future__ import annotations

import inspect
import subprocess
import sys
import typing

from lovia import Runner
from lovia.runner import RunOptions


def _stream_options() -> dict[str, inspect.Parameter]:
    params = inspect.signature(Runner.stream).parameters
    return {n: p for n, p in params.items() if p.kind is inspect.Parameter.KEYWORD_ONLY}


def test_run_and_run_sync_take_exactly_the_options_of_stream() -> None:
    # an option added to stream but not to RunOptions would be refused by type checkers
    assert set(RunOptions.__annotations__) == set(_stream_options())
    assert RunOptions.__total__ is False
    for entry in (Runner.run, Runner.run_sync):
        options = inspect.signature(entry).parameters["options"]
        assert options.kind is inspect.Parameter.VAR_KEYWORD
        assert options.annotation == "Unpack[RunOptions]"


def test_provider_and_approval_options_are_typed() -> None:
    options = _stream_options()
    assert options["tracer_provider"].annotation == "TracerProvider | None"
    assert options["meter_provider"].annotation == "MeterProvider | None"
    assert options["approval"].annotation == "Approver | None"
    assert options["approvals"].annotation == "Mapping[str, ApprovalVerdict] | None"
    typed = {n for n, p in options.items() if "Any" not in str(p.annotation)}
    assert set(options) - typed == {"deps", "workspace"}  # the caller's own objects


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
