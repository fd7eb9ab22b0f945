#!/usr/bin/env bash
# cli_faults.sh — resource faults: a full disk, a read-only database, out of
# memory.  In each case kvsim prints one line "kvsim <cmd>: ..." naming the
# database (or file, or "out of memory"), exits 2 and leaves the database
# consistent (PRAGMA integrity_check ok, every finished run complete, the
# runs stored before the fault intact), and the database takes a run again
# once the fault is gone.
#
#   full disk    RLIMIT_FSIZE (`ulimit -f`): the write fails with EFBIG
#                (kvsim ignores SIGXFSZ); limits stepped across a whole
#                write; and a real tiny tmpfs filled up (ENOSPC), mounted in
#                a private user+mount namespace (skipped, visibly, where
#                namespaces or tmpfs mounts are not allowed)
#   read-only    a ?mode=ro URI, a read-only filesystem (namespace, as
#                above), and file/directory permissions (non-root only: root
#                ignores them)
#   memory       RLIMIT_AS (`ulimit -v`) stepped from too small to enough
#                (skipped under ASan, which needs terabytes of address space)
. "$(dirname "$0")/testlib.sh"
trap 'chmod -R u+w "$T" 2>/dev/null; rm -rf "$T"' EXIT
skip() { echo "SKIP: $*"; }
command -v sqlite3 >/dev/null || { echo "SKIP: cli_faults needs the sqlite3 shell (scripts/setup.sh installs it)"; exit 0; }

SMALL='rate=10,n=10,prompt=10,output=10'
BIG='arrival=poisson,rate=1000,n=200000,prompt=uniform:16:256,output=uniform:1:64'
COST='affine:0.001,1e-5,1e-8,1e-10'

# expect_err WHAT RC OUT NEEDLE: exit 2 and exactly one line "kvsim ...:"
# that contains NEEDLE.
expect_err() {
  local what=$1 rc=$2 out=$3 needle=$4
  [ "$rc" -eq 2 ] && ok || bad "$what: exit $rc, want 2 ($out)"
  [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] && ok || bad "$what: not one line: $out"
  case "$out" in "kvsim "*": "*) ok ;; *) bad "$what: does not start 'kvsim <cmd>: ': $out" ;; esac
  case "$out" in *"$needle"*) ok ;; *) bad "$what: does not name '$needle': $out" ;; esac
}

