/* test_store.c — the SQLite store: schema creation and versioning, writing a
 * hand-built run and reading every part back with SQL (NULL for NaN, the
 * members blob decoded), failed runs, all-or-nothing writes, refusal of a
 * newer schema, read-only / locked / non-database files, and the
 * `kvsim query` command line. */
#include <math.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/store.h"
#include "testutil.h"

/* The schema version this build writes, as meta.schema_version holds it. */
#define SCHEMA_STR_(x) #x
#define SCHEMA_STR(x) SCHEMA_STR_(x)
#define SCHEMA_NOW SCHEMA_STR(STORE_SCHEMA_VERSION)

/* ------------------------------------------------------------ helpers */

static char *db_path(const char *name)
{
    const char *dir = tu_tmpdir();
    char *p = malloc(strlen(dir) + strlen(name) + 2);
    ck_assert_ptr_nonnull(p);
    sprintf(p, "%s/%s", dir, name);
    return p;
}

static store *open_ok(const char *path)
{
    store *s = NULL;
    kvs_err err = {{0}};
    int rc = store_open(path, &s, &err);
    ck_assert_msg(rc == KVS_OK, "store_open: %s", err.msg);
    return s;
}

/* First column of the first row of `sql` (printf-style) as text, "NULL" for
 * SQL NULL, "<none>" for no row; malloc'd. */
static char *q_text(sqlite3 *db, const char *fmt, ...)
{
    char sql[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sql, sizeof sql, fmt, ap);
    va_end(ap);
    sqlite3_stmt *st = NULL;
    ck_assert_msg(sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK, "%s: %s", sql,
                  sqlite3_errmsg(db));
    int rc = sqlite3_step(st);
    ck_assert_msg(rc == SQLITE_ROW || rc == SQLITE_DONE, "%s: %s", sql, sqlite3_errmsg(db));
    const char *v = rc == SQLITE_DONE ? "<none>"
                    : sqlite3_column_type(st, 0) == SQLITE_NULL
                        ? "NULL"
                        : (const char *)sqlite3_column_text(st, 0);
    char *out = strdup(v);
    sqlite3_finalize(st);
    return out;
}

static void q_eq(sqlite3 *db, const char *sql, const char *want)
{
    char *got = q_text(db, "%s", sql);
    ck_assert_msg(!strcmp(got, want), "%s: got '%s', want '%s'", sql, got, want);
    free(got);
}

static double q_dbl(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st = NULL;
    ck_assert_msg(sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK, "%s: %s", sql,
                  sqlite3_errmsg(db));
    ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
    ck_assert_msg(sqlite3_column_type(st, 0) != SQLITE_NULL, "%s: NULL", sql);
    double v = sqlite3_column_double(st, 0);
    sqlite3_finalize(st);
    return v;
}

static sqlite3 *raw_open(const char *path)
{
    sqlite3 *db = NULL;
    ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
    return db;
}

static void raw_exec(sqlite3 *db, const char *sql)
{
    ck_assert_msg(sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK, "%s: %s", sql,
                  sqlite3_errmsg(db));
}

static void assert_has(const char *msg, const char *part)
{
    ck_assert_msg(strstr(msg, part) != NULL, "'%s' lacks '%s'", msg, part);
}

/* ------------------------------------------------------- the fixture run */

/* Three requests (times in seconds since trace start):
 *   0: arrival 0.0, P 4, O 2, prio 0; finished, first token 0.25, finish 0.5
 *   1: arrival 0.5, P 3, O 3, prio 1; finished, first token 0.75, finish 1.5,
 *      one swap preemption, 0.125 s swapped out
 *   2: arrival 1.0, P 100, O 1, prio 0; rejected (NaN times)
 * Two steps; step 1 has two members, one with a context above 2^32 so the
 * blob's int64 fields are really 64-bit. */
typedef struct fixture {
    trace tr;
    trace_req reqs[3];
    sched_req_result res[3];
    sched_req_swap swaps[3];
    run_step_rec steps[2];
    sched_member members[3];
    run_config cfg;
    run_result rr;
} fixture;

