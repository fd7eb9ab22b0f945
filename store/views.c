/* views.c — the exploration part of the store: the tables that group runs
 * into sweeps and capacity searches (sweeps, sweep_point_params,
 * sweep_points, search_probes, search_results), the views over them and over
 * runs for the common questions (sweep_params, sweep_runs, run_load,
 * policy_at_load, slo_attainment), and the writers `kvsim sweep` and
 * `kvsim capacity --search` use.  The SQL is created on demand by
 * store_explore_init (every statement IF NOT EXISTS); docs/exploration.md
 * documents every column and view with example queries.
 *
 * Tagging a run as a sweep point is atomic with the run: store_sweep_tag
 * fills a per-connection TEMP table that a TEMP trigger on `runs` reads, so
 * the sweep_points row is inserted by the very INSERT that writes the run,
 * inside store_write_run's transaction.  A killed writer leaves either the
 * run and its point row or neither.
 */
#include "store.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char explore_sql[] =
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

const char *store_explore_sql(void) { return explore_sql; }

static int db_fail(store *s, kvs_err *err, const char *what)
{
    return kvs_errf(err, KVS_EDB, "%s: %s: %s", store_path(s), what,
                    sqlite3_errmsg(store_db(s)));
}

/* 1 if every exploration object exists (so a read-only database needs no
 * write), 0 if not, -1 on error. */
static int explore_present(store *s)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(store_db(s),
                           "SELECT count(*) FROM sqlite_master WHERE name IN ('sweeps', "
                           "'sweep_point_params', 'sweep_points', 'search_probes', "
                           "'search_results', 'sweep_params', 'sweep_runs', 'run_load', "
                           "'policy_at_load', 'slo_attainment')",
                           -1, &st, NULL) != SQLITE_OK)
        return -1;
    int r = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int(st, 0) == 10 : -1;
    sqlite3_finalize(st);
    return r;
}

int store_explore_init(store *s, kvs_err *err)
{
    int r = explore_present(s);
    if (r < 0)
        return db_fail(s, err, "reading the schema");
    if (r == 1)
        return KVS_OK;
    int rc;
    if ((rc = store_begin(s, err)))
        return rc;
    if (sqlite3_exec(store_db(s), explore_sql, NULL, NULL, NULL) != SQLITE_OK) {
        rc = db_fail(s, err, "creating the sweep tables");
        store_rollback(s);
        return rc;
    }
    if ((rc = store_commit(s, err))) {
        store_rollback(s);
        return rc;
    }
    return KVS_OK;
}

static void now_iso(char buf[32])
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* Insert one parameter of one point; inside the caller's transaction. */
static int insert_param(store *s, sqlite3_stmt *st, int64_t sweep_id, int64_t point,
                        const char *param, const char *value, kvs_err *err)
{
    int b = sqlite3_bind_int64(st, 1, sweep_id);
    b |= sqlite3_bind_int64(st, 2, point);
    b |= sqlite3_bind_text(st, 3, param, -1, SQLITE_TRANSIENT);
    b |= sqlite3_bind_text(st, 4, value, -1, SQLITE_TRANSIENT);
    int rc = b == SQLITE_OK && sqlite3_step(st) == SQLITE_DONE
                 ? KVS_OK
                 : db_fail(s, err, "writing sweep_point_params");
    sqlite3_reset(st);
    return rc;
}

static const char params_sql[] =
    "INSERT INTO sweep_point_params(sweep_id, point_index, param, value) VALUES(?1,?2,?3,?4)";

