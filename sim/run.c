/* run.c — one simulation run: resolve the config, drive the scheduler
 * through the event loop, collect step records and compute the summary. */
#include "run.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cluster.h"
#include "engine.h"
#include "itl.h"
#include "steps.h"

void run_config_defaults(run_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    strcpy(cfg->model, "llama-3-8b");
    strcpy(cfg->gpu, "a100-80g");
    cfg->tp = 1;
    cfg->ep = 1;
    cfg->cp = 1;
    cfg->rate_scale = 1.0;
    cfg->seed = 0;
    cfg->sched.batching = SCHED_BATCHING_CONTINUOUS;
    cfg->sched.policy = SCHED_POLICY_FCFS;
    cfg->sched.alloc = SCHED_ALLOC_PAGED;
    cfg->sched.preemption = SCHED_PREEMPT_RECOMPUTE;
    cfg->sched.block_size = 16;
    cfg->sched.max_seqs = 256;
    cfg->sched.max_batched_tokens = 0; /* resolved: max(2048, max_model_len) */
    cfg->sched.max_model_len = 0;      /* resolved: the model's context */
    cfg->sched.watermark = 0.01;
    cfg->sched.num_scheduler_steps = 1;
    cfg->gpu_mem_util = 0.9;
    cfg->swap_gib = 4.0;
    strcpy(cfg->cost, "roofline");
    cfg->replicas = 1;
    strcpy(cfg->router, "round-robin");
    cfg->affinity_cap = 16;
}

static int apply_dtype(const char *flag, const char *name, model_spec *m, int kv, kvs_err *err)
{
    if (!name[0])
        return KVS_OK;
    int dt = model_dtype_parse(name);
    if (dt < 0)
        return kvs_errf(err, KVS_EINVAL, "%s: unknown dtype '%s' (fp32, fp16, bf16, fp8, int8, int4)",
                        flag, name);
    kvs_err e;
    int rc = kv ? model_set_kv_dtype(m, (model_dtype)dt, &e) : model_set_weight_dtype(m, (model_dtype)dt, &e);
    return rc ? kvs_errf(err, rc, "%s %s: %s", flag, name, e.msg) : KVS_OK;
}

int run_config_apply_dtypes(const run_config *cfg, model_spec *m, kvs_err *err)
{
    int rc = apply_dtype("--dtype", cfg->dtype, m, 0, err);
    return rc ? rc : apply_dtype("--kv-cache-dtype", cfg->kv_cache_dtype, m, 1, err);
}

int run_config_kv_capacity(const run_config *cfg, const model_spec *m, const gpu_spec *g,
                           kv_capacity *out, kvs_err *err)
{
    const sched_config *sc = &cfg->sched;
    model_par par = {cfg->tp, cfg->ep > 0 ? cfg->ep : 1, cfg->cp > 0 ? cfg->cp : 1};
    /* sglang resolves max_seqs from the pool afterwards; its rule reads no
     * logits reserve */
    int64_t seqs = sc->max_seqs > 0 ? sc->max_seqs : 1;
    return model_kv_capacity_rule(m, g, &par, (model_kv_rule)cfg->kv_rule, cfg->gpu_mem_util,
                                  sc->block_size, sc->max_batched_tokens, seqs, out, err);
}

/* The V1 engine pages a model with both full and sliding-window layers by
 * vLLM's KV cache groups (docs/semantics-v1.md rule 2.9): total_blocks
 * becomes pages of block_size tokens of one group's layers.  Other engines,
 * cp > 1 and models of one layer kind keep one group. */
