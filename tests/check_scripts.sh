#!/usr/bin/env bash
# check_scripts.sh — every script under scripts/ answers --help (its header,
# exit 0) and refuses an unknown option with one line naming itself, exit 2,
# before it does anything: no package installed, nothing built, no run
# started (test.sh --help used to start the whole suite, gpu_run.sh --help a
# GPU run).
set -u
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
cd "$(dirname "$0")/.." || exit 1

for f in scripts/*.sh; do
    name=$(basename "$f")
    timeout 20 bash "$f" --help > "$T/out.txt" 2>&1
    rc=$?
    if [ "$rc" -eq 0 ] && head -1 "$T/out.txt" | grep -q "^$name — "; then ok
    else bad "$name --help: rc=$rc, first line: $(head -1 "$T/out.txt")"; fi
    timeout 20 bash "$f" --no-such-option > "$T/out.txt" 2>&1
    rc=$?
    if [ "$rc" -eq 2 ] && [ "$(wc -l < "$T/out.txt")" -eq 1 ] && grep -q "^$name: " "$T/out.txt"; then ok
    else bad "$name --no-such-option: rc=$rc, $(head -3 "$T/out.txt")"; fi
done

echo "check_scripts: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
