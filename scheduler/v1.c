/* v1.c — the vLLM V1 engine: the contract is shared/spec/semantics-v1.md,
 * restated in the project's docs/semantics-v1.md.
 *
 * One iteration (sched_plan_step) is one step: a single token budget B,
 * spent first on the running list R in admission order (rule 4.4), then,
 * if the step preempted nobody, on the waiting list W in its order (4.5).
 * A request simply has T - C tokens to catch up; a running chunk that cannot
 * get its blocks preempts the last of R (fcfs) or the worst of R by
 * (priority, arrival_s, id), by recompute only (section 5).  Blocks come
 * from v1_pool.c.  Per-request state is flat arrays indexed by id; R's block
 * tables live in min(max_seqs, n) fixed slots; nothing is allocated per
 * step.  A step costs O(|S| + blocks taken or hit + preemptions * |R|);
 * a priority arrival or preemption O(|W|) for its sorted place.  Given a
 * horizon (sched_set_horizon), runs of forced decode steps are planned in
 * one call at O(1 + blocks taken) per step (v1_leap.c).  A model with
 * sliding-window layers pages by vLLM's KV cache groups (rule 2.9): the
 * table holds the first full group, the other groups' pages a row each per
 * slot, window pages going back as the window slides; leaps are off. */
#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "v1_internal.h"

#include "../base/rng.h"

/* Leaps group requests by stored tokens mod bs; above this block size the
 * engine plans every step alone. */
#define V1_LEAP_MAX_BS 4096


/* ------------------------------------------------------------- config */
int sched_v1_config_check(const sched_config *c, kvs_err *err)
{
    const char *eng = "not available under --engine vllm-v1";
    if ((unsigned)c->batching > SCHED_BATCHING_STATIC || (unsigned)c->policy > SCHED_POLICY_LPM ||
        (unsigned)c->alloc > SCHED_ALLOC_RESERVED_ORACLE || (unsigned)c->preemption > SCHED_PREEMPT_OFF)
        return kvs_errf(err, KVS_EINVAL, "scheduler: unknown enum value in config");
    if ((c->chunked_prefill != 0 && c->chunked_prefill != 1) ||
        (c->prefix_caching != 0 && c->prefix_caching != 1))
        return kvs_errf(err, KVS_EINVAL, "scheduler: chunked_prefill and prefix_caching are 0 or 1");
    if (c->preemption != SCHED_PREEMPT_RECOMPUTE)
        return kvs_errf(err, KVS_EINVAL, "--preemption %s: %s (V1 preempts by recompute only)",
                        sched_preempt_name(c->preemption), eng);
    if (c->priority_preemption)
        return kvs_errf(err, KVS_EINVAL,
                        "--priority-preemption: %s (V1's priority policy preempts only on "
                        "memory shortage)", eng);
    if (c->alloc != SCHED_ALLOC_PAGED)
        return kvs_errf(err, KVS_EINVAL, "--alloc %s: %s (V1 allocates paged blocks)",
                        sched_alloc_name(c->alloc), eng);
    if (c->batching != SCHED_BATCHING_CONTINUOUS)
        return kvs_errf(err, KVS_EINVAL, "--batching static: %s (V1 batches continuously)", eng);
    if (c->policy == SCHED_POLICY_LPM)
        return kvs_errf(err, KVS_EINVAL, "--policy lpm: %s (V1 orders by fcfs or priority)", eng);
    if (c->batch_timeout_s != 0.0)
        return kvs_errf(err, KVS_EINVAL, "--batch-timeout: %s (it applies to static batching)",
                        eng);
    if (c->long_prefill_threshold < 0)
        return kvs_errf(err, KVS_EINVAL, "--long-prefill-threshold: must be >= 0 (0 = off)");
    if (c->segment_tokens < 0)
        return kvs_errf(err, KVS_EINVAL, "--segment-tokens: must be >= 1 (0 = 512)");
    if (c->kv_window < 0 || c->kv_full_groups < 0 || c->kv_window_groups < 0 ||
        (c->kv_window_groups > 0) != (c->kv_window > 0) || c->kv_window_groups > 64 ||
        c->kv_full_groups > 64)
        return kvs_errf(err, KVS_EINVAL, "scheduler: KV groups: window %lld tokens, %lld full "
                        "and %lld window groups (a window needs window groups, at most 64 each)",
                        (long long)c->kv_window, (long long)c->kv_full_groups,
                        (long long)c->kv_window_groups);
    if (c->total_blocks > INT32_MAX - 1)
        return kvs_errf(err, KVS_EINVAL, "--kv-blocks: %lld blocks; at most %d under "
                        "--engine vllm-v1", (long long)c->total_blocks, INT32_MAX - 1);
    return KVS_OK;
}

/* ---------------------------------------------------------- set-up */
/* The engine whose rq this is: the sharing owner's, or its own. */
static sched_v1 *rq_owner(const sched *s) { return s->share ? s->share->v1 : s->v1; }

/* Set up rq entries [rq_ready, hi) of the owner: the trace's P and O, no
 * slot, not in W; the other fields 0.  O(hi - rq_ready). */
static void rq_setup(const sched *s, int64_t hi)
{
    sched_v1 *o = rq_owner(s);
    for (int64_t i = o->rq_ready; i < hi; i++) {
        struct v1_req *q = &o->rq[i];
        memset(q, 0, sizeof *q);
        q->slot = q->wprev = q->wnext = -1;
        assert(s->reqs[i].prompt_tokens + s->reqs[i].output_tokens < INT32_MAX);
        q->P = (int32_t)s->reqs[i].prompt_tokens;
        q->O = (int32_t)s->reqs[i].output_tokens;
    }
    if (hi > o->rq_ready)
        o->rq_ready = hi;
}

void v1_rq_settle(sched *s)
{
    rq_setup(s, s->n);
    rq_owner(s)->rq_keep = 1;
}

/* Hand back the pages of rq wholly behind the first request not yet
 * finished or rejected, VMEM_BATCH bytes at least at a time (an unmap);
 * amortized O(1) per request.  Only an engine alone with its own entries:
 * nothing reads a finished or rejected request's entry once the step that
 * ended it is over (R dropped it; it is in no list): v1_plan calls this
 * before it reads any entry, and a leap once its finishers have left R
 * (leap_finish: a leap may last most of a run). */
void v1_rq_release(sched *s)
{
    sched_v1 *v = s->v1;
    if (!v->rq_mem.base || v->rq_keep)
        return;
    if (s->shared || v->pd.keep || v->pd.load) { /* (from now on) */
        v1_rq_settle(s);
        return;
    }
    int64_t d = v->rq_dead;
    while (d < v->rq_ready &&
           (s->state[d] == SCHED_REQ_FINISHED || s->state[d] == SCHED_REQ_REJECTED))
        d++;
    v->rq_dead = d;
    vmem_release_batched(&v->rq_mem, (size_t)d * sizeof *v->rq);
}

int64_t sched_state_released(const sched *s)
{
    return s->cfg.engine == SCHED_ENGINE_VLLM_V1 && s->v1 ? (int64_t)s->v1->rq_mem.released : 0;
}

