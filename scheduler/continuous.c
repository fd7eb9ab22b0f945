/* continuous.c — iteration-level (continuous) batching, docs/semantics.md
 * section 3, with recompute / swap / no preemption (section 5).
 *
 * One call of sched_plan_continuous is one iteration: admission walks the
 * waiting heap's head (strict queue), a prefill step runs exactly the
 * admitted requests, otherwise a decode step runs every running request,
 * taking blocks in running order and preempting the last request in policy
 * order when the cache is full.  With prefix caching, admission goes through
 * sched_admit_chunks (chunked.c) and blocks leave through the prefix cache
 * (pcache.c); chunked prefill has its own iteration (chunked.c). */
#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sched_internal.h"

/* Index in run[] of the last running request in policy order. O(|R|). */
int64_t sched_victim_index(const sched *s)
{
    int64_t v = 0;
    for (int64_t i = 1; i < s->n_run; i++)
        if (s->pol->cmp(s->reqs, s->run[i].id, s->run[v].id) > 0)
            v = i;
    return v;
}

/* Preempt run[idx]: free its blocks and send it back to W (recompute) or to
 * host memory (swap, when it fits in the swap space). O(|R|). */
void sched_preempt_at(sched *s, int64_t idx, double now, int force_recompute)
{
    sched_v0_lazy_write(s);
    sched_same_set_flush(s); /* R changes */
    s->lk_armed = 0;
    sched_entry e = s->run[idx];
    memmove(&s->run[idx], &s->run[idx + 1], (size_t)(s->n_run - idx - 1) * sizeof e);
    s->n_run--;
    if (s->pc.on)
        sched_pc_release(s, &e);
    else
        s->free_blocks += e.blocks;
    const trace_req *r = &s->reqs[e.id];
    s->g[e.id] = r->output_tokens - e.left;
    s->res[e.id].preemptions++;
    s->step.n_preempted++;
    int64_t host = s->alloc->grows ? sched_ceil_div(e.ctx, s->cfg.block_size)
                                   : s->alloc->admit_blocks(&s->cfg, r, e.ctx);
    if (!force_recompute && s->cfg.preemption == SCHED_PREEMPT_SWAP &&
        s->swap_used + host <= s->cfg.swap_blocks) {
        s->swap_used += host;
        s->swap_ctx[e.id] = e.ctx;
        s->swap_since[e.id] = now;
        s->state[e.id] = SCHED_REQ_SWAPPED;
        s->res[e.id].status = SCHED_REQ_SWAPPED;
        s->swp[e.id].swaps++;
        s->step.swap_out_blocks += host;
        s->ctr.preempt_swap++;
        sched_waitq_push(&s->swq, e.id);
    } else {
        s->state[e.id] = SCHED_REQ_WAITING;
        s->res[e.id].status = SCHED_REQ_WAITING;
        s->ctr.preempt_recompute++;
        sched_waitq_push(&s->wq, e.id);
    }
}

/* Could request id be admitted now (step 3's three conditions)? */
static int admissible(const sched *s, int32_t id, int64_t tokens_used)
{
    const trace_req *r = &s->reqs[id];
    int64_t need = r->prompt_tokens + s->g[id];
    int64_t nb = s->alloc->admit_blocks(&s->cfg, r, need);
    return s->n_run < s->cfg.max_seqs && tokens_used + need <= s->cfg.max_batched_tokens &&
           s->free_blocks - nb >= s->watermark_blocks;
}

/* Which of step 3's conditions keeps request id out (it is not admissible). */
static int32_t blocked_by(const sched *s, int32_t id, int64_t tokens_used)
{
    const trace_req *r = &s->reqs[id];
    int64_t need = r->prompt_tokens + s->g[id];
    if (s->n_run >= s->cfg.max_seqs)
        return SCHED_LIMIT_MAX_SEQS;
    if (tokens_used + need > s->cfg.max_batched_tokens)
        return SCHED_LIMIT_TOKEN_BUDGET;
    return SCHED_LIMIT_KV;
}

