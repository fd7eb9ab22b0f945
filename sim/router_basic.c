/* router_basic.c — routers that ignore load: round-robin and random. */
#include "router.h"

/* The k-th arrival (k from 0) goes to replica k mod n. */
static int64_t pick_round_robin(router_view *v, int64_t id)
{
    (void)id;
    return v->arrivals % v->n;
}

/* Uniform over the replicas, from the view's generator (--router-seed). */
static int64_t pick_random(router_view *v, int64_t id)
{
    (void)id;
    return (int64_t)rng_below(&v->gen, (uint64_t)v->n);
}

const router_vt router_round_robin = {
    "round-robin", "the k-th arriving request goes to replica k mod N", 0,
    pick_round_robin, NULL};

const router_vt router_random = {
    "random", "a uniformly random replica (seeded by --router-seed)", 0, pick_random,
    NULL};
