/* store_calib.c — writing calibrations, kernel measurements and profiles,
 * and finding a profile (by id, or newest for a model and GPU). */
#include "store_calib.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOW_SQL "strftime('%Y-%m-%dT%H:%M:%SZ','now')"

static int db_fail(sqlite3 *db, kvs_err *err, const char *what)
{
    const char *path = sqlite3_db_filename(db, "main");
    return kvs_errf(err, KVS_EDB, "%s: %s: %s", path && *path ? path : "(database)", what,
                    sqlite3_errmsg(db));
}

static int bind_text(sqlite3_stmt *st, int i, const char *v)
{
    return v ? sqlite3_bind_text(st, i, v, -1, SQLITE_TRANSIENT) : sqlite3_bind_null(st, i);
}

static int insert_calib(sqlite3 *db, const store_calib_meta *m, int64_t *id, kvs_err *err)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db,
                                "INSERT INTO calibrations(created_at, device, device_name, gpu, model, "
                                "driver_version, runtime_version, kvsim_version, props_json, status) "
                                "VALUES(" NOW_SQL ", ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'finished')",
                                -1, &st, NULL);
    if (rc == SQLITE_OK) {
        const char *v[] = {m->device,          m->device_name,     m->gpu,        m->model,
                           m->driver_version,  m->runtime_version, KVSIM_VERSION, m->props_json};
        for (int i = 0; i < 8 && rc == SQLITE_OK; i++)
            rc = bind_text(st, i + 1, v[i]);
    }
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
    int out = rc == SQLITE_OK ? KVS_OK : db_fail(db, err, "inserting calibration");
    sqlite3_finalize(st);
    *id = sqlite3_last_insert_rowid(db);
    return out;
}

static int insert_meas(sqlite3 *db, int64_t id, const store_calib_meas *m, size_t n, kvs_err *err)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db,
                                "INSERT INTO kernel_measurements(calib_id, op, shape_json, tokens, "
                                "batch, context, median_s, p10_s, p90_s, repeats) "
                                "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                                -1, &st, NULL);
    for (size_t i = 0; i < n && rc == SQLITE_OK; i++) {
        sqlite3_reset(st);
        if ((rc = sqlite3_bind_int64(st, 1, id)) || (rc = bind_text(st, 2, m[i].op)) ||
            (rc = bind_text(st, 3, m[i].shape_json)) ||
            (rc = sqlite3_bind_int64(st, 4, m[i].tokens)) ||
            (rc = sqlite3_bind_int64(st, 5, m[i].batch)) ||
            (rc = sqlite3_bind_int64(st, 6, m[i].context)) ||
            (rc = sqlite3_bind_double(st, 7, m[i].median_s)) ||
            (rc = sqlite3_bind_double(st, 8, m[i].p10_s)) ||
            (rc = sqlite3_bind_double(st, 9, m[i].p90_s)) ||
            (rc = sqlite3_bind_int64(st, 10, m[i].repeats)))
            break;
        rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
    }
    int out = rc == SQLITE_OK ? KVS_OK : db_fail(db, err, "inserting kernel measurements");
    sqlite3_finalize(st);
    return out;
}

int store_calib_write(store *s, const store_calib_meta *meta, const store_calib_meas *m,
                      size_t n, int64_t *calib_id, kvs_err *err)
{
    sqlite3 *db = store_db(s);
    int rc = store_begin(s, err);
    if (rc != KVS_OK)
        return rc;
    if ((rc = insert_calib(db, meta, calib_id, err)) != KVS_OK ||
        (rc = insert_meas(db, *calib_id, m, n, err)) != KVS_OK ||
        (rc = store_commit(s, err)) != KVS_OK) {
        store_rollback(s);
        return rc;
    }
    return KVS_OK;
}

static int insert_profile(sqlite3 *db, int64_t calib_id, const char *device, const char *gpu,
                          const char *model, const char *params_json, const char *fit_error_json,
                          int64_t *profile_id, kvs_err *err)
{
    sqlite3_stmt *st = NULL;
    int src = sqlite3_prepare_v2(db,
                                 "INSERT INTO profiles(calib_id, created_at, device, gpu, model, "
                                 "params_json, fit_error_json) VALUES(?1, " NOW_SQL ", ?2, ?3, ?4, ?5, ?6)",
                                 -1, &st, NULL);
    if (src == SQLITE_OK && !(src = sqlite3_bind_int64(st, 1, calib_id)) &&
        !(src = bind_text(st, 2, device)) && !(src = bind_text(st, 3, gpu)) &&
        !(src = bind_text(st, 4, model)) && !(src = bind_text(st, 5, params_json)) &&
        !(src = bind_text(st, 6, fit_error_json)))
        src = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
    int rc = src == SQLITE_OK ? KVS_OK : db_fail(db, err, "inserting profile");
    sqlite3_finalize(st);
    if (rc == KVS_OK)
        *profile_id = sqlite3_last_insert_rowid(db);
    return rc;
}

