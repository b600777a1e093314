"""The HTTP client module the adapters build clients and parse URLs with: ``httpx2`` when
the ``fast`` extra is installed, else ``httpx``; imported when a provider is built, never
by importing an adapter.

A process on httpx2 never imports httpx for lovia: with click, rich and pygments installed,
``import httpx`` also loads its command line and them (tens of milliseconds, and thousands
of objects that make the cyclic collector's passes dearer).
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["client_module", "url_host"]


def client_module() -> Any:
    """``httpx2`` if installed, else ``httpx`` (the same API). Looked up on each call (a
    dictionary read once imported; only providers being built call it)."""
    try:
        return importlib.import_module("httpx2")
    except ImportError:
        return importlib.import_module("httpx")


def url_host(url: str) -> str | None:
    """The host of ``url`` as the client parses it (None: not a URL it accepts)."""
    module = client_module()
    try:
        host: str = module.URL(url).host
    except (module.InvalidURL, TypeError):
        return None
    return host
