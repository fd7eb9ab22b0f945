/* sglang.c — SGLang's scheduler (docs/semantics-sglang.md, SGLang v0.5.18).
 *
 * Each plan is one iteration of SGLang's loop: stash the chunked request's
 * stored tokens, fold the last extend batch into the running batch R, try
 * to form an extend batch (sglang_admit.c), and failing that prepare a
 * decode step of all of R, retracting requests when the pool cannot give
 * each a slot.  Prefill and decode never share a step.  The KV pool is
 * counted in token slots (page size 1): free (F), held by the radix tree
 * (radix.c; evictable or locked) or held privately by a request.
 *
 * With the overlap scheduler (cfg.overlap, SGLang's default) the decision
 * for the step after next is taken when a step starts, before the
 * results of the step starting are known (section 9): the plan launches
 * the step decided last time and decides the next one against that stale
 * state; results are applied when each step ends, skipping members that
 * finished or were retracted meanwhile.
 *
 * Per-request state is a flat array; a step costs O(|R| + batch), a
 * retraction O(|R| log |R|).  With a leap sink and a horizon, a run of
 * decode steps that admission cannot interrupt (nothing waits and no
 * arrival comes, or R's full flag keeps admission shut) is leapt
 * (sgl_leap): planned in O(1) a step until someone finishes, the pool
 * runs short or an arrival may be admitted (section 16 of the doc).
 */
#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sglang_internal.h"

#define RETRACT_STEPS 20 /* SGLANG_RETRACT_DECODE_STEPS */

int sched_sgl_config_check(const sched_config *c, kvs_err *err)
{
    const char *eng = "not available under --engine sglang";
    if ((unsigned)c->batching > SCHED_BATCHING_STATIC || (unsigned)c->policy > SCHED_POLICY_LPM ||
        (unsigned)c->alloc > SCHED_ALLOC_RESERVED_ORACLE || (unsigned)c->preemption > SCHED_PREEMPT_OFF)
        return kvs_errf(err, KVS_EINVAL, "scheduler: unknown enum value in config");
    if (c->batching != SCHED_BATCHING_CONTINUOUS)
        return kvs_errf(err, KVS_EINVAL, "--batching static: %s", eng);
    if (c->policy == SCHED_POLICY_PRIORITY)
        return kvs_errf(err, KVS_EINVAL, "--policy priority: %s (kvsim models SGLang's fcfs "
                        "and lpm)", eng);
    if (c->policy == SCHED_POLICY_LPM && !c->prefix_caching)
        return kvs_errf(err, KVS_EINVAL, "--policy lpm: needs the radix cache (--prefix-caching; "
                        "without it SGLang runs fcfs)");
    if (c->alloc != SCHED_ALLOC_PAGED)
        return kvs_errf(err, KVS_EINVAL, "--alloc %s: %s (SGLang allocates token slots as "
                        "tokens are stored)", sched_alloc_name(c->alloc), eng);
    if (c->preemption != SCHED_PREEMPT_RECOMPUTE || c->priority_preemption)
        return kvs_errf(err, KVS_EINVAL, "--preemption/--priority-preemption: %s (SGLang "
                        "retracts decodes and recomputes them)", eng);
    if (c->block_size != 1)
        return kvs_errf(err, KVS_EINVAL, "--block-size %lld: %s but 1 (SGLang's token slots, "
                        "page size 1)", (long long)c->block_size, eng);
    if (c->long_prefill_threshold != 0)
        return kvs_errf(err, KVS_EINVAL, "--long-prefill-threshold: %s", eng);
    if (c->batch_timeout_s != 0.0)
        return kvs_errf(err, KVS_EINVAL, "--batch-timeout: %s", eng);
    if (c->kv_window > 0)
        return kvs_errf(err, KVS_EINVAL, "sliding-window KV groups: %s", eng);
    if (c->chunked_prefill != 0 && c->chunked_prefill != 1)
        return kvs_errf(err, KVS_EINVAL, "scheduler: chunked_prefill is 0 or 1");
    if (c->max_prefill_tokens < 0)
        return kvs_errf(err, KVS_EINVAL, "--max-prefill-tokens: must be >= 1");
    if (!(c->conservativeness >= 0.0) || !isfinite(c->conservativeness))
        return kvs_errf(err, KVS_EINVAL, "--schedule-conservativeness: must be > 0");
    if (c->overlap != 0 && c->overlap != 1)
        return kvs_errf(err, KVS_EINVAL, "scheduler: overlap is 0 or 1");
    if (c->total_blocks < 4)
        return kvs_errf(err, KVS_EINVAL, "--kv-blocks: %lld token slots; SGLang needs at least 4",
                        (long long)c->total_blocks);
    return KVS_OK;
}

