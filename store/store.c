/* store.c — opening and closing the database, bringing its schema up to
 * date, and the transaction helpers every writer uses.  Writing runs is in
 * store_run.c; the schema text is in schema.c.
 */
#include "store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../base/fdio.h"
#include "store_image.h"
#include "store_spool.h"

#define STORE_DEFAULT_BUSY_MS 5000
#define STORE_DEFAULT_WAIT_S 600.0

struct store {
    sqlite3 *db;          /* open connection, owned */
    char *path;           /* path (or URI) as given to store_open, owned */
    char *pending;        /* store_open_new: the private file the new database is
                             built in until store_publish links it at path
                             (owned); NULL for every other store */
    int published;        /* store_publish closed the connection (db NULL):
                             store_db opens it again on path at first use */
    int busy_ms;          /* give up on a locked database after this many ms */
    int busy;             /* 1 = the last store_begin/commit gave up on a lock */
    store_schema_how how; /* what store_open did to the schema */
    double wait_s;        /* store_save_run waits this long, s, then spools */
    store_wait_fn wait_fn; /* told while store_save_run waits; may be NULL */
    void *wait_ctx;       /* for wait_fn */
};

static int open_conn(store *s, const char *file, int pending, int imaged, kvs_err *err);

/* After store_publish: the connection, opened on the database at path. */
static int reopen_at_path(store *s, kvs_err *err)
{
    s->how = STORE_SCHEMA_CURRENT;
    return open_conn(s, s->path, 0, 0, err);
}

sqlite3 *store_db(store *s)
{
    if (!s->db && s->published) { /* after store_publish: on first use */
        kvs_err e;
        s->published = 0;
        if (reopen_at_path(s, &e) != KVS_OK && s->db) {
            sqlite3_close_v2(s->db); /* callers then fail on a NULL handle (SQLITE_MISUSE) */
            s->db = NULL;
        }
    }
    return s->db;
}

const char *store_path(const store *s) { return s->path; }

int store_has_file(store *s)
{
    const char *f = sqlite3_db_filename(store_db(s), "main");
    return f && *f;
}

void store_set_busy_timeout(store *s, int ms)
{
    s->busy_ms = ms < 0 ? 0 : ms;
    /* Only fails on a misuse (closed handle); the value is kept anyway. */
    if (s->db) /* else set when the connection opens */
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
    if (sqlite3_prepare_v2(store_db(s), sql, -1, &st, NULL) != SQLITE_OK)
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
        int rc = sqlite3_exec(store_db(s), sql, NULL, NULL, NULL);
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
    if (!s || !s->db || sqlite3_get_autocommit(s->db))
        return; /* no transaction open */
    /* A failed ROLLBACK leaves nothing to do: SQLite rolls back on close. */
    (void)sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
}

/* Remove a private file and what SQLite may have left beside it. */
static void unlink_pending(const char *f)
{
    static const char *const side[] = {"", "-wal", "-shm", "-journal"};
    size_t n = strlen(f) + 16;
    char *b = malloc(n);
    for (size_t k = 0; b && k < sizeof side / sizeof side[0]; k++) {
        snprintf(b, n, "%s%s", f, side[k]);
        (void)unlink(b);
    }
    free(b);
}

void store_close(store *s)
{
    if (!s)
        return;
    /* close_v2 releases the handle even if a caller of store_db leaked a
     * statement (it is then freed when that statement is finalized). */
    (void)sqlite3_close_v2(s->db);
    if (s->pending) /* never published: the private file goes */
        unlink_pending(s->pending);
    free(s->pending);
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

/* Open the connection on `file` and bring the schema up to date.  pending:
 * a private file no one else sees (store_open_new): its journal in memory,
 * no syncs until store_publish.  imaged: store_image_create made the file. */
static int open_conn(store *s, const char *file, int pending, int imaged, kvs_err *err)
{
    int src = sqlite3_open_v2(file, &s->db,
                              SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI |
                                  SQLITE_OPEN_NOMUTEX,
                              NULL);
    if (src != SQLITE_OK)
        return kvs_errf(err, KVS_EDB, "%s: %s", s->path,
                        s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(src));
    store_set_busy_timeout(s, s->busy_ms);

    /* WAL lets readers (kvsim query) run while a run is written.  A
     * filesystem or a read-only file that refuses it keeps the old journal
     * mode; a file that is not a database fails here.  A private file
     * keeps its rollback journal in memory (a failed write still rolls
     * back) and needs no syncs: if kvsim dies, it is never linked into
     * place (store_publish syncs it once, whole, first). */
    src = sqlite3_exec(s->db,
                       pending ? "PRAGMA synchronous=OFF; PRAGMA journal_mode=MEMORY"
                               : "PRAGMA journal_mode=WAL",
                       NULL, NULL, NULL);
    if (src != SQLITE_OK) {
        int prim = src & 0xff;
        if (pending || (prim != SQLITE_BUSY && prim != SQLITE_LOCKED && prim != SQLITE_READONLY))
            return store_fail(s, err, NULL);
    }
    if (sqlite3_exec(s->db,
                     pending ? "PRAGMA foreign_keys=ON" /* synchronous=OFF above */
                             : "PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON",
                     NULL, NULL, NULL) != SQLITE_OK)
        return store_fail(s, err, NULL);
    int rc = schema_upgrade(s, err);
    if (rc)
        return rc;
    if (imaged && s->how == STORE_SCHEMA_CURRENT)
        s->how = STORE_SCHEMA_IMAGE;
    return KVS_OK;
}

/* A store for path, its settings read from the environment. */
static int store_new(const char *path, store **out, kvs_err *err)
{
    *out = NULL;
    if (!path || !*path)
        return kvs_errf(err, KVS_EINVAL, "store: empty database path");
    store *s = calloc(1, sizeof *s);
    if (!s || !(s->path = strdup(path))) {
        free(s);
        return kvs_errf(err, KVS_ENOMEM, "%s: out of memory", path);
    }
    int rc;
    if ((rc = busy_ms_from_env(&s->busy_ms, err)) || (rc = wait_s_from_env(&s->wait_s, err))) {
        free(s->path);
        free(s);
        return rc;
    }
    *out = s;
    return KVS_OK;
}

int store_open(const char *path, store **out, kvs_err *err)
{
    store *s = NULL;
    int rc = store_new(path, &s, err);
    if (rc)
        return rc;
    /* a path that names no file yet: the recorded image, schema and all */
    const int imaged = store_image_create(path);
    if ((rc = open_conn(s, path, 0, imaged, err))) {
        store_close(s);
        return rc;
    }
    *out = s;
    return KVS_OK;
}

/* The directory part of path ("." for a bare name), into buf. */
static void dir_of(const char *path, char *buf, size_t cap)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(buf, cap, ".");
    else if (slash == path)
        snprintf(buf, cap, "/");
    else
        snprintf(buf, cap, "%.*s", (int)(slash - path), path);
}

