#!/usr/bin/env bash
# check_fidelity_map.sh — the fidelity suite's wiring (bench/fidelity/run.py),
# without running its tables:
#   - `run.py --list` reads every data file and map.csv (exit 2 with one line
#     naming the file and line on a malformed one) and plans every row;
#   - every metric run.py knows reads a key that kvsim's --json output has
#     (a mapping left pointing at a stand-in, or at a key kvsim renamed, is
#     a KeyError here rather than a silently wrong column): run and capacity;
#   - the ITL metrics read kvsim's pooled inter-token gaps, not its TPOT: on
#     a trace whose requests have different output lengths the pooled mean
#     ITL and the mean TPOT differ, and itl_mean_ms must be the former;
#   - a malformed map.csv line is refused with its file and line, exit 2;
#   - every fit script answers --help, and a wrong argument or a missing
#     kvsim binary with one line naming the script, exit 2.
. "$(dirname "$0")/testlib.sh"
cd "$(dirname "$0")/.." || exit 1

if ! command -v python3 > /dev/null; then
    echo "SKIP: python3 not found (bench/fidelity is Python)"
    exit 0
fi

# ------------------------------------------------ every table and row plans
if python3 bench/fidelity/run.py "$KVSIM" --list > "$T/list.txt" 2> "$T/err.txt"; then
    n=$(grep -c '^   ' "$T/list.txt")
    if [ "$n" -ge 600 ]; then ok; else bad "--list printed $n rows, expected >= 600"; fi
else
    bad "--list failed: $(cat "$T/err.txt")"
fi

# ------------------------------------------------ every metric's JSON key
# output lengths 1..64: the pooled ITL weights long requests more than TPOT
"$KVSIM" run --synthetic 'arrival=poisson,rate=4,n=200,prompt=uniform:16:256,output=uniform:2:64' \
    --json --db "$T/r.db" > "$T/run.json" 2> "$T/err.txt" || bad "kvsim run failed: $(cat "$T/err.txt")"
"$KVSIM" capacity --model llama-3.1-8b --gpu h100-sxm --json > "$T/cap.json" 2> "$T/err.txt" ||
    bad "kvsim capacity failed: $(cat "$T/err.txt")"
if python3 - "$T/run.json" "$T/cap.json" > "$T/keys.txt" 2>&1 <<'EOF'
import json, sys
sys.path.insert(0, "bench/fidelity")
import run
j = {"run": json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]),
     "capacity": json.loads(open(sys.argv[2]).read().strip().splitlines()[-1])}
row = {"tp": "2", "isl": "128", "osl": "64"}
bad = 0
for name, (cmd, fn) in sorted(run.METRICS.items()):
    try:
        v = fn(j[cmd], row)
        if not isinstance(v, (int, float)) or v != v or v < 0:
            print(f"{name}: not a non-negative number: {v!r}"); bad += 1
    except KeyError as e:
        print(f"{name}: kvsim's {cmd} --json has no key {e}"); bad += 1
r = j["run"]
itl = run.METRICS["itl_mean_ms"][1](r, row)
if abs(itl - r["itl_mean_s"] * 1000.0) > 1e-9:
    print(f"itl_mean_ms reads {itl}, not itl_mean_s"); bad += 1
if abs(r["itl_mean_s"] - r["tpot_mean_s"]) < 1e-6 * r["tpot_mean_s"]:
    print("the trace's pooled ITL equals its mean TPOT: the check above proves nothing"); bad += 1
if abs(run.METRICS["itl_median_ms"][1](r, row) - r["itl_p50_s"] * 1000.0) > 1e-9:
    print("itl_median_ms does not read itl_p50_s"); bad += 1
sys.exit(1 if bad else 0)
EOF
then ok; else bad "metric keys: $(cat "$T/keys.txt")"; fi

# ------------------------------------------------ a malformed map.csv line
mkdir -p "$T/data"
cp bench/fidelity/data/vllm_pr7117_throughput_fit.csv "$T/data/"
python3 - "$T" > "$T/bad.txt" 2>&1 <<'EOF'
import sys, os
sys.path.insert(0, "bench/fidelity")
import run
# the runner reads its map from run.MAP: point it at a copy with a broken line
bad = os.path.join(sys.argv[1], "map.csv")
with open(run.MAP) as f, open(bad, "w") as g:
    g.write(f.read() + "model,OnlyTwoFields\n")
