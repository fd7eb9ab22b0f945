/* test_sglang.c — the SGLang engine (docs/semantics-sglang.md): the five
 * golden scenarios of its section 15 worked out by hand (every token time,
 * retraction and cached token), the configuration rules, and properties on
 * random traces (token slots conserved and audited after every step, every
 * request resolved, the chunk budget and request limit kept, determinism)
 * with the radix cache on and off, chunks on and off, overlap on and off,
 * with and without shared prefixes.
 *
 * The scenarios use d = 1 + 0.5 * (tokens computed in the step): one per
 * decode member plus every prompt token of a piece (affine 1, 0.5, 0, 0);
 * the pool N, chunk budget C = 8, request limit M = 8, B = 16384, s = 1,
 * context 4096.  Each scenario's table is in the doc; the comments below
 * give the decisions that make each time. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "scheduler/sched.h"
#include "sim/engine.h"
#include "sim/run.h"
#include "testutil.h"

#define COST "affine:1,0.5,0,0"
#define EPS 1e-9
#define MAXO 32

/* rows: {arrival, P, O} */
static void sgl_setup(golden *g, const double (*rows)[3], int n, int64_t N, int radix,
                      int overlap)
{
    tu_golden_init(g, &rows[0][0], 3, n, COST);
    sched_config *s = &g->cfg.sched;
    s->engine = SCHED_ENGINE_SGLANG;
    s->block_size = 1;
    s->total_blocks = N;
    s->max_seqs = 8;
    s->max_batched_tokens = 8;
    s->chunked_prefill = 1;
    s->prefix_caching = radix;
    s->max_model_len = 4096;
    s->watermark = 0.0;
    s->max_prefill_tokens = 16384;
    s->overlap = overlap;
}

static void expect_tokens(const golden *g, int id, const double *times, int n, int retractions)
{
    double tt[8][MAXO];
    int64_t ntok[8];
    tu_token_times(g, &tt[0][0], MAXO, ntok);
    ck_assert_msg(ntok[id] == n, "r%d: %lld tokens, want %d", id, (long long)ntok[id], n);
    for (int k = 0; k < n; k++)
        ck_assert_msg(fabs(tt[id][k] - times[k]) < EPS, "r%d token %d at %.9f, want %.9f", id,
                      k + 1, tt[id][k], times[k]);
    const sched_req_result *r = &g->res.reqs[id];
    ck_assert_int_eq(r->status, SCHED_REQ_FINISHED);
    ck_assert(fabs(r->first_token_s - times[0]) < EPS);
    ck_assert(fabs(r->finish_s - times[n - 1]) < EPS);
    ck_assert_int_eq(r->preemptions, retractions);
}

static void expect_step(const golden *g, int64_t i, int kind, double start, double dur,
                        int64_t members)
{
    ck_assert_int_lt(i, g->res.n_steps);
    const run_step_rec *r = &g->res.steps[i];
    int64_t nm = (i + 1 < g->res.n_steps ? g->res.steps[i + 1].member_off : g->res.n_members) -
                 r->member_off;
    ck_assert_msg(r->step.kind == kind && fabs(r->step.start_s - start) < EPS &&
                      fabs(r->step.dur_s - dur) < EPS && nm == members,
                  "step %lld: kind %d start %.6f dur %.6f members %lld", (long long)i,
                  r->step.kind, r->step.start_s, r->step.dur_s, (long long)nm);
}

/* Scenario A (15.1): N 64, radix off (the ignore-EOS test), overlap off.
 *   r0 (0, P3, O3), r1 (0, P4, O2), r2 (2.0, P6, O1)
 * t=0    r0 then r1 pass the completion check; extend 3 + 4: d = 4.5.
 * t=4.5  r2 (arrived at 2) is admitted before R decodes (prefill first):
 *        extend 6: d = 4, r2's only token at 8.5 (it finishes, frees 6).
 * t=8.5  decode r0, r1: d = 2 -> 10.5 (r1 done); t=10.5 decode r0: 1.5 -> 12. */
