"""Private: run a Workspace ``grep`` / ``glob`` in a child process with a deadline.

See ``_search_worker.py`` for why: a catastrophic regular expression (``^(a+)+$``)
holds the GIL for as long as it backtracks. The child is killed at the deadline, on
cancellation, and never outlives the call; what it found before the deadline is kept.
"""

from __future__ import annotations

import asyncio
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ToolError

__all__ = ["SearchResult", "run_search"]

WORKER = Path(__file__).with_name("_search_worker.py")
LINE_LIMIT = 1 << 20
"""Longest JSON line read from the worker (a hit is at most a few KB)."""


@dataclass(slots=True)
class SearchResult:
    hits: list[tuple[str, int, str]] = field(default_factory=list[tuple[str, int, str]])
    """grep: ``(path, line number, line)``; paths as the worker sent them."""
    paths: list[str] = field(default_factory=list[str])
    """glob: matching paths."""
    done: str = ""
    """``end``, ``limit`` (stopped at the match limit), or ``""`` when killed."""
    timed_out: bool = False


async def run_search(job: dict[str, Any], limit_s: float) -> SearchResult:
    """Run ``job`` in the worker; raise :class:`ToolError` for what it reports as an error."""
    if not sys.executable:
        raise ToolError("grep and glob need a Python executable to run their worker process")
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-I",
        "-S",
        str(WORKER),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        limit=LINE_LIMIT,
    )
    result = SearchResult()
    errors: list[str] = []
    try:
        async with asyncio.timeout(limit_s):
            await _talk(proc, job, result, errors)
    except TimeoutError:
        result.timed_out = True
    finally:
        if proc.returncode is None:
            proc.kill()
            await asyncio.shield(proc.wait())
    if errors:
        raise ToolError(errors[0])
    if not result.done and not result.timed_out:
        raise ToolError(f"the search stopped unexpectedly (worker exit code {proc.returncode})")
    return result


async def _talk(
    proc: asyncio.subprocess.Process, job: dict[str, Any], out: SearchResult, errors: list[str]
) -> None:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(json.dumps(job).encode())
    proc.stdin.close()
    while line := await proc.stdout.readline():
        msg = json.loads(line)
        if "hit" in msg:
            path, no, text = msg["hit"]
            out.hits.append((path, no, text))
        elif "path" in msg:
            out.paths.append(msg["path"])
        elif "error" in msg:
            errors.append(msg["error"])
        elif "done" in msg:
            out.done = msg["done"]
    await proc.wait()
