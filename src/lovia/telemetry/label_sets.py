"""The metric label sets of model and tool calls, built once and reused.

A run's model calls mostly share provider, model, agent, purpose, server and the run's
spend labels, and its tool calls their tool name and agent: the label dicts the
instruments get (and the keys of the counters' sums, ``metrics.Totals``) are made the
first time a combination is seen and then looked up by a tuple of those values. The SDK
copies every attribute set it is given, so handing it the same dict again is safe; the
dicts here are never changed after they are built.

The caches are process-wide and bounded (``LIMIT`` combinations each, emptied when
full): label values are themselves bounded (``attributes.METRIC_LABELS``, the capped
attribution labels), so in practice they never fill.
"""

from __future__ import annotations

from typing import Any, Final

from .. import events as ev
from . import attributes as A
from .mapping import Attrs
from .metrics import Instruments, LabelKey

__all__ = ["ChatLabels", "ToolLabels", "chat_labels", "record_chat", "record_tool", "tool_labels"]

LIMIT: Final = 4096
"""Combinations kept per cache before it is emptied and filled again."""

_TOKEN_KINDS: Final = ("input", "output", "cache_read", "cache_write", "reasoning")


def _key(labels: Attrs) -> LabelKey:
    return frozenset(labels.items())


class Answered:
    """The label sets of a model call that answered, for one response model."""

    __slots__ = ("labels", "token_input", "token_output")

    def __init__(self, base: Attrs, response_model: str) -> None:
        self.labels: Attrs = {**base, A.RESPONSE_MODEL: response_model}
        self.token_input: Attrs = {**self.labels, A.TOKEN_TYPE: "input"}
        self.token_output: Attrs = {**self.labels, A.TOKEN_TYPE: "output"}


class ChatLabels:
    """The label sets of one kind of model call in one kind of run.

    ``base``: the chat labels (operation, provider, request model, the run's starting
    agent, purpose, server); ``spend_key``: the key of the spend counters' label set
    (the top-level run's agent, provider, request model, purpose, nested, attribution
    labels); ``token_keys``: that set with each ``gen_ai.token.type``.
    """

    __slots__ = ("_answered", "base", "spend_key", "token_keys")

    def __init__(self, base: Attrs, run: Attrs) -> None:
        self.base = base
        spend: Attrs = {
            A.AGENT_NAME: run.get(A.AGENT_NAME, base[A.AGENT_NAME]),
            A.PROVIDER_NAME: base[A.PROVIDER_NAME],
            A.REQUEST_MODEL: base[A.REQUEST_MODEL],
            A.CALL_PURPOSE: base[A.CALL_PURPOSE],
            A.RUN_NESTED: run.get(A.RUN_NESTED, False),
        }
        if len(run) > 2:  # attribution labels (lovia.label.*), already capped
            spend.update((k, v) for k, v in run.items() if k.startswith(A.LABEL_PREFIX))
        self.spend_key = _key(spend)
        self.token_keys = tuple(_key({**spend, A.TOKEN_TYPE: kind}) for kind in _TOKEN_KINDS)
        self._answered: dict[str, Answered] = {}

    def answered(self, response_model: str) -> Answered:
        """The label sets of a call answered by ``response_model``."""
        found = self._answered.get(response_model)
        if found is None:
            if len(self._answered) >= LIMIT:
                self._answered.clear()
            found = self._answered[response_model] = Answered(self.base, response_model)
        return found


_chats: dict[tuple[Any, ...], ChatLabels] = {}


