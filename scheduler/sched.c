/* sched.c — engine set-up, arrivals, dispatch to the batching mode, results
 * and the enum names.  The batching modes live in continuous.c, chunked.c
 * and static_batch.c; the prefix cache in pcache.c. */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../base/rng.h"
#include "sched_internal.h"

/* The rules of docs/semantics-extensions.md on combining chunked prefill,
 * prefix caching and lpm with the other options. */
static int check_extensions(const sched_config *c, kvs_err *err)
{
    const int chunk = c->chunked_prefill, pfx = c->prefix_caching;
    if ((chunk != 0 && chunk != 1) || (pfx != 0 && pfx != 1))
        return kvs_errf(err, KVS_EINVAL, "scheduler: chunked_prefill and prefix_caching are 0 or 1");
    if (c->policy == SCHED_POLICY_LPM && !pfx)
        return kvs_errf(err, KVS_EINVAL,
                        "--policy lpm: orders by cached prefix, so it needs --prefix-caching");
    if (!chunk && !pfx)
        return KVS_OK;
    const char *flag = chunk ? "--chunked-prefill" : "--prefix-caching";
    if (c->batching == SCHED_BATCHING_STATIC)
        return kvs_errf(err, KVS_EINVAL, "%s: needs --batching continuous", flag);
    if (c->preemption == SCHED_PREEMPT_SWAP)
        return kvs_errf(err, KVS_EINVAL,
                        "%s: not supported with --preemption swap (use recompute or off)", flag);
    if (pfx && c->alloc != SCHED_ALLOC_PAGED)
        return kvs_errf(err, KVS_EINVAL,
                        "--prefix-caching: shares paged blocks; needs --alloc paged");
    if (chunk && c->priority_preemption)
        return kvs_errf(err, KVS_EINVAL,
                        "--chunked-prefill: not supported with --priority-preemption");
    if (chunk && c->max_batched_tokens < c->block_size)
        return kvs_errf(err, KVS_EINVAL,
                        "--max-batched-tokens: %lld is smaller than one block (--block-size "
                        "%lld) with --chunked-prefill",
                        (long long)c->max_batched_tokens, (long long)c->block_size);
    return KVS_OK;
}

