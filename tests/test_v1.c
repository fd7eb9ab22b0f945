/* test_v1.c — the vLLM V1 engine (docs/semantics-v1.md): golden scenarios
 * worked out by hand (every token time, first_token_s, finish_s and
 * preemption count), the V1 configuration rules, and properties on random
 * traces (blocks conserved, every request resolved, the token budget kept,
 * determinism) over fcfs/priority, prefix caching, chunked prefill and the
 * long-prefill threshold.
 *
 * Every golden scenario uses the affine cost
 *   d = 1 + 0.5*tokens + 0.25*kv_read + 0.125*(prefill_sq + 2*prefill_ctx)
 * whose coefficients are binary fractions, so every time below is exact. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scheduler/sched.h"
#include "sim/engine.h"
#include "base/rng.h"
#include "sim/run.h"
#include "testutil.h"

#define COST "affine:1,0.5,0.25,0.125"
#define EPS 1e-9
#define MAXO 16

/* rows: {arrival, P, O, priority} */
static void v1_setup(golden *g, const double (*rows)[4], int n)
{
    tu_golden_init(g, &rows[0][0], 4, n, COST);
    for (int i = 0; i < n; i++)
        ck_assert_int_le(g->tr.reqs[i].output_tokens, MAXO);
    sched_config *s = &g->cfg.sched;
    s->engine = SCHED_ENGINE_VLLM_V1;
    s->block_size = 4;
    s->total_blocks = 20;
    s->max_seqs = 8;
    s->max_batched_tokens = 8;
    s->max_model_len = 1000;
    s->chunked_prefill = 1;
    s->prefix_caching = 0;
    /* s->watermark keeps its default 0.01: V1 ignores it */
}

/* Token times replayed from the step records: a member generates a token
 * when its context after the step reaches P + g (rule 1.4); tt[id][k-1] is
 * token k's time. */
static void token_times(const golden *g, double tt[][MAXO], int64_t *ntok)
{
    tu_token_times(g, &tt[0][0], MAXO, ntok);
}

/* Check request id's token times, first/finish and preemptions. */
static void expect_req(const golden *g, double tt[][MAXO], const int64_t *ntok, int id,
                       const double *times, int n, int preemptions)
{
    ck_assert_msg(ntok[id] == n, "r%d: %lld tokens, want %d", id, (long long)ntok[id], n);
    for (int k = 0; k < n; k++)
        ck_assert_msg(fabs(tt[id][k] - times[k]) < EPS, "r%d token %d at %.9f, want %.9f", id,
                      k + 1, tt[id][k], times[k]);
    const sched_req_result *r = &g->res.reqs[id];
    ck_assert_int_eq(r->status, SCHED_REQ_FINISHED);
    ck_assert_msg(fabs(r->first_token_s - times[0]) < EPS, "r%d first %.9f", id,
                  r->first_token_s);
    ck_assert_msg(fabs(r->finish_s - times[n - 1]) < EPS, "r%d finish %.9f", id, r->finish_s);
    ck_assert_int_eq(r->preemptions, preemptions);
}

static const sched_member *members_of(const golden *g, int64_t i, int64_t *nm)
{
    ck_assert_int_lt(i, g->res.n_steps);
    *nm = (i + 1 < g->res.n_steps ? g->res.steps[i + 1].member_off : g->res.n_members) -
          g->res.steps[i].member_off;
    return &g->res.members[g->res.steps[i].member_off];
}

/* (a) a mixed step and (b) a chunk cut by the budget that continues.
 * bs 4, N 20, B 6, chunked on, prefix caching off.
 *   r0 (t0, P2, O3)   r1 (t0, P9, O2)
 * t=0      R empty; W = [r0 r1], b = 6.  r0: q = 2 (1 block), b = 4.
 *          r1: q = min(9, 4) = 4 (1 block), b = 0.  Both prefills (g = 0):
 *          tokens 6, prefill_sq 4 + 16 = 20: d = 1 + 3 + 2.5 = 6.5.
 *          r0: C = 2 = T -> token 1 at 6.5.  r1: C = 4 < 9, no token.
 * t=6.5    running walk: r0 q = 1 (C 2, T 3; still 1 block), b = 5;
 *          r1 q = min(9 - 4, 5) = 5 (3 blocks).  r0 is a decode (kv_read 3),
 *          r1 a chunk of 5 over 4: MIXED, tokens 6, prefill_sq 25,
 *          prefill_ctx 20: d = 1 + 3 + 0.75 + 0.125 * 65 = 12.875 -> 19.375.
 *          r0 token 2; r1 C = 9 = T -> token 1 (its first) at 19.375.
 * t=19.375 DECODE r0 (context 4) and r1 (context 10), no new block for r0
 *          (4 tokens in 1 block), none for r1 (10 in 3): kv_read 14:
 *          d = 1 + 1 + 3.5 = 5.5 -> 24.875.  Both reach O. */
START_TEST(test_mixed_step_and_cut_chunk)
{
    const double rows[][4] = {{0, 2, 3, 0}, {0, 9, 2, 0}};
    golden g;
    v1_setup(&g, rows, 2);
    g.cfg.sched.max_batched_tokens = 6;
    golden_run(&g);
    ck_assert_int_eq(g.res.n_steps, 3);
    const int kind[3] = {SCHED_STEP_PREFILL, SCHED_STEP_MIXED, SCHED_STEP_DECODE};
    const int64_t tokens[3] = {6, 6, 2}, kv[3] = {0, 3, 14}, sq[3] = {20, 25, 0};
    const int64_t ctx[3] = {0, 20, 0}, blocks[3] = {2, 4, 4};
    const double dur[3] = {6.5, 12.875, 5.5};
    for (int i = 0; i < 3; i++) {
        const sched_step *s = &g.res.steps[i].step;
        ck_assert_int_eq(s->kind, kind[i]);
        ck_assert_int_eq(s->batch.tokens, tokens[i]);
        ck_assert_int_eq(s->batch.kv_read, kv[i]);
        ck_assert_int_eq(s->batch.prefill_sq, sq[i]);
        ck_assert_int_eq(s->batch.prefill_ctx, ctx[i]);
        ck_assert_int_eq(s->kv_blocks_used, blocks[i]);
        ck_assert_msg(fabs(s->dur_s - dur[i]) < EPS, "step %d: %.9f", i, s->dur_s);
    }
    int64_t nm;
    const sched_member *m = members_of(&g, 1, &nm);
    ck_assert_int_eq(nm, 2);
    ck_assert_int_eq(m[0].req_id, 0);
    ck_assert_int_eq(m[0].kind, SCHED_MEMBER_DECODE);
    ck_assert_int_eq(m[0].context, 3);
    ck_assert_int_eq(m[1].req_id, 1);
    ck_assert_int_eq(m[1].kind, SCHED_MEMBER_PREFILL);
    ck_assert_int_eq(m[1].tokens, 5);
    ck_assert_int_eq(m[1].context, 9);
    double tt[2][MAXO];
    int64_t ntok[2];
    token_times(&g, tt, ntok);
    expect_req(&g, tt, ntok, 0, (const double[]){6.5, 19.375, 24.875}, 3, 0);
    expect_req(&g, tt, ntok, 1, (const double[]){19.375, 24.875}, 2, 0);
    ck_assert_int_eq(g.res.sum.prefill_chunks, 3); /* r0's prompt, r1's two chunks */
    golden_free(&g);
}
END_TEST