int store_sweep_create(store *s, const store_sweep_def *d, int64_t *sweep_id, kvs_err *err)
{
    sqlite3 *db = store_db(s);
    sqlite3_stmt *st = NULL;
    int rc;
    char now[32];
    now_iso(now);
    if ((rc = store_explore_init(s, err)))
        return rc;
    if ((rc = store_begin(s, err)))
        return rc;
    if (sqlite3_prepare_v2(db,
                           "INSERT INTO sweeps(kind, created_at, kvsim_version, grid, "
                           "base_args, n_points) VALUES(?1,?2,?3,?4,?5,?6)",
                           -1, &st, NULL) != SQLITE_OK) {
        rc = db_fail(s, err, "preparing sweeps insert");
        goto fail;
    }
    int b = sqlite3_bind_text(st, 1, d->kind, -1, SQLITE_STATIC);
    b |= sqlite3_bind_text(st, 2, now, -1, SQLITE_STATIC);
    b |= sqlite3_bind_text(st, 3, KVSIM_VERSION, -1, SQLITE_STATIC);
    b |= sqlite3_bind_text(st, 4, d->grid, -1, SQLITE_STATIC);
    b |= sqlite3_bind_text(st, 5, d->base_args, -1, SQLITE_STATIC);
    b |= d->n_points > 0 ? sqlite3_bind_int64(st, 6, d->n_points) : sqlite3_bind_null(st, 6);
    if (b != SQLITE_OK || sqlite3_step(st) != SQLITE_DONE) {
        rc = db_fail(s, err, "writing the sweeps row");
        goto fail;
    }
    int64_t id = sqlite3_last_insert_rowid(db);
    sqlite3_finalize(st);
    st = NULL;
    if (d->n_params > 0 && d->n_points > 0) {
        if (sqlite3_prepare_v2(db, params_sql, -1, &st, NULL) != SQLITE_OK) {
            rc = db_fail(s, err, "preparing sweep_point_params insert");
            goto fail;
        }
        for (int64_t p = 0; p < d->n_points; p++)
            for (int i = 0; i < d->n_params; i++)
                if ((rc = insert_param(s, st, id, p, d->params[i], d->value(d->ctx, p, i), err)))
                    goto fail;
    }
    if ((rc = store_commit(s, err)))
        goto fail;
    *sweep_id = id;
    goto out;
fail:
    store_rollback(s);
out:
    sqlite3_finalize(st);
    return rc;
}

int store_sweep_add_point(store *s, int64_t sweep_id, int64_t point_index, int n,
                          const char *const *params, const char *const *values, kvs_err *err)
{
    sqlite3_stmt *st = NULL;
    int rc;
    if ((rc = store_begin(s, err)))
        return rc;
    if (sqlite3_prepare_v2(store_db(s), params_sql, -1, &st, NULL) != SQLITE_OK) {
        rc = db_fail(s, err, "preparing sweep_point_params insert");
        goto fail;
    }
    for (int i = 0; i < n; i++)
        if ((rc = insert_param(s, st, sweep_id, point_index, params[i], values[i], err)))
            goto fail;
    if ((rc = store_commit(s, err)))
        goto fail;
    sqlite3_finalize(st);
    return KVS_OK;
fail:
    sqlite3_finalize(st);
    store_rollback(s);
    return rc;
}

/* Run SQL with up to three bound values (?1 int64, ?2 int64, ?3 text or NULL),
 * outside any transaction of the caller (autocommit). */
static int exec3(store *s, const char *sql, int64_t a, int64_t b, const char *c,
                 const char *what, kvs_err *err)
{
    sqlite3_stmt *st = NULL;
    int rc = KVS_OK;
    if (sqlite3_prepare_v2(store_db(s), sql, -1, &st, NULL) != SQLITE_OK)
        return db_fail(s, err, what);
    int n = sqlite3_bind_parameter_count(st);
    int bb = SQLITE_OK;
    if (n >= 1)
        bb |= sqlite3_bind_int64(st, 1, a);
    if (n >= 2)
        bb |= sqlite3_bind_int64(st, 2, b);
    if (n >= 3)
        bb |= sqlite3_bind_text(st, 3, c, -1, SQLITE_TRANSIENT);
    if (bb != SQLITE_OK || sqlite3_step(st) != SQLITE_DONE)
        rc = db_fail(s, err, what);
    sqlite3_finalize(st);
    return rc;
}

