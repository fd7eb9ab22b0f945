/* sglang_internal.h — the SGLang engine's state, shared by sglang.c (the
 * loop, decode steps, results, retraction) and sglang_admit.c (forming an
 * extend batch).  Section numbers are docs/semantics-sglang.md's.
 */
#ifndef SGLANG_INTERNAL_H
#define SGLANG_INTERNAL_H

#include "radix.h"
#include "sched_internal.h"

/* Where a request stands (its own view; SCHED_REQ_* in s->state says the
 * same to the rest of the scheduler). */
enum {
    SGL_PENDING = 0,  /* not arrived */
    SGL_WAITING = 1,  /* in W */
    SGL_RUNNING = 2,  /* in R, or admitted into the last extend batch */
    SGL_CHUNKED = 3,  /* K: its prompt is in pieces */
    SGL_FINISHED = 4,
    SGL_REJECTED = 5
};

typedef struct sgl_req {
    int64_t g;      /* tokens generated (results applied so far) */
    int64_t c;      /* token slots stored or allocated, the shared prefix included */
    int64_t m;      /* leading tokens held by the tree (cache_protected_len), <= c */
    int32_t node;   /* the radix node it locks (RADIX_ROOT: none) */
    int32_t gen;    /* retractions so far: results of an earlier life are dropped */
    int8_t st;      /* SGL_* */
    int8_t pad_[7];
} sgl_req;

/* A decided batch: what it runs, for its step record and for applying its
 * results (section 2.3). */
enum { SGL_BATCH_NONE = 0, SGL_BATCH_EXTEND = 1, SGL_BATCH_DECODE = 2 };
enum { SGL_TOK = 1, SGL_NEW = 2 };

#define LPM_MAX 128          /* lpm orders W only while it holds at most this many */
#define LPM_IN_BATCH 32      /* in-batch prefix caching: check and deprioritize thresholds */

typedef struct sgl_batch {
    int kind;              /* SGL_BATCH_* */
    int64_t n;             /* members */
    int32_t *id;           /* [cap] members in batch order */
    int32_t *gen;          /* [cap] their gen when decided */
    uint8_t *tok;          /* [cap] SGL_TOK: the member makes a token (an extend piece
                              that ends the prompt, every decode); SGL_NEW: admitted
                              from W in this batch */
    sched_member *mem;     /* [cap] for the step sink */
    sched_step step;       /* the record, start_s set at launch */
} sgl_batch;

struct sched_sgl {
    /* configuration */
    int64_t N;             /* token slots in the pool, max_total_num_tokens */
    int64_t C;             /* chunked_prefill_size, 0 = no chunks */
    int64_t B;             /* max_prefill_tokens */
    int64_t M;             /* max_running_requests */
    int radix_on;          /* radix cache (else the chunk cache) */
    int overlap;           /* overlap scheduler (section 9) */
    int lpm;               /* policy lpm (else fcfs) */
    double rho0, rho_min, delta; /* new-token ratio: start, floor, decay per decode */
    /* state */
    double rho;            /* the new-token ratio */
    int64_t F;             /* free token slots */
    radix *tree;           /* the radix cache, or NULL (chunk cache) */
    sgl_req *rq;           /* [n] */
    int32_t *W;            /* [n] the waiting list, W[wh .. wh + nw) */
    int64_t wh, nw;
    int32_t *R;            /* [cap] the running batch, in order */
    int64_t nR;
    int full;              /* R's sticky full flag (5.10) */
    int32_t K;             /* the chunked request, -1 none */
    int64_t nholders;      /* requests holding a request slot: R's unfinished and K */
    sgl_batch buf[2];      /* decided batches, used in turn */
    int64_t ndecided;      /* decisions so far (the last one is buf[(ndecided - 1) % 2]) */
    int last_kind;         /* SGL_BATCH_* of the last decision (SGLang's last_batch) */
    sgl_batch *inflight;   /* the step running, or NULL */
    sgl_batch *pending;    /* overlap: the step decided to run next, or NULL */
    int64_t cap;           /* batch capacity: min(n, M) + 1 */
    cost_run_cache cruns;  /* decode steps' cost terms by R's width (cost_run_get;
                              bit for bit cost_step_s) */
    int32_t *scratch;      /* [cap] retraction ranking, lpm order */
    /* prefix identities (section 6.1) */
    const int64_t *seg_off; /* [n + 1] borrowed, or NULL: no shared tokens */
    uint64_t *chain;       /* [seg_off[n]] chain of a request's segment ids 0..k */
    int64_t *seg_end;      /* [seg_off[n]] tokens of its segments 0..k; NULL on a grid */
    int64_t *L;            /* [n] tokens its segments name, min(P, their sum) */
    int64_t S;             /* tokens per segment on a grid */
    /* lpm (5.8): the waiting requests' keys for one pass, and the scratch
     * tree of in-batch prefix caching */
    int64_t *lpm_key;      /* [LPM_MAX + 1] min(match, T - 1), tokens */
    uint8_t *lpm_dep;      /* [LPM_MAX + 1] 1: deprioritized */
    int32_t *lpm_ids;      /* [LPM_MAX + 1] W's order being built */
    /* the completion check's list L of 5.6, for one pass */
    int64_t *cl_left, *cl_held; /* [cap + 1] */
    int64_t ncl;
    int cl_built;
};

/* sglang_admit.c: step 2c, an extend batch into b (kind NONE if none).
 * Sets *limit to why admission stopped (sched_step_limit).  O(|W| + |R|)
 * at worst, O(admitted + |R|) under fcfs. */
void sgl_form_extend(sched *s, sgl_batch *b, int *limit);

/* sglang.c: the helpers admission shares. */
int64_t sgl_evictable(const sched_sgl *v);             /* E */
void sgl_alloc(sched *s, int64_t need);                /* evict the shortfall, take need */
void sgl_batch_add(sgl_batch *b, const sched_sgl *v, int32_t id, int64_t q, int flags);
void sgl_set_state(sched *s, int32_t id, int st);
/* Look up request id's first len tokens (6.3): the match, its node in *node. */
int64_t sgl_lookup(sched *s, int32_t id, int64_t len, int32_t *node);

static inline int64_t sgl_T(const sched *s, int32_t id)
{
    return s->reqs[id].prompt_tokens + s->sgl->rq[id].g;
}

#endif
