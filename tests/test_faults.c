/* test_faults.c — the store under injected faults: every write, truncate and
 * sync SQLite makes while opening a database, writing a run and closing it
 * is failed in turn (as an I/O error and as a full disk), and every memory
 * allocation SQLite makes in that span is failed in turn.
 *
 * A shim VFS wraps SQLite's default one and fails the k-th file operation
 * after it is armed; a wrapper of SQLite's allocator fails the k-th
 * allocation.  For each k: the store either succeeds, or fails with KVS_EDB
 * and one line naming the database; afterwards, opened without faults, the
 * database passes PRAGMA integrity_check, holds the run written before the
 * faults, and holds the new run complete (all its requests and steps) when
 * the write succeeded, and nothing of it when it failed.  k runs from 1 until
 * a pass where the fault never fires, so every file operation of the span is
 * failed once (allocations: every one of the first 300, then every 61st). */
#include <dirent.h>
#include <unistd.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/run.h"
#include "store/store.h"
#include "testutil.h"

/* ------------------------------------------------------- the fault VFS */

typedef struct fault_state {
    int armed;    /* count operations and fail the k-th */
    int64_t k;    /* 1-based operation to fail */
    int64_t seen; /* operations counted since arming */
    int fired;    /* the k-th operation happened (and failed) */
    int code;     /* SQLite code returned by the failed operation */
} fault_state;

static fault_state g_fault;
static sqlite3_vfs *g_real;   /* SQLite's default VFS */
static sqlite3_vfs g_vfs;     /* the shim */

typedef struct fault_file {
    sqlite3_file base;  /* pMethods = the shim's methods */
    sqlite3_file *real; /* the real file, stored right after this struct */
} fault_file;

static int fault_hit(void)
{
    if (!g_fault.armed || g_fault.fired)
        return 0;
    if (++g_fault.seen < g_fault.k)
        return 0;
    g_fault.fired = 1;
    return 1;
}

#define REAL(f) (((fault_file *)(f))->real)

static int f_close(sqlite3_file *f)
{
    int rc = REAL(f)->pMethods ? REAL(f)->pMethods->xClose(REAL(f)) : SQLITE_OK;
    return rc;
}
static int f_read(sqlite3_file *f, void *b, int n, sqlite3_int64 off)
{
    return REAL(f)->pMethods->xRead(REAL(f), b, n, off);
}
static int f_write(sqlite3_file *f, const void *b, int n, sqlite3_int64 off)
{
    if (fault_hit())
        return g_fault.code;
    return REAL(f)->pMethods->xWrite(REAL(f), b, n, off);
}
static int f_truncate(sqlite3_file *f, sqlite3_int64 size)
{
    if (fault_hit())
        return g_fault.code == SQLITE_FULL ? SQLITE_FULL : SQLITE_IOERR_TRUNCATE;
    return REAL(f)->pMethods->xTruncate(REAL(f), size);
}
static int f_sync(sqlite3_file *f, int flags)
{
    if (fault_hit())
        return SQLITE_IOERR_FSYNC;
    return REAL(f)->pMethods->xSync(REAL(f), flags);
}
static int f_size(sqlite3_file *f, sqlite3_int64 *size)
{
    return REAL(f)->pMethods->xFileSize(REAL(f), size);
}
static int f_lock(sqlite3_file *f, int l) { return REAL(f)->pMethods->xLock(REAL(f), l); }
static int f_unlock(sqlite3_file *f, int l) { return REAL(f)->pMethods->xUnlock(REAL(f), l); }
static int f_reserved(sqlite3_file *f, int *out)
{
    return REAL(f)->pMethods->xCheckReservedLock(REAL(f), out);
}
static int f_fcntl(sqlite3_file *f, int op, void *arg)
{
    return REAL(f)->pMethods->xFileControl(REAL(f), op, arg);
}
static int f_sector(sqlite3_file *f) { return REAL(f)->pMethods->xSectorSize(REAL(f)); }
static int f_devchar(sqlite3_file *f)
{
    return REAL(f)->pMethods->xDeviceCharacteristics(REAL(f));
}
static int f_shm_map(sqlite3_file *f, int pg, int sz, int extend, void volatile **p)
{
    return REAL(f)->pMethods->xShmMap(REAL(f), pg, sz, extend, p);
}
static int f_shm_lock(sqlite3_file *f, int off, int n, int flags)
{
    return REAL(f)->pMethods->xShmLock(REAL(f), off, n, flags);
}
static void f_shm_barrier(sqlite3_file *f) { REAL(f)->pMethods->xShmBarrier(REAL(f)); }
static int f_shm_unmap(sqlite3_file *f, int del)
{
    return REAL(f)->pMethods->xShmUnmap(REAL(f), del);
}
static int f_fetch(sqlite3_file *f, sqlite3_int64 off, int n, void **p)
{
    return REAL(f)->pMethods->xFetch(REAL(f), off, n, p);
}
static int f_unfetch(sqlite3_file *f, sqlite3_int64 off, void *p)
{
    return REAL(f)->pMethods->xUnfetch(REAL(f), off, p);
}

