#!/usr/bin/env bash
# ctest wrapper for the openai-client test: installs the pinned npm packages (the official
# `openai` client among them) into the build folder (npm ci) and runs openai_client_test.mjs.
# Exits 77 (ctest SKIP) only when node or npm is not installed.
#   run_openai_client_test.sh SERVER_BINARY MODEL WORK_DIR
set -euo pipefail
server=$1 model=$2 work=$3
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "SKIP: node/npm not installed (apt-get install nodejs npm)"; exit 77
fi
bash "$here/../../scripts/npm-ci-into.sh" "$here" "$work"
cp "$here/openai_client_test.mjs" "$here/start_server.mjs" "$work/"
exec node "$work/openai_client_test.mjs" --server "$server" --model "$model"
