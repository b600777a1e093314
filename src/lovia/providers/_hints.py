"""Hints for provider failures whose cause can be guessed from the request and the server.

Pure functions, called only on the failure path: a stream cut while the model was
answering (a local server's context window filling is the usual cause) and a server that
rejects ``response_format`` (JSON-schema output it does not support).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import ContextOverflow, ProviderError
from ._client import url_host

__all__ = ["CONTEXT_FILLED", "hosted", "rejected_format_hint", "stream_cut_hint"]

_HOSTED = ("api.openai.com", "api.anthropic.com")

CONTEXT_FILLED = (
    "raise the server's context size (llama.cpp: --ctx-size; llama-cpp-python: --n_ctx; "
    "Ollama: num_ctx; vLLM: --max-model-len), lower ModelSettings(max_tokens=...), or set "
    "the provider's ModelProfile(context_window=...) so compaction keeps each view inside it."
)


def hosted(base_url: str) -> bool:
    """Whether ``base_url`` is a hosted vendor API (not a self-run compatible server)."""
    return url_host(base_url) in _HOSTED


def stream_cut_hint(error: ProviderError, base_url: str, default: str) -> str:
    """The hint for a stream that broke after content arrived."""
    if isinstance(error, ContextOverflow):
        return (
            "The context window filled while the model was answering (prompt + answer "
            f"reached the server's limit); what arrived is in .partial. To fix it, {CONTEXT_FILLED}"
        )
    hint = error.hint or default
    if hosted(base_url):
        return hint
    return (
        f"{hint} A self-run server (llama.cpp, Ollama, vLLM, LM Studio) also closes the "
        "stream when prompt + answer fill its context window: if the answer stopped "
        f"mid-way, {CONTEXT_FILLED}"
    )


_FORMAT_WORDS = ("response_format", "json_schema", "json schema", "grammar", "schema")


def rejected_format_hint(error: ProviderError, body: Mapping[str, Any], base_url: str) -> None:
    """Explain a rejected request that asked for JSON-schema output (sets ``error.hint``)."""
    if "response_format" not in body or error.status not in (400, 422, 500, 501):
        return
    said = error.message.lower()
    if not any(word in said for word in _FORMAT_WORDS) and hosted(base_url):
        return
    advice = (
        "The request asked for JSON-schema output (response_format), which this server "
        "may not support: pass profile=ModelProfile(native_json_schema=False) to the "
        "provider, and lovia puts the schema in the prompt instead (validated, with "
        "repair turns)."
    )
    error.hint = f"{advice} {error.hint}" if error.hint else advice
