/* cost.h — step-cost models: how long one engine step takes.
 *
 * A cost model sees only the step's batch summary (cost_batch) and returns
 * seconds.  Models are a small table of function pointers (cost_model_vt)
 * chosen by name at run time:
 *   affine:c0,c1,c2,c3   d = c0 + c1*tokens + c2*kv_read
 *                          + c3*(prefill_sq + 2*prefill_ctx)
 *   roofline             per-op max(FLOPs/compute, bytes/bandwidth) sums
 *   calibrated[:ID]      a fitted profile from the store (built by job/)
 * Families are chosen by name from a registry (cost_family_register);
 * adding a built-in model is one new file plus one line in cost.c's
 * builtin table, and a program may register its own at start-up.
 */
#ifndef COST_H
#define COST_H

#include <stddef.h>
#include <stdint.h>

#include "../base/kvs.h"
#include "../models/model.h"

/* A prefill "chunk" computes q new tokens of a prompt over c tokens whose KV
 * is already stored (earlier chunks, or a prefix-cache hit); an unchunked
 * prefill without a hit is q = P+g, c = 0, which leaves the two last fields
 * 0 (docs/semantics-extensions.md, section C).  Causal attention of a chunk
 * covers q*c + q^2/2 query-key pairs, so prefill_sq + 2*prefill_ctx is the
 * attention work in the units of prefill_sq: summed over the chunks of one
 * prompt it equals (P+g)^2 however the prompt is split. */
typedef struct cost_batch {
    int64_t tokens;     /* prefill tokens (q each) + one per decode */
    int64_t kv_read;    /* sum over decodes of context after the step */
    int64_t prefill_sq; /* sum over prefills of q^2 ((P+g)^2 unchunked) */
    int64_t n_prefill;  /* prefill requests (chunks) in the step */
    int64_t n_decode;   /* decode requests in the step */
    int64_t prefill_ctx;    /* sum over prefill chunks of q*c, tokens^2 */
    int64_t prefill_cached; /* sum over prefill chunks of c, tokens of KV read */
} cost_batch;

struct cost_run;

typedef struct cost_model_vt {
    const char *name;
    /* Required: seconds for one step (>= 0). Cost: O(1). */
    double (*step_s)(void *self, const cost_batch *b);
    /* Optional: release self. */
    void (*free)(void *self);
    /* Optional: a one-line description (parameters) for provenance. */
    void (*describe)(void *self, char *buf, size_t n);
    /* Optional: fill out's terms for batches b but for kv_read (a run of
     * decode steps, cost_run_init); 0 when the model has no such form for
     * b (then cost_run_s calls step_s).  Cost: O(ops). */
    int (*run_init)(void *self, const cost_batch *b, struct cost_run *out);
    /* Optional: the part of step_s(b) that is the engine's CPU work per
     * scheduling decision (scheduling, input preparation, output
     * processing), which the steps of a V0 multi-step group after its first
     * do not repeat (docs/semantics-extensions.md M5); absent: 0, the whole
     * step is GPU time.  Cost: O(1). */
    double (*overhead_s)(void *self, const cost_batch *b);
} cost_model_vt;

typedef struct cost_model {
    const cost_model_vt *vt; /* never NULL once created */
    void *self;              /* model state, owned */
} cost_model;

/* What a cost model may be built from: the model, GPU and TP degree of
 * the run (m and g NULL when the caller has none, e.g. affine in tests). */
typedef struct cost_env {
    const model_spec *m;  /* borrowed, may be NULL */
    const gpu_spec *g;    /* borrowed, may be NULL */
    int64_t tp;           /* tensor-parallel degree, >= 1 */
    int64_t ep;           /* expert-parallel degree, >= 1 */
    int64_t cp;           /* context-parallel degree, >= 1 (0 reads as 1) */
} cost_env;

/* A family of cost models in the registry: the spec "NAME" (params 0) or
 * "NAME:PARAMS" (params 1) builds one.  Built in: affine (params) and
 * roofline; "calibrated[:ID]" needs the store and is built by the job layer
 * (job/), not here. */
