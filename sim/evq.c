#include "evq.h"

#include <stdlib.h>

#include "../base/kvs.h"

int evq_init(evq *q, int64_t cap)
{
    q->cap = cap > 4 ? cap : 4;
    q->n = 0;
    q->next_seq = 0;
    q->ev = malloc((size_t)q->cap * sizeof *q->ev);
    return q->ev ? KVS_OK : KVS_ENOMEM;
}

void evq_free(evq *q)
{
    free(q->ev);
    q->ev = NULL;
    q->n = 0;
}

static int before(const evq_event *a, const evq_event *b)
{
    if (a->t != b->t)
        return a->t < b->t;
    if (a->kind != b->kind)
        return a->kind < b->kind;
    return a->seq < b->seq;
}

int evq_push(evq *q, double t, int32_t kind, int64_t arg)
{
    if (q->n == q->cap) {
        evq_event *nv = realloc(q->ev, (size_t)q->cap * 2 * sizeof *nv);
        if (!nv)
            return KVS_ENOMEM;
        q->ev = nv;
        q->cap *= 2;
    }
    evq_event e = {t, kind, 0, q->next_seq++, arg};
    int64_t i = q->n++;
    while (i > 0) {
        int64_t p = (i - 1) / 2;
        if (!before(&e, &q->ev[p]))
            break;
        q->ev[i] = q->ev[p];
        i = p;
    }
    q->ev[i] = e;
    return KVS_OK;
}

int evq_pop(evq *q, evq_event *out)
{
    if (q->n == 0)
        return 0;
    *out = q->ev[0];
    evq_event last = q->ev[--q->n];
    int64_t i = 0, n = q->n;
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && before(&q->ev[c + 1], &q->ev[c]))
            c++;
        if (!before(&q->ev[c], &last))
            break;
        q->ev[i] = q->ev[c];
        i = c;
    }
    if (n > 0)
        q->ev[i] = last;
    return 1;
}
