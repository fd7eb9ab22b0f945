#!/usr/bin/env bash
# check_cuda_emu.sh — the CUDA attention kernels (kernels/cuda_decode.cu,
# kernels/cuda_prefill.cu)
# run on the host under tests/emu/cuda_emu.h (one std::thread per CUDA
# thread, real barriers, shuffles through shared buffers, cp.async copies
# that land only at their wait, WMMA tiles) and compared with a double
# reference: decode and prefill over GQA groups, head sizes, block sizes,
# tile and partition edges and a 6,000-token split decode, NMSE <= 1e-5.
# No GPU needed; it checks the kernels' logic, not their speed or the
# hardware's numerics (the GPU suite, test_kernels, does that).
#   tests/check_cuda_emu.sh [kvsim-binary-ignored] [full]   (default: a quick subset)
# Needs g++ (C++17) and python3; without them it prints SKIP and passes.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=quick
[ "${2:-}" = full ] && mode=full
for tool in g++ python3; do
  command -v "$tool" >/dev/null 2>&1 || { echo "SKIP: check_cuda_emu needs $tool"; exit 0; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for k in decode prefill; do
  python3 tests/emu/emu_transform.py "kernels/cuda_$k.cu" "$tmp/cuda_${k}_emu.cpp"
done
g++ -std=c++17 -O2 -fno-strict-aliasing -Wall -Wextra -Wno-unused-function -Wno-unknown-pragmas -I. -Ikernels -Itests/emu \
  -pthread "$tmp/cuda_decode_emu.cpp" "$tmp/cuda_prefill_emu.cpp" tests/emu/emu_attention.cpp -o "$tmp/emu_attention"
"$tmp/emu_attention" "$mode"
