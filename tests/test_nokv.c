/* test_nokv.c — `--kv-cache off` (docs/semantics-extensions.md N), worked by
 * hand under affine:c0,c1,c2,c3 = 1, 0.1, 0.5, 0.01 (c2 multiplies kv_read,
 * which is always 0 without a cache):
 *
 * One request, P 4, O 3.  Each step recomputes its whole context P + g:
 *   g = 0: tokens 4, prefill_sq 16 -> 1 + 0.4 + 0.16 = 1.56   (first token 1.56)
 *   g = 1: tokens 5, prefill_sq 25 -> 1 + 0.5 + 0.25 = 1.75   (t 3.31)
 *   g = 2: tokens 6, prefill_sq 36 -> 1 + 0.6 + 0.36 = 1.96   (finish 5.27)
 * that is sum over g = 0 .. O-1 of c0 + c1 (P+g) + c3 (P+g)^2.
 * With the cache the decodes read the stored context instead: g = 1 is
 * 1 + 0.1*1 + 0.5*5 = 3.6 — here c2 dominates, so the check is the exact
 * feature values, not a speed-up (bench_nokv prints that for LLaMA-7B).
 *
 * Two requests at 0, A (P 4, O 2) and B (P 2, O 3):
 *   prefill [A B]: tokens 4+2 = 6, sq 16+4 = 20 -> 1.8                (t 1.8)
 *   decode [A B]:  contexts 5 and 3: tokens 8, sq 25+9 = 34 -> 2.14   (t 3.94, A done)
 *   decode [B]:    context 4: tokens 4, sq 16 -> 1.56                 (t 5.5, B done) */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/run.h"
#include "testutil.h"

static void setup(golden *g, const double (*rows)[3], int n, int off)
{
    tu_golden_init(g, &rows[0][0], 3, n, "affine:1,0.1,0.5,0.01");
    sched_config *c = &g->cfg.sched;
    c->engine = SCHED_ENGINE_VLLM_V0;
    c->block_size = 4;
    c->total_blocks = 100;
    c->watermark = 0.0;
    c->max_batched_tokens = 1000;
    c->max_model_len = 1000;
    c->kv_cache_off = off;
    golden_run(g);
}

static void expect_step(const golden *g, int i, int64_t tokens, int64_t sq, double dur)
{
    const sched_step *s = &g->res.steps[i].step;
    ck_assert_int_eq(s->batch.tokens, tokens);
    ck_assert_int_eq(s->batch.prefill_sq, sq);
    ck_assert_int_eq(s->batch.kv_read, 0);
    ck_assert_int_eq(s->batch.n_decode, 0);
    ck_assert(fabs(s->dur_s - dur) < 1e-12);
}

START_TEST(test_lone_request)
{
    const double rows[][3] = {{0, 4, 3}};
    golden g;
    setup(&g, rows, 1, 1);
    ck_assert_int_eq(g.res.n_steps, 3);
    expect_step(&g, 0, 4, 16, 1.56);
    expect_step(&g, 1, 5, 25, 1.75);
    expect_step(&g, 2, 6, 36, 1.96);
    ck_assert(fabs(g.res.reqs[0].first_token_s - 1.56) < 1e-12);
    ck_assert(fabs(g.res.reqs[0].finish_s - 5.27) < 1e-12);
    /* the closed form: sum_g c0 + c1 (P+g) + c3 (P+g)^2 */
    double want = 0;
    for (int gg = 0; gg < 3; gg++)
        want += 1 + 0.1 * (4 + gg) + 0.01 * (4 + gg) * (4 + gg);
    ck_assert(fabs(g.res.reqs[0].finish_s - want) < 1e-12);
    ck_assert_int_eq(g.res.steps[1].step.kind, SCHED_STEP_DECODE); /* the kind is kept */
    golden_free(&g);
    /* the same request with the cache: the decode reads 5 stored tokens */
    setup(&g, rows, 1, 0);
    ck_assert(fabs(g.res.steps[1].step.dur_s - 3.6) < 1e-12);
    golden_free(&g);
}
END_TEST

START_TEST(test_two_requests)
{
    const double rows[][3] = {{0, 4, 2}, {0, 2, 3}};
    golden g;
    setup(&g, rows, 2, 1);
    ck_assert_int_eq(g.res.n_steps, 3);
    expect_step(&g, 0, 6, 20, 1.8);
    expect_step(&g, 1, 8, 34, 2.14);
    expect_step(&g, 2, 4, 16, 1.56);
    ck_assert(fabs(g.res.reqs[0].finish_s - 3.94) < 1e-12);
    ck_assert(fabs(g.res.reqs[1].finish_s - 5.5) < 1e-12);
    ck_assert(fabs(g.res.sum.mean_batch - 5.0 / 3.0) < 1e-12); /* members, not features */
    golden_free(&g);
}
END_TEST

START_TEST(test_refused_combinations)
{
    sched_config c;
    run_config rc;
    run_config_defaults(&rc);
    c = rc.sched;
    c.total_blocks = 100;
    c.max_batched_tokens = 2048;
    c.max_model_len = 2048;
    c.kv_cache_off = 1;
    kvs_err err;
    c.engine = SCHED_ENGINE_VLLM_V0;
    ck_assert_int_eq(sched_config_check(&c, 1, &err), KVS_OK);
    c.engine = SCHED_ENGINE_VLLM_V1;
    ck_assert_int_eq(sched_config_check(&c, 1, &err), KVS_EINVAL);
    ck_assert(strstr(err.msg, "--kv-cache off: only with --engine vllm-v0") != NULL);
    c.engine = SCHED_ENGINE_VLLM_V0;
    c.chunked_prefill = 1;
    ck_assert_int_eq(sched_config_check(&c, 1, &err), KVS_EINVAL);
    c.chunked_prefill = 0;
    c.preemption = SCHED_PREEMPT_SWAP;
    ck_assert_int_eq(sched_config_check(&c, 1, &err), KVS_EINVAL);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("nokv");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_lone_request);
    tcase_add_test(tc, test_two_requests);
    tcase_add_test(tc, test_refused_combinations);
    suite_add_tcase(s, tc);
    return tu_run_suites(&s, 1);
}
