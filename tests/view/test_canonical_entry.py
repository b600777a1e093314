"""An entry's canonical bytes (what the view hash is computed over) do not depend on the
encoder that wrote them: pydantic-core's fast path gives exactly the bytes of the
canonical JSON form (keys sorted, no whitespace, UTF-8), or the JSON path runs.

Stored runs keep their hashes, and replay verifies a view by hashing it again, so a
single differing byte would make a recorded view fail to verify.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from lovia.providers.base import ModelRequest, ModelSettings
from lovia.transcript import (
    HandoffEntry,
    InputEntry,
    ReasoningEntry,
    SystemEntry,
    TextEntry,
    ToolCallEntry,
    ToolResultEntry,
    TranscriptEntry,
    entry_to_dict,
)
from lovia.view import record as module
from lovia.view.record import ViewHasher, canonical_entry

CODE_POINTS = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
HOSTILE = [
    "",
    'quote " backslash \\ slash / tab \t newline \n return \r',
    "".join(map(chr, range(0x20))) + "\x7f\x80\x9f",  # every control character, DEL, C1
    "\u2028\u2029\ufeff\u200b",  # line/paragraph separators, BOM, zero width
    "é日本語😀\U0010ffff",
    "\x1b[31mred\x1b[0m \x1b]8;;http://x\x07link",  # terminal escapes
    '{"a": 1, "b": [2, 3]}',  # JSON text, kept as text
    "x" * 100_000,
]


def canonical(entry: TranscriptEntry) -> bytes:
    """The reference: the canonical JSON form written by ``json``."""
    text = json.dumps(
        entry_to_dict(entry), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return text.encode()


def entries(text: str, ts: float) -> list[TranscriptEntry]:
    common: dict[str, Any] = {"run_id": text[:40], "turn": 3, "agent": text[:20], "ts": ts}
    return [
        SystemEntry(content=text, **common),
        InputEntry(content=text, role="developer", origin="mailbox", **common),
        TextEntry(text=text, message_id=text[:8], refusal=True, **common),
        ReasoningEntry(text=text, signature=text or None, encrypted=None, **common),
        ToolCallEntry(call_id=text[:12], name="add", arguments=text, **common),
        ToolResultEntry(call_id="c", name=text[:30], content=text, is_error=True, **common),
        HandoffEntry(from_agent=text[:10], to_agent="b", call_id="c", **common),
    ]


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
def test_every_entry_type_writes_the_canonical_bytes(text: str) -> None:
    for entry in entries(text, 1_796_410_257.5907178):
        assert canonical_entry(entry) == canonical(entry)


def test_every_code_point_is_written_as_json_writes_it() -> None:
    for start in range(0, len(CODE_POINTS), 8192):
        text = "".join(map(chr, CODE_POINTS[start : start + 8192]))
        entry = TextEntry(text=text)
        assert canonical_entry(entry) == canonical(entry), hex(CODE_POINTS[start])


def test_random_text_and_time_stamps_of_every_magnitude() -> None:
    rng = random.Random(7)
    for _ in range(2000):
        text = "".join(chr(rng.choice(CODE_POINTS)) for _ in range(rng.randint(0, 12)))
        ts = rng.choice([-1, 1]) * rng.random() * 10 ** rng.randint(-12, 22)
        for entry in entries(text, ts):
            assert canonical_entry(entry) == canonical(entry), (text, ts)


@pytest.mark.parametrize(
    "ts",
    [
        0.0,
        -0.0,
        1e-4,
        9.99e-5,
        -1e-4,
        1e16,
        9_999_999_999_999_998.0,
        5e-324,
        1.7976931348623157e308,
    ],
)
def test_time_stamps_at_the_edges_of_the_fast_range(ts: float) -> None:
    entry = ToolCallEntry(call_id="c", name="add", ts=ts)
    assert canonical_entry(entry) == canonical(entry)


@pytest.mark.parametrize("ts", [float("nan"), float("inf"), float("-inf")])
def test_a_time_stamp_json_has_no_number_for_is_written_as_json_writes_it(ts: float) -> None:
    entry = TextEntry(text="t", ts=ts)
    assert canonical_entry(entry) == canonical(entry)
    assert b'"ts":' + json.dumps(ts).encode() in canonical_entry(entry)


def test_reasoning_details_are_nested_keys_sorted_too() -> None:
    details = {"z": {"y": 1, "b": [{"d": 1, "c": 2}]}, "a": "é"}
    entry = ReasoningEntry(text="r", details=details, provider="openai")
    assert canonical_entry(entry) == canonical(entry)
    assert b'"details":{"a":"\xc3\xa9","z":{"b":[{"c":2,"d":1}],"y":1}}' in canonical_entry(entry)


def test_scalar_entries_take_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The JSON path is not what ran for a plain entry (else this change is a no-op)."""
    plain = entries("plain text é", 1_796_410_257.25)
    expected = [canonical(e) for e in plain]
    monkeypatch.setattr(module, "_canon", lambda value: pytest.fail(f"json path for {value}"))
    assert [canonical_entry(e) for e in plain] == expected


