/* replay.c — run a stored schedule's steps on the real kernels: a paged KV
 * pool of the run's block count for every layer, the block tables derived
 * by replay_sched, deterministic inputs, a timer around each step, and the
 * from-scratch check of the cached K and V. */
#include "replay.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../base/rng.h"

struct replay {
    kernels_backend *be;     /* borrowed */
    const val_run *r;        /* borrowed */
    replay_options o;
    replay_plan plan;
    replay_sched *sched;     /* block tables */
    kernels_weights w;
    kernels_kv kv;           /* m->layers pools of plan.pool_blocks blocks */
    kernels_acts a;
    float *x;                /* [max_tokens * hidden] host inputs */
    kernels_seq *seqs;       /* [max_seqs] */
    double *samples;         /* [repeats] */
    float **saved;           /* [tr.n] host copy of a swapped-out request's KV, or NULL */
    int64_t *saved_tokens;   /* [tr.n] tokens in saved[] */
    unsigned char *stale;    /* [tr.n] 1: part of its KV was not computed by the replay */
    int64_t peak;            /* most blocks held during a replayed step */
    int warmed;              /* the backend has run one step */
    int64_t last;            /* last step replayed, -1 */
};

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

static uint64_t mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void replay_embedding(uint64_t seed, int64_t req, int64_t pos, float *out, int64_t hidden)
{
    rng g;
    rng_init(&g, mix64(mix64(mix64(seed) ^ (uint64_t)req) ^ (uint64_t)pos));
    for (int64_t i = 0; i < hidden; i++)
        out[i] = (float)(2.0 * rng_uniform(&g) - 1.0);
}

/* ------------------------------------------------------------ plan */

/* Shape of step i as the kernels see it. */
static void step_shape(const val_run *r, int64_t i, int64_t *tokens, int64_t *seqs,
                       int64_t *n_dec, int64_t *max_ctx, int64_t *max_pq)
{
    int64_t n;
    const sched_member *m = val_run_step_members(r, i, &n);
    *tokens = *n_dec = *max_ctx = *max_pq = 0;
    *seqs = n;
    for (int64_t j = 0; j < n; j++) {
        *tokens += m[j].tokens;
        *max_ctx = max64(*max_ctx, m[j].context);
        if (m[j].kind == SCHED_MEMBER_PREFILL && m[j].tokens > 1)
            *max_pq = max64(*max_pq, m[j].tokens);
        else
            (*n_dec)++;
    }
}

int replay_plan_make(const kernels_backend *be, const val_run *r, const int64_t *steps,
                     int64_t n, const replay_options *o, replay_plan *out, kvs_err *err)
{
    memset(out, 0, sizeof *out);
    const model_spec *m = &r->model;
    const int64_t bs = r->cfg.sched.block_size;
    replay_sched *s = NULL;
    int rc = replay_sched_init(r, &s, err);
    if (rc != KVS_OK)
        return rc;
    int64_t last = n > 0 ? steps[n - 1] : -1;
    for (int64_t i = 0; i < r->n_steps; i++) { /* the ids the schedule uses size the pool */
        if ((rc = replay_sched_begin(s, NULL, err)) != KVS_OK)
            goto done;
        replay_sched_end(s);
    }
    out->pool_blocks = max64(r->cfg.sched.total_blocks, replay_sched_ids(s));
    int64_t ws = 0, ctx_upto = 0;
    for (int64_t i = 0; i <= last; i++) { /* longest context any holder can have at the end */
        int64_t t, q, d, c, p;
        step_shape(r, i, &t, &q, &d, &c, &p);
        ctx_upto = max64(ctx_upto, c);
    }
    for (int64_t k = 0; k < n; k++) {
        int64_t t, q, d, c, p;
        step_shape(r, steps[k], &t, &q, &d, &c, &p);
        out->max_tokens = max64(out->max_tokens, t);
        out->max_seqs = max64(out->max_seqs, q);
        out->max_context = max64(out->max_context, c);
        ws = max64(ws, kernels_attn_workspace_bytes(be, m, d, c, p));
    }
    out->max_tokens = max64(out->max_tokens, 1);
    out->max_seqs = max64(out->max_seqs, 1);
    out->weights_bytes = kernels_weights_bytes(be, m);
    out->kv_bytes = kernels_kv_bytes(be, m, m->layers, out->pool_blocks, bs);
    out->acts_bytes = kernels_acts_bytes(be, m, out->max_tokens, out->max_seqs);
    out->workspace_bytes = ws;
    if (o->check_kv && ctx_upto > 0)
        out->check_bytes = kernels_kv_bytes(be, m, m->layers, ceil_div(ctx_upto, bs), bs) +
                           kernels_acts_bytes(be, m, ctx_upto, 1) +
                           kernels_attn_workspace_bytes(be, m, 0, ctx_upto, ctx_upto);
    out->total_bytes = out->weights_bytes + out->kv_bytes + out->acts_bytes +
                       out->workspace_bytes + out->check_bytes;
done:
    replay_sched_free(s);
    return rc;
}

