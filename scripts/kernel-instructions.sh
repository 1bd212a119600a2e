#!/usr/bin/env bash
# Counts the AArch64 instructions smol's ARM kernels execute per 256 weights, under qemu's
# instruction log: what can be said about ARM kernel speed on a machine without an ARM core
# (emulated timings mean nothing; instruction counts are the design figure until real ARM
# timings exist, docs/arm.md). Cross-builds bench/kernel_instructions.cpp as a static binary,
# runs each kernel on 1 and on 9 blocks per row between two marker calls, and reports the
# difference per block, so call overhead drops out:
#   decode: instructions per row per 256 weights (one column, kTileRows rows per call)
#   prompt: instructions per 16-row by 16-token tile per 256 weights
# usage: scripts/kernel-instructions.sh [SET...]   (default: neon dotprod i8mm, those compiled)
# env: TYPES (default "Q4_K Q6_K IQ4_XS"), ARM_CXX (default aarch64-linux-gnu-g++), QEMU (default
#      qemu-aarch64-static), OUT (default build-arm).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cxx=${ARM_CXX:-aarch64-linux-gnu-g++}
qemu=${QEMU:-qemu-aarch64-static}
out=${OUT:-build-arm}
read -r -a types <<< "${TYPES:-Q4_K Q6_K IQ4_XS}"
sets=("$@")
[[ ${#sets[@]} -gt 0 ]] || sets=(neon dotprod i8mm)
mkdir -p "$out"
bin=$out/kernel-instructions
echo "==> cross-building $bin ($cxx -O2, static)"
"$cxx" -std=c++20 -O2 -fopenmp -static -no-pie -Iinclude bench/kernel_instructions.cpp -o "$bin" 2> "$bin.log" ||
  { cat "$bin.log" >&2; exit 1; }
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# Instructions executed between the markers: every translated block's length from the in_asm
# part of the log, summed over the blocks the exec part shows running after count_begin and
# before count_end.
count() {  # count SET TYPE KIND BLOCKS
  "$qemu" -cpu max -d in_asm,exec,nochain -D "$log" "$bin" "$1" "$2" "$3" "$4" 2 > /dev/null
  python3 - "$log" "$bin" "${cxx%g++}nm" << 'PY'
import re, subprocess, sys
log, binary, nm = sys.argv[1:4]
marks = {}
for line in subprocess.run([nm, "-S", binary], capture_output=True, text=True, check=True).stdout.splitlines():
    fields = line.split()
    if len(fields) == 4 and fields[3] in ("count_begin", "count_end"):
        start = int(fields[0], 16)
        marks[fields[3]] = range(start, start + int(fields[1], 16))
lengths, block, total, counting = {}, None, 0, False
instruction = re.compile(r"^0x([0-9a-f]+):\s")
executed = re.compile(r"^Trace \d+: 0x[0-9a-f]+ \[[0-9a-f]+/([0-9a-f]+)/")
with open(log, errors="replace") as f:
    for line in f:
        if (m := instruction.match(line)):
            pc = int(m.group(1), 16)
            if block is None:
                block = pc
                lengths[block] = 0
            lengths[block] += 1
        elif (m := executed.match(line)):
            pc = int(m.group(1), 16)
            if pc in marks["count_begin"]: counting = True
            elif pc in marks["count_end"]: counting = False
            elif counting: total += lengths[pc]
        else:
            block = None
print(total)
PY
}

printf '%-8s %-6s %12s %16s\n' set type "decode/row" "prompt/16x16"
for set in "${sets[@]}"; do
  if ! "$qemu" -cpu max "$bin" "$set" Q4_K decode 1 1 > /dev/null 2>&1; then
    echo "$set: not compiled in this build (skipped)"
    continue
  fi
  for type in "${types[@]}"; do
    # Two calls per run: per block = (count(9 blocks) - count(1 block)) / (8 blocks * 2 calls).
    rows=$("$qemu" -cpu max "$bin" "$set" "$type" decode 1 1 | sed -n 's/.*: \([0-9]*\) rows by.*/\1/p')
    decode=$(( ($(count "$set" "$type" decode 9) - $(count "$set" "$type" decode 1)) / 16 / rows ))
    prompt=$(( ($(count "$set" "$type" prompt 9) - $(count "$set" "$type" prompt 1)) / 16 ))
    printf '%-8s %-6s %12d %16d\n' "$set" "$type" "$decode" "$prompt"
  done
done
