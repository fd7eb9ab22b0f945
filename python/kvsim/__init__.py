"""kvsim: a trace-driven simulator of LLM inference serving, from Python.

A thin binding of the C library's public API (api/kvsim.h, through ctypes):
the simulation, every figure, the flag table, the sweep grid, compare's
default variants and the capacity search are the C library's; this package
turns keyword arguments into the flags of `kvsim run` and results into
pandas DataFrames.

    import kvsim
    r = kvsim.run(model="llama-2-7b", gpu="a100-80g",
                  workload="arrival=poisson,rate=8,n=1000,prompt=512,output=128")
    r.summary["ttft_p99_s"]; r.requests; r.run_id

Functions: run, compare, sweep, capacity, models, gpus, flags, open.
Errors raise kvsim.Error with the one line `kvsim run` prints after its
"kvsim run: " prefix; nothing exits the process.  The GIL is released
while a run simulates, so runs in threads go in parallel (sweep(jobs=N)).
"""
from __future__ import annotations

import ctypes as C
import itertools
import json
import os
import re
import sqlite3
import tempfile
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Union

import pandas as pd

from . import _lib
from ._lib import lib as _clib  # noqa: F401  (loaded once)

__all__ = ["Error", "Run", "Batch", "Database", "run", "compare", "sweep", "capacity",
           "models", "gpus", "cost_constants", "flags", "open", "memory", "import_trace",
           "trace_formats", "__version__"]

__version__: str = _lib.version().decode()


class Error(Exception):
    """A kvsim error: the one line naming the flag, file or column at fault
    (the message `kvsim run` prints after "kvsim run: ")."""


# ------------------------------------------------------------------ flags

def flags() -> pd.DataFrame:
    """The run flags of `kvsim run --help`, from the C library's table: one
    row per flag with its Python keyword, kind, section, metavar, help text
    (which states the default) and the default as that text states it
    (None where it states none: the flag is unset by default)."""
    rows = []
    for f in _flag_table():
        rows.append({"flag": f["name"], "keyword": f["keyword"], "kind": f["kind"],
                     "section": f["section"], "metavar": f["metavar"],
                     "default": f["default"], "help": f["help"],
                     "negation": f["negation"], "per_run": f["per_run"]})
    return pd.DataFrame(rows)


# How the C table's help texts state a default: "A (default: ...) | B",
# "(default X)", "(...; default X)", "(0 = off, the default)".
_DEFAULT_RES = [re.compile(r"(\S+) \(default(?::[^()]*)?\) \|"),
                re.compile(r"(?:\(|; )default:? ([^()]*(?:\([^()]*\)[^()]*)*)\)"),
                re.compile(r"\((\S+) = [^()]*, the default\)")]


def _help_default(text: str) -> Optional[str]:
    for rx in _DEFAULT_RES:
        m = rx.search(text)
        if m:
            return m.group(1).strip()
    return None


def _flag_table() -> List[Dict[str, Any]]:
    out = []
    f = _lib.Flag()
    for i in range(_lib.flag_count()):
        _lib.flag_at(i, C.byref(f))
        text = " ".join(f.help.decode().split())
        default = _help_default(text)
        if default is None and f.kind in (b"switch", b"off"):
            default = "off"
        out.append({"name": f.name.decode(), "keyword": f.name.decode().replace("-", "_"),
                    "kind": f.kind.decode(), "section": f.section.decode(),
                    "metavar": f.metavar.decode() if f.metavar else None, "help": text,
                    "default": default,
                    "negation": f.negation.decode() if f.negation else None,
                    "per_run": bool(f.per_run)})
    return out


_FLAGS = {f["keyword"]: f for f in _flag_table()}
# handled by the package itself, not passed to the library as flags
_OWN = {"db", "quiet", "json"}


def _slo_text(v: Union[str, Mapping[str, float]]) -> str:
    if isinstance(v, Mapping):
        return ",".join(f"{k}={_num(x)}" for k, x in v.items())
    return str(v)


def _num(v: Any) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, float):
        return repr(v)
    return str(v)


