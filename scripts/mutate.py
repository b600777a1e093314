"""Mutation testing for the modules that carry lovia's promises, with mutmut.

    python scripts/mutate.py                    # every module in MODULES
    python scripts/mutate.py usage pricing      # chosen modules (keys of MODULES)
    python scripts/mutate.py --changed          # the modules this branch changed vs main

Each module is mutated alone, in a scratch copy under ``.mutate/<module>/`` (mutmut works
in the current directory and writes ``mutants/`` there), against the focused tests that
state its behaviour. The report (``.mutate/report.md``, also printed) gives each module's
score and lists every surviving mutant with its diff. Mutants listed in
``scripts/mutation-equivalent.txt`` (one ``name  # reason`` a line) change no behaviour a
user could observe; they are left out of the score and listed separately.

Not part of ``make test``: a full pass takes tens of minutes on two cores.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / ".mutate"
EQUIVALENT = ROOT / "scripts" / "mutation-equivalent.txt"

_FENCING_TESTS = [
    "tests/stores/test_conformance.py",
    "tests/stores/test_end_run.py",
    "tests/stores/test_lease_fences.py",
    "tests/stores/test_store_messages.py",
    "tests/stores/test_damaged.py",
    "tests/stores/test_lease_fallbacks.py",
    "tests/stores/test_start_run.py",
]

# module key -> (source file, the focused tests that pin its behaviour)
MODULES: dict[str, tuple[str, list[str]]] = {
    "usage": (
        "src/lovia/usage.py",
        ["tests/core/test_usage_copy.py", "tests/promises", "tests/control/test_budget.py"],
    ),
    "pricing": (
        "src/lovia/pricing.py",
        [
            "tests/promises",
            "tests/telemetry/test_accounting.py",
            "tests/telemetry/test_price_data.py",
        ],
    ),
    "redact": ("src/lovia/_redact.py", ["tests/promises", "tests/telemetry/test_secrets.py"]),
    "transcript": (
        "src/lovia/transcript.py",
        ["tests/core/test_transcript.py", "tests/core/test_hostile_text.py", "tests/promises"],
    ),
    "compaction": (
        "src/lovia/view/compaction.py",
        [
            "tests/view/test_compaction.py",
            "tests/promises/test_compaction_promises.py",
            "tests/promises/test_compaction_edges.py",
            "tests/view/test_resume_view.py::test_the_scenario_evicts_clears_and_summarizes",
            "tests/view/test_resume_view.py::test_resume_after_a_failed_model_call_sends_the_same_views",
            "tests/view/test_resume_view.py::test_resume_after_a_hard_crash_at_every_checkpoint_write",
            "tests/view/test_run.py",
        ],
    ),
    "view-record": ("src/lovia/view/record.py", ["tests/view", "tests/promises"]),
    "records": (
        "src/lovia/stores/records.py",
        ["tests/stores/test_records.py", "tests/stores/test_corpus.py", "tests/promises"],
    ),
    "codec": (
        "src/lovia/stores/_codec.py",
        [
            "tests/stores/test_records.py",
            "tests/stores/test_corpus.py",
            "tests/stores/test_damaged.py",
            "tests/promises",
        ],
    ),
    "sse": (
        "src/lovia/providers/_sse.py",
        ["tests/providers/test_faults.py", "tests/providers/test_liveness.py", "tests/promises"],
    ),
    "mapping": (
        "src/lovia/telemetry/mapping.py",
        [
            "tests/telemetry/test_span_trees.py",
            "tests/telemetry/test_tracing.py",
            "tests/telemetry/test_event_spans.py",
            "tests/telemetry/test_hook_views.py",
            "tests/telemetry/test_checkpoint_trace.py",
            "tests/telemetry/test_lifecycle_spans.py",
            "tests/telemetry/test_run_life.py",
            "tests/telemetry/test_accounting.py",
            "tests/telemetry/test_cost_source.py",
            "tests/telemetry/test_labels.py",
            "tests/telemetry/test_semconv.py",
            "tests/telemetry/test_lives_agree.py",
            "tests/telemetry/test_mapping_round_trip.py",
            "tests/promises/test_span_attribute_promises.py",
        ],
    ),
    "tool-calls": (
        "src/lovia/_loop/tool_calls.py",
        [
            "tests/core/test_checkpoint_writes.py",
            "tests/core/test_commit_points.py",
            "tests/core/test_resume.py",
            "tests/core/test_loop.py",
            "tests/core/test_tools.py",
            "tests/core/test_late_dispatch.py",
            "tests/control/test_approvals.py",
            "tests/control/test_budget.py",
            "tests/control/test_cancellation.py",
            "tests/control/test_handoffs.py",
            "tests/control/test_host_stop.py",
            "tests/promises/test_tool_call_promises.py",
        ],
    ),
    "checkpoint": (
        "src/lovia/_loop/checkpoint.py",
        [
            "tests/core/test_checkpoint_writes.py",
            "tests/core/test_commit_points.py",
            "tests/core/test_resume.py",
            "tests/core/test_resume_options.py",
            "tests/core/test_resume_system.py",
            "tests/core/test_loop.py",
            "tests/core/test_fencing.py",
            "tests/control/test_approvals.py",
            "tests/control/test_cancellation.py",
            "tests/control/test_host_stop.py",
            "tests/promises/test_checkpoint_promises.py",
        ],
    ),
    # the stores' leases, fencing and ledger reads, against the conformance suite
    # (every back-end; the tests that call a mutated function are the ones run)
    "fencing-memory": ("src/lovia/stores/memory.py", _FENCING_TESTS),
    "fencing-sqlite": (
        "src/lovia/stores/_sqlite_sql.py",
        [*_FENCING_TESTS, "tests/stores/test_sqlite_statements.py"],
    ),
    "fencing-sqlite-store": (
        "src/lovia/stores/sqlite.py",
        [
            *_FENCING_TESTS,
            "tests/stores/test_sqlite_large_writes.py",
            "tests/stores/test_sqlite_statements.py",
        ],
    ),
    "fencing-postgres": ("src/lovia/stores/postgres.py", _FENCING_TESTS),
    "fencing-pg-sql": ("src/lovia/stores/_pg_sql.py", _FENCING_TESTS),
}

# module key -> the functions scored (mutmut name patterns, ``*`` as in fnmatch), for a
# file whose other functions are not what its key measures; a key not listed scores its
# whole file. Only these functions are mutated and counted.
_SQLITE = "lovia.stores.sqlite.xǁSQLiteStoreǁ"
_PG = "lovia.stores.postgres.xǁPostgresStoreǁ"
_STORE_FENCING = ["append", "load", "finish", "start_run", "end_run", "acquire", "renew",
                  "renew_many", "lease_holder", "release", "append_segment"]  # fmt: skip
_SQL_FENCING = ["exec_", "renew_many", "_check_fence", "append", "_advance", "load", "finish",
                "lease_holder", "segment", "start", "end", "acquire", "begin"]  # fmt: skip
_PG_SQL_FENCING = ["x__fence", "x__fenced", "xǁSqlǁ_run_writes", "xǁSqlǁ_start", "xǁSqlǁ_end",
                   "xǁSqlǁ_leases", "xǁSqlǁ_reads"]  # fmt: skip
FUNCTIONS: dict[str, list[str]] = {
    "fencing-memory": [
        f"lovia.stores.memory.xǁMemoryStoreǁ{name}__mutmut_*"
        for name in [*_STORE_FENCING, "_fence", "_resumable"]
        if name != "end_run"  # the memory store ends a run with base.end_run's calls
    ],
    "fencing-sqlite": [f"lovia.stores._sqlite_sql.x_{name}__mutmut_*" for name in _SQL_FENCING],
    "fencing-sqlite-store": [f"{_SQLITE}{name}__mutmut_*" for name in _STORE_FENCING],
    "fencing-postgres": [f"{_PG}{name}__mutmut_*" for name in _STORE_FENCING],
    # the statements of runs, records, leases and a run's end (not __init__'s names of
    # the spend, label and notify parts, nor retention's prune statements)
    "fencing-pg-sql": [f"lovia.stores._pg_sql.{name}__mutmut_*" for name in _PG_SQL_FENCING],
}

_RESULT = re.compile(r"^\s*(?P<name>\S+): (?P<status>.+)$")


@dataclass
class Score:
    module: str
    killed: int
    survived: list[str]
    equivalent: list[str]
    other: dict[str, int]

    @property
    def percent(self) -> float:
        """Killed among the non-equivalent mutants; not run / no tests count as not killed."""
        counted = self.killed + len(self.survived) + sum(self.other.values())
        return 100.0 * self.killed / counted if counted else 0.0


def equivalent_names() -> dict[str, str]:
    names: dict[str, str] = {}
    if EQUIVALENT.exists():
        for line in EQUIVALENT.read_text(encoding="utf-8").splitlines():
            name, _, reason = line.partition("#")
            if name.strip():
                names[name.strip()] = reason.strip()
    return names


def scratch_copy(key: str, source: str, tests: list[str]) -> Path:
    """A copy of src/ and tests/ with a pyproject naming this module and its tests."""
    where = WORK / key
    shutil.rmtree(where, ignore_errors=True)
    where.mkdir(parents=True)
    shutil.copytree(ROOT / "src", where / "src", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(
        ROOT / "tests", where / "tests", ignore=shutil.ignore_patterns("__pycache__", "artifacts")
    )
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    pytest_opts = project["tool"]["pytest"]["ini_options"]
    mutmut = {
        "source_paths": ["src"],
        "only_mutate": [source],
        "pytest_add_cli_args_test_selection": tests,
        "pytest_add_cli_args": ["-p", "no:randomly", "-p", "no:cacheprovider", "-q", "-x"],
    }
    # JSON strings, numbers, booleans and arrays are valid TOML values
    lines = [
        "[tool.mutmut]",
        *(f"{k} = {json.dumps(v)}" for k, v in mutmut.items()),
        "",
        "[tool.pytest.ini_options]",
        *(f"{k} = {json.dumps(v)}" for k, v in pytest_opts.items()),
    ]
    (where / "pyproject.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return where


def run_module(key: str) -> Score:
    source, tests = MODULES[key]
    where = scratch_copy(key, source, tests)
    mutmut = [sys.executable, "-m", "mutmut"]
    only = FUNCTIONS.get(key, [])
    print(f"== {key}: mutating {source} against {' '.join(tests)}", flush=True)
    if only:
        print(f"   only the functions {' '.join(only)}", flush=True)
    log = where / "mutmut.log"
    # "name*" also matches the function itself, which is how mutmut picks the tests of
    # the clean run (a "name__mutmut_*" pattern picks none: it would run them all)
    run = sorted({p.removesuffix("__mutmut_*") + "*" for p in only})
    with log.open("w", encoding="utf-8") as out:
        done = subprocess.run(
            [*mutmut, "run", *run], cwd=where, check=False, stdout=out, stderr=out
        )
    if done.returncode != 0:
        tail = log.read_text(encoding="utf-8", errors="replace")[-3000:]
        raise SystemExit(f"mutmut failed on {key} (see {log}):\n{tail}")
    out = subprocess.run(
        [*mutmut, "results", "--all", "true"],
        cwd=where,
        check=False,
        capture_output=True,
        text=True,
    ).stdout
    equivalent = equivalent_names()
    score = Score(key, 0, [], [], {})
    for line in out.splitlines():
        m = _RESULT.match(line)
        if not m:
            continue
        name, status = m["name"], m["status"].strip()
        if only and not any(fnmatch.fnmatchcase(name, p) for p in only):
            continue
        if name in equivalent:
            score.equivalent.append(name)
        elif status in ("killed", "timeout", "caught by type check"):
            score.killed += 1
        elif status == "survived":
            score.survived.append(name)
        else:
            score.other[status] = score.other.get(status, 0) + 1
    return score


def diff_of(key: str, name: str) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "mutmut", "show", name],
        cwd=WORK / key,
        check=False,
        capture_output=True,
        text=True,
    ).stdout
    return "\n".join(line for line in out.splitlines() if line.startswith(("+", "-", "@@")))


def changed_modules() -> list[str]:
    diff = subprocess.run(
        ["git", "diff", "--name-only", "main...HEAD"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    return [k for k, (src, _) in MODULES.items() if src in diff]


def report(scores: list[Score]) -> str:
    lines = [
        "# Mutation report",
        "",
        "| module | killed | survived | equivalent | other | score |",
        "|---|---|---|---|---|---|",
    ]
    for s in scores:
        other = ", ".join(f"{k}: {v}" for k, v in s.other.items()) or "-"
        lines.append(
            f"| {s.module} | {s.killed} | {len(s.survived)} | {len(s.equivalent)} | "
            f"{other} | {s.percent:.0f}% |"
        )
    for s in scores:
        for name in s.survived:
            lines += ["", f"## survived: {name}", "```diff", diff_of(s.module, name), "```"]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="*", help=f"any of: {', '.join(MODULES)}")
    parser.add_argument("--changed", action="store_true", help="modules changed vs main")
    parser.add_argument("--min-score", type=float, default=90.0)
    args = parser.parse_args()
    keys = changed_modules() if args.changed else (args.modules or list(MODULES))
    unknown = [k for k in keys if k not in MODULES]
    if unknown:
        parser.error(f"unknown module(s) {unknown}; choose from {', '.join(MODULES)}")
    scores = [run_module(k) for k in keys]
    text = report(scores)
    WORK.mkdir(exist_ok=True)
    (WORK / "report.md").write_text(text, encoding="utf-8")
    print(text)
    low = [s.module for s in scores if s.percent < args.min_score]
    if low:
        print(f"below {args.min_score:.0f}%: {', '.join(low)}")
    return 1 if low else 0


if __name__ == "__main__":
    raise SystemExit(main())
