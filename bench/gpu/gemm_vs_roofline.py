#!/usr/bin/env python3
"""gemm_vs_roofline.py — the roofline's GEMM times against cuBLAS GEMMs
measured on a GPU by `kvsim calibrate` (the kernel_measurements a
scripts/gpu_run.sh run stores; a CSV of them is kept beside its logs).

    bench/gpu/gemm_vs_roofline.py [KVSIM] [MEASUREMENTS.csv] [--gpu NAME] [--model NAME]

Defaults: build/kvsim, bench/gpu/h200-2026-12-04/run2/kernel_measurements.csv,
h200, llama-7b.  For each GEMM op of the model's layer (qkv_proj, o_proj,
gate_up_proj, down_proj) and the lm_head, at every measured token count M,
it prints the measured time, the fraction of HBM bandwidth and of the dense
FP16 peak it reached, and the roofline's time under each engine profile's
constants, with the signed error (roofline - measured) / measured.

The roofline term is the one docs/cost-models.md section 1 gives for a
GEMM of M tokens by a K x N weight: compute = 2 M K N / (peak x eff_gemm),
memory = 2 (K N + M K + M N) bytes / (HBM x eff_hbm), each plus
kernel_lat_s, time = the larger plus ridge_loss x the smaller.  The
constants come from `kvsim cost show --engine NAME`, the GPU's figures from
`kvsim gpus --json` and the shapes from `kvsim models --json`, so the
script reads what kvsim uses.  Nothing is fitted here: cuBLAS is what vLLM
and SGLang call for unquantized FP16/BF16 linear layers, so this checks
the constants against the kernels they stand for on one GPU and model."""
import csv
import json
import os
import signal
import statistics
import subprocess
import sys

ENGINES = ("vllm-v1", "vllm-v0", "trtllm", "sglang")
UNITS = {"fraction": 1.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "elements": 1.0}


def die(msg):
    print(f"gemm_vs_roofline.py: {msg}", file=sys.stderr)
    sys.exit(2)


