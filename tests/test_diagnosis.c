/* test_diagnosis.c — why requests were rejected, by engine, worked by hand.
 *
 * Every case: block 4 tokens, 4 KV blocks (16 tokens), watermark 0,
 * max_batched_tokens 20, max_model_len 40, cost 1 s a step.
 *   r0 (P 30, O 20): P + O = 50 > 40                      -> context
 *   r1 (P 25, O 5):  P + O = 30 fits; the prompt 25 > 20   -> token budget
 *                    (V1 checks P + O - 1 = 29 > 20, the same answer)
 *   r2 (P 8, O 4):   fits everywhere                       -> finishes
 *   r3 (P 18, O 2):  18 <= 20 tokens, but ceil(18 / 4) = 5 blocks > 4
 *                    (V1: ceil(19 / 4) = 5 > 4)            -> KV capacity
 * Static batching has no token budget: r1 reserves ceil(30 / 4) = 8 blocks
 * > 4, so it is a KV rejection there.  Chunked prefill has none either (a
 * prompt runs in chunks), and r1's prompt needs ceil(25 / 4) = 7 blocks
 * (V1: ceil(29 / 4) = 8) > 4: KV.
 * The reasons are checked in the order context, token budget, KV. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/run.h"
#include "testutil.h"

static void setup(golden *g, sched_engine engine, sched_batching batching, int chunked)
{
    memset(g, 0, sizeof *g);
    const int64_t rows[4][2] = {{30, 20}, {25, 5}, {8, 4}, {18, 2}};
    g->tr.n = 4;
    g->tr.reqs = calloc(4, sizeof *g->tr.reqs);
    for (int i = 0; i < 4; i++)
        g->tr.reqs[i] = (trace_req){0.1 * i, rows[i][0], rows[i][1], 0};
    run_config_defaults(&g->cfg);
    sched_config *c = &g->cfg.sched;
    c->engine = engine;
    c->batching = batching;
    c->chunked_prefill = chunked;
    c->prefix_caching = 0;
    c->block_size = 4;
    c->total_blocks = 4;
    c->watermark = 0.0;
    c->max_batched_tokens = 20;
    c->max_model_len = 40;
    kvs_err err;
    ck_assert_int_eq(cost_model_create("affine:1,0,0,0", NULL, NULL, 1, &g->cost, &err), 0);
}

static void expect(sched_engine engine, sched_batching batching, int chunked, const int want[4])
{
    golden g;
    setup(&g, engine, batching, chunked);
    golden_run(&g);
    for (int i = 0; i < 4; i++) {
        const sched_req_result *r = &g.res.reqs[i];
        ck_assert_msg(r->reject_reason == want[i], "engine %d batching %d chunked %d req %d: "
                      "reason %d, want %d", engine, batching, chunked, i, r->reject_reason,
                      want[i]);
        ck_assert_int_eq(r->status == SCHED_REQ_REJECTED, want[i] != SCHED_REJECT_NONE);
    }
    const run_summary *s = &g.res.sum;
    int64_t n[4] = {0};
    for (int i = 0; i < 4; i++)
        n[want[i]]++;
    ck_assert_int_eq(s->n_reject_context, n[SCHED_REJECT_CONTEXT]);
    ck_assert_int_eq(s->n_reject_token_budget, n[SCHED_REJECT_TOKEN_BUDGET]);
    ck_assert_int_eq(s->n_reject_kv, n[SCHED_REJECT_KV_CAPACITY]);
    ck_assert_int_eq(s->n_rejected, s->n_reject_context + s->n_reject_token_budget + s->n_reject_kv);
    golden_free(&g);
}

START_TEST(test_reject_reasons)
{
    enum { N = SCHED_REJECT_NONE, C = SCHED_REJECT_CONTEXT, B = SCHED_REJECT_TOKEN_BUDGET,
           K = SCHED_REJECT_KV_CAPACITY };
    const int v0[4] = {C, B, N, K}, stat[4] = {C, K, N, K}, chunk[4] = {C, K, N, K};
    expect(SCHED_ENGINE_VLLM_V0, SCHED_BATCHING_CONTINUOUS, 0, v0);
    expect(SCHED_ENGINE_VLLM_V0, SCHED_BATCHING_STATIC, 0, stat);
    expect(SCHED_ENGINE_VLLM_V0, SCHED_BATCHING_CONTINUOUS, 1, chunk);
    expect(SCHED_ENGINE_VLLM_V1, SCHED_BATCHING_CONTINUOUS, 0, v0);
    expect(SCHED_ENGINE_VLLM_V1, SCHED_BATCHING_CONTINUOUS, 1, chunk);
    ck_assert_str_eq(sched_reject_reason_name(C), "context");
    ck_assert_str_eq(sched_reject_reason_name(B), "token-budget");
    ck_assert_str_eq(sched_reject_reason_name(K), "kv-capacity");
    ck_assert_ptr_null(sched_reject_reason_name(N));
}
END_TEST

/* A run of `n` rows {arrival, P, O} under V0 or V1 defaults of this file:
 * block 4, watermark 0, 1 s a step; limits passed in. */
