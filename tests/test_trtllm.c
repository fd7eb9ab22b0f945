/* test_trtllm.c — the TensorRT-LLM engine (docs/engine-trtllm.md): two
 * golden scenarios worked out by hand (every token time and preemption
 * count), the configuration rules, and properties on random traces (blocks
 * conserved, every request resolved, the token budget and batch size kept,
 * determinism) under both capacity policies, with and without chunking.
 *
 * The golden scenarios use the affine cost
 *   d = 1 + 0.5*tokens + 0.25*kv_read + 0.125*(prefill_sq + 2*prefill_ctx)
 * whose coefficients are binary fractions, so every time below is exact. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scheduler/sched.h"
#include "sim/engine.h"
#include "sim/run.h"
#include "testutil.h"

#define COST "affine:1,0.5,0.25,0.125"
#define EPS 1e-9
#define MAXO 16

/* rows: {arrival, P, O} */
static void trt_setup(golden *g, const double (*rows)[3], int n, sched_alloc alloc,
                      int64_t bs, int64_t N, int64_t B)
{
    tu_golden_init(g, &rows[0][0], 3, n, COST);
    sched_config *s = &g->cfg.sched;
    s->engine = SCHED_ENGINE_TRTLLM;
    s->alloc = alloc;
    s->block_size = bs;
    s->total_blocks = N;
    s->max_seqs = 8;
    s->max_batched_tokens = B;
    s->max_model_len = 1000;
    s->chunked_prefill = 1;
    s->watermark = 0.0;
}

/* Token times from the step records: a member yields a token when its
 * context after the step reaches P + (tokens so far). */
static void token_times(const golden *g, double tt[][MAXO], int64_t *ntok)
{
    tu_token_times(g, &tt[0][0], MAXO, ntok);
}

static void expect_req(const golden *g, double tt[][MAXO], const int64_t *ntok, int id,
                       const double *times, int n, int preemptions)
{
    ck_assert_msg(ntok[id] == n, "r%d: %lld tokens, want %d", id, (long long)ntok[id], n);
    for (int k = 0; k < n; k++)
        ck_assert_msg(fabs(tt[id][k] - times[k]) < EPS, "r%d token %d at %.9f, want %.9f", id,
                      k + 1, tt[id][k], times[k]);
    const sched_req_result *r = &g->res.reqs[id];
    ck_assert_int_eq(r->status, SCHED_REQ_FINISHED);
    ck_assert(fabs(r->first_token_s - times[0]) < EPS);
    ck_assert(fabs(r->finish_s - times[n - 1]) < EPS);
    ck_assert_int_eq(r->preemptions, preemptions);
}

/* Guaranteed no evict (--alloc reserved-oracle), bs 4, N 6, B 7, chunked.
 *   r0 (t0, P4, O2) reserves ceil(6/4) = 2 blocks
 *   r1 (t0, P9, O3) reserves ceil(12/4) = 3
 *   r2 (t0, P4, O5) reserves ceil(9/4) = 3
 * t=0      capacity: r0 (2 <= 6, 4 left), r1 (3 <= 4, 1 left), r2 3 > 1: the
 *          pass ends.  Micro batch: contexts 4 + 9 = 13 > 7, so FCFS chunks:
 *          r0 its whole 4 (cap 3 left), r1 min(9, 3) = 3, not its last
 *          chunk, cut to whole blocks: 0 -> r1 does not run (nor start).
 *          PREFILL r0 4: d = 1 + 2 + 0.125*16 = 5 -> token 1 of r0 at 5.
 * t=5      r0 generates; r1 (3 <= F 4, 1 left), r2 3 > 1 ends the pass.
 *          r0 1 token, cap 6 for r1: min(9, 6) = 6, cut to 4.  r1 takes its
 *          3 blocks.  MIXED tokens 5, kv_read 5, prefill_sq 16:
 *          d = 1 + 2.5 + 1.25 + 2 = 6.75 -> 11.75: r0's token 2 (done,
 *          its 2 blocks return: F 3).
 * t=11.75  r1 (started, needs nothing more), r2 (3 <= 3).  Contexts
 *          5 + 4 = 9 > 7: r1 its last 5 (cap 2), r2 min(4, 2) = 2 cut to
 *          0: only r1.  PREFILL q 5 over 4: d = 1 + 2.5 + 0.125*(25 + 40)
 *          = 11.625 -> 23.375: r1's token 1.
 * t=23.375 r1 generates first, then r2 (3 <= 3) gets its whole 4 beside
 *          it: tokens 5, kv_read 10, prefill_sq 16: d = 8 -> 31.375:
 *          r1 token 2, r2 token 1.
 * t=31.375 DECODE r1 (kv 11) and r2 (kv 5): d = 1 + 1 + 4 = 6 -> 37.375:
 *          r1 token 3 (done), r2 token 2.
 * then r2 alone: kv 6, 7, 8: d = 3, 3.25, 3.5 -> 40.375, 43.625, 47.125. */