# consistent DB WHAT [N_FINISHED]: integrity ok, finished runs complete,
# and (when given) exactly N_FINISHED finished runs.
consistent() {
  local db=$1 what=$2 want=${3:-} r
  r=$(sqlite3 "$db" "PRAGMA integrity_check" 2>&1)
  [ "$r" = ok ] && ok || { bad "$what: integrity_check: $r"; return; }
  r=$(sqlite3 "$db" "SELECT count(*) FROM sqlite_master WHERE name = 'runs'" 2>&1)
  if [ "$r" = 0 ]; then # the schema itself was never committed
    [ "${want:-0}" = 0 ] && ok || bad "$what: no schema, want $want finished runs"
    return
  fi
  r=$(sqlite3 "$db" "SELECT count(*) FROM runs r WHERE status = 'finished' AND
        (n_requests IS NOT (SELECT count(*) FROM requests q WHERE q.run_id = r.run_id)
         OR (record_steps = 1 AND n_steps IS NOT (SELECT count(*) FROM steps s WHERE s.run_id = r.run_id)))
      ; SELECT count(*) FROM requests WHERE run_id NOT IN (SELECT run_id FROM runs)" 2>&1 | tr '\n' ' ')
  [ "$r" = "0 0 " ] && ok || bad "$what: incomplete runs | orphan requests: $r"
  if [ -n "$want" ]; then
    r=$(sqlite3 "$db" "SELECT count(*) FROM runs WHERE status = 'finished'")
    [ "$r" = "$want" ] && ok || bad "$what: $r finished runs, want $want"
  fi
}

# ------------------------------------------------ a new database appears whole
# `kvsim run --db NEW` builds the database in a private file beside NEW and
# links it into place once the run is in it (store_open_new): a run that
# cannot start leaves no file; a run that fails after it started is
# recorded as failed run 1 with no request rows; a run killed mid-write
# leaves no NEW, and its private file is swept by a later open.
NEWD=$T/newdb
mkdir -p "$NEWD"
out=$("$KVSIM" run --db "$NEWD/bad.db" --model no-such-model --synthetic "$SMALL" --quiet 2>&1)
expect_err "new database, unknown model" $? "$out" "no-such-model"
[ ! -e "$NEWD/bad.db" ] && [ -z "$(ls "$NEWD")" ] && ok || bad "a run that never started left files: $(ls "$NEWD")"
out=$("$KVSIM" run --db "$NEWD/stuck.db" --engine vllm-v0 --kv-blocks 100 --preemption off \
      --synthetic 'arrival=poisson,rate=20,n=300,prompt=512,output=256' --quiet 2>&1)
expect_err "new database, stuck run" $? "$out" "recorded as failed run 1"
r=$(sqlite3 "$NEWD/stuck.db" "SELECT status FROM runs; SELECT count(*) FROM request_rows; PRAGMA journal_mode" 2>&1 | tr '\n' ' ')
[ "$r" = "failed 0 wal " ] && ok || bad "stuck run in a new database: $r"
consistent "$NEWD/stuck.db" "stuck run in a new database" 0
"$KVSIM" run --db "$NEWD/killed.db" --synthetic "$BIG" --cost "$COST" --quiet > /dev/null 2>&1 &
kpid=$!
for _ in $(seq 100); do ls "$NEWD" | grep -q "killed.db.kvsim-new" && break; sleep 0.02; done
kill -9 $kpid 2>/dev/null; wait $kpid 2>/dev/null
[ ! -e "$NEWD/killed.db" ] && ok || bad "a run killed mid-way left killed.db"
ls "$NEWD" | grep -q "killed.db.kvsim-new" && ok || bad "no private file seen while the run was killed"
touch -d '2 minutes ago' "$NEWD"/killed.db.kvsim-new-* 2>/dev/null
id=$("$KVSIM" run --db "$NEWD/killed.db" --synthetic "$SMALL" --quiet 2>&1)
[ "$id" = 1 ] && ok || bad "run after a killed one: '$id'"
[ -z "$(ls "$NEWD" | grep kvsim-new)" ] && ok || bad "stale private files not swept: $(ls "$NEWD")"
consistent "$NEWD/killed.db" "after a killed run" 1
# A filesystem without hard links (link(2) refused, by a preloaded shim):
# the run is written into a database SQLite makes the usual way.
if command -v cc >/dev/null; then
  printf '#include <errno.h>\nint link(const char *a, const char *b) { (void)a; (void)b; errno = EPERM; return -1; }\n' > "$T/nolink.c"
  if cc -shared -fPIC -o "$T/nolink.so" "$T/nolink.c" 2>/dev/null; then
    id=$(LD_PRELOAD="$T/nolink.so" ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" \
         "$KVSIM" run --db "$NEWD/nolink.db" --synthetic "$SMALL" --quiet 2>&1)
    [ "$id" = 1 ] && ok || bad "no hard links: '$id'"
    consistent "$NEWD/nolink.db" "no hard links" 1
    [ -z "$(ls "$NEWD" | grep kvsim-new)" ] && ok || bad "no hard links: private files left: $(ls "$NEWD")"
  else
    skip "no hard links: cc cannot build a shared object"
  fi
else
  skip "no hard links: no C compiler"
fi

# ------------------------------------------------ full disk: ulimit -f
DB=$T/fsize.db
"$KVSIM" run --db "$DB" --synthetic "$SMALL" --quiet >/dev/null 2>&1 && ok || bad "setup run failed"
# 1000 KiB: the 200000-request write (about 12 MB) cannot fit.  The output
# goes through a pipe ($(...)), which the file-size limit does not cover.
out=$( (ulimit -f 1000; exec "$KVSIM" run --db "$DB" --synthetic "$BIG" --cost "$COST" --quiet) 2>&1)
expect_err "write past ulimit -f" $? "$out" "$DB"
case "$out" in *"File too large"*|*"disk is full"*) ok ;; *) bad "ulimit -f: no system reason given: $out" ;; esac
consistent "$DB" "after ulimit -f" 1
id=$("$KVSIM" run --db "$DB" --synthetic "$SMALL" --quiet 2>&1)
[ "$id" = 2 ] && ok || bad "run after the fault: '$id', want run id 2"

# A new database under a zero limit: the schema cannot be written.
out=$( (ulimit -f 0; exec "$KVSIM" run --db "$T/zero.db" --synthetic "$SMALL" --quiet) 2>&1)
expect_err "new database under ulimit -f 0" $? "$out" "$T/zero.db"
id=$("$KVSIM" run --db "$T/zero.db" --synthetic "$SMALL" --quiet 2>&1)
[ "$id" = 1 ] && ok || bad "new database after the fault: '$id', want run id 1"
consistent "$T/zero.db" "zero.db after the fault" 1

