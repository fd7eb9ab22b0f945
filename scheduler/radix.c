/* radix.c — SGLang's radix cache over token identities (radix.h). */
#include "radix.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/rng.h"

typedef struct rnode {
    int32_t parent;  /* node id; -1 for the root; a free slot: the next free slot */
    int32_t lock;    /* lock_ref: requests referencing this node or a descendant */
    int32_t nchild;  /* children */
    int32_t hpos;    /* index in the evictable-leaf heap, -1 when not in it */
    int32_t src;     /* request whose positions key the node */
    int32_t live;    /* 1 in use */
    int64_t start;   /* key: positions [start, start + len) of src, tokens */
    int64_t len;     /* tokens; 0 only for the root */
    uint64_t stamp;  /* last access, logical clock */
} rnode;

/* Child table entry: (parent, identity of the child's first token) -> child. */
typedef struct rchild {
    uint64_t tag;
    int64_t pos;
    int32_t parent; /* -1: empty slot */
    int32_t child;
    int32_t kind;
    int32_t pad_;
} rchild;

struct radix {
    radix_ident_fn ident;
    void *ctx;
    rnode *node;      /* [ncap] */
    int32_t ncap;
    int32_t free_head; /* first free slot, -1 none */
    int64_t nlive;    /* nodes in use, root included */
    rchild *tab;      /* [mask + 1] child table, linear probing */
    uint64_t mask;
    int64_t tab_used;
    int32_t *heap;    /* [ncap] unreferenced leaves, min stamp first */
    int32_t nheap;
    uint64_t clock;   /* the logical clock's last tick */
    int64_t evictable, protected_;
};

/* ------------------------------------------------------------ the heap */
static int heap_less(const radix *t, int32_t a, int32_t b)
{
    return t->node[a].stamp < t->node[b].stamp;
}

static void heap_set(radix *t, int32_t i, int32_t id)
{
    t->heap[i] = id;
    t->node[id].hpos = i;
}

static void heap_up(radix *t, int32_t i)
{
    int32_t id = t->heap[i];
    while (i > 0) {
        int32_t p = (i - 1) / 2;
        if (!heap_less(t, id, t->heap[p]))
            break;
        heap_set(t, i, t->heap[p]);
        i = p;
    }
    heap_set(t, i, id);
}

static void heap_down(radix *t, int32_t i)
{
    int32_t id = t->heap[i];
    for (;;) {
        int32_t c = 2 * i + 1;
        if (c >= t->nheap)
            break;
        if (c + 1 < t->nheap && heap_less(t, t->heap[c + 1], t->heap[c]))
            c++;
        if (!heap_less(t, t->heap[c], id))
            break;
        heap_set(t, i, t->heap[c]);
        i = c;
    }
    heap_set(t, i, id);
}

static void heap_push(radix *t, int32_t id)
{
    assert(t->node[id].hpos < 0);
    t->heap[t->nheap] = id;
    t->node[id].hpos = t->nheap++;
    heap_up(t, t->nheap - 1);
}

static void heap_remove(radix *t, int32_t id)
{
    int32_t i = t->node[id].hpos;
    assert(i >= 0 && t->heap[i] == id);
    t->node[id].hpos = -1;
    int32_t last = t->heap[--t->nheap];
    if (i == t->nheap)
        return;
    heap_set(t, i, last);
    heap_up(t, i);
    heap_down(t, t->node[last].hpos);
}

/* A node belongs in the heap when it is an unreferenced leaf (not the root). */
static void heap_fix(radix *t, int32_t id)
{
    rnode *x = &t->node[id];
    int want = id != RADIX_ROOT && x->nchild == 0 && x->lock == 0;
    if (want && x->hpos < 0)
        heap_push(t, id);
    else if (!want && x->hpos >= 0)
        heap_remove(t, id);
}

/* Give a node the stamp `when` (SGLang: last_access_time = the time read
 * for this lookup or insert, or at the node's creation). */
static void stamp(radix *t, int32_t id, uint64_t when)
{
    t->node[id].stamp = when;
    if (t->node[id].hpos >= 0)
        heap_down(t, t->node[id].hpos); /* its key only grows */
}

/* ------------------------------------------------------ the child table */
static uint64_t child_hash(int32_t parent, const radix_ident *k)
{
    return rng_mix64(rng_mix64(k->tag ^ ((uint64_t)k->kind << 63)) ^ (uint64_t)k->pos ^
                     ((uint64_t)(uint32_t)parent << 32));
}

static int child_eq(const rchild *e, int32_t parent, const radix_ident *k)
{
    return e->parent == parent && e->tag == k->tag && e->pos == k->pos && e->kind == k->kind;
}

