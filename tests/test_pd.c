/* test_pd.c — disaggregated serving (--pd, --kv-link; docs/cluster.md,
 * section D):
 *   - the scheduler's additions driven by hand (sched_keep_finished /
 *     sched_release_finished; sched_arrive_remote, sched_loads_started,
 *     sched_kv_loaded, with the decode side's prefix hits), with
 *     sched_audit recounting every block;
 *   - golden P/D hand-offs worked out by hand under an affine cost: one
 *     with room everywhere, one where the decode replica is full (the load
 *     waits, both sides hold the KV), one with each pool its own TP
 *     (--pd-tp: own cost model, own KV);
 *   - invariants on random traces (every other one with the decode pool its
 *     own, smaller cache and cost): each request served by one prefill and
 *     (when it moves) one decode replica, every step member on the right
 *     pool, no decode work before the KV arrived, the transfer time as the
 *     link's formula for the prompt less the decode side's hits, blocks conserved per replica (the cluster checks every
 *     engine ends with no block held), the same seed giving the same rows;
 *   - the store's columns, and bad input: one line, exit 2, no run row. */
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scheduler/sched.h"
#include "sim/cluster.h"
#include "sim/kvlink.h"
#include "sim/run.h"
#include "traces/trace.h"
#include "testutil.h"

#define EPS 1e-9

static void run_ok(const run_config *cfg, const trace *tr, const cost_model *cost,
                   run_result *res)
{
    kvs_err err;
    int rc = run_execute(cfg, tr, cost, res, &err);
    ck_assert_msg(rc == 0, "run failed: %s", err.msg);
}

static void affine(const char *spec, cost_model *cost)
{
    kvs_err err;
    ck_assert_msg(cost_model_create(spec, NULL, NULL, 1, cost, &err) == 0, "%s", err.msg);
}

/* A small V1 engine: 4-token blocks, 100 of them, no chunking, no cache. */
static void v1_config(sched_config *s)
{
    memset(s, 0, sizeof *s);
    s->engine = SCHED_ENGINE_VLLM_V1;
    s->block_size = 4;
    s->total_blocks = 100;
    s->max_seqs = 16;
    s->max_batched_tokens = 1000;
    s->max_model_len = 1000;
}

static void audit_ok(const sched *s)
{
    char why[256];
    ck_assert_msg(sched_audit(s, why, sizeof why) == 0, "%s", why);
}

static int accept_ok(sched *s)
{
    kvs_err err;
    return sched_accept_remote(s, &err);
}

static int64_t used(const sched *s)
{
    sched_counters c;
    sched_get_counters(s, &c);
    return c.used_blocks;
}

/* ------------------------------------------------- the scheduler parts */

/* Kept blocks: r0 (P 10, O 1) finishes at its first step and, kept, still
 * holds ceil(10 / 4) = 3 blocks (audited) though it left the running set;
 * r1 (P 6) runs beside it with its own ceil(6 / 4) = 2.  Released, r0's
 * blocks go back: 0 used once r1 is done too.  Remote arrival: r2 (P 10,
 * O 3) on a fresh engine.  The plan at 0.5 allocates blocks for P + 1 = 11
 * tokens (ceil(11 / 4) = 3) and begins the load of its 10 prompt tokens at
 * 0.5 (told once), running nothing; a plan during the flight runs nothing
 * and keeps the 3 blocks.  Loaded (sched_kv_loaded), its first step at 1.0
 * is a decode of 1 token over 10 stored (context 11, the same 3 blocks),
 * and it finishes after O - 1 = 2 such steps (1 s each under affine:1) at
 * 3.0, with first_token_s left NAN (its first token was made elsewhere). */
START_TEST(test_sched_keep_and_remote)
{
    trace_req reqs[3] = {{0, 10, 1, 0}, {0, 6, 1, 0}, {0, 10, 3, 0}};
    sched_config sc;
    v1_config(&sc);
    cost_model cost;
    affine("affine:1,0,0,0", &cost);
    kvs_err err;
    sched *p, *d;
    ck_assert(sched_init(&p, &sc, reqs, 3, &cost, &err) == 0);
    ck_assert(sched_keep_finished(p, 1, &err) == 0);
    double t;
    sched_arrive(p, 0);
    ck_assert_int_eq(sched_plan_step(p, 0, 1, &t), SCHED_PLAN_STEP);
    sched_finish_step(p, t);
    ck_assert_int_eq(sched_results(p)[0].status, SCHED_REQ_FINISHED);
    ck_assert_int_eq(used(p), 3);
    audit_ok(p);
    sched_arrive(p, 1);
    ck_assert_int_eq(sched_plan_step(p, t, 0, &t), SCHED_PLAN_STEP);
    ck_assert_int_eq(used(p), 5);
    audit_ok(p);
    sched_finish_step(p, t);
    sched_release_finished(p, 1);
    ck_assert_int_eq(used(p), 3);
    sched_release_finished(p, 0);
    ck_assert_int_eq(used(p), 0);
    sched_release_finished(p, 0); /* a second release is a no-op */
    audit_ok(p);
    sched_free(p);

    ck_assert(sched_init(&d, &sc, reqs, 3, &cost, &err) == 0);
    ck_assert_int_eq(accept_ok(d), 0);
    sched_arrive_remote(d, 2);
    /* the plan allocates its blocks and begins its load, nothing runs */
    ck_assert_int_eq(sched_plan_step(d, 0.5, 0, &t), SCHED_PLAN_IDLE);
    ck_assert_int_eq(used(d), 3);
    audit_ok(d);
    int64_t nl;
    const sched_kv_load *ld = sched_loads_started(d, &nl);
    ck_assert_int_eq(nl, 1);
    ck_assert_int_eq(ld[0].id, 2);
    ck_assert_int_eq(ld[0].tokens, 10);
    ck_assert(fabs(ld[0].start_s - 0.5) < EPS);
    sched_loads_started(d, &nl);
    ck_assert_int_eq(nl, 0); /* told once */
    /* in flight: a plan runs nothing and keeps the blocks */
    ck_assert_int_eq(sched_plan_step(d, 0.7, 0, &t), SCHED_PLAN_IDLE);
    ck_assert_int_eq(used(d), 3);
    sched_kv_loaded(d, 2);
    audit_ok(d);
    int steps = 0;
    double now = 1.0;
    while (sched_plan_step(d, now, 0, &t) == SCHED_PLAN_STEP) {
        ck_assert_int_eq(used(d), 3);
        audit_ok(d);
        sched_finish_step(d, t);
        now = t;
        steps++;
    }
    ck_assert_int_eq(steps, 2);
    ck_assert_int_eq(sched_results(d)[2].status, SCHED_REQ_FINISHED);
    ck_assert(fabs(sched_results(d)[2].finish_s - 3.0) < EPS);
    ck_assert(isnan(sched_results(d)[2].first_token_s));
    ck_assert_int_eq(used(d), 0);
    audit_ok(d);
    sched_free(d);
    /* V0 has no kept blocks (--pd needs vllm-v1) */
    sc.engine = SCHED_ENGINE_VLLM_V0;
    ck_assert(sched_init(&p, &sc, reqs, 3, &cost, &err) == 0);
    ck_assert_int_eq(sched_keep_finished(p, 1, &err), KVS_EINVAL);
    sched_free(p);
    cost_model_free(&cost);
}
END_TEST