static int run_config_kv_groups(run_config *cfg, const model_spec *m, const gpu_spec *g,
                                kvs_err *err)
{
    sched_config *sc = &cfg->sched;
    model_kv_pages pg;
    model_kv_page_groups(m, cfg->tp, &pg);
    sc->kv_window = sc->kv_full_groups = sc->kv_window_groups = 0;
    if (sc->engine != SCHED_ENGINE_VLLM_V1 || cfg->cp > 1 || pg.full_groups < 1 ||
        pg.window_groups < 1)
        return KVS_OK;
    sc->kv_window = pg.window;
    sc->kv_full_groups = pg.full_groups;
    sc->kv_window_groups = pg.window_groups;
    if (cfg->kv_blocks_flag > 0)
        return KVS_OK; /* --kv-blocks counts pages */
    kv_capacity cap;
    int rc = run_config_kv_capacity(cfg, m, g, &cap, err);
    if (rc)
        return rc;
    sc->total_blocks = cap.kv_bytes / (sc->block_size * pg.page_bytes_per_token);
    return KVS_OK;
}

void run_config_resolve_budget(run_config *cfg, const model_spec *m)
{
    sched_config *sc = &cfg->sched;
    if (sc->max_model_len == 0)
        sc->max_model_len = m->max_ctx;
    if (sc->max_batched_tokens == 0)
        sc->max_batched_tokens = sc->max_model_len > 2048 && !sc->chunked_prefill
                                     ? sc->max_model_len
                                     : 2048;
}

/* The engine's KV blocks, KV groups and swap space at cfg->tp. */
static int resolve_engine(run_config *cfg, const model_spec *m, const gpu_spec *g,
                          kvs_err *err)
{
    sched_config *sc = &cfg->sched;
    int64_t kv_bpt = model_kv_bytes_per_token(m, cfg->tp);
    if (sc->block_size < 1 || sc->block_size > (INT64_MAX / 4) / (kv_bpt > 0 ? kv_bpt : 1))
        return kvs_errf(err, KVS_EINVAL, "--block-size: %lld is out of range",
                        (long long)sc->block_size);
    int64_t block_bytes = sc->block_size * kv_bpt;
    if (cfg->kv_blocks_flag > 0) {
        sc->total_blocks = cfg->kv_blocks_flag;
    } else {
        kv_capacity cap;
        int rc = run_config_kv_capacity(cfg, m, g, &cap, err);
        if (rc)
            return rc;
        if (cap.kv_blocks < 1)
            return kvs_errf(err, KVS_EINVAL,
                            "%s on %s at tp %lld leaves no KV block (%lld bytes free for KV); "
                            "raise --tp or --gpu-mem-util, or pass --kv-blocks",
                            m->name, g->name, (long long)cfg->tp, (long long)cap.kv_bytes);
        sc->total_blocks = cap.kv_blocks;
    }
    int rc1 = run_config_kv_groups(cfg, m, g, err);
    if (rc1)
        return rc1;
    if (sc->engine == SCHED_ENGINE_SGLANG) /* max_running_requests from the pool */
        sc->max_seqs = sched_sglang_max_running(sc->max_seqs, sc->total_blocks,
                                                sc->max_model_len);
    double swap_bytes = cfg->swap_gib * 1073741824.0;
    sc->swap_blocks = (int64_t)floor(swap_bytes / (double)block_bytes);
    sc->swap_block_s = (double)block_bytes / g->host_link_Bps;
    return KVS_OK;
}

int run_config_resolve(run_config *cfg, const model_spec *m, const gpu_spec *g,
                       kvs_err *err)
{
    run_config_resolve_budget(cfg, m);
    cfg->kv_bytes_per_token = model_kv_bytes_per_token(m, 1); /* a KV hand-off's load */
    int rc = cluster_config_resolve(cfg, err);
    if (rc || (rc = resolve_engine(cfg, m, g, err)) || cfg->decode_tp == 0)
        return rc;
    /* --pd: the decode pool, the same engine at its own TP (docs/cluster.md D1a) */
    run_config d = *cfg;
    d.tp = cfg->decode_tp;
    kvs_err e;
    if ((rc = resolve_engine(&d, m, g, &e)))
        return kvs_errf(err, rc, "--pd-tp: the decode pool: %s", e.msg);
    cfg->decode_sched = d.sched;
    return KVS_OK;
}

