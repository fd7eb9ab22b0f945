#!/usr/bin/env bash
# cli_capacity_cluster_pd.sh — `kvsim capacity --search cluster --pd-splits`
# (docs/cluster.md, S2): the search also tries disaggregated P:D
# configurations, each pool with its own TP of --tp-list.
#   - the answer is the cheapest configuration that holds, checked against an
#     independent brute force: two sweeps, one over every aggregated candidate
#     (gpu x tp x replicas) and one over every P:D candidate (gpu x pd x
#     pd-tp), with each run's GPUs (replicas * tp, or P * tp + D * decode_tp),
#     cost and SLO verdict evaluated in SQL and the ties broken by S3's rule;
#   - two SLOs, so that both kinds of answer occur: a tight TPOT bound, which
#     a decode pool free of prefills meets first (the answer is P:D), and a
#     TTFT bound, which an aggregated configuration meets as cheaply (the
#     answer is aggregated: ties go to it);
#   - every probe is stored with its point's pd and pd-tp (P:D probes) and
#     its cost; the link (--kv-link) reaches the P:D probes only;
#   - bad input: one line, exit 2.
. "$(dirname "$0")/testlib.sh"
q() { sqlite3 "$DB" "$1" 2>> "$T/sqlerr"; }
DB=$T/cap.db
SYN='arrival=poisson,rate=150,n=300,prompt=512,output=64'
RUN=(--synthetic "$SYN" --model llama-3-8b --db "$DB")
PRICE="a100-80g=1.5,h100-sxm=2.5"

# the brute force: every candidate of --tp-list 1,2 --max-replicas 3 --pd-splits auto
A=$("$KVSIM" sweep --grid gpu=a100-80g,h100-sxm --grid tp=1,2 --grid replicas=1,2,3 "${RUN[@]}" \
  --quiet 2>&1) || bad "aggregated sweep: $A"
P=$("$KVSIM" sweep --grid gpu=a100-80g,h100-sxm --grid pd=1:1,1:2,2:1 \
  --grid pd-tp=1:1,1:2,2:1,2:2 --kv-link ib "${RUN[@]}" --quiet 2>&1) || bad "P:D sweep: $P"
N_PD="cast(substr(r.pd, 1, instr(r.pd, ':') - 1) as integer)"
GPUS="(case when coalesce(r.pd, '') = '' then r.replicas * r.tp
        else $N_PD * r.tp + (r.replicas - $N_PD) * r.decode_tp end)"
COST="$GPUS * (case r.gpu when 'a100-80g' then 1.5 else 2.5 end)"
ORDER="$COST, $GPUS, r.gpu, coalesce(r.pd, '') != '', r.tp, coalesce(r.decode_tp, 0),
       r.replicas, coalesce($N_PD, 0)"
n=$(q "select count(*) from sweep_runs where sweep_id in ($A, $P)")
[ "$n" = "36" ] && ok || bad "brute force runs: $n of 36 (12 aggregated + 24 P:D)"

