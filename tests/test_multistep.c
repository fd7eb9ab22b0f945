/* test_multistep.c — V0 multi-step scheduling, --num-scheduler-steps K
 * (docs/semantics-extensions.md M), worked by hand under
 * affine:c0,c1,c2,c3 = 1, 0.1, 0.01, 0 (a step takes 1 + 0.1 tokens + 0.01
 * kv_read; an affine model has no CPU part, so M5 changes nothing here),
 * block size 4, watermark 0, K = 3.
 *
 * Scenario 1 (plenty of blocks): A (0 s, P 4, O 5), B (0.5 s, P 2, O 2),
 * C (4.0 s, P 4, O 1).
 *   step 0  t 0     prefill [A]: 4 tokens -> 1.4, ends 1.4. A's first token;
 *                   A holds 1 block, room 0.  B arrives at 0.5.
 *   step 1  t 1.4   prefill [B]: 2 tokens -> 1.2, ends 2.6. B's first token;
 *                   B holds 1 block, room 2.
 *   step 2  t 2.6   a group starts (M2): A has room 0 < 3, takes
 *                   ceil(3/4) = 1 block (room 4); B room 2 < 3 takes 1
 *                   (room 6).  Decode [A B], contexts 5 and 3, kv_read 8 ->
 *                   1 + 0.2 + 0.08 = 1.28, ends 3.88, held.  B makes its
 *                   2nd and last token here.
 *   step 3  t 3.88  the group goes on, no scheduling (M1): contexts 6 and 4
 *                   (B keeps decoding, M3), kv_read 10 -> 1.30, ends 5.18,
 *                   held.  C arrives at 4.0 and waits.
 *   step 4  t 5.18  contexts 7 and 5, kv_read 12 -> 1.32, ends 6.50: the
 *                   group's tokens are delivered; B finishes at 6.50 (M4).
 *   step 5  t 6.50  the scheduler runs: C is admitted, prefill [C] 4 tokens
 *                   -> 1.4, ends 7.90; C's only token, C finishes.
 *   step 6  t 7.90  a group for A: room 1 < 3, takes 1 block; context 8 ->
 *                   1 + 0.1 + 0.08 = 1.18, ends 9.08, held (A's 5th token).
 *   step 7  t 9.08  context 9 -> 1.19, ends 10.27, held.
 *   step 8  t 10.27 context 10 -> 1.20, ends 11.47: A finishes at 11.47.
 * Token gaps (ITL, one per delivery after the first): A 1.4 -> 6.50 (5.10)
 * and 6.50 -> 11.47 (4.97); B 2.6 -> 6.50 (3.90); C none.  n_itl 3, mean
 * 13.97 / 3.  C's TTFT is 3.90: the group's 2.5 s, then its prefill.
 *
 * Scenario 2 (M2 preempts): 3 blocks, A (0 s, P 4, O 4), B (0 s, P 4, O 2).
 *   step 0  t 0     prefill [A B]: 8 tokens -> 1.8. Both first tokens; each
 *                   holds 1 block (room 0); 1 block free.
 *   step 1  t 1.8   group start: A takes the free block; B needs 1, none
 *                   is free: the policy-last request (B, fcfs) is preempted,
 *                   itself (recompute, g = 1).  Decode [A], context 5 ->
 *                   1 + 0.1 + 0.05 = 1.15, ends 2.95, held; 1 preempted.
 *   step 2  t 2.95  context 6 -> 1.16, ends 4.11, held.
 *   step 3  t 4.11  context 7 -> 1.17, ends 5.28: A's 4th token delivered,
 *                   A finishes; its 2 blocks are free.
 *   step 4  t 5.28  B comes back: P + g = 5 tokens, 2 blocks; prefill [B]
 *                   -> 1 + 0.5 = 1.5, ends 6.78 with B's 2nd and last token.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/run.h"
#include "testutil.h"

#define EPS 1e-9

static void setup(golden *g, const double (*rows)[3], int n, int64_t blocks)
{
    tu_golden_init(g, &rows[0][0], 3, n, "affine:1,0.1,0.01,0");
    sched_config *c = &g->cfg.sched;
    c->engine = SCHED_ENGINE_VLLM_V0;
    c->block_size = 4;
    c->total_blocks = blocks;
    c->watermark = 0.0;
    c->max_batched_tokens = 1000;
    c->max_model_len = 1000;
    c->num_scheduler_steps = 3;
    golden_run(g);
}

static void expect_step(const golden *g, int i, int kind, double start, double end, int held)
{
    const sched_step *s = &g->res.steps[i].step;
    ck_assert_int_eq(s->kind, kind);
    ck_assert_msg(fabs(s->start_s - start) < EPS, "step %d starts at %.9f", i, s->start_s);
    ck_assert_msg(fabs(s->start_s + s->dur_s - end) < EPS, "step %d ends at %.9f", i,
                  s->start_s + s->dur_s);
    ck_assert_int_eq(s->held, held);
}

START_TEST(test_groups_hold_tokens_and_arrivals)
{
    const double rows[][3] = {{0, 4, 5}, {0.5, 2, 2}, {4.0, 4, 1}};
    golden g;
    setup(&g, rows, 3, 100);
    ck_assert_int_eq(g.res.n_steps, 9);
    const int P = SCHED_STEP_PREFILL, D = SCHED_STEP_DECODE;
    expect_step(&g, 0, P, 0.0, 1.4, 0);
    expect_step(&g, 1, P, 1.4, 2.6, 0);
    expect_step(&g, 2, D, 2.6, 3.88, 1);
    expect_step(&g, 3, D, 3.88, 5.18, 1);
    expect_step(&g, 4, D, 5.18, 6.50, 0);
    expect_step(&g, 5, P, 6.50, 7.90, 0);
    expect_step(&g, 6, D, 7.90, 9.08, 1);
    expect_step(&g, 7, D, 9.08, 10.27, 1);
    expect_step(&g, 8, D, 10.27, 11.47, 0);
    /* B keeps decoding after its last token (M3): 2 members in steps 2-4 */
    ck_assert_int_eq(g.res.steps[3].step.batch.n_decode, 2);
    ck_assert_int_eq(g.res.steps[4].step.batch.kv_read, 12);
    /* the group's later steps: nothing may join; C waits in step 3 only */
    ck_assert_int_eq(g.res.steps[3].step.limit, SCHED_LIMIT_NONE_WAITING);
    ck_assert_int_eq(g.res.steps[4].step.limit, SCHED_LIMIT_OTHER);
    const sched_req_result *r = g.res.reqs;
    ck_assert(fabs(r[0].first_token_s - 1.4) < EPS && fabs(r[0].finish_s - 11.47) < EPS);
    ck_assert(fabs(r[1].first_token_s - 2.6) < EPS && fabs(r[1].finish_s - 6.50) < EPS);
    ck_assert(fabs(r[2].first_token_s - 7.90) < EPS && fabs(r[2].finish_s - 7.90) < EPS);
    /* one gap per delivery after the first (M4) */
    ck_assert_int_eq(g.res.sum.n_itl, 3);
    ck_assert(fabs(g.res.sum.itl.mean - 13.97 / 3) < EPS);
    ck_assert(fabs(g.res.max_itl_s[0] - 5.10) < EPS);
    ck_assert(fabs(g.res.max_itl_s[1] - 3.90) < EPS);
    ck_assert(isnan(g.res.max_itl_s[2]));
    /* the replay of the recorded steps (--result-json-detail) agrees */
    double *gaps;
    int64_t *off;
    ck_assert_int_eq(run_request_itls(&g.res, &gaps, &off), 0);
    ck_assert_int_eq(off[1] - off[0], 2);
    ck_assert(fabs(gaps[off[0]] - 5.10) < EPS && fabs(gaps[off[0] + 1] - 4.97) < EPS);
    ck_assert_int_eq(off[2] - off[1], 1);
    ck_assert(fabs(gaps[off[1]] - 3.90) < EPS);
    ck_assert_int_eq(off[3] - off[2], 0);
    free(gaps);
    free(off);
    /* steps 2-4: A and B hold 2 blocks each; A ends holding 3 */
    ck_assert_int_eq(g.res.sum.peak_kv_blocks, 4);
    golden_free(&g);
}
END_TEST