run.MAP = bad
sys.exit(run.main(["--list", "--data", os.path.join(sys.argv[1], "data")]))
EOF
rc=$?
if [ "$rc" -eq 2 ] && grep -q "map.csv" "$T/bad.txt" && [ "$(wc -l < "$T/bad.txt")" -eq 1 ]; then ok
else bad "malformed map.csv: rc=$rc, $(cat "$T/bad.txt")"; fi

# ------------------------------------------------ out_from: another file's output shape
# A ShareGPT spec with out_from takes the Azure conversation trace's output
# lengths (a fixed shuffle, cycled) beside its own prompts: prompts are the
# file's own, in order; the outputs are scaled to mean_out and keep the
# Azure shape (median / mean about 0.61), where the file's own outputs have
# a median near their mean (> 0.9); a spec naming a missing file is refused.
python3 - "$T" > "$T/shape.txt" 2>&1 <<'EOF'
import csv, os, statistics, sys
sys.path.insert(0, "bench/fidelity")
import run
base = "traces/lengths_sharegpt_8k_llama2tok.csv|min_len=4|max_prompt=1024|max_total=2048"
bad = 0
def read(path):
    with open(path, newline="") as f:
        return [(int(r["num_prefill_tokens"]), int(r["num_decode_tokens"])) for r in csv.DictReader(f)]
own = read(run.lengths_file(base + "|mean_out=190", sys.argv[1], {}))
new = read(run.lengths_file(base + "|out_from=traces/azure_llm_2023_conv.csv|mean_out=190",
                            sys.argv[1], {}))
src = [p for p, _ in read(os.path.join(run.ROOT, base.split("|")[0]))]
it = iter(src)  # the kept prompts, in the file's order
if not all(any(p == q for q in it) for p, _ in new):
    print("out_from changed the prompts or their order"); bad += 1
for name, rows, lo, hi in (("own", own, 0.9, 1.1), ("out_from", new, 0.5, 0.7)):
    o = [x for _, x in rows]
    ratio = statistics.median(o) / statistics.mean(o)
    if not (lo <= ratio <= hi) or abs(statistics.mean(o) - 190) > 2:
        print(f"{name}: median/mean {ratio:.2f} (want {lo}-{hi}), mean {statistics.mean(o):.1f}"); bad += 1
m = {"kind": "dataset", "name": "x", "precision": "", "kvsim": base + "|out_from=no/such.csv", "note": ""}
run.MAP = os.path.join(sys.argv[1], "map-shape.csv")
with open(run.MAP, "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(m)); w.writeheader(); w.writerow(m)
try:
    run.load_map()
    print("out_from=no/such.csv accepted"); bad += 1
except run.Malformed as e:
    if "out_from" not in str(e):
        print(f"refusal does not name out_from: {e}"); bad += 1
sys.exit(1 if bad else 0)
EOF
if [ $? -eq 0 ]; then ok; else bad "out_from: $(cat "$T/shape.txt")"; fi

# ------------------------------------------------ the fit scripts' arguments
# --help prints the script's docstring; a wrong argument or a kvsim binary
# that is not there is one line naming the script, exit 2 (no traceback)
for f in bench/fidelity/fit_*.py bench/fidelity/durations.py; do
    name=$(basename "$f")
    python3 "$f" --help > "$T/h.txt" 2>&1
    rc=$?
    if [ "$rc" -eq 0 ] && grep -q "$name" "$T/h.txt"; then ok; else bad "$name --help: rc=$rc"; fi
    for args in "$T/no-such-kvsim" "--bogus" "$KVSIM extra"; do
        # shellcheck disable=SC2086
        python3 "$f" $args > "$T/h.txt" 2>&1
        rc=$?
        if [ "$rc" -eq 2 ] && [ "$(wc -l < "$T/h.txt")" -eq 1 ] && grep -q "^$name: " "$T/h.txt"; then ok
        else bad "$name $args: rc=$rc, $(head -3 "$T/h.txt")"; fi
    done
done

echo "check_fidelity_map: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
