#!/usr/bin/env python3
"""Fit the GEMM efficiency of SGLang v0.3/v0.4 (eff_gemm) for the tables of that era.

    bench/fidelity/fit_sglang_gemm.py [KVSIM]

With the default roofline (eff_gemm 0.7, what vLLM's and TensorRT-LLM's
tables of 2024-2025 support) every SGLang table of late 2024 reads too fast
where the GPU is busy: the DataCrunch H200 runs of SGLang v0.4 with all
requests at t=0 by +28..+60% in output tok/s, SGLang v0.3's own ShareGPT
offline rows by +25% (8B, A100) and +51% (70B TP 4, H100), its issue #1362
(405B FP8, TP 8) by +81%, while the same runs at light load are within a
few percent or slow.  What is slow at large batches in those versions is
not pinned down by any source found (v0.4's blog calls its batch scheduler
zero-overhead, which rules out CPU time per sequence as the cause), so the
era's tables take a measured GEMM efficiency, set in their map.csv lines;
the sglang profile itself (pinned to v0.5.18) keeps the default.

The FIT rows are the output tok/s of the DataCrunch Llama-3.3-70B TP 4 runs
with all requests at t=0, one per configuration (6 rows: five random-length
runs and one ShareGPT run; the 4096/1024 run's repeat is left out).  Each value of eff_gemm on a grid runs them; the value with the
smallest median |error| is printed (a median over 6 rows, so no single row
decides).  Everything else is CHECK data for it, which run.py prints: the
same runs' latency rows, the 70B runs at 1-16 req/s, the 405B TP 8 runs,
SGLang v0.3's ShareGPT table (A100 TP 1, H100 TP 4) and issue #1362.

What it printed (2026-12-04): 0.45 (median |err| 8.3%; 0.425 8.6%, 0.475
9.1%, 0.4 9.2%, 0.7 45.8%); row by row the optimum runs from 0.40 (the
4096-token prompts) to 0.47 (256/512).  The checks at 0.45 are in
docs/cost-models.md, section 5.
"""
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402  (the suite's runner: table loading, row planning)

TABLE = run.SGLANG_GEMM_FIT_TABLE
GRID = [round(0.35 + 0.025 * i, 3) for i in range(19)]  # 0.35 .. 0.80


def fit_rows(table):
    return [r for r in table["rows"] if run.sglang_gemm_fit_row(table, r)]


def main(args):
    kvsim, m, table = run.fit_start(args, TABLE)
    rows = fit_rows(table)
    best = None
    with tempfile.TemporaryDirectory(prefix="kvsim-fit-sglang-gemm-") as tmp:
        db, made = os.path.join(tmp, "fit.db"), {}
        for g in GRID:
            errs = []
            for r in rows:
                argv, _ = run.plan_row(r, table, m)
                argv = run.without_flag(argv, "--cost") + ["--cost", f"roofline:eff_gemm={g}"]
                errs.append(run.row_figure(kvsim, argv, r, db, tmp, made)[1])
            med = statistics.median(abs(e) for e in errs)
            print(f"eff_gemm {g:5.3f}: median |err| {med:5.1f}%  " +
                  " ".join(f"{e:+6.1f}%" for e in errs))
            if best is None or med < best[0] - 1e-9:
                best = (med, g)
    print(f"{len(rows)} FIT rows ({', '.join(r['id'] for r in rows)})")
    print(f"-> eff_gemm {best[1]} (median |err| {best[0]:.1f}%)")
    return 0


if __name__ == "__main__":
    run.fit_script_main(main, "fit_sglang_gemm.py", __doc__)
