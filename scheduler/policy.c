/* policy.c — queue policies: the order of the waiting queue and the choice
 * of preemption victims (the last running request in this order).  The
 * cache-aware lpm policy orders the waiting queue by each request's cached
 * prefix length first, which lpm.c keeps current as the cache changes. */
#include "sched_internal.h"

static int cmp_arrival_id(const trace_req *reqs, int32_t a, int32_t b)
{
    if (reqs[a].arrival_s < reqs[b].arrival_s)
        return -1;
    if (reqs[a].arrival_s > reqs[b].arrival_s)
        return 1;
    return (a > b) - (a < b);
}

/* FCFS: (arrival_s, id). */
static int fcfs_cmp(const trace_req *reqs, int32_t a, int32_t b)
{
    return cmp_arrival_id(reqs, a, b);
}

/* Priority: (priority, arrival_s, id); lower priority value first. */
static int priority_cmp(const trace_req *reqs, int32_t a, int32_t b)
{
    if (reqs[a].priority != reqs[b].priority)
        return reqs[a].priority < reqs[b].priority ? -1 : 1;
    return cmp_arrival_id(reqs, a, b);
}

static const sched_policy_vt policy_fcfs = {"fcfs", fcfs_cmp, 0};
static const sched_policy_vt policy_priority = {"priority", priority_cmp, 0};
/* lpm: cmp (victims, and ties of the cached prefix) is FCFS. */
static const sched_policy_vt policy_lpm = {"lpm", fcfs_cmp, 1};

const sched_policy_vt *sched_policy_vt_get(sched_policy p)
{
    switch (p) {
    case SCHED_POLICY_FCFS: return &policy_fcfs;
    case SCHED_POLICY_PRIORITY: return &policy_priority;
    case SCHED_POLICY_LPM: return &policy_lpm;
    }
    return NULL;
}
