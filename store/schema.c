/* schema.c — the whole versioned schema of the kvsim database, as SQL text,
 * in one place.  store_migration_sql(v) is the script that brings a database
 * from version v to v + 1; version 0 is an empty (or foreign) database.  Every
 * statement uses IF NOT EXISTS so a script may be re-run safely.  Units are in
 * the column names (_s seconds, _tok_s tokens per second, ...) and are
 * described in docs/schema.md, which must be updated with this file.
 */
#include "store.h"

#include <pthread.h>
#include <sqlite3.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../sim/run_fields.h"

/* Version 0 -> 1, before and after the `runs` table, which comes from the
 * run_fields table (sim/run_fields.h). */
static const char schema_v1_head[] =
    "CREATE TABLE IF NOT EXISTS meta(\n"
    "  key TEXT PRIMARY KEY,\n"
    "  value TEXT\n"
    ");\n"
    "\n"
    ;

static const char schema_v1_tail[] =
    "CREATE INDEX IF NOT EXISTS runs_compare_id ON runs(compare_id);\n"
    "CREATE INDEX IF NOT EXISTS runs_sweep_id ON runs(sweep_id);\n"
    "\n"
    "CREATE TABLE IF NOT EXISTS requests(\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,\n"
    "  req_id INTEGER NOT NULL,\n"
    "  arrival_s REAL NOT NULL,\n"
    "  prompt_tokens INTEGER NOT NULL CHECK (prompt_tokens >= 1),\n"
    "  output_tokens INTEGER NOT NULL CHECK (output_tokens >= 1),\n"
    "  priority INTEGER NOT NULL,\n"
    "  status TEXT NOT NULL CHECK (status IN ('finished', 'rejected')),\n"
    "  first_token_s REAL,\n"
    "  finish_s REAL,\n"
    "  preemptions INTEGER NOT NULL,\n"
    "  swaps INTEGER NOT NULL,\n"
    "  swapped_s REAL,\n"
    "  PRIMARY KEY (run_id, req_id)\n"
    ") WITHOUT ROWID;\n"
    "\n"
    "CREATE TABLE IF NOT EXISTS steps(\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,\n"
    "  step_id INTEGER NOT NULL,\n"
    "  start_s REAL NOT NULL,\n"
    "  dur_s REAL NOT NULL,\n"
    "  kind TEXT NOT NULL CHECK (kind IN ('prefill', 'decode', 'mixed')),\n"
    "  n_prefill INTEGER NOT NULL,\n"
    "  n_decode INTEGER NOT NULL,\n"
    "  tokens INTEGER NOT NULL,\n"
    "  kv_read INTEGER NOT NULL,\n"
    "  prefill_sq INTEGER NOT NULL,\n"
    "  kv_blocks_used INTEGER NOT NULL,\n"
    "  n_waiting INTEGER NOT NULL,\n"
    "  n_running INTEGER NOT NULL,\n"
    "  n_preempted INTEGER NOT NULL,\n"
    "  swap_out_blocks INTEGER NOT NULL,\n"
    "  swap_in_blocks INTEGER NOT NULL,\n"
    "  members BLOB NOT NULL,\n"
    "  PRIMARY KEY (run_id, step_id)\n"
    ") WITHOUT ROWID;\n"
    "\n"
    "CREATE TABLE IF NOT EXISTS class_metrics(\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,\n"
    "  priority INTEGER NOT NULL,\n"
    "  n_requests INTEGER NOT NULL,\n"
    "  n_finished INTEGER NOT NULL,\n"
    "  n_rejected INTEGER NOT NULL,\n"
    "  ttft_p50_s REAL, ttft_p90_s REAL, ttft_p99_s REAL, ttft_mean_s REAL,\n"
    "  tpot_p50_s REAL, tpot_p90_s REAL, tpot_p99_s REAL, tpot_mean_s REAL,\n"
    "  e2e_p50_s REAL, e2e_p90_s REAL, e2e_p99_s REAL, e2e_mean_s REAL,\n"
    "  slo_attainment REAL,\n"
    "  PRIMARY KEY (run_id, priority)\n"
    ") WITHOUT ROWID;\n"
    "\n"
    "CREATE TABLE IF NOT EXISTS calibrations(\n"
    "  calib_id INTEGER PRIMARY KEY,\n"
    "  created_at TEXT,\n"
    "  device TEXT NOT NULL CHECK (device IN ('cpu', 'cuda')),\n"
    "  device_name TEXT,\n"
    "  gpu TEXT,\n"
    "  model TEXT,\n"
    "  driver_version TEXT,\n"
    "  runtime_version TEXT,\n"
    "  kvsim_version TEXT,\n"
    "  props_json TEXT,\n"
    "  status TEXT\n"
    ");\n"
    "\n"
    "CREATE TABLE IF NOT EXISTS kernel_measurements(\n"
    "  calib_id INTEGER NOT NULL REFERENCES calibrations(calib_id)\n"
    "    ON DELETE CASCADE,\n"
    "  op TEXT NOT NULL,\n"
    "  shape_json TEXT,\n"
    "  tokens INTEGER,\n"
    "  batch INTEGER,\n"
    "  context INTEGER,\n"
    "  median_s REAL,\n"
    "  p10_s REAL,\n"
    "  p90_s REAL,\n"
    "  repeats INTEGER\n"
    ");\n"
    "CREATE INDEX IF NOT EXISTS kernel_measurements_calib\n"
    "  ON kernel_measurements(calib_id, op);\n"
    "\n"
    "CREATE TABLE IF NOT EXISTS profiles(\n"
    "  profile_id INTEGER PRIMARY KEY,\n"
    "  calib_id INTEGER REFERENCES calibrations(calib_id),\n"
    "  created_at TEXT,\n"
    "  device TEXT,\n"
    "  gpu TEXT,\n"
    "  model TEXT,\n"
    "  params_json TEXT,\n"
    "  fit_error_json TEXT\n"
    ");\n"
    "CREATE INDEX IF NOT EXISTS profiles_calib ON profiles(calib_id);\n"
    "\n"
    "CREATE TABLE IF NOT EXISTS validations(\n"
    "  validation_id INTEGER PRIMARY KEY,\n"
    "  run_id INTEGER REFERENCES runs(run_id) ON DELETE CASCADE,\n"
    "  device TEXT,\n"
    "  profile_id INTEGER REFERENCES profiles(profile_id),\n"
    "  created_at TEXT,\n"
    "  max_steps INTEGER,\n"
    "  sampling TEXT,\n"
    "  summary_json TEXT\n"
    ");\n"
    "CREATE INDEX IF NOT EXISTS validations_run ON validations(run_id);\n"
    "\n"
    "CREATE TABLE IF NOT EXISTS validation_steps(\n"
    "  validation_id INTEGER NOT NULL REFERENCES validations(validation_id)\n"
    "    ON DELETE CASCADE,\n"
    "  step_id INTEGER NOT NULL,\n"
    "  predicted_s REAL,\n"
    "  measured_s REAL,\n"
    "  kind TEXT,\n"
    "  batch INTEGER,\n"
    "  PRIMARY KEY (validation_id, step_id)\n"
    ") WITHOUT ROWID;\n"
    "\n"
    "CREATE VIEW IF NOT EXISTS run_summary AS\n"
    "SELECT run_id, label, started_at, model, gpu, tp, batching, policy,\n"
    "       alloc, preemption, cost, n_requests, n_finished, n_rejected,\n"
    "       round(ttft_p50_s * 1000, 1) AS ttft_p50_ms,\n"
    "       round(ttft_p99_s * 1000, 1) AS ttft_p99_ms,\n"
    "       round(tpot_p50_s * 1000, 2) AS tpot_p50_ms,\n"
    "       round(tpot_p99_s * 1000, 2) AS tpot_p99_ms,\n"
    "       round(e2e_p50_s, 3) AS e2e_p50_s,\n"
    "       round(e2e_p99_s, 3) AS e2e_p99_s,\n"
    "       round(throughput_tok_s, 1) AS throughput_tok_s,\n"
    "       round(throughput_req_s, 3) AS throughput_req_s,\n"
    "       preemptions, peak_kv_blocks, kv_blocks,\n"
    "       round(mean_batch, 2) AS mean_batch,\n"
    "       round(slo_attainment, 4) AS slo_attainment,\n"
    "       round(goodput_req_s, 3) AS goodput_req_s\n"
    "FROM runs WHERE status = 'finished';\n"
    "\n"
    "CREATE VIEW IF NOT EXISTS requests_metrics AS\n"
    "SELECT run_id, req_id, arrival_s, prompt_tokens, output_tokens, priority,\n"
    "       status, preemptions, swaps, swapped_s,\n"
    "       first_token_s - arrival_s AS ttft_s,\n"
    "       finish_s - arrival_s AS e2e_s,\n"
    "       CASE WHEN output_tokens > 1\n"
    "            THEN (finish_s - first_token_s) / (output_tokens - 1)\n"
    "       END AS tpot_s,\n"
    "       (finish_s - arrival_s) / output_tokens AS norm_latency_s\n"
    "FROM requests;\n"
    "\n"
    /* exploration: sweeps and capacity searches (docs/exploration.md) */
    "CREATE TABLE IF NOT EXISTS sweeps(\n"
    "  sweep_id INTEGER PRIMARY KEY,\n"
    "  kind TEXT NOT NULL CHECK (kind IN ('grid', 'search')),\n"
    "  created_at TEXT NOT NULL,\n"
    "  kvsim_version TEXT NOT NULL,\n"
    "  grid TEXT NOT NULL,\n"
    "  base_args TEXT NOT NULL,\n"
    "  n_points INTEGER\n"
    ");\n"
    "\n"
    "CREATE TABLE IF NOT EXISTS sweep_point_params(\n"
    "  sweep_id INTEGER NOT NULL REFERENCES sweeps(sweep_id) ON DELETE CASCADE,\n"
    "  point_index INTEGER NOT NULL,\n"
    "  param TEXT NOT NULL,\n"
    "  value TEXT NOT NULL,\n"
    "  PRIMARY KEY (sweep_id, point_index, param)\n"
    ") WITHOUT ROWID;\n"
    "\n"
    "CREATE TABLE IF NOT EXISTS sweep_points(\n"
    "  sweep_id INTEGER NOT NULL REFERENCES sweeps(sweep_id) ON DELETE CASCADE,\n"
    "  point_index INTEGER NOT NULL,\n"
    "  point_key TEXT NOT NULL,\n"
    "  run_id INTEGER NOT NULL UNIQUE REFERENCES runs(run_id) ON DELETE CASCADE,\n"
    "  PRIMARY KEY (sweep_id, point_index)\n"
    ") WITHOUT ROWID;\n"
    "\n"
    "CREATE TABLE IF NOT EXISTS search_probes(\n"
    "  sweep_id INTEGER NOT NULL REFERENCES sweeps(sweep_id) ON DELETE CASCADE,\n"
    "  point_index INTEGER NOT NULL,\n"
    "  run_id INTEGER REFERENCES runs(run_id) ON DELETE CASCADE,\n"
    "  policy TEXT NOT NULL,\n"
    "  param TEXT NOT NULL,\n"
    "  value REAL NOT NULL,\n"
    "  holds INTEGER NOT NULL CHECK (holds IN (0, 1)),\n"
    "  verdict TEXT,\n"
    "  PRIMARY KEY (sweep_id, point_index)\n"
    ") WITHOUT ROWID;\n"
    "\n"
    "CREATE TABLE IF NOT EXISTS search_results(\n"
    "  sweep_id INTEGER NOT NULL REFERENCES sweeps(sweep_id) ON DELETE CASCADE,\n"
    "  policy TEXT NOT NULL,\n"
    "  param TEXT NOT NULL,\n"
    "  slo TEXT NOT NULL,\n"
    "  status TEXT NOT NULL\n"
    "    CHECK (status IN ('bracketed', 'found', 'unreachable', 'unbounded')),\n"
    "  lo REAL,\n"
    "  hi REAL,\n"
    "  lo_run_id INTEGER REFERENCES runs(run_id) ON DELETE SET NULL,\n"
    "  hi_run_id INTEGER REFERENCES runs(run_id) ON DELETE SET NULL,\n"
    "  best_run_id INTEGER REFERENCES runs(run_id) ON DELETE SET NULL,\n"
    "  probes INTEGER NOT NULL,\n"
    "  PRIMARY KEY (sweep_id, policy)\n"
    ") WITHOUT ROWID;\n"
    "\n"
    "CREATE VIEW IF NOT EXISTS sweep_params AS\n"
    "SELECT p.sweep_id, sp.run_id, p.point_index, p.param, p.value\n"
    "FROM sweep_point_params p\n"
    "JOIN sweep_points sp ON sp.sweep_id = p.sweep_id AND sp.point_index = p.point_index;\n"
    "\n"
    "CREATE VIEW IF NOT EXISTS sweep_runs AS\n"
    "SELECT sp.sweep_id, sp.point_index, sp.point_key, r.run_id, r.status, r.error,\n"
    "       r.model, r.gpu, r.tp, r.trace_path, r.synthetic, r.rate_scale, r.seed,\n"
    "       r.batching, r.policy, r.priority_preemption, r.alloc, r.preemption,\n"
    "       r.max_seqs, r.block_size, r.kv_blocks, r.cost,\n"
    "       r.n_requests, r.n_finished, r.n_rejected,\n"
    "       r.ttft_p50_s, r.ttft_p90_s, r.ttft_p99_s,\n"
    "       r.tpot_p50_s, r.tpot_p90_s, r.tpot_p99_s,\n"
    "       r.e2e_p50_s, r.e2e_p90_s, r.e2e_p99_s,\n"
    "       r.throughput_tok_s, r.throughput_req_s, r.preemptions, r.mean_batch,\n"
    "       r.n_steps, r.makespan_s, r.slo_attainment, r.goodput_req_s, r.wall_s\n"
    "FROM sweep_points sp JOIN runs r ON r.run_id = sp.run_id;\n"
    "\n"
    "CREATE VIEW IF NOT EXISTS run_load AS\n"
    "SELECT run_id, count(*) AS n_requests,\n"
    "       max(arrival_s) - min(arrival_s) AS span_s,\n"
    "       CASE WHEN max(arrival_s) > min(arrival_s)\n"
    "            THEN (count(*) - 1) / (max(arrival_s) - min(arrival_s)) END AS offered_req_s,\n"
    "       sum(prompt_tokens) AS prompt_tokens, sum(output_tokens) AS output_tokens\n"
    "FROM requests GROUP BY run_id;\n"
    "\n"
    "CREATE VIEW IF NOT EXISTS policy_at_load AS\n"
    "SELECT coalesce(trace_sha256, synthetic) AS workload,\n"
    "       CASE WHEN synthetic IS NOT NULL THEN seed END AS seed,\n"
    "       rate_scale, model, gpu, tp, cost, run_id,\n"
    "       batching, policy, priority_preemption, alloc, preemption, max_seqs,\n"
    "       ttft_p50_s, ttft_p99_s, tpot_p50_s, tpot_p99_s, e2e_p50_s, e2e_p99_s,\n"
    "       throughput_tok_s, preemptions, slo_attainment, goodput_req_s,\n"
    "       count(*) OVER w AS runs_at_load,\n"
    "       rank() OVER (w ORDER BY e2e_p99_s) AS e2e_p99_rank,\n"
    "       rank() OVER (w ORDER BY throughput_tok_s DESC) AS throughput_rank\n"
    "FROM runs WHERE status = 'finished'\n"
    "WINDOW w AS (PARTITION BY coalesce(trace_sha256, synthetic),\n"
    "             CASE WHEN synthetic IS NOT NULL THEN seed END,\n"
    "             rate_scale, model, gpu, tp, cost);\n"
    "\n"
    "CREATE VIEW IF NOT EXISTS slo_attainment AS\n"
    "SELECT r.run_id, r.slo_ttft_s, r.slo_tpot_s, r.slo_e2e_s,\n"
    "       count(*) AS n_finished,\n"
    "       avg(CASE WHEN r.slo_ttft_s > 0 THEN m.ttft_s <= r.slo_ttft_s END)\n"
    "         AS ttft_attainment,\n"
    "       avg(CASE WHEN r.slo_tpot_s > 0\n"
    "                THEN m.tpot_s IS NULL OR m.tpot_s <= r.slo_tpot_s END)\n"
    "         AS tpot_attainment,\n"
    "       avg(CASE WHEN r.slo_e2e_s > 0 THEN m.e2e_s <= r.slo_e2e_s END)\n"
    "         AS e2e_attainment,\n"
    "       r.slo_attainment AS attainment, r.goodput_req_s\n"
    "FROM runs r JOIN requests_metrics m ON m.run_id = r.run_id\n"
    "WHERE r.status = 'finished' AND m.status = 'finished'\n"
    "  AND (r.slo_ttft_s > 0 OR r.slo_tpot_s > 0 OR r.slo_e2e_s > 0)\n"
    "GROUP BY r.run_id;\n";

