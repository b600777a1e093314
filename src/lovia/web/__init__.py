"""``lovia web``: the postmortem in a browser (extra ``web``: Starlette, uvicorn, Jinja2).

```python
from lovia.web import create_app
app = create_app("sqlite:///.lovia/lovia.db")      # an ASGI app; `lovia web` serves it
```

Pages: runs (search, facets, sorting, totals, child runs nested), sessions, a run
(transcript by turn, an interactive trace, lineage, approvals, live updates in place,
JSON Lines export), a turn's exact view (verified hash, compaction, reminders, diff
against the previous turn, request body, what-if), compare, and chat with ``--agent``.
Every page has a JSON twin under ``/api``. Nothing here is imported by ``import lovia``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from .._lazy import lazy_exports
from .._redact import redact_url as _redact_url
from ..errors import UserError
from ._config import LOOPBACK

if TYPE_CHECKING:
    from ..replay import WhatIfPolicy
    from ._app import create_app
    from ._config import WebConfig

__all__ = [
    "INSTALL_HINT",
    "LOOPBACK",
    "WebConfig",
    "WhatIfPolicy",
    "create_app",
    "redact_url",
    "require_web",
]

INSTALL_HINT = "pip install 'lovia[web]'"


def require_web() -> None:
    """Fail with the one-line install hint when the ``web`` extra is missing."""
    try:
        for module in ("jinja2", "starlette", "uvicorn"):
            importlib.import_module(module)
    except ImportError as exc:
        raise UserError(
            f"lovia web needs the 'web' extra ({exc.name} is not installed)",
            hint=INSTALL_HINT,
        ) from exc


def redact_url(url: str) -> str:
    """The store URL without its secrets: the password (``postgresql://u:***@h/db``) and
    secret-looking query parameters (``?password=***``, ``&sslpassword=***``)."""
    return _redact_url(url)


__getattr__, __dir__ = lazy_exports(
    __name__,
    {"WebConfig": "._config", "WhatIfPolicy": "..replay", "create_app": "._app"},
    guard=require_web,
)