static const sqlite3_io_methods fault_io = {
    3,         f_close,     f_read,    f_write,       f_truncate, f_sync,
    f_size,    f_lock,      f_unlock,  f_reserved,    f_fcntl,    f_sector,
    f_devchar, f_shm_map,   f_shm_lock, f_shm_barrier, f_shm_unmap, f_fetch,
    f_unfetch,
};

static int v_open(sqlite3_vfs *v, const char *name, sqlite3_file *f, int flags, int *out)
{
    (void)v;
    fault_file *ff = (fault_file *)f;
    ff->real = (sqlite3_file *)(ff + 1);
    memset(ff->real, 0, (size_t)g_real->szOsFile);
    int rc = g_real->xOpen(g_real, name, ff->real, flags, out);
    /* The shim's methods only when the real file opened: SQLite calls
     * xClose exactly when pMethods is set. */
    ff->base.pMethods = ff->real->pMethods ? &fault_io : NULL;
    return rc;
}
static int v_delete(sqlite3_vfs *v, const char *name, int sync)
{
    (void)v;
    return g_real->xDelete(g_real, name, sync);
}
static int v_access(sqlite3_vfs *v, const char *name, int flags, int *out)
{
    (void)v;
    return g_real->xAccess(g_real, name, flags, out);
}
static int v_fullpath(sqlite3_vfs *v, const char *name, int n, char *out)
{
    (void)v;
    return g_real->xFullPathname(g_real, name, n, out);
}
static void *v_dlopen(sqlite3_vfs *v, const char *name)
{
    (void)v;
    return g_real->xDlOpen(g_real, name);
}
static void v_dlerror(sqlite3_vfs *v, int n, char *msg)
{
    (void)v;
    g_real->xDlError(g_real, n, msg);
}
static void (*v_dlsym(sqlite3_vfs *v, void *h, const char *sym))(void)
{
    (void)v;
    return g_real->xDlSym(g_real, h, sym);
}
static void v_dlclose(sqlite3_vfs *v, void *h)
{
    (void)v;
    g_real->xDlClose(g_real, h);
}
static int v_random(sqlite3_vfs *v, int n, char *out)
{
    (void)v;
    return g_real->xRandomness(g_real, n, out);
}
static int v_sleep(sqlite3_vfs *v, int us)
{
    (void)v;
    return g_real->xSleep(g_real, us);
}
static int v_time(sqlite3_vfs *v, double *out)
{
    (void)v;
    return g_real->xCurrentTime(g_real, out);
}
static int v_lasterr(sqlite3_vfs *v, int n, char *out)
{
    (void)v;
    return g_real->xGetLastError(g_real, n, out);
}
static int v_time64(sqlite3_vfs *v, sqlite3_int64 *out)
{
    (void)v;
    return g_real->xCurrentTimeInt64(g_real, out);
}

/* Make the shim SQLite's default VFS (idempotent). */
static void fault_vfs_install(void)
{
    if (g_real)
        return;
    ck_assert_int_eq(sqlite3_initialize(), SQLITE_OK);
    g_real = sqlite3_vfs_find(NULL);
    ck_assert_ptr_nonnull(g_real);
    ck_assert_int_ge(g_real->iVersion, 2);
    g_vfs = (sqlite3_vfs){
        .iVersion = 2,
        .szOsFile = (int)sizeof(fault_file) + g_real->szOsFile,
        .mxPathname = g_real->mxPathname,
        .zName = "kvsim-fault",
        .xOpen = v_open,
        .xDelete = v_delete,
        .xAccess = v_access,
        .xFullPathname = v_fullpath,
        .xDlOpen = v_dlopen,
        .xDlError = v_dlerror,
        .xDlSym = v_dlsym,
        .xDlClose = v_dlclose,
        .xRandomness = v_random,
        .xSleep = v_sleep,
        .xCurrentTime = v_time,
        .xGetLastError = v_lasterr,
        .xCurrentTimeInt64 = v_time64,
    };
    ck_assert_int_eq(sqlite3_vfs_register(&g_vfs, 1), SQLITE_OK);
}

