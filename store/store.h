/* store.h — the SQLite store: owns the schema (versioned, one place:
 * store/schema.c, whose result for a new file is recorded in
 * store/schema_current.c) and writes each run in one transaction, so a
 * reader never sees half a run.  Tables: meta, runs, request_rows (behind
 * the requests view), step_rows (behind the steps view), calibrations,
 * kernel_measurements, profiles, validations, validation_steps.
 *
 * The database is opened in WAL mode with a busy timeout; a locked, read-only
 * or full database is reported as KVS_EDB with the path in the message.  A
 * store (and its raw handle) is used by one thread at a time: the connection
 * is opened without SQLite's internal mutexes.
 */
#ifndef STORE_H
#define STORE_H

#include <stdint.h>

#include "../base/kvs.h"
#include "../sim/run.h"

typedef struct sqlite3 sqlite3;
typedef struct store store;

#define STORE_SCHEMA_VERSION 14

/* Open (creating if needed) and bring the schema to STORE_SCHEMA_VERSION.
 * Refuses a database with a newer schema.  `path` may be an SQLite URI
 * ("file:runs.db?mode=ro").  Writes nothing when the schema is current, so a
 * read-only file opens (and fails on the first write). */
int store_open(const char *path, store **out, kvs_err *err);
void store_close(store *s);
/* KVS_EDB "PATH: attempt to write a readonly database" when the database
 * was opened read-only (a ?mode=ro URI, or a file or directory without write
 * permission), so a command can fail before hours of simulation rather than
 * at its first write.  Cost: O(1). */
int store_require_writable(store *s, kvs_err *err);
/* store_open, then store_require_writable (closing it on failure), then
 * store_spool_import of any runs an earlier writer had to spool (best
 * effort: a spool that cannot be imported now stays for the next writer). */
int store_open_writable(const char *path, store **out, kvs_err *err);
/* For one run into a database that may not exist yet (`kvsim run`): when
 * `path` names no file, the database is built in a private file beside it
 * (PATH.kvsim-new-PID-N, from the schema image) with its journal in memory
 * and no syncs, so a run's request rows go straight into their table (no staged
 * copy) and are written once (no WAL to checkpoint); store_publish then
 * syncs that file and hard-links it at `path`.  No other process sees the
 * database before that, so no one waits on it; if kvsim stops first,
 * store_close (or, after a crash, nothing) leaves no file at `path`.
 * When `path` exists (or the image cannot be used) this is
 * store_open_writable.  store_path names `path` throughout.  Private files
 * of `path` that a killed kvsim left (its PID gone, a minute old) are
 * removed first. */
int store_open_new(const char *path, store **out, kvs_err *err);
/* 1 while s is a private file store_publish has not linked yet. */
int store_pending(const store *s);
/* Link a pending store's file at its path (a no-op for any other store):
 * back to WAL, close, fsync, link, fsync the directory; s then goes on as
 * a store on path, its connection opened again at its first use
 * (store_db), not before: a run's store is usually only closed next.
 * *raced = 1 when another process created path meanwhile (or the link
 * failed otherwise, e.g. on a filesystem without hard links): the private
 * file is dropped, s is opened on the database at path (made by SQLite if
 * need be), and what was written must be written again (job_execute does).  Cost: one fsync of the file and one
 * of its directory. */
int store_publish(store *s, int *raced, kvs_err *err);
/* The raw handle, for modules that own extra tables (calibration, query). */
sqlite3 *store_db(store *s);
const char *store_path(const store *s);
/* The last SQLite failure on s as one error line, "PATH: WHAT: message"
 * (with the system's error for an I/O failure or a full disk; WHAT may be
 * NULL); returns KVS_EDB.  For the store's modules. */
int store_fail(const store *s, kvs_err *err, const char *what);
/* Prepare sql, bind its parameters ?1, ?2, ... from the arguments that
 * follow, one per character of types ('i' int64_t; 'p' int64_t, NULL when
 * not positive (an optional id); 't' const char *, NULL binds NULL; 'd'
 * double), step it until done (rows are dropped) and
 * finalize it.  KVS_OK, or store_fail(s, err, what).  No transaction of
 * its own. */
int store_exec(store *s, kvs_err *err, const char *what, const char *sql, const char *types,
               ...);
/* 1 when the database lives in a file, 0 for ":memory:" or a temporary
 * database (whose runs are gone when it closes). */