/* ------------------------------------------------------------ open */

void replay_close(replay *rp)
{
    if (!rp)
        return;
    replay_sched_free(rp->sched);
    kernels_weights_free(&rp->w);
    kernels_kv_free(&rp->kv);
    kernels_acts_free(&rp->a);
    for (int64_t i = 0; rp->saved && i < rp->r->tr.n; i++)
        free(rp->saved[i]);
    free(rp->saved);
    free(rp->saved_tokens);
    free(rp->stale);
    free(rp->x);
    free(rp->seqs);
    free(rp->samples);
    free(rp);
}

const replay_plan *replay_get_plan(const replay *rp) { return &rp->plan; }
const replay_sched *replay_get_sched(const replay *rp) { return rp->sched; }
kernels_kv *replay_get_kv(replay *rp) { return &rp->kv; }

int replay_open(kernels_backend *be, const val_run *r, const int64_t *steps, int64_t n,
                const replay_options *o, replay **out, kvs_err *err)
{
    *out = NULL;
    if (o->repeats < 1 || o->warmup < 0)
        return kvs_errf(err, KVS_EINVAL, "--repeats must be >= 1 and --warmup >= 0");
    const model_spec *m = &r->model;
    replay_plan plan;
    int rc = replay_plan_make(be, r, steps, n, o, &plan, err);
    if (rc != KVS_OK)
        return rc;
    kernels_device_info info;
    if ((rc = kernels_backend_info(be, &info, err)) != KVS_OK)
        return rc;
    /* keep 10% of the free memory for the runtime and libraries, as calibrate does */
    if (info.mem_free_bytes > 0 && (double)plan.total_bytes > 0.9 * (double)info.mem_free_bytes)
        return kvs_errf(err, KVS_EDEVICE,
                        "run %lld needs %lld bytes on %s (KV pool %lld blocks x %lld layers: "
                        "%lld; weights %lld; activations %lld; scratch %lld; KV check %lld) "
                        "but %lld bytes are free (at most 90%% of them may be used)",
                        (long long)r->run_id, (long long)plan.total_bytes,
                        kernels_backend_name(be), (long long)plan.pool_blocks,
                        (long long)m->layers, (long long)plan.kv_bytes,
                        (long long)plan.weights_bytes, (long long)plan.acts_bytes,
                        (long long)plan.workspace_bytes, (long long)plan.check_bytes,
                        (long long)info.mem_free_bytes);
    replay *rp = calloc(1, sizeof *rp);
    if (!rp)
        return kvs_errf(err, KVS_ENOMEM, "replay: out of memory");
    rp->be = be;
    rp->r = r;
    rp->o = *o;
    rp->plan = plan;
    rp->last = -1;
    size_t nr = (size_t)(r->tr.n > 0 ? r->tr.n : 1);
    rp->x = malloc((size_t)plan.max_tokens * (size_t)m->hidden * sizeof *rp->x);
    rp->seqs = calloc((size_t)plan.max_seqs, sizeof *rp->seqs);
    rp->samples = malloc((size_t)o->repeats * sizeof *rp->samples);
    rp->saved = calloc(nr, sizeof *rp->saved);
    rp->saved_tokens = calloc(nr, sizeof *rp->saved_tokens);
    rp->stale = malloc(nr);
    if (!rp->x || !rp->seqs || !rp->samples || !rp->saved || !rp->saved_tokens || !rp->stale) {
        rc = kvs_errf(err, KVS_ENOMEM, "replay: out of memory for %lld-token steps",
                      (long long)plan.max_tokens);
        goto fail;
    }
    memset(rp->stale, 1, nr);
    if ((rc = replay_sched_init(r, &rp->sched, err)) != KVS_OK ||
        (rc = kernels_weights_init(be, m, o->seed, &rp->w, err)) != KVS_OK ||
        (rc = kernels_kv_init(be, m, m->layers, plan.pool_blocks, r->cfg.sched.block_size,
                              &rp->kv, err)) != KVS_OK ||
        (rc = kernels_acts_init(be, m, plan.max_tokens, plan.max_seqs, &rp->a, err)) != KVS_OK ||
        /* the attention workspace once, at its largest: timed steps never grow it */
        (rc = kernels_reserve_workspace(be, plan.workspace_bytes, err)) != KVS_OK)
        goto fail;
    *out = rp;
    return KVS_OK;
fail:
    replay_close(rp);
    return rc;
}

