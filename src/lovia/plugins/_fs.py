"""Private file-system helpers shared by the Memory, Workspace and Skills plugins.

Everything a model names is a path *relative to a root*. :func:`confine` refuses NUL
bytes, over-long names, absolute paths, ``..`` components and — after resolving
symlinks — anything that lands outside the root. :func:`atomic_write` replaces a file
in one step (temp file in the same folder, ``fsync``, ``os.replace``, ``fsync`` of the
folder), so a reader never sees half a file and a crash never leaves one.

File names are bytes; a name that is not UTF-8 text (``b"caf\\xe9.txt"``) or holds a
control character is shown to the model escaped (:func:`show_name`: ``caf\\xe9.txt``,
a backslash as ``\\\\``), and :func:`confine` reads that notation back, so the model
can open the file by the name it was shown.
"""

from __future__ import annotations

import os
import re
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
    "show_name",
    "unescape_name",
]

MAX_PATH_CHARS = 1024
"""Longest relative path accepted from a model."""
MAX_NAME_BYTES = 255
"""Longest single path component (the usual file-system limit)."""
NEW_FILE_MODE = 0o644
"""Permissions of a file created by :func:`atomic_write`."""


_SHOWN_ESCAPED = re.compile("[\\\\\x00-\x1f\x7f\udc80-\udcff]")
_ESCAPE = re.compile(r"\\(\\|x[0-9a-fA-F]{2})")


def _escape_char(match: re.Match[str]) -> str:
    char = match.group()
    if char == "\\":
        return "\\\\"
    code = ord(char)
    return f"\\x{code - 0xDC00 if code >= 0xDC00 else code:02x}"


def show_name(name: str) -> str:
    """A file name (or relative path) as the model sees it: always valid, printable text.

    Bytes that are not UTF-8 (decoded by Python as ``\\udcXX``) and control characters
    become ``\\xHH``; a backslash becomes ``\\\\`` so the notation reads back exactly.
    Any other name is returned unchanged.
    """
    if _SHOWN_ESCAPED.search(name) is None:
        return name
    return _SHOWN_ESCAPED.sub(_escape_char, name)


def _unescape_char(match: re.Match[str]) -> str:
    token = match.group(1)
    if token == "\\":
        return "\\"
    byte = int(token[1:], 16)
    if 0x20 <= byte < 0x7F:  # never escaped by show_name: the text means itself
        return match.group()
    return chr(0xDC00 + byte) if byte >= 0x80 else chr(byte)


def unescape_name(name: str) -> str:
    """The inverse of :func:`show_name` (``\\xHH`` → that byte, ``\\\\`` → ``\\``)."""
    if "\\" not in name:
        return name
    return _ESCAPE.sub(_unescape_char, name)


def confine(root: Path, path: str, *, what: str = "root") -> Path:
    """Resolve ``path`` (relative to ``root``) or raise :class:`ToolError` saying why not.

    ``root`` must already be resolved. The result is the resolved path, inside ``root``
    (or ``root`` itself for ``""`` / ``"."``). ``path`` may use the escapes of
    :func:`show_name`; when the escaped reading names nothing but the literal text
    names an existing file, the literal one is used.
    """
    decoded = unescape_name(path)
    if decoded == path:
        return _confine(root, path, what)
    try:
        target = _confine(root, decoded, what)
    except ToolError:
        return _confine(root, path, what)
    if target.exists():
        return target
    try:
        literal = _confine(root, path, what)
    except ToolError:
        return target
    return literal if literal.exists() else target


def _confine(root: Path, path: str, what: str) -> Path:
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
        try:
            size = len(os.fsencode(part))
        except UnicodeError:
            raise ToolError(f"invalid path {path[:80]!r}: it is not valid text") from None
        if size > MAX_NAME_BYTES:
            raise ToolError(f"invalid path: the name {part[:40]!r}… is too long")
    resolved = (root / pure).resolve()
    if resolved != root and root not in resolved.parents:
        raise ToolError(f"refused path {path!r}: it leads outside the {what} (symlink)")
    return resolved


def relative(root: Path, path: Path) -> str:
    """``path`` as the model should see it: relative to ``root``, POSIX separators,
    escaped by :func:`show_name`."""
    rel = path.relative_to(root).as_posix()
    return show_name(rel) if rel else "."


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
