/* profile.c — the op table of a profile, predicting step times with it, and
 * the cost_model over it.  JSON both ways: profile_json.c. */
#include "profile.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profile_internal.h"

/* ------------------------------------------------------------ ops */

static const profile_op_info ops[PROFILE_OP_COUNT] = {
    {"rmsnorm", PROFILE_OP_KIND_TOKENS, 2},        /* before attention and MLP */
    {"qkv_proj", PROFILE_OP_KIND_TOKENS, 1},
    {"rope", PROFILE_OP_KIND_TOKENS, 1},
    {"kv_append", PROFILE_OP_KIND_TOKENS, 1},
    {"o_proj", PROFILE_OP_KIND_TOKENS, 1},
    {"gate_up_proj", PROFILE_OP_KIND_TOKENS, 1},
    {"swiglu", PROFILE_OP_KIND_TOKENS, 1},
    {"down_proj", PROFILE_OP_KIND_TOKENS, 1},
    {"decode_attn", PROFILE_OP_KIND_DECODE, 1},
    {"prefill_attn", PROFILE_OP_KIND_PREFILL, 1},
    {"lm_head", PROFILE_OP_KIND_SEQS, 0},
    {"step", PROFILE_OP_KIND_STEP, 0},
    {"layer", PROFILE_OP_KIND_LAYER, 0},
};

size_t profile_op_count(void) { return PROFILE_OP_COUNT; }
const profile_op_info *profile_op_at(size_t i) { return i < PROFILE_OP_COUNT ? &ops[i] : NULL; }

const profile_op_info *profile_op_find(const char *name)
{
    for (size_t i = 0; i < PROFILE_OP_COUNT; i++)
        if (!strcmp(ops[i].name, name))
            return &ops[i];
    return NULL;
}

static const profile_feat decode_feats[] = {PROFILE_FEAT_ONE, PROFILE_FEAT_N_DECODE,
                                            PROFILE_FEAT_KV_READ};
static const profile_feat prefill_feats[] = {
    PROFILE_FEAT_ONE,            PROFILE_FEAT_N_PREFILL, PROFILE_FEAT_PREFILL_TOKENS,
    PROFILE_FEAT_PREFILL_CACHED, PROFILE_FEAT_PREFILL_SQ, PROFILE_FEAT_PREFILL_CTX};
static const char *const feat_names[] = {"one",            "n_decode",       "kv_read",
                                         "n_prefill",      "prefill_tokens", "prefill_cached",
                                         "prefill_sq",     "prefill_ctx"};

const profile_feat *profile_op_feats(profile_op_kind k, int *nf)
{
    *nf = k == PROFILE_OP_KIND_DECODE ? 3 : k == PROFILE_OP_KIND_PREFILL ? 6 : 0;
    return k == PROFILE_OP_KIND_DECODE ? decode_feats : prefill_feats;
}

const char *profile_feat_name(profile_feat f) { return feat_names[f]; }

double profile_feat_value(profile_feat f, const cost_batch *b)
{
    switch (f) {
    case PROFILE_FEAT_ONE: return 1.0;
    case PROFILE_FEAT_N_DECODE: return (double)b->n_decode;
    case PROFILE_FEAT_KV_READ: return (double)b->kv_read;
    case PROFILE_FEAT_N_PREFILL: return (double)b->n_prefill;
    case PROFILE_FEAT_PREFILL_TOKENS: return (double)(b->tokens - b->n_decode);
    case PROFILE_FEAT_PREFILL_CACHED: return (double)b->prefill_cached;
    case PROFILE_FEAT_PREFILL_SQ: return (double)b->prefill_sq;
    default: return (double)b->prefill_ctx;
    }
}

/* Linear in x between points, flat below the first, last segment beyond. */
static double interp(const double *x, const double *y, int64_t n, double v)
{
    if (n == 1 || v <= x[0])
        return y[0];
    int64_t i = 1;
    while (i < n - 1 && x[i] < v)
        i++;
    double t = (v - x[i - 1]) / (x[i] - x[i - 1]), r = y[i - 1] + t * (y[i] - y[i - 1]);
    return r > 0 ? r : 0;
}

