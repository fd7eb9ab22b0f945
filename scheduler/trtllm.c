/* trtllm.c — TensorRT-LLM's in-flight batching (docs/engine-trtllm.md).
 *
 * One iteration is one step of TensorRT-LLM's batch manager: a capacity
 * scheduler picks which active requests may run (section 3 of the doc:
 * "guaranteed no evict" under --alloc reserved-oracle or reserved, "max
 * utilization" under --alloc paged), then the micro-batch scheduler gives
 * generation requests one token each and splits the rest of the token
 * budget among context requests in first-come-first-served chunks that are
 * cut to whole KV blocks (section 4).  There is no prefix reuse and no
 * priority order: requests stay in arrival order in the active list A.
 *
 * Blocks are counts (no identities): a request takes its blocks when its
 * first context chunk runs — its whole reservation under guaranteed no
 * evict, its whole context under max utilization — and under max
 * utilization one more block whenever a generated token starts a new one.
 * Per-request state is flat arrays indexed by id; nothing is allocated per
 * step.  A step costs O(|A|).  With a leap sink, a step of generation
 * requests only, the same ones in the same order as the step before, is
 * sunk as a same-set stretch's step (leapt, no members;
 * sched_same_set_flush), so its sink costs O(1), not O(|S|); and under
 * guaranteed no evict such steps are leapt (trt_leap): planned in O(1)
 * each until someone finishes, since nothing the plan reads changes in
 * between. */
#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched_internal.h"

struct sched_trt {
    int64_t bs, B, N, F;      /* tokens per block, token budget, blocks, free blocks */
    int64_t max_seqs;         /* max batch size = max requests per step */
    int reserve;              /* 1: guaranteed no evict (reserve at start) */
    int chunked;              /* 1: context chunking on */
    /* per request [n] */
    int64_t *g;               /* tokens generated */
    int64_t *C;               /* tokens stored */
    int64_t *held;            /* blocks held, 0 = not started */
    uint8_t *ctx;             /* 1: context phase (T - C tokens to compute) */
    int64_t *q;               /* tokens scheduled in the step in flight, 0 none */
    /* A: arrived, unfinished requests in arrival order */
    int32_t *act;
    int64_t nact;
    int64_t nstarted;         /* requests of A holding blocks (started) */
    /* the step: capacity-scheduled list L, then the members S */
    int32_t *L;
    int64_t nl;
    int32_t *S;
    int64_t ns;
    int32_t *cx;              /* [n] scratch: the micro batch's context requests */
    /* the last step, when it was generation only and nobody finished in it:
     * its S (the same-set stretches, emit) */
    int32_t *prev;            /* [n] its S */
    int64_t nprev;            /* its |S|; 0: none */
    int blocked;              /* 1: the last capacity pass stopped before A's
                                 end (max_seqs, or a reservation that did not
                                 fit): a request appended to A is not reached */
    cost_run_cache runs;      /* leaps' step costs by batch shape (cost_run_get) */
};

/* Blocks a request takes when its first chunk runs. */
static int64_t start_blocks(const sched *s, int32_t id)
{
    const sched_trt *t = s->trt;
    if (t->reserve)
        return s->alloc->admit_blocks(&s->cfg, &s->reqs[id], 0);
    return sched_ceil_div(s->reqs[id].prompt_tokens + t->g[id], t->bs);
}

