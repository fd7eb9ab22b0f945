/* chunked.c — chunked prefill and prefix-cached admission,
 * docs/semantics-extensions.md sections C and P.
 *
 * A chunk computes q new prompt tokens of a request over the c tokens it
 * already stores (earlier chunks, or blocks shared from the prefix cache).
 * sched_admit_chunks is the admission walk of W under either feature: each
 * request's first chunk (the whole rest of its prompt when `whole`).
 * sched_plan_chunked is one iteration with chunked prefill: every running
 * decode first (taking blocks, preempting as in a decode step), then the
 * chunk of the running partial prompt(s), then first chunks of waiting
 * requests in policy order, while the step's token budget lasts. */
#include <stdio.h>
#include <string.h>

#include "sched_internal.h"

/* Plan a chunk of request id whose prompt of this admission is `target`
 * (P + g) tokens, which stores ctx0 tokens in blocks0 blocks (both 0 for a
 * first chunk, whose cached part then comes from the prefix cache), computing
 * at most qmax >= 1 tokens.  Returns 1 if its net cost fits in `avail`
 * blocks (then the cache lookups are left in pc.scratch for commit_chunk),
 * else 0.  Cost: O(log) for the hit search plus O(blocks of the chunk) with
 * prefix caching, stopping early once the chunk cannot fit; else O(1). */
static int plan_chunk(sched *s, int32_t id, int64_t target, int64_t ctx0, int64_t blocks0,
                      int64_t qmax, int64_t avail, sched_chunk *c)
{
    const int64_t bs = s->cfg.block_size;
    const int first = blocks0 == 0 && ctx0 == 0;
    memset(c, 0, sizeof *c);
    if (first && s->pc.on) {
        c->hit_blocks = sched_pc_match(s, id);
        int64_t hit = c->hit_blocks * bs;
        ctx0 = hit < target - 1 ? hit : target - 1; /* the last token is always computed */
    }
    c->cached = ctx0;
    int64_t rest = target - ctx0;
    c->q = rest < qmax ? rest : qmax;
    int64_t ctx1 = ctx0 + c->q;
    if (s->alloc->grows)
        c->blocks = sched_ceil_div(ctx1, bs);
    else
        c->blocks = first ? s->alloc->admit_blocks(&s->cfg, &s->reqs[id], target) : blocks0;
    c->cost = c->blocks - blocks0;
    if (!s->pc.on)
        return c->cost <= avail;
    /* blocks held by other requests cost nothing: the chunk fits if at least
     * cost - avail of the blocks it will hold are such */
    int64_t busy;
    c->k0 = first ? 0 : sched_pc_blocks(s, id, ctx0);
    c->k1 = sched_pc_blocks(s, id, ctx1);
    if (!sched_pc_scan(s, id, c->k0, c->k1, c->cost - avail, &busy))
        return 0;
    c->cost -= busy;
    return 1;
}

/* Take the chunk's blocks, store its tokens in entry e, and add it to the
 * step (member and cost features). */
static void commit_chunk(sched *s, sched_entry *e, const sched_chunk *c)
{
    if (s->pc.on)
        sched_pc_commit(s, e->id, c->k0, c->k1, c->cost);
    else
        s->free_blocks -= c->cost;
    e->ctx = c->cached + c->q;
    e->blocks = c->blocks;
    e->room = c->blocks * s->cfg.block_size - e->ctx;
    cost_batch *b = &s->step.batch;
    b->tokens += c->q;
    b->prefill_sq += c->q * c->q;
    b->prefill_ctx += c->q * c->cached;
    b->prefill_cached += c->cached;
    b->n_prefill++;
    s->ctr.prefill_chunks += s->cfg.chunked_prefill; /* a whole prompt is no chunk */
    sched_add_member(s, e->id, SCHED_MEMBER_PREFILL, c->q, e->ctx);
}

