"""``make docs``: the site builds with ``mkdocs build --strict`` (a warning fails it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(180)
def test_site_builds_without_warnings(tmp_path: Path) -> None:
    try:
        import material  # noqa: F401  # pyright: ignore[reportMissingImports,reportUnusedImport]
        import mkdocs  # noqa: F401  # pyright: ignore[reportUnusedImport]
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail("mkdocs is not installed: `pip install -e '.[docs]'` (make install)")
        pytest.skip("mkdocs is not installed (the `docs` extra)")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=170,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "WARNING" not in proc.stderr, proc.stderr[-3000:]
    assert (tmp_path / "index.html").is_file()
    assert (tmp_path / "handoffs" / "index.html").is_file()