int sched_trt_config_check(const sched_config *c, kvs_err *err)
{
    const char *eng = "not available under --engine trtllm";
    if ((unsigned)c->batching > SCHED_BATCHING_STATIC || (unsigned)c->policy > SCHED_POLICY_LPM ||
        (unsigned)c->alloc > SCHED_ALLOC_RESERVED_ORACLE || (unsigned)c->preemption > SCHED_PREEMPT_OFF)
        return kvs_errf(err, KVS_EINVAL, "scheduler: unknown enum value in config");
    if (c->batching != SCHED_BATCHING_CONTINUOUS)
        return kvs_errf(err, KVS_EINVAL, "--batching static: %s (in-flight batching only)", eng);
    if (c->policy != SCHED_POLICY_FCFS)
        return kvs_errf(err, KVS_EINVAL, "--policy %s: %s (requests run in arrival order)",
                        sched_policy_name(c->policy), eng);
    if (c->preemption != SCHED_PREEMPT_RECOMPUTE)
        return kvs_errf(err, KVS_EINVAL, "--preemption %s: %s (a paused request recomputes)",
                        sched_preempt_name(c->preemption), eng);
    if (c->priority_preemption)
        return kvs_errf(err, KVS_EINVAL, "--priority-preemption: %s", eng);
    if (c->prefix_caching)
        return kvs_errf(err, KVS_EINVAL, "--prefix-caching: %s (KV block reuse is not modelled)",
                        eng);
    if (c->long_prefill_threshold != 0)
        return kvs_errf(err, KVS_EINVAL, "--long-prefill-threshold: %s", eng);
    if (c->batch_timeout_s != 0.0)
        return kvs_errf(err, KVS_EINVAL, "--batch-timeout: %s", eng);
    if (c->chunked_prefill != 0 && c->chunked_prefill != 1)
        return kvs_errf(err, KVS_EINVAL, "scheduler: chunked_prefill is 0 or 1");
    if (c->chunked_prefill && c->max_batched_tokens < c->block_size)
        return kvs_errf(err, KVS_EINVAL,
                        "--max-batched-tokens: %lld is below --block-size %lld; context chunks "
                        "are whole blocks under --engine trtllm",
                        (long long)c->max_batched_tokens, (long long)c->block_size);
    return KVS_OK;
}

static int trt_init(sched *s, kvs_err *err)
{
    const sched_config *c = &s->cfg;
    size_t nn = (size_t)(s->n > 0 ? s->n : 1);
    sched_trt *t = calloc(1, sizeof *t);
    if (!t)
        return kvs_errf(err, KVS_ENOMEM, "scheduler: out of memory");
    s->trt = t;
    s->alloc = sched_alloc_vt_get(c->alloc);
    t->bs = c->block_size;
    t->B = c->max_batched_tokens;
    t->N = t->F = c->total_blocks;
    t->max_seqs = c->max_seqs;
    t->reserve = c->alloc != SCHED_ALLOC_PAGED;
    t->chunked = c->chunked_prefill;
    s->res = malloc(nn * sizeof *s->res);
    s->state = calloc(nn, sizeof *s->state);
    s->members = calloc(nn, sizeof *s->members);
    t->g = calloc(nn, sizeof *t->g);
    t->C = calloc(nn, sizeof *t->C);
    t->held = calloc(nn, sizeof *t->held);
    t->ctx = calloc(nn, sizeof *t->ctx);
    t->q = calloc(nn, sizeof *t->q);
    t->cx = malloc(nn * sizeof *t->cx);
    t->act = malloc(nn * sizeof *t->act);
    t->L = malloc(nn * sizeof *t->L);
    t->S = malloc(nn * sizeof *t->S);
    t->prev = malloc(nn * sizeof *t->prev);
    s->lk_ids = malloc(nn * sizeof *s->lk_ids);
    if (!s->res || !s->state || !s->members || !t->g || !t->C || !t->held || !t->ctx || !t->q ||
        !t->cx || !t->act || !t->L || !t->S || !t->prev || !s->lk_ids)
        return kvs_errf(err, KVS_ENOMEM, "scheduler: out of memory for %lld requests (trtllm)",
                        (long long)s->n);
    sched_results_reset(s->res, s->n);
    for (int64_t i = 0; i < s->n; i++)
        t->ctx[i] = 1;
    return KVS_OK;
}

static void trt_free(sched *s)
{
    sched_trt *t = s->trt;
    free(s->res);
    free(s->state);
    free(s->members);
    free(s->lk_ids);
    if (!t)
        return;
    free(t->prev);
    free(t->g);
    free(t->C);
    free(t->held);
    free(t->ctx);
    free(t->q);
    free(t->cx);
    free(t->act);
    free(t->L);
    free(t->S);
    free(t);
}

static int trt_attach_prefixes(sched *s, const req_prefixes *px, kvs_err *err)
{
    (void)s;
    (void)px;
    (void)err;
    return KVS_OK; /* no block reuse: prefixes are never shared */
}