/* ---------------------------------------------- the failing allocator */

typedef struct alloc_fault {
    int armed;
    int64_t k, seen;
    int fired;
} alloc_fault;

static alloc_fault g_alloc;
static sqlite3_mem_methods g_mem_real;

static int alloc_hit(void)
{
    if (!g_alloc.armed || g_alloc.fired)
        return 0;
    if (++g_alloc.seen < g_alloc.k)
        return 0;
    g_alloc.fired = 1;
    return 1;
}
static void *m_malloc(int n) { return alloc_hit() ? NULL : g_mem_real.xMalloc(n); }
static void m_free(void *p) { g_mem_real.xFree(p); }
static void *m_realloc(void *p, int n) { return alloc_hit() ? NULL : g_mem_real.xRealloc(p, n); }
static int m_size(void *p) { return g_mem_real.xSize(p); }
static int m_roundup(int n) { return g_mem_real.xRoundup(n); }
static int m_init(void *a) { return g_mem_real.xInit(a); }
static void m_shutdown(void *a) { g_mem_real.xShutdown(a); }

/* Route SQLite's allocations through the wrapper; must run before SQLite
 * is initialized in this (forked) test process. */
static void alloc_fault_install(void)
{
    ck_assert_int_eq(sqlite3_shutdown(), SQLITE_OK);
    ck_assert_int_eq(sqlite3_config(SQLITE_CONFIG_GETMALLOC, &g_mem_real), SQLITE_OK);
    sqlite3_mem_methods m = {m_malloc, m_free, m_realloc, m_size, m_roundup,
                             m_init,   m_shutdown, NULL};
    ck_assert_int_eq(sqlite3_config(SQLITE_CONFIG_MALLOC, &m), SQLITE_OK);
    /* The lookaside and page-cache pools would hide allocations. */
    ck_assert_int_eq(sqlite3_config(SQLITE_CONFIG_LOOKASIDE, 0, 0), SQLITE_OK);
    ck_assert_int_eq(sqlite3_initialize(), SQLITE_OK);
}

/* ------------------------------------------------------- the workload */

/* A real run of 60 synthetic requests, its steps recorded or not: three
 * tables and some 25 pages to write. */
typedef struct workload {
    trace tr;
    run_config cfg;
    cost_model cost;
    run_result res;
} workload;

static void workload_init(workload *w, int record_steps)
{
    kvs_err err = {{0}};
    trace_synth_spec spec;
    model_spec m;
    gpu_spec g;
    memset(w, 0, sizeof *w);
    const char *text = "arrival=poisson,rate=50,n=60,prompt=uniform:16:512,output=uniform:1:64";
    ck_assert_msg(!trace_synth_parse(text, &spec, &err), "%s", err.msg);
    ck_assert_msg(!trace_synth_gen(&spec, text, 7, &w->tr, &err), "%s", err.msg);
    run_config_defaults(&w->cfg);
    snprintf(w->cfg.synthetic, sizeof w->cfg.synthetic, "%s", text);
    snprintf(w->cfg.cost, sizeof w->cfg.cost, "affine:0.001,1e-5,1e-8,0");
    w->cfg.record_steps = record_steps;
    ck_assert(!model_lookup(w->cfg.model, &m, &err) && !gpu_lookup(w->cfg.gpu, &g, &err));
    ck_assert_msg(!run_config_resolve(&w->cfg, &m, &g, &err), "%s", err.msg);
    ck_assert_msg(!cost_model_create(w->cfg.cost, NULL, NULL, 1, &w->cost, &err), "%s",
                  err.msg);
    ck_assert_msg(!run_execute(&w->cfg, &w->tr, &w->cost, &w->res, &err), "%s", err.msg);
    ck_assert_int_eq(w->res.sum.n_requests, 60);
}

static void workload_free(workload *w)
{
    run_result_free(&w->res);
    cost_model_free(&w->cost);
    trace_free(&w->tr);
}

/* --------------------------------------------------------- the checks */

/* With no fault armed: the database is sound and holds exactly `finished`
 * runs, each complete.  An empty file (schema never committed) counts as
 * zero runs. */