typedef struct cost_family {
    const char *name;     /* spec name, e.g. "affine" */
    const char *usage;    /* as listed in errors, e.g. "affine:c0,c1,c2,c3" */
    int params;           /* 0: NAME alone; 1: NAME:PARAMS; 2: either */
    /* Required: build the model from PARAMS ("" when params is 0). */
    int (*create)(const char *params, const cost_env *env, cost_model *out, kvs_err *err);
} cost_family;

/* Add a family to the registry (f is borrowed and must outlive its use).
 * KVS_EINVAL if the name is taken or the registry (32 families) is full.
 * Not thread-safe: register at start-up, before any run.  Cost: O(families). */
int cost_family_register(const cost_family *f, kvs_err *err);

/* Create a model from its spec string through the registry.  An unknown
 * name is KVS_EINVAL listing every family.  Cost: O(families) + the
 * family's create. */
int cost_model_create(const char *spec, const model_spec *m, const gpu_spec *g,
                      int64_t tp, cost_model *out, kvs_err *err);
/* As cost_model_create with the whole environment (expert parallelism). */
int cost_model_create_env(const char *spec, const cost_env *env, cost_model *out, kvs_err *err);
int cost_affine_create(const char *params, cost_model *out, kvs_err *err);
int cost_roofline_create(const model_spec *m, const gpu_spec *g, int64_t tp,
                         cost_model *out, kvs_err *err);

/* The figures the roofline model assumes beyond the datasheet: achievable
 * fractions of peak, collective latency and the per-step CPU overhead.
 * Defaults and their sources: cost_roofline_consts_default and
 * docs/cost-models.md.  A calibrated profile replaces them with fits. */
typedef struct cost_roofline_consts {
    double eff_gemm;         /* fraction of peak FP16 FLOP/s a GEMM reaches */
    double eff_attn;         /* fraction of peak FP16 FLOP/s attention reaches */
    double eff_hbm;          /* fraction of peak HBM bandwidth reached */
    double eff_nvlink;       /* fraction of NVLink per-direction bandwidth */
    double collective_lat_s; /* fixed latency of one all-reduce/gather, s */
    double step_overhead_s;  /* CPU scheduling, launch, sampling per step, s */
    /* Added for the engine profiles (0 = off, the V0 profile's values) */
    double step_overhead_seq_s;  /* more step overhead per sequence in the step, s */
    double kernel_lat_s;         /* fixed time of each kernel (op instance), s */
    double collective_lat_peer_s; /* more all-reduce latency per TP peer past 2, s */
    double gemm_dim_half;    /* dense GEMMs run at d / (d + this) of their rate, d the
                                smaller per-GPU weight dimension, elements; 0 = off */
    double eff_pcie;         /* fraction of the host link's per-direction bandwidth an
                                all-reduce reaches on a GPU without NVLink (collectives
                                over PCIe through the host: link_is_pcie) */
    double kv_reread;        /* decode attention reads each cached K/V 1 + kv_reread *
                                (group - 1) times, group = query heads per KV head:
                                0 = once per KV head (GQA-aware kernels), 1 = once per
                                query head (a per-head kernel); fraction */
    double ridge_loss;       /* share of the smaller of an op's compute and memory
                                times not hidden under the larger: op time = max +
                                ridge_loss * min; 0 = the plain roofline; fraction */
    double eff_fp8;          /* ops at the GPU's FP8 peak (FP8 weights) reach this share
                                of the efficiency FP16 ones reach of theirs: their rate is
                                fp8_flops * eff_fp8 * eff_gemm (or eff_attn); fraction */
} cost_roofline_consts;

void cost_roofline_consts_default(cost_roofline_consts *c);

/* The constants by name (cost_consts.c): each a double of
 * cost_roofline_consts at `off`, with its unit, range and the source of
 * its default. */
