#!/bin/sh
# Install what tests/ops and the fleet tests need: promtool + prometheus (Debian package
# `prometheus`) and pgbouncer (Debian package `pgbouncer`, for the PostgreSQL store's
# transaction-pooling tests in tests/stores).
# Idempotent: does nothing when promtool, prometheus and pgbouncer are already there.
# Usage (from .ci/run, as root or with sudo available): scripts/ci-install-ops.sh
set -eu

have_pgbouncer() {
    command -v pgbouncer >/dev/null 2>&1 || [ -x /usr/sbin/pgbouncer ]
}

if command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1 \
    && have_pgbouncer; then
    echo "ci-install-ops: $(promtool --version 2>&1 | head -n 1) and pgbouncer already installed"
    exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "ci-install-ops: promtool, prometheus or pgbouncer missing and apt-get not" \
        "available; install Prometheus (promtool + prometheus) and PgBouncer manually" >&2
    exit 1
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# The packages' services are not started (no systemd in CI containers); tests start
# their own prometheus (temporary storage) and pgbouncer (temporary ini) on 127.0.0.1.
$SUDO apt-get install -y -qq --no-install-recommends prometheus pgbouncer >/dev/null

command -v promtool >/dev/null 2>&1
command -v prometheus >/dev/null 2>&1
have_pgbouncer
echo "ci-install-ops: installed $(promtool --version 2>&1 | head -n 1) and pgbouncer"
