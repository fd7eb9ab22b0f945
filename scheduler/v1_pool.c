/* v1_pool.c — vLLM V1's KV block pool, docs/semantics-v1.md section 2:
 * the free queue Q of every block no request holds (LRU, rule 2.3) and the
 * cache map M from block identities to the blocks registered under them,
 * duplicates allowed, earliest registered first (rule 2.5).  Q is a ring
 * with holes and dead runs (v1_internal.h).  Every operation is O(1)
 * (expected, for the table; amortized, for the ring's and the dead runs'
 * packing); nothing is allocated after init. */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "v1_internal.h"

/* Private identities of one request share a home run of this many
 * consecutive blocks (key_home). */
#define V1_POOL_RUN 8

/* A key's home slot (before the mask).  A private identity (request r,
 * block j) goes next to r's block j - 1 within runs of V1_POOL_RUN blocks,
 * the runs spread by a multiplicative hash of (r, j / V1_POOL_RUN): a
 * request publishes, looks up and (as Q hands its blocks out in the order
 * it freed them) loses its blocks in order of j, which then touch 3 lines
 * per run instead of one cold line per block.  Longer runs would merge
 * into long probe sequences (measured with cachegrind on bench_sim: one
 * run per request cost 40% more instructions; runs of 8, 2% more for 9%
 * fewer L1 misses).  A shared identity's a is already a chain hash
 * (rng_mix64), so one multiply-and-fold spreads it.  The fold brings the
 * product's well-mixed high bits down to the low bits the mask keeps.
 * Six or seven instructions where two rng_mix64 took about 35.  (Since
 * session 13 a request's own private identities are saved on their blocks,
 * v1_pool_save, and only other KV groups' private pages reach the table.)
 * The table's answers do not depend on where keys live. */
#define V1_HASH_K1 0x9e3779b97f4a7c15ULL /* 2^64 / golden ratio, odd */
#define V1_HASH_K2 0xc2b2ae3d27d4eb4fULL /* an odd 64-bit constant (xxHash's PRIME64_2) */
static uint64_t key_home(v1_key k)
{
    if (k.b & V1_PRIVATE) {
        const uint64_t j = k.b & ~V1_PRIVATE;
        const uint64_t x = k.a * V1_HASH_K1 + (j / V1_POOL_RUN) * V1_HASH_K2;
        return (x ^ (x >> 29)) + j % V1_POOL_RUN;
    }
    const uint64_t x = k.a + k.b * V1_HASH_K1;
    return x ^ (x >> 29);
}
static int key_eq(v1_key x, v1_key y) { return x.a == y.a && x.b == y.b; }

int v1_pool_init(v1_pool *p, int64_t N, int with_cache)
{
    memset(p, 0, sizeof *p);
    p->N = N;
    size_t nb = (size_t)N + 1;
    uint64_t rs = 2;
    while (rs < 2 * (uint64_t)nb)
        rs <<= 1;
    p->rmask = rs - 1;
    if (N > (int64_t)V1_ANON_BLOCK) /* block numbers share the FIFO's words with a flag */
        return -1;
    p->acap = 4 * (int64_t)nb;
    p->blk = calloc(nb, sizeof *p->blk);
    p->ring = calloc((size_t)rs, sizeof *p->ring);
    p->anon = calloc((size_t)p->acap, sizeof *p->anon);
    if (!p->blk || !p->ring || !p->anon)
        return -1;
    if (with_cache) {
        p->x = calloc(nb, sizeof *p->x);
        uint64_t sz = 2;
        while (sz < 2 * (uint64_t)N)
            sz <<= 1;
        p->mask = sz - 1;
        p->tab = calloc((size_t)sz, sizeof *p->tab);
        if (!p->x || !p->tab)
            return -1;
    }
    /* Q = 1..N in order */
    for (int64_t b = 1; b <= N; b++) {
        p->ring[b - 1] = (int32_t)b;
        p->blk[b].qpos = (int32_t)(b - 1);
        p->blk[b].flags = V1_BLK_INQ;
    }
    p->rhead = 0;
    p->rtail = (uint64_t)N;
    p->F = N;
    return 0;
}

