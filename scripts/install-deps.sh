#!/usr/bin/env bash
# Installs everything smol's build, tests and server need from Debian's packages (run as root).
# Used by .ci/run and scripts/serve.sh, so a fresh machine gets the same set either way.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
packages=(
  build-essential cmake ninja-build pkg-config git ca-certificates
  libeigen3-dev libxsimd-dev nlohmann-json3-dev libcpp-httplib-dev libssl-dev
)
if [[ "${1:-}" == --tests ]]; then
  packages+=(doctest-dev clang libclang-rt-14-dev libomp-14-dev python3 curl nodejs npm chromium)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "==> installing: ${missing[*]}"
  apt-get update
  apt-get install -y --no-install-recommends "${missing[@]}"
else
  echo "==> all packages present"
fi
