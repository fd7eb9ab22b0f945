/* calibrate.c — the timing loop over the real kernels (see calibrate.h):
 * the bench (a model loaded on a backend), and the
 * measurement of every grid point.  Grids and plans: calibrate_grid.c. */
#include "calibrate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/rng.h"

static int64_t blocks_for(int64_t tokens, int64_t bs) { return (tokens + bs - 1) / bs; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* ------------------------------------------------------------ bench */

struct calib_bench {
    kernels_backend *be;   /* borrowed */
    model_spec m;
    kernels_weights w;
    kernels_kv kv;         /* one layer's pool stands for every layer */
    kernels_acts a;
    int64_t block_size, kv_blocks;
    int32_t *perm;         /* [kv_blocks] shuffled block ids handed out in order */
    float *x0;             /* [max_tokens * hidden] step input */
    kernels_seq *seqs;     /* [max_seqs] scratch */
    double *samples;       /* [cap_samples] */
    int64_t cap_samples;
};

int calib_bench_open(kernels_backend *be, const model_spec *m, int64_t max_tokens,
                     int64_t max_seqs, int64_t kv_blocks, int64_t block_size, uint64_t seed,
                     calib_bench **out, kvs_err *err)
{
    *out = NULL;
    calib_bench *b = calloc(1, sizeof *b);
    if (!b)
        return kvs_errf(err, KVS_ENOMEM, "out of memory (bench)");
    b->be = be;
    b->m = *m;
    b->block_size = block_size;
    b->kv_blocks = kv_blocks;
    int rc = KVS_OK;
    b->perm = malloc((size_t)max64(kv_blocks, 1) * sizeof *b->perm);
    b->x0 = malloc((size_t)(max_tokens * m->hidden) * sizeof *b->x0);
    b->seqs = calloc((size_t)max64(max_seqs, 1), sizeof *b->seqs);
    if (!b->perm || !b->x0 || !b->seqs) {
        rc = kvs_errf(err, KVS_ENOMEM, "out of memory (bench inputs)");
        goto fail;
    }
    rng r;
    rng_init(&r, seed ^ 0x6b7673696dULL);
    for (int64_t i = 0; i < kv_blocks; i++)
        b->perm[i] = (int32_t)i;
    for (int64_t i = kv_blocks - 1; i > 0; i--) { /* scattered, like a churned pool */
        int64_t j = (int64_t)rng_below(&r, (uint64_t)i + 1);
        int32_t t = b->perm[i];
        b->perm[i] = b->perm[j];
        b->perm[j] = t;
    }
    for (int64_t i = 0; i < max_tokens * m->hidden; i++)
        b->x0[i] = (float)(2 * rng_uniform(&r) - 1);
    if ((rc = kernels_weights_init(be, m, seed, &b->w, err)) != KVS_OK ||
        (rc = kernels_kv_init(be, m, 1, kv_blocks, block_size, &b->kv, err)) != KVS_OK ||
        (rc = kernels_acts_init(be, m, max_tokens, max_seqs, &b->a, err)) != KVS_OK)
        goto fail;
    /* GEMM inputs hold data, not zeros (zeros draw less power on GPUs) */
    kernels_buf *in[] = {b->a.xn, b->a.qkv, b->a.ao, b->a.act};
    for (size_t i = 0; i < sizeof in / sizeof in[0]; i++)
        if ((rc = kernels_buf_fill_uniform(in[i], seed + 100 + i, 1.0f, 0.0f, err)) != KVS_OK)
            goto fail;
    *out = b;
    return KVS_OK;
fail:
    calib_bench_close(b);
    return rc;
}

void calib_bench_close(calib_bench *b)
{
    if (!b)
        return;
    kernels_weights_free(&b->w);
    kernels_kv_free(&b->kv);
    kernels_acts_free(&b->a);
    free(b->perm);
    free(b->x0);
    free(b->seqs);
    free(b->samples);
    free(b);
}

/* A batch of n sequences (q[i], c[i]) over consecutive entries of perm. */
static int bench_batch(calib_bench *b, const int64_t *q, const int64_t *c, int64_t n,
                       kernels_batch **out, kvs_err *err)
{
    if (n > b->a.max_seqs)
        return kvs_errf(err, KVS_EINVAL, "step of %lld sequences exceeds the bench's %lld",
                        (long long)n, (long long)b->a.max_seqs);
    int64_t off = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t need = blocks_for(c[i] + q[i], b->block_size);
        if (off + need > b->kv_blocks)
            return kvs_errf(err, KVS_EINVAL, "step needs more than the bench's %lld KV blocks",
                            (long long)b->kv_blocks);
        b->seqs[i] = (kernels_seq){.q = q[i], .c = c[i], .blocks = b->perm + off, .n_blocks = need};
        off += need;
    }
    return kernels_batch_create(b->be, b->seqs, n, b->block_size, b->kv_blocks, out, err);
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile of sorted v[n]. */
static double rank(const double *v, int64_t n, double p)
{
    int64_t k = (int64_t)(p * (double)n + 0.999999999);
    k = k < 1 ? 1 : k > n ? n : k;
    return v[k - 1];
}

static int run_op(calib_bench *b, int op, const kernels_batch *batch, kvs_err *err)
{
    kernels_backend *be = b->be;
    const model_spec *m = &b->m;
    kernels_acts *a = &b->a;
    const kernels_weights *w = &b->w;
    int64_t T = kernels_batch_tokens(batch), H = m->hidden, I = m->intermediate;
    int64_t A = m->heads * m->head_dim, W = (m->heads + 2 * m->kv_heads) * m->head_dim;
    switch (op) {
    case PROFILE_OP_RMSNORM: return kernels_op_rmsnorm(be, a->x, w->attn_norm, a->xn, T, H, err);
    case PROFILE_OP_QKV: return kernels_op_gemm(be, a->xn, w->wqkv, a->qkv, T, W, H, 0.0f, err);
    case PROFILE_OP_ROPE: return kernels_op_rope(be, m, a->qkv, batch, err);
    case PROFILE_OP_KV_APPEND: return kernels_op_kv_append(be, m, a->qkv, batch, &b->kv, 0, err);
    case PROFILE_OP_O_PROJ: return kernels_op_gemm(be, a->ao, w->wo, a->x, T, H, A, 1.0f, err);
    case PROFILE_OP_GATE_UP: return kernels_op_gemm(be, a->xn, w->wgu, a->gu, T, 2 * I, H, 0.0f, err);
    case PROFILE_OP_SWIGLU: return kernels_op_swiglu(be, a->gu, a->act, T, I, err);
    case PROFILE_OP_DOWN: return kernels_op_gemm(be, a->act, w->wd, a->x, T, H, I, 1.0f, err);
    case PROFILE_OP_DECODE_ATTN:
        return kernels_op_decode_attention(be, m, a->qkv, batch, &b->kv, 0, a->ao, err);
    case PROFILE_OP_PREFILL_ATTN:
        return kernels_op_prefill_attention(be, m, a->qkv, batch, &b->kv, 0, a->ao, err);
    case PROFILE_OP_LM_HEAD: return kernels_lm_head(be, m, w, batch, a, err);
    case PROFILE_OP_LAYER: return kernels_layer_forward(be, m, w, &b->kv, 0, batch, a, err);
    default: { /* PROFILE_OP_STEP: fresh input outside the timed region */
        int rc = kernels_buf_write(a->x, 0, b->x0, T * H, err);
        return rc != KVS_OK ? rc : kernels_step_forward(be, m, w, &b->kv, batch, a, err);
    }
    }
}

/* Append "launches" to p's shape JSON (which ends with '}'). */
static void shape_add_launches(calib_point *p)
{
    size_t len = strlen(p->shape_json);
    if (len > 0 && p->shape_json[len - 1] == '}')
        snprintf(p->shape_json + len - 1, sizeof p->shape_json - (len - 1), "%s\"launches\":%lld}",
                 len > 2 ? "," : "", (long long)p->launches);
}

/* Warm up, pick the calls per sample, then time `repeats` samples; stats
 * into p.  Steps: one call per sample, fresh input outside the timing. */
static int time_op(calib_bench *b, int op, const kernels_batch *batch, int64_t warmup,
                   int64_t repeats, calib_point *p, kvs_err *err)
{
    if (repeats > b->cap_samples) {
        double *s = realloc(b->samples, (size_t)repeats * sizeof *s);
        if (!s)
            return kvs_errf(err, KVS_ENOMEM, "out of memory (samples)");
        b->samples = s;
        b->cap_samples = repeats;
    }
    int rc = KVS_OK;
    for (int64_t i = 0; i < warmup && rc == KVS_OK; i++)
        rc = run_op(b, op, batch, err);
    int64_t launches = 1;
    if (rc == KVS_OK && op != PROFILE_OP_STEP) {
        double t1 = 0;
        if ((rc = kernels_timer_start(b->be, err)) == KVS_OK &&
            (rc = run_op(b, op, batch, err)) == KVS_OK)
            rc = kernels_timer_stop(b->be, &t1, err);
        if (rc == KVS_OK && t1 < CALIB_SAMPLE_S)
            launches = t1 > CALIB_SAMPLE_S / CALIB_MAX_LAUNCHES
                           ? (int64_t)(CALIB_SAMPLE_S / t1 + 0.999999)
                           : CALIB_MAX_LAUNCHES;
    }
    for (int64_t i = 0; i < repeats && rc == KVS_OK; i++) {
        if (op == PROFILE_OP_STEP && (rc = kernels_buf_write(b->a.x, 0, b->x0,
                                                     kernels_batch_tokens(batch) * b->m.hidden,
                                                     err)) != KVS_OK)
            break;
        if ((rc = kernels_timer_start(b->be, err)) != KVS_OK)
            break;
        if (op == PROFILE_OP_STEP)
            rc = kernels_step_forward(b->be, &b->m, &b->w, &b->kv, batch, &b->a, err);
        for (int64_t j = 0; op != PROFILE_OP_STEP && j < launches && rc == KVS_OK; j++)
            rc = run_op(b, op, batch, err);
        if (rc == KVS_OK)
            rc = kernels_timer_stop(b->be, &b->samples[i], err);
        b->samples[i] /= (double)launches;
    }
    if (rc != KVS_OK)
        return rc;
    qsort(b->samples, (size_t)repeats, sizeof *b->samples, cmp_dbl);
    snprintf(p->op, sizeof p->op, "%s", profile_op_at((size_t)op)->name);
    p->median_s = rank(b->samples, repeats, 0.5);
    p->p10_s = rank(b->samples, repeats, 0.1);
    p->p90_s = rank(b->samples, repeats, 0.9);
    p->repeats = repeats;
    p->launches = launches;
    shape_add_launches(p);
    return KVS_OK;
}

int calib_bench_step(calib_bench *b, const calib_step *s, int64_t warmup, int64_t repeats,
                     calib_point *p, kvs_err *err)
{
    memset(p, 0, sizeof *p);
    if (s->n < 1 || s->n > CALIB_STEP_MAX_SEQS)
        return kvs_errf(err, KVS_EINVAL, "step of %lld sequences", (long long)s->n);
    kernels_batch *batch = NULL;
    int rc = bench_batch(b, s->q, s->c, s->n, &batch, err);
    if (rc != KVS_OK)
        return rc;
    for (int64_t i = 0; i < s->n; i++) {
        p->tokens += s->q[i];
        if (s->q[i] == 1 && s->c[i] > 0) { /* a decode, as the scheduler counts it */
            p->n_decode++;
            p->kv_read += s->c[i] + 1;
        } else { /* a prefill, or a chunk of one over c cached tokens */
            p->n_prefill++;
            p->prefill_sq += s->q[i] * s->q[i];
            p->prefill_ctx += s->q[i] * s->c[i];
            p->prefill_cached += s->c[i];
        }
        p->context = max64(p->context, s->c[i] + s->q[i]);
    }
    p->batch = s->n;
    snprintf(p->shape_json, sizeof p->shape_json,
             "{\"n_prefill\":%lld,\"n_decode\":%lld,\"tokens\":%lld,\"kv_read\":%lld,"
             "\"prefill_sq\":%lld,\"prefill_ctx\":%lld,\"prefill_cached\":%lld}",
             (long long)p->n_prefill, (long long)p->n_decode, (long long)p->tokens,
             (long long)p->kv_read, (long long)p->prefill_sq, (long long)p->prefill_ctx,
             (long long)p->prefill_cached);
    rc = time_op(b, PROFILE_OP_STEP, batch, warmup, repeats, p, err);
    kernels_batch_free(batch);
    return rc;
}

/* ------------------------------------------------------------ measure */

typedef struct meas {
    calib_bench *b;
    const calib_options *o;
    calib_result *r;
    size_t cap;
} meas;

static int push(meas *ms, const calib_point *p, kvs_err *err)
{
    calib_result *r = ms->r;
    if (r->n == ms->cap) {
        size_t cap = ms->cap ? 2 * ms->cap : 64;
        calib_point *v = realloc(r->pts, cap * sizeof *v);
        if (!v)
            return kvs_errf(err, KVS_ENOMEM, "out of memory (measurements)");
        r->pts = v;
        ms->cap = cap;
    }
    r->pts[r->n++] = *p;
    if (ms->o->progress)
        ms->o->progress(ms->o->progress_ctx, p);
    return KVS_OK;
}

/* n sequences of (qs[i], cs[i]); time `op` on them. */
static int measure_seqs(meas *ms, int op, int64_t n, const int64_t *qs, const int64_t *cs,
                        calib_point *p, kvs_err *err)
{
    kernels_batch *batch = NULL;
    int rc = bench_batch(ms->b, qs, cs, n, &batch, err);
    if (rc == KVS_OK &&
        (rc = time_op(ms->b, op, batch, ms->o->warmup, ms->o->repeats, p, err)) == KVS_OK)
        rc = push(ms, p, err);
    kernels_batch_free(batch);
    return rc;
}

/* n sequences of (q, c) each, or, with c2 >= 0, the odd ones at c2. */
static int measure_uniform(meas *ms, int op, int64_t n, int64_t q, int64_t c, int64_t c2,
                           calib_point *p, kvs_err *err)
{
    int64_t *qs = malloc((size_t)n * sizeof *qs), *cs = malloc((size_t)n * sizeof *cs);
    int rc;
    if (!qs || !cs) {
        rc = kvs_errf(err, KVS_ENOMEM, "out of memory (grid point)");
    } else {
        for (int64_t i = 0; i < n; i++)
            qs[i] = q, cs[i] = c2 >= 0 && i % 2 ? c2 : c;
        rc = measure_seqs(ms, op, n, qs, cs, p, err);
    }
    free(qs);
    free(cs);
    return rc;
}

static int measure_grid(meas *ms, const calib_grid *g, kvs_err *err)
{
    int rc = KVS_OK;
    calib_point p;
    for (size_t i = 0; i < g->n_tokens && rc == KVS_OK; i++)
        for (int op = PROFILE_OP_RMSNORM; op <= PROFILE_OP_DOWN && rc == KVS_OK; op++) {
            int64_t t = g->tokens[i];
            memset(&p, 0, sizeof p);
            p.tokens = t, p.batch = 1;
            snprintf(p.shape_json, sizeof p.shape_json, "{\"tokens\":%lld}", (long long)t);
            rc = measure_uniform(ms, op, 1, t, 0, -1, &p, err);
        }
    for (size_t i = 0; i < g->n_dec_batch && rc == KVS_OK; i++)
        for (size_t j = 0; j < g->n_dec_ctx && rc == KVS_OK; j++) {
            int64_t b = g->dec_batch[i], c = g->dec_ctx[j];
            memset(&p, 0, sizeof p);
            p.tokens = b, p.batch = b, p.context = c, p.kv_read = b * c, p.n_decode = b;
            snprintf(p.shape_json, sizeof p.shape_json, "{\"batch\":%lld,\"context\":%lld}",
                     (long long)b, (long long)c);
            rc = measure_uniform(ms, PROFILE_OP_DECODE_ATTN, b, 1, c - 1, -1, &p, err);
        }
    /* uneven decode batches: every other sequence at the shortest context */
    for (size_t i = 0; i < g->n_dec_batch && rc == KVS_OK; i++)
        for (size_t j = 1; j < g->n_dec_ctx && rc == KVS_OK; j++) {
            int64_t b = g->dec_batch[i], c = g->dec_ctx[j], c0 = g->dec_ctx[0];
            if (b < 2 || j != g->n_dec_ctx - 1)
                continue; /* one uneven point per batch: the widest spread */
            memset(&p, 0, sizeof p);
            p.tokens = b, p.batch = b, p.context = c, p.n_decode = b;
            p.kv_read = (b - b / 2) * c0 + (b / 2) * c;
            snprintf(p.shape_json, sizeof p.shape_json,
                     "{\"batch\":%lld,\"context\":%lld,\"uneven_with\":%lld}", (long long)b,
                     (long long)c, (long long)c0);
            rc = measure_uniform(ms, PROFILE_OP_DECODE_ATTN, b, 1, c0 - 1, c - 1, &p, err);
        }
    for (size_t i = 0; i < g->n_pre_batch && rc == KVS_OK; i++)
        for (size_t j = 0; j < g->n_pre_len && rc == KVS_OK; j++)
            for (size_t k = 0; k < g->n_pre_cached && rc == KVS_OK; k++) {
                int64_t b = g->pre_batch[i], l = g->pre_len[j], c = g->pre_cached[k];
                if (!calib_prefill_point_ok(g, &ms->b->m, b, l, c))
                    continue;
                memset(&p, 0, sizeof p);
                p.tokens = b * l, p.batch = b, p.context = c + l, p.n_prefill = b;
                p.prefill_sq = b * l * l, p.prefill_ctx = b * l * c, p.prefill_cached = b * c;
                snprintf(p.shape_json, sizeof p.shape_json,
                         "{\"batch\":%lld,\"len\":%lld,\"cached\":%lld}", (long long)b,
                         (long long)l, (long long)c);
                rc = measure_uniform(ms, PROFILE_OP_PREFILL_ATTN, b, l, c, -1, &p, err);
            }
    for (size_t i = 0; i < g->n_lm_seqs && rc == KVS_OK; i++) {
        int64_t n = g->lm_seqs[i];
        memset(&p, 0, sizeof p);
        p.tokens = n, p.batch = n;
        snprintf(p.shape_json, sizeof p.shape_json, "{\"seqs\":%lld}", (long long)n);
        rc = measure_uniform(ms, PROFILE_OP_LM_HEAD, n, 1, 0, -1, &p, err);
    }
    /* whole layers: one prompt of each T; decodes at each B (middle context) */
    for (size_t i = 0; i < g->n_tokens && rc == KVS_OK; i++) {
        int64_t t = g->tokens[i];
        memset(&p, 0, sizeof p);
        p.tokens = t, p.batch = 1, p.context = t, p.n_prefill = 1, p.prefill_sq = t * t;
        snprintf(p.shape_json, sizeof p.shape_json, "{\"prompt\":%lld}", (long long)t);
        rc = measure_uniform(ms, PROFILE_OP_LAYER, 1, t, 0, -1, &p, err);
    }
    for (size_t i = 0; i < g->n_dec_batch && rc == KVS_OK; i++) {
        int64_t b = g->dec_batch[i], c = g->dec_ctx[g->n_dec_ctx / 2];
        memset(&p, 0, sizeof p);
        p.tokens = b, p.batch = b, p.context = c, p.kv_read = b * c, p.n_decode = b;
        snprintf(p.shape_json, sizeof p.shape_json, "{\"decodes\":%lld,\"context\":%lld}",
                 (long long)b, (long long)c);
        rc = measure_uniform(ms, PROFILE_OP_LAYER, b, 1, c - 1, -1, &p, err);
    }
    return rc;
}

static double gib(int64_t b) { return (double)b / (double)((int64_t)1 << 30); }

int calib_measure(kernels_backend *be, const model_spec *m, const calib_options *o,
                  const calib_step *steps, size_t n_steps, calib_result *out, kvs_err *err)
{
    memset(out, 0, sizeof *out);
    const calib_grid *g = o->grid;
    if (o->repeats < 1 || o->warmup < 0)
        return kvs_errf(err, KVS_EINVAL, "--repeats must be >= 1 and --warmup >= 0");
    if (!g->n_tokens || !g->n_dec_batch || !g->n_dec_ctx || !g->n_pre_len || !g->n_pre_batch ||
        !g->n_pre_cached || !g->n_lm_seqs || g->block_size < 1)
        return kvs_errf(err, KVS_EINVAL, "calibration grid '%s' has an empty axis", g->name);
    calib_plan_grid(be, m, g, steps, n_steps, &out->plan);
    const calib_plan *pl = &out->plan;
    kernels_device_info info;
    int rc = kernels_backend_info(be, &info, err);
    if (rc != KVS_OK)
        return rc;
    /* keep 10% of the free memory for the runtime and libraries */
    if (info.mem_free_bytes > 0 && (double)pl->total_bytes > 0.9 * (double)info.mem_free_bytes)
        return kvs_errf(err, KVS_EINVAL,
                        "grid '%s' for %s needs %.2f GiB (weights %.2f, KV %.2f, activations "
                        "%.2f, attention scratch %.2f) but %s has %.2f GiB free; use a smaller "
                        "grid (--grid quick) or model",
                        g->name, m->name, gib(pl->total_bytes), gib(pl->weights_bytes),
                        gib(pl->kv_bytes), gib(pl->acts_bytes), gib(pl->workspace_bytes),
                        info.name, gib(info.mem_free_bytes));
    meas ms = {.o = o, .r = out};
    rc = calib_bench_open(be, m, pl->max_tokens, pl->max_seqs, pl->kv_blocks, g->block_size,
                          o->seed, &ms.b, err);
    if (rc == KVS_OK) /* the attention workspace, once: never grown while timing */
        rc = kernels_reserve_workspace(be, pl->workspace_bytes, err);
    if (rc == KVS_OK)
        rc = measure_grid(&ms, g, err);
    for (size_t s = 0; s < n_steps && rc == KVS_OK; s++) {
        calib_point p;
        if ((rc = calib_bench_step(ms.b, &steps[s], o->warmup, o->repeats, &p, err)) == KVS_OK)
            rc = push(&ms, &p, err);
    }
    calib_bench_close(ms.b);
    if (rc != KVS_OK)
        calib_result_free(out);
    return rc;
}

void calib_result_free(calib_result *r)
{
    free(r->pts);
    r->pts = NULL;
    r->n = 0;
}