def _spec_text(v: Union[str, Mapping[str, Any]]) -> str:
    if isinstance(v, Mapping):
        return ",".join(f"{k}={_num(x)}" for k, x in v.items())
    return str(v)


def _flag_args(kw: Mapping[str, Any]) -> List[tuple]:
    """(flag, value-or-None) pairs of keyword arguments, in the order given;
    a switch set to False becomes its negation (or nothing)."""
    out = []
    for key, value in kw.items():
        if value is None:
            continue
        name = key.replace("_", "-")
        f = _FLAGS.get(key) or _FLAGS.get(name.replace("-", "_"))
        if key == "workload":
            out.append(("synthetic", _spec_text(value)))
            continue
        if f is None:
            raise Error(f"--{name}: not a run flag (see help(kvsim.run))")
        if key in _OWN:
            raise Error(f"--{name}: not a keyword of kvsim.run")
        if f["kind"] in ("switch", "off"):
            if value is True or value == 1:
                out.append((f["name"], None))
            elif f["negation"]:
                out.append((f["negation"], None))
            continue
        if f["kind"] == "slo":
            value = _slo_text(value)
        elif key == "synthetic":
            value = _spec_text(value)
        out.append((f["name"], _num(value)))
    return out


def _base_args(pairs: Iterable[tuple]) -> str:
    """The flags as `kvsim sweep` stores them: one argument per line."""
    lines = []
    for name, value in pairs:
        lines.append("--" + name)
        if value is not None:
            if "\n" in value:
                raise Error(f"--{name}: a value holds a newline")
            lines.append(value)
    return "".join(line + "\n" for line in lines)


# ------------------------------------------------------------------ runs

class _Handle:
    """An owned kvsim_run pointer."""

    def __init__(self, ptr: int):
        if not ptr:
            raise MemoryError("kvsim: out of memory")
        self.ptr = C.c_void_p(ptr)

    def error(self) -> str:
        return _lib.run_error(self.ptr).decode("utf-8", "replace")

    def check(self, rc: int) -> None:
        if rc:
            raise Error(self.error())

    def __del__(self):
        if getattr(self, "ptr", None):
            _lib.run_free(self.ptr)
            self.ptr = None


class Run:
    """One simulated run.

    Attributes: summary (dict: the keys of `kvsim run --json`), requests
    (DataFrame, the `requests` table's columns), steps (DataFrame, the
    `steps` table's columns without members; empty unless record_steps=True),
    run_id (int: its id in the database, 0 when not stored), flags (the
    flags it was given, as (flag, value) pairs)."""

    def __init__(self, handle: _Handle, flags: Sequence[tuple]):
        self._h = handle
        self.flags = list(flags)
        self.summary: Dict[str, Any] = json.loads(_lib.take_string(
            _lib.run_summary_json(handle.ptr)) or "{}")
        self._requests: Optional[pd.DataFrame] = None
        self._steps: Optional[pd.DataFrame] = None

    @property
    def run_id(self) -> int:
        return int(_lib.run_id(self._h.ptr))

    @property
    def requests(self) -> pd.DataFrame:
        if self._requests is None:
            n = _lib.run_request_count(self._h.ptr)
            buf = (_lib.Request * max(n, 1))()
            self._h.check(_lib.run_requests(self._h.ptr, 0, n, buf))
            df = _frame(buf, n, _lib.Request)
            status = ["finished" if x else "rejected" for x in df.pop("finished")]
            df.insert(5, "status", status)  # where the requests table has it
            d = df["decode_replica"]
            df["decode_replica"] = d.where(d >= 0)  # NaN where the table has NULL
            why = {1: "context", 2: "token-budget", 3: "kv-capacity"}  # the table's names
            df["reject_reason"] = [why.get(int(x)) for x in df["reject_reason"]]
            self._requests = df
        return self._requests

    @property
    def steps(self) -> pd.DataFrame:
        if self._steps is None:
            n = _lib.run_step_count(self._h.ptr)
            buf = (_lib.Step * max(n, 1))()
            self._h.check(_lib.run_steps(self._h.ptr, 0, n, buf))
            self._steps = _frame(buf, n, _lib.Step)
        return self._steps

    def __repr__(self) -> str:
        s = self.summary
        return (f"<kvsim.Run {self.run_id or '(not stored)'}: {s.get('n_requests')} requests, "
                f"ttft p99 {s.get('ttft_p99_s')} s, {s.get('throughput_tok_s')} tok/s>")