/* Section 2: a request that could never run is rejected on arrival. */
static void trt_arrive(sched *s, int64_t id)
{
    sched_trt *t = s->trt;
    const trace_req *r = &s->reqs[id];
    const int64_t po = r->prompt_tokens + r->output_tokens;
    int64_t most = t->reserve ? s->alloc->admit_blocks(&s->cfg, r, 0)
                              : sched_ceil_div(po - 1, t->bs);
    if (po > s->cfg.max_model_len || most > t->N || (!t->chunked && po - 1 > t->B)) {
        sched_reject(s, (int32_t)id,
                     po > s->cfg.max_model_len ? SCHED_REJECT_CONTEXT
                     : most > t->N             ? SCHED_REJECT_KV_CAPACITY
                                               : SCHED_REJECT_TOKEN_BUDGET);
        return;
    }
    s->state[id] = SCHED_REQ_WAITING;
    s->res[id].status = SCHED_REQ_WAITING;
    t->act[t->nact++] = (int32_t)id;
}

static int is_gen(const sched_trt *t, int32_t id) { return t->held[id] > 0 && !t->ctx[id]; }

/* Section 3.1, guaranteed no evict: every generation request, then the
 * others in arrival order while their reservations fit (a started one
 * needs nothing more); the first that does not fit ends the pass. */
static void capacity_no_evict(sched *s)
{
    sched_trt *t = s->trt;
    int64_t avail = t->F;
    t->blocked = 0;
    for (int64_t i = 0; i < t->nact && t->nl < t->max_seqs; i++)
        if (is_gen(t, t->act[i]))
            t->L[t->nl++] = t->act[i];
    for (int64_t i = 0; i < t->nact; i++) {
        int32_t id = t->act[i];
        if (is_gen(t, id))
            continue;
        if (t->nl >= t->max_seqs)
            break;
        int64_t need = t->held[id] > 0 ? 0 : start_blocks(s, id);
        if (need > avail) {
            t->blocked = 1;
            break;
        }
        avail -= need;
        t->L[t->nl++] = id;
    }
    t->blocked |= t->nl >= t->max_seqs;
}

/* Blocks request id needs for one more step (section 3.2). */
static int64_t one_step_blocks(const sched *s, int32_t id)
{
    const sched_trt *t = s->trt;
    if (t->held[id] == 0)
        return start_blocks(s, id);
    if (t->ctx[id])
        return 0;
    int64_t want = sched_ceil_div(t->C[id] + 1, t->bs);
    return want > t->held[id] ? want - t->held[id] : 0;
}

static void pause_req(sched *s, int32_t id)
{
    sched_trt *t = s->trt;
    assert(t->held[id] > 0);
    t->F += t->held[id];
    t->held[id] = 0;
    t->nstarted--;
    t->C[id] = 0;
    t->ctx[id] = 1;
    s->res[id].preemptions++;
    s->step.n_preempted++;
    s->ctr.preempt_recompute++;
    s->state[id] = SCHED_REQ_WAITING;
    s->res[id].status = SCHED_REQ_WAITING;
}

/* Section 3.2, max utilization: A in order, each while its one-step blocks
 * fit; when one does not, the last started request not yet passed is
 * paused (its blocks count as free) and the same request is tried again;
 * with no started request left to pause the pass ends. */
static void capacity_max_util(sched *s)
{
    sched_trt *t = s->trt;
    int64_t used = 0, end = t->nact, i = 0;
    while (i < end) {
        int32_t id = t->act[i];
        int64_t need = one_step_blocks(s, id);
        if (t->nl < t->max_seqs && used + need <= t->F) {
            used += need;
            t->L[t->nl++] = id;
            i++;
            continue;
        }
        int64_t j = end - 1;
        while (j >= i && t->held[t->act[j]] == 0)
            j--;
        if (j < i)
            break;
        pause_req(s, t->act[j]);
        end = j;
    }
}

/* Section 4: the micro batch.  Generation requests one token each while
 * the budget lasts; context requests their whole remainder, or, when those
 * do not all fit beside the generation tokens, first-come-first-served
 * chunks of what is left, each cut down to whole blocks unless it is the
 * request's last.  At most max_seqs requests are considered. */