/* The largest block table: ceil((P + O - 1) / bs) blocks of any request
 * that is not rejected for its length, at most N.  O(n). */
static int64_t table_cap(const sched *s, int64_t bs, int64_t N)
{
    int64_t maxt = 1;
    for (int64_t i = 0; i < s->n; i++) {
        const trace_req *r = &s->reqs[i];
        int64_t t = r->prompt_tokens + r->output_tokens - 1;
        if (r->prompt_tokens + r->output_tokens <= s->cfg.max_model_len && t > maxt)
            maxt = t;
    }
    const int64_t cap = sched_ceil_div(maxt, bs);
    return cap < N ? cap : N;
}

/* The leaps' arrays (v1_leap.c): the residue groups' starts [bs + 1] and
 * per-slot scratch.  -1 when out of memory (v1_free frees what was got). */
static int leap_arrays_init(sched_v1 *v)
{
    v->lk_start = malloc((size_t)(v->bs + 1) * sizeof *v->lk_start);
    v->lk_ids = malloc((size_t)v->slots * sizeof *v->lk_ids);
    v->lk_tell = malloc((size_t)v->slots * sizeof *v->lk_tell);
    v->lk_each = malloc((size_t)v->slots * sizeof *v->lk_each);
    v->lk_fin = malloc((size_t)v->slots * sizeof *v->lk_fin);
    v->lk_pos = malloc((size_t)v->slots * sizeof *v->lk_pos);
    return v->lk_start && v->lk_ids && v->lk_tell && v->lk_each && v->lk_fin && v->lk_pos ? 0
                                                                                         : -1;
}

static int v1_init(sched *s, kvs_err *err)
{
    const sched_config *c = &s->cfg;
    const int64_t n = s->n;
    sched_v1 *v = calloc(1, sizeof *v);
    if (!v)
        return kvs_errf(err, KVS_ENOMEM, "scheduler: out of memory");
    s->v1 = v;
    v->bs = c->block_size;
    v->S = c->segment_tokens > 0 ? c->segment_tokens : 512;
    v->thr = c->long_prefill_threshold;
    v->B = c->max_batched_tokens;
    v->N = c->total_blocks;
    v->fcfs = c->policy == SCHED_POLICY_FCFS;
    v->pfx = c->prefix_caching;
    v->whead = v->wtail = -1;
    v->wnd = c->kv_window;
    v->gf = c->kv_full_groups > 0 ? c->kv_full_groups : 1;
    v->gw = c->kv_window_groups;
    size_t nn = (size_t)(n > 0 ? n : 1);
    const sched_v1 *o = s->share ? s->share->v1 : NULL; /* sched_init_shared */
    if (o && (o->wlo != NULL) != (v->gf > 1 || v->gw > 0))
        s->share = NULL, o = NULL;
    if (o) {
        s->res = s->share->res;
        v->rq = o->rq;
        s->state = s->share->state;
    } else {
        s->res = malloc(nn * sizeof *s->res);
        /* a vmem region unless a test asks for the reference (test_leaps) */
        v->rq = getenv("KVSIM_V1_RQ_WHOLE") ? NULL : vmem_init(&v->rq_mem, nn * sizeof *v->rq);
        if (!v->rq)
            v->rq = calloc(nn, sizeof *v->rq);
        s->state = calloc(nn, sizeof *s->state);
    }
    v->tcap = table_cap(s, v->bs, v->N);
    v->slots = c->max_seqs < n ? c->max_seqs : n;
    if (v->slots < 1)
        v->slots = 1;
    if (!s->res || !v->rq || !s->state || v->tcap > INT64_MAX / 4 / v->slots)
        goto nomem;
    v->run = malloc((size_t)v->slots * sizeof *v->run);
    v->tab = malloc((size_t)(v->slots * v->tcap) * sizeof *v->tab);
    v->free_slots = malloc((size_t)v->slots * sizeof *v->free_slots);
    v->hits = malloc((size_t)v->tcap * sizeof *v->hits);
    v->S_ = calloc((size_t)v->slots, sizeof *v->S_);
    s->members = calloc((size_t)v->slots, sizeof *s->members);
    s->lk_ids = calloc((size_t)v->slots, sizeof *s->lk_ids);
    if (!v->run || !v->tab || !v->free_slots || !v->hits || !v->S_ || !s->members ||
        !s->lk_ids ||
        v1_pool_init(&v->pool, v->N, v->pfx))
        goto nomem;
    v->hc_id = -1;
    v->pool.wh = v->hits;
    if (v->gf > 1 || v->gw > 0) { /* the other groups' pages: a row each per slot */
        v->xcap = (v->gf - 1 + v->gw) * v->tcap;
        if (v->xcap > INT64_MAX / 4 / v->slots)
            goto nomem;
        v->wlo = o ? o->wlo : calloc(nn, sizeof *v->wlo);
        v->ext = o ? o->ext : calloc(nn, sizeof *v->ext);
        v->xtab = calloc((size_t)(v->slots * v->xcap), sizeof *v->xtab);
        if (!v->wlo || !v->ext || !v->xtab)
            goto nomem;
    }
    /* leaps need a group per residue of bs; with more than one KV group a
     * step's pages also change as windows slide, so every step is planned */
    v->lk_x = -1;
    if (v->bs <= V1_LEAP_MAX_BS && !v->xtab && leap_arrays_init(v))
        goto nomem;
    /* for tests: the table as the reference of the saved rows (test_leaps) */
    v->saved_rows = !v->xtab && !getenv("KVSIM_V1_PRIVATE_TABLE");
    v->nslots = v->slots;
    for (int64_t k = 0; k < v->slots; k++)
        v->free_slots[k] = (int32_t)(v->slots - 1 - k);
    v->n_free_slots = v->slots;
    v->pd.rhead = v->pd.rtail = -1;
    if (!o)
        sched_results_reset(s->res, n);
    /* rq set up whole, unless it is an owner's vmem region (entries set up
     * at arrival); a sharer settles its owner's (sched_init_shared) */
    if (o || !v->rq_mem.base)
        v1_rq_settle(s);
    return KVS_OK;
nomem:
    return kvs_errf(err, KVS_ENOMEM, "scheduler: out of memory for %lld requests (V1)",
                    (long long)n);
}

static void v1_free(sched *s)
{
    sched_v1 *v = s->v1;
    if (!s->share) { /* else the owner's (sched_init_shared) */
        free(s->res);
        free(s->state);
    }
    free(s->members);
    free(s->lk_ids);
    if (!v)
        return;
    v1_pool_free(&v->pool);
    if (!s->share) {
        if (v->rq_mem.base)
            vmem_free(&v->rq_mem);
        else
            free(v->rq);
        free(v->wlo);
        free(v->ext);
    }
    if (v->seg_len_owned)
        free(v->seg_len);
    if (!v->chain_borrowed) {
        free(v->chain);
        free(v->seg_end);
    }
    free(v->run);
    free(v->tab);
    free(v->free_slots);
    free(v->hits);
    free(v->lk_start);
    free(v->xtab);
    free(v->lk_ids);
    free(v->lk_tell);
    free(v->lk_each);
    free(v->lk_fin);
    free(v->lk_pos);
    free(v->S_);
    for (int64_t k = 0; k < v->sv_cap; k++)
        free(v->sv[k].blk);
    free(v->sv);
    free(v->sv_free);
    v1_pd_free(v, s->n); /* disaggregated serving: kept blocks */
    free(v);
}

