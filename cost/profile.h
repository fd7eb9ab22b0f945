/* profile.h — the calibrated cost model: a per-operation cost profile (fitted
 * from kernel measurements by validate/profile.h's profile_fit, stored as
 * JSON in the `profiles` table by store/) and the cost_model it predicts
 * step times with (cost/cost.h).  This module owns the op table, the
 * prediction and the JSON form; the JSON is read back with SQLite's JSON
 * functions, the one library it uses.
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
 * The per-step overhead is a line in the step's sequences, o0 + o1 n_seqs,
 * fitted by least squares (relative error) to (measured - summed ops) over
 * whole steps across the batch range; neither term is clamped (a negative
 * o0 says the isolated ops overstate what a step pays), and the fit's error
 * is reported instead.  A predicted step is never below 0 s.
 * Fit errors: leave-one-out for tables, in-sample for least squares and
 * steps; "layer" compares whole measured layers with the sum of their ops;
 * relative |pred - meas| / meas.
 */
#ifndef COST_PROFILE_H
#define COST_PROFILE_H

#include <stddef.h>
#include <stdint.h>

#include "../base/kvs.h"
#include "../models/model.h"
#include "cost.h"

typedef struct sqlite3 sqlite3;
typedef struct profile profile;

/* The operations a profile is made of: how each is sized (its grid) and how
 * often it runs per step. */
typedef enum profile_op_kind {
    PROFILE_OP_KIND_TOKENS,  /* sized by tokens in the step */
    PROFILE_OP_KIND_DECODE,  /* decode attention: decode batch x contexts */
    PROFILE_OP_KIND_PREFILL, /* prefill attention: prefill batch x lengths */
    PROFILE_OP_KIND_SEQS,    /* LM head: sequences in the step */
    PROFILE_OP_KIND_STEP,    /* a whole step (overhead fit only) */
    PROFILE_OP_KIND_LAYER    /* one decoder layer (a check of the per-op sum only) */
} profile_op_kind;

typedef struct profile_op_info {
    const char *name;    /* "rmsnorm", "qkv_proj", ... as stored in `op` */
    profile_op_kind kind;
    int per_layer;       /* calls per layer; 0 = once per step */
} profile_op_info;

/* The ops in table order (profile_op_at(PROFILE_OP_X) is op X). */
typedef enum profile_op {
    PROFILE_OP_RMSNORM, PROFILE_OP_QKV, PROFILE_OP_ROPE, PROFILE_OP_KV_APPEND,
    PROFILE_OP_O_PROJ, PROFILE_OP_GATE_UP, PROFILE_OP_SWIGLU, PROFILE_OP_DOWN,
    PROFILE_OP_DECODE_ATTN, PROFILE_OP_PREFILL_ATTN, PROFILE_OP_LM_HEAD, PROFILE_OP_STEP,
    PROFILE_OP_LAYER, PROFILE_OP_COUNT
} profile_op;

size_t profile_op_count(void);
const profile_op_info *profile_op_at(size_t i);      /* NULL past the end */
const profile_op_info *profile_op_find(const char *name); /* NULL if unknown */


/* Fit error of one op, for the summary and fit_error_json (filled by
 * validate/profile.h's profile_fit). */
typedef struct profile_op_error {
    char op[24];          /* op name, or "step" */
    const char *method;   /* "interp-loo", "nnls", "overhead", "sum-of-ops" */
    int64_t n;            /* points */
    double median_rel;    /* median relative error */
    double max_rel;       /* largest relative error */
} profile_op_error;

void profile_free(profile *p);

/* Predicted seconds of a step, and of one op's calls in it (all layers). */
double profile_step_s(const profile *p, const cost_batch *b);
/* NAN if op is unknown. */
double profile_op_s(const profile *p, const char *op, const cost_batch *b);
double profile_overhead_s(const profile *p);         /* o0, seconds */
double profile_overhead_per_seq_s(const profile *p); /* o1, seconds per sequence */
/* Predicted seconds of one decoder layer (the per-layer ops once each). */
double profile_layer_s(const profile *p, const cost_batch *b);

size_t profile_error_count(const profile *p);
const profile_op_error *profile_error_at(const profile *p, size_t i);

/* The profile as params_json and fit_error_json (malloc'd strings). */
int profile_to_json(const profile *p, char **params_json, char **fit_error_json, kvs_err *err);
/* Parse params_json (with SQLite's JSON functions on db); checks every op
 * and number, KVS_EINVAL naming the first bad field. */
int profile_from_json(sqlite3 *db, const char *params_json, profile **out, kvs_err *err);
/* The model shape the profile was fitted for. */
const model_spec *profile_model(const profile *p);

/* A cost_model over profile p (taking ownership of p, freed with the
 * model; freed here too on failure) described by desc (copied, at most 511
 * characters).  Cost: O(1). */
int cost_profile_create(profile *p, const char *desc, cost_model *out, kvs_err *err);

#endif
