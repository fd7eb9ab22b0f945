/* test_sched.c — golden scenarios for the scheduler, worked out by hand from
 * docs/semantics.md, plus the waiting heap checked against sorting.
 *
 * Each scenario uses the affine cost model so that every step's duration can
 * be computed on paper; the comment above each test is that paper. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "scheduler/sched.h"
#include "scheduler/sched_internal.h"
#include "sim/run.h"
#include "testutil.h"


/* reqs: rows of {arrival, P, O, priority} */
static void golden_setup(golden *g, const double (*rows)[4], int n, const char *cost)
{
    tu_golden_init(g, &rows[0][0], 4, n, cost);
    g->cfg.sched.block_size = 4;
    g->cfg.sched.total_blocks = 10;
    g->cfg.sched.watermark = 0.0;
    g->cfg.sched.max_seqs = 256;
    g->cfg.sched.max_batched_tokens = 1000;
    g->cfg.sched.max_model_len = 1000;
}

#define EPS 1e-9
static void expect_req(const golden *g, int id, int status, double ft, double fin, int pre)
{
    const sched_req_result *r = &g->res.reqs[id];
    ck_assert_msg(r->status == status, "req %d: status %d, want %d", id, r->status, status);
    if (isnan(ft))
        ck_assert_msg(isnan(r->first_token_s), "req %d: first token %g, want none", id,
                      r->first_token_s);
    else
        ck_assert_msg(fabs(r->first_token_s - ft) < EPS, "req %d: first_token_s %.9f, want %.9f",
                      id, r->first_token_s, ft);
    if (isnan(fin))
        ck_assert_msg(isnan(r->finish_s), "req %d: finish %g, want none", id, r->finish_s);
    else
        ck_assert_msg(fabs(r->finish_s - fin) < EPS, "req %d: finish_s %.9f, want %.9f", id,
                      r->finish_s, fin);
    ck_assert_msg(r->preemptions == pre, "req %d: %d preemptions, want %d", id, r->preemptions,
                  pre);
}

static const sched_step *step_at(const golden *g, int64_t i)
{
    ck_assert_int_lt(i, g->res.n_steps);
    return &g->res.steps[i].step;
}

/* Scenario A: max_num_seqs blocks the head; idle-engine jump.
 * block 4, 10 blocks, max_seqs 2, every step 1 s (affine 1,0,0,0).
 *   r0 (t0, P8, O3)  r1 (t0, P8, O2)  r2 (t0, P4, O1)  r3 (t10, P4, O2)
 * t=0  admit r0 (2 blocks), r1 (2 blocks); r2 blocked: |R| = 2.
 *      prefill [r0 r1] -> t=1, both first token at 1.
 * t=1  r2 still blocked (|R| = 2): decode [r0 r1]; both stored 8 tokens, a
 *      multiple of 4, so each takes a block -> t=2; r1 has g=2=O: done at 2.
 * t=2  admit r2 (|R| = 1): prefill [r2] -> t=3; O=1 so r2 is done at 3.
 * t=3  decode [r0]: stored 9 tokens, no block -> t=4, g=3: done at 4.
 * t=4  nothing left until r3: the clock jumps to 10; prefill -> 11;
 *      decode (stored 4 -> new block) -> 12. */
START_TEST(test_admission_limits_and_idle_jump)
{
    const double rows[][4] = {{0, 8, 3, 0}, {0, 8, 2, 0}, {0, 4, 1, 0}, {10, 4, 2, 0}};
    golden g;
    golden_setup(&g, rows, 4, "affine:1,0,0,0");
    g.cfg.sched.max_seqs = 2;
    golden_run(&g);
    expect_req(&g, 0, SCHED_REQ_FINISHED, 1, 4, 0);
    expect_req(&g, 1, SCHED_REQ_FINISHED, 1, 2, 0);
    expect_req(&g, 2, SCHED_REQ_FINISHED, 3, 3, 0);
    expect_req(&g, 3, SCHED_REQ_FINISHED, 11, 12, 0);
    ck_assert_int_eq(g.res.n_steps, 6);
    /* step 1 is the decode where both took a block: 2+2+1+1 = 6 blocks */
    ck_assert_int_eq(step_at(&g, 1)->kind, SCHED_STEP_DECODE);
    ck_assert_int_eq(step_at(&g, 1)->kv_blocks_used, 6);
    ck_assert_int_eq(step_at(&g, 1)->n_waiting, 1);
    /* the idle jump: step 4 starts at r3's arrival */
    ck_assert(fabs(step_at(&g, 4)->start_s - 10.0) < EPS);
    ck_assert(fabs(g.res.sum.makespan_s - 12.0) < EPS);
    golden_free(&g);
}
END_TEST

