/* sched.h — the serving engine: decides WHAT runs in each step.
 *
 * Implements docs/semantics.md: continuous (iteration-level) batching with
 * strict-queue prefill-first admission, static (padded) batching, FCFS or
 * priority order, paged or reserved KV allocation, and recompute / swap / no
 * preemption; and docs/semantics-extensions.md: chunked prefill, prefix
 * caching (shared, reference-counted KV blocks of equal prompt prefixes
 * with LRU eviction) and the cache-aware lpm order.  It knows nothing of
 * files, SQLite or the clock's source: the event loop (sim/engine.h) tells
 * it when requests arrive and when a step ends, and it asks a cost model
 * how long each step takes.
 *
 * cfg.engine selects the rules: SCHED_ENGINE_VLLM_V0 (the default, above)
 * or SCHED_ENGINE_VLLM_V1, docs/semantics-v1.md: one token budget per step
 * shared by running requests first and then waiting ones, recompute-only
 * preemption and vLLM V1's block pool (scheduler/v1.c, v1_pool.c).  Both sit
 * behind the same entry points below.
 *
 * Per-request state lives in flat arrays indexed by request id; the waiting
 * queue is a sorted ring under fcfs (O(1)) and a binary heap in policy order
 * otherwise (admission only ever takes its head), so one step costs
 * O(batch + log(waiting)) and allocates nothing.
 * Prefix caching adds O(blocks) hashing per admission and per request
 * leaving, and lpm O(log waiting) per request whose key the cache changes.
 */
#ifndef SCHED_H
#define SCHED_H

#include <stddef.h>
#include <stdint.h>

#include "../cost/cost.h"
#include "../base/kvs.h"
#include "../base/request.h"

typedef enum sched_batching {
    SCHED_BATCHING_CONTINUOUS = 0,
    SCHED_BATCHING_STATIC = 1
} sched_batching;

typedef enum sched_policy {
    SCHED_POLICY_FCFS = 0,     /* key (arrival_s, id) */
    SCHED_POLICY_PRIORITY = 1, /* key (priority, arrival_s, id) */
    SCHED_POLICY_LPM = 2       /* waiting: longest cached prefix first, then
                                  (arrival_s, id); victims as fcfs */
} sched_policy;

typedef enum sched_alloc {
    SCHED_ALLOC_PAGED = 0,           /* ceil(context / block_size) blocks */
    SCHED_ALLOC_RESERVED = 1,        /* ceil(max_model_len / block_size) */
    SCHED_ALLOC_RESERVED_ORACLE = 2  /* ceil((P + O) / block_size) */
} sched_alloc;

typedef enum sched_preempt {
    SCHED_PREEMPT_RECOMPUTE = 0,
    SCHED_PREEMPT_SWAP = 1,
    SCHED_PREEMPT_OFF = 2
} sched_preempt;

/* Which serving engine's rules the scheduler follows: V0 is
 * docs/semantics.md with docs/semantics-extensions.md, V1 is
 * docs/semantics-v1.md (one shared token budget per step, running requests
 * first, recompute-only preemption, vLLM V1's block pool).  V0 is 0 so a
 * zeroed config keeps the V0 behaviour. */
typedef enum sched_engine {
    SCHED_ENGINE_VLLM_V0 = 0,
    SCHED_ENGINE_VLLM_V1 = 1,
    SCHED_ENGINE_TRTLLM = 2, /* docs/engine-trtllm.md (scheduler/trtllm.c) */
    SCHED_ENGINE_SGLANG = 3  /* docs/semantics-sglang.md (scheduler/sglang.c) */
} sched_engine;

/* The largest multi-step group (sched_config.num_scheduler_steps). */
#define SCHED_MAX_SCHEDULER_STEPS 1024

