"""Private: the child process that runs Workspace ``grep`` and ``glob``.

A model-chosen regular expression can backtrack for minutes inside one call of the
``re`` engine, which never releases the GIL: run in the agent's process it would stall
every run there, lease heartbeats included. So the search runs here, in a separate
Python process that the parent kills at its deadline (``lovia.plugins._search``).

This file is executed by path (``python -I -S _search_worker.py``) and imports only the
standard library, so the child starts in milliseconds. It reads one JSON job on stdin
and writes one JSON object per line: ``{"hit": [path, line_no, text]}`` (grep),
``{"path": path}`` (glob), ``{"error": message}``, then ``{"done": reason}``. Paths are
relative to the root, POSIX style, as Python decodes them (``surrogateescape``); the
parent escapes them for the model.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

MAX_LINE_CHARS = 500


def _emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def _inside(root: Path, path: Path) -> bool:
    resolved = path.resolve()
    return resolved == root or root in resolved.parents


def _files(start: Path, skip: frozenset[str]) -> Any:
    if start.is_file():
        yield start
        return
    for dirpath, dirnames, filenames in os.walk(start):
        dirnames[:] = sorted(d for d in dirnames if d not in skip)
        for name in sorted(filenames):
            yield Path(dirpath) / name


def _text(path: Path, max_bytes: int) -> str | None:
    """The file as UTF-8 text, or None (too large, binary, unreadable)."""
    try:
        if path.stat().st_size > max_bytes:
            return None
        data = path.read_bytes()
        if b"\x00" in data[:8192]:
            return None
        return data.decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def grep(job: dict[str, Any]) -> str:
    try:
        regex = re.compile(job["pattern"])
    except (re.error, OverflowError, RecursionError) as exc:
        _emit({"error": f"invalid regular expression: {exc}"})
        return "error"
    root = Path(job["root"])
    found = 0
    for path in _files(Path(job["start"]), frozenset(job["skip"])):
        resolved = path.resolve()
        if root not in resolved.parents:  # a symlink leading out of the workspace
            continue
        text = _text(resolved, job["max_bytes"])
        if text is None:
            continue
        rel = path.relative_to(root).as_posix()
        for no, line in enumerate(text.splitlines(), 1):
            if regex.search(line):
                _emit({"hit": [rel, no, line[:MAX_LINE_CHARS]]})
                found += 1
                if found >= job["max_matches"]:
                    return "limit"
    return "end"


def glob(job: dict[str, Any]) -> str:
    root, skip = Path(job["root"]), frozenset(job["skip"])
    found = 0
    for path in sorted(root.glob(job["pattern"])):
        rel = path.relative_to(root)
        if not _inside(root, path) or skip & set(rel.parts):
            continue
        _emit({"path": rel.as_posix()})
        found += 1
        if found >= job["max_matches"]:
            return "limit"
    return "end"


def main() -> None:
    job = json.loads(sys.stdin.read())
    try:
        reason = grep(job) if job["op"] == "grep" else glob(job)
    except (OSError, ValueError, NotImplementedError) as exc:
        _emit({"error": f"{type(exc).__name__}: {exc}"})
        reason = "error"
    _emit({"done": reason})


if __name__ == "__main__":
    main()
