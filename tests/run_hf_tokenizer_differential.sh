#!/usr/bin/env bash
# ctest wrapper for the differential test against Hugging Face's tokenizer: installs
# @huggingface/tokenizers from tools/hf-tokenizers' committed package-lock.json into WORK_DIR
# (npm ci), has hf_tokenizer_cases write the vocabulary's tokenizer.json and seeded random texts
# with smol's ids, then checks that Hugging Face gives the same ids for every text, and for every
# line of the reference files given. Exits 77 (ctest SKIP) only when node or npm is not installed.
#   run_hf_tokenizer_differential.sh CASES_BINARY VOCAB.gguf WORK_DIR [REFERENCE.jsonl...]
set -euo pipefail
cases_binary=$1 vocab=$2 work=$3
shift 3
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
package="$here/../tools/hf-tokenizers"
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "SKIP: node/npm not installed (apt-get install nodejs npm)"; exit 77
fi
bash "$here/../scripts/npm-ci-into.sh" "$package" "$work"
cp "$package/hf_tokenize.mjs" "$work/"
"$cases_binary" "$vocab" "$work/cases" --count "${HF_DIFF_COUNT:-4000}" --seed "${HF_DIFF_SEED:-20261124}"
exec node "$work/hf_tokenize.mjs" compare --tokenizer "$work/cases/tokenizer.json" \
  --plain-tokenizer "$work/cases/tokenizer-plain.json" "$@" "$work/cases/cases.jsonl"
