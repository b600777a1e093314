"""``Workspace(path)``: the folder an agent works in — its instructions, files and shell.

Pass it to a run (``Runner.run(agent, input, workspace=Workspace("."))``): the loop sets
it up first, as a plugin named ``workspace``, and ``ctx.workspace`` is this object.

- Instruction files found in the root (``AGENTS.md``, ``CLAUDE.md`` by default) are
  appended to the system prompt (read once per run).
- File tools, confined to the root (no absolute paths, no ``..``, no symlinks out):
  ``read_file`` (line ranges), ``write_file``, ``edit_file`` (unique string),
  ``list_dir``, ``glob``, ``grep``. A file name that is not UTF-8 text is shown
  escaped (``caf\\xe9.txt``) and that name opens the file. ``grep`` and ``glob`` run in
  a separate process stopped after ``search_timeout`` seconds, so a pattern that
  backtracks (``^(a+)+$``) or a huge folder cannot stall the process.
- ``shell`` runs a command with ``/bin/sh`` in the root, in its own session,
  with a timeout and an output cap, and returns the exit code, stdout and stderr.
  **A non-zero exit is output, not a tool error**: the model reads the code like any
  other output. Whatever the command started is killed when it returns, on timeout and
  when the run is cancelled (on Linux even a ``setsid`` or double-forked child).

The shell is not a sandbox: a command can still read or write outside the folder.
Run untrusted agents in a container.
"""

from __future__ import annotations

import asyncio
import hashlib
import heapq
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..context import RunContext
from ..errors import ToolError, UserError
from ..tools import Tool, tool
from ._fs import atomic_write, confine, is_binary, number_lines, relative, show_name, unescape_name
from ._search import SearchResult, run_search
from ._shell import run_shell
from .base import PluginInstance

__all__ = ["Workspace"]

MAX_READ_BYTES = 2_000_000
MAX_MATCHES = 200
MAX_LISTED = 1000
"""Most entries ``list_dir`` shows (the first by name; the rest are counted)."""
SKIP_DIRS = frozenset(
    {".git", "node_modules", ".venv", "__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache"}
)


def _scan(folder: Path, seen: list[int]) -> Iterator[tuple[str, bool]]:
    with os.scandir(folder) as entries:
        for entry in entries:
            seen[0] += 1
            yield entry.name, entry.is_dir()


