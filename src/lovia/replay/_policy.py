# pyright: reportUnnecessaryIsInstance=false
# (runtime checks of user input are deliberate: not every caller runs a type checker)
"""Where a what-if may connect, and with which API key.

A what-if re-sends a recorded view to a model. Whoever asks for it may choose the model
and, for the built-in adapters, a base URL and a key; the process sending it holds API
keys configured for particular hosts (``OPENAI_API_KEY`` for ``$OPENAI_BASE_URL`` or
``api.openai.com``, ``ANTHROPIC_API_KEY`` for ``$ANTHROPIC_BASE_URL`` or
``api.anthropic.com``). :class:`WhatIfPolicy` keeps the two apart:

- no base URL and no key: the provider as this process is configured (the registry);
- a base URL on the configured provider's own origin (scheme, host, port): the
  configured key goes along, as it would without the base URL;
- any other base URL: only when the operator allowed its host (``allow_hosts``), and
  never with a configured key — with the key sent for that one request, or none (a
  server on this machine);
- a key sent with the request is used for that request's provider only, which is
  closed when the what-if ends.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from ..errors import UserError
from ..model import Provider

__all__ = ["ALLOW_HOSTS_ENV", "Origin", "WhatIfPolicy", "configured_base_url", "origin"]

ALLOW_HOSTS_ENV = "LOVIA_WHATIF_ALLOW_HOSTS"
"""Comma-separated hosts (``host`` or ``host:port``) a what-if may reach, besides the
configured providers' own base URLs."""

Origin = tuple[str, str, int]
"""``(scheme, host, port)`` of a URL: what an API key is configured for."""

_ENV_BASE = {
    "openai": "OPENAI_BASE_URL",
    "openai-chat": "OPENAI_BASE_URL",
    "openai-responses": "OPENAI_BASE_URL",
    "anthropic": "ANTHROPIC_BASE_URL",
}
_ALLOW_HINT = (
    "A what-if reaches only the configured providers' own base URLs and the hosts the "
    "operator allowed: start lovia web with --whatif-allow-host HOST[:PORT] (or set "
    f"{ALLOW_HOSTS_ENV}), or leave the base URL out."
)


def origin(url: str) -> Origin:
    """``(scheme, host, port)`` of an http(s) URL; anything else is a ``UserError``."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise UserError(f"base URL {url[:200]!r} is not a URL: {exc}") from None
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    if scheme not in ("http", "https") or not host:
        raise UserError(
            f"base URL {url[:200]!r} is not an http(s) URL with a host",
            hint="Write it as e.g. https://api.example.com/v1.",
        )
    return scheme, host, port if port is not None else (443 if scheme == "https" else 80)


def _allowed_entry(entry: str) -> tuple[str, int | None]:
    """``host`` / ``host:port`` / ``[v6]:port`` / a URL → (host, port or None: any)."""
    text = entry.strip()
    try:
        parts = urlsplit(text if "://" in text else f"//{text}")
        port = parts.port
    except ValueError as exc:
        raise UserError(f"allowed host {entry[:200]!r} is malformed: {exc}") from None
    host = (parts.hostname or "").lower()
    if not host:
        raise UserError(f"allowed host {entry[:200]!r} names no host", hint="Write HOST[:PORT].")
    return host, port


def configured_base_url(prefix: str) -> str | None:
    """The base URL this process's ``prefix`` provider is configured for (None: not a
    built-in adapter)."""
    env = _ENV_BASE.get(prefix)
    if env is None:
        return None
    if prefix == "anthropic":
        from ..providers.anthropic import ANTHROPIC_BASE_URL as default
    else:
        from ..providers.openai_chat import OPENAI_BASE_URL as default
    return os.environ.get(env) or default


@dataclass(frozen=True, slots=True)
class WhatIfPolicy:
    """The hosts a what-if may reach besides the configured providers' own base URLs."""

    allow_hosts: tuple[str, ...] = ()
    """``host`` (any port) or ``host:port`` entries; ``"*"`` allows every host (the CLI,
    whose user types the URL). A configured key never goes to these hosts."""

    def __post_init__(self) -> None:
        for entry in self.allow_hosts:
            if entry != "*":
                _allowed_entry(entry)  # a malformed entry fails at start-up, not per request

    @classmethod
    def from_env(cls, extra: Iterable[str] = ()) -> WhatIfPolicy:
        """``extra`` hosts plus those of ``$LOVIA_WHATIF_ALLOW_HOSTS`` (comma-separated)."""
        env = [h.strip() for h in os.environ.get(ALLOW_HOSTS_ENV, "").split(",") if h.strip()]
        return cls(tuple(dict.fromkeys([*extra, *env])))

    def allows(self, target: Origin) -> bool:
        """Whether the operator allowed ``target`` (not counting configured base URLs)."""
        if "*" in self.allow_hosts:
            return True
        for entry in self.allow_hosts:
            host, port = _allowed_entry(entry)
            if host == target[1] and port in (None, target[2]):
                return True
        return False

    def provider(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        stream: bool | None = None,
    ) -> tuple[Provider, bool]:
        """The provider a what-if of ``model`` uses, and whether it is the caller's to
        close (built for this request) — or a ``UserError`` saying why not."""
        if base_url is None and api_key is None and stream is None:
            from ..providers.registry import resolve_model

            return resolve_model(model), False  # as this process is configured
        prefix, _, name = model.partition(":")
        configured = configured_base_url(prefix)
        if configured is None or not name:
            raise UserError(
                f"a what-if with a base URL or key needs a built-in provider, not {model!r}",
                hint="Write the model as openai:MODEL, openai-responses:MODEL or "
                "anthropic:MODEL, or leave base URL and key out.",
            )
        target = base_url or configured
        key: str | None = api_key
        if origin(target) != origin(configured):
            _, host, port = origin(target)
            if not self.allows(origin(target)):
                raise UserError(f"a what-if may not connect to {host}:{port}", hint=_ALLOW_HINT)
            key = api_key or ""  # never the configured key: it is for another host
        return _build(prefix, name, target, key, stream), True


def _build(prefix: str, model: str, base_url: str, key: str | None, stream: bool | None) -> Any:
    """A built-in adapter at ``base_url``; ``key`` None: the configured one, "": none."""
    options: dict[str, Any] = {
        "base_url": base_url,
        "api_key": key,
        "stream": True if stream is None else stream,
    }
    try:
        if prefix == "anthropic":
            from ..providers.anthropic import Anthropic

            return Anthropic(model, **options)
        if prefix == "openai-responses":
            from ..providers.openai_responses import OpenAIResponses

            return OpenAIResponses(model, **options)
        from ..providers.openai_chat import OpenAIChat

        return OpenAIChat(model, **options)
    except UserError as exc:
        if key != "":
            raise
        raise UserError(
            f"a what-if to {base_url} needs an API key for that host",
            hint="Send one with the request (it is used for that request only); the "
            "server's own keys go only to the hosts they were configured for.",
        ) from exc