/* A remote request's load moves only what the decode engine lacks (D4).
 * 4-token blocks, prefix caching, 8-token segments on a grid.  r0 (local,
 * P 16, O 2, segments 10 11) runs and finishes: its 4 full blocks stay
 * cached.  r1 (remote, P 20, O 3, segments 10 11 12) then arrives: its
 * load looks up T = P + 1 = 21 tokens, at most floor(20 / 4) = 5 blocks;
 * blocks 0-3 carry r0's identities (segments 10 11), block 4 is segment
 * 12's: 4 hits.  It holds them and takes ceil(21 / 4) - 4 = 2 fresh
 * blocks (6 in all), and moves 20 - 16 = 4 tokens.  Admitted, it registers
 * block 4 (tokens 17-20), and decodes 1 token over 20 stored.  r2 (never
 * arrives) shows when block 4 becomes findable. */
START_TEST(test_sched_remote_prefix_hits)
{
    trace_req reqs[3] = {{0, 16, 2, 0}, {0, 20, 3, 0}, {0, 24, 2, 0}};
    static const int64_t off[] = {0, 2, 5, 8};
    static const uint64_t ids[] = {10, 11, 10, 11, 12, 10, 11, 12};
    static const int32_t tok[] = {8, 8, 8, 8, 4, 8, 8, 8};
    req_prefixes px = {3, off, ids, tok, 8};
    sched_config sc;
    v1_config(&sc);
    sc.prefix_caching = 1;
    sc.segment_tokens = 8;
    cost_model cost;
    affine("affine:1,0,0,0", &cost);
    kvs_err err;
    sched *d;
    ck_assert(sched_init(&d, &sc, reqs, 3, &cost, &err) == 0);
    ck_assert_int_eq(sched_attach_prefixes(d, &px, &err), 0);
    ck_assert_int_eq(accept_ok(d), 0);
    sched_arrive(d, 0);
    double t, now = 0;
    while (sched_plan_step(d, now, 0, &t) == SCHED_PLAN_STEP) {
        sched_finish_step(d, t);
        now = t;
    }
    ck_assert_int_eq(sched_results(d)[0].status, SCHED_REQ_FINISHED);
    ck_assert_int_eq(used(d), 0);
    sched_arrive_remote(d, 1);
    ck_assert_int_eq(sched_plan_step(d, now, 0, &t), SCHED_PLAN_IDLE);
    int64_t nl;
    const sched_kv_load *ld = sched_loads_started(d, &nl);
    ck_assert_int_eq(nl, 1);
    ck_assert_int_eq(ld[0].tokens, 4);
    ck_assert_int_eq(used(d), 6);
    sched_counters c;
    sched_get_counters(d, &c);
    ck_assert_int_eq(c.prefix_hit_tokens, 16);
    /* r2 (P 24, segments 10 11 12) would find r1's block 4 only once it is
     * registered, at r1's admission: while its KV is in flight, 4 blocks */
    ck_assert_int_eq(sched_cached_prefix_tokens(d, 2), 16);
    audit_ok(d);
    sched_kv_loaded(d, 1);
    ck_assert_int_eq(sched_cached_prefix_tokens(d, 2), 16);
    ck_assert_int_eq(sched_plan_step(d, now, 0, &t), SCHED_PLAN_STEP);
    ck_assert_int_eq(sched_cached_prefix_tokens(d, 2), 20);
    audit_ok(d);
    sched_finish_step(d, t);
    while (sched_plan_step(d, t, 0, &t) == SCHED_PLAN_STEP)
        sched_finish_step(d, t);
    ck_assert_int_eq(sched_results(d)[1].status, SCHED_REQ_FINISHED);
    ck_assert_int_eq(used(d), 0);
    audit_ok(d);
    sched_free(d);
    cost_model_free(&cost);
}
END_TEST