/* The step sink: aggregates for the summary and keeps records if asked. */
typedef struct run_sink {
    run_result *res;
    int keep;            /* record steps */
    int64_t steps_cap;   /* capacity of res->steps */
    int64_t members_cap; /* capacity of res->members */
    int failed;          /* out of memory while recording */
    run_step_agg agg;     /* KV and batch aggregates (steps.h) */
    run_itl itl;          /* inter-token latency (itl.h) */
    int64_t limit_steps[SCHED_LIMIT_COUNT]; /* steps by sched_step_limit */
    const trace *tr;      /* the requests (borrowed) */
    run_progress_fn progress; /* may be NULL */
    void *progress_ctx;
    double t0_wall;       /* wall clock at the start, s */
    const run_row_sink *rows; /* may be NULL: rows handed out as they are done */
    run_live *live;       /* what rows->ready hands out */
    int64_t done;         /* requests [0, done) are done (finished or rejected) */
    int64_t rows_told;    /* the k of the latest rows->ready call */
} run_sink;

struct run_live {
    const sched_req_result *reqs; /* [n] the engine's results, borrowed */
    const sched_req_swap *swaps;  /* [n] the engine's swaps, borrowed, or NULL */
    const run_itl *itl;           /* the gaps tracker, borrowed */
    double frontend_s;            /* front-end cost added to first token and finish, s */
};

/* The front end's f seconds added to r's first token and finish (the
 * ones it has): run_frontend_apply's rule, and run_live_row's. */
static void frontend_shift(sched_req_result *r, double f)
{
    if (!isnan(r->first_token_s))
        r->first_token_s += f;
    if (!isnan(r->finish_s))
        r->finish_s += f;
}

void run_live_row(const run_live *live, int64_t i, sched_req_result *r, double *max_itl_s)
{
    *r = live->reqs[i];
    if (live->frontend_s != 0.0)
        frontend_shift(r, live->frontend_s);
    *max_itl_s = live->itl->max_s[i]; /* as run_itl_finish */
}

sched_req_swap run_live_swap(const run_live *live, int64_t i)
{
    return sched_swap_at(live->swaps, i);
}

/* Rows handed out every this many newly done requests (and at the end).
 * The rows done after the last hand-out are inserted by the run's own
 * thread once the engine stops, at about twice a staged row's cost: 256
 * keeps that tail short (2048 left about 2,000 rows of the 20k workload,
 * 12 M instructions, to the end; now 3 M) for a few more short
 * transactions on the writer's private database. */
#define RUN_ROWS_CHUNK 256

/* At a step that is not leapt (so no leap is open and every token made
 * so far is counted), or when a leap's tokens have just been counted
 * (on_leap; a request finishes only after its last tokens are): the
 * requests done so far, whose live ITL state goes back (run_itl_release)
 * and whose rows go to the row sink, in chunks.  O(1) amortized per
 * request. */
static void done_advance(run_sink *k)
{
    const sched_req_result *r = k->live->reqs;
    int64_t i = k->done;
    while (i < k->tr->n &&
           (r[i].status == SCHED_REQ_FINISHED || r[i].status == SCHED_REQ_REJECTED))
        i++;
    k->done = i;
    run_itl_release(&k->itl, i);
    if (!k->rows)
        return;
    if (i - k->rows_told >= RUN_ROWS_CHUNK || (i == k->tr->n && i > k->rows_told)) {
        k->rows->ready(k->rows->ctx, k->live, i);
        k->rows_told = i;
    }
}

/* The row sink's stop, once. */
static void rows_stop(run_sink *k)
{
    if (k->rows) {
        k->rows->stop(k->rows->ctx);
        k->rows = NULL;
    }
}

