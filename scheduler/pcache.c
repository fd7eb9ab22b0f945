/* pcache.c — the prefix cache of docs/semantics-extensions.md, section P.
 *
 * Full KV blocks of prompts are identified by a 64-bit hash of the trace's
 * prefix segments that cover them; a block whose identity is cached is
 * shared (reference counted) instead of taken afresh.  Cached blocks no
 * request holds stay in memory, counted as free (F), on an LRU list, and are
 * evicted least recent first when a fresh block is needed.
 *
 * Block identity: the prompt of a request is a sequence of segments
 * (base/request.h's req_prefixes: ids, tokens).  chain(s) folds the ids and token counts of segments 0..s into one
 * hash (precomputed for every segment of the trace).  Block j covers tokens
 * [j*bs, (j+1)*bs); its last token lies in some segment s starting at token
 * a; its identity is hash(chain(s), (j+1)*bs - a).  Two requests whose ids
 * agree up to segment s therefore agree on every block ending inside segment
 * s, whatever the block size.  Only blocks that end within min(P, hashed
 * tokens) are cacheable.
 *
 * Invariant (prefix closure): if a block is cached, so is every earlier
 * block of any prompt containing it.  A request holds blocks 0..k-1 of its
 * prompt, so a block is cached only while or after its ancestors are;
 * releasing goes from the last block to the first, so an ancestor is always
 * more recent than its descendants on the LRU list or held, and eviction
 * takes leaves first.  Hence the cached leading run of a prompt can be found
 * by binary search (sched_pc_match).
 *
 * The records form a pool (at most min(total_blocks, hashed blocks of the
 * trace) of them, since each is a physical block with a distinct identity);
 * an open-addressing table (linear probing, backward-shift deletion) maps
 * identities to records.  Which cached blocks a running request holds is not
 * stored: they are exactly its first sched_pc_blocks(ctx) blocks, whose
 * identities are recomputed when it leaves (O(blocks), like its admission).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched_internal.h"

#include "../base/rng.h"

#define PC_SEED UINT64_C(0x243F6A8885A308D3)
#define PC_OFFSET_MUL UINT64_C(0xD6E8FEB86659FD93)

/* splitmix64's step: the golden-ratio increment, then its finaliser. */
static inline uint64_t mix64(uint64_t x) { return rng_mix64(x + UINT64_C(0x9E3779B97F4A7C15)); }

/* The segment of request id holding token e - 1 (e >= 1, within its
 * hashed tokens): the first k with seg_end[k] >= e.  O(log segments). */
