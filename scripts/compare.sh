#!/usr/bin/env bash
# smol-bench against llama.cpp's and ik_llama.cpp's llama-bench on one GGUF file, the programs
# alternating round after round so that a neighbour's load or the clock's drift falls on all of
# them alike, then a table of each test's median t/s per program and smol's ratio to each peer,
# and, over two rounds or more, smol's ratio to the best peer in each round.
# The peers are optional: with smol-bench alone it prints smol's figures only. Nothing is fetched
# or built here; the peers' llama-bench binaries are given by path (docs/performance.md).
#
#   scripts/compare.sh -m MODEL.gguf [--llama-bench PATH] [--ik-bench PATH] [-p 512,32,16] [-n 64]
#                      [-t 1,2] [-r 3] [--reps 1] [--keep DIR]
#
# env: SMOL_BENCH (default build/bin/smol-bench), LLAMA_BENCH, IK_LLAMA_BENCH (the same as the
# flags), LLAMA_ARGS / IK_ARGS (extra arguments for each peer, e.g. "-ngl 0"), SMOL_ISA (passed
# through to smol-bench: compare a kernel set against peers built for the same instruction set).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

usage() {
  sed -n '2,14p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
  cat <<'EOF'
options:
  -m, --model FILE      the GGUF file every program runs (required)
  --smol-bench PATH     smol-bench (default $SMOL_BENCH, else build/bin/smol-bench)
  --llama-bench PATH    llama.cpp's llama-bench (default $LLAMA_BENCH; left out when neither is set)
  --ik-bench PATH       ik_llama.cpp's llama-bench, run with -rtr 0 and with -rtr 1 (default $IK_LLAMA_BENCH)
  -p LIST               prompt lengths (default 512,32,16; 0 skips pp)
  -n LIST               generated tokens (default 64; 0 skips tg)
  -t LIST               thread counts (default 1,2)
  -r N                  rounds: each program runs once per round, in turn (default 3)
  --reps N              repetitions inside each program run (their mean is the run's figure; default 1)
  --keep DIR            keep every run's JSON output in DIR (default: a temporary folder, removed)
EOF
}

model="" smol_bench=${SMOL_BENCH:-build/bin/smol-bench} llama_bench=${LLAMA_BENCH:-} ik_bench=${IK_LLAMA_BENCH:-}
prompts=512,32,16 gens=64 threads=1,2 rounds=3 reps=1 keep=""
need() { [[ $# -ge 2 && -n $2 ]] || { echo "compare.sh: $1 needs a value" >&2; exit 2; }; }
while [[ $# -gt 0 ]]; do
  case $1 in
    -m|--model) need "$@"; model=$2; shift 2 ;;
    --smol-bench) need "$@"; smol_bench=$2; shift 2 ;;
    --llama-bench) need "$@"; llama_bench=$2; shift 2 ;;
    --ik-bench) need "$@"; ik_bench=$2; shift 2 ;;
    -p) need "$@"; prompts=$2; shift 2 ;;
    -n) need "$@"; gens=$2; shift 2 ;;
    -t) need "$@"; threads=$2; shift 2 ;;
    -r) need "$@"; rounds=$2; shift 2 ;;
    --reps) need "$@"; reps=$2; shift 2 ;;
    --keep) need "$@"; keep=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "compare.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
[[ -n $model ]] || { echo "compare.sh: expected -m MODEL.gguf" >&2; usage >&2; exit 2; }
[[ -f $model ]] || { echo "compare.sh: -m: no file at '$model'" >&2; exit 2; }
for list in "$prompts" "$gens" "$threads"; do
  [[ $list =~ ^[0-9]+(,[0-9]+)*$ ]] || { echo "compare.sh: expected a comma-separated list of numbers, found '$list'" >&2; exit 2; }
done
[[ $rounds =~ ^[1-9][0-9]*$ && $reps =~ ^[1-9][0-9]*$ ]] ||
  { echo "compare.sh: -r and --reps: expected positive numbers, found '$rounds' and '$reps'" >&2; exit 2; }
for bin in "$smol_bench" "$llama_bench" "$ik_bench"; do
  [[ -z $bin || -x $bin ]] || { echo "compare.sh: no executable at '$bin'" >&2; exit 2; }
done
command -v python3 >/dev/null || { echo "compare.sh: python3 not found (it reads the programs' JSON)" >&2; exit 1; }

if [[ -n $keep ]]; then
  out=$keep
  mkdir -p "$out"
else
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
fi