static double op_s(const prof_op *o, const cost_batch *b)
{
    int nf;
    const profile_feat *f = profile_op_feats(o->info->kind, &nf);
    double s = 0;
    switch (o->info->kind) {
    case PROFILE_OP_KIND_TOKENS:
        return b->tokens > 0 ? interp(o->x, o->y, o->n, (double)b->tokens) : 0.0;
    case PROFILE_OP_KIND_SEQS:
        return b->n_prefill + b->n_decode > 0
                   ? interp(o->x, o->y, o->n, (double)(b->n_prefill + b->n_decode))
                   : 0.0;
    case PROFILE_OP_KIND_DECODE:
        if (b->n_decode <= 0)
            return 0.0;
        break;
    case PROFILE_OP_KIND_PREFILL:
        if (b->n_prefill <= 0)
            return 0.0;
        break;
    default: return 0.0;
    }
    for (int j = 0; j < nf; j++)
        s += o->coef[j] * profile_feat_value(f[j], b);
    return s;
}

/* All ops of a step (no overhead). */
double profile_ops_s(const profile *p, const cost_batch *b)
{
    double s = 0;
    for (size_t i = 0; i < p->n_ops; i++) {
        const prof_op *o = &p->ops[i];
        s += (o->per_layer ? (double)(o->per_layer * p->m.layers) : 1.0) * op_s(o, b);
    }
    return s;
}

double profile_step_s(const profile *p, const cost_batch *b)
{
    if (b->tokens <= 0 && b->n_prefill + b->n_decode <= 0)
        return 0.0; /* a step with no request takes no time */
    double s = p->overhead_s + p->overhead_per_seq_s * (double)(b->n_prefill + b->n_decode) +
               profile_ops_s(p, b);
    return s > 0 ? s : 0.0; /* a time, whatever the fitted overhead's sign */
}

double profile_layer_s(const profile *p, const cost_batch *b)
{
    double s = 0;
    for (size_t i = 0; i < p->n_ops; i++)
        if (p->ops[i].per_layer)
            s += (double)p->ops[i].per_layer * op_s(&p->ops[i], b);
    return s;
}

double profile_op_s(const profile *p, const char *op, const cost_batch *b)
{
    for (size_t i = 0; i < p->n_ops; i++)
        if (!strcmp(p->ops[i].info->name, op))
            return (p->ops[i].per_layer ? (double)(p->ops[i].per_layer * p->m.layers) : 1.0) *
                   op_s(&p->ops[i], b);
    return NAN;
}

double profile_overhead_s(const profile *p) { return p->overhead_s; }
double profile_overhead_per_seq_s(const profile *p) { return p->overhead_per_seq_s; }
size_t profile_error_count(const profile *p) { return p->n_errs; }
const profile_op_error *profile_error_at(const profile *p, size_t i)
{
    return i < p->n_errs ? &p->errs[i] : NULL;
}
const model_spec *profile_model(const profile *p) { return &p->m; }

void profile_free(profile *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n_ops; i++) {
        free(p->ops[i].x);
        free(p->ops[i].y);
    }
    free(p);
}


/* ------------------------------------------------------- the cost model */

typedef struct calibrated {
    profile *p;      /* owned */
    char desc[512];  /* provenance line */
} calibrated;

static double calibrated_step_s(void *self, const cost_batch *b)
{
    return profile_step_s(((calibrated *)self)->p, b);
}

static void calibrated_free(void *self)
{
    calibrated *c = self;
    if (c)
        profile_free(c->p);
    free(c);
}

static void calibrated_describe(void *self, char *buf, size_t n)
{
    snprintf(buf, n, "%s", ((calibrated *)self)->desc);
}

static const cost_model_vt calibrated_vt = {
    .name = "calibrated",
    .step_s = calibrated_step_s,
    .free = calibrated_free,
    .describe = calibrated_describe,
};

int cost_profile_create(profile *p, const char *desc, cost_model *out, kvs_err *err)
{
    out->vt = NULL;
    out->self = NULL;
    calibrated *c = calloc(1, sizeof *c);
    if (!c) {
        profile_free(p);
        return kvs_errf(err, KVS_ENOMEM, "out of memory (cost model)");
    }
    c->p = p;
    snprintf(c->desc, sizeof c->desc, "%s", desc ? desc : "calibrated");
    out->vt = &calibrated_vt;
    out->self = c;
    return KVS_OK;
}