int64_t sched_sglang_max_running(int64_t given, int64_t slots, int64_t context)
{
    int64_t half = slots / 2, m;
    if (given > 0) {
        m = given < half ? given : half;
    } else {
        double x = floor((double)slots / (double)(context > 0 ? context : 1) * 512.0);
        m = x < 2048 ? 2048 : x > 4096 ? 4096 : (int64_t)x;
        m = m < half ? m : half;
    }
    return m > 0 ? m : 1;
}

/* ------------------------------------------------------ token identities */
/* Section 6.1: token p of request r is (chain of its segment ids up to the
 * one holding p, offset in it) while p < L_r, else (r, p) alone. */
static int64_t sgl_ident(void *ctx, int32_t r, int64_t p, radix_ident *id)
{
    const sched *s = ctx;
    const sched_sgl *v = s->sgl;
    if (v->seg_off && p < v->L[r]) {
        int64_t k, start, end;
        if (!v->seg_end) {
            k = p / v->S;
            start = k * v->S;
            end = start + v->S;
        } else {
            const int64_t *se = v->seg_end + v->seg_off[r];
            int64_t lo = 0, hi = v->seg_off[r + 1] - v->seg_off[r] - 1;
            while (lo < hi) { /* first segment ending after p */
                int64_t mid = lo + (hi - lo) / 2;
                if (se[mid] > p)
                    hi = mid;
                else
                    lo = mid + 1;
            }
            k = lo;
            start = k > 0 ? se[k - 1] : 0;
            end = se[k];
        }
        id->kind = 0;
        id->tag = v->chain[v->seg_off[r] + k];
        id->pos = p - start;
        return (end < v->L[r] ? end : v->L[r]) - p;
    }
    id->kind = 1;
    id->tag = (uint64_t)r;
    id->pos = p;
    return INT64_MAX / 4;
}

static int sgl_attach_prefixes(sched *s, const req_prefixes *px, kvs_err *err)
{
    sched_sgl *v = s->sgl;
    if (!v->tree || !px || !px->off || px->n != s->n)
        return KVS_OK; /* no radix cache or no shared tokens: identities are (r, p) */
    if (v->seg_off)
        return kvs_errf(err, KVS_EINVAL, "scheduler: prefixes attached twice");
    int64_t total = px->off[s->n];
    size_t nt = (size_t)(total > 0 ? total : 1), nn = (size_t)(s->n > 0 ? s->n : 1);
    v->chain = malloc(nt * sizeof *v->chain);
    v->L = malloc(nn * sizeof *v->L);
    if (!v->chain || !v->L ||
        (px->grid == 0 && !(v->seg_end = malloc(nt * sizeof *v->seg_end))))
        return kvs_errf(err, KVS_ENOMEM, "scheduler: out of memory for prefix ids");
    for (int64_t i = 0; i < s->n; i++)
        v->L[i] = sched_segment_chain(px, i, v->S, s->reqs[i].prompt_tokens, v->chain,
                                      v->seg_end);
    v->seg_off = px->off;
    return KVS_OK;
}

/* ------------------------------------------------------------ lifecycle */
static int batch_init(sgl_batch *b, int64_t cap)
{
    b->id = malloc((size_t)cap * sizeof *b->id);
    b->gen = malloc((size_t)cap * sizeof *b->gen);
    b->tok = malloc((size_t)cap * sizeof *b->tok);
    b->mem = malloc((size_t)cap * sizeof *b->mem);
    return b->id && b->gen && b->tok && b->mem ? 0 : -1;
}

static void batch_free(sgl_batch *b)
{
    free(b->id);
    free(b->gen);
    free(b->tok);
    free(b->mem);
}

