/* validate.h — validation: how wrong is a simulated schedule on real
 * hardware?  A run stored with `kvsim run --record-steps` is loaded
 * (val_run_load), some of its steps are replayed on the real kernels
 * (validate/replay.h), and the predicted step times are judged against the
 * measured ones (val_summary_json): step-time error statistics split by step
 * kind and batch size, the end-to-end metrics recomputed on the run's
 * schedule with measured step times (val_retime), and the KV memory check.
 * The result is stored as one `validations` row with its `validation_steps`
 * (val_store_write) and printed as a table (val_report_print).
 * docs/validation.md states every rule; this header is the module's API.
 *
 * Error convention everywhere: relative error = (predicted - measured) /
 * measured, so a positive error means the simulator predicts too slow.
 */
#ifndef VALIDATE_H
#define VALIDATE_H

#include <stdint.h>
#include <stdio.h>

#include "../models/model.h"
#include "../scheduler/sched.h"
#include "../base/kvs.h"
#include "../sim/run.h"
#include "../store/store.h"
#include "../traces/trace.h"

typedef struct sqlite3 sqlite3;

/* ------------------------------------------------------------ the run */

/* The part of a stored run that validation needs.  Request i of tr is
 * requests.req_id i; step i is steps.step_id i (ids are 0..n-1, checked). */
typedef struct val_run {
    int64_t run_id;          /* runs.run_id */
    run_config cfg;          /* the stored config; cfg.sched.total_blocks = runs.kv_blocks */
    model_spec model;        /* cfg.model looked up (built-in name or .conf path) */
    trace tr;                /* [tr.n] arrival, P, O, priority; owned */
    sched_req_result *reqs;  /* [tr.n] stored outcome: status, first_token_s, finish_s; owned */
    run_step_rec *steps;     /* [n_steps] stored steps (dur_s, kind, batch, kv_blocks_used,
                                swap blocks, n_preempted) and member offsets; owned */
    int64_t n_steps;
    sched_member *members;   /* [n_members] every step's members, concatenated; owned */
    int64_t n_members;
    int64_t profile_id;      /* calibrated profile the run's cost model used, 0 = none */
} val_run;

/* Load run `run_id` from db.  One-line errors (KVS_EINVAL): "run N not
 * found", a failed run, "run N has no recorded steps: re-run with kvsim run
 * --record-steps", a run with --tp > 1 (one device replays one GPU), a
 * model that cannot be looked up, malformed members blobs or step/request
 * ids with holes (naming the step).  KVS_EDB for SQLite failures.
 * Cost: O(requests + steps + members). */
int val_run_load(sqlite3 *db, int64_t run_id, val_run *out, kvs_err *err);
/* Free what val_run_load allocated; safe on a zeroed struct.  Callers that
 * fill a val_run by hand with borrowed arrays must not call it. */
void val_run_free(val_run *r);

/* Members of step i: *n entries from the returned pointer. */
const sched_member *val_run_step_members(const val_run *r, int64_t i, int64_t *n);

/* The profile id named by a cost spec ("calibrated:7") or a calibrated cost
 * model's description ("calibrated: profile 7 (...)"), 0 if neither names
 * one.  Pure string parsing. */
int64_t val_profile_id_parse(const char *cost, const char *cost_desc);

/* Seconds the run charged step i for swap transfers:
 * (swap_out_blocks + swap_in_blocks) x swap_block_s. */
double val_step_swap_s(const val_run *r, int64_t i);

/* ----------------------------------------------------- which steps */

typedef enum val_sampling {
    VAL_SAMPLING_WINDOW = 0, /* steps start .. start + max_steps - 1 */
    VAL_SAMPLING_EVEN = 1    /* max_steps steps evenly spaced over start .. n_steps - 1 */
} val_sampling;

const char *val_sampling_name(val_sampling s); /* "window", "even" */
int val_sampling_parse(const char *s);         /* -1 if unknown */

/* The step indices to replay, increasing, into out (caller allocates
 * min(max_steps, n_steps - start) entries; max_steps 0 = all).  Even
 * sampling takes start + floor(k (n_steps - start) / m) for k = 0..m-1.
 * KVS_EINVAL naming --start when start >= n_steps.  *n gets the count. */
int val_pick_steps(int64_t n_steps, val_sampling s, int64_t start, int64_t max_steps,
                   int64_t *out, int64_t *n, kvs_err *err);

/* ------------------------------------------------- timing the schedule */

/* Re-time the run's schedule with step durations dur[n_steps]: keep each
 * step's members and order, and let
 *   start_i = max(end_{i-1}, latest arrival among its members) + wait_i,
 *   end_i   = start_i + dur[i],
 * where wait_i is the idle wait the stored schedule had beyond that bound
 * (start_s_i - max(stored end_{i-1}, latest arrival); 0 except the batch
 * timeout of static batching).  Then first_token_s = end of the request's
 * first step, finish_s = end of its last step (finished requests only;
 * NAN otherwise), status as stored.  With dur = the stored dur_s this
 * reproduces the stored first_token_s and finish_s bit for bit.
 * out[tr.n]; ends[n_steps] optional (NULL).  Cost: O(members). */
void val_retime(const val_run *r, const double *dur, sched_req_result *out, double *ends);

