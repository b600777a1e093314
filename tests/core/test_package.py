"""Package-level guarantees: public API, import cost, extras."""

from __future__ import annotations

import json
import subprocess
import sys

import lovia


def test_all_is_sorted_complete_and_importable() -> None:
    assert lovia.__all__ == sorted(lovia.__all__)
    for name in lovia.__all__:
        assert hasattr(lovia, name), name
    public = {n for n in vars(lovia) if not n.startswith("_")}
    modules = {n for n in public if type(getattr(lovia, n)).__name__ == "module"}
    assert public - modules - set(lovia.__all__) == set()


def test_import_lovia_pulls_no_heavy_extras() -> None:
    code = "import sys, json; import lovia; print(json.dumps(sorted(m for m in sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(json.loads(out.stdout))
    forbidden = {
        "opentelemetry.sdk",
        "asyncpg",
        "mcp",
        "sqlite3",
        "genai_prices",
        "redis",
        "lovia.stores.sqlite",
        "lovia.stores.postgres",
        "lovia.providers.openai_chat",
    }
    assert loaded & forbidden == set()