static void fixture_init(fixture *f)
{
    memset(f, 0, sizeof *f);
    f->reqs[0] = (trace_req){0.0, 4, 2, 0};
    f->reqs[1] = (trace_req){0.5, 3, 3, 1};
    f->reqs[2] = (trace_req){1.0, 100, 1, 0};
    f->tr.reqs = f->reqs;
    f->tr.n = 3;
    f->tr.format = TRACE_FORMAT_NATIVE;
    f->tr.has_priority = 1;
    strcpy(f->tr.source, "traces/t.csv");
    strcpy(f->tr.sha256, "5eed000000000000000000000000000000000000000000000000000000000abc");

    f->res[0] = (sched_req_result){0.25, 0.5, 0, SCHED_REQ_FINISHED, 0};
    f->res[1] = (sched_req_result){0.75, 1.5, 1, SCHED_REQ_FINISHED, 0};
    f->res[2] = (sched_req_result){NAN, NAN, 0, SCHED_REQ_REJECTED, 0};
    f->swaps[0] = (sched_req_swap){0.0, 0};
    f->swaps[1] = (sched_req_swap){0.125, 1};
    f->swaps[2] = (sched_req_swap){0.0, 0};

    sched_step *s0 = &f->steps[0].step;
    s0->index = 0, s0->start_s = 0.0, s0->dur_s = 0.25, s0->kind = SCHED_STEP_PREFILL;
    s0->batch = (cost_batch){4, 0, 16, 1, 0, 0, 0};
    s0->kv_blocks_used = 1, s0->n_waiting = 0, s0->n_running = 1;
    f->steps[0].member_off = 0;
    sched_step *s1 = &f->steps[1].step;
    s1->index = 1, s1->start_s = 0.5, s1->dur_s = 0.25, s1->kind = SCHED_STEP_MIXED;
    s1->n_preempted = 1;
    s1->batch = (cost_batch){4, 5, 9, 1, 1, 0, 0};
    s1->kv_blocks_used = 2, s1->n_waiting = 1, s1->n_running = 2;
    s1->swap_out_blocks = 3, s1->swap_in_blocks = 7;
    f->steps[1].member_off = 1;
    f->members[0] = (sched_member){0, SCHED_MEMBER_PREFILL, 4, 4};
    f->members[1] = (sched_member){1, SCHED_MEMBER_PREFILL, 3, 3};
    f->members[2] = (sched_member){0, SCHED_MEMBER_DECODE, 1, 5000000000LL};

    run_config *c = &f->cfg;
    strcpy(c->model, "llama-2-7b");
    strcpy(c->gpu, "a100-80g");
    c->tp = 2;
    strcpy(c->trace_path, "traces/t.csv");
    c->rate_scale = 1.5;
    c->seed = 42;
    c->sched = (sched_config){SCHED_BATCHING_CONTINUOUS, SCHED_POLICY_PRIORITY, 1,
                              SCHED_ALLOC_PAGED, SCHED_PREEMPT_SWAP, 16, 1000, 256, 4096,
                              4096, 0.01, 64, 0.001, 0.0, 0, 0,
                              SCHED_ENGINE_VLLM_V0, 0, 0, 0, 0, 0, 0, 0, 0.0, 0, 1};
    c->gpu_mem_util = 0.9;
    c->swap_gib = 4;
    strcpy(c->cost, "affine:0.01,0.001,0,0");
    strcpy(c->cost_desc, "affine c0=0.01 c1=0.001");
    strcpy(c->label, "fixture");
    c->slo_ttft_s = 0.5;
    c->record_steps = 1;
    c->compare_id = 7; /* sweep_id 0: none, stored as NULL */

    run_result *r = &f->rr;
    r->tr = &f->tr;
    r->reqs = f->res;
    r->swaps = f->swaps;
    r->steps = f->steps;
    r->n_steps = 2;
    r->members = f->members;
    r->n_members = 3;
    r->sum.n_requests = 3, r->sum.n_finished = 2, r->sum.n_rejected = 1;
    r->sum.ttft = (run_dist){0.25, 0.25, 0.25, 0.25};
    r->sum.tpot = (run_dist){0.25, 0.375, 0.375, 0.3125};
    r->sum.e2e = (run_dist){0.5, 1.0, 1.0, 0.75};
    r->sum.norm_latency = (run_dist){0.25, 1.0 / 3, 1.0 / 3, (0.25 + 1.0 / 3) / 2};
    r->sum.throughput_tok_s = 5 / 1.5; /* 5 output tokens over [0, 1.5] */
    r->sum.throughput_req_s = 2 / 1.5;
    r->sum.preemptions = 1, r->sum.preempt_swap = 1;
    r->sum.total_kv_blocks = 1000, r->sum.peak_kv_blocks = 2;
    r->sum.mean_kv_blocks = 1.5, r->sum.mean_batch = 1.5;
    r->sum.makespan_s = 1.5, r->sum.n_steps = 2;
    r->sum.slo_attainment = NAN;
    r->sum.goodput_req_s = NAN;
    strcpy(r->started_at, "2024-05-01T12:00:00Z");
    r->wall_s = 0.0625;
}

static int64_t write_ok(store *s, const fixture *f)
{
    int64_t id = -1;
    kvs_err err = {{0}};
    int rc = store_write_run(s, &f->cfg, &f->rr, &id, &err);
    ck_assert_msg(rc == KVS_OK, "store_write_run: %s", err.msg);
    ck_assert_int_gt(id, 0);
    return id;
}


/* ------------------------------------------------------------ schema */