/* Step 3: admission.  Returns the number of requests admitted. */
int64_t sched_v0_admit(sched *s)
{
    int64_t used = 0;
    const sched_config *c = &s->cfg;
    s->run_mark = s->n_run;
    if (s->pc.on) {
        int64_t budget = c->max_batched_tokens;
        return sched_admit_chunks(s, &budget, 1);
    }
    while (s->wq.n > 0) {
        int32_t id = sched_waitq_peek(&s->wq);
        const trace_req *r = &s->reqs[id];
        int64_t need = r->prompt_tokens + s->g[id];
        int64_t nb = s->alloc->admit_blocks(c, r, need);
        if (nb > c->total_blocks - s->watermark_blocks || need > c->max_batched_tokens ||
            r->prompt_tokens + r->output_tokens > c->max_model_len) {
            sched_waitq_pop(&s->wq);
            sched_reject(s, id,
                         r->prompt_tokens + r->output_tokens > c->max_model_len
                             ? SCHED_REJECT_CONTEXT
                         : need > c->max_batched_tokens ? SCHED_REJECT_TOKEN_BUDGET
                                                        : SCHED_REJECT_KV_CAPACITY);
            continue;
        }
        if (!admissible(s, id, used)) {
            s->step.limit = blocked_by(s, id, used);
            break;
        }
        sched_waitq_pop(&s->wq);
        sched_entry *e = &s->run[s->n_run++];
        e->id = id;
        e->skip = 0;
        e->prefill = 0;
        e->ctx = need;
        e->left = r->output_tokens - s->g[id];
        e->fresh = e->left == r->output_tokens;
        e->pad_ = 0;
        e->blocks = nb;
        e->room = nb * c->block_size - need;
        s->free_blocks -= nb;
        s->state[id] = SCHED_REQ_RUNNING;
        s->res[id].status = SCHED_REQ_RUNNING;
        used += need;
        sched_add_member(s, id, SCHED_MEMBER_PREFILL, need, need);
        s->step.batch.tokens += need;
        s->step.batch.prefill_sq += need * need;
        s->step.batch.n_prefill++;
    }
    return s->n_run - s->run_mark;
}

/* Step 5: preempt running requests with a worse key than the blocked head. */
void sched_v0_priority_preempt(sched *s, double now)
{
    int32_t w = sched_waitq_peek(&s->wq);
    while (s->n_run > 0 && !admissible(s, w, 0)) {
        int64_t v = sched_victim_index(s);
        if (s->pol->cmp(s->reqs, s->run[v].id, w) <= 0)
            break;
        sched_preempt_at(s, v, now, 1);
        s->ctr.preempt_priority++;
    }
}

int sched_preempt_for(sched *s, int64_t *i, int64_t need, double now)
{
    while (s->free_blocks < need) {
        const int64_t v = sched_victim_index(s);
        sched_preempt_at(s, v, now, 0);
        if (v == *i)
            return 1;
        if (v < *i)
            (*i)--;
    }
    return 0;
}

/* Step 6, first pass: in running order, each request whose next token starts
 * a new block takes one; a full cache preempts the policy-last request
 * (possibly the request itself); with --preemption off the request skips the
 * step.  Partial prompts of chunked prefill (e->prefill) take no block here
 * and are marked skip (their chunk may clear it).  Shared with chunked.c. */
void sched_take_decode_blocks(sched *s, double now)
{
    int64_t i = 0;
    while (i < s->n_run) {
        sched_entry *e = &s->run[i];
        e->skip = e->prefill;
        if (e->prefill || e->room > 0 || !s->alloc->grows) {
            i++;
            continue;
        }
        if (s->free_blocks == 0 && s->cfg.preemption == SCHED_PREEMPT_OFF) {
            e->skip = 1;
            i++;
            continue;
        }
        if (sched_preempt_for(s, &i, 1, now))
            continue; /* run[i] is now the next request */
        e = &s->run[i];
        s->free_blocks--;
        sched_blocks_taken(s);
        e->blocks++;
        e->room += s->cfg.block_size;
        i++;
    }
}

/* Swap requests back in, in policy order, while they fit above the
 * watermark and under max_seqs.  They decode in this step. */