typedef struct sched_config {
    sched_batching batching;
    sched_policy policy;
    int priority_preemption;    /* 1: step 5 of the semantics is on */
    sched_alloc alloc;
    sched_preempt preemption;
    int64_t block_size;         /* tokens per KV block, >= 1 */
    int64_t total_blocks;       /* KV blocks on the (per-GPU) cache, >= 1 */
    int64_t max_seqs;           /* max_num_seqs: running requests */
    int64_t max_batched_tokens; /* prefill token budget per step */
    int64_t max_model_len;      /* P + O limit, tokens */
    double watermark;           /* fraction of total blocks kept free */
    int64_t swap_blocks;        /* host swap space, blocks (swap only) */
    double swap_block_s;        /* seconds to move one block over host link */
    double batch_timeout_s;     /* static: idle engine waits this long to fill */
    int chunked_prefill;        /* 1: prompts run in chunks beside decodes */
    int prefix_caching;         /* 1: share KV blocks of equal prompt prefixes */
    sched_engine engine;        /* V0 (default) or V1 rules */
    int64_t long_prefill_threshold; /* V1: at most this many tokens of one
                                       request per step, 0 = off */
    int64_t segment_tokens;     /* V1: tokens per prefix segment id (S), 0 = 512 */
    int kv_cache_off;           /* 1: no KV cache: every step recomputes each member's
                                   whole context (docs/semantics-extensions.md N) */
    /* V1 hybrid KV groups (docs/semantics-v1.md section 2.9): a block of
     * total_blocks is then one group's page; all 0 = one group, today's */
    int64_t kv_window;          /* V1: tokens a sliding-window group keeps, 0 = none */
    int64_t kv_full_groups;     /* V1: full-attention groups, pages per block of context
                                   (0 = 1) */
    int64_t kv_window_groups;   /* V1: sliding-window groups, pages per block in the
                                   window; 0 unless kv_window > 0 */
    /* SGLang (docs/semantics-sglang.md): max_batched_tokens is its
     * chunked_prefill_size C (chunked_prefill 0: no chunks), max_seqs its
     * max_running_requests M, prefix_caching its radix cache, block_size 1
     * (a block is a token slot, page size 1) */
    int64_t max_prefill_tokens; /* SGLang: B, prompt tokens per extend step, tokens
                                   (0 = 16384, its default) */
    double conservativeness;    /* SGLang: schedule_conservativeness s > 0 (0 = 1.0):
                                   the new-token ratio starts at min(0.7 s, 1) */
    int overlap;                /* SGLang: 1 = the overlap scheduler (each step decided
                                   while the one before runs), 0 = off */
    int64_t num_scheduler_steps; /* V0 multi-step: decode steps per scheduling, the
                                    group size K (docs/semantics-extensions.md M);
                                    0 or 1 = off */
} sched_config;

typedef enum sched_req_status {
    SCHED_REQ_PENDING = 0,  /* not yet arrived */
    SCHED_REQ_WAITING = 1,  /* in the waiting queue */
    SCHED_REQ_RUNNING = 2,  /* in the running list */
    SCHED_REQ_SWAPPED = 3,  /* KV on the host, waiting for swap-in */
    SCHED_REQ_FINISHED = 4,
    SCHED_REQ_REJECTED = 5
} sched_req_status;

/* Why a request was rejected (the first of these that holds). */
typedef enum sched_reject_reason {
    SCHED_REJECT_NONE = 0,          /* not rejected */
    SCHED_REJECT_CONTEXT = 1,       /* P + O > max_model_len */
    SCHED_REJECT_TOKEN_BUDGET = 2,  /* its prompt exceeds max_batched_tokens (unchunked) */
    SCHED_REJECT_KV_CAPACITY = 3    /* its blocks exceed the whole cache (above the watermark) */
} sched_reject_reason;

/* "context", "token-budget", "kv-capacity"; NULL for NONE. */
const char *sched_reject_reason_name(int v);

/* Outcome of one request: 24 bytes, one per request of the trace (a
 * million-request run holds a million).  What only swap preemption makes
 * is apart, in sched_req_swap. */
