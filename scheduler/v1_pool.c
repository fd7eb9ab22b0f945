/* v1_pool.c — vLLM V1's KV block pool, docs/semantics-v1.md section 2:
 * the free queue Q of every block no request holds (LRU, rule 2.3) and the
 * cache map M from block identities to the blocks registered under them,
 * duplicates allowed, earliest registered first (rule 2.5).  Every operation
 * is O(1) (expected, for the table); nothing is allocated after init. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "v1_internal.h"

#include "../base/rng.h"

static uint64_t key_home(v1_key k) { return rng_mix64(k.a ^ rng_mix64(k.b + 0x9e3779b97f4a7c15ULL)); }
static int key_eq(v1_key x, v1_key y) { return x.a == y.a && x.b == y.b; }

int v1_pool_init(v1_pool *p, int64_t N, int with_cache)
{
    memset(p, 0, sizeof *p);
    p->N = N;
    size_t nb = (size_t)N + 1;
    p->ref = calloc(nb, sizeof *p->ref);
    p->qprev = calloc(nb, sizeof *p->qprev);
    p->qnext = calloc(nb, sizeof *p->qnext);
    p->inq = calloc(nb, 1);
    if (!p->ref || !p->qprev || !p->qnext || !p->inq)
        return -1;
    if (with_cache) {
        p->has_id = calloc(nb, 1);
        p->lazy = calloc(nb, 1);
        p->key = calloc(nb, sizeof *p->key);
        p->mprev = calloc(nb, sizeof *p->mprev);
        p->mnext = calloc(nb, sizeof *p->mnext);
        p->widx = calloc(nb, sizeof *p->widx);
        uint64_t sz = 2;
        while (sz < 2 * (uint64_t)N)
            sz <<= 1;
        p->mask = sz - 1;
        p->tab = calloc((size_t)sz, sizeof *p->tab);
        if (!p->has_id || !p->lazy || !p->key || !p->mprev || !p->mnext || !p->tab || !p->widx)
            return -1;
    }
    /* Q = 1..N in order */
    for (int64_t b = 1; b <= N; b++) {
        p->qprev[b] = (int32_t)(b - 1);
        p->qnext[b] = b < N ? (int32_t)(b + 1) : 0;
        p->inq[b] = 1;
    }
    p->qhead = N > 0 ? 1 : 0;
    p->qtail = (int32_t)N;
    p->F = N;
    return 0;
}

