#!/usr/bin/env python3
"""kvsim's fidelity suite: published measurements of real engines vs kvsim.

    bench/fidelity/run.py [KVSIM] [--list] [--only SUBSTR] [--data DIR]

KVSIM is the kvsim binary (default build/kvsim).  For every data file in
bench/fidelity/data/ and every row, run kvsim on that row's conditions and
print real vs simulated with the signed error, then median and worst |error|
per table and one summary line per table.  --list prints the tables without
running kvsim.  --only keeps the data files whose name contains SUBSTR;
--data reads the data files from DIR instead of bench/fidelity/data.

How a row becomes a kvsim command is data, not code:
  - bench/fidelity/map.csv maps the source's model (+ precision), GPU and
    dataset names to kvsim arguments, and may add flags to a whole table;
  - the row's kvsim_flags column adds flags for that row (engine settings
    the source gives, e.g. --max-seqs, --max-batched-tokens, --max-model-len).
A row whose model, GPU or dataset has no kvsim counterpart is printed as
"skipped: <reason>".  A row kvsim refuses (e.g. weights do not fit) is
printed as "failed: <kvsim's message>".  Neither enters the error figures.

Exit status: 0 whatever the errors are (this is a benchmark, not a test);
2 with one line naming file and line when a data or map file is malformed
(or the kvsim binary is missing).  Python 3 standard library only.
"""

import csv
import io
import json
import math
import os
import random
import re
import shlex
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DATA = os.path.join(HERE, "data")
MAP = os.path.join(HERE, "map.csv")

COLUMNS = ["id", "model", "gpu", "tp", "precision", "isl", "osl", "n_requests",
           "arrival", "rate", "metric", "value", "unit", "kvsim_flags", "notes"]
ARRIVALS = ("burst", "poisson", "capacity")


# metric name -> (kvsim subcommand, function of kvsim's JSON and the row)
def _ms(key):
    return lambda j, r: j[key] * 1000.0


METRICS = {
    "output_tok_s": ("run", lambda j, r: j["throughput_tok_s"]),
    "output_tok_s_per_gpu": ("run", lambda j, r: j["throughput_tok_s"] / int(r["tp"])),
    "req_s": ("run", lambda j, r: j["throughput_req_s"]),
    # input + output tokens per second; fixed-length rows only
    "total_tok_s": ("run", lambda j, r: j["throughput_req_s"] * (int(r["isl"]) + int(r["osl"]))),
    "ttft_mean_ms": ("run", _ms("ttft_mean_s")),
    "ttft_median_ms": ("run", _ms("ttft_p50_s")),
    "tpot_mean_ms": ("run", _ms("tpot_mean_s")),
    "tpot_median_ms": ("run", _ms("tpot_p50_s")),
    # the gaps between consecutive tokens of every request, pooled (as the
    # benchmark clients pool them: vLLM's benchmark_serving, SGLang's
    # bench_serving); kvsim's itl_* since its ITL tracker (runs.itl_*)
    "itl_mean_ms": ("run", _ms("itl_mean_s")),
    "itl_median_ms": ("run", _ms("itl_p50_s")),
    "e2e_mean_ms": ("run", _ms("e2e_mean_s")),
    "e2e_median_ms": ("run", _ms("e2e_p50_s")),
    # one fixed batch run to completion: the makespan
    "batch_latency_ms": ("run", _ms("makespan_s")),
    "kv_blocks": ("capacity", lambda j, r: j["kv_blocks"]),
}


class Malformed(Exception):
    pass


def read_csv_with_comments(path):
    """Return (comment lines, header, [(line number, row dict)])."""
    comments, header, rows = [], None, []
    with open(path, newline="", encoding="utf-8") as f:
        lines = f.read().splitlines()
    for no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        if line.lstrip().startswith("#"):
            if header is None:
                comments.append(line.lstrip()[1:].strip())
                continue
            raise Malformed(f"{path}:{no}: comment after the header")
        try:
            fields = next(csv.reader(io.StringIO(line)))
        except csv.Error as e:
            raise Malformed(f"{path}:{no}: {e}")
        if header is None:
            header = [h.strip() for h in fields]
            continue
        if len(fields) != len(header):
            raise Malformed(f"{path}:{no}: {len(fields)} fields, the header has {len(header)}")
        rows.append((no, dict(zip(header, (x.strip() for x in fields)))))
    if header is None:
        raise Malformed(f"{path}:1: no header line")
    return comments, header, rows


