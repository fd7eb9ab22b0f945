/* job.h — the pipeline of one simulated run, as a library: the run flags by
 * name (one table that the CLI's getopt table, its --help text, compare's
 * variants and the sweep grid's keys all come from), preparing a run (model
 * and GPU lookup, the trace loaded or generated, rate scaling, resolving
 * the KV capacity, the checks a run needs before it starts), choosing its
 * cost model, simulating it and storing it, and reading a stored run back.
 * Built on it, the pieces of the commands that run many: sweep grids and
 * plans (job_grid.c, job_sweep.c), one run as a byte buffer for MPI
 * (job_pack.c), SLOs and the rate / TP capacity searches (job_capacity.c),
 * and compare's variants (job_compare.c).
 *
 * Layer: above store/ and validate/ (calibrated cost profiles are
 * validate/profile.h's cost_calibrated_create), below cli/ and bench/.
 *
 * Every function returns a kvs_status (KVS_OK = 0) and on failure fills
 * `err` (may be NULL) with one line naming the flag, file or table at
 * fault, worded as the CLI prints it after "kvsim <cmd>: ".  Nothing here
 * prints or exits; cli/ parses flags, calls this module, prints and maps a
 * status to an exit code.
 */
#ifndef JOB_H
#define JOB_H

#include <getopt.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../base/kvs.h"
#include "../cost/cost.h"
#include "../models/model.h"
#include "../sim/run.h"
#include "../store/store.h"
#include "../traces/trace.h"

/* ------------------------------------------------------------ run flags */

/* The flags of one run: the simulated configuration plus where and how the
 * result goes. */
#define JOB_MAX_PARAMS 64 /* size of job_opts.given; the table is shorter */

typedef struct job_opts {
    run_config cfg;      /* filled from flags and defaults */
    char db[1024];       /* --db: SQLite results database path */
    int quiet;           /* --quiet: 1 = the caller prints only the id */
    int json;            /* --json: 1 = the caller prints JSON */
    int force_profile;   /* --force-profile: 1 = accept a profile of another GPU/model */
    char result_json[1024]; /* --result-json: vllm-bench-style result file, "" = none */
    int result_json_detail; /* --result-json-detail: 1 = per-request lists in it */
    int stream_rows;     /* not a flag: 1 = job_execute stages the request rows from a
                            second thread while it simulates (job_stream.h; one
                            engine).  `kvsim run` sets it; sweeps, which keep every
                            core busy already, do not */
    run_progress_fn progress; /* not a flag: hears job_execute's run (NULL: silent) */
    void *progress_ctx;
    unsigned char given[JOB_MAX_PARAMS]; /* [param index] 1 = set by name (flag,
                                            grid, variant); the engine profile
                                            fills the others */
} job_opts;

/* How a parameter's value is read. */
typedef enum job_param_kind {
    JOB_PARAM_STR = 0,    /* a string copied into a fixed buffer */
    JOB_PARAM_I64 = 1,    /* a strict integer within [lo, hi] */
    JOB_PARAM_U64 = 2,    /* a strict non-negative integer */
    JOB_PARAM_F64 = 3,    /* a strict finite number within [lo, hi] */
    JOB_PARAM_ENUM = 4,   /* one of a fixed set of names */
    JOB_PARAM_SWITCH = 5, /* no value: sets a flag to 1 */
    JOB_PARAM_SLO = 6,    /* ttft=S,tpot=S,e2e=S */
    JOB_PARAM_OFF = 7     /* no value: sets a flag to 0 (--no-prefix-caching) */
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
    int vary;             /* JOB_VARY_* bits: where it may differ per run */
} job_param;

#define JOB_VARY_GRID 1    /* may be an axis of a sweep grid */
#define JOB_VARY_VARIANT 2 /* may be set by a compare variant */
#define JOB_VARY_ALL 3

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

/* The switch that undoes switch `name` ("no-prefix-caching" for
 * "prefix-caching" and back), or NULL. */
const char *job_param_negation(const char *name);
/* Look up c's model and GPU and apply --dtype / --kv-cache-dtype. */
int job_model_lookup(const run_config *c, model_spec *m, gpu_spec *g, kvs_err *err);
/* The model and GPU of o, as the run sees them: looked up, --dtype and
 * --kv-cache-dtype applied, the parallel layout checked (model_check_par)
 * and the engine profile's defaults filled into o.  With --pd-tp TP_P:TP_D
 * and no --tp, tp becomes TP_P; TP_D's layout is checked too.  Errors name
 * the flag.  Cost: a lookup (a config file read for a path). */