/* ------------------------------------------------------------ swap */

static int64_t block_elems(const replay *rp)
{
    return rp->kv.block_size * rp->kv.kv_heads * rp->kv.head_dim;
}

/* Copy the first ceil(tokens / bs) blocks of every layer's K and V to the
 * host, as a swap-out does, so the swap-in can restore them. */
static int on_swap_out(void *ctx, int32_t req, const int32_t *blocks, int64_t n,
                       int64_t tokens, kvs_err *err)
{
    replay *rp = ctx;
    int64_t nb = ceil_div(tokens, rp->kv.block_size), be_ = block_elems(rp);
    if (nb > n)
        nb = n;
    free(rp->saved[req]);
    rp->saved[req] = malloc((size_t)(2 * rp->kv.layers * nb * be_) * sizeof(float) + 1);
    if (!rp->saved[req])
        return kvs_errf(err, KVS_ENOMEM, "replay: out of memory saving swapped KV");
    float *p = rp->saved[req];
    for (int64_t l = 0; l < rp->kv.layers; l++)
        for (int kv = 0; kv < 2; kv++)
            for (int64_t b = 0; b < nb; b++, p += be_) {
                const kernels_buf *pool = kv ? rp->kv.v[l] : rp->kv.k[l];
                int rc = kernels_buf_read(pool, (int64_t)blocks[b] * be_, p, be_, err);
                if (rc != KVS_OK)
                    return rc;
            }
    rp->saved_tokens[req] = tokens;
    return KVS_OK;
}

static int on_start(void *ctx, int32_t req, int64_t cached, kvs_err *err)
{
    (void)err;
    ((replay *)ctx)->stale[req] = cached > 0; /* a prefix hit's KV is not computed here */
    return KVS_OK;
}