static int32_t child_find(const radix *t, int32_t parent, const radix_ident *k)
{
    for (uint64_t i = child_hash(parent, k) & t->mask;; i = (i + 1) & t->mask) {
        const rchild *e = &t->tab[i];
        if (e->parent < 0)
            return -1;
        if (child_eq(e, parent, k))
            return e->child;
    }
}

static void tab_put(rchild *tab, uint64_t mask, const rchild *e)
{
    radix_ident k = {e->tag, e->pos, e->kind};
    uint64_t i = child_hash(e->parent, &k) & mask;
    while (tab[i].parent >= 0)
        i = (i + 1) & mask;
    tab[i] = *e;
}

static int tab_grow(radix *t)
{
    uint64_t cap = (t->mask + 1) * 2;
    rchild *tab = malloc(cap * sizeof *tab);
    if (!tab)
        return -1;
    for (uint64_t i = 0; i < cap; i++)
        tab[i].parent = -1;
    for (uint64_t i = 0; i <= t->mask; i++)
        if (t->tab[i].parent >= 0)
            tab_put(tab, cap - 1, &t->tab[i]);
    free(t->tab);
    t->tab = tab;
    t->mask = cap - 1;
    return 0;
}

/* Map (parent, k) to child, or re-point an existing entry. */
static void child_set(radix *t, int32_t parent, const radix_ident *k, int32_t child)
{
    for (uint64_t i = child_hash(parent, k) & t->mask;; i = (i + 1) & t->mask) {
        rchild *e = &t->tab[i];
        if (e->parent < 0) {
            *e = (rchild){k->tag, k->pos, parent, child, k->kind, 0};
            t->tab_used++;
            return;
        }
        if (child_eq(e, parent, k)) {
            e->child = child;
            return;
        }
    }
}

/* Remove (parent, k), shifting later entries of the cluster back. */
static void child_del(radix *t, int32_t parent, const radix_ident *k)
{
    uint64_t i = child_hash(parent, k) & t->mask;
    while (!child_eq(&t->tab[i], parent, k)) {
        assert(t->tab[i].parent >= 0);
        i = (i + 1) & t->mask;
    }
    t->tab_used--;
    for (uint64_t j = (i + 1) & t->mask;; j = (j + 1) & t->mask) {
        rchild *e = &t->tab[j];
        if (e->parent < 0)
            break;
        radix_ident ek = {e->tag, e->pos, e->kind};
        uint64_t h = child_hash(e->parent, &ek) & t->mask;
        /* e may move to i when its home h is not in (i, j] cyclically */
        if ((j > i && (h <= i || h > j)) || (j < i && (h <= i && h > j))) {
            t->tab[i] = *e;
            i = j;
        }
    }
    t->tab[i].parent = -1;
}

/* ------------------------------------------------------------- nodes */
static int32_t node_new(radix *t)
{
    if (t->free_head < 0) {
        int32_t cap = t->ncap * 2;
        rnode *n = realloc(t->node, (size_t)cap * sizeof *n);
        if (!n)
            return -1;
        t->node = n;
        int32_t *h = realloc(t->heap, (size_t)cap * sizeof *h);
        if (!h)
            return -1;
        t->heap = h;
        for (int32_t i = t->ncap; i < cap; i++) {
            n[i].live = 0;
            n[i].parent = i + 1 < cap ? i + 1 : -1;
        }
        t->free_head = t->ncap;
        t->ncap = cap;
    }
    if ((uint64_t)t->tab_used + 2 > (t->mask + 1) / 2 && tab_grow(t))
        return -1;
    int32_t id = t->free_head;
    t->free_head = t->node[id].parent;
    t->node[id] = (rnode){.parent = -1, .hpos = -1, .live = 1};
    t->nlive++;
    return id;
}

static void first_ident(const radix *t, int32_t id, radix_ident *k)
{
    const rnode *x = &t->node[id];
    t->ident(t->ctx, x->src, x->start, k);
}

/* Tokens two keys share from their starts: positions [a0, a0 + n) of
 * request a against [b0, b0 + n) of b, compared run by run.  O(runs). */
static int64_t key_match(const radix *t, int32_t a, int64_t a0, int32_t b, int64_t b0, int64_t n)
{
    int64_t i = 0;
    while (i < n) {
        radix_ident x, y;
        int64_t rx = t->ident(t->ctx, a, a0 + i, &x);
        int64_t ry = t->ident(t->ctx, b, b0 + i, &y);
        if (x.kind != y.kind || x.tag != y.tag || x.pos != y.pos)
            break;
        int64_t step = rx < ry ? rx : ry;
        i += step < n - i ? step : n - i;
    }
    return i;
}

/* SGLang's _split_node: a new node takes the first k tokens of child c
 * (same parent, same references, a fresh stamp) and c keeps the rest below
 * it.  Returns the new node, -1 out of memory. */
