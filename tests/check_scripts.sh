#!/usr/bin/env bash
# check_scripts.sh — every script under scripts/ and every benchmark under
# bench/ (the binaries next to kvsim, py_threads.py) answers --help (exit 0)
# and refuses an unknown option (and the benchmarks a bad flag value: a
# count that is not a number or out of range, an unknown router) with one
# line naming itself, exit 2,
# before it does anything: no package installed, nothing built, no run
# started (test.sh --help used to start the whole suite, gpu_run.sh --help a
# GPU run).
. "$(dirname "$0")/testlib.sh"
cd "$(dirname "$0")/.." || exit 1

for f in scripts/*.sh; do
    name=$(basename "$f")
    timeout 20 bash "$f" --help > "$T/out.txt" 2>&1
    rc=$?
    if [ "$rc" -eq 0 ] && head -1 "$T/out.txt" | grep -q "^$name — "; then ok
    else bad "$name --help: rc=$rc, first line: $(head -1 "$T/out.txt")"; fi
    timeout 20 bash "$f" --no-such-option > "$T/out.txt" 2>&1
    rc=$?
    if [ "$rc" -eq 2 ] && [ "$(wc -l < "$T/out.txt")" -eq 1 ] && grep -q "^$name: " "$T/out.txt"; then ok
    else bad "$name --no-such-option: rc=$rc, $(head -3 "$T/out.txt")"; fi
done

# the benchmark binaries next to kvsim, and the Python benchmark
bindir=$(dirname "$KVSIM")
for b in bench_sim bench_cluster bench_nokv bench_attention; do
    [ -x "$bindir/$b" ] || continue
    timeout 20 "$bindir/$b" --help > "$T/out.txt" 2>&1
    rc=$?
    if [ "$rc" -eq 0 ] && grep -q "^usage: $b" "$T/out.txt"; then ok
    else bad "$b --help: rc=$rc, $(head -2 "$T/out.txt")"; fi
    timeout 20 "$bindir/$b" --no-such-option > "$T/out.txt" 2>&1
    rc=$?
    if [ "$rc" -eq 2 ] && [ "$(wc -l < "$T/out.txt")" -eq 1 ] && grep -q "^$b: " "$T/out.txt"; then ok
    else bad "$b --no-such-option: rc=$rc, $(head -2 "$T/out.txt")"; fi
done
# bad values of the benchmarks' flags: one line naming the flag, exit 2,
# before anything runs ('abc' used to be taken as 0)
for c in "bench_sim --requests abc" "bench_sim --rate 0" "bench_sim --sizes 100,abc" \
         "bench_sim --repeat 17" "bench_cluster --requests abc" "bench_cluster --replicas 0" \
         "bench_cluster --routers round-robin,nosuch"; do
    set -- $c
    [ -x "$bindir/$1" ] || continue
    b=$1
    shift
    timeout 20 "$bindir/$b" "$@" > "$T/out.txt" 2>&1
    rc=$?
    if [ "$rc" -eq 2 ] && [ "$(wc -l < "$T/out.txt")" -eq 1 ] && grep -q "^$b: $1" "$T/out.txt"; then ok
    else bad "$c: rc=$rc, $(head -2 "$T/out.txt")"; fi
done
if command -v python3 > /dev/null; then
    timeout 20 python3 bench/py_threads.py --help > "$T/out.txt" 2>&1
    rc=$?
    if [ "$rc" -eq 0 ] && grep -q "py_threads.py" "$T/out.txt"; then ok
    else bad "py_threads.py --help: rc=$rc, $(head -2 "$T/out.txt")"; fi
fi

# bench/gpu/gemm_vs_roofline.py: --help, a bad option, a malformed
# measurements file (one line naming file:line, exit 2), and the stored H200
# run (45 GEMMs: 4 layer GEMMs x 10 token counts + lm_head x 5)
if command -v python3 > /dev/null 2>&1; then
    g=bench/gpu/gemm_vs_roofline.py
    python3 "$g" --help > "$T/out.txt" 2>&1 && grep -q '^gemm_vs_roofline.py — ' "$T/out.txt" && ok ||
        bad "gemm_vs_roofline.py --help: $(head -2 "$T/out.txt")"
    python3 "$g" "$KVSIM" --no-such-option > "$T/out.txt" 2>&1
    rc=$?
    if [ "$rc" -eq 2 ] && [ "$(wc -l < "$T/out.txt")" -eq 1 ] && grep -q '^gemm_vs_roofline.py: ' "$T/out.txt"
    then ok; else bad "gemm_vs_roofline.py --no-such-option: rc=$rc, $(head -2 "$T/out.txt")"; fi
    printf 'op,tokens,median_s\nqkv_proj,1,2.99e-05\nqkv_proj,abc,3e-05\n' > "$T/bad.csv"
    python3 "$g" "$KVSIM" "$T/bad.csv" > "$T/out.txt" 2>&1
    rc=$?
    if [ "$rc" -eq 2 ] && [ "$(wc -l < "$T/out.txt")" -eq 1 ] && grep -q "bad.csv:3: bad tokens" "$T/out.txt"
    then ok; else bad "gemm_vs_roofline.py on a malformed CSV: rc=$rc, $(head -2 "$T/out.txt")"; fi
    python3 "$g" "$KVSIM" > "$T/out.txt" 2>&1
    if grep -q '^45 GEMMs of llama-7b;' "$T/out.txt" &&
       grep -Eq '^qkv_proj +1 +4096 +12288 +29\.9us' "$T/out.txt" &&
       grep -Eq '^  trtllm ' "$T/out.txt"; then ok
    else bad "gemm_vs_roofline.py on the stored H200 run: $(tail -3 "$T/out.txt")"; fi
    # a CSV with a model column (bench/gpu/shard_gemms.sh): each model its own
    # rows, one of them a .conf shard; then the pooled gemm_dim_half grid,
    # whose signed error must grow with h (a narrow weight only slows)
    { echo 'model,op,tokens,median_s'
      echo 'llama-7b,qkv_proj,1,2.99e-05'; echo 'llama-7b,o_proj,512,4.1e-05'
      echo 'llama-3-8b-tp8,qkv_proj,1,9e-06'; echo 'llama-3-8b-tp8,o_proj,512,1.1e-05'
      echo 'llama-3-8b-tp8,down_proj,64,1.4e-05'; } > "$T/shards.csv"
    python3 "$g" "$KVSIM" "$T/shards.csv" --model llama-7b \
        --model bench/gpu/shards/llama-3-8b-tp8.conf > "$T/out.txt" 2>&1
    if grep -q '^2 GEMMs of llama-7b;' "$T/out.txt" && grep -q '^3 GEMMs of llama-3-8b-tp8;' "$T/out.txt" &&
       grep -Eq '^qkv_proj +1 +4096 +768 ' "$T/out.txt" && grep -q '^all 5 GEMMs;' "$T/out.txt" &&
       python3 - "$T/out.txt" <<'EOF'
import re, sys
rows = [l for l in open(sys.argv[1]) if l.startswith("  h = ")]
signed = [float(re.search(r"trtllm +[0-9.]+% / ([+-][0-9.]+)%", l).group(1)) for l in rows]
sys.exit(0 if len(signed) == 6 and all(a < b for a, b in zip(signed, signed[1:])) else 1)
EOF
    then ok; else bad "gemm_vs_roofline.py on shard GEMMs: $(tail -8 "$T/out.txt")"; fi
    python3 "$g" "$KVSIM" "$T/shards.csv" --model llama-2-70b > "$T/out.txt" 2>&1
    rc=$?
    if [ "$rc" -eq 2 ] && [ "$(wc -l < "$T/out.txt")" -eq 1 ] && grep -q "no GEMM measurements of llama-2-70b" "$T/out.txt"
    then ok; else bad "gemm_vs_roofline.py, a model without rows: rc=$rc, $(head -2 "$T/out.txt")"; fi
fi

# bench/gpu/shard_gemms.sh: --help, an unknown argument, and its dry run on
# the CPU backend (tiny.conf: 28 GEMM timings, 5 ops, its model named)
s=bench/gpu/shard_gemms.sh
"$s" --help > "$T/out.txt" 2>&1 && grep -q '^shard_gemms.sh — ' "$T/out.txt" && ok ||
    bad "shard_gemms.sh --help: $(head -2 "$T/out.txt")"
"$s" bogus > "$T/out.txt" 2>&1
rc=$?
if [ "$rc" -eq 2 ] && [ "$(wc -l < "$T/out.txt")" -eq 1 ]; then ok
else bad "shard_gemms.sh bogus: rc=$rc, $(head -2 "$T/out.txt")"; fi
OUT="$T/sg" DEVICE=cpu KVSIM="$KVSIM" GPU=cpu MODELS=models/tiny.conf "$s" > "$T/out.txt" 2>&1
if [ "$(tail -n +2 "$T/sg/gemms.csv" | grep -c '^tiny,')" -eq 28 ] &&
   [ "$(tail -n +2 "$T/sg/gemms.csv" | cut -d, -f2 | sort -u | wc -l)" -eq 5 ]; then ok
else bad "shard_gemms.sh dry run: $(tail -3 "$T/out.txt")"; fi

echo "check_scripts: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