int sched_config_check(const sched_config *c, int64_t n, kvs_err *err)
{
    if (n < 0 || n > INT32_MAX)
        return kvs_errf(err, KVS_EINVAL, "trace: %lld requests; at most %d are supported",
                        (long long)n, INT32_MAX);
    if (c->block_size < 1)
        return kvs_errf(err, KVS_EINVAL, "--block-size: must be >= 1");
    if (c->total_blocks < 1)
        return kvs_errf(err, KVS_EINVAL, "--kv-blocks: the KV cache has no block (%lld)",
                        (long long)c->total_blocks);
    if (c->max_seqs < 1)
        return kvs_errf(err, KVS_EINVAL, "--max-seqs: must be >= 1");
    if (c->max_batched_tokens < 1)
        return kvs_errf(err, KVS_EINVAL, "--max-batched-tokens: must be >= 1");
    if (c->max_model_len < 1)
        return kvs_errf(err, KVS_EINVAL, "--max-model-len: must be >= 1");
    /* A step's prefill_sq, a sum of (P+g)^2, is at most max_model_len times
     * the step's prefill tokens, which max_batched_tokens (continuous) or the
     * KV cache (static) bounds: keep that product inside int64_t. */
    if (c->total_blocks > INT64_MAX / c->block_size)
        return kvs_errf(err, KVS_EINVAL, "--kv-blocks: %lld blocks of %lld tokens overflow "
                        "a 64-bit token count", (long long)c->total_blocks,
                        (long long)c->block_size);
    if (c->max_model_len > INT64_MAX / c->max_batched_tokens ||
        c->max_model_len > INT64_MAX / (c->total_blocks * c->block_size))
        return kvs_errf(err, KVS_EINVAL, "--max-model-len: %lld times the tokens a step may "
                        "prefill (--max-batched-tokens %lld, KV cache %lld tokens) exceeds "
                        "2^63, the largest attention cost a step can count; lower them",
                        (long long)c->max_model_len, (long long)c->max_batched_tokens,
                        (long long)(c->total_blocks * c->block_size));
    if (c->kv_cache_off &&
        (c->engine != SCHED_ENGINE_VLLM_V0 || c->batching != SCHED_BATCHING_CONTINUOUS ||
         c->chunked_prefill || c->prefix_caching || c->preemption == SCHED_PREEMPT_SWAP))
        return kvs_errf(err, KVS_EINVAL, "--kv-cache off: only with --engine vllm-v0, continuous "
                                         "batching, no chunked prefill or prefix caching, and "
                                         "recompute (or no) preemption");
    if (c->kv_cache_off && c->max_model_len > 3037000499 / c->max_seqs)
        return kvs_errf(err, KVS_EINVAL, "--kv-cache off: max-seqs %lld x max-model-len %lld "
                                         "squared overflows a step's attention cost; lower them",
                        (long long)c->max_seqs, (long long)c->max_model_len);
    if ((unsigned)c->engine > SCHED_ENGINE_SGLANG)
        return kvs_errf(err, KVS_EINVAL, "scheduler: unknown engine value in config");
    if (c->engine != SCHED_ENGINE_SGLANG &&
        (c->max_prefill_tokens != 0 || c->conservativeness != 0.0 || c->overlap != 0))
        return kvs_errf(err, KVS_EINVAL, "--max-prefill-tokens, --schedule-conservativeness and "
                                         "--overlap-schedule: need --engine sglang");
    if (c->num_scheduler_steps < 0 || c->num_scheduler_steps > SCHED_MAX_SCHEDULER_STEPS)
        return kvs_errf(err, KVS_EINVAL, "--num-scheduler-steps: must be in [1, %d]",
                        SCHED_MAX_SCHEDULER_STEPS);
    if (c->num_scheduler_steps > 1 && c->engine != SCHED_ENGINE_VLLM_V0)
        return kvs_errf(err, KVS_EINVAL, "--num-scheduler-steps: needs --engine vllm-v0 "
                                         "(multi-step scheduling is a V0 engine feature)");
    if (c->engine == SCHED_ENGINE_VLLM_V1)
        return sched_v1_config_check(c, err); /* v1.c; V1 has no watermark */
    if (c->engine == SCHED_ENGINE_TRTLLM)
        return sched_trt_config_check(c, err); /* trtllm.c */
    if (c->engine == SCHED_ENGINE_SGLANG)
        return sched_sgl_config_check(c, err); /* sglang.c */
    if (c->long_prefill_threshold != 0)
        return kvs_errf(err, KVS_EINVAL,
                        "--long-prefill-threshold: needs --engine vllm-v1");
    if (!(c->watermark >= 0.0 && c->watermark < 1.0))
        return kvs_errf(err, KVS_EINVAL, "--watermark: must be in [0, 1)");
    if ((unsigned)c->batching > SCHED_BATCHING_STATIC || (unsigned)c->policy > SCHED_POLICY_LPM ||
        (unsigned)c->alloc > SCHED_ALLOC_RESERVED_ORACLE || (unsigned)c->preemption > SCHED_PREEMPT_OFF)
        return kvs_errf(err, KVS_EINVAL, "scheduler: unknown enum value in config");
    if (c->preemption == SCHED_PREEMPT_SWAP && c->swap_blocks < 1)
        return kvs_errf(err, KVS_EINVAL,
                        "--swap-gib: swap preemption needs host swap space of at least one block");
    if (!(c->swap_block_s >= 0.0) || !isfinite(c->swap_block_s))
        return kvs_errf(err, KVS_EINVAL, "scheduler: swap transfer time must be >= 0");
    if (c->priority_preemption && c->policy != SCHED_POLICY_PRIORITY)
        return kvs_errf(err, KVS_EINVAL, "--priority-preemption: needs --policy priority");
    if (c->priority_preemption && c->preemption == SCHED_PREEMPT_OFF)
        return kvs_errf(err, KVS_EINVAL,
                        "--priority-preemption: contradicts --preemption off");
    if (!(c->batch_timeout_s >= 0.0) || !isfinite(c->batch_timeout_s))
        return kvs_errf(err, KVS_EINVAL, "--batch-timeout: must be >= 0");
    if (c->batching == SCHED_BATCHING_CONTINUOUS && c->batch_timeout_s > 0.0)
        return kvs_errf(err, KVS_EINVAL,
                        "--batch-timeout: applies only to --batching static");
    if (c->batching == SCHED_BATCHING_STATIC) {
        if (c->alloc != SCHED_ALLOC_PAGED)
            return kvs_errf(err, KVS_EINVAL,
                            "--alloc: static batching reserves padded lengths itself; "
                            "leave --alloc at paged");
        if (c->preemption == SCHED_PREEMPT_SWAP)
            return kvs_errf(err, KVS_EINVAL,
                            "--preemption swap: static batches are never preempted");
        if (c->priority_preemption)
            return kvs_errf(err, KVS_EINVAL,
                            "--priority-preemption: static batches are never preempted");
    }
    if (c->num_scheduler_steps > 1 &&
        (c->batching != SCHED_BATCHING_CONTINUOUS || c->chunked_prefill || c->prefix_caching ||
         c->alloc != SCHED_ALLOC_PAGED || c->preemption != SCHED_PREEMPT_RECOMPUTE ||
         c->kv_cache_off))
        return kvs_errf(err, KVS_EINVAL,
                        "--num-scheduler-steps %lld: only with continuous batching, the paged "
                        "allocator, recompute preemption and the KV cache on, without chunked "
                        "prefill or prefix caching (docs/semantics-extensions.md M6)",
                        (long long)c->num_scheduler_steps);
    return check_extensions(c, err);
}

