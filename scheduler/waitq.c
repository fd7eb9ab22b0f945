/* waitq.c — the waiting queue in policy order.  Admission only ever takes
 * the head, so a binary min-heap gives the exact strict-queue semantics at
 * O(log n) per operation; under fcfs a sorted ring does it in O(1) (keys
 * arrive at the back or the front).  Under the cache-aware lpm policy,
 * whose keys change with the cache, lpm.c keeps the heap. */
#include <stdlib.h>

#include "sched_internal.h"

int sched_waitq_init(sched_waitq *q, int64_t cap, const trace_req *reqs,
                     const sched_policy_vt *pol)
{
    q->ids = malloc((size_t)(cap > 0 ? cap : 1) * sizeof *q->ids);
    if (!q->ids)
        return KVS_ENOMEM;
    q->n = 0;
    q->cap = cap;
    q->reqs = reqs;
    q->pol = pol;
    q->lpm = NULL;
    q->ring = pol == sched_policy_vt_get(SCHED_POLICY_FCFS);
    q->head = 0;
    return KVS_OK;
}

void sched_waitq_free(sched_waitq *q)
{
    free(q->ids);
    q->ids = NULL;
    q->n = 0;
}

static inline int before(const sched_waitq *q, int32_t a, int32_t b)
{
    return q->pol->cmp(q->reqs, a, b) < 0;
}

static inline int64_t ring_at(const sched_waitq *q, int64_t i) /* index of entry i */
{
    int64_t k = q->head + i;
    return k >= q->cap ? k - q->cap : k;
}

static void ring_push(sched_waitq *q, int32_t id)
{
    if (q->n == 0 || before(q, q->ids[ring_at(q, q->n - 1)], id)) {
        q->ids[ring_at(q, q->n++)] = id; /* an arrival */
        return;
    }
    if (before(q, id, q->ids[q->head])) { /* a preempted request */
        q->head = q->head > 0 ? q->head - 1 : q->cap - 1;
        q->ids[q->head] = id;
        q->n++;
        return;
    }
    int64_t i = q->n++; /* elsewhere: shift the later ones back */
    while (i > 0 && before(q, id, q->ids[ring_at(q, i - 1)])) {
        q->ids[ring_at(q, i)] = q->ids[ring_at(q, i - 1)];
        i--;
    }
    q->ids[ring_at(q, i)] = id;
}

void sched_waitq_push(sched_waitq *q, int32_t id)
{
    if (q->ring) {
        ring_push(q, id);
        return;
    }
    if (q->lpm) {
        sched_lpm_push(q->lpm, id);
        return;
    }
    int64_t i = q->n++;
    while (i > 0) {
        int64_t p = (i - 1) / 2;
        if (!before(q, id, q->ids[p]))
            break;
        q->ids[i] = q->ids[p];
        i = p;
    }
    q->ids[i] = id;
}

int32_t sched_waitq_pop(sched_waitq *q)
{
    if (q->ring) {
        int32_t top = q->ids[q->head];
        q->head = ring_at(q, 1);
        q->n--;
        return top;
    }
    if (q->lpm)
        return sched_lpm_pop(q->lpm);
    int32_t top = q->ids[0];
    int32_t last = q->ids[--q->n];
    int64_t i = 0, n = q->n;
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && before(q, q->ids[c + 1], q->ids[c]))
            c++;
        if (!before(q, q->ids[c], last))
            break;
        q->ids[i] = q->ids[c];
        i = c;
    }
    if (n > 0)
        q->ids[i] = last;
    return top;
}