/* Scenario B: head-of-line blocking on the token budget, exact affine costs.
 * max_batched_tokens 16; cost 1 + 0.01*tokens + 0.001*kv_read + 0.0001*prefill_sq.
 *   r0 (0, P10, O2)  r1 (0, P10, O2)  r2 (0, P2, O2)
 * t=0      admit r0 (10 tokens); r1 would make 20 > 16: stop.  r2 fits the
 *          budget but is behind the blocked head: the queue is strict.
 *          prefill [r0]: 1 + 0.10 + 0.0100 = 1.11 -> t=1.11.
 * t=1.11   admit r1 (10) and r2 (12 <= 16).  Prefill first, so r0 does not
 *          decode: 1 + 0.12 + 0.0001*(100+4) = 1.1304 -> t=2.2404.
 * t=2.2404 decode [r0 r1 r2]: contexts after 11, 11, 3 (kv_read 25),
 *          tokens 3: 1 + 0.03 + 0.025 = 1.055 -> t=3.2954; all reach O=2. */
START_TEST(test_head_of_line_blocking)
{
    const double rows[][4] = {{0, 10, 2, 0}, {0, 10, 2, 0}, {0, 2, 2, 0}};
    golden g;
    golden_setup(&g, rows, 3, "affine:1,0.01,0.001,0.0001");
    g.cfg.sched.max_batched_tokens = 16;
    golden_run(&g);
    expect_req(&g, 0, SCHED_REQ_FINISHED, 1.11, 3.2954, 0);
    expect_req(&g, 1, SCHED_REQ_FINISHED, 2.2404, 3.2954, 0);
    expect_req(&g, 2, SCHED_REQ_FINISHED, 2.2404, 3.2954, 0);
    ck_assert_int_eq(g.res.n_steps, 3);
    const sched_step *s1 = step_at(&g, 1);
    ck_assert_int_eq(s1->batch.n_prefill, 2);
    ck_assert_int_eq(s1->batch.tokens, 12);
    ck_assert_int_eq(s1->batch.prefill_sq, 104);
    const sched_step *s2 = step_at(&g, 2);
    ck_assert_int_eq(s2->batch.kv_read, 25);
    ck_assert_int_eq(s2->batch.n_decode, 3);
    /* TTFT p50 over {1.11, 2.2404, 2.2404} is the 2nd value (nearest rank) */
    ck_assert(fabs(g.res.sum.ttft.p50 - 2.2404) < EPS);
    /* throughput: 6 output tokens over 3.2954 s */
    ck_assert(fabs(g.res.sum.throughput_tok_s - 6.0 / 3.2954) < 1e-9);
    golden_free(&g);
}
END_TEST

/* Scenario C: recompute preemption of the request itself, and rejections.
 * block 4, 5 blocks, 1 s per step, max_model_len 20.
 *   r0 (0, P7, O4)  r1 (0, P7, O4)  r2 (0, P30, O2)  r3 (0, P10, O11)
 * t=0  admit r0 (2 blocks, F=3), r1 (2, F=1); r2 needs 8 > 5 blocks: rejected;
 *      r3 has P+O = 21 > 20: rejected.  prefill -> t=1 (g=1 each).
 * t=1  decode: stored 7 each, no block -> t=2 (g=2).
 * t=2  decode: stored 8 each: r0 takes the last block (F=0); r1 needs one,
 *      F=0, the victim is the last in FCFS order = r1 itself: preempted,
 *      frees 2 (F=2), keeps g=2.  decode [r0] -> t=3 (r0 g=3).
 * t=3  r1 needs P+g = 9 tokens = 3 blocks > F=2: blocked; decode [r0]
 *      (stored 9, no block) -> t=4: r0 done, frees 3 (F=5).
 * t=4  admit r1: prefill of 9 tokens -> t=5 (g=3; first token stays 1).
 * t=5  decode [r1] (stored 9) -> t=6: done. */