int store_profile_write(store *s, int64_t calib_id, const char *device, const char *gpu,
                        const char *model, const char *params_json, const char *fit_error_json,
                        int64_t *profile_id, kvs_err *err)
{
    int rc = store_begin(s, err);
    if (rc != KVS_OK)
        return rc;
    if ((rc = insert_profile(store_db(s), calib_id, device, gpu, model, params_json,
                             fit_error_json, profile_id, err)) != KVS_OK ||
        (rc = store_commit(s, err)) != KVS_OK)
        store_rollback(s);
    return rc;
}

int store_calib_write_profile(store *s, const store_calib_meta *meta, const store_calib_meas *m,
                              size_t n, const char *params_json, const char *fit_error_json,
                              int64_t *calib_id, int64_t *profile_id, kvs_err *err)
{
    sqlite3 *db = store_db(s);
    int rc = store_begin(s, err);
    if (rc != KVS_OK)
        return rc;
    if ((rc = insert_calib(db, meta, calib_id, err)) != KVS_OK ||
        (rc = insert_meas(db, *calib_id, m, n, err)) != KVS_OK ||
        (rc = insert_profile(db, *calib_id, meta->device, meta->gpu, meta->model, params_json,
                             fit_error_json, profile_id, err)) != KVS_OK ||
        (rc = store_commit(s, err)) != KVS_OK) {
        store_rollback(s);
        return rc;
    }
    return KVS_OK;
}

static void copy_col(sqlite3_stmt *st, int i, char *dst, size_t n)
{
    const unsigned char *v = sqlite3_column_text(st, i);
    snprintf(dst, n, "%s", v ? (const char *)v : "");
}

static char *dup_col(sqlite3_stmt *st, int i)
{
    const unsigned char *v = sqlite3_column_text(st, i);
    return v ? strdup((const char *)v) : NULL;
}

int store_profile_find(sqlite3 *db, int64_t profile_id, const char *model, const char *gpu,
                       store_profile_row *out, kvs_err *err)
{
    memset(out, 0, sizeof *out);
    sqlite3_stmt *st = NULL;
    const char *sql =
        profile_id > 0
            ? "SELECT profile_id, calib_id, created_at, device, gpu, model, params_json, "
              "fit_error_json FROM profiles WHERE profile_id = ?1"
            : "SELECT profile_id, calib_id, created_at, device, gpu, model, params_json, "
              "fit_error_json FROM profiles WHERE (?2 IS NULL OR model = ?2) "
              "AND (?3 IS NULL OR gpu = ?3) ORDER BY profile_id DESC LIMIT 1";
    int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    if (rc != SQLITE_OK)
        return db_fail(db, err, "reading profiles");
    if (profile_id > 0)
        rc = sqlite3_bind_int64(st, 1, profile_id);
    else if ((rc = bind_text(st, 2, model)) == SQLITE_OK)
        rc = bind_text(st, 3, gpu);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    int out_rc = KVS_OK;
    if (rc == SQLITE_ROW) {
        out->profile_id = sqlite3_column_int64(st, 0);
        out->calib_id = sqlite3_column_int64(st, 1);
        copy_col(st, 2, out->created_at, sizeof out->created_at);
        copy_col(st, 3, out->device, sizeof out->device);
        copy_col(st, 4, out->gpu, sizeof out->gpu);
        copy_col(st, 5, out->model, sizeof out->model);
        out->params_json = dup_col(st, 6);
        out->fit_error_json = dup_col(st, 7);
        if (!out->params_json)
            out_rc = kvs_errf(err, KVS_EINVAL, "profile %lld has no parameters",
                              (long long)out->profile_id);
    } else if (rc == SQLITE_DONE) {
        if (profile_id > 0)
            out_rc = kvs_errf(err, KVS_EINVAL, "no profile with id %lld in the database",
                              (long long)profile_id);
        else
            out_rc = kvs_errf(err, KVS_EINVAL, "no profile for model '%s' on gpu '%s'",
                              model ? model : "(any)", gpu ? gpu : "(any)");
    } else {
        out_rc = db_fail(db, err, "reading profiles");
    }
    sqlite3_finalize(st);
    if (out_rc != KVS_OK)
        store_profile_row_free(out);
    return out_rc;
}

void store_profile_row_free(store_profile_row *r)
{
    free(r->params_json);
    free(r->fit_error_json);
    r->params_json = r->fit_error_json = NULL;
}
