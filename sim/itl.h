/* itl.h — the inter-token latency of a run, streamed from its steps.
 *
 * Every step member that generates a token (docs/semantics.md 1 and 3.7,
 * semantics-extensions.md C1: a decode or swap-in does, a prefill or chunk
 * only when it reaches the stored context P + g, and nothing past a
 * request's O-th token) adds the gap since the request's previous token to
 * a bounded-error histogram (hist.h) and to the request's largest gap.
 * Members of one step mostly share a gap, so runs of equal gaps are added
 * at once.  The tracker is indexed by trace row, so the engines of a
 * cluster (sim/cluster.h) feed one tracker: under --pd a request's first
 * token comes from its prefill replica and the rest from its decode one.
 * Each engine feeds it through its own source (run_itl_src): the pending
 * run of equal gaps, the sums of the gaps and of their squares, and the
 * record of its leapt steps' longest gaps (a request leaving a leap is
 * told how many leapt steps it made tokens in, and takes the longest gap
 * of those steps).  The histogram's counts and extremes do not
 * depend on the order gaps arrive in; the sums are added per source, in
 * that engine's step order, and summed over the sources in index order at
 * the end.  So a cluster's figures do not depend on how its engines' steps
 * interleave (a replica that leaps ahead of the others gives the same
 * bytes), and one engine's are a single running sum as before.
 * Memory: each request's largest gap (8 bytes, the whole run) and its
 * live state (16 bytes, in a vmem region: committed at its first token,
 * handed back once the requests before it are done, run_itl_release),
 * plus the histogram; O(1) per member.
 */
#ifndef ITL_H
#define ITL_H

#include <stdint.h>

#include "../base/vmem.h"
#include "hist.h"
#include "run.h"

/* A request's live state: 16 bytes, all zero before its first token. */
typedef struct run_itl_req {
    double last_tok_s;  /* time its latest tokens reached the client, s */
    int32_t gen;        /* tokens generated so far (<= O < 2^31) */
    int32_t held;       /* of those, made in held steps of a multi-step group
                           and not yet delivered (docs/semantics-extensions.md
                           M4); 0 otherwise */
} run_itl_req;

/* One engine's stream of gaps: what of the figures depends on the order
 * of its steps. */
typedef struct run_itl_src {
    double run_gap_s;   /* a run of equal gaps not yet in the histogram, s */
    int64_t run_len;    /* its length, gaps */
    double sum, sumsq;  /* of the gaps added so far, s and s^2 */
    double end_s;       /* end of its latest leapt step, s */
    int64_t leapt;      /* its leapt steps so far, numbered 1, 2, ... */
    /* the longest gap of its last c leapt steps, for any c up to the
     * tracker's window: the leapt steps whose gap exceeds every later one's,
     * oldest first (so their gaps decrease), as a ring of mx_cap (a power
     * of two) entries from mx_head; older than the window: dropped */
    int64_t *mx_step;   /* [mx_cap] the step's number */
    double *mx_gap;     /* [mx_cap] its gap, s */
    int64_t mx_head, mx_n, mx_cap;
} run_itl_src;

typedef struct run_itl {
    const trace_req *tr; /* [n] the requests (P, O), borrowed */
    run_itl_req *req;   /* [n] live state per trace row, in req_mem (or calloc'd) */
    vmem req_mem;       /* req's region; base NULL: req is calloc'd */
    double *max_s;      /* [n] each request's largest gap, s (NAN before two tokens) */
    hist h;             /* every gap (its sum and sumsq: see run_itl_finish) */
    run_itl_src *src;   /* [n_src] one per engine */
    int64_t n_src;
    int64_t n_done;     /* requests that made their O-th token */
    int64_t n;          /* requests tracked */
    int64_t window;     /* the most leapt steps one request is told of at once:
                           its output tokens bound it, steps */
    int oom;            /* 1: a record of longest gaps could not grow; the
                           figures are wrong and the run must fail */
} run_itl;

