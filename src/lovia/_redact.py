"""The one redaction function: API keys out of every text lovia raises, logs or records.

:func:`redact` replaces, in any text:

- every API key a provider was configured with in this process (:func:`remember`; the
  HTTP adapters call it), and any run of at least its first 8 characters (a server or a
  cut may echo only a prefix);
- common key shapes even when lovia never saw the key: ``sk-…`` (OpenAI, ``sk-proj-…``,
  Anthropic ``sk-ant-…``), ``Bearer …`` tokens and ``api_key=…`` / ``"x-api-key": "…"``
  pairs;
- secrets in URLs (:func:`redact_url`): the password of ``scheme://user:password@host``
  and the value of a secret-looking query parameter (``?password=``, ``&token=``,
  ``key``, ``secret``, ``sslpassword``, ``access_token``…), and ``password=…`` pairs of
  a keyword connection string.

A key is masked whole: it runs until whitespace, a quote, a bracket or ``,;&|``, so a
key with ``:``, ``!``, ``@`` or ``%`` in it cannot leave its tail behind.

Text is always redacted *before* it is cut (:func:`excerpt`), so a key split by the cut
cannot leave its prefix behind. :func:`redact_error` applies :func:`redact` to an
exception and to every exception in its ``__cause__`` / ``__context__`` chain, in place.
"""

from __future__ import annotations

import re

from .errors import LoviaError

__all__ = ["MASK", "excerpt", "redact", "redact_error", "redact_url", "remember"]

MASK = "***"
_MIN_SECRET = 8
"""Shorter "keys" (``ollama``, ``EMPTY``, ``x`` for local servers) are not secrets; masking
them would mangle ordinary words."""
_KEY_CHARS = r"""[^\s"'`<>()\[\]{},;&|\\]"""
"""What a key may contain: anything up to a space, quote, bracket or separator (keys
with ``:``, ``!``, ``@``, ``%`` in them are masked whole)."""
_SECRET_PARAMS = (
    r"password|passwd|pass|pwd|sslpassword|secret|client[_-]?secret|token|"
    r"access[_-]?token|refresh[_-]?token|id[_-]?token|auth|auth[_-]?token|key|api[_-]?key|"
    r"apikey|sig|signature|x-amz-signature|x-amz-security-token|credential|credentials"
)
_URL_SHAPES = (
    # scheme://user:PASSWORD@host
    r"(?<=://)(?P<user>[^\s/:@?#]*:)[^\s/@?#]+(?=@)",
    # ?password=… &token=… ;key=… (any URL's query, or a form/DSN pair after ? & ;)
    r"(?i:(?P<param>[?&;](?:" + _SECRET_PARAMS + r")=))[^\s&#;\"'<>]+",
    # password=… in a keyword connection string (``host=h password=p``)
    r"(?i:(?P<kw>\b(?:password|passwd|sslpassword)\s*=\s*))[^\s&#;\"'<>]+",
)
_SHAPES = (
    r"(?<![A-Za-z0-9])sk-(?:ant-|proj-)?[A-Za-z0-9_\-]" + _KEY_CHARS + r"{7,}",
    r"(?<=[Bb]earer )" + _KEY_CHARS + r"{8,}",
    r"(?i:(?<=api[_-]key)|(?<=api-key)|(?<=x-api-key)|(?<=authorization))"
    r"""(?P<sep>["']?\s*[:=]\s*["']?)""" + _KEY_CHARS + r"{8,}",
)
_url_pattern = re.compile("|".join(_URL_SHAPES))
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
        # each whole key first (longest first), then any run from a key's first 8
        # characters: a key is masked whole before a shorter key's prefix matches
        whole = sorted((re.escape(s) for s in _known), key=len, reverse=True)
        prefixes = sorted({re.escape(s[:_MIN_SECRET]) for s in _known}, key=len, reverse=True)
        known = [p + _KEY_CHARS + "*" for p in prefixes]
        _pattern = re.compile("|".join([*whole, *known, *_SHAPES]))
    return _pattern


def _mask(match: re.Match[str]) -> str:
    groups = match.groupdict()
    for group in ("sep", "user", "param", "kw"):
        kept = groups.get(group)
        if kept is not None:
            return f"{kept}{MASK}"
    return MASK


def redact(text: str) -> str:
    """``text`` with every configured key, key prefix and key-shaped token masked."""
    if not text:
        return text
    text = _compiled().sub(_mask, text)
    # URL secrets need a "://" or a "=": a second pass only then (most text has neither)
    return _url_pattern.sub(_mask, text) if "=" in text or "://" in text else text


def redact_url(url: str) -> str:
    """``url`` with its secrets masked: the userinfo password and every secret-looking
    query parameter (``postgresql://u:***@h/db?sslmode=require&password=***``).

    (:func:`redact` does this too, with every other key shape; this one only touches
    URL parts, so a URL's other characters stay as they are.)
    """
    return _url_pattern.sub(_mask, url) if url else url


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
