#!/usr/bin/env bash
# cli_atomic_out.sh — `kvsim trace gen --out` writes atomically (issue 16):
# SIGKILL at a random moment of 50 runs (seeded delays over the whole
# generate + write span) leaves --out either absent or byte-identical to a
# complete run's output, never a truncated last line that would load as a
# request.  A kill may leave a hidden temporary file (.NAME.XXXXXX) beside
# it, which no reader opens.  A write that fails (a directory in the way)
# leaves no file and exits 2.
#
#   tests/cli_atomic_out.sh KVSIM [KILLS]
. "$(dirname "$0")/testlib.sh"
N=${2:-50}
SPEC='n=300000,rate=100,prompt=uniform:1:4096,output=uniform:1:512'
"$KVSIM" trace gen --synthetic "$SPEC" --seed 3 --out "$T/ref.csv" || bad "reference"
start=$(date +%s%N)
"$KVSIM" trace gen --synthetic "$SPEC" --seed 3 --out "$T/time.csv"
span_ms=$((($(date +%s%N) - start) / 1000000))
RANDOM=${KVSIM_CRASH_SEED:-2026}
absent=0 complete=0 torn=0
for ((k = 0; k < N; k++)); do
  rm -f "$T/out.csv"
  "$KVSIM" trace gen --synthetic "$SPEC" --seed 3 --out "$T/out.csv" &
  pid=$!
  d=$((RANDOM % (span_ms + 20)))
  sleep "$(printf '0.%03d' "$d")" 2>/dev/null || sleep 0
  kill -9 "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  if [ ! -e "$T/out.csv" ]; then absent=$((absent + 1))
  elif cmp -s "$T/out.csv" "$T/ref.csv"; then complete=$((complete + 1))
  else torn=$((torn + 1)); fi
done
[ $torn -eq 0 ] && ok || bad "$torn of $N kills left a partial --out"
[ $absent -gt 0 ] && ok || bad "no kill landed before the rename (span ${span_ms} ms): the test proves nothing"
echo "cli_atomic_out: $N kills over ${span_ms} ms: $absent absent, $complete complete, $torn torn"
# a failed write: a directory where the file goes
mkdir "$T/dir.csv"
out=$("$KVSIM" trace gen --synthetic 'n=10,rate=1,prompt=8,output=8' --out "$T/dir.csv" 2>&1)
rc=$?
[ $rc -eq 2 ] && ok || bad "directory in the way: exit $rc"
[ -d "$T/dir.csv" ] && [ -z "$(ls -A "$T/dir.csv")" ] && ok || bad "directory in the way: changed"
[ "$(ls -A "$T" | grep -c '^\.dir\.csv\.')" = 0 ] && ok || bad "temporary file left after a failed write"
case "$out" in *"dir.csv"*) ok ;; *) bad "message: $out" ;; esac
echo "cli_atomic_out: $pass passed, $fail failed"
[ $fail -eq 0 ]