int store_has_file(store *s);

/* How long to wait on a locked database: SQLite's busy handler and
 * store_begin's retries give up after `ms` milliseconds and report
 * "database is locked".  store_open uses $KVSIM_BUSY_TIMEOUT_MS when set (a
 * non-negative integer), else 5000; tests set it small. */
void store_set_busy_timeout(store *s, int ms);

/* Waiting for a locked database without losing the run (store_spool.h):
 * store_save_run retries for up to `limit_s` seconds (store_open reads
 * $KVSIM_DB_WAIT_S, else 600 s) and, once it has waited a few seconds,
 * calls fn(ctx, path, waited_s, limit_s) every few seconds so that the
 * caller can say so (the library prints nothing).  fn may be NULL. */
typedef void (*store_wait_fn)(void *ctx, const char *path, double waited_s, double limit_s);
void store_set_wait(store *s, double limit_s, store_wait_fn fn, void *ctx);
double store_wait_limit(const store *s);
/* Call the wait hook (if any) with the time waited so far, s. */
void store_wait_note(store *s, double waited_s);
/* 1 when the last store_begin or store_commit gave up because the database
 * was locked (as opposed to any other failure), else 0. */
int store_busy(const store *s);
/* The busy timeout in ms (store_set_busy_timeout). */
int store_busy_timeout(const store *s);

/* The SQL script (store/schema.c) that brings a database from schema version
 * `from_version` to from_version + 1; NULL outside [0, STORE_SCHEMA_VERSION).
 * store_open runs them; exposed for docs and tests. */
const char *store_migration_sql(int from_version);

/* A database with no objects at all (a new file) gets the whole current
 * schema in one script instead of the migrations one by one (about 10x
 * less CPU: each ALTER TABLE makes SQLite re-read the whole schema).  The
 * script is a recording of what the migrations 0 -> STORE_SCHEMA_VERSION
 * leave in sqlite_master, object by object in creation order, kept in
 * store/schema_current.c with the fingerprint of the migration scripts it
 * was recorded from; tests/test_schema.c checks that replaying it gives
 * the same sqlite_master, byte for byte, and `KVSIM_WRITE_SCHEMA=1
 * build/test_schema` records it again after a schema change.
 * store_schema_fresh_sql returns NULL when the recording is stale (its
 * fingerprint is not store_schema_fingerprint()); store_open then runs the
 * migrations, so a stale recording costs time, never a wrong schema. */
const char *store_schema_fresh_sql(void);
/* FNV-1a of every migration script and its version; never 0. */
uint64_t store_schema_fingerprint(void);

/* What store_open did to the schema, for tests and diagnostics. */
typedef enum store_schema_how {
    STORE_SCHEMA_CURRENT = 0, /* already at STORE_SCHEMA_VERSION: nothing */
    STORE_SCHEMA_FRESH,       /* a new file: the recorded script */
    STORE_SCHEMA_MIGRATED,    /* an older or foreign file: the migrations */
    STORE_SCHEMA_IMAGE        /* a new file written from the recorded image (store_image.h) */
} store_schema_how;
store_schema_how store_schema_opened(const store *s);

/* Write a finished run: one `runs` row with config, provenance and summary,
 * one `requests` row per request, and `steps` rows when recorded
 * (cfg->record_steps and res->steps); all in one transaction.  *run_id
 * receives the new key.  NaN is stored as NULL.  On failure nothing of the
 * run remains: KVS_EDB "PATH: what: sqlite message", or KVS_EINTERNAL for
 * what the row tables no longer check row by row (a request status that is
 * not final, a length below 1, a step kind outside prefill/decode/mixed,
 * an id beyond the key's 32 bits, step member offsets outside
 * res->members), found before any row is written.  Rows go in 64 per
 * INSERT.  Cost: O(requests + steps) inserts, about a million request
 * rows per second. */
int store_write_run(store *s, const run_config *cfg, const run_result *res,
                    int64_t *run_id, kvs_err *err);

/* The run_id the next run will take (AUTOINCREMENT's next); another writer
 * may take it first.  Cost: one read. */
int store_next_run_id(store *s, int64_t *run_id, kvs_err *err);