START_TEST(test_scenario_a_prefill_first)
{
    static const double rows[][3] = {{0, 3, 3}, {0, 4, 2}, {2.0, 6, 1}};
    golden g;
    sgl_setup(&g, rows, 3, 64, 0, 0);
    golden_run(&g);
    static const double t0[] = {4.5, 10.5, 12.0}, t1[] = {4.5, 10.5}, t2[] = {8.5};
    expect_tokens(&g, 0, t0, 3, 0);
    expect_tokens(&g, 1, t1, 2, 0);
    expect_tokens(&g, 2, t2, 1, 0);
    ck_assert_int_eq(g.res.n_steps, 4);
    expect_step(&g, 0, SCHED_STEP_PREFILL, 0, 4.5, 2);
    expect_step(&g, 1, SCHED_STEP_PREFILL, 4.5, 4.0, 1);
    expect_step(&g, 2, SCHED_STEP_DECODE, 8.5, 2.0, 2);
    expect_step(&g, 3, SCHED_STEP_DECODE, 10.5, 1.5, 1);
    golden_free(&g);
}
END_TEST

/* Scenario B (15.2): a 20-token prompt in pieces of 8 (C 8), radix off.
 *   r0 (0, P20, O2), r1 (0, P3, O2)
 * t=0   r0's first piece [0,8) uses the whole chunk budget: r1 not looked at.
 * t=5   K's piece [8,16); r1 passes the check but rem_chunk is 0: OTHER.
 * t=10  K's last piece [16,20) (reserves 2), r1 whole (3 <= 4): d = 4.5.
 * t=14.5 both decode: d = 2 -> 16.5, both finish. */
START_TEST(test_scenario_b_chunks)
{
    static const double rows[][3] = {{0, 20, 2}, {0, 3, 2}};
    golden g;
    sgl_setup(&g, rows, 2, 64, 0, 0);
    golden_run(&g);
    static const double t0[] = {14.5, 16.5}, t1[] = {14.5, 16.5};
    expect_tokens(&g, 0, t0, 2, 0);
    expect_tokens(&g, 1, t1, 2, 0);
    ck_assert_int_eq(g.res.n_steps, 4);
    expect_step(&g, 0, SCHED_STEP_PREFILL, 0, 5, 1);
    expect_step(&g, 1, SCHED_STEP_PREFILL, 5, 5, 1);
    expect_step(&g, 2, SCHED_STEP_PREFILL, 10, 4.5, 2);
    expect_step(&g, 3, SCHED_STEP_DECODE, 14.5, 2, 2);
    ck_assert_int_eq(g.res.sum.prefill_chunks, 4);
    golden_free(&g);
}
END_TEST

/* Scenario C (15.3): retraction, N 40, radix on (the general test).
 *   r0, r1 (0, P4, O18), prompts sharing nothing
 * t=0   r0: tot 4 + 18 + 1 = 23 < 40, admitted; r1: 23 >= 17: NO_TOKEN, flag set.
 * t=3   R = [r0] (flag clear); reserve 17 * 0.7 = 11.9, rem_total 24.1 > 23: r1.
 * t=6 .. 38  16 joint decodes, free 32 -> 0.
 * t=38  the check fails: r1 (same rank, later in R) is retracted, its 16
 *       decode slots freed and its prompt node evicted (20 - 16 = 4 short),
 *       rho -> min(1, (17 + 20) / 19) = 1; r0 decodes alone: 39.5, done.
 * t=39.5 r1 (T 21) needs 21 > 8: pieces [0,8) -> 44.5, [8,16) -> 49.5,
 *       [16,21) -> 53.0 (allocating 5 with 3 free evicts r0's leaf of 17). */
