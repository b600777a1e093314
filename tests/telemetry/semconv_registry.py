"""The vendored GenAI/MCP convention model files (tests/fixtures/semconv-genai), loaded
into what a check needs: attribute types, span types (kind + attribute requirement levels),
events and metrics (instrument, unit, value type, attribute requirement levels).

``Registry.check_*`` return a list of problems (empty: conforms)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "semconv-genai"
RELEASE = ROOT / "model"
SCHEMAS = ROOT / "docs" / "gen-ai"
CONTENT_SCHEMAS = {
    "gen_ai.input.messages": "gen-ai-input-messages.json",
    "gen_ai.output.messages": "gen-ai-output-messages.json",
    "gen_ai.system_instructions": "gen-ai-system-instructions.json",
    "gen_ai.tool.definitions": "gen-ai-tool-definitions.json",
}
MAIN = ROOT / "main"
CHECKED = ("gen_ai.", "mcp.")
GROUP_FALLBACK = {  # groups main/ refers to that the release defines as span types
    "attributes.gen_ai.invoked_agent.internal.common": "gen_ai.invoke_agent.internal",
    "attributes.gen_ai.execute_tool.common": "gen_ai.execute_tool.internal",
}


def level_of(entry: Mapping[str, Any]) -> str:
    """``required`` | ``conditionally_required`` | ``recommended`` | ``opt_in``."""
    level = entry.get("requirement_level", "recommended")
    return next(iter(level)) if isinstance(level, dict) else str(level)


@dataclass
class Metric:
    name: str
    instrument: str
    unit: str
    value_type: str
    attributes: dict[str, str]


@dataclass
class Registry:
    attributes: dict[str, str] = field(default_factory=dict)
    """key → type (``string``, ``int``, ``double``, ``boolean``, ``string[]``, ``any``…)."""
    groups: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    spans: dict[str, tuple[str, list[dict[str, Any]]]] = field(default_factory=dict)
    events: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    raw_metrics: dict[str, dict[str, Any]] = field(default_factory=dict)

    # -- loading ----------------------------------------------------------------------

    def load(self, doc: Mapping[str, Any]) -> None:
        for attr in doc.get("attributes", []):
            kind = attr["type"]
            self.attributes[attr["key"]] = "enum" if isinstance(kind, dict) else str(kind)
        for group in doc.get("attribute_groups", []):
            self.groups[group["id"]] = group.get("attributes", [])
        for span in doc.get("spans", []):
            if "type" in span:
                self.spans[span["type"]] = (span["kind"], span.get("attributes", []))
        for event in doc.get("events", []):
            self.events[event["name"]] = event.get("attributes", [])
        for metric in doc.get("metrics", []):
            self.raw_metrics[metric["name"]] = metric

    def resolve(
        self, entries: Iterable[Mapping[str, Any]], seen: frozenset[str] = frozenset()
    ) -> dict[str, str]:
        """Attribute refs (groups expanded, later entries win) → requirement level."""
        out: dict[str, str] = {}
        for entry in entries:
            if "ref_group" in entry:
                gid = entry["ref_group"]
                if gid in seen:
                    continue
                if gid in self.groups:
                    out.update(self.resolve(self.groups[gid], seen | {gid}))
                elif gid.startswith("span.") and gid[5:] in self.spans:
                    out.update(self.span_attributes(gid[5:]))
                elif gid in GROUP_FALLBACK:
                    out.update(self.span_attributes(GROUP_FALLBACK[gid]))
                else:
                    raise KeyError(f"attribute group {gid} is defined nowhere")
            elif "ref" in entry:
                level = entry.get("requirement_level")
                prior = out.get(entry["ref"])
                out[entry["ref"]] = level_of(entry) if level is not None or prior is None else prior
        return out

    def span_attributes(self, span_type: str) -> dict[str, str]:
        return self.resolve(self.spans[span_type][1])

    def event_attributes(self, name: str) -> dict[str, str]:
        return self.resolve(self.events[name])

    def metric(self, name: str) -> Metric:
        raw = self.raw_metrics[name]
        value_type = raw.get("annotations", {}).get("code_generation", {})
        return Metric(
            name,
            raw["instrument"],
            str(raw["unit"]),
            value_type.get("metric_value_type", "double"),
            self.resolve(raw.get("attributes", [])),
        )

    # -- checks -----------------------------------------------------------------------

    def check_value(self, key: str, value: Any, where: str) -> list[str]:
        """A ``gen_ai.*`` / ``mcp.*`` attribute is defined and its value has its type."""
        if not key.startswith(CHECKED):
            return []
        kind = self.attributes.get(key)
        if kind is None:
            return [f"{where}: {key} is not in the registry"]
        ok = {
            "string": lambda v: isinstance(v, str),
            "enum": lambda v: isinstance(v, str),
            "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
            "double": lambda v: isinstance(v, float),
            "boolean": lambda v: isinstance(v, bool),
            "string[]": lambda v: (
                isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v)
            ),
            "any": lambda v: v is not None,
        }[kind](value)
        return [] if ok else [f"{where}: {key}={value!r} is not of type {kind}"]

    def check_attributes(
        self,
        attrs: Mapping[str, Any],
        allowed: Mapping[str, str],
        where: str,
        extensions: Iterable[str],
    ) -> list[str]:
        """Every required attribute present; every checked attribute typed and allowed."""
        problems = [
            f"{where}: required {key} is missing"
            for key, level in allowed.items()
            if level == "required" and key not in attrs
        ]
        extra = set(extensions)
        for key, value in attrs.items():
            if key in extra and key not in self.attributes:
                continue  # a documented extension the registry does not define
            problems += self.check_value(key, value, where)
            if key.startswith(CHECKED) and key not in allowed and key not in extra:
                problems.append(f"{where}: {key} is not an attribute of this convention")
        return problems


@cache
def load() -> Registry:
    """The release's model files, then the main-branch definitions (see SOURCE.md)."""
    registry = Registry()
    for root in (RELEASE, MAIN):
        for path in sorted(root.rglob("*.yaml")):
            if path.name != "manifest.yaml":
                registry.load(yaml.safe_load(path.read_text()))
    return registry


def decode(value: Any) -> Any:
    """A span attribute that holds JSON (content on spans) as the structure it encodes."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


@cache
def _validator(key: str) -> Any:
    import jsonschema

    schema = json.loads((SCHEMAS / CONTENT_SCHEMAS[key]).read_text())
    return jsonschema.validators.validator_for(schema)(schema)


def check_content(key: str, value: Any, where: str) -> list[str]:
    """A content attribute (structured, or JSON on a span) against its JSON schema."""
    if key not in CONTENT_SCHEMAS:
        return []
    plain = json.loads(json.dumps(decode(value)))  # log attributes hold tuples for lists
    errors = list(_validator(key).iter_errors(plain))
    return [f"{where}: {key} does not follow its schema: {e.message}" for e in errors[:3]]