/* Request rows staged while the run simulates (job/job_stream.c): the
 * simulation holds no lock on the database (docs/hardening.md), so the
 * rows go into a private temporary database attached to the store's
 * connection ("kvsim_stage", deleted when detached), keyed for the run id
 * the run is expected to take, and the run's own write copies them in.
 *   store_stage_open   attach it and make its request_rows as main's; the
 *                      connection must be idle (no transaction).
 *   store_stage_rows   stage the rows [lo, hi) of a live run (sim/run.h
 *                      run_live_row), lo = those staged so far, checked as
 *                      store_write_run checks them, in one transaction of
 *                      the staging database alone.  While a thread stages,
 *                      no other uses the store.
 *   store_stage_count  how many are staged: requests [0, count).
 *   store_stage_close  detach it (its file goes); NULL is a no-op.
 * store_write_run_staged is store_write_run with the first count rows
 * copied from the stage: record by record when the run took the expected
 * id (SQLite's transfer optimisation, about 3x cheaper than inserting
 * them), with the keys moved otherwise.  The stored rows are bit for bit
 * those of store_write_run; g NULL is store_write_run. */
typedef struct store_stage store_stage;
int store_stage_open(store *s, const trace *tr, store_stage **out, kvs_err *err);
int store_stage_rows(store_stage *g, const run_live *live, int64_t lo, int64_t hi, kvs_err *err);
int64_t store_stage_count(const store_stage *g);
void store_stage_close(store_stage *g);
int store_write_run_staged(store *s, const run_config *cfg, const run_result *res,
                           const store_stage *g, int64_t *run_id, kvs_err *err);

/* Record a run that failed after it started: a `runs` row with
 * status='failed' and the error text, and nothing else. */
int store_write_failed_run(store *s, const run_config *cfg, const trace *tr,
                           const char *error, const char *started_at,
                           double wall_s, int64_t *run_id, kvs_err *err);

/* A `runs` row read back through the run_fields table (sim/run_fields.h). */
typedef struct store_run_row {
    int64_t run_id;
    char status[16];         /* "finished" or "failed" */
    char error[1024];        /* why it failed; "" when finished */
    char kvsim_version[32];  /* the kvsim that wrote it */
    char started_at[32];     /* ISO-8601 UTC */
    char trace_sha256[65];   /* "" for a synthetic trace */
    double wall_s;           /* simulation wall time, s; NaN if unknown */
    run_config cfg;          /* every parameter column (run_config_defaults first) */
    run_summary sum;         /* every metric column (NaN where NULL) */
} store_run_row;

/* Read run `run_id` back: every column of the run_fields table, by name,
 * each value checked as the table types it (an unknown enum name or an
 * over-long text is KVS_EINVAL naming runs.COLUMN).  A missing run is
 * KVS_EINVAL "no such run N".  Takes the raw handle (store_db) so that
 * modules holding only a connection read runs the same way.  Cost: one
 * indexed SELECT. */
int store_read_run(sqlite3 *db, int64_t run_id, store_run_row *out, kvs_err *err);

/* Run one statement in a transaction helper: BEGIN IMMEDIATE / COMMIT /
 * ROLLBACK with busy retries.  Used by every writer.  store_begin retries
 * SQLITE_BUSY until the busy timeout, then fails with KVS_EDB naming the path
 * ("PATH: database is locked"); store_commit likewise retries a busy COMMIT
 * and on failure leaves the transaction open (call store_rollback);
 * store_rollback is a no-op when no transaction is open. */
int store_begin(store *s, kvs_err *err);
int store_commit(store *s, kvs_err *err);
void store_rollback(store *s);

/* ------------------------------------------------ sweeps and searches
 * (store/views.c) Writers and readers of the tables grouping runs into
 * `kvsim sweep` grids and `kvsim capacity --search` searches (sweeps,
 * sweep_point_params, sweep_points, search_probes, search_results; created
 * with the rest of the schema, with the views sweep_params, sweep_runs,
 * run_load, policy_at_load and slo_attainment); docs/exploration.md
 * documents them. */

/* Groups (store/store_groups.c).  A `kvsim compare` reserves its id by
 * inserting its `compares` row (status 'running', with this process's pid
 * and host) in a transaction of its own before its first run; the
 * AUTOINCREMENT key is never handed out twice.  store_group_finish records
 * 'complete' or 'interrupted' for kind "compare" or "sweep" (sweeps and
 * capacity searches); store_group_running marks a resumed group running
 * again (one transaction of its own that also drops the sweep_points or
 * compare_runs rows whose run no longer exists, so that point runs
 * again); store_groups_mark_stale marks 'interrupted' every group still
 * 'running' whose process on this host is gone (a SIGKILL). */