/* CREATE TABLE runs from the run_fields columns that exist at version 1. */
static size_t runs_ddl(char *buf, size_t cap)
{
    size_t nf, len = 0;
    const run_field *f = run_fields(&nf);
    len += (size_t)snprintf(buf, cap, "CREATE TABLE IF NOT EXISTS runs(\n"
                                      "  run_id INTEGER PRIMARY KEY");
    for (size_t i = 0; i < nf; i++)
        if (f[i].since == 1)
            len += (size_t)snprintf(len < cap ? buf + len : NULL, len < cap ? cap - len : 0,
                                    ",\n  %s %s", f[i].name, f[i].sql);
    len += (size_t)snprintf(len < cap ? buf + len : NULL, len < cap ? cap - len : 0, "\n);\n");
    return len;
}

/* Version 4 -> 5 (issue 16, hardening): keys that are never reused and
 * groups whose id is reserved before their runs.  SQLite cannot add
 * AUTOINCREMENT to a key in place, so each keyed table is rebuilt: a copy
 * with the same columns, the rows moved, the old table dropped and the copy
 * renamed (store_open runs this with foreign keys off and the legacy
 * rename, so the drop cascades nothing and the views over the tables stay
 * as they are).  The `runs` copy is generated from the run_fields table
 * (hardening_runs_rebuild).  New: `compares` (one row per `kvsim compare`,
 * reserved before its runs), sweeps.status / pid / host, `sweep_inputs`
 * (each input file of a sweep: its path as given, absolute path and
 * SHA-256, checked by --resume), and
 * `spool_imports` (spool files already imported, store_spool.h). */
