/* test_radix.c — the radix cache (scheduler/radix.h) against a plain model
 * of itself, and one scenario worked out by hand.
 *
 * The plain model is SGLang's RadixCache as its Python reads: nodes hold
 * their keys as explicit arrays of token identities, children are found by
 * a linear search, eviction collects every leaf and sorts them by last
 * access each time.  Both trees see the same random operations (match,
 * insert, lock, unlock, evict) on requests whose prompts share prefix
 * segments, and must return the same lengths, the same evictable and
 * protected totals, the same tokens evicted and the same number of nodes
 * after every operation; radix_audit checks the fast tree's own
 * bookkeeping (heap, child table, sizes) on the way. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "scheduler/radix.h"
#include "testutil.h"

/* ---------------------------------------------------------- requests */
#define NREQ 40
#define MAXSEG 5
#define MAXTOK 64

typedef struct tokreq {
    int nseg;
    uint64_t chain[MAXSEG]; /* segment chain ids */
    int64_t seg_start[MAXSEG + 1];
    int64_t hashed;         /* L: tokens under segments (may end inside one) */
    int64_t total;          /* tokens the request ever has */
} tokreq;

static tokreq reqs[NREQ];

/* The test's random draws: rng_below of a generator seeded once. */
static uint64_t draw(rng *g, uint64_t n) { return rng_below(g, n); }

/* A segment's length is a function of its chain, as equal chains are
 * equal tokens. */
static int64_t seg_len(uint64_t chain) { return 1 + (int64_t)(chain % 6); }

static void make_reqs(uint64_t seed)
{
    rng st;
    rng_init(&st, seed);
    for (int r = 0; r < NREQ; r++) {
        tokreq *q = &reqs[r];
        q->nseg = (int)(draw(&st, MAXSEG + 1));
        uint64_t c = 0x9e37;
        q->seg_start[0] = 0;
        for (int k = 0; k < q->nseg; k++) {
            c = rng_mix64(c ^ (draw(&st, 3))); /* 3 ids per level: much sharing */
            q->chain[k] = c;
            q->seg_start[k + 1] = q->seg_start[k] + seg_len(c);
        }
        int64_t sum = q->seg_start[q->nseg];
        q->hashed = sum > 0 ? sum - (int64_t)draw(&st, 2) * (sum > 1) : 0;
        q->total = q->hashed + 1 + (int64_t)draw(&st, 12);
        if (q->total > MAXTOK)
            q->total = MAXTOK;
    }
}

static int64_t ident(void *ctx, int32_t r, int64_t p, radix_ident *id)
{
    (void)ctx;
    const tokreq *q = &reqs[r];
    if (p < q->hashed) {
        int k = 0;
        while (q->seg_start[k + 1] <= p)
            k++;
        id->kind = 0;
        id->tag = q->chain[k];
        id->pos = p - q->seg_start[k];
        int64_t end = q->seg_start[k + 1] < q->hashed ? q->seg_start[k + 1] : q->hashed;
        return end - p;
    }
    id->kind = 1;
    id->tag = (uint64_t)r;
    id->pos = p;
    return q->total - p;
}

static int ident_eq(radix_ident a, radix_ident b)
{
    return a.kind == b.kind && a.tag == b.tag && a.pos == b.pos;
}

/* ------------------------------------------------------- plain model */
typedef struct pnode {
    struct pnode *parent;
    struct pnode *kids[64];
    int nkids;
    radix_ident key[MAXTOK];
    int64_t len;
    int lock;
    uint64_t stamp;
} pnode;

typedef struct ptree {
    pnode *root;
    uint64_t clock;
    int64_t evictable, protected_, nodes;
} ptree;

static pnode *pnew(ptree *t)
{
    pnode *x = calloc(1, sizeof *x);
    ck_assert_ptr_nonnull(x);
    x->stamp = ++t->clock;
    t->nodes++;
    return x;
}

static pnode *pchild(pnode *x, radix_ident k)
{
    for (int i = 0; i < x->nkids; i++)
        if (ident_eq(x->kids[i]->key[0], k))
            return x->kids[i];
    return NULL;
}

static void key_of(int32_t r, int64_t len, radix_ident *out)
{
    for (int64_t p = 0; p < len; p++)
        ident(NULL, r, p, &out[p]);
}

static int64_t pmatch_len(const pnode *x, const radix_ident *key, int64_t n)
{
    int64_t i = 0;
    while (i < x->len && i < n && ident_eq(x->key[i], key[i]))
        i++;
    return i;
}