/* (c) preemption resets C (g kept), the victim goes to W's FRONT and
 * resumes; (e) the step that preempted admits nobody.
 * bs 2, N 3, B 10, fcfs, chunked on, prefix caching off.
 *   r0 (t0, P2, O4)   r1 (t0, P2, O4)   r2 (t1, P2, O1)
 * t=0      r0, r1 prompts: 1 block each (F 1); tokens 4, prefill_sq 8:
 *          d = 1 + 2 + 1 = 4.  Both g = 1 at 4 (C 2, T 3).
 * (r2 arrives at 1: W = [r2].)
 * t=4      r0 q 1 needs a 2nd block: F 1 -> 0.  r1 needs one, F = 0: the
 *          victim is R's last, r1 itself: it frees its block (F 1), C = 0,
 *          g stays 1, W = [r1 r2] (front), and the walk ends.  The step
 *          preempted, so r2 is not admitted although its 1 block is free
 *          (5.2).  DECODE r0, kv_read 3: d = 1 + 0.5 + 0.75 = 2.25 -> 6.25.
 * t=6.25   r0 q 1 (C 3 -> 4, still 2 blocks).  W's head r1 has T = 3, no
 *          hit: q 3, 2 blocks > F 1: the walk stops (r2 behind it would
 *          fit).  kv_read 4: d = 2.5 -> 8.75.
 * t=8.75   r0 q 1 takes the last block (F 0); r1 still cannot.  kv_read 5:
 *          d = 2.75 -> 11.5; r0 finishes (3 blocks back, F 3).
 * t=11.5   W = [r1 r2]: r1 recomputes P + g = 3 tokens (c 0: a prefill,
 *          2 blocks), r2 its prompt (1 block).  tokens 5, prefill_sq 9 + 4:
 *          d = 1 + 2.5 + 1.625 = 5.125 -> 16.625: r1's token 2, r2 done.
 * t=16.625 r1 decode, context 4: d = 2.5 -> 19.125 (token 3).
 * t=19.125 r1 takes a block, context 5: d = 2.75 -> 21.875 (token 4). */
static void preempt_scenario(golden *g)
{
    const double rows[][4] = {{0, 2, 4, 0}, {0, 2, 4, 0}, {1, 2, 1, 0}};
    v1_setup(g, rows, 3);
    g->cfg.sched.block_size = 2;
    g->cfg.sched.total_blocks = 3;
    g->cfg.sched.max_batched_tokens = 10;
    golden_run(g);
}

START_TEST(test_preempt_to_front_and_resume)
{
    golden g;
    preempt_scenario(&g);
    ck_assert_int_eq(g.res.n_steps, 7);
    double tt[3][MAXO];
    int64_t ntok[3];
    token_times(&g, tt, ntok);
    expect_req(&g, tt, ntok, 0, (const double[]){4, 6.25, 8.75, 11.5}, 4, 0);
    expect_req(&g, tt, ntok, 1, (const double[]){4, 16.625, 19.125, 21.875}, 4, 1);
    expect_req(&g, tt, ntok, 2, (const double[]){16.625}, 1, 0);
    ck_assert_int_eq(g.res.sum.preemptions, 1);
    ck_assert_int_eq(g.res.sum.preempt_recompute, 1);
    /* the resume is a 3-token prefill over nothing stored */
    int64_t nm;
    const sched_member *m = members_of(&g, 4, &nm);
    ck_assert_int_eq(nm, 2);
    ck_assert_int_eq(m[0].req_id, 1);
    ck_assert_int_eq(m[0].kind, SCHED_MEMBER_PREFILL);
    ck_assert_int_eq(m[0].tokens, 3);
    ck_assert_int_eq(m[0].context, 3);
    ck_assert_int_eq(m[1].req_id, 2);
    golden_free(&g);
}
END_TEST

START_TEST(test_preempting_step_admits_nobody)
{
    golden g;
    preempt_scenario(&g);
    const sched_step *s = &g.res.steps[1].step;
    ck_assert_int_eq(s->n_preempted, 1);
    ck_assert_int_eq(s->kind, SCHED_STEP_DECODE);
    ck_assert_int_eq(s->n_waiting, 2);  /* r1 and r2 */
    ck_assert_int_eq(s->n_running, 1);
    ck_assert_int_eq(s->kv_blocks_used, 2); /* r0's 2; a block was free for r2 */
    int64_t nm;
    const sched_member *m = members_of(&g, 1, &nm);
    ck_assert_int_eq(nm, 1);
    ck_assert_int_eq(m[0].req_id, 0);
    /* the next step preempts nobody, but W's head r1 blocks r2 (strict) */
    ck_assert_int_eq(g.res.steps[2].step.n_preempted, 0);
    members_of(&g, 2, &nm);
    ck_assert_int_eq(nm, 1);
    golden_free(&g);
}
END_TEST

/* (d) a full prefix hit recomputes the whole last block.
 * bs 4, N 10, B 16, prefix caching on, S = 4 tokens per segment id.
 *   r0 (t0, P8, O1, ids [7 8])   r1 (t10, P8, O2, ids [7 8])
 * t=0   r0: no hit, q 8, 2 blocks (1, 2 from Q's head), both full, so both
 *       registered.  tokens 8, prefill_sq 64: d = 1 + 4 + 8 = 13.  r0
 *       finishes at 13: blocks freed last to first, Q = 3..10, 2, 1, the
 *       identities kept.
 * t=13  r1 (arrived at 10): T = 8, both its block identities are in M, but
 *       hits stop at floor((T - 1) / bs) = 1 block: c = 4 and the whole
 *       last block is recomputed, q = 4 (not 1).  alloc: hit block 1 leaves
 *       Q, a fresh block is taken (3).  A chunk of 4 over 4: tokens 4,
 *       prefill_sq 16, prefill_ctx 16: d = 1 + 2 + 0.125 * 48 = 9 -> 22,
 *       its first token (TTFT 12).
 * t=22  decode, context 9 (a third block): d = 1 + 0.5 + 2.25 = 3.75 ->
 *       25.75.
 * Prefix metrics: query tokens 8 + 8, hit tokens 0 + 4. */
START_TEST(test_full_hit_recomputes_last_block)
{
    const double rows[][4] = {{0, 8, 1, 0}, {10, 8, 2, 0}};
    golden g;
    v1_setup(&g, rows, 2);
    sched_config *s = &g.cfg.sched;
    s->total_blocks = 10;
    s->max_batched_tokens = 16;
    s->prefix_caching = 1;
    s->segment_tokens = 4;
    g.tr.hash_off = calloc(3, sizeof *g.tr.hash_off);
    g.tr.hash_ids = calloc(4, sizeof *g.tr.hash_ids);
    g.tr.hash_tokens = calloc(4, sizeof *g.tr.hash_tokens);
    const int64_t off[3] = {0, 2, 4};
    const uint64_t ids[4] = {7, 8, 7, 8};
    memcpy(g.tr.hash_off, off, sizeof off);
    memcpy(g.tr.hash_ids, ids, sizeof ids);
    for (int k = 0; k < 4; k++)
        g.tr.hash_tokens[k] = 4;
    golden_run(&g);
    ck_assert_int_eq(g.res.n_steps, 3);
    int64_t nm;
    const sched_member *m = members_of(&g, 1, &nm);
    ck_assert_int_eq(nm, 1);
    ck_assert_int_eq(m[0].kind, SCHED_MEMBER_PREFILL);
    ck_assert_int_eq(m[0].tokens, 4);
    ck_assert_int_eq(m[0].context, 8);
    ck_assert_int_eq(g.res.steps[1].step.batch.prefill_cached, 4);
    double tt[2][MAXO];
    int64_t ntok[2];
    token_times(&g, tt, ntok);
    expect_req(&g, tt, ntok, 0, (const double[]){13}, 1, 0);
    expect_req(&g, tt, ntok, 1, (const double[]){22, 25.75}, 2, 0);
    ck_assert_int_eq(g.res.sum.prefix_hit_tokens, 4);
    ck_assert(fabs(g.res.sum.prefix_hit_rate - 4.0 / 16.0) < EPS);
    ck_assert_int_eq(g.res.sum.prefix_evictions, 0);
    golden_free(&g);
}
END_TEST