static void swap_in(sched *s, double now)
{
    const sched_config *c = &s->cfg;
    while (s->swq.n > 0 && s->n_run < c->max_seqs) {
        int32_t id = sched_waitq_peek(&s->swq);
        const trace_req *r = &s->reqs[id];
        int64_t ctx = s->swap_ctx[id];
        int64_t nb = s->alloc->grows ? sched_ceil_div(ctx, c->block_size)
                                     : s->alloc->admit_blocks(c, r, ctx);
        int64_t extra = (s->alloc->grows && nb * c->block_size == ctx) ? 1 : 0;
        if (nb + extra > c->total_blocks - s->watermark_blocks) {
            /* Could not come back even into an empty cache. */
            sched_waitq_pop(&s->swq);
            s->swap_used -= nb;
            s->swp[id].swapped_s += now - s->swap_since[id];
            sched_reject(s, id, SCHED_REJECT_KV_CAPACITY);
            continue;
        }
        if (s->free_blocks - nb - extra < s->watermark_blocks)
            break;
        sched_waitq_pop(&s->swq);
        s->swap_used -= nb;
        s->free_blocks -= nb + extra;
        s->swp[id].swapped_s += now - s->swap_since[id];
        s->state[id] = SCHED_REQ_RUNNING;
        s->res[id].status = SCHED_REQ_RUNNING;
        s->step.swap_in_blocks += nb;
        sched_entry *e = &s->run[s->n_run++];
        e->id = id;
        e->skip = 0;
        e->prefill = 0;
        e->ctx = ctx;
        e->left = r->output_tokens - s->g[id];
        e->fresh = e->left == r->output_tokens;
        e->pad_ = 0;
        e->blocks = nb + extra;
        e->room = (nb + extra) * c->block_size - ctx;
    }
}

/* --kv-cache off: nothing is kept between steps, so every member processes
 * its whole context again: P + g tokens (a prefill's tokens; a decode's
 * context after the step), all as prefill work: tokens = sum (P + g),
 * prefill_sq = sum (P + g)^2, kv_read = 0.  The step's kind and its block
 * accounting (the K/V the step materializes) stay as with a cache. */
static void no_cache_batch(const sched *s, cost_batch *b)
{
    cost_batch nb;
    memset(&nb, 0, sizeof nb);
    for (int64_t i = 0; i < s->n_members; i++) {
        const sched_member *m = &s->members[i];
        int64_t t = m->kind == SCHED_MEMBER_PREFILL ? m->tokens : m->context;
        nb.tokens += t;
        nb.prefill_sq += t * t;
        nb.n_prefill++;
    }
    *b = nb;
}

/* A leap sink's same-set stretches.  A fast-path decode step (every running
 * request decodes) right after another one, with R unchanged in between
 * but for the requests that finished (no admission or preemption), has the
 * same members but those, and each of them made a token at the end of the
 * step before, which is this step's start: the sink gets it with leapt = 1
 * and no members, as a V1 leap's step (sched.h, sched_leap_fn), and the
 * stretch's requests are told once, before any later step lists members
 * (sched_emit), when someone finishes (a new stretch of the others may
 * start with the next step) or at a preemption.  The step records are otherwise the same, so the
 * run's results are identical to listing every member. */
static void v0_leap_step(sched *s)
{
    if (s->lk_steps == 0) { /* a stretch starts: R is its set */
        for (int64_t i = 0; i < s->n_run; i++)
            s->lk_ids[i] = s->run[i].id;
        s->lk_n = s->n_run;
    }
    assert(s->lk_n == s->n_run);
    s->lk_steps++;
    s->step.leapt = 1;
}

void sched_same_set_step(sched *s, const int32_t *ids, int64_t n)
{
    if (s->lk_steps == 0) { /* a stretch starts: ids are its set */
        memcpy(s->lk_ids, ids, (size_t)n * sizeof *ids);
        s->lk_n = n;
    }
    assert(s->lk_n == n);
    s->lk_steps++;
}

void sched_same_set_flush(sched *s)
{
    if (s->lk_steps == 0)
        return;
    s->leap_fn(s->sink_ctx, s->lk_ids, s->lk_n, s->lk_steps, NULL);
    s->lk_steps = 0;
    s->lk_n = 0;
}

/* The lazy stretch (sched_internal.h).  In a same-set step every entry
 * decodes: it takes a block when its room is 0 (paged), then ctx + 1 and
 * room - 1.  With room r in [0, bs) at the base, entry i takes a block at
 * the steps j (1-based) with (j - 1) mod bs == r, so a step's blocks are
 * lz_cnt[(j - 1) mod bs]; its KV read is lz_sum + n * j; the first finish
 * comes at step min(left).  The same numbers in the same order as the
 * entry-by-entry pass. */
