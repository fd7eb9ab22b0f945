/* router_load.c — load-balancing routers: least-requests and least-kv. */
#include "router.h"


/* Fewest outstanding requests; ties to the lowest index. */
static int64_t pick_least_requests(router_view *v, int64_t id)
{
    (void)id;
    return router_argmin(v, NULL);
}

/* Fewest KV blocks held; ties to fewest outstanding, then lowest index. */
static int64_t pick_least_kv(router_view *v, int64_t id)
{
    (void)id;
    int64_t best = 0;
    for (int64_t r = 1; r < v->n; r++) {
        const router_replica *a = &v->rep[r], *b = &v->rep[best];
        if (a->kv_used < b->kv_used ||
            (a->kv_used == b->kv_used && a->outstanding < b->outstanding))
            best = r;
    }
    return best;
}

const router_vt router_least_requests = {
    "least-requests", "the replica with the fewest outstanding requests", 1,
    pick_least_requests};

const router_vt router_least_kv = {
    "least-kv", "the replica holding the fewest KV blocks", 1, pick_least_kv};
