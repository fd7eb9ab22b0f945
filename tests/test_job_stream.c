/* test_job_stream.c — request rows staged by a second thread while the run
 * simulates (job/job_stream.h): the rows are those the usual path stores,
 * bit for bit, under every engine profile and with the front end on, and
 * they stream while V1 leaps through a whole light run (a rows hand-out
 * only at steps that are not leapt streams none there); the
 * simulation holds no lock, and a run that another writer overtook gets
 * its rows under its own id; a row the database refuses leaves nothing of
 * the run; a stream given up leaves nothing and the store goes on.
 * A database that does not exist yet (store_open_new) is built privately:
 * its rows are those of the usual path, it appears only once the run is in
 * it, a creator that beat it gets the run under the next id, and a run that
 * fails leaves no file at all. */
#include <dirent.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "job/job.h"
#include "job/job_stream.h"
#include "testutil.h"

/* 6,000 requests at saturation: several chunks of rows are done (and so
 * streamed) before the run ends, with preemptions under V1 and V0. */
#define SATURATED "arrival=poisson,rate=30,n=6000,prompt=512,output=128"
/* 6,000 requests at a light load: no preemption, so after its first
 * steps V1 leaps through the whole run (newcomers join, finishers leave):
 * its rows must stream all the same. */
#define LIGHT "arrival=poisson,rate=4,n=6000,prompt=1024,output=256"
static const char *workload = SATURATED;

static void setup(job_opts *o, const char *engine, int stream)
{
    kvs_err err;
    job_opts_init(o);
    ck_assert_int_eq(job_param_set(o, "synthetic", workload, &err), KVS_OK);
    ck_assert_int_eq(job_param_set(o, "model", "llama-7b", &err), KVS_OK);
    ck_assert_int_eq(job_param_set(o, "engine", engine, &err), KVS_OK);
    if (!strcmp(workload, SATURATED)) /* LIGHT: the model's whole cache, no preemption */
        ck_assert_int_eq(job_param_set(o, "kv-blocks", "2000", &err), KVS_OK);
    o->stream_rows = stream;
}

static store *open_db(const char *dir, const char *name)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    store *st = NULL;
    kvs_err err;
    ck_assert_msg(store_open(path, &st, &err) == KVS_OK, "%s", err.msg);
    return st;
}

/* store_open_new of dir/name (which names no file yet); its path in path. */
static store *open_new_db(const char *dir, const char *name, char *path, size_t cap)
{
    snprintf(path, cap, "%s/%s", dir, name);
    store *st = NULL;
    kvs_err err;
    ck_assert_msg(store_open_new(path, &st, &err) == KVS_OK, "%s", err.msg);
    ck_assert_int_eq(store_pending(st), 1);
    return st;
}

/* Run o into st; the run's id; res freed. */
static int64_t run(job_opts *o, store *st, int64_t *streamed)
{
    int64_t id = 0;
    run_result res = {0};
    kvs_err err;
    ck_assert_msg(job_execute(o, st, &id, &res, &err) == KVS_OK, "%s", err.msg);
    *streamed = res.rows_streamed;
    run_result_free(&res);
    return id;
}

/* The same run stored the usual way (a.db) and streamed (b.db): every
 * column of every request row equal (EXCEPT both ways), with most rows
 * streamed.  Mutating run_live_row (say, dropping the front-end shift or
 * the largest gap) fails it. */
