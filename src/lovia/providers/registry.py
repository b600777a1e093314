"""Model strings → providers: ``"openai:gpt-4.1"``, ``"anthropic:claude-sonnet-4-0"``…

Known prefixes: ``openai`` (Chat Completions), ``openai-responses`` (Responses API),
``anthropic`` (Messages API). Extensions add their own with :func:`register_provider`
(``lovia.testing`` registers ``test``).

Instances are cached per ``(prefix, model)`` for the life of the process, so every agent
naming the same model string shares one provider and therefore one HTTP connection pool.
The cache is keyed only by the string: configuration comes from the environment
(``OPENAI_API_KEY``, ``OPENAI_BASE_URL``, ``ANTHROPIC_API_KEY``, ``ANTHROPIC_BASE_URL``) at
first use. Build a provider object yourself when you need other settings, and call
:func:`clear_cache` (``await``) to close and forget cached instances.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from ..errors import UserError
from ..model import Provider

__all__ = ["clear_cache", "known_prefixes", "register_provider", "resolve_model"]

ProviderFactory = Callable[[str], Provider]
"""Builds a provider from the model name after the ``prefix:``."""

_factories: dict[str, ProviderFactory] = {}
_cache: dict[tuple[str, str], Provider] = {}
_lock = threading.Lock()


def _openai(model: str) -> Provider:
    from .openai_chat import OpenAIChat

    return OpenAIChat(model)


def _openai_responses(model: str) -> Provider:
    from .openai_responses import OpenAIResponses

    return OpenAIResponses(model)


def _anthropic(model: str) -> Provider:
    from .anthropic import Anthropic

    return Anthropic(model)


def register_provider(prefix: str, factory: ProviderFactory, *, replace: bool = False) -> None:
    """Make ``"prefix:model"`` strings resolve through ``factory(model)``."""
    if not prefix or ":" in prefix:
        raise UserError(f"Invalid provider prefix {prefix!r}.", "Use a short name without ':'.")
    with _lock:
        if prefix in _factories and not replace and _factories[prefix] is not factory:
            raise UserError(
                f"Provider prefix {prefix!r} is already registered.",
                "Pass replace=True to override it.",
            )
        _factories[prefix] = factory
        for key in [k for k in _cache if k[0] == prefix]:
            del _cache[key]


def known_prefixes() -> list[str]:
    return sorted(_factories)


def resolve_model(spec: str | Provider) -> Provider:
    """A provider for ``"prefix:model"`` (cached per process), or ``spec`` itself."""
    if not isinstance(spec, str):
        return spec
    prefix, sep, model = spec.partition(":")
    if not sep or not model:
        raise UserError(
            f"Model {spec!r} does not say which provider to use.",
            f"Write it as 'provider:model', e.g. 'openai:gpt-4.1'; known providers: "
            f"{', '.join(known_prefixes())}.",
        )
    with _lock:
        factory = _factories.get(prefix)
        if factory is None:
            raise UserError(
                f"Unknown model provider {prefix!r} in {spec!r}.",
                f"Known providers: {', '.join(known_prefixes())}; add your own with "
                "lovia.providers.registry.register_provider().",
            )
        key = (prefix, model)
        if key not in _cache:
            _cache[key] = factory(model)
        return _cache[key]


async def clear_cache() -> None:
    """Close (when they can be closed) and forget all cached providers."""
    with _lock:
        providers = list(_cache.values())
        _cache.clear()
    for provider in providers:
        close = getattr(provider, "aclose", None)
        if close is not None:
            await close()


register_provider("openai", _openai)
register_provider("openai-responses", _openai_responses)
register_provider("anthropic", _anthropic)
