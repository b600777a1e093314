"""The PostgreSQL store URL's query options: lovia's own, asyncpg's, the connection's.

``postgresql://user@host/db?schema=app&pool_max=4&statement_cache_size=0`` — lovia reads
and removes its options; the connection options asyncpg knows (``sslmode``,
``sslrootcert``, ``target_session_attrs``, …) stay in the DSN; anything else is a
:class:`~lovia.errors.UserError` naming the options there are (asyncpg would send an
unknown one to the server as a setting, and the server would refuse the connection
with a less helpful message, or PgBouncer with none).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ..errors import UserError

__all__ = ["DEFAULTS", "PgOptions", "parse_url"]

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")

_PASS_THROUGH = frozenset(
    {
        "host", "port", "user", "password", "passfile", "dbname", "database", "service",
        "sslmode", "sslcert", "sslkey", "sslrootcert", "sslcrl", "sslpassword",
        "sslnegotiation", "ssl_min_protocol_version", "ssl_max_protocol_version",
        "target_session_attrs", "krbsrvname", "gsslib",
    }
)  # fmt: skip
"""Connection options asyncpg reads from the DSN itself."""


@dataclass(frozen=True)
class PgOptions:
    """What the store URL asked for (see :data:`DEFAULTS` for each default)."""

    dsn: str
    schema: str = "public"
    pool_min: int = 1
    pool_max: int = 4
    statement_cache_size: int = 100
    command_timeout: float | None = None
    max_inactive_connection_lifetime: float = 60.0
    connect_timeout: float = 10.0
    application_name: str = "lovia"
    listen: bool = True

    def pool_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``asyncpg.create_pool`` (server settings apart)."""
        return {
            "min_size": self.pool_min,
            "max_size": self.pool_max,
            "statement_cache_size": self.statement_cache_size,
            "command_timeout": self.command_timeout,
            "max_inactive_connection_lifetime": self.max_inactive_connection_lifetime,
            "timeout": self.connect_timeout,
        }


DEFAULTS = PgOptions(dsn="")


def _int(low: int) -> Callable[[str, str], int]:
    def parse(key: str, value: str) -> int:
        try:
            number = int(value)
        except ValueError:
            number = low - 1
        if number < low:
            raise _bad(key, value, f"a whole number ≥ {low}")
        return number

    return parse


def _seconds(allow_zero: bool) -> Callable[[str, str], float]:
    def parse(key: str, value: str) -> float:
        try:
            number = float(value)
        except ValueError:
            number = -1.0
        if not (number > 0 or (allow_zero and number == 0)) or number == float("inf"):
            never = " (0: never)" if allow_zero else ""
            raise _bad(key, value, f"seconds, e.g. 30 or 2.5{never}")
        return number

    return parse


def _switch(key: str, value: str) -> bool:
    lowered = value.lower()
    if lowered in ("on", "true", "1", "yes"):
        return True
    if lowered in ("off", "false", "0", "no"):
        return False
    raise _bad(key, value, "on or off")


def _text(key: str, value: str) -> str:
    if not value or len(value) > 63 or not value.isprintable() or not value.isascii():
        raise _bad(key, value, "1 to 63 printable ASCII characters")
    return value


def _schema(key: str, value: str) -> str:
    if not _NAME.match(value):
        raise UserError(
            f"invalid schema name {value!r} in the store URL",
            hint="Use letters, digits and underscores (e.g. ?schema=lovia_test).",
        )
    return value


_OPTIONS: dict[str, Callable[[str, str], Any]] = {
    "schema": _schema,
    "pool_min": _int(0),
    "pool_max": _int(1),
    "statement_cache_size": _int(0),
    "command_timeout": _seconds(allow_zero=False),
    "max_inactive_connection_lifetime": _seconds(allow_zero=True),
    "connect_timeout": _seconds(allow_zero=False),
    "application_name": _text,
    "listen": _switch,
}


def _bad(key: str, value: str, wanted: str) -> UserError:
    return UserError(
        f"invalid store URL option {key}={value!r}",
        hint=f"{key} takes {wanted}; the PostgreSQL store's options are listed in "
        "the 'Running a fleet' docs.",
    )


def parse_url(url: str) -> PgOptions:
    """Split lovia's options off a postgres URL; reject options nobody reads."""
    parts = urlsplit(url)
    query: list[tuple[str, str]] = []
    chosen: dict[str, Any] = {}
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key in _OPTIONS:
            chosen[key] = _OPTIONS[key](key, value)
        elif key in _PASS_THROUGH:
            query.append((key, value))
        else:
            known = ", ".join(sorted(_OPTIONS))
            raise UserError(
                f"unknown option {key!r} in the PostgreSQL store URL",
                hint=f"lovia's options: {known}; connection options: sslmode, sslrootcert, "
                "target_session_attrs and the other libpq names asyncpg reads.",
            )
    minimum = chosen.get("pool_min", DEFAULTS.pool_min)
    maximum = chosen.get("pool_max", max(DEFAULTS.pool_max, minimum))
    if minimum > maximum:
        raise UserError(
            f"pool_min={minimum} is larger than pool_max={maximum} in the store URL",
            hint="pool_min is how many connections stay open, pool_max the most there are.",
        )
    chosen["pool_max"] = maximum
    dsn = urlunsplit(parts._replace(query=urlencode(query)))
    return PgOptions(dsn=dsn, **chosen)