static int on_swap_in(void *ctx, int32_t req, const int32_t *blocks, int64_t n, kvs_err *err)
{
    replay *rp = ctx;
    if (!rp->saved[req]) {
        rp->stale[req] = 1; /* swapped out in a step that was not replayed */
        return KVS_OK;
    }
    int64_t nb = ceil_div(rp->saved_tokens[req], rp->kv.block_size), be_ = block_elems(rp);
    if (nb > n)
        nb = n;
    const float *p = rp->saved[req];
    for (int64_t l = 0; l < rp->kv.layers; l++)
        for (int kv = 0; kv < 2; kv++)
            for (int64_t b = 0; b < nb; b++, p += be_) {
                kernels_buf *pool = kv ? rp->kv.v[l] : rp->kv.k[l];
                int rc = kernels_buf_write(pool, (int64_t)blocks[b] * be_, p, be_, err);
                if (rc != KVS_OK)
                    return rc;
            }
    free(rp->saved[req]);
    rp->saved[req] = NULL;
    return KVS_OK;
}

/* ------------------------------------------------------------ steps */

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The step's batch (block tables from replay_sched) and its inputs in rp->x. */
static int make_batch(replay *rp, int64_t i, kernels_batch **out, kvs_err *err)
{
    const val_run *r = rp->r;
    const int64_t H = r->model.hidden;
    int64_t n;
    const sched_member *m = val_run_step_members(r, i, &n);
    if (n > rp->plan.max_seqs)
        return kvs_errf(err, KVS_EINTERNAL, "replay: step %lld larger than planned",
                        (long long)i);
    for (int64_t j = 0; j < n; j++) {
        int64_t nb;
        const int32_t *bt = replay_sched_blocks(rp->sched, m[j].req_id, &nb, NULL);
        int64_t q = m[j].kind == SCHED_MEMBER_PREFILL ? m[j].tokens : 1;
        rp->seqs[j] = (kernels_seq){.q = q, .c = m[j].context - q, .blocks = bt, .n_blocks = nb};
    }
    int rc = kernels_batch_create(rp->be, rp->seqs, n, r->cfg.sched.block_size,
                                  rp->plan.pool_blocks, out, err);
    if (rc != KVS_OK)
        return rc;
    for (int64_t j = 0; j < n; j++)
        for (int64_t t = 0; t < rp->seqs[j].q; t++)
            replay_embedding(rp->o.seed, m[j].req_id, rp->seqs[j].c + t,
                             rp->x + kernels_batch_row(*out, j, t) * H, H);
    return KVS_OK;
}

static int run_once(replay *rp, const kernels_batch *b, int timed, double *sec, kvs_err *err)
{
    const model_spec *m = &rp->r->model;
    int rc = kernels_buf_write(rp->a.x, 0, rp->x, kernels_batch_tokens(b) * m->hidden, err);
    if (rc == KVS_OK && timed)
        rc = kernels_timer_start(rp->be, err);
    if (rc == KVS_OK)
        rc = kernels_step_forward(rp->be, m, &rp->w, &rp->kv, b, &rp->a, err);
    if (rc == KVS_OK)
        rc = timed ? kernels_timer_stop(rp->be, sec, err) : kernels_backend_sync(rp->be, err);
    return rc;
}