START_TEST(test_schema_created)
{
    char *path = db_path("runs.db");
    store *s = open_ok(path);
    sqlite3 *db = store_db(s);
    ck_assert_str_eq(store_path(s), path);
    q_eq(db, "SELECT value FROM meta WHERE key = 'schema_version'", SCHEMA_NOW);
    q_eq(db,
         "SELECT group_concat(name, ',') FROM (SELECT name FROM sqlite_master "
         "WHERE type = 'table' ORDER BY name)",
         "calibrations,class_metrics,compare_inputs,compare_runs,compares,kernel_measurements,"
         "meta,profiles,replica_metrics,request_rows,runs,search_probes,search_results,"
         "spool_imports,sqlite_sequence,step_rows,"
         "sweep_inputs,sweep_point_params,sweep_points,sweeps,validation_steps,validations");
    q_eq(db,
         "SELECT group_concat(name, ',') FROM (SELECT name FROM sqlite_master "
         "WHERE type = 'view' ORDER BY name)",
         "policy_at_load,requests,requests_metrics,run_load,run_summary,slo_attainment,steps,"
         "sweep_params,sweep_runs");
    q_eq(db, "PRAGMA journal_mode", "wal");
    q_eq(db, "PRAGMA foreign_keys", "1");
    ck_assert_int_eq(tu_sql_int(db, "SELECT count(*) FROM sqlite_master WHERE type = 'index' "
                               "AND name IN ('runs_compare_id', 'runs_sweep_id')"),
                     2);
    ck_assert_ptr_nonnull(store_migration_sql(0));
    ck_assert_ptr_null(store_migration_sql(STORE_SCHEMA_VERSION));
    ck_assert_ptr_null(store_migration_sql(-1));
    store_close(s);
    free(path);
}
END_TEST

/* Reopening changes nothing: same objects, one version row, data kept. */
START_TEST(test_reopen_idempotent)
{
    char *path = db_path("runs.db");
    fixture f;
    fixture_init(&f);
    store *s = open_ok(path);
    int64_t objects = tu_sql_int(store_db(s), "SELECT count(*) FROM sqlite_master");
    write_ok(s, &f);
    store_close(s);
    for (int i = 0; i < 2; i++) {
        s = open_ok(path);
        sqlite3 *db = store_db(s);
        ck_assert_int_eq(tu_sql_int(db, "SELECT count(*) FROM sqlite_master"), objects);
        ck_assert_int_eq(tu_sql_int(db, "SELECT count(*) FROM meta"), 1);
        q_eq(db, "SELECT value FROM meta WHERE key = 'schema_version'", SCHEMA_NOW);
        ck_assert_int_eq(tu_sql_int(db, "SELECT count(*) FROM runs"), 1);
        ck_assert_int_eq(tu_sql_int(db, "SELECT count(*) FROM requests"), 3);
        store_close(s);
    }
    free(path);
}
END_TEST

/* -------------------------------------------------------- run round trip */

