/* store_run.c — writing runs: the `runs` row (config, provenance, summary),
 * the request rows (store_rows.c), the optional `steps` rows and the class
 * and replica metrics, all in one transaction, so that a failure leaves no
 * trace of the run.  NaN doubles and empty strings are stored as NULL.  The
 * column meanings are in docs/schema.md.
 */
#include "store.h"

#include <math.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../sim/run_fields.h"
#include "store_rows.h"

/* Bytes per packed sched_member in steps.members (see docs/schema.md). */
#define MEMBER_BYTES 24

/* "PATH: what: sqlite message" as KVS_EDB; an I/O failure also names the
 * system error ("disk I/O error (File too large)"). */

/* ------------------------------------------------------- named binding */

/* Binds by ":name"; remembers the first failure so a run of binds needs one
 * check at the end. */
typedef struct binder {
    sqlite3_stmt *st;
    int rc;           /* first SQLite error, SQLITE_OK if none */
    const char *bad;  /* parameter that failed */
} binder;

static int b_index(binder *b, const char *name)
{
    char key[64];
    snprintf(key, sizeof key, ":%s", name);
    int i = sqlite3_bind_parameter_index(b->st, key);
    if (i == 0 && b->rc == SQLITE_OK) {
        b->rc = SQLITE_RANGE;
        b->bad = name;
    }
    return i;
}

static void b_check(binder *b, int rc, const char *name)
{
    if (rc != SQLITE_OK && b->rc == SQLITE_OK) {
        b->rc = rc;
        b->bad = name;
    }
}

static void b_text(binder *b, const char *name, const char *v)
{
    int i = b_index(b, name);
    if (i == 0)
        return;
    b_check(b, v && *v ? sqlite3_bind_text(b->st, i, v, -1, SQLITE_TRANSIENT)
                       : sqlite3_bind_null(b->st, i), name);
}

static void b_f64(binder *b, const char *name, double v)
{
    int i = b_index(b, name);
    if (i)
        b_check(b, isnan(v) ? sqlite3_bind_null(b->st, i) : sqlite3_bind_double(b->st, i, v),
                name);
}

/* Bind one table value (run_fields.h) to ":name". */
static void b_value(binder *b, const char *name, const run_value *v)
{
    int i = b_index(b, name);
    if (i == 0)
        return;
    switch (v->kind) {
    case RUN_VALUE_INT: b_check(b, sqlite3_bind_int64(b->st, i, v->i), name); break;
    case RUN_VALUE_REAL: b_check(b, sqlite3_bind_double(b->st, i, v->d), name); break;
    case RUN_VALUE_TEXT:
        b_check(b, sqlite3_bind_text(b->st, i, v->s, -1, SQLITE_TRANSIENT), name);
        break;
    default: b_check(b, sqlite3_bind_null(b->st, i), name); break;
    }
}

/* Insert the `runs` row inside the caller's transaction; summary NULL leaves
 * the summary columns NULL.  Cost: one statement. */
