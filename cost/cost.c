/* cost.c — choose a cost model by its spec string; describe and free. */
#include "cost.h"

#include <stdio.h>
#include <string.h>

int cost_model_create(const char *spec, const model_spec *m, const gpu_spec *g,
                      int64_t tp, cost_model *out, kvs_err *err)
{
    if (!spec)
        spec = "";
    if (!strncmp(spec, "affine:", 7))
        return cost_affine_create(spec + 7, out, err);
    if (!strcmp(spec, "roofline")) {
        if (!m || !g)
            return kvs_errf(err, KVS_EINVAL, "--cost: roofline needs a model and a GPU");
        return cost_roofline_create(m, g, tp, out, err);
    }
    if (!strcmp(spec, "calibrated") || !strncmp(spec, "calibrated:", 11))
        return kvs_errf(err, KVS_EINVAL,
                        "--cost: '%s': the calibrated model is loaded from the store "
                        "(validate/profile.h), not by cost_model_create",
                        spec);
    return kvs_errf(err, KVS_EINVAL,
                    "--cost: unknown cost model '%s' (choices: affine:c0,c1,c2,c3, "
                    "roofline, calibrated[:ID])",
                    spec);
}

void cost_model_describe(const cost_model *c, char *buf, size_t n)
{
    if (!buf || !n)
        return;
    if (!c || !c->vt) {
        snprintf(buf, n, "(none)");
        return;
    }
    if (c->vt->describe)
        c->vt->describe(c->self, buf, n);
    else
        snprintf(buf, n, "%s", c->vt->name);
}

void cost_model_free(cost_model *c)
{
    if (!c)
        return;
    if (c->vt && c->vt->free)
        c->vt->free(c->self);
    c->vt = NULL;
    c->self = NULL;
}