int64_t sched_segment_chain(const req_prefixes *px, int64_t i, int64_t S, int64_t P,
                            uint64_t *chain, int64_t *seg_end)
{
    uint64_t h = 0x243f6a8885a308d3ULL;
    int64_t tok = 0;
    for (int64_t k = px->off[i]; k < px->off[i + 1]; k++) {
        h = rng_mix64(h ^ rng_mix64(px->ids[k] + 0x9e3779b97f4a7c15ULL));
        chain[k] = h;
        tok += seg_end ? px->tokens[k] : S;
        if (seg_end)
            seg_end[k] = tok;
    }
    return tok < P ? tok : P;
}

static const sched_engine_vt sched_engine_v0;

int sched_init(sched **out, const sched_config *cfg, const trace_req *reqs,
               int64_t n, const cost_model *cost, kvs_err *err)
{
    return sched_init_shared(out, cfg, reqs, n, cost, NULL, err);
}

int sched_init_shared(sched **out, const sched_config *cfg, const trace_req *reqs,
                      int64_t n, const cost_model *cost, sched *owner, kvs_err *err)
{
    *out = NULL;
    int rc = sched_config_check(cfg, n, err);
    if (rc)
        return rc;
    sched *s = calloc(1, sizeof *s);
    if (!s)
        return kvs_errf(err, KVS_ENOMEM, "scheduler: out of memory");
    s->cfg = *cfg;
    s->want_members = cfg->kv_cache_off; /* no-cache step costs read the members */
    s->reqs = reqs;
    s->n = n;
    s->cost = cost;
    s->eng = cfg->engine == SCHED_ENGINE_VLLM_V1   ? &sched_engine_v1
             : cfg->engine == SCHED_ENGINE_TRTLLM ? &sched_engine_trtllm
             : cfg->engine == SCHED_ENGINE_SGLANG ? &sched_engine_sglang
                                                  : &sched_engine_v0;
    s->horizon = -INFINITY;
    s->horizon_near = INFINITY;
    if (owner && (s->eng == &sched_engine_v0 || s->eng == &sched_engine_v1) &&
        owner->eng == s->eng && !owner->share && owner->reqs == reqs && owner->n == n &&
        owner->cfg.preemption == cfg->preemption) /* (whether there is swap state) */
        s->share = owner;
    if (s->share)
        owner->shared = 1; /* before s reads the owner's arrays (v1_init) */
    if ((rc = s->eng->init(s, err))) {
        sched_free(s);
        return rc;
    }
    *out = s;
    return KVS_OK;
}

/* ------------------------------------------------------- the V0 engine */
/* The per-request arrays: the owner's under sched_init_shared (already
 * set up, each entry PENDING until its request arrives here or at another
 * sharer), else new ones with every request PENDING.  -1 out of memory. */