static int lazy_start(sched *s)
{
    const int64_t bs = s->cfg.block_size;
    const int grows = s->alloc->grows;
    int64_t sum = 0, first = INT64_MAX;
    for (int64_t i = 0; i < s->n_run; i++) {
        const sched_entry *e = &s->run[i];
        if (grows && (e->room < 0 || e->room >= bs))
            return 0; /* a swap-in's full block: one plain step first */
        sum += e->ctx;
        if (e->left < first)
            first = e->left;
    }
    memset(s->lz_cnt, 0, (size_t)bs * sizeof *s->lz_cnt);
    if (grows)
        for (int64_t i = 0; i < s->n_run; i++)
            s->lz_cnt[s->run[i].room]++;
    s->lz_on = 1;
    s->lz_n = s->n_run;
    s->lz_j = s->lz_fin = 0;
    s->lz_first = first;
    s->lz_sum = sum;
    return 1;
}

void sched_v0_lazy_write(sched *s)
{
    if (!s->lz_on)
        return;
    /* j = q bs + m steps: an entry of room r in [0, bs) took a block at the
     * steps 1 + r + k bs <= j, that is q of them, plus one if r < m, and
     * has r - j mod bs slots left */
    const int64_t bs = s->cfg.block_size, j = s->lz_j, q = j / bs, m = j % bs;
    const int grows = s->alloc->grows;
    for (int64_t i = 0; i < s->lz_n; i++) {
        sched_entry *e = &s->run[i];
        e->ctx += j;
        e->left -= s->lz_fin;
        if (grows) {
            int64_t r = e->room;
            e->blocks += q + (r < m);
            e->room = r >= m ? r - m : r - m + bs;
        } else {
            e->room -= j;
        }
    }
    s->lz_on = 0;
}

/* One same-set step of the lazy stretch: blocks taken and KV read. */
static void lazy_step(sched *s, int64_t *kv_read)
{
    assert(s->lz_on && s->lz_n == s->n_run && s->lz_fin == s->lz_j);
    const int64_t j = ++s->lz_j;
    if (s->alloc->grows) {
        int64_t taken = s->lz_cnt[(j - 1) % s->cfg.block_size];
        s->free_blocks -= taken;
        sched_blocks_taken(s);
    }
    *kv_read = s->lz_sum + s->n_run * j;
}

/* A V0 leap (docs/semantics.md section 7, "Leaps (V0)"): the step just emitted,
 * ending at t, is a lazy same-set step.  While the next step would start
 * before s->horizon, nobody makes its last token at the end of the step
 * before (lz_j < lz_first) and the free blocks cover a block per running
 * request, the next plan's decisions are those of the step before:
 * admission takes nobody and leaves the same limit (W, its head and R are
 * unchanged and F only went down; under lpm W's order changes only when a
 * block is evicted, so a waiting queue and an eviction end the leap),
 * priority preemption finds the same victim no worse than the same head,
 * and the decode step is the fast path's, sunk leapt.  Each such step is
 * planned here, in O(1) (lazy_step): the step record is the last one with
 * its index, start, duration, KV read and blocks changed, as the
 * step-by-step engine would write it.  ev: the prefix cache's evictions
 * when the plan's admission ran.  Returns the end of the last step. */
/* Whether a leap may form the step starting at t: before the horizon; or,
 * when the event loop lets the engine take its arrivals in
 * (sched_set_arrivals), before any other external event, after the
 * arrivals due by t have joined W.  That is taken only under fcfs without
 * priority preemption and with requests already waiting: W's head is then
 * held up (the leap's first plan admitted nobody, and F only fell since),
 * an arrival joins W's tail (it arrived last), and admission, which stops
 * at the head, decides what it decided before.  An arrival into an empty
 * W could be admitted: it is left to the event loop, and the leap ends.
 * O(1 + arrivals taken). */
static int leap_may_form(sched *s, double t)
{
    if (t < s->horizon)
        return 1;
    if (!s->arr_cur || t >= s->arr_other_s || s->cfg.policy != SCHED_POLICY_FCFS ||
        s->cfg.priority_preemption)
        return 0;
    for (int64_t id; (id = sched_arrival_due(s, t)) >= 0;) {
        if (s->wq.n == 0)
            return 0;
        sched_arrival_taken(s, id);
        sched_arrive(s, id);
    }
    return 1;
}