/* Segment ids (rule 2.4).  A trace cut on a fixed grid (px->grid > 0:
 * Mooncake, the native CSV's hash_ids) names S-token segments, S =
 * --segment-tokens: L = min(P, k*S) and block j ending at e has the
 * identity (chain(s), e - s*S), s = floor((e - 1) / S), exactly as the
 * rule says.  A trace whose segments vary (synthetic system prompts and
 * turns, px->grid == 0) is read with its own segment lengths: L = min(P,
 * sum of lengths), s = the segment holding token e - 1 and the identity
 * (chain(s), e - start(s)) — the same rule with the segment starts the
 * trace gives, so ids never claim equal content for tokens they do not
 * name (docs/semantics-v1.md, section 9). */
static int v1_attach_prefixes(sched *s, const req_prefixes *px, kvs_err *err)
{
    sched_v1 *v = s->v1;
    if (v->seg_off)
        return kvs_errf(err, KVS_EINVAL, "scheduler: prefixes attached twice");
    if (!v->pfx || !px || !px->off || px->n != s->n)
        return KVS_OK;
    const sched_v1 *o = s->share ? s->share->v1 : NULL;
    if (o && o->seg_off == px->off && o->chain) { /* the owner's ids and seg_len */
        v->seg_len = o->seg_len;
        v->chain = o->chain;
        v->seg_end = o->seg_end;
        v->chain_borrowed = 1;
        v->seg_off = px->off;
        return KVS_OK;
    }
    if (o && o->seg_len) { /* shared requests: the owner's lengths, rewritten alike */
        v->seg_len = o->seg_len;
    } else {
        v->seg_len = malloc((size_t)(s->n > 0 ? s->n : 1) * sizeof *v->seg_len);
        if (!v->seg_len)
            return kvs_errf(err, KVS_ENOMEM, "scheduler: out of memory for prefix ids");
        v->seg_len_owned = 1;
    }
    int64_t total = px->off[s->n];
    size_t nt = (size_t)(total > 0 ? total : 1);
    v->chain = malloc(nt * sizeof *v->chain);
    if (!v->chain || (px->grid == 0 && !(v->seg_end = malloc(nt * sizeof *v->seg_end))))
        return kvs_errf(err, KVS_ENOMEM, "scheduler: out of memory for prefix ids");
    for (int64_t i = 0; i < s->n; i++) /* min(P, k*S) on a grid */
        v->seg_len[i] = sched_segment_chain(px, i, v->S, s->reqs[i].prompt_tokens, v->chain,
                                            v->seg_end);
    v->seg_off = px->off;
    return KVS_OK;
}

/* The segment of request id holding token e - 1 (e <= seg_len[id]) and its
 * first token.  Cost: O(1) on a grid, O(log segments) otherwise. */
static int64_t segment_of(const sched_v1 *v, int32_t id, int64_t e, int64_t *start)
{
    if (!v->seg_end) {
        int64_t sg = (e - 1) / v->S;
        *start = sg * v->S;
        return sg;
    }
    const int64_t *end = v->seg_end + v->seg_off[id];
    int64_t lo = 0, hi = v->seg_off[id + 1] - v->seg_off[id] - 1;
    while (lo < hi) { /* first segment whose end reaches e */
        int64_t mid = lo + (hi - lo) / 2;
        if (end[mid] >= e)
            hi = mid;
        else
            lo = mid + 1;
    }
    *start = lo > 0 ? end[lo - 1] : 0;
    return lo;
}

/* Identity of block j of request id (rule 2.4). */
static v1_key block_key(const sched_v1 *v, int32_t id, int64_t j)
{
    v1_key k;
    int64_t e = (j + 1) * v->bs;
    if (v->seg_off && e <= v->seg_len[id]) {
        int64_t start, sg = segment_of(v, id, e, &start);
        k.a = v->chain[v->seg_off[id] + sg];
        k.b = (uint64_t)(e - start);
    } else {
        k.a = (uint64_t)id;
        k.b = (uint64_t)j | V1_PRIVATE;
    }
    return k;
}

/* ------------------------------------------------------- saved rows */
/* Save the block table of id, which is being preempted (its slot still
 * held): its private identities become findable by its own lookups
 * (v1_pool_save) and the row is copied to a saved entry, which preempt_at
 * names in rq[id].slot (-2 - index) once free_blocks has given the slot
 * back.  The entry index, or -1 out of memory (pd.oom set; the run then
 * fails).  Only with saved_rows (without other KV groups: their pages go
 * through the table, v1_pool_publish).  O(blocks held). */
static int64_t saved_put(sched_v1 *v, int32_t id)
{
    assert(v->saved_rows && v->rq[id].slot >= 0);
    const int32_t n = v->rq[id].held;
    if (v->n_sv_free == 0) {
        const int64_t old = v->sv_cap, grown = old ? 2 * old : 16;
        struct v1_saved *e = realloc(v->sv, (size_t)grown * sizeof *e);
        if (e)
            v->sv = e;
        int32_t *f = e ? realloc(v->sv_free, (size_t)grown * sizeof *f) : NULL;
        if (!f) {
            v->pd.oom = 1;
            return -1;
        }
        v->sv_free = f;
        for (int64_t k = grown - 1; k >= old; k--) {
            v->sv[k] = (struct v1_saved){NULL, 0, 0, -1};
            v->sv_free[v->n_sv_free++] = (int32_t)k;
        }
        v->sv_cap = grown;
    }
    const int32_t k = v->sv_free[v->n_sv_free - 1];
    struct v1_saved *e = &v->sv[k];
    if (e->cap < n) {
        int32_t *b = realloc(e->blk, (size_t)n * sizeof *b);
        if (!b) {
            v->pd.oom = 1;
            return -1;
        }
        e->blk = b;
        e->cap = n;
    }
    v->n_sv_free--;
    const int32_t *t = table_of(v, id);
    for (int32_t j = (int32_t)v1_shared_blocks(v, id); j < n; j++)
        v1_pool_save(&v->pool, t[j], block_key(v, id, j)); /* no-op but for lazy ones */
    if (n > 0) /* (a row of none has no buffer yet) */
        memcpy(e->blk, t, (size_t)n * sizeof *t);
    e->n = n;
    e->id = id;
    return k;
}

/* id's saved entry goes back (id is being admitted: its lookup's hits are
 * in hand).  O(1). */
static void saved_drop(sched_v1 *v, int32_t id)
{
    const int32_t k = -2 - v->rq[id].slot;
    assert(k >= 0 && k < v->sv_cap && v->sv[k].id == id);
    v->sv[k].id = -1;
    v->sv[k].n = 0;
    v->sv_free[v->n_sv_free++] = k;
    v->rq[id].slot = -1;
}

