#!/usr/bin/env bash
# setup.sh — install what is missing (Debian packages only) and build kvsim.
#
#   scripts/setup.sh [BUILD_DIR] [extra cmake args...]
#
# Installs the build dependencies with apt-get when any is missing, finds
# nvcc (the CUDA backend is compiled when the CUDA toolkit is installed; no
# GPU is needed to build), configures with CMake and builds with all cores.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
shift || true

pkgs=(build-essential cmake pkg-config libsqlite3-dev libcsv-dev libjson-c-dev check sqlite3 python3)
# kvsim sweep under mpirun (optional at build time); the notebooks, run headless
# by scripts/notebooks.sh and tests/cli_notebooks.sh
pkgs+=(libopenmpi-dev openmpi-bin jupyter-nbconvert python3-ipykernel python3-matplotlib
       python3-pandas)
# clang and libFuzzer (libclang-rt-dev: libclang-rt-14-dev on Debian 12) for
# the fuzz targets the test suite runs (tests/cli_fuzz_short.sh)
pkgs+=(clang libclang-rt-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# The CUDA toolkit is optional: use it when present.
if ! command -v nvcc >/dev/null 2>&1; then
  for d in /usr/local/cuda/bin /usr/local/cuda-*/bin; do
    if [ -x "$d/nvcc" ]; then export PATH="$d:$PATH"; break; fi
  done
fi
if command -v nvcc >/dev/null 2>&1; then
  export CUDACXX=${CUDACXX:-$(command -v nvcc)}
fi

cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
cmake --build "$build" -j"$(nproc)"
echo "setup: built $build/kvsim" >&2
