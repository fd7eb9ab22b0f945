#!/usr/bin/env bash
# check_layers.sh — the structure the code promises (docs/architecture.md):
#   1. no #include climbs: a file includes only its own folder and folders
#      on lower lines of tests/layers.txt (and every source folder is listed);
#   2. no library file prints to stdout/stderr or exits: printf, puts,
#      putchar, perror, fprintf/fputs to stdout or stderr, exit, _exit and
#      abort appear only under cli/ and bench/ (library code returns a
#      status and fills a kvs_err; printing to a FILE * the caller passes
#      is fine).
# Prints every violation as FILE:LINE and fails if there is one.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 - <<'PY'
import os, re, sys
bad = []
# a folder's rank is its line in tests/layers.txt (comments and blank lines skipped)
lines = [l.split('#')[0].split() for l in open('tests/layers.txt')]
lines = [l for l in lines if l]
rank = {d: i for i, l in enumerate(lines) for d in l}
src_ext = ('.c', '.h', '.cu', '.cuh')
folders = sorted(d for d in os.listdir('.') if os.path.isdir(d) and not d.startswith('.') and
                 any(f.endswith(src_ext) for f in os.listdir(d)) and d not in ('tests', 'build', 'python'))
for d in folders:
    if d not in rank and not d.startswith('build'):
        bad.append(f"{d}/: a source folder missing from tests/layers.txt")
inc = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
printing = re.compile(r'\bprintf\s*\(|\bfprintf\s*\(\s*(stdout|stderr)\b|\bputs\s*\(|'
                      r'\bfputs\s*\([^;]*,\s*(stdout|stderr)\s*\)|\bperror\s*\(|\bputchar\s*\(|'
                      r'(?<![\w.>])_?exit\s*\(|\babort\s*\(')
n_inc = n_files = 0
for d in folders:
    if d not in rank:
        continue
    for f in sorted(os.listdir(d)):
        if not f.endswith(src_ext):
            continue
        path = os.path.join(d, f)
        n_files += 1
        in_comment = False
        for no, text in enumerate(open(path, encoding='utf-8', errors='replace'), 1):
            m = inc.match(text)
            if m:
                n_inc += 1
                target = os.path.normpath(os.path.join(d, m.group(1)))
                tdir = target.split(os.sep)[0] if os.sep in target else d
                if tdir != d:
                    if tdir not in rank:
                        bad.append(f"{path}:{no}: includes {m.group(1)} outside every layer")
                    elif rank[tdir] >= rank[d]:
                        bad.append(f"{path}:{no}: {d}/ (layer {rank[d]}) includes {m.group(1)} "
                                   f"(layer {rank[tdir]}): the include climbs")
            if d in ('cli', 'bench'):
                continue
            code = re.sub(r'/\*.*?\*/|//.*$|"(\\.|[^"\\])*"', '', text)
            if in_comment:
                if '*/' not in code:
                    continue
                code = code.split('*/', 1)[1]
                in_comment = False
            if '/*' in code:
                code, in_comment = code.split('/*', 1)[0], True
            if printing.search(code):
                bad.append(f"{path}:{no}: library code prints or exits: {text.strip()}")
for b in bad:
    print("FAIL:", b)
print(f"check_layers: {n_files} files, {n_inc} includes over {len(lines)} layers; "
      f"{len(bad)} violation(s)")
print(f"{0 if bad else 1} passed, {1 if bad else 0} failed")
sys.exit(1 if bad else 0)
PY