START_TEST(test_write_run_round_trip)
{
    char *path = db_path("runs.db");
    fixture f;
    fixture_init(&f);
    store *s = open_ok(path);
    sqlite3 *db = store_db(s);
    int64_t id = write_ok(s, &f);
    ck_assert_int_eq(id, 1);

    /* runs: config, provenance, summary; NaN and "" -> NULL. */
    q_eq(db, "SELECT status FROM runs WHERE run_id = 1", "finished");
    q_eq(db, "SELECT quote(error) FROM runs", "NULL");
    q_eq(db, "SELECT kvsim_version FROM runs", KVSIM_VERSION);
    q_eq(db, "SELECT started_at FROM runs", "2024-05-01T12:00:00Z");
    ck_assert_double_eq(q_dbl(db, "SELECT wall_s FROM runs"), 0.0625);
    q_eq(db,
         "SELECT label || '|' || model || '|' || gpu || '|' || tp || '|' || trace_path"
         " || '|' || trace_sha256 || '|' || quote(synthetic) || '|' || seed FROM runs",
         "fixture|llama-2-7b|a100-80g|2|traces/t.csv|"
         "5eed000000000000000000000000000000000000000000000000000000000abc|NULL|42");
    q_eq(db,
         "SELECT batching || '|' || policy || '|' || priority_preemption || '|' || alloc"
         " || '|' || preemption FROM runs",
         "continuous|priority|1|paged|swap");
    q_eq(db,
         "SELECT block_size || '|' || kv_blocks || '|' || kv_blocks_flag || '|' || max_seqs"
         " || '|' || max_batched_tokens || '|' || max_model_len || '|' || swap_blocks"
         " || '|' || record_steps FROM runs",
         "16|1000|0|256|4096|4096|64|1");
    ck_assert_double_eq(q_dbl(db, "SELECT rate_scale FROM runs"), 1.5);
    ck_assert_double_eq(q_dbl(db, "SELECT watermark FROM runs"), 0.01);
    ck_assert_double_eq(q_dbl(db, "SELECT gpu_mem_util FROM runs"), 0.9);
    ck_assert_double_eq(q_dbl(db, "SELECT swap_gib FROM runs"), 4);
    ck_assert_double_eq(q_dbl(db, "SELECT swap_block_s FROM runs"), 0.001);
    ck_assert_double_eq(q_dbl(db, "SELECT slo_ttft_s FROM runs"), 0.5);
    q_eq(db, "SELECT cost || '|' || cost_desc FROM runs",
         "affine:0.01,0.001,0,0|affine c0=0.01 c1=0.001");
    q_eq(db, "SELECT quote(compare_id) || '|' || quote(sweep_id) FROM runs", "7|NULL");
    q_eq(db,
         "SELECT n_requests || '|' || n_finished || '|' || n_rejected || '|' || preemptions"
         " || '|' || preempt_recompute || '|' || preempt_swap || '|' || preempt_priority"
         " || '|' || peak_kv_blocks || '|' || n_steps FROM runs",
         "3|2|1|1|0|1|0|2|2");
    ck_assert_double_eq(q_dbl(db, "SELECT ttft_p50_s FROM runs"), 0.25);
    ck_assert_double_eq(q_dbl(db, "SELECT tpot_p90_s FROM runs"), 0.375);
    ck_assert_double_eq(q_dbl(db, "SELECT tpot_mean_s FROM runs"), 0.3125);
    ck_assert_double_eq(q_dbl(db, "SELECT e2e_p99_s FROM runs"), 1.0);
    ck_assert_double_eq(q_dbl(db, "SELECT norm_latency_p99_s FROM runs"), 1.0 / 3);
    ck_assert_double_eq(q_dbl(db, "SELECT throughput_tok_s FROM runs"), 5 / 1.5);
    ck_assert_double_eq(q_dbl(db, "SELECT makespan_s FROM runs"), 1.5);
    q_eq(db, "SELECT quote(slo_attainment) || quote(goodput_req_s) FROM runs", "NULLNULL");

    /* requests: one row each, rejected times NULL. */
    q_eq(db,
         "SELECT group_concat(r, ';') FROM (SELECT req_id || ',' || arrival_s || ',' ||"
         " prompt_tokens || ',' || output_tokens || ',' || priority || ',' || status ||"
         " ',' || quote(first_token_s) || ',' || quote(finish_s) || ',' || preemptions ||"
         " ',' || swaps || ',' || swapped_s AS r FROM requests WHERE run_id = 1"
         " ORDER BY req_id)",
         "0,0.0,4,2,0,finished,0.25,0.5,0,0,0.0;"
         "1,0.5,3,3,1,finished,0.75,1.5,1,1,0.125;"
         "2,1.0,100,1,0,rejected,NULL,NULL,0,0,0.0");

    /* requests_metrics, worked by hand:
     *   0: ttft 0.25-0 = 0.25, e2e 0.5, tpot (0.5-0.25)/1 = 0.25, norm 0.5/2
     *   1: ttft 0.75-0.5 = 0.25, e2e 1.0, tpot (1.5-0.75)/2 = 0.375, norm 1/3
     *   2: rejected -> all NULL (and O = 1 has no TPOT anyway) */
    q_eq(db,
         "SELECT group_concat(r, ';') FROM (SELECT quote(ttft_s) || ',' || quote(e2e_s) ||"
         " ',' || quote(tpot_s) AS r FROM requests_metrics ORDER BY req_id)",
         "0.25,0.5,0.25;0.25,1.0,0.375;NULL,NULL,NULL");
    ck_assert_double_eq(q_dbl(db, "SELECT norm_latency_s FROM requests_metrics WHERE req_id = 0"),
                        0.25);
    ck_assert_double_eq(q_dbl(db, "SELECT norm_latency_s FROM requests_metrics WHERE req_id = 1"),
                        1.0 / 3);
    q_eq(db, "SELECT quote(norm_latency_s) FROM requests_metrics WHERE req_id = 2", "NULL");

    /* run_summary: readable units (ms), finished runs only. */
    q_eq(db, "SELECT run_id || '|' || ttft_p50_ms || '|' || tpot_p99_ms || '|' || e2e_p99_s"
             " FROM run_summary",
         "1|250.0|375.0|1.0");

    /* steps. */
    q_eq(db,
         "SELECT group_concat(r, ';') FROM (SELECT step_id || ',' || start_s || ',' || dur_s"
         " || ',' || kind || ',' || n_prefill || ',' || n_decode || ',' || tokens || ',' ||"
         " kv_read || ',' || prefill_sq || ',' || kv_blocks_used || ',' || n_waiting || ','"
         " || n_running || ',' || n_preempted || ',' || swap_out_blocks || ',' ||"
         " swap_in_blocks || ',' || length(members) AS r FROM steps ORDER BY step_id)",
         "0,0.0,0.25,prefill,1,0,4,0,16,1,0,1,0,0,0,24;"
         "1,0.5,0.25,mixed,1,1,4,5,9,2,1,2,1,3,7,48");

    /* members blob of step 1, decoded by hand: little-endian int32 req_id,
     * int32 kind, int64 tokens, int64 context. */
    sqlite3_stmt *st = NULL;
    ck_assert_int_eq(sqlite3_prepare_v2(db, "SELECT members FROM steps WHERE step_id = 1",
                                        -1, &st, NULL),
                     SQLITE_OK);
    ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
    const unsigned char *b = sqlite3_column_blob(st, 0);
    ck_assert_int_eq(sqlite3_column_bytes(st, 0), 48);
    for (int m = 0; m < 2; m++) {
        const unsigned char *p = b + 24 * m;
        uint64_t v[4] = {0, 0, 0, 0};
        for (int k = 0; k < 4; k++)
            v[0] |= (uint64_t)p[k] << (8 * k), v[1] |= (uint64_t)p[4 + k] << (8 * k);
        for (int k = 0; k < 8; k++)
            v[2] |= (uint64_t)p[8 + k] << (8 * k), v[3] |= (uint64_t)p[16 + k] << (8 * k);
        const sched_member *want = &f.members[1 + m];
        ck_assert_int_eq((int32_t)v[0], want->req_id);
        ck_assert_int_eq((int32_t)v[1], want->kind);
        ck_assert_int_eq((int64_t)v[2], want->tokens);
        ck_assert_int_eq((int64_t)v[3], want->context);
    }
    /* The high half of the 2nd member's context: 5e9 >> 32 = 1. */
    ck_assert_int_eq(b[24 + 16 + 4], 1);
    sqlite3_finalize(st);

    /* Without record_steps the steps are not written. */
    f.cfg.record_steps = 0;
    id = write_ok(s, &f);
    ck_assert_int_eq(id, 2);
    ck_assert_int_eq(tu_sql_int(db, "SELECT count(*) FROM steps WHERE run_id = 2"), 0);
    ck_assert_int_eq(tu_sql_int(db, "SELECT count(*) FROM requests WHERE run_id = 2"), 3);
    store_close(s);
    free(path);
}
END_TEST