START_TEST(test_scenario_c_retraction)
{
    static const double rows[][3] = {{0, 4, 18}, {0, 4, 18}};
    golden g;
    sgl_setup(&g, rows, 2, 40, 1, 0);
    golden_run(&g);
    double t0[18], t1[18];
    t0[0] = 3;
    t1[0] = 6;
    for (int j = 1; j <= 16; j++)
        t0[j] = t1[j] = 6 + 2 * j;
    t0[17] = 39.5;
    t1[17] = 53.0;
    expect_tokens(&g, 0, t0, 18, 0);
    /* r1's recompute re-emits its 17 stored tokens as prompt pieces: the
     * replay sees its 18th token at 53.0 */
    ck_assert(fabs(g.res.reqs[1].first_token_s - 6) < EPS);
    ck_assert(fabs(g.res.reqs[1].finish_s - 53.0) < EPS);
    ck_assert_int_eq(g.res.reqs[1].preemptions, 1);
    ck_assert_int_eq(g.res.sum.preempt_recompute, 1);
    expect_step(&g, 18, SCHED_STEP_DECODE, 38, 1.5, 1);
    expect_step(&g, 19, SCHED_STEP_PREFILL, 39.5, 5, 1);
    expect_step(&g, 20, SCHED_STEP_PREFILL, 44.5, 5, 1);
    expect_step(&g, 21, SCHED_STEP_PREFILL, 49.5, 3.5, 1);
    ck_assert_int_eq(g.res.n_steps, 22);
    golden_free(&g);
}
END_TEST

/* Give golden trace g prefix segments: request i's ids[off[i] .. off[i+1])
 * with tok[] tokens each (segments of their own lengths). */
static void set_segments(golden *g, const int64_t *off, const uint64_t *ids, const int32_t *tok)
{
    trace *t = &g->tr;
    int64_t k = off[t->n];
    t->hash_off = malloc((size_t)(t->n + 1) * sizeof *t->hash_off);
    t->hash_ids = malloc((size_t)(k + 1) * sizeof *t->hash_ids);
    t->hash_tokens = malloc((size_t)(k + 1) * sizeof *t->hash_tokens);
    ck_assert(t->hash_off && t->hash_ids && t->hash_tokens);
    memcpy(t->hash_off, off, (size_t)(t->n + 1) * sizeof *off);
    memcpy(t->hash_ids, ids, (size_t)k * sizeof *ids);
    memcpy(t->hash_tokens, tok, (size_t)k * sizeof *tok);
    t->hash_block = 0;
}

/* Scenario D (15.4): a radix prefix hit, N 40.  r0 (0, P8, O2) with
 * segments [a(4), b(4)], r1 (1, P10, O2) with [a, b, c(2)].
 * t=0  r0 extend 8: d = 5 -> its prompt becomes a locked node.
 * t=5  r1 matches all 8 tokens of r0's prompt (its lookup covers T - 1 = 9):
 *      extend 2 over 8: d = 2 -> 7 (TTFT 6).
 * t=7  decode both: d = 2 -> 9, both finish.  Cached: 12 tokens, free 28. */
START_TEST(test_scenario_d_prefix_hit)
{
    static const double rows[][3] = {{0, 8, 2}, {1, 10, 2}};
    golden g;
    sgl_setup(&g, rows, 2, 40, 1, 0);
    const int64_t off[] = {0, 2, 5};
    const uint64_t ids[] = {11, 22, 11, 22, 33};
    const int32_t tok[] = {4, 4, 4, 4, 2};
    set_segments(&g, off, ids, tok);
    golden_run(&g);
    static const double t0[] = {5, 9}, t1[] = {7, 9};
    expect_tokens(&g, 0, t0, 2, 0);
    expect_tokens(&g, 1, t1, 2, 0);
    expect_step(&g, 1, SCHED_STEP_PREFILL, 5, 2, 1);
    ck_assert_int_eq(g.res.sum.prefix_hit_tokens, 8);
    golden_free(&g);
}
END_TEST

/* Scenario E (15.5): scenario A with the overlap scheduler.  Each step is
 * decided when the one before it starts:
 *   S1 extend r0, r1 [0, 4.5]; S2 decode r0, r1 [4.5, 6.5] (decided at 0,
 *   before r2 arrived); S3 extend r2 [6.5, 10.5] (decided at 4.5);
 *   S4 decode r0, r2 [10.5, 12.5] (decided at 6.5: r2 not yet done);
 *   S5 decode r0 [12.5, 14.0] (decided at 10.5: r0's last token unknown).
 * Results: r1 finishes at 6.5, r2 at 10.5 (TTFT 8.5), r0 at 12.5; S4's r2
 * and S5's r0 tokens are discarded. */
