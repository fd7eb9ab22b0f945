#!/usr/bin/env bash
# cli_resume_groups.sh — `kvsim compare --resume ID` and `kvsim capacity
# --resume ID` (issue 16) do what `sweep --resume` does:
#   - the trace given relative (t.csv) is stored with its absolute path and
#     SHA-256 (compare_inputs / sweep_inputs);
#   - resuming from a directory with another t.csv, from one without it,
#     after the file changed, or with other flags is refused: exit 2, one
#     line naming the file (or the flags), and the database is unchanged
#     (same .dump);
#   - resuming from the right place runs only what is missing: a compare
#     variant whose run was deleted (sqlite3 shell, foreign keys off) runs
#     again under a new run_id and gives the same figures (same inputs and
#     seed: deterministic); a search whose last probes are gone takes the
#     same path again (a search is deterministic), reads the stored probes
#     back instead of running them, runs only the missing ones, and gives
#     the same answer as the uninterrupted search;
#   - the group ends `complete`.
#
#   tests/cli_resume_groups.sh KVSIM
. "$(dirname "$0")/testlib.sh"
SRC=$(cd "$(dirname "$0")/.." && pwd)
command -v sqlite3 >/dev/null || { echo "SKIP: cli_resume_groups needs the sqlite3 shell"; exit 0; }
mkdir -p "$T/a" "$T/b" "$T/c"
head -n 201 "$SRC/traces/azure_llm_2023_conv.csv" >"$T/a/t.csv"
head -n 301 "$SRC/traces/azure_llm_2023_conv.csv" >"$T/b/t.csv"
cp "$T/a/t.csv" "$T/keep.csv"
DB=$T/g.db
q() { sqlite3 "$DB" "$1"; }
dump() { sqlite3 "$DB" .dump | sha256sum; }
# refused DIR WANT-IN-MESSAGE ARGS...: exit 2, one line, database unchanged
refused() {
  local dir=$1 want=$2
  shift 2
  local before out rc
  before=$(dump)
  out=$(cd "$dir" && "$KVSIM" "$@" 2>&1 >/dev/null)
  rc=$?
  [ $rc -eq 2 ] && ok || bad "$* from $dir: exit $rc, want 2"
  [ "$(printf '%s\n' "$out" | wc -l)" = 1 ] && ok || bad "$* from $dir: not one line: $out"
  case "$out" in *"$want"*) ok ;; *) bad "$* from $dir: message: $out (want: $want)" ;; esac
  [ "$(dump)" = "$before" ] && ok || bad "$* from $dir wrote to the database"
}
abs_a=$(realpath "$T/a/t.csv")

# ------------------------------------------------------------ compare
# vllm-v0 profile, two variants: runs 1 (continuous) and 2 (static)
(cd "$T/a" && "$KVSIM" compare --db "$DB" --engine vllm-v0 --trace t.csv --quiet \
  --variant continuous --variant 'static:batching=static' >/dev/null 2>&1) || bad "compare"
r=$(q "SELECT path || '|' || abs_path || '|' || length(sha256) FROM compare_inputs")
[ "$r" = "t.csv|$abs_a|64" ] && ok || bad "compare_inputs: $r"
r=$(q "SELECT group_concat(variant_index || ':' || variant || ':' || run_id, ' ') FROM compare_runs")
[ "$r" = "0:continuous:1 1:static:2" ] && ok || bad "compare_runs: $r"
want_tput=$(q "SELECT throughput_tok_s || ' ' || ttft_p99_s FROM runs WHERE run_id = 2")
# a kill after the first variant: run 2 gone, the group left running
q "DELETE FROM runs WHERE run_id = 2; UPDATE compares SET status = 'interrupted'"
refused "$T/b" "--trace t.csv is $(realpath "$T/b/t.csv") from here, but the compare read $abs_a" \
  compare --resume 1 --db "$DB"
refused "$T/c" "--trace t.csv: No such file or directory from this directory" \
  compare --resume 1 --db "$DB"
refused "$T/a" "compare 1 was run with the flags" \
  compare --resume 1 --db "$DB" --engine vllm-v0 --trace t.csv --max-seqs 4
refused "$T/a" "compare 1 ran the variants 'continuous static:batching=static', not 'continuous'" \
  compare --resume 1 --db "$DB" --engine vllm-v0 --trace t.csv --variant continuous
tail -n 1 "$T/keep.csv" >>"$T/a/t.csv" # one request more
refused "$T/a" "--trace $abs_a changed since the compare started" compare --resume 1 --db "$DB"
cp "$T/keep.csv" "$T/a/t.csv"
# the same command again with --resume: only `static` runs, as run 3
out=$(cd "$T/a" && "$KVSIM" compare --db "$DB" --engine vllm-v0 --trace t.csv --quiet \
  --variant continuous --variant 'static:batching=static' --resume 1 2>&1)
