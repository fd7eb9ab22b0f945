#!/usr/bin/env python3
"""gemm_vs_roofline.py — the roofline's GEMM times against cuBLAS GEMMs
measured on a GPU by `kvsim calibrate` (the kernel_measurements a
scripts/gpu_run.sh run stores; a CSV of them is kept beside its logs).

    bench/gpu/gemm_vs_roofline.py [KVSIM] [MEASUREMENTS.csv] [--gpu NAME] [--model NAME|PATH.conf]...

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
script reads what kvsim uses.  --model may repeat and may name a .conf
(bench/gpu/shards/: one GPU's share of a model at TP 4 or 8); a CSV with a
`model` column (bench/gpu/shard_gemms.sh's gemms.csv) gives each model its
own rows, and with several models the script also prints the error over
all of them for gemm_dim_half 0 .. 1024.  Nothing is fitted here: cuBLAS is what vLLM
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


def roofline_s(k, gpu, m, kk, n, dim_half=None):
    """The roofline's time of an M x K by K x N GEMM under constants k; a
    weight whose smaller dimension d is narrow runs at d / (d + gemm_dim_half)
    of both rates (dim_half: that constant, k's when None)."""
    h = k.get("gemm_dim_half", 0.0) if dim_half is None else dim_half
    slow = (min(kk, n) + h) / min(kk, n)
    flops = 2.0 * m * kk * n
    byts = 2.0 * (kk * n + m * kk + m * n)
    c = flops * slow / (gpu["fp16_flops"] * k["eff_gemm"]) + k["kernel_lat_s"]
    mem = byts * slow / (gpu["hbm_Bps"] * k["eff_hbm"]) + k["kernel_lat_s"]
    return c + k["ridge_loss"] * mem if c > mem else mem + k["ridge_loss"] * c


def conf_shape(path):
    """A model .conf (key = value lines, # comments) as `kvsim models --json`
    gives a model: name, hidden, heads, kv_heads, head_dim, intermediate,
    vocab."""
    md = {}
    try:
        with open(path) as f:
            for no, line in enumerate(f, start=1):
                line = line.split("#", 1)[0].strip()
                if not line:
                    continue
                key, eq, val = (x.strip() for x in line.partition("="))
                if not eq:
                    die(f"{path}:{no}: expected key = value")
                md[key] = val if key == "name" else int(val) if val.isdigit() else val
    except OSError as e:
        die(f"{path}: {e.strerror}")
    for need in ("name", "hidden", "heads", "kv_heads", "head_dim", "intermediate", "vocab"):
        if need not in md or (need != "name" and not isinstance(md[need], int)):
            die(f"{path}: no integer '{need}'")
    return md


def gemm_shapes(md):
    """(K, N) of each GEMM op of the model's layer and its LM head."""
    h, inter, vocab = md["hidden"], md["intermediate"], md["vocab"]
    qkv = (md["heads"] + 2 * md["kv_heads"]) * md["head_dim"]
    return {"qkv_proj": (h, qkv), "o_proj": (md["heads"] * md["head_dim"], h),
            "gate_up_proj": (h, 2 * inter), "down_proj": (inter, h), "lm_head": (h, vocab)}


def read_rows(path, name, shapes):
    """(op, M, median s) of the CSV's GEMMs of model `name` (every row when the
    CSV has no model column: scripts/gpu_run.sh's exports)."""
    rows = []
    try:
        with open(path, newline="") as f:
            for i, r in enumerate(csv.DictReader(f), start=2):
                if r.get("op") not in shapes or r.get("model", name) != name:
                    continue
                try:
                    rows.append((r["op"], int(r["tokens"]), float(r["median_s"])))
                except (KeyError, ValueError):
                    die(f"{path}:{i}: bad tokens or median_s")
    except OSError as e:
        die(f"{path}: {e.strerror}")
    return rows


def report(name, gpu, shapes, rows, ks, path):
    """One model's table; returns {engine: [signed errors]}."""
    print(f"cuBLAS GEMMs measured ({os.path.relpath(path)}) against the roofline: {name} on "
          f"{gpu['name']} ({gpu['hbm_Bps'] / 1e12:.1f} TB/s, {gpu['fp16_flops'] / 1e12:.0f} "
          f"TFLOP/s FP16)")
    print(f"{'op':13s} {'M':>5s} {'K':>6s} {'N':>6s} {'measured':>10s} {'%HBM':>5s} {'%peak':>5s} " +
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
        print(f"{op:13s} {m:5d} {kk:6d} {n:6d} {s * 1e6:8.1f}us {100 * bw:4.0f}% {100 * pk:4.0f}% "
              + " ".join(cells))
    return errs


def summary(label, errs, ks):
    print(f"{label}; median |error| / worst / median signed, by engine profile:")
    for e in ENGINES:
        a = [abs(x) for x in errs[e]]
        k = ks[e]
        print(f"  {e:8s} {statistics.median(a):5.1f}% / {max(a):5.1f}% / "
              f"{statistics.median(errs[e]):+5.1f}%   (eff_gemm {k['eff_gemm']:g}, eff_hbm "
              f"{k['eff_hbm']:g}, kernel_lat {k['kernel_lat_s'] * 1e6:g} us, ridge_loss "
              f"{k['ridge_loss']:g}, gemm_dim_half {k.get('gemm_dim_half', 0):g})")


def main(argv):
    if any(a in ("-h", "--help") for a in argv):
        print(__doc__)
        return 0
    pos, gpu_name, model_names = [], "h200", []
    it = iter(argv)
    for a in it:
        if a in ("--gpu", "--model"):
            v = next(it, None)
            if v is None:
                die(f"{a}: missing value")
            if a == "--gpu":
                gpu_name = v
            else:
                model_names.append(v)
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
    gpu = dict(gpus[gpu_name], name=gpu_name)
    ks = {e: constants(kvsim, e) for e in ENGINES}
    pooled = {e: [] for e in ENGINES}
    grid_rows = []  # (K, N, M, measured s) of every model, for the gemm_dim_half grid
    for model_name in model_names or ["llama-7b"]:
        if model_name.endswith(".conf"):
            md = conf_shape(model_name)
        elif model_name in models:
            md = models[model_name]
        else:
            die(f"--model: unknown model '{model_name}' (kvsim models, or a .conf path)")
        shapes = gemm_shapes(md)
        rows = read_rows(path, md["name"], shapes)
        if not rows:
            die(f"{path}: no GEMM measurements of {md['name']} (op qkv_proj, o_proj, "
                "gate_up_proj, down_proj, lm_head)")
        errs = report(md["name"], gpu, shapes, rows, ks, path)
        summary(f"{len(rows)} GEMMs of {md['name']}", errs, ks)
        for e in ENGINES:
            pooled[e] += errs[e]
        grid_rows += [shapes[op] + (m, s) for op, m, s in rows]
        print()
    if len(model_names) > 1:
        summary(f"all {len(grid_rows)} GEMMs", pooled, ks)
        print("gemm_dim_half over all of them (the narrow-weight slowdown d / (d + h), d the "
              "smaller weight dimension), median |error| / median signed:")
        for h in (0, 64, 128, 256, 512, 1024):
            cells = []
            for e in ENGINES:
                errs = [100.0 * (roofline_s(ks[e], gpu, m, kk, n, h) / s - 1.0)
                        for kk, n, m, s in grid_rows]
                cells.append(f"{e} {statistics.median(abs(x) for x in errs):5.1f}% / "
                             f"{statistics.median(errs):+5.1f}%")
            print(f"  h = {h:4d}: " + "   ".join(cells))
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `| head` ends it quietly
    sys.exit(main(sys.argv[1:]))
