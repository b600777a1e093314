"""Numbers and times for people: the CLI's tables and the web UI show them alike.

Unknown is never shown as zero: a cost with unpriced calls in it reads ``?`` (nothing
priced) or ``$0.0123+?`` (a lower bound), tokens a provider did not report read ``?`` or
``1200+80+?``, and a running run is "in turn N", never "0 turns"."""

from __future__ import annotations

import time

__all__ = [
    "fmt_cost",
    "fmt_duration",
    "fmt_run_cost",
    "fmt_time",
    "fmt_token_total",
    "fmt_tokens",
    "fmt_turns",
    "fmt_usage",
]


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


def fmt_run_cost(usd: float, unpriced: int = 0) -> str:
    """A cost that may be partly unknown (``unpriced``: calls with no known cost)."""
    if unpriced:
        return f"{fmt_cost(usd)}+?" if usd else "?"
    return fmt_cost(usd)


def fmt_usage(input_tokens: int, output_tokens: int, missing: bool = False) -> str:
    """``input+output`` tokens; ``?`` when a provider reported none of them."""
    pair = f"{input_tokens}+{output_tokens}"
    if missing:
        return f"{pair}+?" if input_tokens or output_tokens else "?"
    return pair


def fmt_token_total(total: int, missing: bool = False) -> str:
    """A token count for a table column (``fmt_tokens``), unknown when not reported."""
    if missing:
        return f"{fmt_tokens(total)}+?" if total else "?"
    return fmt_tokens(total)


def fmt_turns(turns: int, running: bool = False) -> str:
    """``3 turns``; a running run is in a turn (its first counts before it is saved)."""
    if running:
        return f"in turn {max(turns, 1)}"
    return f"{turns} turn{'' if turns == 1 else 's'}"


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