/* Private files of path that a dead kvsim left (killed mid-run): named
 * PATH.kvsim-new-PID-N (with SQLite's -wal/-shm/-journal beside), PID no
 * longer running here, untouched for a minute.  Best effort; O(entries of
 * the directory). */
static void sweep_stale(const char *path)
{
    char dir[4096];
    dir_of(path, dir, sizeof dir);
    const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
    const size_t nb = strlen(base);
    DIR *d = opendir(dir);
    if (!d)
        return;
    const time_t now = time(NULL);
    for (struct dirent *e; (e = readdir(d));) {
        const char *n = e->d_name;
        if (strncmp(n, base, nb) != 0 || strncmp(n + nb, ".kvsim-new-", 11) != 0)
            continue;
        char *end = NULL;
        long pid = strtol(n + nb + 11, &end, 10);
        if (pid <= 0 || !end || *end != '-' || (kill((pid_t)pid, 0) == 0 || errno != ESRCH))
            continue;
        char f[8192];
        struct stat st;
        if ((size_t)snprintf(f, sizeof f, "%s/%s", dir, n) >= sizeof f || stat(f, &st) != 0 ||
            now - st.st_mtime < 60)
            continue;
        (void)unlink(f);
    }
    closedir(d);
}

int store_open_new(const char *path, store **out, kvs_err *err)
{
    sweep_stale(path);
    char *tmp = store_image_create_private(path);
    if (!tmp)
        return store_open_writable(path, out, err);
    store *s = NULL;
    int rc = store_new(path, &s, err);
    if (rc) {
        unlink_pending(tmp);
        free(tmp);
        return rc;
    }
    s->pending = tmp;
    if ((rc = open_conn(s, tmp, 1, 1, err))) {
        store_close(s); /* unlinks tmp */
        return rc;
    }
    *out = s;
    return KVS_OK;
}

int store_pending(const store *s) { return s->pending != NULL; }

int store_publish(store *s, int *raced, kvs_err *err)
{
    *raced = 0;
    if (!s->pending)
        return KVS_OK;
    /* back to WAL, as a file store_open makes is; then the whole file to disk */
    if (sqlite3_exec(s->db, "PRAGMA journal_mode=WAL", NULL, NULL, NULL) != SQLITE_OK)
        return store_fail(s, err, "finishing the new database");
    if (sqlite3_close(s->db) != SQLITE_OK)
        return store_fail(s, err, "finishing the new database");
    s->db = NULL;
    char *tmp = s->pending;
    s->pending = NULL;
    int rc = KVS_OK;
    if (fdio_sync_path(tmp, 0) != 0) {
        rc = kvs_errf(err, KVS_EDB, "%s: writing the new database: %s", s->path, strerror(errno));
    } else if (link(tmp, s->path) != 0) {
        /* EEXIST: another process made the database meanwhile.  Anything
         * else (a filesystem without hard links): SQLite makes it the
         * usual way.  Either way the run is written again there. */
        *raced = 1;
    } else {
        char dir[4096];
        dir_of(s->path, dir, sizeof dir);
        (void)fdio_sync_path(dir, 1); /* the new name made durable; best effort */
    }
    unlink_pending(tmp);
    free(tmp);
    if (rc)
        return rc;
    if (*raced) /* the run is to be written again, there */
        return reopen_at_path(s, err);
    s->published = 1; /* opened again only if used again (store_db) */
    return KVS_OK;
}

int store_require_writable(store *s, kvs_err *err)
{
    if (sqlite3_db_readonly(store_db(s), "main") == 1)
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