/* An empty trace is a valid run with no request rows. */
START_TEST(test_write_empty_run)
{
    char *path = db_path("runs.db");
    fixture f;
    fixture_init(&f);
    f.tr.n = 0;
    f.rr.n_steps = 0;
    f.rr.n_members = 0;
    store *s = open_ok(path);
    write_ok(s, &f);
    ck_assert_int_eq(tu_sql_int(store_db(s), "SELECT count(*) FROM requests"), 0);
    ck_assert_int_eq(tu_sql_int(store_db(s), "SELECT count(*) FROM runs"), 1);
    store_close(s);
    free(path);
}
END_TEST

START_TEST(test_write_failed_run)
{
    char *path = db_path("runs.db");
    fixture f;
    fixture_init(&f);
    store *s = open_ok(path);
    sqlite3 *db = store_db(s);
    int64_t id = -1;
    kvs_err err = {{0}};
    ck_assert_int_eq(store_write_failed_run(s, &f.cfg, &f.tr, "cost model: bad spec",
                                            "2024-05-01T12:00:00Z", 0.5, &id, &err),
                     KVS_OK);
    ck_assert_int_eq(id, 1);
    q_eq(db, "SELECT status || '|' || error || '|' || model || '|' || policy || '|' ||"
             " trace_sha256 || '|' || started_at || '|' || wall_s FROM runs",
         "failed|cost model: bad spec|llama-2-7b|priority|"
         "5eed000000000000000000000000000000000000000000000000000000000abc|"
         "2024-05-01T12:00:00Z|0.5");
    q_eq(db, "SELECT quote(n_requests) || quote(ttft_p50_s) || quote(throughput_tok_s) ||"
             " quote(n_steps) FROM runs",
         "NULLNULLNULLNULL");
    ck_assert_int_eq(tu_sql_int(db, "SELECT count(*) FROM requests"), 0);
    ck_assert_int_eq(tu_sql_int(db, "SELECT count(*) FROM run_summary"), 0);
    /* Without a trace (failed before loading it). */
    ck_assert_int_eq(store_write_failed_run(s, &f.cfg, NULL, "trace.csv:3: bad row", "", 0,
                                            &id, &err),
                     KVS_OK);
    ck_assert_int_eq(id, 2);
    q_eq(db, "SELECT quote(trace_sha256) || quote(started_at) FROM runs WHERE run_id = 2",
         "NULLNULL");
    store_close(s);
    free(path);
}
END_TEST

/* -------------------------------------------------------- all or nothing */

/* Request 2 still "running" is not a final status, which the write checks
 * once before any request row: the whole run is rolled back, the earlier
 * run stays, and the store is usable. */
START_TEST(test_failure_mid_write_leaves_nothing)
{
    char *path = db_path("runs.db");
    fixture f;
    fixture_init(&f);
    store *s = open_ok(path);
    sqlite3 *db = store_db(s);
    write_ok(s, &f);

    f.res[2].status = SCHED_REQ_RUNNING;
    int64_t id = -7;
    kvs_err err = {{0}};
    ck_assert_int_eq(store_write_run(s, &f.cfg, &f.rr, &id, &err), KVS_EINTERNAL);
    ck_assert_int_eq(id, -7);
    assert_has(err.msg, path);
    assert_has(err.msg, "request 2: status running is not final");
    ck_assert_int_eq(tu_sql_int(db, "SELECT count(*) FROM runs"), 1);
    ck_assert_int_eq(tu_sql_int(db, "SELECT count(*) FROM requests"), 3);
    ck_assert_int_eq(tu_sql_int(db, "SELECT count(*) FROM steps"), 2);
    ck_assert_int_eq(sqlite3_get_autocommit(db), 1); /* no transaction left open */

    /* Broken step offsets fail in the steps phase, after the requests. */
    f.res[2].status = SCHED_REQ_REJECTED;
    f.steps[1].member_off = 4; /* ends step 0 past n_members */
    ck_assert_int_eq(store_write_run(s, &f.cfg, &f.rr, &id, &err), KVS_EINTERNAL);
    ck_assert_str_eq(err.msg, "run result: step 0 members [0, 4) outside [0, 3)");
    ck_assert_int_eq(tu_sql_int(db, "SELECT count(*) FROM runs"), 1);
    ck_assert_int_eq(tu_sql_int(db, "SELECT count(*) FROM requests"), 3);

    /* A step kind outside prefill/decode/mixed, which step_rows no longer
     * CHECKs, is refused once per run before any step row (schema 11); so
     * is a step id that does not fit the key's low 32 bits. */
    f.steps[1].member_off = 1;
    f.steps[1].step.kind = 3;
    ck_assert_int_eq(store_write_run(s, &f.cfg, &f.rr, &id, &err), KVS_EINTERNAL);
    assert_has(err.msg, "step 1: kind 3 is not prefill, decode or mixed");
    f.steps[1].step.kind = SCHED_STEP_MIXED;
    f.steps[1].step.index = (int64_t)1 << 32;
    ck_assert_int_eq(store_write_run(s, &f.cfg, &f.rr, &id, &err), KVS_EINTERNAL);
    assert_has(err.msg, "step id 4294967296 outside the row key");
    ck_assert_int_eq(tu_sql_int(db, "SELECT count(*) FROM runs"), 1);
    ck_assert_int_eq(tu_sql_int(db, "SELECT count(*) FROM requests"), 3);
    ck_assert_int_eq(tu_sql_int(db, "SELECT count(*) FROM step_rows"), 2);
    ck_assert_int_eq(sqlite3_get_autocommit(db), 1);

    f.steps[1].step.index = 1;
    ck_assert_int_eq(write_ok(s, &f), 2);
    store_close(s);
    free(path);
}
END_TEST

