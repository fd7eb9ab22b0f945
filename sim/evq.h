/* evq.h — the event queue of the discrete-event core: a binary min-heap of
 * timed events with a deterministic total order (time, kind, sequence
 * number), so that simultaneous events are always handled in the same
 * order.  Cost: O(log n) per push/pop, no allocation after init unless the
 * heap grows; a pop followed by a push costs one sift (the pushed event
 * takes the popped root's place).
 */
#ifndef EVQ_H
#define EVQ_H

#include <stdint.h>

typedef enum evq_kind {
    EVQ_KIND_STEP_END = 0, /* a step's tokens exist: handled first */
    EVQ_KIND_ARRIVAL = 1,  /* a request joins the waiting queue */
    EVQ_KIND_KV_ARRIVAL = 2, /* --pd: a prompt's KV reached its decode replica */
    EVQ_KIND_PLAN = 3      /* the engine decides the next step: last */
} evq_kind;

typedef struct evq_event {
    double t;      /* seconds since trace start */
    int32_t kind;  /* evq_kind */
    int32_t pad_;
    uint64_t seq;  /* insertion number: ties in (t, kind) keep FIFO order */
    int64_t arg;   /* request id for arrivals */
} evq_event;

typedef struct evq {
    evq_event *ev;  /* [cap] heap array */
    int64_t n;      /* events queued */
    int64_t cap;    /* capacity, events */
    int hole;       /* 1: ev[0] was popped and ev[1 .. n] hold the queue; the
                       next push takes ev[0] (one sift for a pop and a push) */
    uint64_t next_seq;
} evq;

int evq_init(evq *q, int64_t cap);
void evq_free(evq *q);
int evq_push(evq *q, double t, int32_t kind, int64_t arg); /* KVS_ENOMEM */
/* Pop the first event into *out; returns 0 when empty. */
int evq_pop(evq *q, evq_event *out);
/* The first event, without popping it; NULL when empty.  Valid until the
 * next push or pop.  Cost: O(1). */
const evq_event *evq_peek(const evq *q);

#endif