int job_model_setup(job_opts *o, model_spec *m, gpu_spec *g, kvs_err *err);
/* job_model_setup, then the KV budget o's engine would size its cache with
 * (rule, --gpu-mem-util, block size, token budget and max-seqs as the
 * profile and flags resolve them, run_config_resolve_budget), so that
 * `kvsim capacity` reports the blocks `kvsim run` would get.  Cost: as
 * job_model_setup. */
int job_kv_budget(job_opts *o, model_spec *m, gpu_spec *g, model_kv_budget *b, kvs_err *err);

/* 1 if parameter `name` was set on o by name. */
int job_param_given(const job_opts *o, const char *name);

/* An engine profile: which scheduler rules a run follows (sched_engine)
 * and the defaults a real deployment of that engine has.  Chosen with
 * --engine NAME (job/job_engine.c; one line each in its table):
 *   vllm-v1  (the default) vLLM's V1 scheduler, docs/semantics-v1.md, with
 *            vLLM 0.11.0's defaults: chunked prefill and prefix caching on;
 *            token budget 8192 and 1024 sequences on a GPU of >= 70 GiB
 *            that is not an A100, else 2048 and 256; with chunked prefill
 *            off the budget is max-model-len.
 *   vllm-v0  vLLM's V0 engine as docs/semantics.md, with its defaults.
 *   trtllm   TensorRT-LLM's in-flight batching (docs/engine-trtllm.md), with
 *            its capacity rule and its own roofline constants.
 *   sglang   SGLang's scheduler (docs/semantics-sglang.md), with its pool
 *            rule and defaults.
 * Every flag given overrides the profile; a flag the profile lacks
 * (--watermark, --swap-gib under vllm-v1; --segment-tokens under vllm-v0)
 * is an error naming the flag and the profile. */
typedef struct job_engine {
    const char *name;     /* --engine value, e.g. "vllm-v1" */
    sched_engine engine;  /* the scheduler rules */
    const char *doc;      /* one line for --help and kvsim run's summary */
    /* Required: fill the defaults o's flags left open for model m on GPU g
     * (before run_config_resolve); refuse flags the profile lacks. */
    int (*apply)(job_opts *o, const model_spec *m, const gpu_spec *g, kvs_err *err);
    /* Optional: the roofline constants job_engine_apply puts, after apply, before the user's
     * --cost ones ("key=value,..."; those given win), or NULL for none. */
    const char *cost;
} job_engine;

size_t job_engine_count(void);
const job_engine *job_engine_at(size_t i);            /* NULL past the end */
const job_engine *job_engine_of(sched_engine e);      /* NULL if none */
/* Apply o's engine profile (o->cfg.sched.engine).  Cost: O(1). */
int job_engine_apply(job_opts *o, const model_spec *m, const gpu_spec *g, kvs_err *err);

/* Parse argv (argv[0] = the subcommand) with getopt_long over the run
 * flags only into o; errors as job_param_set, or "unknown flag or missing
 * value: '--x' (see kvsim CMD --help)", "unexpected argument 'x' (...)".
 * Resets getopt's optind.  Cost: O(argc x table). */
int job_opts_parse_argv(job_opts *o, int argc, char **argv, const char *cmd, kvs_err *err);

/* The getopt_long table of every parameter (has_arg, val = id), terminated
 * by a zero entry; built on first use from the parameter table, static
 * storage.  Cost: O(table) once. */
const struct option *job_param_options(void);

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
 * O(1), or one profile read.  Errors name the flag once ("--cost: ..."). */
int job_cost_select(run_config *cfg, const model_spec *m, const gpu_spec *g, store *st,
                    int force, cost_model *out, kvs_err *err);

/* The decode pool's cost model under --pd when its TP (cfg->decode_tp,
 * resolved) differs from cfg->tp: cfg->cost built at decode_tp into *out;
 * otherwise out->vt stays NULL (every engine uses job_cost_select's).  A
 * calibrated profile is fitted at one TP, so it is refused then (naming
 * --pd-tp).  Caller frees *out when out->vt is set.  Cost: O(1). */
int job_cost_select_decode(const run_config *cfg, const model_spec *m, const gpu_spec *g,
                           cost_model *out, kvs_err *err);

/* The roofline constants a run of engine profile `engine` with --cost
 * `spec` uses ("roofline" or "roofline:KEY=VALUE,..."): the defaults, then
 * the profile's own (job_engine.cost; origin "engine NAME"), then spec's
 * (origin "--cost", or FILE:LINE of a constants file), into *k and
 * origin[].  An unknown engine, another cost model or a bad constant is
 * KVS_EINVAL with one line naming the flag.  Cost: O(constants). */
