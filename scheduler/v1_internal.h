/* v1_internal.h — the vLLM V1 engine's state (docs/semantics-v1.md), shared
 * by v1.c (the iteration), v1_pool.c (the block pool), v1_pd.c (the
 * hand-off of disaggregated serving) and v1_audit.c (the recount), and
 * nothing else.
 */
#ifndef V1_INTERNAL_H
#define V1_INTERNAL_H

#include <assert.h>

#include "sched_internal.h"
#include "../base/vmem.h"

/* A block identity (rule 2.4): shared (chain hash of the segment ids
 * h_0..h_s, e - s*S) or private (request id, j | 2^63). */
typedef struct v1_key {
    uint64_t a, b;
} v1_key;

#define V1_PRIVATE (1ULL << 63) /* in v1_key.b: a private identity (request, j) */

/* The block pool: blocks 1..N (0 is "none"), the free queue Q (every
 * block with count 0, least recently freed first) and the cache map M
 * (identity -> its blocks in registration order, as a list threaded
 * through the blocks; an open-addressing table keeps the list heads and
 * tails).
 *
 * Q is a ring of block numbers in the order they were freed: a release
 * appends at the tail, a take pops the head, and a hit on a free block
 * (v1_pool_hold) leaves a hole (0) where it stood, which pops skip.  When
 * the ring fills it is packed in place, keeping the order; it has room
 * for twice the blocks, so packing costs O(1) per release amortized.
 * Takes then read the ring in order, and the blocks the next takes will
 * touch are known (and fetched) well ahead, where a linked list would
 * wait for each one in turn.  A block's hot state (count, place in the
 * ring, flags) is 12 bytes in one array; the cache's (identity, list
 * links, watch index) another, touched only for blocks with a shared
 * identity.  A private identity (request, block index) is not stored at
 * all until its request is preempted: the engine passes it again then, to
 * v1_pool_save (or v1_pool_publish).
 *
 * Dead runs.  The blocks a finished request gives back that carry no
 * identity or only its own private one (count 1, nothing but HAS_ID, LAZY,
 * SAVED in their flags) can never be found again: only that request looks
 * its private identities up.  Q needs of them only their places and, when
 * taken, whether they carried an identity (the counters).  So
 * v1_pool_release_dead_rev appends a stretch of them to Q as one entry of
 * the ring, a run marker -k (k blocks), and their numbers, in Q's order,
 * to a FIFO of its own (anon, read at ahead), with a bit for an identity:
 * runs leave Q in the order they entered it, so
 * the FIFO's head is always the head run's.  A take from a run reads the
 * FIFO, not the block; a run block's count is 0 but its flags stay as they
 * were when it was held (V1_BLK_INQ clear: that tells it from a block in
 * the ring) until it is taken.  Adjacent runs merge.  A finished
 * request's private region goes without a look at its blocks
 * (v1_pool_release_run_rev).  Release and take cost about 8 and 10
 * instructions a block where the ring's per-block bookkeeping (place,
 * flags) cost about 25 and 30. */
#define V1_BLK_INQ 1u    /* in Q */
#define V1_BLK_HAS_ID 2u /* carries an identity (registered) */
#define V1_BLK_LAZY 4u   /* a private identity never in the table (v1_pool_publish
                            puts it there; v1_pool_save keeps it out) */
#define V1_BLK_SAVED 8u  /* with LAZY: the private identity x[b].key is findable
                            through its request's saved row (v1_pool_save) */
#define V1_BLK_WATCHED 0x80000000u /* in the watched lookup's answer (wh[0 .. wm));
                                     the top bit: v1_pool_release_rev sums it
                                     and V1_BLK_HAS_ID in one word */

/* An entry of the dead runs' FIFO: the block's number, and whether it
 * carried an identity when it went there. */
#define V1_ANON_ID (1u << 31)
#define V1_ANON_BLOCK (V1_ANON_ID - 1)

typedef struct v1_blk {
    int32_t ref;               /* reference count */
    int32_t qpos;              /* its slot in the ring while in Q */
    uint32_t flags;            /* V1_BLK_* */
} v1_blk;

typedef struct v1_blkx {       /* with prefix caching only */
    v1_key key;                /* its identity (shared identities and published
                                  private ones) */
    int32_t mprev, mnext;      /* neighbours under the same identity, 0 = none */
    int32_t widx;              /* 1 + index in wh, 0: not found */
    int32_t pad_;
} v1_blkx;

