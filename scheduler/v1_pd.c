/* v1_pd.c — the V1 engine's part in disaggregated serving (sched.h;
 * docs/cluster.md, section D).  Prefill side: kept blocks live off the
 * block tables, so a finished request whose KV is still to be read holds
 * no running slot.  Decode side: the load states of remote requests, the
 * list of loads begun and the ready FIFO (v1.c's waiting walk starts the
 * loads and admits from the FIFO). */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "v1_internal.h"

int v1_pd_keep(sched_v1 *v, int32_t id)
{
    const int64_t x = v->xtab && v->rq[id].slot >= 0 ? v->ext[id] : 0; /* other groups' pages */
    const int64_t h = v->rq[id].held + x;
    int32_t *copy = h > 0 ? malloc((size_t)h * sizeof *copy) : NULL;
    if (h > 0 && !copy)
        return -1;
    if (v->rq[id].slot >= 0) {
        memcpy(copy + x, v->tab + (int64_t)v->rq[id].slot * v->tcap,
               (size_t)v->rq[id].held * sizeof *copy);
        if (x > 0) { /* released after the table's blocks, as free_blocks does */
            int32_t *row = v->xtab + (int64_t)v->rq[id].slot * v->xcap;
            int64_t n = 0;
            /* v1_pd_release goes from the end: group 0's last page first */
            for (int64_t k = v->xcap / v->tcap - 1; k >= 0; k--)
                for (int64_t j = 0; j < v->tcap; j++)
                    if (row[k * v->tcap + j]) {
                        copy[n++] = row[k * v->tcap + j];
                        row[k * v->tcap + j] = 0;
                    }
            assert(n == x);
        }
        if (v->xtab) {
            v->ext[id] = 0;
            v->wlo[id] = 0;
        }
        v->free_slots[v->n_free_slots++] = v->rq[id].slot;
        v->rq[id].slot = -1;
    }
    assert(!v->pd.kept[id]);
    v->pd.kept[id] = copy;
    v->pd.n_kept[id] = (int32_t)h;
    v->pd.kept_reqs += h > 0;
    v->rq[id].held = 0;
    v->rq[id].reg = 0;
    return 0;
}

/* Last to first, as free_blocks (rule 2.8); id has finished, so as dead
 * runs where they can be. */
void v1_pd_release(sched_v1 *v, int32_t id)
{
    assert(!v->lk_paused); /* no leap pauses under keep (leap_steps) */
    int32_t *t = v->pd.kept ? v->pd.kept[id] : NULL;
    if (!t)
        return;
    v1_pool_release_dead_rev(&v->pool, t, v->pd.n_kept[id]);
    free(t);
    v->pd.kept[id] = NULL;
    v->pd.n_kept[id] = 0;
    v->pd.kept_reqs--;
}

void v1_pd_count(const sched_v1 *v, int64_t n, int32_t *cnt, int64_t *distinct)
{
    if (!v->pd.kept || v->pd.kept_reqs == 0)
        return;
    for (int64_t id = 0; id < n; id++)
        for (int64_t j = 0; v->pd.kept[id] && j < v->pd.n_kept[id]; j++)
            if (cnt[v->pd.kept[id][j]]++ == 0)
                (*distinct)++;
}

void v1_pd_free(sched_v1 *v, int64_t n)
{
    for (int64_t id = 0; v->pd.kept && id < n; id++)
        free(v->pd.kept[id]);
    free(v->pd.kept);
    free(v->pd.n_kept);
    free(v->pd.load);
    free(v->pd.started);
    memset(&v->pd, 0, sizeof v->pd);
    v->pd.rhead = v->pd.rtail = -1;
}

void v1_pd_started(sched_v1 *v, int32_t id, int64_t tokens, double t)
{
    if (v->pd.n_started == v->pd.started_cap) {
        int64_t cap = v->pd.started_cap > 0 ? 2 * v->pd.started_cap : 64;
        sched_kv_load *g = realloc(v->pd.started, (size_t)cap * sizeof *g);
        if (!g) {
            v->pd.oom = 1; /* v1_plan reports it */
            return;
        }
        v->pd.started = g;
        v->pd.started_cap = cap;
    }
    v->pd.started[v->pd.n_started++] = (sched_kv_load){id, tokens, t};
}

