/* kvsim.h — kvsim's public C API: configure a run by flag name, simulate it,
 * store it, and read its results; the surface the Python package binds.
 *
 * Everything goes through two opaque handles:
 *   kvsim_db   a results database (SQLite), opened for writing;
 *   kvsim_run  one run: set its flags by name (the names and values of
 *              `kvsim run --help`, without "--"), execute it (simulate, and
 *              store when given a database), then read its summary as JSON
 *              and its requests row by row.
 * Calls return a kvsim_status (0 on success).  On failure the handle keeps
 * one line naming the flag, file or column at fault (kvsim_run_error /
 * kvsim_db_error), the same line the command-line tool prints; nothing is
 * printed and the process never exits.  A handle is used by one thread at
 * a time; different handles may run in parallel threads (a database handle
 * is shared by runs of one thread only).  Sizes are int64_t; times are
 * seconds from the trace's start; NaN means "no value".
 *
 * This header includes nothing of the project and is stable: fields are
 * only added at the end of the public structs, and functions only added.
 */
#ifndef KVSIM_API_H
#define KVSIM_API_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum kvsim_status {
    KVSIM_OK = 0,
    KVSIM_EINVAL = 1,    /* bad input: a flag, a config, a trace */
    KVSIM_EIO = 2,       /* a file could not be read or written */
    KVSIM_ENOMEM = 3,    /* out of memory */
    KVSIM_EDB = 4,       /* the database: locked, read-only, full, corrupt */
    KVSIM_EDEVICE = 5,   /* a compute device absent or failed */
    KVSIM_EINTERNAL = 6  /* a kvsim bug */
} kvsim_status;

typedef struct kvsim_db kvsim_db;
typedef struct kvsim_run kvsim_run;

/* "0.3.0": the library's version. */
const char *kvsim_version(void);

/* Open (creating if needed) a results database for writing.  On failure
 * *out is NULL and err (may be NULL) gets the one-line message. */
int kvsim_db_open(const char *path, kvsim_db **out, char err[1024]);
void kvsim_db_close(kvsim_db *db);

/* A new run with the defaults of `kvsim run` (Llama-3-8B on an A100-80GB,
 * the shipped Azure conversation trace, engine vllm-v1, roofline cost).
 * NULL when out of memory. */
kvsim_run *kvsim_run_new(void);
void kvsim_run_free(kvsim_run *r);

/* Set flag `name` ("model", "max-seqs", "engine", ...) to `value` (NULL or
 * "" for a switch such as "prefix-caching").  Errors name the flag:
 * "--max-seqs: 'x' is not an integer".  Cost: O(flags). */
int kvsim_run_set(kvsim_run *r, const char *name, const char *value);

/* Simulate the run; with db non-NULL also store it (one transaction) and
 * set its run id.  A run may be executed once.  Cost: the simulation,
 * O(events log), and one row per request. */
int kvsim_run_execute(kvsim_run *r, kvsim_db *db);

/* The last error of r ("" if none); valid until the next call on r. */
const char *kvsim_run_error(const kvsim_run *r);
/* The stored run's id (0 before it was stored). */
int64_t kvsim_run_id(const kvsim_run *r);

/* The summary as one JSON object (the keys of `kvsim run --json`):
 * malloc'd, the caller frees it; NULL before execute or out of memory. */
char *kvsim_run_summary_json(const kvsim_run *r);

/* One request's outcome, as its `requests` row. */
typedef struct kvsim_request {
    int64_t req_id;          /* its 0-based row in the (rate-scaled) trace */
    double arrival_s;        /* seconds since the trace's start */
    int64_t prompt_tokens;   /* P */
    int64_t output_tokens;   /* O */
    int32_t priority;        /* lower is served first */
    int32_t finished;        /* 1 finished, 0 rejected */
    double first_token_s;    /* NaN if rejected */
    double finish_s;         /* NaN if rejected */
    int32_t preemptions;     /* recompute + swap */
    int32_t swaps;           /* swap-outs among them */
    double swapped_s;        /* seconds swapped out to the host */
    int32_t replica;         /* the engine of a cluster that served it (0: one engine);
                                under --pd the prefill replica */
    int32_t decode_replica;  /* --pd: the decode replica, -1 none (the table's NULL) */
    double kv_transfer_s;    /* --pd: seconds its KV took over the link; NaN none */
    double max_itl_s;        /* largest gap between two of its tokens, s; NaN with
                                fewer than two */
    int32_t reject_reason;   /* 0 not rejected, 1 context, 2 token budget, 3 KV
                                capacity (requests.reject_reason) */
    int32_t pad_;            /* zero */
} kvsim_request;

/* Requests of the executed run (0 before execute), and request i of them.
 * KVSIM_EINVAL for i out of range.  Cost: O(1). */
