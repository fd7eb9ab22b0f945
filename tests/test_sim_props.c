/* test_sim_props.c — invariants of whole simulations on random traces, for
 * every batching mode, policy, allocator and preemption mode:
 *   - finished + rejected = requests; every request ends in one of the two
 *   - nothing runs before it arrives; TTFT <= E2E; first token after arrival
 *   - blocks are conserved: in a paged decode step with no skipped request,
 *     the blocks in use equal sum(ceil(context / block)) over its members
 *     (an independent recount), never more than the cache, and swapped
 *     blocks never exceed the swap space
 *   - the same inputs give byte-identical results;
 * and the event queue (evq.h) against a linear scan. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "scheduler/sched.h"
#include "sim/evq.h"
#include "sim/run.h"
#include "testutil.h"

typedef struct check_ctx {
    const trace *tr;
    const sched_config *sc;
    int violations;
    char first[256];
    int64_t recounts; /* decode steps whose blocks were recounted */
} check_ctx;

static void fail_once(check_ctx *c, const char *msg)
{
    if (c->violations++ == 0)
        snprintf(c->first, sizeof c->first, "%s", msg);
}

static void check_step(void *ctx, const sched_step *st, const sched_member *m, int64_t n)
{
    check_ctx *c = ctx;
    char buf[256];
    if (st->kv_blocks_used > c->sc->total_blocks || st->kv_blocks_used < 0)
        fail_once(c, "blocks in use outside [0, total]");
    for (int64_t i = 0; i < n; i++)
        if (st->start_s < c->tr->reqs[m[i].req_id].arrival_s) {
            snprintf(buf, sizeof buf, "req %d runs at %g before its arrival %g", m[i].req_id,
                     st->start_s, c->tr->reqs[m[i].req_id].arrival_s);
            fail_once(c, buf);
        }
    if (c->sc->batching == SCHED_BATCHING_CONTINUOUS && c->sc->alloc == SCHED_ALLOC_PAGED &&
        st->kind == SCHED_STEP_DECODE && st->n_running == n) {
        int64_t want = 0;
        for (int64_t i = 0; i < n; i++)
            want += (m[i].context + c->sc->block_size - 1) / c->sc->block_size;
        c->recounts++;
        if (want != st->kv_blocks_used) {
            snprintf(buf, sizeof buf, "step %lld: %lld blocks in use, members hold %lld",
                     (long long)st->index, (long long)st->kv_blocks_used, (long long)want);
            fail_once(c, buf);
        }
    }
}


static const tu_variant variants[] = {
    {"continuous fcfs paged recompute", SCHED_BATCHING_CONTINUOUS, SCHED_POLICY_FCFS, 0,
     SCHED_ALLOC_PAGED, SCHED_PREEMPT_RECOMPUTE},
    {"continuous fcfs paged swap", SCHED_BATCHING_CONTINUOUS, SCHED_POLICY_FCFS, 0,
     SCHED_ALLOC_PAGED, SCHED_PREEMPT_SWAP},
    {"continuous priority paged recompute+prio", SCHED_BATCHING_CONTINUOUS,
     SCHED_POLICY_PRIORITY, 1, SCHED_ALLOC_PAGED, SCHED_PREEMPT_RECOMPUTE},
    {"continuous priority paged swap+prio", SCHED_BATCHING_CONTINUOUS, SCHED_POLICY_PRIORITY, 1,
     SCHED_ALLOC_PAGED, SCHED_PREEMPT_SWAP},
    {"continuous fcfs reserved", SCHED_BATCHING_CONTINUOUS, SCHED_POLICY_FCFS, 0,
     SCHED_ALLOC_RESERVED, SCHED_PREEMPT_RECOMPUTE},
    {"continuous fcfs reserved-oracle", SCHED_BATCHING_CONTINUOUS, SCHED_POLICY_FCFS, 0,
     SCHED_ALLOC_RESERVED_ORACLE, SCHED_PREEMPT_RECOMPUTE},
    {"static fcfs", SCHED_BATCHING_STATIC, SCHED_POLICY_FCFS, 0, SCHED_ALLOC_PAGED,
     SCHED_PREEMPT_RECOMPUTE},
    {"static priority", SCHED_BATCHING_STATIC, SCHED_POLICY_PRIORITY, 0, SCHED_ALLOC_PAGED,
     SCHED_PREEMPT_RECOMPUTE},
};
#define N_VARIANTS ((int)(sizeof variants / sizeof variants[0]))