#define HARDENING_VERSION 5

#define GROUP_STATUS "status TEXT NOT NULL DEFAULT 'running'\n" \
    "    CHECK (status IN ('running', 'complete', 'interrupted')),\n" \
    "  pid INTEGER,\n  host TEXT"

static const char schema_v3_tables[] =
    "CREATE TABLE sweeps_v3(\n"
    "  sweep_id INTEGER PRIMARY KEY AUTOINCREMENT,\n"
    "  kind TEXT NOT NULL CHECK (kind IN ('grid', 'search')),\n"
    "  created_at TEXT NOT NULL,\n"
    "  kvsim_version TEXT NOT NULL,\n"
    "  grid TEXT NOT NULL,\n"
    "  base_args TEXT NOT NULL,\n"
    "  n_points INTEGER,\n"
    "  " GROUP_STATUS "\n"
    ");\n"
    /* an old grid is complete when every point has a run, a search when it
     * has results; anything else was left part-way */
    "INSERT INTO sweeps_v3(sweep_id, kind, created_at, kvsim_version, grid, base_args, n_points,\n"
    "                      status)\n"
    "SELECT sweep_id, kind, created_at, kvsim_version, grid, base_args, n_points,\n"
    "  CASE WHEN (kind = 'grid' AND n_points = (SELECT count(*) FROM sweep_points p\n"
    "                                           WHERE p.sweep_id = w.sweep_id))\n"
    "         OR (kind = 'search' AND EXISTS (SELECT 1 FROM search_results r\n"
    "                                         WHERE r.sweep_id = w.sweep_id))\n"
    "       THEN 'complete' ELSE 'interrupted' END\n"
    "FROM sweeps w;\n"
    "DROP TABLE sweeps;\n"
    "ALTER TABLE sweeps_v3 RENAME TO sweeps;\n"
    "\n"
    "CREATE TABLE calibrations_v3(\n"
    "  calib_id INTEGER PRIMARY KEY AUTOINCREMENT,\n"
    "  created_at TEXT,\n"
    "  device TEXT NOT NULL CHECK (device IN ('cpu', 'cuda')),\n"
    "  device_name TEXT, gpu TEXT, model TEXT, driver_version TEXT, runtime_version TEXT,\n"
    "  kvsim_version TEXT, props_json TEXT, status TEXT\n"
    ");\n"
    "INSERT INTO calibrations_v3 SELECT calib_id, created_at, device, device_name, gpu, model,\n"
    "  driver_version, runtime_version, kvsim_version, props_json, status FROM calibrations;\n"
    "DROP TABLE calibrations;\n"
    "ALTER TABLE calibrations_v3 RENAME TO calibrations;\n"
    "\n"
    "CREATE TABLE profiles_v3(\n"
    "  profile_id INTEGER PRIMARY KEY AUTOINCREMENT,\n"
    "  calib_id INTEGER REFERENCES calibrations(calib_id),\n"
    "  created_at TEXT, device TEXT, gpu TEXT, model TEXT, params_json TEXT, fit_error_json TEXT\n"
    ");\n"
    "INSERT INTO profiles_v3 SELECT profile_id, calib_id, created_at, device, gpu, model,\n"
    "  params_json, fit_error_json FROM profiles;\n"
    "DROP TABLE profiles;\n"
    "ALTER TABLE profiles_v3 RENAME TO profiles;\n"
    "CREATE INDEX IF NOT EXISTS profiles_calib ON profiles(calib_id);\n"
    "\n"
    "CREATE TABLE validations_v3(\n"
    "  validation_id INTEGER PRIMARY KEY AUTOINCREMENT,\n"
    "  run_id INTEGER REFERENCES runs(run_id) ON DELETE CASCADE,\n"
    "  device TEXT,\n"
    "  profile_id INTEGER REFERENCES profiles(profile_id),\n"
    "  created_at TEXT, max_steps INTEGER, sampling TEXT, summary_json TEXT\n"
    ");\n"
    "INSERT INTO validations_v3 SELECT validation_id, run_id, device, profile_id, created_at,\n"
    "  max_steps, sampling, summary_json FROM validations;\n"
    "DROP TABLE validations;\n"
    "ALTER TABLE validations_v3 RENAME TO validations;\n"
    "CREATE INDEX IF NOT EXISTS validations_run ON validations(run_id);\n"
    "\n"
    "CREATE TABLE compares(\n"
    "  compare_id INTEGER PRIMARY KEY AUTOINCREMENT,\n"
    "  created_at TEXT NOT NULL,\n"
    "  kvsim_version TEXT NOT NULL,\n"
    "  variants TEXT NOT NULL,\n"
    "  n_runs INTEGER,\n"
    "  " GROUP_STATUS "\n"
    ");\n"
    "INSERT INTO compares(compare_id, created_at, kvsim_version, variants, n_runs, status)\n"
    "SELECT compare_id, coalesce(min(started_at), ''), min(kvsim_version), '', count(*),\n"
    "       'complete'\n"
    "FROM runs WHERE compare_id IS NOT NULL GROUP BY compare_id;\n"
    "\n"
    /* the input files of a sweep or search, checked on --resume */
    "CREATE TABLE sweep_inputs(\n"
    "  sweep_id INTEGER NOT NULL REFERENCES sweeps(sweep_id) ON DELETE CASCADE,\n"
    "  path TEXT NOT NULL,\n"
    "  abs_path TEXT NOT NULL,\n"
    "  sha256 TEXT NOT NULL,\n"
    "  PRIMARY KEY (sweep_id, path)\n"
    ") WITHOUT ROWID;\n"
    "\n"
    "CREATE TABLE spool_imports(\n"
    "  name TEXT PRIMARY KEY,\n"
    "  run_id INTEGER,\n"
    "  imported_at TEXT NOT NULL\n"
    ");\n";

