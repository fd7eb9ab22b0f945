#!/usr/bin/env bash
# py_package.sh — the Python package end to end: `pip install ./python` in a
# fresh virtual environment (scikit-build-core builds libkvsim.so from the
# project's CMake), then
#   - kvsim.run gives the same `requests` rows as `kvsim run` with the same
#     flags, column by column and exactly (the CLI's rows read back from its
#     database), and the same summary as `kvsim run --json`;
#   - compare and sweep give the runs `kvsim compare` / `kvsim sweep` store;
#   - an unknown model raises kvsim.Error naming it, with the line the CLI
#     prints after "kvsim run: ", and the process carries on;
#   - help(kvsim.run) lists every flag of `kvsim run --help`;
#   - runs in 4 threads give the rows they give one after another, and the
#     GIL is released while one simulates (the main thread keeps running);
#   - kvsim.import_trace writes the file `kvsim trace import` writes.
# Skipped (exit 0, with a note) only when python3 -m venv does not work.
# Speed is bench/py_threads.py's business, not this test's.
. "$(dirname "$0")/testlib.sh"
ROOT=$(pwd)
if ! python3 -m venv "$T/venv" > "$T/venv.txt" 2>&1; then
  echo "SKIP: python3 -m venv does not work here (scripts/setup.sh installs python3-venv):" \
       "$(tail -1 "$T/venv.txt")"
  exit 0
fi

PY=$T/venv/bin/python
# pip's cache (~/.cache/pip) is kept between runs: only the first downloads.
export PIP_DISABLE_PIP_VERSION_CHECK=1
if "$PY" -m pip install -q "$ROOT/python" > "$T/pip.txt" 2>&1; then ok; else
  bad "pip install ./python failed: $(tail -20 "$T/pip.txt")"
  echo "py_package: $pass passed, $fail failed"
  exit 1
