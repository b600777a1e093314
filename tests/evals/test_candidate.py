"""Candidates re-run from the pinned start; the CLI turns a regression into exit 1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from lovia import Agent, evals
from lovia.stores import store
from lovia.testing import FunctionModel, call

from .conftest import LIVE, lookup, record_tools

ROOT = Path(__file__).resolve().parents[2]


def lovia(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    path = os.pathsep.join([str(ROOT / "src"), str(ROOT)])  # this checkout's lovia
    env = {**os.environ, "PYTHONPATH": path, "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "lovia.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=120,
        check=False,
    )


async def _cases(tmp_path: Path, n: int = 2) -> Path:
    url = f"sqlite:///{tmp_path / 'lovia.db'}"
    db = store(url)
    ids = [await record_tools(db, i) for i in range(n)]
    await db.aclose()
    for i, run_id in enumerate(ids):
        await evals.pin(run_id, url, to=tmp_path / "cases", name=f"c{i}")
    return tmp_path / "cases"


async def test_candidate_starts_from_the_pinned_view_and_uses_pinned_results(
    tmp_path: Path,
) -> None:
    cases = await _cases(tmp_path, 1)
    seen: list[list[str]] = []

    def model(request, info):  # type: ignore[no-untyped-def]
        kinds = [type(m).__name__ for m in request.messages]
        seen.append(kinds)
        if kinds.count("ToolResultEntry") == 0:
            return call("lookup", order_id="A0")
        if kinds.count("ToolResultEntry") == 1:
            return call("lookup", order_id="Z9")  # never recorded
        return "done"

    LIVE.clear()
    agent = Agent(
        name="support", instructions="New prompt.", model=FunctionModel(model), tools=[lookup]
    )
    report = await evals.evaluate(cases, agent=agent, evaluators=[evals.Contains("done")])
    sample = report.cases[0].samples[0]
    assert seen[0] == ["InputEntry"]  # the pinned start: the user's question
    assert sample.execution.start_matches is True and sample.execution.live_model_calls == 3
    assert sample.execution.pinned_tool_calls == 1 and LIVE == []
    assert sample.execution.unmatched == ['lookup({"order_id": "Z9"})']
    assert not report.ok() and "unmatched tool call lookup" in report.cases[0].diff()
    report = await evals.evaluate(
        cases, agent=agent, safe_live=["lookup"], evaluators=[evals.Contains("done")]
    )
    assert report.ok() and LIVE == ["Z9"]
    assert report.cases[0].samples[0].execution.live_tool_calls == 1


async def test_samples_give_a_pass_rate(tmp_path: Path) -> None:
    cases = await _cases(tmp_path, 1)
    answers = iter(["Both shipped (0).", "nope", "Both shipped (0).", "Both shipped (0)."])

    def model(request, info):  # type: ignore[no-untyped-def]
        return next(answers)

    report = await evals.evaluate(cases, model=FunctionModel(model), samples=4)
    case = report.cases[0]
    assert case.pass_rate == 0.75 and case.passed and case.baseline_passed is True
    assert abs(case.mean_score - 0.75) < 1e-9


async def test_cli_pin_baseline_and_a_breaking_prompt(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'lovia.db'}"
    db = store(url)
    ids = [await record_tools(db, i) for i in range(2)]
    await db.aclose()
    for run_id in ids:
        proc = lovia("pin", run_id[:12], "--to", "cases", "--store", url, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert "pinned" in proc.stdout
    assert len(list((tmp_path / "cases").iterdir())) == 2
    proc = lovia("eval", "cases", "--baseline", "--format", "json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["pass_rate"] == 1.0 and all(
        c["samples"][0]["views_reproduced"] == 3 for c in data["cases"]
    )
    # the candidate agents only know the recording of case A0/B0 (run 0)
    first = sorted((tmp_path / "cases").iterdir())
    keep = next(p for p in first if evals.load_case(p).source["run_id"] == ids[0])
    same = lovia("eval", str(keep), "--agent", "tests.evals.candidate_agents:same", cwd=ROOT)
    assert same.returncode == 0, same.stdout + same.stderr
    broken = lovia("eval", str(keep), "--agent", "tests.evals.candidate_agents:broken", cwd=ROOT)
    assert broken.returncode == 1, broken.stdout + broken.stderr
    assert "FAIL" in broken.stdout and "-Both shipped (0)." in broken.stdout
    assert "+Only A0 shipped." in broken.stdout
    junit = lovia(
        "eval",
        str(keep),
        "--agent",
        "tests.evals.candidate_agents:broken",
        "--format",
        "junit",
        cwd=ROOT,
    )
    assert (
        junit.returncode == 1
        and '<testsuite name="lovia eval candidate" tests="1" failures="1"' in junit.stdout
    )
    bad = lovia("eval", "cases", cwd=tmp_path)
    assert bad.returncode == 2 and "needs --baseline" in bad.stderr
    rate = lovia("eval", "cases", "--baseline", "--min-pass-rate", "90", cwd=tmp_path)
    assert rate.returncode == 2 and "not between 0 and 1" in rate.stderr
    missing = lovia("eval", "nowhere", "--baseline", cwd=tmp_path)
    assert missing.returncode == 2 and "no case folder" in missing.stderr


async def test_cli_refuses_hostile_input_clearly(tmp_path: Path) -> None:
    cases = await _cases(tmp_path, 1)
    case_dir = next(cases.iterdir())
    hostile = lovia(
        "eval", str(case_dir), "--model", "x:y", "--format", "table", cwd=tmp_path
    )  # the model prefix is unknown: a clear error, not a traceback
    assert hostile.returncode == 2 and "error:" in hostile.stderr
    assert "Traceback" not in hostile.stderr
    (case_dir / "tools.jsonl").write_bytes(b"\xff\xfe not utf-8\n")
    bad = lovia("eval", str(case_dir), "--baseline", cwd=tmp_path)
    assert bad.returncode == 2 and "is not UTF-8 text" in bad.stderr
    unknown = lovia("pin", "nope", "--store", f"sqlite:///{tmp_path / 'lovia.db'}", cwd=tmp_path)
    assert unknown.returncode == 2 and "no run 'nope'" in unknown.stderr


def test_terminal_escapes_in_a_diff_are_shown_not_sent() -> None:
    from lovia.cli._eval import _printable

    assert _printable("a\x1b[31mred\x07 b\tc") == "a\\x1b[31mred\\x07 b\tc"


async def test_a_candidate_whose_start_differs_is_flagged(tmp_path: Path) -> None:
    from lovia import PluginInstance

    class Nag:
        name = "nag"

        async def setup(self, ctx: object) -> PluginInstance:
            return PluginInstance(view_injectors=[lambda c: ["<reminder>hurry</reminder>"]])

    cases = await _cases(tmp_path, 1)
    agent = Agent(
        name="support",
        model=FunctionModel(lambda r, i: "Both shipped (0)."),
        tools=[lookup],
        plugins=[Nag()],
    )
    report = await evals.evaluate(cases, agent=agent)
    sample = report.cases[0].samples[0]
    assert report.ok() and sample.execution.start_matches is False
    assert sample.to_dict()["start_view_matches"] is False


async def test_instructions_replace_the_recorded_system_prompt(tmp_path: Path) -> None:
    cases = await _cases(tmp_path, 1)
    systems: list[str] = []

    def model(request, info):  # type: ignore[no-untyped-def]
        systems.append(request.system)
        return "Both shipped (0)."

    report = await evals.evaluate(cases, model=FunctionModel(model), instructions="Be kind.")
    assert systems == ["Be kind."] and report.ok()
    systems.clear()
    await evals.evaluate(cases, model=FunctionModel(model))
    assert systems == ["Be brief."]  # the recorded prompt
