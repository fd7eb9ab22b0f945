/* cost.c — choose a cost model by its spec string; describe and free. */
#include "cost.h"

#include <stdio.h>
#include <string.h>

static int affine_family_create(const char *params, const cost_env *env, cost_model *out,
                                kvs_err *err)
{
    (void)env;
    return cost_affine_create(params, out, err);
}

static int roofline_family_create(const char *params, const cost_env *env, cost_model *out,
                                  kvs_err *err)
{
    cost_roofline_consts k;
    cost_roofline_consts_default(&k);
    int rc = cost_roofline_consts_parse(params, &k, NULL, err);
    if (rc)
        return rc;
    if (!env->m || !env->g)
        return kvs_errf(err, KVS_EINVAL, "--cost: roofline needs a model and a GPU");
    model_par par = {env->tp, env->ep > 0 ? env->ep : 1, env->cp > 0 ? env->cp : 1};
    return cost_roofline_create_par(env->m, env->g, &par, &k, out, err);
}

/* The built-in families: one line each. */
static const cost_family builtin_affine = {"affine", "affine:c0,c1,c2,c3", 1,
                                           affine_family_create};
static const cost_family builtin_roofline = {"roofline", "roofline[:KEY=VALUE,...]", 2,
                                             roofline_family_create};

#define COST_MAX_FAMILIES 32
static const cost_family *families[COST_MAX_FAMILIES] = {&builtin_affine, &builtin_roofline};
static int n_families = 2;

int cost_family_register(const cost_family *f, kvs_err *err)
{
    if (!f || !f->name || !*f->name || !f->create || strchr(f->name, ':'))
        return kvs_errf(err, KVS_EINVAL, "cost registry: a family needs a name without ':' "
                                         "and a create function");
    if (!strcmp(f->name, "calibrated"))
        return kvs_errf(err, KVS_EINVAL, "cost registry: 'calibrated' is reserved");
    for (int i = 0; i < n_families; i++)
        if (!strcmp(families[i]->name, f->name))
            return kvs_errf(err, KVS_EINVAL, "cost registry: '%s' is already registered",
                            f->name);
    if (n_families == COST_MAX_FAMILIES)
        return kvs_errf(err, KVS_EINVAL, "cost registry: full (%d families)", COST_MAX_FAMILIES);
    families[n_families++] = f;
    return KVS_OK;
}

int cost_model_create(const char *spec, const model_spec *m, const gpu_spec *g,
                      int64_t tp, cost_model *out, kvs_err *err)
{
    cost_env env = {m, g, tp, 1, 1};
    return cost_model_create_env(spec, &env, out, err);
}

int cost_model_create_env(const char *spec, const cost_env *envp, cost_model *out, kvs_err *err)
{
    if (!spec)
        spec = "";
    cost_env env = *envp;
    for (int i = 0; i < n_families; i++) {
        const cost_family *f = families[i];
        size_t k = strlen(f->name);
        if (strncmp(spec, f->name, k))
            continue;
        if (f->params >= 1 && spec[k] == ':')
            return f->create(spec + k + 1, &env, out, err);
        if (f->params != 1 && spec[k] == 0)
            return f->create("", &env, out, err);
    }
    if (!strcmp(spec, "calibrated") || !strncmp(spec, "calibrated:", 11))
        return kvs_errf(err, KVS_EINVAL,
                        "--cost: '%s': the calibrated model is loaded from the store "
                        "(job/), not by cost_model_create",
                        spec);
    char choices[512] = "";
    size_t len = 0;
    for (int i = 0; i < n_families && len < sizeof choices; i++)
        len += (size_t)snprintf(choices + len, sizeof choices - len, "%s, ", families[i]->usage);
    return kvs_errf(err, KVS_EINVAL, "--cost: unknown cost model '%s' (choices: %scalibrated[:ID])",
                    spec, choices);
}

void cost_run_init(cost_run *r, const cost_model *c, const cost_batch *b)
{
    r->c = c;
    r->b = *b;
    r->b.kv_read = 0; /* the shape: cost_run_prepare compares it whole */
    r->s0 = r->ridge = 0.0;
    if (!c->vt->run_init || !c->vt->run_init(c->self, b, r))
        r->n = -1; /* cost_run_s calls step_s */
}

void cost_run_prepare(cost_run *r, const cost_model *c, const cost_batch *b)
{
    cost_batch shape = *b; /* seven int64_t, no padding */
    shape.kv_read = 0;
    if (r->c == c && memcmp(&r->b, &shape, sizeof shape) == 0)
        return;
    cost_run_init(r, c, b);
}

const cost_run *cost_run_get(cost_run_cache *cc, const cost_model *c, const cost_batch *b)
{
    uint64_t h = (uint64_t)b->n_decode + 7u * (uint64_t)b->n_prefill;
    cost_run *r = &cc->slot[h % COST_RUN_CACHE];
    cost_run_prepare(r, c, b);
    return r;
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