def _frame(buf, n: int, struct) -> pd.DataFrame:
    import numpy as np

    names = [f[0] for f in struct._fields_ if not f[0].endswith("_")]  # no padding
    if n == 0:
        return pd.DataFrame({k: [] for k in names})
    arr = np.ctypeslib.as_array(buf)[:n]
    cols = {}
    for k in names:
        col = arr[k]
        if col.ndim > 1:  # a char[] field: text
            col = [x.tobytes().rstrip(b"\0").decode() for x in col]
        else:
            col = col.copy()
        cols[k] = col
    return pd.DataFrame(cols)


def _new_run(pairs: Sequence[tuple]) -> _Handle:
    h = _Handle(_lib.run_new())
    for name, value in pairs:
        h.check(_lib.run_set(h.ptr, name.encode(), None if value is None else value.encode()))
    return h


class _Db:
    """An open kvsim_db (writable), closed when dropped."""

    def __init__(self, path: str):
        self.ptr = C.c_void_p()
        err = C.create_string_buffer(_lib.ERRBUF)
        if _lib.db_open(os.fspath(path).encode(), C.byref(self.ptr), err):
            raise Error("--db: " + err.value.decode("utf-8", "replace"))

    def close(self) -> None:
        if self.ptr:
            _lib.db_close(self.ptr)
            self.ptr = None

    def __del__(self):
        self.close()


def _run_pairs(model, gpu, trace, workload, engine, flags) -> List[tuple]:
    kw: Dict[str, Any] = {}
    for k, v in (("model", model), ("gpu", gpu), ("trace", trace), ("engine", engine)):
        if v is not None:
            kw[k] = os.fspath(v) if k == "trace" else v
    if workload is not None:
        kw["workload"] = workload
    kw.update(flags)
    return _flag_args(kw)


def _simulate(pairs: Sequence[tuple], variant: Optional[str] = None,
              compare_id: int = 0) -> _Handle:
    h = _new_run(pairs)
    if variant is not None:
        h.check(_lib.run_variant(h.ptr, variant.encode(), compare_id))
    h.check(_lib.run_execute(h.ptr, None))  # the GIL is released here
    return h


def _execute(pairs: Sequence[tuple], db: Optional[_Db]) -> Run:
    h = _simulate(pairs)
    if db is not None:
        h.check(_lib.run_store(h.ptr, db.ptr))
    return Run(h, pairs)


def run(model: Optional[str] = None, gpu: Optional[str] = None,
        trace: Optional[Union[str, os.PathLike]] = None,
        workload: Optional[Union[str, Mapping[str, Any]]] = None,
        engine: Optional[str] = None, *, db: Optional[Union[str, os.PathLike]] = None,
        **flags: Any) -> Run:
    """Simulate one run, as `kvsim run` with the same flags.  OPTIONS"""
    pairs = _run_pairs(model, gpu, trace, workload, engine, flags)
    d = _Db(db) if db is not None else None
    try:
        return _execute(pairs, d)
    finally:
        if d is not None:
            d.close()


def memory(model: Optional[str] = None, gpu: Optional[str] = None, *,
           engine: Optional[str] = None, **flags: Any) -> Dict[str, Any]:
    """The KV memory picture of a configuration on one GPU, as the run would
    resolve it (the engine profile's defaults applied): usable_bytes
    (memory x gpu_mem_util), weight_bytes, activation_bytes, kv_bytes,
    kv_bytes_per_token, block_bytes, kv_blocks (the capacity), kv_tokens,
    total_blocks (what a run uses: kv_blocks=N when given), with tp,
    block_size, max_batched_tokens, max_seqs and gpu_mem_bytes; bytes per
    GPU.  Takes the run flags of kvsim.run (the workload is not read)."""
    pairs = _run_pairs(model, gpu, None, None, engine, flags)
    h = _new_run(pairs)
    text = _lib.take_string(_lib.run_memory_json(h.ptr))
    if text is None:
        raise Error(h.error())
    return json.loads(text)