static int32_t split(radix *t, int32_t c, int64_t k)
{
    int32_t m = node_new(t);
    if (m < 0)
        return -1;
    rnode *x = &t->node[c], *nm = &t->node[m];
    assert(k > 0 && k < x->len);
    radix_ident k0, k1;
    first_ident(t, c, &k0);
    nm->parent = x->parent;
    nm->lock = x->lock;
    nm->nchild = 1;
    nm->src = x->src;
    nm->start = x->start;
    nm->len = k;
    x->parent = m;
    x->start += k;
    x->len -= k;
    t->ident(t->ctx, x->src, x->start, &k1);
    child_set(t, nm->parent, &k0, m);
    child_set(t, m, &k1, c);
    stamp(t, m, ++t->clock); /* TreeNode() reads the clock */
    return m;
}

/* ----------------------------------------------------------------- API */
int radix_init(radix **out, radix_ident_fn ident, void *ctx, kvs_err *err)
{
    radix *t = calloc(1, sizeof *t);
    if (!t)
        return kvs_errf(err, KVS_ENOMEM, "radix cache: out of memory");
    t->ident = ident;
    t->ctx = ctx;
    t->ncap = 64;
    t->node = malloc((size_t)t->ncap * sizeof *t->node);
    t->heap = malloc((size_t)t->ncap * sizeof *t->heap);
    t->mask = 255;
    t->tab = malloc((t->mask + 1) * sizeof *t->tab);
    if (!t->node || !t->heap || !t->tab) {
        radix_free(t);
        return kvs_errf(err, KVS_ENOMEM, "radix cache: out of memory");
    }
    for (uint64_t i = 0; i <= t->mask; i++)
        t->tab[i].parent = -1;
    for (int32_t i = 0; i < t->ncap; i++) {
        t->node[i].live = 0;
        t->node[i].parent = i + 1 < t->ncap ? i + 1 : -1;
    }
    t->free_head = 0;
    int32_t root = node_new(t);
    assert(root == RADIX_ROOT);
    (void)root;
    *out = t;
    return KVS_OK;
}

void radix_free(radix *t)
{
    if (!t)
        return;
    free(t->node);
    free(t->heap);
    free(t->tab);
    free(t);
}

/* The walk of lookups and inserts (_match_prefix_helper, _insert_helper):
 * from the root, one clock reading stamping every node walked, down while
 * a child's run starts with the next token of r, splitting the node where
 * the match ends inside it.  Returns the tokens matched (-1 out of memory)
 * and the node where the match ends in *last.  An insert's walk goes on
 * after a split too, but the split node's one child then differs at the
 * next token, so it stops there as well: one walk serves both. */
static int64_t walk(radix *t, int32_t r, int64_t len, int32_t *last)
{
    int32_t node = RADIX_ROOT;
    int64_t p = 0;
    const uint64_t now = ++t->clock; /* one reading for the whole walk */
    stamp(t, RADIX_ROOT, now);
    while (p < len) {
        radix_ident k;
        t->ident(t->ctx, r, p, &k);
        int32_t c = child_find(t, node, &k);
        if (c < 0)
            break;
        stamp(t, c, now);
        const rnode *x = &t->node[c];
        int64_t k1 = key_match(t, x->src, x->start, r, p, x->len < len - p ? x->len : len - p);
        assert(k1 >= 1);
        p += k1;
        if (k1 < x->len) {
            int32_t m = split(t, c, k1);
            if (m < 0)
                return -1;
            node = m;
            break;
        }
        node = c;
    }
    *last = node;
    return p;
}

int64_t radix_match(radix *t, int32_t r, int64_t len, int32_t *last)
{
    return walk(t, r, len, last);
}

int64_t radix_insert(radix *t, int32_t r, int64_t len, int32_t *last)
{
    int32_t node;
    int64_t p = walk(t, r, len, &node);
    if (p < 0)
        return -1;
    int64_t present = p;
    if (p < len) { /* what is left becomes a new leaf */
        int32_t leaf = node_new(t);
        if (leaf < 0)
            return -1;
        rnode *x = &t->node[leaf];
        x->parent = node;
        x->src = r;
        x->start = p;
        x->len = len - p;
        radix_ident k;
        t->ident(t->ctx, r, p, &k);
        child_set(t, node, &k, leaf);
        t->node[node].nchild++;
        heap_fix(t, node);
        stamp(t, leaf, ++t->clock); /* TreeNode() reads the clock */
        t->evictable += len - p;
        heap_fix(t, leaf);
        node = leaf;
    }
    if (last)
        *last = node;
    return present;
}

int64_t radix_peek(const radix *t, int32_t r, int64_t len)
{
    int32_t node = RADIX_ROOT;
    int64_t p = 0;
    while (p < len) {
        radix_ident k;
        t->ident(t->ctx, r, p, &k);
        int32_t c = child_find(t, node, &k);
        if (c < 0)
            break;
        const rnode *x = &t->node[c];
        int64_t k1 = key_match(t, x->src, x->start, r, p, x->len < len - p ? x->len : len - p);
        p += k1;
        if (k1 < x->len)
            break;
        node = c;
    }
    return p;
}

