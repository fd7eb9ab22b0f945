#!/usr/bin/env python3
"""Run durations of the TensorRT-LLM v0.14 online-serving table, real vs kvsim.

    bench/fidelity/durations.py [KVSIM]

The table's output throughput is its N requests' output tokens over the
run's duration, so every output_tok_s row gives that duration, N x OSL /
(output tok/s), for the real run and for kvsim's (a dataset row's OSL is
its recorded mean, NAME@MEAN).  Prints both and their
difference per row, in the table's order (model and GPU, ISL/OSL, QPS).  A
difference that stays the same at light and heavy load is a property of the
workload (a tail of long requests), not of the engine's capacity
(bench/fidelity/README.md, "The 202/214 rows").  Fits nothing.
"""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402  (the suite's runner: table loading, row planning)

TABLE = run.FRONTEND_FIT_TABLE


def main(args):
    kvsim, m, table = run.fit_start(args, TABLE)
    rows = [r for r in table["rows"] if r["metric"] == "output_tok_s"]
    print(f"{'id':<42} {'real s':>8} {'kvsim s':>8} {'real-kvsim':>11}")
    with tempfile.TemporaryDirectory(prefix="kvsim-durations-") as tmp:
        db = os.path.join(tmp, "d.db")
        for r in rows:
            argv, _ = run.plan_row(r, table, m)
            sim = run.row_figure(kvsim, argv, r, db, tmp)[0]
            # a fixed OSL, or a dataset's recorded mean (NAME@MEAN): both runs'
            # output tokens are then taken as N x MEAN
            tokens = int(r["n_requests"]) * float(r["osl"].rpartition("@")[2])
            real_s, sim_s = tokens / float(r["value"]), tokens / sim
            print(f"{r['id']:<42} {real_s:8.1f} {sim_s:8.1f} {real_s - sim_s:+11.1f}")
    return 0


if __name__ == "__main__":
    run.fit_script_main(main, "durations.py", __doc__)