int job_cost_constants(const char *engine, const char *spec, cost_roofline_consts *k,
                       cost_const_origin origin[COST_MAX_CONSTS], kvs_err *err);

/* Select o's cost models (the decode pool's too under --pd-tp; cost_st
 * answers --cost calibrated, may be NULL) and simulate tr, prepared by
 * job_prepare for model m on GPU g, into *res (run_execute_pools, with
 * o->progress).  *ran is 1 when the simulation itself started, so that its
 * failure is a run worth recording as failed; 0 when the cost selection
 * failed ("--cost: ...").  Caller frees *res (run_result_free), also on
 * failure.  The one path from a prepared run to a result: job_execute,
 * sweeps and the C API (kvsim_run_execute) all take it.  Cost: the
 * simulation. */
int job_simulate(job_opts *o, const model_spec *m, const gpu_spec *g, const trace *tr,
                 store *cost_st, run_result *res, int *ran, kvs_err *err);

/* Prepare, select the cost model, simulate and store one run in st (tagged
 * with cfg.compare_id / cfg.sweep_id when > 0).  On success *run_id is the
 * new runs.run_id and *res (if non-NULL) keeps the result (res->tr is NULL;
 * caller frees with run_result_free).  A run that fails after it started is
 * stored as failed and the error reads "MSG (recorded as failed run ID)".
 * Cost errors read "--cost: ...", database errors "--db: ...".  Cost: one
 * simulation plus its rows. */
int job_execute(job_opts *o, store *st, int64_t *run_id, run_result *res, kvs_err *err);

/* The trace file a run of c would load into out[cap]: --trace, else the
 * default trace (the source tree's copy when it is not found from here);
 * "" for a synthetic workload.  Cost: one access(). */
void job_trace_path(const run_config *c, char *out, size_t cap);

/* The identity of a group's input files (job_inputs.c): each distinct
 * trace file, as given (path), absolute (abs) and the hex SHA-256 of its
 * bytes (sha), stored with a sweep, search or compare and checked before
 * it is resumed. */
typedef struct job_inputs {
    int n, cap;                /* files, allocated slots */
    char **path, **abs, **sha; /* [n] each, owned */
} job_inputs;
void job_inputs_free(job_inputs *in);
/* Add a file (once per path as given): KVS_EIO "--trace PATH: ..." when it
 * cannot be resolved or read.  Cost: one SHA-256 of the file. */
int job_inputs_add(job_inputs *in, const char *path, kvs_err *err);
/* Add the trace file a run of o reads (job_trace_path); none for a
 * synthetic workload. */
int job_inputs_add_opts(job_inputs *in, const job_opts *o, kvs_err *err);
/* Check every stored input of group `id` (store kind "sweep" or
 * "compare"; `noun` names it in messages): it must resolve, from the
 * current directory, to the stored absolute path and still have the stored
 * SHA-256.  KVS_EINVAL "--resume: NOUN ID: --trace PATH ..." otherwise.
 * *n_checked (may be NULL) receives the rows checked. */
int job_inputs_check(store *st, const char *kind, const char *noun, int64_t id,
                     int64_t *n_checked, kvs_err *err);

/* A stored run read back: the `runs` row's status, config and summary
 * (store/store.h's store_run_row). */
typedef store_run_row job_run_info;

/* Read run `run_id` from st: its configuration and summary (not the
 * per-request rows), every column checked: its type and size, metrics
 * non-negative and finite (fractions within [0, 1]) by the reader
 * (store_read_run), and each column that holds a flag's value within that
 * flag's range (job_run_check_stored).  KVS_EINVAL when there is no such
 * run or a value is out of range ("run N: runs.COLUMN = V is outside [LO,
 * HI], the range of --FLAG"), KVS_EDB on a database error.  Cost: one
 * indexed row read. */
int job_read_run(store *st, int64_t run_id, job_run_info *out, kvs_err *err);

/* The flag-range half of job_read_run, for a row read another way. */
int job_run_check_stored(const job_run_info *row, kvs_err *err);


/* ------------------------------------------------------------ sweep grid (job_grid.c) */

