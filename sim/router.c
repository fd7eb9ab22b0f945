/* router.c — the router registry and the tie rule shared by the routers. */
#include "router.h"

#include <string.h>

/* The registry: adding a router is its file plus one line here. */
static const router_vt *const routers[] = {
    &router_round_robin, &router_least_requests, &router_least_kv,
    &router_prefix_affinity, &router_random,
};

#define N_ROUTERS (sizeof routers / sizeof routers[0])

const router_vt *router_find(const char *name)
{
    for (size_t i = 0; i < N_ROUTERS; i++)
        if (!strcmp(routers[i]->name, name))
            return routers[i];
    return NULL;
}

const char *router_names(void)
{
    static char text[256];
    if (text[0])
        return text;
    size_t len = 0;
    for (size_t i = 0; i < N_ROUTERS && len < sizeof text; i++) {
        size_t k = strlen(routers[i]->name);
        if (len + k + 3 >= sizeof text)
            break;
        if (i) {
            memcpy(text + len, ", ", 2);
            len += 2;
        }
        memcpy(text + len, routers[i]->name, k);
        len += k;
        text[len] = 0;
    }
    return text;
}

int64_t router_argmin(const router_view *v, const int64_t *a)
{
    int64_t best = 0;
    for (int64_t r = 1; r < v->n; r++) {
        int64_t ka = a ? a[r] : 0, kb = a ? a[best] : 0;
        if (ka < kb || (ka == kb && v->rep[r].outstanding < v->rep[best].outstanding))
            best = r;
    }
    return best;
}
