#!/usr/bin/env bash
# cli_sweep.sh — `kvsim sweep` end to end:
#   1. a 24-point grid run with -j 2 stores exactly the rows of the same 24
#      points run one by one with `kvsim run` (requests and summaries, compared
#      in SQL without run ids, sweep ids, labels and wall times);
#   2. SIGKILL to the parent and its workers midway, then --resume: every point
#      stored once, the rest completed, PRAGMA integrity_check ok, and the
#      results equal an uninterrupted sweep of the same grid;
#   3. SIGINT stops the sweep (exit 130, marked interrupted) with a message
#      naming the resume command;
#   4. bad input: an empty grid, an unknown option, a bad value (naming
#      file:line), a bad combination, a bad --resume: exit 2, nothing stored.
. "$(dirname "$0")/testlib.sh"
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$T"; }
trap cleanup EXIT
# an SQL error is a failure (recorded in $T/sqlerr), never an empty match
q() { sqlite3 "$1" "$2" 2>> "$T/sqlerr"; }

# ------------------------------------------------ 1. -j 2 == one by one
S1='arrival=poisson,rate=RATE,n=300,prompt=uniform:32:600,output=uniform:1:200,priorities=0:0.5/1:0.5'
# static batching is a V0 mode: the grids below run the vllm-v0 profile
base=(--engine vllm-v0 --model llama-2-7b --gpu a100-80g --synthetic "${S1/RATE/10}" --seed 3)
"$KVSIM" sweep "${base[@]}" --db "$T/sweep.db" -j 2 --quiet \
  --grid 'max-seqs=8,64,256' --grid 'batching=static,continuous' --grid 'rate=5,40' \
  --grid 'policy=fcfs,priority' > "$T/id.txt" 2> "$T/err.txt"
rc=$?
[ $rc -eq 0 ] && ok || bad "sweep -j 2 exit $rc: $(cat "$T/err.txt")"
[ "$(cat "$T/id.txt")" = 1 ] && ok || bad "sweep --quiet printed '$(cat "$T/id.txt")', want 1"
[ "$(q "$T/sweep.db" "select count(*) from sweep_points where sweep_id=1")" = 24 ] && ok ||
  bad "sweep stored $(q "$T/sweep.db" "select count(*) from sweep_points") points, want 24"
[ "$(q "$T/sweep.db" "select count(*) from runs where sweep_id=1 and status='finished'")" = 24 ] &&
  ok || bad "not 24 finished runs with sweep_id 1"
# point order: the first axis varies slowest, the last fastest; with axis
# sizes 3, 2, 2, 2 point 13 = 1*8 + 1*4 + 0*2 + 1 picks value 1, 1, 0, 1
k=$(q "$T/sweep.db" "select point_key from sweep_points where sweep_id=1 and point_index=13")
[ "$k" = "max-seqs=64 batching=continuous rate=5 policy=priority" ] && ok || bad "point 13 is '$k'"
# the long-form view has one row per point and varied flag
[ "$(q "$T/sweep.db" "select count(*) from sweep_params where sweep_id=1")" = 96 ] && ok ||
  bad "sweep_params rows != 24 x 4"

i=0
for ms in 8 64 256; do for b in static continuous; do for r in 5 40; do for p in fcfs priority; do
  "$KVSIM" run --engine vllm-v0 --model llama-2-7b --gpu a100-80g --synthetic "${S1/RATE/$r}" --seed 3 \
    --max-seqs $ms --batching $b --policy $p --db "$T/one.db" --label "p$i" --quiet > /dev/null ||
    bad "kvsim run of point $i failed"
  i=$((i + 1))
done; done; done; done
REQ="q.req_id, q.arrival_s, q.prompt_tokens, q.output_tokens, q.priority, q.status,
     q.first_token_s, q.finish_s, q.preemptions, q.swaps, q.swapped_s"
RUN="r.model, r.gpu, r.tp, r.synthetic, r.rate_scale, r.seed, r.batching, r.policy, r.alloc,
     r.max_seqs, r.kv_blocks, r.n_finished, r.n_rejected, r.ttft_p50_s, r.ttft_p99_s,
     r.tpot_p99_s, r.e2e_p99_s, r.throughput_tok_s, r.preemptions, r.n_steps, r.mean_batch"
