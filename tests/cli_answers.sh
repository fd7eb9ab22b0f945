#!/usr/bin/env bash
# cli_answers.sh — answers a user can check at a glance (issue 19):
#   - --result-json: vllm bench serve's saved-result keys, parsed by Python's
#     json, every figure equal to the stored runs row (and the per-request
#     lists to the requests rows); written atomically; a path in a missing
#     directory fails before any simulation (one line, exit 2, no run stored);
#   - diff-bench: a file against itself has zero error, a changed figure
#     shows its relative error, bad input exits 2;
#   - --goodput (vLLM's ms syntax) sets the same SLOs as --slo (seconds);
#   - the summary counts rejections by reason and says what limited the batch.
. "$(dirname "$0")/testlib.sh"
DB=$T/a.db
# prompts up to 2400 + 64 output against max-model-len 2048: some rejected
SYN='arrival=poisson,rate=6,n=300,prompt=uniform:16:2400,output=uniform:1:64'
RUN=("$KVSIM" run --synthetic "$SYN" --seed 7 --model llama-2-7b --max-model-len 2048
     --engine vllm-v0 --record-steps --db "$DB")

# ------------------------------------------------ --result-json = the runs row
"${RUN[@]}" --goodput 'ttft:800 tpot:60' --result-json "$T/r.json" --result-json-detail \
  > "$T/out.txt" 2> "$T/err.txt"
[ $? -eq 0 ] && ok || bad "run --result-json: $(cat "$T/err.txt")"
[ ! -e "$T/r.json.tmp."* ] 2>/dev/null && ls "$T" | grep -qv tmp && ok || bad "temporary file left behind: $(ls "$T")"
sqlite3 -json "$DB" "SELECT * FROM runs WHERE run_id = 1" > "$T/row.json"
sqlite3 -json "$DB" "SELECT * FROM requests WHERE run_id = 1 ORDER BY req_id" > "$T/req.json"
python3 - "$T/r.json" "$T/row.json" "$T/req.json" <<'PY' && ok || bad "result json vs runs row"
import json, math, statistics, sys
r = json.load(open(sys.argv[1]))
row = json.load(open(sys.argv[2]))[0]
reqs = json.load(open(sys.argv[3]))
def eq(a, b, what, tol=1e-12):
    assert (a is None and b is None) or abs(a - b) <= tol * max(1.0, abs(b)), (what, a, b)
fin = [q for q in reqs if q["status"] == "finished"]
assert r["completed"] == row["n_finished"] == len(fin)
assert r["failed"] == row["n_rejected"] > 0
assert r["total_input_tokens"] == sum(q["prompt_tokens"] for q in fin)
assert r["total_output_tokens"] == sum(q["output_tokens"] for q in fin)
eq(r["duration"], max(q["finish_s"] for q in fin) - min(q["arrival_s"] for q in reqs), "duration")
eq(r["request_throughput"], row["throughput_req_s"], "req/s")
eq(r["output_throughput"], row["throughput_tok_s"], "tok/s")
eq(r["request_goodput"], row["goodput_req_s"], "goodput")
eq(r["total_token_throughput"], (r["total_input_tokens"] + r["total_output_tokens"]) / r["duration"], "total tok/s")
for v, k in (("ttft", "ttft"), ("tpot", "tpot"), ("itl", "itl"), ("e2el", "e2e")):
    eq(r[f"mean_{v}_ms"], row[f"{k}_mean_s"] * 1000, v)
    eq(r[f"median_{v}_ms"], row[f"{k}_p50_s"] * 1000, v)
    for p in (50, 90, 99):
        eq(r[f"p{p}_{v}_ms"], row[f"{k}_p{p}_s"] * 1000, v)