/* Segment ids on a grid and off it (docs/semantics-v1.md, section 9).
 *   r0 (t0, P10, O1, ids [5 6])   r1 (t20, P10, O1, ids [5 7]), S 4, bs 2.
 * r1 runs alone after r0 finished, so its hits are blocks r0 left in Q.
 * - A trace cut on a 4-token grid (hash_block 4): segment 0 is tokens 0..3
 *   whatever the stored counts say, so r1 hits blocks 0 and 1 (ending at
 *   e = 2, 4, in segment 0 = id 5) and misses block 2 (ending at 6, in
 *   segment 1: ids 5 7 differ from 5 6): 4 hit tokens, for counts [4 4]
 *   and [6 4] alike.
 * - A trace whose segments vary (hash_block 0, a synthetic system prompt of
 *   6 tokens then a user part of 4) is read with its own lengths: counts
 *   [6 4] put blocks ending at 2, 4 and 6 in segment 0, so r1 hits 3
 *   blocks = 6 tokens and misses block 3 (ending at 8, segment 1); counts
 *   [4 4] give 4 hit tokens as on the grid. */
START_TEST(test_ids_grid_and_varying)
{
    for (int grid = 0; grid <= 1; grid++)
        for (int aligned = 0; aligned <= 1; aligned++) {
            const double rows[][4] = {{0, 10, 1, 0}, {20, 10, 1, 0}};
            golden g;
            v1_setup(&g, rows, 2);
            g.cfg.sched.block_size = 2;
            g.cfg.sched.max_batched_tokens = 16;
            g.cfg.sched.prefix_caching = 1;
            g.cfg.sched.segment_tokens = 4;
            g.tr.hash_off = calloc(3, sizeof *g.tr.hash_off);
            g.tr.hash_ids = calloc(4, sizeof *g.tr.hash_ids);
            g.tr.hash_tokens = calloc(4, sizeof *g.tr.hash_tokens);
            g.tr.hash_block = grid ? 4 : 0;
            const int64_t off[3] = {0, 2, 4};
            const uint64_t ids[4] = {5, 6, 5, 7};
            const int32_t tok[2][4] = {{6, 4, 6, 4}, {4, 4, 4, 4}};
            memcpy(g.tr.hash_off, off, sizeof off);
            memcpy(g.tr.hash_ids, ids, sizeof ids);
            memcpy(g.tr.hash_tokens, tok[aligned], sizeof tok[aligned]);
            golden_run(&g);
            ck_assert_int_eq(g.res.sum.prefix_hit_tokens, grid || aligned ? 4 : 6);
            golden_free(&g);
        }
}
END_TEST

/* (f) the priority victim was already scheduled in the step.
 * bs 2, N 3, B 8, priority, chunked on, prefix caching off.
 *   r0 (t0, P2, O3, prio 2)   r1 (t0.5, P2, O3, prio 0)
 * t=0     W = [r0]: prompt, 1 block (F 2): d = 1 + 1 + 0.5 = 2.5.  g 1.
 * t=2.5   R = [r0]: r0 q 1 takes its 2nd block (F 1).  W = [r1]: prompt,
 *         1 block (F 0).  MIXED: tokens 3, kv_read 3, prefill_sq 4:
 *         d = 1 + 1.5 + 0.75 + 0.5 = 3.75 -> 6.25.  r0 g 2, r1 g 1.
 * t=6.25  r0 q 1 (context 4 in its 2 blocks): scheduled, b = 7.  r1 needs
 *         a 2nd block, F = 0: the victim is the largest (priority,
 *         arrival, id) of R, r0, already in S: its entry leaves S, b = 8,
 *         its 2 blocks are freed (F 2), C = 0, g stays 2, W = [r0].  The
 *         walk index moves back to r1, which now gets its block (F 1).
 *         No admission (5.2).  DECODE r1, kv_read 3: d = 2.25 -> 8.5.
 * t=8.5   r1 decode (context 4); r0 needs P + g = 4 tokens, 2 blocks > F 1:
 *         not admitted.  d = 1 + 0.5 + 1 = 2.5 -> 11: r1 finishes (F 3).
 * t=11    r0 recomputes 4 tokens (a prefill: g 2 but c 0): prefill_sq 16:
 *         d = 1 + 2 + 2 = 5 -> 16, its 3rd and last token. */
START_TEST(test_priority_victim_already_scheduled)
{
    const double rows[][4] = {{0, 2, 3, 2}, {0.5, 2, 3, 0}};
    golden g;
    v1_setup(&g, rows, 2);
    g.tr.has_priority = 1;
    sched_config *s = &g.cfg.sched;
    s->policy = SCHED_POLICY_PRIORITY;
    s->block_size = 2;
    s->total_blocks = 3;
    s->max_batched_tokens = 8;
    golden_run(&g);
    ck_assert_int_eq(g.res.n_steps, 5);
    const sched_step *st = &g.res.steps[2].step;
    ck_assert_int_eq(st->n_preempted, 1);
    ck_assert_int_eq(st->batch.tokens, 1); /* r0's token left the step */
    ck_assert_int_eq(st->batch.n_decode, 1);
    ck_assert_int_eq(st->kv_blocks_used, 2);
    int64_t nm;
    const sched_member *m = members_of(&g, 2, &nm);
    ck_assert_int_eq(nm, 1);
    ck_assert_int_eq(m[0].req_id, 1);
    double tt[2][MAXO];
    int64_t ntok[2];
    token_times(&g, tt, ntok);
    expect_req(&g, tt, ntok, 0, (const double[]){2.5, 6.25, 16}, 3, 1);
    expect_req(&g, tt, ntok, 1, (const double[]){6.25, 8.5, 11}, 3, 0);
    golden_free(&g);
}
END_TEST

/* (g) rejection at arrival (rule 1.6).  bs 4, N 3, B 8, max_model_len 20,
 * chunked prefill off.
 *   r0 (P10, O11): P + O = 21 > 20.
 *   r1 (P8, O6): ceil((8 + 6 - 1) / 4) = 4 blocks > N = 3.
 *   r2 (P6, O4): P + O - 1 = 9 > B = 8 with chunked prefill off.
 *   r3 (P5, O4): P + O - 1 = 8 = B, 2 blocks: runs.
 *     t=0      prompt of 5 (2 blocks): d = 1 + 2.5 + 3.125 = 6.625.
 *     t=6.625  context 6: d = 1 + 0.5 + 1.5 = 3 -> 9.625.
 *     t=9.625  context 7: d = 3.25 -> 12.875.
 *     t=12.875 context 8: d = 3.5 -> 16.375.
 * With chunked prefill on, r2 is no longer rejected. */
