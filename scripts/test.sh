#!/usr/bin/env bash
# The whole test suite, exactly as CI runs it (.ci/run calls this after installing packages):
#   1. release build of the library, tools, examples and tests, and ctest; examples/embed built
#      against an installed smol and through add_subdirectory (scripts/test-embed.sh); README's
#      main command against a local stand-in for the Hub (scripts/test-serve.sh);
#   2. the unit tests again under AddressSanitizer + UndefinedBehaviorSanitizer (all but
#      test_server, which tests the release smol-server from outside);
#   3. the scheduler, session and server tests under ThreadSanitizer (smol-server built with it too);
#   4. the GGUF reader, the tokenizer, the server's request handling and its HTTP framing fuzzed
#      with libFuzzer, FUZZ_SECONDS shared among the four (15 seconds each), seeded with the fixtures;
#   5. the kernel, tiny-fixture logit and tokenizer tests cross-built for AArch64 and run under
#      qemu-user on three emulated cores side by side, one per ARM kernel set (scripts/test-arm.sh).
# env: JOBS (build jobs, default: number of cores), FUZZ_SECONDS (default 60), SKIP_SANITIZE=1,
#      SKIP_TSAN=1, SKIP_FUZZ=1, SKIP_ARM=1 (for quick local runs; CI runs everything).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
jobs=${JOBS:-$(nproc)}
start=$SECONDS

bash scripts/check-readme.sh
echo "==> release build (build/)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "$jobs"
# Two tests at a time: the server, client and browser tests mostly wait on smol-server, and the
# other core runs the next test meanwhile (tests/CMakeLists.txt sets their OpenMP threads).
echo "==> ctest (release)"
ctest --test-dir build --output-on-failure -j 2
echo "==> release suite passed after $((SECONDS - start)) s"
JOBS=$jobs bash scripts/test-embed.sh build
bash scripts/test-serve.sh

if [[ "${SKIP_SANITIZE:-0}" != 1 ]]; then
  JOBS=$jobs bash scripts/sanitize.sh
  echo "==> sanitized suite passed after $((SECONDS - start)) s"
fi
if [[ "${SKIP_TSAN:-0}" != 1 ]]; then
  JOBS=$jobs bash scripts/tsan.sh
  echo "==> ThreadSanitizer suite passed after $((SECONDS - start)) s"
fi
if [[ "${SKIP_FUZZ:-0}" != 1 ]]; then
  bash scripts/fuzz.sh "${FUZZ_SECONDS:-60}"
  echo "==> fuzzing passed after $((SECONDS - start)) s"
fi
if [[ "${SKIP_ARM:-0}" != 1 ]]; then
  JOBS=$jobs bash scripts/test-arm.sh
  echo "==> ARM stage passed after $((SECONDS - start)) s"
fi
echo "==> all tests passed in $((SECONDS - start)) s"