START_TEST(test_transaction_helpers)
{
    char *path = db_path("runs.db");
    store *s = open_ok(path);
    sqlite3 *db = store_db(s);
    kvs_err err = {{0}};
    store_rollback(s); /* no transaction: a no-op */
    ck_assert_int_eq(store_begin(s, &err), KVS_OK);
    raw_exec(db, "INSERT INTO calibrations(device) VALUES('cpu')");
    store_rollback(s);
    ck_assert_int_eq(tu_sql_int(db, "SELECT count(*) FROM calibrations"), 0);
    ck_assert_int_eq(store_begin(s, &err), KVS_OK);
    raw_exec(db, "INSERT INTO calibrations(device) VALUES('cuda')");
    ck_assert_int_eq(store_commit(s, &err), KVS_OK);
    ck_assert_int_eq(tu_sql_int(db, "SELECT count(*) FROM calibrations"), 1);
    /* COMMIT without BEGIN is an error naming the path. */
    ck_assert_int_eq(store_commit(s, &err), KVS_EDB);
    assert_has(err.msg, path);
    store_close(s);
    free(path);
}
END_TEST

/* ------------------------------------------------------- refusing files */

START_TEST(test_newer_schema_refused)
{
    char *path = db_path("runs.db");
    store_close(open_ok(path));
    sqlite3 *db = raw_open(path);
    char sql[128], want[64];
    snprintf(sql, sizeof sql, "UPDATE meta SET value = '%d' WHERE key = 'schema_version'",
             STORE_SCHEMA_VERSION + 1);
    snprintf(want, sizeof want, "schema version %d is newer", STORE_SCHEMA_VERSION + 1);
    raw_exec(db, sql);
    sqlite3_close(db);
    store *s = NULL;
    kvs_err err = {{0}};
    ck_assert_int_eq(store_open(path, &s, &err), KVS_EDB);
    ck_assert_ptr_null(s);
    assert_has(err.msg, path);
    assert_has(err.msg, want);

    db = raw_open(path);
    raw_exec(db, "UPDATE meta SET value = 'one' WHERE key = 'schema_version'");
    sqlite3_close(db);
    ck_assert_int_eq(store_open(path, &s, &err), KVS_EDB);
    assert_has(err.msg, "meta.schema_version 'one' is not a version number");
    free(path);
}
END_TEST

START_TEST(test_not_a_database)
{
    char *path = tu_write_file(tu_tmpdir(), "notes.db",
                               "this is a text file, not an SQLite database; it is long "
                               "enough to hold a header, which it does not.\n");
    store *s = NULL;
    kvs_err err = {{0}};
    ck_assert_int_eq(store_open(path, &s, &err), KVS_EDB);
    ck_assert_ptr_null(s);
    char want[1200];
    snprintf(want, sizeof want, "%s: file is not a database", path);
    ck_assert_str_eq(err.msg, want);
    free(path);
}
END_TEST

START_TEST(test_unopenable_path)
{
    char *path = db_path("no/such/dir/runs.db");
    store *s = NULL;
    kvs_err err = {{0}};
    ck_assert_int_eq(store_open(path, &s, &err), KVS_EDB);
    char want[1200];
    snprintf(want, sizeof want, "%s: unable to open database file", path);
    ck_assert_str_eq(err.msg, want);
    ck_assert_int_eq(store_open("", &s, &err), KVS_EINVAL);
    free(path);
}
END_TEST

/* Read-only: SQLite's ?mode=ro URI refuses writes even to root (a chmod
 * would not).  The schema is current, so opening succeeds; the write fails,
 * naming the path, and leaves nothing. */