START_TEST(test_recompute_preemption_and_rejection)
{
    const double rows[][4] = {{0, 7, 4, 0}, {0, 7, 4, 0}, {0, 30, 2, 0}, {0, 10, 11, 0}};
    golden g;
    golden_setup(&g, rows, 4, "affine:1,0,0,0");
    g.cfg.sched.total_blocks = 5;
    g.cfg.sched.max_model_len = 20;
    golden_run(&g);
    expect_req(&g, 0, SCHED_REQ_FINISHED, 1, 4, 0);
    expect_req(&g, 1, SCHED_REQ_FINISHED, 1, 6, 1);
    expect_req(&g, 2, SCHED_REQ_REJECTED, NAN, NAN, 0);
    expect_req(&g, 3, SCHED_REQ_REJECTED, NAN, NAN, 0);
    ck_assert_int_eq(g.res.sum.n_rejected, 2);
    ck_assert_int_eq(g.res.sum.preemptions, 1);
    ck_assert_ptr_null(g.res.swaps); /* recompute: no swap state is kept */
    ck_assert_int_eq(step_at(&g, 2)->n_preempted, 1);
    ck_assert_int_eq(step_at(&g, 2)->batch.n_decode, 1);
    /* the recompute prefill processes P + g = 9 tokens */
    ck_assert_int_eq(step_at(&g, 4)->batch.tokens, 9);
    ck_assert_int_eq(step_at(&g, 4)->kind, SCHED_STEP_PREFILL);
    golden_free(&g);
}
END_TEST

/* Scenario D: the victim is another request (the last in policy order).
 * block 4, 4 blocks, 1 s per step.
 *   r0 (0, P8, O3)  r1 (0, P7, O3)
 * t=0  admit both (2 + 2 blocks, F=0); prefill -> t=1.
 * t=1  decode: r0 stored 8 needs a block, F=0: victim = r1 (last in FCFS
 *      order), frees 2; r0 takes one (F=1).  decode [r0] -> t=2.
 * t=2  r1 needs 8 tokens = 2 blocks > F=1: blocked.  decode [r0] (stored 9)
 *      -> t=3: r0 done, frees 3 (F=4).
 * t=3  admit r1 (P+g = 8 tokens, 2 blocks): prefill -> t=4 (g=2).
 * t=4  decode: r1 stored 8: takes a block -> t=5: done. */
START_TEST(test_preempt_other_victim)
{
    const double rows[][4] = {{0, 8, 3, 0}, {0, 7, 3, 0}};
    golden g;
    golden_setup(&g, rows, 2, "affine:1,0,0,0");
    g.cfg.sched.total_blocks = 4;
    golden_run(&g);
    expect_req(&g, 0, SCHED_REQ_FINISHED, 1, 3, 0);
    expect_req(&g, 1, SCHED_REQ_FINISHED, 1, 5, 1);
    ck_assert_int_eq(step_at(&g, 1)->kv_blocks_used, 3);
    golden_free(&g);
}
END_TEST

/* Scenario E: watermark.  10 blocks, watermark 0.2 -> 2 blocks kept free.
 *   r0 (0, P16, O2): 4 blocks, F=6.   r1 (0, P16, O2): 6-4 = 2 >= 2: admitted.
 *   r2 (0, P4, O1): 2-1 = 1 < 2: blocked although a block is free.
 *   r3 (0, P36, O1): 9 blocks > 10 - 2: can never be admitted: rejected
 *   (only when it reaches the head, after r2 is admitted).
 * t=0 prefill [r0 r1] -> 1.  t=1 r2 blocked; decode (stored 16: each takes a
 * block, F=0) -> 2: both done, F=10.  t=2 admit r2; r3 rejected; prefill
 * [r2] -> 3. */
START_TEST(test_watermark)
{
    const double rows[][4] = {{0, 16, 2, 0}, {0, 16, 2, 0}, {0, 4, 1, 0}, {0, 36, 1, 0}};
    golden g;
    golden_setup(&g, rows, 4, "affine:1,0,0,0");
    g.cfg.sched.watermark = 0.2;
    golden_run(&g);
    expect_req(&g, 0, SCHED_REQ_FINISHED, 1, 2, 0);
    expect_req(&g, 1, SCHED_REQ_FINISHED, 1, 2, 0);
    expect_req(&g, 2, SCHED_REQ_FINISHED, 3, 3, 0);
    expect_req(&g, 3, SCHED_REQ_REJECTED, NAN, NAN, 0);
    ck_assert_int_eq(step_at(&g, 1)->kv_blocks_used, 10);
    golden_free(&g);
}
END_TEST

