"""Numbers and times for people: the CLI's tables and the web UI show them alike."""

from __future__ import annotations

import time

__all__ = ["fmt_cost", "fmt_duration", "fmt_time", "fmt_tokens"]


def fmt_tokens(n: int) -> str:
    if n >= 1_000_000:
        return f"{n / 1_000_000:.1f}M"
    if n >= 10_000:
        return f"{n / 1000:.0f}k"
    return str(n)


def fmt_cost(usd: float) -> str:
    if not usd:
        return "-"
    return f"${usd:.4f}" if usd < 1 else f"${usd:.2f}"


def fmt_duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 60:
        return f"{seconds:.2f}s"
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs:02d}s"


def fmt_time(ts: float | None) -> str:
    if not ts:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))
