"""``lovia web``: serve the postmortem pages (extra ``web``)."""

from __future__ import annotations

import argparse
import os
import secrets
import socket
import sys
from typing import Any

from .._imports import import_object
from ..errors import UserError
from ._common import store_url
from ._out import Out

__all__ = ["is_loopback", "load_agent", "web"]


def is_loopback(host: str) -> bool:
    return host.strip("[]").lower() in ("127.0.0.1", "localhost", "::1")


def load_agent(spec: str) -> Any:
    """``pkg.module:attr`` → the object (an Agent, or a factory returning one); the
    current directory is importable, as with ``python -m``."""
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    return import_object(
        spec, hint="Run lovia web from your project's directory or set PYTHONPATH."
    )


def _socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        raise UserError(
            f"cannot listen on {host}:{port}: {exc.strerror}", hint="Pick another --port."
        ) from exc
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


async def web(args: argparse.Namespace, out: Out) -> int:
    from ..web import require_web

    require_web()
    import uvicorn

    from ..replay import WhatIfPolicy
    from ..web import LOOPBACK, create_app, redact_url

    url = store_url(args)
    agent = load_agent(str(args.agent)) if args.agent else None
    if agent is not None:  # it resumes runs (approvals): traced when telemetry is set up
        from ._telemetry import setup_telemetry

        setup_telemetry(getattr(args, "telemetry", None), url)
    host = str(args.host)
    local = is_loopback(host)
    whatif = WhatIfPolicy.from_env(args.whatif_allow_host) if args.whatif else None
    # what-if spends money: then every request needs the token, on loopback too
    private = local and whatif is None
    token = os.environ.get("LOVIA_WEB_TOKEN") or (None if private else secrets.token_urlsafe(24))
    app = create_app(
        url,
        agent=agent,
        token=token,
        allowed_hosts=LOOPBACK if local else ("*",),
        whatif=whatif,
    )
    sock = _socket(host, int(args.port))
    port = sock.getsockname()[1]
    shown = f"[{host.strip('[]')}]" if ":" in host.strip("[]") else host
    address = f"http://{shown}:{port}/"
    out.line(f"lovia web on {address}  (store {redact_url(url)})")
    if token is not None:
        out.line(f"open {address}?token={token}")
        if not private:
            out.line(f"bound to {host}: every request needs this access token ($LOVIA_WEB_TOKEN)")
    if whatif is not None:
        allowed = ", ".join(whatif.allow_hosts) or "none besides the configured providers"
        out.line(f"what-if on: extra hosts it may reach: {allowed}")
    out.stream.flush()
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
    await uvicorn.Server(config).serve(sockets=[sock])
    return 0
