"""``lovia web`` page cost at size: time to first byte and page weight.

Records, in a temporary SQLite store, a 500-turn run (a scripted model, a tool call per
turn), 1,000 other runs (summary rows written directly, a failure in every seventh) and
a run whose tool results total ``--big-mb`` MB; serves ``lovia web`` on 127.0.0.1
(uvicorn, one process) and requests the runs list (plain, and searched + sorted), the
long run's page (one page of turns), the view of its last turn, and the big run's page
and last view. Time to first byte is from sending the request to the first byte of the
response (its status line: the page is built before it is sent), median of N requests
on one keep-alive connection after a warm-up; "cold" is the first request of the page
(nothing of it loaded yet). Page weight is the HTML plus the CSS and JavaScript it
loads (the only assets), uncompressed. While the long run's last view is first loaded,
``/api/health`` is asked every 10 ms on another connection: its slowest answer shows
whether the server stays responsive (next to an idle server's slowest of as many).

    python bench/web_page.py [--turns 500] [--fillers 1000] [--big-mb 20]
                             [--samples 30] [--db PATH] [--json] [--update-doc]

``--db PATH`` keeps the recorded store in PATH (a SQLite file) and reuses it when it
exists, so a long run is recorded once and measured before and after a change.

``--update-doc`` rewrites the "lovia web" section of docs/performance.md in place
(``bench/run.py`` renders the same section from its report).
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))


async def record(url: str, turns: int) -> str:
    from lovia import Agent, Runner, tool
    from lovia.stores import store
    from lovia.testing import ScriptedModel, call, reply

    @tool
    async def lookup(order: str) -> str:
        """Look up an order."""
        return f"{order}: shipped on time, tracking number 1Z{order}"

    steps: list[Any] = [
        reply(f"Checking order O{i}.", tool_calls=[call("lookup", order=f"O{i}")])
        for i in range(turns - 1)
    ]
    steps.append("All orders shipped.")
    db = store(url)
    agent = Agent(name="support", instructions="Help.", tools=[lookup], model=ScriptedModel(steps))
    result = await Runner.run(
        agent, "check all orders", checkpointer=db, run_id="run-long", max_turns=turns + 1
    )
    await db.aclose()
    return str(result.run_id)


async def record_fillers(url: str, count: int) -> None:
    """``count`` summary rows (begin + finish), as many runs of other agents leave."""
    from lovia.stores import RunInfo, store

    db = store(url)
    now = time.time() - count * 60
    for i in range(count):
        failed = i % 7 == 0
        info = RunInfo(
            run_id=f"filler-{i:05d}",
            agent=("triage", "billing", "search")[i % 3],
            session_id=f"s-{i // 5}",
            status="failed" if failed else "completed",
            error_type="ProviderTimeout" if failed else None,
            turns=1 + i % 9,
            input_tokens=100 + i,
            output_tokens=20 + i % 50,
            cost_usd=0.0001 * (i % 40),
            started_at=now + i * 60,
            ended_at=now + i * 60 + 1 + i % 30,
            extra={"model": "openai:gpt-4.1-mini", "error": "read timed out"} if failed else {},
        )
        await db.begin(info)
        await db.finish(info, None)
    await db.aclose()


async def record_big(url: str, megabytes: int) -> str:
    """A run whose tool results total ``megabytes`` MB (2 MB each)."""
    from lovia import Agent, Runner, tool
    from lovia.stores import store
    from lovia.testing import ScriptedModel, call, reply

    chunk = "x" * (2 * 1024 * 1024 - 1) + "\n"

    @tool
    async def dump(part: int) -> str:
        """Return a large blob."""
        return chunk

    calls = max(1, megabytes // 2)
    steps: list[Any] = [
        reply(f"Part {i}.", tool_calls=[call("dump", part=i)]) for i in range(calls)
    ]
    steps.append("Done.")
    db = store(url)
    agent = Agent(name="dumper", instructions="Dump.", tools=[dump], model=ScriptedModel(steps))
    result = await Runner.run(
        agent, "dump it", checkpointer=db, run_id="run-big", max_turns=calls + 2
    )
    await db.aclose()
    return str(result.run_id)


def serve(url: str) -> tuple[Any, int]:
    import uvicorn

    from lovia.web import create_app

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    server = uvicorn.Server(
        uvicorn.Config(create_app(url), log_level="warning", access_log=False, lifespan="on")
    )
    threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])), daemon=True).start()
    while not server.started:
        time.sleep(0.01)
    return server, sock.getsockname()[1]


LAST: dict[str, float] = {}


def fetch(conn: http.client.HTTPConnection, path: str) -> tuple[float, bytes]:
    """(seconds to the first byte of the response: its status line and headers, body).

    The whole response's time is kept in ``LAST["total"]``: on a reused keep-alive
    connection it includes a ~40 ms delayed-ACK wait between the headers and the body
    segments of this loopback client, whatever the page.
    """
    t0 = time.perf_counter()
    conn.request("GET", path, headers={"host": "127.0.0.1"})
    response = conn.getresponse()
    ttfb = time.perf_counter() - t0
    body = response.read()
    LAST["total"] = time.perf_counter() - t0
    assert response.status == 200, (path, response.status)
    return ttfb, body


def measure(port: int, path: str, samples: int) -> dict[str, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    cold, _ = fetch(conn, path)  # the first request: nothing of this page loaded yet
    times, totals, body = [], [], b""
    for _ in range(samples):
        ttfb, body = fetch(conn, path)
        times.append(ttfb)
        totals.append(LAST["total"])
    assets = sum(len(fetch(conn, p)[1]) for p in ("/static/style.css", "/static/app.js"))
    conn.close()
    return {
        "path": path,
        "cold_ms": round(cold * 1000, 1),
        "ttfb_ms_median": round(statistics.median(times) * 1000, 1),
        "ttfb_ms_p90": round(sorted(times)[int(len(times) * 0.9) - 1] * 1000, 1),
        "complete_ms_median": round(statistics.median(totals) * 1000, 1),
        "html_kb": round(len(body) / 1024, 1),
        "page_kb": round((len(body) + assets) / 1024, 1),
        "turn_sections": body.count(b'<section class="turn"'),
    }


def health_while(port: int, path: str) -> dict[str, Any]:
    """The worst ``/api/health`` answer time while ``path`` is first requested."""
    done = threading.Event()
    worst: list[float] = []

    def probe() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        while not done.is_set():
            worst.append(fetch(conn, "/api/health")[0])
            time.sleep(0.01)
        conn.close()

    thread = threading.Thread(target=probe)
    thread.start()
    time.sleep(0.05)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    page_s, _ = fetch(conn, path)
    done.set()
    thread.join()
    idle = [fetch(conn, "/api/health")[0] for _ in range(len(worst))]
    return {
        "path": path,
        "page_ms": round(page_s * 1000, 1),
        "health_ms_max": round(max(worst) * 1000, 1),
        "health_answers": len(worst),
        "health_idle_ms_max": round(max(idle) * 1000, 1),
    }


def first_load(url: str, path: str) -> dict[str, Any]:
    """The first request of ``path`` on a server that has loaded nothing yet (the store
    read, parsed and resolved for this page), and the same page asked again."""
    server, port = serve(url)
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        cold, _ = fetch(conn, path)
        warm, _ = fetch(conn, path)
        conn.close()
    finally:
        server.should_exit = True
    return {"path": path, "cold_ms": round(cold * 1000, 1), "warm_ms": round(warm * 1000, 1)}


def run(
    turns: int, samples: int, fillers: int = 1000, big_mb: int = 20, db: str | None = None
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(db) if db else Path(tmp) / "web.db"
        url = f"sqlite:///{path}"
        if path.exists():  # recorded by an earlier run of this script with the same sizes
            run_id, big = "run-long", "run-big" if big_mb else None
        else:
            run_id = asyncio.run(record(url, turns))
            asyncio.run(record_fillers(url, fillers))
            big = asyncio.run(record_big(url, big_mb)) if big_mb else None
        first = first_load(url, f"/runs/{run_id}")
        server, port = serve(url)
        try:
            health = health_while(port, f"/runs/{run_id}/turns/{turns - 1}")
            pages = {
                f"runs list ({fillers + 2} runs)": measure(port, "/", samples),
                "runs list, searched + sorted by cost": measure(
                    port, "/?q=bill&error=timeout&sort=cost", samples
                ),
                "run page (first page of turns)": measure(port, f"/runs/{run_id}", samples),
                f"view of turn {turns - 1}": measure(
                    port, f"/runs/{run_id}/turns/{turns - 1}", samples
                ),
            }
            if big is not None:
                pages[f"run page, {big_mb} MB of tool results"] = measure(
                    port, f"/runs/{big}", max(3, samples // 5)
                )
                pages[f"last view, {big_mb} MB of tool results"] = measure(
                    port, f"/runs/{big}/turns/{big_mb // 2}", max(3, samples // 5)
                )
        finally:
            server.should_exit = True
    return {
        "turns": turns,
        "samples": samples,
        "first_load": first,
        "fillers": fillers,
        "big_mb": big_mb,
        "health": health,
        "pages": pages,
    }


def update_doc(data: dict[str, Any]) -> None:
    from report import web_section

    doc = ROOT / "docs" / "performance.md"
    text = doc.read_text()
    section = "\n".join(web_section(data))
    start = text.find("## lovia web:")
    if start < 0:
        anchor = text.find("## Fake server cost")
        anchor = anchor if anchor >= 0 else len(text)
        text = text[:anchor] + section + "\n\n" + text[anchor:]
    else:
        end = text.find("\n## ", start + 1)
        text = text[:start] + section + ("\n" + text[end:] if end >= 0 else "\n")
    doc.write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=500)
    parser.add_argument("--samples", type=int, default=30)
    parser.add_argument("--fillers", type=int, default=1000, help="filler runs in the list")
    parser.add_argument("--big-mb", type=int, default=20, help="MB of tool results, 0: none")
    parser.add_argument("--db", help="SQLite file to keep the recorded runs in (reused)")
    parser.add_argument("--json", action="store_true", help="print the result as one JSON line")
    parser.add_argument("--update-doc", action="store_true", help="rewrite docs/performance.md")
    args = parser.parse_args()
    data = run(args.turns, args.samples, args.fillers, args.big_mb, args.db)
    if args.update_doc:
        update_doc(data)
    if args.json:
        print(json.dumps(data))
    else:
        for name, row in data["pages"].items():
            print(
                f"{name:40} ttfb {row['ttfb_ms_median']:>6} ms (cold {row['cold_ms']:>7} ms)"
                f"  page {row['page_kb']:>7} KB  turns shown {row['turn_sections']}"
            )
        first = data["first_load"]
        print(
            f"first load of {first['path']} on a fresh server: {first['cold_ms']} ms "
            f"(asked again: {first['warm_ms']} ms)"
        )
        health = data["health"]
        print(
            f"health check while {health['path']} loads cold ({health['page_ms']} ms): "
            f"worst {health['health_ms_max']} ms over {health['health_answers']} answers "
            f"(idle server: worst {health['health_idle_ms_max']} ms)"
        )


if __name__ == "__main__":
    main()
