#include "evq.h"

#include <stdlib.h>

#include "../base/kvs.h"

int evq_init(evq *q, int64_t cap)
{
    q->cap = cap > 4 ? cap : 4;
    q->n = 0;
    q->hole = 0;
    q->next_seq = 0;
    q->ev = malloc((size_t)q->cap * sizeof *q->ev);
    return q->ev ? KVS_OK : KVS_ENOMEM;
}

void evq_free(evq *q)
{
    free(q->ev);
    q->ev = NULL;
    q->n = 0;
    q->hole = 0;
}

static int before(const evq_event *a, const evq_event *b)
{
    if (a->t != b->t)
        return a->t < b->t;
    if (a->kind != b->kind)
        return a->kind < b->kind;
    return a->seq < b->seq;
}

/* Put e at ev[0] of the heap ev[0 .. size-1] and sift it down. */
static void sift_down(evq_event *ev, int64_t size, evq_event e)
{
    int64_t i = 0;
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= size)
            break;
        if (c + 1 < size && before(&ev[c + 1], &ev[c]))
            c++;
        if (!before(&ev[c], &e))
            break;
        ev[i] = ev[c];
        i = c;
    }
    ev[i] = e;
}

/* Close the hole at the root: the last event takes its place. */
static void fill_hole(evq *q)
{
    q->hole = 0;
    if (q->n > 0)
        sift_down(q->ev, q->n, q->ev[q->n]);
}

int evq_push(evq *q, double t, int32_t kind, int64_t arg)
{
    evq_event e = {t, kind, 0, q->next_seq++, arg};
    if (q->hole) { /* replace the popped root: one sift instead of two */
        q->hole = 0;
        sift_down(q->ev, ++q->n, e);
        return KVS_OK;
    }
    if (q->n == q->cap) {
        evq_event *nv = realloc(q->ev, (size_t)q->cap * 2 * sizeof *nv);
        if (!nv) {
            q->next_seq--;
            return KVS_ENOMEM;
        }
        q->ev = nv;
        q->cap *= 2;
    }
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
    if (q->hole)
        fill_hole(q);
    if (q->n == 0)
        return 0;
    *out = q->ev[0];
    q->n--;
    q->hole = 1; /* ev[1 .. n] hold the rest until a push or pop fills ev[0] */
    return 1;
}

const evq_event *evq_peek(const evq *q)
{
    if (q->n == 0)
        return NULL;
    if (!q->hole)
        return &q->ev[0];
    /* the root's children are the smallest of the rest (ev[1 .. n]) */
    if (q->n >= 2 && before(&q->ev[2], &q->ev[1]))
        return &q->ev[2];
    return &q->ev[1];
}