/* the parameter grid of `kvsim sweep`: axes of run flags with
 * their values, read from `--grid 'flag=v1,v2,...'` arguments or a grid file
 * (one axis per line, '#' comments), and the cartesian product of the axes
 * in a fixed order: the first axis varies slowest, the last fastest, so point
 * i is the same point for the same grid text on every machine.
 *
 * An axis key is a run flag without its dashes (checked against a getopt
 * table the caller passes, minus the flags that make no sense per point); a
 * switch (a flag without a value, e.g. priority-preemption) takes the values
 * on and off; `rate` is the rate= key of the --synthetic spec and
 * `synthetic.KEY` any key of the spec (judged by the spec's parser when the
 * points are applied).  Values are
 * separated by ',' or, when the list contains a '|', by '|' (for values that
 * hold commas, such as a whole --synthetic spec); blanks around a value are
 * dropped.  The grid module only
 * parses and enumerates; applying a point's values to a run is the caller's.
 * Also here: rewriting one key of a synthetic spec string.
 */

#define SWEEP_MAX_AXES 16
#define SWEEP_MAX_POINTS 1000000

typedef enum sweep_key_kind {
    SWEEP_KEY_FLAG = 0,   /* a run flag taking a value: `flag` is its option entry */
    SWEEP_KEY_SWITCH = 1, /* a flag without a value: values on | off */
    SWEEP_KEY_SYNTH = 2   /* a key of the --synthetic spec: `synth_key` */
} sweep_key_kind;

typedef struct sweep_axis {
    char key[64];             /* as written: "max-seqs", "rate", "synthetic.n" */
    sweep_key_kind kind;      /* how a value is applied */
    int opt_val;              /* getopt value of the flag (FLAG, SWITCH) */
    char synth_key[32];       /* spec key (SYNTH): "rate", "n", ... */
    char where[1100];         /* origin for errors: "FILE:LINE" or "--grid" */
    int n_values;             /* >= 1 */
    char **values;            /* [n_values] owned strings, distinct, non-empty */
} sweep_axis;

typedef struct sweep_grid {
    sweep_axis axes[SWEEP_MAX_AXES]; /* [n_axes] in the order given */
    int n_axes;
    int64_t n_points;                /* product of n_values; 0 when no axis */
} sweep_grid;

void sweep_grid_init(sweep_grid *g);
void sweep_grid_free(sweep_grid *g);

/* Add one axis "key=v1,v2,..." (or "key=a|b").  `opts` is the getopt table
 * of the run flags; `where` names the origin for errors ("--grid" or
 * "FILE:LINE"); errors read "WHERE: ..." (KVS_EINVAL): no '=', an unknown or
 * disallowed key (db, quiet, json, label, record-steps, force-profile),
 * a key given twice, an empty value or value list, a value given twice, a
 * switch value other than on/off, more than SWEEP_MAX_AXES axes or
 * SWEEP_MAX_POINTS points.  Cost: O(length). */
int sweep_grid_add(sweep_grid *g, const struct option *opts, const char *text,
                   const char *where, kvs_err *err);

/* Read a grid file: one axis per line as for sweep_grid_add, blank lines and
 * '#' comments (to the end of a line) ignored, surrounding blanks trimmed.
 * Errors name "PATH:LINE".  Cost: O(file size). */
int sweep_grid_read_file(sweep_grid *g, const struct option *opts, const char *path,
                         kvs_err *err);

/* Parse canonical grid text (sweep_grid_text's output; lines as in a grid
 * file) with `where` naming its origin ("sweep 3"). */
int sweep_grid_read_text(sweep_grid *g, const struct option *opts, const char *text,
                         const char *where, kvs_err *err);

/* The canonical text of the grid: one "key=v1,v2" line per axis ('|'
 * between values when one holds a comma), each ending in '\n'.  Returns a
 * malloc'd string or NULL when out of memory. */
char *sweep_grid_text(const sweep_grid *g);

/* The value index of every axis at point `index` (0 <= index < n_points):
 * choice[a] in [0, n_values of axis a).  Cost: O(n_axes). */
void sweep_grid_choice(const sweep_grid *g, int64_t index, int choice[SWEEP_MAX_AXES]);

/* The point's canonical key "key1=v1 key2=v2" (axis order, one space between
 * pairs) into buf; KVS_EINVAL when it does not fit in n bytes. */
int sweep_grid_point_key(const sweep_grid *g, int64_t index, char *buf, size_t n,
                         kvs_err *err);

/* Set `key` to `value` in the comma-separated key=value spec held in
 * spec[cap] (replacing the key's item, or appending one).  KVS_EINVAL when
 * the result does not fit or the spec has an item without '='. */
int sweep_spec_set(char *spec, size_t cap, const char *key, const char *value,
                   kvs_err *err);

/* ------------------------------------------------------------ run buffers (job_pack.c) */

