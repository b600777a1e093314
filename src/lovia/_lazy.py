"""Names a package exports but imports on first use, so ``import lovia`` stays fast.

Every package that defers an import uses this one helper::

    __getattr__, __dir__ = lazy_exports(__name__, {"Memory": ".plugins.memory"})

and names the same symbols under ``if TYPE_CHECKING:`` for type checkers. ``dir()`` of the
package lists them before they are loaded; once loaded, a value is cached on the package.
"""

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Callable, Mapping

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str,
    exports: Mapping[str, str],
    *,
    guard: Callable[[], None] | None = None,
    renamed: Mapping[str, str] | None = None,
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The module-level ``__getattr__`` and ``__dir__`` of ``package``.

    ``exports`` maps each lazy name to the module defining it, relative to ``package``
    (``".plugins.memory"``). ``guard`` runs before such an import, e.g. to fail with the
    ``pip install`` hint when the extra the module needs is missing. ``renamed`` maps an
    old name to its new one in ``package``: it still resolves, with a DeprecationWarning.
    """
    exports, renamed = dict(exports), dict(renamed or {})

    def __getattr__(name: str) -> object:
        new = renamed.get(name)
        if new is not None:
            warnings.warn(
                f"{package}.{name} was renamed {new}; the old name will be removed in a "
                "later release",
                DeprecationWarning,
                stacklevel=2,
            )
            return getattr(sys.modules[package], new)
        where = exports.get(name)
        if where is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        if guard is not None:
            guard()
        value = getattr(importlib.import_module(where, package), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *exports})

    return __getattr__, __dir__