static int insert_run_row(store *s, const run_config *cfg, const trace *tr,
                          const run_summary *sum, const char *status,
                          const char *error, const char *started_at, double wall_s,
                          int64_t *run_id, kvs_err *err)
{
    char sql[4096];
    size_t len = 0;
    size_t nf;
    const run_field *f = run_fields(&nf);
    store_sql_append(sql, sizeof sql, &len, "INSERT INTO runs(");
    for (size_t i = 0; i < nf; i++)
        store_sql_append(sql, sizeof sql, &len, i ? ",%s" : "%s", f[i].name);
    store_sql_append(sql, sizeof sql, &len, ") VALUES(");
    for (size_t i = 0; i < nf; i++)
        store_sql_append(sql, sizeof sql, &len, i ? ",:%s" : ":%s", f[i].name);
    store_sql_append(sql, sizeof sql, &len, ")");
    if (len >= sizeof sql)
        return kvs_errf(err, KVS_EINTERNAL, "store: runs INSERT longer than %zu bytes",
                        sizeof sql);

    binder b = {NULL, SQLITE_OK, NULL};
    int rc = KVS_OK;
    if (sqlite3_prepare_v2(store_db(s), sql, -1, &b.st, NULL) != SQLITE_OK)
        return store_fail(s, err, "preparing runs insert");
    b_text(&b, "status", status);
    b_text(&b, "error", error);
    b_text(&b, "started_at", started_at);
    b_f64(&b, "wall_s", wall_s);
    b_text(&b, "kvsim_version", KVSIM_VERSION);
    b_text(&b, "trace_sha256", tr ? tr->sha256 : NULL);
    for (size_t i = 0; i < nf; i++) {
        if (f[i].group == RUN_FIELD_GROUP_PROV)
            continue; /* bound above */
        run_value v = run_field_get(&f[i], cfg, sum);
        b_value(&b, f[i].name, &v);
    }
    if (b.rc != SQLITE_OK) {
        rc = kvs_errf(err, KVS_EDB, "%s: binding runs.%s: %s", store_path(s), b.bad,
                      sqlite3_errstr(b.rc));
        goto out;
    }
    if (sqlite3_step(b.st) != SQLITE_DONE) {
        rc = store_fail(s, err, "writing runs row");
        goto out;
    }
    *run_id = sqlite3_last_insert_rowid(store_db(s));
out:
    sqlite3_finalize(b.st);
    return rc;
}

/* ------------------------------------------------------------- steps */

static void put_le(unsigned char *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

/* Pack members as little-endian int32 req_id, int32 kind, int64 tokens,
 * int64 context: MEMBER_BYTES each. */
static void pack_members(unsigned char *buf, const sched_member *m, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        unsigned char *p = buf + i * MEMBER_BYTES;
        put_le(p, (uint32_t)m[i].req_id, 4);
        put_le(p + 4, (uint32_t)m[i].kind, 4);
        put_le(p + 8, (uint64_t)m[i].tokens, 8);
        put_le(p + 16, (uint64_t)m[i].context, 8);
    }
}

/* Members of step i are members[steps[i].member_off .. end); end is the next
 * step's offset (n_members for the last).  Checks the offsets and returns the
 * largest member count in *max_n. */
static int check_member_offsets(const run_result *res, int64_t *max_n, kvs_err *err)
{
    *max_n = 0;
    for (int64_t i = 0; i < res->n_steps; i++) {
        int64_t off = res->steps[i].member_off;
        int64_t end = i + 1 < res->n_steps ? res->steps[i + 1].member_off : res->n_members;
        if (off < 0 || end < off || end > res->n_members || (end > off && !res->members))
            return kvs_errf(err, KVS_EINTERNAL,
                            "run result: step %lld members [%lld, %lld) outside [0, %lld)",
                            (long long)i, (long long)off, (long long)end,
                            (long long)res->n_members);
        if (end - off > *max_n)
            *max_n = end - off;
    }
    return KVS_OK;
}

/* The integrity step_rows no longer checks row by row (schema version
 * 10), checked once per run before any row is written: a known kind and a
 * step id that fits the key.  O(steps), no SQL. */
static int check_steps(store *s, const run_result *res, kvs_err *err)
{
    for (int64_t i = 0; i < res->n_steps; i++) {
        const sched_step *p = &res->steps[i].step;
        if (p->kind < SCHED_STEP_PREFILL || p->kind > SCHED_STEP_MIXED)
            return kvs_errf(err, KVS_EINTERNAL, "%s: step %lld: kind %d is not prefill, decode "
                            "or mixed", store_path(s), (long long)p->index, (int)p->kind);
        if (p->index < 0 || p->index >= ((int64_t)1 << 32))
            return kvs_errf(err, KVS_EINTERNAL, "%s: step id %lld outside the row key",
                            store_path(s), (long long)p->index);
    }
    return KVS_OK;
}

