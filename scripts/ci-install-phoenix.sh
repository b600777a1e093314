#!/usr/bin/env bash
# Arize Phoenix (PyPI `arize-phoenix`), a GenAI-aware trace receiver for tests/telemetry: it
# accepts OTLP/HTTP traces and serves what it stored through a REST API.
#
# It goes into its own venv outside the clone (default ~/.cache/lovia-phoenix, or
# $LOVIA_PHOENIX_HOME), never into the project's environment: it is large (~850 MB) and
# pins its own OpenTelemetry and web-framework versions. The first install takes minutes;
# later runs find the pinned version and finish in about a second.
#   $LOVIA_PHOENIX_HOME/venv/bin/phoenix   `phoenix serve` starts the server
# The tests read the same default (or LOVIA_PHOENIX_HOME).
set -euo pipefail

PHOENIX_VERSION="20.26.1"
HOME_DIR="${LOVIA_PHOENIX_HOME:-$HOME/.cache/lovia-phoenix}"
VENV="$HOME_DIR/venv"
mkdir -p "$HOME_DIR"

installed() {  # the metadata, not an import: importing Phoenix's server takes ~30 s
    [ -x "$VENV/bin/phoenix" ] && "$VENV/bin/python" - "$PHOENIX_VERSION" 2>/dev/null <<'PY'
import sys
from importlib.metadata import version

sys.exit(version("arize-phoenix") != sys.argv[1])
PY
}

if installed; then
    echo "ci-install-phoenix: arize-phoenix $PHOENIX_VERSION is in $HOME_DIR"
    exit 0
fi

test -x "$VENV/bin/python" || python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q "arize-phoenix==$PHOENIX_VERSION"
installed || { echo "ci-install-phoenix: no arize-phoenix $PHOENIX_VERSION after install" >&2; exit 1; }
echo "ci-install-phoenix: arize-phoenix $PHOENIX_VERSION installed in $HOME_DIR"
