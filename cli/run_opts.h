/* run_opts.h — the run flags shared by `kvsim run`, `compare`, `sweep` and
 * `capacity`: job/'s parameter table (job.h) behind getopt_long, with the
 * errors printed.  Also (run_print.c) the human summary of a finished run. */
#ifndef RUN_OPTS_H
#define RUN_OPTS_H

#include <getopt.h>
#include <stdio.h>

#include "../job/job.h"

typedef job_opts run_opts;

/* The getopt_long table of the run flags and their --help text are job/'s
 * job_param_options() and job_param_help(), generated from its parameter
 * table. */

void run_opts_defaults(run_opts *o);
/* Apply one parsed option (getopt_long's return value and optarg).
 * Returns 0, CLI_EXIT_ERR after printing the error, or -1 if the option is
 * not a run flag. */
int run_opts_apply(const char *cmd, run_opts *o, int opt, const char *arg);
/* Parse argv (argv[0] = subcommand) with getopt_long over the run flags
 * only; rejects unknown flags and stray arguments. */
int run_opts_parse_argv(const char *cmd, run_opts *o, int argc, char **argv);
/* job_prepare / job_execute (job.h), printing the error as "kvsim CMD:
 * MSG"; return 0 or CLI_EXIT_ERR. */
int run_opts_prepare(const char *cmd, run_opts *o, model_spec *m, gpu_spec *g, trace *tr);
int run_opts_execute(const char *cmd, run_opts *o, store *st, int64_t *run_id,
                     run_result *res);

/* run_print.c: human summary and JSON object of a stored run. */
void run_opts_print_summary(FILE *f, const run_config *cfg, const run_result *res,
                            int64_t run_id);
void run_opts_print_json(FILE *f, const run_config *cfg, const run_result *res,
                         int64_t run_id);

#endif