/* The `runs` rebuild of version HARDENING_VERSION: the columns that exist
 * before it (since < HARDENING_VERSION), under an AUTOINCREMENT key. */
static char *hardening_runs_rebuild(void)
{
    size_t nf;
    const run_field *f = run_fields(&nf);
    char *cols = sqlite3_mprintf("run_id"), *defs = sqlite3_mprintf("");
    for (size_t i = 0; i < nf && cols && defs; i++) {
        if (f[i].since >= HARDENING_VERSION)
            continue;
        char *c = sqlite3_mprintf("%s, %s", cols, f[i].name);
        char *d = sqlite3_mprintf("%s,\n  %s %s", defs, f[i].name, f[i].sql);
        sqlite3_free(cols);
        sqlite3_free(defs);
        cols = c;
        defs = d;
    }
    char *sql = cols && defs
                    ? sqlite3_mprintf("CREATE TABLE runs_v3(\n"
                                      "  run_id INTEGER PRIMARY KEY AUTOINCREMENT%s\n);\n"
                                      "INSERT INTO runs_v3(%s) SELECT %s FROM runs;\n"
                                      "DROP TABLE runs;\n"
                                      "ALTER TABLE runs_v3 RENAME TO runs;\n"
                                      "CREATE INDEX IF NOT EXISTS runs_compare_id ON runs(compare_id);\n"
                                      "CREATE INDEX IF NOT EXISTS runs_sweep_id ON runs(sweep_id);\n"
                                      /* ids of runs deleted with foreign keys
                                       * off may live on in orphan rows: the
                                       * next id is above every one of them */
                                      "DELETE FROM sqlite_sequence WHERE name = 'runs';\n"
                                      "INSERT INTO sqlite_sequence(name, seq) SELECT 'runs', max(\n"
                                      "  (SELECT coalesce(max(run_id), 0) FROM runs),\n"
                                      "  (SELECT coalesce(max(run_id), 0) FROM requests),\n"
                                      "  (SELECT coalesce(max(run_id), 0) FROM steps),\n"
                                      "  (SELECT coalesce(max(run_id), 0) FROM class_metrics),\n"
                                      "  (SELECT coalesce(max(run_id), 0) FROM replica_metrics),\n"
                                      "  (SELECT coalesce(max(run_id), 0) FROM sweep_points),\n"
                                      "  (SELECT coalesce(max(run_id), 0) FROM search_probes),\n"
                                      "  (SELECT coalesce(max(run_id), 0) FROM validations));\n"
                                      "%s",
                                      defs, cols, cols, schema_v3_tables)
                    : NULL;
    sqlite3_free(cols);
    sqlite3_free(defs);
    char *out = sql ? strdup(sql) : NULL;
    sqlite3_free(sql);
    return out;
}