/* Steps per INSERT in the bulk statement, as REQ_BATCH for requests. */
#define STEP_BATCH 64
#define STEP_COLS 17

/* "INSERT INTO step_rows(...) VALUES(?, ...), ..." with `rows` groups
 * (anonymous parameters: numbered in order, see requests_insert_sql). */
static void steps_insert_sql(char *sql, size_t cap, int rows)
{
    size_t len = 0;
    store_sql_append(sql, cap, &len,
                     "INSERT INTO step_rows(key, start_s, dur_s, kind_code, n_prefill, "
                     "n_decode, tokens, kv_read, prefill_sq, kv_blocks_used, n_waiting, "
                     "n_running, n_preempted, swap_out_blocks, swap_in_blocks, members, "
                     "replica) VALUES");
    for (int r = 0; r < rows; r++) {
        store_sql_append(sql, cap, &len, r ? ",(" : "(");
        for (int c = 1; c <= STEP_COLS; c++)
            store_sql_append(sql, cap, &len, c > 1 ? ",?" : "?");
        store_sql_append(sql, cap, &len, ")");
    }
}

/* Bind step i to row group g of st, its members packed into buf (which
 * must outlive the step: bound SQLITE_STATIC); a failing bind's code. */
static int bind_step(sqlite3_stmt *st, int g, int64_t base, const run_result *res, int64_t i,
                     unsigned char *buf)
{
    const sched_step *p = &res->steps[i].step;
    int64_t off = res->steps[i].member_off;
    int64_t end = i + 1 < res->n_steps ? res->steps[i + 1].member_off : res->n_members;
    if (end > off)
        pack_members(buf, res->members + off, end - off);
    const int o = g * STEP_COLS;
    int b = sqlite3_bind_int64(st, o + 1, base + p->index);
    b |= sqlite3_bind_double(st, o + 2, p->start_s);
    b |= sqlite3_bind_double(st, o + 3, p->dur_s);
    b |= sqlite3_bind_int(st, o + 4, (int)p->kind);
    b |= sqlite3_bind_int64(st, o + 5, p->batch.n_prefill);
    b |= sqlite3_bind_int64(st, o + 6, p->batch.n_decode);
    b |= sqlite3_bind_int64(st, o + 7, p->batch.tokens);
    b |= sqlite3_bind_int64(st, o + 8, p->batch.kv_read);
    b |= sqlite3_bind_int64(st, o + 9, p->batch.prefill_sq);
    b |= sqlite3_bind_int64(st, o + 10, p->kv_blocks_used);
    b |= sqlite3_bind_int64(st, o + 11, p->n_waiting);
    b |= sqlite3_bind_int64(st, o + 12, p->n_running);
    b |= sqlite3_bind_int64(st, o + 13, p->n_preempted);
    b |= sqlite3_bind_int64(st, o + 14, p->swap_out_blocks);
    b |= sqlite3_bind_int64(st, o + 15, p->swap_in_blocks);
    b |= sqlite3_bind_blob64(st, o + 16, buf, (sqlite3_uint64)((end - off) * MEMBER_BYTES),
                             SQLITE_STATIC);
    b |= sqlite3_bind_int64(st, o + 17, res->steps[i].replica);
    return b;
}

/* Steps [i, i + rows) through st; group g packs its members at
 * buf + g * stride.  KVS_OK, or KVS_EDB naming the first step. */
static int insert_steps(store *s, sqlite3_stmt *st, int rows, int64_t base,
                        const run_result *res, int64_t i, unsigned char *buf, size_t stride,
                        kvs_err *err)
{
    int b = SQLITE_OK;
    for (int g = 0; g < rows; g++)
        b |= bind_step(st, g, base, res, i + g, buf + (size_t)g * stride);
    if (b != SQLITE_OK || sqlite3_step(st) != SQLITE_DONE) {
        char what[80];
        snprintf(what, sizeof what, rows > 1 ? "writing steps %lld to %lld" : "writing step %lld",
                 (long long)res->steps[i].step.index,
                 (long long)res->steps[i + rows - 1].step.index);
        int rc = store_fail(s, err, what);
        sqlite3_reset(st);
        return rc;
    }
    return sqlite3_reset(st) == SQLITE_OK ? KVS_OK : store_fail(s, err, "resetting steps insert");
}