typedef struct sched_req_result {
    double first_token_s;  /* end of the step that made g 0->1; NAN if none */
    double finish_s;       /* end of the step that made g == O; NAN if none */
    int32_t preemptions;   /* recompute + swap preemptions */
    uint8_t status;        /* sched_req_status: FINISHED or REJECTED at end */
    uint8_t reject_reason; /* sched_reject_reason: NONE unless REJECTED */
} sched_req_result;
_Static_assert(sizeof(sched_req_result) == 24, "sched_req_result grew past 24 bytes");

/* A request's swaps (V0 with --preemption swap only; every other engine
 * and mode has none, and its results no array of these). */
typedef struct sched_req_swap {
    double swapped_s;      /* total seconds spent swapped out */
    int32_t swaps;         /* swap-outs (counted in preemptions too) */
} sched_req_swap;

/* Request i's swaps from an array that may be NULL (an engine that cannot
 * swap: 0 s and 0 swaps).  O(1). */
static inline sched_req_swap sched_swap_at(const sched_req_swap *w, int64_t i)
{
    return w ? w[i] : (sched_req_swap){0.0, 0};
}

typedef enum sched_step_kind {
    SCHED_STEP_PREFILL = 0,  /* only prefills (and swap-ins) */
    SCHED_STEP_DECODE = 1,   /* only decodes */
    SCHED_STEP_MIXED = 2     /* both (chunked prefill, static never) */
} sched_step_kind;

/* What kept the step's batch from growing: the reason admission stopped at
 * the first waiting request (in policy order) that could not join. */
typedef enum sched_step_limit {
    SCHED_LIMIT_NONE_WAITING = 0, /* nothing was left waiting */
    SCHED_LIMIT_KV = 1,           /* KV blocks: the head does not fit above the watermark,
                                     a request is swapped out, or the step preempted */
    SCHED_LIMIT_MAX_SEQS = 2,     /* max_num_seqs requests were running */
    SCHED_LIMIT_TOKEN_BUDGET = 3, /* the step's token budget was used up */
    SCHED_LIMIT_OTHER = 4         /* a batch runs that none may join: static batching,
                                     a V0 multi-step group's later steps */
} sched_step_limit;
#define SCHED_LIMIT_COUNT 5

/* One engine step, as emitted to the step sink. */
typedef struct sched_step {
    int64_t index;        /* 0-based step number */
    double start_s;       /* step start, seconds since trace start */
    double dur_s;         /* compute + swap transfer time */
    int32_t kind;         /* sched_step_kind */
    int32_t n_preempted;  /* requests preempted while forming this step */
    int32_t limit;        /* sched_step_limit */
    int32_t leapt;        /* 1: a V1 leap's step (its decodes not listed; a
                             prompt chunk that makes no token is listed), or a
                             V0 decode step with the previous step's members
                             (but those that finished), sunk without members
                             (sched_set_leap_sink); else 0 */
    cost_batch batch;     /* what the cost model saw */
    int64_t kv_blocks_used; /* blocks held by all requests during the step */
    int64_t n_waiting;    /* waiting queue length at step start (after admission) */
    int64_t n_running;    /* running requests after admission / preemption */
    int64_t swap_out_blocks, swap_in_blocks; /* moved in this step */
    int32_t held;         /* 1: its decodes' tokens reach the client only at the
                             end of their multi-step group's last step (V0
                             --num-scheduler-steps, docs/semantics-extensions.md
                             M4); else 0 */
    int32_t pad_;         /* zero */
} sched_step;

typedef enum sched_member_kind {
    SCHED_MEMBER_PREFILL = 0,
    SCHED_MEMBER_DECODE = 1,
    SCHED_MEMBER_SWAPIN = 2
} sched_member_kind;

/* A request's part in a step. */
typedef struct sched_member {
    int32_t req_id;   /* trace index */
    int32_t kind;     /* sched_member_kind */
    int64_t tokens;   /* tokens processed: P+g (prefill, padded for static; with
                         chunks or prefix hits the chunk's new tokens), 1 */
    int64_t context;  /* tokens of KV after the step */
} sched_member;

/* Called once per step that runs, at its start, before time advances. */
typedef void (*sched_step_fn)(void *ctx, const sched_step *step,
                              const sched_member *members, int64_t n_members);