static void same_rows(const char *engine, const char *frontend_ms)
{
    const char *dir = tu_tmpdir();
    store *a = open_db(dir, "a.db"), *b = open_db(dir, "b.db");
    job_opts o;
    kvs_err err;
    int64_t sa, sb;
    setup(&o, engine, 0);
    if (frontend_ms)
        ck_assert_int_eq(job_param_set(&o, "frontend-ms", frontend_ms, &err), KVS_OK);
    ck_assert_int_eq(run(&o, a, &sa), 1);
    setup(&o, engine, 1);
    if (frontend_ms)
        ck_assert_int_eq(job_param_set(&o, "frontend-ms", frontend_ms, &err), KVS_OK);
    ck_assert_int_eq(run(&o, b, &sb), 1);
    ck_assert_int_eq(sa, 0);
    ck_assert_msg(sb >= 4096 && sb <= 6000, "%s: %lld rows streamed", engine, (long long)sb);
    char sql[1600];
    snprintf(sql, sizeof sql, "ATTACH '%s/b.db' AS b", dir);
    ck_assert_int_eq(sqlite3_exec(store_db(a), sql, NULL, NULL, NULL), SQLITE_OK);
    ck_assert_int_eq(tu_sql_int(store_db(a), "SELECT count(*) FROM main.requests"), 6000);
    ck_assert_int_eq(tu_sql_int(store_db(a), "SELECT count(*) FROM b.request_rows"), 6000);
    ck_assert_int_eq(tu_sql_int(store_db(a), "SELECT count(*) FROM (SELECT * FROM main.request_rows EXCEPT "
                              "SELECT * FROM b.request_rows)"), 0);
    ck_assert_int_eq(tu_sql_int(store_db(a), "SELECT count(*) FROM (SELECT * FROM b.request_rows EXCEPT "
                              "SELECT * FROM main.request_rows)"), 0);
    /* the runs row is whole: its metrics read back */
    ck_assert_int_eq(tu_sql_int(store_db(a), "SELECT count(*) FROM main.runs r JOIN b.runs s USING (run_id) "
                              "WHERE r.ttft_p99_s = s.ttft_p99_s AND r.n_finished = s.n_finished "
                              "AND r.n_steps = s.n_steps"), 1);
    store_close(a);
    store_close(b);
}

START_TEST(test_stream_same_rows)
{
    workload = SATURATED;
    same_rows("vllm-v1", NULL);
    same_rows("vllm-v0", NULL);
    same_rows("sglang", NULL);
    same_rows("trtllm", NULL);
    same_rows("vllm-v1", "7.5");
    workload = LIGHT; /* one long leap: rows are handed out as its finishers leave */
    same_rows("vllm-v1", NULL);
    workload = SATURATED;
}
END_TEST

/* The progress hook (every 4096 steps): another process's run lands while
 * this one simulates, which it can only if the simulation holds no lock;
 * it takes the run id the staged rows were keyed for. */
typedef struct other_writer {
    const char *path;
    int64_t id;        /* the other run's id, 0 until written */
} other_writer;

static void write_other(void *ctx, double sim_s, int64_t done, int64_t total, double wall_s)
{
    (void)sim_s, (void)done, (void)total, (void)wall_s;
    other_writer *ow = ctx;
    if (ow->id)
        return;
    store *o2 = NULL;
    kvs_err err;
    ck_assert_msg(store_open(ow->path, &o2, &err) == KVS_OK, "%s", err.msg);
    store_set_busy_timeout(o2, 0); /* a lock held by the simulation fails this at once */
    run_config c;
    run_config_defaults(&c);
    trace tr = {0};
    ck_assert_msg(store_write_failed_run(o2, &c, &tr, "other", "2026-01-01T00:00:00Z", 0.0,
                                         &ow->id, &err) == KVS_OK, "%s", err.msg);
    store_close(o2);
}

/* A streamed V1 run into st, during which another writer stores run 1
 * into the database at path; the run's id (the other took 1). */
static int64_t run_overtaken(store *st, const char *path, int64_t *streamed)
{
    other_writer ow = {path, 0};
    job_opts o;
    setup(&o, "vllm-v1", 1);
    o.progress = write_other;
    o.progress_ctx = &ow;
    const int64_t id = run(&o, st, streamed);
    ck_assert_int_eq(ow.id, 1);
    return id;
}