void v1_pool_free(v1_pool *p)
{
    free(p->blk);
    free(p->x);
    free(p->ring);
    free(p->anon);
    free(p->tab);
    memset(p, 0, sizeof *p);
}

/* Table slot of k, or the empty slot where it would go. */
static uint64_t slot_of(const v1_pool *p, v1_key k)
{
    uint64_t i = key_home(k) & p->mask;
    while (p->tab[i].head && !key_eq(p->tab[i].k, k))
        i = (i + 1) & p->mask;
    return i;
}

int32_t v1_pool_lookup(const v1_pool *p, v1_key k)
{
    if (!p->tab)
        return 0;
    return p->tab[slot_of(p, k)].head;
}

/* Delete table slot i (linear probing, backward-shift deletion). */
static void table_delete(v1_pool *p, uint64_t i)
{
    for (;;) {
        uint64_t j = i;
        for (;;) {
            j = (j + 1) & p->mask;
            if (!p->tab[j].head) {
                p->tab[i].head = p->tab[i].tail = 0;
                return;
            }
            uint64_t k = key_home(p->tab[j].k) & p->mask;
            /* entry j may stay if its home lies cyclically in (i, j] */
            int stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
            if (!stays)
                break;
        }
        p->tab[i] = p->tab[j];
        i = j;
    }
}

/* Pack the full ring in place: Q's blocks and dead runs keep their order
 * from rhead on, the holes go.  O(ring); at least half of it was holes. */
void v1_pool_ring_pack_(v1_pool *p)
{
    uint64_t w = p->rhead;
    for (uint64_t r = p->rhead; r != p->rtail; r++) {
        int32_t b = p->ring[r & p->rmask];
        if (!b)
            continue;
        p->ring[w & p->rmask] = b;
        if (b > 0)
            p->blk[b].qpos = (int32_t)(w & p->rmask);
        w++;
    }
    p->rtail = w;
}

/* Move the dead runs' blocks to the FIFO's start.  At most N of them
 * and 4 (N + 1) places: each pack is paid by 3 N appends before it. */
void v1_pool_anon_pack_(v1_pool *p)
{
    const int64_t n = p->atail - p->ahead;
    memmove(p->anon, p->anon + p->ahead, (size_t)n * sizeof *p->anon);
    p->ahead = 0;
    p->atail = n;
}

void v1_pool_watch_clear(v1_pool *p)
{
    for (int64_t k = 0; k < p->wm; k++) {
        p->x[p->wh[k]].widx = 0;
        p->blk[p->wh[k]].flags &= ~V1_BLK_WATCHED;
    }
    p->wm = 0;
    p->wfree = 0;
    p->watch_has_miss = 0;
}

/* Found block b (the head of its list) leaves M; nx follows it there. */
static void watch_drop(v1_pool *p, int32_t b, int32_t nx)
{
    int64_t k = p->x[b].widx - 1;
    p->x[b].widx = 0;
    p->blk[b].flags &= ~V1_BLK_WATCHED; /* (v1_pool_pop_ took it out of wfree) */
    if (nx) { /* the lookup now finds nx at the same place */
        p->wh[k] = nx;
        p->x[nx].widx = (int32_t)(k + 1);
        p->blk[nx].flags |= V1_BLK_WATCHED;
        p->wfree += p->blk[nx].ref == 0;
        return;
    }
    for (int64_t j = k + 1; j < p->wm; j++) {
        p->x[p->wh[j]].widx = 0;
        p->blk[p->wh[j]].flags &= ~V1_BLK_WATCHED;
        p->wfree -= p->blk[p->wh[j]].ref == 0;
    }
    p->wm = k;
    p->watch_miss = p->x[b].key;
    p->watch_has_miss = 1;
}

void v1_pool_unregister_(v1_pool *p, int32_t b)
{
    v1_blk *e = &p->blk[b];
    assert(!(e->flags & V1_BLK_LAZY)); /* v1_pool_take_n drops those itself */
    v1_blkx *x = &p->x[b];
    uint64_t i = slot_of(p, x->key);
    int32_t pv = x->mprev, nx = x->mnext;
    if (x->widx)
        watch_drop(p, b, nx);
    if (pv)
        p->x[pv].mnext = nx;
    else
        p->tab[i].head = nx;
    if (nx)
        p->x[nx].mprev = pv;
    else
        p->tab[i].tail = pv;
    x->mprev = x->mnext = 0;
    e->flags &= ~V1_BLK_HAS_ID;
    p->ids--;
    if (!p->tab[i].head)
        table_delete(p, i);
}

