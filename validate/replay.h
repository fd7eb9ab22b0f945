/* replay.h — replaying a stored schedule on the real kernels.
 *
 * Two layers:
 *  - replay_sched derives, on the host only, the paged block tables the
 *    schedule implies, step by step, from the recorded members (rules in
 *    docs/validation.md, "Block tables"): a prefill member (re)starts its
 *    request (old blocks freed first: recompute preemption) unless it is the
 *    next chunk of the prompt the request holds (chunked prefill); members
 *    grow to ceil(context / block_size) blocks (at least the reservation
 *    under reserved allocation or static batching); of the holders absent
 *    from a step whose next appearance is neither a decode nor their next
 *    prompt chunk, the step's n_preempted worst in policy order were
 *    preempted before it; a swap-in member gets new blocks; a finished
 *    request frees its blocks after its last step.  Block ids come from a
 *    LIFO free list; fresh ids are numbered in order, so the ids used also
 *    size the pool.  Each step's blocks held are compared with the
 *    simulator's steps.kv_blocks_used.  Prefix-cache sharing is not
 *    reproduced: every request gets private blocks.
 *    Why a copy of the allocator rather than the scheduler's own tables:
 *    the replay sees only what the store holds (each step's members, never
 *    the scheduler's queues, free lists or policy state), so it must derive
 *    the tables from that record; and doing so independently checks the
 *    scheduler.  tests/test_validate.c runs every batching mode, policy,
 *    allocator and preemption mode on random traces and requires the
 *    derived blocks held to equal kv_blocks_used at every step.
 *  - replay runs chosen steps through kernels_step_forward on a backend,
 *    with a paged KV pool of the run's block count for all layers, the
 *    derived block tables, and deterministic input embeddings per (request,
 *    position) (replay_embedding), timing each step.  Steps between the
 *    chosen ones advance the block tables without running kernels, so a
 *    sampled step's tables are right but cached contents from skipped steps
 *    are not computed: such requests are "stale" until they restart.
 *    replay_check_kv recomputes the KV of every request still holding
 *    blocks that is not stale from scratch and compares.
 */
#ifndef REPLAY_H
#define REPLAY_H

#include <stdint.h>

#include "../kernels/kernels.h"
#include "../base/kvs.h"
#include "validate.h"

/* ------------------------------------------------ block tables (host) */

typedef struct replay_sched replay_sched;

/* What replay_sched_begin reports to a caller that keeps KV contents. */
typedef struct replay_sched_hooks {
    void *ctx;
    /* req (re)starts with a prefill; its first `cached` tokens are a prefix
     * hit whose KV it did not compute (0 without prefix caching). */
    int (*start)(void *ctx, int32_t req, int64_t cached, kvs_err *err);
    /* req leaves the device for host swap: blocks[n] still hold its
     * `tokens` tokens (called before the blocks are freed). */
    int (*swap_out)(void *ctx, int32_t req, const int32_t *blocks, int64_t n, int64_t tokens,
                    kvs_err *err);
    /* req came back into the new blocks[n]. */
    int (*swap_in)(void *ctx, int32_t req, const int32_t *blocks, int64_t n, kvs_err *err);
} replay_sched_hooks;

/* Prepare the derivation for run r (borrowed; must outlive it).
 * Cost: O(requests + members). */
int replay_sched_init(const val_run *r, replay_sched **out, kvs_err *err);
void replay_sched_free(replay_sched *s);
/* Index of the next step to apply, 0 .. n_steps. */
int64_t replay_sched_next(const replay_sched *s);
/* Apply the next step's releases and allocations (hooks may be NULL).
 * KVS_EINVAL naming the step when the members contradict the rules (a decode
 * of a request holding nothing, a swap-in of one holding blocks).
 * Cost: O(holders + members + blocks taken). */
int replay_sched_begin(replay_sched *s, const replay_sched_hooks *h, kvs_err *err);
/* Finish the step begun: free the blocks of requests that finished in it. */
void replay_sched_end(replay_sched *s);
/* Blocks held now (between begin and end: during the step). */
int64_t replay_sched_held(const replay_sched *s);
/* Block table of req (NULL with *n = 0 if it holds none) and its tokens. */
const int32_t *replay_sched_blocks(const replay_sched *s, int32_t req, int64_t *n,
                                   int64_t *tokens);