typedef struct sched sched;

/* Check a config for `n` requests without creating an engine (the same
 * checks sched_init makes): KVS_EINVAL naming the flag at fault. */
int sched_config_check(const sched_config *cfg, int64_t n, kvs_err *err);

/* Create an engine for `n` requests (borrowed; must outlive the engine).
 * Checks the config (KVS_EINVAL naming the field).  Cost: O(n) memory. */
int sched_init(sched **out, const sched_config *cfg, const trace_req *reqs,
               int64_t n, const cost_model *cost, kvs_err *err);
/* sched_init for one engine of a cluster whose engines never hold the same
 * request (each request arrives at one of them at most; not with
 * sched_keep_finished): a V0 engine keeps its per-request state (results,
 * tokens generated, swap records, status) in `owner`'s arrays rather than
 * its own, so that N engines touch the memory of one instead of N times
 * it.  owner: a V0 engine from sched_init on the same reqs and n, freed
 * after every engine sharing with it.  sched_results(s) is then owner's
 * array, and entry i is that of the engine request i arrived at.  Other
 * engines (vllm-v1, trtllm), or an owner that does not fit, keep their own
 * arrays as sched_init's.  Cost: O(n) memory for the owner only. */
int sched_init_shared(sched **out, const sched_config *cfg, const trace_req *reqs,
                      int64_t n, const cost_model *cost, sched *owner, kvs_err *err);
void sched_free(sched *s);

/* Request `id` arrives (ids must arrive in non-decreasing arrival order). */
void sched_arrive(sched *s, int64_t id);

typedef enum sched_plan {
    SCHED_PLAN_STEP = 0,  /* a step started: it ends at *t_end */
    SCHED_PLAN_IDLE = 1,  /* nothing can run until the next arrival */
    SCHED_PLAN_WAIT = 2,  /* nothing runs before *t_end (batch timeout) */
    SCHED_PLAN_STUCK = 3  /* no progress is possible (see sched_error) */
} sched_plan;

/* Run one iteration's decisions at time `now`: admission, preemption, and
 * the step's batch; the step's tokens are generated by sched_finish_step.
 * more_arrivals tells whether any request has yet to arrive.  Returns a
 * sched_plan; on SCHED_PLAN_STEP the step has been emitted to the sink.
 * Cost: O(batch + preemptions * running + log waiting). */
int sched_plan_step(sched *s, double now, int more_arrivals, double *t_end);

/* Promise that no request arrives (nor any other event outside the engine
 * happens) before time t, for the next sched_plan_step only.  With it an
 * engine may leap: plan, run and emit to the sink several steps at once
 * whose decisions are forced (under V1: every running request decodes, none
 * finishes, nothing can be admitted and no block demand exceeds the free
 * blocks), each step starting before t, and return the end of the last
 * one, which sched_finish_step then ends.  Under V0 (continuous batching,
 * with a leap sink) the steps leapt are those of a same-set stretch
 * (sched_set_leap_sink) while each starts before t, nobody finishes before
 * the last and the free blocks cover a block per running request
 * (docs/semantics.md section 7, "Leaps (V0)"); under trtllm (guaranteed
 * no evict, with a leap sink) the same-set steps after a step of
 * generation requests only, up to the first finish (docs/engine-trtllm.md,
 * section 4); under sglang (with a leap sink) the decode steps that
 * admission cannot interrupt, up to the step before the first finish
 * (docs/semantics-sglang.md, section 16).  The sink sees every step as
 * the step-by-step engine emits it and the results are identical; without the
 * call (or with t = -INFINITY) every plan is one step.  Leaps are off while
 * the sink wants decode members (--record-steps).  Cost: O(1). */
void sched_set_horizon(sched *s, double t);

/* Whether a V1 leap may go on past a step in which requests finish (they
 * finish inside the plan, at that step's end, as the step-by-step engine
 * would finish them, and the leap goes on without them).  Off by default:
 * a cluster's router reads each replica's load at its step ends
 * (sim/cluster.c), so there a finish must end the plan; a single engine
 * (sim/engine.c) turns it on.  The results are the same either way.
 * Cost: O(1). */
