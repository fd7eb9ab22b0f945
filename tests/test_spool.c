/* test_spool.c — no run lost to a locked database (store/store_spool.h),
 * group ids reserved once (store/store_groups.c) and the schema 3
 * migration (AUTOINCREMENT keys that stay above ids of deleted runs). */
#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "job/job.h"
#include "store/store.h"
#include "store/store_calib.h"
#include "store/store_spool.h"
#include "testutil.h"

static void small_run(run_config *cfg, trace *tr, run_result *res, const char *spec)
{
    kvs_err err = {{0}};
    model_spec m;
    gpu_spec g;
    trace_synth_spec ss;
    cost_model cost = {0};
    run_config_defaults(cfg);
    strcpy(cfg->model, "llama-2-7b");
    strcpy(cfg->synthetic, spec);
    cfg->record_steps = 1;
    cfg->seed = 5;
    ck_assert_int_eq(model_lookup(cfg->model, &m, &err), 0);
    ck_assert_int_eq(gpu_lookup(cfg->gpu, &g, &err), 0);
    ck_assert_msg(trace_synth_parse(spec, &ss, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(trace_synth_gen(&ss, spec, cfg->seed, tr, &err), 0);
    ck_assert_msg(run_config_resolve(cfg, &m, &g, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(cost_model_create(cfg->cost, &m, &g, cfg->tp, &cost, &err), 0);
    ck_assert_msg(run_execute(cfg, tr, &cost, res, &err) == 0, "%s", err.msg);
    cost_model_free(&cost);
}

static void raw_exec(sqlite3 *db, const char *sql)
{
    char *msg = NULL;
    int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
    ck_assert_msg(rc == SQLITE_OK, "%.200s: %s", sql, msg ? msg : "?");
}

/* A new database file at path of schema version v, as store_open's
 * migrations leave it (legacy ALTER TABLE on, as store_open runs them),
 * with its meta row. */
static sqlite3 *db_at_version(const char *path, int v)
{
    char meta[96];
    sqlite3 *db;
    ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
    int legacy = 0;
    sqlite3_db_config(db, SQLITE_DBCONFIG_LEGACY_ALTER_TABLE, 1, &legacy);
    for (int k = 0; k < v; k++)
        raw_exec(db, store_migration_sql(k));
    sqlite3_db_config(db, SQLITE_DBCONFIG_LEGACY_ALTER_TABLE, 0, &legacy);
    snprintf(meta, sizeof meta, "INSERT INTO meta VALUES ('schema_version', '%d')", v);
    raw_exec(db, meta);
    return db;
}

static int count_spool(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    if (!d)
        return 0;
    while ((e = readdir(d)))
        n += strncmp(e->d_name, "run-", 4) == 0;
    closedir(d);
    return n;
}

/* The wait hook: count the notes. */
static void note(void *ctx, const char *path, double waited, double limit)
{
    (void)path;
    ck_assert(waited <= limit + 1);
    (*(int *)ctx)++;
}

/* A held write lock longer than the wait limit: the run goes to the spool,
 * whole (its requests, steps and sweep point); the next import moves it
 * in, once, even when the same file is offered again. */
START_TEST(test_locked_run_spooled_then_imported)
{
    char path[1200], dir[1300];
    const char *tmp = tu_tmpdir();
    snprintf(path, sizeof path, "%s/s.db", tmp);
    snprintf(dir, sizeof dir, "%s.spool", path);
    store *s = NULL;
    kvs_err err = {{0}};
    ck_assert_int_eq(store_open(path, &s, &err), KVS_OK);
    run_config cfg;
    trace tr;
    run_result res;
    small_run(&cfg, &tr, &res, "rate=10,n=40,prompt=64,output=8");
    const char *params[] = {"x"};
    store_sweep_def def = {"grid", "x=1\n", "", 1, 0, params, NULL, NULL, 0, NULL, NULL, NULL};
    int64_t sweep = 0, id = -1;
    ck_assert_int_eq(store_sweep_create(s, &def, &sweep, &err), KVS_OK);
    cfg.sweep_id = sweep;
    ck_assert_int_eq(store_sweep_tag(s, sweep, 0, "x=1", &err), KVS_OK);

    sqlite3 *other = NULL;
    ck_assert_int_eq(sqlite3_open(path, &other), SQLITE_OK);
    raw_exec(other, "BEGIN IMMEDIATE");
    int notes = 0;
    store_set_busy_timeout(s, 50);
    store_set_wait(s, 3.5, note, &notes);
    ck_assert_int_eq(store_save_run(s, &cfg, &res, &id, &err), KVS_EDB);
    ck_assert_int_eq(id, 0);
    ck_assert_msg(strstr(err.msg, "database is locked after") && strstr(err.msg, ".spool/run-"),
                  "%s", err.msg);
    ck_assert_int_eq(notes, 1); /* one note at 3 s, none before */
    ck_assert_int_eq(count_spool(dir), 1);
    store_sweep_untag(s);

    /* still locked: the import leaves the file */
    store_spool_report rep;
    ck_assert_int_eq(store_spool_import(s, &rep, &err), KVS_EDB);
    ck_assert_int_eq(rep.left, 1);
    ck_assert_int_eq(count_spool(dir), 1);
    raw_exec(other, "ROLLBACK");

    /* keep a copy to offer it twice */
    char cmd[4000];
    snprintf(cmd, sizeof cmd, "cp %s/run-*.db %s/copy.keep", dir, tmp);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_msg(store_spool_import(s, &rep, &err) == KVS_OK, "%s", err.msg);
    ck_assert_int_eq(rep.imported, 1);
    ck_assert_int_eq(count_spool(dir), 0);
    sqlite3 *db = store_db(s);
    int64_t rid = rep.first_run_id;
    ck_assert_int_eq(rid, 1);
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM requests WHERE run_id = %lld", (long long)rid);
    ck_assert_int_eq(tu_sql_int(db, sql), 40);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM steps WHERE run_id = %lld", (long long)rid);
    ck_assert_int_eq(tu_sql_int(db, sql), res.n_steps);
    snprintf(sql, sizeof sql, "SELECT run_id FROM sweep_points WHERE sweep_id = %lld AND "
             "point_index = 0", (long long)sweep);
    ck_assert_int_eq(tu_sql_int(db, sql), rid);
    ck_assert_int_eq(tu_sql_int(db, "SELECT count(*) FROM spool_imports"), 1);

    /* the same file again (a second importer, a kill before the unlink) */
    snprintf(cmd, sizeof cmd, "cp %s/copy.keep %s/$(sqlite3 -noheader %s "
             "'SELECT name FROM spool_imports')", tmp, dir, path);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_int_eq(count_spool(dir), 1);
    ck_assert_msg(store_spool_import(s, &rep, &err) == KVS_OK, "%s", err.msg);
    ck_assert_int_eq(rep.imported, 0);
    ck_assert_int_eq(rep.duplicates, 1);
    ck_assert_int_eq(count_spool(dir), 0);
    ck_assert_int_eq(tu_sql_int(db, "SELECT count(*) FROM runs"), 1);

    /* unlocked: store_save_run writes at once */
    ck_assert_int_eq(store_save_run(s, &cfg, &res, &id, &err), KVS_OK);
    ck_assert_int_eq(id, 2);
    sqlite3_close(other);
    run_result_free(&res);
    trace_free(&tr);
    store_close(s);
}
END_TEST

/* Beyond plain runs (issue 16): with the write lock held past the wait
 * limit, a search probe (its sweep point and parameters), a compare
 * variant and a calibration (measurements and profile) are each kept in a
 * spool file, and the import restores every row the direct write would
 * have made: sweep_points, sweep_point_params, compare_runs, and the
 * calibration under a new calib_id with its 2 measurements and its
 * profile.  Nothing is written before the probe's run (its parameters go
 * in with it). */
START_TEST(test_locked_group_rows_spooled)
{
    char path[1200], dir[1300];
    const char *tmp = tu_tmpdir();
    snprintf(path, sizeof path, "%s/g.db", tmp);
    snprintf(dir, sizeof dir, "%s.spool", path);
    store *s = NULL;
    kvs_err err = {{0}};
    ck_assert_int_eq(store_open(path, &s, &err), KVS_OK);
    run_config cfg;
    trace tr;
    run_result res;
    small_run(&cfg, &tr, &res, "rate=10,n=20,prompt=32,output=4");
    store_sweep_def def = {"search", "search=rate\n", "", 0, 0, NULL, NULL, NULL,
                           0, NULL, NULL, NULL};
    int64_t sweep = 0, cid = 0, id = -1, calib = -1, prof = -1;
    ck_assert_int_eq(store_sweep_create(s, &def, &sweep, &err), KVS_OK);
    store_compare_def cd = {"a\nstatic:batching=static", "--quiet\n", 2, 0, NULL, NULL, NULL};
    ck_assert_int_eq(store_compare_create_def(s, &cd, &cid, &err), KVS_OK);

    sqlite3 *other = NULL;
    ck_assert_int_eq(sqlite3_open(path, &other), SQLITE_OK);
    raw_exec(other, "BEGIN IMMEDIATE");
    int notes = 0;
    store_set_busy_timeout(s, 20);
    store_set_wait(s, 0.2, note, &notes);
    /* the probe: tagged as point 3 of the search with its parameters */
    const char *pn[] = {"policy", "rate"}, *pv[] = {"fcfs", "2.5"};
    cfg.sweep_id = sweep;
    ck_assert_int_eq(store_sweep_tag(s, sweep, 3, "policy=fcfs rate=2.5", &err), KVS_OK);
    ck_assert_int_eq(store_sweep_tag_params(s, 2, pn, pv, &err), KVS_OK);
    ck_assert_int_eq(store_save_run(s, &cfg, &res, &id, &err), KVS_EDB);
    ck_assert_msg(strstr(err.msg, "the run is kept in") && strstr(err.msg, ".spool/run-"), "%s",
                  err.msg);
    store_sweep_untag(s);
    /* the compare variant 1 */
    cfg.sweep_id = 0;
    cfg.compare_id = cid;
    ck_assert_int_eq(store_compare_tag(s, cid, 1, "static", &err), KVS_OK);
    ck_assert_int_eq(store_save_run(s, &cfg, &res, &id, &err), KVS_EDB);
    store_compare_untag(s);
    /* the calibration */
    store_calib_meta meta = {"cpu", "test cpu", "a100-80g", "llama-2-7b", NULL, NULL, "{}"};
    store_calib_meas ms[2] = {{"step", "{}", 16, 1, 0, 1e-3, 9e-4, 2e-3, 5},
                              {"decode_attn", "{}", 1, 4, 128, 2e-5, 1e-5, 3e-5, 5}};
    ck_assert_int_eq(store_save_calib(s, &meta, ms, 2, "{\"k\":1}", NULL, &calib, &prof, &err),
                     KVS_EDB);
    ck_assert_msg(strstr(err.msg, "the calibration is kept in") && strstr(err.msg, ".spool/calib-"),
                  "%s", err.msg);
    ck_assert_int_eq(calib, 0);
    ck_assert_int_eq(prof, 0);
    sqlite3 *db = store_db(s);
    raw_exec(other, "ROLLBACK");
    ck_assert_int_eq(tu_sql_int(db, "SELECT count(*) FROM runs"), 0);
    ck_assert_int_eq(tu_sql_int(db, "SELECT count(*) FROM sweep_point_params"), 0);

    store_spool_report rep;
    ck_assert_msg(store_spool_import(s, &rep, &err) == KVS_OK, "%s", err.msg);
    ck_assert_int_eq(rep.imported, 3);
    ck_assert_int_eq(rep.calibrations, 1);
    ck_assert_int_eq(rep.left, 0);
    /* calib- sorts before run-: the runs are 1 (probe) and 2 (variant) */
    ck_assert_int_eq(tu_sql_int(db, "SELECT run_id FROM sweep_points WHERE point_index = 3"), 1);
    ck_assert_int_eq(tu_sql_int(db, "SELECT count(*) FROM sweep_point_params WHERE point_index = 3 "
                               "AND ((param = 'policy' AND value = 'fcfs') OR "
                               "(param = 'rate' AND value = '2.5'))"),
                     2);
    store_search_point sp;
    ck_assert_int_eq(store_search_point_get(s, sweep, 3, "rate", &sp, &err), KVS_OK);
    ck_assert(sp.found && sp.run_id == 1 && !strcmp(sp.value, "2.5") && !strcmp(sp.policy, "fcfs"));
    ck_assert_int_eq(tu_sql_int(db, "SELECT run_id FROM compare_runs WHERE variant_index = 1 AND "
                               "variant = 'static'"),
                     2);
    ck_assert_int_eq(tu_sql_int(db, "SELECT count(*) FROM calibrations"), 1);
    ck_assert_int_eq(tu_sql_int(db, "SELECT count(*) FROM kernel_measurements k JOIN calibrations c "
                               "USING (calib_id) WHERE k.median_s IN (1e-3, 2e-5)"),
                     2);
    ck_assert_int_eq(tu_sql_int(db, "SELECT count(*) FROM profiles p JOIN calibrations c USING "
                               "(calib_id) WHERE p.params_json = '{\"k\":1}'"),
                     1);
    /* unlocked: written at once, in one transaction */
    ck_assert_int_eq(store_save_calib(s, &meta, ms, 2, "{}", NULL, &calib, &prof, &err), KVS_OK);
    ck_assert_int_eq(calib, 2);
    ck_assert_int_eq(prof, 2);
    sqlite3_close(other);
    run_result_free(&res);
    trace_free(&tr);
    store_close(s);
}
END_TEST

/* A database one version older (the hardening migration is the last one):
 * a run deleted with foreign keys off left orphan
 * requests under id 3.  The upgrade keeps every row, and the next run gets
 * id 4, not 3; deleting run 4 and writing again gives 5 (AUTOINCREMENT). */
START_TEST(test_upgrade_keys_never_reused)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/v2.db", tu_tmpdir());
    /* a database of version 4, the last before the hardening rebuild (5),
     * upgraded from there to STORE_SCHEMA_VERSION */
    sqlite3 *db = db_at_version(path, 4);
    raw_exec(db,
             "SELECT 1;"
             "INSERT INTO runs(run_id, status, kvsim_version, model, batching, policy, alloc, "
             "preemption, block_size, n_requests, compare_id) VALUES "
             "(1, 'finished', '0.1.0', 'llama-2-7b', 'continuous', 'fcfs', 'paged', 'recompute', "
             "16, 1, 9), (2, 'finished', '0.1.0', 'llama-2-7b', 'continuous', 'fcfs', 'paged', "
             "'recompute', 16, 1, 9);"
             "INSERT INTO requests(run_id, req_id, arrival_s, prompt_tokens, output_tokens, "
             "priority, status, first_token_s, finish_s, preemptions, swaps, swapped_s) VALUES "
             "(1, 0, 0, 1, 1, 0, 'finished', 1, 2, 0, 0, NULL),"
             " (3, 0, 0, 1, 1, 0, 'finished', 1, 2, 0, 0, NULL);"
             "INSERT INTO sweeps(sweep_id, kind, created_at, kvsim_version, grid, base_args, "
             "n_points) VALUES (4, 'grid', 'now', '0.1.0', 'x=1', '', 1);");
    sqlite3_close(db);
    store *s = NULL;
    kvs_err err = {{0}};
    ck_assert_msg(store_open(path, &s, &err) == KVS_OK, "%s", err.msg);
    db = store_db(s);
    ck_assert_int_eq(tu_sql_int(db, "SELECT count(*) FROM runs"), 2);
    /* both rows kept (version 9 moved them to request_rows); the orphan under
     * id 3 has no run, so the requests view, a join with runs, omits it */
    ck_assert_int_eq(tu_sql_int(db, "SELECT count(*) FROM request_rows"), 2);
    ck_assert_int_eq(tu_sql_int(db, "SELECT count(*) FROM requests"), 1);
    ck_assert_int_eq(tu_sql_int(db, "SELECT count(*) FROM request_rows WHERE key = (3 << 32) AND "
                               "status_code = 0"), 1);
    ck_assert_int_eq(tu_sql_int(db, "SELECT count(*) FROM sqlite_master WHERE name = 'runs' AND "
                               "sql LIKE '%AUTOINCREMENT%'"), 1);
    /* the old compare is a complete group; the old sweep without its run, interrupted */
    ck_assert_int_eq(tu_sql_int(db, "SELECT count(*) FROM compares WHERE compare_id = 9 AND "
                               "n_runs = 2 AND status = 'complete'"), 1);
    ck_assert_int_eq(tu_sql_int(db, "SELECT count(*) FROM sweeps WHERE sweep_id = 4 AND "
                               "status = 'interrupted'"), 1);
    ck_assert_int_eq(tu_sql_int(db, "PRAGMA foreign_keys"), 1);
    run_config cfg;
    trace tr;
    run_result res;
    small_run(&cfg, &tr, &res, "rate=10,n=5,prompt=16,output=4");
    int64_t id = 0;
    ck_assert_msg(store_write_run(s, &cfg, &res, &id, &err) == KVS_OK, "%s", err.msg);
    ck_assert_int_eq(id, 4);
    ck_assert_int_eq(tu_sql_int(db, "SELECT count(*) FROM requests WHERE run_id = 4"), 5);
    raw_exec(db, "PRAGMA foreign_keys=OFF; DELETE FROM runs WHERE run_id = 4; "
                 "PRAGMA foreign_keys=ON");
    /* the trigger that replaced ON DELETE CASCADE fires with foreign keys off */
    ck_assert_int_eq(tu_sql_int(db, "SELECT count(*) FROM request_rows WHERE key >= (4 << 32)"), 0);
    ck_assert_int_eq(store_write_run(s, &cfg, &res, &id, &err), KVS_OK);
    ck_assert_int_eq(id, 5);
    /* group ids: a new compare follows 9, a new sweep follows 4 */
    int64_t cid = 0, sid = 0;
    ck_assert_int_eq(store_compare_create(s, "a\nb", 2, &cid, &err), KVS_OK);
    ck_assert_int_eq(cid, 10);
    store_sweep_def def = {"search", "s", "", 0, 0, NULL, NULL, NULL, 0, NULL, NULL, NULL};
    ck_assert_int_eq(store_sweep_create(s, &def, &sid, &err), KVS_OK);
    ck_assert_int_eq(sid, 5);
    run_result_free(&res);
    trace_free(&tr);
    store_close(s);
}
END_TEST

/* Text of one query's first column (a group_concat dump), malloc'd. */
static char *q_str(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *q = NULL;
    ck_assert_msg(sqlite3_prepare_v2(db, sql, -1, &q, NULL) == SQLITE_OK, "%s: %s", sql,
                  sqlite3_errmsg(db));
    ck_assert_int_eq(sqlite3_step(q), SQLITE_ROW);
    const unsigned char *t = sqlite3_column_text(q, 0);
    char *v = strdup(t ? (const char *)t : "NULL");
    sqlite3_finalize(q);
    return v;
}

/* Every column of every requests row, quoted, in key order. */
#define REQUESTS_DUMP                                                                       \
    "SELECT group_concat(r, ';') FROM (SELECT quote(run_id)||','||quote(req_id)||','||"    \
    "quote(arrival_s)||','||quote(prompt_tokens)||','||quote(output_tokens)||','||"       \
    "quote(priority)||','||quote(status)||','||quote(first_token_s)||','||"              \
    "quote(finish_s)||','||quote(preemptions)||','||quote(swaps)||','||quote(swapped_s)" \
    "||','||quote(replica)||','||quote(decode_replica)||','||quote(kv_transfer_s)||','||" \
    "quote(max_itl_s)||','||quote(reject_reason) AS r "                                   \
    "FROM requests ORDER BY run_id, req_id)"

/* Version 8 -> 9 moves the request rows into request_rows under key
 * run_id * 2^32 + req_id with an INTEGER status.  The requests view shows
 * exactly the rows of version 8 (every column, NULLs included); inserting
 * through the view still checks the status and the run; deleting a run
 * deletes its rows; a run's rows are read by key range. */
START_TEST(test_upgrade_requests_view)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/v8.db", tu_tmpdir());
    sqlite3 *db = db_at_version(path, 8);
    raw_exec(db, "INSERT INTO runs(run_id, status, kvsim_version, model, batching, policy, "
                 "alloc, preemption, block_size, n_requests) VALUES "
                 "(1, 'finished', '0.1.0', 'm', 'continuous', 'fcfs', 'paged', 'recompute', 16, 2),"
                 "(2, 'finished', '0.1.0', 'm', 'continuous', 'fcfs', 'paged', 'recompute', 16, 2);"
                 "INSERT INTO requests(run_id, req_id, arrival_s, prompt_tokens, output_tokens, "
                 "priority, status, first_token_s, finish_s, preemptions, swaps, swapped_s, "
                 "replica, decode_replica, kv_transfer_s, max_itl_s, reject_reason) VALUES "
                 "(1, 0, 0.5, 10, 3, 0, 'finished', 0.75, 1.25, 1, 0, 0.0, 0, NULL, NULL, 0.25, "
                 "NULL),"
                 "(1, 1, 0.625, 9000, 1, 2, 'rejected', NULL, NULL, 0, 0, NULL, 0, NULL, NULL, "
                 "NULL, 'prompt-too-long'),"
                 "(2, 0, 0.0, 4, 2, 0, 'finished', 0.5, 1.0, 2, 1, 0.25, 1, 3, 0.125, 0.5, NULL),"
                 "(2, 1, 3.0, 8, 8, 1, 'finished', 3.5, 4.0, 0, 0, 0.0, 2, NULL, NULL, 0.0625, "
                 "NULL);");
    char *before = q_str(db, REQUESTS_DUMP);
    sqlite3_close(db);
    store *s = NULL;
    kvs_err err = {{0}};
    ck_assert_msg(store_open(path, &s, &err) == KVS_OK, "%s", err.msg);
    db = store_db(s);
    char *after = q_str(db, REQUESTS_DUMP);
    ck_assert_str_eq(after, before);
    /* (2, 1): key 2 * 4294967296 + 1; rejected is code 1 */
    ck_assert_int_eq(tu_sql_int(db, "SELECT count(*) FROM request_rows WHERE key = 8589934593 "
                               "AND status_code = 0"), 1);
    ck_assert_int_eq(tu_sql_int(db, "SELECT status_code FROM request_rows WHERE key = 4294967297"), 1);
    /* one run's rows by key range, not a scan of request_rows */
    char plan[1024] = "";
    sqlite3_stmt *ep = NULL;
    ck_assert_int_eq(sqlite3_prepare_v2(db, "EXPLAIN QUERY PLAN SELECT * FROM requests "
                                            "WHERE run_id = 2", -1, &ep, NULL), SQLITE_OK);
    while (sqlite3_step(ep) == SQLITE_ROW)
        snprintf(plan + strlen(plan), sizeof plan - strlen(plan), "%s | ",
                 (const char *)sqlite3_column_text(ep, 3));
    sqlite3_finalize(ep);
    ck_assert_msg(strstr(plan, "rowid>") && !strstr(plan, "SCAN"), "%s", plan);
    /* the view's insert trigger: a good row goes in, a bad status or run does not */
    raw_exec(db, "INSERT INTO requests(run_id, req_id, arrival_s, prompt_tokens, output_tokens, "
                 "priority, status, preemptions, swaps) VALUES (2, 2, 5.0, 1, 1, 0, 'rejected', 0, 0)");
    ck_assert_int_eq(tu_sql_int(db, "SELECT count(*) FROM requests WHERE run_id = 2 AND req_id = 2 "
                               "AND status = 'rejected' AND replica = 0"), 1);
    ck_assert_int_ne(sqlite3_exec(db, "INSERT INTO requests(run_id, req_id, arrival_s, "
                                      "prompt_tokens, output_tokens, priority, status, "
                                      "preemptions, swaps) VALUES (2, 3, 5, 1, 1, 0, 'running', 0, 0)",
                                  NULL, NULL, NULL), SQLITE_OK);
    ck_assert_int_ne(sqlite3_exec(db, "INSERT INTO requests(run_id, req_id, arrival_s, "
                                      "prompt_tokens, output_tokens, priority, status, "
                                      "preemptions, swaps) VALUES (7, 0, 5, 1, 1, 0, 'finished', 0, 0)",
                                  NULL, NULL, NULL), SQLITE_OK);
    raw_exec(db, "DELETE FROM runs WHERE run_id = 1");
    ck_assert_int_eq(tu_sql_int(db, "SELECT count(*) FROM request_rows"), 3);
    ck_assert_int_eq(tu_sql_int(db, "SELECT min(key >> 32) FROM request_rows"), 2);
    free(before);
    free(after);
    store_close(s);
}
END_TEST

#define STEPS_DUMP                                                                        \
    "SELECT group_concat(r, ';') FROM (SELECT run_id||','||step_id||','||quote(start_s)||','||" \
    "quote(dur_s)||','||kind||','||n_prefill||','||n_decode||','||tokens||','||kv_read||','||" \
    "prefill_sq||','||kv_blocks_used||','||n_waiting||','||n_running||','||n_preempted||','||" \
    "swap_out_blocks||','||swap_in_blocks||','||hex(members)||','||replica AS r "           \
    "FROM steps ORDER BY run_id, step_id)"

/* Version 10 -> 11 moves the step rows into step_rows under key
 * run_id * 2^32 + step_id with an INTEGER kind (0 prefill, 1 decode,
 * 2 mixed).  The steps view shows exactly the rows of version 10, members
 * blobs included; inserting through the view still checks the kind and
 * the run; deleting a run deletes its steps; a run's steps are read by key
 * range. */
START_TEST(test_upgrade_steps_view)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/v10.db", tu_tmpdir());
    sqlite3 *db = db_at_version(path, 10);
    raw_exec(db, "INSERT INTO runs(run_id, status, kvsim_version, model, batching, policy, "
                 "alloc, preemption, block_size, n_requests) VALUES "
                 "(1, 'finished', '0.1.0', 'm', 'continuous', 'fcfs', 'paged', 'recompute', 16, 2),"
                 "(2, 'finished', '0.1.0', 'm', 'continuous', 'fcfs', 'paged', 'recompute', 16, 2);"
                 "INSERT INTO steps(run_id, step_id, start_s, dur_s, kind, n_prefill, n_decode, "
                 "tokens, kv_read, prefill_sq, kv_blocks_used, n_waiting, n_running, "
                 "n_preempted, swap_out_blocks, swap_in_blocks, members, replica) VALUES "
                 "(1, 0, 0.0, 0.25, 'prefill', 1, 0, 10, 0, 100, 1, 1, 1, 0, 0, 0, x'0102', 0),"
                 "(1, 1, 0.25, 0.125, 'decode', 0, 1, 1, 10, 0, 1, 0, 1, 0, 0, 0, x'', 0),"
                 "(2, 0, 0.5, 0.5, 'mixed', 1, 1, 9, 4, 64, 3, 2, 2, 1, 2, 1, x'ff', 3);");
    char *before = q_str(db, STEPS_DUMP);
    sqlite3_close(db);
    store *s = NULL;
    kvs_err err = {{0}};
    ck_assert_msg(store_open(path, &s, &err) == KVS_OK, "%s", err.msg);
    db = store_db(s);
    char *after = q_str(db, STEPS_DUMP);
    ck_assert_str_eq(after, before);
    /* (2, 0): key 2 * 4294967296 + 0, mixed is code 2; (1, 1): decode, 1 */
    ck_assert_int_eq(tu_sql_int(db, "SELECT kind_code FROM step_rows WHERE key = 8589934592"), 2);
    ck_assert_int_eq(tu_sql_int(db, "SELECT kind_code FROM step_rows WHERE key = 4294967297"), 1);
    ck_assert_int_eq(tu_sql_int(db, "SELECT count(*) FROM sqlite_master WHERE name = 'steps' AND "
                               "type = 'view'"), 1);
    /* one run's steps by key range, not a scan of step_rows */
    char plan[1024] = "";
    sqlite3_stmt *ep = NULL;
    ck_assert_int_eq(sqlite3_prepare_v2(db, "EXPLAIN QUERY PLAN SELECT * FROM steps "
                                            "WHERE run_id = 2 ORDER BY step_id", -1, &ep, NULL),
                     SQLITE_OK);
    while (sqlite3_step(ep) == SQLITE_ROW)
        snprintf(plan + strlen(plan), sizeof plan - strlen(plan), "%s | ",
                 (const char *)sqlite3_column_text(ep, 3));
    sqlite3_finalize(ep);
    ck_assert_msg(strstr(plan, "rowid>") && !strstr(plan, "SCAN"), "%s", plan);
    /* the view's insert trigger: a good row goes in, a bad kind or run does not */
    raw_exec(db, "INSERT INTO steps(run_id, step_id, start_s, dur_s, kind, n_prefill, n_decode, "
                 "tokens, kv_read, prefill_sq, kv_blocks_used, n_waiting, n_running, "
                 "n_preempted, swap_out_blocks, swap_in_blocks, members) VALUES "
                 "(2, 1, 1.0, 0.5, 'decode', 0, 1, 1, 5, 0, 3, 0, 1, 0, 0, 0, x'')");
    ck_assert_int_eq(tu_sql_int(db, "SELECT count(*) FROM steps WHERE run_id = 2 AND step_id = 1 "
                               "AND kind = 'decode' AND replica = 0"), 1);
    ck_assert_int_ne(sqlite3_exec(db, "INSERT INTO steps(run_id, step_id, start_s, dur_s, kind, "
                                      "n_prefill, n_decode, tokens, kv_read, prefill_sq, "
                                      "kv_blocks_used, n_waiting, n_running, n_preempted, "
                                      "swap_out_blocks, swap_in_blocks, members) VALUES "
                                      "(2, 2, 1, 1, 'idle', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, x'')",
                                  NULL, NULL, NULL), SQLITE_OK);
    ck_assert_int_ne(sqlite3_exec(db, "INSERT INTO steps(run_id, step_id, start_s, dur_s, kind, "
                                      "n_prefill, n_decode, tokens, kv_read, prefill_sq, "
                                      "kv_blocks_used, n_waiting, n_running, n_preempted, "
                                      "swap_out_blocks, swap_in_blocks, members) VALUES "
                                      "(7, 0, 1, 1, 'decode', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, x'')",
                                  NULL, NULL, NULL), SQLITE_OK);
    raw_exec(db, "DELETE FROM runs WHERE run_id = 1");
    ck_assert_int_eq(tu_sql_int(db, "SELECT count(*) FROM step_rows"), 2);
    ck_assert_int_eq(tu_sql_int(db, "SELECT min(key >> 32) FROM step_rows"), 2);
    free(before);
    free(after);
    store_close(s);
}
END_TEST

/* Group status: running with this pid, then complete; a group whose process
 * is gone is marked interrupted by store_groups_mark_stale, a live one is
 * left running. */
START_TEST(test_group_status)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/g.db", tu_tmpdir());
    store *s = NULL;
    kvs_err err = {{0}};
    ck_assert_int_eq(store_open(path, &s, &err), KVS_OK);
    sqlite3 *db = store_db(s);
    int64_t a = 0, b = 0, c = 0;
    ck_assert_int_eq(store_compare_create(s, "x", 1, &a, &err), KVS_OK);
    ck_assert_int_eq(store_compare_create(s, "y", 1, &b, &err), KVS_OK);
    ck_assert_int_eq(store_compare_create(s, "z", 1, &c, &err), KVS_OK);
    ck_assert_int_eq(a, 1);
    ck_assert_int_eq(b, 2);
    ck_assert_int_eq(c, 3);
    char sql[200];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM compares WHERE status = 'running' AND pid = %d",
             (int)getpid());
    ck_assert_int_eq(tu_sql_int(db, sql), 3);
    ck_assert_int_eq(store_group_finish(s, "compare", a, "complete", &err), KVS_OK);
    /* b belongs to a process that has exited */
    pid_t child = fork();
    if (child == 0)
        _exit(0);
    waitpid(child, NULL, 0);
    snprintf(sql, sizeof sql, "UPDATE compares SET pid = %d WHERE compare_id = 2", (int)child);
    raw_exec(db, sql);
    int64_t marked = 0;
    ck_assert_int_eq(store_groups_mark_stale(s, &marked, &err), KVS_OK);
    ck_assert_int_eq(marked, 1);
    ck_assert_int_eq(tu_sql_int(db, "SELECT count(*) FROM compares WHERE compare_id = 1 AND "
                               "status = 'complete'"), 1);
    ck_assert_int_eq(tu_sql_int(db, "SELECT count(*) FROM compares WHERE compare_id = 2 AND "
                               "status = 'interrupted'"), 1);
    ck_assert_int_eq(tu_sql_int(db, "SELECT count(*) FROM compares WHERE compare_id = 3 AND "
                               "status = 'running'"), 1);
    ck_assert_int_eq(store_group_finish(s, "compare", c, "done", &err), KVS_EINTERNAL);
    store_close(s);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("spool");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_locked_run_spooled_then_imported);
    tcase_add_test(tc, test_locked_group_rows_spooled);
    tcase_add_test(tc, test_upgrade_keys_never_reused);
    tcase_add_test(tc, test_upgrade_requests_view);
    tcase_add_test(tc, test_upgrade_steps_view);
    tcase_add_test(tc, test_group_status);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    Suite *s = suite();
    return tu_run_suites(&s, 1);
}