@dataclass(frozen=True, slots=True)
class _Files:
    root: Path
    search_timeout: float

    def resolve(self, path: str) -> Path:
        return confine(self.root, path, what="workspace")

    def text(self, path: str) -> str:
        target = self.resolve(path)
        if not target.is_file():
            raise ToolError(f"no file {path!r} in the workspace")
        if target.stat().st_size > MAX_READ_BYTES:
            raise ToolError(f"{path} is larger than {MAX_READ_BYTES} bytes; use grep or shell")
        data = target.read_bytes()
        if is_binary(data):
            raise ToolError(f"{path} is a binary file")
        return data.decode("utf-8")

    def read(self, path: str, start_line: int, end_line: int | None) -> str:
        lines = self.text(path).splitlines()
        if start_line < 1:
            raise ToolError("start_line is 1-based")
        end = len(lines) if end_line is None or end_line == -1 else min(end_line, len(lines))
        if not lines:
            return f"{path} is empty."
        return number_lines("\n".join(lines[start_line - 1 : end]), start_line)

    def write(self, path: str, content: str) -> str:
        target = self.resolve(path)
        if target.is_dir():
            raise ToolError(f"{path!r} is a folder")
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(target, content)
        return f"Wrote {len(content)} characters to {relative(self.root, target)}."

    def edit(self, path: str, old: str, new: str) -> str:
        if not old:
            raise ToolError("old_string must not be empty")
        text = self.text(path)
        count = text.count(old)
        if count != 1:
            where = "does not occur" if count == 0 else f"occurs {count} times"
            raise ToolError(f"old_string {where} in {path}; it must occur exactly once")
        atomic_write(self.resolve(path), text.replace(old, new, 1))
        return f"Edited {path}."

    def listdir(self, path: str) -> str:
        target = self.resolve(path)
        if not target.is_dir():
            raise ToolError(f"no folder {path!r} in the workspace")
        seen = [0]
        shown = heapq.nsmallest(MAX_LISTED, _scan(target, seen))
        rows = [show_name(name) + ("/" if is_dir else "") for name, is_dir in shown]
        if seen[0] > len(rows):
            rows.append(f"(… {seen[0] - len(rows)} more; use glob or shell to narrow it)")
        return "\n".join(rows) or "(empty)"

    async def glob(self, pattern: str) -> str:
        pattern = unescape_name(pattern)
        if pattern.startswith("/") or ".." in Path(pattern).parts:
            raise ToolError("glob patterns are relative to the workspace and may not use '..'")
        found = await self._search({"op": "glob", "pattern": pattern}, "glob")
        return "\n".join(show_name(p) for p in found.paths) or "(no matches)"

    async def grep(self, pattern: str, path: str) -> str:
        start = await asyncio.to_thread(self.resolve, path)
        found = await self._search(
            {"op": "grep", "pattern": pattern, "start": str(start), "max_bytes": MAX_READ_BYTES},
            "grep",
        )
        hits = [f"{show_name(p)}:{no}:{line}" for p, no, line in found.hits]
        if found.done == "limit":
            hits.append(f"(stopped at {MAX_MATCHES} matches)")
        return "\n".join(hits) or "(no matches)"

    async def _search(self, job: dict[str, Any], what: str) -> SearchResult:
        job |= {"root": str(self.root), "skip": sorted(SKIP_DIRS), "max_matches": MAX_MATCHES}
        found = await run_search(job, self.search_timeout)
        if found.timed_out:
            so_far = [f"{show_name(p)}:{no}:{line}" for p, no, line in found.hits]
            so_far += [show_name(p) for p in found.paths]
            raise ToolError(
                f"{what} was stopped after {self.search_timeout:g} s (search_timeout). "
                "A regular expression with nested repetition such as (a+)+ can take "
                "forever, and a huge folder takes long: simplify the pattern or search "
                "a narrower path. Found before the stop:\n" + ("\n".join(so_far) or "(nothing)")
            )
        return found


def _file_tools(files: _Files) -> list[Tool]:
    run = asyncio.to_thread

    @tool(name="read_file", concurrency_safe=True)
    async def read_file(path: str, start_line: int = 1, end_line: int | None = None) -> str:
        """Read a text file of the workspace, with line numbers.

        Args:
            path: Path relative to the workspace root.
            start_line: First line to show (1-based).
            end_line: Last line to show (inclusive; omit or -1 for the end).
        """
        return await run(files.read, path, start_line, end_line)

    @tool(name="write_file")
    async def write_file(path: str, content: str) -> str:
        """Create or overwrite a file in the workspace (parent folders are created).

        Args:
            path: Path relative to the workspace root.
            content: The whole new content.
        """
        return await run(files.write, path, content)

    @tool(name="edit_file")
    async def edit_file(path: str, old_string: str, new_string: str) -> str:
        """Replace one exact, unique piece of text in a file.

        Args:
            path: Path relative to the workspace root.
            old_string: Text to replace; must occur exactly once (include context).
            new_string: The replacement.
        """
        return await run(files.edit, path, old_string, new_string)

    @tool(name="list_dir", concurrency_safe=True)
    async def list_dir(path: str = ".") -> str:
        """List a folder of the workspace (folders end with '/')."""
        return await run(files.listdir, path)

    @tool(name="glob", concurrency_safe=True)
    async def glob(pattern: str) -> str:
        """Find files by glob pattern, e.g. `src/**/*.py` (relative to the workspace)."""
        return await files.glob(pattern)

    @tool(name="grep", concurrency_safe=True)
    async def grep(pattern: str, path: str = ".") -> str:
        """Search text files for a regular expression; prints `path:line:text`.

        Args:
            pattern: A Python regular expression.
            path: File or folder to search, relative to the workspace root.
        """
        return await files.grep(pattern, path)

    return [read_file, write_file, edit_file, list_dir, glob, grep]


