#!/usr/bin/env bash
# gpu_check.sh — the GPU check of the kernels, in one command (under 8
# minutes on an H100/H200): configure and build with CUDA, run the kernel
# tests (CUDA against the CPU reference), calibrate llama-7b on the quick grid
# into a temporary database, and run bench_attention.
#
# usage: scripts/gpu_check.sh            (BUILD_DIR=... JOBS=... to override)
# Exit status: 0 when every step passed; the performance targets are printed,
# not enforced (they depend on the part and its clocks):
#   decode attention >= 80% of peak HBM bandwidth at batch 64 x context 2048
#   FP16 GEMM        >= 70% of peak tensor throughput at 4096 tokens
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build-gpu}
jobs=${JOBS:-$(nproc)}
export PATH=/usr/local/cuda/bin:$PATH
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
start=$SECONDS
step() { printf '\n== %s (%ds)\n' "$1" $((SECONDS - start)); }

step "configure + build with CUDA"
cmake -S "$root" -B "$build" -DKVSIM_CUDA=ON >"$tmp/cmake.log" 2>&1 || { cat "$tmp/cmake.log"; exit 1; }
if ! grep -q 'kvsim: CUDA backend ON' "$tmp/cmake.log"; then
    cat "$tmp/cmake.log"
    echo "gpu_check: CUDA backend not enabled (nvcc not found?)" >&2
    exit 1
fi
cmake --build "$build" -j "$jobs" --target kvsim test_kernels test_calibrate bench_attention

step "kernel tests (CUDA vs CPU reference)"
cd "$root"
"$build/test_kernels" | tee "$tmp/test_kernels.log"
if grep -q 'SKIP' "$tmp/test_kernels.log"; then
    echo "gpu_check: the CUDA tests were skipped: no usable GPU" >&2
    exit 1
fi
"$build/test_calibrate"

step "calibrate llama-7b, quick grid"
timeout 300 "$build/kvsim" calibrate --device cuda --model llama-7b --grid quick --quiet \
    --db "$tmp/kvsim.db"

step "bench_attention"
timeout 180 "$build/bench_attention" cuda

step "done"
echo "targets: decode attention >= 80% of peak HBM bandwidth at batch 64 x ctx 2048;"
echo "         FP16 GEMM >= 70% of peak tensor throughput at 4096 tokens (see the tables above)"