typedef struct v1_pool {
    int64_t N;
    v1_blk *blk;               /* [N + 1] */
    v1_blkx *x;                /* [N + 1], NULL without prefix caching */
    int32_t *ring;             /* [rmask + 1] Q in order: a block, 0 = a hole, -k = a
                                  dead run of k blocks (their numbers in anon) */
    uint64_t rmask;            /* ring size - 1 (a power of two >= 2 (N + 1)) */
    uint64_t rhead, rtail;     /* ring counters: Q lies in [rhead, rtail) */
    int64_t F;                 /* |Q| (blocks, holes not counted) */
    uint32_t *anon;            /* [acap] the dead runs' blocks (V1_ANON_*), in Q's
                                  order, in [ahead, atail) */
    int64_t acap;              /* 4 (N + 1): packed (moved to 0) when an append would
                                  pass it, O(1) amortized */
    int64_t ahead, atail;      /* indexes in anon */
    struct v1_slot {           /* [mask + 1] the table */
        v1_key k;              /* identity */
        int32_t head, tail;    /* earliest / latest block under it, 0 = slot empty */
    } *tab;
    uint64_t mask;
    int64_t cached;            /* blocks in Q that carry an identity */
    int64_t evictions;         /* identities removed by taking a block */
    int64_t ids;               /* blocks carrying an identity */
    /* the watched lookup (v1.c's last find_hits), kept current as blocks
     * leave M: a found block (always its list's head) gives way to the next
     * block under its identity, or the answer ends before it */
    int32_t *wh;               /* [tcap] borrowed: the blocks found, in order */
    int64_t wm;                /* how many */
    v1_key watch_miss;         /* the first key not found */
    int watch_has_miss;        /* 0: the lookup stopped at its cap */
    int64_t wepoch;            /* the key not found entered M: look up again */
    int64_t wfree;             /* blocks of wh[0 .. wm) with count 0 (in Q), kept by
                                  hold, release and take through V1_BLK_WATCHED: a
                                  blocked head's free hits without a pass over them */
} v1_pool;

int v1_pool_init(v1_pool *p, int64_t N, int with_cache);
void v1_pool_free(v1_pool *p);
/* Earliest registered block under k, or 0.  O(1) expected. */
/* The watched lookup: forget it (O(wm)); note a block found (at index wm)
 * or the first key missed. */
void v1_pool_watch_clear(v1_pool *p);
static inline void v1_pool_watch_hit(v1_pool *p, int32_t b)
{
    p->x[b].widx = (int32_t)(p->wm + 1);
    p->wh[p->wm++] = b;
    p->blk[b].flags |= V1_BLK_WATCHED;
    p->wfree += p->blk[b].ref == 0;
}
static inline void v1_pool_watch_miss(v1_pool *p, v1_key k)
{
    p->watch_miss = k;
    p->watch_has_miss = 1;
}
int32_t v1_pool_lookup(const v1_pool *p, v1_key k);
/* Block b's reference count; whether it carries an identity.  O(1). */
static inline int32_t v1_pool_count(const v1_pool *p, int32_t b) { return p->blk[b].ref; }
static inline int v1_pool_has_id(const v1_pool *p, int32_t b)
{
    return (p->blk[b].flags & V1_BLK_HAS_ID) != 0;
}
/* Fetch block b's hot state ahead of a release or hold.  No effect on
 * results. */
static inline void v1_pool_prefetch(const v1_pool *p, int32_t b) { __builtin_prefetch(&p->blk[b]); }
/* The slow paths of the inline operations below (v1_pool.c): b's identity
 * leaves M; b's watched saved identity leaves (f: its flags before the take); b
 * (its key set) enters its list in M; the full ring is packed in place,
 * keeping Q's order.  Not for other callers. */
void v1_pool_unregister_(v1_pool *p, int32_t b);
void v1_pool_unsave_(v1_pool *p, int32_t b, uint32_t f);
void v1_pool_table_append_(v1_pool *p, int32_t b);
void v1_pool_ring_pack_(v1_pool *p);

/* How many pops ahead a take fetches the block it will hand out. */
#define V1_POOL_AHEAD 8

/* Count + 1, leaving Q if it was there (a hit: its place becomes a hole).
 * O(1). */
static inline void v1_pool_hold(v1_pool *p, int32_t b)
{
    v1_blk *e = &p->blk[b];
    assert(e->ref > 0 || (e->flags & V1_BLK_INQ)); /* never a dead run's */
    if (e->ref++ == 0) {
        p->ring[e->qpos] = 0;
        e->flags &= ~V1_BLK_INQ;
        p->F--;
        if (e->flags & V1_BLK_HAS_ID)
            p->cached--;
        if (e->flags & V1_BLK_WATCHED)
            p->wfree--;
    }
}

/* v1_pool_register for a private identity, which is only marked (the
 * key is named again at v1_pool_publish).  O(1). */
static inline void v1_pool_register_private(v1_pool *p, int32_t b)
{
    v1_blk *e = &p->blk[b];
    e->flags |= V1_BLK_HAS_ID | V1_BLK_LAZY;
    p->ids++;
}

/* Register b (which carries no identity) under k, last in k's list.  A
 * private identity (request r, block j) can be looked up only by r, and r
 * looks up only when it is admitted again after a preemption; so it is
 * only marked on the block (O(1), no hashing, the key not even stored)
 * until the engine preempts r: then v1_pool_save stores the key on the
 * block (v1_pool_publish enters it in the table instead, with other KV
 * groups).  Lookups see the same blocks in the same order as if every
 * identity were entered at once. */
static inline void v1_pool_register(v1_pool *p, int32_t b, v1_key k)
{
    if (k.b & V1_PRIVATE) {
        v1_pool_register_private(p, b);
        return;
    }
    v1_blk *e = &p->blk[b];
    e->flags |= V1_BLK_HAS_ID;
    p->ids++;
    if (e->flags & V1_BLK_INQ)
        p->cached++; /* (never: registered blocks are held) */
    p->x[b].key = k;
    v1_pool_table_append_(p, b);
}

/* Enter b's private identity k (the one it was registered under: the
 * engine names it again) in the table, last in its list, if it is still
 * held on the block alone; no-op otherwise.  O(1) expected. */
void v1_pool_publish(v1_pool *p, int32_t b, v1_key k);

