"""Store files are private: what lovia creates is readable by its owner only.

A store holds every prompt, answer and tool result of every run. Under the usual umask
022, SQLite would create the database, its ``-wal`` and ``-shm`` files (which hold the
same rows) and the span store world-readable, in a ``.lovia/`` folder anyone can list.
:func:`private_file` runs before SQLite opens a file for writing:

- every folder it has to create is made ``0700``; a folder that already exists is left
  as it is (it may be shared on purpose);
- a new file is created ``0600`` before SQLite opens it, so SQLite gives its ``-wal``
  and ``-shm`` files the same mode;
- an existing file (and its ``-wal``/``-shm``) readable or writable by *others* loses
  those bits (``o-rwx``; owner and group bits are kept, so a group that shares the store
  keeps its access); a file lovia may not change is left, with a warning in the log.

A folder that cannot be created (a read-only parent, a file in the way) is a
:class:`~lovia.errors.StoreError` naming the folder, with a hint, never a bare
``PermissionError``.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

from .errors import StoreError

__all__ = ["FILE_MODE", "FOLDER_MODE", "make_folders", "private_file"]

FILE_MODE = 0o600
FOLDER_MODE = 0o700
_OTHERS = stat.S_IRWXO
_SIDECARS = ("-wal", "-shm", "-journal")

logger = logging.getLogger("lovia.stores")


def make_folders(folder: Path, *, what: str) -> None:
    """Create ``folder`` and its missing parents ``0700``; a clear error when it cannot."""
    missing: list[Path] = []
    current = folder
    while not current.exists():
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    for path in reversed(missing):
        try:
            path.mkdir(mode=FOLDER_MODE)
        except FileExistsError:
            pass  # made meanwhile (another process): checked below
        except OSError as exc:
            raise _folder_error(path, what, exc.strerror or type(exc).__name__) from exc
    if not folder.is_dir():
        raise _folder_error(folder, what, "a file with that name is in the way")


def _folder_error(path: Path, what: str, why: str) -> StoreError:
    return StoreError(
        f"cannot create the folder {path} for {what}: {why}",
        hint="Create the folder yourself (mkdir -p, owned by the user lovia runs as), or "
        "point the store at a writable place (--store / $LOVIA_STORE, e.g. "
        "sqlite:///path/lovia.db).",
    )


def private_file(path: Path, *, what: str = "the lovia store") -> None:
    """Make ``path`` ready for SQLite: folders ``0700``, a new file ``0600``, an existing
    one (and its ``-wal``/``-shm``) without permissions for others."""
    make_folders(path.parent, what=what)
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, FILE_MODE)
    except FileExistsError:
        for existing in (path, *(path.with_name(path.name + s) for s in _SIDECARS)):
            _tighten(existing)
    except OSError:
        return  # SQLite reports why it cannot open the file, with the store's own hint
    else:
        os.close(fd)


def _tighten(path: Path) -> None:
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except OSError:
        return  # absent (a sidecar) or unreadable: nothing to tighten
    if not mode & _OTHERS:
        return
    try:
        path.chmod(mode & ~_OTHERS)
    except OSError as exc:
        logger.warning(
            "%s is accessible to other users (mode %o) and lovia cannot change it (%s); "
            "run: chmod o-rwx %s",
            path,
            mode,
            exc.strerror,
            path,
        )
        return
    logger.info("%s was accessible to other users (mode %o): removed their access", path, mode)
