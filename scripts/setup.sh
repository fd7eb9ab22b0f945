#!/usr/bin/env bash
# setup.sh — install what the requested build is missing (Debian packages)
# and build kvsim.
#
#   scripts/setup.sh [build|tests|full] [BUILD_DIR] [extra cmake args...]
#   scripts/setup.sh [BUILD_DIR] [extra cmake args...]        (= tests)
#
#   build  kvsim and the benchmarks: compiler, cmake, pkg-config, SQLite,
#          libcsv, json-c (configured with -DKVSIM_TESTS=OFF)
#   tests  the above + Check, the sqlite3 shell and python3-venv (the Python
#          package: pip install ./python, tests/py_package.sh), for the test
#          suite (the default; the tests that need more skip visibly)
#   full   the above + what the whole suite exercises: MPI (kvsim sweep under
#          mpirun), Jupyter/ipykernel/matplotlib/pandas (the notebooks),
#          clang + libFuzzer (the fuzz targets), python3
#
# Only what is missing is installed, with apt-get; when nothing the level
# needs is missing, apt-get is never run, so the script works offline (a GPU
# machine without network) once the packages are there.  When a package is
# missing and cannot be installed it names it and stops.  nvcc is found
# (/usr/local/cuda*/bin) and the CUDA backend built when a toolkit is there;
# no GPU is needed to build.
set -euo pipefail
case "${1:-}" in
-h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
-*) echo "setup.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/.."
level=tests
case "${1:-}" in
build | tests | full) level=$1; shift ;;
esac
build=${1:-build}
shift || true

# need PACKAGE TEST...: PACKAGE is missing when TEST fails.
missing=()
need() {
  local pkg=$1
  shift
  "$@" >/dev/null 2>&1 || missing+=("$pkg")
}
has_pc() { command -v pkg-config >/dev/null 2>&1 && pkg-config --exists "$1"; }
has_header() { printf '#include <%s>\n' "$1" | cc -E -x c - >/dev/null 2>&1; }
has_pydeb() { python3 -c "import $1" 2>/dev/null; }
# python3 -m venv works (Debian ships ensurepip's wheels in python3-venv)
has_venv() {
  local d
  d=$(mktemp -d) && python3 -m venv "$d/v" >/dev/null 2>&1
  local rc=$?
  rm -rf "$d"
  return $rc
}
has_deb() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

need build-essential command -v cc
need build-essential command -v make
need cmake command -v cmake
need pkg-config command -v pkg-config
need libsqlite3-dev has_pc sqlite3
need libjson-c-dev has_pc json-c
need libcsv-dev has_header csv.h
if [ "$level" != build ]; then
  need check has_pc check
  need sqlite3 command -v sqlite3
  need python3 command -v python3
  need python3-venv has_venv
fi
if [ "$level" = full ]; then
  need python3 command -v python3
  need libopenmpi-dev command -v mpicc
  need openmpi-bin command -v mpirun
  need jupyter-nbconvert command -v jupyter-nbconvert
  need python3-ipykernel has_pydeb ipykernel
  need python3-matplotlib has_pydeb matplotlib
  need python3-pandas has_pydeb pandas
  need clang command -v clang
  # libFuzzer's runtime (libclang-rt-14-dev on Debian 12)
  if ! has_deb libclang-rt-dev && ! ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer*.a \
      >/dev/null 2>&1; then
    missing+=(libclang-rt-dev)
  fi
fi
if ((${#missing[@]})); then
  # unique, in order
  mapfile -t missing < <(printf '%s\n' "${missing[@]}" | awk '!seen[$0]++')
  echo "setup ($level): installing ${missing[*]}" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  if ! command -v apt-get >/dev/null 2>&1 ||
     ! $sudo apt-get update -qq ||
     ! DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null; then
    echo "setup ($level): could not install ${missing[*]} (no network or no apt-get?);" \
         "install them, or ask for less: scripts/setup.sh build" >&2
    exit 1
  fi
fi

# The CUDA toolkit is optional: use it when present.
if ! command -v nvcc >/dev/null 2>&1; then
  for d in /usr/local/cuda/bin /usr/local/cuda-*/bin; do
    if [ -x "$d/nvcc" ]; then export PATH="$d:$PATH"; break; fi
  done
fi
if command -v nvcc >/dev/null 2>&1; then
  export CUDACXX=${CUDACXX:-$(command -v nvcc)}
fi

tests=ON
[ "$level" = build ] && tests=OFF
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKVSIM_TESTS=$tests "$@" >/dev/null
cmake --build "$build" -j"$(nproc)"
echo "setup ($level): built $build/kvsim" >&2