static char *migrations[STORE_SCHEMA_VERSION];
static pthread_once_t schema_once = PTHREAD_ONCE_INIT;

/* Version v-1 -> v for v >= 2: one ALTER TABLE runs ADD COLUMN per field of
 * the run_fields table that version added (a column added by ALTER carries
 * a default, which the older rows read). */
static char *runs_alter(int v)
{
    size_t nf, len = 0, cap = 1;
    const run_field *f = run_fields(&nf);
    for (int pass = 0; pass < 2; pass++) {
        char *buf = pass ? malloc(cap) : NULL;
        if (pass && !buf)
            return NULL;
        len = 0;
        if (buf)
            buf[0] = 0;
        for (size_t i = 0; i < nf; i++)
            if (f[i].since == v)
                len += (size_t)snprintf(buf ? buf + len : NULL, buf ? cap - len : 0,
                                        "ALTER TABLE runs ADD COLUMN %s %s;\n", f[i].name,
                                        f[i].sql);
        if (pass)
            return buf;
        cap = len + 1;
    }
    return NULL;
}

/* What a version adds besides `runs` columns, after them. */
static const char schema_v4_cluster[] =
    /* clusters (docs/cluster.md): the engine of each request and step, and
     * one row of metrics per engine of a cluster run */
    "ALTER TABLE requests ADD COLUMN replica INTEGER NOT NULL DEFAULT 0;\n"
    "ALTER TABLE steps ADD COLUMN replica INTEGER NOT NULL DEFAULT 0;\n"
    "CREATE TABLE IF NOT EXISTS replica_metrics(\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,\n"
    "  replica INTEGER NOT NULL,\n"
    "  n_requests INTEGER NOT NULL,\n"
    "  n_finished INTEGER NOT NULL,\n"
    "  n_rejected INTEGER NOT NULL,\n"
    "  ttft_p50_s REAL, ttft_p90_s REAL, ttft_p99_s REAL, ttft_mean_s REAL,\n"
    "  tpot_p50_s REAL, tpot_p90_s REAL, tpot_p99_s REAL, tpot_mean_s REAL,\n"
    "  e2e_p50_s REAL, e2e_p90_s REAL, e2e_p99_s REAL, e2e_mean_s REAL,\n"
    "  throughput_tok_s REAL,\n"
    "  throughput_req_s REAL,\n"
    "  preemptions INTEGER NOT NULL,\n"
    "  peak_kv_blocks INTEGER NOT NULL,\n"
    "  mean_kv_blocks REAL,\n"
    "  mean_batch REAL,\n"
    "  n_steps INTEGER NOT NULL,\n"
    "  makespan_s REAL,\n"
    "  prefix_hit_rate REAL,\n"
    "  slo_attainment REAL,\n"
    "  PRIMARY KEY (run_id, replica)\n"
    ") WITHOUT ROWID;\n";