static void micro_batch(sched *s)
{
    sched_trt *t = s->trt;
    int64_t tok = 0, k = 0, nctx = 0, ctx_tok = 0;
    int32_t *ctx = t->cx;
    for (int64_t i = 0; i < t->nl; i++) {
        int32_t id = t->L[i];
        const int64_t rem = s->reqs[id].prompt_tokens + t->g[id] - t->C[id];
        if (is_gen(t, id)) {
            if (tok + 1 > t->B)
                break;
            t->q[id] = 1;
            t->S[t->ns++] = id;
            tok++;
        } else if (t->chunked) {
            ctx[nctx++] = id;
            ctx_tok += rem;
        } else {
            if (tok + rem > t->B)
                break;
            t->q[id] = rem;
            t->S[t->ns++] = id;
            tok += rem;
        }
        if (++k >= t->max_seqs)
            break;
    }
    if (!t->chunked)
        return;
    int64_t cap = t->B - tok;
    int fit = ctx_tok <= cap;
    for (int64_t c = 0; c < nctx; c++) {
        int32_t id = ctx[c];
        const int64_t rem = s->reqs[id].prompt_tokens + t->g[id] - t->C[id];
        int64_t q = rem;
        if (!fit) {
            q = rem < cap ? rem : cap;
            if (q != rem)
                q = q / t->bs * t->bs;
            cap -= q;
        }
        if (q > 0) {
            t->q[id] = q;
            t->S[t->ns++] = id;
        }
    }
}

/* Take the blocks the step's members need (guaranteed by section 3). */
static void take_blocks(sched *s)
{
    sched_trt *t = s->trt;
    for (int64_t k = 0; k < t->ns; k++) {
        int32_t id = t->S[k];
        if (t->reserve && t->held[id] > 0)
            continue; /* its reservation covers every step */
        int64_t need = one_step_blocks(s, id);
        assert(need <= t->F); /* sections 3.1 and 3.2 rule out a shortage */
        t->F -= need;
        t->held[id] += need;
        if (t->held[id] == need && need > 0) {
            t->nstarted++;
            s->state[id] = SCHED_REQ_RUNNING;
            s->res[id].status = SCHED_REQ_RUNNING;
        }
    }
}

/* Which limit held the step's batch back (sched_step_limit): a pause or a
 * capacity pass that stopped short of A is KV blocks (or max_seqs when it
 * stopped at max_seqs), a micro batch that left a chosen request out or
 * cut a context chunk is the token budget, else nothing was waiting.
 * `cut`: some context request was given fewer tokens than it had left. */
static sched_step_limit trt_limit(const sched *s, int cut)
{
    const sched_trt *t = s->trt;
    if (s->step.n_preempted > 0)
        return SCHED_LIMIT_KV;
    if (t->nl < t->nact)
        return t->nl >= t->max_seqs ? SCHED_LIMIT_MAX_SEQS : SCHED_LIMIT_KV;
    if (t->ns < t->nl || cut)
        return SCHED_LIMIT_TOKEN_BUDGET;
    return SCHED_LIMIT_NONE_WAITING;
}

/* Whether this step is a same-set stretch's (see the top): generation
 * requests only, those of the last step in its order, nobody paused, and
 * a leap sink (none when the run wants every member).  O(|S|). */
static int same_set(const sched *s)
{
    const sched_trt *t = s->trt;
    if (!s->leap_fn || s->step.n_preempted != 0 || t->ns == 0 ||
        t->ns != t->nprev || memcmp(t->S, t->prev, (size_t)t->ns * sizeof *t->S) != 0)
        return 0;
    for (int64_t k = 0; k < t->ns; k++)
        if (t->ctx[t->S[k]])
            return 0;
    return 1;
}

static void emit(sched *s, double now, double *t_end)
{
    sched_trt *t = s->trt;
    cost_batch *cb = &s->step.batch;
    const int leapt = same_set(s);
    int cut = 0, gen_only = 1;
    for (int64_t k = 0; k < t->ns; k++) {
        int32_t id = t->S[k];
        const int64_t c = t->C[id], q = t->q[id];
        cut |= t->ctx[id] && q < s->reqs[id].prompt_tokens + t->g[id] - c;
        gen_only &= !t->ctx[id];
        if (!t->ctx[id]) {
            cb->tokens += 1;
            cb->kv_read += c + 1;
            cb->n_decode++;
            if (s->want_members && !leapt)
                sched_add_member(s, id, SCHED_MEMBER_DECODE, 1, c + 1);
        } else {
            cb->tokens += q;
            cb->prefill_sq += q * q;
            cb->prefill_ctx += q * c;
            cb->prefill_cached += c;
            cb->n_prefill++;
            s->ctr.prefill_chunks += t->chunked;
            sched_add_member(s, id, SCHED_MEMBER_PREFILL, q, c + q);
        }
    }
    sched_step *st = &s->step;
    st->kind = cb->n_prefill == 0   ? SCHED_STEP_DECODE
               : cb->n_decode == 0 ? SCHED_STEP_PREFILL
                                   : SCHED_STEP_MIXED;
    st->dur_s = cost_step_s(s->cost, cb);
    st->index = s->ctr.steps++;
    st->start_s = now;
    st->kv_blocks_used = t->N - t->F;
    st->n_running = t->nstarted;
    st->n_waiting = t->nact - t->nstarted;
    st->limit = trt_limit(s, cut);
    if (leapt) { /* each member made a token at the last step's end, this one's start */
        sched_same_set_step(s, t->S, t->ns);
        st->leapt = 1;
    } else if (s->lk_steps > 0) { /* members follow: the stretch's tokens first */
        sched_same_set_flush(s);
    }
    if (gen_only && !leapt)
        memcpy(t->prev, t->S, (size_t)t->ns * sizeof *t->S);
    t->nprev = gen_only ? t->ns : 0;
    if (s->sink)
        s->sink(s->sink_ctx, st, s->members, s->n_members);
    *t_end = now + st->dur_s;
}

