/* profile.h — the calibrated cost model: a per-operation cost profile fitted
 * from kernel measurements (validate/calibrate.h), stored as JSON in the
 * `profiles` table, and loaded back as a cost_model (cost/cost.h).
 *
 * Step time = overhead
 *           + layers x sum over per-layer ops of calls x op(batch)
 *           + lm_head(batch).
 * Token-sized ops (norms, projections, RoPE, KV append, SwiGLU) and the LM
 * head are tables of measured medians, interpolated linearly in tokens (or
 * sequences) and extrapolated along the last segment: GEMM time is flat
 * while weight-bound and linear once compute-bound, which one line cannot
 * follow.  Attention ops are non-negative least squares (relative error
 * weighted) over the cost_batch features:
 *   decode_attn  = [n_decode > 0] c0 + c1 n_decode + c2 kv_read
 *   prefill_attn = [n_prefill > 0] c0 + c1 n_prefill + c2 prefill_tokens
 *                  + c3 prefill_cached + c4 prefill_sq + c5 prefill_ctx
 *                  (prefill_tokens = tokens - n_decode; a chunk of q tokens
 *                  over c cached ones adds q^2 and q c: see cost/cost.h)
 * The overhead is the median of (measured - summed ops) over whole steps,
 * clipped at 0.  Fit errors: leave-one-out for tables, in-sample for
 * least squares and steps; relative |pred - meas| / meas.
 */
#ifndef PROFILE_H
#define PROFILE_H

#include <stddef.h>
#include <stdint.h>

#include "../models/model.h"
#include "../cost/cost.h"
#include "../base/kvs.h"
#include "calibrate.h"

typedef struct sqlite3 sqlite3;
typedef struct profile profile;

/* Fit error of one op, for the summary and fit_error_json. */
typedef struct profile_op_error {
    char op[24];          /* op name, or "step" */
    const char *method;   /* "interp-loo", "nnls", "overhead" */
    int64_t n;            /* points */
    double median_rel;    /* median relative error */
    double max_rel;       /* largest relative error */
} profile_op_error;

/* Fit a profile for model m from measured points (every op of
 * calib_op_at must have at least one point; steps are optional).
 * Cost: O(points x 2^features). */
int profile_fit(const model_spec *m, const calib_point *pts, size_t n, profile **out,
                kvs_err *err);
void profile_free(profile *p);

/* Predicted seconds of a step, and of one op's calls in it (all layers). */
double profile_step_s(const profile *p, const cost_batch *b);
/* NAN if op is unknown. */
double profile_op_s(const profile *p, const char *op, const cost_batch *b);
double profile_overhead_s(const profile *p);

size_t profile_error_count(const profile *p);
const profile_op_error *profile_error_at(const profile *p, size_t i);

/* The profile as params_json and fit_error_json (malloc'd strings). */
int profile_to_json(const profile *p, char **params_json, char **fit_error_json, kvs_err *err);
/* Parse params_json (with SQLite's JSON functions on db); checks every op
 * and number, KVS_EINVAL naming the first bad field. */
int profile_from_json(sqlite3 *db, const char *params_json, profile **out, kvs_err *err);
/* The model shape the profile was fitted for. */
const model_spec *profile_model(const profile *p);

/* The cost model "calibrated" (newest profile for m->name on gpu_name) or
 * "calibrated:ID".  A profile fitted for another GPU, another model name or
 * another shape is refused (KVS_EINVAL, naming both) unless force; with
 * force and no ID, the newest profile of the model on any GPU is taken.
 * describe() names the profile id, calibration, model, GPU and device. */
int cost_calibrated_create(sqlite3 *db, const char *spec, const model_spec *m,
                           const char *gpu_name, int force, cost_model *out, kvs_err *err);

#endif
