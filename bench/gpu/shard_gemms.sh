#!/usr/bin/env bash
# shard_gemms.sh — time one GPU's share of the GEMMs of a model at TP 1, 4
# and 8 (bench/gpu/shards/*.conf), through `kvsim calibrate` on the quick
# grid, and write the cuBLAS GEMM timings to $OUT/gemms.csv
# (bench/gpu/gemm_vs_roofline.py reads it).  One CMake build of kvsim with
# CUDA first (build dependencies from .gpudeps, as scripts/gpu_run.sh).
#
#   OUT=dir bench/gpu/shard_gemms.sh
#
# Environment: OUT [/tmp/shard-gemms], DEVICE [cuda], GPU [h200],
# MODELS [Llama-3-8B and Llama-2-70B at TP 1, 4, 8], KVSIM [the build's],
# LIMIT_S [150 per calibration].  DEVICE=cpu KVSIM=build/kvsim GPU=cpu
# MODELS=models/tiny.conf is a dry run without a GPU.
set -u
case "${1:-}" in
-h | --help) sed -n '2,/^set -u/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
?*) echo "shard_gemms.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/../.." || exit 1
out=${OUT:-/tmp/shard-gemms}
mkdir -p "$out" || exit 1
device=${DEVICE:-cuda}
kvsim=${KVSIM:-/tmp/shard-gemms-build/kvsim}
s=bench/gpu/shards
models=${MODELS:-llama-3-8b $s/llama-3-8b-tp4.conf $s/llama-3-8b-tp8.conf llama-2-70b $s/llama-2-70b-tp4.conf $s/llama-2-70b-tp8.conf}
if [ -z "${KVSIM:-}" ]; then
    d=$PWD/.gpudeps
    dl=$d/root/usr/lib/x86_64-linux-gnu
    export PKG_CONFIG_PATH=$dl/pkgconfig CMAKE_PREFIX_PATH=$d/root/usr LD_LIBRARY_PATH=$dl
    export PATH=$PATH:/usr/local/cuda/bin:$d/root/usr/bin
    b=$(dirname "$kvsim")
    t0=$SECONDS
    if ! cmake -S . -B "$b" -DKVSIM_CUDA=ON -DKVSIM_TESTS=OFF -DKVSIM_MPI=OFF \
        -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$out/cmake.log" 2>&1 ||
        ! make -C "$b" -j"$(nproc)" kvsim >"$out/build.log" 2>&1; then
        tail -30 "$out/cmake.log" "$out/build.log"
        exit 1
    fi
    echo "shard_gemms: build $((SECONDS - t0)) s"
fi
for m in $models; do
    t0=$SECONDS
    n=$(basename "$m" .conf)
    timeout "${LIMIT_S:-150}" "$kvsim" calibrate --device "$device" --model "$m" --gpu "${GPU:-h200}" \
        --db "$out/shapes.db" --grid quick --quiet >"$out/cal-$n.log" 2>&1
    echo "shard_gemms: $n rc=$? $((SECONDS - t0)) s"
done
"$kvsim" query --db "$out/shapes.db" --csv "SELECT c.model, m.op, m.tokens, m.median_s, m.p10_s,
    m.p90_s, m.repeats, m.shape_json FROM kernel_measurements m JOIN calibrations c USING (calib_id)
    WHERE m.op IN ('qkv_proj', 'o_proj', 'gate_up_proj', 'down_proj', 'lm_head')
    ORDER BY c.calib_id, m.op, m.tokens" >"$out/gemms.csv" &&
    echo "shard_gemms: $(($(wc -l <"$out/gemms.csv") - 1)) GEMM timings in $out/gemms.csv"
