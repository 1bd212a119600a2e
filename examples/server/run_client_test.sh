#!/usr/bin/env bash
# ctest wrapper for the official-client tests (openai_client_test.mjs, json_schema_client_test.mjs and
# responses_client_test.mjs with the `openai` npm client and `@openai/agents`,
# anthropic_client_test.mjs with `@anthropic-ai/sdk`, ollama_client_test.mjs with `ollama`):
# installs the pinned npm packages into the build folder (npm ci) and runs the test. Exits 77 (ctest SKIP) only when node or npm
# is not installed.
#   run_client_test.sh TEST.mjs SERVER_BINARY MODEL WORK_DIR
set -euo pipefail
test=$1 server=$2 model=$3 work=$4
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "SKIP: node/npm not installed (apt-get install nodejs npm)"; exit 77
fi
bash "$here/../../scripts/npm-ci-into.sh" "$here" "$work"
cp "$here/$test" "$here/start_server.mjs" "$work/"
exec node "$work/$test" --server "$server" --model "$model"