START_TEST(test_rejection_rules)
{
    const double rows[][4] = {{0, 10, 11, 0}, {0, 8, 6, 0}, {0, 6, 4, 0}, {0, 5, 4, 0}};
    golden g;
    v1_setup(&g, rows, 4);
    sched_config *s = &g.cfg.sched;
    s->total_blocks = 3;
    s->max_model_len = 20;
    s->chunked_prefill = 0;
    golden_run(&g);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(g.res.reqs[i].status, SCHED_REQ_REJECTED);
        ck_assert(isnan(g.res.reqs[i].first_token_s) && isnan(g.res.reqs[i].finish_s));
    }
    ck_assert_int_eq(g.res.sum.n_rejected, 3);
    double tt[4][MAXO];
    int64_t ntok[4];
    token_times(&g, tt, ntok);
    expect_req(&g, tt, ntok, 3, (const double[]){6.625, 9.625, 12.875, 16.375}, 4, 0);
    golden_free(&g);

    v1_setup(&g, rows, 4);
    s = &g.cfg.sched;
    s->total_blocks = 3;
    s->max_model_len = 20;
    s->chunked_prefill = 1;
    golden_run(&g);
    ck_assert_int_eq(g.res.sum.n_rejected, 2);
    ck_assert_int_eq(g.res.reqs[2].status, SCHED_REQ_FINISHED);
    golden_free(&g);
}
END_TEST

/* (h) chunked prefill off: a request that does not fit the rest of the
 * budget is skipped and keeps its place.  bs 4, N 20, B 8.
 *   r0 (t0, P4, O3)   r1 (t0.5, P8, O1)   r2 (t0.5, P8, O1)   r3 (t0.5, P3, O1)
 * t=0       r0's prompt: d = 1 + 2 + 2 = 5.
 * t=5       r0 decode (b 7).  W = [r1 r2 r3]: r1 needs 8 > 7, skipped;
 *           r2 too; r3's 3 fit (b 4).  MIXED: tokens 4, kv_read 5,
 *           prefill_sq 9: d = 1 + 2 + 1.25 + 1.125 = 5.375 -> 10.375; r3
 *           done, r0 token 2.
 * t=10.375  r0 decode (b 7); r1 and r2 skipped again.  d = 1 + 0.5 + 1.5 =
 *           3 -> 13.375: r0 done.
 * t=13.375  W = [r1 r2] in their order (v0.11.0 would have reversed them):
 *           r1's 8 use the whole budget: d = 1 + 4 + 8 = 13 -> 26.375.
 * t=26.375  r2: d = 13 -> 39.375. */
START_TEST(test_unchunked_skip_keeps_place)
{
    const double rows[][4] = {{0, 4, 3, 0}, {0.5, 8, 1, 0}, {0.5, 8, 1, 0}, {0.5, 3, 1, 0}};
    golden g;
    v1_setup(&g, rows, 4);
    g.cfg.sched.chunked_prefill = 0;
    golden_run(&g);
    ck_assert_int_eq(g.res.n_steps, 5);
    double tt[4][MAXO];
    int64_t ntok[4];
    token_times(&g, tt, ntok);
    expect_req(&g, tt, ntok, 0, (const double[]){5, 10.375, 13.375}, 3, 0);
    expect_req(&g, tt, ntok, 1, (const double[]){26.375}, 1, 0);
    expect_req(&g, tt, ntok, 2, (const double[]){39.375}, 1, 0);
    expect_req(&g, tt, ntok, 3, (const double[]){10.375}, 1, 0);
    ck_assert_int_eq(g.res.sum.prefill_chunks, 0);
    golden_free(&g);
}
END_TEST

/* A running chunk capped by the long-prefill threshold: thr 3, B 8, bs 4.
 *   r0 (t0, P7, O2)
 * t=0  q = min(7, thr 3) = 3: tokens 3, prefill_sq 9: d = 1 + 1.5 + 1.125
 *      = 3.625.
 * t=3.625  q 3 over 3: prefill_sq 9, prefill_ctx 9: d = 1 + 1.5 + 0.125 *
 *      27 = 5.875 -> 9.5.
 * t=9.5  q 1 over 6 (last prompt token, g 0: a prefill): sq 1, ctx 6:
 *      d = 1 + 0.5 + 1.625 = 3.125 -> 12.625, token 1.
 * t=12.625  decode context 8: d = 1 + 0.5 + 2 = 3.5 -> 16.125. */
START_TEST(test_long_prefill_threshold)
{
    const double rows[][4] = {{0, 7, 2, 0}};
    golden g;
    v1_setup(&g, rows, 1);
    g.cfg.sched.long_prefill_threshold = 3;
    golden_run(&g);
    ck_assert_int_eq(g.res.n_steps, 4);
    double tt[1][MAXO];
    int64_t ntok[1];
    token_times(&g, tt, ntok);
    expect_req(&g, tt, ntok, 0, (const double[]){12.625, 16.125}, 2, 0);
    golden_free(&g);
}
END_TEST

/* ------------------------------------------------------------ config */
static void expect_config_error(const sched_config *c, const char *want)
{
    kvs_err err;
    memset(&err, 0, sizeof err);
    int rc = sched_config_check(c, 10, &err);
    ck_assert_int_eq(rc, KVS_EINVAL);
    ck_assert_msg(strstr(err.msg, want) != NULL, "got '%s', want '%s'", err.msg, want);
}

static void base_config(sched_config *c)
{
    memset(c, 0, sizeof *c);
    c->engine = SCHED_ENGINE_VLLM_V1;
    c->block_size = 16;
    c->total_blocks = 100;
    c->max_seqs = 8;
    c->max_batched_tokens = 2048;
    c->max_model_len = 4096;
    c->chunked_prefill = 1;
    c->prefix_caching = 1;
}

START_TEST(test_config_rules)
{
    sched_config c;
    kvs_err err;
    base_config(&c);
    c.watermark = 0.5; /* ignored under V1 */
    ck_assert_int_eq(sched_config_check(&c, 10, &err), 0);
    c.preemption = SCHED_PREEMPT_SWAP;
    c.swap_blocks = 10;
    expect_config_error(&c, "--preemption swap: not available under --engine vllm-v1 "
                            "(V1 preempts by recompute only)");
    base_config(&c);
    c.preemption = SCHED_PREEMPT_OFF;
    expect_config_error(&c, "--preemption off: not available under --engine vllm-v1");
    base_config(&c);
    c.policy = SCHED_POLICY_PRIORITY;
    c.priority_preemption = 1;
    expect_config_error(&c, "--priority-preemption: not available under --engine vllm-v1");
    base_config(&c);
    c.alloc = SCHED_ALLOC_RESERVED;
    expect_config_error(&c, "--alloc reserved: not available under --engine vllm-v1");
    c.alloc = SCHED_ALLOC_RESERVED_ORACLE;
    expect_config_error(&c, "--alloc reserved-oracle: not available under --engine vllm-v1");
    base_config(&c);
    c.batching = SCHED_BATCHING_STATIC;
    expect_config_error(&c, "--batching static: not available under --engine vllm-v1");
    base_config(&c);
    c.policy = SCHED_POLICY_LPM;
    expect_config_error(&c, "--policy lpm: not available under --engine vllm-v1");
    base_config(&c);
    c.long_prefill_threshold = -1;
    expect_config_error(&c, "--long-prefill-threshold");
    base_config(&c);
    c.segment_tokens = -5;
    expect_config_error(&c, "--segment-tokens");
    base_config(&c);
    c.engine = (sched_engine)7;
    expect_config_error(&c, "unknown engine");
    /* V0 keeps its own rules and has no threshold */
    base_config(&c);
    c.engine = SCHED_ENGINE_VLLM_V0;
    c.long_prefill_threshold = 64;
    expect_config_error(&c, "--long-prefill-threshold: needs --engine vllm-v1");
    /* names */
    ck_assert_str_eq(sched_engine_name(SCHED_ENGINE_VLLM_V0), "vllm-v0");
    ck_assert_str_eq(sched_engine_name(SCHED_ENGINE_VLLM_V1), "vllm-v1");
    ck_assert_int_eq(sched_engine_parse("vllm-v1"), SCHED_ENGINE_VLLM_V1);
    ck_assert_int_eq(sched_engine_parse("vllm-v0"), SCHED_ENGINE_VLLM_V0);
    ck_assert_int_eq(sched_engine_parse("v2"), -1);
    ck_assert_str_eq(sched_engine_name(9), "?");
}
END_TEST