/* _split_node: the new node takes the first k tokens and child's place. */
static pnode *psplit(ptree *t, pnode *c, int64_t k)
{
    pnode *m = pnew(t);
    pnode *p = c->parent;
    m->parent = p;
    m->lock = c->lock;
    m->len = k;
    memcpy(m->key, c->key, (size_t)k * sizeof *m->key);
    for (int i = 0; i < p->nkids; i++)
        if (p->kids[i] == c)
            p->kids[i] = m;
    memmove(c->key, c->key + k, (size_t)(c->len - k) * sizeof *c->key);
    c->len -= k;
    c->parent = m;
    m->kids[m->nkids++] = c;
    return m;
}

static int64_t pmatch(ptree *t, int32_t r, int64_t len, pnode **last)
{
    radix_ident key[MAXTOK];
    key_of(r, len, key);
    pnode *node = t->root;
    const uint64_t now = ++t->clock;
    node->stamp = now;
    int64_t p = 0;
    pnode *c;
    while (p < len && (c = pchild(node, key[p]))) {
        c->stamp = now;
        int64_t k = pmatch_len(c, key + p, len - p);
        if (k < c->len) {
            node = psplit(t, c, k);
            p += k;
            break;
        }
        node = c;
        p += k;
    }
    *last = node;
    return p;
}

static int64_t pinsert(ptree *t, int32_t r, int64_t len)
{
    radix_ident key[MAXTOK];
    key_of(r, len, key);
    pnode *node = t->root;
    const uint64_t now = ++t->clock;
    node->stamp = now;
    int64_t p = 0;
    pnode *c;
    while (p < len && (c = pchild(node, key[p]))) {
        node = c;
        node->stamp = now;
        int64_t k = pmatch_len(node, key + p, len - p);
        p += k;
        if (k < node->len)
            node = psplit(t, node, k);
    }
    if (p < len) {
        pnode *leaf = pnew(t);
        leaf->parent = node;
        leaf->len = len - p;
        memcpy(leaf->key, key + p, (size_t)leaf->len * sizeof *leaf->key);
        ck_assert_int_lt(node->nkids, 64);
        node->kids[node->nkids++] = leaf;
        t->evictable += leaf->len;
    }
    return p;
}

static void plock(ptree *t, pnode *x, int d)
{
    for (; x != t->root; x = x->parent) {
        if (d > 0 && x->lock == 0) {
            t->evictable -= x->len;
            t->protected_ += x->len;
        }
        x->lock += d;
        if (d < 0 && x->lock == 0) {
            t->evictable += x->len;
            t->protected_ -= x->len;
        }
    }
}

static int collect(pnode *x, pnode **out, int n)
{
    if (x->nkids == 0)
        out[n++] = x;
    for (int i = 0; i < x->nkids; i++)
        n = collect(x->kids[i], out, n);
    return n;
}

/* evict: every leaf, least recent first; a parent left childless joins. */
static int64_t pevict(ptree *t, int64_t tokens)
{
    static pnode *leaves[4096];
    int n = collect(t->root, leaves, 0);
    int64_t freed = 0;
    while (freed < tokens && n > 0) {
        int best = 0;
        for (int i = 1; i < n; i++)
            if (leaves[i]->stamp < leaves[best]->stamp)
                best = i;
        pnode *x = leaves[best];
        leaves[best] = leaves[--n];
        if (x == t->root)
            break;
        if (x->lock > 0)
            continue;
        freed += x->len;
        t->evictable -= x->len;
        pnode *p = x->parent;
        for (int i = 0; i < p->nkids; i++)
            if (p->kids[i] == x) {
                p->kids[i] = p->kids[--p->nkids];
                break;
            }
        free(x);
        t->nodes--;
        if (p->nkids == 0)
            leaves[n++] = p;
    }
    return freed;
}

static void pfree(pnode *x)
{
    for (int i = 0; i < x->nkids; i++)
        pfree(x->kids[i]);
    free(x);
}

/* --------------------------------------------------------- the test */
typedef struct held {
    int32_t fast;
    pnode *slow;
} held;

