#!/usr/bin/env bash
# ctest wrapper for the browser test: installs playwright-core from the committed
# package-lock.json into the build folder (npm ci) and runs browser_test.mjs with Debian's
# chromium. Exits 77 (ctest SKIP) only when node or chromium is not installed.
#   run_browser_test.sh SERVER_BINARY MODEL WORK_DIR
set -euo pipefail
server=$1 model=$2 work=$3
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
chromium=${SMOL_CHROMIUM:-/usr/bin/chromium}
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "SKIP: node/npm not installed (apt-get install nodejs npm)"; exit 77
fi
if [ ! -x "$chromium" ]; then
  echo "SKIP: $chromium not installed (apt-get install chromium)"; exit 77
fi
bash "$here/../../scripts/npm-ci-into.sh" "$here" "$work"
cp "$here/browser_test.mjs" "$here/vendor.mjs" "$here/start_server.mjs" "$work/"
exec node "$work/browser_test.mjs" --server "$server" --model "$model" --out "$work" \
  --chromium "$chromium" --web "$here/web"