int store_sweep_tag(store *s, int64_t sweep_id, int64_t point_index, const char *point_key,
                    kvs_err *err)
{
    int rc;
    if (sqlite3_exec(store_db(s),
                     "CREATE TEMP TABLE IF NOT EXISTS kvsim_sweep_cur("
                     "  sweep_id INTEGER, point_index INTEGER, point_key TEXT);\n"
                     "CREATE TEMP TRIGGER IF NOT EXISTS kvsim_sweep_tag\n"
                     "AFTER INSERT ON main.runs WHEN NEW.sweep_id IS NOT NULL\n"
                     "BEGIN\n"
                     "  INSERT INTO sweep_points(sweep_id, point_index, point_key, run_id)\n"
                     "  SELECT sweep_id, point_index, point_key, NEW.run_id\n"
                     "  FROM kvsim_sweep_cur WHERE sweep_id = NEW.sweep_id;\n"
                     "END;\n"
                     "DELETE FROM temp.kvsim_sweep_cur;",
                     NULL, NULL, NULL) != SQLITE_OK)
        return db_fail(s, err, "setting up sweep tagging");
    if ((rc = exec3(s, "INSERT INTO temp.kvsim_sweep_cur VALUES(?1, ?2, ?3)", sweep_id,
                    point_index, point_key, "tagging a sweep point", err)))
        return rc;
    return KVS_OK;
}

void store_sweep_untag(store *s)
{
    /* Fails only when tagging was never set up: nothing to clear then. */
    (void)sqlite3_exec(store_db(s), "DELETE FROM temp.kvsim_sweep_cur", NULL, NULL, NULL);
}

int store_sweep_get(store *s, int64_t sweep_id, store_sweep_info *out, kvs_err *err)
{
    sqlite3_stmt *st = NULL;
    int rc = KVS_OK;
    memset(out, 0, sizeof *out);
    if ((rc = store_explore_init(s, err)))
        return rc;
    if (sqlite3_prepare_v2(store_db(s),
                           "SELECT kind, grid, base_args, coalesce(n_points, 0) FROM sweeps "
                           "WHERE sweep_id = ?1",
                           -1, &st, NULL) != SQLITE_OK)
        return db_fail(s, err, "reading sweeps");
    sqlite3_bind_int64(st, 1, sweep_id);
    int r = sqlite3_step(st);
    if (r == SQLITE_DONE) {
        rc = kvs_errf(err, KVS_EINVAL, "%s: no sweep %lld", store_path(s), (long long)sweep_id);
        goto out;
    }
    if (r != SQLITE_ROW) {
        rc = db_fail(s, err, "reading sweeps");
        goto out;
    }
    snprintf(out->kind, sizeof out->kind, "%s", (const char *)sqlite3_column_text(st, 0));
    out->grid = strdup((const char *)sqlite3_column_text(st, 1));
    out->base_args = strdup((const char *)sqlite3_column_text(st, 2));
    out->n_points = sqlite3_column_int64(st, 3);
    if (!out->grid || !out->base_args) {
        store_sweep_info_free(out);
        rc = kvs_errf(err, KVS_ENOMEM, "%s: out of memory", store_path(s));
    }
out:
    sqlite3_finalize(st);
    return rc;
}

void store_sweep_info_free(store_sweep_info *info)
{
    free(info->grid);
    free(info->base_args);
    info->grid = info->base_args = NULL;
}