def kvsim_out(kvsim, *args):
    """What `kvsim ARGS` prints; one line naming the command when it fails."""
    try:
        return subprocess.run([kvsim, *args], check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        die(f"{kvsim} {' '.join(args)} failed: {e}")


def kvsim_json(kvsim, *args):
    return json.loads(kvsim_out(kvsim, *args))


def constants(kvsim, engine):
    """The effective roofline constants of an engine profile, in SI units."""
    out = kvsim_out(kvsim, "cost", "show", "--engine", engine)
    k = {}
    for line in out.splitlines()[1:]:
        f = line.split()
        if len(f) >= 3 and f[2] in UNITS:
            k[f[0]] = float(f[1]) * UNITS[f[2]]
    for need in ("eff_gemm", "eff_hbm", "kernel_lat_s", "ridge_loss"):
        if need not in k:
            die(f"kvsim cost show --engine {engine} printed no {need}")
    return k


def roofline_s(k, gpu, m, kk, n):
    flops = 2.0 * m * kk * n
    byts = 2.0 * (kk * n + m * kk + m * n)
    c = flops / (gpu["fp16_flops"] * k["eff_gemm"]) + k["kernel_lat_s"]
    mem = byts / (gpu["hbm_Bps"] * k["eff_hbm"]) + k["kernel_lat_s"]
    return c + k["ridge_loss"] * mem if c > mem else mem + k["ridge_loss"] * c


def main(argv):
    if any(a in ("-h", "--help") for a in argv):
        print(__doc__)
        return 0
    pos, gpu_name, model_name = [], "h200", "llama-7b"
    it = iter(argv)
    for a in it:
        if a in ("--gpu", "--model"):
            v = next(it, None)
            if v is None:
                die(f"{a}: missing value")
            if a == "--gpu":
                gpu_name = v
            else:
                model_name = v
        elif a.startswith("-"):
            die(f"unknown option '{a}' (see --help)")
        else:
            pos.append(a)
    if len(pos) > 2:
        die(f"unexpected argument '{pos[2]}' (see --help)")
    here = os.path.dirname(os.path.abspath(__file__))
    kvsim = pos[0] if pos else os.path.join(here, "..", "..", "build", "kvsim")
    path = pos[1] if len(pos) > 1 else os.path.join(here, "h200-2026-12-04", "run2",
                                                   "kernel_measurements.csv")
    if not os.access(kvsim, os.X_OK):
        die(f"{kvsim}: no kvsim binary there (build it with scripts/setup.sh)")
    gpus = {g["name"]: g for g in kvsim_json(kvsim, "gpus", "--json")["gpus"]}
    models = {m["name"]: m for m in kvsim_json(kvsim, "models", "--json")["models"]}
    if gpu_name not in gpus:
        die(f"--gpu: unknown GPU '{gpu_name}' (kvsim gpus)")
    if model_name not in models:
        die(f"--model: unknown model '{model_name}' (kvsim models)")
    gpu, md = gpus[gpu_name], models[model_name]
    h, inter, vocab = md["hidden"], md["intermediate"], md["vocab"]
    qkv = (md["heads"] + 2 * md["kv_heads"]) * md["head_dim"]
    shapes = {"qkv_proj": (h, qkv), "o_proj": (md["heads"] * md["head_dim"], h),
              "gate_up_proj": (h, 2 * inter), "down_proj": (inter, h), "lm_head": (h, vocab)}
    rows = []
    try:
        with open(path, newline="") as f:
            for i, r in enumerate(csv.DictReader(f), start=2):
                if r.get("op") not in shapes:
                    continue
                try:
                    rows.append((r["op"], int(r["tokens"]), float(r["median_s"])))
                except (KeyError, ValueError):
                    die(f"{path}:{i}: bad tokens or median_s")
    except OSError as e:
        die(f"{path}: {e.strerror}")
    if not rows:
        die(f"{path}: no GEMM measurements (op qkv_proj, o_proj, gate_up_proj, down_proj, lm_head)")
    ks = {e: constants(kvsim, e) for e in ENGINES}
    print(f"cuBLAS GEMMs measured ({os.path.relpath(path)}) against the roofline: {model_name} on {gpu_name} "
          f"({gpu['hbm_Bps'] / 1e12:.1f} TB/s, {gpu['fp16_flops'] / 1e12:.0f} TFLOP/s FP16)")
    print(f"{'op':13s} {'M':>5s} {'measured':>10s} {'%HBM':>5s} {'%peak':>5s} " +
          " ".join(f"{e:>8s}" for e in ENGINES))
    errs = {e: [] for e in ENGINES}
    for op, m, s in sorted(rows, key=lambda r: (list(shapes).index(r[0]), r[1])):
        kk, n = shapes[op]
        bw = 2.0 * (kk * n + m * kk + m * n) / s / gpu["hbm_Bps"]
        pk = 2.0 * m * kk * n / s / gpu["fp16_flops"]
        cells = []
        for e in ENGINES:
            err = 100.0 * (roofline_s(ks[e], gpu, m, kk, n) / s - 1.0)
            errs[e].append(err)
            cells.append(f"{err:+7.1f}%")
        print(f"{op:13s} {m:5d} {s * 1e6:8.1f}us {100 * bw:4.0f}% {100 * pk:4.0f}% " + " ".join(cells))
    print(f"{len(rows)} GEMMs; median |error| / worst / median signed, by engine profile:")
    for e in ENGINES:
        a = [abs(x) for x in errs[e]]
        k = ks[e]
        print(f"  {e:8s} {statistics.median(a):5.1f}% / {max(a):5.1f}% / "
              f"{statistics.median(errs[e]):+5.1f}%   (eff_gemm {k['eff_gemm']:g}, eff_hbm "
              f"{k['eff_hbm']:g}, kernel_lat {k['kernel_lat_s'] * 1e6:g} us, ridge_loss "
              f"{k['ridge_loss']:g})")
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `| head` ends it quietly
    sys.exit(main(sys.argv[1:]))
