#!/usr/bin/env bash
# notebooks.sh — build a fresh results database with small runs and execute
# every notebook in notebooks/ against it, headless; the figures land in
# notebooks/out/ (gitignored), the executed notebooks in notebooks/out/executed/.
#
#   scripts/notebooks.sh [--kvsim BIN] [--db FILE] [--out DIR] [--figures]
#                        [--no-calibrate]
#
#   --kvsim BIN  the kvsim binary (default: build/kvsim, else kvsim on PATH)
#   --db FILE    run the notebooks on this existing database instead of
#                building one (nothing is written to it)
#   --out DIR    where figures and executed notebooks go (default notebooks/out)
#   --figures    also copy the README figure to docs/figures/latency_throughput.png
#   --no-calibrate  skip the CPU calibration and validation (minutes under a
#                sanitizer build); their notebooks then show a note
#
# The database it builds (DIR/notebooks.db): a `kvsim compare` of continuous
# vs static batching on the Azure conversation trace, a sweep of arrival rate
# x policy x batching on a ShareGPT-length synthetic workload, a capacity
# search, and — when `kvsim calibrate --device cpu` works in this build — a
# CPU calibration of models/tiny.conf, a calibrated run and its validation
# (skipped with a note otherwise).  The notebooks use the kvsim Python
# package: python/ with the build's libkvsim.so next to BIN.  Needs
# jupyter-nbconvert, python3-pandas and python3-matplotlib (scripts/setup.sh
# full installs them).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
kvsim="" db="" out="notebooks/out" figures=0 calibrate=1
while [ $# -gt 0 ]; do
  case "$1" in
    --kvsim) kvsim=$2; shift 2 ;;
    --db) db=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --figures) figures=1; shift ;;
    --no-calibrate) calibrate=0; shift ;;
    -h|--help) sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "notebooks.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
if [ -z "$kvsim" ]; then
  if [ -x build/kvsim ]; then kvsim=build/kvsim; else kvsim=$(command -v kvsim || true); fi
fi
[ -n "$kvsim" ] && [ -x "$kvsim" ] || { echo "notebooks.sh: no kvsim binary (build it, or --kvsim BIN)" >&2; exit 2; }
kvsim=$(realpath "$kvsim")
command -v jupyter-nbconvert > /dev/null 2>&1 || command -v jupyter > /dev/null 2>&1 ||
  { echo "notebooks.sh: jupyter nbconvert not found (apt-get install jupyter-nbconvert python3-ipykernel)" >&2; exit 2; }
mkdir -p "$out/executed"
out=$(realpath "$out")

if [ -z "$db" ]; then
  db=$out/notebooks.db
  rm -f "$db" "$db-wal" "$db-shm"
  log=$out/build-db.log
  : > "$log"
  say() { echo "notebooks.sh: $*" >&2; }
  say "building $db (log: $log)"
  # static vs continuous batching is the V0 engine's comparison
  "$kvsim" compare --db "$db" --trace traces/azure_llm_2023_conv.csv --model llama-3-8b \
    --engine vllm-v0 --variant continuous: --variant static:batching=static --quiet >> "$log"
  syn='arrival=poisson,rate=1,n=600,lengths=traces/lengths_sharegpt_8k_llama2tok.csv,priorities=0:0.2/1:0.8'
  "$kvsim" sweep --db "$db" --model llama-2-7b --synthetic "$syn" --seed 1 --engine vllm-v0 \
    --grid 'batching=continuous,static' --grid 'policy=fcfs,priority' \
    --grid 'rate=0.5,1,2,3,4,5,6,7,8,10' -j 2 --quiet --no-progress >> "$log"
  # ShareGPT's 8K lengths against Llama-2-7B's 4K context: about 28% of the
  # requests are rejected at any rate; the search allows them (--max-rejected)
  "$kvsim" capacity --search rate --slo ttft_p99=1,tpot_p99=0.08 --policies fcfs,priority \
    --max-rejected 0.35 --db "$db" --model llama-2-7b --synthetic "$syn" --seed 1 --engine vllm-v0 \
    --quiet >> "$log" 2>&1
  # calibration and validation on the CPU kernels, when this build has them
  if [ $calibrate = 0 ]; then
    say "note: --no-calibrate: the calibration and validation notebooks show a note"
  elif "$kvsim" calibrate --device cpu --model models/tiny.conf --db "$db" --quiet >> "$log" 2>&1; then
    pid=$(sqlite3 "$db" "select max(profile_id) from profiles")
    rid=$("$kvsim" run --engine vllm-v0 --db "$db" --model models/tiny.conf --cost "calibrated:$pid" --force-profile \
            --kv-blocks 256 --record-steps --quiet \
            --synthetic 'rate=50,n=32,prompt=uniform:8:128,output=uniform:4:32' 2>> "$log")
    "$kvsim" validate --run "$rid" --device cpu --db "$db" --max-steps 32 --quiet >> "$log" 2>&1 ||
      say "note: kvsim validate failed (see $log); the validation notebook shows a note"
  else
    say "note: kvsim calibrate --device cpu failed (see $log); the calibration and validation notebooks show a note"
  fi
fi
db=$(realpath "$db")

# The notebooks use the Python package: the source in python/ with the
# library of this build (an installed kvsim package works too).
lib=$(dirname "$kvsim")/libkvsim.so
if [ -f "$lib" ]; then
  export KVSIM_LIBRARY=$lib
  export PYTHONPATH=$root/python${PYTHONPATH:+:$PYTHONPATH}
  # a sanitizer build's library needs its runtimes loaded first in the kernel
  san=$(ldd "$lib" 2> /dev/null | awk '/libasan|libubsan/ { print $3 }' | tr '\n' ' ')
  if [ -n "$san" ]; then
    export LD_PRELOAD="$san${LD_PRELOAD:+ $LD_PRELOAD}"
    export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
  fi
elif ! python3 -c 'import kvsim' > /dev/null 2>&1; then
  echo "notebooks.sh: no $lib (configure with -DKVSIM_SHARED=ON) and no kvsim package installed" >&2
  exit 2
fi
status=0
for nb in notebooks/*.ipynb; do
  name=$(basename "$nb" .ipynb)
  echo "notebooks.sh: executing $nb" >&2
  if ! KVSIM_DB=$db KVSIM_OUT=$out KVSIM_BIN=$kvsim \
      jupyter nbconvert --to notebook --execute --ExecutePreprocessor.timeout=300 \
      --output-dir "$out/executed" --output "$name" "$nb" > "$out/executed/$name.log" 2>&1; then
    echo "notebooks.sh: $nb failed:" >&2
    tail -20 "$out/executed/$name.log" >&2
    status=1
  fi
done
if [ $figures = 1 ] && [ -s "$out/latency_throughput.png" ]; then
  mkdir -p docs/figures
  cp "$out/latency_throughput.png" docs/figures/latency_throughput.png
  echo "notebooks.sh: updated docs/figures/latency_throughput.png" >&2
fi
ls "$out"/*.png >&2
exit $status
