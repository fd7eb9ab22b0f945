/* store.c — opening and closing the database, bringing its schema up to
 * date, and the transaction helpers every writer uses.  Writing runs is in
 * store_run.c; the schema text is in schema.c.
 */
#include "store.h"

#include <errno.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store_image.h"
#include "store_spool.h"

#define STORE_DEFAULT_BUSY_MS 5000
#define STORE_DEFAULT_WAIT_S 600.0

struct store {
    sqlite3 *db;          /* open connection, owned */
    char *path;           /* path (or URI) as given to store_open, owned */
    int busy_ms;          /* give up on a locked database after this many ms */
    int busy;             /* 1 = the last store_begin/commit gave up on a lock */
    store_schema_how how; /* what store_open did to the schema */
    double wait_s;        /* store_save_run waits this long, s, then spools */
    store_wait_fn wait_fn; /* told while store_save_run waits; may be NULL */
    void *wait_ctx;       /* for wait_fn */
};

sqlite3 *store_db(store *s) { return s->db; }

const char *store_path(const store *s) { return s->path; }

int store_has_file(store *s)
{
    const char *f = sqlite3_db_filename(s->db, "main");
    return f && *f;
}

void store_set_busy_timeout(store *s, int ms)
{
    s->busy_ms = ms < 0 ? 0 : ms;
    /* Only fails on a misuse (closed handle); the value is kept anyway. */
    (void)sqlite3_busy_timeout(s->db, s->busy_ms);
}

/* "PATH: sqlite message" as KVS_EDB; an I/O failure also names the system
 * error ("disk I/O error (File too large)"). */
int store_fail(const store *s, kvs_err *err, const char *what)
{
    int prim = sqlite3_errcode(s->db) & 0xff, e = sqlite3_system_errno(s->db);
    int os = e > 0 && (prim == SQLITE_IOERR || prim == SQLITE_FULL);
    return kvs_errf(err, KVS_EDB, "%s: %s%s%s%s%s%s", s->path, what ? what : "",
                    what ? ": " : "", sqlite3_errmsg(s->db), os ? " (" : "",
                    os ? strerror(e) : "", os ? ")" : "");
}

int store_exec(store *s, kvs_err *err, const char *what, const char *sql, const char *types,
               ...)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK)
        return store_fail(s, err, what);
    va_list ap;
    va_start(ap, types);
    int ok = 1;
    for (int i = 0; types[i] && ok; i++) {
        const char *t;
        switch (types[i]) {
        case 'i': ok = sqlite3_bind_int64(st, i + 1, va_arg(ap, int64_t)) == SQLITE_OK; break;
        case 'p': { /* an id: NULL when not positive */
            int64_t v = va_arg(ap, int64_t);
            ok = (v > 0 ? sqlite3_bind_int64(st, i + 1, v) : sqlite3_bind_null(st, i + 1)) ==
                 SQLITE_OK;
            break;
        }
        case 'd': ok = sqlite3_bind_double(st, i + 1, va_arg(ap, double)) == SQLITE_OK; break;
        case 't':
            t = va_arg(ap, const char *);
            ok = (t ? sqlite3_bind_text(st, i + 1, t, -1, SQLITE_TRANSIENT)
                    : sqlite3_bind_null(st, i + 1)) == SQLITE_OK;
            break;
        default: ok = 0; break;
        }
    }
    va_end(ap);
    int r = SQLITE_ROW;
    while (ok && r == SQLITE_ROW)
        r = sqlite3_step(st);
    int rc = ok && r == SQLITE_DONE ? KVS_OK : store_fail(s, err, what);
    sqlite3_finalize(st);
    return rc;
}

void store_set_wait(store *s, double limit_s, store_wait_fn fn, void *ctx)
{
    s->wait_s = limit_s >= 0 ? limit_s : 0;
    s->wait_fn = fn;
    s->wait_ctx = ctx;
}

double store_wait_limit(const store *s) { return s->wait_s; }

void store_wait_note(store *s, double waited_s)
{
    if (s->wait_fn)
        s->wait_fn(s->wait_ctx, s->path, waited_s, s->wait_s);
}

int store_busy(const store *s) { return s->busy; }