static void check_same(radix *f, ptree *s, const char *op, int step)
{
    char why[256];
    ck_assert_msg(radix_audit(f, why, sizeof why) == 0, "step %d (%s): %s", step, op, why);
    ck_assert_msg(radix_evictable(f) == s->evictable && radix_protected(f) == s->protected_ &&
                      radix_nodes(f) == s->nodes - 1,
                  "step %d (%s): evictable %lld/%lld protected %lld/%lld nodes %lld/%lld", step,
                  op, (long long)radix_evictable(f), (long long)s->evictable,
                  (long long)radix_protected(f), (long long)s->protected_,
                  (long long)radix_nodes(f), (long long)(s->nodes - 1));
}

START_TEST(test_radix_against_plain_model)
{
    int64_t splits = 0, hits = 0, evicted = 0;
    for (uint64_t seed = 1; seed <= 60; seed++) {
        make_reqs(seed);
        radix *f;
        kvs_err err;
        ck_assert_int_eq(radix_init(&f, ident, NULL, &err), KVS_OK);
        ptree s = {0};
        s.root = pnew(&s);
        held locked[256];
        int nl = 0;
        rng st;
        rng_init(&st, seed * 7919);
        for (int step = 0; step < 400; step++) {
            int op = (int)draw(&st, 10);
            int32_t r = (int32_t)draw(&st, NREQ);
            int64_t len = 1 + (int64_t)draw(&st, (uint64_t)reqs[r].total);
            if (op < 4) { /* match, then lock its end half the time */
                int64_t before = radix_nodes(f);
                int64_t peek = radix_peek(f, r, len); /* changes nothing */
                ck_assert_int_eq(radix_nodes(f), before);
                int32_t lf;
                pnode *ls;
                int64_t a = radix_match(f, r, len, &lf);
                ck_assert_int_eq(a, peek);
                int64_t b = pmatch(&s, r, len, &ls);
                ck_assert_int_eq(a, b);
                ck_assert_int_eq(radix_node_len(f, lf), ls->len);
                splits += radix_nodes(f) - before;
                hits += a > 0;
                if (a > 0 && nl < 256 && draw(&st, 2)) {
                    radix_lock(f, lf);
                    plock(&s, ls, 1);
                    locked[nl++] = (held){lf, ls};
                }
                check_same(f, &s, "match", step);
            } else if (op < 7) {
                int64_t a = radix_insert(f, r, len, NULL);
                int64_t b = pinsert(&s, r, len);
                ck_assert_int_eq(a, b);
                check_same(f, &s, "insert", step);
            } else if (op < 8 && nl > 0) {
                int i = (int)draw(&st, (uint64_t)nl);
                radix_unlock(f, locked[i].fast);
                plock(&s, locked[i].slow, -1);
                locked[i] = locked[--nl];
                check_same(f, &s, "unlock", step);
            } else {
                int64_t want = (int64_t)draw(&st, 20);
                int64_t a = radix_evict(f, want), b = pevict(&s, want);
                ck_assert_int_eq(a, b);
                evicted += a;
                check_same(f, &s, "evict", step);
            }
        }
        radix_free(f);
        pfree(s.root);
    }
    /* the operations must have exercised what they test */
    ck_assert_msg(splits > 100 && hits > 1000 && evicted > 1000,
                  "too easy: %lld splits, %lld hits, %lld tokens evicted", (long long)splits,
                  (long long)hits, (long long)evicted);
}
END_TEST

/* By hand.  Requests (identities): r0 = s s s a b (three tokens of one
 * segment, then two of its own), r1 = s s s c, r2 = s s d.  The clock is
 * read once per lookup or insert (every node walked takes that tick) and
 * once per node created:
 *   insert r0[0,5)  t1: root; new leaf L0 "sssab" t2.  0 present, evictable 5.
 *   insert r1[0,4)  t3: root, L0; L0 matches 3 of 5: split, M1 "sss" t4
 *                   above L0 "ab" (t3); new leaf L1 "c" t5.  3 present,
 *                   evictable 6, 3 nodes.
 *   match r2[0,3)   t6: root, M1; M1 matches 2 of 3: split, M2 "ss" t7
 *                   above M1 "s" (t6).  Returns 2 and M2 (2 tokens); 4 nodes.
 *   lock M2         protected 2, evictable 4.
 *   evict 1         unlocked leaves L0 (t3), L1 (t5): L0 goes whole, 2 freed.
 *   evict 10        L1 (1), then M1 (t6), childless now (1); M2 is locked:
 *                   2 freed, evictable 0, protected 2, 1 node left.
 *   unlock, evict   M2 goes: 2 freed, no node left. */
