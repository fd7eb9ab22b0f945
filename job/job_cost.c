/* job_cost.c — the cost model named by --cost (see job.h), including
 * calibrated profiles that live in the store (store/store_calib.h). */
#include "job.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "../store/store_calib.h"

int job_cost_select(run_config *cfg, const model_spec *m, const gpu_spec *g, store *st,
                    int force, cost_model *out, kvs_err *err)
{
    int rc;
    kvs_err e;
    if (!strncmp(cfg->cost, "calibrated", 10))
        rc = st ? store_calibrated_cost_create(store_db(st), cfg->cost, m, g->name, force, out, &e)
                : kvs_errf(&e, KVS_EINVAL, "%s: a calibrated profile is read from a results "
                                           "database, and this run has none", cfg->cost);
    else
        rc = cost_model_create_env(cfg->cost, &(cost_env){m, g, cfg->tp, cfg->ep, cfg->cp}, out, &e);
    if (rc) /* every message names the flag once */
        return strncmp(e.msg, "--cost", 6) ? kvs_errf(err, rc, "--cost: %s", e.msg)
                                           : kvs_errf(err, rc, "%s", e.msg);
    cost_model_describe(out, cfg->cost_desc, sizeof cfg->cost_desc);
    return KVS_OK;
}

int job_cost_select_decode(const run_config *cfg, const model_spec *m, const gpu_spec *g,
                           cost_model *out, kvs_err *err)
{
    memset(out, 0, sizeof *out);
    if (cfg->decode_tp <= 0 || cfg->decode_tp == cfg->tp)
        return KVS_OK;
    if (!strncmp(cfg->cost, "calibrated", 10))
        return kvs_errf(err, KVS_EINVAL, "--pd-tp %s: a calibrated cost profile is fitted at one "
                                         "TP degree; give both pools one TP or an analytic --cost",
                        cfg->pd_tp);
    kvs_err e;
    int rc = cost_model_create_env(cfg->cost, &(cost_env){m, g, cfg->decode_tp, cfg->ep, cfg->cp},
                                   out, &e);
    if (rc)
        return kvs_errf(err, rc, "--pd-tp: the decode pool's cost model: %s", e.msg);
    return KVS_OK;
}

int job_cost_constants(const char *engine, const char *spec, cost_roofline_consts *k,
                       cost_const_origin origin[COST_MAX_CONSTS], kvs_err *err)
{
    job_opts o; /* --engine parsed as `kvsim run` parses it: the same names and message */
    job_opts_init(&o);
    int rc = job_param_set(&o, "engine", engine, err);
    if (rc)
        return rc;
    const job_engine *prof = job_engine_of(o.cfg.sched.engine);
    assert(prof);
    const char *params = "";
    if (!strncmp(spec, "roofline:", 9))
        params = spec + 9;
    else if (strcmp(spec, "roofline"))
        return kvs_errf(err, KVS_EINVAL,
                        "--cost: '%s': only the roofline model has constants to show", spec);
    cost_roofline_consts_default(k);
    cost_roofline_origins_default(origin);
    char where[64];
    snprintf(where, sizeof where, "engine %s", prof->name);
    rc = prof->cost ? cost_roofline_consts_parse_as(prof->cost, where, k, origin, err) : KVS_OK;
    return rc ? rc : cost_roofline_consts_parse(params, k, origin, err);
}
