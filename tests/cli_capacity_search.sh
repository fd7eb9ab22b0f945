#!/usr/bin/env bash
# cli_capacity_search.sh — `kvsim capacity --search` and the memory tables:
#   - rate search on a synthetic workload, two policies: a bracket whose lower
#     rate meets the SLO and whose upper rate, at most 5% higher, does not,
#     both stored as runs; every probe's verdict agrees with its run's stored
#     metrics (re-checked in SQL against the SLO);
#   - rate-scale search on a trace file, an attainment SLO, a TP search;
#   - an unreachable SLO says so with the best point (exit 2); an unknown
#     metric and other bad input exit 2 naming the culprit;
#   - --compare-tp / --compare-attn against hand-computed KV bytes.
. "$(dirname "$0")/testlib.sh"
# an SQL error is a failure (recorded in $T/sqlerr), never an empty match
q() { sqlite3 "$DB" "$1" 2>> "$T/sqlerr"; }
DB=$T/cap.db
SYN='arrival=poisson,rate=4,n=500,prompt=uniform:64:512,output=uniform:16:256,priorities=0:0.3/1:0.7'

# ------------------------------------------------ rate search, two policies
"$KVSIM" capacity --search rate --slo ttft_p99=0.5,tpot_p99=0.05 --policies fcfs,priority \
  --synthetic "$SYN" --model llama-2-7b --gpu a100-80g --db "$DB" > "$T/out.txt" 2> "$T/err.txt"
rc=$?
[ $rc -eq 0 ] && ok || bad "rate search exit $rc: $(cat "$T/err.txt")"
grep -q "fcfs .*holds at rate" "$T/out.txt" && grep -q "priority .*holds at rate" "$T/out.txt" &&
  ok || bad "rate search output: $(cat "$T/out.txt")"
