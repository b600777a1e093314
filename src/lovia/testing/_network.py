"""A guard that makes real network calls fail inside tests (loopback stays allowed)."""

from __future__ import annotations

import ipaddress
from collections.abc import Generator
from contextlib import contextmanager
from typing import Any
from unittest.mock import patch

import httpx

from ..errors import UserError

__all__ = ["NetworkBlocked", "block_network"]


class NetworkBlocked(UserError):
    """A test tried to reach a non-loopback host."""


def _is_loopback(host: str) -> bool:
    if host in ("localhost", "testserver"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _refuse(request: httpx.Request) -> None:
    if not _is_loopback(request.url.host):
        raise NetworkBlocked(
            f"real network call to {request.url.host} blocked in tests",
            hint="Use lovia.testing.ScriptedModel / FunctionModel, or an "
            "httpx.MockTransport; only 127.0.0.1 servers are allowed.",
        )


@contextmanager
def block_network() -> Generator[None]:
    """Within this block, httpx requests to non-loopback hosts raise NetworkBlocked."""
    orig_async = httpx.AsyncHTTPTransport.handle_async_request
    orig_sync = httpx.HTTPTransport.handle_request

    async def guarded_async(self: Any, request: httpx.Request) -> httpx.Response:
        _refuse(request)
        return await orig_async(self, request)

    def guarded_sync(self: Any, request: httpx.Request) -> httpx.Response:
        _refuse(request)
        return orig_sync(self, request)

    with (
        patch.object(httpx.AsyncHTTPTransport, "handle_async_request", guarded_async),
        patch.object(httpx.HTTPTransport, "handle_request", guarded_sync),
    ):
        yield