/* Make b's private identity k (the one it was registered under: the
 * engine names it again) findable without entering the table: the key is
 * stored on the block and V1_BLK_SAVED set, if b still carries it lazily;
 * no-op for a block without it or with an identity in the table.  Only
 * the request whose identity it is looks it up, at its re-admission after
 * a preemption, and it keeps the blocks it held in a saved row of its own
 * (v1.c): v1_pool_saved_is answers for one block of that row.  No hashing:
 * O(1), one store.
 *
 * Why that finds what the table would: a private identity (r, j) is
 * registered only by r, on its own block j, and looked up only by r.  A
 * preemption releases r's blocks last to first, so Q hands out (evicts)
 * r's block j only after its blocks j + 1 ... (nothing else takes r's
 * blocks out of Q: only r hits them, and only a prefix).  So when r's
 * lookup misses at j, every block of r past j is gone too, r's fresh blocks
 * j ... never meet an older block under the same identity, and the table's
 * list under (r, j) would hold exactly the block of r's latest row. */
static inline void v1_pool_save(v1_pool *p, int32_t b, v1_key k)
{
    v1_blk *e = &p->blk[b];
    assert(k.b & V1_PRIVATE);
    if ((e->flags & (V1_BLK_LAZY | V1_BLK_SAVED)) == V1_BLK_LAZY) {
        e->flags |= V1_BLK_SAVED;
        p->x[b].key = k;
        /* the watched lookup's first miss is found now: it must look again
         * (as v1_pool_table_append_ tells it of a key entering M) */
        if (p->watch_has_miss && p->watch_miss.a == k.a && p->watch_miss.b == k.b)
            p->wepoch++;
    }
    assert(!(e->flags & V1_BLK_SAVED) || (p->x[b].key.a == k.a && p->x[b].key.b == k.b));
}

/* 1 if block b (0: none) carries the saved private identity k.  O(1). */
static inline int v1_pool_saved_is(const v1_pool *p, int32_t b, v1_key k)
{
    return b && (p->blk[b].flags & V1_BLK_SAVED) && p->x[b].key.a == k.a &&
           p->x[b].key.b == k.b;
}

/* A dead run of `run` blocks (their numbers already in the FIFO) ends at
 * the ring's tail: it joins a run just before it, or takes a slot.  The
 * new tail. */
static inline uint64_t v1_pool_run_close_(int32_t *ring, uint64_t mask, uint64_t head,
                                          uint64_t tail, int64_t run)
{
    assert(run > 0 && run <= INT32_MAX);
    if (tail != head && ring[(tail - 1) & mask] < 0) {
        ring[(tail - 1) & mask] -= (int32_t)run;
        return tail;
    }
    ring[tail & mask] = -(int32_t)run;
    return tail + 1;
}

/* The anon FIFO packed to its start (v1_pool.c).  Not for other callers. */
void v1_pool_anon_pack_(v1_pool *p);

/* 1 if a held block with count ref and flags f can join a dead run: count
 * 1, and no identity or only a private one out of M (flags 0, HAS_ID|LAZY,
 * HAS_ID|LAZY|SAVED: bits 0, 6 and 14 of 0x4041), not watched. */
static inline int v1_pool_dead_ok(int32_t ref, uint32_t f)
{
    return ref == 1 && f < 16 && ((0x4041u >> f) & 1);
}

/* v1_pool_release of t[n - 1], ..., t[0] (last to first), with the ring's
 * counters kept in registers; with `dead` (a finished request's blocks),
 * those no one can find again (v1_pool_dead_ok) go to Q as dead runs
 * instead.  The same Q, counts and counters as n releases.  The ring is
 * packed first if fewer than n slots are left (packing keeps Q's order, so
 * packing early changes no answer; the ring has room for 2 (N + 1) blocks
 * and Q holds at most N, so the loop never packs), and the FIFO if it
 * has no room for n.  `dead` is a constant at each call: the compiler
 * makes two loops.  O(n) amortized, about 20 instructions a dead block. */
static inline void v1_pool_release_rev_(v1_pool *p, const int32_t *restrict t, int64_t n,
                                        const int dead)
{
    if ((uint64_t)n > p->rmask + 1 - (p->rtail - p->rhead))
        v1_pool_ring_pack_(p);
    if (dead && p->atail + n > p->acap)
        v1_pool_anon_pack_(p);
    assert((uint64_t)n <= p->rmask + 1 - (p->rtail - p->rhead) &&
           (!dead || p->atail + n <= p->acap));
    /* one sum of (flags & (HAS_ID | WATCHED)): HAS_ID (2) counts in bits
     * 0-30 while 2n < 2^31, WATCHED (2^31) from bit 31 on */
    assert(n < (INT64_C(1) << 30));
    uint64_t tail = p->rtail;
    const uint64_t head = p->rhead, mask = p->rmask;
    int32_t *restrict ring = p->ring;
    uint32_t *restrict w = p->anon + p->atail, *run = w; /* run: where the open run began */
    v1_blk *restrict blk = p->blk;
    int64_t freed = 0;
    uint64_t ids = 0, dead_ids = 0;
    for (int64_t j = n - 1; j >= 0; j--) {
        if (!dead && j >= 8) /* cold: last touched when taken */
            __builtin_prefetch(&blk[t[j - 8]]);
        const int32_t b = t[j];
        v1_blk *e = &blk[b];
        const uint32_t f = e->flags;
        if (dead && v1_pool_dead_ok(e->ref, f)) {
            e->ref = 0; /* its flags stay until it is taken */
            *w++ = (uint32_t)b | (f & V1_BLK_HAS_ID) << 30; /* V1_ANON_ID */
            dead_ids += f & V1_BLK_HAS_ID;
            continue;
        }
        if (dead && w != run) {
            tail = v1_pool_run_close_(ring, mask, head, tail, w - run);
            run = w;
        }
        if (--e->ref > 0)
            continue;
        e->qpos = (int32_t)(tail & mask);
        ring[tail & mask] = b;
        tail++;
        freed++;
        e->flags = f | V1_BLK_INQ;
        ids += f & (V1_BLK_HAS_ID | V1_BLK_WATCHED);
    }
    if (dead && w != run)
        tail = v1_pool_run_close_(ring, mask, head, tail, w - run);
    const int64_t nd = w - (p->anon + p->atail); /* dead ones */
    p->F += freed + nd;
    p->rtail = tail;
    p->atail += nd;
    p->cached += (int64_t)((ids & 0x7fffffffu) / V1_BLK_HAS_ID + dead_ids / V1_BLK_HAS_ID);
    p->wfree += (int64_t)(ids >> 31);
}

