/* test_job.c — the run pipeline as a library (job/job.h): flags set by
 * name with the CLI's error texts, the getopt table and --help generated
 * from one table, a run prepared, executed, stored and read back, a bad
 * run refused before it starts, and compare's default variant set. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job/job.h"
#include "testutil.h"

START_TEST(test_param_set)
{
    job_opts o;
    kvs_err err;
    job_opts_init(&o);
    ck_assert_int_eq(job_param_set(&o, "max-seqs", "8", &err), KVS_OK);
    ck_assert_int_eq(o.cfg.sched.max_seqs, 8);
    ck_assert_int_eq(job_param_set(&o, "policy", "priority", &err), KVS_OK);
    ck_assert_int_eq(o.cfg.sched.policy, SCHED_POLICY_PRIORITY);
    ck_assert_int_eq(job_param_set(&o, "rate-scale", "2.5", &err), KVS_OK);
    ck_assert(o.cfg.rate_scale == 2.5);
    ck_assert_int_eq(job_param_set(&o, "prefix-caching", NULL, &err), KVS_OK);
    ck_assert_int_eq(o.cfg.sched.prefix_caching, 1);
    ck_assert_int_eq(job_param_set(&o, "slo", "ttft=1,e2e=4", &err), KVS_OK);
    ck_assert(o.cfg.slo_ttft_s == 1 && o.cfg.slo_e2e_s == 4);
    ck_assert_int_eq(job_param_set(&o, "db", "x.db", &err), KVS_OK);
    ck_assert_str_eq(o.db, "x.db");

    ck_assert_int_eq(job_param_set(&o, "max-seqs", "0", &err), KVS_EINVAL);
    ck_assert_str_eq(err.msg, "--max-seqs: 0 is out of range [1, 1073741824]");
    ck_assert_int_eq(job_param_set(&o, "tp", "x", &err), KVS_EINVAL);
    ck_assert_str_eq(err.msg, "--tp: 'x' is not an integer");
    ck_assert_int_eq(job_param_set(&o, "batching", "nope", &err), KVS_EINVAL);
    ck_assert_str_eq(err.msg, "--batching: unknown value 'nope' (continuous, static)");
    ck_assert_int_eq(job_param_set(&o, "slo", "foo=1", &err), KVS_EINVAL);
    ck_assert_str_eq(err.msg, "--slo: unknown metric 'foo' (ttft, tpot, e2e)");
    ck_assert_int_eq(job_param_set(&o, "no-such-flag", "1", &err), KVS_EINVAL);
    ck_assert_str_eq(err.msg, "--no-such-flag: not a run flag");
    ck_assert_int_eq(job_param_set(&o, "seed", NULL, &err), KVS_EINVAL);
    ck_assert_str_eq(err.msg, "--seed: missing value");
}
END_TEST

START_TEST(test_param_tables)
{
    const struct option *opts = job_param_options();
    size_t n = 0;
    for (; opts[n].name; n++) {
        const job_param *p = job_param_find(opts[n].name);
        ck_assert_ptr_nonnull(p);
        ck_assert_int_eq(p->id, opts[n].val);
        ck_assert_int_eq(opts[n].has_arg,
                         p->kind == JOB_PARAM_SWITCH || p->kind == JOB_PARAM_OFF
                             ? no_argument
                             : required_argument);
        ck_assert_ptr_eq(job_param_by_id(p->id), p);
    }
    ck_assert_uint_eq(n, job_param_count());
    const char *help = job_param_help();
    for (size_t i = 0; i < job_param_count(); i++) {
        char flag[64];
        snprintf(flag, sizeof flag, "  --%s", job_param_at(i)->name);
        ck_assert_msg(strstr(help, flag), "%s missing from the help", flag);
    }
    ck_assert_ptr_nonnull(strstr(help, "workload:\n  --trace FILE            CSV trace"));
    ck_assert_ptr_nonnull(
        strstr(help, "  --slo ttft=S,tpot=S,e2e=S  per-request SLOs for attainment"));
}
END_TEST

static void small_run(job_opts *o)
{
    kvs_err err;
    job_opts_init(o);
    ck_assert_int_eq(job_param_set(o, "synthetic", "arrival=poisson,rate=4,n=40,prompt=64,"
                                                   "output=16", &err), KVS_OK);
    ck_assert_int_eq(job_param_set(o, "model", "llama-7b", &err), KVS_OK);
    ck_assert_int_eq(job_param_set(o, "max-seqs", "8", &err), KVS_OK);
    ck_assert_int_eq(job_param_set(o, "label", "test_job", &err), KVS_OK);
}

START_TEST(test_execute_and_read)
{
    const char *dir = tu_tmpdir();
    char path[1200];
    snprintf(path, sizeof path, "%s/job.db", dir);
    store *st = NULL;
    kvs_err err;
    ck_assert_int_eq(store_open(path, &st, &err), KVS_OK);
    job_opts o;
    small_run(&o);
    ck_assert_int_eq(job_check(&o, &err), KVS_OK);
    int64_t id = 0;
    run_result res = {0};
    ck_assert_msg(job_execute(&o, st, &id, &res, &err) == KVS_OK, "%s", err.msg);
    ck_assert_int_gt(id, 0);
    ck_assert_int_eq(res.sum.n_requests, 40);

    job_run_info info;
    ck_assert_msg(job_read_run(st, id, &info, &err) == KVS_OK, "%s", err.msg);
    ck_assert_str_eq(info.status, "finished");
    ck_assert_str_eq(info.cfg.model, "llama-7b");
    ck_assert_str_eq(info.cfg.label, "test_job");
    ck_assert_str_eq(info.cfg.synthetic, o.cfg.synthetic);
    ck_assert_str_eq(info.cfg.cost_desc, o.cfg.cost_desc);
    ck_assert_int_eq(info.cfg.sched.max_seqs, 8);
    ck_assert_int_eq(info.cfg.sched.total_blocks, o.cfg.sched.total_blocks);
    ck_assert_int_eq(info.cfg.sched.batching, o.cfg.sched.batching);
    ck_assert_int_eq(info.sum.n_finished, res.sum.n_finished);
    ck_assert_int_eq(info.sum.n_steps, res.sum.n_steps);
    ck_assert(fabs(info.sum.ttft.p99 - res.sum.ttft.p99) <= 1e-12 * fabs(res.sum.ttft.p99));
    ck_assert(isnan(info.sum.slo_attainment)); /* no SLO: NULL */
    run_result_free(&res);

    ck_assert_int_eq(job_read_run(st, id + 100, &info, &err), KVS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "no such run"));

    /* refused before it starts: nothing stored */
    small_run(&o);
    ck_assert_int_eq(job_param_set(&o, "policy", "priority", &err), KVS_OK);
    ck_assert_int_eq(job_execute(&o, st, &id, NULL, &err), KVS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "--policy priority: the synthetic workload has no "
                                          "priorities"));
    small_run(&o);
    ck_assert_int_eq(job_param_set(&o, "trace", "traces/azure_llm_2023_conv.csv", &err),
                     KVS_OK);
    ck_assert_int_eq(job_check(&o, &err), KVS_EINVAL);
    ck_assert_str_eq(err.msg, "--trace and --synthetic: give one workload");
    store_close(st);
}
END_TEST

