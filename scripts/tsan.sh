#!/usr/bin/env bash
# Builds the threaded parts (the scheduler and session tests, and smol-server with the tests
# that drive it) with ThreadSanitizer in their own build folder and runs them; any data race
# or other TSan report fails the run.
#
# clang with LLVM's OpenMP runtime and its TSan tool (libarcher) is used, so OpenMP's own
# synchronisation is visible to TSan and the model's parallel loops run with real threads.
#
# usage: scripts/tsan.sh
# env:   BUILD_DIR (default build-tsan), JOBS (build jobs, default: number of cores), CC/CXX (default clang).
# needs: clang, libomp-14-dev (libomp and libarcher).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
build_dir=${BUILD_DIR:-build-tsan}
jobs=${JOBS:-$(nproc)}
export CC=${CC:-clang} CXX=${CXX:-clang++}

archer=$("$CXX" -print-file-name=libarcher.so)
if [[ ! -f "$archer" ]]; then
  archer=$(ls /usr/lib/llvm-*/lib/libarcher.so 2>/dev/null | head -n 1 || true)
fi
[[ -f "$archer" ]] || { echo "tsan: libarcher.so (LLVM OpenMP's TSan tool) not found; install libomp-dev" >&2; exit 1; }

echo "==> configuring $build_dir with $CXX (ThreadSanitizer, -O1 -g1)"
cmake -S . -B "$build_dir" -G Ninja \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -fsanitize=thread" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread" \
  -DSMOL_BUILD_TESTS=ON -DSMOL_BUILD_TOOLS=ON -DSMOL_BUILD_EXAMPLES=ON \
  -DSMOL_TEST_BIN_DIR="$PWD/$build_dir/bin"
# The three tests are the `threads` group's executable (tests/CMakeLists.txt), built alone.
targets=(smol_tests_threads smol-server smol-load)
echo "==> building ${targets[*]} with -j$jobs"
cmake --build "$build_dir" -j "$jobs" --target "${targets[@]}"

# halt_on_error: the first report fails the test (and a smol-server under test exits, which
# the test reports); OMP_TOOL_LIBRARIES loads archer into every OpenMP program started here, and
# ignore_noninstrumented_modules keeps TSan out of the (uninstrumented) OpenMP runtime itself.
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:ignore_noninstrumented_modules=1${TSAN_OPTIONS:+:$TSAN_OPTIONS}"
export OMP_TOOL_LIBRARIES="$archer"
export ARCHER_OPTIONS="verbose=0"
echo "==> ctest (TSAN_OPTIONS=$TSAN_OPTIONS, OMP_TOOL_LIBRARIES=$archer)"
# One at a time, unlike the other stages: test_server bounds how long the TSan-built smol-server
# takes to answer under load (a 4-token chat within a second), and test_scheduler beside it would
# take half the cores that slowed server needs.
ctest --test-dir "$build_dir" --output-on-failure -j 1 -R '^(test_scheduler|test_session|test_server)$'
echo "==> ThreadSanitizer suite passed"