# ------------------------------------------------------------------ many runs

class Batch:
    """The runs of a compare or a sweep.

    Attributes: runs (list of Run, in order), names (the variant names or
    the sweep points' keys), summary (DataFrame: one row per run, indexed by
    name, with every summary key), compare_id / sweep_id (0 when not
    stored)."""

    def __init__(self, names: List[str], runs: List[Run], compare_id: int = 0,
                 sweep_id: int = 0, params: Optional[List[Dict[str, str]]] = None):
        self.names = names
        self.runs = runs
        self.compare_id = compare_id
        self.sweep_id = sweep_id
        rows = []
        for i, (n, r) in enumerate(zip(names, runs)):
            row = dict(params[i]) if params else {}
            row.update(r.summary)
            rows.append(row)
        self.summary = pd.DataFrame(rows, index=pd.Index(names, name="name"))

    def __getitem__(self, name: str) -> Run:
        return self.runs[self.names.index(name)]

    def __len__(self) -> int:
        return len(self.runs)


def _parallel(fn, items: Sequence[Any], jobs: int, then=None) -> List[Any]:
    """fn over items, jobs at a time in threads; then(i, result) in the
    calling thread in item order (so runs are stored in a fixed order)."""
    out = []
    if jobs <= 1 or len(items) <= 1:
        results: Iterable[Any] = (fn(x) for x in items)
        ex = None
    else:
        ex = ThreadPoolExecutor(max_workers=jobs)
        results = ex.map(fn, items)
    try:
        for i, r in enumerate(results):
            if then is not None:
                then(i, r)
            out.append(r)
    finally:
        if ex is not None:
            ex.shutdown(wait=True, cancel_futures=True)
    return out


def compare(variants: Optional[Union[Sequence[str], Mapping[str, Mapping[str, Any]]]] = None,
            *, model: Optional[str] = None, gpu: Optional[str] = None,
            trace: Optional[Union[str, os.PathLike]] = None,
            workload: Optional[Union[str, Mapping[str, Any]]] = None,
            engine: Optional[str] = None, db: Optional[Union[str, os.PathLike]] = None,
            jobs: int = 1, **flags: Any) -> Batch:
    """Several engine configurations on the same workload, as `kvsim compare`.

    variants: None for kvsim compare's default set for the workload, a list
    of "NAME:FLAG=VALUE,..." strings, or a dict {name: {keyword: value}}.
    The other keywords are the base run flags (see help(kvsim.run)).  With
    db, every run is stored there tagged with one compare_id.  jobs: runs
    simulated at once in threads."""
    pairs = _run_pairs(model, gpu, trace, workload, engine, flags)
    if variants is None:
        h = _new_run(pairs)
        text = _lib.take_string(_lib.compare_defaults(h.ptr)) or ""
        specs = [line for line in text.splitlines() if line]
    elif isinstance(variants, Mapping):
        specs = []
        for name, kv in variants.items():
            fl = _flag_args(kv)
            body = ",".join(n if v is None else f"{n}={v}" for n, v in fl)
            specs.append(f"{name}:{body}" if body else name)
    else:
        specs = list(variants)
    names = [s.split(":", 1)[0] for s in specs]
    d = _Db(db) if db is not None else None
    cid = 0
    try:
        for s in specs:  # check every variant before running any
            h = _new_run(pairs)
            h.check(_lib.run_variant(h.ptr, s.encode(), 0))
        if d is not None:
            out = C.c_int64()
            err = C.create_string_buffer(_lib.ERRBUF)
            if _lib.db_reserve_compare(d.ptr, "\n".join(specs).encode(), len(specs),
                                       C.byref(out), err):
                raise Error(err.value.decode())
            cid = out.value
        def store(i: int, h: _Handle) -> None:
            if d is not None:
                h.check(_lib.run_store(h.ptr, d.ptr))

        hs = _parallel(lambda s: _simulate(pairs, s, cid), specs, jobs, store)
        runs = [Run(h, pairs) for h in hs]
        if d is not None:
            err = C.create_string_buffer(_lib.ERRBUF)
            if _lib.db_finish_compare(d.ptr, cid, 1, err):
                raise Error(err.value.decode())
    except BaseException:
        if d is not None and cid:
            _lib.db_finish_compare(d.ptr, cid, 0, C.create_string_buffer(_lib.ERRBUF))
        raise
    finally:
        if d is not None:
            d.close()
    return Batch(names, runs, compare_id=cid)


