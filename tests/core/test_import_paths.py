"""Agents named by import path (``lovia web --agent``, Celery workers): one resolver."""

from __future__ import annotations

import pytest

from lovia._imports import import_object
from lovia.errors import UserError
from lovia.testing import ScriptedModel


def test_colon_and_dotted_paths_resolve_to_the_object() -> None:
    assert import_object("lovia.testing:ScriptedModel", hint="h") is ScriptedModel
    assert import_object("lovia.testing.ScriptedModel", hint="h") is ScriptedModel
    assert import_object("lovia:testing.ScriptedModel", hint="h") is ScriptedModel


@pytest.mark.parametrize("path", ["nodots", ":agent", "pkg.mod:"])
def test_a_malformed_path_says_how_to_write_one(path: str) -> None:
    with pytest.raises(UserError) as info:
        import_object(path, hint="h")
    assert "is not an import path" in info.value.message
    assert info.value.hint and "package.module:name" in info.value.hint


@pytest.mark.parametrize("path", ["lovia_no_such_module:agent", "lovia.testing:no_such_agent"])
def test_a_missing_module_or_name_gets_the_callers_hint(path: str) -> None:
    with pytest.raises(UserError) as info:
        import_object(path, hint="set PYTHONPATH")
    assert info.value.message.startswith(f"cannot import {path!r}")
    assert info.value.hint == "set PYTHONPATH"
