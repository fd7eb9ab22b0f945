/* capacity_kv.h — the flags of `kvsim capacity` (cmd_capacity.c) as its
 * two printers share them: the main report and the --compare-tp /
 * --compare-attn tables (cmd_capacity_compare.c).  Private to cli/. */
#ifndef CAPACITY_KV_H
#define CAPACITY_KV_H

#include <stdint.h>

#include "../models/model.h"
#include "cli.h"

#define GIB_F 1073741824.0
#define CAP_MAX_TP CLI_MAX_TPS
#define CAP_FIT_MAX_TP 1024 /* largest tp (x ep) model_fit_min_par tries */

typedef struct cap_args {
    const char *model, *gpu;
    int64_t tp, ep, cp, block_size, seq_len, batch, max_batched_tokens, max_seqs;
    int64_t max_model_len;      /* --max-model-len; 0 = the model's max_ctx */
    double util;
    const char *engine;         /* --engine profile name (default vllm-v1) */
    model_kv_budget budget;     /* the profile's KV rule and settings */
    int json;
    int64_t cmp_tp[CAP_MAX_TP]; /* --compare-tp degrees, [n_cmp_tp] */
    int n_cmp_tp;
    int cmp_attn;               /* --compare-attn */
} cap_args;

/* The --compare-tp and --compare-attn tables of a (to stdout; under --json
 * members of the open object, each preceded by ", "); rows that do not
 * fit or are invalid say why.  Cost: one model_kv_plan_eval per row. */
void capacity_print_compare(const cap_args *a, const model_spec *m, const gpu_spec *g);

#endif