def _grid_text(grid: Union[str, Mapping[str, Sequence[Any]]]) -> str:
    if isinstance(grid, str):
        return grid if grid.endswith("\n") else grid + "\n"
    lines = []
    for k, vals in grid.items():
        if isinstance(vals, (str, bytes)) or not isinstance(vals, Iterable):
            vals = [vals]
        lines.append(k.replace("_", "-") + "=" + ",".join(
            ("on" if v else "off") if isinstance(v, bool) else _num(v) for v in vals))
    return "".join(line + "\n" for line in lines)


def sweep(grid: Union[str, Mapping[str, Sequence[Any]]], *, jobs: int = 1,
          model: Optional[str] = None, gpu: Optional[str] = None,
          trace: Optional[Union[str, os.PathLike]] = None,
          workload: Optional[Union[str, Mapping[str, Any]]] = None,
          engine: Optional[str] = None, db: Optional[Union[str, os.PathLike]] = None,
          **flags: Any) -> Batch:
    """Every point of a grid of run flags, as `kvsim sweep`.

    grid: {keyword: [values]} (a switch takes True/False, a --synthetic key
    such as rate its values) or the text of a grid file ("max-seqs=8,16").
    Points run jobs at a time in threads (the GIL is released while each
    simulates).  With db the sweep and its points are stored there."""
    pairs = _run_pairs(model, gpu, trace, workload, engine, flags)
    base = _base_args(pairs)
    d = _Db(db) if db is not None else None
    sw = C.c_void_p()
    err = C.create_string_buffer(_lib.ERRBUF)
    try:
        if _lib.sweep_new(base.encode(), _grid_text(grid).encode(), d.ptr if d else None,
                          C.byref(sw), err):
            raise Error(err.value.decode("utf-8", "replace"))
        n = _lib.sweep_point_count(sw)
        keys = []
        kb = C.create_string_buffer(1024)
        for i in range(n):
            _lib.sweep_point_key(sw, i, kb, len(kb))
            keys.append(kb.value.decode())

        def point(i: int) -> _Handle:
            rp = C.c_void_p()
            e = C.create_string_buffer(_lib.ERRBUF)
            if _lib.sweep_point_run(sw, i, C.byref(rp), e):
                raise Error(e.value.decode("utf-8", "replace"))
            h = _Handle(rp.value)
            if _lib.run_execute(h.ptr, None):  # the GIL is released here
                raise Error(f"point {i} ({keys[i]}): {h.error()}")
            return h

        def store(i: int, h: _Handle) -> None:
            if d is not None:
                h.check(_lib.sweep_store_point(sw, i, h.ptr, d.ptr))

        runs = [Run(h, pairs) for h in _parallel(point, list(range(n)), jobs, store)]
        params = [dict(kv.split("=", 1) for kv in k.split()) for k in keys]
        return Batch(keys, runs, sweep_id=int(_lib.sweep_id(sw)), params=params)
    finally:
        if sw:
            _lib.sweep_free(sw)
        if d is not None:
            d.close()


