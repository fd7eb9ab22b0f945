/* store_groups.c — groups of runs (a `kvsim compare`, a sweep, a capacity
 * search): their ids are reserved by inserting the group's row, in a
 * transaction of its own, before any of its runs (AUTOINCREMENT keys, so
 * an id is never handed out twice, not even after the group is deleted),
 * and the row records the group's status: running (with the writer's pid
 * and host), complete, or interrupted. */
#include "store.h"

#include <errno.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int db_fail(store *s, kvs_err *err, const char *what)
{
    return kvs_errf(err, KVS_EDB, "%s: %s: %s", store_path(s), what,
                    sqlite3_errmsg(store_db(s)));
}

static void host_name(char *buf, size_t cap)
{
    if (gethostname(buf, cap) != 0)
        buf[0] = 0;
    buf[cap - 1] = 0;
}

int store_compare_create(store *s, const char *variants, int64_t n_runs, int64_t *compare_id,
                         kvs_err *err)
{
    sqlite3_stmt *st = NULL;
    char host[256];
    int rc;
    host_name(host, sizeof host);
    if ((rc = store_begin(s, err)))
        return rc;
    if (sqlite3_prepare_v2(store_db(s),
                           "INSERT INTO compares(created_at, kvsim_version, variants, n_runs, "
                           "status, pid, host) VALUES(strftime('%Y-%m-%dT%H:%M:%SZ', 'now'), "
                           "?1, ?2, ?3, 'running', ?4, ?5)",
                           -1, &st, NULL) != SQLITE_OK) {
        rc = db_fail(s, err, "preparing compares insert");
        goto fail;
    }
    int b = sqlite3_bind_text(st, 1, KVSIM_VERSION, -1, SQLITE_STATIC);
    b |= sqlite3_bind_text(st, 2, variants, -1, SQLITE_STATIC);
    b |= sqlite3_bind_int64(st, 3, n_runs);
    b |= sqlite3_bind_int64(st, 4, (int64_t)getpid());
    b |= sqlite3_bind_text(st, 5, host, -1, SQLITE_STATIC);
    if (b != SQLITE_OK || sqlite3_step(st) != SQLITE_DONE) {
        rc = db_fail(s, err, "writing the compares row");
        goto fail;
    }
    sqlite3_finalize(st);
    st = NULL;
    int64_t id = sqlite3_last_insert_rowid(store_db(s));
    if ((rc = store_commit(s, err)))
        goto fail;
    *compare_id = id;
    return KVS_OK;
fail:
    sqlite3_finalize(st);
    store_rollback(s);
    return rc;
}

/* The table and key of a group kind. */
static int group_table(const char *kind, const char **table, const char **key)
{
    if (!strcmp(kind, "compare")) {
        *table = "compares";
        *key = "compare_id";
    } else if (!strcmp(kind, "sweep")) {
        *table = "sweeps";
        *key = "sweep_id";
    } else {
        return -1;
    }
    return 0;
}

int store_group_finish(store *s, const char *kind, int64_t id, const char *status,
                       kvs_err *err)
{
    const char *table, *key;
    if (group_table(kind, &table, &key) ||
        (strcmp(status, "complete") && strcmp(status, "interrupted")))
        return kvs_errf(err, KVS_EINTERNAL, "store: bad group %s / status %s", kind, status);
    char sql[160];
    snprintf(sql, sizeof sql, "UPDATE %s SET status = ?1, pid = NULL WHERE %s = ?2", table, key);
    sqlite3_stmt *st = NULL;
    int rc = store_begin(s, err);
    if (rc)
        return rc;
    if (sqlite3_prepare_v2(store_db(s), sql, -1, &st, NULL) != SQLITE_OK) {
        rc = db_fail(s, err, "preparing the group status");
        goto fail;
    }
    sqlite3_bind_text(st, 1, status, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, id);
    if (sqlite3_step(st) != SQLITE_DONE) {
        rc = db_fail(s, err, "writing the group status");
        goto fail;
    }
    sqlite3_finalize(st);
    st = NULL;
    if ((rc = store_commit(s, err)))
        goto fail;
    return KVS_OK;
fail:
    sqlite3_finalize(st);
    store_rollback(s);
    return rc;
}

int store_group_running(store *s, const char *kind, int64_t id, kvs_err *err)
{
    const char *table, *key;
    char host[256], sql[200];
    if (group_table(kind, &table, &key))
        return kvs_errf(err, KVS_EINTERNAL, "store: bad group %s", kind);
    host_name(host, sizeof host);
    snprintf(sql, sizeof sql, "UPDATE %s SET status = 'running', pid = ?1, host = ?2 WHERE %s = ?3",
             table, key);
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(store_db(s), sql, -1, &st, NULL) != SQLITE_OK)
        return db_fail(s, err, "preparing the group status");
    sqlite3_bind_int64(st, 1, (int64_t)getpid());
    sqlite3_bind_text(st, 2, host, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, id);
    int rc = sqlite3_step(st) == SQLITE_DONE ? KVS_OK : db_fail(s, err, "writing the group status");
    sqlite3_finalize(st);
    if (rc || strcmp(kind, "sweep"))
        return rc;
    /* a point whose run was deleted (foreign keys off) is a point to run */
    if (sqlite3_prepare_v2(store_db(s),
                           "DELETE FROM sweep_points WHERE sweep_id = ?1 AND run_id NOT IN "
                           "(SELECT run_id FROM runs)",
                           -1, &st, NULL) != SQLITE_OK)
        return db_fail(s, err, "pruning sweep_points");
    sqlite3_bind_int64(st, 1, id);
    rc = sqlite3_step(st) == SQLITE_DONE ? KVS_OK : db_fail(s, err, "pruning sweep_points");
    sqlite3_finalize(st);
    return rc;
}

/* 1 when process `pid` of this host is gone. */
static int pid_gone(int64_t pid)
{
    if (pid <= 0 || pid > 0x7fffffff)
        return 1;
    return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

int store_groups_mark_stale(store *s, int64_t *n_marked, kvs_err *err)
{
    static const char *const tables[] = {"compares", "sweeps"};
    static const char *const keys[] = {"compare_id", "sweep_id"};
    char host[256];
    host_name(host, sizeof host);
    *n_marked = 0;
    for (int t = 0; t < 2; t++) {
        char sql[200];
        snprintf(sql, sizeof sql, "SELECT %s, pid FROM %s WHERE status = 'running' AND host = ?1",
                 keys[t], tables[t]);
        sqlite3_stmt *q = NULL;
        if (sqlite3_prepare_v2(store_db(s), sql, -1, &q, NULL) != SQLITE_OK)
            return db_fail(s, err, "reading groups");
        sqlite3_bind_text(q, 1, host, -1, SQLITE_STATIC);
        int64_t gone[256];
        int ng = 0;
        while (ng < 256 && sqlite3_step(q) == SQLITE_ROW)
            if (pid_gone(sqlite3_column_int64(q, 1)))
                gone[ng++] = sqlite3_column_int64(q, 0);
        sqlite3_finalize(q);
        for (int i = 0; i < ng; i++) {
            int rc = store_group_finish(s, t ? "sweep" : "compare", gone[i], "interrupted", err);
            if (rc)
                return rc;
            (*n_marked)++;
        }
    }
    return KVS_OK;
}