START_TEST(test_scenario_e_overlap)
{
    static const double rows[][3] = {{0, 3, 3}, {0, 4, 2}, {2.0, 6, 1}};
    golden g;
    sgl_setup(&g, rows, 3, 64, 0, 1);
    golden_run(&g);
    ck_assert_int_eq(g.res.n_steps, 5);
    expect_step(&g, 0, SCHED_STEP_PREFILL, 0, 4.5, 2);
    expect_step(&g, 1, SCHED_STEP_DECODE, 4.5, 2, 2);
    expect_step(&g, 2, SCHED_STEP_PREFILL, 6.5, 4, 1);
    expect_step(&g, 3, SCHED_STEP_DECODE, 10.5, 2, 2);
    expect_step(&g, 4, SCHED_STEP_DECODE, 12.5, 1.5, 1);
    const double first[] = {4.5, 4.5, 10.5}, fin[] = {12.5, 6.5, 10.5};
    for (int i = 0; i < 3; i++) {
        const sched_req_result *r = &g.res.reqs[i];
        ck_assert_int_eq(r->status, SCHED_REQ_FINISHED);
        ck_assert_msg(fabs(r->first_token_s - first[i]) < EPS && fabs(r->finish_s - fin[i]) < EPS,
                      "r%d: first %.6f finish %.6f", i, r->first_token_s, r->finish_s);
    }
    golden_free(&g);
}
END_TEST

/* Scenario F: lpm against fcfs (5.8), N 64, radix on, overlap off.
 *   r0 (0, P8, O2) segments [a(4), b(4)]; r1 (1, P8, O2) its own tokens;
 *   r2 (2, P10, O2) segments [a, b, c(2)].
 * t=0  r0 alone: extend 8, d = 5 -> token 1 at 5; its prompt is node X (8).
 * t=5  W = [r1, r2].  lpm looks both up: r1 matches 0, r2 all 8 of X; W
 *      becomes [r2, r1].  r2 needs 2 tokens over 8 cached (rem_chunk 6
 *      left), r1's 8 > 6: its first piece of 6, r1 becomes K.  Extend 2 + 6:
 *      d = 5 -> r2's token 1 at 10.
 * t=10 K's last piece (2 over 6): d = 2 -> r1's token 1 at 12.
 * t=12 decode r0, r2, r1: d = 2.5 -> 14.5, all done.
 * Under fcfs r1 (8) fills the chunk budget at t=5 (token 1 at 10), r2
 * follows alone at t=10 (2 over 8, d = 2, token 1 at 12); the decode is
 * the same. */
static void scenario_f(golden *g, sched_policy pol)
{
    static const double rows[][3] = {{0, 8, 2}, {1, 8, 2}, {2, 10, 2}};
    sgl_setup(g, rows, 3, 64, 1, 0);
    g->cfg.sched.policy = pol;
    const int64_t off[] = {0, 2, 2, 5};
    const uint64_t ids[] = {11, 22, 11, 22, 33};
    const int32_t tok[] = {4, 4, 4, 4, 2};
    set_segments(g, off, ids, tok);
    golden_run(g);
}

START_TEST(test_scenario_f_lpm_order)
{
    golden g;
    scenario_f(&g, SCHED_POLICY_LPM);
    static const double t0[] = {5, 14.5}, t1[] = {12, 14.5}, t2[] = {10, 14.5};
    expect_tokens(&g, 0, t0, 2, 0);
    expect_tokens(&g, 1, t1, 2, 0);
    expect_tokens(&g, 2, t2, 2, 0);
    ck_assert_int_eq(g.res.n_steps, 4);
    expect_step(&g, 1, SCHED_STEP_PREFILL, 5, 5, 2);
    ck_assert_int_eq(g.res.members[g.res.steps[1].member_off].req_id, 2); /* r2 first */
    expect_step(&g, 2, SCHED_STEP_PREFILL, 10, 2, 1);
    expect_step(&g, 3, SCHED_STEP_DECODE, 12, 2.5, 3);
    golden_free(&g);
    scenario_f(&g, SCHED_POLICY_FCFS);
    static const double f1[] = {10, 14.5}, f2[] = {12, 14.5};
    expect_tokens(&g, 0, t0, 2, 0);
    expect_tokens(&g, 1, f1, 2, 0);
    expect_tokens(&g, 2, f2, 2, 0);
    expect_step(&g, 1, SCHED_STEP_PREFILL, 5, 5, 1);
    expect_step(&g, 2, SCHED_STEP_PREFILL, 10, 2, 1);
    golden_free(&g);
}
END_TEST

