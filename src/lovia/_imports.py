"""Objects named by an import path (``"package.module:name"``): ``lovia web --agent`` and
the Celery workers load agents this way."""

from __future__ import annotations

import importlib
from typing import Any

from .errors import UserError

__all__ = ["import_object"]


def import_object(path: str, *, hint: str) -> Any:
    """The object at ``"package.module:name"`` (or ``"package.module.name"``; ``name`` may
    be dotted). ``hint`` says where the module must be importable when it is not."""
    module, sep, name = path.partition(":")
    if not sep:
        module, _, name = path.rpartition(".")
    if not module or not name:
        raise UserError(
            f"{path!r} is not an import path",
            hint='Write "package.module:name", e.g. "app.agents:support".',
        )
    try:
        obj: Any = importlib.import_module(module)
        for part in name.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise UserError(f"cannot import {path!r}: {exc}", hint=hint) from exc
    return obj