int64_t kvsim_run_request_count(const kvsim_run *r);
int kvsim_run_request(const kvsim_run *r, int64_t i, kvsim_request *out);
/* Requests [first, first + n) into out[n] at once.  KVSIM_EINVAL when the
 * range is not within the run's requests.  Cost: O(n). */
int kvsim_run_requests(const kvsim_run *r, int64_t first, int64_t n, kvsim_request *out);

/* ------------------------------------------------------------ steps */

/* One simulated step, as its `steps` row (without the members blob).
 * Steps are kept only when the run had "record-steps" set. */
typedef struct kvsim_step {
    int64_t step_id;         /* 0-based step number */
    double start_s;          /* seconds since the trace's start */
    double dur_s;            /* compute + swap transfer seconds */
    char kind[8];            /* "prefill", "decode" or "mixed" */
    int64_t n_prefill;       /* prefill requests (chunks) */
    int64_t n_decode;        /* decode requests */
    int64_t tokens;          /* tokens processed */
    int64_t kv_read;         /* tokens of KV read by the decodes */
    int64_t prefill_sq;      /* sum of squared prefill chunk lengths, tokens^2 */
    int64_t kv_blocks_used;  /* blocks held during the step */
    int64_t n_waiting;       /* waiting queue at step start */
    int64_t n_running;       /* running requests */
    int64_t n_preempted;     /* preempted while forming the step */
    int64_t swap_out_blocks; /* blocks moved to the host */
    int64_t swap_in_blocks;  /* blocks moved back */
    int64_t replica;         /* the engine of a cluster that ran it (0: one engine) */
} kvsim_step;

/* Steps of the executed run (0 before execute or without record-steps),
 * and step i of them.  KVSIM_EINVAL for i out of range.  Cost: O(1). */
int64_t kvsim_run_step_count(const kvsim_run *r);
int kvsim_run_step(const kvsim_run *r, int64_t i, kvsim_step *out);
/* Steps [first, first + n) into out[n] at once, as kvsim_run_requests. */
int kvsim_run_steps(const kvsim_run *r, int64_t first, int64_t n, kvsim_step *out);

/* Store an executed run that was executed without a database (so runs can
 * simulate in parallel threads and be stored by one).  Sets its run id;
 * KVSIM_EINVAL when not executed or already stored.  Errors "--db: ...". */
int kvsim_run_store(kvsim_run *r, kvsim_db *db);

/* The KV memory picture of r's configuration on one GPU, before it runs:
 * the model and GPU looked up, the engine profile's defaults applied and
 * the configuration resolved as the run would be, then models/'s KV
 * capacity (docs/semantics.md section 2).  One JSON object: tp, ep, cp,
 * block_size, max_batched_tokens, max_seqs, gpu_mem_bytes, usable_bytes,
 * weight_bytes, activation_bytes, kv_bytes, kv_bytes_per_token,
 * block_bytes, kv_blocks (the capacity), kv_tokens and total_blocks (what
 * the run uses: --kv-blocks when given); bytes per GPU.  malloc'd; NULL
 * with r's error set on failure.  Cost: a lookup. */
char *kvsim_run_memory_json(kvsim_run *r);

/* ------------------------------------------------------------ run flags */

/* One run flag of `kvsim run --help`, from the job layer's table. */
typedef struct kvsim_flag {
    const char *name;      /* "max-seqs" (no dashes) */
    const char *kind;      /* "text", "int", "uint", "number", "choice",
                              "switch", "slo" or "off" (a switch turning
                              another off) */
    const char *section;   /* --help heading: "workload", "engine", ... */
    const char *metavar;   /* value placeholder ("N"); NULL for switches */
    const char *help;      /* --help text, including its "(default ...)" */
    const char *negation;  /* the switch that undoes this one, or NULL */
    int per_run;           /* 1 if sweeps and compares may vary it */
} kvsim_flag;

/* The run flags: kvsim_flag_count() of them, in --help order; static
 * storage.  KVSIM_EINVAL for i out of range.  Cost: O(1). */
int64_t kvsim_flag_count(void);
int kvsim_flag_at(int64_t i, kvsim_flag *out);

/* ------------------------------------------------------------ catalogue */

/* The built-in models and shipped Hugging Face configs, and the built-in
 * GPUs, as one JSON array of objects (keys as `kvsim models --json` and
 * `kvsim gpus --json` use); malloc'd, the caller frees; NULL when out of
 * memory.  Cost: O(models), reading each shipped config once. */
char *kvsim_models_json(void);
char *kvsim_gpus_json(void);

