/* test_chunked.c — chunked prefill (docs/semantics-extensions.md, C and K):
 * golden scenarios worked out by hand (a prompt spanning three steps beside
 * a decode; a partly prefilled request preempted and recomputed), the cost
 * features of chunks, invariants on random traces, chunked prefill with an
 * unbounded budget against the unchunked schedule's token accounting, and
 * bad configurations through the CLI. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scheduler/sched.h"
#include "sim/engine.h"
#include "base/rng.h"
#include "sim/run.h"
#include "testutil.h"


/* rows: {arrival, P, O} */
static void golden_setup(golden *g, const double (*rows)[3], int n, const char *cost)
{
    tu_golden_init(g, &rows[0][0], 3, n, cost);
    sched_config *s = &g->cfg.sched;
    s->block_size = 4;
    s->total_blocks = 20;
    s->watermark = 0.0;
    s->max_seqs = 8;
    s->max_batched_tokens = 6;
    s->max_model_len = 1000;
    s->chunked_prefill = 1;
}

static const sched_step *step_at(const golden *g, int64_t i)
{
    ck_assert_int_lt(i, g->res.n_steps);
    return &g->res.steps[i].step;
}

#define EPS 1e-9

/* Scenario A: a prompt spanning three steps while another request decodes.
 * block 4, 20 blocks, budget B = 6, watermark 0;
 * affine 1 + 0.01*tokens + 0.001*kv_read + 0.0001*(prefill_sq + 2*prefill_ctx).
 *   r0 (t0, P2, O4)   r1 (t0, P11, O2)  — r1's prompt is longer than B.
 * t=0       no decode, b = 6.  r0: chunk q = 2 (its whole prompt), 1 block;
 *           b = 4.  r1: first chunk q = 4 (c = 0), 1 block; b = 0.
 *           PREFILL step: tokens 6, prefill_sq 4 + 16 = 20:
 *           d = 1 + 0.06 + 0.002 = 1.062.  r0's first token at 1.062; r1's
 *           chunk generates nothing.
 * t=1.062   decode r0 (context 3, kv_read 3), b = 5.  r1: q = min(7, 5) = 5
 *           over c = 4: 3 blocks in all.  MIXED: tokens 6, prefill_sq 25,
 *           prefill_ctx 20: d = 1 + 0.06 + 0.003 + 0.0001*(25 + 40) = 1.0695
 *           -> t = 2.1315.
 * t=2.1315  decode r0 (context 4), b = 5.  r1: q = 2 over c = 9: its prompt is
 *           complete.  MIXED: tokens 3, kv_read 4, prefill_sq 4, prefill_ctx
 *           18: d = 1 + 0.03 + 0.004 + 0.004 = 1.038 -> t = 3.1695, r1's
 *           first token (TTFT counts from the last chunk).
 * t=3.1695  DECODE [r0 r1]: r0 (stored 4) takes a block; contexts 5 and 12,
 *           kv_read 17: d = 1 + 0.02 + 0.017 = 1.037 -> 4.2065; both finish.
 * r1's chunks charge 16 + 65 + 40 = 121 = 11^2 to c3, as one prefill would. */