void v1_pool_free(v1_pool *p)
{
    free(p->ref);
    free(p->qprev);
    free(p->qnext);
    free(p->inq);
    free(p->has_id);
    free(p->lazy);
    free(p->key);
    free(p->mprev);
    free(p->mnext);
    free(p->tab);
    free(p->widx);
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

static void q_unlink(v1_pool *p, int32_t b)
{
    int32_t pv = p->qprev[b], nx = p->qnext[b];
    if (pv)
        p->qnext[pv] = nx;
    else
        p->qhead = nx;
    if (nx)
        p->qprev[nx] = pv;
    else
        p->qtail = pv;
    p->qprev[b] = p->qnext[b] = 0;
    p->inq[b] = 0;
    p->F--;
    if (p->has_id && p->has_id[b])
        p->cached--;
}

void v1_pool_watch_clear(v1_pool *p)
{
    for (int64_t k = 0; k < p->wm; k++)
        p->widx[p->wh[k]] = 0;
    p->wm = 0;
    p->watch_has_miss = 0;
}

/* Found block b (the head of its list) leaves M; nx follows it there. */
static void watch_drop(v1_pool *p, int32_t b, int32_t nx)
{
    int64_t k = p->widx[b] - 1;
    p->widx[b] = 0;
    if (nx) { /* the lookup now finds nx at the same place */
        p->wh[k] = nx;
        p->widx[nx] = (int32_t)(k + 1);
        return;
    }
    for (int64_t j = k + 1; j < p->wm; j++)
        p->widx[p->wh[j]] = 0;
    p->wm = k;
    p->watch_miss = p->key[b];
    p->watch_has_miss = 1;
}

static void unregister(v1_pool *p, int32_t b)
{
    if (p->lazy[b]) { /* never entered in the table */
        p->lazy[b] = 0;
        p->has_id[b] = 0;
        p->ids--;
        return;
    }
    uint64_t i = slot_of(p, p->key[b]);
    int32_t pv = p->mprev[b], nx = p->mnext[b];
    p->epoch++;
    if (p->widx[b])
        watch_drop(p, b, nx);
    if (pv)
        p->mnext[pv] = nx;
    else
        p->tab[i].head = nx;
    if (nx)
        p->mprev[nx] = pv;
    else
        p->tab[i].tail = pv;
    p->mprev[b] = p->mnext[b] = 0;
    p->has_id[b] = 0;
    p->ids--;
    if (!p->tab[i].head)
        table_delete(p, i);
}

void v1_pool_hold(v1_pool *p, int32_t b)
{
    if (p->ref[b]++ == 0)
        q_unlink(p, b);
}

int32_t v1_pool_take(v1_pool *p)
{
    int32_t b = p->qhead; /* q_unlink of the head, spelled out: the hot case */
    int32_t nx = p->qnext[b];
    p->qhead = nx;
    if (nx) {
        p->qprev[nx] = 0;
        /* Q's head is the least recently freed block: cold.  Fetch what
         * the next take reads of the new head now, long before it. */
        __builtin_prefetch(&p->qnext[nx]);
        __builtin_prefetch(&p->inq[nx]);
        __builtin_prefetch(&p->ref[nx]);
        if (p->has_id) {
            __builtin_prefetch(&p->has_id[nx]);
            __builtin_prefetch(&p->key[nx]);
        }
    } else
        p->qtail = 0;
    p->qnext[b] = 0;
    p->inq[b] = 0;
    p->F--;
    if (p->has_id && p->has_id[b]) {
        p->cached--;
        unregister(p, b);
        p->evictions++;
    }
    p->ref[b] = 1;
    return b;
}

/* Append b, whose identity key[b] is set, to its list in the table. */
static void table_append(v1_pool *p, int32_t b)
{
    v1_key k = p->key[b];
    uint64_t i = slot_of(p, k);
    p->mnext[b] = 0;
    p->epoch++;
    if (!p->tab[i].head) {
        if (p->watch_has_miss && key_eq(k, p->watch_miss))
            p->wepoch++;
        p->tab[i].k = k;
        p->tab[i].head = p->tab[i].tail = b;
        p->mprev[b] = 0;
    } else {
        int32_t t = p->tab[i].tail;
        p->mnext[t] = b;
        p->mprev[b] = t;
        p->tab[i].tail = b;
    }
}

void v1_pool_register(v1_pool *p, int32_t b, v1_key k)
{
    p->key[b] = k;
    p->has_id[b] = 1;
    p->ids++;
    if (p->inq[b])
        p->cached++; /* (never: registered blocks are held) */
    if (k.b & V1_PRIVATE)
        p->lazy[b] = 1;
    else
        table_append(p, b);
}

void v1_pool_publish(v1_pool *p, int32_t b)
{
    if (p->lazy && p->lazy[b]) {
        p->lazy[b] = 0;
        table_append(p, b);
    }
}

void v1_pool_release(v1_pool *p, int32_t b)
{
    if (--p->ref[b] > 0)
        return;
    p->qprev[b] = p->qtail;
    p->qnext[b] = 0;
    if (p->qtail)
        p->qnext[p->qtail] = b;
    else
        p->qhead = b;
    p->qtail = b;
    p->inq[b] = 1;
    p->F++;
    if (p->has_id && p->has_id[b])
        p->cached++;
}

#define POOL_FAIL(...)                    \
    do {                                  \
        if (why && n)                     \
            snprintf(why, n, __VA_ARGS__); \
        return -1;                        \
    } while (0)

int v1_pool_audit(const v1_pool *p, char *why, size_t n)
{
    int64_t cnt = 0, cached = 0;
    int32_t prev = 0;
    for (int32_t b = p->qhead; b; b = p->qnext[b]) {
        if (++cnt > p->N)
            POOL_FAIL("Q: a cycle");
        if (!p->inq[b] || p->ref[b] != 0 || p->qprev[b] != prev)
            POOL_FAIL("Q: block %d (in %d, count %d) is misplaced", b, p->inq[b], p->ref[b]);
        if (p->has_id && p->has_id[b])
            cached++;
        prev = b;
    }
    if (prev != p->qtail || cnt != p->F)
        POOL_FAIL("Q: %lld blocks, F says %lld", (long long)cnt, (long long)p->F);
    for (int64_t b = 1; b <= p->N; b++)
        if ((p->ref[b] == 0) != (p->inq[b] == 1) || p->ref[b] < 0)
            POOL_FAIL("block %lld: count %d but in Q %d", (long long)b, p->ref[b], p->inq[b]);
    if (!p->has_id)
        return 0;
    if (cached != p->cached)
        POOL_FAIL("Q holds %lld cached blocks, counter %lld", (long long)cached,
                  (long long)p->cached);
    int64_t ids = 0, lazy = 0;
    for (int64_t b = 1; b <= p->N; b++) {
        if (!p->has_id[b])
            continue;
        ids++;
        if (p->lazy[b]) {
            if (!(p->key[b].b & V1_PRIVATE))
                POOL_FAIL("block %lld: a shared identity held on the block alone", (long long)b);
            lazy++;
            continue;
        }
        uint64_t i = slot_of(p, p->key[b]);
        int32_t x = p->tab[i].head;
        while (x && x != b)
            x = p->mnext[x];
        if (!x)
            POOL_FAIL("block %lld carries an identity missing from M", (long long)b);
    }
    int64_t listed = 0;
    for (uint64_t i = 0; i <= p->mask; i++)
        for (int32_t x = p->tab[i].head; x; x = p->mnext[x]) {
            if (!p->has_id[x] || !key_eq(p->key[x], p->tab[i].k))
                POOL_FAIL("M lists block %d under a foreign identity", x);
            if (++listed > p->N)
                POOL_FAIL("M: a cycle");
        }
    if (ids != listed + lazy || ids != p->ids)
        POOL_FAIL("%lld identified blocks, M lists %lld", (long long)ids, (long long)listed);
    return 0;
}
