#!/usr/bin/env bash
# Install the MCP reference server used by tests/plugins/test_mcp.py (idempotent).
#
#   scripts/ci-install-mcp.sh        # from the repository root; .ci/run calls it
#
# The package lands in .mcp-servers/ (gitignored). Nothing happens when the pinned
# version is already installed.
set -euo pipefail

cd "$(dirname "$0")/.."
PKG="@modelcontextprotocol/server-everything"
VERSION="2026.8.31"
PREFIX=".mcp-servers"
MANIFEST="$PREFIX/node_modules/$PKG/package.json"

if [ -f "$MANIFEST" ] && grep -q "\"version\": \"$VERSION\"" "$MANIFEST"; then
    echo "ci-install-mcp: $PKG@$VERSION already installed in $PREFIX"
    exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
    echo "ci-install-mcp: npm not found; install Node.js 20+ first" >&2
    exit 1
fi
npm install --no-audit --no-fund --prefix "$PREFIX" "$PKG@$VERSION"
echo "ci-install-mcp: installed $PKG@$VERSION in $PREFIX"