/* Scenario F: static batching pads to the longest and holds short ones.
 * block 4, 100 blocks, max_seqs 2; cost 1 + 0.1*tokens + 0.01*kv_read.
 *   r0 (0, P4, O1)  r1 (0, P8, O3)  r2 (0, P2, O2)
 * batch 1 = [r0 r1]: Pmax 8, Omax 3, reserving 2 * ceil(11/4) = 6 blocks.
 *   prefill: 16 padded tokens: 1 + 1.6 = 2.6 -> t=2.6 (both first tokens)
 *   decode 1: 2 tokens, kv_read 2*9 = 18: 1 + 0.2 + 0.18 = 1.38 -> 3.98
 *   decode 2: kv_read 2*10 = 20: 1.4 -> 5.38; both finish at 5.38, r0 too.
 * batch 2 = [r2]: prefill 1 + 0.2 = 1.2 -> 6.58; decode kv_read 3:
 *   1 + 0.1 + 0.03 = 1.13 -> 7.71. */
START_TEST(test_static_batch_padding)
{
    const double rows[][4] = {{0, 4, 1, 0}, {0, 8, 3, 0}, {0, 2, 2, 0}};
    golden g;
    golden_setup(&g, rows, 3, "affine:1,0.1,0.01,0");
    g.cfg.sched.batching = SCHED_BATCHING_STATIC;
    g.cfg.sched.total_blocks = 100;
    g.cfg.sched.max_seqs = 2;
    golden_run(&g);
    expect_req(&g, 0, SCHED_REQ_FINISHED, 2.6, 5.38, 0);
    expect_req(&g, 1, SCHED_REQ_FINISHED, 2.6, 5.38, 0);
    expect_req(&g, 2, SCHED_REQ_FINISHED, 6.58, 7.71, 0);
    ck_assert_int_eq(g.res.n_steps, 5);
    ck_assert_int_eq(step_at(&g, 0)->kv_blocks_used, 6);
    ck_assert_int_eq(step_at(&g, 0)->batch.tokens, 16);
    ck_assert_int_eq(step_at(&g, 2)->batch.kv_read, 20);
    golden_free(&g);
}
END_TEST

/* Scenario G: the batch ends at the first request whose padded reservation
 * does not fit.  5 blocks:
 *   r0 (0, P4, O1): ceil(5/4) = 2 blocks alone.
 *   r1 (0, P8, O3): with it Pmax 8, Omax 3: 2 * ceil(11/4) = 6 > 5: ends the
 *   batch, although r2 (P2, O2) would have fitted beside r0.
 * 1 s steps: batch [r0]: prefill -> 1, done (O=1).
 * t=1 batch [r1] (r2 beside it would need 2 * 3 = 6 > 5): prefill -> 2,
 *     decodes -> 3, 4: done at 4.
 * t=4 batch [r2]: prefill -> 5, decode -> 6. */
START_TEST(test_static_batch_fit)
{
    const double rows[][4] = {{0, 4, 1, 0}, {0, 8, 3, 0}, {0, 2, 2, 0}};
    golden g;
    golden_setup(&g, rows, 3, "affine:1,0,0,0");
    g.cfg.sched.batching = SCHED_BATCHING_STATIC;
    g.cfg.sched.total_blocks = 5;
    golden_run(&g);
    expect_req(&g, 0, SCHED_REQ_FINISHED, 1, 1, 0);
    expect_req(&g, 1, SCHED_REQ_FINISHED, 2, 4, 0);
    expect_req(&g, 2, SCHED_REQ_FINISHED, 5, 6, 0);
    golden_free(&g);
}
END_TEST


/* Scenario H: priority overtakes FCFS.  max_seqs 1, 1 s steps.
 *   r0 (0, P4, O2, prio 1)  r1 (0.5, P4, O1, prio 1)  r2 (0.5, P4, O1, prio 0)
 * t=0 prefill [r0] -> 1.  t=1 W = {r1, r2}; r0 still runs (max_seqs 1):
 * decode -> 2, r0 done.  t=2 the head in (priority, arrival, id) order is
 * r2, although r1 arrived as early and has the smaller id: r2 -> 3, then
 * r1 -> 4.  Under FCFS r1 would finish at 3 and r2 at 4. */