/* The block registered under identity k = block_key(v, id, j), or 0:
 * private identities through id's saved row (they are nowhere else
 * findable, v1_pool_save), the others through the table.  O(1) expected. */
static int32_t find_block(const sched_v1 *v, int32_t id, int64_t j, v1_key k)
{
    if (!(k.b & V1_PRIVATE) || !v->saved_rows)
        return v1_pool_lookup(&v->pool, k);
    const int32_t slot = v->rq[id].slot;
    if (slot > -2)
        return 0;
    const struct v1_saved *e = &v->sv[-2 - slot];
    const int32_t b = j < e->n ? e->blk[j] : 0;
    return v1_pool_saved_is(&v->pool, b, k) ? b : 0;
}

/* ---------------------------------------------------------------- W */
static void w_insert_after(sched_v1 *v, int32_t after, int32_t id) /* after -1: front */
{
    int32_t nx = after < 0 ? v->whead : v->rq[after].wnext;
    v->rq[id].wprev = after;
    v->rq[id].wnext = nx;
    if (after < 0)
        v->whead = id;
    else
        v->rq[after].wnext = id;
    if (nx < 0)
        v->wtail = id;
    else
        v->rq[nx].wprev = id;
    v->wn++;
}

static void w_remove(sched_v1 *v, int32_t id)
{
    int32_t pv = v->rq[id].wprev, nx = v->rq[id].wnext;
    if (pv < 0)
        v->whead = nx;
    else
        v->rq[pv].wnext = nx;
    if (nx < 0)
        v->wtail = pv;
    else
        v->rq[nx].wprev = pv;
    v->rq[id].wprev = v->rq[id].wnext = -1;
    v->wn--;
}

/* Put id into W: fcfs appends arrivals and puts preempted requests at the
 * front; priority keeps W sorted by (priority, arrival_s, id). */
static void w_put(sched *s, int32_t id, int preempted)
{
    sched_v1 *v = s->v1;
    if (v->fcfs) {
        w_insert_after(v, preempted ? -1 : v->wtail, id);
        return;
    }
    int32_t at = v->wtail;
    while (at >= 0 && key_after(s->reqs, at, id))
        at = v->rq[at].wprev;
    w_insert_after(v, at, id);
}

/* ------------------------------------------------------------ arrival */
/* The most pages a request of po tokens can need at once (rule 1.6 with
 * 2.9): ceil((po - 1) / bs) with one group; with windows, every full group's
 * blocks plus, per window group, at most ceil((w - 1 + q) / bs) + 1 for a
 * chunk of q <= the token budget (and never more than the context's). */
static int64_t pages_peak(const sched_v1 *v, int64_t po)
{
    const int64_t nb = sched_ceil_div(po - 1, v->bs);
    if (!v->xtab)
        return nb;
    int64_t q = v->thr > 0 && v->thr < v->B ? v->thr : v->B;
    int64_t wb = v->wnd ? sched_ceil_div(v->wnd - 1 + q, v->bs) + 1 : nb;
    if (wb > nb)
        wb = nb;
    return v->gf * nb + v->gw * wb;
}

void v1_arrive(sched *s, int64_t id)
{
    if (id >= rq_owner(s)->rq_ready)
        rq_setup(s, id + 1);
    const trace_req *r = &s->reqs[id];
    const sched_config *c = &s->cfg;
    const int64_t po = r->prompt_tokens + r->output_tokens;
    /* rule 1.6 */
    if (po > c->max_model_len || pages_peak(s->v1, po) > c->total_blocks ||
        (!c->chunked_prefill && po - 1 > c->max_batched_tokens)) {
        sched_reject(s, (int32_t)id,
                     po > c->max_model_len ? SCHED_REJECT_CONTEXT
                     : !c->chunked_prefill && po - 1 > c->max_batched_tokens
                         ? SCHED_REJECT_TOKEN_BUDGET
                         : SCHED_REJECT_KV_CAPACITY);
        return;
    }
    s->state[id] = SCHED_REQ_WAITING;
    s->res[id].status = SCHED_REQ_WAITING;
    w_put(s, (int32_t)id, 0);
}

/* ------------------------------------------------------------- blocks */
/* Frees the skipped window pages id still holds, each window group's last
 * first (rule 2.9); they keep their identities in Q. */
static void window_trim(sched_v1 *v, int32_t id, int64_t c, int64_t want)
{
    if (!v->wnd)
        return;
    int64_t lo = window_skip(v, c, want);
    if (lo <= v->wlo[id])
        return;
    int64_t upto = lo < v->rq[id].held ? lo : v->rq[id].held;
    for (int64_t k = v->gf - 1; k < n_other(v); k++) {
        int32_t *x = xrow(v, id, k);
        for (int64_t j = upto - 1; j >= v->wlo[id]; j--)
            if (x[j]) {
                v1_pool_release(&v->pool, x[j]);
                x[j] = 0;
                v->ext[id]--;
            }
    }
    v->wlo[id] = (int32_t)lo;
}

/* Block identity of group k's page j: block_key tagged with the group. */
static v1_key group_key(const sched_v1 *v, int32_t id, int64_t j, int64_t k)
{
    v1_key key = block_key(v, id, j);
    key.a ^= rng_mix64(0x6b76736d67727030ULL + (uint64_t)k);
    return key;
}

/* The first block of id's private region: its blocks from there on carry
 * no identity or only id's private ones, count 1 (only id finds them),
 * and an identity exactly below rq.reg; none is watched unless id's own
 * lookup is (v1_audit checks all that).  Its held count when the region
 * is not known so: other groups (their pages go through M) or private
 * identities in the table (KVSIM_V1_PRIVATE_TABLE). */
int64_t v1_private_from(const sched_v1 *v, int32_t id)
{
    const int64_t held = v->rq[id].held;
    if (!v->saved_rows || (v->hc_id == id && v->pool.wm > 0))
        return held;
    const int64_t se = v1_shared_blocks(v, id);
    return se < held ? se : held;
}

/* Drop every block of id, last to first (rule 2.8), then each other
 * group's pages, last to first, and its slot.  finished: id has ended and
 * will never look its private identities up again, so the blocks that
 * carry only those (or none) go to Q as dead runs, its private region
 * (v1_private_from) without reading them (v1_pool_release_run_rev, then
 * v1_pool_release_dead_rev: the same Q, cheaper). */
static void free_blocks(sched_v1 *v, int32_t id, int finished)
{
    if (v->rq[id].slot >= 0) {
        const int32_t *t = table_of(v, id);
        if (finished) {
            const int64_t pr = v1_private_from(v, id), held = v->rq[id].held;
            const int64_t nid = v->rq[id].reg > pr ? v->rq[id].reg - pr : 0;
            v1_pool_release_run_rev(&v->pool, t + pr, held - pr, nid);
            v1_pool_release_dead_rev(&v->pool, t, pr);
        } else {
            v1_pool_release_rev(&v->pool, t, v->rq[id].held);
        }
        for (int64_t k = 0; v->xtab && k < n_other(v); k++) {
            int32_t *x = xrow(v, id, k);
            for (int64_t j = v->rq[id].held - 1; j >= 0; j--)
                if (x[j]) {
                    v1_pool_release(&v->pool, x[j]);
                    x[j] = 0;
                }
        }
        if (v->xtab)
            v->ext[id] = v->wlo[id] = 0;
        v->free_slots[v->n_free_slots++] = v->rq[id].slot;
        v->rq[id].slot = -1;
    }
    v->rq[id].held = 0;
    v->rq[id].reg = 0;
}

