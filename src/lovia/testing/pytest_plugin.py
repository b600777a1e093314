"""pytest plugin: a test fails when a ScriptedModel it made still has unused steps.

A script with steps left over means the run ended earlier than the test's author
expected — usually a bug the assertions did not catch. Enable the plugin in a
``conftest.py``::

    pytest_plugins = ["lovia.testing.pytest_plugin"]

A test that leaves steps unused on purpose (a cancelled or budget-limited run) says so
with ``@pytest.mark.lovia_unconsumed``. Models made while the test and its fixtures are
set up and while it runs are checked; module-level models are not.
"""

from __future__ import annotations

from collections.abc import Generator

import pytest

from ._models import CREATED, ScriptedModel

__all__ = ["pytest_configure", "pytest_runtest_call", "pytest_runtest_setup"]

_KEY = pytest.StashKey[list[ScriptedModel]]()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "lovia_unconsumed: this test leaves ScriptedModel steps unused on purpose"
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None]:
    made: list[ScriptedModel] = []
    item.stash[_KEY] = made
    CREATED.append(made)
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None]:
    none: list[ScriptedModel] = []
    made = item.stash.get(_KEY, none)
    try:
        outcome = yield
    finally:
        if made in CREATED:
            CREATED.remove(made)
    if item.get_closest_marker("lovia_unconsumed") is None:
        left = [m for m in made if m.unconsumed]
        if left:
            pytest.fail(
                "ScriptedModel steps were never used: "
                + ", ".join(f"{m!r} ({m.unconsumed} left)" for m in left)
                + " — the run ended earlier than the script expected; fix the test, or mark "
                "it @pytest.mark.lovia_unconsumed if that is the point",
                pytrace=False,
            )
    return outcome