def load_map():
    _, header, rows = read_csv_with_comments(MAP)
    want = ["kind", "name", "precision", "kvsim", "note"]
    if header != want:
        raise Malformed(f"{MAP}:1: header must be {','.join(want)}")
    m = {"model": {}, "gpu": {}, "dataset": {}, "table": {}}
    for no, r in rows:
        if r["kind"] not in m:
            raise Malformed(f"{MAP}:{no}: kind must be one of {', '.join(m)}")
        if not r["name"]:
            raise Malformed(f"{MAP}:{no}: empty name")
        key = (r["name"], r["precision"] or "*")
        if key in m[r["kind"]]:
            raise Malformed(f"{MAP}:{no}: {r['kind']} {r['name']} {key[1]} mapped twice")
        if r["kind"] == "dataset" and r["kvsim"]:
            for kv in r["kvsim"].split("|")[1:]:
                k, _, v = kv.partition("=")
                ok = is_int(v) if k in ("min_len", "max_prompt", "max_total") else \
                    is_pos_float(v) if k in ("mean_in", "mean_out") else \
                    os.path.isfile(os.path.join(ROOT, v)) if k == "out_from" else False
                if not ok:
                    raise Malformed(f"{MAP}:{no}: bad dataset filter {kv!r} (min_len=N, "
                                    "max_prompt=N, max_total=N, mean_in=X, mean_out=X, "
                                    "out_from=FILE)")
        m[r["kind"]][key] = (r["kvsim"], r["note"])
    return m


def lookup(table, name, precision="*"):
    return table.get((name, precision)) or table.get((name, "*"))


UNIFORM_PAIR = re.compile(r"uniform:\d+:\d+\+uniform:\d+:\d+")


def dataset_of(col):
    """The dataset name of an isl/osl cell, NAME or NAME@MEAN (MEAN > 0: the mean
    length the run recorded for that side), or None if the cell is malformed."""
    name, at, mean = col.partition("@")
    if not name or (at and not is_pos_float(mean)):
        return None
    return name


def is_pos_float(s):
    try:
        return float(s) > 0 and math.isfinite(float(s))
    except ValueError:
        return False


def is_int(s):
    try:
        return int(s) > 0
    except ValueError:
        return False


def is_num(s):
    try:
        float(s)
        return True
    except ValueError:
        return False


def load_table(path):
    comments, header, rows = read_csv_with_comments(path)
    if header != COLUMNS:
        raise Malformed(f"{path}:{len(comments) + 1}: header must be {','.join(COLUMNS)}")
    role = "CHECK"
    for c in comments:
        if c.lower().startswith("role:"):
            role = "FIT" if c.split(":", 1)[1].strip().upper().startswith("FIT") else "CHECK"
    seen = set()
    for no, r in rows:
        where = f"{path}:{no}"
        if not r["id"] or r["id"] in seen:
            raise Malformed(f"{where}: empty or repeated id {r['id']!r}")
        seen.add(r["id"])
        for col in ("model", "gpu", "precision", "metric", "unit"):
            if not r[col]:
                raise Malformed(f"{where}: empty {col}")
        if not is_int(r["tp"]):
            raise Malformed(f"{where}: tp must be a positive integer, not {r['tp']!r}")
        if not is_num(r["value"]) or float(r["value"]) <= 0:
            raise Malformed(f"{where}: value must be a positive number, not {r['value']!r}")
        if r["metric"] not in METRICS:
            raise Malformed(f"{where}: unknown metric {r['metric']!r} (known: {', '.join(METRICS)})")
        if r["arrival"] not in ARRIVALS:
            raise Malformed(f"{where}: arrival must be one of {', '.join(ARRIVALS)}")
        cmd = METRICS[r["metric"]][0]
        if (cmd == "capacity") != (r["arrival"] == "capacity"):
            raise Malformed(f"{where}: metric {r['metric']} needs arrival "
                            f"{'capacity' if cmd == 'capacity' else 'burst or poisson'}")
        if cmd == "run":
            if not is_int(r["n_requests"]):
                raise Malformed(f"{where}: n_requests must be a positive integer")
            fixed = [is_int(r["isl"]), is_int(r["osl"])]
            names = [dataset_of(r["isl"]), dataset_of(r["osl"])]
            if fixed[0] != fixed[1] or (not fixed[0] and (not names[0] or names[0] != names[1])):
                raise Malformed(f"{where}: isl/osl must both be token counts or both one dataset "
                                "name (each optionally NAME@MEAN: the mean the run recorded)")
            if r["metric"] == "total_tok_s" and not fixed[0]:
                raise Malformed(f"{where}: total_tok_s needs fixed isl/osl")
        if r["arrival"] == "poisson" and not (is_num(r["rate"]) and float(r["rate"]) > 0):
            raise Malformed(f"{where}: poisson needs a positive rate")
        try:
            shlex.split(r["kvsim_flags"])
        except ValueError as e:
            raise Malformed(f"{where}: kvsim_flags: {e}")
    name = os.path.basename(path)[:-4]
    source = next((c for c in comments if c.lower().startswith(("source", "cited"))), "")
    return {"path": path, "name": name, "role": role, "comments": comments,
            "rows": [r for _, r in rows], "source": source}