START_TEST(test_group_start_preempts)
{
    const double rows[][3] = {{0, 4, 4}, {0, 4, 2}};
    golden g;
    setup(&g, rows, 2, 3);
    ck_assert_int_eq(g.res.n_steps, 5);
    const int P = SCHED_STEP_PREFILL, D = SCHED_STEP_DECODE;
    expect_step(&g, 0, P, 0.0, 1.8, 0);
    expect_step(&g, 1, D, 1.8, 2.95, 1);
    expect_step(&g, 2, D, 2.95, 4.11, 1);
    expect_step(&g, 3, D, 4.11, 5.28, 0);
    expect_step(&g, 4, P, 5.28, 6.78, 0);
    ck_assert_int_eq(g.res.steps[1].step.n_preempted, 1);
    ck_assert_int_eq(g.res.steps[1].step.limit, SCHED_LIMIT_KV);
    ck_assert_int_eq(g.res.steps[4].step.batch.tokens, 5); /* P + g */
    const sched_req_result *r = g.res.reqs;
    ck_assert(fabs(r[0].finish_s - 5.28) < EPS);
    ck_assert(fabs(r[1].first_token_s - 1.8) < EPS && fabs(r[1].finish_s - 6.78) < EPS);
    ck_assert_int_eq(r[1].preemptions, 1);
    ck_assert_int_eq(r[0].preemptions, 0);
    golden_free(&g);
}
END_TEST