int store_compare_create(store *s, const char *variants, int64_t n_runs, int64_t *compare_id,
                         kvs_err *err);
/* The same with what `kvsim compare --resume` needs (schema 10): the base
 * run flags (one argument per line; NULL = not resumable) and the input
 * files (compare_inputs rows), written in the same transaction. */
typedef struct store_compare_def {
    const char *variants;            /* "NAME[:FLAGS]" per line */
    const char *base_args;           /* base flags, one argument per line; NULL = none */
    int64_t n_runs;                  /* variants */
    int n_inputs;                    /* input files; 0 = none */
    const char *const *input_path;   /* [n_inputs] path as given */
    const char *const *input_abs;    /* [n_inputs] absolute path */
    const char *const *input_sha256; /* [n_inputs] hex SHA-256 of the bytes */
} store_compare_def;
int store_compare_create_def(store *s, const store_compare_def *def, int64_t *compare_id,
                             kvs_err *err);
typedef struct store_compare_info {
    char *variants;      /* owned */
    char *base_args;     /* owned */
    int64_t n_runs;      /* variants */
    char status[16];     /* running | complete | interrupted */
} store_compare_info;
/* Read a compare's row; KVS_EINVAL "PATH: no compare N" when absent, or
 * when it has no stored flags (an older compare). */
int store_compare_get(store *s, int64_t compare_id, store_compare_info *out, kvs_err *err);
void store_compare_info_free(store_compare_info *info);
/* Make the next runs written through this store whose cfg->compare_id is
 * `compare_id` variant `variant_index` (named `variant`) of it: as
 * store_sweep_tag, a TEMP trigger inserts the compare_runs row inside the
 * run's own transaction.  store_compare_untag stops tagging. */
int store_compare_tag(store *s, int64_t compare_id, int64_t variant_index, const char *variant,
                      kvs_err *err);
void store_compare_untag(store *s);
/* run_ids[i] = the run of variant i (i < n), 0 when it has none (a row
 * whose run was deleted counts as none). */
int store_compare_done(store *s, int64_t compare_id, int64_t n, int64_t *run_ids,
                       kvs_err *err);
/* Call fn(ctx, path, abs_path, sha256) for each input row of group `id` of
 * kind "sweep" (sweeps and searches: sweep_inputs) or "compare"
 * (compare_inputs), in path order; a non-zero return stops and is
 * returned. */
int store_group_inputs(store *s, const char *kind, int64_t id,
                       int (*fn)(void *ctx, const char *path, const char *abs_path,
                                 const char *sha256),
                       void *ctx, kvs_err *err);
int store_group_finish(store *s, const char *kind, int64_t id, const char *status,
                       kvs_err *err);
int store_group_running(store *s, const char *kind, int64_t id, kvs_err *err);
int store_groups_mark_stale(store *s, int64_t *n_marked, kvs_err *err);

/* A sweep to create: kind "grid" or "search", its grid text and base run
 * arguments (both stored verbatim), n_points (> 0 for a grid; 0 = grown
 * point by point) and, for a grid, every point's parameter values:
 * value(ctx, point, i) is the value of params[i] at `point`. */
typedef struct store_sweep_def {
    const char *kind;                /* "grid" or "search" */
    const char *grid;                /* grid text / search description */
    const char *base_args;           /* base flags, one argument per line */
    int64_t n_points;                /* points of a grid; 0 for a search */
    int n_params;                    /* parameters varied per point */
    const char *const *params;       /* [n_params] names */
    const char *(*value)(void *ctx, int64_t point, int param); /* a point's value;
                                                                  * read before the next call */
    void *ctx;                       /* for value() */
    int n_inputs;                    /* input files (sweep_inputs rows); 0 = none */
    const char *const *input_path;   /* [n_inputs] path as given */
    const char *const *input_abs;    /* [n_inputs] absolute path */
    const char *const *input_sha256; /* [n_inputs] hex SHA-256 of the bytes */
} store_sweep_def;

/* Allocate a sweep: its `sweeps` row (status 'running'), (grid) every
 * point's sweep_point_params rows and its sweep_inputs rows, in one
 * transaction of their own.  Cost:
 * O(n_points * n_params) inserts. */