/* Step 1 (just emitted by trt_plan, ending at t) gave a token to each of
 * its members S, all generation requests, under guaranteed no evict.
 * Until one of them makes its last token (step j* = min over S of O - g),
 * each next step's plan reads what step 1's read (A, who is generating,
 * the blocks held and free: nobody starts, finishes or takes a block; an
 * arrival appended behind a stopped capacity pass is not reached), so it
 * is S again, a same-set step whose record differs from step 1's only in
 * its start, index, KV read (n more tokens a step), duration and the
 * waiting count.  Those steps are emitted here while each starts before
 * the horizon (sched_leap_may_go), up to step j*; S's g and C then advance by
 * the steps before the last, which trt_finish ends as usual.  Returns the
 * end of the last step emitted (t if none).  O(|S|) plus O(1) per step
 * (docs/engine-trtllm.md, section 4). */
static double trt_leap(sched *s, double t)
{
    sched_trt *tr = s->trt;
    sched_step *st = &s->step;
    const int64_t n = tr->ns;
    int64_t jstar = INT64_MAX;
    for (int64_t k = 0; k < n; k++) {
        const int32_t id = tr->S[k];
        assert(is_gen(tr, id) && tr->q[id] == 1);
        const int64_t rem = s->reqs[id].output_tokens - tr->g[id];
        if (rem < jstar)
            jstar = rem;
    }
    assert(st->kind == SCHED_STEP_DECODE && st->batch.n_decode == n && st->n_preempted == 0);
    const cost_run *run = cost_run_get(&tr->runs, s->cost, &st->batch);
    int64_t j = 1; /* steps of the leap emitted, step 1 included */
    /* an arrival appended behind a stopped capacity pass is not reached */
    while (j < jstar && sched_leap_may_go(s, t, tr->blocked)) {
        j++;
        st->batch.kv_read += n;
        st->dur_s = cost_run_s(run, st->batch.kv_read); /* = cost_step_s(s->cost, &st->batch) */
        st->index = s->ctr.steps++;
        st->start_s = t;
        st->n_waiting = tr->nact - tr->nstarted;
        st->limit = trt_limit(s, 0);
        st->leapt = 1;
        sched_same_set_step(s, tr->S, n);
        s->ctr.leap_steps++;
        s->n_members = 0;
        if (s->sink)
            s->sink(s->sink_ctx, st, s->members, 0);
        t += st->dur_s;
    }
    for (int64_t k = 0; k < n && j > 1; k++) { /* steps 1 .. j - 1 stored */
        const int32_t id = tr->S[k];
        tr->C[id] += j - 1;
        tr->g[id] += j - 1;
    }
    return t;
}

static int trt_plan(sched *s, double now, int more_arrivals, double *t_end)
{
    (void)more_arrivals;
    sched_trt *t = s->trt;
    int32_t carry = 0;
    for (;;) {
        memset(&s->step, 0, sizeof s->step);
        s->step.n_preempted = carry;
        s->n_members = 0;
        t->nl = t->ns = 0;
        if (t->nact == 0)
            return SCHED_PLAN_IDLE;
        if (t->reserve)
            capacity_no_evict(s);
        else
            capacity_max_util(s);
        micro_batch(s);
        if (t->ns > 0)
            break;
        if (s->step.n_preempted == carry) {
            snprintf(s->errmsg, sizeof s->errmsg,
                     "stuck at t=%.6f s: the trtllm step scheduled nothing and paused nobody "
                     "(a kvsim bug)", now);
            return SCHED_PLAN_STUCK;
        }
        carry = s->step.n_preempted; /* paused only: plan again at the same time */
    }
    take_blocks(s);
    emit(s, now, t_end);
    /* a step of generation requests only (nprev) under guaranteed no evict,
     * with a leap sink (as same_set); a horizon lets it go on (sched_leap_may_go) */
    if (t->reserve && t->nprev > 0 && s->leap_fn)
        *t_end = trt_leap(s, *t_end);
    return SCHED_PLAN_STEP;
}

