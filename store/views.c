/* views.c — the exploration part of the store: the tables that group runs
 * into sweeps and capacity searches (sweeps, sweep_point_params,
 * sweep_points, search_probes, search_results), the views over them and over
 * runs for the common questions (sweep_params, sweep_runs, run_load,
 * policy_at_load, slo_attainment) are part of the schema (store/schema.c);
 * this file holds the writers `kvsim sweep` and `kvsim capacity --search`
 * use.  docs/exploration.md documents every column and view with example
 * queries.
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
#include <unistd.h>



/* 1 if every exploration object exists (so a read-only database needs no
 * write), 0 if not, -1 on error. */

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
                 : store_fail(s, err, "writing sweep_point_params");
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
    if ((rc = store_begin(s, err)))
        return rc;
    if (sqlite3_prepare_v2(db,
                           "INSERT INTO sweeps(kind, created_at, kvsim_version, grid, "
                           "base_args, n_points, status, pid, host) "
                           "VALUES(?1,?2,?3,?4,?5,?6,'running',?7,?8)",
                           -1, &st, NULL) != SQLITE_OK) {
        rc = store_fail(s, err, "preparing sweeps insert");
        goto fail;
    }
    int b = sqlite3_bind_text(st, 1, d->kind, -1, SQLITE_STATIC);
    b |= sqlite3_bind_text(st, 2, now, -1, SQLITE_STATIC);
    b |= sqlite3_bind_text(st, 3, KVSIM_VERSION, -1, SQLITE_STATIC);
    b |= sqlite3_bind_text(st, 4, d->grid, -1, SQLITE_STATIC);
    b |= sqlite3_bind_text(st, 5, d->base_args, -1, SQLITE_STATIC);
    b |= d->n_points > 0 ? sqlite3_bind_int64(st, 6, d->n_points) : sqlite3_bind_null(st, 6);
    char host[256];
    if (gethostname(host, sizeof host) != 0)
        host[0] = 0;
    host[sizeof host - 1] = 0;
    b |= sqlite3_bind_int64(st, 7, (int64_t)getpid());
    b |= sqlite3_bind_text(st, 8, host, -1, SQLITE_TRANSIENT);
    if (b != SQLITE_OK || sqlite3_step(st) != SQLITE_DONE) {
        rc = store_fail(s, err, "writing the sweeps row");
        goto fail;
    }
    int64_t id = sqlite3_last_insert_rowid(db);
    sqlite3_finalize(st);
    st = NULL;
    if (d->n_params > 0 && d->n_points > 0) {
        if (sqlite3_prepare_v2(db, params_sql, -1, &st, NULL) != SQLITE_OK) {
            rc = store_fail(s, err, "preparing sweep_point_params insert");
            goto fail;
        }
        for (int64_t p = 0; p < d->n_points; p++)
            for (int i = 0; i < d->n_params; i++)
                if ((rc = insert_param(s, st, id, p, d->params[i], d->value(d->ctx, p, i), err)))
                    goto fail;
    }
    sqlite3_finalize(st);
    st = NULL;
    if (d->n_inputs > 0 &&
        sqlite3_prepare_v2(db, "INSERT INTO sweep_inputs(sweep_id, path, abs_path, sha256) "
                               "VALUES(?1,?2,?3,?4)", -1, &st, NULL) != SQLITE_OK) {
        rc = store_fail(s, err, "preparing sweep_inputs insert");
        goto fail;
    }
    for (int i = 0; i < d->n_inputs; i++) {
        b = sqlite3_bind_int64(st, 1, id);
        b |= sqlite3_bind_text(st, 2, d->input_path[i], -1, SQLITE_STATIC);
        b |= sqlite3_bind_text(st, 3, d->input_abs[i], -1, SQLITE_STATIC);
        b |= sqlite3_bind_text(st, 4, d->input_sha256[i], -1, SQLITE_STATIC);
        if (b != SQLITE_OK || sqlite3_step(st) != SQLITE_DONE) {
            rc = store_fail(s, err, "writing sweep_inputs");
            goto fail;
        }
        sqlite3_reset(st);
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
        rc = store_fail(s, err, "preparing sweep_point_params insert");
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
        return store_fail(s, err, what);
    int n = sqlite3_bind_parameter_count(st);
    int bb = SQLITE_OK;
    if (n >= 1)
        bb |= sqlite3_bind_int64(st, 1, a);
    if (n >= 2)
        bb |= sqlite3_bind_int64(st, 2, b);
    if (n >= 3)
        bb |= sqlite3_bind_text(st, 3, c, -1, SQLITE_TRANSIENT);
    if (bb != SQLITE_OK || sqlite3_step(st) != SQLITE_DONE)
        rc = store_fail(s, err, what);
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
        return store_fail(s, err, "setting up sweep tagging");
    if ((rc = exec3(s, "INSERT INTO temp.kvsim_sweep_cur VALUES(?1, ?2, ?3)", sweep_id,
                    point_index, point_key, "tagging a sweep point", err)))
        return rc;
    return KVS_OK;
}