START_TEST(test_priority_overtakes)
{
    const double rows[][4] = {{0, 4, 2, 1}, {0.5, 4, 1, 1}, {0.5, 4, 1, 0}};
    for (int pol = 0; pol < 2; pol++) {
        golden g;
        golden_setup(&g, rows, 3, "affine:1,0,0,0");
        g.cfg.sched.max_seqs = 1;
        g.cfg.sched.policy = pol ? SCHED_POLICY_PRIORITY : SCHED_POLICY_FCFS;
        golden_run(&g);
        expect_req(&g, 0, SCHED_REQ_FINISHED, 1, 2, 0);
        expect_req(&g, 1, SCHED_REQ_FINISHED, pol ? 4 : 3, pol ? 4 : 3, 0);
        expect_req(&g, 2, SCHED_REQ_FINISHED, pol ? 3 : 4, pol ? 3 : 4, 0);
        golden_free(&g);
    }
}
END_TEST

/* Scenario I: priority preemption.  max_seqs 1, 1 s steps.
 *   r0 (0, P4, O3, prio 1)  r1 (0.5, P4, O1, prio 0)
 * t=0 prefill [r0] -> 1 (g=1).
 * t=1 r1 is blocked by max_seqs; r0 has a worse key: preempted (recompute,
 *     keeps g=1).  The decode step is now empty and takes no time; the next
 *     iteration at t=1 admits r1: prefill -> 2, done.
 * t=2 r0 re-prefills P+g = 5 tokens -> 3 (g=2); decode -> 4, done. */
START_TEST(test_priority_preemption)
{
    const double rows[][4] = {{0, 4, 3, 1}, {0.5, 4, 1, 0}};
    golden g;
    golden_setup(&g, rows, 2, "affine:1,0,0,0");
    g.cfg.sched.max_seqs = 1;
    g.cfg.sched.policy = SCHED_POLICY_PRIORITY;
    g.cfg.sched.priority_preemption = 1;
    golden_run(&g);
    expect_req(&g, 0, SCHED_REQ_FINISHED, 1, 4, 1);
    expect_req(&g, 1, SCHED_REQ_FINISHED, 2, 2, 0);
    ck_assert_int_eq(g.res.sum.preempt_priority, 1);
    ck_assert_int_eq(g.res.n_steps, 4);
    /* the preemption happened in the empty iteration at t=1; it is reported
     * with the step formed at that instant, the prefill of r1 */
    ck_assert_int_eq(step_at(&g, 1)->n_preempted, 1);
    ck_assert_int_eq(step_at(&g, 2)->batch.tokens, 5);
    golden_free(&g);
}
END_TEST

/* Scenario J: swap out and in with transfer time.  4 blocks of 4 tokens,
 * swap space 10 blocks, 0.5 s per block moved, 1 s compute per step.
 *   r0 (0, P8, O3)  r1 (0, P7, O3)
 * t=0 prefill both (2 + 2 blocks, F=0) -> 1.
 * t=1 r0 (stored 8) needs a block, F=0: victim r1 is swapped out (2 blocks
 *     to host, F=2); r0 takes one (F=1).  decode [r0]: 1 + 2*0.5 = 2 -> 3.
 * t=3 r1 is swapped out, so nothing is admitted; r0 decodes (stored 9).
 *     Swap-in of r1 needs 2 blocks > F=1: not yet.  -> 4: r0 done (F=4).
 * t=4 swap-in r1 (2 blocks, F=2), decoding in the same step (stored 7, the
 *     new token fits its second block): 1 + 2*0.5 = 2 -> 6 (g=2).
 * t=6 r1 stored 8 takes a block -> 7: done.  Time swapped: 1 -> 4 = 3 s. */
START_TEST(test_swap_out_in)
{
    const double rows[][4] = {{0, 8, 3, 0}, {0, 7, 3, 0}};
    golden g;
    golden_setup(&g, rows, 2, "affine:1,0,0,0");
    g.cfg.sched.total_blocks = 4;
    g.cfg.sched.preemption = SCHED_PREEMPT_SWAP;
    g.cfg.sched.swap_blocks = 10;
    g.cfg.sched.swap_block_s = 0.5;
    golden_run(&g);
    expect_req(&g, 0, SCHED_REQ_FINISHED, 1, 4, 0);
    expect_req(&g, 1, SCHED_REQ_FINISHED, 1, 7, 1);
    ck_assert_ptr_nonnull(g.res.swaps); /* swap state: only with swap preemption */
    ck_assert_int_eq(g.res.swaps[1].swaps, 1);
    ck_assert(fabs(g.res.swaps[1].swapped_s - 3.0) < EPS);
    ck_assert_int_eq(g.res.swaps[0].swaps, 0);
    ck_assert_int_eq(g.res.sum.preempt_swap, 1);
    ck_assert_int_eq(step_at(&g, 1)->swap_out_blocks, 2);
    ck_assert(fabs(step_at(&g, 1)->dur_s - 2.0) < EPS);
    ck_assert_int_eq(step_at(&g, 3)->swap_in_blocks, 2);
    ck_assert(fabs(step_at(&g, 3)->dur_s - 2.0) < EPS);
    golden_free(&g);
}
END_TEST

