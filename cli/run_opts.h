/* run_opts.h — the flags shared by `kvsim run` and `kvsim compare`: parsing
 * them into a run_config, loading the trace they name, and resolving the
 * model, GPU and KV capacity.  Also the human summary of a finished run. */
#ifndef RUN_OPTS_H
#define RUN_OPTS_H

#include <getopt.h>
#include <stdio.h>

#include "../models/model.h"
#include "../store/store.h"
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
/* Parse argv (argv[0] = subcommand) with getopt_long over the shared
 * flags only; rejects unknown flags and stray arguments. */
int run_opts_parse_argv(const char *cmd, run_opts *o, int argc, char **argv);
/* Look up model and GPU, load or generate the trace, scale it, and resolve
 * the config.  Prints errors itself; returns 0 or CLI_EXIT_ERR. */
int run_opts_prepare(const char *cmd, run_opts *o, model_spec *m, gpu_spec *g, trace *tr);
/* Prepare (as run_opts_prepare), build the cost model, simulate and store
 * one run in `st` (tagged with cfg.compare_id / cfg.sweep_id when > 0).  On success
 * *run_id is the new key and *res (if non-NULL) keeps the result (caller
 * frees with run_result_free).  A run that fails after it started is stored
 * as failed.  Prints errors itself; returns 0 or CLI_EXIT_ERR. */
int run_opts_execute(const char *cmd, run_opts *o, store *st, int64_t *run_id,
                     run_result *res);

/* Human summary of a stored run. */
void run_opts_print_summary(FILE *f, const run_config *cfg, const run_result *res,
                            int64_t run_id);
void run_opts_print_json(FILE *f, const run_config *cfg, const run_result *res,
                         int64_t run_id);

#endif
