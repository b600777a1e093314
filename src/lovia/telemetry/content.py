"""Content capture policy: off by default, opt in per process.

``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` accepts (case-insensitive)
``NO_CONTENT`` (default), ``SPAN_ONLY``, ``EVENT_ONLY``, ``SPAN_AND_EVENT``, ``REFERENCE``,
and for compatibility ``true`` (= ``SPAN_ONLY``) / ``false`` (= ``NO_CONTENT``); anything
else logs a warning and captures nothing. ``configure(capture_content=...)`` overrides it.

``REFERENCE`` sends no content at all: each chat span carries a reference to its view in
lovia's store instead (``lovia.content.ref`` = ``lovia:run/<run id>/view/<view hash>``,
``lovia.content.entries`` = the first and last entry id of the view, and, when
``LOVIA_CONTENT_URL`` is set, ``lovia.content.url``: a link for Jaeger/Grafana). The content
stays in the store, under its redaction and retention; ``lovia replay <ref>``,
``lovia show <ref>`` and ``lovia web`` (``/ref/<run id>/<view hash>``) resolve it.

When on, chat spans get ``gen_ai.input.messages`` / ``gen_ai.output.messages`` /
``gen_ai.system_instructions`` / ``gen_ai.tool.definitions`` (JSON, GenAI message schema:
roles + ``text`` / ``tool_call`` / ``tool_call_response`` / ``reasoning`` parts) and tool
spans get ``gen_ai.tool.call.arguments`` / ``gen_ai.tool.call.result`` (SPAN modes). EVENT
modes send the same content as log-based events on the OpenTelemetry Logs API instead
(``events_log``): ``EVENT_ONLY`` puts nothing of it on spans.

A scrubber ``scrub(key, value) -> value | None`` sees every structured value before it
is serialized; returning ``None`` drops it.

Error texts are content too (a refusal, a failed output, a server echoing the prompt):
:func:`status_text` gives span status messages and ``lovia.retry.message`` the error
text only when content goes on spans (``SPAN_ONLY``, ``SPAN_AND_EVENT``; scrubbed under
the key ``lovia.status_message``), and otherwise only facts that are not content: the
error type, and for provider errors the provider, HTTP status and error code. Either way
keys are redacted before the text is cut.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

from .._redact import excerpt
from ..errors import BudgetExceeded, ProviderError
from ..transcript import clean_text

__all__ = ["ContentPolicy", "Scrubber", "current_policy", "set_policy", "status_text"]

logger = logging.getLogger("lovia.telemetry")

ENV_VAR = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
URL_ENV = "LOVIA_CONTENT_URL"
"""A link template for ``REFERENCE`` mode: ``{run_id}``, ``{view_hash}`` and ``{turn}`` are
filled in, e.g. ``https://lovia.example.com/ref/{run_id}/{view_hash}`` (``lovia web``)."""
Mode = Literal["NO_CONTENT", "SPAN_ONLY", "EVENT_ONLY", "SPAN_AND_EVENT", "REFERENCE"]
Scrubber = Callable[[str, Any], Any]

_ALIASES: dict[str, Mode] = {
    "no_content": "NO_CONTENT",
    "span_only": "SPAN_ONLY",
    "event_only": "EVENT_ONLY",
    "span_and_event": "SPAN_AND_EVENT",
    "reference": "REFERENCE",
    "true": "SPAN_ONLY",
    "false": "NO_CONTENT",
}


@dataclass(frozen=True, slots=True)
class ContentPolicy:
    """What content to record, where, and how to scrub it first."""

    mode: Mode = "NO_CONTENT"
    scrub: Scrubber | None = None

    @property
    def on_span(self) -> bool:
        return self.mode in ("SPAN_ONLY", "SPAN_AND_EVENT")

    @property
    def on_event(self) -> bool:
        return self.mode in ("EVENT_ONLY", "SPAN_AND_EVENT")

    @property
    def enabled(self) -> bool:
        """Content (messages, arguments, error texts) goes out with the telemetry."""
        return self.mode not in ("NO_CONTENT", "REFERENCE")

    @property
    def by_reference(self) -> bool:
        """Chat spans carry a reference to the view in lovia's store, not its messages."""
        return self.mode == "REFERENCE"

    def encode(self, key: str, value: Any) -> str | None:
        """Scrub then JSON-encode ``value`` (None when scrubbed away)."""
        return self.to_text(self.scrubbed(key, value))

    def scrubbed(self, key: str, value: Any) -> Any:
        """``value`` after the scrubber (None when scrubbed away)."""
        return value if self.scrub is None else self.scrub(key, value)

    @staticmethod
    def to_text(value: Any) -> str | None:
        """A scrubbed value as a span attribute: JSON (a string as it is)."""
        if value is None or isinstance(value, str):
            return value
        return json.dumps(value, ensure_ascii=False, default=str)


STATUS_KEY = "lovia.status_message"
"""The scrubber key under which error texts (span status, retry messages) are offered."""
STATUS_LIMIT = 500