void sched_set_leap_past_finish(sched *s, int on);

/* As sched_set_horizon(s, far), but a request rejected during the plan
 * brings the horizon back to near (<= far) from then on: a cluster's
 * router may know that no arrival before `far` can come to this engine
 * only while the engine's own load does not fall (docs/cluster.md K8b).
 * For the next plan only.  Cost: O(1). */
void sched_set_horizon_pair(sched *s, double near, double far);

/* For the next plan only: the arrivals of this engine come from *cursor
 * (the id of the next request to arrive; < 0 or >= n: none), each followed
 * by next_of[id] (-1: none; next_of NULL: id + 1, the trace order), and no
 * other external event (a timeout) comes before other_s.  An engine that
 * can (V1 in a leap; V0 in a leap under fcfs while requests wait, docs/
 * semantics.md section 7; trtllm in a leap, docs/engine-trtllm.md section
 * 4) then takes in each arrival itself, at its time: it
 * applies its arrival rule just before planning the first step that starts
 * at or after the request's arrival_s, as the step-by-step engine would
 * after the arrival event, and advances *cursor past it; the caller must
 * not deliver those again.  Leaps then run past arrivals that cannot be
 * admitted (a waiting queue held up by KV blocks, max_seqs or the token
 * budget; under trtllm, a capacity pass that stopped short of its list)
 * instead of ending at each one; sglang takes them in during a leap while
 * R's full flag keeps admission shut (docs/semantics-sglang.md, section
 * 16).  Cost: O(1). */
void sched_set_arrivals(sched *s, int64_t *cursor, const int32_t *next_of, double other_s);

/* Why the last plan returned SCHED_PLAN_STUCK (e.g. every running request
 * needs a block with --preemption off). */
const char *sched_error(const sched *s);

/* The running step ends at time t: generate tokens, finish requests. */
void sched_finish_step(sched *s, double t);

/* Install the step sink.  With want_members 0 the sink gets n_members = 0
 * for decode steps and the engine skips writing them (faster); prefill
 * members (chunks included) are always listed. */
void sched_set_step_sink(sched *s, sched_step_fn fn, void *ctx, int want_members);

/* Leapt tokens told (docs/semantics-v1.md 9): each request ids[k] made
 * one token at the end of each of the last c steps sunk with leapt = 1 (c
 * = each[k], or steps when each is NULL; 0: none), in which its decode
 * was not listed as a member (a V1 step may list the chunks of requests
 * outside the leap), the first of them following a step in which it made
 * a token; none of them was told before.  An engine tells a request's
 * leapt tokens before any later step lists it and before it finishes or is
 * preempted; the V1 engine tells a request leaving a leap alone, the
 * others when the leap ends.  ctx is the step sink's. */
typedef void (*sched_leap_fn)(void *ctx, const int32_t *ids, int64_t n, int64_t steps,
                              const int32_t *each);

/* Install a leap sink (NULL: none).  With one, the V1 engine leaps even
 * when the step sink wants members: the leapt steps reach the step sink
 * with leapt = 1 and no members, then fn names their requests.  Without
 * one, wanting members turns leaps off.  The V0 continuous engine leaps
 * only with one, and with one it sinks each decode step whose members are
 * the previous step's, a decode of every running request, but for those
 * that finished at its end (nothing was admitted or preempted) the same
 * way, and plans and finishes such a stretch of
 * steps in O(1) each; fn names the stretch's requests before any later
 * step lists members, at a preemption or when one of them finishes.
 * Cost: O(1). */
void sched_set_leap_sink(sched *s, sched_leap_fn fn);

/* Results, indexed by request id; valid until sched_free. */
const sched_req_result *sched_results(const sched *s);

/* The results array itself, handed over (free() it); sched_results returns
 * NULL afterwards.  Call once the run is over: it saves a copy of n
 * results.  Cost: O(1). */
sched_req_result *sched_take_results(sched *s);