def capacity(slo: Union[str, Mapping[str, float]], *, search: str = "rate",
             policies: Optional[Union[str, Sequence[str]]] = None,
             model: Optional[str] = None, gpu: Optional[str] = None,
             trace: Optional[Union[str, os.PathLike]] = None,
             workload: Optional[Union[str, Mapping[str, Any]]] = None,
             engine: Optional[str] = None, db: Optional[Union[str, os.PathLike]] = None,
             **flags: Any) -> pd.DataFrame:
    """The highest load (search="rate": the --synthetic rate, or rate-scale
    of a trace) or the smallest TP degree (search="tp") that meets the SLOs,
    per policy, as `kvsim capacity --search`.

    slo: "ttft_p99=2,tpot_p99=0.1" or {"ttft_p99": 2, "tpot_p99": 0.1}.
    Every probe is a stored run (in db, or a temporary database that is
    removed afterwards).  Returns one row per policy: status, probes, and
    the value, run id and verdict of the probe that holds, the one that
    fails and the best; .attrs["search_id"] is the search's sweep id."""
    pairs = _run_pairs(model, gpu, trace, workload, engine, flags)
    if policies is not None and not isinstance(policies, str):
        policies = ",".join(policies)
    tmp = None
    if db is None:
        tmp = tempfile.TemporaryDirectory(prefix="kvsim-capacity-")
        db = os.path.join(tmp.name, "capacity.db")
    d = _Db(db)
    out = C.c_void_p()
    err = C.create_string_buffer(_lib.ERRBUF)
    try:
        if _lib.capacity_search(_base_args(pairs).encode(), search.encode(),
                                _slo_text(slo).encode(),
                                policies.encode() if policies else None, d.ptr,
                                C.byref(out), err):
            raise Error(err.value.decode("utf-8", "replace"))
        res = json.loads(_lib.take_string(out.value))
    finally:
        d.close()
        if tmp is not None:
            tmp.cleanup()
    rows = []
    for r in res["results"]:
        row = {"policy": r["policy"], "status": r["status"], "probes": r["probes"]}
        for which in ("holds", "fails", "best"):
            p = r[which] or {}
            row[which] = p.get("value")
            row[which + "_run_id"] = p.get("run_id")
            row[which + "_verdict"] = p.get("verdict")
        rows.append(row)
    df = pd.DataFrame(rows).set_index("policy")
    df.attrs.update({"search_id": res["search_id"], "param": res["param"], "slo": res["slo"]})
    return df


# ------------------------------------------------------------------ catalogue

def models() -> pd.DataFrame:
    """The built-in models and the shipped Hugging Face configs (as
    `kvsim models`): shapes, parameters, KV bytes per token at tp 1."""
    return pd.DataFrame(json.loads(_lib.take_string(_lib.models_json()))).set_index("name")


def gpus() -> pd.DataFrame:
    """The built-in GPUs (as `kvsim gpus`): memory, bandwidths, peaks."""
    return pd.DataFrame(json.loads(_lib.take_string(_lib.gpus_json()))).set_index("name")


def cost_constants(engine: str = "vllm-v1", cost: str = "roofline") -> pd.DataFrame:
    """The roofline constants a run of engine profile `engine` with
    cost=`cost` ("roofline" or "roofline:KEY=VALUE,...") uses, as `kvsim
    cost show --engine E --cost C`: value, unit, where each came from
    (default, "engine NAME", --cost, FILE:LINE) and the source of its
    default, indexed by name.  Raises kvsim.Error on an unknown engine or
    constant, or a value out of range."""
    err = C.create_string_buffer(_lib.ERRBUF)
    p = _lib.cost_constants_json(engine.encode(), cost.encode(), err)
    if not p:
        raise Error(err.value.decode("utf-8", "replace"))
    return pd.DataFrame(json.loads(_lib.take_string(p))).set_index("name")


# ------------------------------------------------------------------ datasets

def trace_formats() -> Dict[str, str]:
    """The dataset formats import_trace reads: {name: description}."""
    text = _lib.trace_formats().decode()
    return dict(line.split("\t", 1) for line in text.splitlines() if line)