/* one simulated run as a byte buffer and back: how an MPI rank
 * ships a finished (or failed) sweep point to rank 0, which alone writes the
 * database.  The buffer holds the run_config, the trace's requests and
 * identity, and the run_result (per-request results, summary, and the steps
 * and their members when recorded), or the error of a failed run.
 *
 * Format: a header (magic "KVSP", format version, the byte sizes of the
 * structs it carries), then each struct's bytes and each array with its
 * length.  Structs travel as their in-memory bytes, so both ends must be the
 * same kvsim build on machines of the same architecture (an MPI job runs one
 * binary); the header sizes catch a mismatch, and every length is checked
 * against the buffer on the way in.
 */

typedef struct run_packed {
    int64_t point_index;   /* the sweep point this run is */
    int status;            /* 0 finished, 1 failed after it started (stored as
                            * failed), 2 failed before it started (not stored) */
    char error[1200];      /* why it failed, "" when finished */
    run_config cfg;        /* the resolved configuration */
    trace tr;              /* the requests (owned after unpack) */
    run_result res;        /* status 0: the result (owned); res.tr points at tr */
} run_packed;

/* Serialize p (res.reqs over tr.n requests; steps and members when
 * res.steps is non-NULL) into a malloc'd buffer *buf of *len bytes.
 * Cost: O(requests + steps + members) copies. */
int run_pack(const run_packed *p, unsigned char **buf, size_t *len, kvs_err *err);

/* Parse a buffer made by run_pack into *out (owning its arrays; free with
 * run_packed_free).  KVS_EINVAL on a truncated or foreign buffer. */
int run_unpack(const unsigned char *buf, size_t len, run_packed *out, kvs_err *err);

/* Free the arrays of an unpacked run (trace and result). */
void run_packed_free(run_packed *p);

/* A trace's arrival rate, (n - 1) / (last arrival - first arrival), req/s:
 * the rate `--rate` scales a trace to; 0 with fewer than two requests or no
 * span.  Cost: O(1). */
double job_trace_rate(const trace *tr);

/* The rate of o's trace file (the default trace when none is named), as
 * job_trace_rate, before any --rate or --rate-scale.  Loads the trace.
 * Errors name the file.  Cost: O(trace). */
int job_workload_rate(const job_opts *o, double *rps, kvs_err *err);

/* ------------------------------------------------------------ result file (job_result_json.c) */

/* `--result-json FILE`: the run with the field names and units of `vllm
 * bench serve`'s saved result (duration, completed, failed, token totals,
 * throughputs, mean/median/std/p50/p90/p99 of ttft, tpot, itl and e2el in
 * ms; with detail the per-request input_lens, output_lens, ttfts, errors,
 * and itls when the steps were recorded).  docs/vllm-bench.md lists every
 * key.  job_execute calls both: the check before simulating (a missing or
 * unwritable directory: KVS_EIO naming the flag), the write after storing
 * (to a temporary file renamed into place).  Cost: O(requests + members). */
int job_result_json_check(const char *path, kvs_err *err);
int job_result_json_write(const char *path, const run_config *cfg, const run_result *res,
                          int detail, kvs_err *err);

/* ------------------------------------------------------------ capacity search (job_capacity.c) */

/* the pure parts of `kvsim capacity --search`: service
 * level objectives over a run's summary metrics (parse, check, how far a run
 * is from meeting them) and the two searches over a probe callback:
 *
 *  - cap_search_rate: the highest value x (an arrival rate or rate scale) at
 *    which the SLOs hold, by doubling or halving from x0 until one probe
 *    holds and one fails, then geometric bisection until hi / lo <= stop
 *    (1.05: the bracket is "holds at lo, fails 5% higher").
 *  - cap_search_list: the first value of an ascending list (TP degrees) at
 *    which the SLOs hold.
 *
 * The probe callback runs (and stores) one simulation; this module never
 * touches a run or the database itself, so it is tested against a simple
 * threshold model of a probe.  Bisection assumes nothing about
 * monotonicity: it only keeps "lo held, hi failed" true.
 */

#define CAP_MAX_BOUNDS 24

/* One bound on a summary metric. */
typedef struct cap_bound {
    char name[32];   /* metric as written: "ttft_p99", "throughput_tok_s", ... */
    int metric;      /* index into the metric table (capacity_search.c) */
    int is_min;      /* 1: value >= limit (throughputs, attainment); 0: value <= limit */
    double limit;    /* seconds, s/token, tokens/s, requests/s or a fraction */
} cap_bound;

typedef struct cap_slo {
    cap_bound b[CAP_MAX_BOUNDS]; /* [n] */
    int n;
    double req_ttft_s, req_tpot_s, req_e2e_s; /* per-request targets for attainment; 0 = none */
    double max_rejected;  /* largest fraction of requests a run may reject and hold
                             (`--max-rejected`, in [0, 1); cap_slo_parse sets 0) */
    char text[512];                           /* the spec as given */
} cap_slo;

