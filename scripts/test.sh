#!/usr/bin/env bash
# test.sh — set up, build and run the whole test suite:
#   1. the normal build (CUDA backend compiled when nvcc is installed; its
#      GPU tests print a visible SKIP without a device) under ctest;
#   2. the same suite built with AddressSanitizer + UndefinedBehaviorSanitizer
#      (CPU only), unless KVSIM_SKIP_SANITIZE=1.
set -euo pipefail
case "${1:-}" in
-h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
?*) echo "test.sh: unknown argument '$1': it takes none (see --help)" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/.."
jobs=$(nproc)

# ctest hides the output of passing tests: repeat their SKIP lines (GPU
# tests without a device, root-only skips) so that every skip is visible.
show_skips() {
  grep -h "^SKIP" "$1/Testing/Temporary/LastTest.log" 2>/dev/null | sort -u | sed "s|^|$1: |" || true
}

count() { (cd "$1" && ctest -N | sed -n 's/^Total Tests: //p'); }

# the full set of dependencies: MPI, Jupyter, clang + libFuzzer too
scripts/setup.sh full build
(cd build && ctest --output-on-failure -j"$jobs")
show_skips build
total=$(count build)

if [ "${KVSIM_SKIP_SANITIZE:-0}" != 1 ]; then
  # optimised (-O2 -g): the sanitizers keep their checks, the suite its speed
  scripts/setup.sh tests build-asan -DKVSIM_SANITIZE=ON -DKVSIM_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  # instrumented code runs a few times slower: scale Check's per-test timeouts
  export CK_TIMEOUT_MULTIPLIER=${CK_TIMEOUT_MULTIPLIER:-4}
  (cd build-asan && ctest --output-on-failure -j"$jobs")
  show_skips build-asan
  total=$((total + $(count build-asan)))
fi
# every ctest run above passed (set -e): one closing line for both passes
echo "tests: $total passed, 0 failed"