int store_sweep_create(store *s, const store_sweep_def *def, int64_t *sweep_id,
                       kvs_err *err);
/* Add one point's parameters to a sweep (a search probe), in a transaction
 * of its own. */
int store_sweep_add_point(store *s, int64_t sweep_id, int64_t point_index, int n,
                          const char *const *params, const char *const *values,
                          kvs_err *err);
/* Make the next runs written through this store whose cfg->sweep_id is
 * `sweep_id` point `point_index` of it: a TEMP trigger on `runs` inserts
 * the sweep_points row inside the run's own transaction, so the run and its
 * point row are written together or not at all (a second run for a point
 * that already has one fails, writing nothing).  store_sweep_untag stops
 * tagging.  Cost: two small statements. */
int store_sweep_tag(store *s, int64_t sweep_id, int64_t point_index, const char *point_key,
                    kvs_err *err);
void store_sweep_untag(store *s);
/* With a tag set: the point's parameters (sweep_point_params rows), also
 * inserted by the run's own INSERT (a search probe writes nothing before
 * its run, and a spooled probe carries them).  Cleared by
 * store_sweep_untag. */
int store_sweep_tag_params(store *s, int n, const char *const *params,
                           const char *const *values, kvs_err *err);

typedef struct store_sweep_info {
    char kind[16];       /* "grid" or "search" */
    char *grid;          /* owned */
    char *base_args;     /* owned */
    int64_t n_points;    /* 0 when not fixed */
} store_sweep_info;
/* Call fn(ctx, path, abs_path, sha256) for each sweep_inputs row of the
 * sweep (path order); a non-zero return stops and is returned. */
int store_sweep_inputs(store *s, int64_t sweep_id,
                       int (*fn)(void *ctx, const char *path, const char *abs_path,
                                 const char *sha256),
                       void *ctx, kvs_err *err);
/* Read a sweep's row; KVS_EINVAL "PATH: no sweep N" when absent. */
int store_sweep_get(store *s, int64_t sweep_id, store_sweep_info *out, kvs_err *err);
void store_sweep_info_free(store_sweep_info *info);
/* run_ids[p] = the run of point p, 0 when it has none (p < n_points; a
 * point row whose run was deleted counts as none).
 * check_key(ctx, p, key), when given, returns non-zero if the stored key is
 * not point p's, which fails with KVS_EDB. */
int store_sweep_done(store *s, int64_t sweep_id, int64_t n_points, int64_t *run_ids,
                     int (*check_key)(void *ctx, int64_t point, const char *key), void *ctx,
                     kvs_err *err);

/* Record a search probe (autocommit): its run, the policy, the searched
 * parameter and value, whether the SLOs held and why not. */
int store_search_probe(store *s, int64_t sweep_id, int64_t point_index, int64_t run_id,
                       const char *policy, const char *param, double value, int holds,
                       const char *verdict, kvs_err *err);
typedef struct store_search_row {
    const char *policy, *param, *slo; /* policy searched, "rate" | "rate_scale" | "tp", SLO text */
    const char *status;               /* bracketed | found | unreachable | unbounded */
    double lo, hi;                    /* highest value that holds, lowest that fails */
    int64_t lo_run_id, hi_run_id;     /* their runs; 0 = none (lo/hi stored NULL) */
    int64_t best_run_id;              /* the best probe (unreachable); 0 = none */
    int64_t probes;                   /* probes run for this policy */
} store_search_row;
int store_search_result(store *s, int64_t sweep_id, const store_search_row *row, kvs_err *err);
/* (store_search_probe and store_search_result replace the row a resumed
 * search writes again.) */

/* What a resumed search finds stored for probe `point_index`: its
 * sweep_point_params (policy and `param`), and its run (0 = none, or the
 * run was deleted). */
typedef struct store_search_point {
    int found;          /* 1 when the point's parameters are stored */
    char policy[64];    /* its policy value */
    char value[64];     /* its `param` value, as stored */
    int64_t run_id;     /* its run in sweep_points; 0 = none */
    int has_probe;      /* 1 when its search_probes row is stored too */
} store_search_point;
int store_search_point_get(store *s, int64_t sweep_id, int64_t point_index, const char *param,
                           store_search_point *out, kvs_err *err);

#endif