/* -------------------------------------------------------- properties */
/* A random trace with prefix ids: each request's prompt starts with 0..4
 * segments of one of four shared families, then ids of its own. */
static void random_v1_trace(trace *t, int n, uint64_t seed, int64_t S, int prio)
{
    tu_random_trace(t, n, seed, 120, 40, prio);
    rng r;
    rng_init(&r, seed ^ 0xabcdef);
    t->hash_off = calloc((size_t)n + 1, sizeof *t->hash_off);
    int64_t cap = 0;
    for (int i = 0; i < n; i++)
        cap += (t->reqs[i].prompt_tokens + S - 1) / S;
    t->hash_ids = calloc((size_t)(cap > 0 ? cap : 1), sizeof *t->hash_ids);
    t->hash_tokens = calloc((size_t)(cap > 0 ? cap : 1), sizeof *t->hash_tokens);
    int64_t k = 0;
    for (int i = 0; i < n; i++) {
        t->hash_off[i] = k;
        int64_t P = t->reqs[i].prompt_tokens, segs = (P + S - 1) / S;
        uint64_t fam = rng_below(&r, 4);
        int64_t shared = (int64_t)rng_below(&r, 5);
        if (rng_uniform(&r) < 0.2)
            segs = (int64_t)rng_below(&r, (uint64_t)segs + 1); /* a partial id list */
        for (int64_t j = 0; j < segs; j++, k++) {
            t->hash_ids[k] = j < shared ? fam * 1000 + (uint64_t)j : 1000000 + (uint64_t)k;
            int64_t left = P - j * S;
            t->hash_tokens[k] = (int32_t)(left < S ? left : S);
        }
    }
    t->hash_off[n] = k;
}

typedef struct prop_ctx {
    sched *s;
    int64_t B, thr, N, max_seqs;
    int64_t steps, bad;
    char first[300];
} prop_ctx;

static void prop_step(void *ctx, const sched_step *st, const sched_member *m, int64_t nm)
{
    prop_ctx *a = ctx;
    char why[256] = "";
    int bad = 0;
    a->steps++;
    int64_t tok = 0;
    for (int64_t i = 0; i < nm; i++) {
        tok += m[i].tokens;
        if (m[i].tokens < 1 || (m[i].kind == SCHED_MEMBER_DECODE && m[i].tokens != 1) ||
            (a->thr > 0 && m[i].tokens > a->thr)) {
            snprintf(why, sizeof why, "member r%d: %lld tokens", m[i].req_id,
                     (long long)m[i].tokens);
            bad = 1;
        }
    }
    if (!bad && (tok != st->batch.tokens || tok > a->B || tok < 1)) {
        snprintf(why, sizeof why, "%lld tokens (batch %lld) for budget %lld", (long long)tok,
                 (long long)st->batch.tokens, (long long)a->B);
        bad = 1;
    }
    if (!bad && (st->kv_blocks_used > a->N || st->n_running > a->max_seqs ||
                 nm > st->n_running)) {
        snprintf(why, sizeof why, "blocks %lld running %lld", (long long)st->kv_blocks_used,
                 (long long)st->n_running);
        bad = 1;
    }
    if (!bad && sched_audit(a->s, why, sizeof why) != 0)
        bad = 1;
    if (bad && a->bad++ == 0)
        snprintf(a->first, sizeof a->first, "step %lld: %s", (long long)st->index, why);
}

typedef struct prop_out {
    sched_req_result *res;
    sched_counters c;
    int64_t steps;
} prop_out;

static void run_prop(uint64_t seed, int prio, int pfx, int chunked, int thr, prop_out *out)
{
    const int64_t S = 4 + (int64_t)(seed % 13);
    trace t;
    random_v1_trace(&t, 250, seed, S, prio);
    sched_config c;
    memset(&c, 0, sizeof c);
    c.engine = SCHED_ENGINE_VLLM_V1;
    c.policy = prio ? SCHED_POLICY_PRIORITY : SCHED_POLICY_FCFS;
    c.block_size = 1 + (int64_t)(seed % 8);
    c.max_model_len = 150;
    /* sometimes too small for the longest requests: they are rejected */
    c.total_blocks = 100 / c.block_size + (int64_t)(seed % 30);
    c.max_seqs = 2 + (int64_t)(seed % 20);
    c.max_batched_tokens = 16 + (int64_t)(seed % 150);
    c.chunked_prefill = chunked;
    c.prefix_caching = pfx;
    c.segment_tokens = S;
    c.long_prefill_threshold = thr ? 1 + (int64_t)(seed % 40) : 0;
    cost_model cost;
    kvs_err err;
    ck_assert_int_eq(cost_model_create("affine:0.01,0.001,0.0001,0.00001", NULL, NULL, 1, &cost,
                                       &err), 0);
    sched *s;
    ck_assert_msg(sched_init(&s, &c, t.reqs, t.n, &cost, &err) == 0, "%s", err.msg);
    req_prefixes px = trace_prefixes(&t);
    ck_assert_int_eq(sched_attach_prefixes(s, &px, &err), 0);
    prop_ctx a;
    memset(&a, 0, sizeof a);
    a.s = s;
    a.B = c.max_batched_tokens;
    a.thr = c.long_prefill_threshold;
    a.N = c.total_blocks;
    a.max_seqs = c.max_seqs;
    sched_set_step_sink(s, prop_step, &a, 1);
    double end;
    ck_assert_msg(engine_run(s, &t, &end, &err) == 0, "seed %llu: %s",
                  (unsigned long long)seed, err.msg);
    ck_assert_msg(a.bad == 0, "seed %llu prio %d pfx %d chunked %d thr %d: %lld bad steps, "
                  "first: %s", (unsigned long long)seed, prio, pfx, chunked, thr,
                  (long long)a.bad, a.first);
    sched_get_counters(s, &out->c);
    char why[256];
    ck_assert_msg(sched_audit(s, why, sizeof why) == 0, "end: %s", why);
    ck_assert_int_eq(out->c.used_blocks, 0);
    ck_assert_int_eq(out->c.free_blocks, c.total_blocks);
    ck_assert_int_eq(out->c.n_finished + out->c.n_rejected, t.n);
    ck_assert_int_eq(out->c.n_waiting + out->c.n_running, 0);
    const sched_req_result *r = sched_results(s);
    for (int64_t i = 0; i < t.n; i++) {
        const trace_req *q = &t.reqs[i];
        int64_t po = q->prompt_tokens + q->output_tokens;
        int rej = po > c.max_model_len ||
                  (po - 1 + c.block_size - 1) / c.block_size > c.total_blocks ||
                  (!chunked && po - 1 > c.max_batched_tokens);
        ck_assert_int_eq(r[i].status, rej ? SCHED_REQ_REJECTED : SCHED_REQ_FINISHED);
        if (!rej)
            ck_assert(r[i].first_token_s > q->arrival_s &&
                      r[i].finish_s >= r[i].first_token_s);
    }
    out->res = malloc((size_t)t.n * sizeof *out->res);
    memcpy(out->res, r, (size_t)t.n * sizeof *out->res);
    out->steps = a.steps;
    sched_free(s);
    cost_model_free(&cost);
    trace_free(&t);
}

