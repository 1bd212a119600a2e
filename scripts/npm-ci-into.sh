#!/usr/bin/env bash
# Installs the npm packages pinned by PACKAGE_DIR's committed package-lock.json into WORK_DIR
# (npm ci), once per lockfile: a WORK_DIR already installed from the same lockfile is kept.
# Used by the tests and benches that run node (browser test, Hugging Face tokenizer checks).
#   npm-ci-into.sh PACKAGE_DIR WORK_DIR
set -euo pipefail
package=$1 work=$2
mkdir -p "$work"
cp "$package/package.json" "$package/package-lock.json" "$work/"
if ! cmp -s "$package/package-lock.json" "$work/node_modules/.package-lock-source" 2>/dev/null; then
  (cd "$work" && npm ci --no-audit --no-fund --loglevel=error)
  cp "$package/package-lock.json" "$work/node_modules/.package-lock-source"
fi
