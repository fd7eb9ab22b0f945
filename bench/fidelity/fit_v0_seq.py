#!/usr/bin/env python3
"""Fit the per-sequence step cost of vLLM V0 before v0.6.0 (step_overhead_seq_s).

    bench/fidelity/fit_v0_seq.py [KVSIM]

Until v0.6.0 (async output processing, multi-step scheduling) vLLM's V0
engine turned every sampled token into Python objects, detokenized it and
prepared the next step's inputs one sequence at a time while the GPU
waited.  The vLLM RFC "Asynchronous Output Processor"
(vllm-project/vllm#6913, 2024-07-29) measured `_process_model_outputs`
alone at 0.2 ms for a batch of 1 and 3.4 ms for a batch of 32 (Llama-3-70B
FP8 on 4x H100): about 100 us per sequence per step.  kvsim's `vllm-v0`
profile stays byte-identical (3 ms per step, nothing per sequence); the
fidelity tables of that era add the per-sequence cost in map.csv.

The FIT table is vllm_pr7117_throughput_fit (Llama-3-8B, one H100, 1000
requests of 256/256 at once: 256-sequence decode steps whose GPU time is
known best at TP 1).  Each value of step_overhead_seq_us on a grid runs the
row; the value with the smallest |error| is printed.  Its checks are the
other V0 tables of 2023-2024 (PR #5882: Llama-2-7B at TP 8 on H100s;
PR #2192: one batch of 64 of Llama-2-70B at TP 4 on A100s), which
run.py prints with the fitted value.

What it printed (2026-12-03): 80 us (+0.3%; 75 us +3.6%, 85 us -2.7%),
next to the RFC's ~100 us of output processing alone at batch 32.
"""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402  (the suite's runner: table loading, row planning)

FIT_TABLE = "vllm_pr7117_throughput_fit"
GRID_US = [5 * i for i in range(31)]  # 0 .. 150 us


def main(args):
    kvsim, m, table = run.fit_start(args, FIT_TABLE)
    best = None
    with tempfile.TemporaryDirectory(prefix="kvsim-fit-v0-seq-") as tmp:
        db = os.path.join(tmp, "fit.db")
        for us in GRID_US:
            errs = []
            for r in table["rows"]:
                argv, _ = run.plan_row(r, table, m)
                argv = run.without_flag(argv, "--cost") + ["--cost", f"roofline:step_overhead_seq_us={us}"]
                errs.append(run.row_figure(kvsim, argv, r, db, tmp)[1])
            worst = max(abs(e) for e in errs)
            print(f"step_overhead_seq_us {us:3d}: " + " ".join(f"{e:+6.1f}%" for e in errs))
            if best is None or worst < best[0] - 1e-9:
                best = (worst, us)
    print(f"{len(table['rows'])} FIT row(s) -> step_overhead_seq_us {best[1]} (|err| {best[0]:.1f}%)")
    return 0


if __name__ == "__main__":
    run.fit_script_main(main, "fit_v0_seq.py", __doc__)