/* v1_pool_release of t[n - 1], ..., t[0]: the same result as n releases.
 * O(n) amortized. */
static inline void v1_pool_release_rev(v1_pool *p, const int32_t *t, int64_t n)
{
    v1_pool_release_rev_(p, t, n, 0);
}

/* v1_pool_release_rev of a finished request's blocks t[0 .. n): the same
 * Q, counts and counters, but the blocks no one can find again
 * (v1_pool_dead_ok) go to Q as dead runs.  Only for a request that will
 * never look its private identities up again.  O(n). */
static inline void v1_pool_release_dead_rev(v1_pool *p, const int32_t *t, int64_t n)
{
    v1_pool_release_rev_(p, t, n, 1);
}

/* v1_pool_release_dead_rev of blocks the caller knows can join a dead run
 * (v1_pool_dead_ok: its engine's audit checks that), t[0 .. nid) with an
 * identity and t[nid .. n) without: one run, last to first, no block read.
 * O(n), about 6 instructions a block. */
static inline void v1_pool_release_run_rev(v1_pool *p, const int32_t *restrict t, int64_t n,
                                           int64_t nid)
{
    assert(0 <= nid && nid <= n && n < (INT64_C(1) << 30));
    if (n == 0)
        return;
    if (p->rtail - p->rhead > p->rmask) /* no slot left for the run */
        v1_pool_ring_pack_(p);
    if (p->atail + n > p->acap)
        v1_pool_anon_pack_(p);
    uint32_t *restrict w = p->anon + p->atail;
    v1_blk *restrict blk = p->blk;
    for (int64_t j = n - 1; j >= nid; j--) {
        blk[t[j]].ref = 0; /* (its flags stay until it is taken) */
        *w++ = (uint32_t)t[j];
    }
    for (int64_t j = nid - 1; j >= 0; j--) {
        blk[t[j]].ref = 0;
        *w++ = (uint32_t)t[j] | V1_ANON_ID;
    }
    p->rtail = v1_pool_run_close_(p->ring, p->rmask, p->rhead, p->rtail, n);
    p->atail += n;
    p->F += n;
    p->cached += nid;
}

/* Take m blocks from the FIFO of the dead runs (the head run has them;
 * the caller shortens it) into out: each becomes a fresh block, count 1,
 * no flags; their identities, all private, leave with them (the FIFO says
 * which had one: no block is read).  The number of identities evicted.
 * O(m), about eight instructions a block. */
static inline int64_t v1_pool_run_take_(v1_pool *p, int32_t *restrict out, int64_t m)
{
    assert(m > 0 && p->atail - p->ahead >= m);
    const uint32_t *restrict src = p->anon + p->ahead;
    v1_blk *restrict blk = p->blk;
    uint64_t ev = 0;
    for (int64_t i = 0; i < m; i++) {
        const uint32_t x = src[i];
        const int32_t b = (int32_t)(x & V1_ANON_BLOCK);
        ev += x >> 31; /* V1_ANON_ID */
        blk[b].ref = 1;
        blk[b].flags = 0;
        out[i] = b;
    }
    p->ahead += m;
    p->ids -= (int64_t)ev;
    return (int64_t)ev;
}

/* Q's head leaves Q (F > 0), the ring read from *head on (holes
 * skipped; a dead run gives its next block, v1_pool_run_take_, which
 * reads the FIFO): its count becomes 1 and its identity, if any, leaves
 * M.  The block; *evicted counts it if it carried one.  ring and mask are
 * p's.  The caller keeps F, cached and evictions.  O(1) plus the holes
 * skipped (each made once). */