/* Scenario K: reserved allocation admits fewer requests than paged.
 * 8 blocks of 4 tokens, max_model_len 16, 1 s steps; r0..r2 (0, P4, O2).
 *   paged: 1 block each: all three in the first prefill -> 1, decode -> 2.
 *   reserved: ceil(16/4) = 4 blocks each: r0, r1 fill the cache; r2 waits
 *     until they finish at 2: prefill -> 3, decode -> 4.
 *   reserved-oracle: ceil(6/4) = 2 blocks each: all three fit (6 <= 8). */
START_TEST(test_reserved_vs_paged)
{
    const double rows[][4] = {{0, 4, 2, 0}, {0, 4, 2, 0}, {0, 4, 2, 0}};
    const sched_alloc allocs[3] = {SCHED_ALLOC_PAGED, SCHED_ALLOC_RESERVED,
                                   SCHED_ALLOC_RESERVED_ORACLE};
    const int first_prefill[3] = {3, 2, 3};
    const double r2_finish[3] = {2, 4, 2};
    for (int a = 0; a < 3; a++) {
        golden g;
        golden_setup(&g, rows, 3, "affine:1,0,0,0");
        g.cfg.sched.total_blocks = 8;
        g.cfg.sched.max_model_len = 16;
        g.cfg.sched.alloc = allocs[a];
        golden_run(&g);
        ck_assert_int_eq(step_at(&g, 0)->batch.n_prefill, first_prefill[a]);
        expect_req(&g, 2, SCHED_REQ_FINISHED, r2_finish[a] - 1, r2_finish[a], 0);
        golden_free(&g);
    }
}
END_TEST

/* Scenario L: --preemption off skips a decode that finds no block.
 * 4 blocks of 4 tokens, 1 s steps.  r0 (0, P8, O3)  r1 (0, P7, O3)
 * t=0 prefill both (F=0) -> 1.  t=1 r0 needs a block, none free and no
 * preemption: r0 is skipped; r1 (stored 7) decodes -> 2 (r1 g=2).
 * t=2 r0 skipped again; r1 (stored 8) needs a block: skipped too: every
 * running request is stuck, so the run fails with a clear message. */
START_TEST(test_preemption_off_stuck)
{
    const double rows[][4] = {{0, 8, 3, 0}, {0, 7, 3, 0}};
    golden g;
    golden_setup(&g, rows, 2, "affine:1,0,0,0");
    g.cfg.sched.total_blocks = 4;
    g.cfg.sched.preemption = SCHED_PREEMPT_OFF;
    kvs_err err;
    ck_assert_int_eq(run_execute(&g.cfg, &g.tr, &g.cost, &g.res, &err), KVS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "stuck at t=2"));
    /* With 5 blocks (F=1 after the prefill): t=1 r0 takes the free block,
     * both decode -> 2.  t=2 r1 (stored 8) finds no block: skipped, r0
     * decodes -> 3: done, F=3.  t=3 r1 takes a block -> 4: done. */
    g.cfg.sched.total_blocks = 5;
    golden_run(&g);
    expect_req(&g, 0, SCHED_REQ_FINISHED, 1, 3, 0);
    expect_req(&g, 1, SCHED_REQ_FINISHED, 1, 4, 0);
    ck_assert_int_eq(step_at(&g, 2)->batch.n_decode, 1);
    golden_free(&g);
}
END_TEST


/* Scenario M: an arrival at the exact instant a step ends is seen by the
 * next iteration (step ends, then arrivals, then the engine decides).
 *   r0 (0, P4, O3)  r1 (1, P4, O1); 1 s steps.
 * t=0 prefill [r0] -> 1.  At t=1 r1 arrives as the step ends: the next
 * iteration admits it (prefill first): prefill [r1] -> 2, r1 done.  Then r0
 * decodes -> 3, -> 4.  Had the engine decided before the arrival, r0 would
 * have decoded at t=1 and finished at 3. */