/* The swaps, indexed by request id, or NULL when the engine cannot swap
 * (then every request's are 0 and 0 s); valid until sched_free.  The take
 * hands the array over as sched_take_results does.  Cost: O(1). */
const sched_req_swap *sched_swaps(const sched *s);
sched_req_swap *sched_take_swaps(sched *s);

/* Live counters for invariant checks and metrics. */
typedef struct sched_counters {
    int64_t free_blocks;     /* F */
    int64_t used_blocks;     /* held by running requests */
    int64_t swapped_blocks;  /* held on the host */
    int64_t n_waiting, n_running, n_swapped, n_finished, n_rejected;
    int64_t steps;
    int64_t preempt_recompute, preempt_swap, preempt_priority;
    /* prefix caching (all 0 without it); free_blocks includes cached_blocks */
    int64_t cached_blocks;       /* cached blocks no request holds (evictable) */
    int64_t prefix_query_blocks; /* full hashed prompt blocks looked up at admission */
    int64_t prefix_hit_blocks;   /* of those, found in the cache (leading run) */
    int64_t prefix_query_tokens; /* P + g of every admission */
    int64_t prefix_hit_tokens;   /* hit blocks * block_size */
    int64_t prefix_saved_tokens; /* prompt tokens not computed thanks to hits */
    int64_t prefix_evictions;    /* cached blocks evicted for fresh ones */
    int64_t prefill_chunks;      /* prefill chunks run (chunked prefill) */
    int64_t leap_steps;          /* steps planned inside leaps (sched_set_horizon) */
    int64_t leap_resumes;        /* plans that went on with a leap the horizon had
                                    paused (V1 and V0) */
    int64_t leap_finishes;       /* V1 leaps that went on past a step in which
                                    requests finished (sched_set_leap_past_finish) */
    int64_t leap_prefills;       /* V1 leaps whose step 1 held prefill chunks that
                                    reached every known token (an admission's) */
    int64_t leap_chunks;         /* V1 leapt steps that held a prompt chunk short
                                    of the prompt's end (R's last request) */
    int64_t leap_joins;          /* V1 leapt steps in which a newcomer's chunk made
                                    its token and it joined the leap (leap_join) */
    int64_t leap_preempted;      /* V1 leaps whose step 1 preempted (its victims
                                    then wait at W's head) */
} sched_counters;
void sched_get_counters(const sched *s, sched_counters *out);
/* Bytes of per-request engine state handed back to the system so far: a
 * V1 engine's entries of requests that have ended (docs/architecture.md,
 * "Memory"); 0 for the other engines.  Not a result: when it grows depends
 * on how the steps were planned (leaps).  O(1). */
int64_t sched_state_released(const sched *s);
/* What a router reads, without the rest: *resolved = n_finished +
 * n_rejected and *used_blocks as sched_get_counters gives them.  O(1). */
void sched_get_load(const sched *s, int64_t *resolved, int64_t *used_blocks);

/* Give the engine the workload's prompt prefix identities (base/request.h;
 * borrowed like reqs, describing the same n requests) before the first
 * arrival.
 * Without this call, or for a trace without hashes, no block is ever
 * shared.  A no-op unless cfg->prefix_caching.  KVS_ENOMEM on failure.
 * Cost: O(n + total segments) time, memory O(min(total_blocks, distinct
 * hashed blocks)). */
int sched_attach_prefixes(sched *s, const req_prefixes *px, kvs_err *err);

/* Recount every block from scratch and compare with the live counters:
 * under prefix caching, each cached block's reference count equals the
 * number of running requests whose stored full hashed blocks include it,
 * evictable blocks are exactly those with count 0, and
 * free + used == total_blocks with used == private blocks + cached blocks
 * in use.  Under V1: every block's count equals the requests of R whose
 * block tables hold it, Q is exactly the blocks with count 0, each running
 * request holds ceil(stored / bs) blocks and M lists exactly the blocks that
 * carry an identity.  Returns 0, or -1 with the first mismatch in why[n].
 * For tests.
 * Cost: O(running requests * their blocks + cache size). */