START_TEST(test_three_chunks_beside_decode)
{
    const double rows[][3] = {{0, 2, 4}, {0, 11, 2}};
    golden g;
    golden_setup(&g, rows, 2, "affine:1,0.01,0.001,0.0001");
    golden_run(&g);
    ck_assert_int_eq(g.res.n_steps, 4);
    const int kind[4] = {SCHED_STEP_PREFILL, SCHED_STEP_MIXED, SCHED_STEP_MIXED,
                         SCHED_STEP_DECODE};
    const int64_t tokens[4] = {6, 6, 3, 2}, kv[4] = {0, 3, 4, 17};
    const int64_t sq[4] = {20, 25, 4, 0}, ctx[4] = {0, 20, 18, 0}, cached[4] = {0, 4, 9, 0};
    const double dur[4] = {1.062, 1.0695, 1.038, 1.037};
    for (int i = 0; i < 4; i++) {
        const sched_step *s = step_at(&g, i);
        ck_assert_msg(s->kind == kind[i], "step %d: kind %d", i, s->kind);
        ck_assert_int_eq(s->batch.tokens, tokens[i]);
        ck_assert_int_eq(s->batch.kv_read, kv[i]);
        ck_assert_int_eq(s->batch.prefill_sq, sq[i]);
        ck_assert_int_eq(s->batch.prefill_ctx, ctx[i]);
        ck_assert_int_eq(s->batch.prefill_cached, cached[i]);
        ck_assert_msg(fabs(s->dur_s - dur[i]) < EPS, "step %d: %.9f", i, s->dur_s);
    }
    /* step 1's members: r0's decode first, then r1's chunk (5 tokens, context 9) */
    const sched_member *m = &g.res.members[g.res.steps[1].member_off];
    ck_assert_int_eq(m[0].req_id, 0);
    ck_assert_int_eq(m[0].kind, SCHED_MEMBER_DECODE);
    ck_assert_int_eq(m[1].req_id, 1);
    ck_assert_int_eq(m[1].kind, SCHED_MEMBER_PREFILL);
    ck_assert_int_eq(m[1].tokens, 5);
    ck_assert_int_eq(m[1].context, 9);
    ck_assert(fabs(g.res.reqs[0].first_token_s - 1.062) < EPS);
    ck_assert(fabs(g.res.reqs[1].first_token_s - 3.1695) < EPS);
    ck_assert(fabs(g.res.reqs[0].finish_s - 4.2065) < EPS);
    ck_assert(fabs(g.res.reqs[1].finish_s - 4.2065) < EPS);
    ck_assert_int_eq(g.res.sum.prefill_chunks, 4);
    ck_assert_int_eq(g.res.sum.n_rejected, 0);
    /* r1's c3 charges sum to one whole prefill's */
    ck_assert_int_eq((16 + 0) + (25 + 2 * 20) + (4 + 2 * 18), 11 * 11);
    golden_free(&g);
}
END_TEST

/* Scenario B: preempting a partly prefilled request loses its progress.
 * block 4, 4 blocks, B = 4, watermark 0, every step 1 s.
 *   r0 (t0, P4, O6)   r1 (t0, P12, O1)
 * t0 r0's whole prompt (q 4, 1 block, F 3); b = 0, r1 waits.
 * t1 r0 (stored 4) takes a block (F 2); b = 3: r1's first chunk q 3 (F 1).
 * t2 r0 fits; r1 q 3 -> stored 6, 2 blocks (F 0).
 * t3 r0 fits; r1 would need a third block, F = 0: no chunk (DECODE step).
 * t4 the same (r0 stored 8 after it).
 * t5 r0 (stored 8) needs a block, F = 0: the victim is r1 (last in FCFS
 *    order); it frees 2 blocks and returns to W with g = 0, its 6 prefilled
 *    tokens lost.  r0 takes a block (F 1).  b = 3: r1 is admitted again
 *    with a first chunk q 3 (F 0).  MIXED, one preemption.
 * t6 r0 reached O = 6 at t6 and leaves (3 blocks back, F 3).
 *    b = 4: r1 q 4 -> stored 7 (F 2).
 * t7 r1 q 4 -> stored 11 (F 1).   t8 r1 q 1: prompt complete.
 * t9 r1's first (and only) token: TTFT 9.  Prefill tokens of r1: 3 + 3 lost,
 *    then 3 + 4 + 4 + 1 = 12. */
