#!/usr/bin/env bash
# cli_spool.sh — no run lost to a busy database, and groups that stay whole
# (issue 16):
#  1. 8 writers x 4 `kvsim run --record-steps` on the head of the default
#     trace (1,200 requests: each write is ~10^4 step rows, so the writers
#     really queue for the lock) with the default 5 s busy timeout, plus a
#     reader looping `kvsim query`: all 32 runs stored, complete, no spool
#     left, every writer exit 0 (before issue 16, a writer gave up after 5 s);
#  2. a writer blocked by a held write lock (python3 sqlite3, BEGIN
#     IMMEDIATE) for longer than its limit (KVSIM_DB_WAIT_S=1.5): exit 2,
#     one line naming the spool file, a progress line while it waited; the
#     next `kvsim run` imports it (two runs stored); a second spooled run is
#     imported by `kvsim store recover`;
#  3. three concurrent `kvsim compare`: three distinct compare ids, each with
#     its own four runs, each group 'complete';
#  4. `--db :memory:` refused (exit 2) instead of a run that is gone at exit.
#
#   tests/cli_spool.sh KVSIM
. "$(dirname "$0")/testlib.sh"
SRC=$(cd "$(dirname "$0")/.." && pwd)
command -v sqlite3 >/dev/null || { echo "SKIP: cli_spool needs the sqlite3 shell"; exit 0; }
command -v python3 >/dev/null || { echo "SKIP: cli_spool needs python3"; exit 0; }
unset KVSIM_BUSY_TIMEOUT_MS KVSIM_DB_WAIT_S
q() { sqlite3 "$1" "$2"; }

# ---------------------------------------------------------------- 1.
head -n 1201 "$SRC/traces/azure_llm_2023_conv.csv" >"$T/head.csv"
DB=$T/shared.db
"$KVSIM" run --trace "$T/head.csv" --db "$DB" --quiet --label warm >/dev/null || bad "first run"
writer() {
  local w=$1 j
  for ((j = 1; j <= 4; j++)); do
    "$KVSIM" run --trace "$T/head.csv" --record-steps --rate-scale "1.$w$j" --db "$DB" \
      --label "w$w-r$j" --quiet >"$T/out.$w.$j" 2>"$T/err.$w.$j" ||
      echo "writer $w run $j: exit $?: $(head -c 300 "$T/err.$w.$j")" >>"$T/failures"
  done
}
reader() {
  while [ ! -e "$T/done" ]; do
    "$KVSIM" query --db "$DB" "SELECT count(*) FROM runs" >/dev/null 2>"$T/rerr" ||
      echo "reader: $(cat "$T/rerr")" >>"$T/failures"
  done
}
start=$(date +%s)
reader &
rpid=$!
pids=()
for w in 1 2 3 4 5 6 7 8; do writer "$w" & pids+=($!); done
for p in "${pids[@]}"; do wait "$p"; done
touch "$T/done"
wait "$rpid"
secs=$(($(date +%s) - start))
if [ -e "$T/failures" ]; then bad "$(wc -l <"$T/failures") commands failed:"; head -3 "$T/failures"; else ok; fi
r=$(q "$DB" "SELECT count(*), count(DISTINCT label) FROM runs WHERE label GLOB 'w[0-9]-r[0-9]' AND status = 'finished'")
[ "$r" = "32|32" ] && ok || bad "8 x 4 writers: stored (runs|labels) $r, want 32|32"
r=$(q "$DB" "SELECT count(*) FROM runs r WHERE n_requests != (SELECT count(*) FROM requests q WHERE q.run_id = r.run_id) OR (record_steps AND n_steps != (SELECT count(*) FROM steps s WHERE s.run_id = r.run_id))")
[ "$r" = 0 ] && ok || bad "$r runs without all their requests or steps"
[ "$(ls -A "$DB.spool" 2>/dev/null | wc -l)" = 0 ] && ok || bad "spool left: $(ls "$DB.spool")"
[ "$(q "$DB" 'PRAGMA integrity_check')" = ok ] && ok || bad "integrity_check"
echo "cli_spool: 8 writers x 4 runs with steps stored in ${secs} s"

