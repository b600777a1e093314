"""Generate lovia's Grafana dashboards (dashboards/*.json).

The JSON files are the source of truth that Grafana provisions; this script only keeps
the PromQL consistent (environment join, label filters, Jaeger links). Edit here, then
run ``python dashboards/generate.py`` and commit both. ``tests/ops`` checks that the JSON
matches this script's output, that every expression parses and that every expression
returns data from a real Prometheus scraping lovia's metrics.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

PROM = {"type": "prometheus", "uid": "prometheus"}
JAEGER_UID = "jaeger"
RI = "$__rate_interval"
AGENT = 'gen_ai_agent_name=~"$agent"'
AGENT_RULE = (
    "Agent = the agent each run started with (the one given to Runner.run). The cost, "
    "tokens, model calls and tools of agents it handed off to count under that agent, so "
    "per-run figures add up; the chat spans name the agent that answered. The cost and "
    "tokens of child runs (agents used as tools) count under their top-level run's agent."
)
MODEL = 'gen_ai_request_model=~"$model"'
AGENT_MODEL = f"{AGENT}, {MODEL}"
TOP = 'lovia_run_nested!="true"'  # top-level runs (child runs are tools of a parent)
COUNTED = 'lovia_run_outcome=~"completed|failed"'  # the SLI's runs
FAILED = 'lovia_run_outcome="failed"'  # burns the error budget
ENDED = 'lovia_run_outcome!~"paused|interrupted"'  # ended for good: one per run
RUNS_TOP = f"{AGENT}, {TOP}"
RUNS_COUNTED = f"{AGENT}, {TOP}, {COUNTED}"
NESTED_RULE = (
    'Top-level runs only (lovia_run_nested!="true"): a child run (an agent used as a '
    "tool) is part of its parent run. Spend is labelled with the top-level run's agent, so "
    "a run's cost includes its children's."
)
SLI_RULE = (
    "SLI = completed / (completed + failed) top-level runs. Cancelled runs (a person "
    "stopped them), paused runs (waiting for an approval: they end later) and interrupted "
    "attempts (another worker took the run over) neither burn nor earn budget."
)
CACHE_READ = f'{AGENT_MODEL}, gen_ai_token_type="cache_read"'
INPUT = f'{AGENT_MODEL}, gen_ai_token_type="input"'


def env(vector: str) -> str:
    """Keep only series whose resource (target_info) matches $environment."""
    return (
        f"{vector} * on (job, instance) group_left (deployment_environment_name) "
        'target_info{deployment_environment_name=~"$environment"}'
    )


def rate(metric: str, selector: str, window: str = RI) -> str:
    return env(f"rate({metric}{{{selector}}}[{window}])")


def sum_rate(by: str, metric: str, selector: str, window: str = RI) -> str:
    group = f"sum by ({by}) " if by else "sum "
    return f"{group}({rate(metric, selector, window)})"


def ratio(by: str, metric: str, bad: str, total: str, window: str = RI) -> str:
    """bad/total; 0 (not "no data") when there is traffic but nothing bad."""
    num = sum_rate(by, metric, f"{total}, {bad}" if total else bad, window)
    den = sum_rate(by, metric, total, window)
    return f"({num} or {den} * 0) / {den}"


def tool_error_ratio(by: str) -> str:
    calls = sum_rate(by, "lovia_tool_calls_total", AGENT)
    return f"({sum_rate(by, 'lovia_tool_errors_total', AGENT)} or {calls} * 0) / {calls}"


def quantile(q: float, by: str, metric: str, selector: str) -> str:
    group = ", ".join(["le", *([by] if by else [])])
    return f"histogram_quantile({q}, sum by ({group}) ({rate(metric + '_bucket', selector)}))"


def token_quantile(q: float, selector: str) -> str:
    """Tokens per model call, quantile by model and token type, whichever names the
    process emits: the released histogram `gen_ai.client.token.usage` (label
    gen_ai_token_type) or, with OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental,
    `gen_ai.client.inference.operation.{input,output}_tokens` (the type is the name)."""
    by = "le, gen_ai_request_model, gen_ai_token_type"
    released = f"sum by ({by}) ({rate('gen_ai_client_token_usage_bucket', selector)})"
    newest = " or ".join(
        f"label_replace({rate(f'gen_ai_client_inference_operation_{t}_tokens_bucket', selector)}"
        f', "gen_ai_token_type", "{t}", "", "")'
        for t in ("input", "output")
    )
    return f"histogram_quantile({q}, {released} or sum by ({by}) ({newest}))"


SERIES_AGENT = "${__field.labels.gen_ai_agent_name}"  # time series: label of the clicked series
TABLE_AGENT = "${__data.fields.gen_ai_agent_name}"  # table: column of the clicked row


def jaeger_links(errors_only: bool = False, agent: str = SERIES_AGENT) -> list[dict]:
    """Data links to the `invoke_agent {agent}` spans of the clicked agent in Jaeger.

    Only for panels whose series carry `gen_ai_agent_name`.
    """
    query = {"queryType": "search", "service": "${service}", "refId": "A"}
    query["operation"] = f"invoke_agent {agent}"
    url = "${jaeger_url}/search?service=${service}&operation=invoke_agent%20" + agent
    if errors_only:
        query["tags"] = "error=true"
        url += "&tags=%7B%22error%22%3A%22true%22%7D"
    url += "&start=${__from}000&end=${__to}000&limit=50"
    return [
        {
            "title": f"Traces of invoke_agent {agent} (Grafana Explore, Jaeger)",
            "url": "",
            "internal": {"datasourceUid": JAEGER_UID, "datasourceName": "Jaeger", "query": query},
        },
        {"title": f"Traces of invoke_agent {agent} (Jaeger UI)", "url": url, "targetBlank": True},
    ]


class Board:
    """Accumulates panels on a 24-column grid."""

    def __init__(
        self, uid: str, title: str, description: str, variables: tuple[dict, ...] = ()
    ) -> None:
        self.uid, self.title, self.description = uid, title, description
        self.variables = variables
        self.panels: list[dict] = []
        self.x = self.y = self.row_h = 0

    def row(self, title: str, description: str = "") -> None:
        """A row heading across the grid; the panels added next go under it."""
        self.y, self.x, self.row_h = self.y + self.row_h, 0, 0
        self.panels.append(
            {
                "id": len(self.panels) + 1,
                "type": "row",
                "title": title,
                "description": description,
                "collapsed": False,
                "gridPos": {"x": 0, "y": self.y, "w": 24, "h": 1},
                "panels": [],
            }
        )
        self.y += 1

    def add(self, kind: str, title: str, targets: list[tuple[str, str]], **opts) -> None:
        width, height = opts.pop("w", 12), opts.pop("h", 8)
        repeat = opts.pop("repeat", None)
        if self.x + width > 24:
            self.x, self.y = 0, self.y + self.row_h
            self.row_h = 0
        panel = {
            "id": len(self.panels) + 1,
            "type": kind,
            "title": title,
            "description": opts.pop("description", ""),
            "datasource": PROM,
            "gridPos": {"x": self.x, "y": self.y, "w": width, "h": height},
            "targets": [_target(i, expr, legend, opts) for i, (expr, legend) in enumerate(targets)],
            "fieldConfig": {"defaults": _defaults(opts), "overrides": []},
            "options": _options(kind, opts),
        }
        if repeat:  # one panel per value of the variable, side by side
            panel.update(repeat=repeat, repeatDirection="h", maxPerRow=max(1, 24 // width))
        self.panels.append(panel)
        self.x += width
        self.row_h = max(self.row_h, height)

    def json(self) -> dict:
        return {
            "uid": self.uid,
            "title": self.title,
            "description": self.description,
            "tags": ["lovia"],
            "schemaVersion": 39,
            "version": 1,
            "editable": True,
            "graphTooltip": 1,
            "refresh": "30s",
            "time": {"from": "now-6h", "to": "now"},
            "timezone": "",
            "annotations": {"list": []},
            "links": [
                {
                    "title": "lovia dashboards",
                    "type": "dashboards",
                    "tags": ["lovia"],
                    "asDropdown": True,
                    "includeVars": True,
                    "keepTime": True,
                },
                {
                    "title": "Jaeger",
                    "type": "link",
                    "url": "${jaeger_url}/search?service=${service}",
                    "targetBlank": True,
                    "icon": "external link",
                },
            ],
            "templating": {"list": [*_variables(), *self.variables]},
            "panels": self.panels,
        }


def _target(index: int, expr: str, legend: str, opts: dict) -> dict:
    target = {"refId": chr(ord("A") + index), "datasource": PROM, "expr": expr}
    target["legendFormat"] = legend or "__auto"
    if opts.get("table"):
        target.update(instant=True, range=False, format="table")
    return target


def _defaults(opts: dict) -> dict:
    defaults: dict = {"unit": opts.get("unit", "short"), "links": opts.get("links", [])}
    if "min" in opts:
        defaults["min"] = opts["min"]
    if "max" in opts:
        defaults["max"] = opts["max"]
    steps = [{"color": "green", "value": None}]
    if "threshold" in opts:
        steps.append({"color": "red", "value": opts["threshold"]})
        defaults["custom"] = {"thresholdsStyle": {"mode": "line+area"}}
    defaults["thresholds"] = {"mode": "absolute", "steps": steps}
    return defaults


def _options(kind: str, opts: dict) -> dict:
    if kind == "stat":
        return {
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "colorMode": "value",
            "graphMode": "area",
        }
    if kind == "table":
        return {"showHeader": True, "sortBy": [{"displayName": "Value", "desc": True}]}
    return {
        "legend": {"displayMode": "table", "placement": "bottom", "calcs": ["mean", "max"]},
        "tooltip": {"mode": "multi", "sort": "desc"},
    }


def _query_var(
    name: str, label: str, query: str, description: str = "", all_value: str = ".*"
) -> dict:
    return {
        "type": "query",
        "name": name,
        "label": label,
        "description": description,
        "datasource": PROM,
        "definition": query,
        "query": {"query": query, "refId": f"{name}-variable"},
        "refresh": 2,
        "includeAll": True,
        "multi": True,
        "allValue": all_value,
        "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
        "sort": 1,
    }


def _text_var(name: str, label: str, value: str) -> dict:
    current = {"selected": False, "text": value, "value": value}
    return {"type": "textbox", "name": name, "label": label, "query": value, "current": current}


def _variables() -> list[dict]:
    return [
        _query_var(
            "environment",
            "Environment",
            "label_values(target_info, deployment_environment_name)",
        ),
        _query_var(
            "agent",
            "Agent",
            "label_values(lovia_runs_total, gen_ai_agent_name)",
            AGENT_RULE,
            all_value=".+",  # not the agent-less series lovia_runs_total starts with at 0
        ),
        _query_var(
            "model",
            "Model",
            "label_values(gen_ai_client_operation_duration_seconds_count, gen_ai_request_model)",
        ),
        _query_var(
            "queue",
            "Queue",
            "label_values(lovia_queue_deliveries_total, lovia_queue_name)",
            "Run queues of lovia workers (Redis Streams streams, Celery queues).",
        ),
        _text_var("service", "Service (OTEL_SERVICE_NAME, for Jaeger links)", "lovia"),
        _text_var("jaeger_url", "Jaeger UI URL", "http://localhost:16686"),
    ]


def overview() -> dict:
    b = Board(
        "lovia-overview", "lovia / Overview", "Runs, latency, tools and retries of lovia agents."
    )
    runs = "lovia_runs_total"
    run_hist = "gen_ai_invoke_agent_duration_seconds"
    chat_hist = "gen_ai_client_operation_duration_seconds"
    ended = f"{RUNS_TOP}, {ENDED}"
    b.add(
        "stat",
        "Runs/s",
        [(sum_rate("", runs, ended), "runs/s")],
        w=6,
        h=4,
        unit="reqps",
        description="Top-level runs that ended (paused runs and interrupted attempts end "
        "later, once). " + NESTED_RULE,
    )
    b.add(
        "stat",
        "Run failure ratio",
        [(ratio("", runs, FAILED, RUNS_COUNTED), "failed")],
        description=SLI_RULE,
        w=6,
        h=4,
        unit="percentunit",
        threshold=0.01,
    )
    b.add(
        "stat",
        "p95 run duration",
        [(quantile(0.95, "", run_hist, RUNS_TOP), "p95")],
        w=6,
        h=4,
        unit="s",
    )
    b.add(
        "stat",
        "Tool error ratio",
        [(tool_error_ratio(""), "tool errors")],
        w=6,
        h=4,
        unit="percentunit",
    )
    b.add(
        "timeseries",
        "Runs/s by agent and outcome",
        [
            (
                sum_rate("gen_ai_agent_name, lovia_run_outcome", runs, RUNS_TOP),
                "{{gen_ai_agent_name}} {{lovia_run_outcome}}",
            )
        ],
        unit="reqps",
        links=jaeger_links(),
    )
    b.add(
        "timeseries",
        "Run failure ratio by agent",
        [(ratio("gen_ai_agent_name", runs, FAILED, RUNS_COUNTED), "{{gen_ai_agent_name}}")],
        description=SLI_RULE,
        unit="percentunit",
        min=0,
        threshold=0.01,
        links=jaeger_links(errors_only=True),
    )
    b.add(
        "timeseries",
        "Run duration p50 / p95 / p99",
        [(quantile(q, "", run_hist, RUNS_TOP), f"p{int(q * 100)}") for q in (0.5, 0.95, 0.99)],
        description=NESTED_RULE,
        unit="s",
    )
    b.add(
        "timeseries",
        "Turns per run (p50 / p95 / mean) by agent",
        [
            (
                quantile(0.5, "gen_ai_agent_name", "lovia_turns", RUNS_TOP),
                "p50 {{gen_ai_agent_name}}",
            ),
            (
                quantile(0.95, "gen_ai_agent_name", "lovia_turns", RUNS_TOP),
                "p95 {{gen_ai_agent_name}}",
            ),
            (
                f"{sum_rate('gen_ai_agent_name', 'lovia_turns_sum', RUNS_TOP)} / "
                f"{sum_rate('gen_ai_agent_name', 'lovia_turns_count', RUNS_TOP)}",
                "mean {{gen_ai_agent_name}}",
            ),
        ],
        unit="short",
        links=jaeger_links(),
    )
    b.add(
        "timeseries",
        "Model-call latency p50 / p95 by model",
        [
            (
                quantile(0.5, "gen_ai_request_model", chat_hist, AGENT_MODEL),
                "p50 {{gen_ai_request_model}}",
            ),
            (
                quantile(0.95, "gen_ai_request_model", chat_hist, AGENT_MODEL),
                "p95 {{gen_ai_request_model}}",
            ),
        ],
        unit="s",
    )
    b.add(
        "timeseries",
        "Time to first chunk p50 / p95 by model (streaming)",
        [
            (
                quantile(
                    q,
                    "gen_ai_request_model",
                    "gen_ai_client_operation_time_to_first_chunk_seconds",
                    AGENT_MODEL,
                ),
                f"p{int(q * 100)} {{{{gen_ai_request_model}}}}",
            )
            for q in (0.5, 0.95)
        ],
        unit="s",
    )
    b.add(
        "timeseries",
        "Model calls/s by model and error type",
        [
            (
                sum_rate("gen_ai_request_model, error_type", f"{chat_hist}_count", AGENT_MODEL),
                "{{gen_ai_request_model}} {{error_type}}",
            )
        ],
        unit="reqps",
    )
    b.add(
        "timeseries",
        "Provider retries/s by provider, model and error type",
        [
            (
                sum_rate(
                    "gen_ai_provider_name, gen_ai_request_model, error_type",
                    "lovia_provider_retries_total",
                    MODEL,
                ),
                "{{gen_ai_provider_name}} {{gen_ai_request_model}} {{error_type}}",
            )
        ],
        unit="reqps",
    )
    b.add(
        "timeseries",
        "Tool calls/s by tool",
        [(sum_rate("gen_ai_tool_name", "lovia_tool_calls_total", AGENT), "{{gen_ai_tool_name}}")],
        unit="reqps",
    )
    b.add(
        "timeseries",
        "Tool error ratio by tool",
        [(tool_error_ratio("gen_ai_tool_name"), "{{gen_ai_tool_name}}")],
        unit="percentunit",
        min=0,
    )
    b.add(
        "timeseries",
        "Tool duration p95 by tool",
        [
            (
                quantile(0.95, "gen_ai_tool_name", "gen_ai_execute_tool_duration_seconds", AGENT),
                "{{gen_ai_tool_name}}",
            )
        ],
        unit="s",
    )
    b.add(
        "timeseries",
        "Compactions/s by agent and kind",
        [
            (
                sum_rate(
                    "gen_ai_agent_name, lovia_compaction_kind", "lovia_compactions_total", AGENT
                ),
                "{{gen_ai_agent_name}} {{lovia_compaction_kind}}",
            )
        ],
        unit="reqps",
    )
    return b.json()


def cost() -> dict:
    b = Board(
        "lovia-cost",
        "lovia / Cost",
        "Spend (USD) and tokens of every model call lovia makes (main, repair, summary, "
        "what-if). " + AGENT_RULE,
    )
    c, t = "lovia_cost_total", "lovia_tokens_total"
    by_model = "gen_ai_provider_name, gen_ai_request_model"
    spend_range = f"sum({env(f'increase({c}{{{AGENT_MODEL}}}[$__range])')})"
    cache = f"{sum_rate('', t, CACHE_READ)} / {sum_rate('', t, INPUT)}"
    ended = f"{RUNS_TOP}, {ENDED}"
    per_run = f"{sum_rate('', c, AGENT_MODEL)} / {sum_rate('', 'lovia_runs_total', ended)}"
    b.add("stat", "Spend in time range", [(spend_range, "USD")], w=6, h=4, unit="currencyUSD")
    b.add(
        "stat",
        "USD per hour (now)",
        [(f"{sum_rate('', c, AGENT_MODEL)} * 3600", "USD/h")],
        w=6,
        h=4,
        unit="currencyUSD",
    )
    b.add(
        "stat",
        "Cache hit ratio (cache_read / input)",
        [(cache, "hit ratio")],
        w=6,
        h=4,
        unit="percentunit",
    )
    b.add(
        "stat",
        "Cost per run",
        [(per_run, "USD/run")],
        w=6,
        h=4,
        unit="currencyUSD",
        description=NESTED_RULE,
    )
    unpriced = f"sum({env(f'increase(lovia_cost_unpriced_total{{{AGENT_MODEL}}}[$__range])')})"
    b.add(
        "stat",
        "Unpriced model calls in time range",
        [(unpriced, "calls")],
        w=24,
        h=4,
        unit="short",
        threshold=1,
        description="Model calls whose cost is unknown (no price for the model, or the "
        "provider sent no usage). When this is not 0, every USD figure here is a lower "
        "bound: set a price with lovia.telemetry.set_price.",
    )
    b.add(
        "timeseries",
        "USD per hour by agent",
        [(f"{sum_rate('gen_ai_agent_name', c, AGENT_MODEL)} * 3600", "{{gen_ai_agent_name}}")],
        description=AGENT_RULE,
        unit="currencyUSD",
        links=jaeger_links(),
    )
    b.add(
        "timeseries",
        "USD per hour by model",
        [
            (
                f"{sum_rate(by_model, c, AGENT_MODEL)} * 3600",
                "{{gen_ai_provider_name}} {{gen_ai_request_model}}",
            )
        ],
        unit="currencyUSD",
    )
    b.add(
        "timeseries",
        "USD per day (rolling 24 h) by agent",
        [
            (
                f"sum by (gen_ai_agent_name) ({env(f'increase({c}{{{AGENT_MODEL}}}[1d])')})",
                "{{gen_ai_agent_name}}",
            )
        ],
        description=AGENT_RULE,
        unit="currencyUSD",
    )
    b.add(
        "timeseries",
        "USD per day (rolling 24 h) by model",
        [
            (
                f"sum by ({by_model}) ({env(f'increase({c}{{{AGENT_MODEL}}}[1d])')})",
                "{{gen_ai_provider_name}} {{gen_ai_request_model}}",
            )
        ],
        unit="currencyUSD",
    )
    b.add(
        "timeseries",
        "Tokens/s by type",
        [(sum_rate("gen_ai_token_type", t, AGENT_MODEL), "{{gen_ai_token_type}}")],
        description="cache_read/cache_write are subsets of input; reasoning is a subset of output.",
        unit="short",
    )
    b.add(
        "timeseries",
        "Cache hit ratio by model (cache_read / input)",
        [
            (
                f"{sum_rate(by_model, t, CACHE_READ)} / {sum_rate(by_model, t, INPUT)}",
                "{{gen_ai_request_model}}",
            )
        ],
        unit="percentunit",
        min=0,
        max=1,
    )
    b.add(
        "timeseries",
        "Cost per run by agent",
        [
            (
                f"{sum_rate('gen_ai_agent_name', c, AGENT_MODEL)} / "
                f"{sum_rate('gen_ai_agent_name', 'lovia_runs_total', ended)}",
                "{{gen_ai_agent_name}}",
            )
        ],
        description=AGENT_RULE,
        unit="currencyUSD",
        links=jaeger_links(),
    )
    b.add(
        "timeseries",
        "Tokens per model call p95 by model and type",
        [
            (
                token_quantile(0.95, AGENT_MODEL),
                "{{gen_ai_request_model}} {{gen_ai_token_type}}",
            )
        ],
        unit="short",
    )
    b.add(
        "table",
        "Top spenders in time range (agent x model)",
        [
            (
                f"topk(10, sum by (gen_ai_agent_name, {by_model}) "
                f"({env(f'increase({c}{{{AGENT_MODEL}}}[$__range])')}))",
                "",
            )
        ],
        w=24,
        description=AGENT_RULE,
        unit="currencyUSD",
        table=True,
        links=jaeger_links(agent=TABLE_AGENT),
    )
    b.add(
        "timeseries",
        "USD per hour by call purpose",
        [(f"{sum_rate('lovia_call_purpose', c, AGENT_MODEL)} * 3600", "{{lovia_call_purpose}}")],
        description="main = the agent's turns, repair = structured-output repairs, "
        "summary = context compaction, what_if = lovia replay --model.",
        w=24,
        unit="currencyUSD",
    )
    for label, who in (("tenant", "tenant"), ("user", "user")):
        key = f"lovia_label_{label}"
        has = f'{AGENT_MODEL}, {key}!=""'
        b.add(
            "timeseries",
            f"USD per day (rolling 24 h) by {who}",
            [
                (
                    f"topk(10, sum by ({key}) ({env(f'increase({c}{{{has}}}[1d])')}))",
                    f"{{{{{key}}}}}",
                )
            ],
            description=f"Runs labelled {label}=... (Runner.run(labels=...)). Past the "
            "label cap (LOVIA_LABEL_VALUES_MAX values per key and process) values read "
            "'other'. Costs corrected later by lovia reprice are not rewritten here: see "
            "the Cost corrections row.",
            unit="currencyUSD",
        )
        b.add(
            "table",
            f"Spend by {who} in time range",
            [(f"topk(20, sum by ({key}) ({env(f'increase({c}{{{has}}}[$__range])')}))", "")],
            description=f"The top {who}s by spend; runs without a {label} label are left out.",
            unit="currencyUSD",
            table=True,
        )
    _corrections(b, spend_range)
    return b.json()


CORRECTION_RULE = (
    "lovia reprice prices stored runs again and exports each change as the gauge "
    "lovia_cost_correction (one series per reprice process: its own service.instance.id). "
    "The exporter drops the series 15 min after the process ends (metric_expiration), so "
    "these panels read the last value of every series seen in the time range: a "
    "correction counts in the ranges that overlap the 15 min after its reprice, whenever "
    "the repriced runs ran. lovia_cost_total keeps the cost measured at the time."
)


def corrections(by: str) -> str:
    """The cost changes lovia reprice reported in the time range, summed over processes."""
    last = f"last_over_time(lovia_cost_correction{{{AGENT}}}[$__range])"
    target = 'target_info{deployment_environment_name=~"$environment"}'
    joined = (
        f"{last} * on (job, instance) group_left (deployment_environment_name) "
        f"last_over_time({target}[$__range])"  # the process's target_info expired too
    )
    return f"sum by ({by}) ({joined})" if by else f"sum ({joined})"


def _corrections(b: Board, spend_range: str) -> None:
    b.row("Cost corrections (lovia reprice)", CORRECTION_RULE)
    b.add(
        "stat",
        "Cost corrections reported in time range",
        [(corrections(""), "USD")],
        w=8,
        h=4,
        unit="currencyUSD",
        description=CORRECTION_RULE,
    )
    b.add(
        "stat",
        "Spend in time range, corrections included",
        [(f"({spend_range} or vector(0)) + ({corrections('')} or vector(0))", "USD")],
        w=16,
        h=4,
        unit="currencyUSD",
        description="Spend in time range plus the corrections reported in it (they carry "
        "no model label: the Model filter does not narrow them). " + CORRECTION_RULE,
    )
    b.add(
        "table",
        "Cost corrections in time range by agent and tenant",
        [(corrections("gen_ai_agent_name, lovia_label_tenant"), "")],
        w=24,
        description=CORRECTION_RULE + " " + AGENT_RULE,
        unit="currencyUSD",
        table=True,
    )


EVALUATOR = 'gen_ai_evaluation_name=~"$evaluator"'
QUALITY_RULE = (
    "Scores are 0..1, from lovia.eval.score: online evaluation of sampled production runs "
    "(mode online) and eval suites run against a baseline or a candidate (baseline, "
    "candidate). Agent = the evaluated run's starting agent."
)


def _evaluator_var() -> dict:
    return _query_var(
        "evaluator",
        "Evaluator",
        "label_values(lovia_eval_score_count, gen_ai_evaluation_name)",
        "One score panel per evaluator (gen_ai.evaluation.name) in the Quality row.",
        all_value=".+",
    )


def quality_row(b: Board) -> None:
    """Evaluator scores over time: a panel per evaluator (repeated over $evaluator)."""
    b.row("Quality: evaluator scores", QUALITY_RULE)
    scores = f"{AGENT}, {EVALUATOR}"
    by = "gen_ai_agent_name, lovia_eval_mode"
    b.add(
        "timeseries",
        "Mean score: $evaluator",
        [
            (
                f"{sum_rate(by, 'lovia_eval_score_sum', scores)} / "
                f"{sum_rate(by, 'lovia_eval_score_count', scores)}",
                "{{gen_ai_agent_name}} {{lovia_eval_mode}}",
            )
        ],
        description="Mean score of the results scored in each interval. " + QUALITY_RULE,
        unit="short",
        min=0,
        max=1,
        w=8,
        repeat="evaluator",
        links=jaeger_links(),
    )
    results = "lovia_eval_results_total"
    b.add(
        "timeseries",
        "Failing results by evaluator",
        [
            (
                ratio(
                    "gen_ai_evaluation_name, lovia_eval_mode",
                    results,
                    'gen_ai_evaluation_score_label="fail"',
                    scores,
                ),
                "{{gen_ai_evaluation_name}} {{lovia_eval_mode}}",
            )
        ],
        description="Share of scored results labelled fail. The quality SLO counts the "
        "online ones (lovia:eval_failure:ratio_rate*). " + QUALITY_RULE,
        unit="percentunit",
        min=0,
        max=1,
        w=24,
    )


def _burn(window: str) -> str:
    return (
        f"lovia:run_failure:ratio_rate{window}{{{AGENT}}} / scalar(1 - lovia:run_success:objective)"
    )


def slo() -> dict:
    b = Board(
        "lovia-slo",
        "lovia / SLO",
        "Run success SLO (objective from the recording rule "
        "lovia:run_success:objective, 99 % by default) and error-budget burn rates; "
        "evaluator scores over time (the Quality row).",
        variables=(_evaluator_var(),),
    )
    runs = "lovia_runs_total"
    success_30d = f"1 - {ratio('', runs, FAILED, RUNS_COUNTED, '30d')}"
    budget_30d = (
        f"1 - ({ratio('', runs, FAILED, RUNS_COUNTED, '30d')}) / "
        "scalar(1 - lovia:run_success:objective)"
    )
    b.add(
        "stat", "Run success ratio (30 d)", [(success_30d, "success")], w=6, h=4, unit="percentunit"
    )
    b.add(
        "stat",
        "Objective",
        [("lovia:run_success:objective", "objective")],
        w=6,
        h=4,
        unit="percentunit",
    )
    b.add(
        "stat",
        "Error budget remaining (30 d)",
        [(budget_30d, "remaining")],
        w=6,
        h=4,
        unit="percentunit",
    )
    b.add(
        "table",
        "Firing / pending lovia alerts",
        [
            (
                "sum by (alertname, alertstate, gen_ai_agent_name, severity) "
                '(ALERTS{alertname=~"Lovia.*"})',
                "",
            )
        ],
        w=6,
        h=4,
        table=True,
    )
    b.add(
        "timeseries",
        "Run success ratio vs objective by agent",
        [
            (
                f"1 - {ratio('gen_ai_agent_name', runs, FAILED, RUNS_COUNTED)}",
                "{{gen_ai_agent_name}}",
            ),
            ("lovia:run_success:objective", "objective"),
        ],
        unit="percentunit",
        max=1,
        links=jaeger_links(errors_only=True),
    )
    b.add(
        "timeseries",
        "Error budget remaining (30 d) by agent",
        [
            (
                f"1 - ({ratio('gen_ai_agent_name', runs, FAILED, RUNS_COUNTED, '30d')}) / "
                "scalar(1 - lovia:run_success:objective)",
                "{{gen_ai_agent_name}}",
            )
        ],
        unit="percentunit",
        max=1,
    )
    pairs = (
        ("1h", "5m", 14.4, "page"),
        ("6h", "30m", 6, "page"),
        ("1d", "2h", 3, "ticket"),
        ("3d", "6h", 1, "ticket"),
    )
    for long, short, burn, severity in pairs:
        b.add(
            "timeseries",
            f"Burn rate {long} & {short} ({severity} at {burn}x)",
            [
                (_burn(long), f"{{{{gen_ai_agent_name}}}} {long}"),
                (_burn(short), f"{{{{gen_ai_agent_name}}}} {short}"),
            ],
            description="Burn rate = failure ratio / (1 - objective). Both windows above "
            f"{burn} for one agent (with at least 20 runs in {long}) fire the alert. "
            "From the recording rules the alerts use: per agent, all environments.",
            unit="short",
            min=0,
            threshold=burn,
            w=6,
            links=jaeger_links(errors_only=True),
        )
    b.add(
        "timeseries",
        "Failed runs/s by error type",
        [
            (
                sum_rate("gen_ai_agent_name, error_type", runs, f"{RUNS_TOP}, {FAILED}"),
                "{{gen_ai_agent_name}} {{error_type}}",
            )
        ],
        unit="reqps",
        links=jaeger_links(errors_only=True),
    )
    b.add(
        "timeseries",
        "Cancelled runs/s by agent (not in the SLI)",
        [
            (
                sum_rate("gen_ai_agent_name", runs, f'{RUNS_TOP}, lovia_run_outcome="cancelled"'),
                "{{gen_ai_agent_name}}",
            )
        ],
        description=SLI_RULE,
        unit="reqps",
    )
    b.add(
        "timeseries",
        "Runs/s by finish reason",
        [(sum_rate("lovia_run_finish_reason", runs, RUNS_TOP), "{{lovia_run_finish_reason}}")],
        unit="reqps",
    )
    _queue_panels(b)
    quality_row(b)
    return b.json()


QUEUE = 'lovia_queue_name=~"$queue"'


def _queue_panels(b: Board) -> None:
    """Queue depth, deliveries, dead letters and busy workers of lovia's run queues."""
    depth = env(f'lovia_queue_depth{{{QUEUE}, lovia_queue_state="waiting"}}')
    b.add(
        "timeseries",
        "Queue: tasks waiting",
        [(f"max by (lovia_queue_name) ({depth})", "{{lovia_queue_name}}")],
        description="Run tasks not delivered to a worker yet (the front queue included), "
        "as the workers last measured them (every worker measures the whole queue: the "
        "largest figure, not their sum).",
        w=6,
    )
    b.add(
        "timeseries",
        "Queue: deliveries/s",
        [
            (
                sum_rate("lovia_queue_redelivery", "lovia_queue_deliveries_total", QUEUE),
                "redelivery={{lovia_queue_redelivery}}",
            )
        ],
        description="Tasks delivered to workers; redeliveries are takeovers from lost "
        "workers, retries and runs handed back at shutdown.",
        unit="reqps",
        w=6,
    )
    dead = env(f"increase(lovia_queue_dead_letters_total{{{QUEUE}}}[1h])")
    b.add(
        "timeseries",
        "Queue: dead letters per hour",
        [
            (
                f"sum by (lovia_queue_dead_letter_reason) ({dead})",
                "{{lovia_queue_dead_letter_reason}}",
            )
        ],
        description="Runs a queue gave up on (poison: it killed max_kills workers; "
        "max_deliveries; unknown_agent). lovia runs --status dead_lettered lists them.",
        w=6,
    )
    busy = env(f"lovia_queue_runs_in_flight{{{QUEUE}}}")
    b.add(
        "timeseries",
        "Queue: busy worker processes",
        [(f"count by (lovia_queue_name) (({busy}) > 0)", "{{lovia_queue_name}}")],
        description="Worker processes executing at least one run now.",
        w=6,
    )


BOARDS = {"lovia-overview.json": overview, "lovia-cost.json": cost, "lovia-slo.json": slo}


def render() -> dict[str, str]:
    return {name: json.dumps(build(), indent=2) + "\n" for name, build in BOARDS.items()}


def main() -> int:
    here = Path(__file__).resolve().parent
    for name, text in render().items():
        (here / name).write_text(text)
        print(f"wrote {here / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
