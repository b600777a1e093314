"""The ASGI app: configuration, security (token, CSRF, host check, headers), routes."""

from __future__ import annotations

import hmac
import os
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from ..errors import LoviaError, UserError
from ..replay import WhatIfPolicy
from ..stores.base import ReadOnlyStore, Store
from ._config import LOOPBACK, WebConfig

__all__ = ["CSRF_HEADER", "WebConfig", "create_app"]

CSRF_HEADER = "x-lovia-csrf"
TOKEN_COOKIE = "lovia_token"
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)


class Guard:
    """Token, Host and CSRF checks, and the security headers, on every request."""

    def __init__(self, app: ASGIApp, config: WebConfig) -> None:
        self.app = app
        self.config = config

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        refusal = self._refuse(request)
        if refusal is not None:
            await refusal(scope, receive, send)
            return

        async def send_with_headers(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = message.setdefault("headers", [])
                headers.extend(
                    [
                        (b"content-security-policy", CSP.encode()),
                        (b"x-content-type-options", b"nosniff"),
                        (b"referrer-policy", b"no-referrer"),
                        (b"x-frame-options", b"DENY"),
                    ]
                )
            await send(message)

        await self.app(scope, receive, send_with_headers)

    def _refuse(self, request: Request) -> Response | None:
        host = host_name(request.headers.get("host") or "")
        allowed = self.config.allowed_hosts
        if "*" not in allowed and host not in allowed:
            return PlainTextResponse("unknown Host header", status_code=421)
        token = self.config.token
        if token is not None:
            given = request.query_params.get("token")
            if given is not None and same_secret(given, token):
                # trade the token in the URL for a cookie, and drop it from the address bar
                response = RedirectResponse(str(request.url.remove_query_params("token")), 303)
                response.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="strict")
                return response
            auth = request.headers.get("authorization", "")
            presented = auth[7:] if auth.lower().startswith("bearer ") else None
            presented = presented or request.cookies.get(TOKEN_COOKIE) or ""
            if not same_secret(presented, token):
                return PlainTextResponse(
                    "this lovia web needs its access token: open the URL it printed "
                    "(…?token=…) or send Authorization: Bearer TOKEN",
                    status_code=401,
                )
        if request.method not in ("GET", "HEAD", "OPTIONS"):
            return _csrf_refusal(request, self.config.csrf)
        return None


def same_secret(given: str, expected: str) -> bool:
    """Constant-time comparison of a presented token with ours, for any text: a
    non-ASCII value (which ``hmac.compare_digest`` refuses on ``str``) is just wrong."""
    return hmac.compare_digest(
        given.encode("utf-8", "surrogatepass"), expected.encode("utf-8", "surrogatepass")
    )


def host_name(header: str) -> str:
    """The name in a ``Host`` header: ``[::1]:8765`` → ``::1``, ``localhost:80`` → ``localhost``."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:].split("]", 1)[0]
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def _csrf_refusal(request: Request, csrf: str) -> Response | None:
    origin = request.headers.get("origin")
    if origin is not None and urlsplit(origin).netloc != request.headers.get("host"):
        return JSONResponse({"error": "cross-origin request refused"}, status_code=403)
    if not same_secret(request.headers.get(CSRF_HEADER, ""), csrf):
        return JSONResponse(
            {"error": "missing or wrong CSRF token", "hint": f"send the {CSRF_HEADER} header"},
            status_code=403,
        )
    return None


def templates() -> Environment:
    """Jinja2 with autoescaping on every template (stored strings are hostile)."""
    env = Environment(
        loader=PackageLoader("lovia.web", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    from ._format import FILTERS

    env.filters.update(FILTERS)  # pyright: ignore[reportUnknownMemberType] -- jinja2 leaves filters untyped
    return env


def create_app(
    store: ReadOnlyStore | str,
    *,
    agent: Any = None,
    token: str | None = None,
    trace_url: str | None = None,
    allowed_hosts: tuple[str, ...] = LOOPBACK,
    whatif: WhatIfPolicy | None = None,
    config: WebConfig | None = None,
) -> Starlette:
    """The ``lovia web`` ASGI app over ``store`` (a store or its URL).

    Without ``agent`` the app only reads: a :class:`~lovia.stores.base.ReadOnlyStore`
    will do. Chat and approvals run the agent, which records to the store: they need a
    full :class:`~lovia.stores.base.Store`."""
    if config is None:
        config = WebConfig(
            store=store,
            agent=agent,
            token=token,
            trace_url=trace_url or os.environ.get("LOVIA_TRACE_URL") or None,
            allowed_hosts=allowed_hosts,
            whatif=whatif,
        )
    if config.agent is not None and not isinstance(config.store, str | Store):
        raise UserError(
            f"lovia web with an agent needs a store it can record runs to; "
            f"{type(config.store).__name__} only answers queries",
            hint="Pass a full store (memory://, sqlite:///…, postgresql://…) or its URL, "
            "or leave agent=None to browse this store's runs read-only.",
        )
    if config.whatif is not None and not config.token:
        raise UserError(
            "what-if needs an access token: it spends money and opens connections",
            hint="Pass token=... (lovia web --whatif makes one and prints the URL to open); "
            "a CSRF token alone is readable by anyone who can load a page.",
        )
    from . import _compare, _evals, _list, _live, _pages, _run, _view
    from ._cache import RunCache

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncGenerator[None]:
        from ..replay import open_store

        # chat and approvals run agents that write to the store; without --agent the
        # app only reads, so it never creates tables in a file it was pointed at
        async with open_store(config.store, read_only=config.agent is None) as db:
            app.state.db = db
            yield

    routes: list[Any] = [
        *_pages.ROUTES,
        *_list.ROUTES,
        *_run.ROUTES,
        *_view.ROUTES,
        *_compare.ROUTES,
        *_live.ROUTES,
        *_evals.ROUTES,
    ]
    routes.append(Mount("/static", StaticFiles(packages=[("lovia.web", "static")]), name="static"))
    app = Starlette(
        routes=routes,
        middleware=[Middleware(Guard, config=config)],
        lifespan=lifespan,
        exception_handlers={LoviaError: _pages.error_page},
    )
    app.state.config = config
    app.state.templates = templates()
    app.state.runs = RunCache()
    return app
