"""Every span name, attribute key and metric name lovia emits, in one place.

Followed GenAI semantic conventions: the ``semantic-conventions-genai`` registry, release
**v1.42.0-dev** (``semconv.REGISTRY``; the GenAI and MCP conventions left the core
``semantic-conventions`` after v1.41.1). The test suite checks every ``gen_ai.*`` and
``mcp.*`` attribute, event and metric lovia emits — name, type, unit, instrument, span kind,
requirement level — against the registry's model files, vendored in
``tests/fixtures/semconv-genai``; the few names outside it are listed in
``semconv.EXTENSIONS`` with why. Cache tokens use the registry's span attributes
``gen_ai.usage.cache_read.input_tokens`` and ``gen_ai.usage.cache_creation.input_tokens``.

Metric names follow the *released* set (``gen_ai.client.token.usage``,
``gen_ai.client.operation.duration``), as ``opentelemetry-util-genai`` 1.3b0 does;
``OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental`` switches the token metrics to
the registry main branch's (see ``semconv``). lovia's own names live under ``lovia.*`` and
will not move. ``TELEMETRY_VERSION`` (attribute ``lovia.telemetry.version`` on every lovia
span) changes whenever any name below changes meaning, so dashboards can tell schema
versions apart.
"""

from __future__ import annotations

from typing import Final

TELEMETRY_VERSION: Final = "5"
"""5: every checkpoint write is a span event ``lovia.checkpoint.write``, never a span (a
failed one carries ``error.type`` and ``error.message``). 4: ``lovia.cost.usd`` on
``invoke_agent`` is the run's own cost (``lovia.cost.total_usd`` includes its children);
``lovia.run.outcome`` says ``cancelled``/``interrupted``; captured content goes out as
log-based events (Logs API), never as span events; an MCP tool's ``execute_tool`` span
says ``gen_ai.tool.type=extension``; summary ``chat`` spans carry their own view hash.
3: a checkpoint write is a span event ``lovia.checkpoint.write`` on its enclosing span
(a span of its own only when it failed or took 10 ms or longer)."""
SEMCONV_VERSION: Final = "semantic-conventions-genai v1.42.0-dev"
SCOPE_NAME: Final = "lovia"

# -- span names (first word; the rest is the agent / model / tool name) --
SPAN_RUN: Final = "invoke_agent"
SPAN_TURN: Final = "lovia.turn"
SPAN_VIEW: Final = "lovia.view"
SPAN_CHAT: Final = "chat"
SPAN_TOOL: Final = "execute_tool"
SPAN_GUARDRAIL: Final = "lovia.guardrail"
SPAN_HANDOFF: Final = "lovia.handoff"
SPAN_COMPACTION: Final = "lovia.compaction"
SPAN_CHECKPOINT: Final = "lovia.checkpoint.write"
"""The span telemetry versions 3 and 4 made of a checkpoint write that failed or was slow
(read back by ``mapping.SPANS``); lovia now records every write as ``EVENT_CHECKPOINT``."""
SPAN_SESSION: Final = "lovia.session.write"
SPAN_PLUGIN_SETUP: Final = "lovia.plugin.setup"
SPAN_PLUGIN_CLOSE: Final = "lovia.plugin.close"

# -- span events --
EVENT_RETRY: Final = "lovia.provider.retry"
EVENT_DETAILS: Final = "gen_ai.client.inference.operation.details"
"""A model call's content as a log-based event (Logs API, with the chat span's context)."""
EVENT_TOOL_ARGUMENTS: Final = "lovia.tool.call.arguments"
"""A tool call's arguments as a log-based event (the registry defines no tool event)."""
EVENT_TOOL_RESULT: Final = "lovia.tool.call.result"
EVENT_GUARDRAIL_TRIPPED: Final = "lovia.guardrail.tripped"
EVENT_CHECKPOINT: Final = "lovia.checkpoint.write"
"""A checkpoint write, on the innermost open span (view, turn or run), stamped when the
write ended: kind, entries, bytes, store, duration (``lovia.checkpoint.duration_s``),
agent and turn; a failed write adds ``error.type`` and ``error.message``. A write is
bookkeeping, not a phase of the run, so it is never a span of its own: the span tree does
not depend on how fast the store was, and a slow store costs no extra span."""