def _path_taken(monkeypatch: pytest.MonkeyPatch, entry: TranscriptEntry) -> str:
    """Which writer produced ``entry``'s bytes: "fast" (pydantic-core) or "json"."""
    taken: list[str] = []
    real = module._canon  # pyright: ignore[reportPrivateUsage]
    monkeypatch.setattr(module, "_canon", lambda value: taken.append("json") or real(value))
    assert canonical_entry(entry) == canonical(entry)
    return taken[0] if taken else "fast"


@pytest.mark.parametrize(
    ("ts", "path"),
    [
        (0.0, "fast"),  # an entry built without a clock
        (0.5, "fast"),
        (1e-4, "fast"),  # the smallest magnitude pydantic-core writes as repr does
        (-1e-4, "fast"),
        (1_796_410_257.25, "fast"),
        (9.99e-5, "json"),  # written 9.99e-5 by pydantic-core, 9.99e-05 by json
        (float("inf"), "json"),  # the guard sends what has no JSON number to json
        (float("nan"), "json"),
    ],
)
def test_the_fast_path_covers_every_time_stamp_it_writes_exactly(
    monkeypatch: pytest.MonkeyPatch, ts: float, path: str
) -> None:
    """The guard is as wide as it is safe and no wider: a clock's time stamp, zero and
    the edge at 1e-4 are written by pydantic-core; the rest goes the JSON way."""
    assert _path_taken(monkeypatch, ToolCallEntry(call_id="c", name="add", ts=ts)) == path


def test_a_lone_surrogate_fails_as_the_json_path_does() -> None:
    entry = TextEntry.model_construct(text="\ud800")  # built without validation: not cleaned
    with pytest.raises(UnicodeEncodeError):
        canonical(entry)
    with pytest.raises(UnicodeEncodeError):
        canonical_entry(entry)


def test_the_view_hash_is_unchanged() -> None:
    """A fixed view still hashes to the digest the JSON form gave (pinned)."""
    common: dict[str, Any] = {"run_id": "r1", "turn": 1, "agent": "a", "ts": 1_700_000_000.5}
    view = [
        InputEntry(id="e1", content="hi é\n", **common),
        ToolCallEntry(id="e2", call_id="c1", name="add", arguments='{"a":1}', **common),
        ToolResultEntry(id="e3", call_id="c1", name="add", content="2", **common),
        TextEntry(id="e4", text="done \x1b[0m", **common),
    ]
    request = ModelRequest(system="sys", messages=view, settings=ModelSettings())
    assert ViewHasher().hash(request) == PINNED


PINNED = "04dca14127422f74a144c9ad209a6d8f8bcb6110009241bf12f7603597cfd8d7"