/* (x[b].key may stay: V1_BLK_SAVED, now cleared, is set again only with
 * a new key, v1_pool_save.) */
void v1_pool_unsave_(v1_pool *p, int32_t b, uint32_t f)
{
    (void)f; /* read by the assert alone */
    assert((f & V1_BLK_SAVED) && (f & V1_BLK_WATCHED));
    p->wfree--; /* it was free */
    watch_drop(p, b, 0); /* the lookup's answer ends before it */
}

/* Append b, whose identity x[b].key is set, to its list in the table. */
void v1_pool_table_append_(v1_pool *p, int32_t b)
{
    v1_blkx *x = &p->x[b];
    v1_key k = x->key;
    uint64_t i = slot_of(p, k);
    x->mnext = 0;
    if (!p->tab[i].head) {
        if (p->watch_has_miss && key_eq(k, p->watch_miss))
            p->wepoch++;
        p->tab[i].k = k;
        p->tab[i].head = p->tab[i].tail = b;
        x->mprev = 0;
    } else {
        int32_t t = p->tab[i].tail;
        p->x[t].mnext = b;
        x->mprev = t;
        p->tab[i].tail = b;
    }
}

void v1_pool_publish(v1_pool *p, int32_t b, v1_key k)
{
    if (p->x && (p->blk[b].flags & V1_BLK_LAZY)) {
        p->blk[b].flags &= ~V1_BLK_LAZY;
        p->x[b].key = k;
        v1_pool_table_append_(p, b);
    }
}

#define POOL_FAIL(...)                    \
    do {                                  \
        if (why && n)                     \
            snprintf(why, n, __VA_ARGS__); \
        return -1;                        \
    } while (0)

/* Q recounted (its blocks and dead runs, in ring order) against F and
 * cached, and every block's count against its place in Q; in_run[N + 1]
 * (zeroed) marks the dead runs' blocks.  0, or -1 with why. */
static int audit_q(const v1_pool *p, char *in_run, char *why, size_t n)
{
    int64_t cnt = 0, cached = 0;
    if (p->rtail - p->rhead > p->rmask + 1)
        POOL_FAIL("Q: the ring holds %llu slots of %llu",
                  (unsigned long long)(p->rtail - p->rhead), (unsigned long long)p->rmask + 1);
    if (p->ahead < 0 || p->ahead > p->atail || p->atail > p->acap)
        POOL_FAIL("Q: the dead runs' FIFO lies in [%lld, %lld) of %lld", (long long)p->ahead,
                  (long long)p->atail, (long long)p->acap);
    int64_t a = p->ahead; /* the FIFO read along the runs */
    for (uint64_t r = p->rhead; r != p->rtail; r++) {
        int32_t b = p->ring[r & p->rmask];
        if (!b)
            continue;
        for (int32_t k = 0; b < 0 && k < -b; k++) {
            const uint32_t x = a == p->atail ? 0 : p->anon[a++];
            const int32_t y = (int32_t)(x & V1_ANON_BLOCK);
            if (y < 1 || y > p->N || in_run[y]++ || ++cnt > p->N)
                POOL_FAIL("Q: the dead run at slot %llu names block %d (or one twice)",
                          (unsigned long long)(r & p->rmask), y);
            const v1_blk *e = &p->blk[y];
            if (e->ref != 0 || !v1_pool_dead_ok(1, e->flags) ||
                !(x & V1_ANON_ID) != !(e->flags & V1_BLK_HAS_ID))
                POOL_FAIL("Q: block %d of a dead run has count %d, flags %u (FIFO %#x)", y,
                          e->ref, e->flags, x);
            cached += (e->flags & V1_BLK_HAS_ID) != 0;
        }
        if (b < 0)
            continue;
        if (b > p->N)
            POOL_FAIL("Q: slot %llu names block %d", (unsigned long long)(r & p->rmask), b);
        const v1_blk *e = &p->blk[b];
        if (++cnt > p->N)
            POOL_FAIL("Q: a block twice");
        if (!(e->flags & V1_BLK_INQ) || e->ref != 0 || (uint64_t)e->qpos != (r & p->rmask))
            POOL_FAIL("Q: block %d (flags %u, count %d) is misplaced", b, e->flags, e->ref);
        if (e->flags & V1_BLK_HAS_ID)
            cached++;
    }
    for (int64_t b = 1; b <= p->N; b++) {
        const v1_blk *e = &p->blk[b];
        const int in_q = (e->flags & V1_BLK_INQ) != 0 || in_run[b];
        if ((e->ref == 0) != in_q || e->ref < 0 || (in_run[b] && (e->flags & V1_BLK_INQ)))
            POOL_FAIL("block %lld: count %d but in Q %d", (long long)b, e->ref, in_q);
        if (!p->x && (e->flags & (V1_BLK_HAS_ID | V1_BLK_LAZY)))
            POOL_FAIL("block %lld: an identity without prefix caching", (long long)b);
    }
    if (a != p->atail)
        POOL_FAIL("Q: the dead runs name fewer blocks than their FIFO holds");
    if (cnt != p->F)
        POOL_FAIL("Q: %lld blocks, F says %lld", (long long)cnt, (long long)p->F);
    if (p->x && cached != p->cached)
        POOL_FAIL("Q holds %lld cached blocks, counter %lld", (long long)cached,
                  (long long)p->cached);
    return 0;
}

