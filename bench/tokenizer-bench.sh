#!/usr/bin/env bash
# smol's tokenizer beside Hugging Face's (@huggingface/tokenizers, the JavaScript port, from npm)
# on the same multi-megabyte multilingual text: MB/s and tokens/s for each, and whether the two
# produced the same number of tokens. Without TEXT, the text is built from Debian's translation
# catalogues (bench/mo_corpus.py). Needs a release build (build/bin), node and npm.
#
#   bash bench/tokenizer-bench.sh [MODEL_OR_VOCAB.gguf] [TEXT]
#   default MODEL: tests/data/vocab/smollm3-vocab.gguf (the SmolLM3 vocabulary)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
model=${1:-$root/tests/data/vocab/smollm3-vocab.gguf}
text=${2:-}
bin=${BIN_DIR:-$root/build/bin}
work=${WORK_DIR:-$root/build/tokenizer-bench}
repeat=${REPEAT:-5}
for program in smol-tokenizer-bench smol-inspect; do
  [[ -x "$bin/$program" ]] || { echo "tokenizer-bench: $bin/$program missing: build first (cmake --build build)" >&2; exit 1; }
done
command -v node >/dev/null && command -v npm >/dev/null || { echo "tokenizer-bench: needs node and npm" >&2; exit 1; }

package="$root/tools/hf-tokenizers"
bash "$root/scripts/npm-ci-into.sh" "$package" "$work"
cp "$package/hf_tokenize.mjs" "$work/"
if [[ -z "$text" ]]; then
  text="$work/corpus.txt"
  [[ -s "$text" ]] || python3 "$root/bench/mo_corpus.py" "$text"
fi
"$bin/smol-inspect" "$model" --hf-tokenizer "$work/tokenizer-plain.json" --no-control-tokens >/dev/null

smol_json=$("$bin/smol-tokenizer-bench" -m "$model" -f "$text" -r "$repeat" -o json)
hf_json=$(node "$work/hf_tokenize.mjs" bench --tokenizer "$work/tokenizer-plain.json" --text "$text" --repeat "$repeat")
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
SMOL="$smol_json" HF="$hf_json" TEXT="$text" CPU="$cpu" node --input-type=module -e '
const smol = JSON.parse(process.env.SMOL), hf = JSON.parse(process.env.HF);
const row = (name, r) => `| ${name} | ${r.tokens} | ${r.mb_per_s.toFixed(2)} | ${Math.round(r.tokens_per_s)} |`;
console.log(`text: ${process.env.TEXT} (${(smol.bytes / 1e6).toFixed(2)} MB); CPU: ${process.env.CPU}; one thread, best of runs`);
console.log("| tokenizer | tokens | MB/s | tokens/s |\n|---|--:|--:|--:|");
console.log(row("smol", smol));
console.log(row("@huggingface/tokenizers 0.2.0 (node " + process.version + ")", hf));
console.log(`smol / Hugging Face: ${(smol.mb_per_s / hf.mb_per_s).toFixed(2)}x; token counts ${smol.tokens === hf.tokens ? "equal" : "DIFFER"}`);
'