START_TEST(test_partial_prefill_preempted)
{
    const double rows[][3] = {{0, 4, 6}, {0, 12, 1}};
    golden g;
    golden_setup(&g, rows, 2, "affine:1,0,0,0");
    g.cfg.sched.total_blocks = 4;
    g.cfg.sched.max_batched_tokens = 4;
    golden_run(&g);
    ck_assert_int_eq(g.res.n_steps, 9);
    const int kind[9] = {SCHED_STEP_PREFILL, SCHED_STEP_MIXED,   SCHED_STEP_MIXED,
                         SCHED_STEP_DECODE,  SCHED_STEP_DECODE,  SCHED_STEP_MIXED,
                         SCHED_STEP_PREFILL, SCHED_STEP_PREFILL, SCHED_STEP_PREFILL};
    const int64_t r1_q[9] = {0, 3, 3, 0, 0, 3, 4, 4, 1};
    int64_t r1_tokens = 0;
    for (int i = 0; i < 9; i++) {
        const sched_step *s = step_at(&g, i);
        ck_assert_msg(s->kind == kind[i], "step %d: kind %d, want %d", i, s->kind, kind[i]);
        ck_assert_int_eq(s->n_preempted, i == 5);
        int64_t q = 0;
        int64_t end = i + 1 < g.res.n_steps ? g.res.steps[i + 1].member_off : g.res.n_members;
        for (int64_t k = g.res.steps[i].member_off; k < end; k++)
            if (g.res.members[k].req_id == 1)
                q += g.res.members[k].tokens;
        ck_assert_msg(q == r1_q[i], "step %d: r1 computes %lld, want %lld", i, (long long)q,
                      (long long)r1_q[i]);
        r1_tokens += q;
    }
    ck_assert_int_eq(r1_tokens, 18);
    ck_assert_int_eq(g.res.reqs[1].preemptions, 1);
    ck_assert_int_eq(g.res.reqs[0].preemptions, 0);
    ck_assert(fabs(g.res.reqs[0].finish_s - 6) < EPS);
    ck_assert(fabs(g.res.reqs[1].first_token_s - 9) < EPS);
    ck_assert(fabs(g.res.reqs[1].finish_s - 9) < EPS);
    ck_assert_int_eq(g.res.sum.preempt_recompute, 1);
    golden_free(&g);
}
END_TEST

/* Scenario C: the first chunk obeys max_seqs and the watermark; a prompt
 * longer than B is not rejected, one longer than the cache is.
 * block 4, 10 blocks, watermark 0.2 (2 blocks), B 8, max_seqs 1.
 *   r0 (t0, P40, O1): 10 blocks > 10 - 2: rejected.
 *   r1 (t0, P20, O1): 5 blocks; chunks of 8, 8, 4 (first chunk: F 10 - 2
 *       >= 2); r2 waits on max_seqs until r1 leaves.
 *   r2 (t0, P4, O1). */
START_TEST(test_first_chunk_limits)
{
    const double rows[][3] = {{0, 40, 1}, {0, 20, 1}, {0, 4, 1}};
    golden g;
    golden_setup(&g, rows, 3, "affine:1,0,0,0");
    g.cfg.sched.total_blocks = 10;
    g.cfg.sched.watermark = 0.2;
    g.cfg.sched.max_batched_tokens = 8;
    g.cfg.sched.max_seqs = 1;
    golden_run(&g);
    ck_assert_int_eq(g.res.reqs[0].status, SCHED_REQ_REJECTED);
    ck_assert_int_eq(g.res.reqs[1].status, SCHED_REQ_FINISHED);
    ck_assert(fabs(g.res.reqs[1].first_token_s - 3) < EPS);
    ck_assert(fabs(g.res.reqs[2].first_token_s - 4) < EPS);
    ck_assert_int_eq(g.res.n_steps, 4);
    ck_assert_int_eq(g.res.sum.prefill_chunks, 4);
    golden_free(&g);
}
END_TEST