/* Parse "metric=limit,..." (docs/exploration.md): ttft_|tpot_|e2e_|
 * norm_latency_ p50|p90|p99|mean (upper bounds, seconds), throughput
 * (= throughput_tok_s), throughput_tok_s, throughput_req_s, goodput_req_s
 * (lower bounds), attainment (lower bound, a fraction in (0, 1]) and the
 * per-request targets ttft=S, tpot=S, e2e=S that attainment and goodput are
 * measured against (which need attainment or goodput_req_s, and vice
 * versa).  Errors (KVS_EINVAL) name the metric: "--slo: unknown metric
 * 'foo' (...)".  Cost: O(length). */
int cap_slo_parse(const char *text, cap_slo *out, kvs_err *err);

/* Check a summary: returns 1 when every bound holds and the run rejected
 * at most max_rejected of its requests.  *ratio (may be NULL)
 * is the worst bound's distance, value/limit for an upper bound and
 * limit/value for a lower one (> 1 means violated; +inf for a missing
 * value; 1 + the excess share for too many rejections); verdict gets e.g.
 * "ttft_p99 2.31 > 2" for the worst bound, "rejected 14.7% of requests
 * (max 0%): 2838 over max-model-len, ..." (which comes first), or "ok"
 * when all hold. */
int cap_slo_check(const cap_slo *s, const run_summary *sum, double *ratio, char *verdict,
                  size_t n);

/* One probe's outcome, filled by the callback (x, holds, ratio, run_id,
 * verdict). */
typedef struct cap_probe {
    double x;           /* the value probed */
    int holds;          /* 1 if the SLOs held */
    double ratio;       /* cap_slo_check's ratio */
    int64_t run_id;     /* the stored run */
    char verdict[256];  /* cap_slo_check's verdict */
} cap_probe;

/* Run one probe at x; returns 0 or a non-zero error that ends the search. */
typedef int (*cap_probe_fn)(void *ctx, double x, cap_probe *out);

typedef enum cap_status {
    CAP_STATUS_BRACKETED = 0,   /* rate: lo holds, hi fails, hi/lo <= stop */
    CAP_STATUS_FOUND = 1,       /* list: lo is the first value that holds */
    CAP_STATUS_UNREACHABLE = 2, /* no probe held: best is the closest */
    CAP_STATUS_UNBOUNDED = 3    /* rate: every probe held, lo is the highest */
} cap_status;

typedef struct cap_result {
    cap_status status;
    int have_lo, have_hi; /* whether lo / hi are set */
    cap_probe lo;         /* highest (rate) / first (list) value that held */
    cap_probe hi;         /* lowest value above lo that failed (list: the value before lo) */
    cap_probe best;       /* probe with the smallest ratio (closest to holding) */
    int probes;           /* probes run */
} cap_result;

/* Round x to 6 significant digits, the precision every probed value has
 * (so a value prints, is stored and is simulated identically). */
double cap_round(double x);

/* The rate search described above, from x0 > 0, with at most max_steps
 * doublings or halvings before giving up (UNBOUNDED / UNREACHABLE).
 * Returns 0 or the callback's error. */
int cap_search_rate(double x0, double stop, int max_steps, cap_probe_fn fn, void *ctx,
                    cap_result *out);

/* The list search: probe xs[0], xs[1], ... (ascending) until one holds. */
int cap_search_list(const double *xs, int n, cap_probe_fn fn, void *ctx, cap_result *out);

const char *cap_status_name(cap_status s);

/* The probes of `kvsim capacity --search`: each is a stored run, a point
 * of one sweep of kind 'search' (sweep_points, sweep_point_params), with
 * its verdict in search_probes and the answer per policy in
 * search_results.  The CLI runs a probe as job_search_point, job_execute,
 * job_search_record (printing between the steps). */
typedef struct job_search {
    job_opts base;        /* base flags, with the policy being searched */
    store *st;            /* where probes are stored (borrowed) */
    int64_t sweep_id;     /* the search's sweeps row */
    int64_t next_point;   /* probe counter over the whole search */
    const char *param;    /* "rate" or "tp" (static string) */
    double native_rps;    /* a trace file's own rate, req/s (probes scale it); 0 synthetic */
    cap_slo slo;          /* the bounds; its per-request targets go into each run */
    int resume;           /* 1: --resume, probes already stored are read back */
} job_search;

