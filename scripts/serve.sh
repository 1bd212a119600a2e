#!/usr/bin/env bash
# The main job on a fresh machine: install what is missing, build, fetch the default model
# (ggml-org/SmolLM3-3B-GGUF, Q4_K_M) into the cache unless it is there, start the chat server.
# Extra arguments go to smol-server (e.g. --port 9000, -m FILE to use a local model instead).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [[ $(id -u) == 0 ]]; then bash scripts/install-deps.sh; fi
if [[ -f build/CMakeCache.txt ]]; then
  cmake -S . -B build  # keep the build's options (the test suite may share it)
else
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSMOL_BUILD_TESTS=OFF
fi
cmake --build build -j "$(nproc)" --target smol-server
model_flags=(-hf ggml-org/SmolLM3-3B-GGUF:Q4_K_M)
for arg in "$@"; do [[ "$arg" == -m || "$arg" == -hf ]] && model_flags=(); done
exec build/bin/smol-server "${model_flags[@]}" "$@"
