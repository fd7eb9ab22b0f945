/* router.h — the routers of a cluster run: at each request's arrival, the
 * router picks the replica (engine) that serves it, from a view of every
 * replica's load and prefix cache (docs/cluster.md, section R).
 *
 * Routers are a table of function pointers chosen by name; each lives in
 * its own file (router_basic.c, router_load.c, router_prefix.c) and is one
 * line of the registry in router.c.  A router is a pure function of the
 * view, the request and, for `random`, the view's generator: the same
 * inputs and seed give the same choices.  Ties always go to the replica
 * with the fewest outstanding requests, then the lowest index.
 */
#ifndef ROUTER_H
#define ROUTER_H

#include <stdint.h>

#include "../base/rng.h"
#include "../scheduler/sched.h"

/* What the router knows of one replica when a request arrives. */
typedef struct router_replica {
    int64_t routed;      /* requests sent to it so far */
    int64_t outstanding; /* routed and neither finished nor rejected, requests */
    int64_t kv_used;     /* KV blocks held (sched_counters.used_blocks), blocks */
} router_replica;

typedef struct router_view {
    int64_t n;                 /* replicas, >= 1 */
    const router_replica *rep; /* [n] their state */
    sched *const *eng;         /* [n] their engines (sched_cached_prefix_tokens) */
    const trace_req *reqs;     /* the trace, indexed by request id */
    int64_t arrivals;          /* requests routed before this one */
    int64_t affinity_cap;      /* prefix-affinity load cap, requests */
    rng gen;                   /* the random router's generator */
} router_view;

typedef struct router_vt {
    const char *name;          /* the --router value */
    const char *doc;           /* one line for --help and docs */
    int reads_state;           /* 1: reads v->rep and v->eng, which the cluster
                                  then refreshes after every event */
    /* The replica (0 .. v->n - 1) for request `id`. */
    int64_t (*pick)(router_view *v, int64_t id);
    /* Optional: how many of the next arrivals cannot go to replica r,
     * whatever happens before them, given that another replica's load
     * rises only by the arrivals routed to it (one each) and otherwise
     * only falls, and that r's own does not fall in that time (the
     * cluster makes sure: docs/cluster.md K8b).  A lower bound; NULL reads
     * as 0.  Cost: O(n). */
    int64_t (*safe_arrivals)(const router_view *v, int64_t r);
} router_vt;

/* The router called `name`, or NULL.  Cost: O(routers). */
const router_vt *router_find(const char *name);

/* The registered names, comma-separated ("round-robin, least-requests,
 * ..."), for error messages and help.  Static text. */
const char *router_names(void);

/* Index of the replica among those with a[r] minimal (ties: fewest
 * outstanding, then lowest index); a == NULL ranks by outstanding alone.
 * For the routers.  Cost: O(n). */
int64_t router_argmin(const router_view *v, const int64_t *a);

/* The routers, defined in their own files. */
extern const router_vt router_round_robin;  /* router_basic.c */
extern const router_vt router_random;       /* router_basic.c */
extern const router_vt router_least_requests; /* router_load.c */
extern const router_vt router_least_kv;     /* router_load.c */
extern const router_vt router_prefix_affinity; /* router_prefix.c */

#endif
