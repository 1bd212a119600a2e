#!/usr/bin/env bash
# Builds the doctest suite with AddressSanitizer + UndefinedBehaviorSanitizer (SMOL_SANITIZE=ON)
# in its own build folder and runs every test through ctest (but test_server, a test of the release
# smol-server from outside); any sanitizer report fails the run.
#
# usage: scripts/sanitize.sh [ctest -R regex]
# env:   BUILD_DIR (default build-asan), JOBS (build jobs, default: number of cores), CTEST_JOBS (default 2),
#        CXX (compiler, default the system c++), SMOL_DETECT_LEAKS=1 to turn LeakSanitizer on.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
build_dir=${BUILD_DIR:-build-asan}
jobs=${JOBS:-$(nproc)}
ctest_jobs=${CTEST_JOBS:-2}
filter=${1:-}

# -O1 keeps the sanitized suite fast enough for a 2-core CI machine while keeping stack traces;
# -g1 (line tables only) is all a sanitizer report needs for file:line and builds about a
# fifth faster than -g (one test file: 65 s -> 50 s of CPU).
echo "==> configuring $build_dir (ASan + UBSan, -O1 -g1)"
cmake -S . -B "$build_dir" -G Ninja \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
  -DSMOL_SANITIZE=ON -DSMOL_BUILD_TESTS=ON -DSMOL_BUILD_TOOLS=OFF -DSMOL_BUILD_EXAMPLES=OFF \
  -DSMOL_TEST_BIN_DIR="${BIN_DIR:-$PWD/build/bin}"

# Only the test executables are sanitized (the tools and examples are off, so they are all the
# build holds): the test files' two group executables (tests/CMakeLists.txt, which also leaves out
# test_server, a test of the release smol-server from outside). Tests that run programs
# (smol-cli, the tools) use the release build's (BIN_DIR, default build/bin), which
# scripts/test.sh builds first.
echo "==> building the sanitized test executables with -j$jobs"
cmake --build "$build_dir" -j "$jobs"

# Stop at the first error of either sanitizer, with a symbolized stack. LeakSanitizer is off by
# default: libgomp keeps its thread pool alive at exit, which LSan reports as a leak.
export ASAN_OPTIONS="halt_on_error=1:abort_on_error=1:detect_leaks=${SMOL_DETECT_LEAKS:-0}:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="halt_on_error=1:abort_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
# Two tests at a time: much of the sanitized suite runs on one thread (the sampler and kernel
# checks) or waits on a release program (test_cli, test_tools), so a second test fills the other
# core; the tests that run forward passes on two threads run alone (PROCESSORS in
# tests/CMakeLists.txt). Each test still runs with the OpenMP threads ctest gives it, so the
# threaded paths are tested as before.
echo "==> ctest -j$ctest_jobs (ASAN_OPTIONS=$ASAN_OPTIONS UBSAN_OPTIONS=$UBSAN_OPTIONS)"
ctest_args=(--test-dir "$build_dir" --output-on-failure -j "$ctest_jobs")
[[ -n "$filter" ]] && ctest_args+=(-R "$filter")
ctest "${ctest_args[@]}"
echo "==> sanitized test suite passed"