store_schema_how store_schema_opened(const store *s) { return s->how; }

int store_busy_timeout(const store *s) { return s->busy_ms; }

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Run `sql`, retrying SQLITE_BUSY (which SQLite's busy handler does not
 * always absorb, e.g. on a WAL snapshot conflict) until the busy timeout has
 * passed since the first try.  Cost: one statement, plus waits. */
static int exec_retry(store *s, const char *sql, kvs_err *err)
{
    double deadline = now_ms() + s->busy_ms;
    s->busy = 0;
    for (;;) {
        int rc = sqlite3_exec(s->db, sql, NULL, NULL, NULL);
        if (rc == SQLITE_OK)
            return KVS_OK;
        if ((rc & 0xff) != SQLITE_BUSY || now_ms() >= deadline) {
            s->busy = (rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED;
            return store_fail(s, err, NULL);
        }
        struct timespec nap = {0, 5 * 1000 * 1000};
        nanosleep(&nap, NULL);
    }
}

int store_begin(store *s, kvs_err *err) { return exec_retry(s, "BEGIN IMMEDIATE", err); }

int store_commit(store *s, kvs_err *err) { return exec_retry(s, "COMMIT", err); }

void store_rollback(store *s)
{
    if (!s || sqlite3_get_autocommit(s->db))
        return; /* no transaction open */
    /* A failed ROLLBACK leaves nothing to do: SQLite rolls back on close. */
    (void)sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
}

void store_close(store *s)
{
    if (!s)
        return;
    /* close_v2 releases the handle even if a caller of store_db leaked a
     * statement (it is then freed when that statement is finalized). */
    (void)sqlite3_close_v2(s->db);
    free(s->path);
    free(s);
}

/* Read meta.schema_version into *v (0 when the database has no meta table or
 * no version row).  Cost: two small queries. */
static int schema_version(store *s, int *v, kvs_err *err)
{
    sqlite3_stmt *st = NULL;
    int rc = KVS_OK, src;
    *v = 0;
    src = sqlite3_prepare_v2(s->db,
                             "SELECT count(*) FROM sqlite_master "
                             "WHERE type = 'table' AND name = 'meta'",
                             -1, &st, NULL);
    if (src != SQLITE_OK)
        return store_fail(s, err, NULL);
    if (sqlite3_step(st) != SQLITE_ROW) {
        rc = store_fail(s, err, NULL);
        goto out;
    }
    int have_meta = sqlite3_column_int(st, 0) > 0;
    sqlite3_finalize(st);
    st = NULL;
    if (!have_meta)
        return KVS_OK;

    if (sqlite3_prepare_v2(s->db, "SELECT value FROM meta WHERE key = 'schema_version'",
                           -1, &st, NULL) != SQLITE_OK)
        return store_fail(s, err, "reading meta");
    src = sqlite3_step(st);
    if (src == SQLITE_DONE)
        goto out; /* meta without a version: treat as empty */
    if (src != SQLITE_ROW) {
        rc = store_fail(s, err, "reading meta");
        goto out;
    }
    const char *txt = (const char *)sqlite3_column_text(st, 0);
    char *end = NULL;
    errno = 0;
    long val = txt ? strtol(txt, &end, 10) : -1;
    if (!txt || !*txt || *end || errno || val < 0 || val > INT_MAX) {
        rc = kvs_errf(err, KVS_EDB, "%s: meta.schema_version '%s' is not a version number",
                      s->path, txt ? txt : "NULL");
        goto out;
    }
    *v = (int)val;
out:
    sqlite3_finalize(st);
    return rc;
}

/* *empty = 1 when sqlite_master lists nothing (a new file), so that the
 * recorded current schema (store_schema_fresh_sql) may be created whole.
 * Cost: one small query. */
static int schema_empty(store *s, int *empty, kvs_err *err)
{
    sqlite3_stmt *st = NULL;
    *empty = 0;
    if (sqlite3_prepare_v2(s->db, "SELECT count(*) FROM sqlite_master", -1, &st, NULL) !=
        SQLITE_OK)
        return store_fail(s, err, NULL);
    int rc = sqlite3_step(st) == SQLITE_ROW ? KVS_OK : store_fail(s, err, NULL);
    if (rc == KVS_OK)
        *empty = sqlite3_column_int64(st, 0) == 0;
    sqlite3_finalize(st);
    return rc;
}

static int refuse_newer(const store *s, int v, kvs_err *err)
{
    return kvs_errf(err, KVS_EDB,
                    "%s: database schema version %d is newer than this kvsim %s "
                    "supports (%d); use a newer kvsim",
                    s->path, v, KVSIM_VERSION, STORE_SCHEMA_VERSION);
}

static int schema_migrate(store *s, kvs_err *err);

/* Bring the schema to STORE_SCHEMA_VERSION in one transaction; writes
 * nothing when it is already current (so a read-only file opens). */
static int schema_upgrade(store *s, kvs_err *err)
{
    int v, rc;
    if ((rc = schema_version(s, &v, err)))
        return rc;
    if (v > STORE_SCHEMA_VERSION)
        return refuse_newer(s, v, err);
    if (v == STORE_SCHEMA_VERSION)
        return KVS_OK;
    /* A migration may rebuild a table (drop and rename): without foreign
     * keys the drop cascades nothing, and the legacy rename leaves the
     * views over the table alone.  Both are connection settings, changed
     * outside the transaction and restored after it. */
    int legacy = 0;
    (void)sqlite3_exec(s->db, "PRAGMA foreign_keys=OFF", NULL, NULL, NULL);
    (void)sqlite3_db_config(s->db, SQLITE_DBCONFIG_LEGACY_ALTER_TABLE, 1, &legacy);
    rc = schema_migrate(s, err);
    (void)sqlite3_db_config(s->db, SQLITE_DBCONFIG_LEGACY_ALTER_TABLE, 0, &legacy);
    if (sqlite3_exec(s->db, "PRAGMA foreign_keys=ON", NULL, NULL, NULL) != SQLITE_OK && !rc)
        rc = store_fail(s, err, NULL);
    return rc;
}

/* The migrations themselves, in one transaction. */
static int schema_migrate(store *s, kvs_err *err)
{
    int v, rc;
    if ((rc = store_begin(s, err)))
        return rc;
    /* Another process may have upgraded it while we waited for the lock. */
    if ((rc = schema_version(s, &v, err)))
        goto fail;
    if (v > STORE_SCHEMA_VERSION) {
        rc = refuse_newer(s, v, err);
        goto fail;
    }
    const char *fresh = v == 0 ? store_schema_fresh_sql() : NULL;
    int empty = 0;
    if (fresh && (rc = schema_empty(s, &empty, err)))
        goto fail;
    if (fresh && empty) {
        if (sqlite3_exec(s->db, fresh, NULL, NULL, NULL) != SQLITE_OK) {
            rc = store_fail(s, err, "creating the schema");
            goto fail;
        }
        v = STORE_SCHEMA_VERSION;
        s->how = STORE_SCHEMA_FRESH;
    } else {
        s->how = STORE_SCHEMA_MIGRATED;
    }
    for (; v < STORE_SCHEMA_VERSION; v++) {
        const char *sql = store_migration_sql(v);
        if (!sql) {
            rc = kvs_errf(err, KVS_ENOMEM, "%s: out of memory building the schema", s->path);
            goto fail;
        }
        if (sqlite3_exec(s->db, sql, NULL, NULL, NULL) != SQLITE_OK) {
            char what[64];
            snprintf(what, sizeof what, "creating schema version %d", v + 1);
            rc = store_fail(s, err, what);
            goto fail;
        }
    }
    char sql[128];
    snprintf(sql, sizeof sql,
             "INSERT OR REPLACE INTO meta(key, value) VALUES('schema_version', '%d')",
             STORE_SCHEMA_VERSION);
    if (sqlite3_exec(s->db, sql, NULL, NULL, NULL) != SQLITE_OK) {
        rc = store_fail(s, err, "writing meta");
        goto fail;
    }
    if ((rc = store_commit(s, err)))
        goto fail;
    return KVS_OK;
fail:
    store_rollback(s);
    return rc;
}

/* $KVSIM_DB_WAIT_S or the default. */
static int wait_s_from_env(double *s, kvs_err *err)
{
    const char *e = getenv("KVSIM_DB_WAIT_S");
    *s = STORE_DEFAULT_WAIT_S;
    if (!e)
        return KVS_OK;
    char *end = NULL;
    errno = 0;
    double v = strtod(e, &end);
    if (!*e || *end || errno || !(v >= 0 && v <= 1e7))
        return kvs_errf(err, KVS_EINVAL,
                        "KVSIM_DB_WAIT_S: '%s' is not a number of seconds in [0, 1e7]", e);
    *s = v;
    return KVS_OK;
}

/* $KVSIM_BUSY_TIMEOUT_MS or the default. */
static int busy_ms_from_env(int *ms, kvs_err *err)
{
    const char *e = getenv("KVSIM_BUSY_TIMEOUT_MS");
    *ms = STORE_DEFAULT_BUSY_MS;
    if (!e)
        return KVS_OK;
    char *end = NULL;
    errno = 0;
    long v = strtol(e, &end, 10);
    if (!*e || *end || errno || v < 0 || v > INT_MAX)
        return kvs_errf(err, KVS_EINVAL,
                        "KVSIM_BUSY_TIMEOUT_MS: '%s' is not a non-negative integer", e);
    *ms = (int)v;
    return KVS_OK;
}

int store_open(const char *path, store **out, kvs_err *err)
{
    store *s = NULL;
    int rc = KVS_OK, src;
    *out = NULL;
    if (!path || !*path)
        return kvs_errf(err, KVS_EINVAL, "store: empty database path");
    s = calloc(1, sizeof *s);
    if (!s || !(s->path = strdup(path))) {
        rc = kvs_errf(err, KVS_ENOMEM, "%s: out of memory", path);
        goto fail;
    }
    if ((rc = busy_ms_from_env(&s->busy_ms, err)) || (rc = wait_s_from_env(&s->wait_s, err)))
        goto fail;
    /* a path that names no file yet: the recorded image, schema and all */
    const int imaged = store_image_create(path);
    src = sqlite3_open_v2(path, &s->db,
                          SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI |
                              SQLITE_OPEN_NOMUTEX,
                          NULL);
    if (src != SQLITE_OK) {
        rc = kvs_errf(err, KVS_EDB, "%s: %s", path,
                      s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(src));
        goto fail;
    }
    store_set_busy_timeout(s, s->busy_ms);

    /* WAL lets readers (kvsim query) run while a run is written.  A
     * filesystem or a read-only file that refuses it keeps the old journal
     * mode; a file that is not a database fails here. */
    src = sqlite3_exec(s->db, "PRAGMA journal_mode=WAL", NULL, NULL, NULL);
    if (src != SQLITE_OK) {
        int prim = src & 0xff;
        if (prim != SQLITE_BUSY && prim != SQLITE_LOCKED && prim != SQLITE_READONLY) {
            rc = store_fail(s, err, NULL);
            goto fail;
        }
    }
    if (sqlite3_exec(s->db, "PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON",
                     NULL, NULL, NULL) != SQLITE_OK) {
        rc = store_fail(s, err, NULL);
        goto fail;
    }
    if ((rc = schema_upgrade(s, err)))
        goto fail;
    if (imaged && s->how == STORE_SCHEMA_CURRENT)
        s->how = STORE_SCHEMA_IMAGE;
    *out = s;
    return KVS_OK;
fail:
    store_close(s);
    return rc;
}

int store_require_writable(store *s, kvs_err *err)
{
    if (sqlite3_db_readonly(s->db, "main") == 1)
        return kvs_errf(err, KVS_EDB, "%s: attempt to write a readonly database", s->path);
    return KVS_OK;
}

int store_open_writable(const char *path, store **out, kvs_err *err)
{
    int rc = store_open(path, out, err);
    if (rc)
        return rc;
    if ((rc = store_require_writable(*out, err))) {
        store_close(*out);
        *out = NULL;
        return rc;
    }
    /* Runs an earlier writer kept in the spool (store_spool.h) go in now;
     * a spool that cannot be imported yet stays for the next writer. */
    store_spool_report rep;
    (void)store_spool_import(*out, &rep, NULL);
    return KVS_OK;
}