static double now_wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void on_step(void *ctx, const sched_step *st, const sched_member *m, int64_t nm)
{
    run_sink *k = ctx;
    run_step_agg_add(&k->agg, st);
    double t_end = st->start_s + st->dur_s;
    if (st->limit >= 0 && st->limit < SCHED_LIMIT_COUNT)
        k->limit_steps[st->limit]++;
    if (k->progress && (k->agg.n_steps & 4095) == 0)
        k->progress(k->progress_ctx, t_end, k->itl.n_done, k->tr->n, now_wall() - k->t0_wall);
    if (st->leapt)
        run_itl_leapt_step(&k->itl, 0, st);
    if (nm > 0) /* a leapt step lists none, or the chunks of joiners and a chunking one */
        run_itl_members(&k->itl, 0, m, nm, t_end, st->held);
    if (!st->leapt) /* every token so far is counted: no leap is open */
        done_advance(k);
    if (!k->keep || k->failed)
        return;
    if (run_steps_append(k->res, &k->steps_cap, &k->members_cap, st, st->index, 0, m, nm))
        k->failed = 1;
}

static void run_sink_free(run_sink *k) { run_itl_free(&k->itl); }

static void on_leap(void *ctx, const int32_t *ids, int64_t n, int64_t steps,
                    const int32_t *each)
{
    run_sink *k = ctx;
    run_itl_leap_end(&k->itl, 0, ids, n, steps, each);
    /* every token emitted so far is counted now: a V1 leap that newcomers
     * join and finishers leave may last the whole run, and its rows and
     * ITL pages would otherwise wait for a step that is not leapt */
    done_advance(k);
}

int run_config_clustered(const run_config *cfg) { return cfg->replicas > 1 || cfg->pd[0]; }

void run_config_sched(const run_config *cfg, sched_config *out)
{
    *out = cfg->sched;
    if (cfg->cp > 1) {
        assert(out->block_size <= INT64_MAX / cfg->cp);
        out->block_size *= cfg->cp;
    }
}

void run_config_decode_sched(const run_config *cfg, sched_config *out)
{
    run_config_sched(cfg, out);
    if (cfg->decode_tp > 0) {
        int64_t bs = out->block_size; /* cp's span, as run_config_sched made it */
        *out = cfg->decode_sched;
        out->block_size = bs;
    }
}

int run_execute(const run_config *cfg, const trace *tr, const cost_model *cost,
                run_result *out, kvs_err *err)
{
    return run_execute_pools(cfg, tr, cost, NULL, NULL, NULL, out, err);
}

int run_execute_progress(const run_config *cfg, const trace *tr, const cost_model *cost,
                         run_progress_fn fn, void *ctx, run_result *out, kvs_err *err)
{
    return run_execute_pools(cfg, tr, cost, NULL, fn, ctx, out, err);
}

int run_execute_pools(const run_config *cfg, const trace *tr, const cost_model *cost,
                      const cost_model *decode_cost, run_progress_fn fn, void *ctx,
                      run_result *out, kvs_err *err)
{
    return run_execute_rows(cfg, tr, cost, decode_cost, fn, ctx, NULL, out, err);
}

