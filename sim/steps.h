/* steps.h — what a run keeps of its engines' steps: the aggregates behind
 * the summary's KV and batch figures, and the step records of
 * --record-steps.  Shared by run.c (one engine) and cluster.c (several
 * engines, one record list in start order).  No I/O.
 */
#ifndef STEPS_H
#define STEPS_H

#include <stdint.h>

#include "run.h"

typedef struct run_step_agg {
    int64_t n_steps;       /* steps seen */
    int64_t peak_blocks;   /* most KV blocks held during a step */
    double block_seconds;  /* sum of blocks held x step duration, block-seconds */
    double busy_s;         /* sum of step durations, s */
    double members_total;  /* sum of requests per step */
} run_step_agg;

/* Count step st into a.  Cost: O(1). */
void run_step_agg_add(run_step_agg *a, const sched_step *st);

/* The step-duration-weighted mean of blocks held and the mean requests
 * per step of a (0 without steps). */
double run_step_agg_mean_blocks(const run_step_agg *a);
double run_step_agg_mean_batch(const run_step_agg *a);

/* Grow *p (elements of elem bytes, capacity *cap) to hold need, doubling
 * from 1024.  -1 when out of memory (*p unchanged).  Amortized O(1). */
int run_grow(void **p, int64_t *cap, int64_t need, size_t elem);

/* Append the record of step st, with its nm members m, to r->steps and
 * r->members (capacities *steps_cap, *members_cap), numbered `index` and
 * tagged with `replica`.  -1 when out of memory (nothing appended).
 * Cost: O(nm) amortized. */
int run_steps_append(run_result *r, int64_t *steps_cap, int64_t *members_cap,
                     const sched_step *st, int64_t index, int32_t replica,
                     const sched_member *m, int64_t nm);

#endif
