/* store_rows.c — the request rows of a run (`request_rows`, one per
 * request, keyed run_id * 2^32 + req_id): checked once per run, bound from
 * a finished run's result or from a live run, inserted 64 per statement,
 * and staged in a temporary database while the run simulates (store.h,
 * store_stage_*; job/job_stream.h).  store_run.c writes the rest of a run. */
#include "store_rows.h"

#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* sched_req_status by name, for messages. */
static const char *req_status_name(int32_t v)
{
    static const char *const names[] = {"pending", "waiting", "running",
                                        "swapped", "finished", "rejected"};
    return v >= 0 && v < 6 ? names[v] : "invalid";
}




/* The columns of request_rows (schema version 9), in the order bound: one
 * place, so a new column is one line here, one bind in write_requests and
 * one column in schema.c's request_rows (and its view and trigger). */
enum req_col {
    REQ_COL_KEY = 1, /* run_id * 2^32 + req_id */
    REQ_COL_ARRIVAL_S,
    REQ_COL_PROMPT_TOKENS,
    REQ_COL_OUTPUT_TOKENS,
    REQ_COL_PRIORITY,
    REQ_COL_STATUS_CODE, /* 0 finished, 1 rejected */
    REQ_COL_FIRST_TOKEN_S,
    REQ_COL_FINISH_S,
    REQ_COL_PREEMPTIONS,
    REQ_COL_SWAPS,
    REQ_COL_SWAPPED_S,
    REQ_COL_REPLICA,
    REQ_COL_DECODE_REPLICA,
    REQ_COL_KV_TRANSFER_S,
    REQ_COL_MAX_ITL_S,
    REQ_COL_REJECT_REASON, /* NULL or a name, as sched_reject_reason_name */
    REQ_COL_END
};

static const char *const req_col_names[REQ_COL_END] = {
    NULL, "key", "arrival_s", "prompt_tokens", "output_tokens", "priority", "status_code",
    "first_token_s", "finish_s", "preemptions", "swaps", "swapped_s", "replica",
    "decode_replica", "kv_transfer_s", "max_itl_s", "reject_reason"};

/* Rows per INSERT in the bulk statement: one sqlite3_step (and reset) per
 * REQ_BATCH rows instead of per row; the last n % REQ_BATCH rows go one by
 * one.  16 * 64 parameters stay under SQLite's 32766. */
#define REQ_BATCH 64

/* Preparing the bulk statement parses 64 row groups: about 2.3 M
 * instructions, what some 1,300 rows save by going 64 to a step (callgrind,
 * session 15).  A writer that expects fewer rows than this goes one by one
 * and never prepares it: the rows a run inserts itself after its staged
 * ones are at most a few hundred. */
#define REQ_BATCH_WORTH 1024

/* "INSERT INTO request_rows(key, ...) VALUES(?, ...), ..." with `rows`
 * groups of parameters, from req_col_names.  Anonymous parameters take
 * the numbers 1, 2, ... in order, as the binds count; numbered ones
 * ("?12") would cost the prepare a lookup per parameter in SQLite's list
 * of parameter names (quadratic in the 1,024 of a batch). */
static void requests_insert_sql(char *sql, size_t cap, int rows, const char *table)
{
    size_t len = 0;
    store_sql_append(sql, cap, &len, "INSERT INTO %s(", table);
    for (int c = 1; c < REQ_COL_END; c++)
        store_sql_append(sql, cap, &len, c > 1 ? ",%s" : "%s", req_col_names[c]);
    store_sql_append(sql, cap, &len, ") VALUES");
    for (int r = 0; r < rows; r++) {
        store_sql_append(sql, cap, &len, r ? ",(" : "(");
        for (int c = 1; c < REQ_COL_END; c++)
            store_sql_append(sql, cap, &len, c > 1 ? ",?" : "?");
        store_sql_append(sql, cap, &len, ")");
    }
}

/* One request row, as bound: from a finished run (row_of_result) or a
 * live one (row_of_live). */
typedef struct req_row {
    const trace_req *tq;     /* the trace's request */
    sched_req_result r;      /* its result */
    sched_req_swap swap;     /* its swaps ({0 s, 0} without swap preemption) */
    int64_t replica;         /* engine that served it */
    int64_t decode;          /* decode replica, -1 none */
    double kv_transfer_s;    /* s, NAN none */
    double max_itl_s;        /* s, NAN none */
} req_row;

