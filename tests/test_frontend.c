/* test_frontend.c — the front-end latency rule (--frontend-ms,
 * docs/semantics-extensions.md): a hand-worked golden, the rule against its
 * own definition ("the request reaches the engine F later") on random
 * traces, the same for a cluster, and the flag's range. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "job/job.h"
#include "sim/run.h"
#include "testutil.h"

#define EPS 1e-9

static void run_ok(const run_config *cfg, const trace *tr, const cost_model *cost,
                   run_result *res)
{
    kvs_err err;
    int rc = run_execute(cfg, tr, cost, res, &err);
    ck_assert_msg(rc == 0, "run failed: %s", err.msg);
}

/* V0 engine, every step 1 s (affine:1,0,0,0), --frontend-ms 250:
 *   r0 t0   P4 O2   prefill [0,1): first token at engine time 1
 *   r1 t0.5 P4 O1   waits for the step; prefill [1,2) (V0 runs waiting
 *                   prompts first): first token = finish at 2
 *   decode r0 [2,3): r0 finishes at 3.
 * Reported 0.25 s later: r0 first 1.25, finish 3.25; r1 2.25, 2.25.
 * TTFT mean = (1.25 + (2.25 - 0.5)) / 2 = 1.5 (1.25 without the front end);
 * E2E mean = (3.25 + 1.75) / 2 = 2.5; TPOT of r0 = (3.25 - 1.25) / 1 = 2,
 * unchanged; the makespan is engine time, 3; throughput spans the last
 * reported finish: 3 tokens / 3.25 s. */
START_TEST(test_golden)
{
    trace tr = {0};
    tr.n = 2;
    tr.reqs = calloc(2, sizeof *tr.reqs);
    tr.reqs[0] = (trace_req){0.0, 4, 2, 0};
    tr.reqs[1] = (trace_req){0.5, 4, 1, 0};
    run_config cfg;
    run_config_defaults(&cfg);
    cfg.sched.block_size = 4;
    cfg.sched.total_blocks = 100;
    cfg.sched.watermark = 0.0;
    cfg.sched.max_batched_tokens = 1000;
    cfg.sched.max_model_len = 1000;
    cfg.frontend_ms = 250.0;
    cost_model cost;
    kvs_err err;
    ck_assert(cost_model_create("affine:1,0,0,0", NULL, NULL, 1, &cost, &err) == 0);
    run_result res;
    run_ok(&cfg, &tr, &cost, &res);
    ck_assert(fabs(res.reqs[0].first_token_s - 1.25) < EPS);
    ck_assert(fabs(res.reqs[0].finish_s - 3.25) < EPS);
    ck_assert(fabs(res.reqs[1].first_token_s - 2.25) < EPS);
    ck_assert(fabs(res.reqs[1].finish_s - 2.25) < EPS);
    ck_assert(fabs(res.sum.ttft.mean - 1.5) < EPS);
    ck_assert(fabs(res.sum.e2e.mean - 2.5) < EPS);
    ck_assert(fabs(res.sum.tpot.mean - 2.0) < EPS);
    ck_assert(fabs(res.sum.makespan_s - 3.0) < EPS);
    ck_assert(fabs(res.sum.throughput_tok_s - 3.0 / 3.25) < EPS);
    run_result_free(&res);
    cost_model_free(&cost);
    trace_free(&tr);
}
END_TEST

/* The rule against its definition: the same trace with every arrival
 * F later, run without a front end, gives the same first-token and
 * finish times (to rounding), and the same TTFT/E2E once measured from the
 * original arrivals.  Loop over engines (V0, V1) and replicas (1, 3). */