static int sgl_init(sched *s, kvs_err *err)
{
    const sched_config *c = &s->cfg;
    size_t nn = (size_t)(s->n > 0 ? s->n : 1);
    sched_sgl *v = calloc(1, sizeof *v);
    if (!v)
        return kvs_errf(err, KVS_ENOMEM, "scheduler: out of memory");
    s->sgl = v;
    v->N = v->F = c->total_blocks;
    v->C = c->chunked_prefill ? c->max_batched_tokens : 0;
    v->B = c->max_prefill_tokens > 0 ? c->max_prefill_tokens : 16384;
    v->M = c->max_seqs;
    v->radix_on = c->prefix_caching;
    v->lpm = c->policy == SCHED_POLICY_LPM;
    v->overlap = c->overlap;
    v->S = c->segment_tokens > 0 ? c->segment_tokens : 512;
    const double cons = c->conservativeness > 0 ? c->conservativeness : 1.0;
    v->rho0 = fmin(0.7 * cons, 1.0);
    v->rho_min = fmin(v->rho0 * 0.14, 1.0);
    v->delta = (v->rho0 - v->rho_min) / 600.0;
    v->rho = v->rho0;
    v->K = -1;
    v->cap = (v->M < s->n ? v->M : s->n) + 1;
    s->res = malloc(nn * sizeof *s->res);
    s->state = calloc(nn, sizeof *s->state);
    s->members = NULL;
    v->rq = calloc(nn, sizeof *v->rq);
    v->W = malloc(nn * sizeof *v->W);
    v->R = malloc((size_t)v->cap * sizeof *v->R);
    v->scratch = malloc((size_t)v->cap * sizeof *v->scratch);
    v->cl_left = malloc((size_t)(v->cap + 1) * sizeof *v->cl_left);
    v->cl_held = malloc((size_t)(v->cap + 1) * sizeof *v->cl_held);
    v->lpm_key = malloc((LPM_MAX + 1) * sizeof *v->lpm_key);
    v->lpm_dep = malloc((LPM_MAX + 1) * sizeof *v->lpm_dep);
    v->lpm_ids = malloc((LPM_MAX + 1) * sizeof *v->lpm_ids);
    s->lk_ids = malloc((size_t)v->cap * sizeof *s->lk_ids);
    if (!s->res || !s->state || !v->rq || !v->W || !v->R || !v->scratch || !v->cl_left ||
        !v->cl_held || !v->lpm_key || !v->lpm_dep || !v->lpm_ids || !s->lk_ids ||
        batch_init(&v->buf[0], v->cap) || batch_init(&v->buf[1], v->cap))
        return kvs_errf(err, KVS_ENOMEM, "scheduler: out of memory for %lld requests (sglang)",
                        (long long)s->n);
    if (v->radix_on) {
        int rc = radix_init(&v->tree, sgl_ident, s, err);
        if (rc)
            return rc;
    }
    sched_results_reset(s->res, s->n);
    return KVS_OK;
}

static void sgl_free(sched *s)
{
    sched_sgl *v = s->sgl;
    free(s->res);
    free(s->state);
    free(s->lk_ids);
    if (!v)
        return;
    radix_free(v->tree);
    free(v->rq);
    free(v->W);
    free(v->R);
    free(v->scratch);
    free(v->cl_left);
    free(v->cl_held);
    free(v->lpm_key);
    free(v->lpm_dep);
    free(v->lpm_ids);
    free(v->chain);
    free(v->seg_end);
    free(v->L);
    batch_free(&v->buf[0]);
    batch_free(&v->buf[1]);
    free(v);
}

void sgl_set_state(sched *s, int32_t id, int st)
{
    static const int32_t map[] = {SCHED_REQ_PENDING, SCHED_REQ_WAITING, SCHED_REQ_RUNNING,
                                  SCHED_REQ_RUNNING, SCHED_REQ_FINISHED, SCHED_REQ_REJECTED};
    s->sgl->rq[id].st = (int8_t)st;
    s->state[id] = (uint8_t)map[st];
    if (st != SGL_FINISHED && st != SGL_REJECTED)
        s->res[id].status = (uint8_t)map[st];
}

static void w_push(sched_sgl *v, int32_t id, int64_t n)
{
    if (v->wh + v->nw >= n) { /* at the array's end: move W to its start */
        memmove(v->W, v->W + v->wh, (size_t)v->nw * sizeof *v->W);
        v->wh = 0;
    }
    v->W[v->wh + v->nw++] = id;
}

/* Section 3: what SGLang rejects or would clip (kvsim rejects both, as it
 * always generates O tokens): P >= context or P + O > context (front end),
 * P >= Lmax - 5 (aborted), O above min(Lmax - P - 1, N - P - 2) (clipped),
 * with Lmax = min(context - 1, N - 1).  A bound set by the context is
 * "context", one set by the pool "kv-capacity". */
static void sgl_arrive(sched *s, int64_t id)
{
    sched_sgl *v = s->sgl;
    const trace_req *r = &s->reqs[id];
    const int64_t P = r->prompt_tokens, O = r->output_tokens, ctx = s->cfg.max_model_len;
    const int by_ctx = P >= ctx - 6 || P + O > ctx - 2;
    const int by_kv = P >= v->N - 6 || O > v->N - P - 2;
    if (by_ctx || by_kv) {
        sched_reject(s, (int32_t)id, by_ctx ? SCHED_REJECT_CONTEXT : SCHED_REJECT_KV_CAPACITY);
        v->rq[id].st = SGL_REJECTED;
        return;
    }
    sgl_set_state(s, (int32_t)id, SGL_WAITING);
    w_push(v, (int32_t)id, s->n);
}

/* ------------------------------------------------------ slots and tree */
int64_t sgl_evictable(const sched_sgl *v) { return v->tree ? radix_evictable(v->tree) : 0; }

/* Evict the tree's shortfall against `want` free slots (evict_from_tree_cache). */
static void evict_to(sched_sgl *v, int64_t want)
{
    if (v->tree && want > v->F)
        v->F += radix_evict(v->tree, want - v->F);
}

