"""Helpers shared by the commands: the store URL; a run's JSON form (from the data layer)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from ..errors import UserError
from ..replay import info_dict

__all__ = ["EXIT_ERROR", "EXIT_INTERRUPTED", "EXIT_MISMATCH", "EXIT_OK", "info_dict", "store_url"]

DEFAULT_URL = "sqlite:///.lovia/lovia.db"

# The exit codes (docs/replay.md lists them; every command returns one of these).
EXIT_OK = 0
EXIT_MISMATCH = 1
"""A rebuilt view does not match its recorded hash (and only that)."""
EXIT_ERROR = 2
"""Anything else that went wrong: ``error: …`` and ``hint: …`` on stderr."""
EXIT_INTERRUPTED = 130


def store_url(args: argparse.Namespace) -> str:
    """``--store``, else ``$LOVIA_STORE``, else the default.

    (Commands open it read-only: a missing file is an error, never a new store.)
    """
    url: str = args.store or os.environ.get("LOVIA_STORE") or DEFAULT_URL
    if url.lower().startswith("sqlite:"):
        from ..stores.sqlite import sqlite_path

        path = sqlite_path(url)
        if path != ":memory:" and not Path(path).exists():
            raise UserError(
                f"no lovia store at {path}",
                hint="Pass --store URL or set $LOVIA_STORE (e.g. sqlite:///path/lovia.db, "
                "postgresql://user@host/db); runs are stored there when an agent runs "
                "with checkpointer=... .",
            )
    return url