/* Version 6: disaggregated serving (docs/cluster.md, section D): the
 * decode replica of each request (NULL: none, or not a --pd run) and its
 * KV transfer time in seconds (NULL: no transfer). */
static const char schema_v6_pd[] =
    "ALTER TABLE requests ADD COLUMN decode_replica INTEGER;\n"
    "ALTER TABLE requests ADD COLUMN kv_transfer_s REAL;\n";

/* Version 7: answers at a glance: per-request ITL and why a request was
 * rejected. */
static const char schema_v7_answers[] =
    "ALTER TABLE requests ADD COLUMN max_itl_s REAL;\n"
    "ALTER TABLE requests ADD COLUMN reject_reason TEXT;\n";

/* Version 9: cheaper request rows (docs/schema.md, "requests").  The rows
 * move to `request_rows`, keyed by one integer, key = run_id * 2^32 +
 * req_id (so a run's rows are one key range, appended in order), with the
 * status as an INTEGER code (0 finished, 1 rejected) and no per-row CHECK
 * or foreign key: store_write_run checks a run's rows once, before writing
 * them.  `requests` becomes a view with today's columns, in today's order;
 * it joins `runs`, so `WHERE run_id = ?` reads one key range.  An INSTEAD
 * OF trigger lets `INSERT INTO requests` (spool merges) keep working, and a
 * trigger on `runs` replaces ON DELETE CASCADE.  A later version that adds
 * a requests column adds it to request_rows, then drops and re-creates the
 * view and the insert trigger with it. */
static const char schema_v9_rows[] =
    "CREATE TABLE IF NOT EXISTS request_rows(\n"
    "  key INTEGER PRIMARY KEY,\n"
    "  arrival_s REAL NOT NULL,\n"
    "  prompt_tokens INTEGER NOT NULL,\n"
    "  output_tokens INTEGER NOT NULL,\n"
    "  priority INTEGER NOT NULL,\n"
    "  status_code INTEGER NOT NULL,\n"
    "  first_token_s REAL,\n"
    "  finish_s REAL,\n"
    "  preemptions INTEGER NOT NULL,\n"
    "  swaps INTEGER NOT NULL,\n"
    "  swapped_s REAL,\n"
    "  replica INTEGER NOT NULL DEFAULT 0,\n"
    "  decode_replica INTEGER,\n"
    "  kv_transfer_s REAL,\n"
    "  max_itl_s REAL,\n"
    "  reject_reason TEXT\n"
    ");\n"
    "INSERT INTO request_rows(key, arrival_s, prompt_tokens, output_tokens, priority,\n"
    "  status_code, first_token_s, finish_s, preemptions, swaps, swapped_s, replica,\n"
    "  decode_replica, kv_transfer_s, max_itl_s, reject_reason)\n"
    "SELECT (run_id << 32) + req_id, arrival_s, prompt_tokens, output_tokens, priority,\n"
    "  CASE status WHEN 'finished' THEN 0 ELSE 1 END, first_token_s, finish_s,\n"
    "  preemptions, swaps, swapped_s, replica, decode_replica, kv_transfer_s, max_itl_s,\n"
    "  reject_reason\n"
    "FROM requests ORDER BY run_id, req_id;\n"
    "DROP TABLE requests;\n"
    "CREATE VIEW requests AS\n"
    "SELECT r.run_id AS run_id, q.key - (r.run_id << 32) AS req_id,\n"
    "       q.arrival_s AS arrival_s, q.prompt_tokens AS prompt_tokens,\n"
    "       q.output_tokens AS output_tokens, q.priority AS priority,\n"
    "       CASE q.status_code WHEN 0 THEN 'finished' WHEN 1 THEN 'rejected' END AS status,\n"
    "       q.first_token_s AS first_token_s, q.finish_s AS finish_s,\n"
    "       q.preemptions AS preemptions, q.swaps AS swaps, q.swapped_s AS swapped_s,\n"
    "       q.replica AS replica, q.decode_replica AS decode_replica,\n"
    "       q.kv_transfer_s AS kv_transfer_s, q.max_itl_s AS max_itl_s,\n"
    "       q.reject_reason AS reject_reason\n"
    "FROM runs r JOIN request_rows q\n"
    "  ON q.key >= (r.run_id << 32) AND q.key < ((r.run_id + 1) << 32);\n"
    "CREATE TRIGGER IF NOT EXISTS requests_insert INSTEAD OF INSERT ON requests BEGIN\n"
    "  INSERT INTO request_rows(key, arrival_s, prompt_tokens, output_tokens, priority,\n"
    "    status_code, first_token_s, finish_s, preemptions, swaps, swapped_s, replica,\n"
    "    decode_replica, kv_transfer_s, max_itl_s, reject_reason)\n"
    "  SELECT (NEW.run_id << 32) + NEW.req_id, NEW.arrival_s, NEW.prompt_tokens,\n"
    "    NEW.output_tokens, NEW.priority,\n"
    "    CASE NEW.status WHEN 'finished' THEN 0 WHEN 'rejected' THEN 1\n"
    "      ELSE RAISE(ABORT, 'requests.status must be finished or rejected') END,\n"
    "    NEW.first_token_s, NEW.finish_s, NEW.preemptions, NEW.swaps, NEW.swapped_s,\n"
    "    coalesce(NEW.replica, 0), NEW.decode_replica, NEW.kv_transfer_s, NEW.max_itl_s,\n"
    "    NEW.reject_reason\n"
    "  WHERE (SELECT count(*) FROM runs WHERE run_id = NEW.run_id) = 1\n"
    "     OR RAISE(ABORT, 'requests.run_id names no run');\n"
    "END;\n"
    "CREATE TRIGGER IF NOT EXISTS runs_delete_requests AFTER DELETE ON runs BEGIN\n"
    "  DELETE FROM request_rows\n"
    "  WHERE key >= (OLD.run_id << 32) AND key < ((OLD.run_id + 1) << 32);\n"
    "END;\n";

