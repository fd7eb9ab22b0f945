#!/usr/bin/env bash
# cli_fuzz_short.sh — the test suite's short fuzz run: scripts/fuzz.sh
# builds every libFuzzer target of tests/fuzz/ (clang, ASan + UBSan) in a
# build tree next to this kvsim and runs them for 70 s in all (about 10 s per
# target), from the checked-in corpus (which replays every input that ever
# found a bug).
# Fails on any crash, sanitizer report or broken invariant.
#
# Skips, visibly, where clang or its libFuzzer runtime is missing
# (scripts/setup.sh full installs clang and libclang-rt-14-dev), and in the
# sanitizer build's pass of the suite: the fuzz targets are sanitizer builds
# already, so running them twice would only double the time.
#
#   tests/cli_fuzz_short.sh KVSIM      ($KVSIM_FUZZ_BUDGET: seconds in all)
set -u
KVSIM=$(realpath "${1:-build/kvsim}")
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(dirname "$KVSIM")/fuzz

if grep -q __asan_init "$KVSIM" 2>/dev/null; then
  echo "SKIP: cli_fuzz_short runs in the normal build's suite (this kvsim is a sanitizer build; the fuzz targets are ASan+UBSan builds themselves)"
  exit 0
fi
cc=$(command -v clang || command -v clang-14 || true)
if [ -z "$cc" ]; then
  echo "SKIP: cli_fuzz_short: clang not found (scripts/setup.sh full installs clang and libclang-rt-14-dev)"
  exit 0
fi
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' >"$probe/p.c"
if ! "$cc" -fsanitize=fuzzer,address,undefined "$probe/p.c" -o "$probe/p" >"$probe/log" 2>&1; then
  echo "SKIP: cli_fuzz_short: $cc cannot link libFuzzer ($(head -1 "$probe/log")); scripts/setup.sh full installs libclang-rt-14-dev"
  exit 0
fi

export KVSIM_FUZZ_BUDGET=${KVSIM_FUZZ_BUDGET:-70}
"$SRC/scripts/fuzz.sh" --build "$BUILD"
