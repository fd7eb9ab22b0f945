#!/usr/bin/env python3
"""py_threads.py — does kvsim.run release the GIL?  Times one run alone,
then 2 and 4 copies (different seeds) in as many threads, and prints the
ratios and the CPU time per wall second the 4 threads used (which other
load on the machine lowers less than it spoils the wall-clock ratios).  With the GIL released, on 2 cores: 2 threads take about the time
of one run and 4 threads about twice that (ratio t4/t2 ~ 2, speedup
4 * t1 / t4 ~ 2); with it held, 2 threads would take 2 x t1 and the
speedup would be ~1.

    python3 bench/py_threads.py [--n REQUESTS] [--repeat K]
(needs the kvsim package: pip install ./python)
"""
import argparse
import os
import sys
import threading
import time

kvsim = None  # imported in main(), so that --help works without the package


def one(seed: int, n: int) -> None:
    kvsim.run(model="llama-2-7b", seed=seed,
              workload=f"arrival=poisson,rate=20,n={n},prompt=uniform:16:800,output=uniform:1:120")


CPU = {}  # threads -> best CPU seconds / wall seconds seen


def timed(threads: int, n: int) -> float:
    ts = [threading.Thread(target=one, args=(s, n)) for s in range(threads)]
    t, c = time.perf_counter(), time.process_time()
    for th in ts:
        th.start()
    for th in ts:
        th.join()
    wall = time.perf_counter() - t
    CPU[threads] = max(CPU.get(threads, 0.0), (time.process_time() - c) / wall)
    return wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=40000, help="requests per run (default 40000)")
    ap.add_argument("--repeat", type=int, default=3, help="best of K timings (default 3)")
    a = ap.parse_args()
    global kvsim
    try:
        import kvsim
    except ImportError as e:
        print(f"py_threads.py: the kvsim package is not importable ({e}): pip install ./python",
              file=sys.stderr)
        sys.exit(2)
    best = {k: min(timed(k, a.n) for _ in range(a.repeat)) for k in (1, 2, 4)}
    cores = len(os.sched_getaffinity(0))
    print(f"kvsim {kvsim.__version__}, {cores} cores, {a.n} requests per run, best of {a.repeat}")
    for k, t in best.items():
        print(f"  {k} thread{'s' if k > 1 else ' '}: {t:7.3f} s")
    print(f"ratio 4 threads / 2 threads: {best[4] / best[2]:.2f} (2.0 on 2 cores when the GIL "
          f"is released)")
    print(f"4 threads / 2 runs in a row: {best[4] / (2 * best[1]):.2f} (1.0 on 2 cores: four "
          f"threads finish in the time of two runs)")
    print(f"CPU seconds per wall second with 4 threads: {CPU[4]:.2f} (above 1: threads "
          f"simulated at the same time; at most 1 with the GIL held)")
    print(f"speedup of 4 threads over 4 runs in a row: {4 * best[1] / best[4]:.2f} "
          f"(min(4, cores) ideal, 1.0 with the GIL held)")


if __name__ == "__main__":
    main()