/* One probe's run, before it runs. */
typedef struct job_probe_point {
    job_opts opts;        /* the run flags of the probe */
    int64_t index;        /* sweep point index */
    char value[64];       /* the probed value as stored ("%.6g", or the TP degree) */
    char key[128];        /* "policy=fcfs rate=4" */
    int64_t stored_run;   /* resumed: the probe's stored run (not run again); 0 = run it */
    int stored_row;       /* resumed: its search_probes row is stored (not written again) */
} job_probe_point;

/* What a search varies and where it starts: "tp" (tp != 0), else "rate",
 * in req/s: the --synthetic spec's rate= (not arrival=burst), or a trace
 * file's rate (its own, *native_rps, times --rate-scale, or --rate), each
 * probe scaling the trace to it.  Cost: O(spec), or loading the trace. */
int job_search_param(const job_opts *base, int tp, const char **param, double *x0,
                     double *native_rps, kvs_err *err);

/* Keep the TP degrees of tps[0..*n) valid for the model that fit in memory
 * (skipped(ctx, tp, why) hears of each one dropped; may be NULL).  Fails on
 * an unknown model or GPU, or when none is left.  Cost: O(n). */
int job_search_tps(const job_opts *base, double *tps, int *n,
                   void (*skipped)(void *ctx, int64_t tp, const char *why), void *ctx,
                   kvs_err *err);

/* The run flags, point index, value and key of the probe at x; adds the
 * point to the search and tags the next stored run as it (the caller
 * store_sweep_untag()s after the run).  Resuming (c->resume), a probe
 * whose run is stored sets pt->stored_run instead (nothing is written; the
 * caller reads the run back), and a stored probe with another policy or
 * value fails "--resume: search N: probe K is stored as ...".  Errors
 * "--db: ...".  Cost: 2 rows. */
int job_search_point(job_search *c, double x, job_probe_point *pt, kvs_err *err);

/* Check the probe's run (run_id, summary) against the SLOs into out and
 * store its verdict (unless pt->stored_row: a resumed probe whose verdict
 * is stored; nothing is written).  Cost: one row. */
int job_search_record(job_search *c, const job_probe_point *pt, double x, int64_t run_id,
                      const run_summary *sum, cap_probe *out, kvs_err *err);

/* Store the answer of the search for c->base's policy.  Cost: one row. */
int job_search_store_result(job_search *c, const char *slo_text, const cap_result *r,
                            kvs_err *err);

/* ------------------------------------------------------------ sweep plan (job_sweep.c) */

/* A sweep plan: the base run flags, the grid, the sweep's id in the
 * database and the points still to run.  The CLI builds it (a new sweep
 * from flags, or --resume from the `sweeps` row) and runs each point with
 * the functions below, in one process, in forked workers or over MPI
 * ranks. */
typedef struct job_sweep {
    job_opts base;       /* the base flags of every point */
    sweep_grid grid;     /* the varied flags */
    char *base_args;     /* base flags as stored: one argument per line (owned) */
    char *grid_text;     /* canonical grid text (owned) */
    int64_t sweep_id;    /* runs.sweep_id of every point */
    int64_t *todo;       /* [n_todo] point indices without a run, ascending (owned) */
    int64_t n_todo;      /* entries of todo */
} job_sweep;

/* Rebuild a plan's base flags and grid from stored texts (as in the sweeps
 * row), `where` naming their origin for errors ("sweep 3: ..."), cmd the
 * subcommand for help hints; no database access.  Free with job_sweep_free
 * (also after a failure).  Cost: O(text length). */
int job_sweep_from_texts(job_sweep *p, const char *base_args, const char *grid_text,
                         const char *where, const char *cmd, kvs_err *err);
void job_sweep_free(job_sweep *p);

/* The run flags of point `index`: the base, the point's values, the sweep
 * id and (without --label) a label "sweep ID #INDEX: KEY".  Errors name
 * the axis's origin ("--grid: --max-seqs: ...").  Cost: O(axes x table). */
int job_sweep_point_opts(const job_sweep *p, int64_t index, job_opts *o, kvs_err *err);

/* What job_prepare would reject at point `index`, checked without loading
 * the trace (job_check); errors read "point I (KEY): ...".  Cost: O(axes). */
int job_sweep_point_check(const job_sweep *p, int64_t index, kvs_err *err);

/* Create the sweep's `sweeps` row and its points in st, setting
 * p->sweep_id; errors "--db: ...".  Cost: O(points) rows. */
int job_sweep_create(job_sweep *p, store *st, kvs_err *err);