/* Scenario D: a running prompt whose chunk does not fit blocks everything
 * behind it (strict order, C2.4), even a waiting request that would fit.
 * block 4, 6 blocks, B 8, watermark 0, every step 1 s.
 *   r0 (t0, P8, O6)   r1 (t0, P24, O1)   r2 (t0.5, P2, O1)
 * t0 r0's prompt: 2 blocks (F 4).
 * t1 r0 takes a block (F 3); b = 7: r1's first chunk q 7, 2 blocks (F 1).
 * t2 r0 fits; r1's chunk q 7 (stored 14) needs 2 more blocks > F = 1: no
 *    chunk, and r2, which needs 1 block, is not admitted behind it.
 * t3, t4 the same; t5 r0 takes the last block (F 0).
 * t6 r0 finished at 6 (4 blocks back, F 4): r1 q 8 (stored 15, F 2);
 * t7 r1 q 8 (stored 23, F 0); t8 r1 q 1, complete; r2 needs a block, F 0.
 * t9 r1 finished (F 6): r2 runs; its first token at 10. */
START_TEST(test_blocked_chunk_is_strict)
{
    const double rows[][3] = {{0, 8, 6}, {0, 24, 1}, {0.5, 2, 1}};
    golden g;
    golden_setup(&g, rows, 3, "affine:1,0,0,0");
    g.cfg.sched.total_blocks = 6;
    g.cfg.sched.max_batched_tokens = 8;
    golden_run(&g);
    ck_assert_int_eq(g.res.n_steps, 10);
    for (int i = 2; i <= 5; i++) { /* r0's decode alone */
        ck_assert_int_eq(step_at(&g, i)->kind, SCHED_STEP_DECODE);
        ck_assert_int_eq(g.res.steps[i + 1].member_off - g.res.steps[i].member_off, 1);
    }
    ck_assert(fabs(g.res.reqs[0].finish_s - 6) < EPS);
    ck_assert(fabs(g.res.reqs[1].first_token_s - 9) < EPS);
    ck_assert(fabs(g.res.reqs[2].first_token_s - 10) < EPS);
    ck_assert_int_eq(g.res.sum.preemptions, 0);
    golden_free(&g);
}
END_TEST

/* K: the cost features of a chunk.  affine charges c3*(q^2 + 2qc); the
 * roofline's fast path agrees with its per-op breakdown on chunks, whose
 * attention FLOPs are those of prefill_sq + 2*prefill_ctx and whose memory
 * adds the stored KV read. */
START_TEST(test_chunk_costs)
{
    cost_model a;
    kvs_err err;
    ck_assert_int_eq(cost_model_create("affine:0,0,0,1", NULL, NULL, 1, &a, &err), 0);
    cost_batch ch = {.tokens = 5, .prefill_sq = 25, .n_prefill = 1, .prefill_ctx = 20,
                     .prefill_cached = 4};
    ck_assert(cost_step_s(&a, &ch) == 25 + 40);
    cost_model_free(&a);

    model_spec m;
    gpu_spec gp;
    ck_assert_int_eq(model_lookup("llama-3-8b", &m, &err), 0);
    ck_assert_int_eq(gpu_lookup("a100-80g", &gp, &err), 0);
    cost_model r;
    ck_assert_int_eq(cost_roofline_create(&m, &gp, 1, &r, &err), 0);
    cost_roofline_consts k;
    cost_roofline_consts_default(&k);
    uint64_t x = 7;
    for (int it = 0; it < 300; it++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        int64_t q = 1 + (int64_t)(x >> 40) % 4000, c = (int64_t)(x >> 20) % 20000;
        int64_t nd = (int64_t)(x >> 10) % 100;
        cost_batch b = {.tokens = q + nd, .kv_read = nd * 500, .prefill_sq = q * q,
                        .n_prefill = 1, .n_decode = nd, .prefill_ctx = q * c,
                        .prefill_cached = c};
        double cs[MODEL_OP_COUNT], ms[MODEL_OP_COUNT], want = k.step_overhead_s;
        ck_assert_int_eq(cost_roofline_breakdown(&r, &b, cs, ms), KVS_OK);
        for (int i = 0; i < MODEL_OP_COUNT; i++)
            want += fmax(cs[i], ms[i]);
        double got = cost_step_s(&r, &b);
        ck_assert_msg(fabs(got - want) <= 1e-9 * want, "q %lld c %lld: %.12g vs %.12g",
                      (long long)q, (long long)c, got, want);
        /* the chunk's attention compute = a prefill with prefill_sq q^2 + 2qc */
        cost_batch flat = b;
        flat.prefill_sq = q * q + 2 * q * c;
        flat.prefill_ctx = 0;
        flat.prefill_cached = 0;
        double cs2[MODEL_OP_COUNT], ms2[MODEL_OP_COUNT];
        cost_roofline_breakdown(&r, &flat, cs2, ms2);
        ck_assert(fabs(cs[MODEL_OP_ATTN_PREFILL] - cs2[MODEL_OP_ATTN_PREFILL]) <=
                  1e-12 * cs2[MODEL_OP_ATTN_PREFILL]);
        /* and its memory reads the c stored tokens' K and V on top */
        double kv_layer = 2.0 * 8 * 128 * 2; /* llama-3-8b: 8 KV heads, D 128, fp16 */
        double extra = 32 * kv_layer * (double)c / (gp.hbm_Bps * k.eff_hbm);
        ck_assert(fabs(ms[MODEL_OP_ATTN_PREFILL] - ms2[MODEL_OP_ATTN_PREFILL] - extra) <=
                  1e-9 * ms[MODEL_OP_ATTN_PREFILL] + 1e-15);
    }
    cost_model_free(&r);
}
END_TEST