def plan_row(row, table, m):
    """Return (argv after the binary, mapping text) or (None, skip reason)."""
    mm = lookup(m["model"], row["model"], row["precision"])
    if mm is None:
        return None, f"model {row['model']} {row['precision']} not in map.csv"
    if not mm[0]:
        return None, mm[1] or f"no kvsim model for {row['model']} {row['precision']}"
    gm = lookup(m["gpu"], row["gpu"])
    if gm is None:
        return None, f"GPU {row['gpu']} not in map.csv"
    if not gm[0]:
        return None, gm[1] or f"no kvsim GPU for {row['gpu']}"
    model_args, gpu = mm[0].split(), gm[0]
    model = model_args[0]
    mapping = f"{row['model']} {row['precision']} -> {os.path.basename(model)}"
    if model_args[1:]:
        mapping += " " + " ".join(model_args[1:])
    if mm[1]:
        mapping += f" ({mm[1]})"
    mapping += f"; {row['gpu']} -> {gpu}"
    cmd = METRICS[row["metric"]][0]
    argv = [cmd, "--model", model, "--gpu", gpu, "--tp", row["tp"]] + model_args[1:]
    if cmd == "capacity":
        # the KV cache the engine profile sizes: a one-request run reports it
        argv[0] = "run"
        argv += ["--synthetic", "arrival=burst,n=1,prompt=16,output=2"]
    if cmd == "run":
        if row["arrival"] == "burst":
            spec = f"arrival=burst,n={row['n_requests']}"
        else:
            spec = f"arrival=poisson,rate={row['rate']},n={row['n_requests']}"
        if is_int(row["isl"]):
            spec += f",prompt={row['isl']},output={row['osl']}"
        elif UNIFORM_PAIR.fullmatch(row["isl"]):
            # a random-length workload, "uniform:A:B+uniform:C:D" (SGLang's
            # bench_serving --dataset-name random: prompt uniform on [A, B],
            # output on [C, D]); kvsim's outputs are at least one token
            pr, out = row["isl"].split("+")
            lo, hi = out.split(":")[1:]
            out = f"uniform:{max(1, int(lo))}:{hi}"
            spec += f",prompt={pr},output={out}"
            mapping += f"; lengths {pr} / {out}"
        else:
            name = dataset_of(row["isl"])
            dm = lookup(m["dataset"], name)
            if dm is None:
                return None, f"dataset {name} not in map.csv"
            if not dm[0]:
                return None, dm[1] or f"no kvsim lengths for dataset {name}"
            # NAME@MEAN: the run's own token totals (mean per request) rescale
            # the file's lengths (lengths_file's mean_in / mean_out)
            means = [f"|mean_{k}={c.partition('@')[2]}" for k, c in
                     (("in", row["isl"]), ("out", row["osl"])) if "@" in c]
            src = dm[0] + "".join(means)
            spec += f",lengths={LENGTHS_MARK}{src}"
            parts = src.split("|")
            mapping += f"; {name} -> {os.path.basename(parts[0])}"
            if len(parts) > 1:
                mapping += f" [{', '.join(parts[1:])}]"
        argv += ["--synthetic", spec]
    tm = lookup(m["table"], table["name"])
    if tm and tm[0]:
        for a in shlex.split(tm[0]):
            if a == TRTLLM_BENCH:
                extra, note = trtllm_bench_settings(row, model, model_args[1:], gpu)
                argv += extra
                mapping += note
            else:
                argv.append(a)
    argv += shlex.split(row["kvsim_flags"])
    return argv, mapping


