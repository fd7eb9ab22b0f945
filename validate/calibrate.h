/* calibrate.h — times the real kernels (kernels/kernels.h) over a grid of
 * shapes, as the calibrated cost model needs them:
 *   token ops (RMSNorm, QKV/O/gate-up/down projections, RoPE, KV append,
 *   SwiGLU)                 at tokens per step T in grid.tokens;
 *   decode attention        at batch B x context C (after the step), and
 *                           uneven batches (half at the shortest context,
 *                           half at C);
 *   prefill attention       at B prefills x length L over c cached tokens
 *                           (c > 0: a chunk over stored context);
 *   LM head                 at n sequences;
 *   whole layers ("layer")  at each T (one prompt) and each B (decodes):
 *                           the ops back to back, checked against their sum;
 *   whole steps ("step")    decodes at every B, an uneven decode batch, a
 *                           prompt, a chunk over stored context beside
 *                           decodes, a prompt with decodes: the per-step
 *                           overhead is fitted across that range.
 * Each point runs `warmup` untimed calls, then `repeats` timed samples; a
 * sample (CUDA events on GPU, the thread's CPU clock on CPU) times N calls
 * enqueued back to back and divides by N, with N chosen per point so that a
 * sample lasts about CALIB_SAMPLE_S (at most CALIB_MAX_LAUNCHES): a lone
 * tiny kernel between two events would carry a launch gap it does not have
 * inside a step.  Whole steps are timed one per sample (fresh input each).
 * It keeps the median and the 10th/90th percentiles (nearest rank).  One layer's weights and one layer's KV pool
 * stand for all layers (same shapes, same traffic).  The bytes a grid needs
 * are computed first and compared with free device (or host) memory, so a
 * grid that cannot fit is refused before anything is allocated.
 */
#ifndef CALIBRATE_H
#define CALIBRATE_H

#include <stddef.h>
#include <stdint.h>

#include "../kernels/kernels.h"
#include "../models/model.h"
#include "../base/kvs.h"
#include "../cost/profile.h"

#define CALIB_MAX_GRID 32

typedef struct calib_grid {
    char name[16];                       /* "quick" or "full" */
    int64_t tokens[CALIB_MAX_GRID];      /* token-op sizes, tokens */
    size_t n_tokens;
    int64_t dec_batch[CALIB_MAX_GRID];   /* decode batch sizes, sequences */
    size_t n_dec_batch;
    int64_t dec_ctx[CALIB_MAX_GRID];     /* decode contexts after the step, tokens */
    size_t n_dec_ctx;
    int64_t pre_len[CALIB_MAX_GRID];     /* prefill lengths, tokens */
    size_t n_pre_len;
    int64_t pre_batch[CALIB_MAX_GRID];   /* prefills per step */
    size_t n_pre_batch;
    int64_t pre_cached[CALIB_MAX_GRID];  /* tokens already cached per prefill
                                            (0 = whole prompt; > 0 = a chunk
                                            or a prefix-cache hit) */
    size_t n_pre_cached;
    int64_t max_pre_tokens;              /* cap on pre_batch * pre_len, tokens */
    int64_t lm_seqs[CALIB_MAX_GRID];     /* LM-head sequences */
    size_t n_lm_seqs;
    int64_t block_size;                  /* KV block, tokens */
} calib_grid;

/* The preset grid `name` ("quick" | "full") for a backend ("cpu" |
 * "cuda"), with contexts and lengths clipped to the model's max_ctx.
 * Unknown name: KVS_EINVAL naming --grid. */
int calib_grid_preset(const char *name, const char *device, const model_spec *m,
                      calib_grid *g, kvs_err *err);

#define CALIB_STEP_MAX_SEQS 512
#define CALIB_MAX_STEPS 16          /* steps calib_default_steps gives, at most */
#define CALIB_SAMPLE_S 200e-6       /* target length of one timed sample, seconds */
#define CALIB_MAX_LAUNCHES 64       /* calls per timed sample, at most */

