"""The one redaction function: API keys out of every text lovia raises, logs or records.

:func:`redact` replaces, in any text:

- every API key a provider was configured with in this process (:func:`remember`; the
  HTTP adapters call it), and any run of at least its first 8 characters (a server or a
  cut may echo only a prefix);
- common key shapes even when lovia never saw the key: ``sk-…`` (OpenAI, ``sk-proj-…``,
  Anthropic ``sk-ant-…``), ``Bearer …`` tokens and ``api_key=…`` / ``"x-api-key": "…"``
  pairs.

Text is always redacted *before* it is cut (:func:`excerpt`), so a key split by the cut
cannot leave its prefix behind. :func:`redact_error` applies :func:`redact` to an
exception and to every exception in its ``__cause__`` / ``__context__`` chain, in place.
"""

from __future__ import annotations

import re

from .errors import LoviaError

__all__ = ["MASK", "excerpt", "redact", "redact_error", "remember"]

MASK = "***"
_MIN_SECRET = 8
"""Shorter "keys" (``ollama``, ``EMPTY``, ``x`` for local servers) are not secrets; masking
them would mangle ordinary words."""
_KEY_CHARS = r"[A-Za-z0-9_\-.~+/=]"
_SHAPES = (
    r"sk-(?:ant-|proj-)?[A-Za-z0-9_\-]{8,}",
    r"(?<=[Bb]earer )" + _KEY_CHARS + r"{8,}",
    r"(?i:(?<=api[_-]key)|(?<=api-key)|(?<=x-api-key)|(?<=authorization))"
    r"""(?P<sep>["']?\s*[:=]\s*["']?)""" + _KEY_CHARS + r"{8,}",
)
_known: dict[str, None] = {}  # insertion-ordered set of configured keys
_pattern: re.Pattern[str] | None = None


def remember(secret: str | None) -> None:
    """Scrub ``secret`` (a configured API key) from all text from now on."""
    global _pattern
    if secret and len(secret) >= _MIN_SECRET and secret not in _known:
        _known[secret] = None
        _pattern = None


def _compiled() -> re.Pattern[str]:
    global _pattern
    if _pattern is None:
        # longest first, so a key is masked whole before a shorter key's prefix matches
        prefixes = sorted({re.escape(s[:_MIN_SECRET]) for s in _known}, key=len, reverse=True)
        known = [p + _KEY_CHARS + "*" for p in prefixes]
        _pattern = re.compile("|".join([*known, *_SHAPES]))
    return _pattern


def _mask(match: re.Match[str]) -> str:
    sep = match.group("sep")
    return f"{sep}{MASK}" if sep is not None else MASK


def redact(text: str) -> str:
    """``text`` with every configured key, key prefix and key-shaped token masked."""
    if not text:
        return text
    return _compiled().sub(_mask, text)


def excerpt(text: str, limit: int) -> str:
    """Redact, then cut to ``limit`` characters (``…`` marks a cut)."""
    text = redact(text)
    return text if len(text) <= limit else text[:limit] + "…"


def redact_error(error: BaseException) -> BaseException:
    """Redact ``error`` and its whole cause/context chain in place; return ``error``."""
    seen: set[int] = set()
    pending: list[BaseException] = [error]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        _redact_one(current)
        pending.extend(e for e in (current.__cause__, current.__context__) if e is not None)
    return error


def _redact_one(error: BaseException) -> None:
    if isinstance(error, LoviaError):
        error.message = redact(error.message)
        error.hint = redact(error.hint) if error.hint else error.hint
    error.args = tuple(redact(a) if isinstance(a, str) else a for a in error.args)
    notes = getattr(error, "__notes__", None)
    if isinstance(notes, list):
        error.__notes__ = [redact(n) if isinstance(n, str) else n for n in notes]  # pyright: ignore[reportUnknownVariableType] -- notes are whatever was added