/* Pages the other groups must take from Q to cover blocks [held, want):
 * for a new request's hit blocks j < m, a cached page of the group is
 * reused (costing one only if free), else a fresh one is taken. */
static int64_t groups_need(const sched_v1 *v, int32_t id, int64_t held, int64_t want,
                           int64_t m, int64_t lo)
{
    int64_t need = 0;
    for (int64_t k = 0; k < n_other(v); k++) {
        int64_t j = group_from(v, k, lo);
        if (j < held)
            j = held;
        for (; j < want; j++) {
            int32_t b = j < m ? v1_pool_lookup(&v->pool, group_key(v, id, j, k)) : 0;
            need += !b || v1_pool_count(&v->pool, b) == 0;
        }
    }
    return need;
}

/* The other groups' cached pages for a new request's hit blocks j < m
 * (rule 2.9), held before any fresh page is taken; 0 where none. */
static void groups_hold(sched_v1 *v, int32_t id, int64_t held, int64_t want, int64_t m)
{
    for (int64_t k = 0; k < n_other(v); k++) {
        int32_t *x = xrow(v, id, k);
        int64_t from = group_from(v, k, v->wlo[id]);
        for (int64_t j = from > held ? from : held; j < want; j++) {
            x[j] = j < m ? v1_pool_lookup(&v->pool, group_key(v, id, j, k)) : 0;
            if (x[j]) {
                v1_pool_hold(&v->pool, x[j]);
                v->ext[id]++;
            }
        }
    }
}

/* Fresh pages for the rest of blocks [held, want), group by group, and
 * (prefix caching) the full ones registered from block reg0 on (from the
 * group's first for a new request, whose fresh pages under its hits count
 * as holding the hit's KV). */
static void groups_take(sched_v1 *v, int32_t id, int64_t held, int64_t want, int64_t full,
                        int64_t reg0)
{
    for (int64_t k = 0; k < n_other(v); k++) {
        int32_t *x = xrow(v, id, k);
        int64_t from = group_from(v, k, v->wlo[id]);
        for (int64_t j = from > held ? from : held; j < want; j++)
            if (!x[j]) {
                x[j] = v1_pool_take(&v->pool);
                v->ext[id]++;
            }
        if (!v->pfx)
            continue;
        int64_t j0 = held == 0 ? from : (reg0 > from ? reg0 : from);
        for (int64_t j = j0; j < full; j++)
            if (x[j] && !v1_pool_has_id(&v->pool, x[j]))
                v1_pool_register(&v->pool, x[j], group_key(v, id, j, k));
    }
}

/* A free block table slot, the tables grown (doubled) when none is left:
 * remote requests out of W hold slots beside R's (v1_pd).  -1 out of
 * memory (pd.oom set).  O(1) amortized. */
static int32_t slot_take(sched_v1 *v)
{
    if (v->n_free_slots == 0) {
        const int64_t old = v->nslots, grown = 2 * old;
        if (v->tcap > INT64_MAX / 4 / grown || (v->xtab && v->xcap > INT64_MAX / 4 / grown)) {
            v->pd.oom = 1;
            return -1;
        }
        int32_t *t = realloc(v->tab, (size_t)(grown * v->tcap) * sizeof *t);
        if (t)
            v->tab = t;
        int32_t *f = t ? realloc(v->free_slots, (size_t)grown * sizeof *f) : NULL;
        if (f)
            v->free_slots = f;
        int32_t *x = f && v->xtab ? realloc(v->xtab, (size_t)(grown * v->xcap) * sizeof *x) : NULL;
        if (x) {
            v->xtab = x;
            memset(x + old * v->xcap, 0, (size_t)(old * v->xcap) * sizeof *x);
        }
        if (!t || !f || (v->xtab && !x)) {
            v->pd.oom = 1;
            return -1;
        }
        for (int64_t k = grown - 1; k >= old; k--)
            v->free_slots[v->n_free_slots++] = (int32_t)k;
        v->nslots = grown;
    }
    return v->free_slots[--v->n_free_slots];
}

/* alloc(r, c, q, hits) of rule 2.7 (with 2.9's other groups): 1 on
 * success, 0 if the free queue is too short (then nothing changed but the
 * window pages given back, as vLLM gives them back first).  With defer,
 * no block is registered (a remote request's blocks wait for their KV:
 * its admission registers them, load_start). */
static int v1_alloc(sched_v1 *v, int32_t id, int64_t c, int64_t q, const int32_t *hits,
                    int64_t m, int defer)
{
    const int64_t want = sched_ceil_div(c + q, v->bs);
    const int64_t held = v->rq[id].held;
    const int64_t fresh = want - m - held;
    int64_t need = fresh;
    /* short already: nothing to give back first (no window group), so the
     * answer is known; a blocked waiting head asks at every step */
    if (!v->xtab && need > v->pool.F)
        return 0;
    if (!v->xtab && need + m > v->pool.F) {
        /* the hits that are free count too; only whether they make need
         * exceed F matters.  The watched lookup's are counted by the pool
         * (wfree): a blocked head after a preemption holds hundreds of hits
         * and asks at every step.  Others: stop when need exceeds F, and
         * skip the count when even all of them could not. */
        if (hits == v->pool.wh && m == v->pool.wm) {
            assert(v->pool.wfree >= 0 && v->pool.wfree <= m);
            need += v->pool.wfree;
        } else {
            for (int64_t k = 0; k < m && need <= v->pool.F; k++)
                need += v1_pool_count(&v->pool, hits[k]) == 0;
        }
    }
    if (v->xtab) {
        for (int64_t k = 0; k < m; k++)
            need += v1_pool_count(&v->pool, hits[k]) == 0;
        int64_t lo;
        if (v->rq[id].slot >= 0) {
            window_trim(v, id, c, want);
            lo = v->wlo[id];
        } else { /* a new request: its skipped blocks are never taken */
            lo = window_skip(v, c, want);
        }
        need += groups_need(v, id, held, want, m, lo);
        if (need > v->pool.F)
            return 0;
        v->wlo[id] = (int32_t)lo;
    }
    if (need > v->pool.F)
        return 0;
    if (v->rq[id].slot <= -2) /* preempted: its hits are in hand */
        saved_drop(v, id);
    if (v->rq[id].slot < 0 && (v->rq[id].slot = slot_take(v)) < 0)
        return 0;
    int32_t *t = table_of(v, id);
    for (int64_t k = 0; k < m; k++) {
        v1_pool_hold(&v->pool, hits[k]);
        t[k] = hits[k];
    }
    const int64_t full = defer ? 0 : (c + q) / v->bs, reg0 = v->rq[id].reg;
    if (v->xtab) /* the other groups' hits are touched before fresh pages go */
        groups_hold(v, id, held, want, m);
    if (want > held + m)
        v1_pool_take_n(&v->pool, t + held + m, want - held - m);
    if (v->xtab)
        groups_take(v, id, held, want, full, reg0);
    v->rq[id].held = (int32_t)want;
    if (v->pfx) {
        int64_t j = v->rq[id].reg;
        /* blocks past the prompt's ids carry private identities: only marked */
        const int64_t shared_end = v1_shared_blocks(v, id);
        for (; j < full && j < shared_end; j++)
            v1_pool_register(&v->pool, t[j], block_key(v, id, j));
        for (; j < full; j++)
            v1_pool_register_private(&v->pool, t[j]);
        if (full > v->rq[id].reg)
            v->rq[id].reg = (int32_t)full;
    }
    return 1;
}

