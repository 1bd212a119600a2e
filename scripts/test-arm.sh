#!/usr/bin/env bash
# The ARM stage: cross-builds the tests that need no download stack (the kernel tests, the
# attention kernels, the tiny-fixture logits and the tokenizer) for AArch64 with Debian's
# g++-aarch64-linux-gnu, and runs them under qemu-user (the kernel tests, matmul over row groups
# and the Q4_K_M fixture on each of three emulated cores, the tokenizer on one); each core must
# pick its own kernel set:
#   -cpu max         Armv8.x with dotprod and i8mm: i8mm
#   -cpu cortex-a76  Armv8.2 with dotprod:         dotprod
#   -cpu cortex-a53  Armv8.0:                      neon
# (the kernel test checks every set a core runs, so -cpu max checks all three ARM sets); the three
# cores run side by side.
# The compiler is called directly rather than through CMake: the test executables link smol::hub,
# whose OpenSSL and cpp-httplib have no AArch64 build on the host, and these three tests need
# neither. Build type is -O1: emulated code is slow either way, and -O1 builds in about half the
# time of -O2 while keeping the kernels' inlining (always_inline and flatten) as it is.
# Last, examples/embed is built through cmake/aarch64-linux-gnu.cmake and generates on one core.
# Timings under emulation say nothing about ARM hardware; only correctness is tested here.
# xsimd (header-only, the ARM float kernels' vector type) comes from the host's package, its
# folder put on the include path through a link in build-arm/include: only xsimd/, not the
# host's C library headers (Debian's cross g++ does search /usr/include, but after the target's
# own headers; the link names the dependency, and XSIMD_INCLUDE may point elsewhere).
# env: JOBS (parallel compiles, default: number of cores), ARM_CXX (default aarch64-linux-gnu-g++),
#      ARM_SYSROOT (default /usr/aarch64-linux-gnu), QEMU (default qemu-aarch64-static),
#      XSIMD_INCLUDE (the folder holding xsimd/, default /usr/include).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD
jobs=${JOBS:-$(nproc)}
cxx=${ARM_CXX:-aarch64-linux-gnu-g++}
sysroot=${ARM_SYSROOT:-/usr/aarch64-linux-gnu}
qemu=${QEMU:-qemu-aarch64-static}
xsimd_include=${XSIMD_INCLUDE:-/usr/include}
out=build-arm
start=$SECONDS

for tool in "$cxx" "$qemu"; do
  command -v "$tool" >/dev/null || {
    echo "test-arm: $tool not found; install g++-aarch64-linux-gnu and qemu-user-static (scripts/install-deps.sh --tests)" >&2
    exit 1
  }
done

[[ -f $xsimd_include/xsimd/xsimd.hpp ]] || {
  echo "test-arm: $xsimd_include/xsimd/xsimd.hpp not found; install libxsimd-dev (scripts/install-deps.sh)" >&2
  exit 1
}

tests=(test_quant_kernels test_int8_peak test_attention test_swiglu test_reference test_tokenizer test_matmul)
mkdir -p "$out/include"
ln -sfn "$xsimd_include/xsimd" "$out/include/xsimd"
flags=(-std=c++20 -O1 -fopenmp -Wall -Wextra -Wno-unused-parameter -Werror -Iinclude -isystem "$out/include"
       "-DSMOL_TEST_DATA_DIR=\"$root/tests/data\"" "-DSMOL_BIN_DIR=\"$root/$out/bin\"")

echo "==> cross-building ${tests[*]} for AArch64 ($cxx, $jobs jobs)"
# One object per source, compiled in parallel; a failed compile stops the stage.
printf '%s\n' doctest_main "${tests[@]}" |
  xargs -P "$jobs" -I{} "$cxx" "${flags[@]}" -c "tests/{}.cpp" -o "$out/{}.o"
for t in "${tests[@]}"; do
  "$cxx" -fopenmp "$out/doctest_main.o" "$out/$t.o" -o "$out/$t"
done
echo "==> built after $((SECONDS - start)) s"