START_TEST(test_no_evict_reserves_and_cuts_chunks)
{
    static const double rows[][3] = {{0, 4, 2}, {0, 9, 3}, {0, 4, 5}};
    golden g;
    trt_setup(&g, rows, 3, SCHED_ALLOC_RESERVED_ORACLE, 4, 6, 7);
    golden_run(&g);
    double tt[3][MAXO];
    int64_t ntok[3];
    token_times(&g, tt, ntok);
    static const double t0[] = {5, 11.75}, t1[] = {23.375, 31.375, 37.375},
                        t2[] = {31.375, 37.375, 40.375, 43.625, 47.125};
    expect_req(&g, tt, ntok, 0, t0, 2, 0);
    expect_req(&g, tt, ntok, 1, t1, 3, 0);
    expect_req(&g, tt, ntok, 2, t2, 5, 0);
    ck_assert_int_eq(g.res.n_steps, 8);
    /* the first step ran r0 alone; r1 held its 3 reserved blocks from t=5 */
    ck_assert_int_eq(g.res.steps[0].step.kv_blocks_used, 2);
    ck_assert_int_eq(g.res.steps[1].step.kv_blocks_used, 5);
    ck_assert_int_eq(g.res.steps[1].step.kind, SCHED_STEP_MIXED);
    golden_free(&g);
}
END_TEST

/* Max utilization (--alloc paged), bs 2, N 4, B 16, chunked.
 *   r0 (t0, P3, O4)   r1 (t0, P3, O4)
 * t=0      each context needs ceil(3/2) = 2 blocks: both fit (4 of 4).
 *          PREFILL 3 + 3: d = 1 + 3 + 0.125*18 = 6.25 -> token 1 of both.
 * t=6.25   both decode with stored 3 -> 4, within their 2 blocks:
 *          kv_read 8: d = 1 + 1 + 2 = 4 -> 10.25, token 2 of both.
 * t=10.25  r0's next token needs a third block, F = 0: pause the last
 *          started request, r1 (its 2 blocks free, C 0); r0 fits.
 *          DECODE r0 kv 5: d = 1 + 0.5 + 1.25 = 2.75 -> 13, r0 token 3.
 * t=13     r0 needs nothing (6 tokens in 3 blocks); r1 must recompute
 *          P + g = 5 tokens, ceil(5/2) = 3 blocks > F 1, and no started
 *          request after it to pause: the pass ends.  DECODE r0 kv 6:
 *          d = 3 -> 16, r0 token 4 (done; F 4).
 * t=16     r1 recomputes 5 tokens: d = 1 + 2.5 + 0.125*25 = 6.625 ->
 *          22.625, its token 3; then DECODE kv 6: d = 3 -> 25.625. */
