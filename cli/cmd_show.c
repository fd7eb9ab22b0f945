/* cmd_show.c — `kvsim show RUN`: reprint a stored run's summary (or its
 * JSON object) from the `runs` row, without simulating again. */
#include <math.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "../store/store.h"
#include "cli.h"
#include "run_opts.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: kvsim show RUN_ID [--db FILE] [--json]\n\n"
               "Print the summary of a stored run as kvsim run printed it, read back from its\n"
               "runs row and its class_metrics rows.  A failed run prints its error (exit 2).\n\n"
               "  --db FILE   results database (default kvsim.db)\n"
               "  --json      the run's JSON object instead (as kvsim run --json)\n");
}

static double col_or_nan(sqlite3_stmt *q, int i)
{
    return sqlite3_column_type(q, i) == SQLITE_NULL ? NAN : sqlite3_column_double(q, i);
}

/* The run's class_metrics rows into res->classes (what the summary prints
 * per priority class). */
static int read_classes(store *st, int64_t id, run_result *res)
{
    sqlite3_stmt *q = NULL;
    if (sqlite3_prepare_v2(store_db(st),
                           "SELECT priority, n_requests, n_finished, n_rejected, ttft_p50_s, "
                           "ttft_p99_s, e2e_p50_s, e2e_p99_s FROM class_metrics WHERE run_id = ?1 "
                           "ORDER BY priority",
                           -1, &q, NULL) != SQLITE_OK)
        return -1;
    sqlite3_bind_int64(q, 1, id);
    while (sqlite3_step(q) == SQLITE_ROW && res->n_classes < RUN_MAX_CLASSES) {
        run_class *c = realloc(res->classes, (size_t)(res->n_classes + 1) * sizeof *c);
        if (!c)
            break;
        res->classes = c;
        c += res->n_classes++;
        memset(c, 0, sizeof *c);
        c->priority = sqlite3_column_int(q, 0);
        c->n_requests = sqlite3_column_int64(q, 1);
        c->n_finished = sqlite3_column_int64(q, 2);
        c->n_rejected = sqlite3_column_int64(q, 3);
        c->ttft.p50 = col_or_nan(q, 4);
        c->ttft.p99 = col_or_nan(q, 5);
        c->e2e.p50 = col_or_nan(q, 6);
        c->e2e.p99 = col_or_nan(q, 7);
    }
    sqlite3_finalize(q);
    return 0;
}

int cmd_show(int argc, char **argv)
{
    const char *cmd = "show";
    if (cli_wants_help(argc, argv)) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    const char *db = "kvsim.db", *id_text = NULL;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        int missing = 0;
        const char *v = NULL;
        if (cli_take_value(argc, argv, &i, "--db", &v, &missing)) {
            if (missing)
                return cli_fail(cmd, "--db: missing value");
            db = v;
        } else if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else if (argv[i][0] == '-' || id_text) {
            return cli_fail(cmd, "unexpected argument '%s' (see kvsim show --help)", argv[i]);
        } else {
            id_text = argv[i];
        }
    }
    if (!id_text)
        return cli_fail(cmd, "give a run id (see kvsim show --help)");
    int64_t id;
    if (cli_parse_i64(cmd, "RUN_ID", id_text, 1, INT64_MAX, &id))
        return CLI_EXIT_ERR;
    if (cli_require_db(cmd, db))
        return CLI_EXIT_ERR;
    kvs_err err;
    store *st = NULL;
    if (store_open(db, &st, &err))
        return cli_fail(cmd, "--db: %s", err.msg);
    job_run_info *row = malloc(sizeof *row);
    int rc = CLI_EXIT_OK;
    if (!row) {
        rc = cli_fail(cmd, "out of memory");
    } else if (job_read_run(st, id, row, &err)) {
        rc = cli_fail(cmd, "%s", err.msg);
    } else if (strcmp(row->status, "finished")) {
        rc = cli_fail(cmd, "run %lld failed: %s", (long long)id, row->error);
    } else {
        run_result res;
        memset(&res, 0, sizeof res);
        res.sum = row->sum;
        res.sum.total_kv_blocks = row->cfg.sched.total_blocks; /* the kv_blocks column */
        res.wall_s = row->wall_s;
        snprintf(res.started_at, sizeof res.started_at, "%s", row->started_at);
        if (json) {
            run_opts_print_json(stdout, &row->cfg, &res, id);
        } else if (read_classes(st, id, &res)) {
            rc = cli_fail(cmd, "--db: %s: %s", db, sqlite3_errmsg(store_db(st)));
        } else {
            run_opts_print_summary(stdout, &row->cfg, &res, id);
        }
        free(res.classes);
    }
    free(row);
    store_close(st);
    return rc;
}