/* The step ends: store its tokens; a context that is complete and every
 * generation step yields a token; finished requests leave A. */
static void trt_finish(sched *s, double tnow)
{
    sched_trt *t = s->trt;
    int any = 0;
    for (int64_t k = 0; k < t->ns; k++) {
        int32_t id = t->S[k];
        const trace_req *r = &s->reqs[id];
        t->C[id] += t->q[id];
        t->q[id] = 0;
        if (t->C[id] != r->prompt_tokens + t->g[id])
            continue;
        t->ctx[id] = 0;
        if (++t->g[id] == 1)
            s->res[id].first_token_s = tnow;
        if (t->g[id] == r->output_tokens) {
            s->res[id].finish_s = tnow;
            s->res[id].status = SCHED_REQ_FINISHED;
            s->state[id] = SCHED_REQ_FINISHED;
            s->ctr.n_finished++;
            t->F += t->held[id];
            t->held[id] = 0;
            t->nstarted--;
            any = 1;
        }
    }
    t->ns = 0;
    if (any) {
        int64_t out = 0;
        for (int64_t i = 0; i < t->nact; i++)
            if (s->state[t->act[i]] != SCHED_REQ_FINISHED)
                t->act[out++] = t->act[i];
        t->nact = out;
        t->nprev = 0; /* R changed */
        if (s->lk_steps > 0) /* the finishers' last tokens came in the stretch */
            sched_same_set_flush(s);
    }
}

static int64_t trt_used_blocks(const sched *s) { return s->trt->N - s->trt->F; }

static void trt_counters(const sched *s, sched_counters *out)
{
    const sched_trt *t = s->trt;
    *out = s->ctr;
    out->free_blocks = t->F;
    out->used_blocks = trt_used_blocks(s);
    out->n_running = t->nstarted;
    out->n_waiting = t->nact - t->nstarted;
}

/* Recount the blocks from A: held blocks + F == N, each started request
 * holds exactly what section 5 says, nobody else holds any. */
static int trt_audit(const sched *s, char *why, size_t n)
{
    const sched_trt *t = s->trt;
    int64_t sum = 0, started = 0;
    for (int64_t i = 0; i < t->nact; i++) {
        int32_t id = t->act[i];
        const int64_t T = s->reqs[id].prompt_tokens + t->g[id], h = t->held[id];
        int64_t want = 0;
        if (h > 0)
            want = t->reserve ? s->alloc->admit_blocks(&s->cfg, &s->reqs[id], 0)
                   : t->ctx[id] ? sched_ceil_div(T, t->bs)
                                : sched_ceil_div(t->C[id] + t->q[id], t->bs);
        if (h != want || (h == 0 && (t->C[id] != 0 || !t->ctx[id]))) {
            if (why && n)
                snprintf(why, n, "trtllm: request %d holds %lld blocks, expected %lld (C=%lld)",
                         id, (long long)h, (long long)want, (long long)t->C[id]);
            return -1;
        }
        sum += h;
        started += h > 0;
    }
    if (started != t->nstarted) {
        if (why && n)
            snprintf(why, n, "trtllm: %lld requests hold blocks, counted %lld",
                     (long long)started, (long long)t->nstarted);
        return -1;
    }
    if (sum + t->F != t->N) {
        if (why && n)
            snprintf(why, n, "trtllm: held %lld + free %lld != %lld blocks", (long long)sum,
                     (long long)t->F, (long long)t->N);
        return -1;
    }
    return 0;
}

const sched_engine_vt sched_engine_trtllm = {
    "trtllm",   trt_init,   trt_free,     trt_attach_prefixes, trt_arrive,
    trt_plan,   trt_finish, trt_counters, trt_used_blocks, trt_audit,
};
