#!/usr/bin/env python3
"""retime_local.py — TTFT and E2E of a stored validation, re-timed two ways,
written apart from the C code (validate/val_summary.c) as a check of it.

  global: the schedule re-timed with the measured step durations, steps
          back to back (val_retime): a step-time error is carried into every
          later step, so on a schedule that never idles TTFT measures the
          drift accumulated since the window began;
  local:  each request on its own clock from its arrival (val_retime_local):
          the steps it waits for and runs in take their measured durations.

    bench/gpu/retime_local.py KVSIM.DB VALIDATION_ID [--json]

Prints p50/p99 TTFT and E2E, simulated vs measured, over the requests whose
every step was replayed (--json: the figures as exact numbers, for
tests/check_gpu_run_dry.sh, which compares them with the report's).
docs/validation.md states both rules."""
import json
import bisect
import math
import os
import sqlite3
import struct
import sys


def pct(v, p):
    """Nearest-rank percentile, as run_metrics_compute takes it."""
    return sorted(v)[max(math.ceil(p * len(v)), 1) - 1]


def main():
    as_json = "--json" in sys.argv[3:]
    usage = "usage: bench/gpu/retime_local.py KVSIM.DB VALIDATION_ID [--json]"
    if len(sys.argv) != 3 + as_json or not sys.argv[2].isdigit():
        print(usage, file=sys.stderr)
        sys.exit(2)
    if not os.path.isfile(sys.argv[1]):
        print(f"retime_local.py: {sys.argv[1]}: no such database", file=sys.stderr)
        sys.exit(2)
    db = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
    vid = int(sys.argv[2])
    run = db.execute("SELECT run_id FROM validations WHERE validation_id = ?", (vid,)).fetchone()
    if not run:
        print(f"retime_local.py: {sys.argv[1]}: no validation {vid}", file=sys.stderr)
        sys.exit(2)
    run = run[0]
    arr = dict(db.execute("SELECT req_id, arrival_s FROM requests WHERE run_id = ?", (run,)))
    status = dict(db.execute("SELECT req_id, status FROM requests WHERE run_id = ?", (run,)))
    steps = db.execute("SELECT start_s, dur_s, members FROM steps WHERE run_id = ? "
                       "ORDER BY step_id", (run,)).fetchall()
    vs = {s: (p, m) for s, p, m in db.execute(
        "SELECT step_id, predicted_s, measured_s FROM validation_steps "
        "WHERE validation_id = ?", (vid,))}
    n = len(steps)
    pred = [vs[i][0] if i in vs else steps[i][1] for i in range(n)]
    meas = [vs[i][1] if i in vs else pred[i] for i in range(n)]
    members = [[struct.unpack_from("<i", b, o)[0] for o in range(0, len(b), 24)]
               for _, _, b in steps]
    first, last = {}, {}
    for i, ms in enumerate(members):
        for q in ms:
            first.setdefault(q, i)
            last[q] = i
    latest = [max((arr[q] for q in ms), default=-math.inf) for ms in members]
    wait, old_end = [], -math.inf
    for i, (start, dur, _) in enumerate(steps):
        bound = max(old_end, latest[i])
        wait.append(0.0 if math.isinf(bound) else max(start - bound, 0.0))
        old_end = start + dur

    def clock(dur, i0, i1, end):
        ends = {}
        for i in range(i0, i1 + 1):
            bound = max(end, latest[i])
            end = (steps[i][0] if math.isinf(bound) else bound + wait[i]) + dur[i]
            ends[i] = end
        return ends

    pe, ge = clock(pred, 0, n - 1, -math.inf), clock(meas, 0, n - 1, -math.inf)
    pe = [pe[i] for i in range(n)]
    covered = [q for q in first if all(i in vs for i in range(first[q], last[q] + 1))]
    out = {"simulated": ([], []), "global": ([], []), "local": ([], [])}
    for q in covered:
        a, f, l = arr[q], first[q], last[q]
        k = min(bisect.bisect_right(pe, a), f)
        start, end = k, pe[k - 1] if k > 0 else -math.inf
        if k < f and pe[k] - pred[k] < a:  # step k was running at a
            end = pe[k] + (pe[k] - a) * (meas[k] - pred[k]) / pred[k]
            start = k + 1
        le = clock(meas, start, l, end)
        fin = status[q] == "finished" or status[q] == 0
        for name, e in (("simulated", pe), ("global", ge), ("local", le)):
            out[name][0].append(e[f] - a)
            if fin:
                out[name][1].append(e[l] - a)
    if as_json:
        print(json.dumps({name: {f"{m}_p{int(p * 100)}_s": pct(out[name][i], p)
                                 for i, m in enumerate(("ttft", "e2e")) for p in (0.50, 0.99)}
                          for name in out}))
        return
    print(f"validation {vid} (run {run}): {len(covered)} requests covered")
    for i, metric in enumerate(("TTFT", "E2E")):
        for p in (0.50, 0.99):
            s = pct(out["simulated"][i], p)
            row = f"  {metric} p{int(p * 100):<2} simulated {s:9.4f} s"
            for name in ("global", "local"):
                m = pct(out[name][i], p)
                row += f" | {name} measured {m:9.4f} s, error {100 * (s - m) / m:+6.1f}%"
            print(row)


if __name__ == "__main__":
    main()