static void check_db(const char *path, int64_t finished, int64_t k)
{
    sqlite3 *db = NULL;
    ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
    sqlite3_stmt *st = NULL;
    ck_assert_int_eq(sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, NULL),
                     SQLITE_OK);
    ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
    ck_assert_msg(!strcmp((const char *)sqlite3_column_text(st, 0), "ok"),
                  "fault %lld: integrity_check: %s", (long long)k, sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    if (tu_sql_int(db, "SELECT count(*) FROM sqlite_master WHERE name = 'runs'") == 0) {
        ck_assert_msg(finished == 0, "fault %lld: schema gone with %lld runs stored",
                      (long long)k, (long long)finished);
    } else {
        ck_assert_msg(tu_sql_int(db, "SELECT count(*) FROM runs") == finished,
                      "fault %lld: %lld runs, want %lld", (long long)k,
                      (long long)tu_sql_int(db, "SELECT count(*) FROM runs"), (long long)finished);
        ck_assert_msg(tu_sql_int(db, "SELECT count(*) FROM runs r WHERE status != 'finished' OR "
                                "n_requests != (SELECT count(*) FROM requests q "
                                "WHERE q.run_id = r.run_id) OR (record_steps = 1 AND "
                                "n_steps != (SELECT count(*) FROM steps s "
                                "WHERE s.run_id = r.run_id))") == 0,
                      "fault %lld: an incomplete run is visible", (long long)k);
        /* the row tables themselves: the views show only rows of a run */
        ck_assert_int_eq(tu_sql_int(db, "SELECT count(*) FROM request_rows WHERE key >> 32 NOT IN "
                                   "(SELECT run_id FROM runs)"), 0);
        ck_assert_int_eq(tu_sql_int(db, "SELECT count(*) FROM step_rows WHERE key >> 32 NOT IN "
                                   "(SELECT run_id FROM runs)"), 0);
    }
    ck_assert_int_eq(sqlite3_close(db), SQLITE_OK);
}

static void check_error(int rc, const kvs_err *err, const char *path, int64_t k)
{
    ck_assert_msg(rc == KVS_EDB, "fault %lld: status %d (%s), want KVS_EDB", (long long)k, rc,
                  err->msg);
    ck_assert_msg(strstr(err->msg, path) != NULL, "fault %lld: '%s' does not name the db",
                  (long long)k, err->msg);
    ck_assert_msg(strchr(err->msg, '\n') == NULL, "fault %lld: message is not one line",
                  (long long)k);
}

/* Open, write w's run, close: the span a `kvsim run` process covers.
 * Returns the status of the first failing call. */
static int open_write_close(const char *path, const workload *w, kvs_err *err)
{
    store *s = NULL;
    int64_t id;
    int rc = store_open(path, &s, err);
    if (rc == KVS_OK)
        rc = store_write_run(s, &w->cfg, &w->res, &id, err);
    store_close(s);
    return rc;
}

/* The same span as `kvsim run --db NEW` covers it: a database that does
 * not exist yet, built privately and published (store_open_new). */
static int open_write_publish(const char *path, const workload *w, kvs_err *err)
{
    store *s = NULL;
    int64_t id;
    int raced = 0;
    int rc = store_open_new(path, &s, err);
    if (rc == KVS_OK)
        rc = store_write_run(s, &w->cfg, &w->res, &id, err);
    if (rc == KVS_OK)
        rc = store_publish(s, &raced, err);
    ck_assert_int_eq(raced, 0);
    store_close(s);
    return rc;
}

static int g_publish; /* every_file_fault's fresh passes go through store_open_new */

/* Fail the k-th file operation for k = 1, 2, ... until one pass completes
 * without reaching k.  fresh: a new database every pass (schema creation);
 * else one database that starts with a run and gains one per success. */
