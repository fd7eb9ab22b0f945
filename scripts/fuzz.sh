#!/usr/bin/env bash
# fuzz.sh — build the libFuzzer targets of tests/fuzz/ (clang, ASan + UBSan)
# and run each on its corpus; any crash, sanitizer report, timeout or broken
# invariant fails the run and leaves the input under BUILD/fuzz-artifacts/.
#
#   scripts/fuzz.sh                 short run: 90 s ($KVSIM_FUZZ_BUDGET) shared
#                                   by the targets (at least 5 s each)
#   scripts/fuzz.sh --long          10 minutes per target, one worker per core
#   scripts/fuzz.sh --seconds S     S seconds per target
#   scripts/fuzz.sh --merge         after the run, add the inputs that found new
#                                   coverage to tests/fuzz/corpus/<target>/
#   scripts/fuzz.sh --build DIR     build tree (default build-fuzz)
#   scripts/fuzz.sh [...] TARGET..  only these targets (e.g. fuzz_trace_csv)
#
# Every run starts from the checked-in corpus tests/fuzz/corpus/<target>/
# (real and malformed inputs, and every input that once found a bug) plus
# what earlier runs found in BUILD/fuzz-corpus/<target>/.  Prints one line
# per target: inputs executed, seconds, new coverage, and a summary table
# (docs/hardening.md records one).  Needs clang and libFuzzer (Debian:
# clang libclang-rt-14-dev; scripts/setup.sh full installs them).
# Reproduce a failure: BUILD/tests/fuzz/TARGET BUILD/fuzz-artifacts/TARGET-crash-...
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

build=build-fuzz
budget=${KVSIM_FUZZ_BUDGET:-90}
per=""
long=0
merge=0
targets=()
while (($#)); do
  case $1 in
    --long) long=1 ;;
    --seconds) per=$2; shift ;;
    --merge) merge=1 ;;
    --build) build=$2; shift ;;
    -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "fuzz.sh: unknown flag $1 (see --help)" >&2; exit 2 ;;
    *) targets+=("$1") ;;
  esac
  shift
done

cc=${KVSIM_FUZZ_CC:-$(command -v clang || command -v clang-14 || true)}
if [ -z "$cc" ]; then
  echo "fuzz.sh: clang not found (Debian: apt-get install clang libclang-rt-14-dev)" >&2
  exit 3
fi

cmake -S . -B "$build" -DCMAKE_C_COMPILER="$cc" -DKVSIM_FUZZ=ON -DKVSIM_TESTS=OFF \
  -DKVSIM_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"$(nproc)" --target fuzz >/dev/null

if ((${#targets[@]} == 0)); then
  for t in "$build"/tests/fuzz/fuzz_*; do
    [ -x "$t" ] && [ -f "$t" ] && targets+=("$(basename "$t")")
  done
fi
((${#targets[@]})) || { echo "fuzz.sh: no fuzz target built" >&2; exit 3; }

workers=1
if ((long)); then
  per=${per:-600}
  workers=$(nproc)
elif [ -z "$per" ]; then
  per=$((budget / ${#targets[@]}))
  ((per >= 5)) || per=5
fi

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
mkdir -p "$build/fuzz-artifacts" "$build/fuzz-logs"
status=0
summary=()
for t in "${targets[@]}"; do
  bin=$build/tests/fuzz/$t
  [ -x "$bin" ] || { echo "fuzz.sh: no target $t" >&2; status=1; continue; }
  seed=$root/tests/fuzz/corpus/$t
  work=$build/fuzz-corpus/$t
  mkdir -p "$work" "$seed"
  log=$build/fuzz-logs/$t.log
  args=(-max_total_time="$per" -timeout=10 -rss_limit_mb=2048 -max_len=65536
        -print_final_stats=1 -artifact_prefix="$build/fuzz-artifacts/$t-")
  rc=0
  if ((workers > 1)); then
    # libFuzzer's fork mode: workers share the corpus; crashes are kept and
    # the run goes on.
    "$bin" "${args[@]}" -fork="$workers" -ignore_crashes=1 "$work" "$seed" >"$log" 2>&1 || rc=$?
  else
    "$bin" "${args[@]}" "$work" "$seed" >"$log" 2>&1 || rc=$?
  fi
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  added=$(sed -n 's/^stat::new_units_added: *//p' "$log" | tail -1)
  if ((workers > 1)); then
    # fork mode: "#RUNS: cov: ... oom/timeout/crash: O/T/C time: ..."
    last=$(grep -E '^#[0-9]+: cov:' "$log" | tail -1)
    runs=$(sed -n 's/^#\([0-9]*\):.*/\1/p' <<<"$last")
    bad=$(sed -n 's|.*oom/timeout/crash: \([0-9]*\)/\([0-9]*\)/\([0-9]*\).*|\1 \2 \3|p' <<<"$last")
    [ -z "$bad" ] || [ "$bad" = "0 0 0" ] || rc=1
  fi
  line=$(printf '%-18s %12s inputs  %4s s  %5s new  exit %s' "$t" "${runs:-?}" "$per" "${added:-?}" "$rc")
  echo "fuzz.sh: $line"
  summary+=("$line")
  if ((rc != 0)) || grep -q -E "ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|fuzz invariant broken" "$log"; then
    status=1
    echo "fuzz.sh: $t FAILED; log $log; inputs under $build/fuzz-artifacts/$t-*" >&2
    grep -E -m5 "fuzz invariant broken|error message:|runtime error:|ERROR:|SUMMARY:" "$log" >&2 || true
  fi
  if ((merge)); then
    "$bin" -merge=1 "$seed" "$work" >"$build/fuzz-logs/$t.merge.log" 2>&1 || true
  fi
done

echo "fuzz.sh: summary (target, inputs executed, seconds, new coverage units, exit)"
printf '  %s\n' "${summary[@]}"
exit $status
