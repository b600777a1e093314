#!/bin/sh
# Install what tests/web needs: headless Chromium (Debian package `chromium`), driven by
# Playwright for Python with executable_path=/usr/bin/chromium (`playwright install`,
# which downloads a browser build, is never run).
# Idempotent: does nothing when /usr/bin/chromium is already there.
# Usage (from .ci/run, as root or with sudo available): scripts/ci-install-web.sh
set -eu

if [ -x /usr/bin/chromium ]; then
    echo "ci-install-web: chromium already installed"
    exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "ci-install-web: chromium missing and apt-get not available; install Chromium" \
        "at /usr/bin/chromium (or set LOVIA_TEST_CHROMIUM)" >&2
    exit 1
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null

test -x /usr/bin/chromium
echo "ci-install-web: installed chromium"
