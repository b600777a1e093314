"""Wall time per Workspace tool call: shell (under its subreaper) and grep (in a worker).

Both moved out of process for safety: every ``shell`` command runs under a
small Python supervisor that kills ``setsid`` children, and every ``grep`` / ``glob``
runs in a worker process that can be killed at ``search_timeout``. This measures what
that costs per call against the bare alternatives (``/bin/sh -c`` alone, ``re`` over the
same files in-process), on a tree of ``--files`` small Python files.

    python bench/workspace_tools.py [--calls 30] [--files 200]
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from lovia.plugins._shell import run_shell
from lovia.plugins.workspace import _Files  # pyright: ignore[reportPrivateUsage]


async def _median_ms(fn: Callable[[], Awaitable[object]], calls: int) -> float:
    times: list[float] = []
    for _ in range(calls):
        t0 = time.perf_counter()
        await fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


async def _bare_shell(root: str) -> None:
    proc = await asyncio.create_subprocess_exec(
        "/bin/sh", "-c", "true", cwd=root, stdout=asyncio.subprocess.PIPE
    )
    await proc.communicate()


def _in_process_grep(root: Path, pattern: str) -> int:
    regex, hits = re.compile(pattern), 0
    for path in sorted(root.rglob("*.py")):
        hits += sum(1 for line in path.read_text().splitlines() if regex.search(line))
    return hits


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--files", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for i in range(args.files):
            (root / f"m{i:04d}.py").write_text("def f():\n    return 1\n" * 20, encoding="utf-8")
        files = _Files(root.resolve(), search_timeout=10.0)

        rows = [
            ("shell 'true', bare /bin/sh", await _median_ms(lambda: _bare_shell(tmp), args.calls)),
            (
                "shell 'true', supervised",
                await _median_ms(lambda: run_shell("true", tmp, 10, 1000), args.calls),
            ),
            (
                f"grep over {args.files} files, in-process re",
                await _median_ms(
                    lambda: asyncio.to_thread(_in_process_grep, root, r"return \d"), args.calls
                ),
            ),
            (
                f"grep over {args.files} files, worker process",
                await _median_ms(lambda: files.grep(r"return \d", "."), args.calls),
            ),
        ]
    for name, ms in rows:
        print(f"{name:<45} {ms:8.1f} ms (median of {args.calls})")


if __name__ == "__main__":
    asyncio.run(main())
