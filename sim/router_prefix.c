/* router_prefix.c — prefix-affinity: send a request where its prompt's
 * prefix is already cached, unless that replica is overloaded. */
#include "router.h"

/* Among the replicas whose outstanding requests are at most the least
 * loaded one's plus affinity_cap, the one caching the most tokens of the
 * prompt (sched_cached_prefix_tokens); ties (no hit anywhere included) to
 * fewest outstanding, then lowest index. */
static int64_t pick_prefix_affinity(router_view *v, int64_t id)
{
    int64_t least = v->rep[router_argmin(v, NULL)].outstanding;
    int64_t best = -1, best_hit = -1;
    for (int64_t r = 0; r < v->n; r++) {
        const router_replica *a = &v->rep[r];
        if (a->outstanding > least + v->affinity_cap)
            continue;
        int64_t hit = sched_cached_prefix_tokens(v->eng[r], id);
        if (best < 0 || hit > best_hit ||
            (hit == best_hit && a->outstanding < v->rep[best].outstanding)) {
            best = r;
            best_hit = hit;
        }
    }
    return best;
}

const router_vt router_prefix_affinity = {
    "prefix-affinity",
    "the replica caching the longest prefix of the prompt, among those within"
    " --affinity-cap outstanding requests of the least loaded",
    1, pick_prefix_affinity, NULL};
