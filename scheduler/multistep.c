/* multistep.c — vLLM V0's multi-step scheduling (--num-scheduler-steps K >
 * 1, vLLM 0.6.x), docs/semantics-extensions.md section M.
 *
 * A plan that runs a decode step starts a group of K decode steps over the
 * running list R: each request first takes the blocks its next K tokens
 * need (preempting the policy-last request by recompute while the free
 * blocks fall short, M2), and the K - 1 plans that follow repeat the same
 * batch without consulting the scheduler: nothing is admitted, preempted
 * or finished inside a group (M1).  A request whose last token comes
 * before the group's end keeps decoding, its extra tokens discarded (M3).
 * The group's tokens reach the client at the end of its last step: the
 * earlier steps are marked held (sched_step.held), and that end is when
 * the group's finished requests finish (M4).  A prefill step is a single
 * step, as in docs/semantics.md section 3.  The steps after a group's
 * first are priced without the cost model's CPU overhead (M5).  No leaps:
 * every step is planned one by one.  Cost: O(|R|) per step, plus the
 * preemptions' O(|R|) each. */
#include <assert.h>
#include <string.h>

#include "sched_internal.h"

/* M2: in running order, a request with room for fewer than K tokens takes
 * ceil((K - room) / bs) blocks; while the free blocks fall short the
 * policy-last request is preempted (recompute), possibly the request
 * itself, which then takes nothing. */
static void take_group_blocks(sched *s, double now)
{
    const int64_t K = s->cfg.num_scheduler_steps, bs = s->cfg.block_size;
    int64_t i = 0;
    while (i < s->n_run) {
        sched_entry *e = &s->run[i];
        if (e->room >= K) {
            i++;
            continue;
        }
        const int64_t need = sched_ceil_div(K - e->room, bs);
        if (sched_preempt_for(s, &i, need, now))
            continue; /* run[i] is now the next request */
        e = &s->run[i];
        s->free_blocks -= need;
        e->blocks += need;
        e->room += need * bs;
        i++;
    }
}

/* One step of the group (M3): every request of R decodes, one more token
 * of KV each, into blocks taken at the group's start. */
static void group_step(sched *s)
{
    int64_t kv_read = 0;
    for (int64_t i = 0; i < s->n_run; i++) {
        sched_entry *e = &s->run[i];
        assert(e->room > 0 && !e->prefill && !e->fresh && !e->skip);
        e->ctx++;
        e->room--;
        kv_read += e->ctx;
        if (s->want_members)
            sched_add_member(s, e->id, SCHED_MEMBER_DECODE, 1, e->ctx);
    }
    cost_batch *b = &s->step.batch;
    b->kv_read = kv_read;
    b->n_decode = s->n_run;
    b->tokens = s->n_run;
    s->step.kind = SCHED_STEP_DECODE;
    s->active = SCHED_ACTIVE_DECODE;
}

/* A plan that consults the scheduler (section 3 with M1-M2): a prefill
 * step if step 3 admits somebody, else the first step of a group over R
 * once its blocks are taken.  SCHED_PLAN_STEP or SCHED_PLAN_IDLE. */
static int plan_scheduled(sched *s, double now)
{
    int32_t carry_preempted = 0;
    for (;;) {
        memset(&s->step, 0, sizeof s->step);
        s->step.n_preempted = carry_preempted;
        s->n_members = 0;
        if (s->wq.n == 0 && s->n_run == 0)
            return SCHED_PLAN_IDLE;
        if (sched_v0_admit(s) > 0) { /* a prefill step: never part of a group */
            s->step.kind = SCHED_STEP_PREFILL;
            s->active = SCHED_ACTIVE_PREFILL;
            return SCHED_PLAN_STEP;
        }
        s->run_mark = s->n_run;
        if (s->cfg.priority_preemption && s->wq.n > 0)
            sched_v0_priority_preempt(s, now);
        take_group_blocks(s, now);
        if (s->step.n_preempted > 0)
            s->step.limit = SCHED_LIMIT_KV;
        if (s->n_run > 0) {
            s->ms_left = s->cfg.num_scheduler_steps - 1;
            group_step(s);
            s->step.held = 1; /* K > 1: the group goes on */
            return SCHED_PLAN_STEP;
        }
        /* every request was preempted: an empty step takes no time, so the
         * scheduler runs again at the same instant (section 3.7) */
        carry_preempted = s->step.n_preempted;
    }
}

int sched_plan_multistep(sched *s, double now, double *t_end)
{
    assert(s->cfg.num_scheduler_steps > 1 && !s->pc.on && s->alloc->grows);
    double overhead = 0.0;
    if (s->ms_left > 0) { /* M1: the group goes on, the scheduler is not asked */
        assert(s->n_run > 0);
        memset(&s->step, 0, sizeof s->step);
        s->n_members = 0;
        s->step.limit = s->wq.n > 0 ? SCHED_LIMIT_OTHER : SCHED_LIMIT_NONE_WAITING;
        s->ms_left--;
        group_step(s);
        s->step.held = s->ms_left > 0;
        overhead = cost_overhead_s(s->cost, &s->step.batch); /* M5 */
    } else {
        int rc = plan_scheduled(s, now);
        if (rc != SCHED_PLAN_STEP)
            return rc;
    }
    const double d = cost_step_s(s->cost, &s->step.batch) - overhead;
    s->step.dur_s = d > 0.0 ? d : 0.0;
    sched_emit(s, now);
    *t_end = now + s->step.dur_s;
    return SCHED_PLAN_STEP;
}

void sched_finish_multistep(sched *s, double t)
{
    if (s->active == SCHED_ACTIVE_PREFILL) { /* section 3: tokens and finishes at t */
        sched_finish_continuous(s, t);
        return;
    }
    assert(s->active == SCHED_ACTIVE_DECODE);
    /* M4: each request makes a token until its last; the group's finished
     * requests finish at the end of its last step */
    int64_t out = 0;
    for (int64_t i = 0; i < s->n_run; i++) {
        sched_entry *e = &s->run[i];
        if (e->left > 0)
            e->left--;
        if (e->left == 0 && s->ms_left == 0) {
            sched_v0_finish_entry(s, e, t);
            continue;
        }
        if (out != i)
            s->run[out] = *e;
        out++;
    }
    s->n_run = out;
}