/* A loaded request is admitted before W (D4.5).  6 blocks of 4 tokens.
 * Remote r0 (P 8, O 2) starts its load at 0: ceil(9/4) = 3 blocks, 3 free.
 * Local r1 (P 16, O 2) arrives: its prompt needs 4 > 3 blocks, so W's head
 * is held up.  r0's KV arrives: the next plan admits r0 all the same (its
 * blocks are held) and decodes it; r1 waits for r0's 3 blocks. */
START_TEST(test_sched_ready_first)
{
    trace_req reqs[2] = {{0, 8, 2, 0}, {0, 16, 2, 0}};
    sched_config sc;
    v1_config(&sc);
    sc.total_blocks = 6;
    cost_model cost;
    affine("affine:1,0,0,0", &cost);
    kvs_err err;
    sched *d;
    ck_assert(sched_init(&d, &sc, reqs, 2, &cost, &err) == 0);
    ck_assert_int_eq(accept_ok(d), 0);
    sched_arrive_remote(d, 0);
    double t;
    ck_assert_int_eq(sched_plan_step(d, 0, 0, &t), SCHED_PLAN_IDLE);
    ck_assert_int_eq(used(d), 3);
    sched_arrive(d, 1);
    ck_assert_int_eq(sched_plan_step(d, 0.1, 0, &t), SCHED_PLAN_IDLE); /* r1 held up */
    sched_kv_loaded(d, 0);
    ck_assert_int_eq(sched_plan_step(d, 0.2, 0, &t), SCHED_PLAN_STEP);
    sched_counters c;
    sched_get_counters(d, &c);
    ck_assert_int_eq(c.n_running, 1);
    ck_assert_int_eq(c.n_waiting, 1);
    audit_ok(d);
    sched_finish_step(d, t);
    ck_assert_int_eq(sched_results(d)[0].status, SCHED_REQ_FINISHED);
    ck_assert_int_eq(sched_plan_step(d, t, 0, &t), SCHED_PLAN_STEP); /* r1's prefill */
    ck_assert_int_eq(used(d), 4);
    sched_free(d);
    cost_model_free(&cost);
}
END_TEST

/* ------------------------------------------------------------- golden */

/* The golden runs' trace (n requests) and config: v1_config's engine,
 * --pd pd over replicas, the link 1 GB/s + 1000 us, 10^6 KV bytes per
 * token, steps recorded. */
static void golden_setup(int n, const double *arr, const int64_t *prompt, const int64_t *out,
                         const char *pd, int64_t replicas, trace *tr, run_config *cfg)
{
    *tr = (trace){0};
    tr->n = n;
    tr->reqs = calloc((size_t)n, sizeof *tr->reqs);
    for (int i = 0; i < n; i++)
        tr->reqs[i] = (trace_req){arr[i], prompt[i], out[i], 0};
    run_config_defaults(cfg);
    v1_config(&cfg->sched);
    strcpy(cfg->pd, pd);
    strcpy(cfg->kv_link, "1:1000");
    cfg->replicas = replicas;
    cfg->kv_bytes_per_token = 1000000;
    cfg->record_steps = 1;
}

/* Every request on prefill replica 0, finished, on its decode replica, at
 * its first-token and finish times. */
static void golden_check(const run_result *res, int n, const int32_t *want_dec,
                         const double *want_first, const double *want_finish)
{
    for (int i = 0; i < n; i++) {
        ck_assert_int_eq(res->replica[i], 0);
        ck_assert_msg(res->decode[i] == want_dec[i], "r%d decoded on %d", i, res->decode[i]);
        ck_assert_int_eq(res->reqs[i].status, SCHED_REQ_FINISHED);
        ck_assert_msg(fabs(res->reqs[i].first_token_s - want_first[i]) < EPS, "r%d first %.9f",
                      i, res->reqs[i].first_token_s);
        ck_assert_msg(fabs(res->reqs[i].finish_s - want_finish[i]) < EPS, "r%d finish %.9f", i,
                      res->reqs[i].finish_s);
    }
}

/* --pd 1:2, V1 (no chunking, no prefix cache), step cost affine:0.1,0.01
 * (d = 0.1 + 0.01 * tokens), link 1 GB/s with 1000 us latency and
 * 10^6 KV bytes per token: a P-token prompt moves in
 * 0.001 + P * 10^6 / 10^9 s, 0.011 s for P = 10.
 *   r0 t0    P10 O3   prefill replica 0 (the only one)
 *   r1 t0    P20 O1   replica 0
 *   r2 t0.05 P10 O2   replica 0, waits for the step in flight
 * Replica 0: prefill r0 + r1 [0, 0.4) (30 tokens: 0.1 + 0.3).  At 0.4 both
 * have their first token (TTFT 0.4).  r1 (O 1) is done there, no transfer,
 * its 5 blocks freed.  r0 keeps its ceil(10/4) = 3 blocks and goes to the
 * decode replica with the fewest outstanding requests: (0, 0), a tie ->
 * replica 1, which is idle: its plan at 0.4 allocates ceil(11/4) = 3
 * blocks and the load starts, landing at 0.411.  Replica 0 then
 * prefills r2 [0.4, 0.6) (0.1 + 0.1): blocks in use 3 (r0, kept) + 3 (r2)
 * = 6.  At 0.6 r2 goes to replica 2 (replica 1 has r0 outstanding), whose
 * load lands at 0.611.
 * Replica 1: r0's KV arrives at 0.411, 10 tokens stored; decode [0.411,
 * 0.521) (1 token: 0.11), decode [0.521, 0.631): g = 3 = O, done at 0.631.
 * Replica 2: r2 decodes [0.611, 0.721), done at 0.721.
 * TTFT: 0.4, 0.4 and 0.6 - 0.05 = 0.55.  TPOT of r0 = (0.631 - 0.4) / 2 =
 * 0.1155 s: it includes the transfer. */
