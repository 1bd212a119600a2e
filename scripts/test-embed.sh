#!/usr/bin/env bash
# Builds examples/embed the two ways another project would use smol, and runs each build on
# the tiny fixture model:
#   1. against an installed copy: cmake --install into a temporary prefix, then find_package;
#   2. with smol's source tree inside the project: add_subdirectory (what FetchContent does).
# usage: scripts/test-embed.sh [release build dir, default build]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build=${1:-build}
jobs=${JOBS:-$(nproc)}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
model=tests/data/tiny-f32/smollm3-tiny-f32.gguf

check_run() {
  local exe=$1
  local out
  # smol::smol alone: no HTTPS stack comes with it (that is smol::hub's).
  if ldd "$exe" | grep -E "libssl|libcrypto|libcpp-httplib"; then
    echo "embed: $exe links the download stack, expected smol::smol without it" >&2
    exit 1
  fi
  out=$("$exe" "$model" "Hello there")
  echo "$out" | tail -n 1
  grep -q "stopped:" <<<"$out" || { echo "embed: unexpected output from $exe" >&2; exit 1; }
}

echo "==> install smol into $work/prefix"
cmake --install "$build" --prefix "$work/prefix" >/dev/null
echo "==> examples/embed against the installed package (find_package)"
cmake -S examples/embed -B "$work/installed" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/installed" -j "$jobs" >/dev/null
check_run "$work/installed/smol-embed"

echo "==> examples/embed with smol's source tree inside (add_subdirectory)"
cmake -S examples/embed -B "$work/vendored" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSMOL_SOURCE_DIR="$PWD" >/dev/null
cmake --build "$work/vendored" -j "$jobs" >/dev/null
check_run "$work/vendored/smol-embed"
echo "==> embed builds passed"
