#!/usr/bin/env bash
# cli_interrupt.sh — Ctrl-C (SIGINT) during a sweep, a compare and a
# capacity search (issue 16).  Each is started in the background on the
# default trace (about half a second per run, so a run is in flight when
# the signal comes); as soon as its first run is stored, SIGINT.  Then:
#   - exit 130 with one line on stderr (the resume command; --quiet keeps
#     the other notes off);
#   - the group is marked `interrupted`, the runs that finished stay
#     stored (at least the first, fewer than all), no run is half-written
#     (integrity_check; every run of the group belongs to a point);
#   - `--resume ID` completes it: status `complete`, every point stored
#     once, and the same answer as an uninterrupted run of the same command.
# A machine so fast that the whole group finishes before the signal
# arrives is reported (note:) and the interrupted checks are skipped for it.
#
#   tests/cli_interrupt.sh KVSIM
. "$(dirname "$0")/testlib.sh"
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$T"; }
trap cleanup EXIT
command -v sqlite3 >/dev/null || { echo "SKIP: cli_interrupt needs the sqlite3 shell"; exit 0; }
cd "$T" || exit 1

# interrupt NAME DB COUNT-SQL TOTAL ARGS...: start kvsim ARGS in the
# background, SIGINT once COUNT-SQL >= 1; sets rc, got (COUNT-SQL after).
interrupt() {
  local name=$1 db=$2 sql=$3 total=$4
  shift 4
  "$KVSIM" "$@" >"$T/$name.out" 2>"$T/$name.err" &
  local pid=$!
  pids+=("$pid")
  for _ in $(seq 1 3000); do
    n=$(sqlite3 "$db" "$sql" 2>/dev/null)
    [ "${n:-0}" -ge 1 ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.01
  done
  kill -INT "$pid" 2>/dev/null
  wait "$pid"
  rc=$?
  got=$(sqlite3 "$db" "$sql")
  if [ "$got" -ge "$total" ]; then
    echo "note: $name finished before SIGINT arrived (exit $rc)"
    return 1
  fi
  [ $rc -eq 130 ] && ok || bad "$name: exit $rc after SIGINT, want 130 ($(cat "$T/$name.err"))"
  [ "$(wc -l <"$T/$name.err")" = 1 ] && ok || bad "$name: stderr not one line: $(cat "$T/$name.err")"
  [ "$got" -ge 1 ] && ok || bad "$name: $got runs stored after SIGINT, want >= 1"
  [ "$(sqlite3 "$db" "pragma integrity_check")" = ok ] && ok || bad "$name: integrity_check"
  return 0
}

# ------------------------------------------------------------ sweep
# 6 points of the default trace, in this process (-j 1)
interrupt sweep s.db "SELECT count(*) FROM sweep_points" 6 \
  sweep --db s.db --grid max-seqs=16,32,64,128,192,256 --quiet
if [ $? -eq 0 ]; then
  [ "$(sqlite3 s.db "SELECT status FROM sweeps")" = interrupted ] && ok || bad "sweep status"
  grep -q "interrupted: $got of 6 points stored; resume with: kvsim sweep --resume 1 --db s.db" \
    sweep.err && ok || bad "sweep message: $(cat sweep.err)"
  [ "$(sqlite3 s.db "SELECT count(*) FROM runs")" = "$got" ] && ok || bad "sweep: a run with no point"
fi
"$KVSIM" sweep --resume 1 --db s.db --quiet >/dev/null 2>&1 && ok || bad "sweep --resume"
[ "$(sqlite3 s.db "SELECT status FROM sweeps")" = complete ] && ok || bad "sweep not complete"
[ "$(sqlite3 s.db "SELECT count(*) || ' ' || count(DISTINCT point_index) FROM sweep_points")" = "6 6" ] &&
  ok || bad "sweep points after resume"
"$KVSIM" sweep --db s_ref.db --grid max-seqs=16,32,64,128,192,256 --quiet >/dev/null 2>&1
cols="point_index, throughput_tok_s, ttft_p99_s, e2e_p99_s"
[ "$(sqlite3 s.db "SELECT $cols FROM sweep_runs ORDER BY point_index")" = \
  "$(sqlite3 s_ref.db "SELECT $cols FROM sweep_runs ORDER BY point_index")" ] &&
  ok || bad "interrupted + resumed sweep differs from an uninterrupted one"

# ------------------------------------------------------------ compare
# the default set of the default engine (vllm-v1): 5 variants here
interrupt compare c.db "SELECT count(*) FROM compare_runs" 5 compare --db c.db --quiet
if [ $? -eq 0 ]; then
  [ "$(sqlite3 c.db "SELECT status FROM compares")" = interrupted ] && ok || bad "compare status"
  grep -q "interrupted: $got of 5 variants stored; resume with: kvsim compare --resume 1 --db c.db" \
    compare.err && ok || bad "compare message: $(cat compare.err)"
fi
"$KVSIM" compare --resume 1 --db c.db --quiet >/dev/null 2>&1 && ok || bad "compare --resume"
[ "$(sqlite3 c.db "SELECT status FROM compares")" = complete ] && ok || bad "compare not complete"
[ "$(sqlite3 c.db "SELECT count(*) || ' ' || count(DISTINCT variant_index) FROM compare_runs")" = "5 5" ] &&
  ok || bad "compare variants after resume"
[ "$(sqlite3 c.db "SELECT count(*) FROM runs WHERE compare_id = 1")" = 5 ] && ok || bad "compare runs"

# ------------------------------------------------------------ capacity search
S=(capacity --search rate --slo ttft_p99=2 --max-rejected 0.01 --json)
"$KVSIM" "${S[@]}" --db r_ref.db >ref.json 2>/dev/null
total=$(sqlite3 r_ref.db "SELECT count(*) FROM search_probes")
interrupt search r.db "SELECT count(*) FROM search_probes" "$total" "${S[@]}" --db r.db
if [ $? -eq 0 ]; then
  [ "$(sqlite3 r.db "SELECT status FROM sweeps")" = interrupted ] && ok || bad "search status"
  grep -q "interrupted: $got probes stored; resume with: kvsim capacity --resume 1 --db r.db" \
    search.err && ok || bad "search message: $(cat search.err)"
fi
"$KVSIM" capacity --resume 1 --db r.db --json >res.json 2>/dev/null && ok || bad "search --resume"
[ "$(sqlite3 r.db "SELECT status FROM sweeps")" = complete ] && ok || bad "search not complete"
[ "$(sqlite3 r.db "SELECT count(*) FROM search_probes")" = "$total" ] && ok || bad "search probes"
strip() { sed -E 's/"run_id": [0-9]+//g' "$1"; }
[ "$(strip res.json)" = "$(strip ref.json)" ] && ok || bad "resumed search: $(cat res.json) vs $(cat ref.json)"
echo "cli_interrupt: $pass passed, $fail failed"
[ $fail -eq 0 ]