/* Prepared statements into step_rows, STEP_BATCH steps per step of SQLite
 * while that many are left, then one by one; step ids ascend, so every
 * row is an append.  Cost: O(steps + members). */
static int write_steps(store *s, int64_t run_id, const run_result *res, kvs_err *err)
{
    char sql_one[1024], sql_batch[1024 + STEP_BATCH * 160]; /* per call: threads */
    sqlite3 *db = store_db(s);
    sqlite3_stmt *one = NULL, *batch = NULL;
    unsigned char *buf = NULL;
    int64_t max_n;
    int rc = check_member_offsets(res, &max_n, err);
    if (rc || (rc = check_steps(s, res, err)))
        return rc;
    /* At least one byte a group, so an empty step binds a zero-length
     * blob, not NULL. */
    const size_t stride = (size_t)max_n * MEMBER_BYTES + 1;
    buf = malloc(stride * STEP_BATCH);
    if (!buf)
        return kvs_errf(err, KVS_ENOMEM, "%s: out of memory packing step members",
                        store_path(s));
    const int64_t n = res->n_steps, base = run_id << 32;
    steps_insert_sql(sql_one, sizeof sql_one, 1);
    if (sqlite3_prepare_v2(db, sql_one, -1, &one, NULL) != SQLITE_OK) {
        rc = store_fail(s, err, "preparing steps insert");
        goto out;
    }
    int64_t i = 0;
    if (n >= STEP_BATCH) {
        steps_insert_sql(sql_batch, sizeof sql_batch, STEP_BATCH);
        if (sqlite3_prepare_v2(db, sql_batch, -1, &batch, NULL) != SQLITE_OK) {
            rc = store_fail(s, err, "preparing steps insert");
            goto out;
        }
        for (; i + STEP_BATCH <= n && !rc; i += STEP_BATCH)
            rc = insert_steps(s, batch, STEP_BATCH, base, res, i, buf, stride, err);
    }
    for (; i < n && !rc; i++)
        rc = insert_steps(s, one, 1, base, res, i, buf, stride, err);
out:
    sqlite3_finalize(batch);
    sqlite3_finalize(one);
    free(buf);
    return rc;
}

/* ------------------------------------------------------ class_metrics */

/* The columns a class_metrics and a replica_metrics row share, ?1..?17:
 * run_id, the group's key (priority or replica), its request counts and
 * the p50/p90/p99/mean of TTFT, TPOT and E2E.  SQLITE_OK or a failing
 * bind's code ORed in. */
static int bind_group_head(sqlite3_stmt *st, int64_t run_id, int64_t key, int64_t n_requests,
                           int64_t n_finished, int64_t n_rejected, const run_dist *const d[3])
{
    int b = sqlite3_bind_int64(st, 1, run_id);
    b |= sqlite3_bind_int64(st, 2, key);
    b |= sqlite3_bind_int64(st, 3, n_requests);
    b |= sqlite3_bind_int64(st, 4, n_finished);
    b |= sqlite3_bind_int64(st, 5, n_rejected);
    for (int j = 0; j < 3; j++) {
        b |= store_bind_nan_null(st, 6 + 4 * j, d[j]->p50);
        b |= store_bind_nan_null(st, 7 + 4 * j, d[j]->p90);
        b |= store_bind_nan_null(st, 8 + 4 * j, d[j]->p99);
        b |= store_bind_nan_null(st, 9 + 4 * j, d[j]->mean);
    }
    return b;
}

