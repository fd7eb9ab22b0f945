/* sched_internal.h — the engine's state, shared by the scheduler's .c files
 * (sched.c, continuous.c, chunked.c, pcache.c, lpm.c, static_batch.c,
 * policy.c, alloc.c, waitq.c; v1.c and v1_pool.c through v1_internal.h) and
 * by nothing else.  Callers use sched.h.
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
    /* 1: the waiting queue orders by cached prefix length first (lpm,
     * lpm.c), then by cmp. */
    int cache_aware;
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
/* A binary min-heap of request ids in policy order.  Under a cache-aware
 * policy the same heap is ordered by lpm.c, which also moves entries whose
 * key changes with the cache. */
typedef struct sched_lpm sched_lpm;
typedef struct sched_waitq {
    int32_t *ids;      /* [cap] heap array, or the ring (ring) */
    int64_t n;         /* entries */
    int64_t cap;       /* capacity (number of requests) */
    int ring;          /* 1 (fcfs): ids is a sorted ring, the head at ids[head] */
    int64_t head;      /* ring: index of the first entry */
    const trace_req *reqs;
    const sched_policy_vt *pol;
    sched_lpm *lpm;    /* set: the lpm order (lpm.c) keeps this heap */
} sched_waitq;

/* Under fcfs the queue is a ring kept sorted: arrivals come in key order and
 * go to the back, preempted requests (each before every waiting one, the
 * latest victim first) to the front, both O(1); any other key is placed by
 * shifting (O(n), which the engine's rules never need).  Other policies
 * use a binary heap, O(log n). */
int sched_waitq_init(sched_waitq *q, int64_t cap, const trace_req *reqs,
                     const sched_policy_vt *pol);
void sched_waitq_free(sched_waitq *q);
void sched_waitq_push(sched_waitq *q, int32_t id);     /* O(1) fcfs, O(log n) */
int32_t sched_waitq_pop(sched_waitq *q);               /* O(1) fcfs, O(log n); n > 0 */
static inline int32_t sched_waitq_peek(const sched_waitq *q)
{
    return q->ids[q->ring ? q->head : 0];
}

/* ------------------------------------------------------- running entry */
/* A running request, kept compact so a decode step walks memory linearly. */
typedef struct sched_entry {
    int32_t id;        /* request id */
    uint8_t skip;      /* 1: generates no token this step (preemption off and
                          no block; a chunk that leaves the prompt unfinished
                          or no chunk at all) */
    uint8_t prefill;   /* 1: chunked prefill in progress (prompt P+g not all
                          stored); its next work is a chunk, not a decode */
    uint8_t fresh;     /* 1: its first token is still to come (left == O) */
    uint8_t pad_;      /* zero */
    int64_t ctx;       /* tokens of KV stored */
    int64_t left;      /* tokens still to generate (O - g) */
    int64_t blocks;    /* blocks held */
    int64_t room;      /* free token slots in the held blocks (paged) */
} sched_entry;

typedef enum sched_active {
    SCHED_ACTIVE_NONE = 0,
    SCHED_ACTIVE_PREFILL = 1,  /* admitted requests are run[run_mark..n_run) */
    SCHED_ACTIVE_DECODE = 2,   /* every non-skipped entry of run[] */
    SCHED_ACTIVE_STATIC = 3,   /* a static batch step */
    SCHED_ACTIVE_CHUNKED = 4   /* a chunked-prefill step over all of run[] */
} sched_active;

/* ------------------------------------------------------- prefix cache */
/* A cached KV block: a full block of a prompt whose tokens are identified by
 * `hash` (docs/semantics-extensions.md, section P).  Records live in a pool;
 * the hash table maps hash -> record; records no request holds (ref 0) are
 * on the LRU list, least recently used at the head. */
typedef struct sched_pc_rec {
    uint64_t hash;     /* block identity */
    int32_t ref;       /* running requests holding the block; -1: slot free */
    int32_t prev;      /* LRU neighbour, less recent (ref 0 only); -1 none */
    int32_t next;      /* LRU neighbour, more recent; free slots: next free; -1 none */
    int32_t pad_;      /* zero */
} sched_pc_rec;