static inline int32_t v1_pool_pop_(v1_pool *p, int32_t *ring, uint64_t mask,
                                   uint64_t *head, int64_t *evicted)
{
    int32_t b;
    while (!(b = ring[*head & mask])) /* holes; F > 0: a block follows */
        (*head)++;
    if (b < 0) { /* a dead run: its next block, the run one shorter */
        if (b == -1)
            (*head)++;
        else
            ring[*head & mask] = b + 1;
        *evicted += v1_pool_run_take_(p, &b, 1);
        return b;
    }
    (*head)++;
    /* the block a later take hands out: fetch it now (a hole, a run or a
     * slot past the tail names some block or 0, either a valid address) */
    const int32_t ahead = ring[(*head + V1_POOL_AHEAD) & mask];
    __builtin_prefetch(&p->blk[ahead > 0 ? ahead : 0]);
    v1_blk *e = &p->blk[b];
    const uint32_t f = e->flags; /* read once, written once */
    e->ref = 1;
    if (!(f & V1_BLK_HAS_ID)) {
        e->flags = f & ~V1_BLK_INQ;
        return b;
    }
    (*evicted)++;
    if (f & V1_BLK_LAZY) { /* never entered in the table */
        e->flags = f & ~(V1_BLK_INQ | V1_BLK_LAZY | V1_BLK_HAS_ID | V1_BLK_SAVED);
        p->ids--;
        if (f & V1_BLK_WATCHED) /* (found, so saved) */
            v1_pool_unsave_(p, b, f);
    } else {
        e->flags = f & ~V1_BLK_INQ;
        p->wfree -= (f & V1_BLK_WATCHED) != 0; /* was free; leaves the answer (watch_drop) */
        p->rhead = *head;
        v1_pool_unregister_(p, b); /* reads no ring counter */
    }
    return b;
}

/* v1_pool_take n times (F >= n) into out[0 .. n-1], in order: the same
 * result, with the ring's head in a register.  O(n) plus holes. */
static inline void v1_pool_take_n(v1_pool *p, int32_t *out, int64_t n)
{
    uint64_t head = p->rhead;
    const uint64_t mask = p->rmask; /* the ring's address and size stay */
    int32_t *ring = p->ring;
    int64_t evicted = 0;
    for (int64_t k = 0; k < n;) {
        const int32_t b = ring[head & mask];
        if (b < 0) { /* a dead run at the head: as many as it has, at once */
            const int64_t m = -(int64_t)b < n - k ? -(int64_t)b : n - k;
            if (m == -(int64_t)b)
                head++;
            else
                ring[head & mask] = b + (int32_t)m;
            evicted += v1_pool_run_take_(p, out + k, m);
            k += m;
            continue;
        }
        out[k++] = v1_pool_pop_(p, ring, mask, &head, &evicted);
    }
    p->rhead = head;
    p->F -= n;
    p->cached -= evicted;
    p->evictions += evicted;
}

/* Take Q's head (F > 0): its identity, if any, leaves M; count becomes 1.
 * O(1) plus the holes skipped (each made once). */
static inline int32_t v1_pool_take(v1_pool *p)
{
    int64_t evicted = 0;
    const int32_t b = v1_pool_pop_(p, p->ring, p->rmask, &p->rhead, &evicted);
    p->F--;
    p->cached -= evicted;
    p->evictions += evicted;
    return b;
}

/* Count - 1; at 0 the block goes to Q's tail, keeping its identity.  O(1)
 * amortized. */
static inline void v1_pool_release(v1_pool *p, int32_t b) { v1_pool_release_rev(p, &b, 1); }

/* Recount Q and M against the flags; 0 or -1 with why.  For sched_audit. */
int v1_pool_audit(const v1_pool *p, char *why, size_t n);

/* One entry of the step's schedule list S. */
typedef struct v1_sched_ent {
    int32_t id;
    int32_t kind;   /* sched_member_kind: PREFILL (a chunk) or DECODE */
    int64_t q;      /* tokens scheduled */
    int64_t c;      /* tokens stored before the step */
    int64_t told;   /* a leap's member: lk_emitted when it entered the leap (its
                       later leapt tokens are told when it leaves), steps */
    int64_t seq;    /* a leap's member: its rank in S (entries in S ascend) */
} v1_sched_ent;

/* A leap's member in the heap of finishes (v1_leap.c): the step of its
 * last token, then its rank in S. */
typedef struct v1_fin {
    int64_t step;   /* the leap's step that makes its last token (O - g, lazy g) */
    int64_t seq;    /* v1_sched_ent.seq */
    int32_t id;
    int32_t pad_;
} v1_fin;

/* Disaggregated serving (sched.h, docs/cluster.md D3-D5; v1_pd.c).
 * Prefill side (sched_keep_finished, sched_release_finished): a kept
 * request has finished but its blocks stay counted in the pool, copied off
 * its block table (whose slot it gives back) until the external release.
 * Decode side (sched_accept_remote, sched_arrive_remote, sched_kv_loaded):
 * a remote request waits in W (PENDING) until the waiting walk allocates
 * its blocks and starts its load; it then leaves W holding its blocks and
 * a table slot (FLIGHT), and when its KV has arrived it waits in the ready
 * FIFO (READY), which the walk admits from before W. */
#define V1_LOAD_NONE 0    /* a local request, or a remote one admitted */
#define V1_LOAD_PENDING 1 /* in W, no blocks yet */
#define V1_LOAD_FLIGHT 2  /* out of W, its blocks held, its KV on the link */
#define V1_LOAD_READY 3   /* in the ready FIFO, its prompt's KV stored */

