#!/usr/bin/env bash
# cli_spool_groups.sh — runs of a group kept in the spool keep their group
# (issue 16).  A compare and a capacity search are each resumed with one
# run missing; once the resume has marked the group running again (the
# status is polled), a python3 connection holds the write lock (BEGIN
# IMMEDIATE) until the command has put its run in the spool (or exited),
# so longer than the writer's limit (KVSIM_DB_WAIT_S=1) however slow the
# build; the group's status is written after that.
# The missing run (a 200,000-request synthetic workload: one to two seconds
# of simulation, so the lock is taken before its write) is then kept in
# DB.spool/, the command exits 2 naming the spool file, and
# the group is left `interrupted`, not `complete`.  `kvsim store recover`
# imports the run with its compare_runs row (the variant) or its
# sweep_points and sweep_point_params rows (the probe), and a second
# `--resume` finds it there: it runs nothing more for the compare, and the
# search reads the probe back and ends with the answer of an uninterrupted
# search.
#
#   tests/cli_spool_groups.sh KVSIM
. "$(dirname "$0")/testlib.sh"
hpid=
trap '[ -n "$hpid" ] && kill "$hpid" 2>/dev/null; rm -rf "$T"' EXIT
command -v sqlite3 >/dev/null || { echo "SKIP: cli_spool_groups needs the sqlite3 shell"; exit 0; }
command -v python3 >/dev/null || { echo "SKIP: cli_spool_groups needs python3"; exit 0; }
unset KVSIM_BUSY_TIMEOUT_MS KVSIM_DB_WAIT_S
cd "$T" || exit 1

# locked_resume NAME DB STATUS-SQL ARGS...: a python3 connection polls
# STATUS-SQL (every millisecond, reading: WAL readers take no lock) and,
# once it says 'running', holds the write lock until DB.spool/run-*.db
# appears or kvsim ARGS has exited (DB.release); meanwhile kvsim ARGS
# (a --resume) runs.  Sets rc.
locked_resume() {
  local name=$1 db=$2 sql=$3
  shift 3
  rm -f "$db.held" "$db.release"
  python3 - "$db" "$sql" 120 <<'PY' &
import glob, os, sqlite3, sys, time
c = sqlite3.connect(sys.argv[1], isolation_level=None)
t0 = time.time()
while time.time() - t0 < 30:
    if c.execute(sys.argv[2]).fetchone()[0] == "running":
        break
    time.sleep(0.001)
c.execute("BEGIN IMMEDIATE")
open(sys.argv[1] + ".held", "w").close()
# held until kvsim has spooled its run (or exited), however slow the build
# (ASan): then its group status write goes through
t1 = time.time()
while (not glob.glob(sys.argv[1] + ".spool/run-*.db") and
       not os.path.exists(sys.argv[1] + ".release") and time.time() - t1 < float(sys.argv[3])):
    time.sleep(0.01)
c.execute("ROLLBACK")
PY
  hpid=$!
  sleep 0.5 # python3 is up and polling before kvsim starts
  KVSIM_DB_WAIT_S=1 "$KVSIM" "$@" >"$name.out" 2>"$name.err"
  rc=$?
  touch "$db.release"
  wait "$hpid"
  hpid=
  [ -e "$db.held" ] || echo "note: $name: the lock was never taken"
}

# ------------------------------------------------------------ compare
W='n=200000,rate=30,prompt=256,output=64'
"$KVSIM" compare --db c.db --synthetic "$W" --variant continuous --variant 'static:max-seqs=64' \
  --quiet >/dev/null 2>&1 || bad "compare"