int run_execute_rows(const run_config *cfg, const trace *tr, const cost_model *cost,
                     const cost_model *decode_cost, run_progress_fn fn, void *ctx,
                     const run_row_sink *rows, run_result *out, kvs_err *err)
{
    if (run_config_clustered(cfg))
        return cluster_execute(cfg, tr, cost, decode_cost ? decode_cost : cost, out, err);
    memset(out, 0, sizeof *out);
    out->tr = tr;
    time_t wall = time(NULL);
    struct tm tmv;
    gmtime_r(&wall, &tmv);
    strftime(out->started_at, sizeof out->started_at, "%Y-%m-%dT%H:%M:%SZ", &tmv);
    double t0 = now_wall();

    run_sink sink = {0};
    sched *s = NULL;
    sched_config sc;
    run_config_sched(cfg, &sc);
    int rc = sched_init(&s, &sc, tr->reqs, tr->n, cost, err);
    if (rc)
        return rc;
    req_prefixes px = trace_prefixes(tr);
    if ((rc = sched_attach_prefixes(s, &px, err)))
        goto fail;
    sink.res = out;
    sink.keep = cfg->record_steps;
    sink.tr = tr;
    sink.progress = fn;
    sink.progress_ctx = ctx;
    sink.t0_wall = t0;
    if ((rc = run_itl_init(&sink.itl, tr, 1, err)))
        goto fail;
    run_live live = {sched_results(s), sched_swaps(s), &sink.itl, cfg->frontend_ms * 1e-3};
    sink.live = &live;
    sink.rows = rows;
    /* every member, decodes included: the ITL needs each token's request */
    sched_set_step_sink(s, on_step, &sink, 1);
    if (!cfg->record_steps) /* recorded steps list every member: no leaps */
        sched_set_leap_sink(s, on_leap);
    double end_s = 0.0;
    rc = engine_run(s, tr, &end_s, err);
    rows_stop(&sink); /* before the results change hands or shift */
    if (rc)
        goto fail;
    if (sink.failed) {
        rc = kvs_errf(err, KVS_ENOMEM, "--record-steps: out of memory after %lld steps",
                      (long long)out->n_steps);
        goto fail;
    }
    if (sink.itl.oom) {
        rc = kvs_errf(err, KVS_ENOMEM, "run: out of memory (inter-token latencies)");
        goto fail;
    }
    /* the engine's results become the run's (no copy), and the engine goes
     * before the metrics allocate theirs: peak memory is the larger of the
     * two phases, not their sum */
    out->reqs = sched_take_results(s);
    out->swaps = sched_take_swaps(s);
    run_frontend_apply(cfg, out->reqs, tr->n);
    sched_counters c;
    sched_get_counters(s, &c);
    out->leap_steps = c.leap_steps;
    out->leap_resumes = c.leap_resumes;
    sched_free(s);
    s = NULL;
    run_summary *sum = &out->sum;
    /* the ITL tracker hands its largest gaps over and frees its live state
     * first, then the metrics take one buffer (the peak: trace, results and
     * the larger of the two phases) */
    out->max_itl_s = run_itl_finish(&sink.itl, sum);
    run_metrics_compute(cfg, tr, out->reqs, sum);
    sum->preempt_recompute = c.preempt_recompute;
    sum->preempt_swap = c.preempt_swap;
    sum->preempt_priority = c.preempt_priority;
    sum->preemptions = c.preempt_recompute + c.preempt_swap;
    sum->total_kv_blocks = cfg->sched.total_blocks;
    sum->peak_kv_blocks = sink.agg.peak_blocks;
    sum->mean_kv_blocks = run_step_agg_mean_blocks(&sink.agg);
    sum->n_steps = sink.agg.n_steps;
    sum->mean_batch = run_step_agg_mean_batch(&sink.agg);
    sum->makespan_s = tr->n > 0 ? end_s - tr->reqs[0].arrival_s : 0.0;
    sum->prefix_hit_rate = cfg->sched.prefix_caching && c.prefix_query_tokens > 0
                               ? (double)c.prefix_hit_tokens / (double)c.prefix_query_tokens
                               : NAN;
    sum->prefix_block_hit_rate = cfg->sched.prefix_caching && c.prefix_query_blocks > 0
                                     ? (double)c.prefix_hit_blocks / (double)c.prefix_query_blocks
                                     : NAN;
    sum->prefix_hit_tokens = c.prefix_hit_tokens;
    sum->prefix_saved_tokens = c.prefix_saved_tokens;
    sum->prefix_evictions = c.prefix_evictions;
    sum->prefill_chunks = c.prefill_chunks;
    sum->load_imbalance = NAN;
    run_metrics_limit_shares(sink.limit_steps, sink.agg.n_steps, sum);
    if (run_metrics_by_class(cfg, tr, out->reqs, &out->classes, &out->n_classes)) {
        rc = kvs_errf(err, KVS_ENOMEM, "run: out of memory for per-class metrics");
        goto fail;
    }
    sched_free(s);
    run_sink_free(&sink);
    out->wall_s = now_wall() - t0;
    return KVS_OK;
fail:
    rows_stop(&sink);
    sched_free(s);
    run_sink_free(&sink);
    run_result_free(out);
    return rc;
}

