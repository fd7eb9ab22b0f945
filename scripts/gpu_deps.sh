#!/usr/bin/env bash
# gpu_deps.sh — gather kvsim's build dependencies into a folder that can
# travel to a GPU machine with no network and no such packages (the lent
# machines run their own image: CUDA, CMake and a compiler, but no SQLite,
# json-c, libcsv or Check headers).  Run it on a Debian or Ubuntu machine
# that has a network; it installs nothing here.
#
#   scripts/gpu_deps.sh [--installed] [DIR]   (default DIR: .gpudeps, which git ignores)
#
# It downloads the .deb files of pkg-config (pkgconf), SQLite, json-c,
# libcsv, Check and subunit with `apt-get download`, unpacks each under
# DIR/root with `dpkg -x` (never into /); with --installed it copies those
# packages' files from this machine instead (dpkg -L; no network, the
# packages must be installed); and it rewrites every pkg-config file's
# prefix to its own place (${pcfiledir}), so the folder works wherever it
# lands.  scripts/gpu_run.sh uses DIR (DEPS=DIR, or .gpudeps when present):
# PKG_CONFIG_PATH, CMAKE_PREFIX_PATH and LD_LIBRARY_PATH point into it, and
# its pkg-config is put on PATH only where the machine has none.  The
# packages must match the GPU machine's architecture (x86-64) and its C
# library must not be older than the one they were built for.
set -euo pipefail
installed=0
case "${1:-}" in
-h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
--installed) installed=1; shift ;;
esac
case "${1:-}" in
-*) echo "gpu_deps.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
esac
if [ $# -gt 1 ]; then
    echo "gpu_deps.sh: unexpected argument '$2' (one folder at most; see --help)" >&2
    exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$root/.gpudeps}
for tool in apt-get dpkg; do
    command -v "$tool" >/dev/null 2>&1 ||
        { echo "gpu_deps.sh: needs $tool (a Debian or Ubuntu machine)" >&2; exit 2; }
done
pkgs=(pkgconf pkgconf-bin libpkgconf3 libsqlite3-dev libsqlite3-0 libjson-c-dev libjson-c5
      libcsv-dev libcsv3 check libsubunit-dev libsubunit0)
# DIR is replaced whole: only an empty folder or one this script made
if [ -e "$dir" ] && [ -n "$(ls -A "$dir" 2>/dev/null)" ] && [ ! -d "$dir/root/usr" ]; then
    echo "gpu_deps.sh: $dir exists and is not a folder gpu_deps.sh made (no root/usr): not replaced" >&2
    exit 2
fi
rm -rf "$dir"
mkdir -p "$dir/root" || { echo "gpu_deps.sh: cannot create $dir" >&2; exit 2; }
dir=$(cd "$dir" && pwd)
if ((installed)); then
    # each package's files as installed here (dpkg -L), links kept as links
    for pkg in "${pkgs[@]}"; do
        files=$(dpkg -L "$pkg" 2>/dev/null) ||
            { echo "gpu_deps.sh: package $pkg is not installed here (--installed copies what is)" >&2; exit 2; }
        while IFS= read -r f; do
            if [ -L "$f" ] || [ -f "$f" ]; then
                mkdir -p "$dir/root$(dirname "$f")"
                cp -P "$f" "$dir/root$f"
            fi
        done <<<"$files"
    done
else
    # apt-get download writes into the current folder
    mkdir -p "$dir/debs"
    (cd "$dir/debs" && apt-get download "${pkgs[@]}") >"$dir/download.log" 2>&1 ||
        { tail -5 "$dir/download.log" >&2; echo "gpu_deps.sh: apt-get download failed ($dir/download.log)" >&2; exit 1; }
    for deb in "$dir"/debs/*.deb; do dpkg -x "$deb" "$dir/root"; done
fi
# prefix=/usr -> the folder three levels above the .pc file (usr/lib/<arch>/pkgconfig)
n=0
while IFS= read -r -d '' pc; do
    # other variables spelled /usr... (json-c's libdir, includedir) -> ${prefix}...
    sed -i -e 's|^prefix=/usr$|prefix=${pcfiledir}/../../..|' \
           -e 's|^\([A-Za-z_]*\)=/usr\(/.*\)\{0,1\}$|\1=${prefix}\2|' "$pc"
    grep -q '^prefix=${pcfiledir}' "$pc" ||
        { echo "gpu_deps.sh: $pc: no 'prefix=/usr' line to rewrite" >&2; exit 1; }
    if grep -n '/usr' "$pc" >&2; then echo "gpu_deps.sh: $pc: a /usr path left (above)" >&2; exit 1; fi
    n=$((n + 1))
done < <(find "$dir/root" -name '*.pc' -print0)
how=unpacked
((installed)) && how=copied
echo "gpu_deps.sh: ${#pkgs[@]} packages $how under $dir/root ($n pkg-config files," \
     "$(du -sh "$dir" | cut -f1)); carry it to the GPU machine and run scripts/gpu_run.sh there"
