#!/usr/bin/env bash
# Create bench/.venv-peers: a separate interpreter environment holding the peer
# frameworks (OpenAI Agents SDK, Pydantic AI) plus lovia itself (editable), so
# every contender runs on the same Python. Never installs into lovia's own venv.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
venv="$here/.venv-peers"
python="${PYTHON:-python3}"
if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet \
    openai-agents \
    "pydantic-ai-slim[openai]" \
    opentelemetry-sdk \
    httpx \
    -e "$root[postgres,fast]"
"$venv/bin/python" -m pip list 2>/dev/null | grep -i -E '^(openai|openai-agents|pydantic-ai-slim|pydantic|httpx|httpx2|opentelemetry-sdk|lovia) ' || true
