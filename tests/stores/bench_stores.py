"""Store micro-benchmark (not collected by pytest).

    .venv/bin/python tests/stores/bench_stores.py [URL ...]

For each store URL (default: memory, a temp SQLite file, the local PostgreSQL): append
latency per record sequentially (one task awaiting each append, as one run does) and
with 50 concurrent runs, run load time, and the load time of a 10,000-entry session.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
import uuid

from lovia.stores import CheckpointRecord, RunInfo, Store, store
from lovia.transcript import TextEntry, ToolResultEntry, TranscriptEntry, entry_to_dict

PG = "postgresql://postgres@127.0.0.1:5432/test"


def record(i: int) -> CheckpointRecord:
    entry = TextEntry(text=f"turn {i} " + "lorem ipsum " * 20)
    return CheckpointRecord(kind="entries", data={"entries": [entry_to_dict(entry)]})


async def sequential(db: Store, n: int) -> float:
    await db.begin(RunInfo(run_id="seq", agent="bench"))
    t0 = time.perf_counter()
    for i in range(n):
        await db.append("seq", [record(i)])
    return (time.perf_counter() - t0) / n


async def concurrent(db: Store, runs: int, n: int) -> float:
    for r in range(runs):
        await db.begin(RunInfo(run_id=f"c{r}", agent="bench"))

    async def one(r: int) -> None:
        for i in range(n):
            await db.append(f"c{r}", [record(i)])

    t0 = time.perf_counter()
    await asyncio.gather(*(one(r) for r in range(runs)))
    return (time.perf_counter() - t0) / (runs * n)


async def session_load(db: Store) -> float:
    entries: list[TranscriptEntry] = []
    for i in range(5_000):
        entries.append(TextEntry(text=f"answer {i} " * 8))
        entries.append(ToolResultEntry(call_id=f"c{i}", name="t", content="result " * 10))
    for seg in range(100):
        await db.append_segment("big", f"run{seg}", entries[seg * 100 : seg * 100 + 100])
    t0 = time.perf_counter()
    loaded = await db.load_session("big")
    assert len(loaded) == 10_000
    return time.perf_counter() - t0


async def bench(url: str) -> None:
    db = store(url)
    try:
        seq = await sequential(db, 2000)
        t0 = time.perf_counter()
        snap = await db.load("seq")
        load = time.perf_counter() - t0
        assert snap is not None
        conc = await concurrent(db, 50, 40)
        sess = await session_load(db)
    finally:
        await db.aclose()
    print(
        f"{url.split(':')[0]:10} append seq {seq * 1e6:7.0f} us/record | "
        f"50 runs concurrent {conc * 1e6:6.0f} us/record | "
        f"load 2000 records {load * 1e3:6.1f} ms | 10k-entry session {sess * 1e3:6.1f} ms"
    )


async def main(urls: list[str]) -> None:
    if not urls:
        tmp = tempfile.mkdtemp()
        urls = ["memory://", f"sqlite:///{tmp}/bench.db"]
        schema = f"lovia_bench_{uuid.uuid4().hex[:8]}"
        urls.append(f"{PG}?schema={schema}")
    for url in urls:
        try:
            await bench(url)
        except Exception as exc:
            print(f"{url}: {exc!r}")
        if "schema=lovia_bench_" in url:
            import asyncpg  # type: ignore[import-untyped]

            conn = await asyncpg.connect(PG)
            await conn.execute(f"DROP SCHEMA IF EXISTS {url.rsplit('=', 1)[1]} CASCADE")
            await conn.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