START_TEST(test_pd_golden)
{
    static const double arr[] = {0, 0, 0.05};
    static const int64_t prompt[] = {10, 20, 10}, out[] = {3, 1, 2};
    static const int32_t want_dec[] = {1, -1, 2};
    static const double want_first[] = {0.4, 0.4, 0.6};
    static const double want_finish[] = {0.631, 0.4, 0.721};
    trace tr;
    run_config cfg;
    golden_setup(3, arr, prompt, out, "1:2", 3, &tr, &cfg);
    cfg.sched.max_seqs = 256;
    cost_model cost;
    affine("affine:0.1,0.01,0,0", &cost);
    run_result res;
    run_ok(&cfg, &tr, &cost, &res);
    golden_check(&res, 3, want_dec, want_first, want_finish);
    ck_assert(fabs(res.kv_transfer_s[0] - 0.011) < EPS);
    ck_assert(isnan(res.kv_transfer_s[1]));
    ck_assert(fabs(res.kv_transfer_s[2] - 0.011) < EPS);
    ck_assert_int_eq(res.kv_transfers, 2);
    ck_assert_int_eq(res.kv_decoders, 2);
    ck_assert(fabs(res.kv_transfer_mean_s - 0.011) < EPS);
    ck_assert(fabs(res.kv_transfer_max_s - 0.011) < EPS);
    ck_assert(res.kv_wait_max_s == 0); /* idle decode replicas load at once */
    /* steps: replica 0 at 0 (8 blocks: r0 3 + r1 5) and 0.4 (6 blocks);
     * replica 1 at 0.411 and 0.521; replica 2 at 0.611 */
    static const int32_t want_rep[] = {0, 0, 1, 1, 2};
    static const double want_start[] = {0, 0.4, 0.411, 0.521, 0.611};
    static const int64_t want_blocks[] = {8, 6, 3, 3, 3};
    ck_assert_int_eq(res.n_steps, 5);
    for (int k = 0; k < 5; k++) {
        ck_assert_int_eq(res.steps[k].replica, want_rep[k]);
        ck_assert_msg(fabs(res.steps[k].step.start_s - want_start[k]) < EPS, "step %d at %.9f",
                      k, res.steps[k].step.start_s);
        ck_assert_int_eq(res.steps[k].step.kv_blocks_used, want_blocks[k]);
        ck_assert_int_eq(res.steps[k].step.kind,
                         k < 2 ? SCHED_STEP_PREFILL : SCHED_STEP_DECODE);
    }
    ck_assert(fabs(res.sum.ttft.mean - (0.4 + 0.4 + 0.55) / 3) < EPS); /* r2 came at 0.05 */
    ck_assert(fabs(res.sum.makespan_s - 0.721) < EPS);
    /* per replica: the prefill replica's 3 requests, 1 each on 1 and 2 */
    ck_assert_int_eq(res.n_replicas, 3);
    ck_assert_int_eq(res.replicas[0].sum.n_requests, 3);
    ck_assert_int_eq(res.replicas[1].sum.n_requests, 1);
    ck_assert_int_eq(res.replicas[2].sum.n_requests, 1);
    ck_assert_int_eq(res.replicas[1].sum.n_steps, 2);
    run_result_free(&res);
    cost_model_free(&cost);
    trace_free(&tr);
}
END_TEST

/* D4: a decode replica without room for a load keeps the request waiting,
 * and the prefill replica keeps its blocks until the load has ended.
 * --pd 1:1, V1 (no chunking, no prefix cache), 4-token blocks, 6 blocks per
 * replica, cost affine:0.1,0.01, link 1 GB/s + 1000 us, 10^6 bytes per
 * token (P tokens move in 0.001 + P / 1000 s).
 *   r0 t0    P16 O9   (decode side: rule 1.6 ceil(24/4) = 6 <= 6)
 *   r1 t0    P8  O2
 *   r2 t0.5  P20 O1   (prefill only: ceil(20/4) = 5 blocks)
 * Prefill [0, 0.34) r0 + r1 (24 tokens), 4 + 2 = 6 blocks; both kept at
 * 0.34 and sent to replica 1 (r0 first).  Replica 1 plans at 0.34: r0's
 * load takes ceil(17/4) = 5 blocks (1 free) and starts, 16 tokens: lands
 * at 0.34 + 0.017 = 0.357; r1 needs ceil(9/4) = 3 > 1: it waits in W, and
 * the walk stops there; nothing runs.
 * 0.357: r0's KV lands; replica 0 frees r0's 4 blocks but still holds
 * r1's 2.  Replica 1 admits r0 (c 16, q 1) and decodes it alone for 8
 * steps of 0.11 s, [0.357, 1.237) (at 0.797 its 21st token takes the 6th
 * block, 0 free); r1's load still waits: every step shows 1 waiting.
 * 0.5: r2 arrives at replica 0: 6 - 2 (r1's, kept) = 4 free < 5: it waits.
 * 1.237: r0 finishes (9 tokens), 6 blocks free; r1's load starts: 8
 * tokens, lands at 1.246.  Then replica 0 frees r1's 2 blocks and
 * prefills r2 [1.246, 1.546) (0.1 + 0.2), done there (O 1); replica 1
 * decodes r1 [1.246, 1.356), done.
 * TTFT: 0.34, 0.34, 1.046.  r1's TPOT = 1.356 - 0.34 = 1.016 s: its wait for
 * the decode replica's memory (0.897 s, kv_wait_max_s) and its transfer. */