static double v0_leap(sched *s, double t, int64_t ev)
{
    sched_step *st = &s->step;
    const int watch = s->lpm && s->wq.n > 0; /* lpm: an eviction may change W's head */
    assert(s->lz_on && st->leapt && st->n_preempted == 0 && s->swq.n == 0);
    /* the leap's batches differ in kv_read alone */
    const cost_run *run = cost_run_get(&s->lz_runs, s->cost, &st->batch);
    while (s->lz_j < s->lz_first && s->free_blocks >= s->n_run &&
           !(watch && s->ctr.prefix_evictions != ev) && leap_may_form(s, t)) {
        s->lz_fin = s->lz_j; /* the step ending at t, as sched_finish_continuous */
        int64_t kv_read;
        lazy_step(s, &kv_read);
        st->batch.kv_read = kv_read;
        assert(s->lk_n == s->n_run && s->lk_steps > 0);
        s->lk_steps++;
        double d = cost_run_s(run, kv_read) + /* = cost_step_s(s->cost, &st->batch) */
                   (double)(st->swap_out_blocks + st->swap_in_blocks) * s->cfg.swap_block_s;
        st->dur_s = d;
        sched_emit(s, t);
        s->ctr.leap_steps++;
        t += d;
    }
    return t;
}

/* Step 6's fast path: the free blocks cover one new block per running
 * request, so no request can be preempted or skipped, and the blocks are
 * taken in the same pass that advances the contexts (the same result as
 * the two passes).  A step with the members of the last one (armed) is
 * sunk leapt (sched_same_set_flush), in O(1) as a lazy stretch.  Adds the
 * KV read to *kv_read; returns the decodes. */
static int64_t decode_fast(sched *s, int armed, int64_t *kv_read)
{
    const int grows = s->alloc->grows;
    const int64_t bs = s->cfg.block_size;
    const int leapt = armed && s->leap_fn && s->step.n_preempted == 0 && !s->cfg.kv_cache_off &&
                      s->n_run > 0;
    const int list = s->want_members && !leapt;
    if (leapt && (s->lz_on || lazy_start(s))) {
        lazy_step(s, kv_read);
    } else {
        sched_v0_lazy_write(s);
        int64_t taken = 0;
        int last = 0;
        for (int64_t i = 0; i < s->n_run; i++) {
            sched_entry *e = &s->run[i];
            last |= e->left == 1;
            if (grows && e->room == 0) {
                taken++;
                e->blocks++;
                e->room = bs;
            }
            e->ctx++;
            e->room--;
            *kv_read += e->ctx;
            if (list)
                sched_add_member(s, e->id, SCHED_MEMBER_DECODE, 1, e->ctx);
        }
        s->free_blocks -= taken;
        sched_blocks_taken(s);
        s->last_token = last;
    }
    const int64_t n_decode = s->n_run;
    if (leapt)
        v0_leap_step(s);
    s->lk_armed = s->leap_fn != NULL;
    return n_decode;
}

/* Step 6 otherwise: blocks for the decodes first (preempting or skipping
 * as the rules say), swap-in in a step that preempted nobody, then every
 * request not skipped decodes.  Adds the KV read to *kv_read; returns the
 * decodes. */
static int64_t decode_slow(sched *s, double now, int32_t carry_preempted, int64_t *kv_read)
{
    int64_t n_decode = 0;
    sched_v0_lazy_write(s);
    if (s->alloc->grows)
        sched_take_decode_blocks(s, now);
    const int64_t swap_mark = s->n_run;
    /* swap-in only in a step that preempted nobody (this iteration) */
    if (s->step.n_preempted == carry_preempted && s->swq.n > 0)
        swap_in(s, now);
    for (int64_t i = 0; i < s->n_run; i++) {
        sched_entry *e = &s->run[i];
        if (e->skip)
            continue;
        e->ctx++;
        e->room--;
        *kv_read += e->ctx;
        n_decode++;
        if (s->want_members)
            sched_add_member(s, e->id, i >= swap_mark ? SCHED_MEMBER_SWAPIN : SCHED_MEMBER_DECODE,
                             1, e->ctx);
    }
    return n_decode;
}

/* One iteration of section 3 at `now`, and the V0 leap that may follow
 * (sched_plan_continuous without the inlined event loop). */