static int v0_alloc_requests(sched *s, size_t nn)
{
    if (s->share) {
        s->res = s->share->res;
        s->g = s->share->g;
        s->swap_ctx = s->share->swap_ctx;
        s->swap_since = s->share->swap_since;
        s->swp = s->share->swp;
        s->state = s->share->state;
        return 0;
    }
    s->res = malloc(nn * sizeof *s->res);
    s->g = calloc(nn, sizeof *s->g);
    s->state = calloc(nn, sizeof *s->state);
    if (!s->res || !s->g || !s->state)
        return -1;
    if (s->cfg.preemption == SCHED_PREEMPT_SWAP) { /* swap state only where it can swap */
        s->swap_ctx = calloc(nn, sizeof *s->swap_ctx);
        s->swap_since = calloc(nn, sizeof *s->swap_since);
        s->swp = calloc(nn, sizeof *s->swp);
        if (!s->swap_ctx || !s->swap_since || !s->swp)
            return -1;
    }
    sched_results_reset(s->res, s->n);
    return 0;
}

static int v0_init(sched *s, kvs_err *err)
{
    const sched_config *cfg = &s->cfg;
    const trace_req *reqs = s->reqs;
    const int64_t n = s->n;
    s->pol = sched_policy_vt_get(cfg->policy);
    s->alloc = sched_alloc_vt_get(cfg->alloc);
    s->watermark_blocks = (int64_t)floor(cfg->watermark * (double)cfg->total_blocks);
    s->free_blocks = cfg->total_blocks;
    s->run_cap = (cfg->max_seqs < n ? cfg->max_seqs : n) + 1;
    s->pc.on = cfg->prefix_caching;
    s->pc.free_head = s->pc.lru_head = s->pc.lru_tail = -1;
    size_t nn = (size_t)(n > 0 ? n : 1);
    if (v0_alloc_requests(s, nn))
        goto nomem;
    s->run = calloc((size_t)s->run_cap, sizeof *s->run);
    s->members = calloc((size_t)s->run_cap, sizeof *s->members);
    s->batch = calloc((size_t)s->run_cap, sizeof *s->batch);
    s->lk_ids = calloc((size_t)s->run_cap, sizeof *s->lk_ids);
    s->lz_cnt = calloc((size_t)cfg->block_size, sizeof *s->lz_cnt);
    if (!s->run || !s->members || !s->batch || !s->lk_ids || !s->lz_cnt)
        goto nomem;
    if (sched_waitq_init(&s->wq, n, reqs, s->pol) || sched_waitq_init(&s->swq, n, reqs, s->pol))
        goto nomem;
    if (s->pol->cache_aware && sched_lpm_init(s))
        goto nomem;
    if (cfg->prefix_caching && !(s->fin = calloc((size_t)s->run_cap, sizeof *s->fin)))
        goto nomem;
    s->ctr.free_blocks = cfg->total_blocks;
    return KVS_OK;
nomem:
    return kvs_errf(err, KVS_ENOMEM, "scheduler: out of memory for %lld requests", (long long)n);
}

void sched_free(sched *s)
{
    if (!s)
        return;
    s->eng->free(s);
    free(s);
}

static void v0_free(sched *s)
{
    sched_waitq_free(&s->wq);
    sched_waitq_free(&s->swq);
    if (!s->share) {
        free(s->res);
        free(s->g);
        free(s->swap_ctx);
        free(s->swap_since);
        free(s->swp);
        free(s->state);
    }
    free(s->run);
    free(s->members);
    free(s->batch);
    free(s->lk_ids);
    free(s->lz_cnt);
    sched_lpm_free(s->lpm);
    free(s->fin);
    sched_pc_free(&s->pc);
}

int sched_attach_prefixes(sched *s, const req_prefixes *px, kvs_err *err)
{
    return s->eng->attach_prefixes(s, px, err);
}

static int v0_attach_prefixes(sched *s, const req_prefixes *px, kvs_err *err)
{
    if (s->pc.rec || s->pc.limit)
        return kvs_errf(err, KVS_EINVAL, "scheduler: prefixes attached twice");
    return sched_pc_init(s, px, err);
}

void sched_set_step_sink(sched *s, sched_step_fn fn, void *ctx, int want_members)
{
    s->sink = fn;
    s->sink_ctx = ctx;
    s->want_members = want_members || s->cfg.kv_cache_off; /* its costs need them */
}

void sched_set_leap_sink(sched *s, sched_leap_fn fn) { s->leap_fn = fn; }

void sched_arrive(sched *s, int64_t id) { s->eng->arrive(s, id); }