/* Scenario G: lpm's in-batch prefix caching (5.8), N 400, C 50, radix on.
 * rA and rB (0, P44, O2) both begin with segment s (40 tokens) and add 4 of
 * their own; rC (0, P10, O2) shares nothing.  The tree is empty, so every
 * match is 0 (<= 32): rA enters the scratch tree, rB matches 40 tokens of
 * it (>= 32) and is deprioritized, rC enters it.  W = [rA, rC, rB]: rA
 * whole (44, rem_chunk 6), then rC's first piece of 6.  Under fcfs the
 * piece of 6 is rB's. */
static void scenario_g(golden *g, sched_policy pol)
{
    static const double rows[][3] = {{0, 44, 2}, {0, 44, 2}, {0, 10, 2}};
    sgl_setup(g, rows, 3, 400, 1, 0);
    g->cfg.sched.policy = pol;
    g->cfg.sched.max_batched_tokens = 50;
    const int64_t off[] = {0, 1, 2, 2};
    const uint64_t ids[] = {77, 77};
    const int32_t tok[] = {40, 40};
    set_segments(g, off, ids, tok);
    golden_run(g);
}

START_TEST(test_scenario_g_lpm_in_batch)
{
    for (int lpm = 0; lpm <= 1; lpm++) {
        golden g;
        scenario_g(&g, lpm ? SCHED_POLICY_LPM : SCHED_POLICY_FCFS);
        const sched_member *m = &g.res.members[g.res.steps[0].member_off];
        ck_assert_int_eq(m[0].req_id, 0);
        ck_assert_int_eq(m[0].tokens, 44);
        ck_assert_int_eq(m[1].req_id, lpm ? 2 : 1);
        ck_assert_int_eq(m[1].tokens, 6);
        expect_step(&g, 0, SCHED_STEP_PREFILL, 0, 1 + 0.5 * 50, 2);
        golden_free(&g);
    }
}
END_TEST

/* ------------------------------------------------------- configuration */
static void expect_config_error(const sched_config *c, const char *needle)
{
    kvs_err err;
    ck_assert_int_eq(sched_config_check(c, 1, &err), KVS_EINVAL);
    ck_assert_msg(strstr(err.msg, needle), "'%s' lacks '%s'", err.msg, needle);
}

START_TEST(test_config_rules)
{
    sched_config base;
    memset(&base, 0, sizeof base);
    base.engine = SCHED_ENGINE_SGLANG;
    base.block_size = 1;
    base.total_blocks = 1000;
    base.max_seqs = 8;
    base.max_batched_tokens = 64;
    base.max_model_len = 500;
    base.chunked_prefill = 1;
    kvs_err err;
    ck_assert_int_eq(sched_config_check(&base, 1, &err), 0);
    sched_config c = base;
    c.block_size = 16;
    expect_config_error(&c, "--block-size 16");
    c = base;
    c.policy = SCHED_POLICY_PRIORITY;
    expect_config_error(&c, "--policy priority");
    c = base;
    c.policy = SCHED_POLICY_LPM;
    expect_config_error(&c, "needs the radix cache");
    c.prefix_caching = 1;
    ck_assert_int_eq(sched_config_check(&c, 1, &err), 0);
    c = base;
    c.preemption = SCHED_PREEMPT_SWAP;
    expect_config_error(&c, "--preemption");
    c = base;
    c.batching = SCHED_BATCHING_STATIC;
    expect_config_error(&c, "--batching static");
    c = base;
    c.alloc = SCHED_ALLOC_RESERVED;
    expect_config_error(&c, "--alloc reserved");
    c = base;
    c.long_prefill_threshold = 10;
    expect_config_error(&c, "--long-prefill-threshold");
    /* SGLang's own settings belong to it alone */
    c = base;
    c.engine = SCHED_ENGINE_VLLM_V1;
    c.block_size = 16;
    c.max_prefill_tokens = 100;
    expect_config_error(&c, "need --engine sglang");
}
END_TEST

