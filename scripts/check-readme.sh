#!/usr/bin/env bash
# README.md's "Two commands" must be the ones the project really uses: the first is the main
# job (scripts/serve.sh), the second is the test command, which .ci/run must run verbatim.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mapfile -t commands < <(awk '/^## Two commands/{on=1; next} /^## /{on=0} on && /^```sh/{code=1; next} on && /^```/{code=0} on && code' README.md)
if ((${#commands[@]} != 2)); then
  echo "check-readme: expected two one-line commands under '## Two commands', found ${#commands[@]}: ${commands[*]}" >&2
  exit 1
fi
main=${commands[0]} tests=${commands[1]}
[[ "$main" == "bash scripts/serve.sh" ]] || { echo "check-readme: main command is '$main', expected 'bash scripts/serve.sh'" >&2; exit 1; }
grep -qxF "$tests" .ci/run || { echo "check-readme: .ci/run does not run the README's test command '$tests'" >&2; exit 1; }
grep -qxF "$tests" scripts/serve.sh && { echo "check-readme: serve.sh must not run the tests" >&2; exit 1; }
echo "check-readme: README's commands are '$main' and '$tests'; .ci/run runs the second"