/* Where rows come from: a finished run's result, or a live run. */
typedef struct row_src {
    const trace *tr;
    const run_result *res;   /* or */
    const run_live *live;
} row_src;

static void row_at(const row_src *src, int64_t i, req_row *w)
{
    w->tq = &src->tr->reqs[i];
    if (src->live) {
        run_live_row(src->live, i, &w->r, &w->max_itl_s);
        w->swap = run_live_swap(src->live, i);
        w->replica = 0;
        w->decode = -1;
        w->kv_transfer_s = NAN;
        return;
    }
    const run_result *res = src->res;
    w->r = res->reqs[i];
    w->swap = sched_swap_at(res->swaps, i);
    w->replica = res->replica ? res->replica[i] : 0;
    w->decode = res->decode ? res->decode[i] : -1;
    w->kv_transfer_s = res->kv_transfer_s ? res->kv_transfer_s[i] : NAN;
    w->max_itl_s = res->max_itl_s ? res->max_itl_s[i] : NAN;
}

/* The integrity the table no longer checks row by row, checked once per
 * run (or per streamed chunk) before its rows are written: final
 * statuses, positive lengths, ids that fit the key.  O(hi - lo), no SQL. */
static int check_requests_key(store *s, int64_t run_id, const trace *tr, kvs_err *err)
{
    if (run_id <= 0 || run_id >= ((int64_t)1 << 30) || tr->n >= ((int64_t)1 << 32))
        return kvs_errf(err, KVS_EINTERNAL, "%s: run %lld of %lld requests outside the row key",
                        store_path(s), (long long)run_id, (long long)tr->n);
    return KVS_OK;
}

static int check_requests(store *s, int64_t run_id, const row_src *src, int64_t lo, int64_t hi,
                          kvs_err *err)
{
    int rc = check_requests_key(s, run_id, src->tr, err);
    if (rc)
        return rc;
    for (int64_t i = lo; i < hi; i++) {
        const trace_req *tq = &src->tr->reqs[i];
        int st = src->live ? 0 : src->res->reqs[i].status;
        if (src->live) {
            req_row w;
            row_at(src, i, &w);
            st = w.r.status;
        }
        if (st != SCHED_REQ_FINISHED && st != SCHED_REQ_REJECTED)
            return kvs_errf(err, KVS_EINTERNAL, "%s: request %lld: status %s is not final",
                            store_path(s), (long long)i, req_status_name(st));
        if (tq->prompt_tokens < 1 || tq->output_tokens < 1)
            return kvs_errf(err, KVS_EINTERNAL,
                            "%s: request %lld: %lld prompt, %lld output tokens (need >= 1)",
                            store_path(s), (long long)i, (long long)tq->prompt_tokens,
                            (long long)tq->output_tokens);
    }
    return KVS_OK;
}

/* Bind row w (key `key`) to the parameters of row group `g` of st;
 * SQLITE_OK (0) or a failing bind's code ORed in. */
static int bind_request(sqlite3_stmt *st, int g, int64_t key, const req_row *w)
{
    const trace_req *tq = w->tq;
    const sched_req_result *r = &w->r;
    const int o = g * (REQ_COL_END - 1);
    int b = sqlite3_bind_int64(st, o + REQ_COL_KEY, key);
    b |= sqlite3_bind_double(st, o + REQ_COL_ARRIVAL_S, tq->arrival_s);
    b |= sqlite3_bind_int64(st, o + REQ_COL_PROMPT_TOKENS, tq->prompt_tokens);
    b |= sqlite3_bind_int64(st, o + REQ_COL_OUTPUT_TOKENS, tq->output_tokens);
    b |= sqlite3_bind_int64(st, o + REQ_COL_PRIORITY, tq->priority);
    b |= sqlite3_bind_int(st, o + REQ_COL_STATUS_CODE, r->status == SCHED_REQ_FINISHED ? 0 : 1);
    b |= store_bind_nan_null(st, o + REQ_COL_FIRST_TOKEN_S, r->first_token_s);
    b |= store_bind_nan_null(st, o + REQ_COL_FINISH_S, r->finish_s);
    b |= sqlite3_bind_int64(st, o + REQ_COL_PREEMPTIONS, r->preemptions);
    b |= sqlite3_bind_int64(st, o + REQ_COL_SWAPS, w->swap.swaps);
    b |= store_bind_nan_null(st, o + REQ_COL_SWAPPED_S, w->swap.swapped_s);
    b |= sqlite3_bind_int64(st, o + REQ_COL_REPLICA, w->replica);
    if (w->decode >= 0)
        b |= sqlite3_bind_int64(st, o + REQ_COL_DECODE_REPLICA, w->decode);
    else
        b |= sqlite3_bind_null(st, o + REQ_COL_DECODE_REPLICA);
    b |= store_bind_nan_null(st, o + REQ_COL_KV_TRANSFER_S, w->kv_transfer_s);
    b |= store_bind_nan_null(st, o + REQ_COL_MAX_ITL_S, w->max_itl_s);
    const char *why = sched_reject_reason_name(r->reject_reason);
    b |= why ? sqlite3_bind_text(st, o + REQ_COL_REJECT_REASON, why, -1, SQLITE_STATIC)
             : sqlite3_bind_null(st, o + REQ_COL_REJECT_REASON);
    return b;
}