/* One step shape: n sequences with q new and c cached tokens each. */
typedef struct calib_step {
    int64_t n;                       /* sequences, 1 .. CALIB_STEP_MAX_SEQS */
    int64_t q[CALIB_STEP_MAX_SEQS];  /* new tokens per sequence, >= 1 */
    int64_t c[CALIB_STEP_MAX_SEQS];  /* cached tokens before the step, >= 0 */
} calib_step;

/* Whether the grid measures B prefills of L tokens over c cached ones:
 * c + L within the model's context, and B * L <= max_pre_tokens unless
 * B == 1. */
int calib_prefill_point_ok(const calib_grid *g, const model_spec *m, int64_t b, int64_t l,
                           int64_t c);

/* Memory a grid needs on the backend, bytes. */
typedef struct calib_plan {
    int64_t max_tokens;   /* largest step, tokens */
    int64_t max_seqs;     /* largest step, sequences */
    int64_t kv_blocks;    /* blocks in the single KV pool */
    int64_t weights_bytes, kv_bytes, acts_bytes, workspace_bytes;
    int64_t total_bytes;  /* sum of the above */
} calib_plan;

void calib_plan_grid(const kernels_backend *be, const model_spec *m, const calib_grid *g,
                     const calib_step *steps, size_t n_steps, calib_plan *out);

/* One measured point (a kernel_measurements row). */
typedef struct calib_point {
    char op[24];          /* "rmsnorm", "qkv_proj", ..., "decode_attn", "step" */
    int64_t tokens;       /* tokens in the timed call */
    int64_t batch;        /* sequences */
    int64_t context;      /* context per sequence after the step (attention) */
    int64_t kv_read;      /* sum of decode contexts after the step */
    int64_t prefill_sq;   /* sum over prefills of q^2 */
    int64_t prefill_ctx;  /* sum over prefills of q * c, tokens^2 */
    int64_t prefill_cached; /* sum over prefills of c, tokens */
    int64_t n_prefill, n_decode; /* sequence kinds */
    double median_s, p10_s, p90_s; /* seconds */
    int64_t repeats;      /* timed samples */
    int64_t launches;     /* calls per sample (back to back) */
    char shape_json[256]; /* the shape, JSON (with "launches") */
} calib_point;

typedef struct calib_options {
    const calib_grid *grid;  /* required */
    int64_t warmup;          /* untimed runs per point, >= 0 */
    int64_t repeats;         /* timed runs per point, >= 1 */
    uint64_t seed;           /* weights and inputs */
    /* Optional: called after each point (progress output). */
    void (*progress)(void *ctx, const calib_point *p);
    void *progress_ctx;
} calib_options;

typedef struct calib_result {
    calib_point *pts;        /* [n], owned */
    size_t n;
    calib_plan plan;         /* memory used */
} calib_result;

/* The whole steps timed for the overhead fit, derived from the grid (up
 * to cap, at most CALIB_MAX_STEPS are made). */
size_t calib_default_steps(const calib_grid *g, calib_step *out, size_t cap);

/* Measure every point of the grid plus the given whole steps.  Refuses
 * (KVS_EINVAL, before allocating) a plan larger than the backend's free
 * memory, naming the bytes.  Cost: the kernels' time x (warmup + repeats). */
int calib_measure(kernels_backend *be, const model_spec *m, const calib_options *o,
                  const calib_step *steps, size_t n_steps, calib_result *out, kvs_err *err);
void calib_result_free(calib_result *r);

/* A model loaded on a backend for timing whole steps (used by calib_measure,
 * by the tests' held-out steps, and by validation replays). */
typedef struct calib_bench calib_bench;

int calib_bench_open(kernels_backend *be, const model_spec *m, int64_t max_tokens,
                     int64_t max_seqs, int64_t kv_blocks, int64_t block_size, uint64_t seed,
                     calib_bench **out, kvs_err *err);
void calib_bench_close(calib_bench *b);
/* Time one whole step (all layers + LM head): median/p10/p90 into p, with
 * op "step" and the step's features.  KV blocks are handed out in order;
 * the step must fit the bench's pool.  Cost: (warmup + repeats) steps. */
int calib_bench_step(calib_bench *b, const calib_step *s, int64_t warmup, int64_t repeats,
                     calib_point *p, kvs_err *err);

#endif
