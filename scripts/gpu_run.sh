#!/usr/bin/env bash
# gpu_run.sh — the one run to make when a GPU is lent (under 8 minutes on a
# fresh H100/H200, build included).  It needs no network and installs
# nothing: the build dependencies must already be there (scripts/setup.sh
# build, run beforehand where there is a network).
#
#   scripts/gpu_run.sh                     (OUT=dir to choose the output folder)
#
# Stages, each under its own time limit (and all under TOTAL_S):
#   1. preflight   driver and toolkit versions, compute capability, free
#                  memory, build dependencies; names the real cause of a
#                  failure (a CUDA 13 toolkit on a pre-R580 driver, an sm_70/75
#                  part, no device, a missing library)
#   2. build       one CMake build with CUDA (kvsim, test_kernels,
#                  test_calibrate, bench_attention), then `ldd` of kvsim
#   3. probe       open the CUDA backend once (the backend's own message if not)
#   4. tests       test_kernels (CUDA vs CPU per op and per step), test_calibrate
#   5. calibrate   ONE calibration of MODEL on the quick grid (the profile the
#                  validation uses; its fit errors are printed)
#   6. bench       bench_attention: decode % of HBM (Llama-2-7B MHA, Llama-3-8B
#                  GQA, batch 64 x 2048), prefill at 8 x 2048, GEMM at 4096
#   7. simulate    a loaded synthetic window (hundreds of requests, tens of
#                  concurrent sequences) twice with steps recorded: calibrated
#                  cost, then roofline
#   8. validate    replay both runs on the kernels (every step)
#   9. summary     each target beside its figure
# Everything (logs, figures, the database, summary.txt) goes to $OUT, or to a
# temporary folder whose name is printed first.  Exit status: 0 when every
# stage ran; the targets are reported, not enforced.
#
# Environment (defaults in brackets):
#   OUT [mktemp -d]  BUILD_DIR [build-gpu]  JOBS [nproc]  TOTAL_S [480]
#   MODEL [llama-7b]  DEVICE [cuda]  WORKLOAD [see below]  MAX_STEPS [4000]
#   KV_BLOCKS [6144]: the simulated (and replayed) KV pool, blocks
#   DEPS [.gpudeps when present]: build dependencies carried from a machine
#   with a network (scripts/gpu_deps.sh makes the folder)
#   DEVICE=cpu MODEL=models/tiny.conf runs the same stages on the CPU backend
#   (a dry run of this script without a GPU; figures are then meaningless).
set -uo pipefail
case "${1:-}" in
-h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
?*) echo "gpu_run.sh: unknown argument '$1': it takes none (OUT=dir to choose the folder; see --help)" >&2; exit 2 ;;
esac

root=$(cd "$(dirname "$0")/.." && pwd)
device=${DEVICE:-cuda}
model=${MODEL:-llama-7b}
build=${BUILD_DIR:-$root/build-gpu}
jobs=${JOBS:-$(nproc)}
total_s=${TOTAL_S:-480}
max_steps=${MAX_STEPS:-4000}
if [ "$device" = cuda ]; then
    # ~75% of what an H200 served of this mix (3,587 output tok/s measured,
    # 2026-12-04): 20 req/s keeps ~30 sequences a step; at 40 req/s arrivals
    # outran the GPU and the p99 TTFT measured the backlog (docs/validation.md)
    workload=${WORKLOAD:-arrival=poisson,rate=20,n=400,prompt=uniform:128:1024,output=uniform:32:256}
else
    workload=${WORKLOAD:-arrival=poisson,rate=200,n=60,prompt=uniform:16:96,output=uniform:4:24}