for pol in fcfs priority; do
  r=$(q "select status, hi / lo <= 1.05, hi > lo, lo_run_id > 0, hi_run_id > 0 from search_results where sweep_id = 1 and policy = '$pol'")
  [ "$r" = "bracketed|1|1|1|1" ] && ok || bad "$pol: search_results (status, hi/lo<=1.05, hi>lo, runs) = $r"
  # the lower rate's run meets both bounds, the upper one's misses one; both are runs of rate lo / hi
  r=$(q "select l.ttft_p99_s <= 0.5 and l.tpot_p99_s <= 0.05,
                not (h.ttft_p99_s <= 0.5 and h.tpot_p99_s <= 0.05),
                l.synthetic like 'arrival=poisson,rate=' || printf('%g', s.lo) || ',n=500%',
                h.synthetic like 'arrival=poisson,rate=' || printf('%g', s.hi) || ',n=500%',
                l.policy = '$pol' and h.policy = '$pol', l.sweep_id = 1 and h.sweep_id = 1
         from search_results s join runs l on l.run_id = s.lo_run_id join runs h on h.run_id = s.hi_run_id
         where s.sweep_id = 1 and s.policy = '$pol'")
  [ "$r" = "1|1|1|1|1|1" ] && ok || bad "$pol: bracket runs (lo holds, hi fails, rates, policy, tag) = $r"
done
# every probe: a run, a sweep point, and a verdict that matches the stored metrics
r=$(q "select count(*), sum(p.holds = (r.ttft_p99_s <= 0.5 and r.tpot_p99_s <= 0.05)),
              sum(sp.run_id is not null)
       from search_probes p join runs r on r.run_id = p.run_id
       left join sweep_points sp on sp.sweep_id = p.sweep_id and sp.point_index = p.point_index and sp.run_id = p.run_id
       where p.sweep_id = 1")
n=${r%%|*}
[ "$r" = "$n|$n|$n" ] && [ "$n" -ge 8 ] && ok || bad "probes (n, verdict agrees, tagged) = $r"
[ "$(q "select sum(probes) from search_results where sweep_id = 1")" = "$n" ] && ok || bad "probe counts differ"
[ "$(q "select count(*) from sweeps where sweep_id = 1 and kind = 'search'")" = 1 ] && ok || bad "no sweeps row"
[ "$(q "select count(*) from sweep_params where sweep_id = 1 and param = 'rate'")" = "$n" ] && ok ||
  bad "sweep_params lacks the probes' rates"

# ------------------------------------------------ rate-scale on a trace; attainment; json
# (the trace rejects 14.3% of its requests at llama-2-7b's 4K context: allowed here)
"$KVSIM" capacity --search rate --slo e2e_p99=60 --trace traces/azure_llm_2023_code.csv \
  --model llama-2-7b --db "$DB" --json --max-rejected 0.2 > "$T/j.json" 2> "$T/err.txt"
[ $? -eq 0 ] && ok || bad "rate-scale search: $(cat "$T/err.txt")"
r=$(q "select param, status, hi / lo <= 1.05 from search_results where sweep_id = 2")
[ "$r" = "rate|bracketed|1" ] && ok || bad "trace rate search result: $r"
# a trace's probes are runs at --rate x req/s: rate_rps = the probe, and the
# stored (scaled) arrivals have exactly that rate, (n - 1) / span
r=$(q "select l.e2e_p99_s <= 60, h.e2e_p99_s > 60, l.rate_rps = s.lo, h.rate_rps = s.hi,
              abs((select (count(*) - 1) / (max(arrival_s) - min(arrival_s)) from requests where run_id = l.run_id) - s.lo) < 1e-9 * s.lo
       from search_results s join runs l on l.run_id = s.lo_run_id join runs h on h.run_id = s.hi_run_id
       where s.sweep_id = 2")
[ "$r" = "1|1|1|1|1" ] && ok || bad "trace rate bracket runs: $r"
python3 -c "import json,sys; d=json.load(open('$T/j.json')); r=d['results'][0]; \
sys.exit(0 if d['param']=='rate' and abs(d['trace_rate_rps']-2.566)<0.001 and r['status']=='bracketed' and r['holds']['holds'] and not r['fails']['holds'] else 1)" &&
  ok || bad "--json output: $(cat "$T/j.json")"
"$KVSIM" capacity --search rate --slo ttft=0.3,attainment=0.9 --synthetic "$SYN" --model llama-2-7b \
  --db "$DB" --quiet > "$T/id.txt" 2> "$T/err.txt"
[ $? -eq 0 ] && [ "$(cat "$T/id.txt")" = 3 ] && ok || bad "attainment search: $(cat "$T/err.txt")"
r=$(q "select l.slo_attainment >= 0.9, h.slo_attainment < 0.9, l.slo_ttft_s
       from search_results s join runs l on l.run_id = s.lo_run_id join runs h on h.run_id = s.hi_run_id
       where s.sweep_id = 3")
[ "$r" = "1|1|0.3" ] && ok || bad "attainment bracket: $r"

# ------------------------------------------------ TP search: llama-2-70b on A100-80GB
"$KVSIM" capacity --search tp --slo ttft_p99=1,tpot_p99=0.06 --model llama-2-70b --gpu a100-80g \
  --synthetic 'rate=6,n=300,prompt=uniform:64:1024,output=uniform:16:256' --db "$DB" \
  > "$T/out.txt" 2> "$T/err.txt"
[ $? -eq 0 ] && ok || bad "tp search: $(cat "$T/err.txt")"
grep -q "tp 1 skipped: llama-2-70b needs" "$T/err.txt" && ok || bad "tp 1 not reported as not fitting"
r=$(q "select s.status, s.lo, s.hi, l.tp, h.tp, l.ttft_p99_s <= 1 and l.tpot_p99_s <= 0.06
       from search_results s join runs l on l.run_id = s.lo_run_id join runs h on h.run_id = s.hi_run_id
       where s.sweep_id = 4")
[ "$r" = "found|8.0|4.0|8|4|1" ] && ok || bad "tp search result: $r"

# ------------------------------------------------ unreachable, bad input
"$KVSIM" capacity --search rate --slo ttft_p99=0.001 --policies fcfs,priority \
  --synthetic 'rate=4,n=100,prompt=512,output=16,priorities=0:0.5/1:0.5' --model llama-2-7b --db "$DB" \
  > "$T/out.txt" 2> "$T/err.txt"
[ $? -eq 2 ] && ok || bad "unreachable SLO did not exit 2"
[ "$(grep -c "SLO unreachable for policy .*: it fails even at rate .* the lowest tried; best point: rate .* (run [0-9]*): ttft_p99 .* > 0.001" "$T/err.txt")" = 2 ] &&
  ok || bad "unreachable message: $(cat "$T/err.txt")"
r=$(q "select count(*), sum(holds) from search_probes where sweep_id = 5")
[ "${r#*|}" = 0 ] && [ "${r%|*}" -gt 2 ] && ok || bad "unreachable probes (n, holds) = $r"
[ "$(q "select group_concat(status) from search_results where sweep_id = 5")" = "unreachable,unreachable" ] &&
  ok || bad "unreachable not stored"
before=$(q "select count(*) from runs")
cap_fail() { # cap_fail PATTERN ARGS...
  local pat=$1
  shift
  "$KVSIM" capacity "$@" --db "$DB" > /dev/null 2> "$T/e.txt"
  local rc=$?
  [ $rc -eq 2 ] && ok || bad "capacity $* exit $rc, want 2"
  grep -q -- "$pat" "$T/e.txt" && ok || bad "capacity $*: stderr lacks '$pat': $(cat "$T/e.txt")"
}
cap_fail "unknown metric 'ttft_p42'" --search rate --slo ttft_p42=1 --synthetic "$SYN"
cap_fail "unknown metric 'latency'" --search rate --slo ttft_p99=1,latency=3 --synthetic "$SYN"
cap_fail "needs --slo" --search rate --synthetic "$SYN"
cap_fail "'speed' is not rate, tp or cluster" --search speed --slo ttft_p99=1
cap_fail "attainment and goodput_req_s are measured against per-request targets" \
  --search rate --slo attainment=0.9 --synthetic "$SYN"
cap_fail "need a bound on attainment" --search rate --slo ttft=1 --synthetic "$SYN"
cap_fail "unknown policy 'lifo'" --search rate --slo ttft_p99=1 --policies fcfs,lifo --synthetic "$SYN"
cap_fail "the TP degree is what is searched" --search tp --slo ttft_p99=1 --tp 2 --synthetic "$SYN"
cap_fail "--tp-list: only with --search tp" --search rate --slo ttft_p99=1 --tp-list 1,2 --synthetic "$SYN"
cap_fail "arrival=burst has no rate" --search rate --slo ttft_p99=1 --synthetic 'arrival=burst,n=10,prompt=8,output=8'
[ "$(q "select count(*) from runs")" = "$before" ] && ok || bad "bad input stored runs"
"$KVSIM" capacity --search rate --help | grep -q -- "--policies" && ok || bad "search --help"
"$KVSIM" capacity --help | grep -q -- "--compare-attn" && ok || bad "capacity --help lacks --compare-attn"

# ------------------------------------------------ memory tables
# llama-2-70b: 80 layers, 64 query heads, 8 KV heads, head_dim 128, fp16.
# KV bytes/token per GPU = 2 * 80 * kv_heads_per_gpu * 128 * 2 = 40960 * kv_heads_per_gpu:
# tp 2 -> 4 heads 163840, tp 4 -> 2 heads 81920, tp 8 -> 1 head 40960; tp 1 does
# not fit (~129 GiB of weights).  At tp 4: MHA 16 heads/GPU 655360, MQA 1 head
# (replicated) 40960: saving vs MHA 1 - 81920/655360 = 0.875, 1 - 40960/655360 = 0.9375.
"$KVSIM" capacity --model llama-2-70b --gpu a100-80g --tp 4 --compare-tp 1,2,4,8 --compare-attn \
  --json > "$T/m.json" 2> "$T/err.txt"
[ $? -eq 0 ] && ok || bad "capacity --compare: $(cat "$T/err.txt")"
python3 - "$T/m.json" <<'EOF' && ok || bad "compare tables: $(cat "$T/m.json")"
import json, sys
d = json.load(open(sys.argv[1]))
t = {r["tp"]: r for r in d["compare_tp"]}
assert not t[1]["fits"] and "raise --tp" in t[1]["error"], t[1]
assert [t[k]["kv_bytes_per_token"] for k in (2, 4, 8)] == [163840, 81920, 40960]
assert t[4]["kv_blocks"] == d["kv_blocks"]            # the tp-4 row is the main table
a = {r["variant"]: r for r in d["compare_attn"]}
assert list(a) == ["MHA", "GQA-8", "MQA"], list(a)
assert a["GQA-8"]["own"] and not a["MHA"]["own"]
assert a["MHA"]["kv_bytes_per_token"] == 655360 and a["MQA"]["kv_bytes_per_token"] == 40960
assert abs(a["GQA-8"]["kv_saving_vs_mha"] - 0.875) < 1e-9 and abs(a["MQA"]["kv_saving_vs_mha"] - 0.9375) < 1e-9
assert a["MHA"]["max_batch"] < a["GQA-8"]["max_batch"] < a["MQA"]["max_batch"]
EOF
"$KVSIM" capacity --model llama-7b --gpu a100-80g --compare-tp 1,x > /dev/null 2> "$T/e.txt"
[ $? -eq 2 ] && grep -q -- "--compare-tp: 'x' is not an integer" "$T/e.txt" && ok ||
  bad "--compare-tp 1,x: $(cat "$T/e.txt")"
"$KVSIM" capacity --model llama-7b --gpu a100-80g --compare-tp 1,2 --compare-attn > "$T/m.txt"
grep -q "by tensor-parallel degree" "$T/m.txt" && grep -q "^  MHA  *\*" "$T/m.txt" && ok ||
  bad "text tables: $(cat "$T/m.txt")"

# ------------------------------------------------ rejected requests fail a probe
# Prompts up to 4000 + 256 output tokens against llama-2-7b's 4096-token
# context: some requests are rejected at every rate, so with the default
# --max-rejected 0 no rate holds (exit 2) and the verdict says why; allowing
# half of them rejected, the latency bound alone decides.
RDB=$T/rej.db
RSYN='rate=4,n=200,prompt=uniform:64:4000,output=256'
"$KVSIM" capacity --search rate --slo e2e_p99=1000 --synthetic "$RSYN" --model llama-2-7b \
  --db "$RDB" > "$T/out.txt" 2> "$T/err.txt"
[ $? -eq 2 ] && grep -q "unreachable.*rejected [0-9.]*% of requests (max 0%): [1-9][0-9]* over max-model-len" "$T/out.txt" &&
  grep -q "at most 0% of requests rejected" "$T/out.txt" && ok ||
  bad "rejections did not fail the search: $(cat "$T/out.txt" "$T/err.txt")"
r=$(sqlite3 "$RDB" "select count(*), sum(holds), sum(verdict like 'rejected %') from search_probes" 2>> "$T/sqlerr")
n=${r%%|*}
[ "$r" = "$n|0|$n" ] && ok || bad "probes (n, held, verdict on rejections) = $r"
r=$(sqlite3 "$RDB" "select count(*) from requests where status = 'rejected' and reject_reason = 'context' and prompt_tokens + output_tokens > 4096" 2>> "$T/sqlerr")
[ "$r" -gt 0 ] && [ "$r" = "$(sqlite3 "$RDB" "select count(*) from requests where status = 'rejected'")" ] && ok ||
  bad "requests.reject_reason: $r"
"$KVSIM" capacity --search rate --slo e2e_p99=1000 --synthetic "$RSYN" --model llama-2-7b \
  --max-rejected 0.5 --db "$RDB" > "$T/out.txt" 2> "$T/err.txt"
[ $? -eq 0 ] && grep -q "holds at" "$T/out.txt" && ok || bad "--max-rejected 0.5: $(cat "$T/out.txt" "$T/err.txt")"
for v in 1 -0.1 x; do
  "$KVSIM" capacity --search rate --slo e2e_p99=1 --synthetic "$RSYN" --max-rejected "$v" \
    --db "$RDB" > /dev/null 2> "$T/e.txt"
  [ $? -eq 2 ] && grep -q -- "--max-rejected: '$v' is not a fraction in \[0, 1)" "$T/e.txt" &&
    [ "$(wc -l < "$T/e.txt")" = 1 ] && ok || bad "--max-rejected $v: $(cat "$T/e.txt")"
done

[ ! -s "$T/sqlerr" ] && ok || bad "SQL errors: $(cat "$T/sqlerr")"
echo "cli_capacity_search: $pass passed, $fail failed"
[ $fail -eq 0 ]
