/* v1_pd.c — the V1 engine's part in disaggregated serving (sched.h:
 * sched_arrive_prefilled, sched_keep_finished, sched_release_finished;
 * docs/cluster.md, section D).  Kept blocks live off the block tables so a
 * finished request waiting for its KV transfer holds no running slot. */
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

/* Last to first, as free_blocks (rule 2.8). */
void v1_pd_release(sched_v1 *v, int32_t id)
{
    assert(!v->lk_paused); /* no leap pauses under keep (leap_steps) */
    int32_t *t = v->pd.kept ? v->pd.kept[id] : NULL;
    if (!t)
        return;
    for (int64_t j = v->pd.n_kept[id] - 1; j >= 0; j--)
        v1_pool_release(&v->pool, t[j]);
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
    memset(&v->pd, 0, sizeof v->pd);
}

/* ------------------------------------------------- the sched.h entries */

void sched_arrive_prefilled(sched *s, int64_t id)
{
    assert(s->cfg.engine == SCHED_ENGINE_VLLM_V1 && s->reqs[id].output_tokens >= 2);
    sched_arrive(s, id);
    if (s->state[id] != SCHED_REQ_WAITING)
        return; /* rejected by rule 1.6 */
    /* waiting_walk admits it with c = max(hits, C) stored tokens; a
     * preemption sets C back to 0, so a recompute redoes the prompt here */
    s->v1->rq[id].g = 1;
    s->v1->rq[id].C = s->reqs[id].prompt_tokens;
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
    return KVS_OK;
}

void sched_release_finished(sched *s, int64_t id)
{
    assert(s->cfg.engine == SCHED_ENGINE_VLLM_V1 && s->state[id] == SCHED_REQ_FINISHED);
    v1_pd_release(s->v1, (int32_t)id);
}
