/* test_v1_pool.c — the V1 block pool (scheduler/v1_pool.c) against a
 * simple model of itself.
 *
 * The pool keeps its free queue Q as a ring with holes that it packs when
 * full, its hot and cache state in two arrays, and private identities
 * unstored until published (entered in M) or saved (stored on the block,
 * found through it: v1_pool_saved_is).  The model keeps Q as a plain array in LRU
 * order (take = remove the first, release = append, a hit = remove from
 * the middle) and the cache map M as a list of (identity, block) entries
 * in the order they entered it (lookup = the first entry with that
 * identity; a take removes the block's entry).  Random operations on a
 * small pool (so that the ring packs often) must give the same blocks, the
 * same lookups and the same counters, and the pool's own audit must pass
 * after every operation.  A watched lookup (the engine's blocked waiting
 * head: a few keys looked up in order, kept current by the pool as blocks
 * leave M) must give, after every later operation, the model's lookup of
 * the same keys up to its first miss, and the pool's count of its free
 * blocks (wfree) the model's, until the missed key enters M (wepoch).
 * A finished request's blocks (count 1, no identity or a private one)
 * released at once go to Q as dead runs (v1_pool_release_dead_rev); the
 * model appends them as any release, and marks them dead: no one looks
 * their identities up again, as no one does a finished request's. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "scheduler/v1_internal.h"

#define NB 12 /* blocks */

typedef struct model {
    int32_t q[NB], nq;          /* Q in order */
    int32_t ref[NB + 1];
    int has_id[NB + 1], lazy[NB + 1];
    int pub[NB + 1];            /* its private identity published (in M, not saved) */
    int dead[NB + 1];           /* released by a finished request, not yet taken */
    v1_key key[NB + 1];
    struct { v1_key k; int32_t b; } m[4 * NB]; /* M in entry order */
    int nm;
    int64_t evictions, ids;
} model;

/* ck_assert reports its place on every call; in a loop of a million checks
 * only a failure should cost anything */
#define EXPECT(cond, ...)                 \
    do {                                  \
        if (!(cond))                      \
            ck_abort_msg(__VA_ARGS__);    \
    } while (0)