START_TEST(test_arrival_at_step_end)
{
    const double rows[][4] = {{0, 4, 3, 0}, {1, 4, 1, 0}};
    golden g;
    golden_setup(&g, rows, 2, "affine:1,0,0,0");
    golden_run(&g);
    expect_req(&g, 0, SCHED_REQ_FINISHED, 1, 4, 0);
    expect_req(&g, 1, SCHED_REQ_FINISHED, 2, 2, 0);
    ck_assert_int_eq(step_at(&g, 1)->kind, SCHED_STEP_PREFILL);
    golden_free(&g);
}
END_TEST


/* Scenario N: static batching with --batch-timeout 5 (kvsim extension):
 * an idle engine waits until the queue holds max_seqs requests or 5 s have
 * passed since max(engine idle, head arrival); with no arrival left it
 * starts at once.  max_seqs 2, 1 s steps, every output 1 token.
 *   r0 (0, P4)  r1 (3, P4)  r2 (4, P4)  r3 (20, P4)
 * t=0  r0 alone: wait until 0 + 5.
 * t=3  r1 arrives: two waiting = max_seqs: batch [r0 r1] -> 4.
 * t=4  r2 arrives as the batch ends: wait until max(4, 4) + 5 = 9 -> 10.
 * t=20 r3 is the last arrival: no reason to wait -> 21. */
START_TEST(test_static_batch_timeout)
{
    const double rows[][4] = {{0, 4, 1, 0}, {3, 4, 1, 0}, {4, 4, 1, 0}, {20, 4, 1, 0}};
    golden g;
    golden_setup(&g, rows, 4, "affine:1,0,0,0");
    g.cfg.sched.batching = SCHED_BATCHING_STATIC;
    g.cfg.sched.max_seqs = 2;
    g.cfg.sched.batch_timeout_s = 5;
    golden_run(&g);
    expect_req(&g, 0, SCHED_REQ_FINISHED, 4, 4, 0);
    expect_req(&g, 1, SCHED_REQ_FINISHED, 4, 4, 0);
    expect_req(&g, 2, SCHED_REQ_FINISHED, 10, 10, 0);
    expect_req(&g, 3, SCHED_REQ_FINISHED, 21, 21, 0);
    ck_assert_int_eq(g.res.n_steps, 3);
    ck_assert(fabs(step_at(&g, 1)->start_s - 9.0) < EPS);
    golden_free(&g);
}
END_TEST

/* The waiting heap against a model of itself: sorting. */
START_TEST(test_waitq_matches_sort)
{
    enum { N = 2000 };
    trace_req *reqs = calloc(N, sizeof *reqs);
    uint64_t x = 12345;
    for (int i = 0; i < N; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        reqs[i].arrival_s = (double)((x >> 33) % 50); /* many ties */
        reqs[i].priority = (int32_t)((x >> 20) % 3);
    }
    for (int p = 0; p < 2; p++) {
        const sched_policy_vt *pol = sched_policy_vt_get((sched_policy)p);
        sched_waitq q;
        ck_assert_int_eq(sched_waitq_init(&q, N, reqs, pol), 0);
        /* interleave pushes and pops; compare every pop with a linear scan */
        char *in = calloc(N, 1);
        int pushed = 0;
        for (int round = 0; round < 2 * N; round++) {
            if (pushed < N && (round % 3 != 2 || q.n == 0)) {
                sched_waitq_push(&q, pushed);
                in[pushed++] = 1;
            } else if (q.n > 0) {
                int best = -1;
                for (int i = 0; i < pushed; i++)
                    if (in[i] && (best < 0 || pol->cmp(reqs, i, best) < 0))
                        best = i;
                int got = sched_waitq_pop(&q);
                ck_assert_int_eq(got, best);
                in[got] = 0;
            }
        }
        free(in);
        sched_waitq_free(&q);
    }
    free(reqs);
}
END_TEST

/* Run engine s alone on request id, arrived at t=0, until it idles. */
static void drive_one(sched *s, int64_t id)
{
    sched_arrive(s, id);
    double now = 0.0, t_end;
    while (sched_plan_step(s, now, 0, &t_end) == SCHED_PLAN_STEP) {
        now = t_end;
        sched_finish_step(s, now);
    }
}

/* sched_init_shared: engine B keeps its per-request state in owner A's
 * arrays.  1 s steps (affine 1,0,0,0), block 4, 10 blocks.
 *   r0 (t0, P4, O2) goes to A: prefill 0 -> 1 (first token), decode -> 2.
 *   r1 (t0, P4, O3) goes to B: prefill 0 -> 1, decodes -> 2, -> 3.
 * Both results are in the one array, each written by its own engine, and
 * each engine's counters count only its own request.  An owner for another
 * n is not shared with (C keeps its own array, r1 still pending there). */