/* The roofline constants a run of engine profile `engine` ("vllm-v1",
 * "vllm-v0", "trtllm", "sglang") with --cost `cost` ("roofline" or
 * "roofline:KEY=VALUE,...") uses, as `kvsim cost show --engine E --cost C`
 * prints them: a JSON array of {"name", "value", "unit", "from",
 * "source"} objects; malloc'd, the caller frees.  NULL with err set (one
 * line naming the flag) on bad input or out of memory.  Cost: O(constants). */
char *kvsim_cost_constants_json(const char *engine, const char *cost, char err[1024]);

/* ------------------------------------------------------------ compare */

/* The default variants of `kvsim compare` for r's workload as lines
 * "NAME:FLAG=VALUE,...\n" (a bare NAME for the base); malloc'd, NULL when
 * out of memory.  Reads the trace once.  Cost: one trace load. */
char *kvsim_compare_defaults(const kvsim_run *r);

/* Apply a variant "NAME:FLAG=VALUE,..." over r's flags and tag the run as
 * variant NAME of compare `compare_id` (0: untagged), labelled as kvsim
 * compare labels it.  Errors "--variant NAME: ...". */
int kvsim_run_variant(kvsim_run *r, const char *variant, int64_t compare_id);

/* Reserve a compare id in db for n_runs variants (`variants`: their specs,
 * one per line), recorded 'running' in a transaction of its own, so
 * concurrent compares never share an id; finish it with
 * kvsim_db_finish_compare (complete 1: 'complete', 0: 'interrupted').
 * Errors "--db: ...". */
int kvsim_db_reserve_compare(kvsim_db *db, const char *variants, int64_t n_runs, int64_t *out,
                             char err[1024]);
int kvsim_db_finish_compare(kvsim_db *db, int64_t id, int complete, char err[1024]);

/* ------------------------------------------------------------ sweep */

typedef struct kvsim_sweep kvsim_sweep;

/* A sweep grid over base flags: base_args one argument per line
 * ("--model\nllama-2-7b\n--prefix-caching\n"), grid_text one axis per line
 * ("max-seqs=8,16\nrate-scale=1,2\n"), as `kvsim sweep` stores them.  With
 * db non-NULL the sweep and its points are created there (kvsim_sweep_id).
 * Errors name the axis or flag.  Free with kvsim_sweep_free. */
int kvsim_sweep_new(const char *base_args, const char *grid_text, kvsim_db *db,
                    kvsim_sweep **out, char err[1024]);
void kvsim_sweep_free(kvsim_sweep *s);
int64_t kvsim_sweep_point_count(const kvsim_sweep *s);
int64_t kvsim_sweep_id(const kvsim_sweep *s);
/* Point i's key ("max-seqs=8 rate-scale=2") into buf[n]. */
int kvsim_sweep_point_key(const kvsim_sweep *s, int64_t i, char *buf, size_t n);
/* A new run with point i's flags (base, the point's values, the sweep id
 * and its label); *out NULL and err filled on failure.  The run is
 * executed and stored as any other; kvsim_sweep_store_point stores it as
 * the point.  Cost: O(axes x flags). */
int kvsim_sweep_point_run(const kvsim_sweep *s, int64_t i, kvsim_run **out, char err[1024]);
/* Store executed point run r (executed without a database) as point i of
 * the sweep in db.  Errors "point I (KEY): --db: ...". */
int kvsim_sweep_store_point(const kvsim_sweep *s, int64_t i, kvsim_run *r, kvsim_db *db);

/* ------------------------------------------------------------ capacity */

/* `kvsim capacity --search SEARCH --slo SLO [--policies P,...]` over
 * base_args (as kvsim_sweep_new's): search is "rate" or "tp"; policies
 * NULL or "" for the base's.  Every probe is stored in db.  *json gets the
 * object `kvsim capacity --search --json` prints (malloc'd; the caller
 * frees).  Errors as the CLI's. */
int kvsim_capacity_search(const char *base_args, const char *search, const char *slo,
                          const char *policies, kvsim_db *db, char **json, char err[1024]);

/* ------------------------------------------------------------ datasets */

/* `kvsim trace import FORMAT IN -o OUT`: convert dataset `in` ("sharegpt",
 * "burstgpt", "azure2024", "vllm-custom") into native CSV `out`, written
 * atomically.  opts: "NAME=VALUE" lines of the import options
 * (chars-per-token, turns, rate, seed, output-len; a bare "turns"), may be
 * NULL.  counts[3] (may be NULL) gets records read, requests written and
 * records skipped.  Errors as the CLI's ("FILE: record 3: ..."). */
int kvsim_trace_import(const char *format, const char *in, const char *out, const char *opts,
                       int64_t counts[3], char err[1024]);

/* The import formats as "NAME\tDESCRIPTION\n" lines (static storage). */
const char *kvsim_trace_formats(void);

#ifdef __cplusplus
}
#endif

#endif