typedef struct cost_const_info {
    const char *name;     /* key in specs and files, e.g. "eff_gemm" */
    const char *unit;     /* "fraction" or "s" */
    size_t off;           /* offsetof in cost_roofline_consts */
    double lo, hi;        /* range: (lo, hi] when lo_open, else [lo, hi] */
    int lo_open;
    const char *source;   /* where the default comes from, one line */
} cost_const_info;

#define COST_MAX_CONSTS 32
typedef char cost_const_origin[1100]; /* "default", "--cost", "FILE:LINE" */

size_t cost_roofline_const_count(void);
const cost_const_info *cost_roofline_const_at(size_t i); /* NULL past the end */
/* The value of constant c in k (c from cost_roofline_const_at).  O(1). */
double cost_roofline_const_value(const cost_roofline_consts *k, const cost_const_info *c);
/* Every origin "default". */
void cost_roofline_origins_default(cost_const_origin origin[COST_MAX_CONSTS]);
/* Apply "key=value,..." to k, left to right; the key "file=PATH" reads a
 * constants file (cost_roofline_consts_read) at that point.  Time
 * constants also take _ms and _us keys (step_overhead_ms=4).  An unknown
 * key, a value that is not a number or one out of range is KVS_EINVAL
 * naming it.  origin (may be NULL) records where each value came from.
 * Cost: O(keys x constants). */
int cost_roofline_consts_parse(const char *params, cost_roofline_consts *k,
                               cost_const_origin origin[COST_MAX_CONSTS], kvs_err *err);
/* The same, the values' origin and the errors' prefix `where` (e.g.
 * "engine trtllm") instead of "--cost". */
int cost_roofline_consts_parse_as(const char *params, const char *where, cost_roofline_consts *k,
                                  cost_const_origin origin[COST_MAX_CONSTS], kvs_err *err);
/* A constants file: key = value lines, '#' comments, the keys above;
 * errors name FILE:LINE. */
int cost_roofline_consts_read(const char *path, cost_roofline_consts *k,
                              cost_const_origin origin[COST_MAX_CONSTS], kvs_err *err);
/* One line per constant: name, value, unit, origin, source; into buf[cap]
 * like snprintf.  Times under a second show in ms or us. */
size_t cost_roofline_consts_show(const cost_roofline_consts *k,
                                 const cost_const_origin origin[COST_MAX_CONSTS], char *buf,
                                 size_t cap);
/* As cost_roofline_create with explicit constants (each efficiency in
 * (0, 1], times >= 0). */
int cost_roofline_create_with(const model_spec *m, const gpu_spec *g, int64_t tp,
                              const cost_roofline_consts *k, cost_model *out,
                              kvs_err *err);
/* As cost_roofline_create_with under tensor, expert and context
 * parallelism p (model_check_par; model.h, model_op_cost_par, says what
 * ep and cp change).  p = {tp, 1, 1} is cost_roofline_create_with. */
int cost_roofline_create_par(const model_spec *m, const gpu_spec *g, const model_par *p,
                             const cost_roofline_consts *k, cost_model *out,
                             kvs_err *err);
/* Seconds each op of the step takes, summed over its repeats, as the
 * compute bound (FLOPs / (peak*eff)) and the memory bound (bytes /
 * (bandwidth*eff), plus latency for collectives); the step's time is
 * step_overhead_s + sum over ops of max(compute_s[op], memory_s[op]).
 * KVS_EINVAL when c is not a roofline model.  Cost: O(MODEL_OP_COUNT). */
int cost_roofline_breakdown(const cost_model *c, const cost_batch *b,
                            double compute_s[MODEL_OP_COUNT],
                            double memory_s[MODEL_OP_COUNT]);

static inline double cost_step_s(const cost_model *c, const cost_batch *b)
{
    return c->vt->step_s(c->self, b);
}

/* The CPU part of cost_step_s(c, b) (cost_model_vt.overhead_s), 0 when the
 * model has none.  A part of the step: a model's overhead_s never exceeds
 * its step_s.  O(1). */
static inline double cost_overhead_s(const cost_model *c, const cost_batch *b)
{
    return c->vt->overhead_s ? c->vt->overhead_s(c->self, b) : 0.0;
}