/* Re-time each request on its own clock ("drift-free"): its latencies with
 * the steps it waited for and ran in at durations dur, every earlier step
 * as predicted.  pred[n_steps] are the predicted durations, pred_ends their
 * step ends from val_retime(pred).  For request q arriving at a, with first
 * step f and last step l: k is the first step whose predicted end is after
 * a.  If k < f and step k had started before a (it was running when q
 * arrived), q's clock starts at
 *   pred_ends[k] + (pred_ends[k] - a) * (dur[k] - pred[k]) / pred[k]
 * (the rest of step k, scaled) and re-times steps k+1..l; otherwise it
 * starts at pred_ends[k-1] and re-times k..l, each with val_retime's rule
 * (start = max(clock, latest member arrival) + the stored wait).
 * first_token_s = end of f, finish_s = end of l (finished requests only).
 * A step-time error thus counts in the latencies of the requests that wait
 * for or run in that step; in val_retime a back-to-back schedule carries it
 * into every later step, so there TTFT measures the accumulated drift.
 * With dur = pred this reproduces val_retime(pred) bit for bit.  Only
 * requests with keep[q] (all when keep is NULL) are re-timed; the others
 * get NAN times.  Throughput has no meaning on these clocks.  out[tr.n].
 * Cost: O(members + requests log steps + the steps from each kept request's
 * arrival to its finish); KVS_ENOMEM or KVS_OK. */
int val_retime_local(const val_run *r, const double *pred, const double *pred_ends,
                     const double *dur, const int *keep, sched_req_result *out);

/* ------------------------------------------------------------ summary */

/* What the replay found besides the step times (filled by replay.h). */
typedef struct val_replay_stats {
    int64_t peak_blocks;      /* most KV blocks held during a replayed step (derived tables) */
    int64_t pool_blocks;      /* blocks in the device pool allocated for the replay */
    int64_t block_bytes;      /* device bytes of one block over all layers (kernels_kv_bytes) */
    int64_t storage_bytes;    /* bytes per stored KV element on the device (4 fp32, 2 fp16) */
    int64_t sched_checked;    /* steps whose derived block count was compared (all applied) */
    int64_t sched_mismatch;   /* of those, steps where it differs from steps.kv_blocks_used */
    int64_t first_mismatch;   /* first such step, -1 if none */
    int64_t hit_starts;       /* prefills that started over a prefix-cache hit */
    int64_t kv_checked;       /* requests whose KV contents were checked; -1 = check not run */
    int64_t kv_stale;         /* requests holding blocks skipped: KV not computed in full */
    double kv_nmse;           /* worst NMSE over them (NAN if none) */
    double kv_nmse_bound;     /* the bound the check is held to */
    char kv_note[128];        /* why the check did not run, or "" */
} val_replay_stats;

/* Everything the summary records about how the validation was made. */
typedef struct val_info {
    const char *device;       /* "cpu" | "cuda" */
    const char *device_name;  /* CPU model or CUDA device name */
    const char *storage;      /* "fp32" | "fp16" */
    val_sampling sampling;
    int64_t start;            /* --start */
    int64_t max_steps;        /* --max-steps (0 = all) */
    int64_t repeats;          /* timed runs per step (median kept) */
    int64_t warmup;           /* untimed runs per step */
    uint64_t seed;            /* weights and inputs */
    int64_t profile_id;       /* profile whose predictions are judged, 0 = none */
    int profile_given;        /* 1: predictions re-made with --profile; 0: the run's dur_s */
} val_info;

/* The summary as a JSON object (malloc'd into *json): the info, the step-
 * time error (signed and absolute relative error: mean, p50, p90, p99,
 * MAPE; mean absolute error in seconds) over all replayed steps, by step
 * kind and by batch-size range (1, 2-8, 9-32, 33-128, >128 requests), the
 * end-to-end metrics re-timed with predicted and with measured durations
 * (pred[n_steps] for every step; meas[k] for replayed step idx[k], already
 * including the step's swap time) over all requests and over the requests
 * whose every step was replayed, and the memory and replay checks.  Steps
 * with measured time <= 0 are left out of the statistics (counted).
 * Cost: O(members + n log n). */
int val_summary_json(const val_run *r, const val_info *info, const int64_t *idx,
                     const double *pred, const double *meas, int64_t n,
                     const val_replay_stats *st, char **json, kvs_err *err);

/* ------------------------------------------------------------ storing */

/* A validation as stored. */
typedef struct val_record {
    int64_t run_id;
    const char *device;       /* "cpu" | "cuda" */
    int64_t profile_id;       /* 0 -> NULL */
    int64_t max_steps;        /* as given (0 = all) */
    const char *sampling;     /* "window" | "even" */
    const char *summary_json;
    const int64_t *step_ids;  /* [n] replayed steps */
    const double *predicted_s;/* [n] */
    const double *measured_s; /* [n] */
    const char *const *kinds; /* [n] "prefill" | "decode" | "mixed" */
    const int64_t *batch;     /* [n] requests in the step */
    int64_t n;
} val_record;

/* One `validations` row and its `validation_steps`, in one transaction;
 * *validation_id gets the new key.  On failure nothing is stored. */
int val_store_write(store *s, const val_record *rec, int64_t *validation_id, kvs_err *err);

/* ------------------------------------------------------------ report */

/* Print validation `validation_id` of db as a table (header, step-time
 * error by group, end-to-end metrics, memory and replay checks).
 * KVS_EINVAL "validation N not found".  Cost: a few queries. */
int val_report_print(FILE *f, sqlite3 *db, int64_t validation_id, kvs_err *err);

#endif