void radix_lock(radix *t, int32_t node)
{
    while (node != RADIX_ROOT) {
        rnode *x = &t->node[node];
        if (x->lock++ == 0) {
            t->evictable -= x->len;
            t->protected_ += x->len;
            heap_fix(t, node);
        }
        node = x->parent;
    }
}

void radix_unlock(radix *t, int32_t node)
{
    while (node != RADIX_ROOT) {
        rnode *x = &t->node[node];
        assert(x->lock > 0);
        if (--x->lock == 0) {
            t->evictable += x->len;
            t->protected_ -= x->len;
            heap_fix(t, node);
        }
        node = x->parent;
    }
}

radix_ident_fn radix_ident_of(const radix *t) { return t->ident; }
void *radix_ctx_of(const radix *t) { return t->ctx; }
int64_t radix_evictable(const radix *t) { return t->evictable; }
int64_t radix_protected(const radix *t) { return t->protected_; }
int64_t radix_nodes(const radix *t) { return t->nlive - 1; }
int64_t radix_node_len(const radix *t, int32_t node) { return t->node[node].len; }

int64_t radix_evict(radix *t, int64_t tokens)
{
    int64_t freed = 0;
    while (freed < tokens && t->nheap > 0) {
        int32_t id = t->heap[0];
        heap_remove(t, id);
        rnode *x = &t->node[id];
        assert(x->nchild == 0 && x->lock == 0);
        freed += x->len;
        t->evictable -= x->len;
        radix_ident k;
        first_ident(t, id, &k);
        child_del(t, x->parent, &k);
        int32_t p = x->parent;
        t->node[p].nchild--;
        x->live = 0;
        x->parent = t->free_head;
        t->free_head = id;
        t->nlive--;
        heap_fix(t, p);
    }
    return freed;
}

int radix_audit(const radix *t, char *why, int n)
{
    int64_t ev = 0, pr = 0, live = 0, inheap = 0, kids_total = 0;
    for (int32_t id = 0; id < t->ncap; id++) {
        const rnode *x = &t->node[id];
        if (!x->live)
            continue;
        live++;
        if (id == RADIX_ROOT)
            continue;
        int64_t kids = 0, lock = 0;
        for (int32_t c = 0; c < t->ncap; c++)
            if (t->node[c].live && c != RADIX_ROOT && t->node[c].parent == id) {
                kids++;
                lock += t->node[c].lock;
            }
        kids_total += kids;
        if (kids != x->nchild || x->len < 1 || x->lock < lock) {
            snprintf(why, (size_t)n, "radix: node %d has %lld children (says %d), len %lld, "
                     "lock %d below its children's %lld", id, (long long)kids, x->nchild,
                     (long long)x->len, x->lock, (long long)lock);
            return -1;
        }
        if (x->lock > 0)
            pr += x->len;
        else
            ev += x->len;
        int want = x->nchild == 0 && x->lock == 0;
        if (want != (x->hpos >= 0) || (want && t->heap[x->hpos] != id)) {
            snprintf(why, (size_t)n, "radix: node %d heap membership %d, wanted %d", id,
                     x->hpos >= 0, want);
            return -1;
        }
        inheap += want;
        radix_ident k;
        first_ident(t, id, &k);
        if (child_find(t, x->parent, &k) != id) {
            snprintf(why, (size_t)n, "radix: node %d is not its parent's child", id);
            return -1;
        }
    }
    int64_t root_kids = 0;
    for (int32_t c = 0; c < t->ncap; c++)
        root_kids += t->node[c].live && c != RADIX_ROOT && t->node[c].parent == RADIX_ROOT;
    if (root_kids != t->node[RADIX_ROOT].nchild || live != t->nlive || ev != t->evictable ||
        pr != t->protected_ || inheap != t->nheap || kids_total + root_kids != t->tab_used) {
        snprintf(why, (size_t)n, "radix: totals evictable %lld/%lld protected %lld/%lld nodes "
                 "%lld/%lld heap %lld/%d table %lld/%lld", (long long)ev,
                 (long long)t->evictable, (long long)pr, (long long)t->protected_,
                 (long long)live, (long long)t->nlive, (long long)inheap, t->nheap,
                 (long long)(kids_total + root_kids), (long long)t->tab_used);
        return -1;
    }
    for (int32_t i = 1; i < t->nheap; i++)
        if (heap_less(t, t->heap[i], t->heap[(i - 1) / 2])) {
            snprintf(why, (size_t)n, "radix: heap order broken at %d", i);
            return -1;
        }
    return 0;
}
