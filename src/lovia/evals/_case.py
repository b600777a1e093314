"""The case format: one folder per pinned run or turn, JSON and JSON Lines, versioned.

```
case.json         format_version, name, source (run id, trace id, store), start, agent,
                  expected output, evaluators
transcript.jsonl  every transcript entry of the run (session history first), one a line
views.jsonl       the recorded view of every model call from the start on (resolved
                  view records: order, replacements, injected, system, tools, hash)
responses.jsonl   what the model answered to each view: the ids of its entries, usage
tools.jsonl       the recorded tool results, keyed by call (name + arguments)
```

The first ``start.entries`` lines of ``transcript.jsonl`` are where the case starts (the
session history and the run's entries before turn ``start.turn``); the rest are what
the original run did next. Every file is plain, sorted-key JSON so a pinned case diffs
well under version control.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from ..errors import LoviaError, SchemaVersionError, UserError
from ..transcript import TranscriptEntry, entry_from_dict, entry_to_dict
from ..usage import Usage
from ..view.record import ViewRecord

__all__ = [
    "FORMAT_VERSION",
    "Case",
    "CaseError",
    "PinnedResponse",
    "PinnedToolResult",
    "call_key",
    "load_case",
    "load_cases",
]

FORMAT_VERSION = 1
"""The version of the case folder format this lovia writes (and the newest it reads)."""

_CASE_FILE = "case.json"


class CaseError(LoviaError):
    """A case folder is missing, damaged, or written by a newer lovia."""


def call_key(name: str, arguments: str) -> str:
    """``name`` + the arguments in canonical JSON (key order and spacing do not matter)."""
    try:
        canonical = json.dumps(json.loads(arguments or "{}"), sort_keys=True, ensure_ascii=False)
    except ValueError:
        canonical = arguments  # not JSON: only the very same text matches
    return f"{name}:{canonical}"


@dataclass(frozen=True, slots=True, kw_only=True)
class PinnedToolResult:
    """One recorded tool call and its result."""

    call_id: str
    name: str
    arguments: str
    content: str
    is_error: bool = False
    turn: int = 0

    @property
    def key(self) -> str:
        return call_key(self.name, self.arguments)

    def to_dict(self) -> dict[str, Any]:
        return {
            "call_id": self.call_id,
            "name": self.name,
            "arguments": self.arguments,
            "content": self.content,
            "is_error": self.is_error,
            "turn": self.turn,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class PinnedResponse:
    """What the model answered to one recorded view (by the ids of its entries)."""

    turn: int
    attempt: int
    entry_ids: tuple[str, ...]
    usage: Usage = field(default_factory=Usage)
    finish_reason: str = "stop"
    error: str | None = None
    """``context_overflow`` when this call failed and the loop retried with attempt + 1."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "turn": self.turn,
            "attempt": self.attempt,
            "entry_ids": list(self.entry_ids),
            "usage": self.usage.to_dict(),
            "finish_reason": self.finish_reason,
            "error": self.error,
        }


@dataclass(kw_only=True)
class Case:
    """A pinned run (or one turn of it): everything needed to re-run it offline."""

    name: str
    source: dict[str, Any]
    """Where it came from: run_id, trace_id, store (secrets masked), session_id, turn,
    pinned_at, lovia version."""
    start_turn: int
    start_entries: int
    """How many leading transcript entries form the start (the rest: the recording)."""
    start_usage: Usage
    start_agent: str
    agent: dict[str, Any]
    """The agent as recorded at the start: name, model, provider, system, tools,
    settings, output_schema."""
    transcript: list[TranscriptEntry]
    views: list[ViewRecord]
    responses: list[PinnedResponse]
    tool_results: list[PinnedToolResult]
    expected: dict[str, Any] = field(default_factory=dict[str, Any])
    """The recorded outcome: output, finish_reason, status, turns."""
    evaluators: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    """Evaluator specs stored with the case (``{"kind": "contains", ...}``)."""
    notes: list[str] = field(default_factory=list[str])
    path: Path | None = None

    @property
    def start(self) -> list[TranscriptEntry]:
        return self.transcript[: self.start_entries]

    @property
    def tools(self) -> list[dict[str, Any]]:
        return cast(list[dict[str, Any]], self.agent.get("tools", []))

    def results_by_key(self) -> dict[str, list[PinnedToolResult]]:
        out: dict[str, list[PinnedToolResult]] = {}
        for r in self.tool_results:
            out.setdefault(r.key, []).append(r)
        return out

    def save(self, folder: str | Path) -> Path:
        """Write the case folder (created if needed; its files replaced)."""
        root = Path(folder)
        root.mkdir(parents=True, exist_ok=True)
        head = {
            "format_version": FORMAT_VERSION,
            "name": self.name,
            "source": self.source,
            "start": {
                "turn": self.start_turn,
                "entries": self.start_entries,
                "agent": self.start_agent,
                "usage": self.start_usage.to_dict(),
            },
            "agent": self.agent,
            "expected": self.expected,
            "evaluators": self.evaluators,
            "notes": self.notes,
        }
        (root / _CASE_FILE).write_text(_dumps(head, indent=2) + "\n", encoding="utf-8")
        _write_lines(root / "transcript.jsonl", (entry_to_dict(e) for e in self.transcript))
        _write_lines(root / "views.jsonl", (v.to_data() for v in self.views))
        _write_lines(root / "responses.jsonl", (r.to_dict() for r in self.responses))
        _write_lines(root / "tools.jsonl", (r.to_dict() for r in self.tool_results))
        self.path = root
        return root