START_TEST(test_read_only)
{
    char *path = db_path("runs.db");
    fixture f;
    fixture_init(&f);
    store_close(open_ok(path));
    char uri[1200];
    snprintf(uri, sizeof uri, "file:%s?mode=ro", path);
    store *s = open_ok(uri);
    int64_t id = 0;
    kvs_err err = {{0}};
    ck_assert_int_eq(store_write_run(s, &f.cfg, &f.rr, &id, &err), KVS_EDB);
    assert_has(err.msg, uri);
    assert_has(err.msg, "attempt to write a readonly database");
    ck_assert_int_eq(store_write_failed_run(s, &f.cfg, &f.tr, "x", "", 0, &id, &err), KVS_EDB);
    assert_has(err.msg, "readonly");
    store_close(s);

    /* A read-only file that has no schema yet cannot be brought up to date. */
    char *fresh = db_path("fresh.db");
    sqlite3 *db = raw_open(fresh);
    raw_exec(db, "CREATE TABLE t(x)");
    sqlite3_close(db);
    snprintf(uri, sizeof uri, "file:%s?mode=ro", fresh);
    ck_assert_int_eq(store_open(uri, &s, &err), KVS_EDB);
    assert_has(err.msg, uri);
    assert_has(err.msg, "readonly");

    /* As a normal user, chmod 0444 must fail the same way somewhere. */
    if (geteuid() != 0) {
        ck_assert_int_eq(chmod(path, 0444), 0);
        int rc = store_open(path, &s, &err);
        if (rc == KVS_OK) {
            rc = store_write_run(s, &f.cfg, &f.rr, &id, &err);
            store_close(s);
        }
        ck_assert_int_eq(rc, KVS_EDB);
        assert_has(err.msg, path);
    }
    free(fresh);
    free(path);
}
END_TEST

/* Another connection holds the write lock: BEGIN IMMEDIATE gives up after
 * the (short) busy timeout with "database is locked"; nothing is written,
 * and once the lock is gone the same store writes. */
START_TEST(test_locked)
{
    char *path = db_path("runs.db");
    fixture f;
    fixture_init(&f);
    store *s = open_ok(path);
    store_set_busy_timeout(s, 50);
    sqlite3 *other = raw_open(path);
    raw_exec(other, "BEGIN EXCLUSIVE");
    int64_t id = 0;
    kvs_err err = {{0}};
    ck_assert_int_eq(store_write_run(s, &f.cfg, &f.rr, &id, &err), KVS_EDB);
    char want[1200];
    snprintf(want, sizeof want, "%s: database is locked", path);
    ck_assert_str_eq(err.msg, want);
    raw_exec(other, "ROLLBACK");
    ck_assert_int_eq(tu_sql_int(store_db(s), "SELECT count(*) FROM runs"), 0);
    ck_assert_int_eq(write_ok(s, &f), 1);
    store_close(s);
    sqlite3_close(other);
    free(path);
}
END_TEST

/* Opening a database another process is creating (rollback-journal
 * exclusive lock, so even reads wait): the open itself reports the lock,
 * after $KVSIM_BUSY_TIMEOUT_MS. */
START_TEST(test_locked_at_open)
{
    char *path = db_path("runs.db");
    sqlite3 *other = raw_open(path);
    raw_exec(other, "BEGIN EXCLUSIVE; CREATE TABLE t(x); INSERT INTO t VALUES(1)");
    ck_assert_int_eq(setenv("KVSIM_BUSY_TIMEOUT_MS", "50", 1), 0);
    store *s = NULL;
    kvs_err err = {{0}};
    ck_assert_int_eq(store_open(path, &s, &err), KVS_EDB);
    assert_has(err.msg, path);
    assert_has(err.msg, "database is locked");
    raw_exec(other, "COMMIT");
    s = open_ok(path);
    q_eq(store_db(s), "SELECT value FROM meta WHERE key = 'schema_version'", SCHEMA_NOW);
    store_close(s);

    ck_assert_int_eq(setenv("KVSIM_BUSY_TIMEOUT_MS", "soon", 1), 0);
    ck_assert_int_eq(store_open(path, &s, &err), KVS_EINVAL);
    assert_has(err.msg, "KVSIM_BUSY_TIMEOUT_MS: 'soon'");
    unsetenv("KVSIM_BUSY_TIMEOUT_MS");
    sqlite3_close(other);
    free(path);
}
END_TEST

/* ----------------------------------------------------------- kvsim query */

/* Single-quote `s` for sh: ' -> '\''. */
static char *sh_quote(const char *s)
{
    char *q = malloc(4 * strlen(s) + 3), *p = q;
    ck_assert_ptr_nonnull(q);
    *p++ = '\'';
    for (; *s; s++) {
        if (*s == '\'') {
            memcpy(p, "'\\''", 4);
            p += 4;
        } else {
            *p++ = *s;
        }
    }
    *p++ = '\'';
    *p = 0;
    return q;
}

/* Run `kvsim query OPTS SQL`; returns output (stdout + stderr) and *rc. */
static char *query(const char *opts, const char *sql, int *rc)
{
    char *q = sh_quote(sql);
    size_t n = strlen(tu_kvsim()) + strlen(opts) + strlen(q) + 32;
    char *cmd = malloc(n);
    ck_assert_ptr_nonnull(cmd);
    snprintf(cmd, n, "%s query %s %s", tu_kvsim(), opts, q);
    char *out = NULL;
    *rc = tu_run(cmd, &out);
    free(cmd);
    free(q);
    return out;
}

