# pyright: reportUnnecessaryIsInstance=false
# (JSON schemas are untyped data: every shape is checked at run time)
"""AutoModel: a test model that needs no script.

It reads what the request offers: on the first call it calls every tool (or the ones
named) with arguments made from each tool's JSON schema, and once the results are back
it answers with a value valid for the output schema (or a short text naming the results).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, cast

from ..model import ModelProfile, ModelRequest, StreamItem
from ..transcript import InputEntry, ToolCallEntry, ToolResultEntry
from ._models import FakeProvider, Reply, ScriptError, ToolCallSpec

__all__ = ["AutoModel", "example_value"]

_MAX_DEPTH = 12
_DEFAULT = object()


class AutoModel(FakeProvider):
    """Calls every tool with schema-valid arguments, then returns a valid final output.

    ``call_tools``: ``"all"`` (default) or the names to call; handoff tools
    (``transfer_to_…``) are called only when named, since a handoff ends the agent's turn.
    ``text``: the final answer for text output (default: the tool results, as JSON).
    Structured output is always valid for the agent's ``output_type``: the model
    advertises native JSON-schema support, so the schema arrives with each request.
    """

    def __init__(
        self,
        *,
        call_tools: str | Sequence[str] = "all",
        text: str | None = None,
        model: str = "auto",
        profile: ModelProfile | None = None,
        provider: str = "test",
    ) -> None:
        super().__init__(model, profile or ModelProfile(native_json_schema=True), provider)
        if isinstance(call_tools, str) and call_tools != "all":
            raise ScriptError(
                f"AutoModel(call_tools={call_tools!r})",
                hint='Pass "all" or a list of tool names, e.g. call_tools=["lookup_order"].',
            )
        self._call_tools = call_tools
        self._text = text

    def __repr__(self) -> str:
        return f"AutoModel({len(self.requests)} calls)"

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        self.requests.append(request)
        async for item in self._emit(request, self._reply(request)):
            yield item

    def _reply(self, request: ModelRequest) -> Reply:
        calls = [] if _called_this_turn(request) else self._calls(request)
        if calls:
            return Reply(tool_calls=tuple(calls))
        if request.output_schema is not None:
            value = example_value(request.output_schema.schema)
            return Reply(text=json.dumps(value))
        return Reply(text=self._text if self._text is not None else _results_text(request))

    def _calls(self, request: ModelRequest) -> list[ToolCallSpec]:
        out: list[ToolCallSpec] = []
        for spec in request.tools:
            if self._call_tools == "all":
                if spec.name.startswith("transfer_to_"):
                    continue
            elif spec.name not in self._call_tools:
                continue
            arguments = example_value(spec.parameters)
            out.append(ToolCallSpec(spec.name, json.dumps(arguments), f"auto_{len(out) + 1}"))
        return out


def _called_this_turn(request: ModelRequest) -> bool:
    """Whether tools were called since the last user input (then it is time to answer)."""
    for entry in reversed(request.messages):
        if isinstance(entry, ToolCallEntry):
            return True
        if isinstance(entry, InputEntry):
            return False
    return False


def _results_text(request: ModelRequest) -> str:
    results = {e.name: e.content for e in request.messages if isinstance(e, ToolResultEntry)}
    return json.dumps(results, ensure_ascii=False) if results else "auto answer"


def example_value(schema: Mapping[str, Any]) -> Any:
    """A value valid for the JSON ``schema`` (objects get every property)."""
    defs = cast("Mapping[str, Any]", schema.get("$defs") or schema.get("definitions") or {})
    return _value(schema, defs, 0)


def _value(schema: Any, defs: Mapping[str, Any], depth: int) -> Any:
    if not isinstance(schema, Mapping) or depth > _MAX_DEPTH:
        return None
    node = cast("Mapping[str, Any]", schema)
    fixed = _fixed(node, defs, depth)
    if fixed is not _DEFAULT:
        return fixed
    kind = node.get("type")
    if isinstance(kind, list):
        kinds = [k for k in cast("list[Any]", kind) if k != "null"] or ["null"]
        kind = kinds[0]
    if kind == "object" or "properties" in node:
        return _object(node, defs, depth)
    if kind == "array":
        item = _value(node.get("items", {}), defs, depth + 1)
        return [item] * max(1, int(node.get("minItems", 1)))
    if kind in ("integer", "number"):
        return _number(node, kind)
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    if kind == "string":
        return _string(node)
    return "example"


def _fixed(node: Mapping[str, Any], defs: Mapping[str, Any], depth: int) -> Any:
    """Values the schema pins down: const, enum, default, $ref, anyOf/oneOf, allOf."""
    if "const" in node:
        return node["const"]
    if node.get("enum"):
        return cast("list[Any]", node["enum"])[0]
    ref = node.get("$ref")
    if isinstance(ref, str):
        return _value(defs.get(ref.rsplit("/", 1)[-1], {}), defs, depth + 1)
    for key in ("anyOf", "oneOf"):
        options = node.get(key)
        if isinstance(options, list) and options:
            typed = [o for o in cast("list[Any]", options) if o != {"type": "null"}]
            return _value((typed or cast("list[Any]", options))[0], defs, depth + 1)
    parts = node.get("allOf")
    if isinstance(parts, list):
        merged: dict[str, Any] = {}
        for part in cast("list[Any]", parts):
            part_node = part
            if isinstance(part, Mapping) and "$ref" in part:
                ref_name = str(cast("Mapping[str, Any]", part)["$ref"]).rsplit("/", 1)[-1]
                part_node = defs.get(ref_name, {})
            if isinstance(part_node, Mapping):
                merged.update(cast("Mapping[str, Any]", part_node))
        return _value(merged, defs, depth + 1)
    return _DEFAULT


def _object(node: Mapping[str, Any], defs: Mapping[str, Any], depth: int) -> dict[str, Any]:
    props = cast("Mapping[str, Any]", node.get("properties") or {})
    out = {name: _value(sub, defs, depth + 1) for name, sub in props.items()}
    extra = node.get("additionalProperties")
    if not props and isinstance(extra, Mapping):
        out["key"] = _value(extra, defs, depth + 1)
    return out


def _number(node: Mapping[str, Any], kind: str) -> int | float:
    low = node.get("minimum", node.get("exclusiveMinimum"))
    high = node.get("maximum", node.get("exclusiveMaximum"))
    value: float = 1
    if isinstance(low, int | float):
        value = low + (1 if "exclusiveMinimum" in node and "minimum" not in node else 0)
    elif isinstance(high, int | float) and value > high:
        value = high - (1 if "exclusiveMaximum" in node and "maximum" not in node else 0)
    step = node.get("multipleOf")
    if isinstance(step, int | float) and step > 0:
        value = -(-value // step) * step
    return int(value) if kind == "integer" else float(value)


_FORMATS = {
    "date": "2026-01-01",
    "date-time": "2026-01-01T00:00:00Z",
    "time": "00:00:00",
    "email": "user@example.com",
    "uri": "https://example.com/",
    "uuid": "00000000-0000-4000-8000-000000000000",
    "duration": "P1D",
    "ipv4": "127.0.0.1",
}


def _string(node: Mapping[str, Any]) -> str:
    fmt = node.get("format")
    if isinstance(fmt, str) and fmt in _FORMATS:
        return _FORMATS[fmt]
    text = "a"
    low = node.get("minLength")
    if isinstance(low, int) and low > len(text):
        text = "a" * low
    high = node.get("maxLength")
    if isinstance(high, int) and len(text) > high:
        text = text[:high]
    return text