TRTLLM_BENCH = "@trtllm-bench"  # in a table's map.csv flags: trtllm-bench's engine settings
KVSIM_BIN = ["build/kvsim"]     # set by main: the binary the rows run


def trtllm_bench_settings(row, model, model_flags, gpu):
    """trtllm-bench's engine settings for a row of fixed ISL/OSL
    (NVIDIA/TensorRT-LLM tensorrt_llm/bench/build/tuning.py, calc_engine_setting
    and finetune_setting): the requests of ISL + OSL tokens that 95% of the
    memory left after the weights holds in KV, capped at 4096, rounded up to
    a multiple of 32 (at least 64), 128 or 256; max num tokens batch x
    (1 + ISL/OSL), capped at 32768, rounded up to 256 (at least 2048), 512 or
    1024.  Model and KV sizes come from `kvsim capacity` at TP 1."""
    if row["arrival"] != "burst" or not is_int(row["isl"]):
        return [], ""
    isl, osl, tp = int(row["isl"]), int(row["osl"]), int(row["tp"])
    p = subprocess.run(KVSIM_BIN + ["capacity", "--model", model, "--gpu", gpu, "--tp", "1",
                                    "--json"] + model_flags,
                       cwd=ROOT, capture_output=True, text=True)
    try:
        j = json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return [], " (trtllm-bench settings: no capacity figures)"
    gib = 1024.0 ** 3
    bpe = 1 if "fp8" in " ".join(model_flags) else 2
    engine_gb = j["param_count"] / 1e9 * bpe
    avail = j["gpu_mem_bytes"] / gib * tp - engine_gb
    kv_req = avail * 0.95 / (j["kv_bytes_per_token"] / gib) / (isl + osl)
    raw_bs = min(kv_req, 4096)
    raw_tok = min(raw_bs * (1 + isl / osl), 32768)
    if raw_bs < 256:
        bs = max(64, 32 * math.ceil(raw_bs / 32))
    elif raw_bs < 1024:
        bs = 128 * math.ceil(raw_bs / 128)
    else:
        bs = 256 * math.ceil(raw_bs / 256)
    if raw_tok < 4096:
        tok = max(2048, 256 * math.ceil(raw_tok / 256))
    elif raw_tok < 8192:
        tok = 512 * math.ceil(raw_tok / 512)
    else:
        tok = 1024 * math.ceil(raw_tok / 1024)
    return (["--max-seqs", str(bs), "--max-batched-tokens", str(tok)],
            f"; trtllm-bench settings {bs} seqs, {tok} tokens")


LENGTHS_MARK = "@"  # in a planned argv: a dataset spec still to be made into a file


OUTPUT_COLUMNS = ("num_decode_tokens", "GeneratedTokens")  # lengths files, Azure traces


def output_shape(path):
    """The output lengths of a lengths file or an Azure trace, in a fixed
    shuffled order (random.Random(0): the same on every run)."""
    with open(os.path.join(ROOT, path), newline="") as f:
        rd = csv.reader(f)
        head = next(rd)
        col = next(head.index(c) for c in OUTPUT_COLUMNS if c in head)
        out = [int(rec[col]) for rec in rd]
    random.Random(0).shuffle(out)
    return out


