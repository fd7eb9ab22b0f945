/* profile_internal.h — the body of a profile, shared by the profile
 * module's files (profile.c: predict and the cost model; profile_json.c:
 * JSON both ways) and validate/profile_fit.c, which fills it.  Not an API. */
#ifndef PROFILE_INTERNAL_H
#define PROFILE_INTERNAL_H

#include "profile.h"

#define PROFILE_MAX_OPS 16
#define PROFILE_MAX_FEAT 6

/* Features of the least-squares ops, computed from a cost_batch. */
typedef enum profile_feat {
    PROFILE_FEAT_ONE,            /* 1 when the op runs */
    PROFILE_FEAT_N_DECODE,       /* decode sequences */
    PROFILE_FEAT_KV_READ,        /* sum of decode contexts, tokens */
    PROFILE_FEAT_N_PREFILL,      /* prefill sequences */
    PROFILE_FEAT_PREFILL_TOKENS, /* tokens - n_decode */
    PROFILE_FEAT_PREFILL_CACHED, /* sum over prefills of c, tokens */
    PROFILE_FEAT_PREFILL_SQ,     /* sum over prefills of q^2 */
    PROFILE_FEAT_PREFILL_CTX     /* sum over prefills of q * c */
} profile_feat;

typedef struct prof_op {
    const profile_op_info *info;      /* name, kind */
    int per_layer;                  /* calls per layer; 0 = once per step */
    int64_t n;                      /* table points */
    double *x, *y;                  /* [n] tokens (or sequences) ascending -> seconds */
    int nf;                         /* features (least-squares ops), 0 for tables */
    double coef[PROFILE_MAX_FEAT];  /* seconds per feature unit, >= 0 */
} prof_op;

struct profile {
    model_spec m;                   /* fitted for */
    double overhead_s;              /* per step, seconds (may be < 0) */
    double overhead_per_seq_s;      /* per sequence of the step, seconds */
    prof_op ops[PROFILE_MAX_OPS];   /* every non-step op of calibrate.h */
    size_t n_ops;
    profile_op_error errs[PROFILE_MAX_OPS + 2]; /* per op, then "step", "layer" */
    size_t n_errs;
};

/* The features of an op kind (decode: 3, prefill: 6, tables: 0). */
const profile_feat *profile_op_feats(profile_op_kind k, int *nf);
const char *profile_feat_name(profile_feat f);
/* Feature f of a step's batch. */
double profile_feat_value(profile_feat f, const cost_batch *b);
/* Seconds of every op of a step, without the per-step overhead. */
double profile_ops_s(const profile *p, const cost_batch *b);

#endif
