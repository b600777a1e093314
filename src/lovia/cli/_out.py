"""Output for the CLI: pretty on a terminal, plain when piped, JSON with ``--json``.

Every line goes through :func:`lovia._display.safe_text` on its way out, so stored text
(answers, tool output, names, span errors) can never send a terminal control sequence;
the only escape sequences that reach the terminal are :meth:`Out.style`'s own colours.
JSON keeps every value exactly (control characters stay JSON escapes).
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from .._display import (
    fmt_cost,
    fmt_duration,
    fmt_run_cost,
    fmt_time,
    fmt_tokens,
    fmt_usage,
    safe_json,
    safe_name,
    safe_text,
)
from ..stores.base import UNPRICED_KEY, USAGE_MISSING_KEY, RunInfo

__all__ = [
    "Out",
    "fmt_cost",
    "fmt_duration",
    "fmt_time",
    "fmt_tokens",
    "info_cost",
    "info_tokens",
    "one_line",
    "safe_name",
]


def info_cost(info: RunInfo) -> str:
    """A run's cost: ``?`` or ``$0.0123+?`` when some of its calls have no known price."""
    return fmt_run_cost(info.cost_usd, int(info.extra.get(UNPRICED_KEY, 0)))


def info_tokens(info: RunInfo) -> str:
    """A run's ``input+output`` tokens, ``?`` when a provider reported none."""
    missing = bool(info.extra.get(USAGE_MISSING_KEY, False))
    return fmt_usage(info.input_tokens, info.output_tokens, missing)


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_OWN_STYLE = re.compile(r"(\x1b\[(?:0|(?:[12]|3[1-6])(?:;(?:[12]|3[1-6]))*)m)")
"""Exactly the sequences :meth:`Out.style` writes (bold, dim, six colours, reset)."""
_STYLES = {
    "bold": "1",
    "dim": "2",
    "red": "31",
    "green": "32",
    "yellow": "33",
    "blue": "34",
    "magenta": "35",
    "cyan": "36",
}


class Out:
    """Writes the command's output; styles only when ``pretty``."""

    def __init__(
        self, stream: TextIO | None = None, *, json_mode: bool = False, pretty: bool | None = None
    ) -> None:
        self.stream = stream or sys.stdout
        self.json_mode = json_mode
        if pretty is None:
            pretty = _isatty(self.stream) and not os.environ.get("NO_COLOR")
        self.pretty = pretty and not json_mode

    def style(self, text: str, *names: str) -> str:
        names = tuple(n for n in names if n)
        if not self.pretty or not names:
            return text
        codes = ";".join(_STYLES[n] for n in names)
        return f"\x1b[{codes}m{text}\x1b[0m"

    def line(self, text: str = "") -> None:
        """Write ``text``; any control character in it is shown escaped (``\\x1b``),
        except this object's own styles when ``pretty``."""
        self.stream.write(self.safe(text) + "\n")

    def safe(self, text: str) -> str:
        if not self.pretty:
            return safe_text(text)
        parts = _OWN_STYLE.split(text)  # odd items: our styles
        return "".join(p if i % 2 else safe_text(p) for i, p in enumerate(parts))

    def json(self, value: Any) -> None:
        text = json.dumps(value, indent=2, ensure_ascii=False, default=str)
        self.stream.write(safe_json(text) + "\n")

    def table(
        self, headers: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[int] = ()
    ) -> None:
        """Columns padded to their widest cell; ``right`` aligns those columns right."""
        rows = [[self.safe(cell) for cell in row] for row in rows]  # widths as shown
        widths = [max([len(h), *(visible_len(r[i]) for r in rows)]) for i, h in enumerate(headers)]

        def cells(row: Sequence[str]) -> str:
            parts: list[str] = []
            for i, (cell, width) in enumerate(zip(row, widths, strict=True)):
                pad = " " * (width - visible_len(cell))
                parts.append(pad + cell if i in right else cell + pad)
            return "  ".join(parts).rstrip()

        self.line(self.style(cells(headers), "bold"))
        for row in rows:
            self.line(cells(row))


def visible_len(text: str) -> int:
    """Length without ANSI styles."""
    return len(_ANSI.sub("", text))


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def one_line(text: str, width: int = 100) -> str:
    """Whitespace collapsed, cut to ``width`` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"