/* Prepared request-row inserts of one run into one table: REQ_BATCH
 * rows per statement while that many are left (when the bulk statement was
 * worth preparing), then one by one. */
typedef struct rows_ins {
    store *s;
    sqlite3_stmt *one, *batch;
    int64_t run_id;          /* keys are run_id * 2^32 + req_id */
} rows_ins;

/* Requests [i, i + rows) through st (a statement of `rows` row groups):
 * bind, step, reset.  KVS_OK, or KVS_EDB naming request i. */
static int insert_requests(rows_ins *w, sqlite3_stmt *st, int rows, const row_src *src,
                           int64_t i, kvs_err *err)
{
    int b = SQLITE_OK;
    for (int g = 0; g < rows; g++) {
        req_row row;
        row_at(src, i + g, &row);
        b |= bind_request(st, g, (w->run_id << 32) + i + g, &row);
    }
    /* SQLITE_OK is 0, so any failing bind leaves b non-zero. */
    if (b != SQLITE_OK || sqlite3_step(st) != SQLITE_DONE) {
        char what[80];
        snprintf(what, sizeof what, rows > 1 ? "writing requests %lld to %lld" :
                 "writing request %lld", (long long)i, (long long)(i + rows - 1));
        int rc = store_fail(w->s, err, what);
        sqlite3_reset(st);
        return rc;
    }
    return sqlite3_reset(st) == SQLITE_OK ? KVS_OK
                                          : store_fail(w->s, err, "resetting requests insert");
}

static void rows_close(rows_ins *w)
{
    sqlite3_finalize(w->batch);
    sqlite3_finalize(w->one);
    w->one = w->batch = NULL;
}

/* Prepare the inserts into `table` for run run_id. */
static int rows_open(rows_ins *w, store *s, int64_t run_id, const char *table, int64_t expect,
                     kvs_err *err)
{
    /* on the stack, not static: several threads may write runs at once */
    char sql_one[512], sql_batch[512 + REQ_BATCH * 128];
    sqlite3 *db = store_db(s);
    *w = (rows_ins){s, NULL, NULL, run_id};
    requests_insert_sql(sql_one, sizeof sql_one, 1, table);
    if (expect >= REQ_BATCH_WORTH)
        requests_insert_sql(sql_batch, sizeof sql_batch, REQ_BATCH, table);
    if (sqlite3_prepare_v2(db, sql_one, -1, &w->one, NULL) != SQLITE_OK ||
        (expect >= REQ_BATCH_WORTH &&
         sqlite3_prepare_v2(db, sql_batch, -1, &w->batch, NULL) != SQLITE_OK)) {
        int rc = store_fail(s, err, "preparing requests insert");
        rows_close(w);
        return rc;
    }
    return KVS_OK;
}

/* Rows [lo, hi) from src (checked by the caller).  Keys ascend, so every
 * row is an append at the end of the table's B-tree.  Cost: O(hi - lo). */
static int rows_write(rows_ins *w, const row_src *src, int64_t lo, int64_t hi, kvs_err *err)
{
    int rc = KVS_OK;
    int64_t i = lo;
    for (; w->batch && i + REQ_BATCH <= hi && !rc; i += REQ_BATCH)
        rc = insert_requests(w, w->batch, REQ_BATCH, src, i, err);
    for (; i < hi && !rc; i++)
        rc = insert_requests(w, w->one, 1, src, i, err);
    return rc;
}

