#!/usr/bin/env bash
# cli_crash.sh — crash safety: `kvsim run` killed with SIGKILL at random
# points (while generating, simulating, creating the schema or writing its
# 200000 requests) never leaves a damaged database or half a run.
#
# After every kill: PRAGMA integrity_check is ok; every finished run has
# exactly n_requests requests rows (and n_steps steps rows when it recorded
# steps); no requests or steps row lacks its run; every run whose process
# exited 0 earlier is still there, complete; and the database still takes a
# new run.  Every sixth kill hits a brand-new database within its first
# 60 ms (schema creation).  When `kvsim sweep` exists, a sweep is killed
# and resumed a few times and must end with one complete run per point.
#
#   tests/cli_crash.sh KVSIM [KILLS]      (default 30 kills; $KVSIM_CRASH_SEED
#                                          fixes the random delays)
. "$(dirname "$0")/testlib.sh"
KILLS=${2:-${KVSIM_CRASH_KILLS:-30}}
SEED=${KVSIM_CRASH_SEED:-$$}
RANDOM=$SEED
export KVSIM_BUSY_TIMEOUT_MS=5000
command -v sqlite3 >/dev/null || { echo "SKIP: cli_crash needs the sqlite3 shell (scripts/setup.sh installs it)"; exit 0; }

SPEC='arrival=poisson,rate=2000,n=200000,prompt=uniform:16:256,output=uniform:1:64'
COST='affine:0.001,1e-5,1e-8,1e-10'
DB=$T/crash.db
committed=()   # run ids whose process exited 0, with the db they live in

now_ms() { date +%s%3N; }

