"""A guard that makes real network calls fail inside tests (loopback stays allowed)."""

from __future__ import annotations

import functools
import importlib
import importlib.util
import ipaddress
from collections.abc import Callable, Generator
from contextlib import contextmanager
from typing import Any

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


def _refuse(request: Any) -> None:
    if not _is_loopback(request.url.host):
        raise NetworkBlocked(
            f"real network call to {request.url.host} blocked in tests",
            hint="Use lovia.testing.ScriptedModel / FunctionModel, or an "
            "httpx.MockTransport; only 127.0.0.1 servers are allowed.",
        )


@functools.cache
def _clients() -> tuple[Any, ...]:
    """The HTTP client modules providers may use: httpx, and httpx2 when installed
    (looked up once: ``block_network`` wraps every test of a suite)."""
    if importlib.util.find_spec("httpx2") is None:
        return (httpx,)
    return (httpx, importlib.import_module("httpx2"))


def _guard(transport: Any, name: str, is_async: bool) -> Callable[[], None]:
    """Patch ``transport.name`` to refuse non-loopback requests; return the undo."""
    original = getattr(transport, name)

    async def guarded_async(self: Any, request: Any) -> Any:
        _refuse(request)
        return await original(self, request)

    def guarded_sync(self: Any, request: Any) -> Any:
        _refuse(request)
        return original(self, request)

    setattr(transport, name, guarded_async if is_async else guarded_sync)
    return lambda: setattr(transport, name, original)


@contextmanager
def block_network() -> Generator[None]:
    """Within this block, requests to non-loopback hosts raise NetworkBlocked — on httpx
    and, when it is installed (lovia's ``fast`` extra), on httpx2 (same transport API)."""
    undo: list[Callable[[], None]] = []
    for module in _clients():
        undo.append(_guard(module.AsyncHTTPTransport, "handle_async_request", True))
        undo.append(_guard(module.HTTPTransport, "handle_request", False))
    try:
        yield
    finally:
        for restore in reversed(undo):
            restore()
