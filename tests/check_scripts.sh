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
    if grep -q '^45 GEMMs;' "$T/out.txt" && grep -Eq '^qkv_proj +1 +29\.9us' "$T/out.txt" &&
       grep -Eq '^  trtllm ' "$T/out.txt"; then ok
    else bad "gemm_vs_roofline.py on the stored H200 run: $(tail -3 "$T/out.txt")"; fi
fi

echo "check_scripts: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