START_TEST(test_invariants_random)
{
    kvs_err err;
    cost_model cost;
    tu_cost_affine(&cost);
    for (int v = 0; v < N_VARIANTS; v++) {
        for (uint64_t seed = 1; seed <= 25; seed++) {
            trace tr;
            tu_random_trace(&tr, 150, seed * 7919 + (uint64_t)v, 120, 60, 1);
            run_config cfg;
            tu_variant_config(&cfg, &variants[v], seed);
            check_ctx c = {&tr, &cfg.sched, 0, "", 0};
            run_result res;
            int rc = run_execute(&cfg, &tr, &cost, &res, &err);
            ck_assert_msg(rc == 0, "%s seed %llu: %s", variants[v].name,
                          (unsigned long long)seed, err.msg);
            for (int64_t i = 0; i < res.n_steps; i++)
                check_step(&c, &res.steps[i].step, res.members + res.steps[i].member_off,
                           (i + 1 < res.n_steps ? res.steps[i + 1].member_off : res.n_members) -
                               res.steps[i].member_off);
            ck_assert_msg(c.violations == 0, "%s seed %llu: %s", variants[v].name,
                          (unsigned long long)seed, c.first);
            if (variants[v].batching == SCHED_BATCHING_CONTINUOUS &&
                variants[v].alloc == SCHED_ALLOC_PAGED)
                ck_assert_msg(c.recounts > 0, "no decode step was recounted");
            /* every preemption is reported by exactly one step */
            int64_t step_pre = 0, step_swapout = 0, swaps = 0;
            for (int64_t i = 0; i < res.n_steps; i++) {
                step_pre += res.steps[i].step.n_preempted;
                step_swapout += res.steps[i].step.swap_out_blocks;
            }
            ck_assert_msg(step_pre == res.sum.preemptions, "%s seed %llu: steps report %lld "
                          "preemptions, counters %lld", variants[v].name,
                          (unsigned long long)seed, (long long)step_pre,
                          (long long)res.sum.preemptions);
            /* swap state exactly where the engine can swap */
            ck_assert((res.swaps != NULL) == (variants[v].preempt == SCHED_PREEMPT_SWAP));
            for (int64_t i = 0; res.swaps && i < tr.n; i++)
                swaps += res.swaps[i].swaps;
            ck_assert_int_eq(swaps, res.sum.preempt_swap);
            ck_assert(step_swapout >= swaps); /* each swap-out moves >= 1 block */
            tu_check_outcomes(&tr, &res);
            /* static batches and reservations never preempt */
            if (variants[v].batching == SCHED_BATCHING_STATIC ||
                (variants[v].alloc != SCHED_ALLOC_PAGED && !variants[v].prio_pre))
                ck_assert_int_eq(res.sum.preemptions, 0);
            run_result_free(&res);
            free(tr.reqs);
        }
    }
    cost_model_free(&cost);
}
END_TEST

/* Swap space is never exceeded and all blocks come home: watch the engine's
 * counters after every step through a sink. */
typedef struct swap_watch {
    sched *s;
    int64_t swap_cap, total;
    int bad;
    int64_t max_swapped;
} swap_watch;

static void watch_swap(void *ctx, const sched_step *st, const sched_member *m, int64_t n)
{
    (void)st;
    (void)m;
    (void)n;
    swap_watch *w = ctx;
    sched_counters c;
    sched_get_counters(w->s, &c);
    if (c.swapped_blocks > w->swap_cap || c.free_blocks < 0 || c.free_blocks > w->total)
        w->bad = 1;
    if (c.swapped_blocks > w->max_swapped)
        w->max_swapped = c.swapped_blocks;
}

#include "sim/engine.h"

START_TEST(test_swap_space_bound)
{
    kvs_err err;
    cost_model cost;
    ck_assert_int_eq(cost_model_create("affine:0.01,0.0001,0.00001,0", NULL, NULL, 1, &cost, &err), 0);
    int64_t swaps_seen = 0;
    for (uint64_t seed = 1; seed <= 30; seed++) {
        trace tr;
        tu_random_trace(&tr, 200, seed, 120, 60, 0);
        run_config cfg;
        tu_variant_config(&cfg, &variants[1], seed);
        sched *s;
        ck_assert_int_eq(sched_init(&s, &cfg.sched, tr.reqs, tr.n, &cost, &err), 0);
        swap_watch w = {s, cfg.sched.swap_blocks, cfg.sched.total_blocks, 0, 0};
        sched_set_step_sink(s, watch_swap, &w, 1);
        double end;
        ck_assert_msg(engine_run(s, &tr, &end, &err) == 0, "%s", err.msg);
        ck_assert(!w.bad);
        sched_counters c;
        sched_get_counters(s, &c);
        ck_assert_int_eq(c.free_blocks, cfg.sched.total_blocks); /* all returned */
        ck_assert_int_eq(c.swapped_blocks, 0);
        swaps_seen += c.preempt_swap;
        sched_free(s);
        free(tr.reqs);
    }
    ck_assert_msg(swaps_seen > 0, "the random configs never swapped: the test is toothless");
    cost_model_free(&cost);
}
END_TEST