typedef struct sched_pcache {
    int on;                  /* cfg.prefix_caching */
    const int64_t *off;      /* [n + 1] borrowed trace segments, NULL = none */
    const int32_t *len;      /* [off[n]] tokens per segment */
    uint64_t *chain;         /* [off[n]] hash of a request's segment ids 0..k */
    int64_t *seg_end;        /* [off[n]] tokens of its segments 0..k */
    int64_t *limit;          /* [n] hashed prompt tokens: min(P, sum of len) */
    sched_pc_rec *rec;       /* [cap] record pool */
    int64_t cap;             /* records: min(total_blocks, hashed blocks) */
    int32_t free_head;       /* first free record slot, -1 none */
    int32_t *table;          /* [mask + 1] record index or -1, linear probing */
    uint64_t mask;           /* table size - 1 (a power of two >= 2 cap) */
    int32_t lru_head, lru_tail; /* ref-0 records, least recent first */
    int64_t cached;          /* records with ref 0 (counted in free_blocks) */
    int64_t live;            /* records in use (any ref) */
    int64_t max_blocks;      /* most full hashed blocks of one request */
    int32_t *scratch;        /* [max_blocks] lookups of one chunk: record or -1 */
    uint64_t *hscratch;      /* [max_blocks] block identities of one request */
} sched_pcache;

/* A planned prefill chunk of one request (chunked.c): q new tokens over c
 * stored ones, and the blocks it takes. */
typedef struct sched_chunk {
    int64_t cached;     /* c: tokens stored before the chunk */
    int64_t hit_blocks; /* first chunk: leading full blocks found in the cache */
    int64_t q;          /* new tokens computed, >= 1 */
    int64_t blocks;     /* blocks held after the chunk */
    int64_t cost;       /* net blocks taken from F (< 0: a private copy freed) */
    int64_t k0, k1;     /* full hashed blocks stored before / after */
} sched_chunk;

/* ------------------------------------------------------------ engines */
/* The rules an engine follows behind the sched.h entry points: V0 (sched.c
 * and the files above) or V1 (v1.c, v1_pool.c).  init runs after sched_init
 * set cfg, reqs, n and cost; free releases everything but the struct. */
typedef struct sched_engine_vt {
    const char *name;
    int (*init)(sched *s, kvs_err *err);
    void (*free)(sched *s);
    int (*attach_prefixes)(sched *s, const req_prefixes *px, kvs_err *err);
    void (*arrive)(sched *s, int64_t id);
    int (*plan)(sched *s, double now, int more_arrivals, double *t_end);
    void (*finish)(sched *s, double t);
    void (*counters)(const sched *s, sched_counters *out);
    int64_t (*used_blocks)(const sched *s); /* counters' used_blocks alone, O(1) */
    int (*audit)(const sched *s, char *why, size_t n);
} sched_engine_vt;

extern const sched_engine_vt sched_engine_v1; /* v1.c */
extern const sched_engine_vt sched_engine_trtllm; /* trtllm.c */
extern const sched_engine_vt sched_engine_sglang; /* sglang.c */
int sched_trt_config_check(const sched_config *c, kvs_err *err); /* trtllm.c */
int sched_sgl_config_check(const sched_config *c, kvs_err *err); /* sglang.c */
int64_t sched_sgl_cached_prefix_tokens(const sched *s, int32_t id); /* sglang.c */
int sched_v1_config_check(const sched_config *c, kvs_err *err); /* v1.c */
int sched_v0_audit(const sched *s, char *why, size_t n);        /* pcache.c */
int64_t sched_v1_cached_prefix_blocks(const sched *s, int32_t id); /* v1.c */

typedef struct sched_v1 sched_v1; /* v1.c */
typedef struct sched_trt sched_trt; /* trtllm.c */
typedef struct sched_sgl sched_sgl; /* sglang.c */

