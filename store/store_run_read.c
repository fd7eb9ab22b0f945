/* store_run_read.c — reading a `runs` row back, column by column, through
 * the run_fields table: the reader half of store_run.c's writer. */
#include "store.h"

#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

#include "../sim/run_fields.h"

/* The value of result column i as a run_value (text borrowed from st). */
static run_value column_value(sqlite3_stmt *st, int i)
{
    run_value v = {RUN_VALUE_NULL, 0, 0.0, NULL};
    switch (sqlite3_column_type(st, i)) {
    case SQLITE_INTEGER: v.kind = RUN_VALUE_INT; v.i = sqlite3_column_int64(st, i); break;
    case SQLITE_FLOAT: v.kind = RUN_VALUE_REAL; v.d = sqlite3_column_double(st, i); break;
    case SQLITE_TEXT: v.kind = RUN_VALUE_TEXT; v.s = (const char *)sqlite3_column_text(st, i); break;
    case SQLITE_BLOB: v.kind = RUN_VALUE_TEXT; v.s = NULL; break; /* refused by run_field_set */
    default: break;
    }
    return v;
}

/* A provenance text column into dst[n]; KVS_EINVAL if it does not fit. */
static int prov_text(sqlite3_stmt *st, int i, const char *name, char *dst, size_t n, kvs_err *err)
{
    const unsigned char *t = sqlite3_column_text(st, i);
    const char *s = t ? (const char *)t : "";
    if (strlen(s) >= n)
        return kvs_errf(err, KVS_EINVAL, "runs.%s: longer than %zu characters", name, n - 1);
    strcpy(dst, s);
    return KVS_OK;
}

static int read_prov(sqlite3_stmt *st, int i, const run_field *f, store_run_row *o, kvs_err *err)
{
    const char *n = f->name;
    if (!strcmp(n, "status"))
        return prov_text(st, i, n, o->status, sizeof o->status, err);
    if (!strcmp(n, "error"))
        return prov_text(st, i, n, o->error, sizeof o->error, err);
    if (!strcmp(n, "kvsim_version"))
        return prov_text(st, i, n, o->kvsim_version, sizeof o->kvsim_version, err);
    if (!strcmp(n, "started_at"))
        return prov_text(st, i, n, o->started_at, sizeof o->started_at, err);
    if (!strcmp(n, "trace_sha256"))
        return prov_text(st, i, n, o->trace_sha256, sizeof o->trace_sha256, err);
    if (!strcmp(n, "wall_s")) {
        o->wall_s = sqlite3_column_type(st, i) == SQLITE_NULL ? NAN : sqlite3_column_double(st, i);
        return KVS_OK;
    }
    return kvs_errf(err, KVS_EINTERNAL, "store: provenance column %s has no reader", n);
}

int store_read_run(sqlite3 *db, int64_t run_id, store_run_row *out, kvs_err *err)
{
    size_t nf;
    const run_field *f = run_fields(&nf);
    char sql[4096];
    size_t len = (size_t)snprintf(sql, sizeof sql, "SELECT ");
    for (size_t i = 0; i < nf && len < sizeof sql; i++)
        len += (size_t)snprintf(sql + len, sizeof sql - len, i ? ", %s" : "%s", f[i].name);
    if (len < sizeof sql)
        len += (size_t)snprintf(sql + len, sizeof sql - len, " FROM runs WHERE run_id = ?");
    if (len >= sizeof sql)
        return kvs_errf(err, KVS_EINTERNAL, "store: runs SELECT longer than %zu bytes",
                        sizeof sql);
    memset(out, 0, sizeof *out);
    out->run_id = run_id;
    run_config_defaults(&out->cfg);
    sqlite3_stmt *st = NULL;
    int rc = KVS_OK;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK ||
        sqlite3_bind_int64(st, 1, run_id) != SQLITE_OK) {
        rc = kvs_errf(err, KVS_EDB, "%s: reading runs: %s", sqlite3_db_filename(db, "main"), sqlite3_errmsg(db));
        goto done;
    }
    int step = sqlite3_step(st);
    if (step == SQLITE_DONE) {
        rc = kvs_errf(err, KVS_EINVAL, "no such run %lld", (long long)run_id);
        goto done;
    }
    if (step != SQLITE_ROW) {
        rc = kvs_errf(err, KVS_EDB, "%s: reading runs: %s", sqlite3_db_filename(db, "main"), sqlite3_errmsg(db));
        goto done;
    }
    for (size_t i = 0; i < nf && rc == KVS_OK; i++) {
        if (f[i].group == RUN_FIELD_GROUP_PROV) {
            kvs_err e;
            if ((rc = read_prov(st, (int)i, &f[i], out, &e)))
                kvs_errf(err, rc, "run %lld: %s", (long long)run_id, e.msg);
        } else {
            run_value v = column_value(st, (int)i);
            kvs_err e;
            if ((rc = run_field_set(&f[i], &out->cfg, &out->sum, &v, &e)))
                kvs_errf(err, rc, "run %lld: %s", (long long)run_id, e.msg);
        }
    }
done:
    sqlite3_finalize(st);
    return rc;
}