static int plan_once(sched *s, double now, double *t_end)
{
    const int64_t ev = s->ctr.prefix_evictions; /* before this plan's admission */
    s->last_token = 1;
    /* Preemptions and swap-outs of an iteration that ended empty (it takes
     * no time) belong to the step the engine forms next at this instant. */
    int32_t carry_preempted = 0;
    int64_t carry_swap_out = 0;
    const int armed = s->lk_armed; /* run[] unchanged since the last step, a full decode */
    s->lk_armed = 0;
    if (s->lz_on && (!armed || s->swq.n > 0 || (s->cfg.priority_preemption && s->wq.n > 0)))
        sched_v0_lazy_write(s);
    for (;;) {
        memset(&s->step, 0, sizeof s->step);
        s->step.n_preempted = carry_preempted;
        s->step.swap_out_blocks = carry_swap_out;
        s->n_members = 0;
        if (s->wq.n == 0 && s->n_run == 0 && s->swq.n == 0)
            return SCHED_PLAN_IDLE;
        /* 3. admission; none while any request is swapped out */
        if (s->swq.n > 0)
            s->step.limit = SCHED_LIMIT_KV;
        if (s->swq.n == 0 && sched_v0_admit(s) > 0) {
            sched_v0_lazy_write(s); /* R grew: the stretch is over */
            s->last_token = 0;
            for (int64_t i = s->run_mark; i < s->n_run; i++)
                s->last_token |= !s->run[i].skip && s->run[i].left == 1;
            s->step.kind = SCHED_STEP_PREFILL;
            s->active = SCHED_ACTIVE_PREFILL;
            break;
        }
        s->run_mark = s->n_run;
        /* 5. priority preemption */
        if (s->cfg.priority_preemption && s->wq.n > 0 && s->swq.n == 0)
            sched_v0_priority_preempt(s, now);
        /* 6. decode step over every running request.  Fast path: when the
         * free blocks cover one new block per running request, no request
         * can be preempted or skipped, so the blocks are taken in the same
         * pass that advances the contexts (same result as the two passes). */
        cost_batch *b = &s->step.batch;
        int64_t kv_read = 0, n_decode;
        if (s->free_blocks >= s->n_run && s->swq.n == 0)
            n_decode = decode_fast(s, armed, &kv_read);
        else
            n_decode = decode_slow(s, now, carry_preempted, &kv_read);
        b->kv_read = kv_read;
        b->n_decode = n_decode;
        b->tokens = n_decode;
        if (s->step.n_preempted > 0)
            s->step.limit = SCHED_LIMIT_KV;
        if (n_decode > 0) {
            s->step.kind = SCHED_STEP_DECODE;
            s->active = SCHED_ACTIVE_DECODE;
            break;
        }
        if (s->n_run > 0) {
            snprintf(s->errmsg, sizeof s->errmsg,
                     "stuck at t=%.6f s: all %lld running requests need a KV block and "
                     "none is free with --preemption off",
                     now, (long long)s->n_run);
            return SCHED_PLAN_STUCK;
        }
        /* An empty step takes no time: iterate again at the same instant. */
        carry_preempted = s->step.n_preempted;
        carry_swap_out = s->step.swap_out_blocks;
    }
    if (s->cfg.kv_cache_off)
        no_cache_batch(s, &s->step.batch);
    double d;
    if (s->step.leapt) { /* a lazy same-set step: priced as its leap's (v0_leap) */
        d = cost_run_s(cost_run_get(&s->lz_runs, s->cost, &s->step.batch),
                       s->step.batch.kv_read);
    } else {
        d = cost_step_s(s->cost, &s->step.batch);
    }
    d += (double)(s->step.swap_out_blocks + s->step.swap_in_blocks) * s->cfg.swap_block_s;
    s->step.dur_s = d;
    sched_emit(s, now);
    *t_end = now + d;
    s->lz_ev = ev;
    if (s->lz_on && s->step.leapt && *t_end < s->horizon)
        *t_end = v0_leap(s, *t_end, ev);
    return SCHED_PLAN_STEP;
}

/* The event loop, inlined (docs/semantics.md section 7, "Leaps (V0)"): the
 * step in flight, a prefill or a decode that took every running request
 * (the fast path), ends at t before the horizon and nobody makes its last
 * token there; then what the loop would do at t, end the step and plan the
 * next one, is done here, with the same calls in the same order.  Only
 * while the free blocks cover a block per running request: that plan then
 * forms a step (it preempts nobody for blocks, so R, not empty, stays; a
 * priority preemption that empties R admits the head it was for), where
 * preemptions could otherwise leave it idle (every victim rejected on its
 * way back) or stuck (--preemption off).  O(1). */
