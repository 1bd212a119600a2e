#!/usr/bin/env bash
# scripts/compare.sh end to end on the tiny fixture, cheaply (pp8 and tg2, one thread, 2 rounds):
# with smol-bench alone it must print smol's column only; with a stand-in for llama.cpp's and
# ik_llama.cpp's llama-bench (a script that prints llama-bench's JSON with 2.00 t/s for every test
# and logs its arguments) it must alternate the programs round by round, run ik with -rtr 0 and
# -rtr 1, put each median and smol's ratio to the peers in the table, and give smol's ratio to the
# best peer round by round.
#   run_compare_test.sh SMOL_BENCH MODEL SCRATCH_DIR
set -euo pipefail
smol_bench=$1 model=$2 scratch=$3
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
rm -rf "$scratch"
mkdir -p "$scratch"
fail() { echo "run_compare_test: $*" >&2; exit 1; }

alone=$(LLAMA_BENCH= IK_LLAMA_BENCH= bash "$root/scripts/compare.sh" --smol-bench "$smol_bench" -m "$model" \
          -p 8 -n 2 -t 1 -r 2)
echo "$alone"
grep -qx '| test | threads | smol t/s |' <<< "$alone" || fail "expected smol's column only"
grep -Eqx '\| pp8 \| 1 \| [0-9]+\.[0-9]{2} \|' <<< "$alone" || fail "expected a pp8 row with smol's median"
grep -Eqx '\| tg2 \| 1 \| [0-9]+\.[0-9]{2} \|' <<< "$alone" || fail "expected a tg2 row with smol's median"
grep -q 'smol-bench only' <<< "$alone" || fail "expected the note that no peer ran"

peer=$scratch/stand-in-llama-bench
cat > "$peer" <<'PEER'
#!/usr/bin/env bash
# llama-bench's JSON for every -p, -n and -t combination, at 2.00 t/s; its arguments go to a log.
echo "$*" >> "$0.calls"
p=512 n=128 t=1
while [[ $# -gt 0 ]]; do
  case $1 in -p) p=$2; shift ;; -n) n=$2; shift ;; -t) t=$2; shift ;; esac
  shift
done
rows=()
for threads in ${t//,/ }; do
  for prompt in ${p//,/ }; do
    ((prompt > 0)) && rows+=("{\"n_prompt\": $prompt, \"n_gen\": 0, \"n_threads\": $threads, \"avg_ts\": 2.0, \"build_commit\": \"stand-in\"}")
  done
  for gen in ${n//,/ }; do
    ((gen > 0)) && rows+=("{\"n_prompt\": 0, \"n_gen\": $gen, \"n_threads\": $threads, \"avg_ts\": 2.0, \"build_commit\": \"stand-in\"}")
  done
done
(IFS=,; echo "[${rows[*]}]")
PEER
chmod +x "$peer"
peers=$(bash "$root/scripts/compare.sh" --smol-bench "$smol_bench" --llama-bench "$peer" --ik-bench "$peer" \
          -m "$model" -p 8 -n 2 -t 1 -r 2)
echo "$peers"
grep -qx '| test | threads | smol t/s | llama.cpp t/s | ik -rtr 0 t/s | ik -rtr 1 t/s | smol / llama.cpp | smol / best ik |' \
  <<< "$peers" || fail "expected a column per program and the two ratio columns"
for test in pp8 tg2; do
  row=$(grep -m1 "^| $test | 1 |" <<< "$peers") || fail "expected a $test row"
  # smol's median over the peers' 2.00: both ratios are smol's t/s halved.
  awk -F' [|] ' -v test="$test" '{
      line = $0; smol = $3
      if ($4 != "2.00" || $5 != "2.00" || $6 != "2.00") { print test ": expected the peers at 2.00, found " line; exit 1 }
      sub(/ [|]$/, "", $8)
      for (i = 7; i <= 8; ++i) {
        ratio = $i; sub(/x$/, "", ratio)  # each figure rounded to 2 decimals: off by 0.01 at most
        if ((ratio - smol / 2) > 0.01 || (smol / 2 - ratio) > 0.01) { print test ": expected ratios of " smol / 2 ", found " line; exit 1 }
      }
  }' <<< "$row" || fail "wrong medians or ratios"
done
grep -qx '| test | threads | round 1 | round 2 |' <<< "$peers" || fail "expected the round-by-round table"
for test in pp8 tg2; do
  # Its rows follow the medians' table, so the last row of each test is the round-by-round one;
  # with the peers at 2.00 every round, the two rounds' ratios average to the medians' ratio.
  median_ratio=$(grep "^| $test | 1 |" <<< "$peers" | head -1 | awk -F' [|] ' '{ r = $7; sub(/x$/, "", r); print r }')
  rounds_row=$(grep "^| $test | 1 |" <<< "$peers" | tail -1)
  awk -F' [|] ' -v test="$test" -v want="$median_ratio" '{
      line = $0; sub(/ [|]$/, "", $4)
      a = $3; b = $4; sub(/x$/, "", a); sub(/x$/, "", b)
      if (NF != 4 || a !~ /^[0-9]+\.[0-9][0-9]$/ || b !~ /^[0-9]+\.[0-9][0-9]$/) { print test ": expected two ratios, found " line; exit 1 }
      if (((a + b) / 2 - want) > 0.011 || (want - (a + b) / 2) > 0.011) { print test ": expected rounds averaging " want ", found " line; exit 1 }
  }' <<< "$rounds_row" || fail "wrong round-by-round ratios"
done
grep -q 'round by round' <<< "$alone" && fail "expected no round-by-round table without peers"
calls=$(cat "$peer.calls")
[[ $(grep -c -- '-rtr 0' <<< "$calls") == 2 && $(grep -c -- '-rtr 1' <<< "$calls") == 2 ]] ||
  fail "expected ik's runs with -rtr 0 and -rtr 1 once per round, found: $calls"
order=$(sed -E 's/.*-rtr ([01]).*/ik\1/; t; s/.*/llama/' <<< "$calls" | tr '\n' ' ')
[[ $order == "llama ik0 ik1 llama ik0 ik1 " ]] || fail "expected the peers in turn each round, found: $order"

if bash "$root/scripts/compare.sh" --smol-bench "$smol_bench" --llama-bench "$scratch/none" -m "$model" 2> "$scratch/err"; then
  fail "expected a missing llama-bench to be refused"
fi
grep -q "no executable at '$scratch/none'" "$scratch/err" || fail "expected the missing path named: $(cat "$scratch/err")"
echo "run_compare_test: passed"
