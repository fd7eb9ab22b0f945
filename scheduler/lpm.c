/* lpm.c — the cache-aware waiting order of policy lpm (as SGLang's "lpm"):
 * longest cached prefix first, then (arrival_s, id).
 *
 * The key of a waiting request, the number of leading blocks of its prompt
 * that are cached, changes with the cache, so it is kept current by events
 * instead of being recomputed for all of W every iteration.  Because cached
 * blocks are prefix-closed (pcache.c), a request's key m changes only when
 * its block m gets cached (m grows) or its block m - 1 gets evicted (m
 * shrinks).  Each waiting request therefore watches those two block
 * identities; two hash tables map an identity to the list of its watchers.
 * When the cache reports a block cached or evicted, the watchers are
 * re-keyed (a binary search, sched_pc_match) and moved in the waiting heap,
 * which keeps a position index.  Cost: O(log W) per push, pop and re-keyed
 * request, O(1) per cache event without watchers; memory O(n).
 */
#include <stdlib.h>

#include "sched_internal.h"

enum { W_NEXT = 0, W_LAST = 1, W_KINDS = 2 };
#define NOT_WATCHING (-2)

struct sched_lpm {
    sched *s;
    int32_t *pos;             /* [n] index in wq.ids, -1 when not waiting */
    int64_t *key;             /* [n] cached leading blocks of a waiting request */
    uint64_t *wkey[W_KINDS];  /* [n] identity watched: W_NEXT the first uncached
                                 block, W_LAST the last cached one */
    int32_t *wnext[W_KINDS];  /* [n] next watcher of the same identity, -1 none */
    int32_t *wprev[W_KINDS];  /* [n] previous watcher; -1 list head; -2 none */
    int32_t *tab[W_KINDS];    /* [mask + 1] list head per identity, -1 empty */
    uint64_t mask;            /* table size - 1, size a power of two >= 2n */
};

/* ------------------------------------------------------------ watchers */

/* Slot of identity h in table k: its list head, or the empty slot where it
 * would go. */
static uint64_t slot_of(const sched_lpm *l, int k, uint64_t h)
{
    uint64_t i = h & l->mask;
    while (l->tab[k][i] >= 0 && l->wkey[k][l->tab[k][i]] != h)
        i = (i + 1) & l->mask;
    return i;
}

static void watch(sched_lpm *l, int k, int32_t id, uint64_t h)
{
    uint64_t i = slot_of(l, k, h);
    int32_t head = l->tab[k][i];
    l->wkey[k][id] = h;
    l->wnext[k][id] = head;
    l->wprev[k][id] = -1;
    if (head >= 0)
        l->wprev[k][head] = id;
    l->tab[k][i] = id;
}

static void unwatch(sched_lpm *l, int k, int32_t id)
{
    int32_t prev = l->wprev[k][id], next = l->wnext[k][id];
    if (prev == NOT_WATCHING)
        return;
    l->wprev[k][id] = NOT_WATCHING;
    if (next >= 0)
        l->wprev[k][next] = prev;
    if (prev >= 0) {
        l->wnext[k][prev] = next;
        return;
    }
    /* id headed its list */
    uint64_t i = slot_of(l, k, l->wkey[k][id]);
    if (next >= 0) {
        l->tab[k][i] = next;
        return;
    }
    /* the list is empty: remove the slot, shifting its probe run back */
    for (uint64_t j = i;;) {
        j = (j + 1) & l->mask;
        int32_t x = l->tab[k][j];
        if (x < 0)
            break;
        uint64_t home = l->wkey[k][x] & l->mask;
        int stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
        if (!stays) {
            l->tab[k][i] = x;
            i = j;
        }
    }
    l->tab[k][i] = -1;
}

/* ---------------------------------------------------------------- heap */

static int before(const sched_lpm *l, int32_t a, int32_t b)
{
    if (l->key[a] != l->key[b])
        return l->key[a] > l->key[b];
    return l->s->pol->cmp(l->s->reqs, a, b) < 0;
}

static void place(sched_lpm *l, int64_t i, int32_t id)
{
    l->s->wq.ids[i] = id;
    l->pos[id] = (int32_t)i;
}

static void sift_up(sched_lpm *l, int64_t i)
{
    int32_t *ids = l->s->wq.ids, id = ids[i];
    while (i > 0) {
        int64_t p = (i - 1) / 2;
        if (!before(l, id, ids[p]))
            break;
        place(l, i, ids[p]);
        i = p;
    }
    place(l, i, id);
}