typedef struct v1_pd {
    int keep;                  /* 1: a finishing request keeps its blocks */
    int32_t **kept;            /* [n] blocks a finished request still holds, or NULL */
    int32_t *n_kept;           /* [n] how many, blocks */
    int64_t kept_reqs;         /* requests with kept blocks */
    uint8_t *load;             /* [n] V1_LOAD_*; NULL: no remote arrivals */
    int64_t aside;             /* requests FLIGHT or READY (out of W, holding a slot) */
    int32_t rhead, rtail;      /* the ready FIFO, threaded through rq[].wnext; -1 none */
    int64_t nready;            /* requests in it */
    sched_kv_load *started;    /* [started_cap] loads begun since sched_loads_started */
    int64_t n_started, started_cap;
    int oom;                   /* a block table or the load list could not grow */
} v1_pd;

/* v1.c: set up every rq entry not yet set up and hand none back from
 * now on (an engine shared, keeping finished requests or taking remote
 * ones reads entries outside a request's life).  O(n) once. */
void v1_rq_settle(sched *s);
/* v1.c: hand back rq's pages behind the first request not yet ended (see
 * there); amortized O(1) per request. */
void v1_rq_release(sched *s);

/* v1_pd.c: under keep, take id's blocks off its table (the slot goes back
 * to the free stack, the counts stay); 0, or -1 out of memory (then the
 * blocks are freed at once).  Then the release and the audit's recount. */
int v1_pd_keep(sched_v1 *v, int32_t id);
void v1_pd_release(sched_v1 *v, int32_t id);
void v1_pd_count(const sched_v1 *v, int64_t n, int32_t *cnt, int64_t *distinct);
void v1_pd_free(sched_v1 *v, int64_t n);
/* v1_pd.c, decode side: note a load begun (id, tokens to move, at t);
 * pop the ready FIFO's head (nready > 0).  O(1) amortized. */
void v1_pd_started(sched_v1 *v, int32_t id, int64_t tokens, double t);
int32_t v1_pd_ready_pop(sched_v1 *v);

struct sched_v1 {
    v1_pool pool;
    int64_t bs, S, thr, B, N;
    int fcfs;                  /* 1: fcfs, 0: priority */
    int pfx;                   /* prefix caching */
    /* per request [n]: a request's hot fields share a cache line (a
     * cluster's engines each see a sparse subset of the ids) */
    struct v1_req {
        int32_t P, O;          /* its prompt and output tokens (the trace's; P + O
                                  <= 2 * TRACE_MAX_TOKENS < 2^31) */
        int32_t g;             /* tokens generated (<= O) */
        int32_t C;             /* tokens stored (<= P + O) */
        int32_t sq;            /* tokens scheduled in the step in flight (<= P + O) */
        int32_t reg;           /* registered(r) */
        int32_t held;          /* blocks held */
        int32_t slot;          /* block table slot, -1 none, <= -2: a preempted
                                  request's saved row sv[-2 - slot] */
        int32_t wprev, wnext;  /* W as a list, -1 none */
    } *rq;                     /* 40 bytes each: what a step reads of a
                                  request is on one line */
    /* rq's life (the owner's; docs/architecture.md, "Memory"): in a vmem
     * region its entries are set up as requests arrive (up to rq_ready) and
     * the pages wholly behind the first request still alive are handed
     * back, so a long run holds the live window, not n entries */
    vmem rq_mem;               /* rq's mapping; base NULL: rq is calloc'd and set up
                                  whole at init */
    int64_t rq_ready;          /* entries [0, rq_ready) set up, requests */
    int64_t rq_dead;           /* requests [0, rq_dead) finished or rejected */
    int rq_keep;               /* 1: nothing is handed back any more (shared, kept
                                  or remote requests read entries past their end) */
    int64_t *seg_len;          /* [n] L = min(P, k*S), tokens covered by ids; NULL
                                  until prefix ids are attached (read only
                                  where seg_off is set) */
    int seg_len_owned;         /* 1: seg_len is this engine's to free (else the
                                  sharing owner's, or NULL) */
    int64_t *seg_end;          /* [seg_off[n]] varying segments only (grid 0): tokens
                                  of the request's segments 0..k; NULL on a grid */
    const int64_t *seg_off;    /* [n + 1] borrowed, or NULL */
    uint64_t *chain;           /* [seg_off[n]] chain hash of ids 0..i */
    int chain_borrowed;        /* 1: chain and seg_end are the sharing owner's */
    /* W */
    int32_t whead, wtail;
    int64_t wn;
    /* R, in admission order */
    int32_t *run;              /* [slots] (slots = min(max_seqs, n)) */
    int64_t nrun;
    /* block tables: slot k holds blocks tab[k * tcap ..] */
    int32_t *tab;              /* [nslots * tcap] */
    int64_t tcap, slots;
    int64_t nslots;            /* block table slots (>= slots: remote requests
                                  out of W hold theirs, slot_take grows them) */
    int32_t *free_slots;       /* [nslots] stack */
    int64_t n_free_slots;
    /* saved rows (v1_pool_save; without other KV groups): the blocks a
     * preempted request held, read by its own lookups until it is admitted
     * again; entries are reused and keep their room */
    struct v1_saved {
        int32_t *blk;          /* [cap] its block table at the preemption */
        int32_t n, cap;        /* blocks saved, room */
        int32_t id;            /* whose, -1: free */
    } *sv;                     /* [sv_cap] */
    int32_t *sv_free;          /* [sv_cap] stack of free entries */
    int64_t n_sv_free, sv_cap;
    int saved_rows;            /* 1: preempted requests' private identities are found
                                  through saved rows; 0: through the table, as other
                                  KV groups' pages (with those groups, and as the
                                  tests' reference: KVSIM_V1_PRIVATE_TABLE=1) */
    int32_t *hits;             /* [tcap] the last lookup's hits (find_hits; the
                                  pool keeps them current, pool.wh) */
    int32_t hc_id;             /* whose lookup hits holds, -1 none */
    int64_t hc_T;              /* tokens it looked up for (P + g) */
    int64_t hc_epoch;          /* pool.epoch when it looked up */
    /* leaps (v1_leap): S's entries grouped by stored tokens mod bs */
    int32_t *lk_start;         /* [bs + 1] group starts in lk_ids, NULL: no leaps */
    int32_t *lk_ids;           /* [slots] request ids, R's order within a group */
    int32_t *lk_tell, *lk_each; /* [slots] scratch: requests told to the leap sink,
                                  and the leapt steps of each */
    v1_fin *lk_fin;            /* [slots] a min-heap of the leap's members by
                                  (finish step, rank): lk_n entries */
    int64_t *lk_pos;           /* [slots] scratch: the finishers' ranks, then their
                                  places in S */
    int64_t lk_seq;            /* the next member's rank in S */
    /* the leap in progress (v1_leap, leap_steps): its set is S's first lk_n
     * entries, grouped in lk_ids as at its step 1; it can go on in the next
     * plan (lk_paused) when only the horizon stopped it */
    int lk_paused;             /* 1: the last plan's leap stopped at the horizon
                                  alone; R's g, C and S are still as at its step 1 */
    int64_t lk_emitted;        /* its leapt steps emitted so far (a member that entered
                                  at `told` made a token in each of the last
                                  lk_emitted - told; told when it leaves) */
    int64_t lk_n;              /* |S| of the leap, requests */
    int64_t lk_jstar;          /* its last step (someone's last token), numbered from 1 */
    int64_t lk_kv;             /* KV its step 1 read, tokens */
    int64_t lk_step;           /* the next step to plan, numbered from 1 */
    int32_t lk_x;              /* R's last request when it is still chunking its
                                  prompt (its entry is S_[lk_n], its last chunk;
                                  eager, not lazy), or -1; such a leap never pauses */
    cost_run_cache lk_runs;    /* its steps' cost (their batches differ in kv_read),
                                  by width: leaps of a width seen before reuse it */
    /* same-set steps (emit_step): with a leap sink, a step of decodes of
     * every running request right after another one, R unchanged, is sunk
     * leapt (s->lk_*, as V0's; sched_same_set_flush) */
    int sa_armed;              /* 1: the last step emitted was all decodes of R */
    int emit_ready;            /* v1_leap_ready of the last step emitted */
    int64_t sa_n;              /* |R| then */
    /* the step */
    v1_sched_ent *S_;          /* [slots] */
    int64_t ns;
    int active;                /* a step is in flight */
    double walk_t;             /* start of the step the waiting walk plans, seconds */
    v1_pd pd;                  /* kept blocks (disaggregated serving) */
    /* hybrid groups (section 2.9): the table holds full group 0; each other
     * group has a row of tcap entries per slot (page of block j at j) */
    int64_t wnd;               /* window tokens, 0: no window group */
    int64_t gf, gw;            /* full groups (>= 1), window groups */
    int32_t *wlo;              /* [n] window blocks skipped (freed or never taken),
                                  per window group */
    int32_t *ext;              /* [n] pages the request holds in its rows */
    int32_t *xtab;             /* [nslots * xcap] the rows, 0 = no page; NULL with
                                  one group */
    int64_t xcap;              /* entries per slot: (gf - 1 + gw) * tcap */
};