int store_rows_write(store *s, int64_t run_id, const run_result *res, int64_t from,
                     kvs_err *err)
{
    rows_ins w;
    row_src src = {res->tr, res, NULL};
    int rc = check_requests(s, run_id, &src, from, res->tr->n, err);
    if (rc || (rc = rows_open(&w, s, run_id, "request_rows", res->tr->n - from, err)))
        return rc;
    rc = rows_write(&w, &src, from, res->tr->n, err);
    rows_close(&w);
    return rc;
}

/* ----------------------------------------------------- staged rows */

/* The staging database's name on the store's connection. */
#define STAGE "kvsim_stage"

struct store_stage {
    store *s;
    rows_ins ins;            /* into STAGE.request_rows, keyed for run_id */
    const trace *tr;
    int64_t run_id;          /* the id the run is expected to take */
    int64_t staged;          /* requests [0, staged) are in the stage */
    int in_main;             /* 1: staged into main.request_rows itself (a pending
                                store, store_open_new: no one else sees it) */
};

static int stage_exec(store *s, const char *sql, const char *what, kvs_err *err)
{
    return sqlite3_exec(store_db(s), sql, NULL, NULL, NULL) == SQLITE_OK
               ? KVS_OK : store_fail(s, err, what);
}

int store_stage_open(store *s, const trace *tr, store_stage **out, kvs_err *err)
{
    sqlite3 *db = store_db(s);
    sqlite3_stmt *q = NULL;
    *out = NULL;
    if (!sqlite3_get_autocommit(db))
        return kvs_errf(err, KVS_EINTERNAL, "%s: staging inside a transaction", store_path(s));
    store_stage *g = calloc(1, sizeof *g);
    if (!g)
        return kvs_errf(err, KVS_ENOMEM, "%s: out of memory", store_path(s));
    g->s = s;
    g->tr = tr;
    int rc;
    if (store_pending(s)) { /* the rows go where they stay: nothing to copy */
        g->in_main = 1;
        if ((rc = store_next_run_id(s, &g->run_id, err)) ||
            (rc = rows_open(&g->ins, s, g->run_id, "main.request_rows", tr->n, err))) {
            free(g);
            return rc;
        }
        *out = g;
        return KVS_OK;
    }
    rc = stage_exec(s, "ATTACH '' AS " STAGE, "attaching the staging database", err);
    if (rc) {
        free(g);
        return rc;
    }
    /* the table as main has it, to the byte: INSERT ... SELECT * then
     * copies its records as they are (SQLite's transfer optimisation) */
    if ((rc = stage_exec(s, "PRAGMA " STAGE ".journal_mode = OFF; PRAGMA " STAGE
                            ".synchronous = OFF", "setting up the staging database", err)))
        goto fail;
    if (sqlite3_prepare_v2(db, "SELECT sql FROM main.sqlite_master WHERE type = 'table' AND "
                               "name = 'request_rows'", -1, &q, NULL) != SQLITE_OK ||
        sqlite3_step(q) != SQLITE_ROW || !sqlite3_column_text(q, 0)) {
        rc = store_fail(s, err, "reading request_rows' definition");
        goto fail;
    }
    const char *def = (const char *)sqlite3_column_text(q, 0);
    if (strncmp(def, "CREATE TABLE request_rows(", 26) != 0) {
        rc = kvs_errf(err, KVS_EDB, "%s: request_rows has an unexpected definition",
                      store_path(s));
        goto fail;
    }
    char *sql = sqlite3_mprintf("CREATE TABLE " STAGE ".request_rows(%s", def + 26);
    rc = sql ? stage_exec(s, sql, "creating the staging table", err)
             : kvs_errf(err, KVS_ENOMEM, "%s: out of memory", store_path(s));
    sqlite3_free(sql);
    if (rc || (rc = store_next_run_id(s, &g->run_id, err)) ||
        (rc = rows_open(&g->ins, s, g->run_id, STAGE ".request_rows", tr->n, err)))
        goto fail;
    sqlite3_finalize(q);
    *out = g;
    return KVS_OK;
fail:
    sqlite3_finalize(q);
    store_stage_close(g);
    return rc;
}

