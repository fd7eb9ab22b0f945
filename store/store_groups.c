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
#include <stdlib.h>
#include <unistd.h>


static void host_name(char *buf, size_t cap)
{
    if (gethostname(buf, cap) != 0)
        buf[0] = 0;
    buf[cap - 1] = 0;
}

int store_compare_create(store *s, const char *variants, int64_t n_runs, int64_t *compare_id,
                         kvs_err *err)
{
    store_compare_def d = {variants, NULL, n_runs, 0, NULL, NULL, NULL};
    return store_compare_create_def(s, &d, compare_id, err);
}

/* Insert the input rows of group `id` into `table` (sweep_inputs or
 * compare_inputs, keyed by `key`); inside the caller's transaction. */
static int insert_inputs(store *s, const char *table, const char *key, int64_t id, int n,
                         const char *const *path, const char *const *abs,
                         const char *const *sha, kvs_err *err)
{
    char sql[200];
    sqlite3_stmt *st = NULL;
    if (n <= 0)
        return KVS_OK;
    snprintf(sql, sizeof sql, "INSERT INTO %s(%s, path, abs_path, sha256) VALUES(?1,?2,?3,?4)",
             table, key);
    if (sqlite3_prepare_v2(store_db(s), sql, -1, &st, NULL) != SQLITE_OK)
        return store_fail(s, err, "preparing the inputs insert");
    int rc = KVS_OK;
    for (int i = 0; i < n && !rc; i++) {
        int b = sqlite3_bind_int64(st, 1, id);
        b |= sqlite3_bind_text(st, 2, path[i], -1, SQLITE_STATIC);
        b |= sqlite3_bind_text(st, 3, abs[i], -1, SQLITE_STATIC);
        b |= sqlite3_bind_text(st, 4, sha[i], -1, SQLITE_STATIC);
        if (b != SQLITE_OK || sqlite3_step(st) != SQLITE_DONE)
            rc = store_fail(s, err, "writing the group's inputs");
        sqlite3_reset(st);
    }
    sqlite3_finalize(st);
    return rc;
}

int store_compare_create_def(store *s, const store_compare_def *d, int64_t *compare_id,
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
                           "status, pid, host, base_args) VALUES(strftime('%Y-%m-%dT%H:%M:%SZ', "
                           "'now'), ?1, ?2, ?3, 'running', ?4, ?5, ?6)",
                           -1, &st, NULL) != SQLITE_OK) {
        rc = store_fail(s, err, "preparing compares insert");
        goto fail;
    }
    int b = sqlite3_bind_text(st, 1, KVSIM_VERSION, -1, SQLITE_STATIC);
    b |= sqlite3_bind_text(st, 2, d->variants, -1, SQLITE_STATIC);
    b |= sqlite3_bind_int64(st, 3, d->n_runs);
    b |= sqlite3_bind_int64(st, 4, (int64_t)getpid());
    b |= sqlite3_bind_text(st, 5, host, -1, SQLITE_STATIC);
    b |= d->base_args ? sqlite3_bind_text(st, 6, d->base_args, -1, SQLITE_STATIC)
                      : sqlite3_bind_null(st, 6);
    if (b != SQLITE_OK || sqlite3_step(st) != SQLITE_DONE) {
        rc = store_fail(s, err, "writing the compares row");
        goto fail;
    }
    sqlite3_finalize(st);
    st = NULL;
    int64_t id = sqlite3_last_insert_rowid(store_db(s));
    if ((rc = insert_inputs(s, "compare_inputs", "compare_id", id, d->n_inputs, d->input_path,
                            d->input_abs, d->input_sha256, err)) ||
        (rc = store_commit(s, err)))
        goto fail;
    *compare_id = id;
    return KVS_OK;
fail:
    sqlite3_finalize(st);
    store_rollback(s);
    return rc;
}