/* ---- small helpers of v1.c and v1_audit.c */

/* Leading blocks of id whose identities are shared (its prefix ids cover
 * them); the blocks past them carry private identities.  O(1). */
static inline int64_t v1_shared_blocks(const sched_v1 *v, int32_t id)
{
    return v->seg_off ? v->seg_len[id] / v->bs : 0;
}

/* Requests waiting: W's and the remote ones held aside (D4). */
static inline int64_t v1_n_waiting(const sched_v1 *v) { return v->wn + v->pd.aside; }

/* (prio, arr, id) of a after b's: a is served later (the priority order). */
static inline int key_after(const trace_req *reqs, int32_t a, int32_t b)
{
    const trace_req *x = &reqs[a], *y = &reqs[b];
    if (x->priority != y->priority)
        return x->priority > y->priority;
    if (x->arrival_s != y->arrival_s)
        return x->arrival_s > y->arrival_s;
    return a > b;
}

/* Request id's block table (its slot's row). */
static inline int32_t *table_of(const sched_v1 *v, int32_t id)
{
    return v->tab + (int64_t)v->rq[id].slot * v->tcap;
}

/* Row of id's other group k (0 .. gf - 2 the extra full groups, then the
 * window groups): its page for block j at [j], 0 = none (skipped or not
 * yet taken). */
static inline int32_t *xrow(const sched_v1 *v, int32_t id, int64_t k)
{
    return v->xtab + (int64_t)v->rq[id].slot * v->xcap + k * v->tcap;
}

static inline int64_t n_other(const sched_v1 *v) { return v->gf - 1 + v->gw; }

/* First block group k holds: 0 for a full group, lo for a window group. */
static inline int64_t group_from(const sched_v1 *v, int64_t k, int64_t lo)
{
    return k >= v->gf - 1 ? lo : 0;
}