int v1_pool_audit(const v1_pool *p, char *why, size_t n)
{
    char *in_run = calloc((size_t)p->N + 1, 1);
    if (!in_run)
        POOL_FAIL("out of memory");
    const int rc = audit_q(p, in_run, why, n);
    free(in_run);
    if (rc)
        return rc;
    if (!p->x)
        return 0;
    int64_t watched = 0, wfree = 0;
    for (int64_t k = 0; k < p->wm; k++) {
        const int32_t b = p->wh[k];
        if (!(p->blk[b].flags & V1_BLK_WATCHED) || p->x[b].widx != k + 1)
            POOL_FAIL("the watched lookup's block %d (index %lld) is not marked", b, (long long)k);
        wfree += p->blk[b].ref == 0;
    }
    for (int64_t b = 1; b <= p->N; b++)
        watched += (p->blk[b].flags & V1_BLK_WATCHED) != 0;
    if (watched != p->wm || wfree != p->wfree)
        POOL_FAIL("%lld blocks marked watched, %lld free, for %lld found and %lld free counted",
                  (long long)watched, (long long)wfree, (long long)p->wm, (long long)p->wfree);
    int64_t ids = 0, lazy = 0;
    for (int64_t b = 1; b <= p->N; b++) {
        const v1_blk *e = &p->blk[b];
        if (!(e->flags & V1_BLK_HAS_ID)) {
            if (e->flags & (V1_BLK_LAZY | V1_BLK_SAVED))
                POOL_FAIL("block %lld: lazy or saved without an identity", (long long)b);
            continue;
        }
        ids++;
        if ((e->flags & V1_BLK_SAVED) &&
            (!(e->flags & V1_BLK_LAZY) || !(p->x[b].key.b & V1_PRIVATE)))
            POOL_FAIL("block %lld: saved, but not a private identity out of M", (long long)b);
        if (e->flags & V1_BLK_LAZY) {
            lazy++;
            continue;
        }
        uint64_t i = slot_of(p, p->x[b].key);
        int32_t y = p->tab[i].head;
        while (y && y != b)
            y = p->x[y].mnext;
        if (!y)
            POOL_FAIL("block %lld carries an identity missing from M", (long long)b);
    }
    int64_t listed = 0;
    for (uint64_t i = 0; i <= p->mask; i++)
        for (int32_t y = p->tab[i].head; y; y = p->x[y].mnext) {
            if (!(p->blk[y].flags & V1_BLK_HAS_ID) || !key_eq(p->x[y].key, p->tab[i].k))
                POOL_FAIL("M lists block %d under a foreign identity", y);
            if (++listed > p->N)
                POOL_FAIL("M: a cycle");
        }
    if (ids != listed + lazy || ids != p->ids)
        POOL_FAIL("%lld identified blocks, M lists %lld", (long long)ids, (long long)listed);
    return 0;
}