/* K = 1 is the plain iteration: the same steps as a run without the flag. */
START_TEST(test_one_step_is_plain)
{
    const double rows[][3] = {{0, 4, 5}, {0.5, 2, 2}, {4.0, 4, 1}};
    golden a, b;
    tu_golden_init(&a, &rows[0][0], 3, 3, "affine:1,0.1,0.01,0");
    tu_golden_init(&b, &rows[0][0], 3, 3, "affine:1,0.1,0.01,0");
    a.cfg.sched.block_size = b.cfg.sched.block_size = 4;
    a.cfg.sched.total_blocks = b.cfg.sched.total_blocks = 100;
    a.cfg.sched.max_batched_tokens = b.cfg.sched.max_batched_tokens = 1000;
    a.cfg.sched.max_model_len = b.cfg.sched.max_model_len = 1000;
    a.cfg.sched.num_scheduler_steps = 1;
    b.cfg.sched.num_scheduler_steps = 0;
    golden_run(&a);
    golden_run(&b);
    ck_assert_int_eq(a.res.n_steps, b.res.n_steps);
    for (int64_t i = 0; i < a.res.n_steps; i++) {
        ck_assert_double_eq(a.res.steps[i].step.dur_s, b.res.steps[i].step.dur_s);
        ck_assert_int_eq(a.res.steps[i].step.held, 0);
    }
    for (int i = 0; i < 3; i++)
        ck_assert_double_eq(a.res.reqs[i].finish_s, b.res.reqs[i].finish_s);
    golden_free(&a);
    golden_free(&b);
}
END_TEST

/* M5: under the roofline a group's later steps leave out the step's CPU
 * overhead (step_overhead_s, 3 ms by default), its first step keeps it. */
START_TEST(test_later_steps_skip_the_overhead)
{
    const double rows[][3] = {{0, 64, 40}};
    golden g;
    tu_golden_init(&g, &rows[0][0], 3, 1, "affine:1,0,0,0");
    cost_model_free(&g.cost);
    model_spec m;
    gpu_spec gg;
    kvs_err err;
    ck_assert_int_eq(model_lookup("llama-3-8b", &m, &err), 0);
    ck_assert_int_eq(gpu_lookup("a100-80g", &gg, &err), 0);
    ck_assert_int_eq(cost_model_create("roofline:step_overhead_ms=3", &m, &gg, 1, &g.cost, &err),
                     0);
    g.cfg.sched.block_size = 16;
    g.cfg.sched.total_blocks = 1000;
    g.cfg.sched.max_batched_tokens = 4096;
    g.cfg.sched.max_model_len = 4096;
    g.cfg.sched.num_scheduler_steps = 4;
    golden_run(&g);
    /* steps 1..4: one group (context 65..68); step 5 starts the next */
    ck_assert_int_eq(g.res.steps[0].step.kind, SCHED_STEP_PREFILL);
    for (int i = 1; i <= 5; i++) {
        const double full = cost_step_s(&g.cost, &g.res.steps[i].step.batch);
        const double want = i == 5 || i == 1 ? full : full - 3e-3;
        ck_assert_msg(fabs(g.res.steps[i].step.dur_s - want) < 1e-12, "step %d", i);
    }
    golden_free(&g);
}
END_TEST

/* Random traces under fcfs and priority (with priority preemption), K in
 * 2..16: every request finishes or is rejected; a group is K decode steps
 * over one member list, held but for the last (M1, M4); the blocks in use
 * in its j-th step are exactly sum over members of ceil((context - j + K) /
 * bs), the context at the group's start plus its K tokens (M2, an
 * independent recount); steps report every preemption; the replayed gaps
 * are the summary's; the same inputs give the same rows. */