static int inline_next(const sched *s, double t)
{
    const int last = s->lz_on && s->active == SCHED_ACTIVE_DECODE ? s->lz_j >= s->lz_first
                                                                   : s->last_token;
    /* the next plan's admission may reject, which must come before
     * horizon_near (sched_set_horizon_pair) */
    return s->leap_fn && t < s->horizon && t < s->horizon_near && !last &&
           s->free_blocks >= s->n_run;
}

/* The last plan ended on a lazy same-set step (s->step still its record)
 * whose successor would have started at or past that plan's horizon, and
 * nothing arrived since (sched_arrive clears lz_paused): what plan_once
 * would do at now is v0_leap's next step, so the leap goes on from now
 * (the last step's end, which v0_finish has applied: lz_fin = lz_j).  1
 * with *t_end set if it planned a step; 0 if v0_leap's conditions fail,
 * and then nothing changed.  O(1) plus the steps. */
static int v0_resume(sched *s, double now, double *t_end)
{
    s->lz_paused = 0;
    if (!(now < s->horizon) || !s->lz_on || !s->step.leapt || s->swq.n != 0 ||
        s->lz_fin != s->lz_j)
        return 0;
    const int64_t before = s->ctr.leap_steps;
    s->active = SCHED_ACTIVE_DECODE; /* the step v0_leap finishes first is the last one */
    double t = v0_leap(s, now, s->lz_ev);
    if (s->ctr.leap_steps == before) {
        s->active = SCHED_ACTIVE_NONE;
        return 0;
    }
    s->ctr.leap_resumes++;
    *t_end = t;
    return 1;
}

int sched_plan_continuous(sched *s, double now, double *t_end)
{
    if (s->lz_paused && v0_resume(s, now, t_end))
        return SCHED_PLAN_STEP;
    int rc = plan_once(s, now, t_end);
    while (rc == SCHED_PLAN_STEP && inline_next(s, *t_end)) {
        double t = *t_end;
        sched_finish_continuous(s, t); /* as v0_finish */
        s->active = SCHED_ACTIVE_NONE;
        s->ctr.leap_steps++;
        rc = plan_once(s, t, t_end);
        assert(rc == SCHED_PLAN_STEP); /* R is not empty and nobody is stuck */
    }
    s->lz_paused = rc == SCHED_PLAN_STEP && s->lz_on && s->step.leapt &&
                   s->active == SCHED_ACTIVE_DECODE && s->leap_fn && s->horizon > -INFINITY;
    return rc;
}

/* With prefix caching the blocks are returned after the finish loop
 * (sched_finish_continuous), which keeps calls out of the loop. */
void sched_v0_finish_entry(sched *s, sched_entry *e, double t)
{
    if (s->pc.on)
        s->fin[s->n_fin++] = *e;
    else
        s->free_blocks += e->blocks;
    s->res[e->id].finish_s = t;
    s->res[e->id].status = SCHED_REQ_FINISHED;
    s->state[e->id] = SCHED_REQ_FINISHED;
    s->g[e->id] = s->reqs[e->id].output_tokens;
    s->ctr.n_finished++;
}

void sched_finish_continuous(sched *s, double t)
{
    if (s->lz_on && s->active == SCHED_ACTIVE_DECODE) { /* a lazy step ended */
        if (s->lz_j < s->lz_first) {
            s->lz_fin = s->lz_j; /* every left went down by one, none to 0 */
            return;
        }
        sched_v0_lazy_write(s); /* someone finishes: the plain pass below */
    }
    int64_t from = s->active == SCHED_ACTIVE_PREFILL ? s->run_mark : 0;
    int64_t out = from;
    for (int64_t i = from; i < s->n_run; i++) {
        sched_entry *e = &s->run[i];
        if (e->skip) {
            e->skip = 0;
        } else {
            if (e->fresh) { /* g went 0 -> 1 */
                s->res[e->id].first_token_s = t;
                e->fresh = 0;
            }
            if (--e->left == 0) {
                if (s->lk_steps > 0) /* its last tokens came in the stretch */
                    sched_same_set_flush(s);
                /* lk_armed stays: the others made a token at t, and a next
                 * step of theirs alone is a same-set step of a new stretch */
                sched_v0_finish_entry(s, e, t);
                continue;
            }
        }
        if (out != i)
            s->run[out] = *e;
        out++;
    }
    s->n_run = out;
    if (s->n_fin > 0) {
        for (int64_t k = 0; k < s->n_fin; k++) /* in R's order */
            sched_pc_release(s, &s->fin[k]);
        s->n_fin = 0;
    }
}
