/* steps.c — step aggregates and records (steps.h). */
#include "steps.h"

#include <stdlib.h>
#include <string.h>

void run_step_agg_add(run_step_agg *a, const sched_step *st)
{
    a->n_steps++;
    if (st->kv_blocks_used > a->peak_blocks)
        a->peak_blocks = st->kv_blocks_used;
    a->block_seconds += (double)st->kv_blocks_used * st->dur_s;
    a->busy_s += st->dur_s;
    a->members_total += (double)(st->batch.n_prefill + st->batch.n_decode);
}

double run_step_agg_mean_blocks(const run_step_agg *a)
{
    return a->busy_s > 0 ? a->block_seconds / a->busy_s : 0.0;
}

double run_step_agg_mean_batch(const run_step_agg *a)
{
    return a->n_steps > 0 ? a->members_total / (double)a->n_steps : 0.0;
}

int run_grow(void **p, int64_t *cap, int64_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    int64_t nc = *cap ? *cap : 1024;
    while (nc < need)
        nc *= 2;
    void *np = realloc(*p, (size_t)nc * elem);
    if (!np)
        return -1;
    *p = np;
    *cap = nc;
    return 0;
}

int run_steps_append(run_result *r, int64_t *steps_cap, int64_t *members_cap,
                     const sched_step *st, int64_t index, int32_t replica,
                     const sched_member *m, int64_t nm)
{
    if (run_grow((void **)&r->steps, steps_cap, r->n_steps + 1, sizeof *r->steps) ||
        run_grow((void **)&r->members, members_cap, r->n_members + nm, sizeof *r->members))
        return -1;
    run_step_rec *rec = &r->steps[r->n_steps++];
    rec->step = *st;
    rec->step.index = index;
    rec->member_off = r->n_members;
    rec->replica = replica;
    rec->pad_ = 0;
    if (nm > 0)
        memcpy(r->members + r->n_members, m, (size_t)nm * sizeof *m);
    r->n_members += nm;
    return 0;
}
