#!/usr/bin/env bash
# cli_capacity_cluster.sh — `kvsim capacity --search cluster` (docs/cluster.md, S):
#   - the configuration it finds is the cheapest one that holds, checked
#     against an independent brute force: a sweep over every GPU x TP x
#     replicas candidate, with the SLO and the costs evaluated in SQL;
#   - every probe is stored (a run, its point's gpu/tp/replicas, its verdict),
#     probes go in non-decreasing cost per hour, all fail but the last;
#   - the cost per million output tokens is the found run's cost per hour /
#     3600 / its throughput * 10^6;
#   - bad input (a price for a GPU not searched, a GPU without a price, a zero
#     price, --tp given) exits 2 with one line naming the flag.
. "$(dirname "$0")/testlib.sh"
q() { sqlite3 "$DB" "$1" 2>> "$T/sqlerr"; }
DB=$T/cap.db
SYN='arrival=poisson,rate=150,n=300,prompt=512,output=64'
RUN=(--synthetic "$SYN" --model llama-3-8b --db "$DB")
PRICE="a100-80g=1.5,h100-sxm=2.5"

"$KVSIM" capacity --search cluster --slo ttft_p99=0.3 --gpus a100-80g,h100-sxm --price "$PRICE" \
  --tp-list 1,2 --max-replicas 3 "${RUN[@]}" --json > "$T/out.json" 2> "$T/err.txt"
rc=$?
[ $rc -eq 0 ] && ok || bad "search exit $rc: $(cat "$T/err.txt")"
S=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["search_id"])' "$T/out.json")

# brute force: every candidate as a sweep point
"$KVSIM" sweep --grid gpu=a100-80g,h100-sxm --grid tp=1,2 --grid replicas=1,2,3 "${RUN[@]}" \
  --quiet > "$T/sweep.txt" 2>&1 || bad "sweep: $(cat "$T/sweep.txt")"
W=$(cat "$T/sweep.txt")
COST="r.replicas * r.tp * (CASE r.gpu WHEN 'a100-80g' THEN 1.5 ELSE 2.5 END)"
best=$(q "select r.gpu, r.tp, r.replicas, $COST from sweep_runs s join runs r using (run_id)
          where s.sweep_id = $W and r.ttft_p99_s <= 0.3
          order by $COST, r.replicas * r.tp, r.gpu, r.tp, r.replicas limit 1")
best=$(echo "$best" | awk -F"|" '{ printf "%s|%s|%s|%g", $1, $2, $3, $4 }')
found=$(python3 -c 'import json,sys; a=json.load(open(sys.argv[1])); print("%s|%d|%d|%g" % (a["gpu"], a["tp"], a["replicas"], a["cost_per_hour"]))' "$T/out.json")
[ -n "$best" ] && [ "$best" = "$found" ] && ok || bad "search found $found, brute force says $best"
# the brute force's candidates cheaper than the answer all fail
n_cheaper=$(q "select count(*) from sweep_runs s join runs r using (run_id)
               where s.sweep_id = $W and $COST < (select $COST from runs r where r.run_id =
                 (select best_run_id from search_results where sweep_id = $S))")
n_fail=$(q "select count(*) from search_probes where sweep_id = $S and holds = 0")
[ "$n_fail" -ge "$n_cheaper" ] && [ "$n_cheaper" -gt 0 ] && ok ||
  bad "probes failing $n_fail, cheaper candidates $n_cheaper"

# every probe stored, in cost order, the last one holding, verdicts = metrics
r=$(q "select count(*), sum(holds), max(case when holds then point_index end) = max(point_index)
       from search_probes where sweep_id = $S")
probes=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["probes"])' "$T/out.json")
[ "$r" = "$probes|1|1" ] && ok || bad "search_probes (count, holding, last holds) = $r, probes $probes"
r=$(q "select count(*) from search_probes a join search_probes b
         on a.sweep_id = b.sweep_id and b.point_index = a.point_index + 1
       where a.sweep_id = $S and b.value < a.value")
[ "$r" = "0" ] && ok || bad "$r probes out of cost order"
r=$(q "select count(*) from search_probes p join runs r using (run_id)
       where p.sweep_id = $S and p.holds != (r.ttft_p99_s <= 0.3)
          or abs(p.value - $COST) > 1e-9 and p.sweep_id = $S")
[ "$r" = "0" ] && ok || bad "$r probes whose verdict or cost disagree with their run"
r=$(q "select count(distinct param) from sweep_point_params where sweep_id = $S")
[ "$r" = "4" ] && ok || bad "point params (gpu, tp, replicas, cost_per_hour): $r"
r=$(q "select status, param from search_results where sweep_id = $S")
[ "$r" = "found|cost_per_hour" ] && ok || bad "search_results: $r"

# cost per million output tokens from the found run's throughput
python3 - "$T/out.json" "$DB" <<'PY' && ok || bad "cost per million tokens"
import json, sqlite3, sys
a = json.load(open(sys.argv[1]))
tok_s = sqlite3.connect(sys.argv[2]).execute(
    "select throughput_tok_s from runs where run_id = ?", (a["run_id"],)).fetchone()[0]
want = a["cost_per_hour"] / 3600 / tok_s * 1e6
assert abs(a["cost_per_mtok"] - want) < 1e-9 * want, (a, want)
PY

# bad input: one line, exit 2
while IFS='|' read -r flags want; do
  # shellcheck disable=SC2086
  "$KVSIM" capacity --search cluster --slo ttft_p99=1 $flags "${RUN[@]}" > /dev/null 2> "$T/e.txt"
  rc=$?
  [ $rc -eq 2 ] && grep -q -- "$want" "$T/e.txt" && [ "$(wc -l < "$T/e.txt")" -eq 1 ] && ok ||
    bad "$flags: exit $rc: $(cat "$T/e.txt")"
done <<'CASES'
--gpus h100-sxm --price h100-sxm=2.5,h200=3.6|--price: 'h200' is not one of the GPUs searched
--gpus h100-sxm,h200 --price h100-sxm=2.5|--price: no price for h200
--gpus h100-sxm --price h100-sxm=0|--price: 0 is out of range
--gpus h100-sxm --price h100-sxm=2 --tp 2|--tp is what is searched
--gpus h100-sxm|needs --gpus G1,G2 and --price
--gpus nope --price nope=1|--gpus: unknown GPU 'nope'
CASES

[ ! -s "$T/sqlerr" ] && ok || bad "SQL errors: $(cat "$T/sqlerr")"
echo "cli_capacity_cluster: $pass passed, $fail failed"
[ $fail -eq 0 ]