/* Refuse to resume a sweep whose inputs changed: every trace file recorded
 * when it was created (sweep_inputs) must resolve, from here, to the same
 * absolute path and hold the same bytes (SHA-256).  Errors name the file:
 * "--resume: sweep N: --trace traces/x.csv: ...".  A sweep of an older
 * kvsim (no sweep_inputs rows) is checked against its runs' trace_sha256.
 * Cost: one SHA-256 per input file. */
int job_sweep_check_inputs(const job_sweep *p, store *st, kvs_err *err);

/* Collect the points without a stored run (whose stored key matches) into
 * p->todo / p->n_todo.  Cost: one query over the sweep's points. */
int job_sweep_todo(job_sweep *p, store *st, kvs_err *err);

/* Simulate point `index` without storing it: out gets the config, the
 * trace and the result (status 0), or the error (status 1: failed after it
 * started; 2: before).  For status 2 from a bad point or a failed
 * job_prepare, err gets the details (else err->msg is "").  cost_st is the
 * store for calibrated cost profiles (may be NULL otherwise).  out owns its
 * arrays (run_packed_free); out->res.tr points at out->tr.  Cost: one
 * simulation. */
void job_sweep_simulate(const job_sweep *p, int64_t index, store *cost_st, run_packed *out,
                        kvs_err *err);

/* Store a simulated point (MPI rank 0): the run, or a failed run, tagged
 * as its point (store_sweep_tag).  Fails (errors "point I (KEY): ...")
 * when the point failed or could not be written.  Cost: the run's rows. */
int job_sweep_store(const job_sweep *p, store *st, const run_packed *r, int64_t *run_id,
                    kvs_err *err);

/* ------------------------------------------------------------ compare variants (job_compare.c) */

#define JOB_MAX_VARIANTS 32

/* One engine configuration of `kvsim compare`. */
typedef struct job_variant {
    char name[64];    /* column label */
    char flags[512];  /* "flag=value,switch,..." applied over the base flags */
} job_variant;

/* Parse "NAME:FLAG=VALUE,..." (or a bare NAME).  Errors "--variant: ...".
 * Cost: O(length). */
int job_variant_parse(const char *arg, job_variant *v, kvs_err *err);

/* Apply v's flags to o (run flags by name, without dashes; a bare name for
 * switches; not db, quiet or json).  Errors "--variant NAME: ...".
 * Cost: O(flags x table). */
int job_variant_apply(job_opts *o, const job_variant *v, kvs_err *err);

/* The default variant set for base's workload into vs[JOB_MAX_VARIANTS]:
 * continuous, static, reserved, then priority when the workload has
 * priorities (*no_priorities = 1 when it was left out), then prefix-cache
 * and lpm when it has prompt prefix hashes.  Reads the trace file once (a
 * bad one is left to the runs to report).  Cost: one trace load. */
int job_compare_defaults(const job_opts *base, job_variant *vs, int *n, int *no_priorities);

/* Reserve a compare id: the `compares` row of the n variants vs (their
 * names and flags, one per line), status 'running', in a transaction of its
 * own, so concurrent compares never share an id (store_compare_create).
 * Finish it with store_group_finish(st, "compare", id, ...). */
int job_compare_reserve(store *st, const job_variant *vs, int n, int64_t *id, kvs_err *err);

/* The same for a compare that can be resumed: also stores base_args (the
 * base run flags, one argument per line, each followed by a newline; NULL:
 * not resumable) and the input files of every variant (compare_inputs),
 * in the same transaction.  Errors "--trace ...", "--db: ...". */
int job_compare_create(store *st, const job_opts *base, const char *base_args,
                       const job_variant *vs, int n, int64_t *id, kvs_err *err);

/* Read compare `id` back for --resume: its base flags text (*base_args,
 * malloc'd) and variants (vs[JOB_MAX_VARIANTS], *n).  Errors "--resume:
 * ..." (no such compare, an older one without flags).  A complete compare
 * resumes to its table, running nothing. */
int job_compare_load(store *st, int64_t id, char **base_args, job_variant *vs, int *n,
                     kvs_err *err);

/* KVS_EINVAL "--resume: compare ID ran the variants ..." unless a and b
 * are the same variants in the same order. */
int job_compare_check_same(const job_variant *a, int na, const job_variant *b, int nb,
                           int64_t id, kvs_err *err);

/* Split stored arguments (one per line, each followed by a newline) into
 * argv[0] = argv0, argv[1..]: *argv and *buf are malloc'd (free both).
 * KVS_EINVAL "WHERE: stored arguments do not end in a newline". */
int job_args_split(const char *text, const char *argv0, const char *where, int *argc,
                   char ***argv, char **buf, kvs_err *err);

#endif