int replay_step(replay *rp, int64_t i, double *measured_s, kvs_err *err)
{
    *measured_s = 0.0;
    if (i <= rp->last || i >= rp->r->n_steps)
        return kvs_errf(err, KVS_EINTERNAL, "replay: step %lld out of order", (long long)i);
    int rc;
    while (replay_sched_next(rp->sched) < i) { /* block tables only: contents go stale */
        int64_t j = replay_sched_next(rp->sched), nm;
        const sched_member *m = val_run_step_members(rp->r, j, &nm);
        for (int64_t k = 0; k < nm; k++)
            rp->stale[m[k].req_id] = 1;
        if ((rc = replay_sched_begin(rp->sched, NULL, err)) != KVS_OK)
            return rc;
        replay_sched_end(rp->sched);
    }
    const replay_sched_hooks hooks = {rp, on_start, on_swap_out, on_swap_in};
    if ((rc = replay_sched_begin(rp->sched, &hooks, err)) != KVS_OK)
        return rc;
    rp->last = i;
    rp->peak = max64(rp->peak, replay_sched_held(rp->sched));
    kernels_batch *b = NULL;
    int64_t n;
    (void)val_run_step_members(rp->r, i, &n);
    if (n > 0) {
        if ((rc = make_batch(rp, i, &b, err)) != KVS_OK)
            goto done;
        /* the first step also warms the backend up (library handles, scratch) */
        for (int64_t k = 0; k < rp->o.warmup + !rp->warmed && rc == KVS_OK; k++)
            rc = run_once(rp, b, 0, NULL, err);
        rp->warmed = 1;
        for (int64_t k = 0; k < rp->o.repeats && rc == KVS_OK; k++)
            rc = run_once(rp, b, 1, &rp->samples[k], err);
        if (rc != KVS_OK)
            goto done;
        qsort(rp->samples, (size_t)rp->o.repeats, sizeof *rp->samples, cmp_dbl);
        *measured_s = rp->samples[(rp->o.repeats - 1) / 2]; /* nearest-rank median */
    }
done:
    kernels_batch_free(b);
    replay_sched_end(rp->sched);
    return rc;
}

void replay_get_stats(const replay *rp, val_replay_stats *out)
{
    const model_spec *m = &rp->r->model;
    memset(out, 0, sizeof *out);
    out->peak_blocks = rp->peak;
    out->pool_blocks = rp->plan.pool_blocks;
    out->block_bytes = kernels_kv_bytes(rp->be, m, m->layers, 1, rp->r->cfg.sched.block_size);
    out->storage_bytes = (int64_t)kernels_backend_vtable(rp->be)->act_bytes;
    out->sched_checked = replay_sched_next(rp->sched);
    out->sched_mismatch = replay_sched_mismatches(rp->sched, &out->first_mismatch);
    out->hit_starts = replay_sched_hit_starts(rp->sched);
    out->kv_checked = -1;
    out->kv_nmse = NAN;
    out->kv_nmse_bound = out->storage_bytes >= 4 ? 1e-6 : 1e-3;
}

/* ------------------------------------------------------------ KV check */

typedef struct check_bufs {
    kernels_kv kv;       /* clean cache, all layers */
    kernels_acts a;
    float *x;            /* [max_ctx * hidden] */
    float *ra, *rb;      /* [block elems] replayed / reference block */
    int32_t *bt;         /* [blocks] 0 .. n-1 */
} check_bufs;

static int check_one(replay *rp, check_bufs *c, int32_t req, const int32_t *blocks,
                     int64_t tokens, double *nmse, kvs_err *err)
{
    const model_spec *m = &rp->r->model;
    const int64_t bs = rp->kv.block_size, H = m->hidden, be_ = block_elems(rp);
    const int64_t nb = ceil_div(tokens, bs), row = rp->kv.kv_heads * rp->kv.head_dim;
    kernels_seq seq = {.q = tokens, .c = 0, .blocks = c->bt, .n_blocks = nb};
    kernels_batch *b = NULL;
    int rc = kernels_batch_create(rp->be, &seq, 1, bs, c->kv.num_blocks, &b, err);
    if (rc != KVS_OK)
        return rc;
    for (int64_t t = 0; t < tokens; t++)
        replay_embedding(rp->o.seed, req, t, c->x + kernels_batch_row(b, 0, t) * H, H);
    if ((rc = kernels_buf_write(c->a.x, 0, c->x, tokens * H, err)) != KVS_OK ||
        (rc = kernels_step_forward(rp->be, m, &rp->w, &c->kv, b, &c->a, err)) != KVS_OK ||
        (rc = kernels_backend_sync(rp->be, err)) != KVS_OK)
        goto done;
    double num = 0.0, den = 0.0;
    for (int64_t l = 0; l < m->layers; l++)
        for (int kv = 0; kv < 2; kv++)
            for (int64_t k = 0; k < nb; k++) {
                int64_t used = (tokens - k * bs < bs ? tokens - k * bs : bs) * row;
                const kernels_buf *pa = kv ? rp->kv.v[l] : rp->kv.k[l];
                const kernels_buf *pb = kv ? c->kv.v[l] : c->kv.k[l];
                if ((rc = kernels_buf_read(pa, (int64_t)blocks[k] * be_, c->ra, used, err)) !=
                        KVS_OK ||
                    (rc = kernels_buf_read(pb, k * be_, c->rb, used, err)) != KVS_OK)
                    goto done;
                for (int64_t e = 0; e < used; e++) {
                    double d = (double)c->ra[e] - (double)c->rb[e];
                    num += d * d;
                    den += (double)c->rb[e] * (double)c->rb[e];
                }
            }
    *nmse = den > 0 ? num / den : (num > 0 ? INFINITY : 0.0);
done:
    kernels_batch_free(b);
    return rc;
}