struct sched {
    const sched_engine_vt *eng;   /* the engine's rules */
    sched_v1 *v1;                 /* V1 state (engine V1 only) */
    sched_trt *trt;               /* TensorRT-LLM state (engine trtllm only) */
    sched_sgl *sgl;               /* SGLang state (engine sglang only) */
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
    int64_t *swap_ctx;            /* [n] stored tokens of a swapped request; NULL
                                     unless swap preemption (so are the two below) */
    double *swap_since;           /* [n] time of swap-out */
    sched_req_swap *swp;          /* [n] the swaps so far (sched_swaps) */
    uint8_t *state;               /* [n] sched_req_status (0..5: one byte) */
    sched *share;                 /* V0: the engine whose res, g, swap_ctx, swap_since,
                                     swp and state these are (sched_init_shared), or NULL */
    int shared;                   /* 1: another engine shares this one's state
                                     (sched_init_shared named it the owner) */

    sched_waitq wq;               /* W */
    sched_waitq swq;              /* swapped requests, policy order */
    sched_entry *run;             /* [run_cap] R in admission order */
    int64_t n_run, run_cap;
    sched_entry *fin;             /* [run_cap] finished this step, blocks not yet
                                     returned (prefix caching only) */
    int64_t n_fin;
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

    sched_pcache pc;              /* prefix cache (pc.on with prefix caching) */
    sched_lpm *lpm;               /* lpm order of W (policy lpm), or NULL */

    sched_counters ctr;
    sched_step_fn sink;
    void *sink_ctx;
    int want_members;             /* fill members[] for decode steps */
    sched_leap_fn leap_fn;        /* NULL, or told the requests of each leap */
    /* V0 same-set decode stretches (continuous.c, sched_same_set_flush): with a
     * leap sink, a decode step whose members are the previous step's but for
     * those that finished (each of which made a token at its end) is sunk
     * leapt, without members */
    int lk_armed;                 /* 1: run[] is the set of the last step emitted,
                                     a full decode step, but for those that
                                     finished at its end */
    int64_t lk_steps;             /* leapt steps sunk and not yet told to leap_fn */
    int64_t lk_n;                 /* requests of that stretch, in lk_ids */
    int32_t *lk_ids;              /* [run_cap] their ids (leap sink only) */
    /* ... and each such step is planned and finished in O(1): the entries
     * run[0 .. lz_n) keep ctx, room, left and blocks as of the stretch's
     * base, lz_j steps ago (sched_v0_lazy_write brings them up to date) */
    int lz_on;                    /* 1: entries are as of the base */
    int lz_paused;                /* 1: the last plan ended on a lazy same-set step at
                                     the horizon, and nothing has arrived since
                                     (sched_plan_continuous goes on with v0_leap) */
    int64_t lz_ev;                /* prefix evictions before that plan's admission */
    int64_t lz_n;                 /* entries of the stretch */
    int64_t lz_j;                 /* steps planned since the base */
    int64_t lz_fin;               /* of those, finished */
    int64_t lz_first;             /* steps from the base to the first finish (min left) */
    int64_t lz_sum;               /* sum of ctx over the entries at the base, tokens */
    int64_t *lz_cnt;              /* [block_size] entries by room at the base */
    cost_run_cache lz_runs;       /* V0 leaps' step costs by width, kept for the
                                     next leap of a width seen before (cost_run_get) */
    int last_token;               /* 0: the step in flight, a prefill or a
                                     fast-path decode, makes nobody's last
                                     token; 1: it may (continuous.c; lazy
                                     steps go by lz_first instead) */
    double horizon;               /* s: no external event before this time, for
                                     the next plan only (-INFINITY: unknown) */
    double horizon_near;          /* s: the horizon once a request is rejected in
                                     this plan (sched_set_horizon_pair; INFINITY) */
    int64_t *arr_cur;             /* sched_set_arrivals, the next plan only: the next
                                     request to arrive here (< 0 or >= n: none),
                                     advanced past those the engine takes in; NULL */
    const int32_t *arr_next;      /* [n] the request arriving after each, -1 none;
                                     NULL: id + 1 */
    double arr_other_s;           /* s: no other external event before this time */
    int leap_past_finish;         /* sched_set_leap_past_finish: 1 = a V1 leap may
                                     go on past its finishes (one engine) */
    int64_t ms_left;              /* V0 multi-step (multistep.c): steps of the running
                                     group still to plan after the one in flight; 0:
                                     the next plan consults the scheduler */
    char errmsg[256];             /* set when a plan fails */
};