/* Distinct block ids handed out so far (ids are 0 .. this - 1). */
int64_t replay_sched_ids(const replay_sched *s);
/* Steps applied whose held blocks differed from steps.kv_blocks_used, and
 * the first of them (-1 if none). */
int64_t replay_sched_mismatches(const replay_sched *s, int64_t *first);
/* Prefill (re)starts so far over a prefix-cache hit (the member's context
 * exceeds its tokens without continuing a held prompt). */
int64_t replay_sched_hit_starts(const replay_sched *s);
/* Requests holding blocks now, in id order, into out[cap]; returns count. */
int64_t replay_sched_holders(const replay_sched *s, int32_t *out, int64_t cap);

/* ------------------------------------------------------ kernel replay */

/* The deterministic input embedding (hidden state entering layer 0) of the
 * token at position pos of request req: hidden values uniform in [-1, 1)
 * from a generator seeded by (seed, req, pos).  Cost: O(hidden). */
void replay_embedding(uint64_t seed, int64_t req, int64_t pos, float *out, int64_t hidden);

typedef struct replay_options {
    int64_t warmup;   /* untimed runs of each replayed step before timing, >= 0 */
    int64_t repeats;  /* timed runs per step, >= 1; the median is kept */
    uint64_t seed;    /* weights and input embeddings */
    int check_kv;     /* 1: also reserve memory for replay_check_kv */
} replay_options;

/* Device memory a replay of the given steps needs, bytes. */
typedef struct replay_plan {
    int64_t pool_blocks;     /* max(runs.kv_blocks, block ids the schedule uses) */
    int64_t max_tokens;      /* largest replayed step, tokens */
    int64_t max_seqs;        /* largest replayed step, requests */
    int64_t max_context;     /* longest context in a replayed step, tokens */
    int64_t weights_bytes, kv_bytes, acts_bytes, workspace_bytes, check_bytes;
    int64_t total_bytes;     /* sum of the above */
} replay_plan;

/* Plan a replay of steps[n] (increasing) of r on be.  Cost: one host pass
 * of the block tables over every step. */
int replay_plan_make(const kernels_backend *be, const val_run *r, const int64_t *steps,
                     int64_t n, const replay_options *o, replay_plan *out, kvs_err *err);

typedef struct replay replay;

/* Plan, compare with the device's free memory (refused before allocating,
 * KVS_EDEVICE naming the bytes needed and free), and allocate weights (one
 * layer's, seeded), the KV pool (all layers) and activations.  r and be are
 * borrowed.  Cost: the allocations. */
int replay_open(kernels_backend *be, const val_run *r, const int64_t *steps, int64_t n,
                const replay_options *o, replay **out, kvs_err *err);
void replay_close(replay *rp);
/* The plan replay_open used. */
const replay_plan *replay_get_plan(const replay *rp);

/* Replay step i (greater than any step replayed before): advance the block
 * tables over the skipped steps, apply step i's, run it (warmup untimed,
 * then repeats timed; timer around kernels_step_forward only, inputs
 * written before), and free its finished requests.  *measured_s = median
 * (0 for a step without members).  Cost: (warmup + repeats) steps. */
int replay_step(replay *rp, int64_t i, double *measured_s, kvs_err *err);

/* For every request holding blocks whose KV the replay computed in full
 * (not stale: every step since its last (re)start from token 0 was
 * replayed, swap-outs included): prefill its stored tokens (positions
 * 0 .. tokens-1, same embeddings) into a clean cache and compare K and V of
 * every layer and position, read through the block tables, with the
 * replayed cache.  *n_checked requests, *n_stale skipped; *max_nmse the
 * worst sum((a-b)^2) / sum(b^2) over them (NAN if none).
 * Cost: one prefill per request + reading its blocks. */
int replay_check_kv(replay *rp, int64_t *n_checked, int64_t *n_stale, double *max_nmse,
                    kvs_err *err);

/* The block tables and the KV pools of the replay (for tests and tools
 * that inspect the cache; valid until replay_close). */
const replay_sched *replay_get_sched(const replay *rp);
kernels_kv *replay_get_kv(replay *rp);

/* Peak blocks, pool, block bytes and the block-table check so far. */
void replay_get_stats(const replay *rp, val_replay_stats *out);

#endif
