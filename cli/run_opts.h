/* run_opts.h — the flags shared by `kvsim run` and `kvsim compare`: parsing
 * them into a run_config, loading the trace they name, and resolving the
 * model, GPU and KV capacity.  Also the human summary of a finished run. */
#ifndef RUN_OPTS_H
#define RUN_OPTS_H

#include <getopt.h>
#include <stdio.h>

#include "../models/model.h"
#include "../sim/run.h"
#include "../traces/trace.h"

typedef struct run_opts {
    run_config cfg;      /* filled from flags and defaults */
    char db[1024];       /* --db */
    int quiet;           /* --quiet: print only the run id */
    int json;            /* --json: summary as one JSON object */
    int force_profile;   /* --force-profile */
    int batching_set, alloc_set; /* explicitly given */
} run_opts;

/* getopt_long table entries for the shared flags (terminated by a zero
 * entry) and their short help text. */
extern const struct option run_opts_long[];
extern const char run_opts_help[];

void run_opts_defaults(run_opts *o);
/* Apply one parsed option (getopt_long's return value and optarg).
 * Returns 0, CLI_EXIT_ERR after printing the error, or -1 if the option is
 * not one of the shared ones. */
int run_opts_apply(const char *cmd, run_opts *o, int opt, const char *arg);
/* Look up model and GPU, load or generate the trace, scale it, and resolve
 * the config.  Prints errors itself; returns 0 or CLI_EXIT_ERR. */
int run_opts_prepare(const char *cmd, run_opts *o, model_spec *m, gpu_spec *g, trace *tr);
/* Human summary of a stored run. */
void run_opts_print_summary(FILE *f, const run_config *cfg, const run_result *res,
                            int64_t run_id);
void run_opts_print_json(FILE *f, const run_config *cfg, const run_result *res,
                         int64_t run_id);

#endif
