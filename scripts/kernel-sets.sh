#!/usr/bin/env bash
# Every kernel set this machine runs, checked and timed against the others: for a CPU smol's
# developers have not had (a laptop with AVX-VNNI, a Xeon with AMX, a 16-core host, any ARM
# board or Apple Silicon Mac: smol's ARM sets have run only under emulation). It prints
# the CPU, runs the kernel tests (each checks every set the CPU runs against the scalar
# reference, in one process), then smol-bench with SMOL_ISA set to each set in turn on a
# synthetic model of SmolLM3-3B's Q4_K_M shape, the sets alternating within each round.
# usage: scripts/kernel-sets.sh [BUILD_DIR]   (a release build: cmake -B build && cmake --build build)
# env: THREADS (smol-bench -t list, default "1,2,<all cores>"), MODEL (default /tmp/smol-synth-3b.gguf,
#      made by smol-synth when missing), ROUNDS (default 2), BENCH_ARGS (default "-p 512 -n 32 -r 2").
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build=${1:-build}
threads=${THREADS:-1,2,$(getconf _NPROCESSORS_ONLN)}
model=${MODEL:-/tmp/smol-synth-3b.gguf}
rounds=${ROUNDS:-2}
read -r -a bench_args <<< "${BENCH_ARGS:--p 512 -n 32 -r 2}"
# The kernel tests are cases of the `kernels` test group's executable (tests/CMakeLists.txt).
kernel_tests=$build/tests/smol_tests_kernels
for tool in tests/smol_tests_kernels bin/smol-bench bin/smol-synth; do
  [[ -x "$build/$tool" ]] || { echo "kernel-sets.sh: expected $build/$tool; build first" >&2; exit 2; }
done

echo "==> CPU"
if [[ -r /proc/cpuinfo ]]; then
  grep -m1 -E 'model name|CPU part' /proc/cpuinfo || true
  # x86 names its features "flags", AArch64 "Features".
  flags=$(grep -m1 -E '^(flags|Features)' /proc/cpuinfo | tr ' ' '\n' |
          grep -xE 'avx2|fma|f16c|avx512(f|bw|vl|dq|_vnni)|avx_vnni|amx_(tile|int8)|asimd|asimddp|i8mm' | tr '\n' ' ' || true)
  echo "features smol looks at: $flags"
else  # macOS
  sysctl -n machdep.cpu.brand_string 2>/dev/null || true
  echo "features smol looks at: $(sysctl hw.optional.arm.FEAT_DotProd hw.optional.arm.FEAT_I8MM 2>/dev/null | tr '\n' ' ')"
fi
echo "cores: $(getconf _NPROCESSORS_ONLN)"

echo "==> kernel tests (each runs every set this CPU has)"
for test in test_quant_kernels test_matmul test_attention; do
  "$kernel_tests" --source-file="*/$test.cpp" --no-intro=true | tail -n 3
done

# The sets this CPU runs: SMOL_ISA naming a set the CPU lacks is an error, which fails the test.
sets=()
for isa in avx2 avx_vnni avx512 amx neon dotprod i8mm; do
  if SMOL_ISA=$isa "$kernel_tests" -tc='kernel selection' > /dev/null 2>&1; then
    sets+=("$isa")
  fi
done
echo "==> sets this CPU runs: ${sets[*]}"

[[ -f "$model" ]] || "$build/bin/smol-synth" -o "$model"
for ((round = 1; round <= rounds; ++round)); do
  for isa in "${sets[@]}"; do
    echo "==> round $round: SMOL_ISA=$isa"
    SMOL_ISA=$isa "$build/bin/smol-bench" -m "$model" -t "$threads" "${bench_args[@]}" --spec-steps 4
  done
done