# -- GenAI semantic-convention attributes --
OPERATION_NAME: Final = "gen_ai.operation.name"
PROVIDER_NAME: Final = "gen_ai.provider.name"
AGENT_NAME: Final = "gen_ai.agent.name"
CONVERSATION_ID: Final = "gen_ai.conversation.id"
CONVERSATION_COMPACTED: Final = "gen_ai.conversation.compacted"
REQUEST_MODEL: Final = "gen_ai.request.model"
REQUEST_TEMPERATURE: Final = "gen_ai.request.temperature"
REQUEST_TOP_P: Final = "gen_ai.request.top_p"
REQUEST_MAX_TOKENS: Final = "gen_ai.request.max_tokens"
REQUEST_STOP_SEQUENCES: Final = "gen_ai.request.stop_sequences"
REQUEST_SEED: Final = "gen_ai.request.seed"
REQUEST_STREAM: Final = "gen_ai.request.stream"
RESPONSE_MODEL: Final = "gen_ai.response.model"
RESPONSE_ID: Final = "gen_ai.response.id"
RESPONSE_FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
RESPONSE_TTFC: Final = "gen_ai.response.time_to_first_chunk"
USAGE_INPUT: Final = "gen_ai.usage.input_tokens"
USAGE_OUTPUT: Final = "gen_ai.usage.output_tokens"
USAGE_CACHE_READ: Final = "gen_ai.usage.cache_read.input_tokens"
USAGE_CACHE_WRITE: Final = "gen_ai.usage.cache_creation.input_tokens"
USAGE_REASONING: Final = "gen_ai.usage.reasoning.output_tokens"
TOKEN_TYPE: Final = "gen_ai.token.type"
TOOL_NAME: Final = "gen_ai.tool.name"
TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
TOOL_TYPE: Final = "gen_ai.tool.type"
TOOL_DESCRIPTION: Final = "gen_ai.tool.description"
TOOL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
TOOL_RESULT: Final = "gen_ai.tool.call.result"
INPUT_MESSAGES: Final = "gen_ai.input.messages"
OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
SYSTEM_INSTRUCTIONS: Final = "gen_ai.system_instructions"
TOOL_DEFINITIONS: Final = "gen_ai.tool.definitions"
AGENT_DESCRIPTION: Final = "gen_ai.agent.description"
OUTPUT_TYPE: Final = "gen_ai.output.type"
SERVER_ADDRESS: Final = "server.address"
SERVER_PORT: Final = "server.port"
ERROR_TYPE: Final = "error.type"
ERROR_MESSAGE: Final = "error.message"
"""A failed checkpoint write's error text, on its span event (the content policy's
``status_text``, as a span's status description would be)."""