START_TEST(test_random_properties)
{
    int64_t preempted = 0, hits = 0;
    for (uint64_t seed = 1; seed <= 6; seed++)
        for (int prio = 0; prio <= 1; prio++)
            for (int pfx = 0; pfx <= 1; pfx++)
                for (int chunked = 0; chunked <= 1; chunked++)
                    for (int thr = 0; thr <= 1; thr++) {
                        prop_out a, b;
                        uint64_t sd = seed * 7919;
                        run_prop(sd, prio, pfx, chunked, thr, &a);
                        run_prop(sd, prio, pfx, chunked, thr, &b);
                        ck_assert_int_eq(a.steps, b.steps);
                        ck_assert_msg(memcmp(a.res, b.res, 250 * sizeof *a.res) == 0,
                                      "seed %llu: runs differ", (unsigned long long)sd);
                        ck_assert(memcmp(&a.c, &b.c, sizeof a.c) == 0);
                        if (!pfx)
                            ck_assert_int_eq(a.c.prefix_hit_tokens, 0);
                        preempted += a.c.preempt_recompute;
                        hits += a.c.prefix_hit_tokens;
                        free(a.res);
                        free(b.res);
                    }
    /* the generator does exercise preemption and cache hits */
    ck_assert_int_gt(preempted, 0);
    ck_assert_int_gt(hits, 0);
}
END_TEST

/* ------------------------------------------------- a naive reference */
/* The rules of docs/semantics-v1.md again, written as directly as possible:
 * arrays scanned linearly, Q as an array in order, M as the blocks' own
 * identities compared segment id by segment id (no hashing) with a
 * registration stamp for "earliest registered".  O(N) per lookup: only for
 * small random traces, against which the engine must agree exactly. */
typedef struct ref_blk {
    int ref, has_id;
    int shared;        /* 1: (ids of req `who` up to segment s, off); 0: (who, j) */
    int who;
    int64_t s, off;    /* shared: segment, e - s*S; private: j in s */
    int64_t stamp;     /* registration order */
} ref_blk;

typedef struct ref_sim {
    const trace *t;
    sched_config c;
    int64_t S;
    ref_blk *b;        /* [N + 1] */
    int *q;            /* Q: block numbers in order */
    int64_t nq;
    int *w, *r;        /* W and R as arrays of ids */
    int64_t nw, nr;
    int64_t *g, *C, *reg, *nb;
    int **tab;         /* [n][blocks] */
    int64_t stamp;
    sched_req_result *res;
    int64_t steps;
} ref_sim;

static int ref_key_eq(const ref_sim *m, const ref_blk *x, int shared, int who, int64_t s,
                      int64_t off)
{
    if (!x->has_id || x->shared != shared || x->s != s || x->off != off)
        return 0;
    if (!shared)
        return x->who == who;
    const trace *t = m->t;
    for (int64_t k = 0; k <= s; k++)
        if (t->hash_ids[t->hash_off[x->who] + k] != t->hash_ids[t->hash_off[who] + k])
            return 0;
    return 1;
}

static void ref_key(const ref_sim *m, int id, int64_t j, int *shared, int64_t *s, int64_t *off)
{
    const trace *t = m->t;
    int64_t k = t->hash_off ? t->hash_off[id + 1] - t->hash_off[id] : 0;
    int64_t P = t->reqs[id].prompt_tokens;
    int64_t L = k * m->S < P ? k * m->S : P;
    int64_t e = (j + 1) * m->c.block_size;
    if (e <= L) {
        *shared = 1;
        *s = (e - 1) / m->S;
        *off = e - *s * m->S;
    } else {
        *shared = 0;
        *s = j;
        *off = 0;
    }
}

static int ref_lookup(const ref_sim *m, int id, int64_t j)
{
    int shared;
    int64_t s, off;
    ref_key(m, id, j, &shared, &s, &off);
    int best = 0;
    for (int64_t x = 1; x <= m->c.total_blocks; x++)
        if (ref_key_eq(m, &m->b[x], shared, id, s, off) &&
            (!best || m->b[x].stamp < m->b[best].stamp))
            best = (int)x;
    return best;
}

static void ref_q_remove(ref_sim *m, int blk)
{
    for (int64_t i = 0; i < m->nq; i++)
        if (m->q[i] == blk) {
            memmove(&m->q[i], &m->q[i + 1], (size_t)(m->nq - i - 1) * sizeof *m->q);
            m->nq--;
            return;
        }
    ck_abort_msg("block %d not in Q", blk);
}

static int ref_alloc(ref_sim *m, int id, int64_t c, int64_t q, const int *hits, int64_t nh)
{
    const int64_t bs = m->c.block_size;
    int64_t want = (c + q + bs - 1) / bs, fresh = want - nh - m->nb[id], need = fresh;
    for (int64_t k = 0; k < nh; k++)
        need += m->b[hits[k]].ref == 0;
    if (need > m->nq)
        return 0;
    for (int64_t k = 0; k < nh; k++) {
        if (m->b[hits[k]].ref++ == 0)
            ref_q_remove(m, hits[k]);
        m->tab[id][k] = hits[k];
    }
    for (int64_t j = m->nb[id] + nh; j < want; j++) {
        int blk = m->q[0];
        memmove(&m->q[0], &m->q[1], (size_t)(m->nq - 1) * sizeof *m->q);
        m->nq--;
        m->b[blk].has_id = 0;
        m->b[blk].ref = 1;
        m->tab[id][j] = blk;
    }
    m->nb[id] = want;
    if (m->c.prefix_caching) {
        for (int64_t j = m->reg[id]; j < (c + q) / bs; j++) {
            ref_blk *x = &m->b[m->tab[id][j]];
            ref_key(m, id, j, &x->shared, &x->s, &x->off);
            x->who = id;
            x->has_id = 1;
            x->stamp = m->stamp++;
        }
        if ((c + q) / bs > m->reg[id])
            m->reg[id] = (c + q) / bs;
    }
    return 1;
}

static void ref_free(ref_sim *m, int id)
{
    for (int64_t j = m->nb[id] - 1; j >= 0; j--)
        if (--m->b[m->tab[id][j]].ref == 0)
            m->q[m->nq++] = m->tab[id][j];
    m->nb[id] = 0;
    m->reg[id] = 0;
}

static int ref_worse(const trace *t, int a, int b) /* key(a) > key(b) */
{
    const trace_req *x = &t->reqs[a], *y = &t->reqs[b];
    if (x->priority != y->priority)
        return x->priority > y->priority;
    if (x->arrival_s != y->arrival_s)
        return x->arrival_s > y->arrival_s;
    return a > b;
}

