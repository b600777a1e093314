"""Usage.copy / minus spell their fields out (hot path): they must cover every field."""

from __future__ import annotations

from dataclasses import fields

from lovia.usage import Usage


def _distinct(offset: int) -> Usage:
    u = Usage()
    for i, f in enumerate(fields(Usage)):
        if f.name == "missing":
            setattr(u, f.name, True)
        elif f.name == "cost_usd":
            setattr(u, f.name, 0.5 + offset)
        else:
            setattr(u, f.name, 100 * (i + 1) + offset)
    return u


def test_copy_carries_every_field_and_is_independent() -> None:
    u = _distinct(7)
    c = u.copy()
    assert c == u and c is not u
    assert c.to_dict() == {f.name: getattr(u, f.name) for f in fields(Usage)}
    c.input_tokens += 1
    assert u.input_tokens == c.input_tokens - 1


def test_minus_subtracts_every_number_and_keeps_missing() -> None:
    before, after = _distinct(1), _distinct(10)
    d = after.minus(before)
    for f in fields(Usage):
        if f.name == "missing":
            assert d.missing is True
        else:
            assert getattr(d, f.name) == getattr(after, f.name) - getattr(before, f.name), f.name