# -- lovia attributes --
VERSION: Final = "lovia.telemetry.version"
SPAN_INTERRUPTED: Final = "lovia.span.interrupted"
"""``true`` on a phase's span that the run's end closed (the run failed, was cancelled or
its stream was closed while a tool, guardrail, view or model call was in progress): its
phase never finished, so the span stands for no end event (``error.type`` is the run's)."""
RUN_ID: Final = "lovia.run.id"
RUN_RESUMED: Final = "lovia.run.resumed"
RUN_ATTEMPT: Final = "lovia.run.attempt"
EVENT_APPROVAL: Final = "lovia.approval"
"""Span event on the turn: a tool call's approval decision."""
APPROVAL_CALL_ID: Final = "lovia.approval.call_id"
APPROVAL_TOOL: Final = "lovia.approval.tool"
APPROVAL_DECISION: Final = "lovia.approval.decision"
APPROVAL_ACTOR: Final = "lovia.approval.actor"
APPROVAL_REASON: Final = "lovia.approval.reason"
"""Which lease grant of the run a resumed run's root span is (2, 3, ...)."""
RUN_REPLAYED: Final = "lovia.run.replayed"
RUN_TURNS: Final = "lovia.run.turns"
RUN_FINISH_REASON: Final = "lovia.run.finish_reason"
RUN_OUTCOME: Final = "lovia.run.outcome"
"""How a run attempt ended: ``completed``, ``failed`` (``error.type`` says why; burns the
error budget), ``cancelled`` (``RunCancelled``: someone stopped it), ``paused`` (waits for
an approval) or ``interrupted`` (``LeaseLost``: another worker took the run over)."""
RUN_FINAL_AGENT: Final = "lovia.run.final_agent"
RUN_USAGE_PREFIX: Final = "lovia.run.usage."
RUN_PARENT_ID: Final = "lovia.run.parent_id"
"""On a child run's span (an agent run as a tool): the run that started it."""
RUN_PARENT_CALL_ID: Final = "lovia.run.parent_call_id"
LABEL_PREFIX: Final = "lovia.label."
"""Attribution labels of a run: ``lovia.label.tenant`` etc. (run span, spend metrics)."""
RUN_NESTED: Final = "lovia.run.nested"
"""Metric label on every run-level metric (and the spend metrics): ``true`` for a child
run (an agent run as a tool), ``false`` for a top-level run. Count top-level runs with
``lovia_run_nested!="true"``; a child's spend is labelled with its top-level run's agent."""
TURN_USAGE_PREFIX: Final = "lovia.turn.usage."
TURN_INDEX: Final = "lovia.turn.index"
TURN_TOOL_CALLS: Final = "lovia.turn.tool_calls"
COST_USD: Final = "lovia.cost.usd"
"""The priced cost of this span's own work: a ``chat`` span's call; on ``invoke_agent``,
the run's own model calls only (never its child runs'), so summing it over the
``invoke_agent`` spans of a trace counts every call once. Absent on a ``chat`` span whose
cost is unknown (see ``COST_UNPRICED``)."""
COST_TOTAL_USD: Final = "lovia.cost.total_usd"
"""On ``invoke_agent`` only: the run's cost including its child runs' (what the run cost in
all). Sum it over top-level runs only, never together with ``lovia.cost.usd``."""
COST_UNPRICED: Final = "lovia.cost.unpriced"
"""Model calls whose cost is unknown (no price for the model, or no usage reported): 1
on such a ``chat`` span; on ``invoke_agent``, the count over the run and its children.
When present, the span's cost is a lower bound, not the cost."""
COST_SOURCE: Final = "lovia.cost.source"
"""On a priced ``chat`` span: what priced the call, ``genai-prices==<version>`` (the
table) or ``overrides@<hash>`` (a user override; the hash names the whole override set).
Absent when the cost is unknown."""
PRICE_TABLE_VERSION: Final = "lovia.price_table.version"
"""On ``invoke_agent`` and the resource: the prices in force, ``genai-prices==<version>``
plus ``+overrides@<hash>`` when any override is set (``none`` without the table)."""
FINISH_REASON_RAW: Final = "lovia.finish_reason.raw"
VIEW_HASH: Final = "lovia.view.hash"
VIEW_ENTRIES: Final = "lovia.view.entries"
VIEW_INJECTED: Final = "lovia.view.injected"
VIEW_ATTEMPT: Final = "lovia.view.attempt"
TOOL_IDEMPOTENCY_KEY: Final = "lovia.tool.idempotency_key"
TOOL_STARTED: Final = "lovia.tool.started"
TOOL_KNOWN: Final = "lovia.tool.known"
"""``false`` (only then) on the span of a call to a tool the agent does not have: the
model named a tool that does not exist."""
TOOL_IS_ERROR: Final = "lovia.tool.is_error"
TOOL_RECOVERED: Final = "lovia.tool.recovered"
"""``true`` on an ``execute_tool`` span of a resumed run that did NOT run the tool: the
call's outcome came from the run's tool ledger (see ``TOOL_OUTCOME``)."""
TOOL_OUTCOME: Final = "lovia.tool.outcome"
"""What a tool call came to: ``executed`` (the tool ran in this attempt), ``unknown``
(it was running when an earlier attempt died and is not idempotent, so it was not run
again), ``refused`` (never ran: denied, unknown tool, invalid arguments, handoff)."""
GUARDRAIL_NAME: Final = "lovia.guardrail.name"
GUARDRAIL_KIND: Final = "lovia.guardrail.kind"
GUARDRAIL_TRIPPED: Final = "lovia.guardrail.tripped"
GUARDRAIL_REASON: Final = "lovia.guardrail.reason"
HANDOFF_FROM: Final = "lovia.handoff.from_agent"
HANDOFF_TO: Final = "lovia.handoff.to_agent"
COMPACTION_KIND: Final = "lovia.compaction.kind"
COMPACTION_ENTRIES: Final = "lovia.compaction.entries"
COMPACTION_TOKENS_BEFORE: Final = "lovia.compaction.tokens_before"
COMPACTION_TOKENS_AFTER: Final = "lovia.compaction.tokens_after"
CHECKPOINT_KIND: Final = "lovia.checkpoint.kind"
CHECKPOINT_ENTRIES: Final = "lovia.checkpoint.entries"
CHECKPOINT_BYTES: Final = "lovia.checkpoint.bytes"
CHECKPOINT_DURATION: Final = "lovia.checkpoint.duration_s"
STORE: Final = "lovia.store"
SESSION_ENTRIES: Final = "lovia.session.entries"
PLUGIN_NAME: Final = "lovia.plugin.name"
RETRY_ATTEMPT: Final = "lovia.retry.attempt"
RETRY_DELAY: Final = "lovia.retry.delay_s"
RETRY_MESSAGE: Final = "lovia.retry.message"
CONTENT_REF: Final = "lovia.content.ref"
"""REFERENCE capture: ``lovia:run/<run id>/view/<view hash>`` (see ``content``)."""
CONTENT_ENTRIES: Final = "lovia.content.entries"
"""REFERENCE capture: ``<first entry id>..<last entry id>`` of the referenced view."""
CONTENT_URL: Final = "lovia.content.url"
CALL_PURPOSE: Final = "lovia.call.purpose"
"""Why lovia made a model call: ``main`` | ``repair`` | ``summary`` | ``what_if`` |
``eval`` (an LLM judge)."""

