"""``lovia.tune_gc()``: an opt-in collector setting for processes carrying thousands of
runs; ``import lovia`` leaves the collector alone."""

from __future__ import annotations

import gc
import subprocess
import sys
import weakref
from collections.abc import Iterator

import pytest

import lovia
from lovia.errors import UserError


@pytest.fixture(autouse=True)
def restore_thresholds() -> Iterator[None]:
    saved = gc.get_threshold()
    yield
    gc.set_threshold(*saved)


def test_import_lovia_leaves_the_collector_alone() -> None:
    code = (
        "import gc; before = (gc.get_threshold(), gc.isenabled(), gc.get_freeze_count()); "
        "import lovia, lovia.providers.openai_chat; "
        "print(before == (gc.get_threshold(), gc.isenabled(), gc.get_freeze_count()))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"


def test_tune_gc_raises_the_young_threshold_and_returns_the_previous() -> None:
    gc.set_threshold(700, 10, 10)
    previous = lovia.tune_gc()
    assert previous == (700, 10, 10)
    assert gc.get_threshold() == (lovia._defaults.SCALE_GC_THRESHOLD, 10, 10)
    assert gc.isenabled()
    gc.set_threshold(*previous)
    assert gc.get_threshold() == (700, 10, 10)


def test_tune_gc_keeps_the_older_generations_settings() -> None:
    gc.set_threshold(500, 7, 3)
    assert lovia.tune_gc(50_000) == (500, 7, 3)
    assert gc.get_threshold() == (50_000, 7, 3)


def test_the_collector_still_frees_cycles_on_its_own_after_tune_gc() -> None:
    lovia.tune_gc(1_000)
    gc.collect()

    class Node:
        other: object = None

    a, b = Node(), Node()
    a.other, b.other = b, a
    alive = weakref.ref(a)
    del a, b
    kept = [[] for _ in range(5_000)]  # allocations past the threshold: a young pass runs
    assert alive() is None, "the cycle was not collected without gc.collect()"
    assert len(kept) == 5_000


@pytest.mark.parametrize("bad", [0, -5, True, 1.5, "20000"])
def test_tune_gc_rejects_a_bad_threshold(bad: object) -> None:
    before = gc.get_threshold()
    with pytest.raises(UserError):
        lovia.tune_gc(bad)  # pyright: ignore[reportArgumentType] -- the wrong types are the point
    assert gc.get_threshold() == before
