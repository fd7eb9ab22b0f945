/* v1_audit.c — sched_audit under the V1 engine (docs/semantics-v1.md):
 * every block's count recounted from R's block tables, the remote requests
 * held aside (docs/cluster.md D4) and the kept ones, against the pool; W's
 * order and counts; the slots; then the pool's own audit.  O(N + n). */
#include <stdio.h>
#include <stdlib.h>

#include "v1_internal.h"

#define V1_FAIL(...)                       \
    do {                                   \
        if (why && n)                      \
            snprintf(why, n, __VA_ARGS__); \
        rc = -1;                           \
        goto done;                         \
    } while (0)

/* Count request id's table and row pages into cnt (distinct: pages seen
 * the first time); 0, or -1 with why for a page out of range. */
static int audit_pages(const sched_v1 *v, int32_t id, int32_t *cnt, int64_t *distinct, char *why,
                       size_t n)
{
    const int32_t *t = table_of(v, id);
    for (int64_t j = 0; j < v->rq[id].held; j++) {
        if (t[j] < 1 || t[j] > v->N) {
            if (why && n)
                snprintf(why, n, "request %d block %lld is %d", id, (long long)j, t[j]);
            return -1;
        }
        if (cnt[t[j]]++ == 0)
            (*distinct)++;
    }
    for (int64_t k = 0; v->xtab && k < n_other(v); k++) {
        const int32_t *x = xrow(v, id, k);
        for (int64_t j = 0; j < v->tcap; j++) {
            if (x[j] < 0 || x[j] > v->N || (x[j] && j >= v->rq[id].held)) {
                if (why && n)
                    snprintf(why, n, "request %d group %lld block %lld is %d", id, (long long)k,
                             (long long)j, x[j]);
                return -1;
            }
            if (x[j] && cnt[x[j]]++ == 0)
                (*distinct)++;
        }
    }
    return 0;
}

/* Remote requests out of W (docs/cluster.md D4): in flight or in the
 * ready FIFO, each holding a slot and blocks for P + 1 tokens. */
static int audit_aside(const sched *s, int32_t *cnt, int64_t *distinct, char *why, size_t n)
{
    const sched_v1 *v = s->v1;
    int64_t aside = 0, ready = 0;
    for (int32_t id = v->pd.rhead; id >= 0; id = v->rq[id].wnext)
        if (v->pd.load[id] != V1_LOAD_READY || ++ready > s->n) {
            if (why && n)
                snprintf(why, n, "the ready FIFO holds request %d (load %d)", id,
                         v->pd.load[id]);
            return -1;
        }
    for (int64_t i = 0; v->pd.load && i < s->n; i++) {
        const int32_t id = (int32_t)i;
        if (v->pd.load[id] != V1_LOAD_FLIGHT && v->pd.load[id] != V1_LOAD_READY)
            continue;
        aside++;
        const int64_t T = s->reqs[id].prompt_tokens + 1;
        if (s->state[id] != SCHED_REQ_WAITING || v->rq[id].slot < 0 ||
            v->rq[id].held != sched_ceil_div(T, v->bs) || v->rq[id].wprev >= 0 ||
            (v->pfx && v->rq[id].reg > (T - 1) / v->bs)) {
            if (why && n)
                snprintf(why, n, "remote request %d (load %d, state %d) holds %d blocks, "
                         "registered %d, for %lld tokens", id, v->pd.load[id], s->state[id],
                         v->rq[id].held, v->rq[id].reg, (long long)T);
            return -1;
        }
        if (audit_pages(v, id, cnt, distinct, why, n))
            return -1;
    }
    if (aside != v->pd.aside || ready != v->pd.nready) {
        if (why && n)
            snprintf(why, n, "%lld remote requests aside (counter %lld), %lld ready (counter "
                     "%lld)", (long long)aside, (long long)v->pd.aside, (long long)ready,
                     (long long)v->pd.nready);
        return -1;
    }
    return 0;
}

/* Recount every block from R's tables (rules 2.2, 2.3, 2.5), the remote
 * requests' aside and the kept ones. */