/* One row per priority class (run_result.classes). */
static int write_classes(store *s, int64_t run_id, const run_result *res, kvs_err *err)
{
    static const char sql[] =
        "INSERT INTO class_metrics(run_id, priority, n_requests, n_finished, n_rejected, "
        "ttft_p50_s, ttft_p90_s, ttft_p99_s, ttft_mean_s, tpot_p50_s, tpot_p90_s, "
        "tpot_p99_s, tpot_mean_s, e2e_p50_s, e2e_p90_s, e2e_p99_s, e2e_mean_s, "
        "slo_attainment) VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,"
        "?17,?18)";
    sqlite3_stmt *st = NULL;
    int rc = KVS_OK;
    if (sqlite3_prepare_v2(store_db(s), sql, -1, &st, NULL) != SQLITE_OK)
        return store_fail(s, err, "preparing class_metrics insert");
    for (int k = 0; k < res->n_classes; k++) {
        const run_class *c = &res->classes[k];
        const run_dist *const d[3] = {&c->ttft, &c->tpot, &c->e2e};
        int b = bind_group_head(st, run_id, c->priority, c->n_requests, c->n_finished,
                                c->n_rejected, d);
        b |= store_bind_nan_null(st, 18, c->slo_attainment);
        if (b != SQLITE_OK || sqlite3_step(st) != SQLITE_DONE ||
            sqlite3_reset(st) != SQLITE_OK) {
            rc = store_fail(s, err, "writing class_metrics");
            break;
        }
    }
    sqlite3_finalize(st);
    return rc;
}

/* ---------------------------------------------------- replica_metrics */

/* One row per engine of a cluster run (run_result.replicas). */
static int write_replicas(store *s, int64_t run_id, const run_result *res, kvs_err *err)
{
    static const char sql[] =
        "INSERT INTO replica_metrics(run_id, replica, n_requests, n_finished, n_rejected, "
        "ttft_p50_s, ttft_p90_s, ttft_p99_s, ttft_mean_s, tpot_p50_s, tpot_p90_s, "
        "tpot_p99_s, tpot_mean_s, e2e_p50_s, e2e_p90_s, e2e_p99_s, e2e_mean_s, "
        "throughput_tok_s, throughput_req_s, preemptions, peak_kv_blocks, mean_kv_blocks, "
        "mean_batch, n_steps, makespan_s, prefix_hit_rate, slo_attainment) "
        "VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17,?18,?19,?20,"
        "?21,?22,?23,?24,?25,?26,?27)";
    sqlite3_stmt *st = NULL;
    int rc = KVS_OK;
    if (sqlite3_prepare_v2(store_db(s), sql, -1, &st, NULL) != SQLITE_OK)
        return store_fail(s, err, "preparing replica_metrics insert");
    for (int64_t k = 0; k < res->n_replicas; k++) {
        const run_summary *m = &res->replicas[k].sum;
        const run_dist *const d[3] = {&m->ttft, &m->tpot, &m->e2e};
        int b = bind_group_head(st, run_id, res->replicas[k].replica, m->n_requests,
                                m->n_finished, m->n_rejected, d);
        b |= store_bind_nan_null(st, 18, m->throughput_tok_s);
        b |= store_bind_nan_null(st, 19, m->throughput_req_s);
        b |= sqlite3_bind_int64(st, 20, m->preemptions);
        b |= sqlite3_bind_int64(st, 21, m->peak_kv_blocks);
        b |= store_bind_nan_null(st, 22, m->mean_kv_blocks);
        b |= store_bind_nan_null(st, 23, m->mean_batch);
        b |= sqlite3_bind_int64(st, 24, m->n_steps);
        b |= store_bind_nan_null(st, 25, m->makespan_s);
        b |= store_bind_nan_null(st, 26, m->prefix_hit_rate);
        b |= store_bind_nan_null(st, 27, m->slo_attainment);
        if (b != SQLITE_OK || sqlite3_step(st) != SQLITE_DONE ||
            sqlite3_reset(st) != SQLITE_OK) {
            rc = store_fail(s, err, "writing replica_metrics");
            break;
        }
    }
    sqlite3_finalize(st);
    return rc;
}