SW_REQ="select sp.point_index, $REQ from sweep_points sp join requests q on q.run_id = sp.run_id where sp.sweep_id = 1"
ONE_REQ="select cast(substr(r.label, 2) as integer), $REQ from o.runs r join o.requests q on q.run_id = r.run_id"
SW_RUN="select sp.point_index, $RUN from sweep_points sp join runs r on r.run_id = sp.run_id where sp.sweep_id = 1"
ONE_RUN="select cast(substr(r.label, 2) as integer), $RUN from o.runs r"
d=$(q "$T/sweep.db" "attach '$T/one.db' as o;
  select (select count(*) from ($SW_REQ except $ONE_REQ)) || ' ' ||
         (select count(*) from ($ONE_REQ except $SW_REQ)) || ' ' ||
         (select count(*) from ($SW_RUN except $ONE_RUN)) || ' ' ||
         (select count(*) from ($ONE_RUN except $SW_RUN)) || ' ' ||
         (select count(*) from ($SW_REQ)) || ' ' || (select count(*) from o.requests)")
[ "$d" = "0 0 0 0 7200 7200" ] && ok ||
  bad "sweep -j 2 vs one by one: differing rows (req, req, run, run, n, n) = $d"
# the two policies differ somewhere (the grid really varies them)
npol=$(q "$T/sweep.db" "select count(distinct ttft_p99_s) from sweep_runs where sweep_id=1 and point_key like 'max-seqs=8 batching=continuous rate=40%'")
[ "$npol" = 2 ] && ok || bad "fcfs and priority gave identical TTFT p99 at max-seqs 8 rate 40"
# the table lists every point
"$KVSIM" sweep --resume 1 --db "$T/sweep.db" > "$T/table.txt" 2>&1
[ $? -eq 0 ] && ok || bad "--resume of a finished sweep failed: $(cat "$T/table.txt")"
[ "$(grep -c 'max-seqs=' "$T/table.txt")" = 24 ] && ok || bad "table lacks points: $(cat "$T/table.txt")"
[ "$(q "$T/sweep.db" "select count(*) from runs")" = 24 ] && ok || bad "resume of a done sweep added runs"

# a grid file: comments, blanks, '|' between values that hold commas; a switch on/off
cat > "$T/ok.grid" <<'EOF'
# workloads: two whole synthetic specs
synthetic=arrival=poisson,rate=5,n=50,prompt=64,output=8,priorities=0:0.5/1:0.5|arrival=gamma,cv=2,rate=5,n=50,prompt=64,output=8,priorities=0:0.5/1:0.5

  seed=1,2      # trailing comment
priority-preemption=off,on
EOF
"$KVSIM" sweep --db "$T/file.db" --engine vllm-v0 --model llama-2-7b --policy priority --grid-file "$T/ok.grid" \
  --quiet > /dev/null 2> "$T/err.txt" && ok || bad "grid file sweep: $(cat "$T/err.txt")"
r=$(q "$T/file.db" "select group_concat(substr(synthetic, 9, 7) || ':' || seed || ':' || priority_preemption, ' ')
                      from (select r.* from sweep_points sp join runs r using (run_id) order by point_index)")
[ "$r" = "poisson:1:0 poisson:1:1 poisson:2:0 poisson:2:1 gamma,c:1:0 gamma,c:1:1 gamma,c:2:0 gamma,c:2:1" ] &&
  ok || bad "grid file points: $r"
g=$(q "$T/file.db" "select grid from sweeps")
[ "$g" = "$(printf 'synthetic=arrival=poisson,rate=5,n=50,prompt=64,output=8,priorities=0:0.5/1:0.5|arrival=gamma,cv=2,rate=5,n=50,prompt=64,output=8,priorities=0:0.5/1:0.5\nseed=1,2\npriority-preemption=off,on')" ] &&
  ok || bad "stored grid text: $g"

# ------------------------------------------------ 2. SIGKILL midway, --resume
S2='arrival=poisson,rate=30,n=8000,prompt=uniform:64:512,output=uniform:16:256'
grid2=(--engine vllm-v0 --grid 'max-seqs=16,64,256' --grid 'batching=static,continuous' --grid 'seed=1,2,3,4,5,6,7,8')
DB=$T/kill.db
setsid "$KVSIM" sweep --model llama-2-7b --synthetic "$S2" "${grid2[@]}" --db "$DB" -j 2 \
  --quiet > /dev/null 2> "$T/kill.err" &
spid=$!
pids+=("$spid")
# wait (without a clock) until a few points are stored, then kill the whole group
for _ in $(seq 1 2000); do
  n=$(sqlite3 "$DB" "select count(*) from sweep_points" 2> /dev/null)
  [ "${n:-0}" -ge 3 ] && break
  kill -0 "$spid" 2> /dev/null || break
  sleep 0.01
done
kill -9 -- -"$spid" 2> /dev/null
wait "$spid" 2> /dev/null
before=$(q "$DB" "select count(*) from sweep_points")
if [ "$before" -ge 48 ]; then
  echo "note: the sweep finished before it was killed; the resume below has nothing to do"
else
  echo "killed the sweep after $before of 48 points"
fi
[ "$(q "$DB" "pragma integrity_check")" = ok ] && ok || bad "integrity_check after SIGKILL"
# every stored run of the sweep is a point, stored once
orph=$(q "$DB" "select count(*) from runs r where sweep_id = 1 and not exists (select 1 from sweep_points sp where sp.run_id = r.run_id)")
[ "$orph" = 0 ] && ok || bad "$orph runs of the killed sweep have no point row"
"$KVSIM" sweep --resume 1 --db "$DB" -j 2 > "$T/resume.txt" 2>&1
rc=$?
[ $rc -eq 0 ] && ok || bad "--resume exit $rc: $(tail -3 "$T/resume.txt")"
r=$(q "$DB" "select count(*), count(distinct point_index), min(point_index), max(point_index) from sweep_points where sweep_id = 1")
[ "$r" = "48|48|0|47" ] && ok || bad "after resume: points (n, distinct, min, max) = $r"
[ "$(q "$DB" "select count(*) from runs where sweep_id = 1")" = 48 ] && ok ||
  bad "after resume: $(q "$DB" "select count(*) from runs where sweep_id = 1") runs, want 48"
[ "$(q "$DB" "pragma integrity_check")" = ok ] && ok || bad "integrity_check after resume"
# the killed-and-resumed sweep equals an uninterrupted one (-j 1, in process)
"$KVSIM" sweep --model llama-2-7b --synthetic "$S2" "${grid2[@]}" --db "$T/full.db" --quiet > /dev/null ||
  bad "uninterrupted sweep failed"
SUM="select sp.point_index, sp.point_key, count(*), sum(q.finish_s), sum(q.first_token_s), sum(q.preemptions)
     from sweep_points sp join requests q on q.run_id = sp.run_id group by sp.point_index order by sp.point_index"
[ "$(q "$DB" "$SUM" | sha256sum)" = "$(q "$T/full.db" "$SUM" | sha256sum)" ] && ok ||
  bad "resumed sweep differs from an uninterrupted one"

# ------------------------------------------------ 3. SIGINT: stop, say how to resume
DB3=$T/int.db
"$KVSIM" sweep --model llama-2-7b --synthetic "$S2" "${grid2[@]}" --db "$DB3" -j 2 \
  --quiet > /dev/null 2> "$T/int.err" &
spid=$!
pids+=("$spid")
for _ in $(seq 1 2000); do
  n=$(sqlite3 "$DB3" "select count(*) from sweep_points" 2> /dev/null)
  [ "${n:-0}" -ge 2 ] && break
  kill -0 "$spid" 2> /dev/null || break
  sleep 0.01
done
kill -INT "$spid" 2> /dev/null
wait "$spid"
rc=$?
stored=$(q "$DB3" "select count(*) from sweep_points")
if [ "$stored" -lt 48 ]; then
  [ $rc -eq 130 ] && ok || bad "interrupted sweep exit $rc, want 130"
  [ "$(q "$DB3" "select status from sweeps")" = interrupted ] && ok || bad "sweep not marked interrupted"
  grep -q "interrupted: .* resume with: kvsim sweep --resume 1 --db $DB3" "$T/int.err" && ok ||
    bad "no resume hint after SIGINT: $(cat "$T/int.err")"
else
  echo "note: the sweep finished before SIGINT arrived (exit $rc)"
fi
[ "$(q "$DB3" "pragma integrity_check")" = ok ] && ok || bad "integrity_check after SIGINT"
"$KVSIM" sweep --resume 1 --db "$DB3" -j 2 --quiet > /dev/null 2>&1 && ok || bad "resume after SIGINT"
[ "$(q "$DB3" "select count(*) || ' ' || count(distinct point_index) from sweep_points")" = "48 48" ] &&
  ok || bad "after SIGINT + resume: points not all stored once"

# ------------------------------------------------ 4. bad input
E=$T/bad.db
expect_fail() { # expect_fail PATTERN ARGS...: exit 2, stderr matches, nothing stored
  local pat=$1
  shift
  "$KVSIM" sweep --db "$E" --engine vllm-v0 --model llama-2-7b --synthetic 'rate=5,n=10,prompt=8,output=8' "$@" \
    > "$T/o.txt" 2> "$T/e.txt"
  local rc=$?
  [ $rc -eq 2 ] && ok || bad "sweep $* exit $rc, want 2"
  grep -q -- "$pat" "$T/e.txt" && ok || bad "sweep $*: stderr lacks '$pat': $(cat "$T/e.txt")"
  [ "$(wc -l < "$T/e.txt")" -eq 1 ] && ok || bad "sweep $*: more than one error line: $(cat "$T/e.txt")"
  [ ! -e "$E" ] && ok || bad "sweep $*: created the database"
}
expect_fail "empty grid"
printf '# only a comment\n\n   # another\n' > "$T/empty.grid"
expect_fail "empty grid: $T/empty.grid" --grid-file "$T/empty.grid"
expect_fail "unknown option 'foo'" --grid 'foo=1,2'
expect_fail "'db' cannot vary" --grid 'db=a.db,b.db'
printf 'max-seqs=8,16   # fine\n\nbatching=static,bogus\n' > "$T/bad.grid"
expect_fail "$T/bad.grid:3: --batching: unknown value 'bogus'" --grid-file "$T/bad.grid"
printf 'max-seqs=8\nwhat=1\n' > "$T/bad2.grid"
expect_fail "$T/bad2.grid:2: unknown option 'what'" --grid-file "$T/bad2.grid"
expect_fail "max-seqs: 'abc' is not an integer" --grid 'max-seqs=8,abc'
expect_fail "value '8' given twice" --grid 'max-seqs=8,8'
expect_fail "max-seqs: empty value" --grid 'max-seqs=8,,16'
expect_fail "'max-seqs' already varied" --grid 'max-seqs=8' --grid 'max-seqs=16'
expect_fail "point 1 (tp=3)" --grid 'tp=1,3'
expect_fail "point 0 (synthetic.colour=red): --synthetic: unknown key 'colour'" --grid 'synthetic.colour=red'
expect_fail "'Colour!' is not a synthetic spec key" --grid 'synthetic.Colour!=red'
expect_fail "priority-preemption is varied on/off, so the base flags cannot give" --priority-preemption --grid 'priority-preemption=on,off'
expect_fail "none.grid: No such file" --grid-file "$T/none.grid"
# (a rate axis over a trace file is --rate; other spec keys need --synthetic)
"$KVSIM" sweep --db "$E" --model llama-2-7b --grid 'synthetic.cv=1,2' > /dev/null 2> "$T/e.txt"
[ $? -eq 2 ] && grep -q "no --synthetic workload" "$T/e.txt" && ok || bad "spec key without --synthetic: $(cat "$T/e.txt")"
"$KVSIM" sweep --resume 7 --db "$T/sweep.db" > /dev/null 2> "$T/e.txt"
[ $? -eq 2 ] && grep -q "no sweep 7" "$T/e.txt" && ok || bad "--resume 7: $(cat "$T/e.txt")"
"$KVSIM" sweep --resume 1 --db "$T/sweep.db" --max-seqs 4 > /dev/null 2> "$T/e.txt"
[ $? -eq 2 ] && grep -q "give only --db" "$T/e.txt" && ok || bad "--resume with run flags: $(cat "$T/e.txt")"
"$KVSIM" sweep --help > "$T/help.txt"
[ $? -eq 0 ] && ok || bad "sweep --help exit"
for f in --grid --grid-file -j --resume --progress --no-progress --quiet --max-seqs; do
  grep -q -- "$f" "$T/help.txt" && ok || bad "--help lacks $f"
done

[ ! -s "$T/sqlerr" ] && ok || bad "SQL errors: $(cat "$T/sqlerr")"
echo "cli_sweep: $pass passed, $fail failed"
[ $fail -eq 0 ]