fi
# Build dependencies carried from a machine with a network (scripts/gpu_deps.sh
# gathers them; the lent GPU machines have none and no network): DEPS, or
# .gpudeps when it is there.  Its pkg-config goes last on PATH, for the
# preflight on a machine that has none (CMake finds it first through
# CMAKE_PREFIX_PATH; either one reads the carried .pc files first).
deps=${DEPS:-}
[ -z "$deps" ] && [ -d "$root/.gpudeps/root/usr" ] && deps=$root/.gpudeps
if [ -n "$deps" ]; then
    [ -d "$deps/root/usr" ] ||
        { echo "gpu_run: DEPS=$deps holds no root/usr (make it with scripts/gpu_deps.sh)" >&2; exit 2; }
    deps=$(cd "$deps" && pwd)
    dl=$deps/root/usr/lib/x86_64-linux-gnu
    export PKG_CONFIG_PATH="$dl/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
    export CMAKE_PREFIX_PATH="$deps/root/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
    export LD_LIBRARY_PATH="$dl${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export PATH="$PATH:$deps/root/usr/bin"
fi
export deps

if [ -n "${OUT:-}" ]; then
    out=$OUT
    mkdir -p "$out" || { echo "gpu_run: cannot create OUT=$out" >&2; exit 1; }
else
    out=$(mktemp -d "${TMPDIR:-/tmp}/kvsim-gpu-run.XXXXXX")
fi
out=$(cd "$out" && pwd)
db=$out/kvsim.db
# the stages' functions run under `timeout` in a child bash: export them
# (export -f after each definition) and what they read
export root device model build jobs total_s max_steps workload out db
echo "gpu_run: writing logs, figures and the database to $out"
cd "$root" || exit 1
start=$SECONDS
: >"$out/stages.tsv"
failed=""

# The CUDA toolkit, as scripts/setup.sh finds it.
if ! command -v nvcc >/dev/null 2>&1; then
    for d in /usr/local/cuda/bin /usr/local/cuda-*/bin; do
        if [ -x "$d/nvcc" ]; then export PATH="$d:$PATH"; break; fi
    done
fi

left() { echo $((total_s - (SECONDS - start))); }

# stage NAME LIMIT_S CMD...: run CMD under `timeout`, output to the terminal
# and $out/NAME.log; record the outcome in stages.tsv.
stage() {
    local name=$1 limit=$2 rem
    shift 2
    rem=$(left)
    ((limit > rem)) && limit=$rem
    printf '\n== %s (at %ds, limit %ds)\n' "$name" $((SECONDS - start)) "$limit"
    if ((limit < 5)); then
        echo "gpu_run: $name skipped: the run's ${total_s}s are spent" | tee "$out/$name.log"
        printf '%s\tskipped\t0\n' "$name" >>"$out/stages.tsv"
        failed="$failed $name"
        return 1
    fi
    local t0=$SECONDS rc
    if declare -F "$1" >/dev/null; then # a function of this script: run it in bash
        timeout --kill-after=10 "$limit" bash -c '"$@"' _ "$@" 2>&1 | tee "$out/$name.log"
    else
        timeout --kill-after=10 "$limit" "$@" 2>&1 | tee "$out/$name.log"
    fi
    rc=${PIPESTATUS[0]}
    local st=ok
    if ((rc == 124 || rc == 137)); then
        st=timeout
        echo "gpu_run: $name ran past its ${limit}s limit" | tee -a "$out/$name.log"
    elif ((rc != 0)); then
        st="failed($rc)"
    fi
    printf '%s\t%s\t%d\n' "$name" "$st" $((SECONDS - t0)) >>"$out/stages.tsv"
    [ "$st" = ok ] || { failed="$failed $name"; return 1; }
}

die() {
    echo "gpu_run: $*" | tee -a "$out/summary.txt" >&2
    echo "gpu_run: stopped; logs in $out" >&2
    exit 1
}