def chat_labels(
    event: ev.ModelCallStarted, agent: str, run: Attrs, run_key: tuple[Any, ...]
) -> ChatLabels:
    """The label sets of ``event``'s call; ``agent``: its metric agent label, ``run``:
    the run's spend labels and ``run_key`` the tuple of their items."""
    key = (
        event.provider,
        event.model,
        agent,
        event.purpose,
        event.server_address,
        event.server_port,
        run_key,
    )
    found = _chats.get(key)
    if found is None:
        base: Attrs = {
            A.OPERATION_NAME: "chat",
            A.PROVIDER_NAME: event.provider,
            A.REQUEST_MODEL: event.model,
            A.AGENT_NAME: agent,
            A.CALL_PURPOSE: event.purpose,
        }
        if event.server_address:
            base[A.SERVER_ADDRESS] = event.server_address
            if event.server_port:
                base[A.SERVER_PORT] = event.server_port
        if len(_chats) >= LIMIT:
            _chats.clear()
        found = _chats[key] = ChatLabels(base, run)
    return found


def record_chat(
    m: Instruments, chat: ChatLabels, event: ev.ModelCallCompleted, latest: Any = None
) -> None:
    """The metrics of a model call that answered (``latest``: the newest token metrics,
    ``semconv.LatestInstruments``, which replace ``gen_ai.client.token.usage``)."""
    answered = chat.answered(event.response_model or event.model)
    labels = answered.labels
    m.op_duration.record(event.duration_s, labels)
    if event.time_to_first_chunk_s is not None:
        m.ttfc.record(event.time_to_first_chunk_s, labels)
    if latest is not None:
        latest.record(labels, event.usage, None)
    u = event.usage
    if u.cost_usd:
        m.cost.add_key(u.cost_usd, chat.spend_key)
    if u.unpriced:
        m.unpriced.add_key(u.unpriced, chat.spend_key)
    if u.missing:
        return
    if latest is None:  # the released name; the newest set replaces it
        m.token_usage.record(u.input_tokens, answered.token_input)
        m.token_usage.record(u.output_tokens, answered.token_output)
    keys = chat.token_keys
    m.tokens.add_key(u.input_tokens, keys[0])
    m.tokens.add_key(u.output_tokens, keys[1])
    if u.cache_read_tokens:
        m.tokens.add_key(u.cache_read_tokens, keys[2])
    if u.cache_write_tokens:
        m.tokens.add_key(u.cache_write_tokens, keys[3])
    if u.reasoning_tokens:
        m.tokens.add_key(u.reasoning_tokens, keys[4])


class ToolLabels:
    """The label sets of one tool's calls under one agent label."""

    __slots__ = ("duration", "key", "labels")

    def __init__(self, name: str, agent: str) -> None:
        self.labels: Attrs = {A.TOOL_NAME: name, A.AGENT_NAME: agent}
        self.key = _key(self.labels)
        self.duration: Attrs = {**self.labels, A.OPERATION_NAME: "execute_tool"}


_tools: dict[tuple[str, str], ToolLabels] = {}


def tool_labels(name: str, agent: str) -> ToolLabels:
    """The label sets of tool ``name``'s calls under metric agent label ``agent``."""
    found = _tools.get((name, agent))
    if found is None:
        if len(_tools) >= LIMIT:
            _tools.clear()
        found = _tools[(name, agent)] = ToolLabels(name, agent)
    return found


def record_tool(m: Instruments, event: ev.ToolCallCompleted, agent: str) -> None:
    """The metrics of a finished tool call (``agent``: the metric agent label)."""
    tool = tool_labels(event.call.name if event.known else A.UNKNOWN_TOOL, agent)
    if event.recovered:  # answered from the ledger: not a new execution
        m.tool_recovered.add(1, {**tool.labels, A.TOOL_OUTCOME: "unknown"})
        return
    m.tool_calls.add_key(1, tool.key)  # every call the model made, run or refused
    if event.is_error:
        labels = {**tool.labels, A.ERROR_TYPE: event.error_type or "ToolError"}
        m.tool_errors.add(1, labels)
        if event.started:
            m.tool_duration.record(event.duration_s, {**labels, A.OPERATION_NAME: "execute_tool"})
    elif event.started:
        m.tool_duration.record(event.duration_s, tool.duration)
