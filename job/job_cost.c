/* job_cost.c — the cost model named by --cost (see job.h), including
 * calibrated profiles that live in the store (store/store_calib.h). */
#include "job.h"

#include <string.h>

#include "../store/store_calib.h"

int job_cost_select(run_config *cfg, const model_spec *m, const gpu_spec *g, store *st,
                    int force, cost_model *out, kvs_err *err)
{
    int rc;
    if (!strncmp(cfg->cost, "calibrated", 10))
        rc = store_calibrated_cost_create(store_db(st), cfg->cost, m, g->name, force, out, err);
    else
        rc = cost_model_create_env(cfg->cost, &(cost_env){m, g, cfg->tp, cfg->ep}, out, err);
    if (rc)
        return rc;
    cost_model_describe(out, cfg->cost_desc, sizeof cfg->cost_desc);
    return KVS_OK;
}