START_TEST(test_equals_shifted_arrivals)
{
    static const double F_MS = 37.5;
    int engine = _i % 2, replicas = _i / 2 ? 3 : 1;
    trace tr = {0}, sh = {0};
    tu_random_trace(&tr, 120, 11 + (uint64_t)_i, 150, 25, 0);
    tu_random_trace(&sh, 120, 11 + (uint64_t)_i, 150, 25, 0);
    for (int64_t i = 0; i < sh.n; i++)
        sh.reqs[i].arrival_s += F_MS * 1e-3;
    run_config cfg;
    run_config_defaults(&cfg);
    cfg.sched.engine = engine ? SCHED_ENGINE_VLLM_V1 : SCHED_ENGINE_VLLM_V0;
    cfg.sched.chunked_prefill = engine;
    cfg.sched.block_size = 4;
    cfg.sched.total_blocks = 120;
    cfg.sched.max_batched_tokens = engine ? 256 : 1000;
    cfg.sched.max_model_len = 1000;
    cfg.sched.max_seqs = 16;
    cfg.replicas = replicas;
    cost_model cost;
    kvs_err err;
    ck_assert(cost_model_create("affine:0.01,0.0002,0.00001,0.000001", NULL, NULL, 1, &cost,
                                &err) == 0);
    run_result a, b, z;
    cfg.frontend_ms = F_MS;
    run_ok(&cfg, &tr, &cost, &a);
    cfg.frontend_ms = 0.0;
    run_ok(&cfg, &sh, &cost, &b);
    run_ok(&cfg, &tr, &cost, &z);
    ck_assert_int_eq(a.sum.n_finished, b.sum.n_finished);
    ck_assert_int_gt(a.sum.n_finished, 0);
    for (int64_t i = 0; i < tr.n; i++) {
        ck_assert_int_eq(a.reqs[i].status, b.reqs[i].status);
        if (isnan(b.reqs[i].finish_s)) {
            ck_assert(isnan(a.reqs[i].finish_s));
            continue;
        }
        ck_assert(fabs(a.reqs[i].first_token_s - b.reqs[i].first_token_s) < 1e-7);
        ck_assert(fabs(a.reqs[i].finish_s - b.reqs[i].finish_s) < 1e-7);
        /* and exactly the engine's times plus F */
        ck_assert(a.reqs[i].finish_s == z.reqs[i].finish_s + F_MS * 1e-3);
        if (replicas > 1)
            ck_assert_int_eq(a.replica[i], z.replica[i]);
    }
    ck_assert(fabs(a.sum.ttft.mean - z.sum.ttft.mean - F_MS * 1e-3) < 1e-9);
    ck_assert(fabs(a.sum.e2e.p50 - z.sum.e2e.p50 - F_MS * 1e-3) < 1e-9);
    ck_assert(fabs(a.sum.tpot.mean - z.sum.tpot.mean) < 1e-9);
    ck_assert_int_eq(a.sum.n_steps, z.sum.n_steps);
    run_result_free(&a);
    run_result_free(&b);
    run_result_free(&z);
    cost_model_free(&cost);
    trace_free(&tr);
    trace_free(&sh);
}
END_TEST

START_TEST(test_flag_range)
{
    job_opts o;
    job_opts_init(&o);
    kvs_err err;
    ck_assert_int_eq(job_param_set(&o, "frontend-ms", "12.5", &err), 0);
    ck_assert(o.cfg.frontend_ms == 12.5);
    ck_assert_int_ne(job_param_set(&o, "frontend-ms", "-1", &err), 0);
    ck_assert_msg(strstr(err.msg, "frontend-ms") != NULL, "%s", err.msg);
    ck_assert_int_ne(job_param_set(&o, "frontend-ms", "fast", &err), 0);
    job_opts_init(&o);
    ck_assert(o.cfg.frontend_ms == 0.0); /* off by default */
}
END_TEST

static Suite *frontend_suite(void)
{
    Suite *s = suite_create("frontend");
    TCase *t = tcase_create("core");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, test_golden);
    tcase_add_loop_test(t, test_equals_shifted_arrivals, 0, 4);
    tcase_add_test(t, test_flag_range);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    Suite *s[] = {frontend_suite()};
    return tu_run_suites(s, 1);
}