/* Version 11: cheaper step rows (`--record-steps`; docs/schema.md,
 * "steps"), as version 9 did for requests.  The rows move to `step_rows`,
 * keyed by key = run_id * 2^32 + step_id, with the kind as an INTEGER code
 * (0 prefill, 1 decode, 2 mixed) and no per-row CHECK or foreign key:
 * store_write_run checks a run's steps once, before writing them.  `steps`
 * becomes a view with the same columns in the same order, an INSTEAD OF
 * trigger keeps `INSERT INTO steps` (spool merges) working with the old
 * checks, and a trigger on `runs` replaces ON DELETE CASCADE.  Rows of a
 * run deleted with foreign keys off move too (the view hides them). */
static const char schema_v11_steps[] =
    "CREATE TABLE IF NOT EXISTS step_rows(\n"
    "  key INTEGER PRIMARY KEY,\n"
    "  start_s REAL NOT NULL,\n"
    "  dur_s REAL NOT NULL,\n"
    "  kind_code INTEGER NOT NULL,\n"
    "  n_prefill INTEGER NOT NULL,\n"
    "  n_decode INTEGER NOT NULL,\n"
    "  tokens INTEGER NOT NULL,\n"
    "  kv_read INTEGER NOT NULL,\n"
    "  prefill_sq INTEGER NOT NULL,\n"
    "  kv_blocks_used INTEGER NOT NULL,\n"
    "  n_waiting INTEGER NOT NULL,\n"
    "  n_running INTEGER NOT NULL,\n"
    "  n_preempted INTEGER NOT NULL,\n"
    "  swap_out_blocks INTEGER NOT NULL,\n"
    "  swap_in_blocks INTEGER NOT NULL,\n"
    "  members BLOB NOT NULL,\n"
    "  replica INTEGER NOT NULL DEFAULT 0\n"
    ");\n"
    "INSERT INTO step_rows(key, start_s, dur_s, kind_code, n_prefill, n_decode, tokens,\n"
    "  kv_read, prefill_sq, kv_blocks_used, n_waiting, n_running, n_preempted,\n"
    "  swap_out_blocks, swap_in_blocks, members, replica)\n"
    "SELECT (run_id << 32) + step_id, start_s, dur_s,\n"
    "  CASE kind WHEN 'prefill' THEN 0 WHEN 'decode' THEN 1 ELSE 2 END, n_prefill, n_decode,\n"
    "  tokens, kv_read, prefill_sq, kv_blocks_used, n_waiting, n_running, n_preempted,\n"
    "  swap_out_blocks, swap_in_blocks, members, replica\n"
    "FROM steps ORDER BY run_id, step_id;\n"
    "DROP TABLE steps;\n"
    "CREATE VIEW steps AS\n"
    "SELECT r.run_id AS run_id, s.key - (r.run_id << 32) AS step_id,\n"
    "       s.start_s AS start_s, s.dur_s AS dur_s,\n"
    "       CASE s.kind_code WHEN 0 THEN 'prefill' WHEN 1 THEN 'decode' WHEN 2 THEN 'mixed'\n"
    "       END AS kind,\n"
    "       s.n_prefill AS n_prefill, s.n_decode AS n_decode, s.tokens AS tokens,\n"
    "       s.kv_read AS kv_read, s.prefill_sq AS prefill_sq,\n"
    "       s.kv_blocks_used AS kv_blocks_used, s.n_waiting AS n_waiting,\n"
    "       s.n_running AS n_running, s.n_preempted AS n_preempted,\n"
    "       s.swap_out_blocks AS swap_out_blocks, s.swap_in_blocks AS swap_in_blocks,\n"
    "       s.members AS members, s.replica AS replica\n"
    "FROM runs r JOIN step_rows s\n"
    "  ON s.key >= (r.run_id << 32) AND s.key < ((r.run_id + 1) << 32);\n"
    "CREATE TRIGGER IF NOT EXISTS steps_insert INSTEAD OF INSERT ON steps BEGIN\n"
    "  INSERT INTO step_rows(key, start_s, dur_s, kind_code, n_prefill, n_decode, tokens,\n"
    "    kv_read, prefill_sq, kv_blocks_used, n_waiting, n_running, n_preempted,\n"
    "    swap_out_blocks, swap_in_blocks, members, replica)\n"
    "  SELECT (NEW.run_id << 32) + NEW.step_id, NEW.start_s, NEW.dur_s,\n"
    "    CASE NEW.kind WHEN 'prefill' THEN 0 WHEN 'decode' THEN 1 WHEN 'mixed' THEN 2\n"
    "      ELSE RAISE(ABORT, 'steps.kind must be prefill, decode or mixed') END,\n"
    "    NEW.n_prefill, NEW.n_decode, NEW.tokens, NEW.kv_read, NEW.prefill_sq,\n"
    "    NEW.kv_blocks_used, NEW.n_waiting, NEW.n_running, NEW.n_preempted,\n"
    "    NEW.swap_out_blocks, NEW.swap_in_blocks, NEW.members, coalesce(NEW.replica, 0)\n"
    "  WHERE (SELECT count(*) FROM runs WHERE run_id = NEW.run_id) = 1\n"
    "     OR RAISE(ABORT, 'steps.run_id names no run');\n"
    "END;\n"
    "CREATE TRIGGER IF NOT EXISTS runs_delete_steps AFTER DELETE ON runs BEGIN\n"
    "  DELETE FROM step_rows\n"
    "  WHERE key >= (OLD.run_id << 32) AND key < ((OLD.run_id + 1) << 32);\n"
    "END;\n";