/* ------------------------------------------------------ random traces */

static void random_trace(trace *t, int n, uint64_t seed)
{
    memset(t, 0, sizeof *t);
    t->n = n;
    t->reqs = calloc((size_t)n, sizeof *t->reqs);
    rng r;
    rng_init(&r, seed);
    double at = 0;
    for (int i = 0; i < n; i++) {
        at += rng_exponential(&r, 0.05);
        if (rng_uniform(&r) < 0.2 && i > 0)
            at = t->reqs[i - 1].arrival_s;
        t->reqs[i].arrival_s = at;
        t->reqs[i].prompt_tokens = 1 + (int64_t)rng_below(&r, 150);
        t->reqs[i].output_tokens = 1 + (int64_t)rng_below(&r, 60);
    }
}

typedef struct inv_ctx {
    sched *s;
    const trace *tr;
    int64_t budget, bad;
    char first[300];
    int64_t *tokens; /* [n] tokens processed per request */
} inv_ctx;

static void inv_step(void *ctx, const sched_step *st, const sched_member *m, int64_t nm)
{
    inv_ctx *c = ctx;
    char why[256] = "";
    int64_t partial = 0, q = 0;
    for (int64_t i = 0; i < nm; i++) {
        c->tokens[m[i].req_id] += m[i].tokens;
        if (m[i].kind == SCHED_MEMBER_PREFILL) {
            q += m[i].tokens;
            partial += m[i].context < c->tr->reqs[m[i].req_id].prompt_tokens;
        }
    }
    if (sched_audit(c->s, why, sizeof why) == 0) {
        if (partial > 1)
            snprintf(why, sizeof why, "%lld partial prompts in one step", (long long)partial);
        else if (q > 0 && st->batch.n_decode + q > c->budget)
            snprintf(why, sizeof why, "%lld decodes + %lld chunk tokens > budget %lld",
                     (long long)st->batch.n_decode, (long long)q, (long long)c->budget);
        else if (st->batch.tokens != st->batch.n_decode + q)
            snprintf(why, sizeof why, "tokens %lld != decodes + chunks", (long long)st->batch.tokens);
        else if ((st->kind == SCHED_STEP_MIXED) != (st->batch.n_decode > 0 && q > 0))
            snprintf(why, sizeof why, "kind %d with %lld decodes and %lld chunk tokens", st->kind,
                     (long long)st->batch.n_decode, (long long)q);
    }
    if (why[0] && c->bad++ == 0)
        snprintf(c->first, sizeof c->first, "step %lld: %s", (long long)st->index, why);
}

