/* static_batch.c — static (request-level) batching, docs/semantics.md
 * section 4: FasterTransformer-style padded batches.  An idle engine forms a
 * batch from the head of the waiting queue; every member reserves
 * ceil((Pmax + Omax) / block_size) blocks; the batch runs one prefill step
 * padded to Pmax and Omax - 1 decode steps; nobody joins or leaves early.
 * Extension: with batch_timeout_s > 0 an idle engine waits until the queue
 * holds max_seqs requests or batch_timeout_s has passed since
 * max(engine idle, head arrival), whichever comes first. */
#include <math.h>
#include <string.h>

#include "sched_internal.h"

static void set_member(sched *s, int64_t i, int32_t kind, int64_t tokens, int64_t ctx)
{
    sched_member *m = &s->members[i];
    m->req_id = s->batch[i];
    m->kind = kind;
    m->tokens = tokens;
    m->context = ctx;
}

/* Form a batch from the head of W.  Returns its size (0: W emptied by
 * rejections). */
static int64_t form_batch(sched *s)
{
    const sched_config *c = &s->cfg;
    int64_t cnt = 0, pmax = 0, omax = 0;
    while (s->wq.n > 0 && cnt < c->max_seqs) {
        int32_t id = sched_waitq_peek(&s->wq);
        const trace_req *r = &s->reqs[id];
        int64_t len = r->prompt_tokens + r->output_tokens;
        if (len > c->max_model_len || sched_ceil_div(len, c->block_size) > c->total_blocks) {
            sched_waitq_pop(&s->wq);
            sched_reject(s, id, len > c->max_model_len ? SCHED_REJECT_CONTEXT
                                                       : SCHED_REJECT_KV_CAPACITY);
            continue;
        }
        int64_t pm = r->prompt_tokens > pmax ? r->prompt_tokens : pmax;
        int64_t om = r->output_tokens > omax ? r->output_tokens : omax;
        int64_t per = sched_ceil_div(pm + om, c->block_size);
        /* (cnt + 1) * per <= F, written without a product that could overflow */
        if (per > s->free_blocks / (cnt + 1))
            break;
        sched_waitq_pop(&s->wq);
        s->batch[cnt++] = id;
        pmax = pm;
        omax = om;
    }
    s->n_batch = cnt;
    s->batch_pmax = pmax;
    s->batch_omax = omax;
    s->batch_k = 0;
    s->batch_blocks = cnt * sched_ceil_div(pmax + omax, c->block_size);
    return cnt;
}

int sched_plan_static(sched *s, double now, int more_arrivals, double *t_end)
{
    memset(&s->step, 0, sizeof s->step);
    s->n_members = 0;
    cost_batch *b = &s->step.batch;
    if (s->n_batch == 0) {
        if (s->wq.n == 0)
            return SCHED_PLAN_IDLE;
        if (s->cfg.batch_timeout_s > 0.0 && more_arrivals && s->wq.n < s->cfg.max_seqs) {
            double head = s->reqs[sched_waitq_peek(&s->wq)].arrival_s;
            double deadline = (head > s->idle_since ? head : s->idle_since) + s->cfg.batch_timeout_s;
            if (now < deadline) {
                *t_end = deadline;
                return SCHED_PLAN_WAIT;
            }
        }
        if (form_batch(s) == 0)
            return SCHED_PLAN_IDLE;
        s->free_blocks -= s->batch_blocks;
        for (int64_t i = 0; i < s->n_batch; i++) {
            s->state[s->batch[i]] = SCHED_REQ_RUNNING;
            s->res[s->batch[i]].status = SCHED_REQ_RUNNING;
            set_member(s, i, SCHED_MEMBER_PREFILL, s->batch_pmax, s->batch_pmax);
        }
        b->n_prefill = s->n_batch;
        b->tokens = s->n_batch * s->batch_pmax;
        b->prefill_sq = s->n_batch * s->batch_pmax * s->batch_pmax;
        s->step.kind = SCHED_STEP_PREFILL;
        /* the first request that did not fit F ended the batch */
        s->step.limit = s->wq.n == 0 ? SCHED_LIMIT_NONE_WAITING
                        : s->n_batch >= s->cfg.max_seqs ? SCHED_LIMIT_MAX_SEQS
                                                        : SCHED_LIMIT_KV;
    } else {
        s->step.limit = s->wq.n == 0 ? SCHED_LIMIT_NONE_WAITING : SCHED_LIMIT_OTHER;
        int64_t ctx = s->batch_pmax + s->batch_k; /* decode k: context after */
        for (int64_t i = 0; i < s->n_batch; i++)
            set_member(s, i, SCHED_MEMBER_DECODE, 1, ctx);
        b->n_decode = s->n_batch;
        b->tokens = s->n_batch;
        b->kv_read = s->n_batch * ctx;
        s->step.kind = SCHED_STEP_DECODE;
    }
    s->n_members = s->n_batch;
    s->active = SCHED_ACTIVE_STATIC;
    s->step.dur_s = cost_step_s(s->cost, b);
    sched_emit(s, now);
    *t_end = now + s->step.dur_s;
    return SCHED_PLAN_STEP;
}

void sched_finish_static(sched *s, double t)
{
    if (s->batch_k == 0)
        for (int64_t i = 0; i < s->n_batch; i++)
            s->res[s->batch[i]].first_token_s = t;
    s->batch_k++;
    if (s->batch_k < s->batch_omax)
        return;
    for (int64_t i = 0; i < s->n_batch; i++) {
        int32_t id = s->batch[i];
        s->res[id].finish_s = t;
        s->res[id].status = SCHED_REQ_FINISHED;
        s->state[id] = SCHED_REQ_FINISHED;
        s->g[id] = s->reqs[id].output_tokens;
        s->ctr.n_finished++;
    }
    s->free_blocks += s->batch_blocks;
    s->n_batch = 0;
    s->idle_since = t;
}