int replay_check_kv(replay *rp, int64_t *n_checked, int64_t *n_stale, double *max_nmse,
                    kvs_err *err)
{
    const val_run *r = rp->r;
    const model_spec *m = &r->model;
    const int64_t bs = rp->kv.block_size;
    *n_checked = *n_stale = 0;
    *max_nmse = NAN;
    int32_t *ids = malloc((size_t)(r->tr.n > 0 ? r->tr.n : 1) * sizeof *ids);
    check_bufs c;
    memset(&c, 0, sizeof c);
    int rc = KVS_OK;
    if (!ids)
        return kvs_errf(err, KVS_ENOMEM, "replay check: out of memory");
    int64_t nh = replay_sched_holders(rp->sched, ids, r->tr.n), max_tok = 0, keep = 0;
    for (int64_t k = 0; k < nh; k++) {
        int64_t nb, tok;
        (void)replay_sched_blocks(rp->sched, ids[k], &nb, &tok);
        if (rp->stale[ids[k]]) {
            (*n_stale)++;
            continue;
        }
        ids[keep++] = ids[k];
        max_tok = max64(max_tok, tok);
    }
    nh = keep;
    if (max_tok == 0)
        goto done;
    int64_t mb = ceil_div(max_tok, bs);
    c.x = malloc((size_t)max_tok * (size_t)m->hidden * sizeof *c.x);
    c.ra = malloc((size_t)block_elems(rp) * sizeof *c.ra);
    c.rb = malloc((size_t)block_elems(rp) * sizeof *c.rb);
    c.bt = malloc((size_t)mb * sizeof *c.bt);
    if (!c.x || !c.ra || !c.rb || !c.bt) {
        rc = kvs_errf(err, KVS_ENOMEM, "replay check: out of memory");
        goto done;
    }
    for (int64_t k = 0; k < mb; k++)
        c.bt[k] = (int32_t)k;
    if ((rc = kernels_kv_init(rp->be, m, m->layers, mb, bs, &c.kv, err)) != KVS_OK ||
        (rc = kernels_acts_init(rp->be, m, max_tok, 1, &c.a, err)) != KVS_OK)
        goto done;
    double worst = 0.0;
    for (int64_t k = 0; k < nh; k++) {
        int64_t nb, tok;
        const int32_t *bt = replay_sched_blocks(rp->sched, ids[k], &nb, &tok);
        double e = 0.0;
        if (tok == 0)
            continue;
        if ((rc = check_one(rp, &c, ids[k], bt, tok, &e, err)) != KVS_OK)
            goto done;
        worst = e > worst || isnan(e) ? e : worst;
        (*n_checked)++;
    }
    *max_nmse = *n_checked ? worst : NAN;
done:
    kernels_kv_free(&c.kv);
    kernels_acts_free(&c.a);
    free(c.x);
    free(c.ra);
    free(c.rb);
    free(c.bt);
    free(ids);
    return rc;
}
