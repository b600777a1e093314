"""``Memory(path)``: long-term memory across sessions, kept as files in one folder.

Tools (all paths relative to the memory root): ``memory_view`` (a folder listing, or a
file with line numbers), ``memory_create``, ``memory_str_replace`` (the old text must
occur exactly once), ``memory_insert`` (after a line), ``memory_delete`` and
``memory_rename``. Absolute paths, ``..``, symlinks leading out, NUL bytes, hidden
(dot) names and over-long names are refused with an error result.

State scope: the memory root is cross-run state. It is shared by every run (and every
process) using the folder and is owned by whoever created it; the plugin never deletes
it. Writes are atomic (temp file + ``fsync`` + ``os.replace``) and every
read-modify-write holds an exclusive ``fcntl.flock`` on ``<root>/.lovia-memory.lock``
(readers take a shared lock), so concurrent runs, threads and processes lose no update.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import threading
from collections.abc import Callable, Generator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from ..context import RunContext
from ..errors import ToolError
from ..tools import Tool, tool
from ._fs import atomic_write, confine, is_binary, number_lines, relative
from .base import PluginInstance

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: in-process locking only
    fcntl = None

__all__ = ["Memory"]

T = TypeVar("T")

LOCK_NAME = ".lovia-memory.lock"
MAX_FILE_CHARS = 1_000_000
MAX_FILE_BYTES = 4 * MAX_FILE_CHARS
"""Largest file the tools read (a file written by other means may be larger)."""
MAX_LISTING = 500

INSTRUCTIONS = """\
## Memory
You have a memory folder that persists across conversations. At the start of a task,
look at it with `memory_view` (path ".") and read what is relevant. As you work, record
what you would want to know next time — progress, decisions, user preferences, facts
you had to look up — in well-named Markdown files, and keep them tidy (update or
delete outdated notes). Paths are relative to the memory folder. Never store secrets."""

_PROCESS_LOCKS: dict[Path, threading.RLock] = {}
_PROCESS_LOCKS_GUARD = threading.Lock()


def _thread_lock(root: Path) -> threading.RLock:
    with _PROCESS_LOCKS_GUARD:
        return _PROCESS_LOCKS.setdefault(root, threading.RLock())


@contextlib.contextmanager
def _locked(root: Path, *, exclusive: bool) -> Generator[None]:
    """Hold the root's file lock (shared or exclusive) for the block."""
    if fcntl is None:  # pragma: no cover
        with _thread_lock(root):
            yield
        return
    fd = os.open(root / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)  # closing releases the lock