/* ------------------------------------------------------------ public */

/* The run's rows below its `runs` row (run_id's), request rows from
 * `from` on, inside the caller's transaction. */
static int write_run_body(store *s, const run_config *cfg, const run_result *res, int64_t id,
                          int64_t from, kvs_err *err)
{
    int rc;
    if ((rc = store_rows_write(s, id, res, from, err)))
        return rc;
    if (res->n_classes > 0 && (rc = write_classes(s, id, res, err)))
        return rc;
    if (cfg->record_steps && res->steps && (rc = write_steps(s, id, res, err)))
        return rc;
    if (res->n_replicas > 0 && (rc = write_replicas(s, id, res, err)))
        return rc;
    return KVS_OK;
}

static int check_result(store *s, const run_result *res, kvs_err *err)
{
    if (!res->tr || (res->tr->n > 0 && (!res->tr->reqs || !res->reqs)))
        return kvs_errf(err, KVS_EINVAL, "%s: run result without its trace or requests",
                        store_path(s));
    return KVS_OK;
}

int store_write_run(store *s, const run_config *cfg, const run_result *res,
                    int64_t *run_id, kvs_err *err)
{
    return store_write_run_staged(s, cfg, res, NULL, run_id, err);
}

int store_next_run_id(store *s, int64_t *run_id, kvs_err *err)
{
    sqlite3_stmt *st = NULL;
    /* AUTOINCREMENT's next id: above the largest ever taken and every row */
    const char *sql = "SELECT max(COALESCE((SELECT seq FROM sqlite_sequence "
                      "WHERE name = 'runs'), 0), COALESCE((SELECT max(run_id) FROM runs), 0)) + 1";
    if (sqlite3_prepare_v2(store_db(s), sql, -1, &st, NULL) != SQLITE_OK)
        return store_fail(s, err, "reading the next run id");
    int rc = KVS_OK;
    if (sqlite3_step(st) == SQLITE_ROW)
        *run_id = sqlite3_column_int64(st, 0);
    else
        rc = store_fail(s, err, "reading the next run id");
    sqlite3_finalize(st);
    return rc;
}

int store_write_run_staged(store *s, const run_config *cfg, const run_result *res,
                           const store_stage *g, int64_t *run_id, kvs_err *err)
{
    int64_t id = 0;
    int rc;
    if (g && !store_rows_stage_of(g, s))
        g = NULL; /* a spool file is written whole */
    if ((rc = check_result(s, res, err)) || (g && (rc = store_rows_stage_check(s, g, res, err))) ||
        (rc = store_begin(s, err)))
        return rc;
    if ((rc = insert_run_row(s, cfg, res->tr, &res->sum, "finished", NULL, res->started_at,
                             res->wall_s, &id, err)) ||
        (g && (rc = store_rows_from_stage(s, g, id, err))) ||
        (rc = write_run_body(s, cfg, res, id, store_stage_count(g), err)) ||
        (rc = store_commit(s, err))) {
        store_rollback(s);
        return rc;
    }
    *run_id = id;
    return KVS_OK;
}

int store_write_failed_run(store *s, const run_config *cfg, const trace *tr,
                           const char *error, const char *started_at,
                           double wall_s, int64_t *run_id, kvs_err *err)
{
    int64_t id = 0;
    int rc;
    if ((rc = store_begin(s, err)))
        return rc;
    if ((rc = insert_run_row(s, cfg, tr, NULL, "failed", error ? error : "unknown error",
                             started_at, wall_s, &id, err)))
        goto fail;
    if ((rc = store_commit(s, err)))
        goto fail;
    *run_id = id;
    return KVS_OK;
fail:
    store_rollback(s);
    return rc;
}