def status_text(
    policy: ContentPolicy, error_type: str, message: str, error: BaseException | None = None
) -> str:
    """An error's description for telemetry, following ``policy`` (see the module docs);
    valid Unicode (an exporter drops a batch holding a lone surrogate)."""
    if policy.on_span and message:  # EVENT_ONLY / REFERENCE: no content on spans at all
        text = policy.encode(STATUS_KEY, message)
        if text is not None:
            return clean_text(excerpt(text, STATUS_LIMIT))
    facts: list[str] = []
    if isinstance(error, ProviderError):
        facts.extend(f for f in (error.provider, error.status and f"HTTP {error.status}") if f)
        if error.code:
            facts.append(error.code)
    elif isinstance(error, BudgetExceeded) and error.limit:
        facts.append(error.limit)
    detail = f" ({', '.join(map(str, facts))})" if facts else ""
    return clean_text(excerpt(f"{error_type}{detail}", STATUS_LIMIT))


_configured: Mode | None = None
_scrub: Scrubber | None = None


def parse_mode(value: str | bool | None) -> Mode:
    """The capture mode named by ``value`` (env-var syntax; bools accepted)."""
    if value is None:
        return "NO_CONTENT"
    if isinstance(value, bool):
        return "SPAN_ONLY" if value else "NO_CONTENT"
    mode = _ALIASES.get(value.strip().lower())
    if mode is None:
        logger.warning(
            "%s=%r is not one of NO_CONTENT, SPAN_ONLY, EVENT_ONLY, "
            "SPAN_AND_EVENT, REFERENCE, true, false; capturing no content",
            ENV_VAR,
            value,
        )
        return "NO_CONTENT"
    return mode


def set_policy(capture_content: str | bool | None, scrub: Scrubber | None) -> None:
    """Process-wide override (``configure`` calls it); None = use the env var."""
    global _configured, _scrub
    _configured = None if capture_content is None else parse_mode(capture_content)
    _scrub = scrub


def current_policy() -> ContentPolicy:
    """The policy for a run starting now (the env var is read per run)."""
    mode = _configured
    if mode is None:
        raw = os.environ.get(ENV_VAR)
        mode = parse_mode(raw) if raw else "NO_CONTENT"
    return ContentPolicy(mode, _scrub)


# -- GenAI message schema --------------------------------------------------------------


def parse_args(arguments: str) -> Any:
    try:
        return json.loads(arguments)
    except (TypeError, ValueError):
        return arguments


def _part(entry: Any) -> tuple[str, dict[str, Any]] | None:
    """(role, part) of one transcript entry, or None to skip it."""
    kind = getattr(entry, "type", "")
    if kind == "input" and getattr(entry, "origin", "") == "summary":
        return entry.role, {"type": "compaction", "id": entry.id, "content": _summary(entry)}
    if kind == "input":
        return entry.role, {"type": "text", "content": entry.content}
    if kind == "system":
        return "system", {"type": "text", "content": entry.content}
    if kind == "text":
        return "assistant", {"type": "text", "content": entry.text}
    if kind == "reasoning":
        return "assistant", {"type": "reasoning", "content": entry.text}
    if kind == "tool_call":
        return "assistant", {
            "type": "tool_call",
            "id": entry.call_id,
            "name": entry.name,
            "arguments": parse_args(entry.arguments),
        }
    if kind == "tool_result":
        return "tool", {
            "type": "tool_call_response",
            "id": entry.call_id,
            "response": entry.content,
        }
    return None


def _summary(entry: Any) -> str:
    """A compaction summary's text, without the ``<summary>`` wrapper the model sees."""
    text = str(entry.content)
    if text.startswith("<summary>\n") and text.endswith("\n</summary>"):
        return text[len("<summary>\n") : -len("\n</summary>")]
    return text


def messages(entries: Iterable[Any]) -> list[dict[str, Any]]:
    """Transcript entries as GenAI messages (consecutive parts of one role merged)."""
    out: list[dict[str, Any]] = []
    for entry in entries:
        found = _part(entry)
        if found is None:
            continue
        role, part = found
        if out and out[-1]["role"] == role and role in ("assistant", "tool"):
            out[-1]["parts"].append(part)
        else:
            out.append({"role": role, "parts": [part]})
    return out


def output_messages(entries: Iterable[Any], finish_reason: str) -> list[dict[str, Any]]:
    msgs = messages(entries) or [{"role": "assistant", "parts": []}]
    for msg in msgs:
        msg["finish_reason"] = finish_reason
    return msgs


def system_instructions(system: str) -> list[dict[str, Any]]:
    return [{"type": "text", "content": system}] if system else []


def tool_definitions(tools: Iterable[Any]) -> list[dict[str, Any]]:
    """The tools offered to the model (``gen_ai.tool.definitions``): type and name. The
    convention advises against its optional properties (description, parameter schema)
    by default, they can be large; lovia's store keeps them with the view record."""
    return [{"type": "function", "name": t.name} for t in tools]


REF_PREFIX = "lovia:run/"


def content_ref(run_id: str, view_hash: str) -> str:
    """The reference to one model call's view: ``lovia:run/<run id>/view/<view hash>``."""
    return f"{REF_PREFIX}{run_id}/view/{view_hash}"


def content_url(run_id: str, view_hash: str, turn: int) -> str | None:
    """``LOVIA_CONTENT_URL`` filled in (None when unset or malformed, with a warning)."""
    template = os.environ.get(URL_ENV)
    if not template:
        return None
    try:
        return template.format(run_id=run_id, view_hash=view_hash, turn=turn)
    except (KeyError, IndexError, ValueError) as exc:
        logger.warning(
            "%s=%r is not a usable template (%s); no link recorded", URL_ENV, template, exc
        )
        return None