void sgl_alloc(sched *s, int64_t need)
{
    sched_sgl *v = s->sgl;
    evict_to(v, need);
    assert(v->F >= need); /* admission and the decode check rule a shortage out */
    v->F -= need;
}

int64_t sgl_lookup(sched *s, int32_t id, int64_t len, int32_t *node)
{
    sched_sgl *v = s->sgl;
    *node = RADIX_ROOT;
    if (len <= 0)
        return 0;
    int64_t m = radix_match(v->tree, id, len, node);
    if (m < 0) { /* out of memory splitting a node: no match, the run fails at the plan */
        *node = RADIX_ROOT;
        snprintf(s->errmsg, sizeof s->errmsg, "out of memory in the radix cache");
        return 0;
    }
    return m;
}

/* Put request id's first len tokens in the tree (6.7): free its slots that
 * duplicate tokens already there beyond its own prefix; with relock, look
 * them up again and move its lock to their end (the prefix is then len). */
static void tree_put(sched *s, int32_t id, int64_t len, int relock)
{
    sched_sgl *v = s->sgl;
    sgl_req *q = &v->rq[id];
    int64_t dup = radix_insert(v->tree, id, len, NULL);
    if (dup < 0) {
        snprintf(s->errmsg, sizeof s->errmsg, "out of memory in the radix cache");
        return;
    }
    assert(dup >= q->m && len <= q->c);
    v->F += dup - q->m;
    if (relock) {
        int32_t node;
        int64_t m2 = sgl_lookup(s, id, len, &node);
        assert(m2 == len);
        radix_lock(v->tree, node);
        radix_unlock(v->tree, q->node);
        q->node = node;
        q->m = m2;
    } else {
        radix_unlock(v->tree, q->node);
        q->node = RADIX_ROOT;
        q->m = q->c = 0; /* all its slots are the tree's now */
    }
}

/* A request finishes (4.4): its KV goes to the tree, or is freed. */
static void release_finished(sched *s, int32_t id)
{
    sched_sgl *v = s->sgl;
    sgl_req *q = &v->rq[id];
    if (v->tree) {
        tree_put(s, id, q->c, 0);
    } else {
        v->F += q->c;
        q->c = q->m = 0;
    }
    v->nholders--;
}

/* A victim of retraction (6.7.5, 7.4.3): its own slots are freed, its prefix
 * stays in the tree unlocked; then the tree evicts the shortfall against 20
 * slots for each request still ranked. */
static void release_retracted(sched *s, int32_t id, int64_t ranked)
{
    sched_sgl *v = s->sgl;
    sgl_req *q = &v->rq[id];
    v->F += v->tree ? q->c - q->m : q->c; /* the chunk cache's prefix is its own */
    if (v->tree) {
        radix_unlock(v->tree, q->node);
        evict_to(v, RETRACT_STEPS * ranked);
    }
    q->node = RADIX_ROOT;
    q->c = q->m = 0;
    q->gen++;
    v->nholders--;
    s->res[id].preemptions++;
    s->ctr.preempt_recompute++;
    sgl_set_state(s, id, SGL_WAITING);
}

/* ------------------------------------------------------------ batches */
void sgl_batch_add(sgl_batch *b, const sched_sgl *v, int32_t id, int64_t q, int flags)
{
    int64_t i = b->n++;
    const int64_t c = v->rq[id].c;
    b->id[i] = id;
    b->gen[i] = v->rq[id].gen;
    b->tok[i] = (uint8_t)flags;
    b->mem[i] = (sched_member){id, b->kind == SGL_BATCH_DECODE ? SCHED_MEMBER_DECODE
                                                                : SCHED_MEMBER_PREFILL, q, c + q};
}

/* x becomes a copy of b's members (its record aside).  O(b->n). */
static void batch_copy(sgl_batch *x, const sgl_batch *b)
{
    memcpy(x->id, b->id, (size_t)b->n * sizeof *b->id);
    memcpy(x->gen, b->gen, (size_t)b->n * sizeof *b->gen);
    memcpy(x->tok, b->tok, (size_t)b->n * sizeof *b->tok);
    memcpy(x->mem, b->mem, (size_t)b->n * sizeof *b->mem);
    x->kind = b->kind;
    x->n = b->n;
}

/* Rank for retraction (7.4.1): (g, -P) descending, stable over R's order. */
static int rank_before(const sched *s, int32_t a, int32_t b)
{
    const sched_sgl *v = s->sgl;
    if (v->rq[a].g != v->rq[b].g)
        return v->rq[a].g > v->rq[b].g;
    return s->reqs[a].prompt_tokens < s->reqs[b].prompt_tokens;
}