START_TEST(test_max_utilization_pauses_last_started)
{
    static const double rows[][3] = {{0, 3, 4}, {0, 3, 4}};
    golden g;
    trt_setup(&g, rows, 2, SCHED_ALLOC_PAGED, 2, 4, 16);
    golden_run(&g);
    double tt[2][MAXO];
    int64_t ntok[2];
    token_times(&g, tt, ntok);
    static const double t0[] = {6.25, 10.25, 13, 16}, t1[] = {6.25, 10.25, 22.625, 25.625};
    expect_req(&g, tt, ntok, 0, t0, 4, 0);
    expect_req(&g, tt, ntok, 1, t1, 4, 1);
    ck_assert_int_eq(g.res.steps[2].step.n_preempted, 1);
    ck_assert_int_eq(g.res.sum.preempt_recompute, 1);
    golden_free(&g);
}
END_TEST

static void expect_config_error(const sched_config *c, const char *want)
{
    kvs_err err;
    ck_assert_int_eq(sched_config_check(c, 1, &err), KVS_EINVAL);
    ck_assert_msg(strstr(err.msg, want) != NULL, "'%s' lacks '%s'", err.msg, want);
}

START_TEST(test_config_rules)
{
    sched_config base;
    memset(&base, 0, sizeof base);
    base.engine = SCHED_ENGINE_TRTLLM;
    base.alloc = SCHED_ALLOC_RESERVED_ORACLE;
    base.block_size = 64;
    base.total_blocks = 100;
    base.max_seqs = 16;
    base.max_batched_tokens = 8192;
    base.max_model_len = 4096;
    base.chunked_prefill = 1;
    kvs_err err;
    ck_assert_int_eq(sched_config_check(&base, 1, &err), 0);
    sched_config c = base;
    c.policy = SCHED_POLICY_PRIORITY;
    expect_config_error(&c, "--policy priority");
    c = base;
    c.prefix_caching = 1;
    expect_config_error(&c, "--prefix-caching");
    c = base;
    c.preemption = SCHED_PREEMPT_SWAP;
    expect_config_error(&c, "--preemption swap");
    c = base;
    c.batching = SCHED_BATCHING_STATIC;
    expect_config_error(&c, "--batching static");
    c = base;
    c.max_batched_tokens = 32;
    expect_config_error(&c, "whole blocks");
    c.chunked_prefill = 0; /* without chunks a small budget only rejects long prompts */
    ck_assert_int_eq(sched_config_check(&c, 1, &err), 0);
}
END_TEST

/* ------------------------------------------------------- properties */
typedef struct prop_ctx {
    sched *s;
    int64_t B, N, max_seqs, bad;
    char first[300];
} prop_ctx;

static void prop_step(void *ctx, const sched_step *st, const sched_member *m, int64_t nm)
{
    prop_ctx *a = ctx;
    char why[256] = "";
    int64_t tok = 0;
    for (int64_t i = 0; i < nm; i++)
        tok += m[i].tokens;
    if (tok != st->batch.tokens || tok > a->B || tok < 1)
        snprintf(why, sizeof why, "%lld tokens for budget %lld", (long long)tok,
                 (long long)a->B);
    else if (st->kv_blocks_used > a->N || nm > a->max_seqs || nm > st->n_running)
        snprintf(why, sizeof why, "blocks %lld members %lld", (long long)st->kv_blocks_used,
                 (long long)nm);
    else
        sched_audit(a->s, why, sizeof why);
    if (why[0] && a->bad++ == 0)
        snprintf(a->first, sizeof a->first, "step %lld: %s", (long long)st->index, why);
}