int store_sweep_done(store *s, int64_t sweep_id, int64_t n_points, int64_t *run_ids,
                     int (*check_key)(void *ctx, int64_t point, const char *key), void *ctx,
                     kvs_err *err)
{
    sqlite3_stmt *st = NULL;
    int rc = KVS_OK, r;
    for (int64_t i = 0; i < n_points; i++)
        run_ids[i] = 0;
    if (sqlite3_prepare_v2(store_db(s),
                           "SELECT point_index, point_key, run_id FROM sweep_points "
                           "WHERE sweep_id = ?1 ORDER BY point_index",
                           -1, &st, NULL) != SQLITE_OK)
        return db_fail(s, err, "reading sweep_points");
    sqlite3_bind_int64(st, 1, sweep_id);
    while ((r = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t p = sqlite3_column_int64(st, 0);
        const char *key = (const char *)sqlite3_column_text(st, 1);
        if (p < 0 || p >= n_points) {
            rc = kvs_errf(err, KVS_EDB, "%s: sweep %lld has a point %lld outside its %lld points",
                          store_path(s), (long long)sweep_id, (long long)p, (long long)n_points);
            goto out;
        }
        if (check_key && check_key(ctx, p, key ? key : "")) {
            rc = kvs_errf(err, KVS_EDB, "%s: sweep %lld point %lld is stored as '%s', which "
                          "is not that point of its grid",
                          store_path(s), (long long)sweep_id, (long long)p, key ? key : "");
            goto out;
        }
        run_ids[p] = sqlite3_column_int64(st, 2);
    }
    if (r != SQLITE_DONE)
        rc = db_fail(s, err, "reading sweep_points");
out:
    sqlite3_finalize(st);
    return rc;
}

int store_search_probe(store *s, int64_t sweep_id, int64_t point_index, int64_t run_id,
                       const char *policy, const char *param, double value, int holds,
                       const char *verdict, kvs_err *err)
{
    sqlite3_stmt *st = NULL;
    int rc = KVS_OK;
    if (sqlite3_prepare_v2(store_db(s),
                           "INSERT INTO search_probes(sweep_id, point_index, run_id, policy, "
                           "param, value, holds, verdict) VALUES(?1,?2,?3,?4,?5,?6,?7,?8)",
                           -1, &st, NULL) != SQLITE_OK)
        return db_fail(s, err, "preparing search_probes insert");
    int b = sqlite3_bind_int64(st, 1, sweep_id);
    b |= sqlite3_bind_int64(st, 2, point_index);
    b |= run_id > 0 ? sqlite3_bind_int64(st, 3, run_id) : sqlite3_bind_null(st, 3);
    b |= sqlite3_bind_text(st, 4, policy, -1, SQLITE_TRANSIENT);
    b |= sqlite3_bind_text(st, 5, param, -1, SQLITE_TRANSIENT);
    b |= sqlite3_bind_double(st, 6, value);
    b |= sqlite3_bind_int(st, 7, holds ? 1 : 0);
    b |= sqlite3_bind_text(st, 8, verdict, -1, SQLITE_TRANSIENT);
    if (b != SQLITE_OK || sqlite3_step(st) != SQLITE_DONE)
        rc = db_fail(s, err, "writing search_probes");
    sqlite3_finalize(st);
    return rc;
}

int store_search_result(store *s, int64_t sweep_id, const store_search_row *row, kvs_err *err)
{
    sqlite3_stmt *st = NULL;
    int rc = KVS_OK;
    if (sqlite3_prepare_v2(store_db(s),
                           "INSERT INTO search_results(sweep_id, policy, param, slo, status, "
                           "lo, hi, lo_run_id, hi_run_id, best_run_id, probes) "
                           "VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11)",
                           -1, &st, NULL) != SQLITE_OK)
        return db_fail(s, err, "preparing search_results insert");
    int b = sqlite3_bind_int64(st, 1, sweep_id);
    b |= sqlite3_bind_text(st, 2, row->policy, -1, SQLITE_TRANSIENT);
    b |= sqlite3_bind_text(st, 3, row->param, -1, SQLITE_TRANSIENT);
    b |= sqlite3_bind_text(st, 4, row->slo, -1, SQLITE_TRANSIENT);
    b |= sqlite3_bind_text(st, 5, row->status, -1, SQLITE_TRANSIENT);
    b |= row->lo_run_id > 0 ? sqlite3_bind_double(st, 6, row->lo) : sqlite3_bind_null(st, 6);
    b |= row->hi_run_id > 0 ? sqlite3_bind_double(st, 7, row->hi) : sqlite3_bind_null(st, 7);
    b |= row->lo_run_id > 0 ? sqlite3_bind_int64(st, 8, row->lo_run_id) : sqlite3_bind_null(st, 8);
    b |= row->hi_run_id > 0 ? sqlite3_bind_int64(st, 9, row->hi_run_id) : sqlite3_bind_null(st, 9);
    b |= row->best_run_id > 0 ? sqlite3_bind_int64(st, 10, row->best_run_id)
                              : sqlite3_bind_null(st, 10);
    b |= sqlite3_bind_int64(st, 11, row->probes);
    if (b != SQLITE_OK || sqlite3_step(st) != SQLITE_DONE)
        rc = db_fail(s, err, "writing search_results");
    sqlite3_finalize(st);
    return rc;
}