int store_compare_get(store *s, int64_t compare_id, store_compare_info *out, kvs_err *err)
{
    sqlite3_stmt *st = NULL;
    int rc = KVS_OK;
    memset(out, 0, sizeof *out);
    if (sqlite3_prepare_v2(store_db(s),
                           "SELECT variants, base_args, coalesce(n_runs, 0), status FROM compares "
                           "WHERE compare_id = ?1",
                           -1, &st, NULL) != SQLITE_OK)
        return store_fail(s, err, "reading compares");
    sqlite3_bind_int64(st, 1, compare_id);
    int r = sqlite3_step(st);
    if (r == SQLITE_DONE) {
        rc = kvs_errf(err, KVS_EINVAL, "%s: no compare %lld", store_path(s),
                      (long long)compare_id);
    } else if (r != SQLITE_ROW) {
        rc = store_fail(s, err, "reading compares");
    } else if (sqlite3_column_type(st, 0) != SQLITE_TEXT) {
        rc = kvs_errf(err, KVS_EINVAL, "%s: compares row %lld: variants is not text",
                      store_path(s), (long long)compare_id);
    } else if (sqlite3_column_type(st, 1) != SQLITE_TEXT) {
        rc = kvs_errf(err, KVS_EINVAL,
                      "%s: compare %lld has no stored run flags (compares.base_args is NULL: "
                      "written by an older kvsim), so it cannot be resumed",
                      store_path(s), (long long)compare_id);
    } else {
        const unsigned char *status = sqlite3_column_text(st, 3);
        snprintf(out->status, sizeof out->status, "%s", status ? (const char *)status : "");
        out->variants = strdup((const char *)sqlite3_column_text(st, 0));
        out->base_args = strdup((const char *)sqlite3_column_text(st, 1));
        out->n_runs = sqlite3_column_int64(st, 2);
        if (!out->variants || !out->base_args) {
            store_compare_info_free(out);
            rc = kvs_errf(err, KVS_ENOMEM, "%s: out of memory", store_path(s));
        }
    }
    sqlite3_finalize(st);
    return rc;
}

void store_compare_info_free(store_compare_info *info)
{
    free(info->variants);
    free(info->base_args);
    info->variants = info->base_args = NULL;
}

int store_compare_tag(store *s, int64_t compare_id, int64_t variant_index, const char *variant,
                      kvs_err *err)
{
    if (sqlite3_exec(store_db(s),
                     "CREATE TEMP TABLE IF NOT EXISTS kvsim_compare_cur("
                     "  compare_id INTEGER, variant_index INTEGER, variant TEXT);\n"
                     "CREATE TEMP TRIGGER IF NOT EXISTS kvsim_compare_tag\n"
                     "AFTER INSERT ON main.runs WHEN NEW.compare_id IS NOT NULL\n"
                     "BEGIN\n"
                     "  INSERT INTO compare_runs(compare_id, variant_index, variant, run_id)\n"
                     "  SELECT compare_id, variant_index, variant, NEW.run_id\n"
                     "  FROM kvsim_compare_cur WHERE compare_id = NEW.compare_id;\n"
                     "END;\n"
                     "DELETE FROM temp.kvsim_compare_cur;",
                     NULL, NULL, NULL) != SQLITE_OK)
        return store_fail(s, err, "setting up compare tagging");
    return store_exec(s, err, "tagging a compare variant",
                      "INSERT INTO temp.kvsim_compare_cur VALUES(?1, ?2, ?3)", "iit", compare_id,
                      variant_index, variant);
}

void store_compare_untag(store *s)
{
    /* Fails only when tagging was never set up: nothing to clear then. */
    (void)sqlite3_exec(store_db(s), "DELETE FROM temp.kvsim_compare_cur", NULL, NULL, NULL);
}