/* One random run; returns a digest of the results (for determinism). */
static double run_prop(uint64_t seed, sched_alloc alloc, int chunked, int64_t *preempted)
{
    trace t;
    tu_random_trace(&t, 200, seed, 60, 40, 0);
    sched_config c;
    memset(&c, 0, sizeof c);
    c.engine = SCHED_ENGINE_TRTLLM;
    c.alloc = alloc;
    c.block_size = 1 + (int64_t)(seed % 8);
    c.max_model_len = 90;
    c.total_blocks = 60 / c.block_size + (int64_t)(seed % 20); /* some too small: rejects */
    c.max_seqs = 2 + (int64_t)(seed % 12);
    c.max_batched_tokens = 16 + (int64_t)(seed % 70);
    c.chunked_prefill = chunked;
    cost_model cost;
    kvs_err err;
    ck_assert_int_eq(cost_model_create("affine:0.01,0.001,0.0001,0.00001", NULL, NULL, 1,
                                       &cost, &err), 0);
    sched *s;
    ck_assert_msg(sched_init(&s, &c, t.reqs, t.n, &cost, &err) == 0, "%s", err.msg);
    prop_ctx a = {s, c.max_batched_tokens, c.total_blocks, c.max_seqs, 0, ""};
    sched_set_step_sink(s, prop_step, &a, 1);
    double end;
    ck_assert_msg(engine_run(s, &t, &end, &err) == 0, "seed %llu: %s",
                  (unsigned long long)seed, err.msg);
    ck_assert_msg(a.bad == 0, "seed %llu alloc %d chunked %d: %lld bad steps, first: %s",
                  (unsigned long long)seed, alloc, chunked, (long long)a.bad, a.first);
    sched_counters k;
    sched_get_counters(s, &k);
    ck_assert_int_eq(k.used_blocks, 0);
    ck_assert_int_eq(k.free_blocks, c.total_blocks);
    ck_assert_int_eq(k.n_finished + k.n_rejected, t.n);
    if (alloc != SCHED_ALLOC_PAGED)
        ck_assert_int_eq(k.preempt_recompute, 0); /* guaranteed: nobody is evicted */
    *preempted += k.preempt_recompute;
    const sched_req_result *r = sched_results(s);
    double digest = 0;
    for (int64_t i = 0; i < t.n; i++) {
        const trace_req *q = &t.reqs[i];
        int64_t po = q->prompt_tokens + q->output_tokens;
        int64_t most = alloc == SCHED_ALLOC_PAGED ? (po - 1 + c.block_size - 1) / c.block_size
                                                  : (po + c.block_size - 1) / c.block_size;
        int rej = po > c.max_model_len || most > c.total_blocks ||
                  (!chunked && po - 1 > c.max_batched_tokens);
        ck_assert_int_eq(r[i].status, rej ? SCHED_REQ_REJECTED : SCHED_REQ_FINISHED);
        if (!rej) {
            ck_assert(r[i].first_token_s > q->arrival_s && r[i].finish_s >= r[i].first_token_s);
            digest += r[i].finish_s * (double)(i + 1) + r[i].first_token_s;
        }
    }
    sched_free(s);
    cost_model_free(&cost);
    trace_free(&t);
    return digest;
}

START_TEST(test_random_properties)
{
    int64_t preempted = 0;
    for (uint64_t seed = 1; seed <= 8; seed++)
        for (int chunked = 0; chunked <= 1; chunked++) {
            double a = run_prop(seed, SCHED_ALLOC_RESERVED_ORACLE, chunked, &preempted);
            double b = run_prop(seed, SCHED_ALLOC_PAGED, chunked, &preempted);
            ck_assert(a == run_prop(seed, SCHED_ALLOC_RESERVED_ORACLE, chunked, &preempted));
            ck_assert(b == run_prop(seed, SCHED_ALLOC_PAGED, chunked, &preempted));
        }
    ck_assert_msg(preempted > 0, "no max-utilization run paused anyone: the test is too easy");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("trtllm");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_no_evict_reserves_and_cuts_chunks);
    tcase_add_test(tc, test_max_utilization_pauses_last_started);
    tcase_add_test(tc, test_config_rules);
    tcase_add_test(tc, test_random_properties);
    suite_add_tcase(s, tc);
    return tu_run_suites(&s, 1);
}
