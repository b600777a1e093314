"""Helpers shared by the commands: the store URL, loading a run, JSON forms."""

from __future__ import annotations

import argparse
import os
from typing import Any

from ..stores.base import RunInfo

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
    return str(args.store or os.environ.get("LOVIA_STORE") or DEFAULT_URL)


def info_dict(info: RunInfo) -> dict[str, Any]:
    """A run's info as JSON."""
    duration = None if info.ended_at is None else max(0.0, info.ended_at - info.started_at)
    return {
        "run_id": info.run_id,
        "agent": info.agent,
        "session_id": info.session_id,
        "status": info.status,
        "finish_reason": info.finish_reason,
        "error_type": info.error_type,
        "turns": info.turns,
        "input_tokens": info.input_tokens,
        "output_tokens": info.output_tokens,
        "cost_usd": info.cost_usd,
        "started_at": info.started_at,
        "ended_at": info.ended_at,
        "duration_s": duration,
        "trace_id": info.trace_id,
    }