START_TEST(test_compare_defaults)
{
    job_opts o;
    job_variant vs[JOB_MAX_VARIANTS];
    int n = 0, no_prio = 0;
    kvs_err err;
    small_run(&o);
    /* the default profile (vllm-v1): V1, V1 without chunks, V0, V0 static,
     * V0 without a KV cache */
    ck_assert_int_eq(job_compare_defaults(&o, vs, &n, &no_prio), KVS_OK);
    ck_assert_int_eq(n, 5);
    ck_assert_int_eq(no_prio, 1);
    ck_assert_str_eq(vs[1].name, "no-chunked-prefill");
    ck_assert_str_eq(vs[3].flags, "engine=vllm-v0,batching=static");
    ck_assert_str_eq(vs[4].flags, "engine=vllm-v0,kv-cache=off");
    /* the V0 profile keeps its classic set, plus the no-KV-cache baseline
     * and multi-step scheduling */
    ck_assert_int_eq(job_param_set(&o, "engine", "vllm-v0", &err), KVS_OK);
    ck_assert_int_eq(job_compare_defaults(&o, vs, &n, &no_prio), KVS_OK);
    ck_assert_int_eq(n, 5);
    ck_assert_str_eq(vs[1].name, "static");
    ck_assert_str_eq(vs[3].name, "no-kv-cache");
    ck_assert_str_eq(vs[4].flags, "num-scheduler-steps=8");
    ck_assert_int_eq(job_param_set(&o, "synthetic", "rate=4,n=40,prompt=64,output=16,system_prompt=64,"
                                                   "priorities=0:0.5/1:0.5", &err), KVS_OK);
    ck_assert_int_eq(job_compare_defaults(&o, vs, &n, &no_prio), KVS_OK);
    ck_assert_int_eq(n, 8);
    ck_assert_int_eq(no_prio, 0);
    ck_assert_str_eq(vs[5].name, "priority");
    ck_assert_str_eq(vs[7].name, "lpm");

    job_variant v;
    ck_assert_int_eq(job_variant_parse("s8:batching=static,max-seqs=8", &v, &err), KVS_OK);
    ck_assert_int_eq(job_variant_apply(&o, &v, &err), KVS_OK);
    ck_assert_int_eq(o.cfg.sched.batching, SCHED_BATCHING_STATIC);
    ck_assert_int_eq(o.cfg.sched.max_seqs, 8);
    ck_assert_int_eq(job_variant_parse("bad:db=x", &v, &err), KVS_OK);
    ck_assert_int_eq(job_variant_apply(&o, &v, &err), KVS_EINVAL);
    ck_assert_str_eq(err.msg, "--variant bad: unknown or disallowed flag 'db'");
}
END_TEST

