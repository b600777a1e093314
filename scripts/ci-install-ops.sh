#!/bin/sh
# Install what tests/ops needs: promtool + prometheus (Debian package `prometheus`).
# Idempotent: does nothing when promtool and prometheus are already on PATH.
# Usage (from .ci/run, as root or with sudo available): scripts/ci-install-ops.sh
set -eu

if command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1; then
    echo "ci-install-ops: $(promtool --version 2>&1 | head -n 1) already installed"
    exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "ci-install-ops: promtool missing and apt-get not available; install Prometheus" \
        "(promtool + prometheus binaries) manually" >&2
    exit 1
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# The package's service is not started (no systemd in CI containers); tests start
# their own prometheus on 127.0.0.1 with a temporary storage directory.
$SUDO apt-get install -y -qq --no-install-recommends prometheus >/dev/null

command -v promtool >/dev/null 2>&1
command -v prometheus >/dev/null 2>&1
echo "ci-install-ops: installed $(promtool --version 2>&1 | head -n 1)"
