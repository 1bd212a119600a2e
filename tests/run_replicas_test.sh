#!/usr/bin/env bash
# ctest wrapper for replicas_test.mjs: three smol-server replicas behind HAProxy with
# deploy/haproxy.cfg. Needs node (no npm packages) and haproxy; exits 77 (ctest SKIP) only when
# one of them is not installed (scripts/install-deps.sh --tests installs both).
#   run_replicas_test.sh SERVER_BINARY MODEL
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
for program in node haproxy; do
  if ! command -v "$program" >/dev/null; then echo "SKIP: $program not installed"; exit 77; fi
done
exec node "$here/replicas_test.mjs" --server "$1" --model "$2" --haproxy "$(command -v haproxy)" \
  --config "$here/../deploy/haproxy.cfg"