/* Leading blocks of id found in M, at most floor((T - 1) / bs) (rule 2.6),
 * into v->hits.  The answer depends on (id, T) and the table only; the pool
 * keeps the last one current as blocks leave M and counts in pool.wepoch
 * the entries of its first missed key, the one change it cannot follow.  So
 * a waiting head that cannot get its blocks is looked up once, not once per
 * step.  O(m), O(1) when reused. */
static int64_t find_hits(sched_v1 *v, int32_t id, int64_t T)
{
    if (!v->pfx)
        return 0;
    v1_pool *p = &v->pool;
    if (id == v->hc_id && T == v->hc_T && p->wepoch == v->hc_epoch)
        return p->wm;
    v1_pool_watch_clear(p);
    const int64_t cap = (T - 1) / v->bs;
    /* with saved rows, the private identities (from v1_shared_blocks on)
     * are found through id's own row alone: read in one pass below */
    const int64_t shared = v->saved_rows ? v1_shared_blocks(v, id) : cap;
    while (p->wm < cap && p->wm < shared) {
        v1_key key = block_key(v, id, p->wm);
        int32_t b = find_block(v, id, p->wm, key);
        if (!b) {
            v1_pool_watch_miss(p, key);
            break;
        }
        v1_pool_watch_hit(p, b);
    }
    if (p->wm >= shared && p->wm < cap) { /* find_block's answers, block by block */
        const int32_t slot = v->rq[id].slot;
        const struct v1_saved *e = slot <= -2 ? &v->sv[-2 - slot] : NULL;
        const int64_t end = e && e->n < cap ? e->n : cap;
        assert(block_key(v, id, p->wm).a == (uint64_t)id &&
               block_key(v, id, p->wm).b == ((uint64_t)p->wm | V1_PRIVATE));
        for (int64_t j = p->wm; e && j < end; j = p->wm) {
            const v1_key key = {(uint64_t)id, (uint64_t)j | V1_PRIVATE}; /* block_key's */
            if (!v1_pool_saved_is(p, e->blk[j], key))
                break;
            v1_pool_watch_hit(p, e->blk[j]);
        }
        if (p->wm < cap)
            v1_pool_watch_miss(p, (v1_key){(uint64_t)id, (uint64_t)p->wm | V1_PRIVATE});
    }
    v->hc_id = id;
    v->hc_T = T;
    v->hc_epoch = p->wepoch;
    return p->wm;
}

/* find_hits without writing v->hits, for sched_cached_prefix_tokens:
 * the request has not been admitted, so T = P. */
int64_t sched_v1_cached_prefix_blocks(const sched *s, int32_t id)
{
    const sched_v1 *v = s->v1;
    if (!v->pfx)
        return 0;
    const int64_t cap = (s->reqs[id].prompt_tokens - 1) / v->bs;
    int64_t m = 0;
    while (m < cap && find_block(v, id, m, block_key(v, id, m)))
        m++;
    return m;
}

/* --------------------------------------------------------- preemption */
/* Index in R of the victim (rule 4.4.3). */
static int64_t victim_index(const sched *s)
{
    const sched_v1 *v = s->v1;
    if (v->fcfs)
        return v->nrun - 1;
    int64_t w = 0;
    for (int64_t i = 1; i < v->nrun; i++)
        if (key_after(s->reqs, v->run[i], v->run[w]))
            w = i;
    return w;
}

/* Preempt R[idx] by recompute (rule 5.1); if it was scheduled in this
 * step, its entry leaves S and its tokens go back to *budget. */
static void preempt_at(sched *s, int64_t idx, int64_t *budget)
{
    sched_v1 *v = s->v1;
    sched_same_set_flush(s); /* R changes */
    v->sa_armed = 0;
    assert(!v->lk_paused); /* a plan writes a paused leap out before it walks R */
    int32_t id = v->run[idx];
    memmove(&v->run[idx], &v->run[idx + 1], (size_t)(v->nrun - idx - 1) * sizeof *v->run);
    v->nrun--;
    if (v->rq[id].sq > 0) {
        for (int64_t k = 0; k < v->ns; k++)
            if (v->S_[k].id == id) {
                *budget += v->S_[k].q;
                memmove(&v->S_[k], &v->S_[k + 1], (size_t)(v->ns - k - 1) * sizeof *v->S_);
                v->ns--;
                break;
            }
        v->rq[id].sq = 0;
    }
    int64_t saved = -1;
    if (v->rq[id].slot >= 0 && v->pfx && v->saved_rows) { /* its private identities */
        saved = saved_put(v, id);                /* become findable by it (v1_pool_save) */
    } else if (v->rq[id].slot >= 0 && v->pfx) { /* other groups: all through the table */
        const int32_t *t = table_of(v, id);
        for (int64_t j = 0; j < v->rq[id].held; j++)
            v1_pool_publish(&v->pool, t[j], block_key(v, id, j));
        for (int64_t k = 0; k < n_other(v); k++) {
            const int32_t *x = xrow(v, id, k);
            for (int64_t j = 0; j < v->rq[id].held; j++)
                if (x[j])
                    v1_pool_publish(&v->pool, x[j], group_key(v, id, j, k));
        }
    }
    free_blocks(v, id, 0);
    if (saved >= 0)
        v->rq[id].slot = (int32_t)(-2 - saved);
    v->rq[id].C = 0;
    s->res[id].preemptions++;
    s->step.n_preempted++;
    s->ctr.preempt_recompute++;
    s->state[id] = SCHED_REQ_WAITING;
    s->res[id].status = SCHED_REQ_WAITING;
    w_put(s, id, 1);
}

static void schedule(sched_v1 *v, int32_t id, int64_t q, int64_t c)
{
    v1_sched_ent *e = &v->S_[v->ns++];
    e->id = id;
    e->q = q;
    e->c = c;
    e->kind = SCHED_MEMBER_PREFILL;
    assert(q >= 0 && q <= INT32_MAX);
    v->rq[id].sq = (int32_t)q;
}

