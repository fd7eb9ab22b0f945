#include "engine.h"

#include <math.h>
#include <stdlib.h>

#include "evq.h"

int engine_run(sched *s, const trace *tr, double *end_s, kvs_err *err)
{
    evq q;
    int rc = KVS_OK;
    if (evq_init(&q, 16))
        return kvs_errf(err, KVS_ENOMEM, "engine: out of memory");
    int busy = 0;          /* a step is in flight */
    int plan_queued = 0;   /* a PLAN event is queued */
    double wake_at = -1.0; /* time of a queued timeout PLAN, or -1 */
    int64_t next = 0;      /* next request to arrive */
    const int leaps = !getenv("KVSIM_NO_LEAP"); /* for tests: one step per plan */
    double now = 0.0;
    sched_set_leap_past_finish(s, leaps); /* no router reads the load between steps */
    if (tr->n > 0 && evq_push(&q, tr->reqs[0].arrival_s, EVQ_KIND_ARRIVAL, 0))
        goto nomem;
    evq_event e;
    while (evq_pop(&q, &e)) {
        now = e.t;
        switch (e.kind) {
        case EVQ_KIND_STEP_END:
            sched_finish_step(s, now);
            busy = 0;
            break;
        case EVQ_KIND_ARRIVAL:
            if (e.arg < next) { /* the engine took it in during a leap */
                if (next < tr->n &&
                    evq_push(&q, tr->reqs[next].arrival_s, EVQ_KIND_ARRIVAL, next))
                    goto nomem;
                continue;
            }
            sched_arrive(s, e.arg);
            next = e.arg + 1;
            if (next < tr->n && evq_push(&q, tr->reqs[next].arrival_s, EVQ_KIND_ARRIVAL, next))
                goto nomem;
            break;
        case EVQ_KIND_PLAN:
            if (e.arg)
                wake_at = -1.0; /* a timeout PLAN fired */
            else
                plan_queued = 0;
            if (busy)
                continue;
            double t_end;
            if (leaps) { /* nothing happens before the next arrival or timeout */
                double h = next < tr->n ? tr->reqs[next].arrival_s : INFINITY;
                sched_set_horizon(s, wake_at >= 0.0 && wake_at < h ? wake_at : h);
                /* or the engine takes the arrivals in itself (then `next`
                 * moves on, and the queued arrival is skipped when it pops) */
                sched_set_arrivals(s, &next, NULL, wake_at >= 0.0 ? wake_at : INFINITY);
            }
            int plan = sched_plan_step(s, now, next < tr->n, &t_end);
            if (plan == SCHED_PLAN_STEP) {
                busy = 1;
                if (evq_push(&q, t_end, EVQ_KIND_STEP_END, 0))
                    goto nomem;
            } else if (plan == SCHED_PLAN_WAIT) {
                if (wake_at != t_end) {
                    wake_at = t_end;
                    if (evq_push(&q, t_end, EVQ_KIND_PLAN, 1))
                        goto nomem;
                }
            } else if (plan == SCHED_PLAN_STUCK) {
                rc = kvs_errf(err, KVS_EINVAL, "simulation %s", sched_error(s));
                goto done;
            }
            continue;
        }
        if (!busy && !plan_queued) {
            plan_queued = 1;
            if (evq_push(&q, now, EVQ_KIND_PLAN, 0))
                goto nomem;
        }
    }
    sched_counters c;
    sched_get_counters(s, &c);
    if (c.n_finished + c.n_rejected != tr->n)
        rc = kvs_errf(err, KVS_EINTERNAL,
                      "engine: %lld of %lld requests unresolved at t=%.6f (a kvsim bug)",
                      (long long)(tr->n - c.n_finished - c.n_rejected), (long long)tr->n, now);
    goto done;
nomem:
    rc = kvs_errf(err, KVS_ENOMEM, "engine: out of memory");
done:
    if (end_s)
        *end_s = now;
    evq_free(&q);
    return rc;
}
