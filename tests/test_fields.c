/* test_fields.c — the run_fields table (sim/run_fields.h) is the one
 * source of the `runs` columns: the schema kvsim creates has exactly its
 * columns in its order, docs/schema.md lists exactly its rows, a run
 * written and read back gives every parameter and metric back bit for bit,
 * a tampered value is refused naming its column, and the JSON summary
 * holds every JSON field. */
#include <check.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/run_fields.h"
#include "store/store.h"
#include "testutil.h"

static store *open_tmp(void)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/f.db", tu_tmpdir());
    store *st = NULL;
    kvs_err err;
    ck_assert_msg(store_open(path, &st, &err) == KVS_OK, "%s", err.msg);
    return st;
}

START_TEST(test_schema_is_the_table)
{
    store *st = open_tmp();
    sqlite3_stmt *q;
    ck_assert_int_eq(sqlite3_prepare_v2(store_db(st), "PRAGMA table_info(runs)", -1, &q, NULL),
                     SQLITE_OK);
    size_t nf;
    const run_field *f = run_fields(&nf);
    ck_assert_int_eq(sqlite3_step(q), SQLITE_ROW);
    ck_assert_str_eq((const char *)sqlite3_column_text(q, 1), "run_id");
    for (size_t i = 0; i < nf; i++) {
        ck_assert_int_eq(sqlite3_step(q), SQLITE_ROW);
        ck_assert_str_eq((const char *)sqlite3_column_text(q, 1), f[i].name);
        const char *type = (const char *)sqlite3_column_text(q, 2);
        ck_assert_msg(!strncmp(f[i].sql, type, strlen(type)), "%s: %s vs %s", f[i].name,
                      f[i].sql, type);
        ck_assert_ptr_nonnull(run_field_find(f[i].name));
        ck_assert_msg(f[i].doc && *f[i].doc, "%s has no description", f[i].name);
    }
    ck_assert_int_eq(sqlite3_step(q), SQLITE_DONE);
    sqlite3_finalize(q);
    store_close(st);
}
END_TEST

/* The block of docs/schema.md between "<!-- run_fields:NAME" and
 * "<!-- /run_fields -->", without the marker lines. */
static char *docs_block(const char *doc, const char *name)
{
    char open[64];
    snprintf(open, sizeof open, "<!-- run_fields:%s ", name);
    const char *a = strstr(doc, open);
    ck_assert_msg(a, "docs/schema.md has no %s block", name);
    a = strchr(a, '\n') + 1;
    const char *b = strstr(a, "<!-- /run_fields -->");
    ck_assert_ptr_nonnull(b);
    return strndup(a, (size_t)(b - a));
}

/* KVSIM_WRITE_DOCS=1 build/test_fields rewrites the three blocks of
 * docs/schema.md from the table (after a change to sim/run_fields.c). */
static void write_docs(char *doc, const char *const names[3])
{
    static char out[1 << 20], want[1 << 16];
    size_t len = 0;
    const char *p = doc;
    for (int g = 0; g < 3; g++) {
        char open[64];
        snprintf(open, sizeof open, "<!-- run_fields:%s ", names[g]);
        const char *a = strstr(p, open);
        ck_assert_ptr_nonnull(a);
        a = strchr(a, '\n') + 1;
        const char *b = strstr(a, "<!-- /run_fields -->");
        ck_assert_ptr_nonnull(b);
        run_fields_markdown((run_field_group)g, want, sizeof want);
        len += (size_t)snprintf(out + len, sizeof out - len, "%.*s%s", (int)(a - p), p, want);
        p = b;
    }
    snprintf(out + len, sizeof out - len, "%s", p);
    FILE *f = fopen("docs/schema.md", "w");
    ck_assert_ptr_nonnull(f);
    fputs(out, f);
    ck_assert_int_eq(fclose(f), 0);
}

START_TEST(test_docs_list_the_table)
{
    FILE *f = fopen("docs/schema.md", "r");
    ck_assert_ptr_nonnull(f);
    static char doc[1 << 20];
    size_t n = fread(doc, 1, sizeof doc - 1, f);
    fclose(f);
    doc[n] = 0;
    const char *const names[] = {"prov", "param", "metric"};
    if (getenv("KVSIM_WRITE_DOCS"))
        write_docs(doc, names);
    for (int g = 0; g < 3; g++) {
        static char want[1 << 16];
        run_fields_markdown((run_field_group)g, want, sizeof want);
        if (getenv("KVSIM_WRITE_DOCS"))
            break;
        char *got = docs_block(doc, names[g]);
        ck_assert_msg(!strcmp(got, want),
                      "docs/schema.md's %s table differs from sim/run_fields.c (rewrite it with "
                      "KVSIM_WRITE_DOCS=1 build/test_fields); it should read:\n%s",
                      names[g], want);
        free(got);
    }
}
END_TEST