/* ------------------------------------------------------------ a step */
/* Rule 4.4; returns 1 if anyone was preempted. */
static int running_walk(sched *s, int64_t *b)
{
    sched_v1 *v = s->v1;
    const int64_t bs = v->bs;
    const int wnd = v->wnd != 0, pfx = v->pfx;
    int preempted = 0;
    int64_t i = 0, budget = *b; /* *b kept in a register; written back before
                                   anything that reads it */
    while (i < v->nrun && budget > 0) {
        const int32_t id = v->run[i];
        struct v1_req *rq = &v->rq[id];
        const int64_t C = rq->C;
        const int64_t q = v1_chunk(v, id, C, budget);
        if (wnd) /* rule 2.9, every step */
            window_trim(v, id, C, rq->held);
        /* the common case: the tokens fit the blocks held and fill none
         * (v1_alloc would take and register nothing) */
        const int64_t end = C + q;
        if (end <= rq->held * bs && (!pfx || end < (rq->reg + 1) * bs)) {
            schedule(v, id, q, C);
            budget -= q;
            i++;
            continue;
        }
        for (;;) {
            if (v1_alloc(v, id, C, q, NULL, 0, 0)) {
                schedule(v, id, q, C);
                budget -= q;
                i++;
                break;
            }
            int64_t w = victim_index(s);
            preempted = 1;
            *b = budget;
            preempt_at(s, w, b);
            budget = *b;
            if (w == i)
                return 1; /* r itself: the walk ends (*b is current) */
            if (w < i)
                i--;
        }
    }
    *b = budget;
    return preempted;
}

/* A lookup of T tokens that found m blocks, in the prefix counters. */
static void count_lookup(sched *s, int64_t T, int64_t m)
{
    const int64_t bs = s->v1->bs;
    s->ctr.prefix_query_tokens += T;
    s->ctr.prefix_hit_tokens += m * bs;
    s->ctr.prefix_saved_tokens += m * bs;
    s->ctr.prefix_query_blocks += (T - 1) / bs;
    s->ctr.prefix_hit_blocks += m;
}

/* Remote request id (PENDING, W's request the walk reached) gets blocks
 * for its T = P + 1 tokens, its leading cached blocks held as any
 * admission's, none registered; its load of the other tokens begins at the
 * step's start and it leaves W.  1, or 0 if the free queue is too short
 * (nothing changed).  docs/cluster.md D4.  O(its blocks). */
static int load_start(sched *s, int32_t id)
{
    sched_v1 *v = s->v1;
    const int64_t P = v->rq[id].P, T = P + 1;
    const int64_t m = find_hits(v, id, T);
    v->rq[id].reg = (int32_t)m; /* the hits are registered; the rest at admission */
    if (!v1_alloc(v, id, m * v->bs, T - m * v->bs, v->hits, m, 1)) {
        v->rq[id].reg = 0;
        return 0;
    }
    if (v->pfx)
        count_lookup(s, T, m);
    w_remove(v, id);
    v->pd.load[id] = V1_LOAD_FLIGHT;
    v->pd.aside++;
    v1_pd_started(v, id, P - m * v->bs, v->walk_t);
    return 1;
}

/* Admit the ready FIFO's requests (their KV arrived, sched_kv_loaded)
 * while R has room and the budget lasts: each decodes its first token over
 * its P stored ones, in the blocks it holds (load_start took them).  0, or
 * -1 when R is full (the walk ends).  O(admitted). */
static int admit_ready(sched *s, int64_t *b)
{
    sched_v1 *v = s->v1;
    while (v->pd.nready > 0 && *b > 0) {
        if (v->nrun >= s->cfg.max_seqs) {
            s->step.limit = SCHED_LIMIT_MAX_SEQS;
            return -1;
        }
        int32_t id = v1_pd_ready_pop(v);
        const int64_t c = v->rq[id].C;
        assert(c == v->rq[id].P && v->rq[id].g == 1);
        int ok = v1_alloc(v, id, c, 1, NULL, 0, 0); /* registers; takes no block */
        assert(ok);
        (void)ok;
        v->pd.load[id] = V1_LOAD_NONE;
        v->pd.aside--;
        v->run[v->nrun++] = id;
        s->state[id] = SCHED_REQ_RUNNING;
        s->res[id].status = SCHED_REQ_RUNNING;
        schedule(v, id, 1, c);
        *b -= 1;
    }
    return 0;
}

/* Rule 4.5 (with D4's remote requests: the ready ones first, and a
 * pending one starts its load where the walk reaches it). */
void v1_waiting_walk(sched *s, int64_t *b)
{
    sched_v1 *v = s->v1;
    const int chunked = s->cfg.chunked_prefill;
    if (v->pd.nready > 0 && admit_ready(s, b))
        return;
    int32_t id = v->whead;
    int skipped = 0; /* a prompt over the budget kept its place */
    while (id >= 0 && *b > 0) {
        if (v->nrun >= s->cfg.max_seqs) {
            s->step.limit = SCHED_LIMIT_MAX_SEQS;
            return;
        }
        int32_t next = v->rq[id].wnext;
        if (v->pd.load && v->pd.load[id] == V1_LOAD_PENDING) {
            if (!load_start(s, id)) {
                s->step.limit = SCHED_LIMIT_KV;
                return;
            }
            id = next;
            continue;
        }
        const int64_t T = (int64_t)v->rq[id].P + v->rq[id].g;
        const int64_t m = find_hits(v, id, T);
        const int64_t c = m * v->bs;
        assert(v->rq[id].C == 0);
        int64_t q = T - c;
        if (v->thr > 0 && v->thr < q)
            q = v->thr;
        if (!chunked && q > *b) {
            id = next; /* skipped: keeps its place */
            skipped = 1;
            continue;
        }
        if (q > *b)
            q = *b;
        v->rq[id].reg = (int32_t)m;
        if (!v1_alloc(v, id, c, q, v->hits, m, 0)) {
            v->rq[id].reg = 0;
            s->step.limit = SCHED_LIMIT_KV;
            return;
        }
        w_remove(v, id);
        v->run[v->nrun++] = id;
        v->rq[id].C = c;
        s->state[id] = SCHED_REQ_RUNNING;
        s->res[id].status = SCHED_REQ_RUNNING;
        schedule(v, id, q, c);
        *b -= q;
        if (v->pfx)
            count_lookup(s, T, m);
        id = next;
    }
    if (skipped || id >= 0)
        s->step.limit = SCHED_LIMIT_TOKEN_BUDGET;
}

int v1_leap_ready(const sched_v1 *v) { return v->emit_ready; }

int v1_alloc_running(sched_v1 *v, int32_t id, int64_t c, int64_t q)
{
    return v1_alloc(v, id, c, q, NULL, 0, 0);
}