START_TEST(test_pd_golden_decode_full)
{
    static const double arr[] = {0, 0, 0.5};
    static const int64_t prompt[] = {16, 8, 20}, out[] = {9, 2, 1};
    static const int32_t want_dec[] = {1, 1, -1};
    static const double want_first[] = {0.34, 0.34, 1.546};
    static const double want_finish[] = {1.237, 1.356, 1.546};
    static const double want_x[] = {0.017, 0.009, NAN};
    trace tr;
    run_config cfg;
    golden_setup(3, arr, prompt, out, "1:1", 2, &tr, &cfg);
    cfg.sched.total_blocks = 6;
    cost_model cost;
    affine("affine:0.1,0.01,0,0", &cost);
    run_result res;
    run_ok(&cfg, &tr, &cost, &res);
    golden_check(&res, 3, want_dec, want_first, want_finish);
    for (int i = 0; i < 3; i++) {
        ck_assert_msg(isnan(want_x[i]) ? isnan(res.kv_transfer_s[i])
                                       : fabs(res.kv_transfer_s[i] - want_x[i]) < EPS,
                      "r%d transfer %.9f", i, res.kv_transfer_s[i]);
    }
    /* replica 0: 0 (6 blocks), 1.246 (r2: 5); replica 1: r0's 8 steps
     * (5 blocks, 6 from 0.797 on; r1 waiting), then r1's (3) */
    ck_assert_int_eq(res.n_steps, 11);
    int64_t dk = 0;
    for (int64_t k = 0; k < res.n_steps; k++) {
        const sched_step *st = &res.steps[k].step;
        if (res.steps[k].replica == 0) {
            ck_assert(fabs(st->start_s - (st->start_s < 1 ? 0.0 : 1.246)) < EPS);
            ck_assert_int_eq(st->kv_blocks_used, st->start_s < 1 ? 6 : 5);
            continue;
        }
        const double start = dk < 8 ? 0.357 + 0.11 * (double)dk : 1.246;
        ck_assert_msg(fabs(st->start_s - start) < EPS, "decode step %lld at %.9f", (long long)dk,
                      st->start_s);
        ck_assert_int_eq(st->kv_blocks_used, dk < 4 ? 5 : dk < 8 ? 6 : 3);
        ck_assert_int_eq(st->n_waiting, dk < 8 ? 1 : 0);
        dk++;
    }
    ck_assert_int_eq(dk, 9);
    ck_assert(fabs(res.sum.makespan_s - 1.546) < EPS);
    /* the waits for decode blocks: r0 none, r1 1.237 - 0.34 */
    ck_assert(fabs(res.kv_wait_max_s - 0.897) < EPS);
    ck_assert(fabs(res.kv_wait_mean_s - 0.897 / 2) < EPS);
    run_result_free(&res);
    cost_model_free(&cost);
    trace_free(&tr);
}
END_TEST

/* --pd 1:1 with each pool its own TP (--pd-tp): the decode replica runs
 * its own cost model and KV cache, as the job layer builds them at TP_D.
 * Prefill cost affine:0.1,0.01 (d = 0.1 + 0.01 * tokens), decode cost
 * affine:0.05,0.005 (a wider TP group, faster steps), the link 1 GB/s with
 * 1000 us latency, 10^6 KV bytes per token (the model's, over every head:
 * the hand-off moves it once, whatever the two TPs).
 *   r0 t0 P10 O3.
 * Prefill replica 0: [0, 0.2) (0.1 + 0.01 * 10); TTFT 0.2.  Transfer
 * 0.001 + 10 * 10^6 / 10^9 = 0.011 s, arriving at 0.211.  Decode replica
 * 1: two decode steps of 1 token at its own cost, 0.05 + 0.005 = 0.055
 * each: [0.211, 0.266), [0.266, 0.321); finish 0.321.  TPOT = (0.321 -
 * 0.2) / 2 = 0.0605 s (with one cost model for both, 0.1 + 0.01 = 0.11
 * per step: finish 0.431, TPOT 0.1155).
 * Capacity: the decode replica checks rule 1.6 of docs/semantics-v1.md
 * against its own cache: ceil((P + O - 1) / 4) = ceil(12 / 4) = 3 blocks.
 * With 3 decode blocks it is served (prefill pool: 100); with 2 it is
 * rejected there at its arrival (0.2), before any load: no transfer
 * (kv_transfer_s NAN), first_token_s 0.2 from the prefill, no finish, the
 * prefill's blocks freed at once, and both sides end holding no block (the
 * cluster checks it). */
