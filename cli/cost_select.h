/* cost_select.h — build the cost model named by --cost, including calibrated
 * profiles that live in the store, and record its description in the
 * config (cost_desc) so the run says which model and profile it used. */
#ifndef COST_SELECT_H
#define COST_SELECT_H

#include "../cost/cost.h"
#include "../sim/run.h"
#include "../store/store.h"

int cost_select(run_config *cfg, const model_spec *m, const gpu_spec *g, store *st, int force,
                cost_model *out, kvs_err *err);

#endif