int store_stage_rows(store_stage *g, const run_live *live, int64_t lo, int64_t hi, kvs_err *err)
{
    row_src src = {g->tr, NULL, live};
    int rc;
    if (lo != g->staged)
        return kvs_errf(err, KVS_EINTERNAL, "%s: staging rows from %lld, %lld staged",
                        store_path(g->s), (long long)lo, (long long)g->staged);
    if ((rc = check_requests(g->s, g->run_id, &src, lo, hi, err)) ||
        (rc = stage_exec(g->s, "BEGIN", "staging request rows", err)))
        return rc;
    if ((rc = rows_write(&g->ins, &src, lo, hi, err)) ||
        (rc = stage_exec(g->s, "COMMIT", "staging request rows", err))) {
        store_rollback(g->s);
        return rc;
    }
    g->staged = hi;
    return KVS_OK;
}

int64_t store_stage_count(const store_stage *g) { return g ? g->staged : 0; }

/* 1 if run id is stored as finished (its rows stay), 0 if not or if the
 * question fails (the caller's DELETE then decides, as before).  O(log). */
static int run_finished(sqlite3 *db, int64_t id)
{
    sqlite3_stmt *q = NULL;
    int yes = sqlite3_prepare_v2(db, "SELECT 1 FROM runs WHERE run_id = ? AND status = 'finished'",
                                 -1, &q, NULL) == SQLITE_OK &&
              sqlite3_bind_int64(q, 1, id) == SQLITE_OK && sqlite3_step(q) == SQLITE_ROW;
    sqlite3_finalize(q);
    return yes;
}

void store_stage_close(store_stage *g)
{
    if (!g)
        return;
    rows_close(&g->ins);
    if (g->in_main) {
        /* rows of a run that was not stored (it failed, or its write did)
         * go, so that a failed run recorded next has none.  A finished
         * run is asked first: SQLite would walk its key range row by row
         * (1M rows: ~60 ms) to delete none of them. */
        sqlite3 *db = store_db(g->s);
        char *sql = sqlite3_get_autocommit(db) && !run_finished(db, g->run_id)
                        ? sqlite3_mprintf("DELETE FROM main.request_rows WHERE key >= %lld AND "
                                          "key < %lld AND NOT EXISTS (SELECT 1 FROM runs WHERE "
                                          "run_id = %lld AND status = 'finished')",
                                          (long long)(g->run_id << 32),
                                          (long long)((g->run_id + 1) << 32), (long long)g->run_id)
                        : NULL;
        if (sql)
            (void)sqlite3_exec(db, sql, NULL, NULL, NULL);
        sqlite3_free(sql);
        free(g);
        return;
    }
    /* deletes the temporary file; fails only inside a transaction */
    (void)sqlite3_exec(store_db(g->s), "DETACH " STAGE, NULL, NULL, NULL);
    free(g);
}

int store_rows_stage_of(const store_stage *g, const store *s) { return g->s == s; }

int store_rows_stage_check(store *s, const store_stage *g, const run_result *res, kvs_err *err)
{
    if (g->tr != res->tr || g->staged > res->tr->n)
        return kvs_errf(err, KVS_EINTERNAL, "%s: staged rows of another run", store_path(s));
    return KVS_OK;
}

int store_rows_from_stage(store *s, const store_stage *g, int64_t id, kvs_err *err)
{
    int rc = check_requests_key(s, id, g->tr, err);
    if (rc || g->staged == 0)
        return rc;
    if (g->in_main) /* already in place; a pending store's run takes the id it expected */
        return id == g->run_id ? KVS_OK
                               : kvs_errf(err, KVS_EINTERNAL, "%s: run %lld staged as run %lld",
                                          store_path(s), (long long)id, (long long)g->run_id);
    if (id == g->run_id)
        return stage_exec(s, "INSERT INTO main.request_rows SELECT * FROM " STAGE
                             ".request_rows", "copying the staged request rows", err);
    char sql[1024];
    size_t len = 0;
    store_sql_append(sql, sizeof sql, &len, "INSERT INTO main.request_rows SELECT key + %lld",
                     (long long)((id - g->run_id) * ((int64_t)1 << 32)));
    for (int c = REQ_COL_KEY + 1; c < REQ_COL_END; c++)
        store_sql_append(sql, sizeof sql, &len, ",%s", req_col_names[c]);
    store_sql_append(sql, sizeof sql, &len, " FROM " STAGE ".request_rows");
    return stage_exec(s, sql, "copying the staged request rows", err);
}