def _dumps(value: Any, indent: int | None = None) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, indent=indent)


def _write_lines(path: Path, rows: Iterator[dict[str, Any]]) -> None:
    text = "".join(_dumps(row) + "\n" for row in rows)
    path.write_text(text, encoding="utf-8")


def _read_lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise CaseError(
            f"{path} is not UTF-8 text (byte {exc.start})",
            hint="Case files are UTF-8 JSON Lines; re-pin the case.",
        ) from None
    rows: list[dict[str, Any]] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise CaseError(
                f"{path} line {number} is not valid JSON ({exc})",
                hint="Fix or re-pin the case (`lovia pin RUN --to DIR`).",
            ) from None
        if not isinstance(row, dict):
            raise CaseError(f"{path} line {number} is not a JSON object", hint="Re-pin the case.")
        rows.append(cast(dict[str, Any], row))
    return rows


def load_case(folder: str | Path) -> Case:
    """Read a case folder written by :meth:`Case.save` (or by ``lovia pin``)."""
    root = Path(folder)
    head_path = root / _CASE_FILE
    if not head_path.is_file():
        raise CaseError(
            f"{root} is not a lovia case (no {_CASE_FILE})",
            hint="Create one with `lovia pin RUN --to DIR`.",
        )
    try:
        head = json.loads(head_path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise CaseError(f"{head_path} is not valid JSON ({exc})", hint="Re-pin the case.") from None
    if not isinstance(head, dict):
        raise CaseError(f"{head_path} is not a JSON object", hint="Re-pin the case.")
    return _case_from(root, cast(dict[str, Any], head))


def _case_from(root: Path, head: dict[str, Any]) -> Case:
    version = head.get("format_version")
    if not isinstance(version, int):
        raise CaseError(f"{root}/{_CASE_FILE} has no format_version", hint="Re-pin the case.")
    if version > FORMAT_VERSION:
        raise SchemaVersionError(
            f"case {root} has format_version {version}; this lovia reads up to {FORMAT_VERSION}",
            hint="Upgrade lovia (pip install -U lovia).",
        )
    try:
        start = cast(dict[str, Any], head["start"])
        case = Case(
            name=str(head.get("name") or root.name),
            source=dict(head.get("source") or {}),
            start_turn=int(start["turn"]),
            start_entries=int(start["entries"]),
            start_usage=Usage.from_dict(start.get("usage") or {}),
            start_agent=str(start.get("agent", "")),
            agent=dict(head["agent"]),
            transcript=[entry_from_dict(e) for e in _read_lines(root / "transcript.jsonl")],
            views=[ViewRecord.from_data(v) for v in _read_lines(root / "views.jsonl")],
            responses=[_response(r) for r in _read_lines(root / "responses.jsonl")],
            tool_results=[_tool_result(r) for r in _read_lines(root / "tools.jsonl")],
            expected=dict(head.get("expected") or {}),
            evaluators=list(head.get("evaluators") or []),
            notes=[str(n) for n in cast(list[Any], head.get("notes") or [])],
            path=root,
        )
    except SchemaVersionError:
        raise
    except (KeyError, TypeError, ValueError) as exc:
        raise CaseError(
            f"case {root} is damaged: {type(exc).__name__}: {exc}",
            hint="Re-pin it with `lovia pin RUN --to DIR`.",
        ) from None
    if not case.views or len(case.responses) != len(case.views):
        raise CaseError(
            f"case {root} has {len(case.views)} view(s) and {len(case.responses)} "
            "response(s); it needs one response per view, at least one",
            hint="Re-pin it with `lovia pin RUN --to DIR`.",
        )
    known = {e.id for e in case.transcript}
    missing = [i for r in case.responses for i in r.entry_ids if i not in known]
    if missing:
        raise CaseError(
            f"case {root}: responses.jsonl names entries not in transcript.jsonl "
            f"({', '.join(missing[:3])})",
            hint="Re-pin it with `lovia pin RUN --to DIR`.",
        )
    return case


def _response(row: Mapping[str, Any]) -> PinnedResponse:
    return PinnedResponse(
        turn=int(row["turn"]),
        attempt=int(row.get("attempt", 1)),
        entry_ids=tuple(str(i) for i in row.get("entry_ids", ())),
        usage=Usage.from_dict(row.get("usage") or {}),
        finish_reason=str(row.get("finish_reason") or "stop"),
        error=row.get("error"),
    )


def _tool_result(row: Mapping[str, Any]) -> PinnedToolResult:
    return PinnedToolResult(
        call_id=str(row["call_id"]),
        name=str(row["name"]),
        arguments=str(row.get("arguments", "{}")),
        content=str(row.get("content", "")),
        is_error=bool(row.get("is_error", False)),
        turn=int(row.get("turn", 0)),
    )


def load_cases(target: str | Path | Sequence[str | Path]) -> list[Case]:
    """Every case under ``target``: a case folder, a folder of case folders, or a list."""
    if not isinstance(target, (str, Path)):
        return [c for t in target for c in load_cases(t)]
    root = Path(target)
    if (root / _CASE_FILE).is_file():
        return [load_case(root)]
    if not root.is_dir():
        raise UserError(
            f"no case folder at {root}", hint="Pin one first: `lovia pin RUN --to DIR`."
        )
    found = sorted(p.parent for p in root.rglob(_CASE_FILE))
    if not found:
        raise UserError(
            f"{root} holds no cases (no */{_CASE_FILE})",
            hint="Pin runs into it: `lovia pin RUN --to DIR`.",
        )
    return [load_case(p) for p in found]
