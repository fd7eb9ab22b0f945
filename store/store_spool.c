/* store_spool.c — waiting for a locked database, keeping a run in a spool
 * file when the wait runs out, and importing spooled runs (see
 * store_spool.h). */
#include "store_spool.h"

#include "../base/fdio.h"
#include "store_calib.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SPOOL_FORMAT "kvsim run spool 1"
#define SPOOL_NOTE_FIRST_S 3.0 /* first progress note after this wait, s */
#define SPOOL_NOTE_EVERY_S 5.0 /* then one every this many s */
#define SPOOL_ATTEMPT_MS 1000  /* one attempt's busy wait at most, ms */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void nap_s(double s)
{
    if (s <= 0)
        return;
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

int store_spool_dir(store *s, char *buf, size_t cap, kvs_err *err)
{
    const char *f = sqlite3_db_filename(store_db(s), "main");
    if (!f || !*f)
        return kvs_errf(err, KVS_EINVAL, "%s: an in-memory database has no spool",
                        store_path(s));
    if ((size_t)snprintf(buf, cap, "%s.spool", f) >= cap)
        return kvs_errf(err, KVS_EINVAL, "%s: database path too long for a spool", f);
    return KVS_OK;
}

/* ------------------------------------------------------------ writing */

/* The write to retry: a finished or a failed run. */
typedef struct spool_calib {
    const store_calib_meta *meta;
    const store_calib_meas *m;     /* [n] */
    size_t n;
    const char *params_json, *fit_error_json; /* the profile */
    int64_t *profile_id;           /* receives the profile's id */
} spool_calib;

typedef struct spool_job {
    const run_config *cfg;         /* NULL for a calibration */
    const run_result *res; /* NULL: a failed run */
    const trace *tr;
    const char *error, *started_at;
    double wall_s;
    const spool_calib *calib;      /* non-NULL: a calibration, not a run */
    const store_stage *stage;      /* the run's staged request rows, or NULL */
} spool_job;

static int job_write(store *s, const spool_job *j, int64_t *id, kvs_err *err)
{
    if (j->calib)
        return store_calib_write_profile(s, j->calib->meta, j->calib->m, j->calib->n,
                                         j->calib->params_json, j->calib->fit_error_json, id,
                                         j->calib->profile_id, err);
    if (j->res)
        return store_write_run_staged(s, j->cfg, j->res, j->stage, id, err);
    return store_write_failed_run(s, j->cfg, j->tr, j->error, j->started_at, j->wall_s, id,
                                  err);
}

/* Append ", (KEY, VALUE)" rows to *vals (sqlite3_mprintf'd; NULL when out
 * of memory). */
static void tag_add(char **vals, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *row = sqlite3_vmprintf(fmt, ap);
    va_end(ap);
    char *next = row && *vals ? sqlite3_mprintf("%s, %s", *vals, row) : NULL;
    sqlite3_free(row);
    sqlite3_free(*vals);
    *vals = next;
}

/* What the main connection is tagging the run as (store_sweep_tag and its
 * parameters, store_compare_tag), as `spool` rows, so the import can
 * insert its sweep_points, sweep_point_params and compare_runs rows: ""
 * when not tagging (sqlite3_free it; NULL when out of memory). */
static char *current_tag(store *s, const run_config *cfg)
{
    sqlite3 *db = store_db(s);
    sqlite3_stmt *q = NULL;
    char *vals = sqlite3_mprintf("");
    if (!cfg) /* a calibration */
        return vals;
    if (cfg->sweep_id > 0 &&
        sqlite3_prepare_v2(db, "SELECT point_index, point_key FROM temp.kvsim_sweep_cur "
                               "WHERE sweep_id = ?1", -1, &q, NULL) == SQLITE_OK) {
        sqlite3_bind_int64(q, 1, cfg->sweep_id);
        if (sqlite3_step(q) == SQLITE_ROW)
            tag_add(&vals, "('sweep_id', %lld), ('point_index', %lld), ('point_key', %Q)",
                    (long long)cfg->sweep_id, (long long)sqlite3_column_int64(q, 0),
                    (const char *)sqlite3_column_text(q, 1));
    }
    sqlite3_finalize(q);
    q = NULL;
    if (cfg->sweep_id > 0 &&
        sqlite3_prepare_v2(db, "SELECT param, value FROM temp.kvsim_sweep_params", -1, &q,
                           NULL) == SQLITE_OK)
        while (vals && sqlite3_step(q) == SQLITE_ROW)
            tag_add(&vals, "('param:' || %Q, %Q)", (const char *)sqlite3_column_text(q, 0),
                    (const char *)sqlite3_column_text(q, 1));
    sqlite3_finalize(q);
    q = NULL;
    if (cfg->compare_id > 0 &&
        sqlite3_prepare_v2(db, "SELECT variant_index, variant FROM temp.kvsim_compare_cur "
                               "WHERE compare_id = ?1", -1, &q, NULL) == SQLITE_OK) {
        sqlite3_bind_int64(q, 1, cfg->compare_id);
        if (vals && sqlite3_step(q) == SQLITE_ROW)
            tag_add(&vals, "('compare_id', %lld), ('variant_index', %lld), ('variant', %Q)",
                    (long long)cfg->compare_id, (long long)sqlite3_column_int64(q, 0),
                    (const char *)sqlite3_column_text(q, 1));
    }
    sqlite3_finalize(q);
    return vals;
}

/* Describe the spool file in its `spool` table. */
static int write_spool_meta(store *sp, store *main, const spool_job *j, kvs_err *err)
{
    char now[32];
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(now, sizeof now, "%Y-%m-%dT%H:%M:%SZ", &tm);
    char *tag = current_tag(main, j->cfg);
    char *sql = tag ? sqlite3_mprintf(
        "CREATE TABLE spool(key TEXT PRIMARY KEY, value);\n"
        "INSERT INTO spool VALUES ('format', %Q), ('database', %Q), ('created_at', %Q),\n"
        "  ('pid', %lld), ('kvsim_version', %Q)%s;\n"
        "PRAGMA journal_mode=DELETE;",
        SPOOL_FORMAT, sqlite3_db_filename(store_db(main), "main"), now, (long long)getpid(),
        KVSIM_VERSION, tag) : NULL;
    sqlite3_free(tag);
    if (!sql)
        return kvs_errf(err, KVS_ENOMEM, "%s: out of memory", store_path(sp));
    int r = sqlite3_exec(store_db(sp), sql, NULL, NULL, NULL);
    sqlite3_free(sql);
    if (r != SQLITE_OK)
        return kvs_errf(err, KVS_EDB, "%s: writing the spool table: %s", store_path(sp),
                        sqlite3_errmsg(store_db(sp)));
    return KVS_OK;
}

/* Keep the run in DIR/run-...db; *final receives its path. */
static int spool_write(store *s, const spool_job *j, char *final, size_t cap, kvs_err *err)
{
    static int seq; /* files spooled by this process */
    char dir[4096], tmp[4200], stamp[32];
    int rc;
    if ((rc = store_spool_dir(s, dir, sizeof dir, err)))
        return rc;
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return kvs_errf(err, KVS_EIO, "%s: cannot create it: %s", dir, strerror(errno));
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
    seq++;
    const char *kind = j->calib ? "calib" : "run";
    snprintf(final, cap, "%s/%s-%s-%lld-%d.db", dir, kind, stamp, (long long)getpid(), seq);
    snprintf(tmp, sizeof tmp, "%s/.%s-%s-%lld-%d.tmp", dir, kind, stamp, (long long)getpid(), seq);
    unlink(tmp);
    store *sp = NULL;
    int64_t id = 0;
    if ((rc = store_open(tmp, &sp, err)) || (rc = job_write(sp, j, &id, err)) ||
        (rc = write_spool_meta(sp, s, j, err))) {
        store_close(sp);
        unlink(tmp);
        return rc;
    }
    store_close(sp);
    if (fdio_sync_path(tmp, 0) != 0 || rename(tmp, final) != 0) {
        rc = kvs_errf(err, KVS_EIO, "%s: %s", final, strerror(errno));
        unlink(tmp);
        return rc;
    }
    (void)fdio_sync_path(dir, 1);
    return KVS_OK;
}

/* Write, retrying a locked database with backoff up to the wait limit; then
 * spool. */
static int save(store *s, const spool_job *j, int64_t *run_id, kvs_err *err)
{
    double t0 = now_s(), limit = store_wait_limit(s), next_note = SPOOL_NOTE_FIRST_S;
    double backoff = 0.01;
    int busy_ms = store_busy_timeout(s);
    unsigned rnd = (unsigned)getpid() * 2654435761u;
    int rc;
    *run_id = 0;
    for (;;) {
        double left = limit - (now_s() - t0);
        int ms = left <= 0 ? 0 : left * 1e3 < SPOOL_ATTEMPT_MS ? (int)(left * 1e3) : SPOOL_ATTEMPT_MS;
        store_set_busy_timeout(s, ms < busy_ms ? ms : busy_ms);
        rc = job_write(s, j, run_id, err);
        store_set_busy_timeout(s, busy_ms);
        if (rc == KVS_OK || !store_busy(s))
            return rc;
        double waited = now_s() - t0;
        if (waited >= limit)
            break;
        if (waited >= next_note) {
            store_wait_note(s, waited);
            next_note = waited + SPOOL_NOTE_EVERY_S;
        }
        rnd = rnd * 1103515245u + 12345u;
        double pause = backoff * (0.5 + (double)(rnd >> 16 & 0x7fff) / 32768.0);
        if (pause > limit - waited)
            pause = limit - waited;
        if (pause > next_note - waited) /* wake for the next note on time */
            pause = next_note - waited > 0.01 ? next_note - waited : 0.01;
        nap_s(pause);
        backoff = backoff * 2 < 1.0 ? backoff * 2 : 1.0;
    }
    char file[4300];
    kvs_err e;
    double waited = now_s() - t0;
    const char *what = j->calib ? "calibration" : "run";
    if (spool_write(s, j, file, sizeof file, &e))
        return kvs_errf(err, KVS_EDB, "%s: database is locked after %.0f s, and the %s could "
                        "not be spooled either: %s", store_path(s), waited, what, e.msg);
    return kvs_errf(err, KVS_EDB,
                    "%s: database is locked after %.0f s; the %s is kept in %s (the next "
                    "write or `kvsim store recover --db %s` imports it)",
                    store_path(s), waited, what, file, store_path(s));
}

int store_save_run(store *s, const run_config *cfg, const run_result *res, int64_t *run_id,
                   kvs_err *err)
{
    return store_save_run_staged(s, cfg, res, NULL, run_id, err);
}

int store_save_run_staged(store *s, const run_config *cfg, const run_result *res,
                          const store_stage *stage, int64_t *run_id, kvs_err *err)
{
    spool_job j = {cfg, res, res ? res->tr : NULL, NULL, NULL, 0, NULL, stage};
    if (!res)
        return kvs_errf(err, KVS_EINVAL, "%s: no run result to store", store_path(s));
    return save(s, &j, run_id, err);
}

int store_save_failed_run(store *s, const run_config *cfg, const trace *tr, const char *error,
                          const char *started_at, double wall_s, int64_t *run_id, kvs_err *err)
{
    spool_job j = {cfg, NULL, tr, error, started_at, wall_s, NULL, NULL};
    return save(s, &j, run_id, err);
}

int store_save_calib(store *s, const store_calib_meta *meta, const store_calib_meas *m,
                     size_t n, const char *params_json, const char *fit_error_json,
                     int64_t *calib_id, int64_t *profile_id, kvs_err *err)
{
    spool_calib c = {meta, m, n, params_json, fit_error_json, profile_id};
    spool_job j = {NULL, NULL, NULL, NULL, NULL, 0, &c, NULL};
    int rc = save(s, &j, calib_id, err);
    if (rc) /* spooled (the spool file's own ids are not this database's) or failed */
        *calib_id = *profile_id = 0;
    return rc;
}

/* ---------------------------------------------------------- importing */

/* `"a","b",...` — the columns table `t` has in both main and kvsim_spool,
 * except `skip`; NULL on failure (sqlite3_free it). */
static char *common_columns(sqlite3 *db, const char *t, const char *skip)
{
    sqlite3_stmt *q = NULL;
    char *out = NULL;
    if (sqlite3_prepare_v2(db,
                           "SELECT group_concat('\"' || replace(m.name, '\"', '\"\"') || '\"', ',') "
                           "FROM pragma_table_info(?1, 'main') m WHERE m.name != ?2 AND m.name IN "
                           "(SELECT name FROM pragma_table_info(?1, 'kvsim_spool'))",
                           -1, &q, NULL) != SQLITE_OK)
        return NULL;
    sqlite3_bind_text(q, 1, t, -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 2, skip, -1, SQLITE_STATIC);
    if (sqlite3_step(q) == SQLITE_ROW && sqlite3_column_text(q, 0))
        out = sqlite3_mprintf("%s", (const char *)sqlite3_column_text(q, 0));
    sqlite3_finalize(q);
    return out;
}

/* Run printf-built SQL; SQLITE_* code. */
static int execf(sqlite3 *db, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *sql = sqlite3_vmprintf(fmt, ap);
    va_end(ap);
    if (!sql)
        return SQLITE_NOMEM;
    int r = sqlite3_exec(db, sql, NULL, NULL, NULL);
    sqlite3_free(sql);
    return r;
}

/* One int64 from SQL, or `dflt`. */
static int64_t query_i64(sqlite3 *db, const char *sql, const char *arg, int64_t dflt)
{
    sqlite3_stmt *q = NULL;
    int64_t v = dflt;
    if (sqlite3_prepare_v2(db, sql, -1, &q, NULL) == SQLITE_OK) {
        if (arg)
            sqlite3_bind_text(q, 1, arg, -1, SQLITE_STATIC);
        if (sqlite3_step(q) == SQLITE_ROW && sqlite3_column_type(q, 0) != SQLITE_NULL)
            v = sqlite3_column_int64(q, 0);
    }
    sqlite3_finalize(q);
    return v;
}

/* Copy spool run `old` and its rows; *new_id receives its new key.  Inside
 * the caller's transaction. */
static int copy_run(sqlite3 *db, int64_t old, int64_t *new_id)
{
    static const char *const child[] = {"requests", "steps", "class_metrics", "replica_metrics"};
    char *cols = common_columns(db, "runs", "run_id");
    if (!cols)
        return SQLITE_ERROR;
    int r = execf(db, "INSERT INTO main.runs(%s) SELECT %s FROM kvsim_spool.runs WHERE run_id = %lld",
                  cols, cols, (long long)old);
    sqlite3_free(cols);
    if (r != SQLITE_OK)
        return r;
    *new_id = sqlite3_last_insert_rowid(db);
    for (size_t i = 0; i < sizeof child / sizeof *child; i++) {
        if (query_i64(db, "SELECT count(*) FROM kvsim_spool.sqlite_master WHERE name = ?1",
                      child[i], 0) == 0)
            continue;
        if (!(cols = common_columns(db, child[i], "run_id")))
            return SQLITE_ERROR;
        r = execf(db, "INSERT INTO main.%s(run_id,%s) SELECT %lld,%s FROM kvsim_spool.%s "
                      "WHERE run_id = %lld",
                  child[i], cols, (long long)*new_id, cols, child[i], (long long)old);
        sqlite3_free(cols);
        if (r != SQLITE_OK)
            return r;
    }
    /* The sweep point it was written for, unless that point has a run now,
     * and the point's parameters (a search probe's), unless stored. */
    r = execf(db,
              "INSERT OR IGNORE INTO main.sweep_points(sweep_id, point_index, point_key, run_id) "
              "SELECT s.value, p.value, k.value, %lld FROM kvsim_spool.spool s, "
              "kvsim_spool.spool p, kvsim_spool.spool k WHERE s.key = 'sweep_id' AND "
              "p.key = 'point_index' AND k.key = 'point_key' AND EXISTS (SELECT 1 FROM "
              "main.sweeps w WHERE w.sweep_id = s.value) AND NOT EXISTS (SELECT 1 FROM "
              "main.sweep_points x WHERE x.sweep_id = s.value AND x.point_index = p.value)",
              (long long)*new_id);
    if (r == SQLITE_OK)
        r = execf(db,
                  "INSERT OR IGNORE INTO main.sweep_point_params(sweep_id, point_index, param, "
                  "value) SELECT s.value, p.value, substr(k.key, 7), k.value FROM "
                  "kvsim_spool.spool s, kvsim_spool.spool p, kvsim_spool.spool k WHERE "
                  "s.key = 'sweep_id' AND p.key = 'point_index' AND k.key GLOB 'param:*' AND "
                  "EXISTS (SELECT 1 FROM main.sweeps w WHERE w.sweep_id = s.value)");
    /* The compare variant it was written for, unless that variant has a run. */
    if (r == SQLITE_OK)
        r = execf(db,
                  "INSERT OR IGNORE INTO main.compare_runs(compare_id, variant_index, variant, "
                  "run_id) SELECT c.value, i.value, v.value, %lld FROM kvsim_spool.spool c, "
                  "kvsim_spool.spool i, kvsim_spool.spool v WHERE c.key = 'compare_id' AND "
                  "i.key = 'variant_index' AND v.key = 'variant' AND EXISTS (SELECT 1 FROM "
                  "main.compares w WHERE w.compare_id = c.value)",
                  (long long)*new_id);
    return r;
}

/* Copy every calibration of the spool with its measurements and profiles
 * under new keys; *n receives how many.  Inside the caller's transaction. */
static int copy_calibs(sqlite3 *db, int64_t *n)
{
    sqlite3_stmt *q = NULL;
    int r = sqlite3_prepare_v2(db, "SELECT calib_id FROM kvsim_spool.calibrations ORDER BY calib_id",
                               -1, &q, NULL);
    while (r == SQLITE_OK && sqlite3_step(q) == SQLITE_ROW) {
        int64_t old = sqlite3_column_int64(q, 0);
        char *cols = common_columns(db, "calibrations", "calib_id");
        r = cols ? execf(db, "INSERT INTO main.calibrations(%s) SELECT %s FROM "
                             "kvsim_spool.calibrations WHERE calib_id = %lld",
                         cols, cols, (long long)old)
                 : SQLITE_ERROR;
        sqlite3_free(cols);
        int64_t id = sqlite3_last_insert_rowid(db);
        if (r == SQLITE_OK && (cols = common_columns(db, "kernel_measurements", "calib_id"))) {
            r = execf(db, "INSERT INTO main.kernel_measurements(calib_id,%s) SELECT %lld,%s FROM "
                          "kvsim_spool.kernel_measurements WHERE calib_id = %lld",
                      cols, (long long)id, cols, (long long)old);
            sqlite3_free(cols);
        }
        if (r == SQLITE_OK)
            r = execf(db, "INSERT INTO main.profiles(calib_id, created_at, device, gpu, model, "
                          "params_json, fit_error_json) SELECT %lld, created_at, device, gpu, "
                          "model, params_json, fit_error_json FROM kvsim_spool.profiles WHERE "
                          "calib_id = %lld ORDER BY profile_id",
                      (long long)id, (long long)old);
        ++*n;
    }
    sqlite3_finalize(q);
    return r;
}

/* Import one attached spool: 1 = imported, 2 = already imported, 0 = failed
 * (message in err). */
static int import_attached(store *s, const char *name, int64_t *first_id, int64_t *calibs,
                           kvs_err *err)
{
    sqlite3 *db = store_db(s);
    kvs_err e;
    if (query_i64(db, "SELECT count(*) FROM kvsim_spool.spool WHERE key = 'format' AND value = ?1",
                  SPOOL_FORMAT, 0) != 1) {
        kvs_errf(err, KVS_EINVAL, "not a kvsim run spool");
        return 0;
    }
    if (store_begin(s, &e)) {
        kvs_errf(err, KVS_EDB, "%s", e.msg);
        return 0;
    }
    if (query_i64(db, "SELECT count(*) FROM main.spool_imports WHERE name = ?1", name, 0) > 0) {
        store_rollback(s);
        return 2;
    }
    sqlite3_stmt *q = NULL;
    int r = sqlite3_prepare_v2(db, "SELECT run_id FROM kvsim_spool.runs ORDER BY run_id", -1, &q,
                               NULL);
    int64_t first = 0;
    while (r == SQLITE_OK && sqlite3_step(q) == SQLITE_ROW) {
        int64_t id = 0;
        r = copy_run(db, sqlite3_column_int64(q, 0), &id);
        if (!first)
            first = id;
    }
    sqlite3_finalize(q);
    int64_t n_calibs = 0;
    if (r == SQLITE_OK)
        r = copy_calibs(db, &n_calibs);
    if (r == SQLITE_OK)
        r = execf(db, "INSERT INTO main.spool_imports(name, run_id, imported_at) VALUES "
                      "(%Q, %lld, strftime('%%Y-%%m-%%dT%%H:%%M:%%SZ', 'now'))",
                  name, (long long)first);
    if (r != SQLITE_OK) {
        kvs_errf(err, KVS_EDB, "%s", sqlite3_errmsg(db));
        store_rollback(s);
        return 0;
    }
    if (store_commit(s, &e)) {
        kvs_errf(err, KVS_EDB, "%s", e.msg);
        store_rollback(s);
        return 0;
    }
    *first_id = first;
    *calibs = n_calibs;
    return 1;
}

static int import_file(store *s, const char *path, const char *name, int64_t *first_id,
                       int64_t *calibs, kvs_err *err)
{
    sqlite3 *db = store_db(s);
    if (execf(db, "ATTACH %Q AS kvsim_spool", path) != SQLITE_OK) {
        kvs_errf(err, KVS_EDB, "%s", sqlite3_errmsg(db));
        return 0;
    }
    int r = import_attached(s, name, first_id, calibs, err);
    (void)sqlite3_exec(db, "DETACH kvsim_spool", NULL, NULL, NULL);
    if (r)
        unlink(path);
    return r;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The complete spool files of `dir` (run-*.db), sorted; *n entries. */
static char **list_spool(const char *dir, size_t *n)
{
    DIR *d = opendir(dir);
    char **v = NULL;
    size_t cap = 0;
    *n = 0;
    if (!d)
        return NULL;
    struct dirent *ent;
    while ((ent = readdir(d))) {
        size_t len = strlen(ent->d_name);
        if ((strncmp(ent->d_name, "run-", 4) && strncmp(ent->d_name, "calib-", 6)) || len < 7 ||
            strcmp(ent->d_name + len - 3, ".db"))
            continue;
        if (*n == cap) {
            char **w = realloc(v, (cap = cap ? cap * 2 : 8) * sizeof *v);
            if (!w)
                break;
            v = w;
        }
        if (!(v[*n] = strdup(ent->d_name)))
            break;
        (*n)++;
    }
    closedir(d);
    if (*n)
        qsort(v, *n, sizeof *v, by_name);
    return v;
}

int store_spool_import(store *s, store_spool_report *rep, kvs_err *err)
{
    char dir[4096];
    memset(rep, 0, sizeof *rep);
    if (store_spool_dir(s, dir, sizeof dir, NULL))
        return KVS_OK; /* an in-memory database never spools */
    size_t n;
    char **names = list_spool(dir, &n);
    int rc = KVS_OK;
    for (size_t i = 0; i < n; i++) {
        char path[4400];
        kvs_err e;
        int64_t id = 0, calibs = 0;
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        int r = import_file(s, path, names[i], &id, &calibs, &e);
        if (r == 1) {
            rep->imported++;
            rep->calibrations += calibs;
            if (!rep->first_run_id)
                rep->first_run_id = id;
        } else if (r == 2) {
            rep->duplicates++;
        } else {
            rep->left++;
            if (!rep->error[0]) {
                snprintf(rep->error, sizeof rep->error, "%s", e.msg);
                rc = kvs_errf(err, KVS_EDB, "%s: %s", path, e.msg);
            }
        }
        free(names[i]);
    }
    free(names);
    return rc;
}
