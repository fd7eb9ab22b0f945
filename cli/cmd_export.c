/* cmd_export.c — `kvsim export perfetto RUN -o FILE`: a stored run with
 * recorded steps as Chrome trace-event JSON (opens in ui.perfetto.dev and
 * chrome://tracing).  One process per run; its tracks:
 *   tid 1 "engine"    one complete slice ("X") per step, named by its kind,
 *                     args: the batch composition (prefills, decodes,
 *                     tokens, kv_read, prefill_sq, preempted);
 *   tid 2 "arrivals"  a zero-length slice at each request's arrival;
 *   counters          "KV blocks" (blocks in use) and "queue" (waiting,
 *                     running) at each step's start;
 *   flows             one per finished request, from its arrival slice to
 *                     the step that made its last token (ids = req_id + 1).
 * Times are microseconds since the trace's start.  The file is written to a
 * temporary name and renamed into place. */
#include <errno.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../base/str.h"
#include "../store/store.h"
#include "cli.h"
#include "run_opts.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: kvsim export perfetto RUN_ID -o FILE [--db FILE]\n\n"
               "Write a stored run as Chrome trace-event JSON for ui.perfetto.dev: the engine's\n"
               "steps as slices carrying their batch composition, counters of KV blocks in use\n"
               "and of the queue, and one flow per finished request from its arrival to the\n"
               "step that finished it.  The run must have been stored with --record-steps.\n\n"
               "  -o FILE     output file (required)\n"
               "  --db FILE   results database (default kvsim.db)\n");
}

static const char *const kind_names[] = {"prefill", "decode", "mixed"};

/* The step slices and counters; *finish_step[req] gets the start (us) of
 * the step whose end is the request's finish. */
static int write_steps(FILE *f, sqlite3 *db, int64_t id, int64_t *n_steps)
{
    sqlite3_stmt *q = NULL;
    if (sqlite3_prepare_v2(db,
                           "SELECT step_id, start_s, dur_s, kind, n_prefill, n_decode, tokens, "
                           "kv_read, prefill_sq, kv_blocks_used, n_waiting, n_running, "
                           "n_preempted FROM steps WHERE run_id = ?1 ORDER BY step_id",
                           -1, &q, NULL) != SQLITE_OK)
        return -1;
    sqlite3_bind_int64(q, 1, id);
    *n_steps = 0;
    while (sqlite3_step(q) == SQLITE_ROW) {
        double ts = 1e6 * sqlite3_column_double(q, 1), dur = 1e6 * sqlite3_column_double(q, 2);
        const char *kind = (const char *)sqlite3_column_text(q, 3);
        fprintf(f,
                ",\n{\"ph\": \"X\", \"name\": \"%s\", \"cat\": \"step\", \"pid\": 1, \"tid\": 1, "
                "\"ts\": %.17g, \"dur\": %.17g, \"args\": {\"step\": %lld, \"prefills\": %lld, "
                "\"decodes\": %lld, \"tokens\": %lld, \"kv_read\": %lld, \"prefill_sq\": %lld, "
                "\"preempted\": %lld}}",
                kind ? kind : kind_names[0], ts, dur, (long long)sqlite3_column_int64(q, 0),
                (long long)sqlite3_column_int64(q, 4), (long long)sqlite3_column_int64(q, 5),
                (long long)sqlite3_column_int64(q, 6), (long long)sqlite3_column_int64(q, 7),
                (long long)sqlite3_column_int64(q, 8), (long long)sqlite3_column_int64(q, 12));
        fprintf(f,
                ",\n{\"ph\": \"C\", \"name\": \"KV blocks\", \"pid\": 1, \"ts\": %.17g, "
                "\"args\": {\"in use\": %lld}}",
                ts, (long long)sqlite3_column_int64(q, 9));
        fprintf(f,
                ",\n{\"ph\": \"C\", \"name\": \"queue\", \"pid\": 1, \"ts\": %.17g, "
                "\"args\": {\"waiting\": %lld, \"running\": %lld}}",
                ts, (long long)sqlite3_column_int64(q, 10), (long long)sqlite3_column_int64(q, 11));
        (*n_steps)++;
    }
    return sqlite3_finalize(q) == SQLITE_OK ? 0 : -1;
}

/* Arrival slices and flows.  A request's last step is the step that ends
 * at its finish_s: the latest step starting before finish_s. */