START_TEST(test_radix_by_hand)
{
    memset(reqs, 0, sizeof reqs);
    const uint64_t s0 = 1000; /* seg_len(1000) = 1 + 1000 % 6 = 5: cut to 3 by hashed */
    for (int r = 0; r < 3; r++) {
        reqs[r].nseg = 1;
        reqs[r].chain[0] = s0;
        reqs[r].seg_start[1] = seg_len(s0);
    }
    reqs[0].hashed = 3, reqs[0].total = 5;
    reqs[1].hashed = 3, reqs[1].total = 4;
    reqs[2].hashed = 2, reqs[2].total = 3;
    radix *t;
    kvs_err err;
    ck_assert_int_eq(radix_init(&t, ident, NULL, &err), KVS_OK);
    ck_assert_int_eq(radix_insert(t, 0, 5, NULL), 0);
    ck_assert_int_eq(radix_evictable(t), 5);
    ck_assert_int_eq(radix_insert(t, 1, 4, NULL), 3);
    ck_assert_int_eq(radix_nodes(t), 3);
    ck_assert_int_eq(radix_evictable(t), 6);
    int32_t last;
    ck_assert_int_eq(radix_match(t, 2, 3, &last), 2);
    ck_assert_int_eq(radix_nodes(t), 4);
    ck_assert_int_eq(radix_node_len(t, last), 2);
    radix_lock(t, last);
    ck_assert_int_eq(radix_protected(t), 2);
    ck_assert_int_eq(radix_evictable(t), 4);
    ck_assert_int_eq(radix_evict(t, 1), 2);
    ck_assert_int_eq(radix_evict(t, 10), 2);
    ck_assert_int_eq(radix_evictable(t), 0);
    ck_assert_int_eq(radix_protected(t), 2);
    ck_assert_int_eq(radix_nodes(t), 1);
    radix_unlock(t, last);
    ck_assert_int_eq(radix_evict(t, 10), 2);
    ck_assert_int_eq(radix_nodes(t), 0);
    char why[200];
    ck_assert_msg(radix_audit(t, why, sizeof why) == 0, "%s", why);
    radix_free(t);
}
END_TEST

/* By hand: a node made by a split carries the clock of its making, which
 * counts once it becomes a leaf.  r3 = x (one own token); r0 and r1 as
 * above.
 *   insert r3[0,1)  t1: root; leaf X t2.   lock X (it must outlive what follows)
 *   insert r0[0,5)  t3: root; leaf L0 t4.
 *   insert r1[0,4)  t5: root, L0; split, M "sss" t6 above L0 "ab" (t5); leaf C t7.
 *   evict 3         unlocked leaves L0 (t5), C (t7): both go (3 tokens);
 *                   M (t6), childless, joins them.
 *   unlock X; evict 1: leaves X (t2) and M (t6): X goes first, 1 token.
 *   evict 1         then M, 3 tokens.
 * (A split node left unstamped, at 0, would go before X.) */
START_TEST(test_radix_split_stamp)
{
    memset(reqs, 0, sizeof reqs);
    const uint64_t s0 = 1000;
    for (int r = 0; r < 2; r++) {
        reqs[r].nseg = 1;
        reqs[r].chain[0] = s0;
        reqs[r].seg_start[1] = seg_len(s0);
        reqs[r].hashed = 3;
    }
    reqs[0].total = 5;
    reqs[1].total = 4;
    reqs[3].total = 1;
    radix *t;
    kvs_err err;
    ck_assert_int_eq(radix_init(&t, ident, NULL, &err), KVS_OK);
    int32_t x;
    ck_assert_int_eq(radix_insert(t, 3, 1, &x), 0);
    radix_lock(t, x);
    ck_assert_int_eq(radix_insert(t, 0, 5, NULL), 0);
    ck_assert_int_eq(radix_insert(t, 1, 4, NULL), 3);
    ck_assert_int_eq(radix_evict(t, 3), 3);
    ck_assert_int_eq(radix_nodes(t), 2);
    radix_unlock(t, x);
    ck_assert_int_eq(radix_evict(t, 1), 1);
    ck_assert_int_eq(radix_evict(t, 1), 3);
    ck_assert_int_eq(radix_nodes(t), 0);
    radix_free(t);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("radix");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_radix_by_hand);
    tcase_add_test(tc, test_radix_split_stamp);
    tcase_add_test(tc, test_radix_against_plain_model);
    suite_add_tcase(s, tc);
    return tu_run_suites(&s, 1);
}
