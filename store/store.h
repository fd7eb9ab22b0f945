/* store.h — the SQLite store: owns the schema (versioned, one place:
 * store/schema.c) and writes each run in one transaction, so a reader never
 * sees half a run.  Tables: meta, runs, requests, steps, calibrations,
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

#include "../sim/kvs.h"
#include "../sim/run.h"

typedef struct sqlite3 sqlite3;
typedef struct store store;

#define STORE_SCHEMA_VERSION 1

/* Open (creating if needed) and bring the schema to STORE_SCHEMA_VERSION.
 * Refuses a database with a newer schema.  `path` may be an SQLite URI
 * ("file:runs.db?mode=ro").  Writes nothing when the schema is current, so a
 * read-only file opens (and fails on the first write). */
int store_open(const char *path, store **out, kvs_err *err);
void store_close(store *s);
/* The raw handle, for modules that own extra tables (calibration, query). */
sqlite3 *store_db(store *s);
const char *store_path(const store *s);

/* How long to wait on a locked database: SQLite's busy handler and
 * store_begin's retries give up after `ms` milliseconds and report
 * "database is locked".  store_open uses $KVSIM_BUSY_TIMEOUT_MS when set (a
 * non-negative integer), else 5000; tests set it small. */
void store_set_busy_timeout(store *s, int ms);

/* The SQL script (store/schema.c) that brings a database from schema version
 * `from_version` to from_version + 1; NULL outside [0, STORE_SCHEMA_VERSION).
 * store_open runs them; exposed for docs and tests. */
const char *store_migration_sql(int from_version);

/* Write a finished run: one `runs` row with config, provenance and summary,
 * one `requests` row per request, and `steps` rows when recorded
 * (cfg->record_steps and res->steps); all in one transaction.  *run_id
 * receives the new key.  NaN is stored as NULL.  On failure nothing of the
 * run remains: KVS_EDB "PATH: what: sqlite message", or KVS_EINTERNAL for
 * step member offsets outside res->members.  Cost: O(requests + steps)
 * inserts, about a million rows per second or two. */
int store_write_run(store *s, const run_config *cfg, const run_result *res,
                    int64_t *run_id, kvs_err *err);

/* Record a run that failed after it started: a `runs` row with
 * status='failed' and the error text, and nothing else. */
int store_write_failed_run(store *s, const run_config *cfg, const trace *tr,
                           const char *error, const char *started_at,
                           double wall_s, int64_t *run_id, kvs_err *err);

/* Run one statement in a transaction helper: BEGIN IMMEDIATE / COMMIT /
 * ROLLBACK with busy retries.  Used by every writer.  store_begin retries
 * SQLITE_BUSY until the busy timeout, then fails with KVS_EDB naming the path
 * ("PATH: database is locked"); store_commit likewise retries a busy COMMIT
 * and on failure leaves the transaction open (call store_rollback);
 * store_rollback is a no-op when no transaction is open. */
int store_begin(store *s, kvs_err *err);
int store_commit(store *s, kvs_err *err);
void store_rollback(store *s);

#endif