/* Run tr with the scheduler directly, checking every step; fills tokens[]. */
static void run_checked(const trace *tr, const sched_config *cfg, int64_t *tokens,
                        sched_counters *out)
{
    cost_model cost;
    kvs_err err;
    ck_assert_int_eq(cost_model_create("affine:0.01,0.001,0.0001,0.00001", NULL, NULL, 1, &cost,
                                       &err), 0);
    sched *s;
    ck_assert_msg(sched_init(&s, cfg, tr->reqs, tr->n, &cost, &err) == 0, "%s", err.msg);
    req_prefixes px = trace_prefixes(tr);
    ck_assert_int_eq(sched_attach_prefixes(s, &px, &err), 0);
    inv_ctx c = {s, tr, cfg->chunked_prefill ? cfg->max_batched_tokens : INT64_MAX, 0, "",
                 tokens};
    sched_set_step_sink(s, inv_step, &c, 1);
    double end;
    ck_assert_msg(engine_run(s, tr, &end, &err) == 0, "%s", err.msg);
    ck_assert_msg(c.bad == 0, "%lld bad steps, first: %s", (long long)c.bad, c.first);
    sched_get_counters(s, out);
    ck_assert_int_eq(out->n_finished + out->n_rejected, tr->n);
    ck_assert_int_eq(out->used_blocks, 0);
    const sched_req_result *res = sched_results(s);
    for (int64_t i = 0; i < tr->n; i++)
        if (res[i].status == SCHED_REQ_FINISHED)
            ck_assert(res[i].first_token_s >= tr->reqs[i].arrival_s &&
                      res[i].finish_s >= res[i].first_token_s);
    sched_free(s);
    cost_model_free(&cost);
}

/* Invariants on random traces and configurations: blocks conserved
 * (sched_audit), at most one partial prompt, the budget respected, kinds
 * consistent, every request finished or rejected. */
START_TEST(test_random_invariants)
{
    int64_t preempted = 0, mixed_runs = 0;
    for (uint64_t seed = 1; seed <= 40; seed++) {
        trace t;
        random_trace(&t, 300, seed);
        sched_config c;
        memset(&c, 0, sizeof c);
        c.policy = seed % 2 ? SCHED_POLICY_FCFS : SCHED_POLICY_PRIORITY;
        c.alloc = seed % 5 == 0 ? SCHED_ALLOC_RESERVED_ORACLE : SCHED_ALLOC_PAGED;
        c.preemption = SCHED_PREEMPT_RECOMPUTE;
        c.block_size = 1 + (int64_t)(seed % 8);
        c.max_model_len = 220;
        c.total_blocks = (c.max_model_len + c.block_size - 1) / c.block_size + (int64_t)(seed % 40);
        c.max_seqs = 2 + (int64_t)(seed % 25);
        c.max_batched_tokens = c.block_size + (int64_t)(seed * 7 % 100);
        c.watermark = (seed % 3) * 0.02;
        c.chunked_prefill = 1;
        c.prefix_caching = 0;
        int64_t *tok = calloc((size_t)t.n, sizeof *tok);
        sched_counters k;
        run_checked(&t, &c, tok, &k);
        preempted += k.preempt_recompute > 0;
        mixed_runs += k.prefill_chunks > t.n;
        free(tok);
        trace_free(&t);
    }
    ck_assert_int_gt(preempted, 5);
    ck_assert_int_gt(mixed_runs, 20);
}
END_TEST

/* With an unbounded budget (and memory, so that nothing is preempted), every
 * prompt is one chunk and each request processes exactly the tokens of the
 * unchunked schedule: P (its prefill) + O - 1 (its decodes); with prefix
 * caching too, where both schedules cache the same blocks before each
 * admission. */