void store_sweep_untag(store *s)
{
    /* Fails only when tagging was never set up: nothing to clear then. */
    (void)sqlite3_exec(store_db(s),
                       "DELETE FROM temp.kvsim_sweep_cur; DELETE FROM temp.kvsim_sweep_params",
                       NULL, NULL, NULL);
}

int store_sweep_tag_params(store *s, int n, const char *const *params,
                           const char *const *values, kvs_err *err)
{
    if (sqlite3_exec(store_db(s),
                     "CREATE TEMP TABLE IF NOT EXISTS kvsim_sweep_params(param TEXT, value TEXT);\n"
                     "CREATE TEMP TRIGGER IF NOT EXISTS kvsim_sweep_params_tag\n"
                     "AFTER INSERT ON main.runs WHEN NEW.sweep_id IS NOT NULL\n"
                     "BEGIN\n"
                     "  INSERT OR IGNORE INTO sweep_point_params(sweep_id, point_index, param, value)\n"
                     "  SELECT c.sweep_id, c.point_index, p.param, p.value\n"
                     "  FROM kvsim_sweep_cur c, kvsim_sweep_params p WHERE c.sweep_id = NEW.sweep_id;\n"
                     "END;\n"
                     "DELETE FROM temp.kvsim_sweep_params;",
                     NULL, NULL, NULL) != SQLITE_OK)
        return store_fail(s, err, "setting up sweep point parameters");
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(store_db(s), "INSERT INTO temp.kvsim_sweep_params VALUES(?1, ?2)", -1,
                           &st, NULL) != SQLITE_OK)
        return store_fail(s, err, "tagging sweep point parameters");
    int rc = KVS_OK;
    for (int i = 0; i < n && !rc; i++) {
        sqlite3_bind_text(st, 1, params[i], -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(st, 2, values[i], -1, SQLITE_TRANSIENT);
        if (sqlite3_step(st) != SQLITE_DONE)
            rc = store_fail(s, err, "tagging sweep point parameters");
        sqlite3_reset(st);
    }
    sqlite3_finalize(st);
    return rc;
}

int store_sweep_get(store *s, int64_t sweep_id, store_sweep_info *out, kvs_err *err)
{
    sqlite3_stmt *st = NULL;
    int rc = KVS_OK;
    memset(out, 0, sizeof *out);
    if (sqlite3_prepare_v2(store_db(s),
                           "SELECT kind, grid, base_args, coalesce(n_points, 0) FROM sweeps "
                           "WHERE sweep_id = ?1",
                           -1, &st, NULL) != SQLITE_OK)
        return store_fail(s, err, "reading sweeps");
    sqlite3_bind_int64(st, 1, sweep_id);
    int r = sqlite3_step(st);
    if (r == SQLITE_DONE) {
        rc = kvs_errf(err, KVS_EINVAL, "%s: no sweep %lld", store_path(s), (long long)sweep_id);
        goto out;
    }
    if (r != SQLITE_ROW) {
        rc = store_fail(s, err, "reading sweeps");
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
                           "SELECT point_index, point_key, run_id FROM sweep_points sp "
                           "WHERE sweep_id = ?1 AND EXISTS (SELECT 1 FROM runs r "
                           "WHERE r.run_id = sp.run_id) ORDER BY point_index",
                           -1, &st, NULL) != SQLITE_OK)
        return store_fail(s, err, "reading sweep_points");
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
        rc = store_fail(s, err, "reading sweep_points");
out:
    sqlite3_finalize(st);
    return rc;
}