static void sift_down(sched_lpm *l, int64_t i)
{
    int32_t *ids = l->s->wq.ids, id = ids[i];
    int64_t n = l->s->wq.n;
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && before(l, ids[c + 1], ids[c]))
            c++;
        if (!before(l, ids[c], id))
            break;
        place(l, i, ids[c]);
        i = c;
    }
    place(l, i, id);
}

/* Recompute id's key and watches (not its heap position). */
static void key_and_watch(sched_lpm *l, int32_t id)
{
    sched *s = l->s;
    unwatch(l, W_NEXT, id);
    unwatch(l, W_LAST, id);
    int64_t m = sched_pc_match(s, id);
    l->key[id] = m;
    if (m < sched_pc_blocks(s, id, s->reqs[id].prompt_tokens))
        watch(l, W_NEXT, id, sched_pc_block_hash(s, id, m));
    if (m > 0)
        watch(l, W_LAST, id, sched_pc_block_hash(s, id, m - 1));
}

static void rekey(sched_lpm *l, int32_t id)
{
    key_and_watch(l, id);
    sift_up(l, l->pos[id]);
    sift_down(l, l->pos[id]);
}

/* ------------------------------------------------------------- the API */

int sched_lpm_init(sched *s)
{
    sched_lpm *l = calloc(1, sizeof *l);
    if (!l)
        return KVS_ENOMEM;
    size_t n = (size_t)(s->n > 0 ? s->n : 1);
    uint64_t size = 2;
    while (size < 2 * (uint64_t)n)
        size *= 2;
    l->s = s;
    l->mask = size - 1;
    l->pos = malloc(n * sizeof *l->pos);
    l->key = calloc(n, sizeof *l->key);
    int ok = l->pos && l->key;
    for (int k = 0; k < W_KINDS; k++) {
        l->wkey[k] = calloc(n, sizeof *l->wkey[k]);
        l->wnext[k] = malloc(n * sizeof *l->wnext[k]);
        l->wprev[k] = malloc(n * sizeof *l->wprev[k]);
        l->tab[k] = malloc((size_t)size * sizeof *l->tab[k]);
        ok = ok && l->wkey[k] && l->wnext[k] && l->wprev[k] && l->tab[k];
    }
    if (!ok) {
        sched_lpm_free(l);
        return KVS_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        l->pos[i] = -1;
        for (int k = 0; k < W_KINDS; k++) {
            l->wnext[k][i] = -1;
            l->wprev[k][i] = NOT_WATCHING;
        }
    }
    for (int k = 0; k < W_KINDS; k++)
        for (uint64_t i = 0; i < size; i++)
            l->tab[k][i] = -1;
    s->lpm = l;
    s->wq.lpm = l;
    return KVS_OK;
}

void sched_lpm_free(sched_lpm *l)
{
    if (!l)
        return;
    free(l->pos);
    free(l->key);
    for (int k = 0; k < W_KINDS; k++) {
        free(l->wkey[k]);
        free(l->wnext[k]);
        free(l->wprev[k]);
        free(l->tab[k]);
    }
    free(l);
}

void sched_lpm_push(sched_lpm *l, int32_t id)
{
    key_and_watch(l, id);
    int64_t i = l->s->wq.n++;
    place(l, i, id);
    sift_up(l, i);
}

int32_t sched_lpm_pop(sched_lpm *l)
{
    sched_waitq *q = &l->s->wq;
    int32_t top = q->ids[0];
    unwatch(l, W_NEXT, top);
    unwatch(l, W_LAST, top);
    l->pos[top] = -1;
    int32_t last = q->ids[--q->n];
    if (q->n > 0) {
        place(l, 0, last);
        sift_down(l, 0);
    }
    return top;
}

/* Re-key every watcher of h in list k.  A re-keyed request stops watching
 * h (its key moved past that block), so the walk ends. */
static void on_event(sched_lpm *l, int k, uint64_t h)
{
    int32_t id = l->tab[k][slot_of(l, k, h)];
    while (id >= 0) {
        int32_t next = l->wnext[k][id];
        rekey(l, id);
        id = next;
    }
}

void sched_lpm_on_cached(sched_lpm *l, uint64_t h) { on_event(l, W_NEXT, h); }

void sched_lpm_on_evicted(sched_lpm *l, uint64_t h) { on_event(l, W_LAST, h); }

int64_t sched_lpm_key_of(const sched_lpm *l, int32_t id) { return l->key[id]; }