int run_request_itls(const run_result *res, double **gaps, int64_t **off)
{
    const trace *tr = res->tr;
    size_t nn = (size_t)(tr->n > 0 ? tr->n : 1);
    run_itl_req *q = malloc(nn * sizeof *q);
    int64_t *o = calloc(nn + 1, sizeof *o);
    double *t_last = malloc(nn * sizeof *t_last);
    double *g = NULL;
    int rc = KVS_ENOMEM;
    if (!q || !o || !t_last)
        goto out;
    for (int pass = 0; pass < 2; pass++) { /* count, then fill in request order */
        for (int64_t i = 0; i < tr->n; i++)
            q[i] = (run_itl_req){0.0, 0, 0};
        int64_t *fill = pass ? calloc(nn, sizeof *fill) : NULL;
        if (pass && !fill)
            goto out;
        for (int64_t s = 0; s < res->n_steps; s++) {
            int64_t lo = res->steps[s].member_off;
            int64_t hi = s + 1 < res->n_steps ? res->steps[s + 1].member_off : res->n_members;
            double t = res->steps[s].step.start_s + res->steps[s].step.dur_s;
            const int held = res->steps[s].step.held;
            for (int64_t j = lo; j < hi; j++) { /* as run_itl_members */
                const sched_member *m = &res->members[j];
                run_itl_req *r = &q[m->req_id];
                const int d = run_itl_step_member(r, &tr->reqs[m->req_id], m, held);
                if (d == 0)
                    continue;
                if (d == 2) {
                    if (pass)
                        g[o[m->req_id] + fill[m->req_id]++] = t - t_last[m->req_id];
                    else
                        o[m->req_id + 1]++;
                }
                t_last[m->req_id] = t;
            }
        }
        free(fill);
        if (!pass) {
            for (int64_t i = 0; i < tr->n; i++)
                o[i + 1] += o[i];
            if (!(g = malloc((size_t)(o[tr->n] > 0 ? o[tr->n] : 1) * sizeof *g)))
                goto out;
        }
    }
    rc = KVS_OK;
out:
    free(q);
    free(t_last);
    if (rc) {
        free(o);
        free(g);
        o = NULL;
        g = NULL;
    }
    *gaps = g;
    *off = o;
    return rc;
}

void run_frontend_apply(const run_config *cfg, sched_req_result *reqs, int64_t n)
{
    assert(cfg->frontend_ms >= 0.0);
    if (cfg->frontend_ms == 0.0)
        return;
    double f = cfg->frontend_ms * 1e-3;
    for (int64_t i = 0; i < n; i++)
        frontend_shift(&reqs[i], f);
}

void run_result_free(run_result *r)
{
    free(r->reqs);
    free(r->swaps);
    free(r->max_itl_s);
    r->max_itl_s = NULL;
    free(r->steps);
    free(r->members);
    free(r->classes);
    free(r->replica);
    free(r->replicas);
    free(r->decode);
    free(r->kv_transfer_s);
    r->decode = NULL;
    r->kv_transfer_s = NULL;
    r->replica = NULL;
    r->replicas = NULL;
    r->n_replicas = 0;
    r->classes = NULL;
    r->n_classes = 0;
    r->reqs = NULL;
    r->swaps = NULL;
    r->steps = NULL;
    r->members = NULL;
    r->n_steps = r->n_members = 0;
}