# ---------------------------------------------------------------- 2.
L=$T/locked.db
SPEC='n=20,rate=5,prompt=16,output=4'
"$KVSIM" run --synthetic "$SPEC" --db "$L" --quiet >/dev/null || bad "locked: first run"
hold() { # hold the write lock of $1 for $2 seconds
  python3 - "$1" "$2" <<'PY' &
import sqlite3, sys, time
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("BEGIN IMMEDIATE")
open(sys.argv[1] + ".held", "w").close()
time.sleep(float(sys.argv[2]))
c.execute("ROLLBACK")
PY
  hpid=$!
  for _ in $(seq 100); do [ -e "$1.held" ] && break; sleep 0.05; done
}
hold "$L" 6
out=$(KVSIM_DB_WAIT_S=4.5 "$KVSIM" run --synthetic "$SPEC" --db "$L" --label spooled --quiet 2>&1 >/dev/null)
rc=$?
[ $rc -eq 2 ] && ok || bad "locked: exit $rc, want 2"
case "$out" in *"waiting for the database"*) ok ;; *) bad "locked: no progress line: $out" ;; esac
last=$(printf '%s\n' "$out" | tail -1)
case "$last" in *"database is locked after"*"the run is kept in $L.spool/run-"*".db"*) ok ;; *) bad "locked: message: $last" ;; esac
[ "$(ls "$L.spool" | grep -c '^run-.*\.db$')" = 1 ] && ok || bad "locked: spool files: $(ls -a "$L.spool")"
wait "$hpid"; rm -f "$L.held"
id=$("$KVSIM" run --synthetic "$SPEC" --db "$L" --label after --quiet) || bad "locked: next run"
r=$(q "$L" "SELECT group_concat(coalesce(label, '-') || ':' || n_requests, ' ') FROM (SELECT * FROM runs ORDER BY run_id)")
[ "$r" = "-:20 spooled:20 after:20" ] && ok || bad "after import: runs $r"
[ "$(q "$L" "SELECT count(*) FROM requests r JOIN runs u USING (run_id) WHERE u.label = 'spooled'")" = 20 ] && ok || bad "spooled run's requests"
[ "$(ls -A "$L.spool" 2>/dev/null | wc -l)" = 0 ] && ok || bad "spool not emptied"
# a second spooled run, imported by `kvsim store recover`
hold "$L" 3
KVSIM_DB_WAIT_S=1 "$KVSIM" run --synthetic "$SPEC" --db "$L" --label spooled2 --quiet >/dev/null 2>&1
wait "$hpid"; rm -f "$L.held"
out=$("$KVSIM" store recover --db "$L")
[ $? -eq 0 ] && ok || bad "store recover: exit"
case "$out" in *"spool: 1 imported"*) ok ;; *) bad "store recover: $out" ;; esac
[ "$(q "$L" "SELECT count(*) FROM runs WHERE label = 'spooled2' AND n_requests = 20")" = 1 ] && ok || bad "recover: run missing"
[ "$(q "$L" 'PRAGMA integrity_check')" = ok ] && ok || bad "locked: integrity_check"

# ---------------------------------------------------------------- 3.
C=$T/compare.db
"$KVSIM" run --synthetic "$SPEC" --db "$C" --quiet >/dev/null
for i in 1 2 3; do
  "$KVSIM" compare --synthetic 'n=300,rate=30,prompt=uniform:16:256,output=uniform:4:64' \
    --db "$C" --quiet >"$T/cmp.$i" 2>"$T/cmperr.$i" &
done
wait
ids=$(cat "$T"/cmp.? | sort -n | tr '\n' ' ')
[ "$ids" = "1 2 3 " ] && ok || bad "compare ids: '$ids', want 1 2 3 ($(cat "$T"/cmperr.?))"
# each compare keeps its own runs: as many as its variants (compare's default
# set), none shared
r=$(q "$C" "SELECT group_concat(n || '/' || v, ' ') FROM (SELECT c.compare_id, c.n_runs AS v, (SELECT count(*) FROM runs r WHERE r.compare_id = c.compare_id) AS n FROM compares c ORDER BY c.compare_id)")
nv=$(q "$C" "SELECT n_runs FROM compares WHERE compare_id = 1")
[ "$r" = "$nv/$nv $nv/$nv $nv/$nv" ] && [ "$nv" -gt 1 ] && ok || bad "runs per compare (stored/variants): $r"
r=$(q "$C" "SELECT count(*) FROM runs WHERE compare_id IS NOT NULL AND label NOT LIKE 'compare ' || compare_id || ':%'")
[ "$r" = 0 ] && ok || bad "$r runs labelled with another compare's id"
[ "$(q "$C" "SELECT group_concat(status) FROM compares")" = "complete,complete,complete" ] && ok || bad "compare status: $(q "$C" 'SELECT * FROM compares')"
out=$("$KVSIM" store groups --db "$C")
[ "$(printf '%s\n' "$out" | grep -c '^compare .* complete ')" = 3 ] && ok || bad "store groups: $out"

# ---------------------------------------------------------------- 4.
out=$("$KVSIM" run --synthetic "$SPEC" --db :memory: 2>&1)
rc=$?
[ $rc -eq 2 ] && ok || bad ":memory: exit $rc"
case "$out" in *"in-memory database"*) ok ;; *) bad ":memory: message: $out" ;; esac

echo "cli_spool: $pass passed, $fail failed"
[ $fail -eq 0 ]
