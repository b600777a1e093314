"""Run the lovia benchmarks: contenders against the fake server, interleaved and repeated.

Usage: ``python bench/run.py [--repeats 3] [--quick] [--only floor,lovia] [--no-docs]``

Starts ``fake_server.py`` in its own process, runs every driver in ``bench/drivers`` as a
subprocess on the same interpreter (``bench/.venv-peers`` when it exists, so lovia and the
peers share one Python and one set of libraries), in rotating order per repeat. Writes
``bench/results/latest.json`` and the tables of ``docs/performance.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
DRIVERS = BENCH / "drivers"
PEERS_PY = BENCH / ".venv-peers" / "bin" / "python"
RESULTS = BENCH / "results" / "latest.json"
DOC = ROOT / "docs" / "performance.md"
DRIVER_TIMEOUT_S = 900


@dataclass(frozen=True)
class Contender:
    """A named driver invocation; ``floor`` is the contender its ratio is taken to."""

    name: str
    script: str
    args: tuple[str, ...] = ()
    floor: str = "floor"
    peer: bool = False


def _lovia(name: str, *args: str) -> tuple[Contender, Contender]:
    """A lovia configuration on httpx (the floor's client), async tool and sync tool."""
    base = ("--client", "httpx", "--contender")
    return (
        Contender(name, "lovia_driver.py", (*args, *base, name)),
        Contender(f"{name} sync-tool", "lovia_driver.py", (*args, "--sync-tool", *base, name)),
    )


CONTENDERS = (
    Contender("floor", "floor.py"),
    Contender("floor-httpx2", "floor.py", ("--client", "httpx2")),
    Contender("floor+otel", "floor.py", ("--otel",)),
    *_lovia("lovia"),
    *_lovia("lovia+otel", "--otel"),
    *_lovia("lovia+sqlite", "--store", "sqlite"),
    *_lovia("lovia+otel+sqlite", "--otel", "--store", "sqlite"),
    *_lovia("lovia+postgres", "--store", "postgres"),
    *_lovia("lovia+otel+postgres", "--otel", "--store", "postgres"),
    Contender("lovia[fast]", "lovia_driver.py", ("--contender", "lovia[fast]"), "floor-httpx2"),
    Contender("openai-agents", "openai_agents_driver.py", peer=True),
    Contender("pydantic-ai", "pydantic_ai_driver.py", peer=True),
    Contender("pydantic-ai+otel", "pydantic_ai_driver.py", ("--instrument",), peer=True),
)
QUICK = (
    "floor", "floor-httpx2", "floor+otel", "lovia", "lovia+otel", "lovia+otel+sqlite",
    "lovia[fast]",
)  # fmt: skip
FLOORS = {c.name: c.floor for c in CONTENDERS}
IMPORT_MODULES = ("lovia", "httpx", "httpx2", "agents", "pydantic_ai")
PACKAGES = (
    "lovia",
    "httpx",
    "httpx2",
    "openai",
    "openai-agents",
    "pydantic-ai-slim",
    "pydantic",
    "opentelemetry-sdk",
)


@dataclass
class Server:
    """The fake server subprocess."""

    process: subprocess.Popen[str]
    port: int

    @property
    def base_url(self) -> str:
        """OpenAI-style base URL."""
        return f"http://127.0.0.1:{self.port}/v1"

    def stats(self, reset: bool = False) -> dict[str, Any]:
        """Read (and optionally reset) the server's counters."""
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/stats", method="POST" if reset else "GET"
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    def stop(self) -> None:
        """Terminate the server process."""
        self.process.terminate()
        self.process.wait(timeout=10)


@dataclass
class Session:
    """Settings and collected results of one benchmark session."""

    python: str
    server: Server
    results: list[dict[str, Any]] = field(default_factory=list)


# --------------------------------------------------------------------------- processes


def start_server(python: str) -> Server:
    """Start the fake server on a free port and wait for it to print the port."""
    process = subprocess.Popen(
        [python, str(BENCH / "fake_server.py"), "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    port = int(process.stdout.readline().strip())
    return Server(process, port)


def run_driver(session: Session, contender: Contender, options: list[str]) -> dict[str, Any]:
    """Run one driver subprocess; return its JSON line plus server CPU per request."""
    command = [
        session.python,
        str(DRIVERS / contender.script),
        "--base-url",
        session.server.base_url,
        *contender.args,
        *options,
    ]
    before = session.server.stats(reset=True)
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=DRIVER_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return {"contender": contender.name, "ok": False, "error": "timeout"}
    after = session.server.stats()
    result = _last_json_line(done.stdout)
    if result is None or done.returncode != 0:
        tail = (done.stderr or done.stdout or "no output").strip().splitlines()[-1]
        return {"contender": contender.name, "ok": False, "error": tail[:500]}
    result["contender"] = contender.name
    if after["requests"]:
        server_cpu = after["cpu_s"] - before["cpu_s"]
        result["server_cpu_us_per_request"] = round(server_cpu / after["requests"] * 1e6, 1)
        result["server_connections"] = after["connections"]
    return result


def _last_json_line(text: str) -> dict[str, Any] | None:
    """The last line of ``text`` that parses as a JSON object."""
    for line in reversed(text.strip().splitlines()):
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


# --------------------------------------------------------------------------- suites


def workload_options(mode: str, concurrency: int, runs: int, turns: int, calls: int) -> list[str]:
    """Driver command-line options for one configuration."""
    return [
        "--mode",
        mode,
        "--concurrency",
        str(concurrency),
        "--runs",
        str(runs),
        "--turns",
        str(turns),
        "--calls",
        str(calls),
    ]


def run_matrix(session: Session, contenders: list[Contender], args: argparse.Namespace) -> None:
    """Main matrix: json/sse x concurrency 1/50, contenders rotated every repeat."""
    configs = [(mode, conc) for mode in ("json", "sse") for conc in (1, 50)]
    for repeat in range(args.repeats):
        for mode, conc in configs:
            runs = args.runs_c1 if conc == 1 else args.runs_c50
            shift = repeat % len(contenders)
            for contender in contenders[shift:] + contenders[:shift]:
                options = workload_options(mode, conc, runs, args.turns, args.calls)
                result = run_driver(session, contender, options)
                result.update(suite="matrix", repeat=repeat, mode=mode, concurrency=conc)
                session.results.append(result)
                _progress(result)


def run_scale(session: Session, sizes: tuple[int, ...]) -> None:
    """N concurrent runs in one process (SSE, T=5 C=2), one untimed warm-up run.

    Every run is started at once, on lovia's default client (httpx2 when installed, 100
    connections): requests beyond the pool wait in lovia's FIFO gate, not in the pool. The
    driver calls ``lovia.tune_gc()`` first, as the docs advise a process of that size.
    """
    scale = [
        Contender("lovia", "lovia_driver.py", ("--tune-gc", "--contender", "lovia")),
        Contender(
            "lovia+sqlite",
            "lovia_driver.py",
            ("--tune-gc", "--store", "sqlite", "--contender", "lovia+sqlite"),
        ),
    ]
    for size in sizes:
        for contender in scale:
            options = [*workload_options("sse", size, size, 5, 2), "--warmup", "1"]
            result = run_driver(session, contender, options)
            result.update(suite="scale", size=size)
            session.results.append(result)
            _progress(result)


INSTR_CONTENDERS = (
    "floor",
    "floor-httpx2",
    "floor+otel",
    "lovia",
    "lovia+otel",
    "lovia+sqlite",
    "lovia+otel+sqlite",
    "lovia[fast]",
)
# (mode, in flight, n): at 50 in flight only the httpx2 pair, whose target is set there
INSTR_CONFIGS = (("json", 1, 5), ("sse", 1, 5), ("json", 50, 50))
INSTR_AT_50 = ("floor-httpx2", "lovia[fast]")


def run_instructions(session: Session, names: list[str], jobs: int = 2) -> None:
    """Instructions per round-trip under callgrind: a figure the machine's load cannot move.

    Each configuration runs twice under ``valgrind --tool=callgrind``, with ``n`` and ``2n``
    timed runs (``n`` = 5 at 1 in flight, 50 at 50); the difference of the two totals over the
    ``n`` extra runs' round-trips cancels start-up, imports and warm-up. Instruction counts do
    not see kernel time, cache misses or waiting, so they complement process CPU, never
    replace it. Deterministic, so the jobs run side by side.
    """
    if shutil.which("valgrind") is None:
        print("valgrind not found: instruction suite skipped", file=sys.stderr)
        return
    by_name = {c.name: c for c in CONTENDERS}
    work = [
        (by_name[n], m, c, r)
        for m, c, r in INSTR_CONFIGS
        for n in names
        if c == 1 or n in INSTR_AT_50
    ]
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for result in pool.map(lambda w: _instructions(session, *w), work):
            session.results.append(result)
            _progress(result)


_FIXED_HASH = {**os.environ, "PYTHONHASHSEED": "0"}
"""A fixed string-hash seed: dict and set layouts, and so the instructions that probe
them, are the same from run to run (a random seed moves a figure by about ±1%)."""

_COUNTED = re.compile(r"(Collected :|I\s+refs:)\s*[\d,]+\s*$")
"""callgrind's total: ``Collected : N`` (older valgrind) or ``I   refs:  N,NNN`` (3.19+)."""


def _instructions(
    session: Session, contender: Contender, mode: str, conc: int, runs: int
) -> dict[str, Any]:
    """kinstr per round-trip of one contender and configuration (``n`` vs ``2n`` runs)."""
    totals: list[int] = []
    for n in (runs, 2 * runs):
        command = [
            "valgrind",
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            session.python,
            str(DRIVERS / contender.script),
            "--base-url",
            session.server.base_url,
            *contender.args,
            *workload_options(mode, conc, n, 5, 2),
        ]
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=DRIVER_TIMEOUT_S, env=_FIXED_HASH
        )
        counted = [ln for ln in done.stderr.splitlines() if _COUNTED.search(ln)]
        line = _last_json_line(done.stdout) or {}
        if not counted or not line.get("ok"):
            tail = (done.stderr or "no output").strip().splitlines()[-1:]
            return {
                "suite": "instr",
                "contender": contender.name,
                "mode": mode,
                "concurrency": conc,
                "ok": False,
                "error": " ".join(tail)[:300],
            }
        totals.append(int(counted[-1].rsplit(":", 1)[1].strip().replace(",", "")))
    per_rt = (totals[1] - totals[0]) / (runs * 6) / 1000
    return {
        "suite": "instr",
        "contender": contender.name,
        "mode": mode,
        "concurrency": conc,
        "ok": True,
        "kinstr_per_roundtrip": round(per_rt, 1),
        "runs": [runs, 2 * runs],
    }


def run_long(session: Session, contenders: list[Contender], turns: int) -> None:
    """One long run (T turns, C=1) per contender, CPU per turn early vs late."""
    for contender in contenders:
        for mode in ("json", "sse"):
            options = [*workload_options(mode, 1, 1, turns, 1), "--per-turn"]
            result = run_driver(session, contender, options)
            result.update(suite="long", mode=mode)
            session.results.append(result)
            _progress(result)


def run_compacted(python: str, turns: int) -> dict[str, Any]:
    """lovia's own loop in a compacted run (16k window, SQLite checkpoints): turn 500 vs 50."""
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run(
            [
                python,
                str(BENCH / "view_cost.py"),
                "--turns",
                str(turns),
                "--json",
                "--store",
                f"sqlite:///{tmp}/long.db",
            ],
            capture_output=True,
            text=True,
            check=True,
            timeout=1800,
        )
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_web(python: str, turns: int) -> dict[str, Any] | None:
    """``lovia web``'s time to first byte and page weight on a long run (bench/web_page.py)."""
    out = subprocess.run(
        [python, str(BENCH / "web_page.py"), "--turns", str(turns), "--json"],
        capture_output=True,
        text=True,
        check=False,
        timeout=900,
    )
    if out.returncode != 0:  # the web extra is optional
        print(f"web_page.py failed: {out.stderr[-500:]}", file=sys.stderr)
        return None
    return json.loads(out.stdout.strip().splitlines()[-1])


def import_times(python: str, modules: tuple[str, ...], samples: int = 7) -> dict[str, Any]:
    """Median wall time of a cold ``python -c 'import X'`` (and of bare start-up).

    Each process is new; the modules are byte-compiled, as an installed package is (pip
    compiles at install): bytecode writing is allowed and one untimed import runs first,
    so ``PYTHONDONTWRITEBYTECODE`` in the caller's environment does not make every
    sample compile lovia's source from scratch (~60 ms here)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    out: dict[str, Any] = {}
    for module in ("", *modules):
        code = f"import {module}" if module else "pass"
        subprocess.run([python, "-c", code], capture_output=True, timeout=120, env=env)
        times = []
        for _ in range(samples):
            start = time.perf_counter()
            done = subprocess.run([python, "-c", code], capture_output=True, timeout=120, env=env)
            times.append(time.perf_counter() - start)
            if done.returncode != 0:
                break
        key = module or "(interpreter start-up)"
        if done.returncode != 0:
            out[key] = {"error": done.stderr.decode(errors="replace").strip().splitlines()[-1:]}
        else:
            out[key] = {"median_s": round(statistics.median(times), 4)}
    base = out["(interpreter start-up)"]["median_s"]
    for value in out.values():
        if "median_s" in value:
            value["net_s"] = round(value["median_s"] - base, 4)
    return out


def _progress(result: dict[str, Any]) -> None:
    """One progress line on stderr."""
    keys = (
        "contender",
        "mode",
        "concurrency",
        "cpu_us_per_roundtrip",
        "peak_rss_mb",
        "ok",
        "error",
    )
    print("  " + " ".join(f"{k}={result.get(k)}" for k in keys if k in result), file=sys.stderr)


# --------------------------------------------------------------------------- summary


def summarise(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Mean figures per (contender, mode, concurrency) of the matrix, with floor ratios."""
    groups: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    for result in results:
        if result.get("suite") == "matrix":
            key = (result["contender"], result["mode"], result["concurrency"])
            groups.setdefault(key, []).append(result)
    rows = [_row(key, group) for key, group in groups.items()]
    floors = {(r["contender"], r["mode"], r["concurrency"]): r for r in rows}
    for row in rows:
        row["floor"] = FLOORS.get(row["contender"], "floor")
        floor = floors.get((row["floor"], row["mode"], row["concurrency"]))
        if floor and row.get("cpu_us") and floor.get("cpu_us"):
            row["cpu_ratio"] = round(row["cpu_us"] / floor["cpu_us"], 2)
            row["rss_ratio"] = round(row["rss_mb"] / floor["rss_mb"], 2)
    return rows


def _row(key: tuple[str, str, int], group: list[dict[str, Any]]) -> dict[str, Any]:
    """Aggregate the repeats of one configuration."""
    contender, mode, conc = key
    good = [r for r in group if "cpu_us_per_roundtrip" in r]
    row: dict[str, Any] = {"contender": contender, "mode": mode, "concurrency": conc}
    row["ok"] = bool(good) and all(r.get("ok") for r in group)
    if not good:
        row["error"] = next((r.get("error") for r in group if r.get("error")), "no result")
        return row
    cpu = [r["cpu_us_per_roundtrip"] for r in good]
    row["cpu_us"] = round(statistics.median(cpu), 1)
    row["cpu_spread_pct"] = round((max(cpu) - min(cpu)) / row["cpu_us"] * 100, 1)
    row["cpu_min"], row["cpu_max"] = min(cpu), max(cpu)
    row["rss_mb"] = round(statistics.median(r["peak_rss_mb"] for r in good), 1)
    row["wall_s"] = round(statistics.mean(r["wall_s"] for r in good), 3)
    server = [r["server_cpu_us_per_request"] for r in good if "server_cpu_us_per_request" in r]
    if server:
        row["server_cpu_us_per_request"] = round(statistics.mean(server), 1)
    row["repeats"] = len(good)
    return row


def environment(python: str) -> dict[str, Any]:
    """Machine, interpreter and package versions for the report."""
    code = (
        "import importlib.metadata as m, json, platform\n"
        f"names = {list(PACKAGES)!r}\n"
        "def v(n):\n"
        "    try:\n        return m.version(n)\n"
        "    except m.PackageNotFoundError:\n        return None\n"
        "print(json.dumps({'python': platform.python_version(), 'packages': {n: v(n) for n in names}}))"
    )
    done = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=60)
    info = json.loads(done.stdout)
    info.update(
        date=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        nproc=os.cpu_count(),
        cpu_model=_cpu_model(),
        platform=platform.platform(),
        interpreter=python,
    )
    return info


def _cpu_model() -> str:
    """CPU model name from /proc/cpuinfo."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


# --------------------------------------------------------------------------- main


def parse_args() -> argparse.Namespace:
    """Command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--runs-c1", type=int, default=20)
    parser.add_argument("--runs-c50", type=int, default=100)
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--calls", type=int, default=2)
    parser.add_argument("--long-turns", type=int, default=500)
    parser.add_argument("--only", default="", help="comma-separated contender names")
    parser.add_argument("--python", default=str(PEERS_PY) if PEERS_PY.exists() else sys.executable)
    parser.add_argument("--quick", action="store_true", help="1 repeat, fewer runs, no long run")
    parser.add_argument("--skip-extras", action="store_true", help="no import/1000/long suites")
    parser.add_argument("--no-docs", action="store_true", help="do not rewrite docs/performance.md")
    parser.add_argument(
        "--suites",
        default=",".join(ALL_SUITES),
        help="suites to run; the others keep their results from the previous latest.json",
    )
    parser.add_argument(
        "--scale", default="1000,10000", help="comma-separated run counts all in flight at once"
    )
    args = parser.parse_args()
    args.scale = tuple(int(n) for n in args.scale.split(",") if n)
    if args.quick:  # `make bench-quick`: the ratios table only, < 2 minutes
        args.repeats, args.runs_c1, args.runs_c50, args.long_turns = 1, 10, 50, 0
        args.skip_extras, args.no_docs = True, True
        args.only = args.only or ",".join(QUICK)
    return args


ALL_SUITES = ("matrix", "instr", "import", "scale", "long")
_SUITE_KEYS: dict[str, tuple[str, ...]] = {
    "import": ("import_times",),
    "long": ("compacted_long", "web"),
}


def _carry_previous(session: Session, extras: dict[str, Any], suites: set[str]) -> bool:
    """Suites not run this time keep their results from the previous ``latest.json``;
    False when there is none (the report then holds only this run's suites)."""
    if not RESULTS.exists():
        return False
    old = json.loads(RESULTS.read_text())
    for suite in set(ALL_SUITES) - suites:
        session.results.extend(r for r in old.get("results", []) if r.get("suite") == suite)
        for key in _SUITE_KEYS.get(suite, ()):
            if key in old:
                extras[key] = old[key]
        if suite in old.get("runs", {}):
            extras["runs"][suite] = old["runs"][suite]
    return True


def main() -> None:
    """Run every suite, then write results and docs."""
    args = parse_args()
    os.environ["PYTHONPATH"] = os.pathsep.join(  # drivers import this checkout's lovia
        p for p in (str(ROOT / "src"), os.environ.get("PYTHONPATH", "")) if p
    )
    wanted = {n for n in args.only.split(",") if n}
    peers = args.python == str(PEERS_PY)  # the peers are installed only in bench/.venv-peers
    contenders = [c for c in CONTENDERS if (c.name in wanted if wanted else peers or not c.peer)]
    suites = set(args.suites.split(","))
    load_start = os.getloadavg()
    server = start_server(sys.executable)
    session = Session(args.python, server)
    print(f"fake server on port {server.port}; interpreter {args.python}", file=sys.stderr)
    extras: dict[str, Any] = {}
    try:
        if "instr" in suites and not args.quick:
            names = [c.name for c in contenders]
            run_instructions(session, [n for n in INSTR_CONTENDERS if n in names])
        if "matrix" in suites:
            run_matrix(session, contenders, args)
        if not args.skip_extras:
            if "import" in suites:
                extras["import_times"] = import_times(args.python, IMPORT_MODULES)
            if "scale" in suites:
                run_scale(session, args.scale)
            if args.long_turns and "long" in suites:
                floor_and_lovia = [c for c in CONTENDERS if c.name in ("floor", "lovia")]
                run_long(session, floor_and_lovia, args.long_turns)
                extras["compacted_long"] = run_compacted(args.python, args.long_turns)
                extras["web"] = run_web(args.python, args.long_turns)
    finally:
        server.stop()
    measured = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "load_average": {"start": load_start, "end": os.getloadavg()},
    }
    extras["runs"] = dict.fromkeys(suites, measured)
    carried = True  # every suite is in this report: measured now, or from the last one
    if suites != set(ALL_SUITES) and not args.quick:
        carried = _carry_previous(session, extras, suites)
    report = {
        "command": shlex.join([Path(sys.executable).name, *sys.argv]),
        "environment": environment(args.python),
        "summary": summarise(session.results),
        "results": session.results,
        **extras,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    from report import carry_sections, keep_queues_section, ratios_table, render

    if args.quick:
        print(ratios_table(report))
        return
    old = DOC.read_text() if DOC.exists() else ""
    markdown = keep_queues_section(old, carry_sections(old, render(report)))
    print(markdown)
    if not args.no_docs and not carried:
        print(
            f"{DOC.relative_to(ROOT)} not written: this run measured only "
            f"{', '.join(sorted(suites))}, and there is no {RESULTS.relative_to(ROOT)} of an "
            "earlier full run to take the other suites from (a fresh clone has none); run "
            "every suite once, or pass --no-docs",
            file=sys.stderr,
        )
    elif not args.no_docs:
        DOC.write_text(markdown)
        print(f"wrote {DOC.relative_to(ROOT)} and {RESULTS.relative_to(ROOT)}", file=sys.stderr)


if __name__ == "__main__":
    main()
