/* job.h — the pipeline of one simulated run, as a library: the run flags by
 * name (one table that the CLI's getopt table, its --help text, compare's
 * variants and the sweep grid's keys all come from), preparing a run (model
 * and GPU lookup, the trace loaded or generated, rate scaling, resolving
 * the KV capacity, the checks a run needs before it starts), choosing its
 * cost model, simulating it and storing it, and reading a stored run back.
 *
 * Every function returns a kvs_status (KVS_OK = 0) and on failure fills
 * `err` (may be NULL) with one line naming the flag, file or table at
 * fault, worded as the CLI prints it after "kvsim <cmd>: ".  Nothing here
 * prints or exits; cli/ parses flags, calls this module, prints and maps a
 * status to an exit code.
 */
#ifndef JOB_H
#define JOB_H

#include <stddef.h>
#include <stdint.h>

#include "../base/kvs.h"
#include "../cost/cost.h"
#include "../models/model.h"
#include "../sim/run.h"
#include "../store/store.h"
#include "../traces/trace.h"

/* ------------------------------------------------------------ run flags */

/* The flags of one run: the simulated configuration plus where and how the
 * result goes. */
typedef struct job_opts {
    run_config cfg;      /* filled from flags and defaults */
    char db[1024];       /* --db: SQLite results database path */
    int quiet;           /* --quiet: 1 = the caller prints only the id */
    int json;            /* --json: 1 = the caller prints JSON */
    int force_profile;   /* --force-profile: 1 = accept a profile of another GPU/model */
    int batching_set;    /* 1 when --batching was given (not the default) */
    int alloc_set;       /* 1 when --alloc was given */
} job_opts;

/* How a parameter's value is read. */
typedef enum job_param_kind {
    JOB_PARAM_STR = 0,    /* a string copied into a fixed buffer */
    JOB_PARAM_I64 = 1,    /* a strict integer within [lo, hi] */
    JOB_PARAM_U64 = 2,    /* a strict non-negative integer */
    JOB_PARAM_F64 = 3,    /* a strict finite number within [lo, hi] */
    JOB_PARAM_ENUM = 4,   /* one of a fixed set of names */
    JOB_PARAM_SWITCH = 5, /* no value: sets a flag to 1 */
    JOB_PARAM_SLO = 6     /* ttft=S,tpot=S,e2e=S */
} job_param_kind;

/* One run parameter (the table is static, see job_param_at). */
typedef struct job_param {
    const char *name;     /* long flag name without "--": "max-seqs" */
    int id;               /* distinct value >= 1000 (getopt's val) */
    job_param_kind kind;  /* how the value is parsed */
    double lo, hi;        /* range of I64 / F64 values (inclusive) */
    const char *section;  /* --help heading it is listed under: "workload" */
    const char *metavar;  /* value placeholder in --help ("N"), NULL for switches */
    const char *help;     /* --help text, continuation lines pre-indented */
    int per_run;          /* 1 when it may differ between the runs of one
                           * sweep or compare (0: db, quiet, json, label, ...) */
} job_param;

/* Defaults of every flag (run_config_defaults, db "kvsim.db").  Cost: O(1). */
void job_opts_init(job_opts *o);

/* The parameter table: job_param_count() entries, in --help order. */
size_t job_param_count(void);
const job_param *job_param_at(size_t i);
/* The parameter named `name` (without "--"), or the one with getopt value
 * `id`; NULL if none.  Cost: O(table). */
const job_param *job_param_find(const char *name);
const job_param *job_param_by_id(int id);

/* Set parameter `name` of o from its text `value` (ignored, may be NULL,
 * for switches).  Errors (KVS_EINVAL) name the flag as "--name: ...";
 * an unknown name gives "--NAME: not a run flag".  Cost: O(table + value). */
int job_param_set(job_opts *o, const char *name, const char *value, kvs_err *err);

/* The getopt_long table of every parameter (has_arg, val = id), terminated
 * by a zero entry; built on first use from the parameter table, static
 * storage.  Returns a `const struct option *` (typed void to keep getopt.h
 * out of this header).  Cost: O(table) once. */
const void *job_param_options(void);

/* The --help text of every parameter, grouped by section ("workload:\n"
 * then "  --trace FILE  ...\n" lines); static storage.  Cost: O(table) once. */
const char *job_param_help(void);

/* ------------------------------------------------------------ one run */

/* Look up model and GPU, check the TP degree and the flag combinations,
 * load the trace (default traces/azure_llm_2023_conv.csv, also found under
 * the source tree) or generate the synthetic one, scale its rate, and
 * resolve the config (KV capacity, defaults).  On success the caller owns
 * *tr (trace_free).  Cost: reading or generating the trace. */
int job_prepare(job_opts *o, model_spec *m, gpu_spec *g, trace *tr, kvs_err *err);

/* The checks of job_prepare that need no trace: model, GPU, TP, workload
 * given once and readable, the synthetic spec, flag combinations, resolve.
 * Cost: O(1) plus an access(2). */
int job_check(const job_opts *o, kvs_err *err);

/* Build the cost model named by cfg->cost (roofline, affine:..., or a
 * calibrated profile read from st, which may be NULL otherwise) and write
 * its description into cfg->cost_desc.  force accepts a profile measured
 * on another GPU or model.  Caller frees *out (cost_model_free).  Cost:
 * O(1), or one profile read. */
int job_cost_select(run_config *cfg, const model_spec *m, const gpu_spec *g, store *st,
                    int force, cost_model *out, kvs_err *err);

/* Prepare, select the cost model, simulate and store one run in st (tagged
 * with cfg.compare_id / cfg.sweep_id when > 0).  On success *run_id is the
 * new runs.run_id and *res (if non-NULL) keeps the result (res->tr is NULL;
 * caller frees with run_result_free).  A run that fails after it started is
 * stored as failed and the error reads "MSG (recorded as failed run ID)".
 * Cost errors read "--cost: ...", database errors "--db: ...".  Cost: one
 * simulation plus its rows. */
int job_execute(job_opts *o, store *st, int64_t *run_id, run_result *res, kvs_err *err);

/* A stored run read back. */
typedef struct job_run_info {
    int64_t run_id;       /* runs.run_id */
    int finished;         /* 1 'finished', 0 'failed' */
    char error[1024];     /* why it failed; "" when finished */
    char started_at[64];  /* ISO 8601 UTC start time */
    double wall_s;        /* seconds of wall time the simulation took */
    run_config cfg;       /* the stored configuration (sched.total_blocks resolved) */
    run_summary sum;      /* the summary; NAN for NULL metrics, zeros when failed */
} job_run_info;

/* Read run `run_id` from st: its configuration and summary (not the
 * per-request rows).  KVS_EINVAL when there is no such run, KVS_EDB on a
 * database error.  Cost: one indexed row read. */
int job_read_run(store *st, int64_t run_id, job_run_info *out, kvs_err *err);

#endif