static int v1_plan(sched *s, double now, int more_arrivals, double *t_end)
{
    (void)more_arrivals;
    sched_v1 *v = s->v1;
    if (v->lk_paused && v1_leap_resume(s, now, t_end))
        return SCHED_PLAN_STEP;
    if (!v->lk_paused)
        v1_rq_release(s);
    int32_t carry = 0; /* preemptions of iterations that scheduled nothing */
    for (;;) {
        memset(&s->step, 0, sizeof s->step);
        s->step.n_preempted = carry;
        s->n_members = 0;
        v->ns = 0;
        if (v->nrun == 0 && v->wn == 0 && v->pd.nready == 0)
            return SCHED_PLAN_IDLE;
        int64_t b = v->B;
        v->walk_t = now;
        int preempted = running_walk(s, &b);
        if (!preempted)
            v1_waiting_walk(s, &b);
        else if (v->wn > 0)
            s->step.limit = SCHED_LIMIT_KV;
        if (v->pd.oom) {
            snprintf(s->errmsg, sizeof s->errmsg,
                     "out of memory growing the V1 block tables at t=%.6f s", now);
            return SCHED_PLAN_STUCK;
        }
        if (v->ns > 0)
            break;
        if (!preempted && (v->pd.kept_reqs > 0 || v->pd.aside > 0))
            return SCHED_PLAN_IDLE; /* kept blocks come back at their release, loads
                                       at their end (sched_kv_loaded) */
        if (!preempted) {
            snprintf(s->errmsg, sizeof s->errmsg,
                     "stuck at t=%.6f s: the V1 step scheduled nothing and preempted nobody "
                     "(a kvsim bug)", now);
            return SCHED_PLAN_STUCK;
        }
        carry = s->step.n_preempted; /* 4.6: no time passes, iterate again */
    }
    *t_end = now + v1_emit_step(s, now);
    if (v->lk_start && (!s->want_members || s->leap_fn) &&
        v->ns == v->nrun && *t_end < v1_leap_horizon(s) &&
        v1_leap_ready(v))
        *t_end = v1_leap(s, *t_end), v->sa_armed = 0;
    return SCHED_PLAN_STEP;
}

/* Rule 6.1: the step's features and members from S, its cost, and the step
 * record to the sink (s->step zeroed but for n_preempted).  Returns its
 * duration. */
double v1_emit_step(sched *s, double now)
{
    sched_v1 *v = s->v1;
    cost_batch *cb = &s->step.batch;
    int ready = 1; /* v1_leap_ready */
    for (int64_t k = 0; k < v->ns; k++) {
        v1_sched_ent *e = &v->S_[k];
        const int64_t g = v->rq[e->id].g;
        const int64_t T = (int64_t)v->rq[e->id].P + g;
        if (e->c + e->q != T && (k < v->ns - 1 || e->c + e->q > T))
            ready = 0;
        if (g >= 1 && e->c == T - 1) {
            e->kind = SCHED_MEMBER_DECODE;
            cb->tokens += 1;
            cb->kv_read += e->c + 1;
            cb->n_decode++;
            if (s->want_members)
                sched_add_member(s, e->id, SCHED_MEMBER_DECODE, 1, e->c + 1);
        } else {
            e->kind = SCHED_MEMBER_PREFILL;
            v1_batch_add_chunk(s, cb, e->id, e->q, e->c);
        }
    }
    v->emit_ready = ready;
    s->step.kind = v1_step_kind(cb);
    double d;
    if (cb->n_prefill == 0 && v->lk_start) { /* priced as a leap's, whose terms a leap
                                                 that follows reuses */
        d = cost_run_s(cost_run_get(&v->lk_runs, s->cost, cb), cb->kv_read);
    } else {
        d = cost_step_s(s->cost, cb);
    }
    sched_step *st = &s->step;
    v1_step_stamp(s, d, now);
    v->active = 1;
    /* all decodes of R: each made a token at the end of the last step, if
     * that one was all decodes of the same R (docs/semantics.md 7) */
    const int all = s->leap_fn && cb->n_prefill == 0 && v->ns == v->nrun &&
                    st->n_preempted == 0;
    const int same = all && v->sa_armed && v->sa_n == v->nrun;
    st->leapt = same;
    if (same) {
        if (s->lk_steps == 0) { /* a stretch starts: S is its set */
            for (int64_t k = 0; k < v->ns; k++)
                s->lk_ids[k] = v->S_[k].id;
            s->lk_n = v->ns;
        }
        s->lk_steps++;
    } else {
        sched_same_set_flush(s); /* members follow: their tokens first */
    }
    v->sa_armed = all;
    v->sa_n = v->nrun;
    if (s->sink)
        s->sink(s->sink_ctx, st, s->members, same ? 0 : s->n_members);
    return d;
}

/* Rule 4.7: store the step's tokens, generate, finish (freeing in S's
 * order), then drop the finished from R keeping its order. */
static void v1_finish(sched *s, double t)
{
    sched_v1 *v = s->v1;
    if (v->lk_paused) { /* a paused leap's last step: nobody finishes, its
                           tokens are counted in the leap (leap_steps) */
        v->ns = 0;
        v->active = 0;
        return;
    }
    int any = 0;
    for (int64_t k = 0; k < v->ns; k++) {
        const v1_sched_ent *e = &v->S_[k];
        const int32_t id = e->id;
        struct v1_req *rq = &v->rq[id];
        rq->sq = 0;
        rq->C = (int32_t)(e->c + e->q);
        if (rq->C != rq->P + rq->g)
            continue;
        if (++rq->g == 1)
            s->res[id].first_token_s = t;
        if (rq->g == rq->O) {
            v1_req_finished(s, id, t);
            if (!any) { /* R changes; its last tokens may have come in a stretch */
                sched_same_set_flush(s);
                v->sa_armed = 0;
            }
            any = 1;
        }
    }
    v->ns = 0;
    v->active = 0;
    if (any)
        v1_run_drop_finished(v);
}

void v1_req_finished(sched *s, int32_t id, double t)
{
    sched_v1 *v = s->v1;
    assert(v->rq[id].g == v->rq[id].O);
    s->res[id].finish_s = t;
    s->res[id].status = SCHED_REQ_FINISHED;
    s->state[id] = SCHED_REQ_FINISHED;
    s->ctr.n_finished++;
    if (!v->pd.keep || v1_pd_keep(v, id)) /* kept: sched_keep_finished */
        free_blocks(v, id, 1);
}

void v1_run_drop_finished(sched_v1 *v)
{
    int64_t out = 0;
    for (int64_t i = 0; i < v->nrun; i++) /* finished: g = O (its line is hot) */
        if (v->rq[v->run[i]].g < v->rq[v->run[i]].O)
            v->run[out++] = v->run[i];
    v->nrun = out;
}

static int64_t v1_used_blocks(const sched *s) { return s->v1->N - s->v1->pool.F; }

static void v1_counters(const sched *s, sched_counters *out)
{
    const sched_v1 *v = s->v1;
    *out = s->ctr;
    out->free_blocks = v->pool.F;
    out->used_blocks = v1_used_blocks(s);
    out->swapped_blocks = 0;
    out->n_waiting = v1_n_waiting(v);
    out->n_running = v->nrun;
    out->n_swapped = 0;
    out->cached_blocks = v->pool.cached;
    out->prefix_evictions = v->pool.evictions;
}

const sched_engine_vt sched_engine_v1 = {
    "vllm-v1", v1_init,   v1_free,     v1_attach_prefixes, v1_arrive,
    v1_plan,   v1_finish, v1_counters, v1_used_blocks, v1_audit,
};