fi
# the installed package must not be this checkout's python/ directory
cd "$T"
where=$("$PY" -c 'import kvsim, os; print(os.path.dirname(kvsim.__file__))')
case "$where" in "$T"/venv/*) ok ;; *) bad "kvsim imported from $where" ;; esac

SPEC="arrival=poisson,rate=20,n=400,prompt=uniform:16:900,output=uniform:1:150"
FLAGS=(--model llama-2-7b --gpu a100-40g --synthetic "$SPEC" --kv-blocks 500 --seed 7
       --max-model-len 1000 --max-seqs 32)
"$KVSIM" run "${FLAGS[@]}" --db "$T/cli.db" --json > "$T/cli.json" 2> "$T/cli.err" && ok ||
  bad "kvsim run failed: $(cat "$T/cli.err")"
"$KVSIM" run "${FLAGS[@]}" --replicas 2 --db "$T/cli2.db" --quiet > /dev/null 2> "$T/cli2.err" && ok ||
  bad "kvsim run --replicas 2 failed: $(cat "$T/cli2.err")"
"$KVSIM" run --model nope-model --db "$T/bad.db" 2> "$T/bad.err"
[ $? -eq 2 ] && ok || bad "kvsim run with an unknown model did not exit 2"
"$KVSIM" compare "${FLAGS[@]}" --db "$T/cmp.db" --quiet > /dev/null 2>&1 && ok || bad "kvsim compare failed"
"$KVSIM" sweep "${FLAGS[@]}" --grid max-seqs=8,64 --grid rate=10,30 --db "$T/sw.db" --quiet \
  > /dev/null 2>&1 && ok || bad "kvsim sweep failed"
"$KVSIM" run --help > "$T/help.txt"

KVSIM_ROOT=$ROOT KVSIM_BIN=$KVSIM "$PY" - "$T" "$SPEC" > "$T/py.txt" 2>&1 <<'PY'
import json, sqlite3, sys, threading, time
import kvsim

T, SPEC = sys.argv[1], sys.argv[2]
fails = 0
def check(cond, what):
    global fails
    if not cond:
        fails += 1
        print("FAIL:", what)

FLAGS = dict(model="llama-2-7b", gpu="a100-40g", workload=SPEC, kv_blocks=500, seed=7,
             max_model_len=1000, max_seqs=32)

def same(a, b):
    # NULL in SQLite is NaN here: a rejected request has no first token
    if a is None or b is None or a != a or b != b:
        return (a is None or a != a) and (b is None or b != b)
    return a == b

def cli_requests(db, run_id):
    con = sqlite3.connect(db)
    cur = con.execute("SELECT * FROM requests WHERE run_id = ? ORDER BY req_id", (run_id,))
    cols = [d[0] for d in cur.description]
    rows = cur.fetchall()
    con.close()
    return cols, rows

def same_rows(r, db, run_id, what):
    cols, rows = cli_requests(db, run_id)
    df = r.requests
    check(len(df) == len(rows) and len(rows) > 0, f"{what}: {len(df)} rows, CLI {len(rows)}")
    check(list(df.columns) == [c for c in cols if c != "run_id"],
          f"{what}: columns {list(df.columns)}, the requests table's {cols}")
    for j, c in enumerate(cols):
        if c == "run_id":
            continue
        check(c in df.columns, f"{what}: no column {c}")
        if c not in df.columns:
            continue
        py = df[c].tolist()
        diff = [i for i, row in enumerate(rows) if not same(py[i], row[j])]
        check(not diff, f"{what}: column {c} differs at rows {diff[:5]}")
    return df

# 1. one run: the CLI's rows, column by column, and its summary
r = kvsim.run(**FLAGS)
df = same_rows(r, f"{T}/cli.db", 1, "run")
check((df["status"] == "rejected").any(), "the run rejects nothing (max-model-len 1000 should)")
check((df["preemptions"] > 0).any(), "the run preempts nothing (500 KV blocks should)")
cli = json.load(open(f"{T}/cli.json"))
for k, v in cli.items():
    if k not in ("run_id", "wall_s"):
        check(k in r.summary and same(r.summary[k], v), f"summary {k}: {r.summary.get(k)} != CLI {v}")
check(r.run_id == 0, "an unstored run has run id 0")
# a cluster of two engines: each request's replica too
r2 = kvsim.run(**FLAGS, replicas=2)
df2 = same_rows(r2, f"{T}/cli2.db", 1, "cluster run")
check(sorted(df2["replica"].unique()) == [0, 1], "the cluster run did not use both replicas")

# 2. compare and sweep: the runs the CLI stores
c = kvsim.compare(**FLAGS, jobs=2)
con = sqlite3.connect(f"{T}/cmp.db")
cli_cmp = con.execute("SELECT label, ttft_p99_s, throughput_tok_s, preemptions FROM runs "
                      "ORDER BY run_id").fetchall()
check(len(cli_cmp) == len(c) and len(c) >= 2, f"compare: {len(c)} variants, CLI {len(cli_cmp)}")
for (label, ttft, tput, pre), name, run in zip(cli_cmp, c.names, c.runs):
    check(label.endswith(": " + name), f"compare: CLI variant {label}, Python {name}")
    check(same(run.summary["ttft_p99_s"], ttft) and same(run.summary["throughput_tok_s"], tput)
          and run.summary["preemptions"] == pre, f"compare {name}: summary differs from the CLI")
s = kvsim.sweep(grid={"max_seqs": [8, 64], "rate": [10, 30]}, **FLAGS, jobs=2,
                db=f"{T}/pysw.db")
con = sqlite3.connect(f"{T}/sw.db")
cli_sw = dict(con.execute("SELECT p.point_key, r.ttft_p99_s FROM sweep_points p JOIN runs r "
                          "USING (run_id)").fetchall())
check(len(cli_sw) == 4 and sorted(cli_sw) == sorted(s.names),
      f"sweep points: CLI {sorted(cli_sw)}, Python {s.names}")
for name, run in zip(s.names, s.runs):
    check(same(run.summary["ttft_p99_s"], cli_sw.get(name)), f"sweep {name}: ttft differs")
with kvsim.open(f"{T}/pysw.db") as d:
    runs = d.runs()
    check(len(runs) == 4 and runs["sweep_id"].eq(s.sweep_id).all(), "sweep: stored runs")
    check(len(d.requests(int(runs.index[0]))) == 400, "sweep: stored requests")

# 3. errors: the CLI's line, no exit
bad = open(f"{T}/bad.err").read().strip()
try:
    kvsim.run(model="nope-model", db=f"{T}/bad-py.db")
    check(False, "an unknown model raised nothing")
except kvsim.Error as e:
    check("nope-model" in str(e), f"the error does not name the model: {e}")
    check(bad == "kvsim run: " + str(e), f"Python '{e}' vs CLI '{bad}'")
for kw, word in ((dict(max_seqs="x"), "--max-seqs"), (dict(no_such_flag=1), "--no-such-flag")):
    try:
        kvsim.run(**kw)
        check(False, f"{kw} raised nothing")
    except kvsim.Error as e:
        check(word in str(e), f"{kw}: error '{e}' does not name {word}")
print("still running after the errors")

# 4. help lists every flag of `kvsim run --help` with a default
import re
doc = kvsim.run.__doc__
cli_flags = re.findall(r"^  --([a-z0-9-]+)", open(f"{T}/help.txt").read(), re.M)
check(len(cli_flags) > 20, f"kvsim run --help lists {len(cli_flags)} flags")
for f in cli_flags:
    if f not in ("db", "quiet", "json"):
        check(f"    {f.replace('-', '_')}=" in doc, f"help(kvsim.run) lacks {f}")
check("[default: 16]" in doc, "help(kvsim.run) does not show block_size's default")

# 5. threads: the same rows as in a row; the GIL is free while simulating
W = "arrival=poisson,rate=20,n=3000,prompt=uniform:16:800,output=uniform:1:120"
seq = [kvsim.run(model="llama-2-7b", workload=W, seed=s).requests for s in range(4)]
out = [None] * 4
def work(i):
    out[i] = kvsim.run(model="llama-2-7b", workload=W, seed=i).requests
ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]
for t in ts: t.start()
for t in ts: t.join()
for i in range(4):
    check(out[i] is not None and out[i].equals(seq[i]), f"thread {i}: rows differ")
# (n large enough that the run lasts a good part of a second however fast
# the engine gets: 60,000 of these took 0.09 s by session 16)
big = "arrival=poisson,rate=20,n=500000,prompt=uniform:16:800,output=uniform:1:120"
th = threading.Thread(target=lambda: kvsim.run(model="llama-2-7b", workload=big))
ticks = 0
th.start()
time.sleep(0.05)
# while the run simulates, this thread must get the GIL: it wakes about
# once a millisecond when the GIL is free, and would run about once if not
t0 = time.perf_counter()
while th.is_alive():
    ticks += 1
    time.sleep(0.001)
elapsed = time.perf_counter() - t0
th.join()
print(f"GIL: the main thread woke {ticks} times in {elapsed:.2f} s of a long run")
check(elapsed >= 0.2, f"the long run lasted {elapsed:.3f} s: too short to tell whether the GIL is free")
check(ticks >= max(20, elapsed * 1000 / 25),
      f"the main thread ran {ticks} times in {elapsed:.3f} s of a long run (GIL held?)")
# 6. dataset importers: the CLI's bytes, and its errors
import os, subprocess
D = os.path.join(os.environ["KVSIM_ROOT"], "tests/data/import")
for fmt, src, kw in (("sharegpt", "sharegpt_sample.json", dict(turns=True)),
                     ("burstgpt", "burstgpt_sample.csv", {}),
                     ("azure2024", "azure2024_sample.csv", {}),
                     ("vllm-custom", "vllm_custom_sample.jsonl", dict(rate=3, seed=2))):
    info = kvsim.import_trace(fmt, f"{D}/{src}", f"{T}/py-{fmt}.csv", **kw)
    args = [os.environ["KVSIM_BIN"], "trace", "import", fmt, f"{D}/{src}", "-o", f"{T}/cli-{fmt}.csv"]
    args += ["--turns"] if kw.get("turns") else []
    args += ["--rate", "3", "--seed", "2"] if "rate" in kw else []
    subprocess.run(args, check=True, capture_output=True)
    check(open(f"{T}/py-{fmt}.csv").read() == open(f"{T}/cli-{fmt}.csv").read(),
          f"import_trace {fmt}: not the CLI's file")
    check(info["requests"] == 3 + (fmt == "sharegpt"), f"import_trace {fmt}: {info}")
try:
    kvsim.import_trace("burstgpt", f"{D}/sharegpt_sample.json", f"{T}/x.csv")
    check(False, "a ShareGPT file read as BurstGPT raised nothing")
except kvsim.Error as e:
    check("sharegpt_sample.json:1: not a BurstGPT header" in str(e), f"import error: {e}")
print("models", len(kvsim.models()), "gpus", len(kvsim.gpus()))
check("llama-2-7b" in kvsim.models().index and "h100-sxm" in kvsim.gpus().index,
      "models()/gpus() lack the built-ins")
# the constants `kvsim cost show --engine trtllm --cost ...` prints: the
# profile's ridge_loss 0.25, --cost's eff_gemm winning, eff_fp8's default
k = kvsim.cost_constants("trtllm", "roofline:eff_gemm=0.75")
check(k.loc["ridge_loss", "value"] == 0.25 and k.loc["ridge_loss", "from"] == "engine trtllm",
      f"cost_constants ridge_loss: {k.loc['ridge_loss'].to_dict()}")
check(k.loc["eff_gemm", "value"] == 0.75 and k.loc["eff_gemm", "from"] == "--cost",
      f"cost_constants eff_gemm: {k.loc['eff_gemm'].to_dict()}")
check(k.loc["eff_fp8", "value"] == 0.9 and k.loc["eff_fp8", "from"] == "default",
      f"cost_constants eff_fp8: {k.loc['eff_fp8'].to_dict()}")
try:
    kvsim.cost_constants("vllm-v2")
    check(False, "cost_constants accepted an unknown engine")
except kvsim.Error as e:
    check("--engine: unknown value 'vllm-v2'" in str(e), f"cost_constants error: {e}")
try:
    kvsim.cost_constants(cost="roofline:eff_fp8=2")
    check(False, "cost_constants accepted eff_fp8=2")
except kvsim.Error as e:
    check("eff_fp8" in str(e), f"cost_constants range error: {e}")
print("python checks failed:", fails)
PY
rc=$?
[ $rc -eq 0 ] && ok || bad "python exit $rc"
grep "^GIL:" "$T/py.txt"
grep "^FAIL" "$T/py.txt" && bad "python checks (see above)" || ok
grep -q "^still running after the errors$" "$T/py.txt" && ok || bad "the process did not carry on after kvsim.Error: $(tail -5 "$T/py.txt")"
grep -q "^python checks failed: 0$" "$T/py.txt" && ok || bad "python checks did not finish: $(tail -20 "$T/py.txt")"
echo "py_package: $pass passed, $fail failed"
[ $fail -eq 0 ]