def import_trace(format: str, src: Union[str, os.PathLike], out: Union[str, os.PathLike], *,
                 chars_per_token: Optional[float] = None, turns: bool = False,
                 rate: Optional[float] = None, seed: Optional[int] = None,
                 output_len: Optional[int] = None) -> Dict[str, int]:
    """Convert a dataset into a native CSV trace, as `kvsim trace import`.

    format: "sharegpt", "burstgpt", "azure2024" or "vllm-custom" (see
    trace_formats()).  chars_per_token: text lengths as ceil(characters /
    R) tokens (default 4; counts in the file win); turns: ShareGPT, one
    request per turn (default: the first turn); rate, seed: Poisson arrivals
    for datasets without times (default: all at time 0); output_len:
    vllm-custom output tokens of a line without a count (default 256).
    OUT is written atomically.  Returns {"records", "requests", "skipped"};
    raises kvsim.Error naming the file and the record on malformed input."""
    opts = []
    for name, v in (("chars-per-token", chars_per_token), ("rate", rate), ("seed", seed),
                    ("output-len", output_len)):
        if v is not None:
            opts.append(f"{name}={_num(v)}")
    if turns:
        opts.append("turns")
    counts = (C.c_int64 * 3)()
    err = C.create_string_buffer(_lib.ERRBUF)
    if _lib.trace_import(format.encode(), os.fspath(src).encode(), os.fspath(out).encode(),
                         "".join(o + "\n" for o in opts).encode(), C.byref(counts), err):
        raise Error(err.value.decode("utf-8", "replace"))
    return {"records": counts[0], "requests": counts[1], "skipped": counts[2]}


# ------------------------------------------------------------------ database

class Database:
    """A kvsim results database, read with SQL (the tables of docs/schema.md).

    runs() the `runs` table; requests(run_id) and steps(run_id) a run's
    rows; sql(query, params) any query, as a DataFrame."""

    def __init__(self, path: Union[str, os.PathLike]):
        self.path = os.fspath(path)
        if not os.path.exists(self.path):
            raise Error(f"--db: {self.path}: no such database")
        self._con = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True,
                                    check_same_thread=False)

    def sql(self, query: str, params: Sequence[Any] = ()) -> pd.DataFrame:
        try:
            return pd.read_sql_query(query, self._con, params=params)
        except (sqlite3.Error, pd.errors.DatabaseError) as e:
            raise Error(f"--db: {self.path}: {e}") from None

    def runs(self) -> pd.DataFrame:
        return self.sql("SELECT * FROM runs ORDER BY run_id").set_index("run_id")

    def requests(self, run_id: int) -> pd.DataFrame:
        return self.sql("SELECT * FROM requests WHERE run_id = ? ORDER BY req_id", (run_id,))

    def steps(self, run_id: int) -> pd.DataFrame:
        return self.sql("SELECT * FROM steps WHERE run_id = ? ORDER BY step_id", (run_id,))

    def close(self) -> None:
        self._con.close()

    def __enter__(self) -> "Database":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open(db: Union[str, os.PathLike]) -> Database:  # noqa: A001  (kvsim.open, as asked)
    """Open a results database for reading (see Database)."""
    return Database(db)


# ------------------------------------------------------------------ help

def _options_doc() -> str:
    lines = ["", "", "Options (every flag of `kvsim run`, as keywords: dashes become",
             "underscores; a switch takes True, or False for its negation; slo and",
             "workload also take a dict):", ""]
    section = None
    for f in _FLAGS.values():
        if f["name"] in _OWN:
            continue
        if f["section"] != section:
            section = f["section"]
            lines.append(f"  {section}:")
        val = "True" if f["kind"] in ("switch", "off") else (f["metavar"] or "VALUE")
        lines.append(f"    {f['keyword']}={val}  [default: {f['default'] or 'none'}]")
        lines.append(f"        {f['help']}")
    lines += ["", "  workload=SPEC  the --synthetic spec (a str or a dict of its keys)",
              "  db=FILE  store the run in this SQLite database (default: not stored)",
              "", "Returns a Run: .summary (dict), .requests and .steps (DataFrames), .run_id.",
              "Raises kvsim.Error with the CLI's one-line message on bad input."]
    return "\n".join(lines)


run.__doc__ = (run.__doc__ or "").replace("  OPTIONS", "") + _options_doc()
