#!/usr/bin/env bash
# cli_notebooks.sh — scripts/notebooks.sh builds a fresh database (a compare,
# a sweep, a capacity search, and a CPU calibration + validation when the
# build has them) and executes every notebook in notebooks/ headless against
# it; each must run without error and write its figures as non-empty PNGs.
# The data-driven notebooks must plot data, not their "nothing to plot" note.
# The notebooks use the kvsim Python package (python/ with the build's
# libkvsim.so) and run no subprocess: none may import subprocess.
# Skipped (exit 0, with a note) when jupyter nbconvert is not installed.
. "$(dirname "$0")/testlib.sh"
if ! command -v jupyter-nbconvert > /dev/null 2>&1 && ! command -v jupyter > /dev/null 2>&1; then
  echo "SKIP: jupyter nbconvert not found (scripts/setup.sh full installs jupyter-nbconvert)"
  exit 0
fi

# The CPU kernels take minutes to calibrate and validate in a sanitizer
# build (their own tests cover them there): skip that part of the database.
extra=()
if ldd "$KVSIM" 2> /dev/null | grep -q 'libasan\|libubsan'; then
  extra=(--no-calibrate)
  echo "note: sanitizer build: the database is built without a calibration and validation"
fi
scripts/notebooks.sh --kvsim "$KVSIM" --out "$T/out" "${extra[@]}" > "$T/log.txt" 2>&1
rc=$?
[ $rc -eq 0 ] && ok || bad "notebooks.sh exit $rc: $(tail -30 "$T/log.txt")"
for png in batching latency_throughput kv_memory kv_attention calibration validation plan_deployment plan_memory; do
  [ -s "$T/out/$png.png" ] && ok || bad "$png.png missing or empty"
  # a PNG file starts with its 8-byte signature
  [ "$(head -c 8 "$T/out/$png.png" 2> /dev/null | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] &&
    ok || bad "$png.png is not a PNG"
done
for nb in notebooks/*.ipynb; do
  name=$(basename "$nb" .ipynb)
  [ -s "$T/out/executed/$name.ipynb" ] && ok || bad "$name: no executed notebook"
done
for nb in notebooks/*.ipynb; do
  grep -q '"import[^"]*subprocess' "$nb" && bad "$(basename "$nb") imports subprocess" || ok
done
# the notes a notebook printed (its outputs, not its source)
notes() {
  python3 - "$1" <<'PY'
import json, sys
nb = json.load(open(sys.argv[1]))
for cell in nb["cells"]:
    for out in cell.get("outputs", []):
        text = out.get("text", "")
        text = "".join(text) if isinstance(text, list) else text
        for line in text.splitlines():
            if line.startswith("note:"):
                print(line)
PY
}
# the database the script built holds what the notebooks plot
for nb in batching latency_throughput kv_memory; do
  n=$(notes "$T/out/executed/$nb.ipynb" 2>&1)
  [ -z "$n" ] && ok || bad "$nb printed notes instead of plotting data: $n"
done
n=$(sqlite3 "$T/out/notebooks.db" "select count(*) from sweep_points join sweeps using (sweep_id) where kind = 'grid'")
[ "$n" = 40 ] && ok || bad "the notebook database has $n grid sweep points, want 40"
if grep -q "kvsim calibrate --device cpu failed\|--no-calibrate" "$T/log.txt"; then
  echo "note: the database has no calibration (--no-calibrate, or no CPU calibration in this build); the calibration and validation notebooks showed a note"
else
  for nb in calibration validation; do
    n=$(notes "$T/out/executed/$nb.ipynb" 2>&1)
    [ -z "$n" ] && ok || bad "$nb printed notes instead of plotting data: $n"
  done
fi

echo "cli_notebooks: $pass passed, $fail failed"
[ $fail -eq 0 ]