START_TEST(test_stream_no_lock_and_moved_id)
{
    const char *dir = tu_tmpdir();
    store *st = open_db(dir, "two.db");
    char path[1200];
    snprintf(path, sizeof path, "%s/two.db", dir);
    int64_t streamed = 0;
    ck_assert_int_eq(run_overtaken(st, path, &streamed), 2);
    ck_assert_int_ge(streamed, 4096); /* keyed for run 1, moved to run 2 */
    ck_assert_int_eq(tu_sql_int(store_db(st), "SELECT count(*) FROM requests WHERE run_id = 2"), 6000);
    ck_assert_int_eq(tu_sql_int(store_db(st), "SELECT count(*) FROM request_rows"), 6000);
    ck_assert_int_eq(tu_sql_int(store_db(st), "SELECT min(req_id) + max(req_id) FROM requests"), 5999);
    /* the same rows as the usual path's, shifted to run 2 */
    store *a = open_db(dir, "one.db");
    job_opts o;
    setup(&o, "vllm-v1", 0);
    ck_assert_int_eq(run(&o, a, &streamed), 1);
    char sql[1600];
    snprintf(sql, sizeof sql, "ATTACH '%s' AS b", path);
    ck_assert_int_eq(sqlite3_exec(store_db(a), sql, NULL, NULL, NULL), SQLITE_OK);
    ck_assert_int_eq(tu_sql_int(store_db(a), "SELECT count(*) FROM (SELECT * FROM main.requests EXCEPT "
                              "SELECT 1, req_id, arrival_s, prompt_tokens, output_tokens, "
                              "priority, status, first_token_s, finish_s, preemptions, swaps, "
                              "swapped_s, replica, decode_replica, kv_transfer_s, max_itl_s, "
                              "reject_reason FROM b.requests WHERE run_id = 2)"), 0);
    store_close(a);
    store_close(st);
}
END_TEST

/* A trigger on st's connection that refuses request 5000's row. */
static void refuse_row_5000(store *st)
{
    ck_assert_int_eq(sqlite3_exec(store_db(st),
                                  "CREATE TEMP TRIGGER boom BEFORE INSERT ON main.request_rows "
                                  "WHEN NEW.key % 4294967296 = 5000 "
                                  "BEGIN SELECT RAISE(ABORT, 'row 5000 refused'); END",
                                  NULL, NULL, NULL), SQLITE_OK);
}

/* A row the database refuses (a trigger on request 5000): the run's write
 * fails and nothing of it remains; the error names the database. */
START_TEST(test_stream_write_fails)
{
    const char *dir = tu_tmpdir();
    store *st = open_db(dir, "fail.db");
    refuse_row_5000(st);
    job_opts o;
    setup(&o, "vllm-v1", 1);
    int64_t id = 0;
    kvs_err err;
    ck_assert_int_ne(job_execute(&o, st, &id, NULL, &err), KVS_OK);
    ck_assert_ptr_nonnull(strstr(err.msg, "row 5000 refused"));
    ck_assert_ptr_nonnull(strstr(err.msg, "fail.db"));
    ck_assert_int_eq(tu_sql_int(store_db(st), "SELECT count(*) FROM runs"), 0);
    ck_assert_int_eq(tu_sql_int(store_db(st), "SELECT count(*) FROM request_rows"), 0);
    ck_assert_int_eq(tu_sql_int(store_db(st), "SELECT count(*) FROM pragma_database_list "
                               "WHERE name = 'kvsim_stage'"), 0);
    store_close(st);
}
END_TEST

/* A stream given up after rows were staged (a run that failed) leaves no
 * row and no staging database, and the store takes the next run as 1. */