/* A config and summary with a distinct value in every field. */
static void fill(run_config *c, run_summary *s)
{
    run_config_defaults(c);
    memset(s, 0, sizeof *s);
    size_t nf;
    const run_field *f = run_fields(&nf);
    for (size_t i = 0; i < nf; i++) {
        run_value v = {RUN_VALUE_INT, (int64_t)i + 2, 0.0, NULL};
        char text[64];
        if (f[i].group == RUN_FIELD_GROUP_PROV)
            continue;
        if (f[i].type == RUN_FIELD_TYPE_TEXT) {
            snprintf(text, sizeof text, "text-%zu", i);
            v.kind = RUN_VALUE_TEXT;
            v.s = text;
        } else if (f[i].type == RUN_FIELD_TYPE_F64) {
            v.kind = RUN_VALUE_REAL;
            v.d = 1.0 / (double)(i + 3);
        } else if (f[i].type == RUN_FIELD_TYPE_ENUM) {
            v.kind = RUN_VALUE_TEXT;
            v.s = f[i].enum_name(1);
        } else if (f[i].type == RUN_FIELD_TYPE_U64) {
            v.i = -5; /* above 2^63: stored as a negative int64 */
        }
        kvs_err err;
        ck_assert_msg(run_field_set(&f[i], c, s, &v, &err) == KVS_OK, "%s", err.msg);
    }
}

