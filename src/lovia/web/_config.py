"""``WebConfig``: what ``lovia web`` serves and how it is protected.

Its own module, below the app and the pages: ``_app`` builds the app from it and every
page reads it from the request, so neither has to import the other.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._redact import redact_url

if TYPE_CHECKING:
    from ..replay import WhatIfPolicy
    from ..stores.base import ReadOnlyStore

__all__ = ["LOOPBACK", "WebConfig"]

LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")
"""Host names accepted by default (the server binds to 127.0.0.1)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WebConfig:
    """What ``lovia web`` serves and how it is protected."""

    store: ReadOnlyStore | str
    agent: Any = None
    """An ``Agent``, or a zero-argument callable returning one per run (chat, approvals)."""
    token: str | None = None
    """Required on every request when set (``Authorization: Bearer``, cookie, ``?token=``)."""
    trace_url: str | None = None
    """A Jaeger/Tempo URL template with ``{trace_id}`` (default ``$LOVIA_TRACE_URL``)."""
    allowed_hosts: tuple[str, ...] = LOOPBACK
    """``Host`` header names accepted (DNS-rebinding guard); ``("*",)`` accepts any."""
    whatif: WhatIfPolicy | None = None
    """What-if (re-send a view to a model: it spends money, opens connections): off
    when None; else the hosts it may reach. Needs ``token`` (loopback included)."""
    runs_per_page: int = 50
    turns_per_page: int = 40
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(24))

    @property
    def store_label(self) -> str:
        url = self.store if isinstance(self.store, str) else str(getattr(self.store, "url", ""))
        return redact_url(url)