START_TEST(test_stream_end)
{
    const char *dir = tu_tmpdir();
    store *st = open_db(dir, "end.db");
    job_opts o;
    model_spec m;
    gpu_spec g;
    trace tr;
    kvs_err err;
    setup(&o, "vllm-v1", 0);
    ck_assert_msg(job_prepare(&o, &m, &g, &tr, &err) == KVS_OK, "%s", err.msg);
    cost_model cost = {0};
    ck_assert_int_eq(job_cost_select(&o.cfg, &m, &g, NULL, 0, &cost, &err), KVS_OK);
    job_stream js;
    ck_assert_int_eq(job_stream_start(&js, st, &tr), 1);
    run_result res = {0};
    ck_assert_int_eq(run_execute_rows(&o.cfg, &tr, &cost, NULL, NULL, NULL, &js.sink, &res, &err),
                     KVS_OK);
    ck_assert_int_ge(store_stage_count(js.stage), 4096); /* staged before the end */
    job_stream_end(&js);
    ck_assert_int_eq(tu_sql_int(store_db(st), "SELECT count(*) FROM pragma_database_list "
                               "WHERE name = 'kvsim_stage'"), 0);
    ck_assert_int_eq(tu_sql_int(store_db(st), "SELECT count(*) FROM request_rows"), 0);
    ck_assert_int_eq(tu_sql_int(store_db(st), "SELECT count(*) FROM runs"), 0);
    int64_t id = 0;
    ck_assert_msg(store_write_run(st, &o.cfg, &res, &id, &err) == KVS_OK, "%s", err.msg);
    ck_assert_int_eq(id, 1);
    ck_assert_int_eq(tu_sql_int(store_db(st), "SELECT count(*) FROM requests WHERE run_id = 1"), 6000);
    run_result_free(&res);
    cost_model_free(&cost);
    trace_free(&tr);
    store_close(st);
}
END_TEST


/* Files in dir whose names contain "kvsim-new" (private files left). */
static int leftovers(const char *dir)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += strstr(e->d_name, "kvsim-new") != NULL;
    closedir(d);
    return n;
}

/* The progress hook of a run into a new database: it is not there yet. */
typedef struct absent_check {
    const char *path;
    int calls, seen;   /* hook calls; calls that found a file at path */
} absent_check;

static void check_absent(void *ctx, double sim_s, int64_t done, int64_t total, double wall_s)
{
    (void)sim_s, (void)done, (void)total, (void)wall_s;
    absent_check *a = ctx;
    a->calls++;
    a->seen += access(a->path, F_OK) == 0;
}

/* The same run into an existing database (a.db) and into a new one: the
 * same rows, bit for bit, most of them streamed; no file at the new path
 * while it simulates, a WAL database there after, and no private file
 * left.  Dropping the in-place stage (copying instead) keeps the rows but
 * fails nothing here; dropping store_publish fails it at once. */
START_TEST(test_new_db_same_rows)
{
    const char *dir = tu_tmpdir();
    char path[1200];
    store *a = open_db(dir, "a.db"), *b = open_new_db(dir, "new.db", path, sizeof path);
    ck_assert_int_eq(access(path, F_OK), -1);
    job_opts o;
    int64_t sa, sb;
    setup(&o, "vllm-v1", 0);
    ck_assert_int_eq(run(&o, a, &sa), 1);
    setup(&o, "vllm-v1", 1);
    absent_check ac = {path, 0, 0};
    o.progress = check_absent;
    o.progress_ctx = &ac;
    ck_assert_int_eq(run(&o, b, &sb), 1);
    ck_assert_int_gt(ac.calls, 0);
    ck_assert_int_eq(ac.seen, 0);
    ck_assert_int_eq(store_pending(b), 0);
    ck_assert_msg(sb >= 4096 && sb <= 6000, "%lld rows streamed", (long long)sb);
    ck_assert_int_eq(leftovers(dir), 0);
    char sql[1600];
    snprintf(sql, sizeof sql, "ATTACH '%s' AS b", path);
    ck_assert_int_eq(sqlite3_exec(store_db(a), sql, NULL, NULL, NULL), SQLITE_OK);
    ck_assert_int_eq(tu_sql_int(store_db(a), "SELECT count(*) FROM b.request_rows"), 6000);
    ck_assert_int_eq(tu_sql_int(store_db(a), "SELECT count(*) FROM (SELECT * FROM main.request_rows EXCEPT "
                              "SELECT * FROM b.request_rows)"), 0);
    ck_assert_int_eq(tu_sql_int(store_db(a), "SELECT count(*) FROM main.runs r JOIN b.runs s USING (run_id) "
                              "WHERE r.ttft_p99_s = s.ttft_p99_s AND r.n_steps = s.n_steps"), 1);
    store_close(a);
    /* the store goes on as an ordinary one: a second run is run 2 */
    setup(&o, "vllm-v1", 1);
    ck_assert_int_eq(run(&o, b, &sb), 2);
    store_close(b);
    sqlite3 *db = NULL;
    ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
    ck_assert_int_eq(tu_sql_int(db, "SELECT count(*) FROM runs WHERE status = 'finished'"), 2);
    ck_assert_int_eq(tu_sql_int(db, "SELECT count(*) FROM pragma_journal_mode WHERE journal_mode = 'wal'"), 1);
    ck_assert_int_eq(tu_sql_int(db, "SELECT count(*) FROM pragma_integrity_check WHERE integrity_check = 'ok'"), 1);
    sqlite3_close(db);
}
END_TEST

