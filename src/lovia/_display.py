r"""Numbers, times and stored text for people: the CLI's tables and the web UI show them
alike, and stored text reaches a terminal only through :func:`safe_text` / :func:`safe_name`.

Stored content (a model's answer, a tool's output, an agent's or a tool's name, a span's
error) is attacker-controlled: written to a terminal as it is, ``ESC``/``BEL`` sequences
clear the screen, set the clipboard (OSC 52), hide hyperlinks (OSC 8) or retitle the
window, a lone ``CR`` overwrites what was printed, and bidi overrides reorder a name
(``echo\u202egnp.exe`` reads "echoexe.png"). Both functions replace each such character
with a visible escape (``\x1b``, ``\u202e``) and leave everything else as it is.

Unknown is never shown as zero: a cost with unpriced calls in it reads ``?`` (nothing
priced) or ``$0.0123+?`` (a lower bound), tokens a provider did not report read ``?`` or
``1200+80+?``, and a running run is "in turn N", never "0 turns".
"""

from __future__ import annotations

import re
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
    "safe_json",
    "safe_name",
    "safe_text",
]

_ALWAYS = (
    "\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f"  # C0 but TAB, LF, CR (ESC, BEL, BS...), DEL, C1
    "\u00ad\u061c\u180e"  # soft hyphen, Arabic letter mark, Mongolian vowel separator
    "\u200b\u200e\u200f"  # zero width space, LRM, RLM
    "\u2028-\u202e"  # line/paragraph separators, bidi embeddings and overrides
    "\u2060-\u2064\u2066-\u206f"  # word joiner, invisible operators, bidi isolates
    "\ufeff\ufff9-\ufffb"  # BOM / zero width no-break space, interlinear annotations
    "\ud800-\udfff"  # lone surrogates (not encodable: a crash, not a character)
)
_TEXT = re.compile(f"\r(?!\n)|[{_ALWAYS}]")
"""Text keeps line breaks, tabs, ``CR LF`` and the joiners that emoji and scripts need."""
_JSON = re.compile(f"[{_ALWAYS}]")
"""Inside JSON every one of these is in a string (``json.dumps`` escapes C0 itself)."""
_NAME = re.compile(
    f"[{_ALWAYS}\t\n\r\u0600-\u0605\u06dd\u070f\u0890\u0891\u08e2\u200c\u200d"
    "\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0000-\U000e007f]"
)
"""A name (run id, agent, tool, session, span) is one line with no invisible character
at all: every Unicode format character (category Cf) is shown, joiners included."""


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def safe_text(text: str) -> str:
    r"""``text`` for a terminal: control, bidi and invisible characters escaped visibly
    (``\x1b``, ``\x07``, ``\u202e``); line breaks, tabs and ``CR LF`` kept."""
    return _TEXT.sub(_escape, text)


def safe_json(text: str) -> str:
    r"""JSON text (``json.dumps(..., ensure_ascii=False)``) for a terminal: the characters
    :func:`safe_text` escapes that JSON leaves raw (C1 controls, bidi, invisible ones,
    lone surrogates) become ``\uXXXX`` escapes, so the JSON still parses to the same
    value."""
    return _JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def safe_name(text: str) -> str:
    """A name for a terminal or a page: like :func:`safe_text`, and line breaks, tabs and
    every zero-width or format character (joiners included) are escaped too."""
    return _NAME.sub(_escape, text)


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