# Limits stepped across a whole write (steps recorded: three tables), so the
# write fails at many different points; each time either the run is stored
# complete (exit 0) or not at all (exit 2).
DB=$T/steps.db
n_ok=0
for kib in 64 128 256 512 1024 2048 4096 8192 12000 64000; do
  before=$(sqlite3 "$DB" "SELECT count(*) FROM runs" 2>/dev/null || echo 0)
  out=$( (ulimit -f $kib; exec "$KVSIM" run --db "$DB" --synthetic 'arrival=poisson,rate=1000,n=8000,prompt=uniform:16:256,output=uniform:1:64' \
          --cost "$COST" --record-steps --quiet) 2>&1)
  rc=$?
  if [ $rc -eq 0 ]; then
    n_ok=$((n_ok + 1))
    [ "$out" = $((before + 1)) ] && ok || bad "ulimit -f $kib: printed run id '$out' after $before runs"
  else
    expect_err "ulimit -f $kib" $rc "$out" "$DB"
  fi
  consistent "$DB" "ulimit -f $kib" "$n_ok"
done
[ $n_ok -ge 1 ] && [ $n_ok -le 8 ] && ok || bad "file-size limits: $n_ok of 10 runs fitted; want some to fail and some to fit"
echo "cli_faults: file-size limits: $n_ok of 10 runs stored, the rest refused cleanly"

# A trace written past the limit fails with one line naming the file.
out=$( (ulimit -f 8; exec "$KVSIM" trace gen --synthetic "$BIG" --out "$T/big.csv") 2>&1)
expect_err "trace gen past ulimit -f" $? "$out" "$T/big.csv"

# ------------------------------------- namespaced tmpfs: full and read-only
cat >"$T/ns.sh" <<'EOF'
# Runs inside `unshare -rm`: prints "ok" / "FAIL: ..." lines.
K=$1 D=$2 SMALL=$3 BIG=$4 COST=$5 RO=$6
mount -t tmpfs -o size=1m tmpfs "$D" 2>/dev/null || { echo "NOMOUNT"; exit 0; }
db=$D/t.db
"$K" run --db "$db" --synthetic "$SMALL" --quiet >/dev/null || echo "FAIL: first run on tmpfs"
out=$("$K" run --db "$db" --synthetic "$BIG" --cost "$COST" --quiet 2>&1); rc=$?
echo "RC $rc"; echo "OUT $out"
echo "CHECK $(sqlite3 "$db" "PRAGMA integrity_check; SELECT count(*) FROM runs; SELECT count(*) FROM requests" | tr '\n' ' ')"
# Fill what is left, then a new database cannot even get its schema.
head -c 2000000 /dev/zero >"$D/filler" 2>/dev/null
out=$("$K" run --db "$D/new.db" --synthetic "$SMALL" --quiet 2>&1); echo "NEWRC $?"; echo "NEWOUT $out"
rm -f "$D/filler"
echo "AGAIN $("$K" run --db "$db" --synthetic "$SMALL" --quiet 2>&1)"
# Read-only filesystem: a read-only bind mount of the same tmpfs.
{ mount --bind "$D" "$RO" && mount -o remount,ro,bind "$RO"; } 2>/dev/null || { echo "NORO"; exit 0; }
out=$("$K" run --db "$RO/t.db" --synthetic "$SMALL" --quiet 2>&1); echo "RORC $?"; echo "ROOUT $out"
out=$("$K" run --db "$RO/other.db" --synthetic "$SMALL" --quiet 2>&1); echo "RONEWRC $?"; echo "RONEWOUT $out"
echo "ROCHECK $(sqlite3 "$db" "PRAGMA integrity_check; SELECT count(*) FROM runs" | tr '\n' ' ')"
EOF
mkdir -p "$T/mnt" "$T/mnt-ro"
if unshare -rm true 2>/dev/null; then
  unshare -rm bash "$T/ns.sh" "$KVSIM" "$T/mnt" "$SMALL" "$BIG" "$COST" "$T/mnt-ro" >"$T/ns.out" 2>&1
else
  echo "NOMOUNT" >"$T/ns.out"
fi
field() { sed -n "s/^$1 //p" "$T/ns.out" | head -1; }
if grep -q NOMOUNT "$T/ns.out"; then
  skip "tiny filesystem and read-only filesystem: no user+mount namespace or tmpfs mount allowed here"
