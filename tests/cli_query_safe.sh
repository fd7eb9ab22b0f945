#!/usr/bin/env bash
# cli_query_safe.sh — `kvsim query` only reads (store/store_query.h):
# every write or escape attempt below is refused with one line and exit 2,
# and no file in the database's directory changes or appears; a runaway
# query stops at --timeout; too many rows stop at --max-rows instead of
# being cut silently; a database the user cannot write (WAL, no -shm) is
# still read; a missing database is named and not created.
. "$(dirname "$0")/testlib.sh"
trap 'chmod -R u+w "$T" 2>/dev/null; rm -rf "$T"' EXIT
DB=$T/d/runs.db
mkdir -p "$T/d"
"$KVSIM" run --db "$DB" --quiet --synthetic 'rate=5,n=30,prompt=100,output=10' >/dev/null || {
  echo "FAIL: setup run"; exit 1; }
state() { (cd "$T" && find . -type f -newer "$T/stamp" -o -type f -print0 | xargs -0 sha256sum | sort); }
touch "$T/stamp"; sleep 0.01
before=$(state)

refused() { # SQL: refused, one line, exit 2, nothing changed
  local out rc
  out=$("$KVSIM" query --db "$DB" --timeout 5 -- "$1" 2>&1); rc=$?
  if [ $rc -ne 2 ] || [ "$(printf '%s\n' "$out" | wc -l)" -ne 1 ] || [ -z "$out" ]; then
    bad "not refused in one line (rc $rc): $1 -> $out"; return
  fi
  [ "$(state)" = "$before" ] && ok || bad "files changed after: $1"
}

refused "VACUUM INTO '$T/d/copy.db'"
refused "VACUUM"
refused "ATTACH '$T/d/other.db' AS o"
refused "ATTACH ':memory:' AS m"
refused "DETACH main"
refused "DELETE FROM runs"
refused "UPDATE runs SET label = 'x'"
refused "INSERT INTO meta VALUES ('k', 'v')"
refused "REPLACE INTO meta VALUES ('schema_version', '9')"
refused "CREATE TABLE t(x)"
refused "CREATE TEMP TABLE t(x)"
refused "CREATE VIEW v AS SELECT 1"
refused "CREATE INDEX i ON runs(label)"
refused "CREATE TRIGGER tr AFTER INSERT ON runs BEGIN SELECT 1; END"
refused "CREATE VIRTUAL TABLE f USING fts4(x)"
refused "DROP TABLE runs"
refused "DROP VIEW run_summary"
refused "ALTER TABLE runs ADD COLUMN x"
refused "REINDEX"
refused "ANALYZE"
refused "BEGIN"
refused "SAVEPOINT s"
refused "PRAGMA writable_schema = 1"
refused "PRAGMA journal_mode = DELETE"
refused "PRAGMA user_version = 7"
refused "PRAGMA schema_version = 1"
refused "PRAGMA foreign_keys = OFF"
refused "PRAGMA temp_store_directory = '/tmp'"
refused "PRAGMA trusted_schema = 1"
refused "SELECT fts3_tokenizer('simple')"
refused "SELECT fts3_tokenizer('mine', x'0000000000000000')"
refused "SELECT load_extension('/tmp/evil.so')"
refused "SELECT readfile('/etc/passwd')"
refused "SELECT writefile('$T/d/x', 'y')"
refused "SELECT edit('x')"
refused "SELECT 1; DELETE FROM runs"
refused "/* hidden */ DELETE FROM runs"
refused "-- comment
DROP TABLE requests"
refused "WITH x AS (SELECT 1) DELETE FROM runs"
refused "EXPLAIN DELETE FROM runs"

# limits: a runaway recursive CTE stops at the time limit
out=$("$KVSIM" query --db "$DB" --timeout 1 \
  "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c" 2>&1)
rc=$?
[ $rc -eq 2 ] && [[ "$out" == *"ran longer than --timeout 1 s"* ]] && ok || bad "timeout: rc $rc $out"
# too many rows: an error, not a cut
out=$("$KVSIM" query --db "$DB" --max-rows 10 --csv "SELECT req_id FROM requests" 2>&1)
rc=$?
[ $rc -eq 2 ] && [[ "$out" == *"more than 10 rows"* ]] && ok || bad "max-rows: rc $rc"
# memory: a huge blob is refused, not allocated
out=$("$KVSIM" query --db "$DB" --max-mem-mib 64 "SELECT length(zeroblob(1000000000))" 2>&1)
[ $? -eq 2 ] && ok || bad "memory limit: $out"
# reads still work: reals with 6 significant digits in a table, exactly in CSV
out=$("$KVSIM" query --db "$DB" --no-header "SELECT 1.0/3")
[ "$out" = "0.333333" ] && ok || bad "table real: $out"
out=$("$KVSIM" query --db "$DB" --csv --no-header "SELECT 1.0/3")
[ "$out" = "0.3333333333333333" ] && ok || bad "csv real: $out"
out=$("$KVSIM" query --db "$DB" --csv --no-header "SELECT count(*) FROM requests; PRAGMA table_info(meta)")
[[ "$out" == 30* ]] && ok || bad "reads: $out"
# missing database: named, not created
out=$("$KVSIM" query --db "$T/d/none.db" "SELECT 1" 2>&1)
[ $? -eq 2 ] && [ "$out" = "kvsim query: $T/d/none.db: no such database" ] && [ ! -e "$T/d/none.db" ] &&
  ok || bad "missing db: $out"
[ "$(state)" = "$before" ] && ok || bad "files changed by the reads"

# a WAL database the user cannot write (no -shm can be made) is read as is
if [ "$(id -u)" = 0 ] && command -v runuser >/dev/null; then
  mkdir -p "$T/ro" && cp "$DB" "$T/ro/runs.db" && chmod 755 "$T" "$T/ro" && chmod 644 "$T/ro/runs.db"
  # a copy of the binary that nobody may run (the build tree may sit in a
  # directory only root can enter, as a mktemp -d clone does)
  cp "$KVSIM" "$T/kvsim" && chmod 755 "$T/kvsim"
  out=$(runuser -u nobody -- "$T/kvsim" query --db "$T/ro/runs.db" --csv --no-header \
        "SELECT count(*) FROM requests" 2>&1)
  [ "$out" = 30 ] && ok || bad "read-only database as another user: $out"
  [ ! -e "$T/ro/runs.db-shm" ] && ok || bad "a -shm file appeared"
else
  echo "SKIP: the unwritable-database case needs root and runuser"
fi

echo "cli_query_safe: $pass passed, $fail failed"
[ $fail -eq 0 ]
