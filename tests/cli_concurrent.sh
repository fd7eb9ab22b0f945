#!/usr/bin/env bash
# cli_concurrent.sh — concurrent writers: 4 kvsim processes each store 25
# small runs into one new database at the same time (racing to create its
# schema, then to write), while a reader queries it.  Nothing may be lost:
# every `kvsim run` exits 0, the database holds exactly 100 finished runs,
# one per (writer, run) label, each with all its requests, ids 1..100
# without a gap, and PRAGMA integrity_check is ok.  The reader never fails.
#
#   tests/cli_concurrent.sh KVSIM [WRITERS] [RUNS_PER_WRITER]
. "$(dirname "$0")/testlib.sh"
W=${2:-4}
R=${3:-25}
command -v sqlite3 >/dev/null || { echo "SKIP: cli_concurrent needs the sqlite3 shell (scripts/setup.sh installs it)"; exit 0; }

DB=$T/shared.db
# Small runs (a few ms of simulation each), so the writers mostly contend
# for the database; the sanitizer build is slower, hence a generous timeout.
export KVSIM_BUSY_TIMEOUT_MS=${KVSIM_BUSY_TIMEOUT_MS:-60000}

writer() {
  local w=$1 j
  for ((j = 1; j <= R; j++)); do
    if ! "$KVSIM" run --db "$DB" --synthetic "arrival=poisson,rate=20,n=$((100 + w * 7 + j)),prompt=uniform:8:512,output=uniform:1:64" \
        --seed "$((w * 1000 + j))" --cost affine:0.001,1e-5,1e-8,0 --label "w$w-r$j" --quiet \
        >"$T/out.$w.$j" 2>"$T/err.$w.$j"; then
      echo "writer $w run $j: $(cat "$T/err.$w.$j")" >>"$T/failures"
    fi
  done
}

reader() {
  local k=0
  while [ ! -e "$T/done" ]; do
    if [ -e "$DB" ] && ! "$KVSIM" query --db "$DB" "SELECT count(*) FROM runs" >/dev/null 2>"$T/rerr"; then
      # A query of a database whose schema is not created yet fails cleanly
      # ("no such table"); anything else is a failure.
      grep -q "no such table" "$T/rerr" || echo "reader: $(cat "$T/rerr")" >>"$T/failures"
    fi
    k=$((k + 1))
  done
  echo "$k" >"$T/reads"
}

reader &
rpid=$!
pids=()
for ((w = 1; w <= W; w++)); do
  writer "$w" &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
touch "$T/done"
wait "$rpid"

if [ -e "$T/failures" ]; then
  bad "$(wc -l <"$T/failures") commands failed:"
  head -5 "$T/failures"
else
  ok
fi
N=$((W * R))
r=$(sqlite3 "$DB" "PRAGMA integrity_check")
[ "$r" = ok ] && ok || bad "integrity_check: $r"
r=$(sqlite3 "$DB" "SELECT count(*), count(DISTINCT label), min(run_id), max(run_id) FROM runs WHERE status = 'finished'")
[ "$r" = "$N|$N|1|$N" ] && ok || bad "finished runs (count|labels|min id|max id): $r, want $N|$N|1|$N"
r=$(sqlite3 "$DB" "SELECT count(*) FROM runs WHERE status != 'finished'")
[ "$r" = 0 ] && ok || bad "$r runs not finished"
r=$(sqlite3 "$DB" "SELECT count(*) FROM runs r WHERE n_requests IS NOT (SELECT count(*) FROM requests q WHERE q.run_id = r.run_id)")
[ "$r" = 0 ] && ok || bad "$r runs without all their requests"
# Each run is the one its writer asked for: n = 100 + 7w + j requests.
r=$(sqlite3 "$DB" "SELECT count(*) FROM runs WHERE n_requests != 100 + 7 * CAST(substr(label, 2, instr(label, '-') - 2) AS INTEGER) + CAST(substr(label, instr(label, '-r') + 2) AS INTEGER)")
[ "$r" = 0 ] && ok || bad "$r runs hold another writer's request count"
# Every printed run id names the writer's own run.
for ((w = 1; w <= W; w++)); do
  for ((j = 1; j <= R; j++)); do
    id=$(cat "$T/out.$w.$j" 2>/dev/null)
    [ -n "$id" ] || continue
    r=$(sqlite3 "$DB" "SELECT label FROM runs WHERE run_id = $id")
    [ "$r" = "w$w-r$j" ] || bad "writer $w run $j printed run id $id, which is '$r'"
  done
done
ok
echo "cli_concurrent: $W writers x $R runs, $(cat "$T/reads" 2>/dev/null || echo 0) concurrent reads; $pass checks passed, $fail failed"
[ $fail -eq 0 ]