/* --cp N: the scheduler's block spans N * block_size tokens of context
 * (each of the N GPU groups holds block_size of them), and every GPU keeps
 * its own memory, so the block count is cp 1's.  Under a cost that does
 * not depend on cp (affine), a cp-2 run with block 16 must therefore be
 * request for request the cp-1 run with block 32 and the same blocks.
 * Under the roofline a GPU reads 1/cp of each context's KV and pays the
 * exchange of partial results: at 60K-token prompts cp 4 must finish
 * sooner than cp 1 (at 900-token prompts it does not: the exchange costs
 * more than the KV it saves), and hold fewer than a third of the blocks. */
static void cp_run(const char *cp, const char *block, const char *kvb, const char *cost,
                   const char *workload, trace *tr, run_result *res, int64_t *blocks)
{
    kvs_err err;
    job_opts o;
    job_opts_init(&o);
    ck_assert_int_eq(job_param_set(&o, "synthetic", workload, &err), KVS_OK);
    ck_assert_int_eq(job_param_set(&o, "model", "llama-3.1-8b", &err), KVS_OK);
    ck_assert_int_eq(job_param_set(&o, "cp", cp, &err), KVS_OK);
    ck_assert_int_eq(job_param_set(&o, "block-size", block, &err), KVS_OK);
    if (kvb)
        ck_assert_int_eq(job_param_set(&o, "kv-blocks", kvb, &err), KVS_OK);
    ck_assert_int_eq(job_param_set(&o, "cost", cost, &err), KVS_OK);
    model_spec m;
    gpu_spec g;
    ck_assert_msg(job_prepare(&o, &m, &g, tr, &err) == KVS_OK, "%s", err.msg);
    cost_model cm = {0};
    ck_assert_msg(job_cost_select(&o.cfg, &m, &g, NULL, 0, &cm, &err) == KVS_OK, "%s", err.msg);
    ck_assert_msg(run_execute(&o.cfg, tr, &cm, res, &err) == KVS_OK, "%s", err.msg);
    cost_model_free(&cm);
    *blocks = o.cfg.sched.total_blocks;
}

START_TEST(test_context_parallel)
{
    run_result a = {0}, b = {0}, c = {0}, d = {0};
    trace ta, tb, tc, td;
    int64_t ba, bb, bc, bd;
    const char *aff = "affine:0.01,0.0001,0.00001,0";
    const char *w = "arrival=poisson,rate=8,n=60,prompt=900,output=40";
    const char *wl = "arrival=poisson,rate=1,n=6,prompt=60000,output=20";
    cp_run("2", "16", "300", aff, w, &ta, &a, &ba);
    cp_run("1", "32", "300", aff, w, &tb, &b, &bb);
    ck_assert_int_eq(ba, 300);
    ck_assert_int_eq(a.sum.n_steps, b.sum.n_steps);
    ck_assert_int_eq(a.sum.peak_kv_blocks, b.sum.peak_kv_blocks);
    for (int64_t i = 0; i < a.tr->n; i++) {
        ck_assert(a.reqs[i].first_token_s == b.reqs[i].first_token_s);
        ck_assert(a.reqs[i].finish_s == b.reqs[i].finish_s);
    }
    /* capacity: the per-GPU memory figure does not change with cp */
    cp_run("1", "16", NULL, "roofline", wl, &tc, &c, &bc);
    cp_run("4", "16", NULL, "roofline", wl, &td, &d, &bd);
    ck_assert_int_eq(bc, bd);
    ck_assert(d.sum.e2e.mean <= c.sum.e2e.mean);
    ck_assert_int_lt(3 * d.sum.peak_kv_blocks, c.sum.peak_kv_blocks);
    run_result_free(&a);
    run_result_free(&b);
    run_result_free(&c);
    run_result_free(&d);
    trace_free(&ta);
    trace_free(&tb);
    trace_free(&tc);
    trace_free(&td);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("job");
    TCase *t = tcase_create("job");
    tcase_set_timeout(t, 60);
    tcase_add_test(t, test_param_set);
    tcase_add_test(t, test_param_tables);
    tcase_add_test(t, test_execute_and_read);
    tcase_add_test(t, test_compare_defaults);
    tcase_add_test(t, test_context_parallel);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    Suite *s = suite();
    return tu_run_suites(&s, 1);
}
