#!/usr/bin/env bash
# cli_pd_tp.sh — `kvsim run --pd P:D --pd-tp TP_P:TP_D` (docs/cluster.md, D1,
# D4): each pool its own TP degree, end to end through the job layer.
#   One request, P = 512, O = 4, llama-3-8b on h100-sxm, --pd 1:1 --pd-tp 1:2
#   over ib.  Checked against two independent single-engine runs of the same
#   request, one at --tp 1 and one at --tp 2:
#   - the prefill step lasts as the --tp 1 engine's prefill (the prefill
#     pool's cost model is built at TP 1) and TTFT is that engine's;
#   - the three decode steps last as the --tp 2 engine's three decode steps
#     (the same contexts 513, 514, 515: the decode pool's cost model is built
#     at TP 2);
#   - the KV transfer, by hand: llama-3-8b keeps 8 KV heads x 128 dims x 32
#     layers x 2 (K, V) x 2 bytes = 131072 bytes per token, over every head
#     (the hand-off moves the model's KV once, whatever the TPs): 512 tokens
#     = 67108864 bytes over ib (50 GB/s, 10 us): 1e-5 + 67108864 / 5e10 =
#     0.00135217728 s;
#   - finish = TTFT + transfer + the three decode steps, and TPOT = (finish -
#     first token) / 3;
#   - runs: tp = 1, pd_tp '1:2', decode_tp = 2, kv_blocks the --tp 1
#     engine's and decode_kv_blocks the --tp 2 engine's; the --json summary
#     carries the same keys; a sweep over pd-tp and a compare whose variants
#     set pd-tp store each pool's TP;
#   - bad input: one line, exit 2, no run stored.
. "$(dirname "$0")/testlib.sh"
q() { sqlite3 "$DB" "$1" 2>> "$T/sqlerr"; }
DB=$T/pdtp.db
BASE=(--synthetic 'arrival=burst,n=1,prompt=512,output=4' --model llama-3-8b --gpu h100-sxm
      --record-steps --db "$DB")
RUN=("${BASE[@]}" --quiet)

A=$("$KVSIM" run "${RUN[@]}" --pd 1:1 --pd-tp 1:2 --kv-link ib 2>&1) || bad "pd run: $A"
B=$("$KVSIM" run "${RUN[@]}" --tp 2 2>&1) || bad "tp 2 run: $B"
C=$("$KVSIM" run "${RUN[@]}" --tp 1 2>&1) || bad "tp 1 run: $C"

