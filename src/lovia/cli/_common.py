"""Helpers shared by the commands: the store URL, loading a run, JSON forms."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from ..errors import UserError
from ..stores.base import RunInfo

__all__ = ["info_dict", "store_url"]

DEFAULT_URL = "sqlite:///.lovia/lovia.db"


def store_url(args: argparse.Namespace) -> str:
    """``--store``, else ``$LOVIA_STORE``, else the default; a missing SQLite file fails.

    (Opening a SQLite store creates the file: reading commands must not do that.)
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
        "parent_run_id": info.parent_run_id,
        "parent_call_id": info.parent_call_id,
    }