/* Track the requests of tr, fed by n_src engines (sources 0 .. n_src - 1).
 * Each request's largest gap is handed over by run_itl_finish.  KVS_ENOMEM
 * on failure (nothing to free).  Cost: O(n + n_src), 8 bytes per request
 * and 16 more per request in flight. */
int run_itl_init(run_itl *t, const trace *tr, int64_t n_src, kvs_err *err);

/* Requests [0, k) will make no more tokens (finished or rejected, and no
 * leap that holds one is open): the whole pages of their live state are
 * handed back, and must not be touched again.  Only a tracker whose
 * requests the caller knows to be done (one engine's run); O(1) amortized
 * per request. */
void run_itl_release(run_itl *t, int64_t k);

/* The nm members m of a step of engine src that ended at t_end (seconds),
 * in order.  held (sched_step.held): the step's tokens are made but reach
 * the client only with a later step of the same requests, which then
 * delivers them all at its end as one gap per request (a multi-step
 * group, docs/semantics-extensions.md M4).  Cost: O(nm). */
void run_itl_members(run_itl *t, int64_t src, const sched_member *m, int64_t nm, double t_end,
                     int held);

/* A leapt step (sched_step.leapt) of engine src: each of its
 * batch.n_decode requests made a token at its end and at the previous
 * step's end, so each gap is the step's; which requests they were comes
 * with run_itl_leap_end.  The same gaps in the same order as
 * run_itl_member over the listed members would add.  Sets t->oom when
 * the record of src's longest gaps cannot grow.  Cost: O(1) amortized. */
void run_itl_leapt_step(run_itl *t, int64_t src, const sched_step *st);

/* Engine src's leap sink (sched_leap_fn): each request ids[k] made a
 * token at the end of each of src's last c leapt steps (c = each[k], or
 * steps when each is NULL; 0: none), not told before: its count, its
 * latest token (the last leapt step's end) and its longest gap (over those
 * steps) are brought up to date.  Cost: O(n log window). */
void run_itl_leap_end(run_itl *t, int64_t src, const int32_t *ids, int64_t n, int64_t steps,
                      const int32_t *each);

/* Flush every source and write the run's figures: sum->itl, itl_std_s,
 * n_itl.  Returns each request's largest gap ([n], NAN for fewer than two
 * tokens, the caller's to free: t->max_s handed over), and hands the live
 * state back, so the tracker holds no per-request memory afterwards (no
 * more members, no run_live_row).  Never NULL.  The histogram's sum and
 * sumsq are the sources' sums added in index order (for one engine, its
 * running sum).  Cost: O(bins + n_src). */
double *run_itl_finish(run_itl *t, run_summary *sum);

void run_itl_free(run_itl *t);

/* Whether member m makes a token for request r in state q (the rule
 * above: a prefill must reach the stored context P + gen); shared with
 * run_request_itls, which replays recorded steps. */
static inline int run_itl_makes_token(const run_itl_req *q, const trace_req *r,
                                      const sched_member *m)
{
    return q->gen < r->output_tokens &&
           !(m->kind == SCHED_MEMBER_PREFILL && m->context < r->prompt_tokens + q->gen);
}

/* What member m of a step does to request r's state q (held: the step's
 * sched_step.held): counts the token it makes (run_itl_makes_token), held
 * back in a held step (docs/semantics-extensions.md M4), and otherwise
 * delivers it with any held ones.  0: nothing delivered; 1: tokens
 * delivered, the first to reach the client (no gap); 2: delivered after an
 * earlier delivery, one gap ending at the step's end.  The caller keeps
 * the delivery time.  Shared by run_itl_members and run_request_itls. */
static inline int run_itl_step_member(run_itl_req *q, const trace_req *r, const sched_member *m,
                                      int held)
{
    const int makes = run_itl_makes_token(q, r, m);
    if (held) {
        q->gen += makes;
        q->held += makes;
        return 0;
    }
    if (!makes && q->held == 0)
        return 0;
    const int gap = q->gen - q->held > 0;
    q->gen += makes;
    q->held = 0;
    return 1 + gap;
}

#endif