static void v0_arrive(sched *s, int64_t id)
{
    s->lz_paused = 0; /* W changes: the next plan admits as usual */
    s->state[id] = SCHED_REQ_WAITING;
    s->res[id].status = SCHED_REQ_WAITING;
    sched_waitq_push(&s->wq, (int32_t)id);
}

void sched_results_reset(sched_req_result *res, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        memset(&res[i], 0, sizeof res[i]);
        res[i].status = SCHED_REQ_PENDING;
        res[i].first_token_s = NAN;
        res[i].finish_s = NAN;
    }
}

int64_t sched_arrival_due(const sched *s, double t)
{
    const int64_t *c = s->arr_cur;
    return c && *c >= 0 && *c < s->n && s->reqs[*c].arrival_s <= t ? *c : -1;
}

void sched_arrival_taken(sched *s, int64_t id)
{
    assert(s->arr_cur && *s->arr_cur == id);
    *s->arr_cur = s->arr_next ? s->arr_next[id] : id + 1;
}

int sched_leap_may_go(sched *s, double t, int shut)
{
    if (t < s->horizon)
        return 1;
    if (!shut || !s->arr_cur || !(t < s->arr_other_s))
        return 0;
    for (int64_t id; (id = sched_arrival_due(s, t)) >= 0;) {
        sched_arrival_taken(s, id);
        sched_arrive(s, id);
    }
    return 1;
}

void sched_reject(sched *s, int32_t id, sched_reject_reason why)
{
    s->state[id] = SCHED_REQ_REJECTED;
    s->res[id].status = SCHED_REQ_REJECTED;
    s->res[id].reject_reason = why;
    s->ctr.n_rejected++;
    if (s->horizon > s->horizon_near) /* its load fell: sched_set_horizon_pair */
        s->horizon = s->horizon_near;
}

/* Fill the common step fields and hand the step to the sink. */
void sched_emit(sched *s, double now)
{
    sched_step *st = &s->step;
    st->index = s->ctr.steps++;
    st->start_s = now;
    st->kv_blocks_used = s->cfg.total_blocks - s->free_blocks;
    st->n_waiting = s->wq.n;
    st->n_running = s->cfg.batching == SCHED_BATCHING_STATIC ? s->n_batch : s->n_run;
    if (!st->leapt && s->lk_steps > 0) /* members may follow: their tokens first */
        sched_same_set_flush(s);
    if (s->sink)
        s->sink(s->sink_ctx, st, s->members, s->n_members);
}

int sched_plan_step(sched *s, double now, int more_arrivals, double *t_end)
{
    int rc = s->eng->plan(s, now, more_arrivals, t_end);
    s->horizon = -INFINITY; /* good for one plan only */
    s->horizon_near = INFINITY;
    s->arr_cur = NULL;
    return rc;
}

void sched_set_horizon(sched *s, double t) { s->horizon = t; }

void sched_set_leap_past_finish(sched *s, int on) { s->leap_past_finish = on != 0; }

void sched_set_horizon_pair(sched *s, double near, double far)
{
    assert(near <= far);
    s->horizon = far;
    s->horizon_near = near;
}

void sched_set_arrivals(sched *s, int64_t *cursor, const int32_t *next_of, double other_s)
{
    s->arr_cur = cursor;
    s->arr_next = next_of;
    s->arr_other_s = other_s;
}

static int v0_plan(sched *s, double now, int more_arrivals, double *t_end)
{
    if (s->cfg.batching == SCHED_BATCHING_STATIC)
        return sched_plan_static(s, now, more_arrivals, t_end);
    if (s->cfg.chunked_prefill)
        return sched_plan_chunked(s, now, t_end);
    if (s->cfg.num_scheduler_steps > 1)
        return sched_plan_multistep(s, now, t_end);
    return sched_plan_continuous(s, now, t_end);
}

void sched_finish_step(sched *s, double t) { s->eng->finish(s, t); }

static void v0_finish(sched *s, double t)
{
    if (s->active == SCHED_ACTIVE_STATIC)
        sched_finish_static(s, t);
    else if (s->cfg.num_scheduler_steps > 1)
        sched_finish_multistep(s, t);
    else
        sched_finish_continuous(s, t);
    s->active = SCHED_ACTIVE_NONE;
}

const sched_req_result *sched_results(const sched *s) { return s->res; }