/* The steps of a leap are decode batches that differ only in kv_read, and
 * a model's step time is then a fixed sum but for the few terms that read
 * the KV (decode attention).  A cost_run holds that sum's parts for one
 * batch shape: s0, the step time summed up to the first term that depends
 * on kv_read, then each later term in order, either a constant or
 * op_time(c_pre + c_kv * kv + c_post, m_pre + m_kv * kv + m_post).  The
 * parts are the model's own partial sums, added in its own order, so
 * cost_run_s(r, kv) is bit for bit step_s of the batch with that kv_read
 * (tests/test_cost.c checks it); a model without run_init, or a batch it
 * declines, is evaluated by step_s each time. */
#define COST_RUN_TERMS 24
#define COST_RUN_KV 4 /* terms that read the KV, at most (decode attention) */
/* A term that reads the KV, as cost_run_s evaluates it. */
typedef struct cost_run_kv {
    double c_pre, c_kv, c_post;   /* compute s, s per token of kv_read, s */
    double m_pre, m_kv, m_post;   /* memory s, s per token of kv_read, s */
} cost_run_kv;

typedef struct cost_run {
    const cost_model *c;          /* borrowed: the model */
    cost_batch b;                 /* the batch shape (kv_read set per call) */
    double s0;                    /* s: the terms before the first kv term */
    double ridge;                 /* the model's ridge_loss share, fraction */
    int n;                        /* terms after s0; -1: call step_s */
    double t[COST_RUN_TERMS];     /* s: each term's time, or 0 for a kv term */
    int8_t kvi[COST_RUN_TERMS];   /* -1: a fixed term; else its index in kv */
    cost_run_kv kv[COST_RUN_KV];
} cost_run;

/* Prepare r for batches b (b's kv_read ignored).  c and r borrowed/owned
 * by the caller; nothing to free.  Cost: about one step_s. */
void cost_run_init(cost_run *r, const cost_model *c, const cost_batch *b);

/* As cost_run_init, but a no-op when r (zeroed before its first use) was
 * last prepared for the same model and batch shape: a leap that follows
 * another of the same width reuses its terms.  Cost: O(1) then. */
void cost_run_prepare(cost_run *r, const cost_model *c, const cost_batch *b);

/* Prepared runs of a few batch shapes, one per slot (chosen by the batch's
 * sequence counts mod COST_RUN_CACHE), each the last shape prepared there:
 * leaps whose widths come and go reuse their terms instead of preparing
 * them again.  Zero it before its first use; nothing to free.  About 16 KiB. */
#define COST_RUN_CACHE 32
typedef struct cost_run_cache {
    cost_run slot[COST_RUN_CACHE];
} cost_run_cache;

/* The run for batches like b (b's kv_read ignored), prepared in b's slot
 * if that slot held another shape or model.  The pointer stays valid until
 * the next cost_run_get on cc.  Cost: O(1) on a hit, else one
 * cost_run_init. */
const cost_run *cost_run_get(cost_run_cache *cc, const cost_model *c, const cost_batch *b);

/* Seconds of r's batch reading kv tokens of KV: cost_step_s's answer.
 * Cost: O(terms after the first kv term), a handful. */
static inline double cost_run_s(const cost_run *r, int64_t kv)
{
    if (r->n < 0) {
        cost_batch b = r->b;
        b.kv_read = kv;
        return cost_step_s(r->c, &b);
    }
    double s = r->s0;
    const double x = (double)kv;
    for (int i = 0; i < r->n; i++) {
        if (r->kvi[i] < 0) {
            s += r->t[i];
            continue;
        }
        const cost_run_kv *e = &r->kv[r->kvi[i]];
        const double c = e->c_pre + e->c_kv * x + e->c_post;
        const double m = e->m_pre + e->m_kv * x + e->m_post;
        s += c > m ? c + r->ridge * m : m + r->ridge * c;
    }
    return s;
}
void cost_model_describe(const cost_model *c, char *buf, size_t n);
void cost_model_free(cost_model *c);

#endif