/* Pages the other groups hold for `want` blocks of context of which the
 * first lo are skipped by the window (rule 2.9). */
static inline int64_t groups_want(const sched_v1 *v, int64_t want, int64_t lo)
{
    return (v->gf - 1) * want + v->gw * (want - lo);
}

/* Window blocks skipped once c tokens are stored: floor(max(0, c - w + 1) / bs),
 * at most want. */
static inline int64_t window_skip(const sched_v1 *v, int64_t c, int64_t want)
{
    int64_t lo = v->wnd && c - v->wnd + 1 > 0 ? (c - v->wnd + 1) / v->bs : 0;
    return lo < want ? lo : want;
}

/* Stamp s->step as a step of d seconds starting at t: its index, the
 * blocks in use and the queue lengths it leaves.  O(1). */
static inline void v1_step_stamp(sched *s, double d, double t)
{
    const sched_v1 *v = s->v1;
    sched_step *st = &s->step;
    st->dur_s = d;
    st->index = s->ctr.steps++;
    st->start_s = t;
    st->kv_blocks_used = v->N - v->pool.F;
    st->n_waiting = v1_n_waiting(v);
    st->n_running = v->nrun;
}

/* The end of what a leap may plan: the next arrival another engine of a
 * cluster may bring (sched_set_arrivals), else the horizon.  O(1). */
static inline double v1_leap_horizon(const sched *s)
{
    return s->arr_cur ? s->arr_other_s : s->horizon;
}

/* Rule 4.4's chunk for running request id with C tokens stored and
 * `budget` tokens of the step left: what is left of P + g, cut to the
 * long-prefill threshold and the budget.  O(1). */
static inline int64_t v1_chunk(const sched_v1 *v, int32_t id, int64_t C, int64_t budget)
{
    int64_t q = (int64_t)v->rq[id].P + v->rq[id].g - C;
    if (v->thr > 0 && v->thr < q)
        q = v->thr;
    return q > budget ? budget : q;
}

/* A prefill chunk of q tokens over c stored, of request id, into the
 * step's batch cb (rule 6.1's features), the prefill-chunk count and the
 * step's members (prefill members are always listed).  O(1). */
static inline void v1_batch_add_chunk(sched *s, cost_batch *cb, int32_t id, int64_t q, int64_t c)
{
    cb->tokens += q;
    cb->prefill_sq += q * q;
    cb->prefill_ctx += q * c;
    cb->prefill_cached += c;
    cb->n_prefill++;
    s->ctr.prefill_chunks += s->cfg.chunked_prefill;
    sched_add_member(s, id, SCHED_MEMBER_PREFILL, q, c + q);
}

/* The kind of a step whose batch is cb. */
static inline int32_t v1_step_kind(const cost_batch *cb)
{
    return cb->n_prefill == 0   ? SCHED_STEP_DECODE
           : cb->n_decode == 0 ? SCHED_STEP_PREFILL
                               : SCHED_STEP_MIXED;
}

/* v1.c, for the leaps: the arrival rule (3.1) for request id; the waiting
 * walk of a step with *b tokens of budget left (4.5), which reads and
 * changes nothing of R's lazy state; a normal step's record, emitted at
 * now, returning its duration. */
void v1_arrive(sched *s, int64_t id);
void v1_waiting_walk(sched *s, int64_t *b);
double v1_emit_step(sched *s, double now);
/* Rule 4.7's finish of id, whose last token a step ending at t made
 * (g = O): its finish time and state, and its blocks freed (or kept, on a
 * prefill replica: v1_pd).  O(its blocks). */
void v1_req_finished(sched *s, int32_t id, double t);
/* R without its finished requests (g = O), in order.  O(|R|). */
void v1_run_drop_finished(sched_v1 *v);
/* 1 if, in the step just emitted, every entry of S but the last made a
 * token (a decode, or a prefill chunk that reached every known token,
 * P + g: a newcomer's whole prompt, or a preempted request's recompute),
 * and the last did too or is a prefill chunk short of P + g.  With S = R
 * the next step is then forced but for that chunking request's next
 * chunk, which the leap plans as the running walk would (v1_leap.c).
 * v1_emit_step notes it as it walks S: O(1). */
int v1_leap_ready(const sched_v1 *v);
/* alloc(id, c, q) of rule 2.7 for a running request's chunk of q tokens
 * over c stored: 1, or 0 with nothing changed if the free queue is too
 * short.  O(blocks taken). */
int v1_alloc_running(sched_v1 *v, int32_t id, int64_t c, int64_t q);
/* The first block of running request id's private region (v1.c). */
int64_t v1_private_from(const sched_v1 *v, int32_t id);

/* v1_leap.c: a leap after step 1 (just emitted, ending at t: S is R,
 * v1_leap_ready; it may have preempted); the end of its last step
 * planned.  A leap that ends in a step planned the normal way (an
 * admission, or the chunking request's last chunk) goes on as a new leap
 * when that step is such a step 1 too.
 * v1_leap_resume goes on with a paused leap at now: 1 with *t_end set if it
 * planned a step, 0 if none (the leap is then written out). */
double v1_leap(sched *s, double t);
int v1_leap_resume(sched *s, double now, double *t_end);

/* v1_audit.c: sched_audit's recount under V1. */
int v1_audit(const sched *s, char *why, size_t n);

#endif
