"""Sampling, the online worker, and pinned cases as pytest tests."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from lovia import evals
from lovia.errors import UserError
from lovia.evals.online import Sampled, run_online, sampled
from lovia.evals.pytest import assert_baseline, cases
from lovia.stores import store

from .conftest import record_tools

CASES = Path(__file__).parent / "cases"


def test_one_percent_sampling_lands_within_a_fifth_of_a_percent() -> None:
    ids = [uuid.UUID(int=i * 7919 + 12345).hex for i in range(10_000)]
    rate = sum(sampled(i, 0.01) for i in ids) / len(ids)
    assert 0.008 <= rate <= 0.012, rate
    assert [sampled(i, 0.01) for i in ids[:500]] == [sampled(i, 0.01) for i in ids[:500]]
    assert sum(sampled(i, 0.5, "judge") for i in ids) / len(ids) == pytest.approx(0.5, abs=0.02)
    assert not any(sampled(i, 0.0) for i in ids) and all(sampled(i, 1.0) for i in ids)
    with pytest.raises(UserError, match="between 0 and 1"):
        sampled("x", 1.5)


async def test_online_scores_each_sampled_completed_run_once(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'lovia.db'}"
    db = store(url)
    ids = [await record_tools(db, i) for i in range(6)]
    await db.aclose()
    seen: set[tuple[str, str]] = set()
    every = [Sampled(evals.Contains("shipped (3)"), 1.0), Sampled(evals.Equals("never"), 0.0)]
    first = await run_online(url, every, seen=seen)
    assert sorted(r for r, _ in first) == sorted(ids)
    assert [s.passed for r, s in first if r == ids[3]] == [True]
    assert sum(s.passed for _, s in first) == 1
    assert await run_online(url, every, seen=seen) == []  # each run once


@cases(CASES)
async def test_pinned_case_reproduces(case: evals.Case) -> None:
    await assert_baseline(case)
