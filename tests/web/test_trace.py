"""The trace rows: purpose labels, bookkeeping, turn numbers, resumed attempts, an axis
scaled to the rows shown, span links built from hex ids only."""

from __future__ import annotations

from lovia.replay._spans import SpanRow
from lovia.web._trace import axis_ticks, span_link, waterfall


def _span(
    name: str, span_id: str, parent: str | None, start: float, end: float, **attrs: object
) -> SpanRow:
    return SpanRow(
        name=name, span_id=span_id, parent_id=parent, start=start, end=end, attributes=dict(attrs)
    )


def _trace() -> list[SpanRow]:
    return [
        _span("invoke_agent a", "r", None, 0.0, 10.0, **{"lovia.run.resumed": True}),
        _span("turn 1", "t1", "r", 0.0, 4.0),
        _span("chat m", "c1", "t1", 0.0, 2.0, **{"gen_ai.operation.name": "chat"}),
        _span("chat m", "s1", "t1", 2.0, 3.0, **{"lovia.call.purpose": "summary"}),
        _span("lovia.checkpoint.write", "w1", "t1", 3.0, 3.1),
        _span("turn 2", "t2", "r", 5.0, 10.0, **{"lovia.turn.index": 2}),
        _span("execute_tool x", "x2", "t2", 5.0, 9.0, **{"gen_ai.tool.call.id": "call_9"}),
    ]


def test_rows_say_what_they_are() -> None:
    bars = {b.span.span_id: b for b in waterfall(_trace())}
    assert bars["c1"].purpose == "main" and bars["c1"].label == "chat m"
    assert bars["s1"].purpose == "summary" and bars["s1"].label == "chat m [summary]"
    assert bars["w1"].bookkeeping and not bars["c1"].bookkeeping
    assert [bars[i].turn for i in ("t1", "c1", "w1", "t2", "x2")] == [1, 1, 1, 2, 2]
    assert bars["r"].turn is None and bars["r"].resumed and not bars["t1"].resumed
    assert bars["x2"].call_id == "call_9"
    assert bars["r"].has_children and not bars["x2"].has_children


def test_the_same_rows_twice_are_not_duplicated() -> None:
    spans = _trace()
    assert len(waterfall(spans)) == len(waterfall(spans)) == 7  # cached rows re-linked


def test_a_window_rescales_the_axis() -> None:
    whole = {b.span.span_id: b for b in waterfall(_trace())}
    assert whole["x2"].left == 500.0 and whole["x2"].width == 400.0
    window = {b.span.span_id: b for b in waterfall(_trace(), (5.0, 10.0))}
    assert set(window) == {"r", "t2", "x2"}  # the window's spans and their ancestors
    assert window["x2"].left == 0.0 and window["x2"].width == 800.0  # 4 s of 5 s shown
    ticks = axis_ticks(list(window.values()))
    assert ticks[0] == (0.0, "0ms") and ticks[-1] == (1000.0, "5.00s")


def test_span_links_take_hex_ids_only() -> None:
    tid, sid = "0" * 31 + "a", "0" * 15 + "b"
    template = "http://jaeger:16686/trace/{trace_id}?uiFind={span_id}"
    assert span_link(template, tid, sid) == f"http://jaeger:16686/trace/{tid}?uiFind={sid}"
    assert span_link(template, tid, "tool-call_1") is None  # a rebuilt row: no such span
    assert span_link("javascript:{trace_id}", tid, sid) is None
    assert span_link(None, tid, sid) is None