static void rank_R(sched *s)
{
    sched_sgl *v = s->sgl;
    int32_t *x = v->scratch;
    memcpy(x, v->R, (size_t)v->nR * sizeof *x);
    for (int64_t i = 1; i < v->nR; i++) { /* insertion sort: stable */
        int32_t id = x[i];
        int64_t j = i;
        while (j > 0 && rank_before(s, id, x[j - 1])) {
            x[j] = x[j - 1];
            j--;
        }
        x[j] = id;
    }
}

/* 7.2's check for k requests: evict the shortfall, pass if F >= k. */
static int decode_fits(sched_sgl *v, int64_t k)
{
    evict_to(v, k);
    return v->F >= k;
}

/* 7.4-7.5: retract from the end of the ranking until the rest fit. */
static int retract(sched *s)
{
    sched_sgl *v = s->sgl;
    rank_R(s);
    int64_t k = v->nR;
    do {
        if (k == 1) {
            snprintf(s->errmsg, sizeof s->errmsg, "the last running request cannot get a "
                     "token slot (a kvsim bug: the arrival clamp rules this out)");
            return -1;
        }
        int32_t victim = v->scratch[--k];
        release_retracted(s, victim, k);
        w_push(v, victim, s->n);
        s->step.n_preempted++;
    } while (!decode_fits(v, k));
    memcpy(v->R, v->scratch, (size_t)k * sizeof *v->R); /* survivors in ranking order */
    v->nR = k;
    int64_t gs = 0, os = 0;
    for (int64_t i = 0; i < k; i++) {
        gs += v->rq[v->R[i]].g;
        os += s->reqs[v->R[i]].output_tokens;
    }
    v->rho = fmin(1.0, (double)(gs + RETRACT_STEPS * k) / (double)(os + 1));
    v->full = 0;
    return 0;
}

/* 2d, section 7: the decode step of R (kind NONE if R empties). */
static int prepare_decode(sched *s, sgl_batch *b, int *limit)
{
    sched_sgl *v = s->sgl;
    int64_t out = 0;
    for (int64_t i = 0; i < v->nR; i++)
        if (v->rq[v->R[i]].st != SGL_FINISHED)
            v->R[out++] = v->R[i];
    if (out != v->nR)
        v->full = 0;
    v->nR = out;
    if (v->nR == 0) {
        v->full = 0;
        return 0;
    }
    if (decode_fits(v, v->nR)) {
        v->rho = fmax(v->rho - v->delta, v->rho_min);
    } else {
        if (retract(s))
            return -1;
        *limit = SCHED_LIMIT_KV;
    }
    b->kind = SGL_BATCH_DECODE;
    sgl_alloc(s, v->nR);
    for (int64_t i = 0; i < v->nR; i++) {
        int32_t id = v->R[i];
        sgl_batch_add(b, v, id, 1, SGL_TOK);
        v->rq[id].c++;
    }
    return 0;
}

/* 2a: K's stored tokens become its prefix (the tree's, with the radix
 * cache). */
static void stash_chunked(sched *s)
{
    sched_sgl *v = s->sgl;
    sgl_req *q = &v->rq[v->K];
    if (q->c <= q->m)
        return;
    if (v->tree)
        tree_put(s, v->K, q->c, 1);
    else
        q->m = q->c;
}

/* 2b: the last extend batch joins R, but for its finished members and K. */
static void merge_last(sched *s, const sgl_batch *last)
{
    sched_sgl *v = s->sgl;
    int was_empty = v->nR == 0, dropped = 0;
    for (int64_t i = 0; i < last->n; i++) {
        int32_t id = last->id[i];
        if (v->rq[id].st != SGL_RUNNING || v->rq[id].gen != last->gen[i]) {
            dropped = 1;
            continue;
        }
        v->R[v->nR++] = id;
    }
    if (dropped || was_empty)
        v->full = 0;
}

/* The step record of a decided batch. */
static void record(sched *s, sgl_batch *b, int limit)
{
    sched_sgl *v = s->sgl;
    sched_step *st = &b->step;
    memset(st, 0, sizeof *st);
    cost_batch *cb = &st->batch;
    for (int64_t i = 0; i < b->n; i++) {
        const sched_member *m = &b->mem[i];
        if (b->kind == SGL_BATCH_DECODE) {
            cb->tokens += 1;
            cb->kv_read += m->context;
            cb->n_decode++;
        } else {
            const int64_t c = m->context - m->tokens;
            cb->tokens += m->tokens;
            cb->prefill_sq += m->tokens * m->tokens;
            cb->prefill_ctx += m->tokens * c;
            cb->prefill_cached += c;
            cb->n_prefill++;
            s->ctr.prefill_chunks += v->C > 0;
        }
    }
    st->kind = b->kind == SGL_BATCH_DECODE ? SCHED_STEP_DECODE : SCHED_STEP_PREFILL;
    if (b->kind == SGL_BATCH_DECODE) { /* the same terms while R's width stays */
        st->dur_s = cost_run_s(cost_run_get(&v->cruns, s->cost, cb), cb->kv_read);
    } else {
        st->dur_s = cost_step_s(s->cost, cb);
    }
    st->kv_blocks_used = v->N - v->F - sgl_evictable(v);
    st->n_waiting = v->nw;
    st->n_running = v->nR + (b->kind == SGL_BATCH_EXTEND ? b->n : 0);
    st->n_preempted = s->step.n_preempted;
    st->limit = limit;
}