/* Another process creates the database while this run simulates: its run
 * is 1, this one lands there as run 2 with every row, and the private file
 * goes.  A publish that replaced the other file (rename, not link) would
 * lose run 1. */
START_TEST(test_new_db_raced)
{
    const char *dir = tu_tmpdir();
    char path[1200];
    store *st = open_new_db(dir, "race.db", path, sizeof path);
    int64_t streamed = 0;
    ck_assert_int_eq(run_overtaken(st, path, &streamed), 2);
    ck_assert_int_eq(streamed, 0); /* written again, from memory */
    ck_assert_int_eq(tu_sql_int(store_db(st), "SELECT count(*) FROM runs WHERE run_id = 1 AND status = 'failed'"), 1);
    ck_assert_int_eq(tu_sql_int(store_db(st), "SELECT count(*) FROM requests WHERE run_id = 2"), 6000);
    ck_assert_int_eq(tu_sql_int(store_db(st), "SELECT count(*) FROM request_rows"), 6000);
    ck_assert_int_eq(leftovers(dir), 0);
    store_close(st);
}
END_TEST

/* A new database whose run cannot be written (a trigger refuses a row):
 * the error names the path, and neither the database nor a private file
 * is left; a store closed before any run leaves nothing either. */
START_TEST(test_new_db_fails)
{
    const char *dir = tu_tmpdir();
    char path[1200];
    store *st = open_new_db(dir, "nofile.db", path, sizeof path);
    kvs_err err;
    refuse_row_5000(st);
    job_opts o;
    setup(&o, "vllm-v1", 1);
    int64_t id = 0;
    ck_assert_int_ne(job_execute(&o, st, &id, NULL, &err), KVS_OK);
    ck_assert_ptr_nonnull(strstr(err.msg, "row 5000 refused"));
    ck_assert_ptr_nonnull(strstr(err.msg, "nofile.db"));
    ck_assert_int_eq(store_pending(st), 1);
    store_close(st);
    ck_assert_int_eq(access(path, F_OK), -1);
    ck_assert_int_eq(leftovers(dir), 0);
    store_close(open_new_db(dir, "nofile.db", path, sizeof path));
    ck_assert_int_eq(access(path, F_OK), -1);
    ck_assert_int_eq(leftovers(dir), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("job_stream");
    TCase *t = tcase_create("core");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, test_stream_same_rows);
    tcase_add_test(t, test_stream_no_lock_and_moved_id);
    tcase_add_test(t, test_stream_write_fails);
    tcase_add_test(t, test_stream_end);
    tcase_add_test(t, test_new_db_same_rows);
    tcase_add_test(t, test_new_db_raced);
    tcase_add_test(t, test_new_db_fails);
    suite_add_tcase(s, t);
    return tu_run_suites(&s, 1);
}