/* Shared helpers (sched.c). */
/* Request i's prefix segments (base/request.h) as identities: chain[k] the
 * hash of its segment ids 0..k (equal leading ids give equal chains), and,
 * when seg_end is not NULL (segments of their own lengths, px->grid 0),
 * seg_end[k] the tokens of its segments 0..k; k runs over px->off[i] ..
 * px->off[i + 1].  Returns the prompt tokens the segments name: min(P, S x
 * segments) on a grid (seg_end NULL), else min(P, their lengths' sum).
 * Used by V1 (rule 2.4) and SGLang (6.1).  O(its segments). */
int64_t sched_segment_chain(const req_prefixes *px, int64_t i, int64_t S, int64_t P,
                            uint64_t *chain, int64_t *seg_end);
void sched_reject(sched *s, int32_t id, sched_reject_reason why);
/* Every result PENDING, no times (NAN), no counts: what each engine's init
 * starts from.  O(n). */
void sched_results_reset(sched_req_result *res, int64_t n);
/* sched_set_arrivals for the engines that take arrivals in: the next
 * request due to arrive here by time t (its arrival_s <= t), or -1; and
 * moving the cursor past it once the engine takes it.  O(1). */
int64_t sched_arrival_due(const sched *s, double t);
void sched_arrival_taken(sched *s, int64_t id);
/* Whether a leap's next step, starting at t, may be planned without an
 * event from outside: no external event comes before t (sched_set_horizon);
 * or `shut` (the engine's admission cannot reach a request appended to its
 * waiting list: trtllm's stopped capacity pass, sglang's full flag) and
 * the arrivals due by t are then taken in here (sched_set_arrivals,
 * through the engine's arrival rule) while no other event comes before t.
 * O(1 + arrivals taken). */
int sched_leap_may_go(sched *s, double t, int shut);
void sched_emit(sched *s, double now);
int sched_plan_continuous(sched *s, double now, double *t_end);
void sched_finish_continuous(sched *s, double t);
/* Pieces of continuous.c's iteration that multistep.c shares: step 3's
 * admission (returns the requests admitted, listed as prefill members of
 * s->step), step 5's priority preemption, and a request's finish at t
 * (its blocks back to F, or queued for the prefix cache). */
int64_t sched_v0_admit(sched *s);
/* Step 6's shortage: preempt the policy-last request (as the config says)
 * until need blocks are free or run[*i] itself goes, which returns 1 (run[*i]
 * is then the next request); *i follows its request when an earlier one
 * goes.  O(|R|) per request preempted. */
int sched_preempt_for(sched *s, int64_t *i, int64_t need, double now);
void sched_v0_priority_preempt(sched *s, double now);
void sched_v0_finish_entry(sched *s, sched_entry *e, double t);
/* V0 multi-step scheduling, --num-scheduler-steps K > 1 (multistep.c,
 * docs/semantics-extensions.md M). */
int sched_plan_multistep(sched *s, double now, double *t_end);
void sched_finish_multistep(sched *s, double t);
int sched_plan_static(sched *s, double now, int more_arrivals, double *t_end);
void sched_finish_static(sched *s, double t);

/* continuous.c: the victim (last running request in policy order, O(|R|))
 * and preemption of run[idx] (recompute, or swap when allowed). */
int64_t sched_victim_index(const sched *s);
void sched_preempt_at(sched *s, int64_t idx, double now, int force_recompute);

/* continuous.c: end the V0 same-set stretch in progress (if any): tell the
 * leap sink its requests and steps.  O(its requests). */
void sched_same_set_flush(sched *s);
/* A step sunk leapt as a same-set stretch's (its members not listed): a
 * stretch starts with ids[0, n) as its set if none is open, and counts
 * one more step.  O(n) at a stretch's start, else O(1). */
void sched_same_set_step(sched *s, const int32_t *ids, int64_t n);

/* continuous.c: write the lazy stretch's entries up to date (no-op if
 * none).  O(its entries). */
void sched_v0_lazy_write(sched *s);

/* continuous.c: step 6's block walk over run[] (also used by chunked.c). */
void sched_take_decode_blocks(sched *s, double now);