/* One iteration's decision (section 2, steps 2a-2d) into a free buffer. */
static sgl_batch *decide(sched *s)
{
    sched_sgl *v = s->sgl;
    sgl_batch *b = &v->buf[v->ndecided % 2];
    const sgl_batch *last = v->ndecided > 0 ? &v->buf[(v->ndecided - 1) % 2] : NULL;
    s->step.n_preempted = 0;
    if (v->K >= 0)
        stash_chunked(s);
    if (last && v->last_kind == SGL_BATCH_EXTEND)
        merge_last(s, last);
    int limit;
    sgl_form_extend(s, b, &limit);
    if (b->kind == SGL_BATCH_NONE && prepare_decode(s, b, &limit))
        b->kind = -1; /* stuck */
    v->ndecided++;
    v->last_kind = b->kind > 0 ? b->kind : SGL_BATCH_NONE;
    if (b->kind <= 0)
        return b->kind < 0 ? b : NULL;
    for (int64_t i = 0; i < b->n; i++) { /* each admission counts its prefix hit */
        if (b->kind != SGL_BATCH_EXTEND || !(b->tok[i] & SGL_NEW))
            continue;
        const int64_t m = b->mem[i].context - b->mem[i].tokens;
        s->ctr.prefix_query_tokens += sgl_T(s, b->id[i]);
        s->ctr.prefix_hit_tokens += m;
        s->ctr.prefix_saved_tokens += m;
    }
    record(s, b, limit);
    return b;
}

static int fully_idle(const sched_sgl *v) { return v->nR == 0 && v->K < 0 && v->nw == 0; }

/* Emit a decided batch as the step starting now. */
static void launch(sched *s, sgl_batch *b, double now, double *t_end)
{
    sched_step *st = &b->step;
    st->index = s->ctr.steps++;
    st->start_s = now;
    s->step = *st;
    assert(s->lk_steps == 0); /* a leap's stretch ends with its last step (sgl_finish) */
    if (s->sink)
        s->sink(s->sink_ctx, st, b->mem, b->n);
    s->sgl->inflight = b;
    *t_end = now + st->dur_s;
}

/* ------------------------------------------------------------- leaps */
/* Whether the plan just made may go on as a leap: a leap sink (a horizon
 * then lets it go on, sched_leap_may_go), no chunked request, a decode step
 * launched, admission shut (W empty, or R full), and R the step's members
 * (without overlap: it was decided just now) or, with overlap, the next
 * step decided a decode of R, which is the launched step's members but
 * for those that finished since it was decided (their extra decode of O2;
 * nobody retracted in between).  O(|R|). */
static int leap_ready(const sched *s)
{
    const sched_sgl *v = s->sgl;
    const sgl_batch *b = v->inflight, *p = v->pending;
    if (!s->leap_fn || v->K >= 0 || !b || b->kind != SGL_BATCH_DECODE ||
        (v->nw > 0 && !v->full))
        return 0;
    if (!v->overlap)
        return p == NULL && b->n == v->nR;
    if (!p || p->kind != SGL_BATCH_DECODE || p->n != v->nR)
        return 0;
    int64_t j = 0;
    for (int64_t i = 0; i < b->n; i++) {
        const int32_t id = b->id[i];
        if (v->rq[id].st == SGL_FINISHED)
            continue; /* its token there is dropped (O3) */
        if (j >= p->n || p->id[j] != id || p->gen[j] != b->gen[i])
            return 0;
        j++;
    }
    return j == p->n;
}

/* A step of the leap launched at t with record r (sgl_leap): sunk leapt,
 * without members, as a same-set stretch's step (sched_same_set_flush
 * names its requests when the stretch ends, in sgl_finish). */
static void leap_launch(sched *s, const sched_step *r, const sgl_batch *b, double t)
{
    s->step = *r;
    s->step.index = s->ctr.steps++;
    s->step.start_s = t;
    s->step.leapt = 1;
    sched_same_set_step(s, b->id, b->n);
    s->ctr.leap_steps++;
    if (s->sink)
        s->sink(s->sink_ctx, &s->step, b->mem, 0);
}

