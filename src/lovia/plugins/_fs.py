"""Private file-system helpers shared by the Memory, Workspace and Skills plugins.

Everything a model names is a path *relative to a root*. :func:`confine` refuses NUL
bytes, over-long names, absolute paths, ``..`` components and — after resolving
symlinks — anything that lands outside the root. :func:`atomic_write` replaces a file
in one step (temp file in the same folder, ``fsync``, ``os.replace``, ``fsync`` of the
folder), so a reader never sees half a file and a crash never leaves one.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path, PurePosixPath

from ..errors import ToolError

__all__ = [
    "MAX_NAME_BYTES",
    "MAX_PATH_CHARS",
    "atomic_write",
    "confine",
    "is_binary",
    "number_lines",
    "relative",
]

MAX_PATH_CHARS = 1024
"""Longest relative path accepted from a model."""
MAX_NAME_BYTES = 255
"""Longest single path component (the usual file-system limit)."""
NEW_FILE_MODE = 0o644
"""Permissions of a file created by :func:`atomic_write`."""


def confine(root: Path, path: str, *, what: str = "root") -> Path:
    """Resolve ``path`` (relative to ``root``) or raise :class:`ToolError` saying why not.

    ``root`` must already be resolved. The result is the resolved path, inside ``root``
    (or ``root`` itself for ``""`` / ``"."``).
    """
    if "\x00" in path:
        raise ToolError(f"invalid path {path[:80]!r}: it contains a NUL byte")
    if len(path) > MAX_PATH_CHARS:
        raise ToolError(f"invalid path: longer than {MAX_PATH_CHARS} characters")
    pure = PurePosixPath(path.strip() or ".")
    if pure.is_absolute() or path.startswith("~") or (len(path) > 1 and path[1] == ":"):
        raise ToolError(
            f"refused path {path!r}: absolute paths are not allowed; "
            f"use a path relative to the {what}"
        )
    for part in pure.parts:
        if part == "..":
            raise ToolError(f"refused path {path!r}: '..' is not allowed (stay inside the {what})")
        if len(part.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
            raise ToolError(f"invalid path: the name {part[:40]!r}… is too long")
    resolved = (root / pure).resolve()
    if resolved != root and root not in resolved.parents:
        raise ToolError(f"refused path {path!r}: it leads outside the {what} (symlink)")
    return resolved


def relative(root: Path, path: Path) -> str:
    """``path`` as the model should see it: relative to ``root``, POSIX separators."""
    rel = path.relative_to(root).as_posix()
    return rel or "."


def atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically and durably (parents must exist)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".part")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        mode = path.stat().st_mode & 0o7777 if path.exists() else NEW_FILE_MODE
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_dir(path.parent)


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # not supported on this platform / file system
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def is_binary(data: bytes) -> bool:
    """True when ``data`` does not look like UTF-8 text."""
    if b"\x00" in data[:8192]:
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


def number_lines(text: str, start: int = 1) -> str:
    """``text`` with 1-based line numbers, like ``cat -n``."""
    lines = text.splitlines()
    return "\n".join(f"{i:6d}\t{line}" for i, line in enumerate(lines, start))
