#!/usr/bin/env python3
"""emu_transform.py IN.cu OUT.cpp — rewrite a kvsim .cu file for the host
emulation (tests/emu/cuda_emu.h): the internal header becomes the emulated
one (whose cp.async helpers are queued copies), `extern __shared__` becomes
the block's dynamic buffer, and every kernel<<<grid, block, smem,
stream>>>(args) launch becomes emu::launch(grid, block, smem, [&] {
kernel(args); })."""
import re, sys

src = open(sys.argv[1]).read()
src = src.replace('#include "cuda_internal.cuh"', '#include "cuda_internal_emu.h"')
src = src.replace('#include <mma.h>', '')
src = re.sub(r'extern __shared__ __align__\(\d+\) unsigned char (\w+)\[\];',
             r'unsigned char *\1 = emu::cur_block->dyn_smem;', src)
out, i = [], 0
while True:
    j = src.find('<<<', i)
    if j < 0:
        out.append(src[i:])
        break
    # the kernel name before <<<: identifier with optional <...> template args
    k = j
    if src[k - 1] == '>':
        depth = 0
        while True:
            k -= 1
            if src[k] == '>':
                depth += 1
            elif src[k] == '<':
                depth -= 1
                if depth == 0:
                    break
    m = re.search(r'[A-Za-z_]\w*$', src[:k])
    name_start = m.start()
    kernel = src[name_start:j]
    e = src.index('>>>', j)
    cfg, depth, cur = [], 0, ''
    for ch in src[j + 3:e]:  # split at top-level commas
        depth += ch == '(' and 1 or ch == ')' and -1 or 0
        if ch == ',' and depth == 0:
            cfg.append(cur.strip())
            cur = ''
        else:
            cur += ch
    cfg.append(cur.strip())
    p = e + 3
    assert src[p] == '(', src[p:p + 20]
    depth, q = 0, p
    while True:
        if src[q] == '(':
            depth += 1
        elif src[q] == ')':
            depth -= 1
            if depth == 0:
                break
        q += 1
    args = src[p + 1:q]
    smem = cfg[2] if len(cfg) > 2 else '0'
    out.append(src[i:name_start])
    out.append('emu::launch(%s, %s, %s, [&] { %s(%s); })' % (cfg[0], cfg[1], smem, kernel, args))
    i = q + 1
open(sys.argv[2], 'w').write(''.join(out))