/* The plan at t launched the decode of R (n requests; with overlap it
 * also decided the next one, the same requests) and leap_ready holds.
 * Each next plan would then, until someone finishes, apply a token to
 * every member (none finishes), launch the step decided last and decide
 * a decode of R again: admission shut (gate 1), the check of 7.2 passing
 * after its eviction (F >= n), rho decaying, n more slots, each member's
 * context one longer.  Those plans are made here in O(1) each (plus the
 * tree's evictions), while each starts before the horizon (the decision
 * at its end then still sees admission shut: sched_leap_may_go, R's full
 * flag shutting it whatever W holds, 5.10 gate 1),
 * the results it applies finish nobody, and its check passes without a
 * retraction; their steps are sunk leapt.  The members' g and c are
 * written once at the end, and the two batches in play (in flight and,
 * with overlap, decided) get the contexts and records those plans would
 * have left.  Returns the end of the last step launched (t if none).
 * O(|R|) plus O(1) per step. */
static double sgl_leap(sched *s, double t)
{
    sched_sgl *v = s->sgl;
    const int ov = v->overlap;
    sgl_batch *b = ov ? v->pending : v->inflight; /* R's decode (leap_ready) */
    const int64_t n = b->n;
    int64_t rem = INT64_MAX; /* tokens left after the step in flight's, the least */
    for (int64_t i = 0; i < n; i++) {
        const int32_t id = b->id[i];
        assert(b->tok[i] == SGL_TOK && v->rq[id].st == SGL_RUNNING);
        const int64_t left = s->reqs[id].output_tokens - v->rq[id].g - 1;
        if (left < rem)
            rem = left;
    }
    /* the record of the last decision; with overlap, the step to launch next */
    sched_step rec = b->step;
    const cost_run *run = cost_run_get(&v->cruns, s->cost, &rec.batch);
    /* plans made here: each applies a step's tokens and launches the next;
     * the step that makes someone's last token is left to the normal plan
     * (listed), so that the stretch ends, and its tokens are told, before
     * anyone finishes: with overlap a finisher is listed once more after
     * its finish (O2), and the run's trackers must not have let it go */
    int64_t plans = 0;
    while (plans < rem - 1 && sched_leap_may_go(s, t, v->full)) {
        evict_to(v, n); /* 7.2's check of the decision (its shortfall evicted) */
        if (v->F < n)
            break; /* it would retract: the normal plan's */
        plans++;
        if (ov) { /* launch the step decided last, then decide the next */
            leap_launch(s, &rec, b, t);
            t += s->step.dur_s;
        }
        v->rho = fmax(v->rho - v->delta, v->rho_min);
        v->F -= n;
        rec.batch.kv_read += n;
        rec.dur_s = cost_run_s(run, rec.batch.kv_read); /* = cost_step_s(s->cost, &rec.batch) */
        rec.kv_blocks_used = v->N - v->F - sgl_evictable(v);
        rec.n_waiting = v->nw;
        rec.limit = v->nw > 0 ? SCHED_LIMIT_KV : SCHED_LIMIT_NONE_WAITING;
        if (!ov) {
            leap_launch(s, &rec, b, t);
            t += s->step.dur_s;
        }
    }
    if (plans == 0)
        return t;
    for (int64_t i = 0; i < n; i++) { /* the tokens applied, the slots decided */
        sgl_req *q = &v->rq[b->id[i]];
        q->g += plans;
        q->c += plans;
    }
    v->ndecided += plans; /* the buffers are used in turn (decide) */
    sgl_batch *dec = &v->buf[(v->ndecided - 1) % 2]; /* the last decision */
    sgl_batch *fly = ov ? &v->buf[(v->ndecided - 2) % 2] : dec;
    if (dec != b) /* each of them R's decode (sgl_finish reads fly's) */
        batch_copy(dec, b);
    if (fly != b && fly != dec)
        batch_copy(fly, b);
    for (int64_t i = 0; i < n; i++) /* contexts as decided: c + 1 then */
        dec->mem[i].context = v->rq[b->id[i]].c;
    dec->step = rec;
    v->inflight = fly; /* its members and record are read no more (sgl_finish: ids) */
    v->pending = ov ? dec : NULL;
    return t;
}

static int stuck(sched *s, double now)
{
    if (!s->errmsg[0])
        snprintf(s->errmsg, sizeof s->errmsg, "stuck at t=%.6f s: nothing can run (sglang)", now);
    else {
        char tmp[sizeof s->errmsg + 40];
        snprintf(tmp, sizeof tmp, "at t=%.6f s: %s", now, s->errmsg);
        snprintf(s->errmsg, sizeof s->errmsg, "%.*s", (int)sizeof s->errmsg - 1, tmp);
    }
    return SCHED_PLAN_STUCK;
}