START_TEST(test_pd_tp_golden)
{
    trace tr = {0};
    tr.n = 1;
    tr.reqs = calloc(1, sizeof *tr.reqs);
    tr.reqs[0] = (trace_req){0, 10, 3, 0};
    cost_model pc, dc;
    affine("affine:0.1,0.01,0,0", &pc);
    affine("affine:0.05,0.005,0,0", &dc);
    for (int blocks = 3; blocks >= 2; blocks--) {
        run_config cfg;
        run_config_defaults(&cfg);
        v1_config(&cfg.sched);
        strcpy(cfg.pd, "1:1");
        strcpy(cfg.pd_tp, "1:2");
        strcpy(cfg.kv_link, "1:1000");
        cfg.replicas = 2;
        cfg.kv_bytes_per_token = 1000000;
        cfg.record_steps = 1;
        cfg.decode_tp = 2;
        cfg.decode_sched = cfg.sched;
        cfg.decode_sched.total_blocks = blocks;
        run_result res;
        kvs_err err;
        ck_assert_msg(run_execute_pools(&cfg, &tr, &pc, &dc, NULL, NULL, &res, &err) == 0, "%s",
                      err.msg);
        ck_assert_int_eq(res.decode[0], 1);
        ck_assert(blocks == 3 ? fabs(res.kv_transfer_s[0] - 0.011) < EPS
                              : isnan(res.kv_transfer_s[0]));
        ck_assert(fabs(res.reqs[0].first_token_s - 0.2) < EPS);
        ck_assert_int_eq(res.replicas[0].sum.total_kv_blocks, 100);
        ck_assert_int_eq(res.replicas[1].sum.total_kv_blocks, blocks);
        if (blocks == 3) {
            ck_assert_int_eq(res.reqs[0].status, SCHED_REQ_FINISHED);
            ck_assert_msg(fabs(res.reqs[0].finish_s - 0.321) < EPS, "finish %.9f",
                          res.reqs[0].finish_s);
            ck_assert(fabs(res.sum.tpot.mean - 0.0605) < EPS);
            ck_assert(fabs(res.sum.ttft.mean - 0.2) < EPS);
            ck_assert_int_eq(res.n_steps, 3);
            static const double want_start[] = {0, 0.211, 0.266}, want_dur[] = {0.2, 0.055,
                                                                               0.055};
            for (int k = 0; k < 3; k++) {
                ck_assert_int_eq(res.steps[k].replica, k == 0 ? 0 : 1);
                ck_assert(fabs(res.steps[k].step.start_s - want_start[k]) < EPS);
                ck_assert(fabs(res.steps[k].step.dur_s - want_dur[k]) < EPS);
            }
        } else {
            ck_assert_int_eq(res.reqs[0].status, SCHED_REQ_REJECTED);
            ck_assert(isnan(res.reqs[0].finish_s));
            ck_assert_int_eq(res.sum.n_rejected, 1);
        }
        run_result_free(&res);
    }
    /* the same run with the prefill's cost for both pools (decode_cost
     * NULL): the slower decode of the comment, finish 0.431 */
    run_config cfg;
    run_config_defaults(&cfg);
    v1_config(&cfg.sched);
    strcpy(cfg.pd, "1:1");
    strcpy(cfg.kv_link, "1:1000");
    cfg.replicas = 2;
    cfg.kv_bytes_per_token = 1000000;
    run_result res;
    kvs_err err;
    ck_assert_msg(run_execute_pools(&cfg, &tr, &pc, NULL, NULL, NULL, &res, &err) == 0, "%s",
                  err.msg);
    ck_assert_msg(fabs(res.reqs[0].finish_s - 0.431) < EPS, "finish %.9f", res.reqs[0].finish_s);
    ck_assert(fabs(res.sum.tpot.mean - 0.1155) < EPS);
    run_result_free(&res);
    cost_model_free(&pc);
    cost_model_free(&dc);
    trace_free(&tr);
}
END_TEST

/* ---------------------------------------------------------- invariants */

static const char *const routers[] = {"round-robin", "least-requests", "least-kv",
                                      "prefix-affinity", "random"};

