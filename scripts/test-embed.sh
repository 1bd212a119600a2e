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
# The two builds compile one file each, so they run side by side, one per core.
build_embed() {  # build_embed FOLDER CMAKE_ARGS...
  local dir=$1
  shift
  cmake -S examples/embed -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
  cmake --build "$dir" -j "$jobs" >/dev/null
}
echo "==> examples/embed against the installed package (find_package) and with smol's source tree inside (add_subdirectory)"
build_embed "$work/installed" -DCMAKE_PREFIX_PATH="$work/prefix" &
installed=$!
build_embed "$work/vendored" -DSMOL_SOURCE_DIR="$PWD" &
vendored=$!
wait "$installed" || { echo "embed: the build against the installed package failed" >&2; exit 1; }
wait "$vendored" || { echo "embed: the build with smol's source tree inside failed" >&2; exit 1; }
echo "==> find_package build:"
check_run "$work/installed/smol-embed"
echo "==> add_subdirectory build:"
check_run "$work/vendored/smol-embed"
echo "==> embed builds passed"