# check DB WHEN: the invariants above; prints FAIL lines.
check() {
  local db=$1 when=$2 r
  [ -e "$db" ] || { ok; return; } # killed before the file was created
  r=$(sqlite3 "$db" "PRAGMA integrity_check" 2>&1)
  [ "$r" = ok ] && ok || { bad "$when: integrity_check: $r"; return; }
  # A database killed before its schema was committed holds no table yet.
  r=$(sqlite3 "$db" "SELECT count(*) FROM sqlite_master WHERE name = 'runs'" 2>&1)
  [ "$r" = 1 ] || { [ "$r" = 0 ] && ok || bad "$when: reading sqlite_master: $r"; return; }
  r=$(sqlite3 "$db" "
    SELECT count(*) FROM runs r WHERE r.status = 'finished' AND
      (r.n_requests IS NOT (SELECT count(*) FROM requests q WHERE q.run_id = r.run_id)
       OR (r.record_steps = 1 AND
           r.n_steps IS NOT (SELECT count(*) FROM steps s WHERE s.run_id = r.run_id)));" 2>&1)
  [ "$r" = 0 ] && ok || bad "$when: $r finished runs are incomplete"
  r=$(sqlite3 "$db" "
    SELECT (SELECT count(*) FROM request_rows WHERE key >> 32 NOT IN (SELECT run_id FROM runs))
         + (SELECT count(*) FROM step_rows WHERE key >> 32 NOT IN (SELECT run_id FROM runs))
         + (SELECT count(*) FROM runs WHERE status NOT IN ('finished', 'failed'));" 2>&1)
  [ "$r" = 0 ] && ok || bad "$when: $r orphan rows or runs of unknown status"
  local ids="" n=0 c
  for c in "${committed[@]}"; do
    [ "${c%%|*}" = "$db" ] || continue
    ids+="${ids:+,}${c##*|}"
    n=$((n + 1))
  done
  if ((n)); then
    r=$(sqlite3 "$db" "SELECT count(*) FROM runs WHERE status = 'finished' AND run_id IN ($ids)")
    [ "$r" = "$n" ] && ok || bad "$when: only $r of the $n runs committed earlier are there ($ids)"
  fi
}

# The uninterrupted run: how long a whole run takes here (sets the range of
# the kill delays), and a run that every later check must still find.
t0=$(now_ms)
id=$("$KVSIM" run --db "$DB" --synthetic "$SPEC" --cost "$COST" --quiet 2>"$T/err")
rc=$?
full_ms=$(($(now_ms) - t0))
[ $rc -eq 0 ] && ok || bad "uninterrupted run exit $rc: $(cat "$T/err")"
committed+=("$DB|$id")
check "$DB" "after the uninterrupted run"
echo "cli_crash: seed $SEED, a whole run takes ${full_ms} ms, $KILLS kills"

kills_mid=0 finished_before_kill=0
for ((i = 1; i <= KILLS; i++)); do
  db=$DB
  args=(--synthetic "$SPEC")
  if ((i % 6 == 0)); then
    db=$T/fresh$i.db            # schema creation and the first write
    delay=$((RANDOM % 60))
  else
    delay=$((RANDOM % (full_ms + full_ms / 5 + 1)))
  fi
  if ((i % 3 == 1)); then       # a smaller run with its steps recorded
    args=(--synthetic 'arrival=poisson,rate=2000,n=30000,prompt=uniform:16:256,output=uniform:1:64' --record-steps)
  fi
  "$KVSIM" run --db "$db" "${args[@]}" --cost "$COST" --quiet >"$T/out" 2>"$T/err" &
  pid=$!
  sleep "$(printf '%d.%03d' $((delay / 1000)) $((delay % 1000)))"
  kill -KILL "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  rc=$?
  if [ $rc -eq 137 ]; then
    kills_mid=$((kills_mid + 1))
  elif [ $rc -eq 0 ]; then
    finished_before_kill=$((finished_before_kill + 1))
    committed+=("$db|$(cat "$T/out")")
  else
    bad "kill $i: kvsim exited $rc, not by the kill: $(cat "$T/err")"
  fi
  check "$db" "kill $i (after ${delay} ms)"
done

# Every database still takes a run after all that.
for db in "$DB" "$T"/fresh*.db; do
  [ -e "$db" ] || continue
  id=$("$KVSIM" run --db "$db" --synthetic 'rate=10,n=50,prompt=100,output=10' --quiet 2>"$T/err")
  [ $? -eq 0 ] && ok || bad "$db: a run after the kills failed: $(cat "$T/err")"
  committed+=("$db|$id")
  check "$db" "the run after the kills"
done

# Sweeps, when this kvsim has them: a sweep of 8 points (2 worker
# processes) killed whole (its process group) at random points, resumed and
# killed again, then resumed to the end: every point ends with exactly one
# complete run, and no run or point row is half there.
sweep_check() {
  local db=$1 when=$2 r
  check "$db" "$when"
  r=$(sqlite3 "$db" "SELECT count(*) FROM sqlite_master WHERE name = 'sweep_points'" 2>&1)
  [ "$r" = 1 ] || return 0
  r=$(sqlite3 "$db" "
    SELECT (SELECT count(*) FROM sweep_points p WHERE NOT EXISTS
              (SELECT 1 FROM runs r WHERE r.run_id = p.run_id AND r.sweep_id = p.sweep_id))
         + (SELECT count(*) FROM runs r WHERE r.sweep_id IS NOT NULL AND r.status = 'finished'
              AND NOT EXISTS (SELECT 1 FROM sweep_points p WHERE p.run_id = r.run_id));" 2>&1)
  [ "$r" = 0 ] && ok || bad "$when: $r sweep points without their run or runs without their point"
}
if "$KVSIM" sweep --help >/dev/null 2>&1 && command -v setsid >/dev/null; then
  SDB=$T/sweep.db
  done_pts=""
  sargs=(--db "$SDB" --synthetic 'rate=200,n=60000,prompt=uniform:16:256,output=uniform:1:64'
         --cost "$COST" --grid 'max-seqs=8,16,32,64,128,256,512,1024' -j 2 --quiet)
  for ((i = 1; i <= 4; i++)); do
    if ((i == 1)); then cmd=(sweep "${sargs[@]}"); else cmd=(sweep --resume 1 --db "$SDB" -j 2 --quiet); fi
    setsid "$KVSIM" "${cmd[@]}" >/dev/null 2>"$T/err" &
    pid=$!
    delay=$(((i == 1 ? 150 : 0) + RANDOM % (full_ms + 1)))
    sleep "$(printf '%d.%03d' $((delay / 1000)) $((delay % 1000)))"
    kill -KILL -- -"$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    rc=$?
    # wait reaps the leader only: its worker processes may still be dying,
    # their locks with them (a check then saw "database is locked")
    for ((w = 0; w < 100; w++)); do
      kill -0 -- -"$pid" 2>/dev/null || break
      sleep 0.05
    done
    [ $rc -eq 0 ] || [ $rc -eq 137 ] && ok || bad "sweep kill $i: exit $rc: $(cat "$T/err")"
    sweep_check "$SDB" "sweep kill $i (after ${delay} ms)"
    done_pts+=" $(sqlite3 "$SDB" "SELECT count(*) FROM sweep_points WHERE sweep_id = 1" 2>/dev/null || echo 0)"
  done
  echo "cli_crash: sweep points with a run after each kill:$done_pts (of 8)"
  out=$("$KVSIM" sweep --resume 1 --db "$SDB" --quiet 2>&1)
  rc=$?
  if [ $rc -eq 0 ] || grep -q "no sweep 1" <<<"$out"; then ok; else bad "final resume: exit $rc: $out"; fi
  sweep_check "$SDB" "after the final resume"
  r=$(sqlite3 "$SDB" "SELECT count(*), count(DISTINCT point_index) FROM sweep_points WHERE sweep_id = 1" 2>&1)
  # A sweep killed before its sweeps row was committed does not exist; the
  # resume then fails cleanly and there is nothing to count.
  if grep -q "no sweep 1" <<<"$out"; then
    echo "cli_crash: the sweep was killed before it was created"
  else
    [ "$r" = "8|8" ] && ok || bad "after the final resume: (points with runs, distinct) = $r, want 8|8"
  fi
else
  echo "cli_crash: kvsim has no sweep command (or no setsid); sweep kills not run"
fi

echo "cli_crash: $KILLS kills ($kills_mid mid-run, $finished_before_kill finished first), $pass checks passed, $fail failed"
[ $fail -eq 0 ]