static void query_eq(const char *opts, const char *sql, const char *want)
{
    int rc;
    char *out = query(opts, sql, &rc);
    ck_assert_msg(rc == 0 && !strcmp(out, want), "kvsim query %s \"%s\": rc %d\n%s\nwant\n%s",
                  opts, sql, rc, out, want);
    free(out);
}

START_TEST(test_cli_query)
{
    char *path = db_path("runs.db");
    fixture f;
    fixture_init(&f);
    store *s = open_ok(path);
    write_ok(s, &f);
    store_close(s);
    char opts[1200];

    /* CSV: RFC 4180 quoting of ',', '"' and newlines; NULL is empty; reals
     * print with the fewest digits that round-trip (1/3 needs 16); blobs hex. */
    snprintf(opts, sizeof opts, "--db %s --csv", path);
    query_eq(opts,
             "SELECT req_id, status, first_token_s, 'a,b' AS q, 'say \"hi\"' AS r "
             "FROM requests ORDER BY req_id",
             "req_id,status,first_token_s,q,r\n"
             "0,finished,0.25,\"a,b\",\"say \"\"hi\"\"\"\n"
             "1,finished,0.75,\"a,b\",\"say \"\"hi\"\"\"\n"
             "2,rejected,,\"a,b\",\"say \"\"hi\"\"\"\n");
    query_eq(opts, "SELECT 1.0/3 AS third, 0.1 AS tenth, x'0aff' AS b, 'x' || char(10) || 'y' AS nl",
             "third,tenth,b,nl\n0.3333333333333333,0.1,0aff,\"x\ny\"\n");
    /* Several statements print one after another. */
    query_eq(opts, "SELECT 1 AS a; SELECT 2 AS b;", "a\n1\nb\n2\n");
    snprintf(opts, sizeof opts, "--csv --no-header --db %s", path);
    query_eq(opts, "SELECT run_id, ttft_p50_ms FROM run_summary", "1,250.0\n");

    /* Table: numbers right-aligned, text left-aligned, NULL spelled out. */
    snprintf(opts, sizeof opts, "--db %s", path);
    query_eq(opts, "SELECT req_id, status, first_token_s FROM requests ORDER BY req_id",
             "req_id  status    first_token_s\n"
             "------  --------  -------------\n"
             "     0  finished           0.25\n"
             "     1  finished           0.75\n"
             "     2  rejected           NULL\n");
    snprintf(opts, sizeof opts, "--no-header --db %s", path);
    query_eq(opts, "SELECT status, req_id FROM requests WHERE req_id < 2 ORDER BY req_id",
             "finished  0\nfinished  1\n");

    /* Errors: one line naming the database, exit 2. */
    int rc;
    char *out;
    char want[1400];
    snprintf(opts, sizeof opts, "--db %s", path);
    out = query(opts, "SELECT * FROM nowhere", &rc);
    ck_assert_int_eq(rc, 2);
    snprintf(want, sizeof want, "kvsim query: %s: no such table: nowhere\n", path);
    ck_assert_str_eq(out, want);
    free(out);
    out = query(opts, "DELETE FROM runs", &rc); /* read-only */
    ck_assert_int_eq(rc, 2);
    snprintf(want, sizeof want, "kvsim query: %s: refused: DELETE statements (kvsim query only "
                                "reads; use SELECT, WITH, VALUES, EXPLAIN or a read-only PRAGMA)\n",
             path);
    ck_assert_str_eq(out, want);
    free(out);

    char *missing = db_path("missing.db");
    snprintf(opts, sizeof opts, "--db %s", missing);
    out = query(opts, "SELECT 1", &rc);
    ck_assert_int_eq(rc, 2);
    snprintf(want, sizeof want, "kvsim query: %s: no such database\n", missing);
    ck_assert_str_eq(out, want);
    ck_assert_int_ne(access(missing, F_OK), 0); /* not created */
    free(out);

    out = query("--bogus", "SELECT 1", &rc);
    ck_assert_int_eq(rc, 2);
    assert_has(out, "--bogus");
    free(out);
    out = query("--help", "", &rc);
    ck_assert_int_eq(rc, 0);
    assert_has(out, "--db FILE");
    assert_has(out, "kvsim.db");
    assert_has(out, "--csv");
    assert_has(out, "--no-header");
    free(out);
    free(missing);
    free(path);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("store");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_schema_created);
    tcase_add_test(tc, test_reopen_idempotent);
    tcase_add_test(tc, test_write_run_round_trip);
    tcase_add_test(tc, test_write_empty_run);
    tcase_add_test(tc, test_write_failed_run);
    tcase_add_test(tc, test_failure_mid_write_leaves_nothing);
    tcase_add_test(tc, test_transaction_helpers);
    tcase_add_test(tc, test_newer_schema_refused);
    tcase_add_test(tc, test_not_a_database);
    tcase_add_test(tc, test_unopenable_path);
    tcase_add_test(tc, test_read_only);
    tcase_add_test(tc, test_locked);
    tcase_add_test(tc, test_locked_at_open);
    tcase_add_test(tc, test_cli_query);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    Suite *s = suite();
    return tu_run_suites(&s, 1);
}