START_TEST(test_pd_invariants)
{
    const char *router = routers[_i % 5];
    const int prefix = _i / 5;
    const uint64_t seed = 300 + (uint64_t)_i;
    trace tr;
    trace_synth_spec sp;
    kvs_err err;
    const char *spec =
        "arrival=poisson,rate=80,n=400,prompt=uniform:8:160,output=uniform:1:40,turns=3";
    ck_assert(trace_synth_parse(spec, &sp, &err) == 0);
    ck_assert(trace_synth_gen(&sp, spec, seed, &tr, &err) == 0);
    run_config cfg;
    run_config_defaults(&cfg);
    v1_config(&cfg.sched);
    cfg.sched.max_seqs = 32;
    cfg.sched.chunked_prefill = 1;
    cfg.sched.max_batched_tokens = 256;
    cfg.sched.prefix_caching = prefix;
    cfg.sched.segment_tokens = 16;
    cfg.sched.total_blocks = 120; /* tight: preemptions on both pools */
    strcpy(cfg.pd, "2:3");
    strcpy(cfg.kv_link, "ib");
    strcpy(cfg.router, router);
    cfg.router_seed = seed;
    cfg.replicas = 5;
    cfg.kv_bytes_per_token = 131072;
    cfg.record_steps = 1;
    cost_model cost, dcost;
    affine("affine:0.01,0.0002,0.00001,0.000001", &cost);
    affine("affine:0.006,0.0001,0.000006,0.0000005", &dcost);
    /* every other seed: the decode pool its own (--pd-tp), with a smaller
     * cache (60 blocks against 120) and its own cost */
    const int pools = _i % 2;
    const int64_t dec_blocks = pools ? 60 : cfg.sched.total_blocks;
    if (pools) {
        cfg.decode_tp = 2;
        cfg.decode_sched = cfg.sched;
        cfg.decode_sched.total_blocks = dec_blocks;
    }
    run_result a, b;
    ck_assert_msg(run_execute_pools(&cfg, &tr, &cost, pools ? &dcost : NULL, NULL, NULL, &a,
                                    &err) == 0, "%s", err.msg);
    ck_assert_msg(run_execute_pools(&cfg, &tr, &cost, pools ? &dcost : NULL, NULL, NULL, &b,
                                    &err) == 0, "%s", err.msg);
    const size_t n = (size_t)tr.n;
    ck_assert(memcmp(a.replica, b.replica, n * sizeof *a.replica) == 0);
    ck_assert(memcmp(a.decode, b.decode, n * sizeof *a.decode) == 0);
    ck_assert(memcmp(a.reqs, b.reqs, n * sizeof *a.reqs) == 0);
    ck_assert(memcmp(a.kv_transfer_s, b.kv_transfer_s, n * sizeof *a.kv_transfer_s) == 0);
    ck_assert_int_eq(a.n_steps, b.n_steps);
    ck_assert(memcmp(a.steps, b.steps, (size_t)a.n_steps * sizeof *a.steps) == 0);
    kv_link ib;
    ck_assert(kv_link_parse("ib", &ib, &err) == 0);
    int64_t moved = 0, pre_count = 0, dec_count = 0, dec_peak = 0;
    for (int64_t i = 0; i < tr.n; i++) {
        const trace_req *q = &tr.reqs[i];
        const sched_req_result *r = &a.reqs[i];
        ck_assert(a.replica[i] >= 0 && a.replica[i] < 2);
        ck_assert(r->status == SCHED_REQ_FINISHED || r->status == SCHED_REQ_REJECTED);
        if (a.decode[i] < 0) { /* output 1, or refused before its first token */
            ck_assert(q->output_tokens == 1 || isnan(r->first_token_s));
            ck_assert(isnan(a.kv_transfer_s[i]));
            continue;
        }
        moved++;
        ck_assert(a.decode[i] >= 2 && a.decode[i] < 5);
        ck_assert(q->output_tokens >= 2);
        if (isnan(a.kv_transfer_s[i])) { /* refused by the decode replica: no load */
            const int64_t po = q->prompt_tokens + q->output_tokens;
            ck_assert(r->status == SCHED_REQ_REJECTED);
            ck_assert((po - 1 + 3) / 4 > dec_blocks || po > cfg.sched.max_model_len);
            continue;
        }
        /* the prompt less the leading blocks the decode replica had cached
         * (none without prefix caching), by the link's formula */
        int64_t k = 0;
        double x = NAN;
        for (; k * 4 <= q->prompt_tokens; k++) {
            x = ib.lat_us * 1e-6 +
                (double)((q->prompt_tokens - k * 4) * 131072) / (ib.gbps * 1e9);
            if (a.kv_transfer_s[i] == x)
                break;
        }
        ck_assert_msg(a.kv_transfer_s[i] == x && (prefix || k == 0),
                      "r%lld: transfer %.9f s for %lld prompt tokens", (long long)i,
                      a.kv_transfer_s[i], (long long)q->prompt_tokens);
        if (r->status == SCHED_REQ_FINISHED)
            ck_assert(r->finish_s >= r->first_token_s + x - EPS);
    }
    ck_assert_int_gt(moved, 100);
    /* every member on its pool; decode work only after the KV arrived */
    for (int64_t k = 0; k < a.n_steps; k++) {
        const run_step_rec *st = &a.steps[k];
        int64_t end = k + 1 < a.n_steps ? a.steps[k + 1].member_off : a.n_members;
        ck_assert(st->step.kv_blocks_used <=
                  (st->replica < 2 ? cfg.sched.total_blocks : dec_blocks));
        if (st->replica >= 2 && st->step.kv_blocks_used > dec_peak)
            dec_peak = st->step.kv_blocks_used;
        for (int64_t m = st->member_off; m < end; m++) {
            int32_t id = a.members[m].req_id;
            if (st->replica < 2) {
                ck_assert_int_eq(a.replica[id], st->replica);
                ck_assert_int_eq(a.members[m].kind, SCHED_MEMBER_PREFILL);
                pre_count++;
            } else {
                ck_assert_int_eq(a.decode[id], st->replica);
                ck_assert(st->step.start_s >=
                          a.reqs[id].first_token_s + a.kv_transfer_s[id] - EPS);
                /* a prefill on the decode side only recomputes after a preemption */
                ck_assert(a.members[m].kind == SCHED_MEMBER_DECODE ||
                          a.reqs[id].preemptions > 0);
                dec_count++;
            }
        }
    }
    ck_assert(pre_count > 0 && dec_count > 0);
    /* the decode pool's own cache binds: it fills up to near its size */
    ck_assert_msg(dec_peak > dec_blocks / 2, "decode peak %lld of %lld", (long long)dec_peak,
                  (long long)dec_blocks);
    int64_t on_dec = 0;
    for (int r = 2; r < 5; r++)
        on_dec += a.replicas[r].sum.n_requests;
    ck_assert_int_eq(on_dec, moved);
    run_result_free(&a);
    run_result_free(&b);
    cost_model_free(&cost);
    cost_model_free(&dcost);
    trace_free(&tr);
}
END_TEST

/* ------------------------------------------------------ links and flags */

