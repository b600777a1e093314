"""Pinned cases as ordinary pytest tests.

```python
from lovia.evals.pytest import cases, assert_baseline

@cases("evals")                      # one test per case folder under evals/
async def test_case_reproduces(case):
    await assert_baseline(case)
```
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from ._case import Case, load_cases
from ._run import evaluate

__all__ = ["assert_baseline", "cases"]

F = TypeVar("F", bound=Callable[..., Any])


def cases(folder: str | Path) -> Callable[[F], F]:
    """Parametrize a test with every case under ``folder`` (argument ``case``, test ids
    are the case names)."""
    import pytest

    loaded = load_cases(folder)
    return pytest.mark.parametrize("case", loaded, ids=[c.name for c in loaded])


async def assert_baseline(case: Case) -> None:
    """Fail (with the divergence) unless the case reproduces every recorded view."""
    report = await evaluate([case], baseline=True)
    if not report.ok():
        raise AssertionError(f"case {case.name} diverged:\n{report.cases[0].diff()}")
