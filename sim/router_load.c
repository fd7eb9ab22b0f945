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

/* Replica r is picked only when every replica before it has more
 * outstanding requests and every one after it as many or more.  Another
 * replica's count rises by one per arrival routed to it and otherwise only
 * falls (finishes, rejections), and r's stays; so before r can be picked
 * the arrivals must first lift the others to its level: the sum of their
 * shortfalls. */
static int64_t safe_least_requests(const router_view *v, int64_t r)
{
    const router_replica *rep = v->rep;
    const int64_t o = rep[r].outstanding;
    int64_t need = 0;
    for (int64_t j = 0; j < r; j++) { /* ties go to the lower index: level o + 1 */
        const int64_t d = o + 1 - rep[j].outstanding;
        need += d > 0 ? d : 0;
    }
    for (int64_t j = r + 1; j < v->n; j++) {
        const int64_t d = o - rep[j].outstanding;
        need += d > 0 ? d : 0;
    }
    return need;
}

const router_vt router_least_requests = {
    "least-requests", "the replica with the fewest outstanding requests", 1,
    pick_least_requests, safe_least_requests};

const router_vt router_least_kv = {
    "least-kv", "the replica holding the fewest KV blocks", 1, pick_least_kv, NULL};