sched_req_result *sched_take_results(sched *s)
{
    assert(!s->share); /* the owner frees a shared array */
    sched_req_result *r = s->res;
    s->res = NULL;
    return r;
}

const sched_req_swap *sched_swaps(const sched *s) { return s->swp; }

sched_req_swap *sched_take_swaps(sched *s)
{
    assert(!s->share); /* the owner frees a shared array */
    sched_req_swap *w = s->swp;
    s->swp = NULL;
    return w;
}

const char *sched_error(const sched *s) { return s->errmsg; }

void sched_get_counters(const sched *s, sched_counters *out) { s->eng->counters(s, out); }

void sched_get_load(const sched *s, int64_t *resolved, int64_t *used_blocks)
{
    *resolved = s->ctr.n_finished + s->ctr.n_rejected;
    *used_blocks = s->eng->used_blocks(s);
}

int sched_audit(const sched *s, char *why, size_t n) { return s->eng->audit(s, why, n); }

int64_t sched_cached_prefix_tokens(const sched *s, int64_t id)
{
    if (!s->cfg.prefix_caching || id < 0 || id >= s->n)
        return 0;
    if (s->cfg.engine == SCHED_ENGINE_SGLANG)
        return sched_sgl_cached_prefix_tokens(s, (int32_t)id);
    int64_t blocks = s->cfg.engine == SCHED_ENGINE_VLLM_V1
                         ? sched_v1_cached_prefix_blocks(s, (int32_t)id)
                         : sched_pc_match(s, (int32_t)id);
    return blocks * s->cfg.block_size;
}

static int64_t v0_used_blocks(const sched *s) { return s->cfg.total_blocks - s->free_blocks; }

static void v0_counters(const sched *s, sched_counters *out)
{
    *out = s->ctr;
    out->free_blocks = s->free_blocks;
    out->used_blocks = v0_used_blocks(s);
    out->swapped_blocks = s->swap_used;
    out->n_waiting = s->wq.n;
    out->n_running = s->cfg.batching == SCHED_BATCHING_STATIC ? s->n_batch : s->n_run;
    out->n_swapped = s->swq.n;
    out->cached_blocks = s->pc.cached;
}

static const sched_engine_vt sched_engine_v0 = {
    "vllm-v0",         v0_init,   v0_free,     v0_attach_prefixes, v0_arrive,
    v0_plan,           v0_finish, v0_counters, v0_used_blocks, sched_v0_audit,
};

/* ---------------------------------------------------------------- names */
static const char *const engine_names[] = {"vllm-v0", "vllm-v1", "trtllm", "sglang"};
static const char *const batching_names[] = {"continuous", "static"};
static const char *const policy_names[] = {"fcfs", "priority", "lpm"};
static const char *const alloc_names[] = {"paged", "reserved", "reserved-oracle"};
static const char *const preempt_names[] = {"recompute", "swap", "off"};

#define NAME_OF(tbl, v) \
    ((v) >= 0 && (size_t)(v) < sizeof tbl / sizeof tbl[0] ? tbl[v] : "?")

static int parse_in(const char *const *tbl, size_t n, const char *s)
{
    for (size_t i = 0; s && i < n; i++)
        if (!strcmp(tbl[i], s))
            return (int)i;
    return -1;
}

const char *sched_reject_reason_name(int v)
{
    static const char *const names[] = {NULL, "context", "token-budget", "kv-capacity"};
    return v >= 0 && v < 4 ? names[v] : NULL;
}

const char *sched_engine_name(int v) { return NAME_OF(engine_names, v); }
int sched_engine_parse(const char *s) { return parse_in(engine_names, 4, s); }
const char *sched_batching_name(int v) { return NAME_OF(batching_names, v); }
const char *sched_policy_name(int v) { return NAME_OF(policy_names, v); }
const char *sched_alloc_name(int v) { return NAME_OF(alloc_names, v); }
const char *sched_preempt_name(int v) { return NAME_OF(preempt_names, v); }
int sched_batching_parse(const char *s) { return parse_in(batching_names, 2, s); }
int sched_policy_parse(const char *s) { return parse_in(policy_names, 3, s); }
int sched_alloc_parse(const char *s) { return parse_in(alloc_names, 3, s); }
int sched_preempt_parse(const char *s) { return parse_in(preempt_names, 3, s); }