int v1_audit(const sched *s, char *why, size_t n)
{
    const sched_v1 *v = s->v1;
    int rc = 0;
    int32_t *cnt = calloc((size_t)v->N + 1, sizeof *cnt);
    if (!cnt) {
        if (why && n)
            snprintf(why, n, "audit: out of memory");
        return -1;
    }
    int64_t distinct = 0;
    for (int64_t i = 0; i < v->nrun; i++) {
        int32_t id = v->run[i];
        int64_t stored = v->rq[id].C + v->rq[id].sq;
        if (v->lk_paused) /* lazy: C and sq as at the leap's step 1 */
            stored += v->lk_step - 2;
        if (s->state[id] != SCHED_REQ_RUNNING || v->rq[id].slot < 0)
            V1_FAIL("R holds request %d in state %d", id, s->state[id]);
        if (v->rq[id].held != sched_ceil_div(stored, v->bs))
            V1_FAIL("request %d holds %d blocks for %lld tokens", id, v->rq[id].held,
                    (long long)stored);
        if (v->pfx && v->rq[id].reg != stored / v->bs)
            V1_FAIL("request %d registered %d blocks for %lld tokens", id, v->rq[id].reg,
                    (long long)stored);
        if (audit_pages(v, id, cnt, &distinct, why, n)) {
            rc = -1;
            goto done;
        }
        /* what a finished request's release takes on trust (free_blocks) */
        const int32_t *t = table_of(v, id);
        for (int64_t j = v1_private_from(v, id); j < v->rq[id].held; j++) {
            const uint32_t f = v->pool.blk[t[j]].flags;
            if (!v1_pool_dead_ok(v1_pool_count(&v->pool, t[j]), f) ||
                (j < v->rq[id].reg) != ((f & V1_BLK_HAS_ID) != 0))
                V1_FAIL("request %d block %lld of its private region: count %d, flags %u, "
                        "%d registered", id, (long long)j, v1_pool_count(&v->pool, t[j]), f,
                        v->rq[id].reg);
        }
        if (v->xtab) { /* rule 2.9: the other groups' pages */
            int64_t sk = window_skip(v, v->rq[id].C, v->rq[id].held);
            if (v->wlo[id] > sk || v->ext[id] != groups_want(v, v->rq[id].held, v->wlo[id]))
                V1_FAIL("request %d: %d other-group pages, %d window blocks skipped, for %d "
                        "blocks and %lld stored tokens", id, v->ext[id], v->wlo[id],
                        v->rq[id].held, (long long)v->rq[id].C);
            for (int64_t k = 0; k < n_other(v); k++) {
                const int32_t *x = xrow(v, id, k);
                for (int64_t j = 0; j < v->tcap; j++) {
                    int in = j >= group_from(v, k, v->wlo[id]) && j < v->rq[id].held;
                    if (in != (x[j] != 0))
                        V1_FAIL("request %d group %lld block %lld is %d", id, (long long)k,
                                (long long)j, x[j]);
                }
            }
        }
    }
    if (audit_aside(s, cnt, &distinct, why, n)) {
        rc = -1;
        goto done;
    }
    v1_pd_count(v, s->n, cnt, &distinct); /* finished requests' kept blocks */
    for (int64_t b = 1; b <= v->N; b++)
        if (cnt[b] != v1_pool_count(&v->pool, (int32_t)b))
            V1_FAIL("block %lld: count %d, held by %d requests", (long long)b,
                    v1_pool_count(&v->pool, (int32_t)b),
                    cnt[b]);
    if (distinct + v->pool.F != v->N)
        V1_FAIL("held %lld + free %lld != %lld blocks", (long long)distinct,
                (long long)v->pool.F, (long long)v->N);
    int64_t wn = 0, saved = 0;
    for (int32_t id = v->whead; id >= 0; id = v->rq[id].wnext) {
        if (++wn > s->n || s->state[id] != SCHED_REQ_WAITING || v->rq[id].held != 0 ||
            v->rq[id].slot >= 0)
            V1_FAIL("W: request %d (state %d) holds %d blocks", id, s->state[id], v->rq[id].held);
        if (v->rq[id].slot <= -2) { /* a preempted request's saved row */
            const int64_t k = -2 - (int64_t)v->rq[id].slot;
            if (k >= v->sv_cap || v->sv[k].id != id || v->sv[k].n > v->sv[k].cap)
                V1_FAIL("W: request %d names saved row %lld, not its own", id, (long long)k);
            saved++;
        }
        if (!v->fcfs && v->rq[id].wnext >= 0 && key_after(s->reqs, id, v->rq[id].wnext))
            V1_FAIL("W: %d before %d out of priority order", id, v->rq[id].wnext);
    }
    if (wn != v->wn)
        V1_FAIL("W lists %lld requests, counter %lld", (long long)wn, (long long)v->wn);
    if (saved != v->sv_cap - v->n_sv_free)
        V1_FAIL("%lld saved rows named in W, %lld in use", (long long)saved,
                (long long)(v->sv_cap - v->n_sv_free));
    if (v->n_free_slots + v->nrun + v->pd.aside != v->nslots)
        V1_FAIL("%lld free slots with %lld running and %lld remote aside of %lld",
                (long long)v->n_free_slots, (long long)v->nrun, (long long)v->pd.aside,
                (long long)v->nslots);
    rc = v1_pool_audit(&v->pool, why, n);
done:
    free(cnt);
    return rc;
}