# population standard deviations, as numpy's np.std
ttft = [q["first_token_s"] - q["arrival_s"] for q in fin]
eq(r["std_ttft_ms"], statistics.pstdev(ttft) * 1000, "std ttft", 1e-9)
# per-request lists
n = len(reqs)
assert len(r["input_lens"]) == len(r["output_lens"]) == len(r["ttfts"]) == len(r["itls"]) == n
gaps = []
for q, il, ol, tt, itl, e in zip(reqs, r["input_lens"], r["output_lens"], r["ttfts"], r["itls"], r["errors"]):
    assert il == q["prompt_tokens"]
    if q["status"] == "finished":
        assert ol == q["output_tokens"] and e == ""
        eq(tt, q["first_token_s"] - q["arrival_s"], "ttft")
        assert len(itl) == q["output_tokens"] - 1
        eq(sum(itl), q["finish_s"] - q["first_token_s"], "sum of itls", 1e-9)
        if itl:
            eq(max(itl), q["max_itl_s"], "max itl")
        else:
            assert q["max_itl_s"] is None
        gaps += itl
    else:
        assert ol == 0 and e == "rejected: " + q["reject_reason"] and itl == []
assert len(gaps) == row["n_itl"]
eq(r["std_itl_ms"], statistics.pstdev(gaps) * 1000, "std itl", 1e-6)
# the figures exist only as JSON numbers (no NaN / Infinity)
json.loads(open(sys.argv[1]).read(), parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
PY

# ------------------------------------------------ --goodput and --slo agree
r1=$(sqlite3 "$DB" "SELECT slo_ttft_s, slo_tpot_s, goodput_req_s FROM runs WHERE run_id = 1")
"${RUN[@]}" --slo ttft=0.8,tpot=0.06 --quiet > /dev/null 2> "$T/err.txt"
r2=$(sqlite3 "$DB" "SELECT slo_ttft_s, slo_tpot_s, goodput_req_s FROM runs WHERE run_id = 2")
[ "$r1" = "$r2" ] && [ "${r1%%|*}" = 0.8 ] && ok || bad "--goodput 'ttft:800 tpot:60' = $r1, --slo = $r2"
"${RUN[@]}" --goodput 'ttft:800' --slo ttft=1 > /dev/null 2> "$T/e.txt"
[ $? -eq 2 ] && grep -q -- "--slo and --goodput: give one" "$T/e.txt" && ok || bad "both SLO flags: $(cat "$T/e.txt")"
for g in 'ttft=800' 'itl:5' 'ttft:-1' ''; do
  "${RUN[@]}" --goodput "$g" > /dev/null 2> "$T/e.txt"
  [ $? -eq 2 ] && grep -q -- "--goodput" "$T/e.txt" && [ "$(wc -l < "$T/e.txt")" = 1 ] && ok ||
    bad "--goodput '$g': $(cat "$T/e.txt")"
done

# --goodput carries its targets into a capacity search (the runs' slo_ttft_s)
"$KVSIM" capacity --search rate --slo attainment=0.5 --goodput 'ttft:500' \
  --synthetic 'arrival=poisson,rate=4,n=100,prompt=64,output=8' --db "$T/gp.db" > /dev/null 2> "$T/e.txt"
r=$(sqlite3 "$T/gp.db" "SELECT group_concat(DISTINCT slo_ttft_s) FROM runs")
[ "$r" = 0.5 ] && ok || bad "capacity --goodput: slo_ttft_s '$r' $(cat "$T/e.txt")"
"$KVSIM" capacity --search rate --slo ttft=1,attainment=0.9 --goodput 'ttft:500' \
  --synthetic 'arrival=poisson,rate=4,n=100,prompt=64,output=8' --db "$T/gp.db" > /dev/null 2> "$T/e.txt"
[ $? -eq 2 ] && grep -q "give the per-request targets once" "$T/e.txt" && ok || bad "capacity: targets twice: $(cat "$T/e.txt")"

# ------------------------------------------------ bad --result-json paths
n0=$(sqlite3 "$DB" "SELECT count(*) FROM runs")
"${RUN[@]}" --result-json "$T/no/such/dir/r.json" > /dev/null 2> "$T/e.txt"
[ $? -eq 2 ] && [ "$(wc -l < "$T/e.txt")" = 1 ] && grep -q "no such directory $T/no/such/dir" "$T/e.txt" &&
  [ "$(sqlite3 "$DB" "SELECT count(*) FROM runs")" = "$n0" ] && ok || bad "missing directory: $(cat "$T/e.txt")"
"$KVSIM" sweep --grid max-seqs=8,16 --synthetic "$SYN" --result-json "$T/s.json" --db "$DB" > /dev/null 2> "$T/e.txt"
[ $? -eq 2 ] && grep -q -- "--result-json: only with kvsim run" "$T/e.txt" && ok || bad "sweep --result-json: $(cat "$T/e.txt")"
"${RUN[@]}" --result-json-detail > /dev/null 2> "$T/e.txt"
[ $? -eq 2 ] && grep -q -- "give --result-json FILE too" "$T/e.txt" && ok || bad "detail alone: $(cat "$T/e.txt")"

# ------------------------------------------------ diff-bench
"$KVSIM" diff-bench "$T/r.json" "$T/r.json" > "$T/d.txt" 2> "$T/e.txt"
[ $? -eq 0 ] && grep -q "largest relative error 0.00%" "$T/d.txt" &&
  [ "$(grep -c '+0.00%' "$T/d.txt")" -ge 30 ] && ! grep -v "^metric\|metrics compared" "$T/d.txt" | grep -vq " +0 *+0.00%$" &&
  ok || bad "diff-bench with itself: $(cat "$T/d.txt" "$T/e.txt")"
python3 -c "import json,sys; r=json.load(open('$T/r.json')); r['p99_ttft_ms']*=1.1; r['completed']=0; json.dump(r,open('$T/m.json','w'))"
"$KVSIM" diff-bench "$T/m.json" "$T/r.json" > "$T/d.txt" 2> "$T/e.txt"
[ $? -eq 0 ] && grep -q "^p99_ttft_ms .* -9.09%$" "$T/d.txt" && grep -q "^completed .* +inf%$" "$T/d.txt" &&
  grep -q "largest relative error inf% (completed)" "$T/d.txt" && ok || bad "diff-bench changed: $(cat "$T/d.txt")"
echo '{"a": [1]}' > "$T/x.json"; echo 'not json' > "$T/y.json"
for args in "$T/x.json $T/r.json" "$T/y.json $T/r.json" "$T/r.json" "$T/r.json $T/missing.json"; do
  "$KVSIM" diff-bench $args > /dev/null 2> "$T/e.txt"
  [ $? -eq 2 ] && [ "$(wc -l < "$T/e.txt")" = 1 ] && ok || bad "diff-bench $args: $(cat "$T/e.txt")"
done

# ------------------------------------------------ the summary says why and what limited
"${RUN[@]}" > "$T/out.txt" 2> "$T/err.txt"
nr=$(sqlite3 "$DB" "SELECT n_rejected, n_reject_context FROM runs ORDER BY run_id DESC LIMIT 1")
grep -q "rejected ([0-9.]*%: ${nr#*|} over max-model-len, 0 over max-batched-tokens, 0 over the KV cache)" "$T/out.txt" &&
  [ "${nr%|*}" = "${nr#*|}" ] && ok || bad "rejections in the summary ($nr): $(grep requests "$T/out.txt")"
grep -q "^  batch limited by [a-zA-Z -]* in [0-9.]*% of steps" "$T/out.txt" && ok || bad "no batch-limit line"
r=$(sqlite3 "$DB" "SELECT abs(limit_kv_share + limit_max_seqs_share + limit_token_budget_share + limit_none_share + limit_other_share - 1) < 1e-12 FROM runs ORDER BY run_id DESC LIMIT 1")
[ "$r" = 1 ] && ok || bad "limit shares do not sum to 1"

# ------------------------------------------------ --rate R in req/s
# A 5-request trace arriving at 0, 1, 2, 3, 8 s has rate (5 - 1) / 8 = 0.5
# req/s; --rate 2 scales its times by 1/4 (rate_scale 4): 0, 0.25, 0.5, 0.75, 2.
printf 'arrival_s,prompt_tokens,output_tokens\n0,10,5\n1,10,5\n2,10,5\n3,10,5\n8,10,5\n' > "$T/t.csv"
"$KVSIM" run --trace "$T/t.csv" --rate 2 --db "$DB" > "$T/out.txt" 2> "$T/e.txt"
[ $? -eq 0 ] && grep -q "at 2 req/s (its arrivals x4)" "$T/out.txt" && ok || bad "trace --rate: $(cat "$T/out.txt" "$T/e.txt")"
r=$(sqlite3 "$DB" "SELECT rate_rps, rate_scale, (SELECT group_concat(arrival_s, ' ') FROM requests q WHERE q.run_id = r.run_id)
                   FROM runs r ORDER BY run_id DESC LIMIT 1")
[ "$r" = "2.0|4.0|0.0 0.25 0.5 0.75 2.0" ] && ok || bad "trace --rate 2 stored: $r"
"$KVSIM" run --synthetic 'arrival=poisson,rate=1,n=50,prompt=32,output=4' --rate 7.5 --db "$DB" --quiet > /dev/null 2> "$T/e.txt"
r=$(sqlite3 "$DB" "SELECT rate_rps, rate_scale, synthetic FROM runs ORDER BY run_id DESC LIMIT 1")
[ "$r" = "7.5|1.0|arrival=poisson,rate=7.5,n=50,prompt=32,output=4" ] && ok || bad "synthetic --rate: $r $(cat "$T/e.txt")"
for args in "--rate 0" "--rate -1" "--rate 2 --rate-scale 3" "--rate-scale 3 --rate 2" \
            "--synthetic arrival=burst,n=5,prompt=8,output=2 --rate 3" "--trace $T/one.csv --rate 3"; do
  printf 'arrival_s,prompt_tokens,output_tokens\n0,10,5\n' > "$T/one.csv"
  n0=$(sqlite3 "$DB" "SELECT count(*) FROM runs")
  "$KVSIM" run $args --db "$DB" > /dev/null 2> "$T/e.txt"
  [ $? -eq 2 ] && [ "$(wc -l < "$T/e.txt")" = 1 ] && grep -q -- "--rate" "$T/e.txt" &&
    [ "$(sqlite3 "$DB" "SELECT count(*) FROM runs")" = "$n0" ] && ok || bad "run $args: $(cat "$T/e.txt")"
done

# a sweep's rate axis over a trace file is --rate (req/s)
"$KVSIM" sweep --trace "$T/t.csv" --grid rate=1,4 --db "$T/sw.db" > /dev/null 2> "$T/e.txt"
r=$(sqlite3 "$T/sw.db" "SELECT group_concat(rate_rps || '/' || rate_scale, ' ') FROM (SELECT * FROM runs ORDER BY run_id)")
[ "$r" = "1.0/2.0 4.0/8.0" ] && ok || bad "sweep rate axis on a trace: $r $(cat "$T/e.txt")"

# ------------------------------------------------ compare prints every row
# 100 blocks of 16 tokens and 512-token prompts: with --preemption off the
# running requests soon all need a block and the run is stuck; the other
# variant finishes, and the table shows both, the failed row with its error.
CDB=$T/c.db
"$KVSIM" compare --synthetic 'arrival=poisson,rate=20,n=300,prompt=512,output=256' --engine vllm-v0 \
  --kv-blocks 100 --variant 'ok:max-seqs=8' --variant 'stuck:preemption=off' --db "$CDB" \
  > "$T/out.txt" 2> "$T/e.txt"
rc=$?
[ $rc -eq 2 ] && grep -q "^kvsim compare 1: llama-3-8b on a100-80g, tp 1, engine vllm-v0 .*arrival=poisson,rate=20" "$T/out.txt" &&
  grep -q "^ok  *1  *[0-9]" "$T/out.txt" && grep -q "^stuck  *- failed: simulation stuck at t=.*(recorded as failed run 2)" "$T/out.txt" &&
  tail -1 "$T/e.txt" | grep -q "1 of 2 variants failed" && ok || bad "compare with a failing variant: rc $rc $(cat "$T/out.txt" "$T/e.txt")"
r=$(sqlite3 "$CDB" "SELECT group_concat(status, ',') FROM (SELECT status FROM runs WHERE compare_id = 1 ORDER BY run_id)")
[ "$r" = "finished,failed" ] && ok || bad "compare runs stored: $r"

# ------------------------------------------------ show RUN reprints the summary
SDB=$T/s.db
SSYN='arrival=poisson,rate=4,n=200,prompt=uniform:100:2000,output=uniform:1:300,priorities=0:0.5/1:0.5'
"$KVSIM" run --engine vllm-v0 --model llama-13b --synthetic "$SSYN" --db "$SDB" > "$T/a.txt" 2>&1
"$KVSIM" show 1 --db "$SDB" > "$T/b.txt" 2>&1
[ $? -eq 0 ] && cmp -s "$T/a.txt" "$T/b.txt" && grep -q "^  priority 1 " "$T/b.txt" && ok ||
  bad "show differs from run: $(diff "$T/a.txt" "$T/b.txt")"
"$KVSIM" run --json --synthetic "$SSYN" --db "$SDB" > "$T/a.json" 2>&1
"$KVSIM" show 2 --json --db "$SDB" > "$T/b.json" 2>&1
cmp -s "$T/a.json" "$T/b.json" && ok || bad "show --json differs: $(diff "$T/a.json" "$T/b.json")"
for args in "9 --db $SDB" "0 --db $SDB" "x --db $SDB" "--db $SDB" "1 --db $T/none.db"; do
  "$KVSIM" show $args > /dev/null 2> "$T/e.txt"
  [ $? -eq 2 ] && [ "$(wc -l < "$T/e.txt")" = 1 ] && ok || bad "show $args: $(cat "$T/e.txt")"
done
"$KVSIM" show 9 --db "$SDB" 2>&1 | grep -q "no such run 9" && ok || bad "show of a missing run"
"$KVSIM" show 1 --db "$T/none.db" 2>&1 | grep -q "no such database" && [ ! -e "$T/none.db" ] && ok ||
  bad "show of a missing database"

# ------------------------------------------------ export perfetto
# run 1 of $DB recorded its steps (and rejected some requests)
"$KVSIM" export perfetto 1 -o "$T/p.json" --db "$DB" > /dev/null 2> "$T/e.txt"
[ $? -eq 0 ] && ok || bad "export perfetto: $(cat "$T/e.txt")"
sqlite3 -json "$DB" "SELECT n_steps, n_finished, n_requests FROM runs WHERE run_id = 1" > "$T/n.json"
python3 - "$T/p.json" "$T/n.json" <<'PY' && ok || bad "perfetto trace: $(head -c 600 "$T/p.json")"
# A reader of Chrome trace-event JSON: every event's fields by phase, slices
# nesting per track, one engine slice per step, flows paired in time order.
import json, sys
d = json.load(open(sys.argv[1]))
n = json.load(open(sys.argv[2]))[0]
ev = d["traceEvents"]
need = {"X": {"name", "pid", "tid", "ts", "dur", "cat", "args"}, "C": {"name", "pid", "ts", "args"},
        "M": {"name", "pid", "args"}, "s": {"name", "id", "pid", "tid", "ts", "cat"},
        "f": {"name", "id", "pid", "tid", "ts", "cat", "bp"}}
tracks, flows, counters = {}, {}, 0
for e in ev:
    ph = e["ph"]
    assert ph in need, e
    assert need[ph] <= set(e), (ph, sorted(need[ph] - set(e)), e)
    if ph != "M":
        assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0, e
    if ph == "X":
        assert e["dur"] >= 0, e
        tracks.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
    elif ph == "C":
        assert e["args"] and all(isinstance(v, (int, float)) for v in e["args"].values()), e
        counters += 1
    elif ph in "sf":
        flows.setdefault(e["id"], {})[ph] = e
# slices nest: each inside the open one, or after it; 1 ns of slack, the
# resolution Perfetto imports microseconds at (a step's end and the next
# step's start are equal in seconds, and may differ in the last bit in us)
EPS = 1e-3
for key, sl in tracks.items():
    stack = []
    for a, b in sorted(sl, key=lambda x: (x[0], -x[1])):
        while stack and stack[-1] <= a + EPS and not (abs(stack[-1] - a) <= EPS and b == a):
            stack.pop()
        assert not stack or b <= stack[-1] + EPS, (key, a, b, stack[-1])
        stack.append(b)
steps = [e for e in ev if e["ph"] == "X" and e["tid"] == 1]
assert len(steps) == n["n_steps"], (len(steps), n["n_steps"])
assert all({"prefills", "decodes", "tokens"} <= set(e["args"]) for e in steps)
assert counters == 2 * n["n_steps"]
assert len([e for e in ev if e["ph"] == "X" and e["tid"] == 2]) == n["n_requests"]
assert len(flows) == n["n_finished"] < n["n_requests"]
for i, f in flows.items():
    assert set(f) == {"s", "f"} and f["s"]["ts"] <= f["f"]["ts"], (i, f)
    # the flow ends inside an engine step
    assert any(a <= f["f"]["ts"] <= b for a, b in tracks[(1, 1)]), f
PY
"$KVSIM" export perfetto 1 -o "$T/p2.json" --db "$SDB" > /dev/null 2> "$T/e.txt"
[ $? -eq 2 ] && grep -q "run 1 has no recorded steps" "$T/e.txt" && [ ! -e "$T/p2.json" ] && ok ||
  bad "export without steps: $(cat "$T/e.txt")"
for args in "perfetto 99 -o $T/x.json --db $DB" "perfetto 1 --db $DB" "svg 1 -o $T/x.json --db $DB" \
            "perfetto 1 -o $T/nodir/x.json --db $DB" "perfetto 1 -o $T/x.json --db $T/none.db"; do
  "$KVSIM" export $args > /dev/null 2> "$T/e.txt"
  [ $? -eq 2 ] && [ "$(wc -l < "$T/e.txt")" = 1 ] && ok || bad "export $args: $(cat "$T/e.txt")"
done

# ------------------------------------------------ drift found as a new user
printf 'arrival_s,prompt_tokens,output_tokens\n0,10,5\n1,10,5\n\n\n' > "$T/trail.csv"
"$KVSIM" run --trace "$T/trail.csv" --db "$T/d.db" --quiet > /dev/null 2> "$T/e.txt" && ok ||
  bad "trailing blank lines refused: $(cat "$T/e.txt")"
printf 'arrival_s,prompt_tokens,output_tokens\n0,10,5\n\n1,10,5\n' > "$T/mid.csv"
"$KVSIM" run --trace "$T/mid.csv" --db "$T/d.db" > /dev/null 2> "$T/e.txt"
[ $? -eq 2 ] && grep -q "mid.csv:3: blank line" "$T/e.txt" && ok || bad "inner blank line: $(cat "$T/e.txt")"
printf 'arrival_s\tprompt_tokens\toutput_tokens\n0\t10\t5\n' > "$T/t.tsv"
"$KVSIM" run --trace "$T/t.tsv" --db "$T/d.db" > /dev/null 2> "$T/e.txt"
[ $? -eq 2 ] && grep -q "tab-separated.*replace the tabs with commas" "$T/e.txt" && ok || bad "TSV: $(cat "$T/e.txt")"
"$KVSIM" trace gen --help | grep -q "system_prompt=S" && "$KVSIM" trace gen --help | grep -q "turns=K" && ok ||
  bad "trace gen --help lacks system_prompt= / turns="
"$KVSIM" run --engine vllm-v0 --batching static --synthetic 'arrival=poisson,rate=2,n=20,prompt=32,output=uniform:1:20' \
  --db "$T/d.db" 2>&1 | grep -q "static batching: TPOT and E2E include the wait for the batch's longest member" && ok ||
  bad "static TPOT label"
grep -q "^| llama-3-8b | 4096 | 32 | 32 | 8 (GQA) | 14336 | 128256 | 8192 |" docs/cost-models.md && ok || bad "cost-models lacks Llama-3"

# ------------------------------------------------ --priorities for any trace
PDB=$T/p.db
PSYN='arrival=poisson,rate=50,n=2000,prompt=64,output=4'
for seed in 1 1 2; do
  "$KVSIM" run --engine vllm-v0 --synthetic "$PSYN" --priorities 0:0.2/1:0.8 --seed $seed --db "$PDB" --quiet > /dev/null 2> "$T/e.txt" ||
    bad "--priorities run: $(cat "$T/e.txt")"
done
pr() { sqlite3 "$PDB" "SELECT group_concat(priority, '') FROM (SELECT priority FROM requests WHERE run_id = $1 ORDER BY req_id)"; }
[ "$(pr 1)" = "$(pr 2)" ] && [ "$(pr 1)" != "$(pr 3)" ] && ok || bad "--priorities is not deterministic per seed"
# 2000 draws with share 0.8: class 1 within 0.8 +- 0.03 (over 3 standard deviations)
r=$(sqlite3 "$PDB" "SELECT abs(avg(priority = 1) - 0.8) < 0.03, count(DISTINCT priority), (SELECT priorities FROM runs WHERE run_id = 1), (SELECT count(*) FROM class_metrics WHERE run_id = 1) FROM requests WHERE run_id = 1")
[ "$r" = "1|2|0:0.2/1:0.8|2" ] && ok || bad "--priorities shares: $r"
for spec in 0:0.2/1:0.7 0:0.5/1:0.6 0:1.2 x:1 0:0.5/0:0.5 ''; do
  "$KVSIM" run --synthetic "$PSYN" --priorities "$spec" --db "$PDB" > /dev/null 2> "$T/e.txt"
  [ $? -eq 2 ] && [ "$(wc -l < "$T/e.txt")" = 1 ] && grep -q -- "--priorities" "$T/e.txt" && ok ||
    bad "--priorities '$spec': $(cat "$T/e.txt")"
done
"$KVSIM" run --synthetic "$PSYN,priorities=0:1" --priorities 0:1 --db "$PDB" > /dev/null 2> "$T/e.txt"
[ $? -eq 2 ] && grep -q "give one" "$T/e.txt" && ok || bad "both priority sources: $(cat "$T/e.txt")"
"$KVSIM" compare --engine vllm-v0 --synthetic 'arrival=poisson,rate=20,n=200,prompt=256,output=32' \
  --priorities 0:0.3/1:0.7 --variant a:max-seqs=4 --variant b:policy=priority --db "$PDB" > "$T/c.txt" 2> "$T/e.txt"
[ $? -eq 0 ] && grep -q "TTFT p99 by priority class" "$T/c.txt" && grep -q "^b .*  0: [0-9.]*, 1: [0-9.]*$" "$T/c.txt" && ok ||
  bad "compare per-class TTFT: $(cat "$T/c.txt" "$T/e.txt")"

# ------------------------------------------------ progress on a terminal only
# (script(1) gives the run a terminal; KVSIM_PROGRESS_AFTER_S=0 shows the
# line from the first report, every 4096 steps, so no test waits 2 s)
LONG=(run --engine vllm-v0 --synthetic 'arrival=poisson,rate=40,n=3000,prompt=64,output=64'
      --cost affine:0.01,0.00001,0.0000001,0 --db "$T/g.db")
if command -v script > /dev/null; then
  KVSIM_PROGRESS_AFTER_S=0 script -qec "'$KVSIM' $(printf "%q " "${LONG[@]}") > /dev/null" /dev/null > "$T/tty.txt" 2>&1
  grep -q "kvsim run: simulated [0-9.]* s, [0-9]* of 3000 requests done" "$T/tty.txt" && ok || bad "no progress on a terminal: $(cat -v "$T/tty.txt" | head -3)"
  KVSIM_PROGRESS_AFTER_S=0 script -qec "'$KVSIM' $(printf "%q " "${LONG[@]}") --quiet > /dev/null" /dev/null > "$T/tty.txt" 2>&1
  ! grep -q "requests done" "$T/tty.txt" && ok || bad "progress despite --quiet"
fi
KVSIM_PROGRESS_AFTER_S=0 "$KVSIM" "${LONG[@]}" > /dev/null 2> "$T/e.txt"
[ ! -s "$T/e.txt" ] && ok || bad "progress on a pipe: $(head -c 300 "$T/e.txt")"

# ITL over clusters: every gap of every finished request is counted once,
# whichever engines made its tokens (a --pd request's first token comes from
# its prefill replica, the rest from its decode replica)
for c in "--replicas 4 --router least-kv" "--pd 1:2"; do
  rm -f "$T/itlc.db"
  # shellcheck disable=SC2086
  "$KVSIM" run --db "$T/itlc.db" $c --quiet \
    --synthetic 'arrival=poisson,rate=6,n=200,prompt=512,output=uniform:1:64' > /dev/null
  r=$(sqlite3 "$T/itlc.db" "SELECT n_itl = (SELECT sum(output_tokens - 1) FROM requests WHERE run_id = 1 AND status = 'finished') AND itl_p50_s > 0 AND (SELECT count(*) FROM requests WHERE run_id = 1 AND output_tokens > 1 AND status = 'finished' AND max_itl_s IS NULL) = 0 FROM runs")
  [ "$r" = 1 ] && ok || bad "cluster ITL ($c): $r"
done

echo "cli_answers: $pass passed, $fail failed"
[ $fail -eq 0 ]