static int64_t seg_of(const sched_pcache *pc, int32_t id, int64_t e)
{
    int64_t lo = pc->off[id], hi = pc->off[id + 1] - 1;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (pc->seg_end[mid] >= e)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* Identity of the block ending at token e inside segment k. */
static inline uint64_t block_id(const sched_pcache *pc, int64_t k, int64_t e)
{
    int64_t start = pc->seg_end[k] - pc->len[k];
    return mix64(pc->chain[k] ^ ((uint64_t)(e - start) * PC_OFFSET_MUL));
}

/* Walks the block identities of one request in increasing block order. */
typedef struct pc_iter {
    const sched_pcache *pc;
    int64_t k;            /* current segment (global index) */
    int64_t bs;           /* block size, tokens */
} pc_iter;

static void it_init(pc_iter *it, const sched *s, int32_t id)
{
    it->pc = &s->pc;
    it->k = s->pc.off[id];
    it->bs = s->cfg.block_size;
}

/* Identity of block j; j must be below sched_pc_blocks(P) and not below
 * the previous call's.  O(1) amortised. */
static inline uint64_t it_block(pc_iter *it, int64_t j)
{
    int64_t e = (j + 1) * it->bs;
    while (it->pc->seg_end[it->k] < e)
        it->k++;
    return block_id(it->pc, it->k, e);
}

/* ------------------------------------------------------------ the table */

static int32_t tab_find(const sched_pcache *pc, uint64_t h)
{
    if (!pc->table)
        return -1;
    for (uint64_t i = h & pc->mask;; i = (i + 1) & pc->mask) {
        int32_t r = pc->table[i];
        if (r < 0 || pc->rec[r].hash == h)
            return r;
    }
}

static void tab_insert(sched_pcache *pc, int32_t r)
{
    uint64_t i = pc->rec[r].hash & pc->mask;
    while (pc->table[i] >= 0)
        i = (i + 1) & pc->mask;
    pc->table[i] = r;
}

/* Remove record r, shifting later entries of its probe run back so that no
 * tombstone is needed. */
static void tab_delete(sched_pcache *pc, int32_t r)
{
    uint64_t i = pc->rec[r].hash & pc->mask;
    while (pc->table[i] != r)
        i = (i + 1) & pc->mask;
    for (uint64_t j = i;;) {
        j = (j + 1) & pc->mask;
        int32_t x = pc->table[j];
        if (x < 0)
            break;
        uint64_t home = pc->rec[x].hash & pc->mask;
        /* x may move to i unless its home lies cyclically in (i, j] */
        int stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
        if (!stays) {
            pc->table[i] = x;
            i = j;
        }
    }
    pc->table[i] = -1;
}

/* ------------------------------------------------------------- the LRU */

static void lru_remove(sched_pcache *pc, int32_t r)
{
    sched_pc_rec *x = &pc->rec[r];
    if (x->prev >= 0)
        pc->rec[x->prev].next = x->next;
    else
        pc->lru_head = x->next;
    if (x->next >= 0)
        pc->rec[x->next].prev = x->prev;
    else
        pc->lru_tail = x->prev;
    x->prev = x->next = -1;
}

static void lru_append(sched_pcache *pc, int32_t r)
{
    sched_pc_rec *x = &pc->rec[r];
    x->prev = pc->lru_tail;
    x->next = -1;
    if (pc->lru_tail >= 0)
        pc->rec[pc->lru_tail].next = r;
    else
        pc->lru_head = r;
    pc->lru_tail = r;
}

/* ------------------------------------------------------------ lifecycle */

int sched_pc_init(sched *s, const req_prefixes *px, kvs_err *err)
{
    sched_pcache *pc = &s->pc;
    if (!pc->on || !px->off || s->n == 0)
        return KVS_OK;
    if (px->n != s->n)
        return kvs_errf(err, KVS_EINVAL, "scheduler: prefixes of %lld requests for %lld",
                        (long long)px->n, (long long)s->n);
    const int64_t bs = s->cfg.block_size;
    int64_t nseg = px->off[s->n];
    pc->limit = malloc((size_t)s->n * sizeof *pc->limit);
    pc->chain = malloc((size_t)(nseg > 0 ? nseg : 1) * sizeof *pc->chain);
    pc->seg_end = malloc((size_t)(nseg > 0 ? nseg : 1) * sizeof *pc->seg_end);
    if (!pc->limit || !pc->chain || !pc->seg_end)
        goto nomem;
    int64_t hashed = 0, maxb = 0;
    for (int64_t i = 0; i < s->n; i++) {
        int64_t tok = 0;
        uint64_t chain = PC_SEED;
        for (int64_t k = px->off[i]; k < px->off[i + 1]; k++) {
            /* the segment's length is part of its identity: an id named
             * with two lengths names two contents (a malformed trace would
             * otherwise share a late block without the earlier ones) */
            chain = mix64(chain ^ mix64(px->ids[k] ^ ((uint64_t)px->tokens[k] << 40)));
            tok += px->tokens[k];
            pc->chain[k] = chain;
            pc->seg_end[k] = tok;
        }
        int64_t p = s->reqs[i].prompt_tokens;
        pc->limit[i] = tok < p ? tok : p;
        int64_t b = pc->limit[i] / bs;
        hashed += b;
        if (b > maxb)
            maxb = b;
    }
    int64_t cap = hashed < s->cfg.total_blocks ? hashed : s->cfg.total_blocks;
    if (cap > (INT64_C(1) << 30))
        return kvs_errf(err, KVS_EINVAL,
                        "--block-size: %lld-token blocks make %lld cacheable blocks, more "
                        "than the prefix cache's 2^30; raise --block-size or lower --kv-blocks",
                        (long long)bs, (long long)cap);
    pc->off = px->off;
    pc->len = px->tokens;
    pc->cap = cap;
    pc->max_blocks = maxb;
    if (cap == 0)
        return KVS_OK; /* no full hashed block anywhere: nothing to share */
    uint64_t tsize = 2;
    while (tsize < 2 * (uint64_t)cap)
        tsize *= 2;
    pc->mask = tsize - 1;
    pc->rec = malloc((size_t)cap * sizeof *pc->rec);
    pc->table = malloc((size_t)tsize * sizeof *pc->table);
    pc->scratch = malloc((size_t)maxb * sizeof *pc->scratch);
    pc->hscratch = malloc((size_t)maxb * sizeof *pc->hscratch);
    if (!pc->rec || !pc->table || !pc->scratch || !pc->hscratch)
        goto nomem;
    memset(pc->table, 0xff, (size_t)tsize * sizeof *pc->table); /* all -1 */
    for (int64_t r = 0; r < cap; r++) {
        pc->rec[r] = (sched_pc_rec){0, -1, -1, r + 1 < cap ? (int32_t)(r + 1) : -1, 0};
    }
    pc->free_head = 0;
    return KVS_OK;
nomem:
    return kvs_errf(err, KVS_ENOMEM, "prefix cache: out of memory for %lld requests",
                    (long long)s->n);
}

void sched_pc_free(sched_pcache *pc)
{
    free(pc->chain);
    free(pc->seg_end);
    pc->chain = NULL;
    pc->seg_end = NULL;
    free(pc->limit);
    free(pc->rec);
    free(pc->table);
    free(pc->scratch);
    free(pc->hscratch);
    pc->limit = NULL;
    pc->rec = NULL;
    pc->table = NULL;
    pc->scratch = NULL;
    pc->hscratch = NULL;
}

/* ----------------------------------------------------------- operations */

uint64_t sched_pc_block_hash(const sched *s, int32_t id, int64_t j)
{
    int64_t e = (j + 1) * s->cfg.block_size;
    return block_id(&s->pc, seg_of(&s->pc, id, e), e);
}

int64_t sched_pc_match(const sched *s, int32_t id)
{
    int64_t kmax = sched_pc_blocks(s, id, s->reqs[id].prompt_tokens);
    if (kmax == 0 || !s->pc.table)
        return 0;
    int64_t lo = 0, hi = kmax; /* blocks 0..lo-1 cached; hi: upper bound */
    while (lo < hi) {
        int64_t mid = lo + (hi - lo + 1) / 2;
        if (tab_find(&s->pc, sched_pc_block_hash(s, id, mid - 1)) >= 0)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

int sched_pc_scan(sched *s, int32_t id, int64_t k0, int64_t k1, int64_t need, int64_t *busy)
{
    sched_pcache *pc = &s->pc;
    *busy = 0;
    if (k1 <= k0)
        return need <= 0;
    pc_iter it;
    it_init(&it, s, id);
    for (int64_t j = k0; j < k1; j++) {
        if (*busy + (k1 - j) < need)
            return 0;
        uint64_t h = it_block(&it, j);
        int32_t r = tab_find(pc, h);
        pc->hscratch[j] = h;
        pc->scratch[j] = r;
        *busy += r >= 0 && pc->rec[r].ref > 0;
    }
    return *busy >= need;
}

void sched_pc_evict(sched *s)
{
    sched_pcache *pc = &s->pc;
    while (pc->cached > s->free_blocks) {
        int32_t r = pc->lru_head;
        lru_remove(pc, r);
        tab_delete(pc, r);
        if (s->lpm)
            sched_lpm_on_evicted(s->lpm, pc->rec[r].hash);
        pc->rec[r].ref = -1;
        pc->rec[r].next = pc->free_head;
        pc->free_head = r;
        pc->cached--;
        pc->live--;
        s->ctr.prefix_evictions++;
    }
}

void sched_pc_commit(sched *s, int32_t id, int64_t k0, int64_t k1, int64_t cost)
{
    sched_pcache *pc = &s->pc;
    (void)id;
    /* 1. share the blocks found, so that eviction cannot take them */
    for (int64_t j = k0; j < k1; j++) {
        int32_t r = pc->scratch[j];
        if (r < 0)
            continue;
        if (pc->rec[r].ref == 0) {
            lru_remove(pc, r);
            pc->cached--;
        }
        pc->rec[r].ref++;
    }
    /* 2. take the net fresh blocks */
    s->free_blocks -= cost;
    sched_blocks_taken(s);
    /* 3. cache the blocks computed afresh */
    for (int64_t j = k0; j < k1; j++) {
        if (pc->scratch[j] >= 0)
            continue;
        uint64_t h = pc->hscratch[j];
        int32_t r = tab_find(pc, h);
        if (r >= 0) { /* the same identity twice in one chunk (a hash collision) */
            pc->rec[r].ref++;
            s->free_blocks++;
            continue;
        }
        r = pc->free_head;
        pc->free_head = pc->rec[r].next;
        pc->rec[r] = (sched_pc_rec){h, 1, -1, -1, 0};
        tab_insert(pc, r);
        pc->live++;
        if (s->lpm)
            sched_lpm_on_cached(s->lpm, h);
    }
}

void sched_pc_release(sched *s, const sched_entry *e)
{
    sched_pcache *pc = &s->pc;
    int64_t k = sched_pc_blocks(s, e->id, e->ctx);
    s->free_blocks += e->blocks - k;
    if (k == 0)
        return;
    pc_iter it;
    it_init(&it, s, e->id);
    for (int64_t j = 0; j < k; j++)
        pc->hscratch[j] = it_block(&it, j);
    for (int64_t j = k - 1; j >= 0; j--) {
        int32_t r = tab_find(pc, pc->hscratch[j]);
        if (--pc->rec[r].ref == 0) {
            lru_append(pc, r);
            pc->cached++;
            s->free_blocks++;
        }
    }
}

/* --------------------------------------------------------------- audit */

#define AUDIT_FAIL(...)                                                                  \
    do {                                                                                 \
        snprintf(why, n, __VA_ARGS__);                                                   \
        goto fail;                                                                       \
    } while (0)

int sched_v0_audit(const sched *s, char *why, size_t n)
{
    const sched_pcache *pc = &s->pc;
    const int64_t total = s->cfg.total_blocks;
    int64_t priv = 0, inuse = 0, zero = 0, live = 0;
    int64_t *cnt = NULL;
    if (!pc->on) {
        int64_t held = s->cfg.batching == SCHED_BATCHING_STATIC && s->n_batch > 0
                           ? s->batch_blocks
                           : 0;
        for (int64_t i = 0; i < s->n_run; i++)
            held += s->run[i].blocks;
        if (s->free_blocks + held != total)
            AUDIT_FAIL("free %lld + held %lld != total %lld", (long long)s->free_blocks,
                       (long long)held, (long long)total);
        return 0;
    }
    cnt = calloc((size_t)(pc->cap > 0 ? pc->cap : 1), sizeof *cnt);
    if (!cnt)
        AUDIT_FAIL("audit: out of memory");
    for (int64_t i = 0; i < s->n_run; i++) {
        const sched_entry *e = &s->run[i];
        int64_t k = sched_pc_blocks(s, e->id, e->ctx);
        if (e->blocks != sched_ceil_div(e->ctx, s->cfg.block_size) || k > e->blocks)
            AUDIT_FAIL("req %d: %lld blocks for %lld stored tokens (%lld hashed blocks)", e->id,
                       (long long)e->blocks, (long long)e->ctx, (long long)k);
        priv += e->blocks - k;
        if (k == 0)
            continue;
        pc_iter it;
        it_init(&it, s, e->id);
        for (int64_t j = 0; j < k; j++) {
            int32_t r = tab_find(pc, it_block(&it, j));
            if (r < 0)
                AUDIT_FAIL("req %d: its block %lld is not in the cache", e->id, (long long)j);
            cnt[r]++;
        }
    }
    for (int64_t r = 0; r < pc->cap; r++) {
        const sched_pc_rec *x = &pc->rec[r];
        if (x->ref < 0)
            continue;
        live++;
        if (x->ref != cnt[r])
            AUDIT_FAIL("block record %lld: reference count %d, held by %lld requests",
                       (long long)r, x->ref, (long long)cnt[r]);
        if (tab_find(pc, x->hash) != (int32_t)r)
            AUDIT_FAIL("block record %lld: not found under its hash", (long long)r);
        if (x->ref == 0)
            zero++;
        else
            inuse++;
    }
    int64_t nl = 0;
    for (int32_t r = pc->lru_head, prev = -1; r >= 0; prev = r, r = pc->rec[r].next) {
        if (pc->rec[r].ref != 0 || pc->rec[r].prev != prev || ++nl > pc->cap)
            AUDIT_FAIL("LRU list broken at record %d", r);
    }
    if (nl != zero || zero != pc->cached || live != pc->live)
        AUDIT_FAIL("cached blocks: %lld on the LRU list, %lld with count 0, counter %lld; "
                   "live %lld vs %lld",
                   (long long)nl, (long long)zero, (long long)pc->cached, (long long)live,
                   (long long)pc->live);
    if (s->free_blocks != total - priv - inuse || s->free_blocks < pc->cached)
        AUDIT_FAIL("free %lld, but total %lld - private %lld - shared in use %lld = %lld "
                   "(cached %lld)",
                   (long long)s->free_blocks, (long long)total, (long long)priv,
                   (long long)inuse, (long long)(total - priv - inuse), (long long)pc->cached);
    /* prefix closure along every prompt, and the binary search built on it */
    for (int32_t id = 0; pc->table && id < s->n; id++) {
        int64_t kmax = sched_pc_blocks(s, id, s->reqs[id].prompt_tokens), run = -1;
        pc_iter it;
        it_init(&it, s, id);
        for (int64_t j = 0; j < kmax; j++) {
            int present = tab_find(pc, it_block(&it, j)) >= 0;
            if (!present && run < 0)
                run = j;
            else if (present && run >= 0)
                AUDIT_FAIL("req %d: block %lld cached but block %lld is not", id,
                           (long long)j, (long long)run);
        }
        if (run < 0)
            run = kmax;
        if (sched_pc_match(s, id) != run)
            AUDIT_FAIL("req %d: match %lld, linear scan %lld", id,
                       (long long)sched_pc_match(s, id), (long long)run);
        if (s->lpm && s->state[id] == SCHED_REQ_WAITING && sched_lpm_key_of(s->lpm, id) != run)
            AUDIT_FAIL("req %d: lpm key %lld, cached leading blocks %lld", id,
                       (long long)sched_lpm_key_of(s->lpm, id), (long long)run);
    }
    free(cnt);
    return 0;
fail:
    free(cnt);
    return -1;
}