/* ------------------------------------------------------- properties */
typedef struct prop_ctx {
    sched *s;
    int64_t C, N, M, bad, extend_steps, decode_steps;
    char first[300];
} prop_ctx;

static void prop_step(void *ctx, const sched_step *st, const sched_member *m, int64_t nm)
{
    prop_ctx *a = ctx;
    char why[256] = "";
    int64_t tok = 0;
    for (int64_t i = 0; i < nm; i++)
        tok += m[i].tokens;
    int decode = st->kind == SCHED_STEP_DECODE;
    a->extend_steps += !decode;
    a->decode_steps += decode;
    if (tok != st->batch.tokens || tok < 1 || st->kind == SCHED_STEP_MIXED)
        snprintf(why, sizeof why, "%lld tokens (record %lld), kind %d", (long long)tok,
                 (long long)st->batch.tokens, st->kind);
    else if (!decode && a->C > 0 && tok > a->C)
        snprintf(why, sizeof why, "an extend of %lld tokens over the chunk budget %lld",
                 (long long)tok, (long long)a->C);
    else if (st->kv_blocks_used > a->N || nm > a->M)
        snprintf(why, sizeof why, "slots %lld members %lld", (long long)st->kv_blocks_used,
                 (long long)nm);
    else
        sched_audit(a->s, why, sizeof why);
    if (why[0] && a->bad++ == 0)
        snprintf(a->first, sizeof a->first, "step %lld: %s", (long long)st->index, why);
}

/* Give a trace prefix segments: every request's prompt begins with 0-3
 * segments of 4-13 tokens drawn from a small tree of ids, so prompts share. */
static void add_prefixes(trace *t, uint64_t seed)
{
    rng g;
    rng_init(&g, seed * 31 + 7);
    t->hash_off = malloc((size_t)(t->n + 1) * sizeof *t->hash_off);
    t->hash_ids = malloc((size_t)(3 * t->n + 1) * sizeof *t->hash_ids);
    t->hash_tokens = malloc((size_t)(3 * t->n + 1) * sizeof *t->hash_tokens);
    ck_assert(t->hash_off && t->hash_ids && t->hash_tokens);
    int64_t k = 0;
    for (int64_t i = 0; i < t->n; i++) {
        t->hash_off[i] = k;
        int nseg = (int)rng_below(&g, 4);
        uint64_t path = 1;
        for (int j = 0; j < nseg; j++) {
            path = path * 3 + rng_below(&g, 2);
            t->hash_ids[k] = path;
            t->hash_tokens[k] = (int32_t)(4 + path % 10); /* a function of the id */
            k++;
        }
    }
    t->hash_off[t->n] = k;
    t->hash_block = 0;
}

