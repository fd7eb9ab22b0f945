#!/usr/bin/env bash
# check_gpu_run_dry.sh — scripts/gpu_run.sh end to end without a GPU, the
# way a lent GPU machine runs it: DEVICE=cpu on the tiny model, with its
# build dependencies taken only from a folder made by scripts/gpu_deps.sh
# (--installed: copied from this machine's packages; the system's
# pkg-config files are hidden with PKG_CONFIG_LIBDIR).  Every stage must
# pass, the build must have found SQLite, json-c, libcsv and Check in that
# folder, the summary must carry both validations' lines (p99 TTFT on each
# request's own clock, the back-to-back figure beside it), and a DEPS
# folder that is not one is refused with one line, exit 2.  The GPU run is
# the one piece of the project that only a lent machine runs: this keeps
# it from rotting between loans.  Needs dpkg and the packages that
# scripts/setup.sh tests installs; SKIP otherwise.
. "$(dirname "$0")/testlib.sh"
cd "$(dirname "$0")/.." || exit 1
command -v dpkg >/dev/null 2>&1 || { echo "SKIP: check_gpu_run_dry needs dpkg"; exit 0; }

if ! scripts/gpu_deps.sh --installed "$T/deps" > "$T/deps.txt" 2>&1; then
    cat "$T/deps.txt"
    if grep -q 'is not installed here' "$T/deps.txt"; then
        echo "SKIP: check_gpu_run_dry: a package gpu_deps.sh gathers is not installed"
        exit 0
    fi
    bad "gpu_deps.sh --installed failed"
    echo "check_gpu_run_dry: $pass passed, $fail failed"
    exit 1
fi
ok

PKG_CONFIG_LIBDIR=/nonexistent DEPS="$T/deps" DEVICE=cpu MODEL=models/tiny.conf \
    BUILD_DIR="$T/build" OUT="$T/out" JOBS=2 TOTAL_S=400 \
    timeout 600 scripts/gpu_run.sh > "$T/run.txt" 2>&1
rc=$?
if [ "$rc" -eq 0 ]; then ok; else bad "gpu_run.sh exit $rc: $(tail -5 "$T/run.txt")"; fi
# every stage ran and passed
n_ok=$(awk -F'\t' '$2 == "ok"' "$T/out/stages.tsv" 2>/dev/null | wc -l)
n_all=$(wc -l < "$T/out/stages.tsv" 2>/dev/null || echo 0)
if [ "$n_all" -eq 9 ] && [ "$n_ok" -eq 9 ]; then ok
else bad "stages: $n_ok of $n_all ok (want 9 of 9): $(tr '\t\n' ' ;' < "$T/out/stages.tsv")"; fi
# the build found every dependency in the carried folder
for v in CSV_INCLUDE_DIR:PATH CSV_LIBRARY:FILEPATH PKG_CONFIG_EXECUTABLE:FILEPATH; do
    got=$(sed -n "s|^$v=||p" "$T/build/CMakeCache.txt" 2>/dev/null)
    case "$got" in
    "$T/deps/"*) ok ;;
    *) bad "CMakeCache $v = '$got', not under the DEPS folder" ;;
    esac
done
for m in SQLITE3 JSONC CHECK; do # pkg_check_modules' prefixes of sqlite3, json-c, check
    got=$(sed -n "s|^${m}_LIBRARY_DIRS:INTERNAL=||p" "$T/build/CMakeCache.txt" 2>/dev/null)
    case "$got" in
    "$T/deps/root/usr/lib/"*) ok ;;
    *) bad "pkg-config found $m in '$got', not in the DEPS folder" ;;
    esac
done
grep -q "^build dependencies: present (carried in $T/deps)" "$T/out/preflight.log" 2>/dev/null && ok ||
    bad "preflight did not name the carried folder: $(cat "$T/out/preflight.log" 2>/dev/null | tail -3)"
# the summary: both validations measured (CPU figures, meaningless as speed)
for name in calibrated roofline; do
    if grep -Eq "^  $name +run [0-9]+ +median \|step error\| +[0-9.]+%.*p99 TTFT error +-?[0-9.]+%" \
        "$T/out/summary.txt" 2>/dev/null
    then ok; else bad "summary has no $name validation line with its p99 TTFT error"; fi
done
# the p99 TTFT target is judged on each request's own clock (the report's
# third table); the back-to-back figure is printed beside it
n=$(grep -Ec "p99 TTFT error with the drift of all earlier steps carried \(back to back\): -?[0-9.]+%" \
    "$T/out/summary.txt" 2>/dev/null)
if [ "$n" -eq 2 ]; then ok; else bad "summary: $n back-to-back TTFT lines (want 2)"; fi
if grep -q "each on its own clock (drift-free)" "$T/out/validate-calibrated.log" 2>/dev/null; then ok
else bad "the validation report has no own-clock table"; fi
# both re-timings against a model of them written apart from the C code
# (bench/gpu/retime_local.py): the same TTFT and E2E percentiles
for vid in 1 2; do
    if python3 bench/gpu/retime_local.py "$T/out/kvsim.db" "$vid" --json > "$T/py$vid.json" 2>&1 &&
        python3 - "$T/out/kvsim.db" "$vid" "$T/py$vid.json" > "$T/cmp$vid.txt" 2>&1 <<'PY'
import json, sqlite3, sys
db, vid, py = sqlite3.connect(sys.argv[1]), int(sys.argv[2]), json.load(open(sys.argv[3]))
c = json.loads(db.execute("SELECT summary_json FROM validations WHERE validation_id = ?",
                          (vid,)).fetchone()[0])["e2e"]
sec = {"simulated": c["covered"]["simulated"], "global": c["covered"]["measured"],
       "local": c["local"]["covered"]["measured"]}
bad = [f"{n}.{k}: C {sec[n][k]!r}, Python {v!r}" for n in py for k, v in py[n].items()
       if abs(sec[n][k] - v) > 1e-9 * max(abs(v), 1e-12)]
print("; ".join(bad) or "agree")
sys.exit(1 if bad else 0)
PY
    then ok; else bad "validation $vid: C and retime_local.py differ: $(cat "$T/py$vid.json" "$T/cmp$vid.txt" | tail -3)"; fi
done
# gpu_deps.sh replaces its folder whole, so it refuses one it did not make
mkdir -p "$T/mine" && echo keep > "$T/mine/file"
scripts/gpu_deps.sh --installed "$T/mine" > "$T/bad.txt" 2>&1
rc=$?
if [ "$rc" -eq 2 ] && [ "$(wc -l < "$T/bad.txt")" -eq 1 ] && grep -q "not a folder gpu_deps.sh made" "$T/bad.txt" &&
   [ "$(cat "$T/mine/file")" = keep ]; then ok
else bad "gpu_deps.sh into a foreign folder: rc=$rc, $(head -2 "$T/bad.txt")"; fi
# a DEPS folder that gpu_deps.sh did not make: one line, exit 2, nothing run
DEPS="$T" OUT="$T/out2" scripts/gpu_run.sh > "$T/bad.txt" 2>&1
rc=$?
if [ "$rc" -eq 2 ] && [ "$(wc -l < "$T/bad.txt")" -eq 1 ] && grep -q "DEPS=$T holds no root/usr" "$T/bad.txt" &&
   [ ! -e "$T/out2" ]; then ok
else bad "DEPS=not-a-deps-folder: rc=$rc, $(head -2 "$T/bad.txt")"; fi

echo "check_gpu_run_dry: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