def _session_id(root: Path, session: bool | str) -> str | None:
    """``session=True``: one conversation per folder, stable across processes."""
    if session is False or session == "":
        return None
    if session is True:
        digest = hashlib.sha256(str(root).encode()).hexdigest()[:16]
        return f"workspace-{digest}"
    return str(session)


@dataclass(frozen=True, slots=True, init=False)
class Workspace:
    """A folder the agent works in: instruction files, file tools and a shell."""

    root: Path
    instructions_files: tuple[str, ...]
    shell_timeout: float
    output_cap: int
    search_timeout: float
    """Seconds a ``grep`` or ``glob`` may run before it is stopped (an error result)."""
    env: dict[str, str] | None = field(default=None)
    session: str | None = field(default=None)
    """The session this workspace binds runs to (``session=True`` derives one)."""
    name: str = "workspace"

    def __init__(
        self,
        path: str | os.PathLike[str] = ".",
        *,
        instructions_files: tuple[str, ...] | list[str] = ("AGENTS.md", "CLAUDE.md"),
        shell_timeout: float = 30.0,
        output_cap: int = 30_000,
        env: dict[str, str] | None = None,
        session: bool | str = False,
        search_timeout: float = 10.0,
    ) -> None:
        root = Path(path).expanduser().resolve()
        if not root.is_dir():
            raise UserError(
                f"workspace {root} is not a folder",
                hint="Create it first, or pass an existing folder.",
            )
        if shell_timeout <= 0 or output_cap <= 0 or search_timeout <= 0:
            raise UserError(
                "Workspace shell_timeout, search_timeout and output_cap must be positive"
            )
        object.__setattr__(self, "root", root)
        object.__setattr__(self, "instructions_files", tuple(instructions_files))
        object.__setattr__(self, "shell_timeout", float(shell_timeout))
        object.__setattr__(self, "output_cap", int(output_cap))
        object.__setattr__(self, "search_timeout", float(search_timeout))
        object.__setattr__(self, "env", dict(env) if env is not None else None)
        object.__setattr__(self, "name", "workspace")
        object.__setattr__(self, "session", _session_id(root, session))

    def session_store_url(self) -> str:
        """Where a bound workspace keeps its conversation: ``<root>/.lovia/lovia.db``."""
        return f"sqlite:///{self.root / '.lovia' / 'lovia.db'}"

    def instructions(self) -> str | None:
        """The instruction files found in the root, each under a heading."""
        parts: list[str] = []
        for name in self.instructions_files:
            path = self.root / name
            if path.is_file():
                text = path.read_text(encoding="utf-8", errors="replace").strip()
                if text:
                    parts.append(f"## Workspace instructions ({name})\n{text}")
        return "\n\n".join(parts) or None

    async def shell_run(self, command: str) -> str:
        """Run ``command`` like the ``shell`` tool does and return its rendered output."""
        result = await run_shell(
            command, str(self.root), self.shell_timeout, self.output_cap, self.env
        )
        if result.timed_out:
            what = "everything it started" if result.contained else "what could be found"
            raise ToolError(
                f"command timed out after {self.shell_timeout:g} s; it was killed with "
                f"{what}. Output so far:\n{result.render()}"
            )
        return result.render()

    async def setup(self, ctx: RunContext[Any]) -> PluginInstance:
        files = _Files(self.root, self.search_timeout)
        workspace = self

        @tool(name="shell")
        async def shell(command: str) -> str:
            """Run a shell command in the workspace folder; returns exit code, stdout, stderr.

            A non-zero exit code is a normal result (e.g. failing tests), not an error.

            Args:
                command: The command line, run with /bin/sh.
            """
            return await workspace.shell_run(command)

        text = await asyncio.to_thread(self.instructions)
        header = (
            f"You work in the folder {show_name(str(self.root))}. File tools take paths relative "
            "to it; `shell` runs commands there."
        )
        instructions = f"{header}\n\n{text}" if text else header
        return PluginInstance(tools=[*_file_tools(files), shell], instructions=instructions)