UNKNOWN_TOOL: Final = "_unknown"
"""The ``gen_ai.tool.name`` metric label of a tool the agent does not have."""

USAGE_FIELDS: Final = (
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
    "requests",
    "tool_calls",
)
"""``Usage`` fields copied under ``lovia.run.usage.*`` / ``lovia.turn.usage.*``."""

# -- metrics: name, unit --
M_TOKEN_USAGE: Final = "gen_ai.client.token.usage"
M_OPERATION_DURATION: Final = "gen_ai.client.operation.duration"
M_TTFC: Final = "gen_ai.client.operation.time_to_first_chunk"
M_AGENT_DURATION: Final = "gen_ai.invoke_agent.duration"
M_TOOL_DURATION: Final = "gen_ai.execute_tool.duration"
M_RUNS: Final = "lovia.runs"
M_TURNS: Final = "lovia.turns"
M_COST: Final = "lovia.cost"
M_TOKENS: Final = "lovia.tokens"
M_TOOL_CALLS: Final = "lovia.tool.calls"
M_TOOL_ERRORS: Final = "lovia.tool.errors"
M_RETRIES: Final = "lovia.provider.retries"
M_COMPACTIONS: Final = "lovia.compactions"
M_COST_UNPRICED: Final = "lovia.cost.unpriced"
M_TOOL_RECOVERED: Final = "lovia.tool.recovered"

