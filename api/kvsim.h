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

/* "0.2.0": the library's version. */
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
} kvsim_request;

/* Requests of the executed run (0 before execute), and request i of them.
 * KVSIM_EINVAL for i out of range.  Cost: O(1). */
int64_t kvsim_run_request_count(const kvsim_run *r);
int kvsim_run_request(const kvsim_run *r, int64_t i, kvsim_request *out);

#ifdef __cplusplus
}
#endif

#endif