int store_compare_done(store *s, int64_t compare_id, int64_t n, int64_t *run_ids,
                       kvs_err *err)
{
    sqlite3_stmt *st = NULL;
    int r, rc = KVS_OK;
    for (int64_t i = 0; i < n; i++)
        run_ids[i] = 0;
    if (sqlite3_prepare_v2(store_db(s),
                           "SELECT variant_index, run_id FROM compare_runs c WHERE compare_id = ?1 "
                           "AND EXISTS (SELECT 1 FROM runs r WHERE r.run_id = c.run_id)",
                           -1, &st, NULL) != SQLITE_OK)
        return store_fail(s, err, "reading compare_runs");
    sqlite3_bind_int64(st, 1, compare_id);
    while ((r = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t i = sqlite3_column_int64(st, 0);
        if (i < 0 || i >= n) {
            rc = kvs_errf(err, KVS_EINVAL,
                          "%s: compare_runs: compare %lld has a variant_index %lld outside its "
                          "%lld variants",
                          store_path(s), (long long)compare_id, (long long)i, (long long)n);
            break;
        }
        run_ids[i] = sqlite3_column_int64(st, 1);
    }
    if (!rc && r != SQLITE_DONE)
        rc = store_fail(s, err, "reading compare_runs");
    sqlite3_finalize(st);
    return rc;
}

int store_group_inputs(store *s, const char *kind, int64_t id,
                       int (*fn)(void *ctx, const char *path, const char *abs_path,
                                 const char *sha256),
                       void *ctx, kvs_err *err)
{
    const char *table = !strcmp(kind, "compare") ? "compare_inputs" : "sweep_inputs";
    const char *key = !strcmp(kind, "compare") ? "compare_id" : "sweep_id";
    char sql[200];
    sqlite3_stmt *q = NULL;
    snprintf(sql, sizeof sql, "SELECT path, abs_path, sha256 FROM %s WHERE %s = ?1 ORDER BY path",
             table, key);
    if (sqlite3_prepare_v2(store_db(s), sql, -1, &q, NULL) != SQLITE_OK)
        return store_fail(s, err, "reading the group's inputs");
    sqlite3_bind_int64(q, 1, id);
    int r, rc = KVS_OK;
    while ((r = sqlite3_step(q)) == SQLITE_ROW) {
        const char *p = (const char *)sqlite3_column_text(q, 0);
        const char *a = (const char *)sqlite3_column_text(q, 1);
        const char *h = (const char *)sqlite3_column_text(q, 2);
        if (!p || !a || !h) {
            rc = kvs_errf(err, KVS_EINVAL, "%s: %s of %s %lld: a NULL value", store_path(s),
                          table, kind, (long long)id);
            break;
        }
        if ((rc = fn(ctx, p, a, h)))
            break;
    }
    if (!rc && r != SQLITE_DONE)
        rc = store_fail(s, err, "reading the group's inputs");
    sqlite3_finalize(q);
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
    int rc = store_begin(s, err);
    if (rc)
        return rc;
    if ((rc = store_exec(s, err, "writing the group status", sql, "ti", status, id)) ||
        (rc = store_commit(s, err)))
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
    int rc = store_begin(s, err); /* the status and the pruning: one write */
    if (rc)
        return rc;
    /* a point (variant) whose run was deleted (foreign keys off) is one to run */
    const char *prune = strcmp(kind, "sweep")
                            ? "DELETE FROM compare_runs WHERE compare_id = ?1 AND run_id NOT "
                              "IN (SELECT run_id FROM runs)"
                            : "DELETE FROM sweep_points WHERE sweep_id = ?1 AND run_id NOT IN "
                              "(SELECT run_id FROM runs)";
    if ((rc = store_exec(s, err, "writing the group status", sql, "iti", (int64_t)getpid(), host,
                         id)) ||
        (rc = store_exec(s, err, "pruning the group's points", prune, "i", id)) ||
        (rc = store_commit(s, err)))
        store_rollback(s);
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
            return store_fail(s, err, "reading groups");
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
