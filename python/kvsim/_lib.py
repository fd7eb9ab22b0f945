"""ctypes declarations of libkvsim.so (api/kvsim.h).

The library is looked up next to this file (where the wheel installs it),
or at $KVSIM_LIBRARY (a development build: build/libkvsim.so).  ctypes
releases the GIL around every foreign call, so runs in threads simulate in
parallel.
"""
from __future__ import annotations

import ctypes as C
import os

_here = os.path.dirname(os.path.abspath(__file__))


def _load() -> C.CDLL:
    path = os.environ.get("KVSIM_LIBRARY") or os.path.join(_here, "libkvsim.so")
    return C.CDLL(path)


lib = _load()

ERRBUF = 1024


class Request(C.Structure):
    """kvsim_request: one `requests` row."""

    _fields_ = [
        ("req_id", C.c_int64),
        ("arrival_s", C.c_double),
        ("prompt_tokens", C.c_int64),
        ("output_tokens", C.c_int64),
        ("priority", C.c_int32),
        ("finished", C.c_int32),
        ("first_token_s", C.c_double),
        ("finish_s", C.c_double),
        ("preemptions", C.c_int32),
        ("swaps", C.c_int32),
        ("swapped_s", C.c_double),
        ("replica", C.c_int32),
        ("decode_replica", C.c_int32),  # -1: none (the table's NULL)
        ("kv_transfer_s", C.c_double),
        ("max_itl_s", C.c_double),
        ("reject_reason", C.c_int32),  # 0 none, 1 context, 2 token budget, 3 KV capacity
        ("pad_", C.c_int32),
    ]


class Step(C.Structure):
    """kvsim_step: one `steps` row without its members."""

    _fields_ = [
        ("step_id", C.c_int64),
        ("start_s", C.c_double),
        ("dur_s", C.c_double),
        ("kind", C.c_char * 8),
        ("n_prefill", C.c_int64),
        ("n_decode", C.c_int64),
        ("tokens", C.c_int64),
        ("kv_read", C.c_int64),
        ("prefill_sq", C.c_int64),
        ("kv_blocks_used", C.c_int64),
        ("n_waiting", C.c_int64),
        ("n_running", C.c_int64),
        ("n_preempted", C.c_int64),
        ("swap_out_blocks", C.c_int64),
        ("swap_in_blocks", C.c_int64),
        ("replica", C.c_int64),
    ]


class Flag(C.Structure):
    """kvsim_flag: one run flag of the job layer's table."""

    _fields_ = [
        ("name", C.c_char_p),
        ("kind", C.c_char_p),
        ("section", C.c_char_p),
        ("metavar", C.c_char_p),
        ("help", C.c_char_p),
        ("negation", C.c_char_p),
        ("per_run", C.c_int),
    ]


_run = C.c_void_p
_db = C.c_void_p
_sweep = C.c_void_p
_i64 = C.c_int64
_str = C.c_char_p
_err = C.c_char_p  # a char[1024] buffer (ctypes.create_string_buffer)


def _fn(name, res, *args):
    f = getattr(lib, name)
    f.restype = res
    f.argtypes = list(args)
    return f


# malloc'd strings come back as void pointers, read then freed with free()
_libc = C.CDLL(None)
_libc.free.argtypes = [C.c_void_p]
_libc.free.restype = None


def take_string(p: int | None) -> str | None:
    """Read and free a malloc'd C string returned by the library."""
    if not p:
        return None
    try:
        return C.string_at(p).decode("utf-8", "replace")
    finally:
        _libc.free(p)


version = _fn("kvsim_version", _str)
db_open = _fn("kvsim_db_open", C.c_int, _str, C.POINTER(_db), _err)
db_close = _fn("kvsim_db_close", None, _db)
db_reserve_compare = _fn("kvsim_db_reserve_compare", C.c_int, _db, C.c_char_p, _i64,
                         C.POINTER(_i64), _err)
db_finish_compare = _fn("kvsim_db_finish_compare", C.c_int, _db, _i64, C.c_int, _err)
run_new = _fn("kvsim_run_new", _run)
run_free = _fn("kvsim_run_free", None, _run)
run_set = _fn("kvsim_run_set", C.c_int, _run, _str, _str)
run_execute = _fn("kvsim_run_execute", C.c_int, _run, _db)
run_store = _fn("kvsim_run_store", C.c_int, _run, _db)
run_error = _fn("kvsim_run_error", _str, _run)
run_id = _fn("kvsim_run_id", _i64, _run)
run_summary_json = _fn("kvsim_run_summary_json", C.c_void_p, _run)
run_request_count = _fn("kvsim_run_request_count", _i64, _run)
run_requests = _fn("kvsim_run_requests", C.c_int, _run, _i64, _i64, C.POINTER(Request))
run_step_count = _fn("kvsim_run_step_count", _i64, _run)
run_steps = _fn("kvsim_run_steps", C.c_int, _run, _i64, _i64, C.POINTER(Step))
run_variant = _fn("kvsim_run_variant", C.c_int, _run, _str, _i64)
compare_defaults = _fn("kvsim_compare_defaults", C.c_void_p, _run)
flag_count = _fn("kvsim_flag_count", _i64)
flag_at = _fn("kvsim_flag_at", C.c_int, _i64, C.POINTER(Flag))
models_json = _fn("kvsim_models_json", C.c_void_p)
gpus_json = _fn("kvsim_gpus_json", C.c_void_p)
cost_constants_json = _fn("kvsim_cost_constants_json", C.c_void_p, _str, _str, _err)
sweep_new = _fn("kvsim_sweep_new", C.c_int, _str, _str, _db, C.POINTER(_sweep), _err)
sweep_free = _fn("kvsim_sweep_free", None, _sweep)
sweep_point_count = _fn("kvsim_sweep_point_count", _i64, _sweep)
sweep_id = _fn("kvsim_sweep_id", _i64, _sweep)
sweep_point_key = _fn("kvsim_sweep_point_key", C.c_int, _sweep, _i64, C.c_char_p, C.c_size_t)
sweep_point_run = _fn("kvsim_sweep_point_run", C.c_int, _sweep, _i64, C.POINTER(_run), _err)
sweep_store_point = _fn("kvsim_sweep_store_point", C.c_int, _sweep, _i64, _run, _db)
capacity_search = _fn("kvsim_capacity_search", C.c_int, _str, _str, _str, _str, _db,
                      C.POINTER(C.c_void_p), _err)
trace_import = _fn("kvsim_trace_import", C.c_int, _str, _str, _str, _str,
                   C.POINTER(C.c_int64 * 3), _err)
trace_formats = _fn("kvsim_trace_formats", _str)
run_memory_json = _fn("kvsim_run_memory_json", C.c_void_p, _run)