/* Version 12 (issue 16, Hardening II): a `kvsim compare` can be resumed
 * like a sweep.  compares.base_args holds its base run flags (one argument
 * per line, NULL for an older compare, which cannot be resumed);
 * compare_runs maps each variant (index in compares.variants, name) to its
 * run, inserted by the run's own INSERT (store_compare_tag); compare_inputs
 * holds its input files as sweep_inputs does for a sweep. */
static const char schema_v12_resume[] =
    "ALTER TABLE compares ADD COLUMN base_args TEXT;\n"
    "CREATE TABLE IF NOT EXISTS compare_runs(\n"
    "  compare_id INTEGER NOT NULL REFERENCES compares(compare_id) ON DELETE CASCADE,\n"
    "  variant_index INTEGER NOT NULL,\n"
    "  variant TEXT NOT NULL,\n"
    "  run_id INTEGER NOT NULL UNIQUE REFERENCES runs(run_id) ON DELETE CASCADE,\n"
    "  PRIMARY KEY (compare_id, variant_index)\n"
    ") WITHOUT ROWID;\n"
    "CREATE TABLE IF NOT EXISTS compare_inputs(\n"
    "  compare_id INTEGER NOT NULL REFERENCES compares(compare_id) ON DELETE CASCADE,\n"
    "  path TEXT NOT NULL,\n"
    "  abs_path TEXT NOT NULL,\n"
    "  sha256 TEXT NOT NULL,\n"
    "  PRIMARY KEY (compare_id, path)\n"
    ") WITHOUT ROWID;\n";

static const char *schema_extra(int v)
{
    return v == 4    ? schema_v4_cluster
           : v == 6  ? schema_v6_pd
           : v == 7  ? schema_v7_answers
           : v == 9  ? schema_v9_rows
           : v == 11 ? schema_v11_steps
           : v == 12 ? schema_v12_resume
                     : NULL;
}

/* runs_alter(v) followed by schema_extra(v); NULL when out of memory. */
static char *migration_build(int v)
{
    char *a = runs_alter(v);
    const char *x = schema_extra(v);
    if (!a || !x)
        return a;
    size_t na = strlen(a), nx = strlen(x);
    char *s = realloc(a, na + nx + 1);
    if (!s) {
        free(a);
        return NULL;
    }
    memcpy(s + na, x, nx + 1);
    return s;
}

/* Assemble every migration once (the table is constant, so is the text);
 * a script left NULL (out of memory) is reported by store_migration_sql's
 * caller. */
static void schema_build(void)
{
    size_t a = strlen(schema_v1_head), r = runs_ddl(NULL, 0), b = strlen(schema_v1_tail);
    char *s = malloc(a + r + b + 1);
    if (s) {
        memcpy(s, schema_v1_head, a);
        runs_ddl(s + a, r + 1);
        memcpy(s + a + r, schema_v1_tail, b + 1);
    }
    migrations[0] = s;
    for (int v = 2; v <= STORE_SCHEMA_VERSION; v++) {
        char *alter = migration_build(v);
        if (v != HARDENING_VERSION || !alter) {
            migrations[v - 1] = alter;
            continue;
        }
        char *rebuild = hardening_runs_rebuild();
        size_t a = rebuild ? strlen(rebuild) : 0, b = strlen(alter);
        char *both = rebuild ? malloc(a + b + 1) : NULL;
        if (both) {
            memcpy(both, rebuild, a);
            memcpy(both + a, alter, b + 1);
        }
        free(rebuild);
        free(alter);
        migrations[v - 1] = both;
    }
}

const char *store_migration_sql(int from_version)
{
    if (from_version < 0 || from_version >= STORE_SCHEMA_VERSION)
        return NULL;
    pthread_once(&schema_once, schema_build);
    return migrations[from_version];
}

/* ------------------------------------------------------ fresh databases */

/* The recording of store/schema_current.c (written by
 * KVSIM_WRITE_SCHEMA=1 build/test_schema): the objects the migrations
 * leave in sqlite_master, in creation order, and the fingerprint of the
 * migration scripts it was recorded from. */
extern const char store_schema_current[];
extern const uint64_t store_schema_current_fingerprint;

static uint64_t fingerprint;
static pthread_once_t fingerprint_once = PTHREAD_ONCE_INIT;

/* FNV-1a over every migration script with its version, so that any change
 * to a script, to the run_fields table or to STORE_SCHEMA_VERSION changes
 * it.  A script that could not be built (out of memory) leaves it 0, which
 * no recording carries. */
static void fingerprint_build(void)
{
    uint64_t h = 14695981039346656037ULL;
    for (int v = 0; v < STORE_SCHEMA_VERSION; v++) {
        const char *s = store_migration_sql(v);
        if (!s)
            return;
        h = (h ^ (uint64_t)(v + 1)) * 1099511628211ULL;
        for (const unsigned char *p = (const unsigned char *)s; *p; p++)
            h = (h ^ *p) * 1099511628211ULL;
    }
    fingerprint = h ? h : 1;
}

uint64_t store_schema_fingerprint(void)
{
    pthread_once(&fingerprint_once, fingerprint_build);
    return fingerprint;
}

const char *store_schema_fresh_sql(void)
{
    uint64_t f = store_schema_fingerprint();
    return f && f == store_schema_current_fingerprint ? store_schema_current : NULL;
}