START_TEST(test_determinism)
{
    kvs_err err;
    cost_model cost;
    tu_cost_affine(&cost);
    for (int it = 0; it < 4 * N_VARIANTS; it++) {
        int v = it % N_VARIANTS;
        trace tr;
        tu_random_trace(&tr, 300, 99 + (uint64_t)it, 120, 60, 1);
        run_config cfg;
        tu_variant_config(&cfg, &variants[v], 7 + (uint64_t)it);
        run_result a, b;
        ck_assert_int_eq(run_execute(&cfg, &tr, &cost, &a, &err), 0);
        ck_assert_int_eq(run_execute(&cfg, &tr, &cost, &b, &err), 0);
        ck_assert_int_eq(memcmp(a.reqs, b.reqs, (size_t)tr.n * sizeof *a.reqs), 0);
        ck_assert_int_eq(a.n_steps, b.n_steps);
        ck_assert_int_eq(a.n_members, b.n_members);
        ck_assert_int_eq(memcmp(a.members, b.members, (size_t)a.n_members * sizeof *a.members), 0);
        /* Without step records the engine takes a one-pass fast path for
         * decode steps that cannot run out of blocks; it must give exactly
         * the results of the general two-pass walk used when recording. */
        run_config fast = cfg;
        fast.record_steps = 0;
        run_result f;
        ck_assert_int_eq(run_execute(&fast, &tr, &cost, &f, &err), 0);
        ck_assert_int_eq(memcmp(a.reqs, f.reqs, (size_t)tr.n * sizeof *a.reqs), 0);
        ck_assert_int_eq(f.sum.n_steps, a.sum.n_steps);
        ck_assert(f.sum.mean_kv_blocks == a.sum.mean_kv_blocks);
        run_result_free(&f);
        run_result_free(&a);
        run_result_free(&b);
        free(tr.reqs);
    }
    cost_model_free(&cost);
}
END_TEST

/* The event queue's pops (and peeks, also right after a pop, when the root
 * is a hole) in order, against a linear scan for the least (t, kind, seq)
 * among the events pushed and not popped: random pushes and pops with many
 * ties in t and kind, and pop-then-push runs (the replace-root path). */
START_TEST(test_evq_matches_scan)
{
    enum { N = 5000 };
    evq_event *live = malloc(N * sizeof *live);
    int64_t nl = 0;
    uint64_t x = 99, seq = 0;
    evq q;
    ck_assert_int_eq(evq_init(&q, 1), 0);
    for (int round = 0; round < 3 * N; round++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        int pop = (x >> 60) < 7 && nl > 0; /* 7 in 16 */
        if (!pop && nl < N) {
            evq_event e = {(double)((x >> 30) % 40), (int32_t)((x >> 20) % 4), 0, seq++,
                           round};
            ck_assert_int_eq(evq_push(&q, e.t, e.kind, e.arg), 0);
            live[nl++] = e;
        } else if (nl > 0) {
            int64_t best = 0;
            for (int64_t i = 1; i < nl; i++) {
                const evq_event *a = &live[i], *b = &live[best];
                if (a->t < b->t || (a->t == b->t && (a->kind < b->kind ||
                                                     (a->kind == b->kind && a->seq < b->seq))))
                    best = i;
            }
            const evq_event *pk = evq_peek(&q);
            ck_assert_ptr_nonnull(pk);
            ck_assert_int_eq(pk->arg, live[best].arg);
            evq_event got;
            ck_assert_int_eq(evq_pop(&q, &got), 1);
            ck_assert_int_eq(got.arg, live[best].arg);
            ck_assert_int_eq((int64_t)got.seq, (int64_t)live[best].seq);
            live[best] = live[--nl];
        }
        ck_assert_int_eq(q.n, nl);
    }
    evq_event got;
    while (nl > 0) { /* drain in order */
        ck_assert_int_eq(evq_pop(&q, &got), 1);
        nl--;
    }
    ck_assert_ptr_null(evq_peek(&q));
    ck_assert_int_eq(evq_pop(&q, &got), 0);
    evq_free(&q);
    free(live);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sim_props");
    TCase *tc = tcase_create("props");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_invariants_random);
    tcase_add_test(tc, test_swap_space_bound);
    tcase_add_test(tc, test_determinism);
    tcase_add_test(tc, test_evq_matches_scan);
    suite_add_tcase(s, tc);
    return tu_run_suites(&s, 1);
}