static void run_limits(golden *g, sched_engine engine, const double (*rows)[3], int n,
                       int64_t blocks, int64_t max_seqs, int64_t budget)
{
    memset(g, 0, sizeof *g);
    g->tr.n = n;
    g->tr.reqs = calloc((size_t)n, sizeof *g->tr.reqs);
    for (int i = 0; i < n; i++)
        g->tr.reqs[i] = (trace_req){rows[i][0], (int64_t)rows[i][1], (int64_t)rows[i][2], 0};
    run_config_defaults(&g->cfg);
    sched_config *c = &g->cfg.sched;
    c->engine = engine;
    c->chunked_prefill = 0;
    c->prefix_caching = 0;
    c->block_size = 4;
    c->total_blocks = blocks;
    c->watermark = 0.0;
    c->max_seqs = max_seqs;
    c->max_batched_tokens = budget;
    c->max_model_len = 1000;
    g->cfg.record_steps = 1;
    kvs_err err;
    ck_assert_int_eq(cost_model_create("affine:1,0,0,0", NULL, NULL, 1, &g->cost, &err), 0);
    golden_run(g);
}

static void expect_limits(const golden *g, const int *want, int n)
{
    ck_assert_int_eq(g->res.n_steps, n);
    int64_t count[SCHED_LIMIT_COUNT] = {0};
    for (int i = 0; i < n; i++) {
        ck_assert_msg(g->res.steps[i].step.limit == want[i], "step %d: limit %d, want %d", i,
                      g->res.steps[i].step.limit, want[i]);
        count[want[i]]++;
    }
    const run_summary *s = &g->res.sum;
    ck_assert_double_eq(s->limit_kv_share, (double)count[SCHED_LIMIT_KV] / n);
    ck_assert_double_eq(s->limit_max_seqs_share, (double)count[SCHED_LIMIT_MAX_SEQS] / n);
    ck_assert_double_eq(s->limit_token_budget_share, (double)count[SCHED_LIMIT_TOKEN_BUDGET] / n);
    ck_assert_double_eq(s->limit_none_share, (double)count[SCHED_LIMIT_NONE_WAITING] / n);
    ck_assert_double_eq(s->limit_other_share, (double)count[SCHED_LIMIT_OTHER] / n);
}

enum { LN = SCHED_LIMIT_NONE_WAITING, LK = SCHED_LIMIT_KV, LS = SCHED_LIMIT_MAX_SEQS,
       LB = SCHED_LIMIT_TOKEN_BUDGET };

/* V0, max_seqs 2 (test_sched.c's scenario A):
 *   r0 (0, P8, O3)  r1 (0, P8, O2)  r2 (0, P4, O1)  r3 (10, P4, O2)
 * step 0 prefill [r0 r1]: r2 waits, 2 running       -> max-seqs
 * step 1 decode [r0 r1]: admission of r2 failed the same way -> max-seqs
 * step 2 prefill [r2] (r1 done): nothing waits (r3 comes at 10) -> none
 * steps 3 (decode r0), 4 (prefill r3), 5 (decode r3): none.
 * Shares: max-seqs 2/6, nothing waiting 4/6. */