[ $? -eq 0 ] && ok || bad "compare --resume: $out"
r=$(q "SELECT group_concat(variant_index || ':' || run_id, ' ') FROM compare_runs")
[ "$r" = "0:1 1:3" ] && ok || bad "compare_runs after resume: $r, want 0:1 1:3"
[ "$(q "SELECT count(*) FROM runs WHERE compare_id = 1")" = 2 ] && ok || bad "runs of compare 1"
[ "$(q "SELECT throughput_tok_s || ' ' || ttft_p99_s FROM runs WHERE run_id = 3")" = "$want_tput" ] &&
  ok || bad "the resumed static variant differs from its first run"
[ "$(q "SELECT status FROM compares")" = complete ] && ok || bad "compare status"
# resuming a complete compare runs nothing and prints the table
out=$(cd "$T/a" && "$KVSIM" compare --resume 1 --db "$DB" 2>/dev/null)
case "$out" in *"static"*" 3 "*) ok ;; *) bad "table of the complete compare: $out" ;; esac
[ "$(q "SELECT count(*) FROM runs")" = 2 ] && ok || bad "resuming a complete compare ran something"

# ------------------------------------------------------------ capacity search
# search 1: the trace's rate 3.248 req/s holds ttft_p99 <= 1 s, x2 holds,
# x4 fails, then bisection: 7 probes (runs 4..10)
S=(capacity --search rate --slo ttft_p99=1 --trace t.csv --db "$DB" --json)
(cd "$T/a" && "$KVSIM" "${S[@]}" >"$T/full.json" 2>/dev/null) || bad "search"
sid=$(q "SELECT max(sweep_id) FROM sweeps")
np=$(q "SELECT count(*) FROM search_probes WHERE sweep_id = $sid")
[ "$np" -ge 4 ] && ok || bad "search probes: $np"
r=$(q "SELECT path || '|' || abs_path || '|' || length(sha256) FROM sweep_inputs WHERE sweep_id = $sid")
[ "$r" = "t.csv|$abs_a|64" ] && ok || bad "search sweep_inputs: $r"
# a kill after probe 2: the later probes' runs and rows gone; probe 3's
# parameters stay (killed between writing them and its run)
first=$(q "SELECT min(run_id) FROM search_probes WHERE sweep_id = $sid")
q "DELETE FROM runs WHERE run_id IN (SELECT run_id FROM search_probes WHERE sweep_id = $sid AND point_index >= 3);
   DELETE FROM search_probes WHERE sweep_id = $sid AND point_index >= 3;
   DELETE FROM sweep_point_params WHERE sweep_id = $sid AND point_index >= 4;
   DELETE FROM search_results WHERE sweep_id = $sid;
   UPDATE sweeps SET status = 'interrupted' WHERE sweep_id = $sid"
runs_before=$(q "SELECT count(*) FROM runs")
refused "$T/b" "--resume: search $sid: --trace t.csv is $(realpath "$T/b/t.csv") from here, but the search read $abs_a" \
  capacity --resume "$sid" --db "$DB"
refused "$T/c" "--trace t.csv: No such file or directory from this directory" \
  capacity --resume "$sid" --db "$DB"
refused "$T/a" "search $sid was run as 'search=rate slo=ttft_p99=1 " \
  capacity --search rate --slo ttft_p99=2 --trace t.csv --db "$DB" --resume "$sid"
tail -n 1 "$T/keep.csv" >>"$T/a/t.csv"
refused "$T/a" "--trace $abs_a changed since the search started" capacity --resume "$sid" --db "$DB"
cp "$T/keep.csv" "$T/a/t.csv"
(cd "$T/a" && "$KVSIM" "${S[@]}" --resume "$sid" >"$T/res.json" 2>"$T/res.err") ||
  bad "search --resume: $(cat "$T/res.err")"
strip() { sed -E 's/"run_id": [0-9]+//g' "$1"; }
[ "$(strip "$T/full.json")" = "$(strip "$T/res.json")" ] && ok ||
  bad "resumed search answer differs: $(cat "$T/res.json") vs $(cat "$T/full.json")"
# probes 0..2 read back, the np - 3 others run again
[ "$(q "SELECT count(*) FROM runs")" = $((runs_before + np - 3)) ] && ok ||
  bad "resume ran $(($(q "SELECT count(*) FROM runs") - runs_before)) probes, want $((np - 3))"
r=$(q "SELECT count(*) || ' ' || count(DISTINCT point_index) || ' ' || min(run_id) FROM search_probes WHERE sweep_id = $sid")
[ "$r" = "$np $np $first" ] && ok || bad "search_probes after resume: $r, want $np $np $first"
[ "$(q "SELECT status FROM sweeps WHERE sweep_id = $sid")" = complete ] && ok || bad "search status"
[ "$(q "SELECT count(*) FROM search_results WHERE sweep_id = $sid")" = 1 ] && ok || bad "search_results"
[ "$(q "pragma foreign_key_check")" = "" ] && ok || bad "foreign_key_check"
echo "cli_resume_groups: $pass passed, $fail failed"
[ $fail -eq 0 ]