static double run_prop(uint64_t seed, int radix, int overlap, int chunked, int prefixes,
                       int64_t *retracted, int64_t *hits)
{
    trace t;
    tu_random_trace(&t, 150, seed, 60, 40, 0);
    if (prefixes)
        add_prefixes(&t, seed);
    sched_config c;
    memset(&c, 0, sizeof c);
    c.engine = SCHED_ENGINE_SGLANG;
    c.block_size = 1;
    c.max_model_len = 110;
    c.total_blocks = 70 + (int64_t)(seed % 90); /* small pools: retractions, rejections */
    c.max_seqs = 2 + (int64_t)(seed % 14);
    c.max_batched_tokens = 8 + (int64_t)(seed % 50);
    c.max_prefill_tokens = 30 + (int64_t)(seed % 80);
    c.chunked_prefill = chunked;
    c.prefix_caching = radix;
    c.overlap = overlap;
    c.conservativeness = seed % 3 == 0 ? 0.3 : 0.0;
    if (radix && seed % 3 == 1)
        c.policy = SCHED_POLICY_LPM;
    cost_model cost;
    kvs_err err;
    ck_assert_int_eq(cost_model_create("affine:0.01,0.001,0.0001,0.00001", NULL, NULL, 1,
                                       &cost, &err), 0);
    sched *s;
    ck_assert_msg(sched_init(&s, &c, t.reqs, t.n, &cost, &err) == 0, "%s", err.msg);
    req_prefixes px = trace_prefixes(&t);
    ck_assert_int_eq(sched_attach_prefixes(s, &px, &err), 0);
    prop_ctx a = {s, chunked ? c.max_batched_tokens : 0, c.total_blocks, c.max_seqs, 0, 0, 0, ""};
    sched_set_step_sink(s, prop_step, &a, 1);
    double end;
    ck_assert_msg(engine_run(s, &t, &end, &err) == 0, "seed %llu radix %d overlap %d: %s",
                  (unsigned long long)seed, radix, overlap, err.msg);
    ck_assert_msg(a.bad == 0, "seed %llu radix %d overlap %d chunked %d: %lld bad steps, "
                  "first: %s", (unsigned long long)seed, radix, overlap, chunked,
                  (long long)a.bad, a.first);
    sched_counters k;
    sched_get_counters(s, &k);
    ck_assert_int_eq(k.used_blocks, 0);
    ck_assert_int_eq(k.free_blocks, c.total_blocks);
    ck_assert_int_eq(k.n_finished + k.n_rejected, t.n);
    *retracted += k.preempt_recompute;
    *hits += k.prefix_hit_tokens;
    const sched_req_result *r = sched_results(s);
    double digest = 0;
    for (int64_t i = 0; i < t.n; i++) {
        const trace_req *q = &t.reqs[i];
        const int64_t P = q->prompt_tokens, O = q->output_tokens, N = c.total_blocks;
        int rej = P >= c.max_model_len - 6 || P + O > c.max_model_len - 2 || P >= N - 6 ||
                  O > N - P - 2;
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
    int64_t retracted[2] = {0, 0}, hits = 0; /* by radix off / on */
    for (uint64_t seed = 1; seed <= 12; seed++)
        for (int mode = 0; mode < 8; mode++) {
            int radix = mode & 1, overlap = (mode >> 1) & 1, chunked = (mode >> 2) & 1;
            int prefixes = radix && seed % 2;
            double a = run_prop(seed, radix, overlap, chunked, prefixes, &retracted[radix], &hits);
            ck_assert(a == run_prop(seed, radix, overlap, chunked, prefixes, &retracted[radix],
                                    &hits));
        }
    printf("random properties: %lld retractions with the radix cache, %lld without\n",
           (long long)retracted[1], (long long)retracted[0]);
    /* Without the radix cache every request is admitted by the completion
     * check of 5.6, which admits only what can run to its end (a chunked
     * request shares a pass with a new one only on its last piece), so
     * these random runs do not retract there; the radix cache's general
     * test admits against the decaying ratio and does. */
    ck_assert_msg(retracted[1] > 0, "no run with the radix cache retracted anyone: too easy");
    ck_assert_msg(hits > 0, "no run hit a cached prefix: the test is too easy");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sglang");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_scenario_a_prefill_first);
    tcase_add_test(tc, test_scenario_b_chunks);
    tcase_add_test(tc, test_scenario_c_retraction);
    tcase_add_test(tc, test_scenario_d_prefix_hit);
    tcase_add_test(tc, test_scenario_e_overlap);
    tcase_add_test(tc, test_scenario_f_lpm_order);
    tcase_add_test(tc, test_scenario_g_lpm_in_batch);
    tcase_add_test(tc, test_config_rules);
    tcase_add_test(tc, test_random_properties);
    suite_add_tcase(s, tc);
    return tu_run_suites(&s, 1);
}
