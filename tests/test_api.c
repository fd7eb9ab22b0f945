/* test_api.c — the public C API (api/kvsim.h) runs the same pipeline as
 * `kvsim run`: a run configured by flag names through the API gives the
 * same requests as one configured through the job layer; errors come back
 * as the CLI's one line, naming the flag, and never exit the process; a
 * stored run can be found by its id. */
#include <check.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/kvsim.h"
#include "job/job.h"
#include "testutil.h"

#define SPEC "arrival=poisson,rate=20,n=300,prompt=uniform:16:800,output=uniform:1:120"

static int same(double a, double b) { return (isnan(a) && isnan(b)) || a == b; }

START_TEST(test_api_matches_job_layer)
{
    kvsim_run *r = kvsim_run_new();
    ck_assert_ptr_nonnull(r);
    ck_assert_int_eq(kvsim_run_set(r, "model", "llama-2-7b"), KVSIM_OK);
    ck_assert_int_eq(kvsim_run_set(r, "synthetic", SPEC), KVSIM_OK);
    ck_assert_int_eq(kvsim_run_set(r, "kv-blocks", "600"), KVSIM_OK);
    ck_assert_int_eq(kvsim_run_set(r, "seed", "5"), KVSIM_OK);
    char path[1100], err[1024];
    snprintf(path, sizeof path, "%s/api.db", tu_tmpdir());
    kvsim_db *db = NULL;
    ck_assert_int_eq(kvsim_db_open(path, &db, err), KVSIM_OK);
    ck_assert_msg(kvsim_run_execute(r, db) == KVSIM_OK, "%s", kvsim_run_error(r));
    ck_assert_int_eq(kvsim_run_id(r), 1);
    ck_assert_int_eq(kvsim_run_execute(r, db), KVSIM_EINVAL); /* once */

    /* the same run through the job layer */
    job_opts o;
    job_opts_init(&o);
    kvs_err e;
    ck_assert_int_eq(job_param_set(&o, "model", "llama-2-7b", &e), KVS_OK);
    ck_assert_int_eq(job_param_set(&o, "synthetic", SPEC, &e), KVS_OK);
    ck_assert_int_eq(job_param_set(&o, "kv-blocks", "600", &e), KVS_OK);
    ck_assert_int_eq(job_param_set(&o, "seed", "5", &e), KVS_OK);
    store *st;
    char path2[1100];
    snprintf(path2, sizeof path2, "%s/job.db", tu_tmpdir());
    ck_assert_int_eq(store_open(path2, &st, &e), KVS_OK);
    int64_t id;
    run_result res = {0};
    ck_assert_msg(job_execute(&o, st, &id, &res, &e) == KVS_OK, "%s", e.msg);
    ck_assert_int_eq(kvsim_run_request_count(r), 300);
    int preempted = 0;
    for (int64_t i = 0; i < 300; i++) {
        kvsim_request q;
        ck_assert_int_eq(kvsim_run_request(r, i, &q), KVSIM_OK);
        const sched_req_result *s = &res.reqs[i];
        ck_assert(q.req_id == i && q.finished == (s->status == SCHED_REQ_FINISHED));
        ck_assert(same(q.first_token_s, s->first_token_s) && same(q.finish_s, s->finish_s));
        ck_assert_int_eq(q.preemptions, s->preemptions);
        preempted += q.preemptions > 0;
    }
    ck_assert_int_gt(preempted, 0); /* the small cache made the run interesting */
    kvsim_request q;
    ck_assert_int_eq(kvsim_run_request(r, 300, &q), KVSIM_EINVAL);
    char *js = kvsim_run_summary_json(r);
    ck_assert_ptr_nonnull(js);
    ck_assert_ptr_nonnull(strstr(js, "\"run_id\": 1, "));
    ck_assert_ptr_nonnull(strstr(js, "\"engine\": \"vllm-v1\""));
    free(js);
    run_result_free(&res);
    store_close(st);
    kvsim_run_free(r);
    kvsim_db_close(db);
}
END_TEST

START_TEST(test_api_errors)
{
    kvsim_run *r = kvsim_run_new();
    ck_assert_int_eq(kvsim_run_set(r, "max-seqs", "many"), KVSIM_EINVAL);
    ck_assert_str_eq(kvsim_run_error(r), "--max-seqs: 'many' is not an integer");
    ck_assert_int_eq(kvsim_run_set(r, "colour", "red"), KVSIM_EINVAL);
    ck_assert_str_eq(kvsim_run_error(r), "--colour: not a run flag");
    ck_assert_int_eq(kvsim_run_set(r, "model", "llama-9b"), KVSIM_OK); /* checked at execute */
    ck_assert_int_eq(kvsim_run_execute(r, NULL), KVSIM_EINVAL);
    ck_assert_ptr_nonnull(strstr(kvsim_run_error(r), "llama-9b"));
    ck_assert_ptr_null(kvsim_run_summary_json(r));
    kvsim_run_free(r);
    /* a calibrated profile needs a database to read it from */
    r = kvsim_run_new();
    ck_assert_int_eq(kvsim_run_set(r, "cost", "calibrated"), KVSIM_OK);
    ck_assert_int_eq(kvsim_run_set(r, "synthetic", "rate=5,n=5,prompt=8,output=2"), KVSIM_OK);
    ck_assert_int_eq(kvsim_run_execute(r, NULL), KVSIM_EINVAL);
    ck_assert_str_eq(kvsim_run_error(r), "--cost: calibrated: a calibrated profile is read from a "
                                         "results database, and this run has none");
    kvsim_run_free(r);
    char err[1024];
    kvsim_db *db = NULL;
    ck_assert_int_ne(kvsim_db_open("/nonexistent-dir/x.db", &db, err), KVSIM_OK);
    ck_assert_ptr_null(db);
    ck_assert_ptr_nonnull(strstr(err, "/nonexistent-dir/x.db"));
    ck_assert_str_eq(kvsim_version(), KVSIM_VERSION);
}
END_TEST