def lengths_file(spec, tmp, made):
    """A dataset spec from map.csv: 'FILE' or 'FILE|key=value|...' with
    out_from=OTHER (row k's output length replaced by the k-th of OTHER's
    output lengths in a fixed shuffled order, cycling: OTHER's output
    distribution paired with FILE's prompts), the filters min_len (prompt and
    output >= N), max_prompt (prompt <= N), max_total (prompt + output <= N),
    then mean_in / mean_out (every kept prompt / output length scaled by
    one factor so that their mean is X, rounded, at least 1: the benchmark's own
    token totals where the file's tokenizer or sampling differ from the run's).  A
    filtered copy of FILE is written under tmp; returns its path."""
    if spec in made:
        return made[spec]
    parts = spec.split("|")
    src = os.path.join(ROOT, parts[0])
    lim = {}
    for kv in parts[1:]:  # checked by load_map
        k, _, v = kv.partition("=")
        lim[k] = v if k == "out_from" else float(v) if k.startswith("mean_") else int(v)
    if not lim:
        made[spec] = src
        return src
    out = os.path.join(tmp, f"lengths-{len(made)}.csv")
    with open(src, newline="") as f, open(out, "w", newline="") as g:
        rd, wr = csv.reader(f), csv.writer(g)
        head = next(rd)
        wr.writerow(head)
        ip, io_ = head.index("num_prefill_tokens"), head.index("num_decode_tokens")
        kept = []
        shape = output_shape(lim["out_from"]) if "out_from" in lim else None
        for k, rec in enumerate(rd):
            if shape:
                rec[io_] = str(shape[k % len(shape)])
            p, o = int(rec[ip]), int(rec[io_])
            if p < lim.get("min_len", 0) or o < lim.get("min_len", 0):
                continue
            if p > lim.get("max_prompt", p) or p + o > lim.get("max_total", p + o):
                continue
            kept.append(rec)
        for col, key in ((ip, "mean_in"), (io_, "mean_out")):
            if key in lim and kept:
                k = lim[key] / (sum(int(r[col]) for r in kept) / len(kept))
                for r in kept:
                    r[col] = str(max(1, round(int(r[col]) * k)))
        it = head.index("num_total_tokens") if "num_total_tokens" in head else -1
        ir = head.index("pd_ratio") if "pd_ratio" in head else -1
        for rec in kept:  # the derived columns follow the scaled lengths
            if it >= 0:
                rec[it] = str(int(rec[ip]) + int(rec[io_]))
            if ir >= 0:
                rec[ir] = repr(int(rec[ip]) / int(rec[io_]))
            wr.writerow(rec)
    made[spec] = out
    return out


def run_kvsim(kvsim, argv, db, tmp, made):
    argv = list(argv)
    for i, a in enumerate(argv):
        if f"lengths={LENGTHS_MARK}" in a:
            head, _, spec = a.partition(f"lengths={LENGTHS_MARK}")
            argv[i] = f"{head}lengths={lengths_file(spec, tmp, made)}"
    full = [kvsim] + argv + ["--json"]
    if argv[0] == "run":
        full += ["--db", db]
    p = subprocess.run(full, cwd=ROOT, capture_output=True, text=True)
    if p.returncode != 0:
        msg = (p.stderr.strip() or p.stdout.strip() or f"exit {p.returncode}").splitlines()[-1]
        return None, msg
    try:
        return json.loads(p.stdout.strip().splitlines()[-1]), None
    except (ValueError, IndexError):
        return None, "kvsim printed no JSON"


class KvsimFailed(Exception):
    """kvsim exited non-zero, or printed no JSON, for a row."""


def row_figure(kvsim, argv, row, db, tmp, made=None):
    """kvsim's figure for `row` run with argv, and its signed error in %
    against the row's published value; KvsimFailed names the row."""
    j, msg = run_kvsim(kvsim, argv, db, tmp, {} if made is None else made)
    if j is None:
        raise KvsimFailed(f"{row['id']}: kvsim failed: {msg}")
    sim = METRICS[row["metric"]][1](j, row)
    real = float(row["value"])
    return sim, (sim - real) / real * 100.0


def fit_start(args, table_name=None):
    """A fit script's start: the kvsim binary (args[0] or build/kvsim, made
    absolute and used by row_figure), map.csv, and the named data table
    (None: no table)."""
    kvsim = os.path.abspath(args[0] if args else "build/kvsim")
    KVSIM_BIN[0] = kvsim
    m = load_map()
    table = load_table(os.path.join(DATA, table_name + ".csv")) if table_name else None
    return kvsim, m, table