START_TEST(test_write_then_read_every_field)
{
    store *st = open_tmp();
    run_config c;
    run_summary s;
    fill(&c, &s);
    trace tr = {0};
    strcpy(tr.sha256, "ab12");
    run_result res = {0};
    res.tr = &tr;
    res.sum = s;
    strcpy(res.started_at, "2026-12-01T00:00:00Z");
    res.wall_s = 0.25;
    c.record_steps = 0;
    int64_t id = 0;
    kvs_err err;
    ck_assert_msg(store_write_run(st, &c, &res, &id, &err) == KVS_OK, "%s", err.msg);
    store_run_row *row = malloc(sizeof *row);
    ck_assert_msg(store_read_run(store_db(st), id, row, &err) == KVS_OK, "%s", err.msg);
    ck_assert_str_eq(row->status, "finished");
    ck_assert_str_eq(row->trace_sha256, "ab12");
    ck_assert_str_eq(row->started_at, "2026-12-01T00:00:00Z");
    ck_assert_str_eq(row->kvsim_version, KVSIM_VERSION);
    ck_assert(row->wall_s == 0.25);
    size_t nf;
    const run_field *f = run_fields(&nf);
    for (size_t i = 0; i < nf; i++) {
        run_value a = run_field_get(&f[i], &c, &s), b = run_field_get(&f[i], &row->cfg, &row->sum);
        ck_assert_msg(a.kind == b.kind && a.i == b.i && (a.kind != RUN_VALUE_REAL || a.d == b.d) &&
                          (a.kind != RUN_VALUE_TEXT || !strcmp(a.s, b.s)),
                      "runs.%s changed on the way through the store", f[i].name);
    }
    ck_assert_int_eq(store_read_run(store_db(st), id + 1, row, &err), KVS_EINVAL);
    ck_assert_str_eq(err.msg, "no such run 2");
    /* tampered rows: an unknown enum name, text where a number belongs */
    sqlite3_exec(store_db(st), "UPDATE runs SET policy = 'lifo'", NULL, NULL, NULL);
    ck_assert_int_eq(store_read_run(store_db(st), id, row, &err), KVS_EINVAL);
    ck_assert_str_eq(err.msg, "run 1: runs.policy: 'lifo' is not a known value");
    sqlite3_exec(store_db(st), "UPDATE runs SET policy = 'fcfs', max_seqs = 'many'", NULL, NULL,
                 NULL);
    ck_assert_int_eq(store_read_run(store_db(st), id, row, &err), KVS_EINVAL);
    ck_assert_str_eq(err.msg, "run 1: runs.max_seqs: not an integer");
    /* metrics by their kind: counts and times never negative, fractions
     * within [0, 1], reals finite (9e999 reads back as +Inf) */
    static const char *const bad[][2] = {
        {"n_finished = -1", "run 1: runs.n_finished: -1 is negative"},
        {"slo_attainment = 1.5", "run 1: runs.slo_attainment: 1.5 is not a fraction in [0, 1]"},
        {"throughput_tok_s = -0.5", "run 1: runs.throughput_tok_s: -0.5 is negative"},
        {"e2e_p99_s = 9e999", "run 1: runs.e2e_p99_s: inf is not a finite number"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char sql[256];
        snprintf(sql, sizeof sql, "UPDATE runs SET max_seqs = 8, %s", bad[i][0]);
        ck_assert_int_eq(sqlite3_exec(store_db(st), sql, NULL, NULL, NULL), SQLITE_OK);
        ck_assert_int_eq(store_read_run(store_db(st), id, row, &err), KVS_EINVAL);
        ck_assert_str_eq(err.msg, bad[i][1]);
        sqlite3_exec(store_db(st),
                     "UPDATE runs SET n_finished = 1, slo_attainment = 0.5, "
                     "throughput_tok_s = 1, e2e_p99_s = 1",
                     NULL, NULL, NULL);
    }
    ck_assert_msg(store_read_run(store_db(st), id, row, &err) == KVS_OK, "%s", err.msg);
    free(row);
    store_close(st);
}
END_TEST

START_TEST(test_json_has_every_json_field)
{
    run_config c;
    run_summary s;
    fill(&c, &s);
    s.ttft.p50 = NAN;
    c.sched.chunked_prefill = 0;
    c.sched.prefix_caching = 1;
    size_t need = run_fields_json(&c, &s, NULL, 0);
    char *buf = malloc(need + 1);
    ck_assert_uint_eq(run_fields_json(&c, &s, buf, need + 1), need);
    ck_assert_uint_eq(strlen(buf), need);
    size_t nf;
    const run_field *f = run_fields(&nf);
    for (size_t i = 0; i < nf; i++) {
        char key[64];
        snprintf(key, sizeof key, "\"%s\": ", f[i].name);
        int want = (f[i].flags & RUN_FIELD_JSON) && !(f[i].flags & RUN_FIELD_IF_CHUNKED);
        ck_assert_msg(!!strstr(buf, key) == want, "%s %s in the JSON", f[i].name,
                      want ? "missing" : "unexpected");
    }
    ck_assert_ptr_nonnull(strstr(buf, "\"ttft_p50_s\": null, "));
    free(buf);
}
END_TEST

/* A version-1 database (as kvsim 0.1.0 wrote it) opens, is upgraded to the
 * current version in place, and its old run reads back with the columns
 * added since at their defaults (engine 'vllm-v0'). */
START_TEST(test_upgrade_from_version_1)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/v1.db", tu_tmpdir());
    sqlite3 *db;
    ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
    ck_assert_int_eq(sqlite3_exec(db, store_migration_sql(0), NULL, NULL, NULL), SQLITE_OK);
    ck_assert_int_eq(sqlite3_exec(db,
                                  "INSERT INTO meta VALUES ('schema_version', '1');"
                                  "INSERT INTO runs(status, kvsim_version, model, batching, "
                                  "policy, alloc, preemption, block_size, n_requests) VALUES "
                                  "('finished', '0.1.0', 'llama-2-7b', 'continuous', 'fcfs', "
                                  "'paged', 'recompute', 16, 5)",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);
    store *st = NULL;
    kvs_err err;
    ck_assert_msg(store_open(path, &st, &err) == KVS_OK, "%s", err.msg);
    store_run_row *row = malloc(sizeof *row);
    ck_assert_msg(store_read_run(store_db(st), 1, row, &err) == KVS_OK, "%s", err.msg);
    ck_assert_int_eq(row->cfg.sched.engine, SCHED_ENGINE_VLLM_V0);
    ck_assert_int_eq(row->cfg.sched.segment_tokens, 0);
    ck_assert_str_eq(row->cfg.model, "llama-2-7b");
    ck_assert_int_eq(row->sum.n_requests, 5);
    free(row);
    sqlite3_stmt *q;
    ck_assert_int_eq(sqlite3_prepare_v2(store_db(st),
                                        "SELECT value FROM meta WHERE key = 'schema_version'", -1,
                                        &q, NULL),
                     SQLITE_OK);
    ck_assert_int_eq(sqlite3_step(q), SQLITE_ROW);
    ck_assert_int_eq(sqlite3_column_int(q, 0), STORE_SCHEMA_VERSION);
    sqlite3_finalize(q);
    store_close(st);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("fields");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_schema_is_the_table);
    tcase_add_test(tc, test_docs_list_the_table);
    tcase_add_test(tc, test_write_then_read_every_field);
    tcase_add_test(tc, test_json_has_every_json_field);
    tcase_add_test(tc, test_upgrade_from_version_1);
    suite_add_tcase(s, tc);
    return tu_run_suites(&s, 1);
}