int store_search_probe(store *s, int64_t sweep_id, int64_t point_index, int64_t run_id,
                       const char *policy, const char *param, double value, int holds,
                       const char *verdict, kvs_err *err)
{
    return store_exec(s, err, "writing search_probes",
                      "INSERT OR REPLACE INTO search_probes(sweep_id, point_index, run_id, policy, "
                      "param, value, holds, verdict) VALUES(?1,?2,?3,?4,?5,?6,?7,?8)",
                      "iiptt" "dit", sweep_id, point_index, run_id, policy, param, value,
                      (int64_t)(holds ? 1 : 0), verdict);
}

int store_search_result(store *s, int64_t sweep_id, const store_search_row *row, kvs_err *err)
{
    sqlite3_stmt *st = NULL;
    int rc = KVS_OK;
    if (sqlite3_prepare_v2(store_db(s),
                           "INSERT OR REPLACE INTO search_results(sweep_id, policy, param, slo, status, "
                           "lo, hi, lo_run_id, hi_run_id, best_run_id, probes) "
                           "VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11)",
                           -1, &st, NULL) != SQLITE_OK)
        return store_fail(s, err, "preparing search_results insert");
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
        rc = store_fail(s, err, "writing search_results");
    sqlite3_finalize(st);
    return rc;
}

int store_sweep_inputs(store *s, int64_t sweep_id,
                       int (*fn)(void *ctx, const char *path, const char *abs_path,
                                 const char *sha256),
                       void *ctx, kvs_err *err)
{
    sqlite3_stmt *q = NULL;
    if (sqlite3_prepare_v2(store_db(s),
                           "SELECT path, abs_path, sha256 FROM sweep_inputs WHERE sweep_id = ?1 "
                           "ORDER BY path",
                           -1, &q, NULL) != SQLITE_OK)
        return store_fail(s, err, "reading sweep_inputs");
    sqlite3_bind_int64(q, 1, sweep_id);
    int r, rc = KVS_OK;
    while ((r = sqlite3_step(q)) == SQLITE_ROW) {
        const char *p = (const char *)sqlite3_column_text(q, 0);
        const char *a = (const char *)sqlite3_column_text(q, 1);
        const char *h = (const char *)sqlite3_column_text(q, 2);
        if (!p || !a || !h) {
            rc = kvs_errf(err, KVS_EINVAL, "%s: sweep_inputs of sweep %lld: a NULL value",
                          store_path(s), (long long)sweep_id);
            break;
        }
        if ((rc = fn(ctx, p, a, h)))
            break;
    }
    if (!rc && r != SQLITE_DONE)
        rc = store_fail(s, err, "reading sweep_inputs");
    sqlite3_finalize(q);
    return rc;
}

int store_search_point_get(store *s, int64_t sweep_id, int64_t point_index, const char *param,
                           store_search_point *out, kvs_err *err)
{
    sqlite3_stmt *q = NULL;
    memset(out, 0, sizeof *out);
    if (sqlite3_prepare_v2(store_db(s),
                           "SELECT (SELECT value FROM sweep_point_params WHERE sweep_id = ?1 AND "
                           "point_index = ?2 AND param = 'policy'), (SELECT value FROM "
                           "sweep_point_params WHERE sweep_id = ?1 AND point_index = ?2 AND "
                           "param = ?3), (SELECT sp.run_id FROM sweep_points sp JOIN runs r "
                           "USING (run_id) WHERE sp.sweep_id = ?1 AND sp.point_index = ?2), "
                           "(SELECT count(*) FROM search_probes WHERE sweep_id = ?1 AND "
                           "point_index = ?2)",
                           -1, &q, NULL) != SQLITE_OK)
        return store_fail(s, err, "reading a search probe");
    sqlite3_bind_int64(q, 1, sweep_id);
    sqlite3_bind_int64(q, 2, point_index);
    sqlite3_bind_text(q, 3, param, -1, SQLITE_TRANSIENT);
    int rc = KVS_OK;
    if (sqlite3_step(q) != SQLITE_ROW) {
        rc = store_fail(s, err, "reading a search probe");
    } else if (sqlite3_column_type(q, 0) == SQLITE_TEXT && sqlite3_column_type(q, 1) == SQLITE_TEXT) {
        out->found = 1;
        snprintf(out->policy, sizeof out->policy, "%s", (const char *)sqlite3_column_text(q, 0));
        snprintf(out->value, sizeof out->value, "%s", (const char *)sqlite3_column_text(q, 1));
        out->run_id = sqlite3_column_int64(q, 2); /* 0 when NULL: no run */
        out->has_probe = sqlite3_column_int64(q, 3) > 0;
    }
    sqlite3_finalize(q);
    return rc;
}