static void every_file_fault(int code, int fresh, int record_steps)
{
    fault_vfs_install();
    workload w;
    workload_init(&w, record_steps);
    const char *dir = tu_tmpdir();
    char path[600];
    snprintf(path, sizeof path, "%s/faults.db", dir);
    kvs_err err = {{0}};
    int64_t finished = 0, failures = 0;
    if (!fresh) {
        ck_assert_msg(open_write_close(path, &w, &err) == KVS_OK, "%s", err.msg);
        finished = 1;
    }
    for (int64_t k = 1;; k++) {
        if (fresh) {
            snprintf(path, sizeof path, "%s/fresh%lld.db", dir, (long long)k);
            finished = 0;
        }
        g_fault = (fault_state){.armed = 1, .k = k, .code = code};
        int rc = fresh && g_publish ? open_write_publish(path, &w, &err)
                                    : open_write_close(path, &w, &err);
        g_fault.armed = 0;
        if (fresh && g_publish && rc != KVS_OK) { /* nothing at path, nothing beside it */
            ck_assert_msg(access(path, F_OK) != 0, "fault %lld: a failed new database left %s",
                          (long long)k, path);
            char side[700];
            snprintf(side, sizeof side, "%s.kvsim-new-%ld-", path, (long)getpid());
            DIR *d = opendir(dir);
            for (struct dirent *e; d && (e = readdir(d));)
                ck_assert_msg(!strstr(e->d_name, "kvsim-new"), "fault %lld: %s left", (long long)k,
                              e->d_name);
            if (d)
                closedir(d);
        }
        if (rc == KVS_OK)
            finished++;
        else {
            check_error(rc, &err, path, k);
            failures++;
        }
        check_db(path, finished, k);
        if (!g_fault.fired)
            break; /* the whole span ran with fewer than k operations */
        ck_assert_msg(k < 100000, "no end to the file operations");
    }
    /* Every pass but the last failed an operation; most of them fail the
     * call (some land in a checkpoint, which SQLite retries later). */
    ck_assert_int_gt(failures, 10);
    fprintf(stderr, "test_faults: %s%s faults at each of %lld file operations%s: %lld failed "
            "the call, nothing lost\n", code == SQLITE_FULL ? "disk-full" : "I/O-error",
            fresh ? (g_publish ? " (new database, built privately)" : " (new database)") : "", (long long)(g_fault.seen),
            record_steps ? " (steps recorded)" : "", (long long)failures);
    /* And the database still takes a run. */
    ck_assert_msg(open_write_close(path, &w, &err) == KVS_OK, "%s", err.msg);
    check_db(path, finished + 1, 0);
    workload_free(&w);
}

START_TEST(test_write_ioerr_every_point) { every_file_fault(SQLITE_IOERR_WRITE, 0, 1); }
END_TEST

START_TEST(test_write_full_every_point) { every_file_fault(SQLITE_FULL, 0, 0); }
END_TEST

START_TEST(test_schema_ioerr_every_point) { every_file_fault(SQLITE_IOERR_WRITE, 1, 0); }
END_TEST

START_TEST(test_new_db_ioerr_every_point)
{
    g_publish = 1;
    every_file_fault(SQLITE_IOERR_WRITE, 1, 1);
    g_publish = 0;
}
END_TEST

START_TEST(test_new_db_full_every_point)
{
    g_publish = 1;
    every_file_fault(SQLITE_FULL, 1, 1);
    g_publish = 0;
}
END_TEST

/* Fail SQLite's k-th allocation of open, write and close: every k up to
 * OOM_DENSE (opening, the schema check, preparing each statement, the first
 * rows), then every OOM_STRIDE-th (the same row-writing code repeating, some
 * thousands of allocations).  Cost: a few hundred passes. */
#define OOM_DENSE 300
#define OOM_STRIDE 61
START_TEST(test_sqlite_oom_every_point)
{
    alloc_fault_install();
    workload w;
    workload_init(&w, 1);
    const char *dir = tu_tmpdir();
    char path[600];
    snprintf(path, sizeof path, "%s/oom.db", dir);
    kvs_err err = {{0}};
    ck_assert_msg(open_write_close(path, &w, &err) == KVS_OK, "%s", err.msg);
    int64_t finished = 1, failures = 0;
    int64_t passes = 0;
    for (int64_t k = 1;; k += k < OOM_DENSE ? 1 : OOM_STRIDE) {
        passes++;
        g_alloc = (alloc_fault){.armed = 1, .k = k};
        int rc = open_write_close(path, &w, &err);
        g_alloc.armed = 0;
        if (rc == KVS_OK) {
            finished++;
        } else {
            check_error(rc, &err, path, k);
            failures++;
        }
        check_db(path, finished, k);
        if (!g_alloc.fired)
            break;
        ck_assert_msg(k < 100000, "no end to the allocations");
    }
    ck_assert_int_gt(failures, 10);
    fprintf(stderr, "test_faults: %lld SQLite allocations failed in turn (of %lld): %lld "
            "failed the call, nothing lost\n", (long long)passes, (long long)g_alloc.seen,
            (long long)failures);
    workload_free(&w);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("faults");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_write_ioerr_every_point);
    tcase_add_test(tc, test_write_full_every_point);
    tcase_add_test(tc, test_schema_ioerr_every_point);
    tcase_add_test(tc, test_new_db_ioerr_every_point);
    tcase_add_test(tc, test_new_db_full_every_point);
    tcase_add_test(tc, test_sqlite_oom_every_point);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    Suite *s = suite();
    return tu_run_suites(&s, 1);
}