START_TEST(test_shared_requests)
{
    const double rows[][4] = {{0, 4, 2, 0}, {0, 4, 3, 0}};
    golden g;
    golden_setup(&g, rows, 2, "affine:1,0,0,0");
    sched_config sc;
    run_config_sched(&g.cfg, &sc);
    kvs_err err;
    sched *a, *b, *c;
    ck_assert_int_eq(sched_init(&a, &sc, g.tr.reqs, 2, &g.cost, &err), KVS_OK);
    ck_assert_int_eq(sched_init_shared(&b, &sc, g.tr.reqs, 2, &g.cost, a, &err), KVS_OK);
    ck_assert_int_eq(sched_init_shared(&c, &sc, g.tr.reqs, 1, &g.cost, a, &err), KVS_OK);
    ck_assert_ptr_eq(sched_results(a), sched_results(b));
    ck_assert_ptr_ne(sched_results(a), sched_results(c));
    drive_one(a, 0);
    drive_one(b, 1);
    const sched_req_result *r = sched_results(a);
    ck_assert_int_eq(r[0].status, SCHED_REQ_FINISHED);
    ck_assert_int_eq(r[1].status, SCHED_REQ_FINISHED);
    ck_assert(fabs(r[0].first_token_s - 1) < EPS && fabs(r[0].finish_s - 2) < EPS);
    ck_assert(fabs(r[1].first_token_s - 1) < EPS && fabs(r[1].finish_s - 3) < EPS);
    sched_counters ca, cb;
    sched_get_counters(a, &ca);
    sched_get_counters(b, &cb);
    ck_assert_int_eq(ca.n_finished, 1);
    ck_assert_int_eq(cb.n_finished, 1);
    ck_assert_int_eq(sched_results(c)[0].status, SCHED_REQ_PENDING);
    sched_free(c);
    sched_free(b);
    sched_free(a);
    golden_free(&g);
}
END_TEST

START_TEST(test_bad_config)
{
    const double rows[][4] = {{0, 4, 1, 0}};
    golden g;
    golden_setup(&g, rows, 1, "affine:1,0,0,0");
    kvs_err err;
    sched *s;
    sched_config c = g.cfg.sched;
    c.block_size = 0;
    ck_assert_int_eq(sched_init(&s, &c, g.tr.reqs, 1, &g.cost, &err), KVS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "--block-size"));
    c = g.cfg.sched;
    c.batch_timeout_s = 1.0;
    ck_assert_int_eq(sched_init(&s, &c, g.tr.reqs, 1, &g.cost, &err), KVS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "--batch-timeout"));
    c = g.cfg.sched;
    c.preemption = SCHED_PREEMPT_SWAP;
    c.swap_blocks = 0;
    ck_assert_int_eq(sched_init(&s, &c, g.tr.reqs, 1, &g.cost, &err), KVS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "--swap-gib"));
    c = g.cfg.sched;
    c.priority_preemption = 1;
    ck_assert_int_eq(sched_init(&s, &c, g.tr.reqs, 1, &g.cost, &err), KVS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "--policy priority"));
    golden_free(&g);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sched");
    TCase *tc = tcase_create("golden");
    tcase_add_test(tc, test_admission_limits_and_idle_jump);
    tcase_add_test(tc, test_head_of_line_blocking);
    tcase_add_test(tc, test_recompute_preemption_and_rejection);
    tcase_add_test(tc, test_preempt_other_victim);
    tcase_add_test(tc, test_watermark);
    tcase_add_test(tc, test_static_batch_padding);
    tcase_add_test(tc, test_static_batch_fit);
    tcase_add_test(tc, test_bad_config);
    tcase_add_test(tc, test_shared_requests);
    tcase_add_test(tc, test_priority_overtakes);
    tcase_add_test(tc, test_priority_preemption);
    tcase_add_test(tc, test_swap_out_in);
    tcase_add_test(tc, test_reserved_vs_paged);
    tcase_add_test(tc, test_preemption_off_stuck);
    tcase_add_test(tc, test_arrival_at_step_end);
    tcase_add_test(tc, test_static_batch_timeout);
    suite_add_tcase(s, tc);
    TCase *tq = tcase_create("waitq");
    tcase_add_test(tq, test_waitq_matches_sort);
    suite_add_tcase(s, tq);
    return tu_run_suites(&s, 1);
}