int32_t v1_pd_ready_pop(sched_v1 *v)
{
    assert(v->pd.nready > 0);
    int32_t id = v->pd.rhead;
    v->pd.rhead = v->rq[id].wnext;
    if (v->pd.rhead < 0)
        v->pd.rtail = -1;
    v->rq[id].wnext = -1;
    v->pd.nready--;
    return id;
}

/* ------------------------------------------------- the sched.h entries */

int sched_accept_remote(sched *s, kvs_err *err)
{
    if (s->cfg.engine != SCHED_ENGINE_VLLM_V1)
        return kvs_errf(err, KVS_EINVAL, "scheduler: remote requests need vllm-v1");
    if (s->share)
        return kvs_errf(err, KVS_EINVAL,
                        "scheduler: an engine sharing its requests' state cannot take remote "
                        "requests");
    sched_v1 *v = s->v1;
    if (!v->pd.load && !(v->pd.load = calloc((size_t)(s->n > 0 ? s->n : 1), 1)))
        return kvs_errf(err, KVS_ENOMEM, "scheduler: out of memory");
    v1_rq_settle(s);
    return KVS_OK;
}

void sched_arrive_remote(sched *s, int64_t id)
{
    sched_v1 *v = s->v1;
    assert(s->cfg.engine == SCHED_ENGINE_VLLM_V1 && v->pd.load &&
           s->reqs[id].output_tokens >= 2);
    sched_arrive(s, id);
    if (s->state[id] != SCHED_REQ_WAITING)
        return; /* rejected by rule 1.6 */
    v->rq[id].g = 1; /* its first token came with it: T = P + 1 */
    v->pd.load[id] = V1_LOAD_PENDING;
}

const sched_kv_load *sched_loads_started(sched *s, int64_t *n)
{
    sched_v1 *v = s->v1;
    *n = v->pd.n_started;
    v->pd.n_started = 0;
    return v->pd.started;
}

void sched_kv_loaded(sched *s, int64_t id)
{
    sched_v1 *v = s->v1;
    assert(v->pd.load && v->pd.load[id] == V1_LOAD_FLIGHT);
    v->pd.load[id] = V1_LOAD_READY;
    v->rq[id].C = v->rq[id].P; /* stored without compute */
    v->rq[id].wnext = -1;
    if (v->pd.rtail < 0)
        v->pd.rhead = (int32_t)id;
    else
        v->rq[v->pd.rtail].wnext = (int32_t)id;
    v->pd.rtail = (int32_t)id;
    v->pd.nready++;
}

int sched_keep_finished(sched *s, int on, kvs_err *err)
{
    if (s->cfg.engine != SCHED_ENGINE_VLLM_V1)
        return kvs_errf(err, KVS_EINVAL, "scheduler: keeping finished blocks needs vllm-v1");
    if (on && s->share)
        return kvs_errf(err, KVS_EINVAL,
                        "scheduler: an engine sharing its requests' state cannot keep them");
    sched_v1 *v = s->v1;
    if (on && !v->pd.kept) {
        size_t nn = (size_t)(s->n > 0 ? s->n : 1);
        v->pd.kept = calloc(nn, sizeof *v->pd.kept);
        v->pd.n_kept = calloc(nn, sizeof *v->pd.n_kept);
        if (!v->pd.kept || !v->pd.n_kept) {
            v1_pd_free(v, 0);
            return kvs_errf(err, KVS_ENOMEM, "scheduler: out of memory");
        }
    }
    v->pd.keep = on;
    if (on)
        v1_rq_settle(s);
    return KVS_OK;
}

void sched_release_finished(sched *s, int64_t id)
{
    assert(s->cfg.engine == SCHED_ENGINE_VLLM_V1 && s->state[id] == SCHED_REQ_FINISHED);
    v1_pd_release(s->v1, (int32_t)id);
}