START_TEST(test_unbounded_budget_accounting)
{
    for (uint64_t seed = 1; seed <= 10; seed++) {
        trace t;
        random_trace(&t, 400, seed);
        sched_config c;
        memset(&c, 0, sizeof c);
        c.block_size = 1 + (int64_t)(seed % 16);
        c.max_model_len = 1000;
        c.total_blocks = 100000;
        c.max_seqs = 1000;
        c.max_batched_tokens = 1000000;
        int64_t *a = calloc((size_t)t.n, sizeof *a), *b = calloc((size_t)t.n, sizeof *b);
        sched_counters ka, kb;
        run_checked(&t, &c, a, &ka);
        c.chunked_prefill = 1;
        run_checked(&t, &c, b, &kb);
        ck_assert_int_eq(ka.preempt_recompute + kb.preempt_recompute, 0);
        ck_assert_int_eq(kb.prefill_chunks, t.n);
        for (int64_t i = 0; i < t.n; i++) {
            int64_t want = t.reqs[i].prompt_tokens + t.reqs[i].output_tokens - 1;
            ck_assert_msg(a[i] == want && b[i] == want, "req %lld: %lld / %lld tokens, want %lld",
                          (long long)i, (long long)a[i], (long long)b[i], (long long)want);
        }
        free(a);
        free(b);
        trace_free(&t);
    }
}
END_TEST

/* ----------------------------------------------------- bad configurations */

static void expect_cli_error(const char *flags, const char *needle)
{
    char cmd[2048], *out = NULL;
    const char *dir = tu_tmpdir();
    /* the V0 engine's rules for chunked prefill and prefix caching */
    snprintf(cmd, sizeof cmd,
             "%s run --engine vllm-v0 --synthetic 'n=10,rate=1,prompt=10,output=5' --db %s/x.db %s",
             tu_kvsim(), dir, flags);
    int rc = tu_run(cmd, &out);
    ck_assert_msg(rc == 2, "%s: exit %d\n%s", flags, rc, out);
    ck_assert_msg(strstr(out, needle) != NULL, "%s: no '%s' in\n%s", flags, needle, out);
    ck_assert_msg(strchr(out, '\n') == strrchr(out, '\n'), "%s: more than one line\n%s", flags,
                  out);
    free(out);
}

START_TEST(test_cli_errors)
{
    expect_cli_error("--chunked-prefill --block-size 16 --max-batched-tokens 8",
                     "--max-batched-tokens: 8 is smaller than one block (--block-size 16)");
    expect_cli_error("--chunked-prefill --batching static", "--chunked-prefill");
    expect_cli_error("--chunked-prefill --preemption swap", "--preemption swap");
    expect_cli_error("--chunked-prefill --policy priority --priority-preemption",
                     "--priority-preemption");
}
END_TEST

/* kvsim run --chunked-prefill: a 9000-token prompt beyond the 2048-token
 * default budget runs in 5 chunks. */
START_TEST(test_cli_run)
{
    char cmd[2048], *out = NULL;
    const char *dir = tu_tmpdir();
    snprintf(cmd, sizeof cmd,
             "%s run --synthetic 'arrival=burst,n=1,prompt=9000,output=3' --db %s/r.db "
             "--max-model-len 16384 --chunked-prefill --json",
             tu_kvsim(), dir);
    ck_assert_int_eq(tu_run(cmd, &out), 0);
    ck_assert_msg(strstr(out, "\"prefill_chunks\": 5,") && strstr(out, "\"n_rejected\": 0"),
                  "%s", out);
    free(out);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("chunked");
    TCase *g = tcase_create("golden");
    tcase_add_test(g, test_three_chunks_beside_decode);
    tcase_add_test(g, test_partial_prefill_preempted);
    tcase_add_test(g, test_first_chunk_limits);
    tcase_add_test(g, test_blocked_chunk_is_strict);
    tcase_add_test(g, test_chunk_costs);
    suite_add_tcase(s, g);
    TCase *p = tcase_create("properties");
    tcase_set_timeout(p, 120);
    tcase_add_test(p, test_random_invariants);
    tcase_add_test(p, test_unbounded_budget_accounting);
    suite_add_tcase(s, p);
    TCase *c = tcase_create("cli");
    tcase_add_test(c, test_cli_errors);
    tcase_add_test(c, test_cli_run);
    suite_add_tcase(s, c);
    return tu_run_suites(&s, 1);
}