int64_t sched_admit_chunks(sched *s, int64_t *budget, int whole)
{
    const sched_config *cfg = &s->cfg;
    int64_t admitted = 0;
    while (s->wq.n > 0 && *budget > 0) {
        int32_t id = sched_waitq_peek(&s->wq);
        const trace_req *r = &s->reqs[id];
        int64_t target = r->prompt_tokens + s->g[id];
        int64_t nb = s->alloc->admit_blocks(cfg, r, target);
        if (nb > cfg->total_blocks - s->watermark_blocks ||
            (whole && target > cfg->max_batched_tokens) ||
            r->prompt_tokens + r->output_tokens > cfg->max_model_len) {
            sched_waitq_pop(&s->wq);
            sched_reject(s, id,
                         r->prompt_tokens + r->output_tokens > cfg->max_model_len
                             ? SCHED_REJECT_CONTEXT
                         : whole && target > cfg->max_batched_tokens ? SCHED_REJECT_TOKEN_BUDGET
                                                                     : SCHED_REJECT_KV_CAPACITY);
            continue;
        }
        if (s->n_run >= cfg->max_seqs) {
            s->step.limit = SCHED_LIMIT_MAX_SEQS;
            break;
        }
        sched_chunk c;
        if (!plan_chunk(s, id, target, 0, 0, whole ? target : *budget,
                        s->free_blocks - s->watermark_blocks, &c)) {
            /* a whole prompt over the budget left is the budget's, as in
             * step 3's order (max-seqs, tokens, blocks) */
            s->step.limit = whole && target > *budget ? SCHED_LIMIT_TOKEN_BUDGET : SCHED_LIMIT_KV;
            break;
        }
        if (c.q > *budget) {
            s->step.limit = SCHED_LIMIT_TOKEN_BUDGET;
            break;
        }
        sched_waitq_pop(&s->wq);
        sched_entry *e = &s->run[s->n_run++];
        e->id = id;
        e->pad_ = 0;
        e->left = r->output_tokens - s->g[id];
        e->fresh = e->left == r->output_tokens;
        commit_chunk(s, e, &c);
        e->prefill = e->ctx < target;
        e->skip = e->prefill; /* an unfinished prompt generates no token */
        s->state[id] = SCHED_REQ_RUNNING;
        s->res[id].status = SCHED_REQ_RUNNING;
        *budget -= c.q;
        admitted++;
        if (s->pc.on) {
            s->ctr.prefix_query_blocks += sched_pc_blocks(s, id, target);
            s->ctr.prefix_hit_blocks += c.hit_blocks;
            s->ctr.prefix_query_tokens += target;
            s->ctr.prefix_hit_tokens += c.hit_blocks * cfg->block_size;
            s->ctr.prefix_saved_tokens += c.cached;
        }
    }
    if (s->wq.n > 0 && *budget <= 0)
        s->step.limit = SCHED_LIMIT_TOKEN_BUDGET;
    return admitted;
}


int sched_plan_chunked(sched *s, double now, double *t_end)
{
    const sched_config *cfg = &s->cfg;
    int32_t carry_preempted = 0; /* preemptions of iterations that ended empty */
    for (;;) {
        memset(&s->step, 0, sizeof s->step);
        s->step.n_preempted = carry_preempted;
        s->n_members = 0;
        if (s->wq.n == 0 && s->n_run == 0)
            return SCHED_PLAN_IDLE;
        sched_take_decode_blocks(s, now);
        /* 1. every running decode */
        cost_batch *b = &s->step.batch;
        int64_t n_run0 = s->n_run;
        for (int64_t i = 0; i < n_run0; i++) {
            sched_entry *e = &s->run[i];
            if (e->skip)
                continue;
            e->ctx++;
            e->room--;
            b->kv_read += e->ctx;
            b->n_decode++;
            if (s->want_members)
                sched_add_member(s, e->id, SCHED_MEMBER_DECODE, 1, e->ctx);
        }
        b->tokens = b->n_decode;
        int64_t budget = cfg->max_batched_tokens - b->n_decode;
        /* 2. chunks of the running partial prompts, in R's order */
        int blocked = 0;
        for (int64_t i = 0; i < n_run0 && budget > 0; i++) {
            sched_entry *e = &s->run[i];
            if (!e->prefill)
                continue;
            const trace_req *r = &s->reqs[e->id];
            int64_t target = r->prompt_tokens + r->output_tokens - e->left;
            sched_chunk c;
            if (!plan_chunk(s, e->id, target, e->ctx, e->blocks, budget, s->free_blocks, &c)) {
                blocked = 1; /* waits for blocks; nothing behind it starts */
                break;
            }
            commit_chunk(s, e, &c);
            budget -= c.q;
            e->prefill = e->ctx < target;
            e->skip = e->prefill;
        }
        /* 3. first chunks of waiting requests */
        if (!blocked && budget > 0)
            sched_admit_chunks(s, &budget, 0);
        else if (s->wq.n > 0)
            s->step.limit = blocked ? SCHED_LIMIT_KV : SCHED_LIMIT_TOKEN_BUDGET;
        if (s->step.n_preempted > 0)
            s->step.limit = SCHED_LIMIT_KV;
        if (b->n_decode > 0 || b->n_prefill > 0) {
            s->step.kind = b->n_decode == 0   ? SCHED_STEP_PREFILL
                           : b->n_prefill == 0 ? SCHED_STEP_DECODE
                                               : SCHED_STEP_MIXED;
            s->active = SCHED_ACTIVE_CHUNKED;
            break;
        }
        carry_preempted = s->step.n_preempted;
        if (s->n_run == 0)
            continue; /* everything waiting was rejected: an empty step takes no time */
        if (cfg->preemption == SCHED_PREEMPT_OFF) {
            snprintf(s->errmsg, sizeof s->errmsg,
                     "stuck at t=%.6f s: none of %lld running requests can get a KV block "
                     "with --preemption off",
                     now, (long long)s->n_run);
            return SCHED_PLAN_STUCK;
        }
        /* nothing could run: free memory by preempting the victim */
        sched_preempt_at(s, sched_victim_index(s), now, 1);
        carry_preempted = s->step.n_preempted;
    }
    s->step.dur_s = cost_step_s(s->cost, &s->step.batch);
    sched_emit(s, now);
    *t_end = now + s->step.dur_s;
    return SCHED_PLAN_STEP;
}