static void ref_w_put(ref_sim *m, int id, int front)
{
    int64_t at;
    if (m->c.policy == SCHED_POLICY_FCFS) {
        at = front ? 0 : m->nw;
    } else {
        at = 0;
        while (at < m->nw && !ref_worse(m->t, m->w[at], id))
            at++;
    }
    memmove(&m->w[at + 1], &m->w[at], (size_t)(m->nw - at) * sizeof *m->w);
    m->w[at] = id;
    m->nw++;
}

typedef struct ref_ent {
    int id;
    int64_t q, c;
} ref_ent;

static void ref_run(const trace *t, const sched_config *c, const cost_model *cost,
                    sched_req_result *res, int64_t *steps)
{
    ref_sim m;
    memset(&m, 0, sizeof m);
    m.t = t;
    m.c = *c;
    m.S = c->segment_tokens > 0 ? c->segment_tokens : 512;
    const int64_t n = t->n, N = c->total_blocks, bs = c->block_size;
    m.b = calloc((size_t)N + 1, sizeof *m.b);
    m.q = calloc((size_t)N, sizeof *m.q);
    for (int64_t x = 1; x <= N; x++)
        m.q[m.nq++] = (int)x;
    m.w = calloc((size_t)n, sizeof *m.w);
    m.r = calloc((size_t)n, sizeof *m.r);
    m.g = calloc((size_t)n, sizeof *m.g);
    m.C = calloc((size_t)n, sizeof *m.C);
    m.reg = calloc((size_t)n, sizeof *m.reg);
    m.nb = calloc((size_t)n, sizeof *m.nb);
    m.tab = calloc((size_t)n, sizeof *m.tab);
    ref_ent *S = calloc((size_t)n, sizeof *S);
    int *hits = calloc((size_t)N + 1, sizeof *hits);
    for (int64_t i = 0; i < n; i++) {
        m.tab[i] = calloc((size_t)N + 1, sizeof **m.tab);
        memset(&res[i], 0, sizeof res[i]);
        res[i].first_token_s = res[i].finish_s = NAN;
    }
    double now = 0;
    int64_t next = 0, resolved = 0;
    *steps = 0;
    while (resolved < n) {
        if (m.nr == 0 && m.nw == 0 && t->reqs[next].arrival_s > now)
            now = t->reqs[next].arrival_s;
        for (; next < n && t->reqs[next].arrival_s <= now; next++) {
            const trace_req *r = &t->reqs[next];
            int64_t po = r->prompt_tokens + r->output_tokens;
            if (po > c->max_model_len || (po - 1 + bs - 1) / bs > N ||
                (!c->chunked_prefill && po - 1 > c->max_batched_tokens)) {
                res[next].status = SCHED_REQ_REJECTED;
                resolved++;
            } else {
                ref_w_put(&m, (int)next, 0);
            }
        }
        if (m.nr == 0 && m.nw == 0)
            continue;
        int64_t b = c->max_batched_tokens, ns = 0;
        int pre = 0;
        for (int64_t i = 0; i < m.nr && b > 0;) {
            int id = m.r[i];
            int64_t T = t->reqs[id].prompt_tokens + m.g[id], q = T - m.C[id];
            if (c->long_prefill_threshold > 0 && c->long_prefill_threshold < q)
                q = c->long_prefill_threshold;
            if (q > b)
                q = b;
            int self = 0;
            while (!ref_alloc(&m, id, m.C[id], q, NULL, 0)) {
                int64_t v = m.nr - 1;
                if (c->policy == SCHED_POLICY_PRIORITY)
                    for (int64_t k = 0; k < m.nr; k++)
                        if (ref_worse(t, m.r[k], m.r[v]))
                            v = k;
                int vid = m.r[v];
                for (int64_t k = 0; k < ns; k++)
                    if (S[k].id == vid) {
                        b += S[k].q;
                        memmove(&S[k], &S[k + 1], (size_t)(ns - k - 1) * sizeof *S);
                        ns--;
                        break;
                    }
                memmove(&m.r[v], &m.r[v + 1], (size_t)(m.nr - v - 1) * sizeof *m.r);
                m.nr--;
                ref_free(&m, vid);
                m.C[vid] = 0;
                res[vid].preemptions++;
                ref_w_put(&m, vid, 1);
                pre = 1;
                if (v == i) {
                    self = 1;
                    break;
                }
                if (v < i)
                    i--;
            }
            if (self)
                break;
            S[ns++] = (ref_ent){id, q, m.C[id]};
            b -= q;
            i++;
        }
        for (int64_t k = 0; !pre && k < m.nw && b > 0;) {
            if (m.nr == c->max_seqs)
                break;
            int id = m.w[k];
            int64_t T = t->reqs[id].prompt_tokens + m.g[id], nh = 0;
            while (c->prefix_caching && nh < (T - 1) / bs && (hits[nh] = ref_lookup(&m, id, nh)))
                nh++;
            int64_t cc = nh * bs, q = T - cc;
            if (c->long_prefill_threshold > 0 && c->long_prefill_threshold < q)
                q = c->long_prefill_threshold;
            if (!c->chunked_prefill && q > b) {
                k++;
                continue;
            }
            if (q > b)
                q = b;
            m.reg[id] = nh;
            if (!ref_alloc(&m, id, cc, q, hits, nh)) {
                m.reg[id] = 0;
                break;
            }
            memmove(&m.w[k], &m.w[k + 1], (size_t)(m.nw - k - 1) * sizeof *m.w);
            m.nw--;
            m.r[m.nr++] = id;
            m.C[id] = cc;
            S[ns++] = (ref_ent){id, q, cc};
            b -= q;
        }
        if (ns == 0)
            continue;
        cost_batch cb;
        memset(&cb, 0, sizeof cb);
        for (int64_t k = 0; k < ns; k++) {
            int64_t T = t->reqs[S[k].id].prompt_tokens + m.g[S[k].id];
            if (m.g[S[k].id] >= 1 && S[k].c == T - 1) {
                cb.tokens++;
                cb.kv_read += T;
                cb.n_decode++;
            } else {
                cb.tokens += S[k].q;
                cb.prefill_sq += S[k].q * S[k].q;
                cb.prefill_ctx += S[k].q * S[k].c;
                cb.prefill_cached += S[k].c;
                cb.n_prefill++;
            }
        }
        now += cost_step_s(cost, &cb);
        (*steps)++;
        for (int64_t k = 0; k < ns; k++) {
            int id = S[k].id;
            m.C[id] = S[k].c + S[k].q;
            if (m.C[id] != t->reqs[id].prompt_tokens + m.g[id])
                continue;
            if (++m.g[id] == 1)
                res[id].first_token_s = now;
            if (m.g[id] == t->reqs[id].output_tokens) {
                res[id].finish_s = now;
                res[id].status = SCHED_REQ_FINISHED;
                resolved++;
                ref_free(&m, id);
                for (int64_t x = 0; x < m.nr; x++)
                    if (m.r[x] == id) {
                        memmove(&m.r[x], &m.r[x + 1], (size_t)(m.nr - x - 1) * sizeof *m.r);
                        m.nr--;
                        break;
                    }
            }
        }
    }
    for (int64_t i = 0; i < n; i++)
        free(m.tab[i]);
    free(m.tab);
    free(m.b);
    free(m.q);
    free(m.w);
    free(m.r);
    free(m.g);
    free(m.C);
    free(m.reg);
    free(m.nb);
    free(S);
    free(hits);
}