# ------------------------------------------------------------- preflight
preflight() {
    local bad=0
    echo "host: $(uname -srm), $(nproc) cores"
    if command -v nvcc >/dev/null 2>&1; then
        tk=$(nvcc --version | sed -n 's/.*release \([0-9][0-9]*\.[0-9][0-9]*\).*/\1/p')
        echo "toolkit: nvcc $tk ($(command -v nvcc))"
    else
        tk=""
        echo "toolkit: no nvcc on PATH or in /usr/local/cuda*/bin"
        [ "$device" = cuda ] && { echo "CAUSE: no CUDA toolkit: the CUDA backend cannot be built"; bad=1; }
    fi
    if [ "$device" = cuda ]; then
        if ! command -v nvidia-smi >/dev/null 2>&1; then
            echo "CAUSE: no nvidia-smi: no NVIDIA driver is installed (or this is not a GPU machine)"
            return 1
        fi
        if ! nvidia-smi -L >"$out/nvidia-smi-L.txt" 2>&1; then
            cat "$out/nvidia-smi-L.txt"
            echo "CAUSE: nvidia-smi cannot talk to the driver (no device, or driver and kernel module differ)"
            return 1
        fi
        nvidia-smi >"$out/nvidia-smi.txt" 2>&1
        drv=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1 | tr -d ' ')
        drv_cuda=$(sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p' "$out/nvidia-smi.txt" | head -1)
        name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
        cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' ')
        mem=$(nvidia-smi --query-gpu=memory.total,memory.free --format=csv,noheader,nounits | head -1)
        echo "device: $name, compute capability ${cc:-unknown}, memory total/free MiB: $mem"
        echo "driver: $drv (supports CUDA ${drv_cuda:-?})"
        drv_major=${drv%%.*}
        tk_major=${tk%%.*}
        if [ -n "$tk" ] && [ -n "$drv_cuda" ]; then
            if awk -v a="$drv_cuda" -v b="$tk" 'BEGIN { split(a, x, "."); split(b, y, ".");
                    exit !(x[1] < y[1]) }'; then
                echo "CAUSE: the CUDA $tk toolkit needs a driver for CUDA ${tk_major}.x" \
                     "(CUDA 13 needs R580 or later, CUDA 12 R525 or later); this driver" \
                     "($drv) supports CUDA $drv_cuda: every CUDA call would fail with" \
                     "'driver version is insufficient'.  Use the toolkit matching the driver" \
                     "(PATH=/usr/local/cuda-$drv_cuda/bin:\$PATH) or a newer driver."
                bad=2
            fi
        fi
        if ((bad != 2)) && [ "$tk_major" = 13 ] && [ -n "$drv_major" ] && ((drv_major < 580)); then
            echo "CAUSE: CUDA 13 needs an R580+ driver; this one is $drv"
            bad=1
        fi
        if [ -n "$cc" ]; then
            ccn=${cc/./}
            if ((ccn < 80)); then
                echo "CAUSE: compute capability $cc (sm_$ccn) is not built: kvsim carries sm_80 and" \
                     "sm_90 code (+ compute_90 PTX, which older parts cannot run), and its kernels" \
                     "are checked on sm_80 or later only (cp.async pipelines, WMMA tiles)"
                bad=1
            elif ((ccn >= 100)); then
                echo "note: sm_$ccn is newer than the built sm_80/sm_90: the compute_90 PTX is" \
                     "compiled by the driver at first launch (slower start, same results)"
            fi
        fi
        free_mib=${mem##*, }
        if [ -n "$free_mib" ] && ((free_mib < 40000)); then
            echo "warning: only $free_mib MiB free: $model's calibration needs ~20 GiB," \
                 "validation the run's KV pool too; expect 'needs ... bytes' refusals"
        fi
    fi
    # build dependencies: present, never installed here (no network)
    local miss=()
    command -v cmake >/dev/null 2>&1 || miss+=(cmake)
    command -v cc >/dev/null 2>&1 || command -v gcc >/dev/null 2>&1 || miss+=("C compiler (build-essential)")
    command -v make >/dev/null 2>&1 || command -v ninja >/dev/null 2>&1 || miss+=("make or ninja")
    command -v pkg-config >/dev/null 2>&1 || miss+=(pkg-config)
    if command -v pkg-config >/dev/null 2>&1; then
        pkg-config --exists sqlite3 || miss+=(libsqlite3-dev)
        pkg-config --exists json-c || miss+=(libjson-c-dev)
        pkg-config --exists check || miss+=("check (the kernel tests)")
    fi
    [ -e /usr/include/csv.h ] || [ -e /usr/local/include/csv.h ] ||
        { [ -n "$deps" ] && [ -e "$deps/root/usr/include/csv.h" ]; } || miss+=(libcsv-dev)
    if ((${#miss[@]})); then
        echo "CAUSE: missing build dependencies: ${miss[*]}; this script installs nothing" \
             "(GPU machines have no network): run scripts/setup.sh tests where there is one," \
             "or scripts/gpu_deps.sh there and carry .gpudeps here"
        bad=1
    else
        echo "build dependencies: present${deps:+ (carried in $deps)}"
    fi
    return $bad
}
export -f preflight
stage preflight 30 preflight || die "preflight failed: see the CAUSE lines above ($out/preflight.log)"

# ------------------------------------------------------------------ build
cuda=OFF
[ "$device" = cuda ] && cuda=ON
export cuda
build_all() {
    local gen=()
    command -v make >/dev/null 2>&1 || gen=(-G Ninja)
    cmake -S "$root" -B "$build" "${gen[@]}" -DKVSIM_CUDA="$cuda" -DKVSIM_TESTS=ON -DKVSIM_MPI=OFF \
        -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$out/cmake.log" 2>&1 || { cat "$out/cmake.log"; return 1; }
    grep 'kvsim: CUDA backend' "$out/cmake.log"
    if [ "$cuda" = ON ] && ! grep -q 'kvsim: CUDA backend ON' "$out/cmake.log"; then
        echo "CAUSE: CMake did not enable the CUDA backend (nvcc not usable?): $out/cmake.log"
        return 1
    fi
    cmake --build "$build" -j "$jobs" --target kvsim test_kernels test_calibrate bench_attention \
        >"$out/build-full.log" 2>&1 || { tail -60 "$out/build-full.log"; return 1; }
    grep -ci 'warning' "$out/build-full.log" | sed 's/^/compiler warnings: /'
    echo "ldd $build/kvsim:"
    ldd "$build/kvsim" | grep -Ei 'cuda|cublas|sqlite|json|csv|not found' | sed 's/^/  /'
    if ldd "$build/kvsim" | grep -q 'not found'; then
        echo "CAUSE: a shared library of kvsim is not found (LD_LIBRARY_PATH? the CUDA runtime" \
             "of the toolkit it was built with?)"
        return 1
    fi
}
export -f build_all
stage build 240 build_all || die "build failed ($out/build.log, $out/build-full.log)"
export kvsim=$build/kvsim
sql() { "$kvsim" query --db "$db" --csv --no-header "$1"; }

# ------------------------------------------------------------------ probe
probe() {
    "$kvsim" calibrate --device "$device" --model models/tiny.conf --repeats 1 --warmup 0 \
        --quiet --db "$out/probe.db"
}
export -f probe
stage probe 60 probe || die "the $device backend does not open (its message above names the cause)"

# ------------------------------------------------------------------ tests
tests() {
    local rc=0
    CK_FORK=yes "$build/test_kernels" 2>&1 | tee "$out/test_kernels.log"
    ((PIPESTATUS[0] == 0)) || rc=1
    if [ "$device" = cuda ] && grep -q '^SKIP: no CUDA device' "$out/test_kernels.log"; then
        echo "gpu_run: the CUDA checks were skipped: no usable GPU"
        rc=1
    fi
    CK_FORK=yes "$build/test_calibrate" || rc=1
    return $rc
}
export -f tests
stage tests 150 tests

# -------------------------------------------------------------- calibrate
stage calibrate 150 "$kvsim" calibrate --device "$device" --model "$model" --grid quick \
    --db "$db" || die "calibration failed ($out/calibrate.log)"
profile=$(sql "SELECT max(profile_id) FROM profiles")
export profile
pgpu=$(sql "SELECT gpu FROM profiles WHERE profile_id = $profile")
sql "SELECT fit_error_json FROM profiles WHERE profile_id = $profile" >"$out/fit_error.json"

# ------------------------------------------------------------------ bench
stage bench 120 "$build/bench_attention" "$device"

# --------------------------------------------------------------- simulate
export gpu=$pgpu force=""
if ! "$kvsim" gpus | awk 'NR > 1 { print $1 }' | grep -qx -- "$gpu"; then
    echo "gpu_run: '$gpu' is not a built-in GPU; simulating h100-sxm with the profile forced"
    gpu=h100-sxm
    force=--force-profile
fi
simulate() {
    local common=(--model "$model" --gpu "$gpu" --synthetic "$workload" --seed 7 --record-steps
                  --db "$db" --quiet)
    # a KV pool the replay can hold: 6144 blocks of llama-7b are 48 GiB (fits
    # 90% of an 80 GB part beside one layer's weights), ~98K tokens (the
    # window never preempts); the CPU run keeps 4096 small blocks
    if [ "$device" = cpu ]; then common+=(--kv-blocks 4096); else common+=(--kv-blocks "${KV_BLOCKS:-6144}"); fi
    # shellcheck disable=SC2086 # $force is one flag or none
    cal=$("$kvsim" run "${common[@]}" --cost "calibrated:$profile" $force \
          --label gpu-run-calibrated) || return 1
    roof=$("$kvsim" run "${common[@]}" --cost roofline --label gpu-run-roofline) || return 1
    echo "$cal $roof" >"$out/run_ids.txt"
    "$kvsim" query --db "$db" "SELECT run_id, cost, n_steps, n_finished, n_rejected,
        round(ttft_p99_s, 4) AS ttft_p99_s FROM runs WHERE run_id IN ($cal, $roof)"
    "$kvsim" query --db "$db" "SELECT run_id, max(n_decode + n_prefill) AS max_seqs,
        round(avg(n_decode + n_prefill), 1) AS mean_seqs FROM steps
        WHERE run_id IN ($cal, $roof) GROUP BY run_id" 2>/dev/null || true
}
export -f simulate
sim_ok=1
stage simulate 60 simulate || sim_ok=0
read -r cal roof <"$out/run_ids.txt" 2>/dev/null || sim_ok=0

# --------------------------------------------------------------- validate
if ((sim_ok)); then
    stage validate-calibrated 150 "$kvsim" validate --run "$cal" --device "$device" \
        --max-steps "$max_steps" --db "$db"
    stage validate-roofline 150 "$kvsim" validate --run "$roof" --device "$device" \
        --max-steps "$max_steps" --db "$db"
fi

# ---------------------------------------------------------------- summary
result() { sed -n "s/^RESULT $1 //p" "$out/bench.log" 2>/dev/null | head -1; }
val() { # val RUN_ID JSON_PATH: a validation figure (percent when asked)
    sql "SELECT round(100 * json_extract(v.summary_json, '$2'), 2) FROM validations v
         WHERE v.run_id = $1 ORDER BY v.validation_id DESC LIMIT 1" 2>/dev/null
}
verdict() { # verdict VALUE OP TARGET
    [ -n "$1" ] || { echo "not measured"; return; }
    awk -v v="$1" -v t="$3" -v op="$2" 'BEGIN { ok = op == ">=" ? v >= t : v <= t;
        print ok ? "meets" : "misses" }'
}
{
    echo
    echo "================ kvsim gpu_run summary ($device, $(date -u +%Y-%m-%dT%H:%MZ), $((SECONDS - start)) s)"
    grep -E '^(device|driver|toolkit):' "$out/preflight.log" 2>/dev/null
    echo "stages:"
    awk -F'\t' '{ printf "  %-20s %-12s %4ss\n", $1, $2, $3 }' "$out/stages.tsv"
    echo "targets (issue 17):"
    for m in llama-2-7b llama-3-8b; do
        v=$(result "decode_${m}_pct_hbm")
        printf '  decode attention %-11s batch 64 x 2048: %6s%% of HBM   (target >= 85%%: %s)\n' \
            "$m" "${v:--}" "$(verdict "$v" ">=" 85)"
        v=$(result "decode_${m}_uneven_pct_hbm")
        printf '  decode attention %-11s uneven 64:      %6s%% of HBM   (load balance, no target)\n' \
            "$m" "${v:--}"
    done
    v=$(result "decode_llama-2-70b_pct_hbm")
    printf '  decode attention llama-2-70b batch 64 x 2048: %6s%% of HBM   (GQA 8 at TP 1, no target)\n' \
        "${v:--}"
    for pair in llama-3-8b:49.6 llama-2-70b:37.7; do
        m=${pair%%:*}
        v=$(result "decode_simt_${m}_pct_hbm")
        printf '  the same, %-11s on the SIMT kernel:  %6s%% of HBM   (decode_gqa_k; run 4: %s%%)\n' \
            "$m" "${v:--}" "${pair#*:}"
    done
    for op in qkv_proj o_proj gate_up_proj down_proj; do
        v=$(result "gemm_${op}_pct_peak")
        printf '  FP16 GEMM %-13s 4096 tokens:     %6s%% of dense peak (target >= 70%%: %s)\n' \
            "$op" "${v:--}" "$(verdict "$v" ">=" 70)"
    done
    v=$(result "prefill_llama-2-7b_8x2048_tflops")
    printf '  prefill attention 8 x 2048 (causal):      %6s TFLOP/s (target: >= ~165 on H100/H200, ~95 on A100:\n' "${v:--}"
    printf '                                            within 2x of FlashAttention-2 published)\n'
    v=$(result "prefill_wmma_llama-2-7b_8x2048_tflops")
    printf '  the same, the first (WMMA) kernel:        %6s TFLOP/s (run 4: 45.1; the default mma.sync kernel 115.0)\n' "${v:--}"
    if ((sim_ok)); then
        for pair in "calibrated:$cal" "roofline:$roof"; do
            name=${pair%%:*}
            id=${pair#*:}
            s=$(val "$id" '$.step_error.all.p50_abs')
            # each request on its own clock (docs/validation.md): the
            # back-to-back re-timing carries every step's error into all
            # later ones, and this window's steps never idle
            t=$(val "$id" '$.e2e.local.covered.error.ttft_p99_s')
            g=$(val "$id" '$.e2e.covered.error.ttft_p99_s')
            n=$(sql "SELECT json_extract(summary_json, '\$.e2e.covered.n_requests') FROM validations
                     WHERE run_id = $id ORDER BY validation_id DESC LIMIT 1" 2>/dev/null)
            ta=${t#-}
            printf '  %-10s run %-3s median |step error| %6s%% (target <= 5%%: %s), p99 TTFT error %6s%% (target <= 10%%: %s), over %s requests\n' \
                "$name" "$id" "${s:--}" "$(verdict "$s" "<=" 5)" "${t:--}" "$(verdict "$ta" "<=" 10)" "${n:--}"
            printf '  %-10s         p99 TTFT error with the drift of all earlier steps carried (back to back): %s%%\n' \
                "" "${g:--}"
        done
    else
        echo "  validation: not run (the simulate stage failed)"
    fi
    echo "fit errors of the calibration (profile ${profile:-?}): $out/fit_error.json"
    [ -z "$failed" ] || echo "stages that did not finish:$failed"
    echo "everything is in $out (kvsim.db, one log per stage, summary.txt)"
} | tee "$out/summary.txt"
[ -z "$failed" ]