#define EXPECT_EQ(a, b, seed, op)                                                          \
    EXPECT((int64_t)(a) == (int64_t)(b), "seed %llu op %d: %s = %lld, model %lld",        \
           (unsigned long long)(seed), (op), #a, (long long)(a), (long long)(b))

static int key_eq(v1_key a, v1_key b) { return a.a == b.a && a.b == b.b; }

/* What the engine's lookup finds for k: a private identity saved on its
 * block (v1_pool_save: the engine reads the block from the request's saved
 * row; here a private key (1000 + b, j) can only be block b's), else the
 * table's answer. */
static int32_t pool_find(const v1_pool *p, v1_key k)
{
    if (k.b & V1_PRIVATE) {
        int32_t b = (int32_t)(k.a - 1000);
        if (b >= 1 && b <= NB && v1_pool_saved_is(p, b, k))
            return b;
    }
    return v1_pool_lookup(p, k);
}

static void m_unlist(model *d, int32_t b)
{
    for (int i = 0; i < d->nm; i++)
        if (d->m[i].b == b) {
            memmove(&d->m[i], &d->m[i + 1], (size_t)(d->nm - i - 1) * sizeof d->m[0]);
            d->nm--;
            return;
        }
}

static void m_list(model *d, int32_t b)
{
    d->m[d->nm].k = d->key[b];
    d->m[d->nm].b = b;
    d->nm++;
}

static int32_t m_lookup(const model *d, v1_key k)
{
    for (int i = 0; i < d->nm; i++)
        if (key_eq(d->m[i].k, k))
            return d->m[i].b;
    return 0;
}

static void q_remove(model *d, int32_t b)
{
    for (int i = 0; i < d->nq; i++)
        if (d->q[i] == b) {
            memmove(&d->q[i], &d->q[i + 1], (size_t)(d->nq - i - 1) * sizeof d->q[0]);
            d->nq--;
            return;
        }
    ck_abort_msg("block %d not in the model's Q", b); /* a bug of the test */
}

/* Q's head leaves the model's Q: count 1, its identity dropped. */
static int32_t m_take(model *d)
{
    int32_t b = d->q[0];
    q_remove(d, b);
    if (d->has_id[b]) {
        if (!d->lazy[b])
            m_unlist(d, b);
        d->has_id[b] = d->lazy[b] = d->pub[b] = 0;
        d->evictions++;
        d->ids--;
    }
    d->dead[b] = 0;
    d->ref[b] = 1;
    return b;
}

static int64_t m_cached(const model *d)
{
    int64_t c = 0;
    for (int i = 0; i < d->nq; i++)
        c += d->has_id[d->q[i]];
    return c;
}

/* A shared identity out of a few (so lists hold duplicates), or block b's
 * private one (request 1000 + b, index j). */
static v1_key some_key(rng *g, int32_t b, int private_)
{
    v1_key k;
    if (private_) {
        k.a = 1000 + (uint64_t)b;
        k.b = (uint64_t)rng_below(g, 1000) | V1_PRIVATE;
    } else {
        k.a = 7 + rng_below(g, 3);
        k.b = 16 * (1 + rng_below(g, 2));
    }
    return k;
}

START_TEST(test_pool_matches_model)
{
    int64_t packs_seen = 0, takes = 0, evicted = 0, hits = 0, published = 0, saved = 0;
    int64_t dead_runs = 0, dead_blocks = 0, dead_taken = 0, anon_packs = 0, bulk = 0;
    int64_t packs_with_runs = 0, dead_multi = 0, known_runs = 0;
    int64_t watched_checks = 0, watched_free = 0, watched_drops = 0;
    for (uint64_t seed = 1; seed <= 200; seed++) {
        rng g;
        rng_init(&g, seed);
        v1_pool p;
        ck_assert_int_eq(v1_pool_init(&p, NB, 1), 0);
        int32_t wh[NB];
        p.wh = wh;
        model d = {0};
        for (int32_t b = 1; b <= NB; b++)
            d.q[d.nq++] = b;
        v1_key wk[4]; /* the watched lookup's keys */
        int wn = 0;
        int64_t wepoch0 = 0, wm0 = 0;
        for (int op = 0; op < 2000; op++) {
            int32_t b = (int32_t)(1 + rng_below(&g, NB));
            uint64_t before_tail = p.rtail - p.rhead;
            const int64_t before_ahead = p.ahead, before_atail = p.atail, ev0 = d.evictions;
            const int64_t packs0 = packs_seen;
            int had_run = 0; /* a dead run in the ring: a pack must keep it */
            for (uint64_t r = p.rhead; r != p.rtail; r++)
                had_run |= p.ring[r & p.rmask] < 0;
            switch (rng_below(&g, 14)) {
            case 0: /* take (seldom in odd seeds, whose rings then fill with holes) */
                if (d.nq == 0 || (seed % 2 && rng_below(&g, 6)))
                    break;
                {
                    int32_t want = m_take(&d);
                    evicted += d.evictions - ev0;
                    dead_taken += p.ahead > before_ahead;
                    EXPECT_EQ(v1_pool_take(&p), want, seed, op);
                    takes++;
                }
                break;
            case 12: { /* take several at once (v1_pool_take_n: a dead run's in one go;
                          seldom in odd seeds, as case 0) */
                if (d.nq == 0 || (seed % 2 && rng_below(&g, 6)))
                    break;
                int32_t got[NB], want[NB];
                int64_t n = (int64_t)(1 + rng_below(&g, (uint64_t)(d.nq < 6 ? d.nq : 6)));
                for (int64_t i = 0; i < n; i++)
                    want[i] = m_take(&d);
                evicted += d.evictions - ev0;
                v1_pool_take_n(&p, got, n);
                for (int64_t i = 0; i < n; i++)
                    EXPECT_EQ(got[i], want[i], seed, op);
                dead_taken += p.ahead - before_ahead;
                bulk++;
                break;
            }
            case 13: { /* a finished request's blocks, a row given back last to first */
                int32_t t[4];
                int n = 0, cand = (int)rng_below(&g, 5);
                for (int32_t y = 1; y <= NB && n < cand; y++) {
                    int32_t x = 1 + (int32_t)((y + b) % NB); /* from b on */
                    if (d.ref[x] == 1 && (!d.has_id[x] || ((d.key[x].b & V1_PRIVATE) && !d.pub[x])))
                        t[n++] = x;
                }
                /* half the time, with none watched, the known way: those with
                 * an identity first, no block read (v1_pool_release_run_rev) */
                int known = rng_below(&g, 2), nid = 0;
                for (int i = 0; i < n; i++)
                    known &= !(p.blk[t[i]].flags & V1_BLK_WATCHED);
                for (int i = 0; known && i < n; i++)
                    if (d.has_id[t[i]]) {
                        int32_t x = t[nid];
                        t[nid++] = t[i];
                        t[i] = x;
                    }
                for (int i = n - 1; i >= 0; i--) {
                    d.ref[t[i]] = 0;
                    d.dead[t[i]] = 1;
                    d.q[d.nq++] = t[i];
                }
                if (known) {
                    v1_pool_release_run_rev(&p, t, n, nid);
                    known_runs += n > 0;
                } else {
                    v1_pool_release_dead_rev(&p, t, n);
                }
                packs_seen += p.rtail - p.rhead < before_tail;
                anon_packs += p.atail < before_atail;
                { /* (no take here: the FIFO grew by the blocks that went dead) */
                    int64_t added = (p.atail - p.ahead) - (before_atail - before_ahead);
                    dead_blocks += added;
                    dead_runs += added > 0;
                    dead_multi += added > 1;
                }
                break;
            }
            case 1: /* release */
            case 2:
                if (d.ref[b] == 0)
                    break;
                if (--d.ref[b] == 0)
                    d.q[d.nq++] = b;
                v1_pool_release(&p, b);
                packs_seen += p.rtail - p.rhead < before_tail;
                break;
            case 3: /* hold: a hit on a free block with a listed identity, or another holder */
            case 6:
            case 7:
                if (d.ref[b] == 0 && (!(d.has_id[b] && !d.lazy[b]) || d.dead[b]))
                    break;
                if (d.ref[b]++ == 0) {
                    q_remove(&d, b);
                    hits++;
                }
                v1_pool_hold(&p, b);
                break;
            case 4: /* register a held block */
            case 8:
                if (d.ref[b] == 0 || d.has_id[b])
                    break;
                {
                    v1_key k = some_key(&g, b, rng_below(&g, 2) == 0);
                    d.key[b] = k;
                    d.has_id[b] = 1;
                    d.ids++;
                    if (k.b & V1_PRIVATE)
                        d.lazy[b] = 1;
                    else
                        m_list(&d, b);
                    v1_pool_register(&p, b, k);
                }
                break;
            case 9: /* a hit on a free block that is freed again at once: a hole
                       and a new slot at the tail, so the ring fills and packs */
            case 10: {
                int32_t cand[NB], nc = 0; /* the free blocks a lookup can find */
                for (int i = 0; i < d.nq; i++)
                    if (d.has_id[d.q[i]] && !d.lazy[d.q[i]] && !d.dead[d.q[i]])
                        cand[nc++] = d.q[i];
                if (nc == 0)
                    break;
                b = cand[rng_below(&g, (uint64_t)nc)];
                q_remove(&d, b);
                d.q[d.nq++] = b;
                hits++;
                v1_pool_hold(&p, b);
                v1_pool_release(&p, b);
                packs_seen += p.rtail - p.rhead < before_tail;
                break;
            }
            case 11: /* a watched lookup of up to 4 keys, mostly listed ones */
                if (rng_below(&g, 2))
                    goto plain;
                v1_pool_watch_clear(&p);
                wn = (int)(1 + rng_below(&g, 4));
                for (int i = 0; i < wn; i++) {
                    int32_t y = (int32_t)(1 + rng_below(&g, NB));
                    /* a lazy one misses until it is published or saved */
                    wk[i] = d.has_id[y] && !d.dead[y] && rng_below(&g, 4) ? d.key[y]
                                                                          : some_key(&g, y, 0);
                    for (int j = 0; j < i; j++) /* distinct keys, as a request's blocks' */
                        if (key_eq(wk[j], wk[i]))
                            wn = i;
                }
                for (int i = 0; i < wn; i++) {
                    int32_t y = pool_find(&p, wk[i]);
                    if (!y) {
                        v1_pool_watch_miss(&p, wk[i]);
                        break;
                    }
                    v1_pool_watch_hit(&p, y);
                }
                wepoch0 = p.wepoch;
                wm0 = p.wm;
                break;
            default: /* publish or save a private identity, or look one up */
            plain:
                if (d.lazy[b] && !d.dead[b] && rng_below(&g, 2)) {
                    d.lazy[b] = 0; /* findable, in M's order either way */
                    m_list(&d, b);
                    if (rng_below(&g, 2)) {
                        v1_pool_publish(&p, b, d.key[b]);
                        d.pub[b] = 1;
                        published++;
                    } else {
                        v1_pool_save(&p, b, d.key[b]);
                        saved++;
                    }
                } else {
                    v1_key k = d.has_id[b] && !d.dead[b] ? d.key[b] : some_key(&g, b, 0);
                    EXPECT_EQ(pool_find(&p, k), m_lookup(&d, k), seed, op);
                }
                break;
            }
            packs_with_runs += had_run && packs_seen > packs0;
            char why[160];
            EXPECT(v1_pool_audit(&p, why, sizeof why) == 0, "seed %llu op %d: %s",
                   (unsigned long long)seed, op, why);
            EXPECT_EQ(p.F, d.nq, seed, op);
            EXPECT_EQ(p.cached, m_cached(&d), seed, op);
            EXPECT_EQ(p.evictions, d.evictions, seed, op);
            EXPECT_EQ(p.ids, d.ids, seed, op);
            if (wn > 0 && p.wepoch == wepoch0) { /* the watched answer is current */
                int i = 0;
                int64_t nfree = 0;
                for (; i < wn; i++) {
                    int32_t y = m_lookup(&d, wk[i]);
                    if (!y)
                        break;
                    EXPECT_EQ(p.wh[i], y, seed, op);
                    nfree += d.ref[y] == 0;
                }
                EXPECT_EQ(p.wm, i, seed, op);
                EXPECT_EQ(p.wfree, nfree, seed, op);
                watched_checks++;
                watched_free += nfree;
                watched_drops += p.wm < wm0;
                wm0 = p.wm;
            }
            for (int32_t x = 1; x <= NB; x++) {
                EXPECT_EQ(v1_pool_count(&p, x), d.ref[x], seed, op);
                EXPECT_EQ(v1_pool_has_id(&p, x), d.has_id[x], seed, op);
            }
        }
        v1_pool_free(&p);
    }
    /* the cases the ring exists for really happened */
    ck_assert_msg(packs_seen > 30 && packs_with_runs > 5 && hits > 1000 && evicted > 300 && published > 300 &&
                      saved > 300,
                  "packs %lld (%lld with a dead run), hits %lld, evictions %lld, published "
                  "%lld, saved %lld: toothless", (long long)packs_seen,
                  (long long)packs_with_runs, (long long)hits, (long long)evicted,
                  (long long)published, (long long)saved);
    /* the dead runs: made, merged, taken one and several at a time, packed */
    ck_assert_msg(dead_runs > 3000 && dead_multi > 1000 && dead_taken > 3000 && known_runs > 1000 &&
                      anon_packs > 50 && bulk > 5000,
                  "dead runs %lld (%lld blocks, %lld known), %lld taken, FIFO packed %lld "
                  "times, %lld bulk takes: toothless", (long long)dead_runs,
                  (long long)dead_blocks, (long long)known_runs,
                  (long long)dead_taken, (long long)anon_packs, (long long)bulk);
    printf("test_v1_pool: %lld dead runs of %lld blocks, %lld taken from them, the FIFO "
           "packed %lld times\n", (long long)dead_runs, (long long)dead_blocks,
           (long long)dead_taken, (long long)anon_packs);
    ck_assert_msg(watched_checks > 100000 && watched_free > 3000 && watched_drops > 20,
                  "watched lookup: %lld checks, %lld free blocks seen, %lld answers cut "
                  "short by a take: toothless", (long long)watched_checks,
                  (long long)watched_free, (long long)watched_drops);
    printf("test_v1_pool: %lld watched-lookup checks, %lld free blocks counted, %lld cut "
           "short by a take\n", (long long)watched_checks, (long long)watched_free,
           (long long)watched_drops);
    (void)takes;
}
END_TEST

int main(void)
{
    Suite *s = suite_create("v1_pool");
    TCase *tc = tcase_create("pool");
    tcase_add_test(tc, test_pool_matches_model);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