START_TEST(test_limit_max_seqs_v0)
{
    const double rows[][3] = {{0, 8, 3}, {0, 8, 2}, {0, 4, 1}, {10, 4, 2}};
    golden g;
    run_limits(&g, SCHED_ENGINE_VLLM_V0, rows, 4, 10, 2, 1000);
    const int want[] = {LS, LS, LN, LN, LN, LN};
    expect_limits(&g, want, 6);
    golden_free(&g);
}
END_TEST

/* V0, 3 blocks: r0 (0, P8, O2), r1 (0, P8, O2).
 * step 0 prefill [r0] (2 blocks): r1 needs 2, 1 free        -> KV
 * step 1 decode [r0]: r1 still does not fit (r0 takes the last block for
 *        its 9th token)                                     -> KV
 * step 2 prefill [r1] after r0 left: nothing waits; step 3 decode: none.
 * Shares: KV 2/4, nothing waiting 2/4. */
START_TEST(test_limit_kv_v0)
{
    const double rows[][3] = {{0, 8, 2}, {0, 8, 2}};
    golden g;
    run_limits(&g, SCHED_ENGINE_VLLM_V0, rows, 2, 3, 256, 1000);
    const int want[] = {LK, LK, LN, LN};
    expect_limits(&g, want, 4);
    golden_free(&g);
}
END_TEST

/* V0, budget 16 (scenario B): r0 (0, P10, O2) r1 (0, P10, O2) r2 (0, P2, O2).
 * step 0 prefill [r0]: r1 would make 20 > 16                -> token budget
 * step 1 prefill [r1 r2], step 2 decode: nothing waits.     -> none, none */
START_TEST(test_limit_budget_v0)
{
    const double rows[][3] = {{0, 10, 2}, {0, 10, 2}, {0, 2, 2}};
    golden g;
    run_limits(&g, SCHED_ENGINE_VLLM_V0, rows, 3, 100, 256, 16);
    const int want[] = {LB, LN, LN};
    expect_limits(&g, want, 3);
    golden_free(&g);
}
END_TEST

/* V1 (docs/semantics-v1.md), chunked prefill off.
 * max_seqs 1: r0, r1 (0, P4, O3): r0's three steps run with r1 waiting
 * (max-seqs), then r1's three with nothing waiting.
 * Budget 6: r0, r1 (0, P4, O2): step 0 schedules r0's 4 tokens; r1's 4 do
 * not fit the 2 left and it keeps its place (token budget); step 1 runs
 * r0's decode (1) and r1's prompt (4 <= 5): none; step 2 r1's decode: none. */
START_TEST(test_limit_v1)
{
    const double rows[][3] = {{0, 4, 3}, {0, 4, 3}};
    golden g;
    run_limits(&g, SCHED_ENGINE_VLLM_V1, rows, 2, 100, 1, 1000);
    const int want[] = {LS, LS, LS, LN, LN, LN};
    expect_limits(&g, want, 6);
    golden_free(&g);
    const double rows2[][3] = {{0, 4, 2}, {0, 4, 2}};
    run_limits(&g, SCHED_ENGINE_VLLM_V1, rows2, 2, 100, 256, 6);
    const int want2[] = {LB, LN, LN};
    expect_limits(&g, want2, 3);
    golden_free(&g);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("diagnosis");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_reject_reasons);
    tcase_add_test(tc, test_limit_max_seqs_v0);
    tcase_add_test(tc, test_limit_kv_v0);
    tcase_add_test(tc, test_limit_budget_v0);
    tcase_add_test(tc, test_limit_v1);
    suite_add_tcase(s, tc);
    return tu_run_suites(&s, 1);
}