START_TEST(test_kv_link_parse)
{
    kv_link l;
    kvs_err err;
    ck_assert(kv_link_parse("", &l, &err) == 0 && !strcmp(l.name, "nvlink"));
    ck_assert(kv_link_parse("roce", &l, &err) == 0 && l.gbps == 50.0);
    ck_assert(kv_link_parse("25:3.5", &l, &err) == 0 && l.gbps == 25.0 && l.lat_us == 3.5);
    /* 1 MB over 25 GB/s = 40 us, plus 3.5 us */
    ck_assert(fabs(kv_link_time_s(&l, 1000000) - 43.5e-6) < 1e-15);
    static const char *const bad[] = {"0:5", "-1:5", "10:-1", "10", "10:", "fast", ":5",
                                      "10:5x", "nan:1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(kv_link_parse(bad[i], &l, &err) == KVS_EINVAL, "%s", bad[i]);
    int64_t p, d;
    ck_assert(cluster_pd_parse("3:5", &p, &d, &err) == 0 && p == 3 && d == 5);
    static const char *const badpd[] = {"0:1", "1:0", "2", "2:", ":2", "1:2:3", "a:b", "4000:97",
                                        "-1:2", "1:-2"};
    for (size_t i = 0; i < sizeof badpd / sizeof badpd[0]; i++)
        ck_assert_msg(cluster_pd_parse(badpd[i], &p, &d, &err) == KVS_EINVAL, "%s", badpd[i]);
}
END_TEST

START_TEST(test_pd_store_rows)
{
    const char *dir = tu_tmpdir();
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd,
             "%s run --synthetic 'arrival=poisson,rate=30,n=200,prompt=256,output=uniform:1:32' "
             "--pd 2:2 --kv-link roce --db %s/pd.db --quiet",
             tu_kvsim(), dir);
    ck_assert_msg(tu_run(cmd, &out) == 0, "%s", out);
    free(out);
    char path[512];
    snprintf(path, sizeof path, "%s/pd.db", dir);
    sqlite3 *db;
    ck_assert(sqlite3_open(path, &db) == SQLITE_OK);
    static const tu_sql_want q[] = {
        {"SELECT count(*) FROM requests", 200},
        {"SELECT count(*) FROM requests WHERE replica NOT IN (0, 1)", 0},
        {"SELECT count(*) FROM requests WHERE decode_replica IS NOT NULL "
         "AND decode_replica NOT IN (2, 3)", 0},
        /* moved exactly when output > 1 (nothing is rejected here) */
        {"SELECT count(*) FROM requests WHERE (decode_replica IS NULL) != (output_tokens = 1)",
         0},
        {"SELECT count(*) FROM requests WHERE (kv_transfer_s IS NULL) != (output_tokens = 1)",
         0},
        {"SELECT count(*) FROM replica_metrics", 4},
        {"SELECT replicas FROM runs", 4},
        {"SELECT pd = '2:2' AND kv_link = 'roce' FROM runs", 1},
    };
    tu_sql_expect(db, q, sizeof q / sizeof q[0]);
    sqlite3_close(db);
}
END_TEST

START_TEST(test_pd_bad_flags)
{
    static const struct {
        const char *flags, *want;
    } cases[] = {
        {"--pd 0:2", "--pd"},
        {"--pd 2", "--pd"},
        {"--pd 2:2 --replicas 3", "add up to 4 replicas but --replicas is 3"},
        {"--pd 1:1 --kv-link 0:5", "--kv-link: bandwidth"},
        {"--pd 1:1 --kv-link 0.0:1", "--kv-link: bandwidth"},
        {"--pd 1:1 --kv-link warp", "--kv-link: 'warp'"},
        {"--kv-link ib", "--kv-link: applies only with --pd"},
        {"--pd 1:1 --engine vllm-v0", "--pd: disaggregated serving needs --engine vllm-v1"},
        {"--pd 1:1 --pd-tp 0:2", "--pd-tp: '0:2' is not TP_P:TP_D"},
        {"--pd 1:1 --pd-tp 2", "--pd-tp: '2' is not TP_P:TP_D"},
        {"--pd 1:1 --pd-tp 1:2:4", "--pd-tp: '1:2:4' is not TP_P:TP_D"},
        {"--pd 1:1 --pd-tp 1:2000", "--pd-tp: '1:2000' is not TP_P:TP_D"},
        {"--pd-tp 1:2", "--pd-tp: applies only with --pd"},
        {"--pd 1:1 --pd-tp 2:2 --tp 1", "--pd-tp 2:2: the prefill pool's TP 2 differs from --tp 1"},
        {"--pd 1:1 --pd-tp 1:3", "--pd-tp 1:3: the decode pool:"},
    };
    const char *dir = tu_tmpdir();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char cmd[1024], *out = NULL;
        snprintf(cmd, sizeof cmd,
                 "%s run --synthetic 'arrival=poisson,rate=30,n=20,prompt=64,output=8' %s "
                 "--db %s/bad.db 2>&1",
                 tu_kvsim(), cases[i].flags, dir);
        int rc = tu_run(cmd, &out);
        ck_assert_msg(rc == 2, "%s: exit %d: %s", cases[i].flags, rc, out);
        ck_assert_msg(strstr(out, cases[i].want), "%s: %s", cases[i].flags, out);
        char *nl = strchr(out, '\n');
        ck_assert_msg(nl && nl[1] == 0, "%s: not one line: %s", cases[i].flags, out);
        free(out);
    }
    /* the cluster capacity search searches P:D splits itself (--pd-splits):
     * a --pd among its run flags is refused */
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd,
             "%s capacity --search cluster --slo ttft_p99=1 --gpus h100-sxm --price h100-sxm=2 "
             "--pd 1:1 --synthetic 'arrival=poisson,rate=10,n=20,prompt=64,output=8' "
             "--db %s/bad.db 2>&1",
             tu_kvsim(), dir);
    ck_assert_int_eq(tu_run(cmd, &out), 2);
    ck_assert_msg(strstr(out, "--pd is what is searched"), "%s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "sqlite3 %s/bad.db 'SELECT count(*) FROM runs' 2>/dev/null || echo 0",
             dir);
    tu_run(cmd, &out);
    ck_assert_msg(out && atoi(out) == 0, "%s", out);
    free(out);
}
END_TEST

static Suite *pd_suite(void)
{
    Suite *s = suite_create("pd");
    TCase *t = tcase_create("pd");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, test_sched_keep_and_remote);
    tcase_add_test(t, test_sched_remote_prefix_hits);
    tcase_add_test(t, test_sched_ready_first);
    tcase_add_test(t, test_pd_golden_decode_full);
    tcase_add_test(t, test_pd_golden);
    tcase_add_test(t, test_pd_tp_golden);
    tcase_add_loop_test(t, test_pd_invariants, 0, 10);
    tcase_add_test(t, test_kv_link_parse);
    tcase_add_test(t, test_pd_store_rows);
    tcase_add_test(t, test_pd_bad_flags);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    Suite *s[] = {pd_suite()};
    return tu_run_suites(s, 1);
}