static void check_groups(const run_result *res, const sched_config *c, const char *what)
{
    const int64_t K = c->num_scheduler_steps, bs = c->block_size;
    int64_t j = 0, groups = 0;
    for (int64_t i = 0; i < res->n_steps; i++) {
        const sched_step *st = &res->steps[i].step;
        const int64_t lo = res->steps[i].member_off;
        const int64_t hi = i + 1 < res->n_steps ? res->steps[i + 1].member_off : res->n_members;
        ck_assert_msg(st->kv_blocks_used <= c->total_blocks, "%s: over the cache", what);
        if (st->kind != SCHED_STEP_DECODE) {
            ck_assert_msg(j == 0 || j == K, "%s step %lld: a group cut short", what, (long long)i);
            ck_assert_int_eq(st->held, 0);
            j = 0;
            continue;
        }
        const int cont = j > 0 && j < K;
        j = cont ? j + 1 : 1;
        groups += j == 1;
        ck_assert_msg(st->held == (j < K), "%s step %lld: held %d at %lld of %lld", what,
                      (long long)i, st->held, (long long)j, (long long)K);
        if (cont) { /* the same members as the step before, one token further */
            const run_step_rec *p = &res->steps[i - 1];
            ck_assert_int_eq(hi - lo, lo - p->member_off);
            ck_assert_int_eq(st->n_preempted, 0);
            for (int64_t k = 0; k < hi - lo; k++) {
                ck_assert_int_eq(res->members[lo + k].req_id, res->members[p->member_off + k].req_id);
                ck_assert_int_eq(res->members[lo + k].context,
                                 res->members[p->member_off + k].context + 1);
            }
        }
        int64_t want = 0;
        for (int64_t k = lo; k < hi; k++)
            want += (res->members[k].context - j + K + bs - 1) / bs;
        ck_assert_msg(want == st->kv_blocks_used, "%s step %lld: %lld blocks in use, members "
                      "hold %lld", what, (long long)i, (long long)st->kv_blocks_used,
                      (long long)want);
    }
    ck_assert_msg(j == 0 || j == K, "%s: the last group cut short", what);
    ck_assert_msg(groups > 0, "%s: no group", what);
}

START_TEST(test_random_groups)
{
    kvs_err err;
    cost_model cost;
    tu_cost_affine(&cost);
    static const tu_variant variants[] = {
        {"fcfs", SCHED_BATCHING_CONTINUOUS, SCHED_POLICY_FCFS, 0, SCHED_ALLOC_PAGED,
         SCHED_PREEMPT_RECOMPUTE},
        {"priority+preemption", SCHED_BATCHING_CONTINUOUS, SCHED_POLICY_PRIORITY, 1,
         SCHED_ALLOC_PAGED, SCHED_PREEMPT_RECOMPUTE},
    };
    static const int64_t ks[] = {2, 3, 5, 8, 16};
    int64_t preempted = 0;
    for (int v = 0; v < 2; v++)
        for (uint64_t seed = 1; seed <= 20; seed++) {
            trace tr;
            tu_random_trace(&tr, 150, seed * 104729 + (uint64_t)v, 120, 60, 1);
            run_config cfg;
            tu_variant_config(&cfg, &variants[v], seed);
            cfg.sched.num_scheduler_steps = ks[seed % 5];
            char what[96];
            snprintf(what, sizeof what, "%s K %lld seed %llu", variants[v].name,
                     (long long)cfg.sched.num_scheduler_steps, (unsigned long long)seed);
            run_result res, again;
            ck_assert_msg(run_execute(&cfg, &tr, &cost, &res, &err) == 0, "%s: %s", what,
                          err.msg);
            check_groups(&res, &cfg.sched, what);
            tu_check_outcomes(&tr, &res);
            int64_t step_pre = 0;
            for (int64_t i = 0; i < res.n_steps; i++)
                step_pre += res.steps[i].step.n_preempted;
            ck_assert_int_eq(step_pre, res.sum.preemptions);
            preempted += step_pre;
            double *gaps;
            int64_t *off;
            ck_assert_int_eq(run_request_itls(&res, &gaps, &off), 0);
            ck_assert_int_eq(off[tr.n], res.sum.n_itl);
            for (int64_t i = 0; i < tr.n; i++)
                for (int64_t k = off[i]; k < off[i + 1]; k++)
                    ck_assert(gaps[k] > 0 && gaps[k] <= res.max_itl_s[i]);
            free(gaps);
            free(off);
            ck_assert_int_eq(run_execute(&cfg, &tr, &cost, &again, &err), 0);
            ck_assert_int_eq(again.n_steps, res.n_steps);
            ck_assert(memcmp(again.reqs, res.reqs, (size_t)tr.n * sizeof *res.reqs) == 0);
            run_result_free(&again);
            run_result_free(&res);
            free(tr.reqs);
        }
    ck_assert_msg(preempted > 0, "no run preempted: the block rule went untested");
    cost_model_free(&cost);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("multistep");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_groups_hold_tokens_and_arrivals);
    tcase_add_test(tc, test_group_start_preempts);
    tcase_add_test(tc, test_one_step_is_plain);
    tcase_add_test(tc, test_later_steps_skip_the_overhead);
    tcase_add_test(tc, test_random_groups);
    suite_add_tcase(s, tc);
    return tu_run_suites(&s, 1);
}