def without_flag(argv, flag):
    """argv without `flag` and the value after it, wherever they are."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == flag:
            skip = True
        else:
            out.append(a)
    return out


def fit_script_main(main, script, doc=None):
    """Run a fit script's main(argv) and exit with its status.  The
    arguments are at most one, the kvsim binary (default build/kvsim):
    -h/--help prints doc (the script's docstring) and exits 0; an unknown
    option, a second argument or a binary that is not there is one line
    naming the script, exit 2, as is a row kvsim failed on (naming it)."""
    args = sys.argv[1:]
    if any(a in ("-h", "--help") for a in args):
        print((doc or f"{script} [KVSIM]").strip())
        sys.exit(0)
    bad = [a for a in args if a.startswith("-")]
    if bad or len(args) > 1:
        print(f"{script}: unknown argument {(bad or args[1:])[0]!r} (usage: {script} [KVSIM])",
              file=sys.stderr)
        sys.exit(2)
    kvsim = os.path.abspath(args[0] if args else "build/kvsim")
    if not os.access(kvsim, os.X_OK):
        print(f"{script}: {kvsim}: no kvsim binary (build it, or give its path)", file=sys.stderr)
        sys.exit(2)
    try:
        sys.exit(main(args))
    except KvsimFailed as e:
        print(f"{script}: {e}", file=sys.stderr)
        sys.exit(2)


def fmt(v):
    if v >= 1000:
        return f"{v:.0f}"
    if v >= 10:
        return f"{v:.1f}"
    return f"{v:.3g}"


def print_list(tables, m):
    for t in tables:
        print(f"== {t['name']}  [{t['role']}]  {len(t['rows'])} rows")
        for c in t["comments"][:6]:
            print(f"   # {c}")
        for r in t["rows"]:
            argv, mapping = plan_row(r, t, m)
            wl = ("capacity" if r["arrival"] == "capacity" else
                  f"{r['isl']}/{r['osl']} n={r['n_requests']} {r['arrival']}"
                  + (f" rate={r['rate']}" if r["rate"] else ""))
            tail = mapping if argv else f"skipped: {mapping}"
            print(f"   {r['id']:<44} {r['model']:<15} {r['gpu']:<15} tp{r['tp']} {r['precision']:<4} "
                  f"{wl:<32} {r['metric']:<16} {r['value']:>9} {r['unit']:<7} {tail}")
        print()


def main(args):
    kvsim, listing, only, data = "build/kvsim", False, None, DATA
    it = iter(args)
    for a in it:
        if a == "--list":
            listing = True
        elif a == "--only":
            only = next(it, None)
            if only is None:
                print("run.py: --only needs a value", file=sys.stderr)
                return 2
        elif a == "--data":
            data = next(it, None)
            if data is None:
                print("run.py: --data needs a directory", file=sys.stderr)
                return 2
        elif a in ("-h", "--help"):
            print(__doc__.strip())
            return 0
        elif a.startswith("-"):
            print(f"run.py: unknown option {a}", file=sys.stderr)
            return 2
        else:
            kvsim = a
    try:
        m = load_map()
        files = sorted(f for f in os.listdir(data) if f.endswith(".csv"))
        tables = [load_table(os.path.join(data, f)) for f in files if only is None or only in f]
    except OSError as e:
        print(f"run.py: {e}", file=sys.stderr)
        return 2
    except Malformed as e:
        print(f"run.py: {e}", file=sys.stderr)
        return 2
    tables.sort(key=lambda t: (t["role"] != "FIT", t["name"]))  # FIT first
    if listing:
        print_list(tables, m)
        return 0
    kvsim = os.path.abspath(kvsim)
    KVSIM_BIN[0] = kvsim
    if not os.access(kvsim, os.X_OK):
        print(f"run.py: {kvsim}: no kvsim binary (build it, or give its path)", file=sys.stderr)
        return 2
    summaries, pooled = [], []
    cache, made = {}, {}
    with tempfile.TemporaryDirectory(prefix="kvsim-fidelity-") as tmp:
        db = os.path.join(tmp, "fidelity.db")
        for t in tables:
            print(f"== {t['name']}  [{t['role']}]")
            if t["source"]:
                print(f"   {t['source']}")
            print(f"   {'id':<44} {'metric':<16} {'real':>9} {'sim':>9} {'err%':>7}  mapping")
            errs, skipped, failed = [], 0, 0
            for r in t["rows"]:
                argv, mapping = plan_row(r, t, m)
                real = float(r["value"])
                head = f"   {r['id']:<44} {r['metric']:<16} {fmt(real):>9}"
                if argv is None:
                    skipped += 1
                    print(f"{head} {'-':>9} {'-':>7}  skipped: {mapping}")
                    continue
                key = tuple(argv)
                if key not in cache:
                    cache[key] = run_kvsim(kvsim, argv, db, tmp, made)
                j, msg = cache[key]
                if j is None:
                    failed += 1
                    print(f"{head} {'-':>9} {'-':>7}  failed: {msg}  [{mapping}]")
                    continue
                sim = METRICS[r["metric"]][1](j, r)
                err = (sim - real) / real * 100.0
                errs.append((abs(err), err, r["id"]))
                pooled.append((t, r, err))
                note = ""
                if j.get("n_rejected"):
                    note = f" [kvsim rejected {j['n_rejected']} of {j['n_requests']} requests]"
                print(f"{head} {fmt(sim):>9} {err:>+7.1f}  {mapping}{note}")
            if errs:
                med = statistics.median(e[0] for e in errs)
                worst = max(errs)
                line = (f"{t['name']} [{t['role']}]: {len(errs)} simulated, {skipped} skipped, "
                        f"{failed} failed; median |err| {med:.1f}%, worst {worst[1]:+.1f}% ({worst[2]})")
            else:
                line = (f"{t['name']} [{t['role']}]: 0 simulated, {skipped} skipped, {failed} failed")
            tps = sorted({int(x[1]["tp"]) for x in pooled if x[0] is t})
            if len(tps) > 1:
                parts = []
                for tp in tps:
                    a = [abs(x[2]) for x in pooled if x[0] is t and int(x[1]["tp"]) == tp]
                    parts.append(f"tp{tp} {len(a)} rows median {statistics.median(a):.1f}% "
                                 f"worst {max(a):.1f}%")
                line += "\n    by TP: " + "; ".join(parts)
            print(f"   -- {line}\n")
            summaries.append(line)
    print("== summary")
    for s in summaries:
        print(s)
    print_targets(pooled)
    return 0


# The rows --frontend-ms was fitted on (bench/fidelity/fit_frontend.py): H100
# Llama-3.1-8B TP1 mean TTFT at QPS <= 8 of the TensorRT-LLM v0.14 serving table.
FRONTEND_FIT_TABLE = "trtllm_v0.14_online_serving_check"


def frontend_fit_row(table, r):
    return (table["name"] == FRONTEND_FIT_TABLE and r["gpu"] == "H100-SXM-80GB" and r["tp"] == "1"
            and r["metric"] == "ttft_mean_ms" and r["arrival"] == "poisson"
            and float(r["rate"]) <= 8)


# The rows the trtllm profile's collective_lat was fitted on (fit_collective.py):
# H100 Llama-3.1-70B TP4 mean ITL at QPS 2 of the same serving table.
COLLECTIVE_FIT_TABLE = FRONTEND_FIT_TABLE


def collective_fit_row(table, r):
    return (table["name"] == COLLECTIVE_FIT_TABLE and r["gpu"] == "H100-SXM-80GB" and r["tp"] == "4"
            and r["metric"] == "itl_mean_ms" and r["arrival"] == "poisson"
            and float(r["rate"]) == 2)


# The rows the trtllm profile's ridge_loss was chosen on (fit_ridge.py): the
# A100 FP16 128-token rows of the TensorRT-LLM v0.5 batch-1 table (M = 128
# sits at the A100's ridge point; the FIT table bounds ridge_loss, these
# two pick it inside that bound).
RIDGE_FIT_TABLE = "trtllm_v0.5_batch1_first_token_latency_check"


def ridge_fit_row(table, r):
    # the Llama-2 rows alone: the Falcon-180B rows came later (session 22)
    return (table["name"] == RIDGE_FIT_TABLE and r["gpu"] == "A100-SXM4-80GB"
            and r["isl"] == "128" and r["model"].startswith("Llama-2"))


# The rows the SGLang v0.3/v0.4 tables' eff_gemm was fitted on
# (fit_sglang_gemm.py): output tok/s of the DataCrunch Llama-3.3-70B TP 4
# runs with all requests at t=0 (SGLang v0.4, H200), one row per
# configuration (the 4096/1024 run's repeat, -run2, is not a second one).
SGLANG_GEMM_FIT_TABLE = "sglang_v0.4.0_h200_datacrunch_check"


def sglang_gemm_fit_row(table, r):
    return (table["name"] == SGLANG_GEMM_FIT_TABLE and r["model"] == "Llama-3.3-70B"
            and r["tp"] == "4" and r["arrival"] == "burst" and r["metric"] == "output_tok_s"
            and "-run2-" not in r["id"])


# The table ShareGPT's output shape (map.csv: out_from) was chosen on: its
# E2E, TTFT and TPOT medians imply a median output of 117-122 tokens
# (bench/fidelity/README.md, "ShareGPT's output lengths"); the other
# ShareGPT tables check the choice.
SHAREGPT_SHAPE_TABLE = "sglang_v0.3.0_sharegpt_check"


THROUGHPUT = ("output_tok_s", "output_tok_s_per_gpu", "total_tok_s", "req_s")


def print_targets(pooled):
    """The engine-profile issue's targets over the CHECK rows they concern."""
    def line(name, rows, target, over=None):
        a = [abs(e) for _, _, e in rows]
        if not a:
            print(f"{name}: no rows")
            return
        n_over = "" if over is None else f", {sum(e > over for e in a)} over {over:g}%"
        print(f"{name}: {len(a)} rows, median |err| {statistics.median(a):.1f}%, "
              f"worst {max(a):.1f}%{n_over}  (target {target})")
    check = [x for x in pooled if x[0]["role"] == "CHECK"]
    print("== targets (CHECK rows)")
    multi = [x for x in check if int(x[1]["tp"]) >= 2 and x[1]["metric"] in THROUGHPUT
             and x[1]["arrival"] == "burst"]
    line("multi-GPU throughput, TP 2/4/8, all requests at t=0", multi,
         "median <= 10%, worst <= 20%", over=20)
    line("  the same without the 6 rows the SGLang tables' eff_gemm was fitted on",
         [x for x in multi if not sglang_gemm_fit_row(x[0], x[1])],
         "median <= 10%, worst <= 20%", over=20)
    line("  the same without those and the table ShareGPT's output shape was chosen on",
         [x for x in multi if not sglang_gemm_fit_row(x[0], x[1])
          and x[0]["name"] != SHAREGPT_SHAPE_TABLE],
         "median <= 10%, worst <= 20%", over=20)
    line("batch-1 first-token latency (TensorRT-LLM v0.5)",
         [x for x in check if "batch1" in x[0]["name"]], "median <= 12% (batch-1 steps)")
    line("  the same without the 2 rows ridge_loss was chosen on",
         [x for x in check if "batch1" in x[0]["name"] and not ridge_fit_row(x[0], x[1])],
         "median <= 12% (batch-1 steps)")
    light = [x for x in check if "online_serving" in x[0]["name"] and x[1]["arrival"] == "poisson"
             and float(x[1]["rate"]) <= 8]
    line("online serving, QPS <= 8, mean ITL", [x for x in light if x[1]["metric"] == "itl_mean_ms"],
         "within 15%")
    line("  the same without the 3 rows collective_lat was fitted on",
         [x for x in light if x[1]["metric"] == "itl_mean_ms" and not collective_fit_row(x[0], x[1])],
         "within 15%")
    line("online serving, QPS <= 8, mean TTFT", [x for x in light if x[1]["metric"] == "ttft_mean_ms"],
         "within 20%")
    line("  the same without the 9 rows --frontend-ms was fitted on",
         [x for x in light if x[1]["metric"] == "ttft_mean_ms" and not frontend_fit_row(x[0], x[1])],
         "within 20%")
    line("KV capacity, TP 1 and 4", [x for x in check if x[1]["metric"] == "kv_blocks"
                                     and int(x[1]["tp"]) in (1, 4)], "within 5%")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