# prefill step = the tp 1 engine's; decode steps = the tp 2 engine's
r=$(q "select count(*) from steps a join steps c on c.run_id = $C and c.step_id = 0
       where a.run_id = $A and a.step_id = 0 and a.replica = 0 and a.kind = 'prefill'
         and abs(a.dur_s - c.dur_s) < 1e-12")
[ "$r" = "1" ] && ok || bad "prefill step differs from the tp 1 engine's"
r=$(q "select count(*) from steps a join steps b on b.run_id = $B and b.step_id = a.step_id
       where a.run_id = $A and a.replica = 1 and a.kind = 'decode' and b.kind = 'decode'
         and abs(a.dur_s - b.dur_s) < 1e-12")
[ "$r" = "3" ] && ok || bad "decode steps equal to the tp 2 engine's: $r of 3"
r=$(q "select abs(a.dur_s - c.dur_s) > 1e-6 from steps a join steps c
       on c.run_id = $C and c.step_id = 1 where a.run_id = $A and a.step_id = 1")
[ "$r" = "1" ] && ok || bad "the decode step should not last as a tp 1 decode"

# the transfer by hand, TTFT, finish and TPOT
python3 - "$DB" "$A" "$B" "$C" <<'PY' && ok || bad "transfer, TTFT, finish or TPOT"
import sqlite3, sys
db = sqlite3.connect(sys.argv[1]); a, b, c = map(int, sys.argv[2:5])
x, first, fin, dec = db.execute("select kv_transfer_s, first_token_s, finish_s, decode_replica "
                                "from requests where run_id = ?", (a,)).fetchone()
want_x = 1e-5 + 512 * 131072 / 50e9
assert abs(x - want_x) < 1e-15 and abs(want_x - 0.00135217728) < 1e-15, x
assert dec == 1, dec
first_c = db.execute("select first_token_s from requests where run_id = ?", (c,)).fetchone()[0]
assert abs(first - first_c) < 1e-12, (first, first_c)
decs = sum(r[0] for r in db.execute("select dur_s from steps where run_id = ? and kind = 'decode'",
                                    (b,)))
assert abs(fin - (first + x + decs)) < 1e-12, (fin, first, x, decs)
tpot, ttft = db.execute("select tpot_p50_s, ttft_p50_s from runs where run_id = ?", (a,)).fetchone()
assert abs(tpot - (fin - first) / 3) < 1e-12 and abs(ttft - first) < 1e-12, (tpot, ttft)
PY

# what the run records
r=$(q "select a.tp, a.pd_tp, a.decode_tp, a.kv_blocks = c.kv_blocks,
              a.decode_kv_blocks = b.kv_blocks, b.kv_blocks > c.kv_blocks
       from runs a, runs b, runs c where a.run_id = $A and b.run_id = $B and c.run_id = $C")
[ "$r" = "1|1:2|2|1|1|1" ] && ok || bad "runs (tp, pd_tp, decode_tp, blocks) = $r"
r=$(q "select decode_tp is null and decode_kv_blocks is null and pd_tp is null
       from runs where run_id = $C")
[ "$r" = "1" ] && ok || bad "a single-engine run has NULL pool columns: $r"
"$KVSIM" run "${BASE[@]}" --pd 1:1 --pd-tp 1:2 --kv-link ib --json > "$T/a.json" 2>&1 ||
  bad "pd run --json: $(cat "$T/a.json")"
python3 - "$T/a.json" "$DB" "$A" <<'PY' && ok || bad "--json pool keys"
import json, sqlite3, sys
s = json.load(open(sys.argv[1]))
row = sqlite3.connect(sys.argv[2]).execute(
    "select pd_tp, decode_tp, decode_kv_blocks from runs where run_id = ?",
    (int(sys.argv[3]),)).fetchone()
assert (s["pd_tp"], s["decode_tp"], s["decode_kv_blocks"]) == row, (s, row)
PY

# --pd without --pd-tp: the decode pool at --tp, recorded
D=$("$KVSIM" run "${RUN[@]}" --pd 1:1 --tp 2 2>&1) || bad "pd run at tp 2: $D"
r=$(q "select tp, decode_tp, decode_kv_blocks = kv_blocks, coalesce(pd_tp, '') from runs
       where run_id = $D")
[ "$r" = "2|2|1|" ] && ok || bad "--pd at --tp 2: $r"

# sweeps and compare vary pd-tp like any flag
W=$("$KVSIM" sweep --grid pd-tp=1:1,1:2,2:1 "${RUN[@]}" --pd 1:1 2>&1) || bad "sweep: $W"
r=$(q "select group_concat(r.tp || '/' || r.decode_tp, ' ') from
       (select r.tp, r.decode_tp from sweep_runs s join runs r using (run_id)
        where s.sweep_id = $W order by r.tp, r.decode_tp) r")
[ "$r" = "1/1 1/2 2/1" ] && ok || bad "sweep over pd-tp: $r"
"$KVSIM" compare "${RUN[@]}" --pd 1:1 --variant 'same:pd-tp=1:1' --variant 'wide:pd-tp=1:2' \
  > "$T/cmp.txt" 2>&1 || bad "compare: $(cat "$T/cmp.txt")"
r=$(q "select group_concat(decode_tp, ' ') from (select decode_tp from runs
       where compare_id = (select max(compare_id) from runs) order by run_id)")
[ "$r" = "1 2" ] && ok || bad "compare over pd-tp: $r"

# bad input: one line, exit 2, nothing stored
n0=$(q "select count(*) from runs")
while IFS='|' read -r flags want; do
  # shellcheck disable=SC2086
  "$KVSIM" run --synthetic 'arrival=burst,n=2,prompt=64,output=8' --db "$DB" $flags \
    > /dev/null 2> "$T/e.txt"
  rc=$?
  [ $rc -eq 2 ] && grep -q -- "$want" "$T/e.txt" && [ "$(wc -l < "$T/e.txt")" -eq 1 ] && ok ||
    bad "$flags: exit $rc: $(cat "$T/e.txt")"
done <<'CASES'
--pd 1:1 --pd-tp 0:1|--pd-tp: '0:1' is not TP_P:TP_D
--pd 1:1 --pd-tp 1:0|--pd-tp: '1:0' is not TP_P:TP_D
--pd 1:1 --pd-tp 1|--pd-tp: '1' is not TP_P:TP_D
--pd 1:1 --pd-tp a:b|--pd-tp: 'a:b' is not TP_P:TP_D
--pd-tp 1:2|--pd-tp: applies only with --pd
--pd 1:1 --pd-tp 2:1 --tp 4|the prefill pool's TP 2 differs from --tp 4
--pd 1:1 --pd-tp 1:3|--pd-tp 1:3: the decode pool:
--pd 1:1 --pd-tp 1:2 --engine vllm-v0|--pd: disaggregated serving needs --engine vllm-v1
CASES
[ "$(q "select count(*) from runs")" = "$n0" ] && ok || bad "a refused run was stored"
# --search tp varies --tp, which --pd-tp fixes
"$KVSIM" capacity --search tp --slo ttft_p99=1 --pd 1:1 --pd-tp 1:2 \
  --synthetic 'arrival=poisson,rate=10,n=20,prompt=64,output=8' --db "$DB" > /dev/null 2> "$T/e.txt"
rc=$?
[ $rc -eq 2 ] && grep -q -- "--search tp: it varies --tp, which --pd-tp fixes" "$T/e.txt" &&
  [ "$(wc -l < "$T/e.txt")" -eq 1 ] && ok || bad "--search tp --pd-tp: exit $rc: $(cat "$T/e.txt")"

[ ! -s "$T/sqlerr" ] && ok || bad "SQL errors: $(cat "$T/sqlerr")"
echo "cli_pd_tp: $pass passed, $fail failed"
[ $fail -eq 0 ]
