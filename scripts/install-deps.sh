#!/usr/bin/env bash
# Installs everything smol's build, tests and server need from Debian's packages (run as root).
# Used by .ci/run and scripts/serve.sh, so a fresh machine gets the same set either way.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
packages=(
  build-essential cmake ninja-build pkg-config git ca-certificates
  nlohmann-json3-dev libcpp-httplib-dev libssl-dev libedit-dev
  # xsimd (header-only): the AArch64 float kernels; the ARM stage cross-builds with these headers.
  libxsimd-dev
)
if [[ "${1:-}" == --tests ]]; then
  packages+=(doctest-dev libeigen3-dev clang libclang-rt-14-dev libomp-14-dev python3 curl nodejs npm chromium haproxy)
  # The ARM stage (scripts/test-arm.sh): an AArch64 cross compiler and qemu-user to run its output.
  packages+=(g++-aarch64-linux-gnu qemu-user-static)
fi
# A package counts as present when dpkg has it or, for the programs the tests run, when the
# program is on the PATH by other means (e.g. a Node.js build that bundles npm).
present() {
  case "$1" in
    nodejs) command -v node >/dev/null && return 0 ;;
    npm) command -v npm >/dev/null && return 0 ;;
    chromium) command -v chromium >/dev/null && return 0 ;;
  esac
  dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "ok installed"
}
missing=()
for p in "${packages[@]}"; do
  present "$p" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "==> installing: ${missing[*]}"
  apt-get update
  apt-get install -y --no-install-recommends "${missing[@]}"
else
  echo "==> all packages present"
fi
