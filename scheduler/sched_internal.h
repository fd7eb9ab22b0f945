/* sched_internal.h — the engine's state, shared by the scheduler's .c files
 * (sched.c, continuous.c, static_batch.c, policy.c, alloc.c, waitq.c) and by
 * nothing else.  Callers use sched.h.
 */
#ifndef SCHED_INTERNAL_H
#define SCHED_INTERNAL_H

#include "sched.h"

/* ------------------------------------------------------------ policies */
/* A queue policy orders requests; "worse" means later in policy order. */
typedef struct sched_policy_vt {
    const char *name;
    /* <0 if a comes before b.  Total order (ids break ties). */
    int (*cmp)(const trace_req *reqs, int32_t a, int32_t b);
} sched_policy_vt;

const sched_policy_vt *sched_policy_vt_get(sched_policy p);

/* ---------------------------------------------------------- allocators */
typedef struct sched_alloc_vt {
    const char *name;
    /* Blocks a request holds from admission with `ctx` stored tokens. */
    int64_t (*admit_blocks)(const sched_config *cfg, const trace_req *r, int64_t ctx);
    /* 1 if blocks grow with the context (paged), 0 if fixed (reserved). */
    int grows;
} sched_alloc_vt;

const sched_alloc_vt *sched_alloc_vt_get(sched_alloc a);

/* -------------------------------------------------------- waiting heap */
/* A binary min-heap of request ids in policy order. */
typedef struct sched_waitq {
    int32_t *ids;      /* [cap] heap array */
    int64_t n;         /* entries */
    int64_t cap;       /* capacity (number of requests) */
    const trace_req *reqs;
    const sched_policy_vt *pol;
} sched_waitq;

int sched_waitq_init(sched_waitq *q, int64_t cap, const trace_req *reqs,
                     const sched_policy_vt *pol);
void sched_waitq_free(sched_waitq *q);
void sched_waitq_push(sched_waitq *q, int32_t id);     /* O(log n) */
int32_t sched_waitq_pop(sched_waitq *q);               /* O(log n); n > 0 */
static inline int32_t sched_waitq_peek(const sched_waitq *q) { return q->ids[0]; }

/* ------------------------------------------------------- running entry */
/* A running request, kept compact so a decode step walks memory linearly. */
typedef struct sched_entry {
    int32_t id;        /* request id */
    int32_t skip;      /* 1: skipped this step (preemption off, no block) */
    int64_t ctx;       /* tokens of KV stored */
    int64_t left;      /* tokens still to generate (O - g) */
    int64_t blocks;    /* blocks held */
    int64_t room;      /* free token slots in the held blocks (paged) */
} sched_entry;

typedef enum sched_active {
    SCHED_ACTIVE_NONE = 0,
    SCHED_ACTIVE_PREFILL = 1,  /* admitted requests are run[run_mark..n_run) */
    SCHED_ACTIVE_DECODE = 2,   /* every non-skipped entry of run[] */
    SCHED_ACTIVE_STATIC = 3    /* a static batch step */
} sched_active;

struct sched {
    sched_config cfg;
    const trace_req *reqs;        /* [n] borrowed */
    int64_t n;
    const cost_model *cost;
    const sched_policy_vt *pol;
    const sched_alloc_vt *alloc;
    int64_t watermark_blocks;     /* floor(watermark * total_blocks) */
    int64_t free_blocks;          /* F */
    int64_t swap_used;            /* host blocks in use */

    sched_req_result *res;        /* [n] */
    int64_t *g;                   /* [n] tokens generated, for requests not running */
    int64_t *swap_ctx;            /* [n] stored tokens of a swapped request */
    double *swap_since;           /* [n] time of swap-out */
    int32_t *state;               /* [n] sched_req_status */

    sched_waitq wq;               /* W */
    sched_waitq swq;              /* swapped requests, policy order */
    sched_entry *run;             /* [run_cap] R in admission order */
    int64_t n_run, run_cap;
    int64_t run_mark;             /* first entry admitted in this prefill step */

    sched_member *members;        /* [run_cap] step members for the sink */
    int64_t n_members;
    sched_step step;              /* the step in flight */
    sched_active active;

    /* static batching */
    int32_t *batch;               /* [run_cap] members of the running batch */
    int64_t n_batch;
    int64_t batch_pmax, batch_omax; /* padded prompt / output of the batch */
    int64_t batch_k;              /* decode steps done (0 = prefill next) */
    int64_t batch_blocks;         /* reserved blocks of the whole batch */
    double idle_since;            /* when the engine last went idle */

    sched_counters ctr;
    sched_step_fn sink;
    void *sink_ctx;
    int want_members;             /* fill members[] for decode steps */
    char errmsg[256];             /* set when a plan fails */
};

/* Shared helpers (sched.c). */
void sched_reject(sched *s, int32_t id);
void sched_emit(sched *s, double now);
int sched_plan_continuous(sched *s, double now, double *t_end);
void sched_finish_continuous(sched *s, double t);
int sched_plan_static(sched *s, double now, int more_arrivals, double *t_end);
void sched_finish_static(sched *s, double t);


static inline int64_t sched_ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

#endif
