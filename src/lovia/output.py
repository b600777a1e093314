"""Structured output: how the final answer is requested and validated.

With ``output_type=str`` (the default) the final text is the output. Otherwise the
answer must be JSON matching the type's schema: requested natively when the provider
profile supports JSON-schema output, else through a contract appended to the system
prompt. Non-object types (scalars, lists, unions) are wrapped as ``{"result": ...}``
because providers require an object at the root.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import pydantic
from pydantic import TypeAdapter

from .errors import UserError
from .model import OutputSchema

__all__ = ["OutputMode", "OutputParseError", "output_mode"]

_FENCE = re.compile(r"^\s*```(?:json)?\s*\n?(.*?)\n?```\s*$", re.DOTALL)


class OutputParseError(Exception):
    """The final answer did not validate; ``errors`` is what the model is told."""

    def __init__(self, errors: str) -> None:
        super().__init__(errors)
        self.errors = errors


@dataclass(frozen=True, slots=True, kw_only=True)
class OutputMode:
    """How one agent's final answer is requested and parsed."""

    output_type: Any
    adapter: TypeAdapter[Any] | None
    schema: OutputSchema | None
    wrapped: bool
    native: bool

    @property
    def is_text(self) -> bool:
        return self.adapter is None

    def contract(self) -> str | None:
        """The prompted contract (only when the provider lacks native JSON schema)."""
        if self.schema is None or self.native:
            return None
        schema = json.dumps(dict(self.schema.schema), separators=(",", ":"))
        return (
            "When you give your final answer, reply with only a JSON object (no prose, no "
            f"code fence) that matches this JSON Schema:\n{schema}"
        )

    def parse(self, text: str) -> Any:
        if self.adapter is None:
            return text
        match = _FENCE.match(text)
        raw = match.group(1) if match else text.strip()
        try:
            if self.wrapped:
                data = json.loads(raw)
                if not isinstance(data, dict) or "result" not in data:
                    raise OutputParseError('expected a JSON object {"result": ...}')
                return self.adapter.validate_python(data["result"])
            return self.adapter.validate_json(raw)
        except json.JSONDecodeError as exc:
            raise OutputParseError(f"not valid JSON: {exc}") from None
        except pydantic.ValidationError as exc:
            raise OutputParseError(_errors_text(exc)) from None

    def dump(self, value: Any) -> Any:
        """JSON-able form of a validated output (for storage)."""
        if self.adapter is None:
            return value
        return self.adapter.dump_python(value, mode="json")

    def load(self, data: Any) -> Any:
        """Inverse of :meth:`dump`."""
        if self.adapter is None:
            return data
        return self.adapter.validate_python(data)


def _errors_text(exc: pydantic.ValidationError) -> str:
    parts: list[str] = []
    for err in exc.errors(include_url=False):
        loc = ".".join(str(p) for p in err["loc"]) or "(root)"
        parts.append(f"{loc}: {err['msg']}")
    return "; ".join(parts)


def output_mode(output_type: Any, *, native: bool) -> OutputMode:
    """Build the output mode for ``output_type`` given the provider's capability."""
    if output_type is str or output_type is None:
        return OutputMode(output_type=str, adapter=None, schema=None, wrapped=False, native=False)
    try:
        adapter = TypeAdapter[Any](output_type)
        schema = adapter.json_schema()
    except (pydantic.PydanticSchemaGenerationError, pydantic.PydanticUserError, TypeError) as e:
        raise UserError(
            f"output_type {output_type!r} has no JSON schema ({e})",
            hint="Use a pydantic model, dataclass, TypedDict, union or scalar type.",
        ) from e
    wrapped = schema.get("type") != "object"
    if wrapped:
        defs = schema.pop("$defs", None)
        schema = {
            "type": "object",
            "properties": {"result": schema},
            "required": ["result"],
            "additionalProperties": False,
        }
        if defs:
            schema["$defs"] = defs
    name = getattr(output_type, "__name__", "final_output")
    safe = "".join(c if c.isalnum() or c in "_-" else "_" for c in str(name))[:64]
    return OutputMode(
        output_type=output_type,
        adapter=adapter,
        schema=OutputSchema(name=safe or "final_output", schema=schema, strict=False),
        wrapped=wrapped,
        native=native,
    )