# Each emulated core, and the kernel set it must run (what the kernel test reports).
cpus=(max cortex-a76 cortex-a53)
expected_sets=(i8mm dotprod neon)
# What runs on each core: every kernel test (the float tiles and the attention kernels run
# XsimdFloats, the neon set's, on every core), and the Q4_K_M fixture's logits and greedy tokens
# (Q4_K and Q6_K through that core's set; test_reference's other cases run other weight types
# through the scalar set and take minutes each under emulation, as does test_attention's
# end-to-end case, left to the x86 run). The tokenizer depends on no kernel set, only on the
# architecture (char is unsigned on AArch64), so it runs once.
run() {  # run CPU TEST [doctest arguments...]
  local cpu=$1 t=$2
  shift 2
  local log="$out/$t.$cpu.log"
  echo "==> $t on -cpu $cpu $*"
  if ! OMP_NUM_THREADS=2 GOMP_SPINCOUNT=10000 "$qemu" -L "$sysroot" -cpu "$cpu" "$out/$t" "$@" > "$log" 2>&1; then
    tail -n 60 "$log"
    echo "test-arm: $t failed on -cpu $cpu (log: $log)" >&2
    return 1
  fi
  grep -E '^\[doctest\] (test cases|assertions)' "$log" | sed 's/^/    /'
}
run_core() {  # run_core INDEX: everything one emulated core runs
  local cpu=${cpus[$1]} ran
  run "$cpu" test_quant_kernels || return 1
  ran=$(sed -n 's/.*kernel set running: \([a-z0-9_]*\).*/\1/p' "$out/test_quant_kernels.$cpu.log" | head -n 1)
  echo "    kernel set: $ran"
  if [[ $ran != "${expected_sets[$1]}" ]]; then
    echo "test-arm: -cpu $cpu ran kernel set '$ran', expected '${expected_sets[$1]}'" >&2
    return 1
  fi
  run "$cpu" test_int8_peak || return 1  # the set's int8 peak loop (smol-bench's) against its reference
  run "$cpu" test_attention "--test-case-exclude=attention matches*" || return 1
  run "$cpu" test_swiglu || return 1  # the NEON kernel against aarch64 glibc's expf
  run "$cpu" test_reference "--test-case=Q4_K_M fixture*" || return 1
  # Row groups read by prompts: ARM's GEMMs restore the rows once and any thread reads them later;
  # a wide input's halved token blocks; matmul_add's sums, bit for bit those of matmul then add;
  # activations quantized into packed blocks; the MLP's hidden state handed on packed, from rows
  # the GEMMs restore.
  run "$cpu" test_matmul "--test-case=matrices read as row groups*,wide inputs*,matmul_add*,GEMM activations*,matmul_mlp_add*,the 3B shape*" || return 1
  if [[ $cpu == cortex-a53 ]]; then run "$cpu" test_tokenizer || return 1; fi
}
# The three cores side by side: emulation runs mostly on one host thread, so one core after
# another left the second host core idle for most of the stage. Their six OpenMP threads on two
# cores get the short barrier spin ctest gives the x86 tests (run() above), so a waiting thread
# does not burn the slice the awaited one needs. Each core's output is printed whole when all are
# done; the stage fails if any core failed.
pids=()
for i in "${!cpus[@]}"; do
  run_core "$i" > "$out/core.${cpus[$i]}.txt" 2>&1 &
  pids+=($!)
done
failed=0
for i in "${!cpus[@]}"; do
  wait "${pids[$i]}" || failed=1
  cat "$out/core.${cpus[$i]}.txt"
done
(( failed == 0 )) || { echo "test-arm: a core's tests failed (above)" >&2; exit 1; }
echo "==> the three cores passed after $((SECONDS - start)) s"

# The toolchain file, as an embedding project would use it: examples/embed with smol's source
# tree inside (no download stack), generating from the tiny Q4_K_M fixture on an Armv8.0 core.
echo "==> examples/embed through cmake/aarch64-linux-gnu.cmake"
cmake -S examples/embed -B "$out/embed" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_TOOLCHAIN_FILE="$root/cmake/aarch64-linux-gnu.cmake" -DSMOL_SOURCE_DIR="$root" -DSMOL_HUB=OFF \
  -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" >/dev/null
cmake --build "$out/embed" -j "$jobs" >/dev/null
embed_out=$(OMP_NUM_THREADS=2 "$qemu" -L "$sysroot" -cpu cortex-a53 "$out/embed/smol-embed" \
  tests/data/tiny/smollm3-tiny-Q4_K_M.gguf "Hello there")
echo "    $(tail -n 1 <<<"$embed_out")"
grep -q "stopped:" <<<"$embed_out" || {
  echo "test-arm: smol-embed on -cpu cortex-a53 printed no 'stopped:' line; its output: $embed_out" >&2
  exit 1
}
echo "==> ARM stage passed in $((SECONDS - start)) s"