# search: SLO, expected layout
for case in "tpot_p99=0.02|tpot_p99_s <= 0.02|pd" "ttft_p99=0.3|ttft_p99_s <= 0.3|aggregated"; do
  IFS='|' read -r slo cond layout <<< "$case"
  "$KVSIM" capacity --search cluster --slo "$slo" --gpus a100-80g,h100-sxm --price "$PRICE" \
    --tp-list 1,2 --max-replicas 3 --pd-splits auto --kv-link ib "${RUN[@]}" --json \
    > "$T/out.json" 2> "$T/err.txt"
  rc=$?
  [ $rc -eq 0 ] && ok || bad "$slo: search exit $rc: $(cat "$T/err.txt")"
  S=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["search_id"])' "$T/out.json")
  best=$(q "select r.gpu, r.tp, r.replicas, coalesce(r.pd, ''), coalesce(r.decode_tp, 0), $COST
            from sweep_runs s join runs r using (run_id)
            where s.sweep_id in ($A, $P) and r.$cond order by $ORDER limit 1")
  best=$(echo "$best" | awk -F"|" '{ printf "%s|%s|%s|%s|%s|%g", $1, $2, $3, $4, $5, $6 }')
  found=$(python3 -c '
import json, sys
a = json.load(open(sys.argv[1]))
pd = a.get("pd", "")
print("%s|%d|%d|%s|%d|%g|%s" % (a["gpu"], a["tp"], a["replicas"], pd, a.get("decode_tp", 0),
                               a["cost_per_hour"], a["layout"]))' "$T/out.json")
  [ -n "$best" ] && [ "$best|$layout" = "$found" ] && ok ||
    bad "$slo: search found $found, brute force says $best|$layout"
  # every probe: stored in cost order, all fail but the last, verdict and cost = its run's
  r=$(q "select count(*), sum(holds), max(case when holds then point_index end) = max(point_index)
         from search_probes where sweep_id = $S")
  probes=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["probes"])' "$T/out.json")
  [ "$r" = "$probes|1|1" ] && ok || bad "$slo: probes (count, holding, last holds) = $r of $probes"
  r=$(q "select count(*) from search_probes p join runs r using (run_id)
         where p.sweep_id = $S and (p.holds != (r.$cond) or abs(p.value - $COST) > 1e-9)")
  [ "$r" = "0" ] && ok || bad "$slo: $r probes whose verdict or cost disagree with their run"
  r=$(q "select count(*) from search_probes a join search_probes b
           on a.sweep_id = b.sweep_id and b.point_index = a.point_index + 1
         where a.sweep_id = $S and b.value < a.value")
  [ "$r" = "0" ] && ok || bad "$slo: $r probes out of cost order"
  # the brute force's cheaper candidates were all probed and failed
  r=$(q "select count(*) from sweep_runs s join runs r using (run_id)
         where s.sweep_id in ($A, $P) and $COST < (select value from search_probes
           where sweep_id = $S and holds = 1) and r.$cond")
  [ "$r" = "0" ] && ok || bad "$slo: $r cheaper candidates hold"
  # P:D probes carry pd, pd-tp and the link; aggregated ones none
  r=$(q "select count(*) from search_probes p join runs r using (run_id)
         where p.sweep_id = $S and ((coalesce(r.pd, '') = '') != (coalesce(r.kv_link, '') = '')
           or coalesce(r.pd, '') != coalesce((select value from sweep_point_params x
                where x.sweep_id = p.sweep_id and x.point_index = p.point_index
                and x.param = 'pd'), ''))")
  [ "$r" = "0" ] && ok || bad "$slo: $r probes whose pd, point params or link disagree"
done
# the TPOT search probed P:D candidates, with their own point parameters
r=$(q "select count(distinct param) from sweep_point_params where sweep_id =
       (select min(sweep_id) from search_results)")
[ "$r" = "6" ] && ok || bad "point params (gpu, tp, replicas, cost_per_hour, pd, pd-tp): $r"

# text output names the layout
"$KVSIM" capacity --search cluster --slo tpot_p99=0.02 --gpus h100-sxm --price h100-sxm=2.5 \
  --tp-list 1,2 --max-replicas 3 --pd-splits 1:1,1:2 "${RUN[@]}" > "$T/out.txt" 2>/dev/null ||
  bad "list search: $(cat "$T/out.txt")"
grep -q "cheapest: P:D 1:1 on h100-sxm, prefill tp 1, decode tp 1 (2 GPUs" "$T/out.txt" && ok ||
  bad "text answer: $(cat "$T/out.txt")"

# bad input: one line, exit 2
while IFS='|' read -r flags want; do
  # shellcheck disable=SC2086
  "$KVSIM" capacity --search cluster --slo ttft_p99=1 --gpus h100-sxm --price h100-sxm=2 $flags \
    "${RUN[@]}" > /dev/null 2> "$T/e.txt"
  rc=$?
  [ $rc -eq 2 ] && grep -q -- "$want" "$T/e.txt" && [ "$(wc -l < "$T/e.txt")" -eq 1 ] && ok ||
    bad "$flags: exit $rc: $(cat "$T/e.txt")"
done <<'CASES'
--pd-splits 0:2|--pd-splits: '0:2' is not P:D
--pd-splits 1:x|--pd-splits: '1:x' is not P:D
--pd-splits 2:2 --max-replicas 3|--pd-splits: 2:2 has 4 replicas, over --max-replicas 3
--pd-splits 1:1,1:1|--pd-splits: 1:1 given twice
--pd-splits ,|--pd-splits: empty list
--pd-splits auto --max-replicas 100|--pd-splits auto: at most --max-replicas 64
--pd-splits auto --max-replicas 1|--max-replicas 1 leaves no P:D split
--pd 1:1|--pd is what is searched
--pd-tp 1:2|--pd-tp is what is searched
--kv-link ib|--kv-link: applies only with --pd-splits
--pd-splits auto --engine vllm-v0|--pd-splits: disaggregated serving needs --engine vllm-v1; the vllm-v0 profile
CASES

[ ! -s "$T/sqlerr" ] && ok || bad "SQL errors: $(cat "$T/sqlerr")"
echo "cli_capacity_cluster_pd: $pass passed, $fail failed"
[ $fail -eq 0 ]
