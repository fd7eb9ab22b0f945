/* cmd_store.c — `kvsim store`: looking after a results database.
 *   recover  import the runs writers kept in DB.spool/ because the database
 *            stayed locked, and mark groups whose process is gone
 *            interrupted;
 *   groups   list compares, sweeps and searches with their status. */
#include <sqlite3.h>
#include <string.h>

#include "../base/str.h"
#include "../store/store.h"
#include "../store/store_spool.h"
#include "cli.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: kvsim store recover [--db PATH]\n"
               "       kvsim store groups [--db PATH]\n\n"
               "recover: import the runs that writers kept in PATH.spool/ because the database\n"
               "stayed locked past their wait limit ($KVSIM_DB_WAIT_S, default 600 s; every\n"
               "writer also imports them when it opens the database), and mark `interrupted`\n"
               "the compares, sweeps and searches still `running` whose process on this host\n"
               "is gone.\n"
               "groups: one line per compare, sweep and capacity search: kind, id, status,\n"
               "created_at, runs stored.\n\n"
               "  --db PATH   results database (default kvsim.db)\n");
}

static int recover(const char *cmd, const char *db)
{
    store *st = NULL;
    kvs_err err;
    store_spool_report rep;
    int64_t marked = 0;
    /* store_open, not store_open_writable: the import here is reported */
    if (store_open(db, &st, &err) || store_require_writable(st, &err)) {
        store_close(st);
        return cli_fail(cmd, "--db: %s", err.msg);
    }
    int rc = store_spool_import(st, &rep, &err);
    printf("spool: %lld imported, %lld already imported, %lld left\n", (long long)rep.imported,
           (long long)rep.duplicates, (long long)rep.left);
    if (rep.calibrations > 0)
        printf("spool: %lld of the imported files were calibrations\n",
               (long long)rep.calibrations);
    if (!rc && store_groups_mark_stale(st, &marked, &err) == KVS_OK)
        printf("groups: %lld marked interrupted\n", (long long)marked);
    else if (!rc)
        rc = KVS_EDB;
    store_close(st);
    return rc ? cli_fail(cmd, "--db: %s", err.msg) : CLI_EXIT_OK;
}

static int groups(const char *cmd, const char *db)
{
    store *st = NULL;
    kvs_err err;
    if (store_open(db, &st, &err))
        return cli_fail(cmd, "--db: %s", err.msg);
    sqlite3_stmt *q = NULL;
    int r = sqlite3_prepare_v2(
        store_db(st),
        "SELECT 'compare', compare_id, status, created_at,"
        "       (SELECT count(*) FROM runs r WHERE r.compare_id = c.compare_id) FROM compares c "
        "UNION ALL SELECT CASE kind WHEN 'grid' THEN 'sweep' ELSE 'search' END, sweep_id, status,"
        "       created_at, (SELECT count(*) FROM sweep_points p WHERE p.sweep_id = s.sweep_id)"
        " FROM sweeps s ORDER BY 4, 1, 2",
        -1, &q, NULL);
    if (r != SQLITE_OK) {
        cli_fail(cmd, "--db: %s: %s", db, sqlite3_errmsg(store_db(st)));
        store_close(st);
        return CLI_EXIT_ERR;
    }
    printf("%-8s %8s %-12s %-21s %6s\n", "kind", "id", "status", "created_at", "runs");
    while ((r = sqlite3_step(q)) == SQLITE_ROW) {
        char status[16], created[32];
        const char *s = (const char *)sqlite3_column_text(q, 2);
        const char *c = (const char *)sqlite3_column_text(q, 3);
        str_sanitize(status, sizeof status, s ? s : "NULL");
        str_sanitize(created, sizeof created, c ? c : "");
        printf("%-8s %8lld %-12s %-21s %6lld\n", (const char *)sqlite3_column_text(q, 0),
               (long long)sqlite3_column_int64(q, 1), status, created,
               (long long)sqlite3_column_int64(q, 4));
    }
    int bad = r != SQLITE_DONE;
    sqlite3_finalize(q);
    if (bad)
        cli_fail(cmd, "--db: %s: %s", db, sqlite3_errmsg(store_db(st)));
    store_close(st);
    return bad ? CLI_EXIT_ERR : CLI_EXIT_OK;
}

int cmd_store(int argc, char **argv)
{
    const char *cmd = "store";
    if (cli_wants_help(argc, argv) || argc < 2) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? CLI_EXIT_ERR : CLI_EXIT_OK;
    }
    const char *db = "kvsim.db", *sub = argv[1];
    for (int i = 2; i < argc; i++) {
        const char *v = NULL;
        int missing = 0;
        if (cli_take_value(argc, argv, &i, "--db", &v, &missing)) {
            if (missing)
                return cli_fail(cmd, "--db: missing value");
            db = v;
        } else {
            char a[64];
            return cli_fail(cmd, "unknown argument '%s' (see kvsim store --help)",
                            str_sanitize(a, sizeof a, argv[i]));
        }
    }
    if (!strcmp(sub, "recover"))
        return recover(cmd, db);
    if (!strcmp(sub, "groups"))
        return groups(cmd, db);
    char a[64];
    return cli_fail(cmd, "unknown subcommand '%s' (recover, groups)",
                    str_sanitize(a, sizeof a, sub));
}