int sched_audit(const sched *s, char *why, size_t n);

/* Prompt tokens of request `id` whose KV this engine holds in its prefix
 * cache right now: the leading run of cached full prompt blocks times the
 * block size, as an admission would find it (V1 at most floor((P - 1) /
 * block_size) blocks, rule 2.6).  Changes nothing; 0 without prefix
 * caching or prefix identities.  `id` need not have arrived here: routers
 * ask every replica about a request before sending it to one.
 * Cost: O(log blocks) under V0, O(hit blocks) under V1. */
int64_t sched_cached_prefix_tokens(const sched *s, int64_t id);

/* ---- disaggregated serving (docs/cluster.md, section D; vllm-v1 only) */

/* Decode side.  A remote request (output_tokens >= 2) arrives with its
 * prompt's KV computed on another engine and its first token made there.
 * It waits in W like any arrival (rule 1.6 applies) until the waiting walk
 * reaches it with room: then it allocates blocks for P + 1 tokens (its
 * leading cached blocks found as for any admission, the rest fresh), its
 * load starts (sched_loads_started) and it leaves W, holding those blocks
 * but no running slot.  When the caller says its KV has arrived
 * (sched_kv_loaded) it is admitted before W's requests with the P prompt
 * tokens stored and the first token as its next input (O - 1 decode
 * steps).  Its first_token_s stays NAN here; a later recompute preemption
 * recomputes the prompt on this engine (docs/cluster.md D4, D5). */
typedef struct sched_kv_load {
    int64_t id;      /* trace index */
    int64_t tokens;  /* prompt tokens whose KV moves (P less the leading
                        tokens found in this engine's cache), tokens */
    double start_s;  /* when its blocks were allocated (the step's start), s */
} sched_kv_load;

/* Make the engine able to take remote requests: KVS_EINVAL but under
 * vllm-v1 or when it shares its requests' state, KVS_ENOMEM.  O(n) memory
 * once (a byte per request). */
int sched_accept_remote(sched *s, kvs_err *err);
/* Remote request id arrives now (after sched_accept_remote).  O(1). */
void sched_arrive_remote(sched *s, int64_t id);
/* The loads begun since the last call, in the order they began; the array
 * stays valid until the next plan.  O(1). */
const sched_kv_load *sched_loads_started(sched *s, int64_t *n);
/* Request id's load (begun) has ended: it waits to be admitted.  O(1). */
void sched_kv_loaded(sched *s, int64_t id);

/* Prefill side.  With on = 1, a request that finishes keeps its KV blocks
 * (counted in used_blocks, not in a running slot) until
 * sched_release_finished: the prefill side of a KV transfer.  KVS_EINVAL under vllm-v0, KVS_ENOMEM.
 * Cost: O(n) memory once. */
int sched_keep_finished(sched *s, int on, kvs_err *err);

/* Free the blocks finished request `id` kept (no-op if it kept none), last
 * block first as a finish frees them.  Cost: O(its blocks). */
void sched_release_finished(sched *s, int64_t id);

/* SGLang's max_running_requests (docs/semantics-sglang.md 11.1) for a pool
 * of `slots` token slots and a context of `context` tokens: given > 0,
 * min(given, slots / 2); else min(clamp(slots / context * 512, 2048,
 * 4096), slots / 2), at least 1.  O(1). */
int64_t sched_sglang_max_running(int64_t given, int64_t slots, int64_t context);

/* Enum names for flags and the store ("continuous", "fcfs", "paged", ...),
 * and the reverse; parse returns -1 for an unknown name. */
const char *sched_engine_name(int v);   /* "vllm-v0", "vllm-v1", "trtllm", "sglang" */
int sched_engine_parse(const char *s);
const char *sched_batching_name(int v);
const char *sched_policy_name(int v);
const char *sched_alloc_name(int v);
const char *sched_preempt_name(int v);
int sched_batching_parse(const char *s);
int sched_policy_parse(const char *s);
int sched_alloc_parse(const char *s);
int sched_preempt_parse(const char *s);

#endif