/* chunked.c: one iteration with chunked prefill; the admission walk of W
 * taking first chunks (chunked) or whole prompts (prefix caching without
 * chunks), updating *budget (tokens left this step).  Returns requests
 * admitted. */
int sched_plan_chunked(sched *s, double now, double *t_end);
int64_t sched_admit_chunks(sched *s, int64_t *budget, int whole);

/* pcache.c: the prefix cache.  Blocks of request id are numbered from 0;
 * only full blocks inside its hashed prompt (pc.limit) are cached. */
int sched_pc_init(sched *s, const req_prefixes *px, kvs_err *err);
void sched_pc_free(sched_pcache *pc);
/* Hashed prompt tokens of request id (0 without hashes). */
static inline int64_t sched_pc_limit(const sched *s, int32_t id)
{
    return s->pc.limit ? s->pc.limit[id] : 0;
}
/* Full hashed blocks of id among its first ctx stored tokens. */
static inline int64_t sched_pc_blocks(const sched *s, int32_t id, int64_t ctx)
{
    int64_t l = sched_pc_limit(s, id);
    return (ctx < l ? ctx : l) / s->cfg.block_size;
}
/* Identity of block j of request id's prompt.  O(log segments). */
uint64_t sched_pc_block_hash(const sched *s, int32_t id, int64_t j);
/* Leading blocks of id's prompt found in the cache: a binary search, as the
 * cached blocks of a prompt always form a prefix of it (the invariant of
 * pcache.c; sched_audit checks it).  O(log blocks * log segments). */
int64_t sched_pc_match(const sched *s, int32_t id);
/* Look up blocks [k0, k1) of id into pc.scratch / pc.hscratch and count in
 * *busy those some request holds (ref > 0).  Stops early, returning 0, once
 * *busy can no longer reach `need`; else returns 1.  O(k1 - k0). */
int sched_pc_scan(sched *s, int32_t id, int64_t k0, int64_t k1, int64_t need, int64_t *busy);
/* After sched_pc_lookup of the same range: hold blocks [k0, k1) of id
 * (sharing the cached ones, caching the others) and take `cost` blocks net
 * from F (sched_chunk.cost), evicting LRU cached blocks as needed. */
void sched_pc_commit(sched *s, int32_t id, int64_t k0, int64_t k1, int64_t cost);
/* Return every block of a running entry leaving R (finish or preemption):
 * private ones to F, shared ones dropped by one reference (cached when the
 * count reaches 0, the entry's last block becoming least recent). */
void sched_pc_release(sched *s, const sched_entry *e);
/* Evict least recently used cached blocks until cached <= F (after F went
 * down by fresh blocks taken). */
void sched_pc_evict(sched *s);
/* Keep F's cached part evictable: call after taking fresh blocks. */
static inline void sched_blocks_taken(sched *s)
{
    if (s->pc.cached > s->free_blocks)
        sched_pc_evict(s);
}

/* lpm.c: W in lpm order (longest cached prefix first, then (arrival_s,
 * id)), kept current as blocks are cached and evicted.  Create/free; the
 * waiting heap's push and pop; the cache's events (a block identity cached
 * afresh or evicted), which re-key the waiting requests watching it.
 * Each O(log W) per request re-keyed. */
int sched_lpm_init(sched *s);
void sched_lpm_free(sched_lpm *l);
void sched_lpm_push(sched_lpm *l, int32_t id);
int32_t sched_lpm_pop(sched_lpm *l);
void sched_lpm_on_cached(sched_lpm *l, uint64_t h);
void sched_lpm_on_evicted(sched_lpm *l, uint64_t h);
/* The cached leading blocks lpm holds for waiting request id (tests). */
int64_t sched_lpm_key_of(const sched_lpm *l, int32_t id);

static inline void sched_add_member(sched *s, int32_t id, int32_t kind, int64_t tokens,
                                    int64_t ctx)
{
    sched_member *m = &s->members[s->n_members++];
    m->req_id = id;
    m->kind = kind;
    m->tokens = tokens;
    m->context = ctx;
}


static inline int64_t sched_ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

#endif