static int sgl_plan(sched *s, double now, int more_arrivals, double *t_end)
{
    (void)more_arrivals;
    sched_sgl *v = s->sgl;
    sgl_batch *b = v->pending;
    v->pending = NULL;
    /* nothing decided ahead (or overlap off): decide now, up to date; an
     * empty decision that left work (R emptied, which clears the full
     * flag) is followed at once by another, as SGLang's loop goes round
     * without waiting; a second empty one means nothing will change */
    for (int tries = 0; !b && tries < 2 && (tries == 0 || !fully_idle(v)); tries++) {
        b = decide(s);
        if (b && b->kind < 0)
            return stuck(s, now);
    }
    if (s->errmsg[0])
        return stuck(s, now);
    if (!b) {
        if (!fully_idle(v))
            return stuck(s, now); /* W waits on nothing that will change */
        v->rho = v->rho0;
        return SCHED_PLAN_IDLE;
    }
    launch(s, b, now, t_end);
    if (v->overlap) { /* decide the next step while this one runs (9, O1) */
        sgl_batch *nb = decide(s);
        if (nb && nb->kind < 0)
            return stuck(s, now);
        v->pending = nb;
    }
    if (leap_ready(s))
        *t_end = sgl_leap(s, *t_end);
    return SCHED_PLAN_STEP;
}

/* Section 2.3: the step in flight ends at t and its results apply, but
 * for members finished or retracted since it was decided (O3). */
static void sgl_finish(sched *s, double t)
{
    sched_sgl *v = s->sgl;
    sgl_batch *b = v->inflight;
    v->inflight = NULL;
    if (!b)
        return;
    for (int64_t i = 0; i < b->n; i++) {
        const int32_t id = b->id[i];
        sgl_req *q = &v->rq[id];
        if (q->gen != b->gen[i] || q->st == SGL_FINISHED || !(b->tok[i] & SGL_TOK))
            continue;
        const trace_req *r = &s->reqs[id];
        if (++q->g == 1)
            s->res[id].first_token_s = t;
        if (q->g == r->output_tokens) {
            s->res[id].finish_s = t;
            s->res[id].status = SCHED_REQ_FINISHED;
            sgl_set_state(s, id, SGL_FINISHED);
            s->ctr.n_finished++;
            release_finished(s, id);
        } else if (b->kind == SGL_BATCH_EXTEND && v->tree) {
            tree_put(s, id, sgl_T(s, id) - 1, 1); /* its prompt is shareable, locked */
        }
    }
    if (s->lk_steps > 0) /* the last step of a leap: its stretch's tokens are all made */
        sched_same_set_flush(s);
}

/* ------------------------------------------------------------- queries */
static int64_t sgl_used_blocks(const sched *s)
{
    const sched_sgl *v = s->sgl;
    return v->N - v->F - sgl_evictable(v);
}

static void sgl_counters(const sched *s, sched_counters *out)
{
    const sched_sgl *v = s->sgl;
    *out = s->ctr;
    out->cached_blocks = sgl_evictable(v);
    out->free_blocks = v->F + out->cached_blocks;
    out->used_blocks = sgl_used_blocks(s);
    out->n_waiting = v->nw;
    int64_t running = v->K >= 0;
    for (int64_t i = 0; i < v->nR; i++)
        running += v->rq[v->R[i]].st == SGL_RUNNING;
    out->n_running = running;
}

int64_t sched_sgl_cached_prefix_tokens(const sched *s, int32_t id)
{
    const sched_sgl *v = s->sgl;
    if (!v->tree)
        return 0;
    int64_t T = s->reqs[id].prompt_tokens;
    return radix_peek(v->tree, id, T - 1);
}

/* Recount the pool: F + tree (evictable + locked) + every holder's own
 * slots (c - m) = N; each holder's m within c; the tree's own books. */
static int sgl_audit(const sched *s, char *why, size_t n)
{
    const sched_sgl *v = s->sgl;
    int64_t own = 0;
    for (int64_t i = 0; i < s->n; i++) {
        const sgl_req *q = &v->rq[i];
        if (q->m > q->c || (q->c > 0 && q->st != SGL_RUNNING && q->st != SGL_CHUNKED)) {
            snprintf(why, n, "sglang: request %lld holds c=%lld m=%lld in state %d",
                     (long long)i, (long long)q->c, (long long)q->m, q->st);
            return -1;
        }
        own += v->tree ? q->c - q->m : q->c; /* the chunk cache's prefix is K's own */
    }
    int64_t tree = v->tree ? radix_evictable(v->tree) + radix_protected(v->tree) : 0;
    if (v->F + tree + own != v->N || v->F < 0) {
        snprintf(why, n, "sglang: free %lld + tree %lld + own %lld != %lld slots",
                 (long long)v->F, (long long)tree, (long long)own, (long long)v->N);
        return -1;
    }
    if (v->tree && radix_audit(v->tree, why, (int)n))
        return -1;
    return 0;
}

const sched_engine_vt sched_engine_sglang = {
    "sglang",  sgl_init,   sgl_free,     sgl_attach_prefixes, sgl_arrive,
    sgl_plan,  sgl_finish, sgl_counters, sgl_used_blocks,     sgl_audit,
};
