#!/bin/sh
# Install what tests/web needs: headless Chromium (Debian package `chromium`), driven by
# Playwright for Python with executable_path=/usr/bin/chromium (`playwright install`,
# which downloads a browser build, is never run).
# Also axe-core (npm) into .web-tools/ (gitignored): the browser tests inject its
# axe.min.js from that local file into each page (never from a CDN).
# Idempotent: does nothing for what is already there.
# Usage (from .ci/run, as root or with sudo available): scripts/ci-install-web.sh
set -eu

cd "$(dirname "$0")/.."
AXE_VERSION="4.14.1"
AXE_MANIFEST=".web-tools/node_modules/axe-core/package.json"
if [ -f "$AXE_MANIFEST" ] && grep -q "\"version\": \"$AXE_VERSION\"" "$AXE_MANIFEST"; then
    echo "ci-install-web: axe-core@$AXE_VERSION already installed in .web-tools"
elif command -v npm >/dev/null 2>&1; then
    npm install --no-audit --no-fund --prefix .web-tools "axe-core@$AXE_VERSION"
    echo "ci-install-web: installed axe-core@$AXE_VERSION in .web-tools"
else
    echo "ci-install-web: npm not found; install Node.js 20+ for axe-core" >&2
    exit 1
fi

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