sqlite3 c.db "DELETE FROM runs WHERE run_id = 2; UPDATE compares SET status = 'interrupted'"
locked_resume compare c.db "SELECT status FROM compares" compare --resume 1 --db c.db --quiet
[ $rc -eq 2 ] && ok || bad "locked compare: exit $rc, want 2: $(cat compare.err)"
grep -q "the run is kept in $T/c.db.spool/run-" compare.err && ok || bad "locked compare: $(cat compare.err)"
[ "$(sqlite3 c.db "SELECT status FROM compares")" = interrupted ] && ok || bad "locked compare left $(sqlite3 c.db "SELECT status FROM compares")"
[ "$(ls c.db.spool | grep -c '^run-.*\.db$')" = 1 ] && ok || bad "compare spool: $(ls -a c.db.spool)"
out=$("$KVSIM" store recover --db c.db) && ok || bad "store recover (compare)"
case "$out" in *"spool: 1 imported"*) ok ;; *) bad "store recover (compare): $out" ;; esac
r=$(sqlite3 c.db "SELECT group_concat(variant_index || ':' || variant || ':' || run_id, ' ') FROM compare_runs")
[ "$r" = "0:continuous:1 1:static:3" ] && ok || bad "compare_runs after recover: $r"
"$KVSIM" compare --resume 1 --db c.db --quiet >/dev/null 2>&1 && ok || bad "compare --resume after recover"
[ "$(sqlite3 c.db "SELECT count(*) FROM runs")" = 2 ] && ok || bad "the resume ran the spooled variant again"
[ "$(sqlite3 c.db "SELECT status FROM compares")" = complete ] && ok || bad "compare not complete"

# ------------------------------------------------------------ search
# tp 1 fails (p99 TTFT in the thousands of seconds), tp 2 holds: 2 probes
S=(capacity --search tp --tp-list 1,2 --slo ttft_p99=2 --synthetic 'n=200000,rate=60,prompt=256,output=64' --json)
"$KVSIM" "${S[@]}" --db ref.db >ref.json 2>/dev/null
np=$(sqlite3 ref.db "SELECT count(*) FROM search_probes")
"$KVSIM" "${S[@]}" --db s.db >/dev/null 2>&1
# a kill during the last probe: its run and rows gone
last=$((np - 1))
sqlite3 s.db "DELETE FROM runs WHERE run_id = (SELECT run_id FROM search_probes WHERE point_index = $last);
  DELETE FROM search_probes WHERE point_index = $last; DELETE FROM sweep_point_params WHERE point_index = $last;
  DELETE FROM search_results; UPDATE sweeps SET status = 'interrupted'"
locked_resume search s.db "SELECT status FROM sweeps" capacity --resume 1 --db s.db --json
[ $rc -eq 2 ] && ok || bad "locked search: exit $rc, want 2: $(cat search.err)"
grep -q "the run is kept in $T/s.db.spool/run-" search.err && ok || bad "locked search: $(cat search.err)"
[ "$(sqlite3 s.db "SELECT status FROM sweeps")" = interrupted ] && ok || bad "locked search left $(sqlite3 s.db "SELECT status FROM sweeps")"
"$KVSIM" store recover --db s.db >/dev/null && ok || bad "store recover (search)"
r=$(sqlite3 s.db "SELECT count(*) FROM sweep_points p JOIN sweep_point_params q USING (sweep_id, point_index) WHERE p.point_index = $last")
[ "$r" = 2 ] && ok || bad "the spooled probe's point and its 2 parameters: $r rows"
"$KVSIM" capacity --resume 1 --db s.db --json >res.json 2>res.err && ok || bad "search --resume after recover: $(cat res.err)"
[ "$(sqlite3 s.db "SELECT count(*) FROM runs")" = "$np" ] && ok || bad "the resume ran the spooled probe again"
strip() { sed -E 's/"run_id": [0-9]+//g' "$1"; }
[ "$(strip res.json)" = "$(strip ref.json)" ] && ok || bad "search after recover: $(cat res.json) vs $(cat ref.json)"
[ "$(sqlite3 s.db "SELECT status FROM sweeps")" = complete ] && ok || bad "search not complete"
echo "cli_spool_groups: $pass passed, $fail failed"
[ $fail -eq 0 ]