TOKEN_BUCKETS: Final = (
    1,
    4,
    16,
    64,
    256,
    1024,
    4096,
    16384,
    65536,
    262144,
    1048576,
    4194304,
    16777216,
    67108864,
)
DURATION_BUCKETS: Final = (
    0.01,
    0.02,
    0.04,
    0.08,
    0.16,
    0.32,
    0.64,
    1.28,
    2.56,
    5.12,
    10.24,
    20.48,
    40.96,
    81.92,
)
AGENT_BUCKETS: Final = (0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 51.2, 102.4, 204.8, 409.6)
TURN_BUCKETS: Final = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)

METRIC_LABELS: Final[dict[str, frozenset[str]]] = {
    M_TOKEN_USAGE: frozenset(
        {
            OPERATION_NAME,
            PROVIDER_NAME,
            REQUEST_MODEL,
            RESPONSE_MODEL,
            TOKEN_TYPE,
            AGENT_NAME,
            CALL_PURPOSE,
            SERVER_ADDRESS,
            SERVER_PORT,
        }
    ),
    M_OPERATION_DURATION: frozenset(
        {
            OPERATION_NAME,
            PROVIDER_NAME,
            REQUEST_MODEL,
            RESPONSE_MODEL,
            AGENT_NAME,
            ERROR_TYPE,
            CALL_PURPOSE,
            SERVER_ADDRESS,
            SERVER_PORT,
        }
    ),
    M_TTFC: frozenset(
        {
            OPERATION_NAME,
            PROVIDER_NAME,
            REQUEST_MODEL,
            RESPONSE_MODEL,
            AGENT_NAME,
            CALL_PURPOSE,
            SERVER_ADDRESS,
            SERVER_PORT,
        }
    ),
    M_AGENT_DURATION: frozenset(
        {AGENT_NAME, OPERATION_NAME, PROVIDER_NAME, REQUEST_MODEL, ERROR_TYPE, RUN_NESTED}
    ),
    M_TOOL_DURATION: frozenset({TOOL_NAME, AGENT_NAME, ERROR_TYPE, OPERATION_NAME}),
    M_RUNS: frozenset({AGENT_NAME, RUN_OUTCOME, RUN_FINISH_REASON, ERROR_TYPE, RUN_NESTED}),
    M_TURNS: frozenset({AGENT_NAME, RUN_OUTCOME, RUN_NESTED}),
    M_COST: frozenset({AGENT_NAME, PROVIDER_NAME, REQUEST_MODEL, CALL_PURPOSE, RUN_NESTED}),
    M_COST_UNPRICED: frozenset(
        {AGENT_NAME, PROVIDER_NAME, REQUEST_MODEL, CALL_PURPOSE, RUN_NESTED}
    ),
    M_TOKENS: frozenset(
        {AGENT_NAME, PROVIDER_NAME, REQUEST_MODEL, TOKEN_TYPE, CALL_PURPOSE, RUN_NESTED}
    ),
    M_TOOL_CALLS: frozenset({TOOL_NAME, AGENT_NAME}),
    M_TOOL_ERRORS: frozenset({TOOL_NAME, AGENT_NAME, ERROR_TYPE}),
    M_TOOL_RECOVERED: frozenset({TOOL_NAME, AGENT_NAME, TOOL_OUTCOME}),
    M_RETRIES: frozenset({PROVIDER_NAME, REQUEST_MODEL, ERROR_TYPE}),
    M_COMPACTIONS: frozenset({AGENT_NAME, COMPACTION_KIND}),
}
"""The allowed label keys of every metric (no ids, no content: bounded cardinality).

``gen_ai.agent.name`` on every metric is the agent the run *started* with (the one
given to ``Runner.run``), also for the calls, tools and cost of agents it handed off
to, so per-run ratios by agent add up; spans name the agent that did the work. The spend
metrics (``lovia.cost``, ``lovia.tokens``, ``lovia.cost.unpriced``) of a child run name its
*top-level* run's starting agent (with ``lovia.run.nested=true``), so a top-level run's
cost includes its children's."""
