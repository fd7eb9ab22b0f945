#!/usr/bin/env bash
# gpu_validate.sh — how wrong are kvsim's predictions on this GPU?  One
# command (under 8 minutes on an H100/H200): build with CUDA, calibrate
# llama-7b on the quick grid, simulate the Azure conversation trace on
# llama-7b twice with --record-steps (calibrated cost, then roofline),
# replay 2,000 steps of each on the real kernels (kvsim validate), print
# both reports and the headline numbers.
#
# usage: scripts/gpu_validate.sh
# Environment (defaults in brackets), so the same script runs its CPU
# analogue, e.g.  DEVICE=cpu MODEL=models/tiny.conf RUN_FLAGS='--kv-blocks 4096'
#                 STEPS=300 BUILD_DIR=build scripts/gpu_validate.sh
#   DEVICE [cuda]   kernel backend: cuda | cpu
#   MODEL [llama-7b]  STEPS [2000]  TRACE [traces/azure_llm_2023_conv.csv]
#   GPU [the profile's GPU]   RUN_FLAGS [none]: extra flags for kvsim run
#   BUILD_DIR [build-gpu-validate]  JOBS [nproc]  DB [a temporary file]
# Exit status 0 when every step ran; the targets are printed, not enforced:
#   calibrated profile: median |step-time error| <= 5%, p99 TTFT error <= 10%
#   (TTFT over the requests whose every step was replayed).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
device=${DEVICE:-cuda}
model=${MODEL:-llama-7b}
steps=${STEPS:-2000}
trace=${TRACE:-traces/azure_llm_2023_conv.csv}
build=${BUILD_DIR:-$root/build-gpu-validate}
jobs=${JOBS:-$(nproc)}
export PATH=/usr/local/cuda/bin:$PATH
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
db=${DB:-$tmp/kvsim.db}
start=$SECONDS
step() { printf '\n== %s (%ds)\n' "$1" $((SECONDS - start)); }
cd "$root"

step "configure + build ($device)"
cuda=$([ "$device" = cuda ] && echo ON || echo OFF)
cmake -S "$root" -B "$build" -DKVSIM_CUDA=$cuda -DKVSIM_TESTS=OFF >"$tmp/cmake.log" 2>&1 ||
    { cat "$tmp/cmake.log"; exit 1; }
if [ "$cuda" = ON ] && ! grep -q 'kvsim: CUDA backend ON' "$tmp/cmake.log"; then
    cat "$tmp/cmake.log"
    echo "gpu_validate: CUDA backend not enabled (nvcc not found?)" >&2
    exit 1
fi
cmake --build "$build" -j "$jobs" --target kvsim >"$tmp/build.log" 2>&1 ||
    { tail -50 "$tmp/build.log"; exit 1; }
kvsim=$build/kvsim
sql() { "$kvsim" query --db "$db" --csv --no-header "$1"; }

step "calibrate $model on $device, quick grid"
timeout 240 "$kvsim" calibrate --device "$device" --model "$model" --grid quick --quiet --db "$db"
profile=$(sql "SELECT max(profile_id) FROM profiles")
pgpu=$(sql "SELECT gpu FROM profiles WHERE profile_id = $profile")
gpu=${GPU:-$pgpu}
force=()
if ! "$kvsim" gpus | awk 'NR > 1 { print $1 }' | grep -qx -- "$gpu"; then
    # a device kvsim has no datasheet for: simulate an H100 with this profile
    echo "gpu_validate: '$gpu' is not a built-in GPU; simulating h100-sxm with the profile forced"
    gpu=h100-sxm
    force=(--force-profile)
fi
[ "$gpu" = "$pgpu" ] || force=(--force-profile)

step "simulate $trace on $model / $gpu twice, steps recorded"
common=(--model "$model" --gpu "$gpu" --trace "$trace" --record-steps --db "$db" --quiet)
# shellcheck disable=SC2086 # RUN_FLAGS is a list of flags
cal=$(timeout 120 "$kvsim" run "${common[@]}" --cost "calibrated:$profile" ${force[@]+"${force[@]}"} \
      --label validate-calibrated ${RUN_FLAGS:-})
# shellcheck disable=SC2086
roof=$(timeout 120 "$kvsim" run "${common[@]}" --cost roofline --label validate-roofline \
       ${RUN_FLAGS:-})
sql "SELECT run_id, cost, n_steps, n_finished, n_rejected, round(ttft_p99_s, 4) AS ttft_p99_s
     FROM runs WHERE run_id IN ($cal, $roof)"

for pair in "calibrated:$cal" "roofline:$roof"; do
    name=${pair%%:*}
    id=${pair#*:}
    step "validate run $id ($name cost): $steps steps on $device"
    timeout 150 "$kvsim" validate --run "$id" --device "$device" --max-steps "$steps" --db "$db"
done

step "headline (targets for the calibrated profile: median |step error| <= 5%, p99 TTFT error <= 10%)"
"$kvsim" query --db "$db" "
SELECT r.label,
       round(100 * json_extract(v.summary_json, '\$.step_error.all.p50_abs'), 2) AS med_abs_step_err_pct,
       round(100 * json_extract(v.summary_json, '\$.step_error.all.p90_abs'), 2) AS p90_abs_step_err_pct,
       round(json_extract(v.summary_json, '\$.step_error.all.mape_pct'), 2) AS mape_pct,
       json_extract(v.summary_json, '\$.e2e.covered.n_requests') AS covered_requests,
       round(100 * json_extract(v.summary_json, '\$.e2e.covered.error.ttft_p99_s'), 2) AS ttft_p99_err_pct,
       round(100 * json_extract(v.summary_json, '\$.e2e.covered.error.tpot_p50_s'), 2) AS tpot_p50_err_pct,
       json_extract(v.summary_json, '\$.memory.bytes_match') AS kv_bytes_match,
       json_extract(v.summary_json, '\$.checks.kv_ok') AS kv_contents_ok
FROM validations v JOIN runs r USING (run_id)
WHERE v.run_id IN ($cal, $roof) ORDER BY v.validation_id"
step "done"