static int write_requests(FILE *f, sqlite3 *db, int64_t id)
{
    sqlite3_stmt *q = NULL;
    if (sqlite3_prepare_v2(db,
                           "SELECT q.req_id, q.arrival_s, q.status, q.prompt_tokens, "
                           "q.output_tokens, q.finish_s, "
                           "(SELECT max(s.start_s) FROM steps s WHERE s.run_id = q.run_id AND "
                           "s.start_s < q.finish_s) "
                           "FROM requests q WHERE q.run_id = ?1 ORDER BY q.req_id",
                           -1, &q, NULL) != SQLITE_OK)
        return -1;
    sqlite3_bind_int64(q, 1, id);
    while (sqlite3_step(q) == SQLITE_ROW) {
        long long req = sqlite3_column_int64(q, 0);
        double at = 1e6 * sqlite3_column_double(q, 1);
        const char *status = (const char *)sqlite3_column_text(q, 2);
        fprintf(f,
                ",\n{\"ph\": \"X\", \"name\": \"req %lld\", \"cat\": \"arrival\", \"pid\": 1, "
                "\"tid\": 2, \"ts\": %.17g, \"dur\": 0, \"args\": {\"req_id\": %lld, \"prompt\": "
                "%lld, \"output\": %lld, \"status\": \"%s\"}}",
                req, at, req, (long long)sqlite3_column_int64(q, 3),
                (long long)sqlite3_column_int64(q, 4), status ? status : "?");
        if (sqlite3_column_type(q, 6) == SQLITE_NULL)
            continue; /* rejected: no finish */
        double last = 1e6 * sqlite3_column_double(q, 6);
        fprintf(f,
                ",\n{\"ph\": \"s\", \"name\": \"req %lld\", \"cat\": \"request\", \"id\": %lld, "
                "\"pid\": 1, \"tid\": 2, \"ts\": %.17g}"
                ",\n{\"ph\": \"f\", \"bp\": \"e\", \"name\": \"req %lld\", \"cat\": \"request\", "
                "\"id\": %lld, \"pid\": 1, \"tid\": 1, \"ts\": %.17g}",
                req, req + 1, at, req, req + 1, last);
    }
    return sqlite3_finalize(q) == SQLITE_OK ? 0 : -1;
}

static int export_perfetto(const char *cmd, store *st, const char *db, int64_t id,
                           const char *out)
{
    kvs_err err;
    job_run_info *row = malloc(sizeof *row);
    if (!row)
        return cli_fail(cmd, "out of memory");
    int rc = 0;
    if (job_read_run(st, id, row, &err))
        rc = cli_fail(cmd, "%s", err.msg);
    else if (strcmp(row->status, "finished"))
        rc = cli_fail(cmd, "run %lld failed: %s", (long long)id, row->error);
    else if (!row->cfg.record_steps)
        rc = cli_fail(cmd, "run %lld has no recorded steps: run it again with --record-steps",
                      (long long)id);
    if (rc) {
        free(row);
        return rc;
    }
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", out, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) {
        free(row);
        return cli_fail(cmd, "-o %s: %s", out, strerror(errno));
    }
    char name[640];
    snprintf(name, sizeof name, "kvsim run %lld: %s on %s, tp %lld, %s", (long long)id,
             row->cfg.model, row->cfg.gpu, (long long)row->cfg.tp,
             sched_engine_name(row->cfg.sched.engine));
    fprintf(f, "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n"
               "{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": 1, \"args\": {\"name\": ");
    str_json_write(f, name);
    fprintf(f, "}},\n{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": 1, \"tid\": 1, "
               "\"args\": {\"name\": \"engine\"}},\n"
               "{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": 1, \"tid\": 2, "
               "\"args\": {\"name\": \"arrivals\"}}");
    int64_t n_steps = 0;
    int bad = write_steps(f, store_db(st), id, &n_steps) || write_requests(f, store_db(st), id);
    fprintf(f, "\n]}\n");
    if (bad)
        rc = cli_fail(cmd, "--db %s: %s", db, sqlite3_errmsg(store_db(st)));
    if ((ferror(f) | fclose(f)) && !rc)
        rc = cli_fail(cmd, "-o %s: %s", out, strerror(errno));
    if (!rc && rename(tmp, out))
        rc = cli_fail(cmd, "-o %s: %s", out, strerror(errno));
    if (rc)
        unlink(tmp);
    else
        fprintf(stderr, "kvsim export: run %lld: %lld steps to %s\n", (long long)id,
                (long long)n_steps, out);
    free(row);
    return rc;
}

int cmd_export(int argc, char **argv)
{
    const char *cmd = "export";
    if (cli_wants_help(argc, argv)) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    const char *db = "kvsim.db", *out = NULL, *what = NULL, *id_text = NULL;
    for (int i = 1; i < argc; i++) {
        int missing = 0;
        const char *v = NULL;
        const char **dst = NULL, *flag = argv[i];
        if (cli_take_value(argc, argv, &i, "--db", &v, &missing))
            dst = &db;
        else if (cli_take_value(argc, argv, &i, "-o", &v, &missing))
            dst = &out;
        if (dst) {
            if (missing)
                return cli_fail(cmd, "%s: missing value", flag);
            *dst = v;
        } else if (argv[i][0] == '-' || (what && id_text)) {
            return cli_fail(cmd, "unexpected argument '%s' (see kvsim export --help)", argv[i]);
        } else {
            *(what ? &id_text : &what) = argv[i];
        }
    }
    if (!what || strcmp(what, "perfetto"))
        return cli_fail(cmd, "give the format: kvsim export perfetto RUN_ID -o FILE");
    if (!id_text)
        return cli_fail(cmd, "give a run id (see kvsim export --help)");
    if (!out)
        return cli_fail(cmd, "-o FILE: where to write the trace (required)");
    int64_t id;
    if (cli_parse_i64(cmd, "RUN_ID", id_text, 1, INT64_MAX, &id))
        return CLI_EXIT_ERR;
    if (cli_require_db(cmd, db))
        return CLI_EXIT_ERR;
    kvs_err err;
    store *st = NULL;
    if (store_open(db, &st, &err))
        return cli_fail(cmd, "--db: %s", err.msg);
    int rc = export_perfetto(cmd, st, db, id, out);
    store_close(st);
    return rc;
}