else
  grep '^FAIL' "$T/ns.out" && bad "tmpfs setup" || ok
  expect_err "full tmpfs" "$(field RC)" "$(field OUT)" "$T/mnt/t.db"
  case "$(field OUT)" in *"disk is full"*) ok ;; *) bad "full tmpfs: not reported as full: $(field OUT)" ;; esac
  [ "$(field CHECK)" = "ok 1 10 " ] && ok || bad "full tmpfs left (integrity, runs, requests) = $(field CHECK), want ok 1 10"
  expect_err "new database on a full tmpfs" "$(field NEWRC)" "$(field NEWOUT)" "$T/mnt/new.db"
  [ "$(field AGAIN)" = 2 ] && ok || bad "run after freeing space: '$(field AGAIN)', want run id 2"
  if grep -q NORO "$T/ns.out"; then
    skip "read-only filesystem: read-only bind mount not allowed"
  else
    expect_err "read-only filesystem" "$(field RORC)" "$(field ROOUT)" "$T/mnt-ro/t.db"
    expect_err "new database on a read-only filesystem" "$(field RONEWRC)" "$(field RONEWOUT)" "$T/mnt-ro/other.db"
    [ "$(field ROCHECK)" = "ok 2 " ] && ok || bad "read-only filesystem left (integrity, runs) = $(field ROCHECK), want ok 2"
  fi
fi

# ------------------------------------------------ read-only database
DB=$T/ro.db
"$KVSIM" run --db "$DB" --synthetic "$SMALL" --quiet >/dev/null 2>&1 && ok || bad "setup run failed"
out=$("$KVSIM" run --db "file:$DB?mode=ro" --synthetic "$SMALL" --quiet 2>&1)
expect_err "?mode=ro database" $? "$out" "$DB"
case "$out" in *"readonly database"*) ok ;; *) bad "?mode=ro: not reported as read-only: $out" ;; esac
consistent "$DB" "after the read-only attempt" 1
if [ "$(id -u)" -ne 0 ]; then
  chmod a-w "$DB"
  out=$("$KVSIM" run --db "$DB" --synthetic "$SMALL" --quiet 2>&1)
  expect_err "chmod a-w database" $? "$out" "$DB"
  chmod u+w "$DB"
  mkdir "$T/rodir" && chmod a-w "$T/rodir"
  out=$("$KVSIM" run --db "$T/rodir/new.db" --synthetic "$SMALL" --quiet 2>&1)
  expect_err "database in a read-only directory" $? "$out" "$T/rodir/new.db"
  chmod u+w "$T/rodir"
  consistent "$DB" "after the permission faults" 1
else
  skip "file permission faults: running as root, which ignores them (covered by ?mode=ro and the read-only filesystem)"
fi

# ------------------------------------------------ out of memory: ulimit -v
if grep -q __asan_init "$KVSIM" 2>/dev/null; then
  skip "memory limits: sanitizer build (ASan reserves terabytes of address space)"
else
  DB=$T/oom.db
  n_oom=0 n_ok=0
  # The address space the binary needs just to start: a CUDA build maps
  # cuBLAS (hundreds of MB of virtual space) before main.  Find it to 5%
  # and add it to every limit, so the limits test kvsim's own allocations.
  base=0
  lo=0 hi=8000000
  (ulimit -v $hi; exec "$KVSIM" --version) > /dev/null 2>&1 || hi=0
  while [ $hi -gt 0 ] && [ $((hi - lo)) -gt $((hi / 20 + 1000)) ]; do
    mid=$(((lo + hi) / 2))
    if (ulimit -v $mid; exec "$KVSIM" --version) > /dev/null 2>&1; then hi=$mid; else lo=$mid; fi
  done
  base=$hi
  echo "cli_faults: kvsim starts within $base KiB of address space"
  # 1000000 requests need ~160 MB; the limits cross every allocation of a
  # run, from the trace to the store's write.
  for extra in 20000 40000 60000 90000 120000 135000 150000 165000 400000; do
    kib=$((base + extra))
    out=$( (ulimit -v $kib; exec "$KVSIM" run --db "$DB" --synthetic 'rate=1000,n=1000000,prompt=10,output=10' --cost "$COST" --quiet) 2>&1)
    rc=$?
    if [ $rc -eq 0 ]; then
      n_ok=$((n_ok + 1))
    else
      n_oom=$((n_oom + 1))
      expect_err "ulimit -v $kib" $rc "$out" "out of memory"
    fi
    [ -e "$DB" ] && consistent "$DB" "ulimit -v $kib" "$n_ok"
  done
  [ $n_oom -ge 3 ] && [ $n_ok -ge 1 ] && ok || bad "memory limits: $n_oom failed, $n_ok fitted; want both"
  echo "cli_faults: memory limits: $n_ok of 9 runs stored, $n_oom refused with 'out of memory'"
  # The largest synthetic trace kvsim accepts (1e8 requests, 3.2 GB).
  out=$( (ulimit -v $((base + 1000000)); exec "$KVSIM" run --db "$DB" --synthetic 'rate=1000,n=100000000,prompt=10,output=10' --quiet) 2>&1)
  expect_err "1e8 requests under 1 GB" $? "$out" "out of memory"
fi

echo "cli_faults: $pass checks passed, $fail failed"
[ $fail -eq 0 ]