/* The tables the Python package reads come from the job layer's: every
 * run flag, in --help order, with its help text and negation. */
START_TEST(test_api_flags)
{
    ck_assert_int_eq(kvsim_flag_count(), (int64_t)job_param_count());
    kvsim_flag f;
    int switches = 0;
    for (int64_t i = 0; i < kvsim_flag_count(); i++) {
        ck_assert_int_eq(kvsim_flag_at(i, &f), KVSIM_OK);
        const job_param *p = job_param_at((size_t)i);
        ck_assert_str_eq(f.name, p->name);
        ck_assert_str_eq(f.help, p->help);
        ck_assert((f.metavar == NULL) == (p->metavar == NULL));
        switches += !strcmp(f.kind, "switch");
    }
    ck_assert_int_gt(switches, 2);
    ck_assert_int_eq(kvsim_flag_at(kvsim_flag_count(), &f), KVSIM_EINVAL);
    ck_assert_int_eq(kvsim_flag_at(job_param_find("prefix-caching") - job_param_at(0), &f),
                     KVSIM_OK);
    ck_assert_str_eq(f.negation, "no-prefix-caching");
}
END_TEST

/* Steps, the memory picture and a store after execute.  40 requests of 100
 * prompt and 5 output tokens arrive at once under vllm-v0: its token
 * budget is max(2048, max-model-len 4096) = 4096 >= 40 x 100, so step 0
 * prefills all 40 (4000 tokens, the first output token each) and 4 decode
 * steps give the other 4 tokens: 5 steps.  The memory picture's
 * total_blocks is the run's kv_blocks; a run executed without a database
 * is stored once, afterwards. */
START_TEST(test_api_steps_memory_store)
{
    kvsim_run *r = kvsim_run_new();
    ck_assert_int_eq(kvsim_run_set(r, "model", "llama-2-7b"), KVSIM_OK);
    ck_assert_int_eq(kvsim_run_set(r, "engine", "vllm-v0"), KVSIM_OK);
    ck_assert_int_eq(kvsim_run_set(r, "synthetic", "arrival=burst,n=40,prompt=100,output=5"),
                     KVSIM_OK);
    ck_assert_int_eq(kvsim_run_set(r, "record-steps", NULL), KVSIM_OK);
    char *mem = kvsim_run_memory_json(r);
    ck_assert_ptr_nonnull(mem);
    ck_assert_msg(kvsim_run_execute(r, NULL) == KVSIM_OK, "%s", kvsim_run_error(r));
    ck_assert_int_eq(kvsim_run_id(r), 0);
    char *js = kvsim_run_summary_json(r);
    char want[64];
    const char *kb = strstr(js, "\"kv_blocks\": ");
    ck_assert_ptr_nonnull(kb);
    snprintf(want, sizeof want, "\"total_blocks\": %lld}", atoll(kb + 13));
    ck_assert_msg(strstr(mem, want), "%s lacks %s", mem, want);
    int64_t n = kvsim_run_step_count(r);
    ck_assert_int_eq(n, 5);
    kvsim_step st[2];
    ck_assert_int_eq(kvsim_run_steps(r, 0, 2, st), KVSIM_OK);
    ck_assert_int_eq(st[0].step_id, 0);
    ck_assert_str_eq(st[0].kind, "prefill");  /* all 40 arrive at once: prefill first */
    ck_assert_int_eq(st[0].n_prefill, 40);
    ck_assert_int_eq(st[0].tokens, 4000);
    ck_assert_str_eq(st[1].kind, "decode");
    ck_assert_int_eq(st[1].n_decode, 40);
    ck_assert_int_eq(kvsim_run_steps(r, n - 1, 2, st), KVSIM_EINVAL);
    kvsim_request q[40];
    ck_assert_int_eq(kvsim_run_requests(r, 0, 40, q), KVSIM_OK);
    ck_assert_int_eq(q[39].req_id, 39);
    char path[1100], err[1024];
    snprintf(path, sizeof path, "%s/store.db", tu_tmpdir());
    kvsim_db *db = NULL;
    ck_assert_int_eq(kvsim_db_open(path, &db, err), KVSIM_OK);
    ck_assert_int_eq(kvsim_run_store(r, db), KVSIM_OK);
    ck_assert_int_eq(kvsim_run_id(r), 1);
    ck_assert_int_eq(kvsim_run_store(r, db), KVSIM_EINVAL); /* once */
    free(js);
    free(mem);
    kvsim_db_close(db);
    kvsim_run_free(r);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("api");
    TCase *tc = tcase_create("api");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_api_matches_job_layer);
    tcase_add_test(tc, test_api_errors);
    tcase_add_test(tc, test_api_flags);
    tcase_add_test(tc, test_api_steps_memory_store);
    suite_add_tcase(s, tc);
    return tu_run_suites(&s, 1);
}