class _Store:
    """File operations under one root. Every method runs in a worker thread."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def path(self, path: str) -> Path:
        target = confine(self.root, path, what="memory folder")
        rel = target.relative_to(self.root)
        if any(part.startswith(".") for part in rel.parts):
            raise ToolError(f"refused path {path!r}: hidden (dot) names are reserved")
        return target

    def file(self, path: str) -> Path:
        target = self.path(path)
        if target == self.root or target.is_dir():
            raise ToolError(f"{path!r} is a folder, not a file")
        if not target.is_file():
            raise ToolError(f"no file {path!r} in memory; use memory_view to see what exists")
        return target

    def read(self, target: Path) -> str:
        size = target.stat().st_size
        if size > MAX_FILE_BYTES:
            raise ToolError(
                f"{relative(self.root, target)} is {size} bytes; a memory file is read "
                f"only up to {MAX_FILE_BYTES} bytes"
            )
        data = target.read_bytes()
        if is_binary(data):
            raise ToolError(f"{relative(self.root, target)} is not a UTF-8 text file")
        return data.decode("utf-8")

    def view(self, path: str, view_range: list[int] | None) -> str:
        target = self.path(path)
        with _locked(self.root, exclusive=False):
            if target.is_dir():
                return self._listing(target)
            text = self.read(self.file(path))
        lines = text.splitlines()
        start, end = 1, len(lines)
        if view_range:
            if len(view_range) != 2 or view_range[0] < 1:
                raise ToolError("view_range must be [first_line, last_line] (1-based; -1 = end)")
            start = view_range[0]
            end = len(lines) if view_range[1] == -1 else min(view_range[1], len(lines))
        if not lines:
            return f"{path} is empty."
        return number_lines("\n".join(lines[start - 1 : end]), start)

    def _listing(self, folder: Path) -> str:
        rows: list[str] = []
        for dirpath, dirnames, filenames in os.walk(folder):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            base = Path(dirpath)
            for name in sorted(filenames):
                if not name.startswith(".") and len(rows) <= MAX_LISTING:
                    p = base / name
                    rows.append(f"{p.stat().st_size:>8}  {relative(self.root, p)}")
            for name in dirnames[: max(0, MAX_LISTING + 1 - len(rows))]:
                rows.append(f"{'-':>8}  {relative(self.root, base / name)}/")
            if len(rows) > MAX_LISTING:
                break
        head = f"Memory folder {relative(self.root, folder)} (size in bytes, path):"
        if not rows:
            return f"{head}\n(empty)"
        return "\n".join([head, *sorted(rows, key=lambda r: r[10:])[:MAX_LISTING]])

    def create(self, path: str, file_text: str) -> str:
        _check_size(file_text)
        target = self.path(path)
        if target == self.root or target.is_dir():
            raise ToolError(f"{path!r} is a folder")
        with _locked(self.root, exclusive=True):
            existed = target.exists()
            target.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(target, file_text)
        return f"{'Overwrote' if existed else 'Created'} {relative(self.root, target)}."

    def str_replace(self, path: str, old_str: str, new_str: str) -> str:
        if not old_str:
            raise ToolError("old_str must not be empty")
        with _locked(self.root, exclusive=True):
            target = self.file(path)
            text = self.read(target)
            count = text.count(old_str)
            if count != 1:
                where = "does not occur" if count == 0 else f"occurs {count} times"
                raise ToolError(
                    f"old_str {where} in {path}; it must occur exactly once "
                    "(add surrounding text to make it unique)"
                )
            new = text.replace(old_str, new_str, 1)
            _check_size(new)
            atomic_write(target, new)
        return f"Edited {relative(self.root, target)}."

    def insert(self, path: str, insert_line: int, insert_text: str) -> str:
        with _locked(self.root, exclusive=True):
            target = self.file(path)
            lines = self.read(target).splitlines(keepends=True)
            if not 0 <= insert_line <= len(lines):
                raise ToolError(f"insert_line must be between 0 and {len(lines)} for {path}")
            if lines and not lines[-1].endswith("\n") and insert_line == len(lines):
                lines[-1] += "\n"
            block = insert_text if insert_text.endswith("\n") else insert_text + "\n"
            lines.insert(insert_line, block)
            new = "".join(lines)
            _check_size(new)
            atomic_write(target, new)
        return f"Inserted text after line {insert_line} of {relative(self.root, target)}."

    def delete(self, path: str) -> str:
        target = self.path(path)
        if target == self.root:
            raise ToolError("refusing to delete the whole memory folder")
        with _locked(self.root, exclusive=True):
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            elif target.exists():
                target.unlink()
            else:
                raise ToolError(f"no file or folder {path!r} in memory")
        return f"Deleted {relative(self.root, target)}."

    def rename(self, old_path: str, new_path: str) -> str:
        source, dest = self.path(old_path), self.path(new_path)
        if self.root in (source, dest):
            raise ToolError("cannot rename the memory folder itself")
        with _locked(self.root, exclusive=True):
            if not source.exists():
                raise ToolError(f"no file or folder {old_path!r} in memory")
            if dest.exists():
                raise ToolError(
                    f"{new_path!r} already exists; delete it first or pick another name"
                )
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.replace(source, dest)
        return f"Renamed {relative(self.root, source)} to {relative(self.root, dest)}."


def _check_size(text: str) -> None:
    if len(text) > MAX_FILE_CHARS:
        raise ToolError(f"a memory file may hold at most {MAX_FILE_CHARS} characters")


async def _run(fn: Callable[..., T], *args: Any) -> T:
    return await asyncio.to_thread(fn, *args)


@dataclass(frozen=True, slots=True, init=False)
class Memory:
    """Long-term memory in a folder, shared by all runs (see the module docs)."""

    root: Path
    name: str
    instructions: str | None

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        name: str = "memory",
        instructions: str | None = INSTRUCTIONS,
    ) -> None:
        object.__setattr__(self, "root", Path(path).expanduser().resolve())
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "instructions", instructions)

    async def setup(self, ctx: RunContext[Any]) -> PluginInstance:
        await _run(lambda: self.root.mkdir(parents=True, exist_ok=True))
        store = _Store(self.root)

        tools = [*_write_tools(store), *_edit_tools(store)]
        return PluginInstance(tools=tools, instructions=self.instructions)


def _write_tools(store: _Store) -> list[Tool]:
    @tool(name="memory_view", concurrency_safe=True)
    async def memory_view(path: str = ".", view_range: list[int] | None = None) -> str:
        """Show a memory folder (files and sizes) or a file with line numbers.

        Args:
            path: Relative path inside the memory folder ("." for all of it).
            view_range: Optional [first_line, last_line] of a file (1-based; -1 = end).
        """
        return await _run(store.view, path, view_range)

    @tool(name="memory_create")
    async def memory_create(path: str, file_text: str) -> str:
        """Create a memory file, or overwrite it (parent folders are created).

        Args:
            path: Relative path of the file, e.g. `projects/lovia.md`.
            file_text: The whole content of the file.
        """
        return await _run(store.create, path, file_text)

    @tool(name="memory_str_replace")
    async def memory_str_replace(path: str, old_str: str, new_str: str) -> str:
        """Replace text in a memory file; `old_str` must occur exactly once.

        Args:
            path: Relative path of the file.
            old_str: The exact text to replace (unique in the file).
            new_str: The replacement text (may be empty to delete).
        """
        return await _run(store.str_replace, path, old_str, new_str)

    return [memory_view, memory_create, memory_str_replace]


def _edit_tools(store: _Store) -> list[Tool]:
    @tool(name="memory_insert")
    async def memory_insert(path: str, insert_line: int, insert_text: str) -> str:
        """Insert text into a memory file after a line (0 = at the top).

        Args:
            path: Relative path of the file.
            insert_line: The line number to insert after.
            insert_text: The text to insert.
        """
        return await _run(store.insert, path, insert_line, insert_text)

    @tool(name="memory_delete")
    async def memory_delete(path: str) -> str:
        """Delete a memory file or folder.

        Args:
            path: Relative path of the file or folder.
        """
        return await _run(store.delete, path)

    @tool(name="memory_rename")
    async def memory_rename(old_path: str, new_path: str) -> str:
        """Rename or move a memory file or folder.

        Args:
            old_path: Its current relative path.
            new_path: The new relative path (must not exist).
        """
        return await _run(store.rename, old_path, new_path)

    return [memory_insert, memory_delete, memory_rename]