/* The engine agrees with the naive reference request by request: every
 * first token, finish and preemption count, and the number of steps. */
START_TEST(test_against_reference)
{
    int64_t compared = 0;
    for (uint64_t seed = 1; seed <= 8; seed++)
        for (int v = 0; v < 16; v++) {
            const int prio = v & 1, pfx = (v >> 1) & 1, chunked = (v >> 2) & 1, thr = v >> 3;
            const uint64_t sd = seed * 104729 + (uint64_t)v;
            const int64_t S = 4 + (int64_t)(sd % 13);
            trace t;
            random_v1_trace(&t, 120, sd, S, prio);
            sched_config c;
            memset(&c, 0, sizeof c);
            c.engine = SCHED_ENGINE_VLLM_V1;
            c.policy = prio ? SCHED_POLICY_PRIORITY : SCHED_POLICY_FCFS;
            c.block_size = 1 + (int64_t)(sd % 8);
            c.max_model_len = 150;
            c.total_blocks = 100 / c.block_size + (int64_t)(sd % 30);
            c.max_seqs = 2 + (int64_t)(sd % 20);
            c.max_batched_tokens = 16 + (int64_t)(sd % 150);
            c.chunked_prefill = chunked;
            c.prefix_caching = pfx;
            c.segment_tokens = S;
            c.long_prefill_threshold = thr ? 1 + (int64_t)(sd % 40) : 0;
            cost_model cost;
            kvs_err err;
            ck_assert_int_eq(cost_model_create("affine:0.01,0.001,0.0001,0.00001", NULL, NULL,
                                               1, &cost, &err), 0);
            sched *s;
            ck_assert_msg(sched_init(&s, &c, t.reqs, t.n, &cost, &err) == 0, "%s", err.msg);
            req_prefixes px = trace_prefixes(&t);
            ck_assert_int_eq(sched_attach_prefixes(s, &px, &err), 0);
            double end;
            ck_assert_int_eq(engine_run(s, &t, &end, &err), 0);
            sched_counters ctr;
            sched_get_counters(s, &ctr);
            sched_req_result *want = calloc((size_t)t.n, sizeof *want);
            int64_t steps;
            ref_run(&t, &c, &cost, want, &steps);
            const sched_req_result *got = sched_results(s);
            for (int64_t i = 0; i < t.n; i++) {
                ck_assert_msg(got[i].status == want[i].status &&
                                  got[i].preemptions == want[i].preemptions &&
                                  (isnan(want[i].finish_s)
                                       ? isnan(got[i].finish_s)
                                       : got[i].finish_s == want[i].finish_s &&
                                             got[i].first_token_s == want[i].first_token_s),
                              "seed %llu variant %d r%lld: status %d/%d preempt %d/%d "
                              "first %.9f/%.9f finish %.9f/%.9f",
                              (unsigned long long)sd, v, (long long)i, got[i].status,
                              want[i].status, got[i].preemptions, want[i].preemptions,
                              got[i].first_token_s, want[i].first_token_s, got[i].finish_s,
                              want[i].finish_s);
            }
            ck_assert_int_eq(ctr.steps, steps);
            compared += t.n;
            free(want);
            sched_free(s);
            cost_model_free(&cost);
            trace_free(&t);
        }
    ck_assert_int_gt(compared, 0);
}
END_TEST

/* V0 configs are untouched by the new fields: a V0 run with segment_tokens
 * set is the same as one without. */
START_TEST(test_v0_unchanged)
{
    trace t;
    tu_random_trace(&t, 200, 99, 100, 30, 0);
    run_config cfg;
    tu_variant v = {"v0", SCHED_BATCHING_CONTINUOUS, SCHED_POLICY_FCFS, 0, SCHED_ALLOC_PAGED,
                    SCHED_PREEMPT_RECOMPUTE};
    tu_variant_config(&cfg, &v, 5);
    cost_model cost;
    kvs_err err;
    ck_assert_int_eq(cost_model_create("affine:0.01,0.001,0.0001,0", NULL, NULL, 1, &cost, &err),
                     0);
    run_result a, b;
    ck_assert_int_eq(run_execute(&cfg, &t, &cost, &a, &err), 0);
    cfg.sched.segment_tokens = 64;
    ck_assert_int_eq(run_execute(&cfg, &t, &cost, &b, &err), 0);
    ck_assert(memcmp(a.reqs, b.reqs, (size_t)t.n * sizeof *a.reqs) == 0);
    ck_assert_int_eq(a.n_steps, b.n_steps);
    run_result_free(&a);
    run_result_free(&b);
    cost_model_free(&cost);
    trace_free(&t);
}
END_TEST

/* Without step records the sink gets only prefill members; the results
 * are the same. */
START_TEST(test_without_records)
{
    trace t;
    random_v1_trace(&t, 300, 4242, 8, 0);
    run_config cfg;
    run_config_defaults(&cfg);
    sched_config *c = &cfg.sched;
    c->engine = SCHED_ENGINE_VLLM_V1;
    c->block_size = 4;
    c->total_blocks = 60;
    c->max_seqs = 16;
    c->max_batched_tokens = 64;
    c->max_model_len = 200;
    c->chunked_prefill = 1;
    c->prefix_caching = 1;
    c->segment_tokens = 8;
    cost_model cost;
    kvs_err err;
    ck_assert_int_eq(cost_model_create(COST, NULL, NULL, 1, &cost, &err), 0);
    run_result a, b;
    cfg.record_steps = 1;
    ck_assert_int_eq(run_execute(&cfg, &t, &cost, &a, &err), 0);
    cfg.record_steps = 0;
    ck_assert_int_eq(run_execute(&cfg, &t, &cost, &b, &err), 0);
    ck_assert(memcmp(a.reqs, b.reqs, (size_t)t.n * sizeof *a.reqs) == 0);
    ck_assert_int_eq(a.sum.n_steps, b.sum.n_steps);
    ck_assert_int_gt(a.sum.preemptions, 0);
    ck_assert(a.sum.prefix_hit_rate > 0);
    ck_assert_int_eq(a.sum.n_finished + a.sum.n_rejected, t.n);
    run_result_free(&a);
    run_result_free(&b);
    cost_model_free(&cost);
    trace_free(&t);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("v1");
    TCase *g = tcase_create("golden");
    tcase_add_test(g, test_mixed_step_and_cut_chunk);
    tcase_add_test(g, test_preempt_to_front_and_resume);
    tcase_add_test(g, test_preempting_step_admits_nobody);
    tcase_add_test(g, test_full_hit_recomputes_last_block);
    tcase_add_test(g, test_priority_victim_already_scheduled);
    tcase_add_test(g, test_ids_grid_and_varying);
    tcase_add_test(g, test_rejection_rules);
    tcase_add_test(g, test_unchunked_skip_keeps_place);
    tcase_add_test(g, test_long_prefill_threshold);
    tcase_add_test(g, test_config_rules);
    suite_add_tcase(s, g);
    TCase *p = tcase_create("properties");
    tcase_set_timeout(p, 120);
    tcase_add_test(p, test_random_properties);
    tcase_add_test(p, test_against_reference);
    tcase_add_test(p, test_v0_unchanged);
    tcase_add_test(p, test_without_records);
    suite_add_tcase(s, p);
    return tu_run_suites(&s, 1);
}