# The runs of one round, in this order: name, then the command's words.
programs=(smol)
[[ -n $llama_bench ]] && programs+=(llama.cpp)
[[ -n $ik_bench ]] && programs+=("ik -rtr 0" "ik -rtr 1")
common=(-m "$model" -p "$prompts" -n "$gens" -t "$threads" -r "$reps" -o json)
run_program() {  # NAME OUTPUT
  local -a extra
  case $1 in
    smol) "$smol_bench" "${common[@]}" --no-bandwidth --no-int8-peak ;;
    llama.cpp) read -ra extra <<< "${LLAMA_ARGS:-}"; "$llama_bench" "${common[@]}" "${extra[@]}" ;;
    "ik -rtr 0") read -ra extra <<< "${IK_ARGS:-}"; "$ik_bench" "${common[@]}" -rtr 0 "${extra[@]}" ;;
    "ik -rtr 1") read -ra extra <<< "${IK_ARGS:-}"; "$ik_bench" "${common[@]}" -rtr 1 "${extra[@]}" ;;
  esac > "$2" 2> "$2.log"
}

echo "compare.sh: $model, tests -p $prompts -n $gens -t $threads, $rounds round(s) of: ${programs[*]}" >&2
for ((round = 1; round <= rounds; ++round)); do
  for name in "${programs[@]}"; do
    file="$out/round$round-${name// /_}.json"
    echo "  round $round: $name" >&2
    if ! run_program "$name" "$file"; then
      echo "compare.sh: $name failed in round $round; its stderr:" >&2
      tail -20 "$file.log" >&2
      exit 1
    fi
  done
done

python3 - "$out" "$rounds" "${programs[@]}" <<'EOF'
import json, pathlib, statistics, sys

out, rounds, programs = pathlib.Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]

def test_name(row):
    # llama-bench's names: ppN for a prompt, tgN for generation (depth, where given, as "@ dN").
    n_prompt, n_gen = int(row.get("n_prompt", 0)), int(row.get("n_gen", 0))
    name = f"pp{n_prompt}" if n_prompt > 0 and n_gen == 0 else f"tg{n_gen}" if n_gen > 0 and n_prompt == 0 else f"pp{n_prompt}+tg{n_gen}"
    depth = int(row.get("n_depth", 0) or 0)
    return name + (f" @ d{depth}" if depth else "")

speeds, commits, order = {}, {}, []  # (test, threads) -> program -> {round: t/s}
for r in range(1, rounds + 1):
    for program in programs:
        path = out / f"round{r}-{program.replace(' ', '_')}.json"
        try:
            rows = json.loads(path.read_text())
        except ValueError as e:
            sys.exit(f"compare.sh: {program}'s output in round {r} is not JSON ({e}): {path}")
        for row in rows:
            key = (test_name(row), int(row["n_threads"]))
            if key not in speeds:
                speeds[key] = {}
                order.append(key)
            speeds[key].setdefault(program, {})[r] = float(row["avg_ts"])
            if row.get("build_commit"):
                commits[program] = row["build_commit"]

def median(values):
    return statistics.median(values) if values else None

peers = [p for p in programs if p != "smol"]
header = ["test", "threads"] + [f"{p} t/s" for p in programs]
if "llama.cpp" in peers:
    header.append("smol / llama.cpp")
if any(p.startswith("ik") for p in peers):
    header.append("smol / best ik")
print(f"medians of {rounds} round(s), each program run in turn per round; t/s of each run is llama-bench's avg_ts")
print("programs: " + ", ".join(f"{p} ({commits[p]})" if p in commits else p for p in programs))
print()
print("| " + " | ".join(header) + " |")
print("|" + "|".join(["---"] + ["--:"] * (len(header) - 1)) + "|")
for key in order:  # as smol-bench ran them: per thread count, the prompts, then generation
    test, threads = key
    med = {p: median(list(speeds[key].get(p, {}).values())) for p in programs}
    cells = [test, str(threads)] + [f"{med[p]:.2f}" if med[p] is not None else "-" for p in programs]
    smol = med.get("smol")
    if "llama.cpp" in peers:
        cells.append(f"{smol / med['llama.cpp']:.2f}x" if smol and med.get("llama.cpp") else "-")
    ik = [med[p] for p in peers if p.startswith("ik") and med[p]]
    if any(p.startswith("ik") for p in peers):
        cells.append(f"{smol / max(ik):.2f}x" if smol and ik else "-")
    print("| " + " | ".join(cells) + " |")
if peers and rounds > 1:
    # A median hides how steady the window was: a neighbour's load or the clock falls on one
    # round of one program, so each round's own ratio shows whether the programs moved together.
    print()
    print("smol / best peer, round by round (the rounds' spread is the window's noise):")
    print()
    print("| test | threads | " + " | ".join(f"round {r}" for r in range(1, rounds + 1)) + " |")
    print("|" + "|".join(["---"] + ["--:"] * (rounds + 1)) + "|")
    for key in order:
        cells = [key[0], str(key[1])]
        for r in range(1, rounds + 1):
            smol = speeds[key].get("smol", {}).get(r)
            best = max((speeds[key].get(p, {}).get(r) or 0 for p in peers), default=0)
            cells.append(f"{smol / best:.2f}x" if smol and best else "-")
        print("| " + " | ".join(cells) + " |")
if not peers:
    print("\nsmol-bench only: give --llama-bench and/or --ik-bench (or LLAMA_BENCH, IK_LLAMA_BENCH) for the peers' columns")
EOF
