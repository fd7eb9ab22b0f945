#!/usr/bin/env bash
# cli_resume_identity.sh — `kvsim sweep --resume` checks that it resumes the
# same sweep (issue 16): the trace path given relative (t.csv) is stored with
# its absolute path and SHA-256 (sweep_inputs).  Resuming from another
# directory that has its own t.csv, from a directory without one, or after
# the file changed is refused with one line naming the file, exit 2, and
# the database is unchanged (same .dump).  Resuming from the right place
# with the same bytes runs the missing point; a run deleted with the sqlite3
# shell (foreign keys off) makes its point run again under a new run_id.
#
#   tests/cli_resume_identity.sh KVSIM
. "$(dirname "$0")/testlib.sh"
SRC=$(cd "$(dirname "$0")/.." && pwd)
command -v sqlite3 >/dev/null || { echo "SKIP: cli_resume_identity needs the sqlite3 shell"; exit 0; }
mkdir -p "$T/a" "$T/b" "$T/c"
head -n 201 "$SRC/traces/azure_llm_2023_conv.csv" >"$T/a/t.csv"
head -n 301 "$SRC/traces/azure_llm_2023_conv.csv" >"$T/b/t.csv"
DB=$T/s.db
(cd "$T/a" && "$KVSIM" sweep --db "$DB" --grid max-seqs=4,8,16 --trace t.csv --quiet >/dev/null) || bad "sweep"
r=$(sqlite3 "$DB" "SELECT path || '|' || abs_path || '|' || length(sha256) FROM sweep_inputs")
[ "$r" = "t.csv|$(realpath "$T/a/t.csv")|64" ] && ok || bad "sweep_inputs: $r"
# drop point 2's run the way a user would, foreign keys off
sqlite3 "$DB" "DELETE FROM runs WHERE run_id = 3"
dump() { sqlite3 "$DB" .dump | sha256sum; }
before=$(dump)
refused() { # DIR WANT-IN-MESSAGE
  out=$(cd "$1" && "$KVSIM" sweep --resume 1 --db "$DB" 2>&1 >/dev/null)
  rc=$?
  [ $rc -eq 2 ] && ok || bad "resume from $1: exit $rc"
  [ "$(printf '%s\n' "$out" | wc -l)" = 1 ] && ok || bad "resume from $1: not one line: $out"
  case "$out" in *"$2"*) ok ;; *) bad "resume from $1: message: $out" ;; esac
  [ "$(dump)" = "$before" ] && ok || bad "resume from $1 wrote to the database"
}
refused "$T/b" "--trace t.csv is $(realpath "$T/b/t.csv") from here, but the sweep read $(realpath "$T/a/t.csv")"
refused "$T/c" "--trace t.csv: No such file or directory from this directory"
cp "$T/a/t.csv" "$T/keep.csv"
tail -n 1 "$T/keep.csv" >>"$T/a/t.csv" # one request more
refused "$T/a" "--trace $(realpath "$T/a/t.csv") changed since the sweep started"
cp "$T/keep.csv" "$T/a/t.csv"
(cd "$T/a" && "$KVSIM" sweep --resume 1 --db "$DB" --quiet >/dev/null) || bad "resume from the right place"
r=$(sqlite3 "$DB" "SELECT group_concat(point_index || ':' || run_id, ' ') FROM (SELECT * FROM sweep_points ORDER BY point_index)")
[ "$r" = "0:1 1:2 2:4" ] && ok || bad "points after resume: $r, want 0:1 1:2 2:4 (run 3 deleted, never reused)"
[ "$(sqlite3 "$DB" "SELECT status FROM sweeps")" = complete ] && ok || bad "sweep status"
echo "cli_resume_identity: $pass passed, $fail failed"
[ $fail -eq 0 ]
