/* test_validate.c — validation (validate/validate.h, validate/replay.h):
 *   - step sampling and profile-id parsing against hand-worked goldens;
 *   - the block tables derived from recorded members hold exactly the
 *     simulator's steps.kv_blocks_used at every step, for every batching
 *     mode, allocator and preemption mode on random traces (the simulator
 *     is the simple model the derivation is checked against);
 *   - re-timing with the stored durations reproduces the stored first-token
 *     and finish times bit for bit, and a hand-worked schedule re-timed
 *     with other durations gives the hand-computed times;
 *   - a run written to the store loads back field for field; bad runs give
 *     one-line errors;
 *   - replay on the CPU kernels: after replaying steps 0..k the KV cache of
 *     every request still holding blocks (including ones restarted after a
 *     recompute preemption and ones swapped back in) equals a from-scratch
 *     prefill of its tokens (NMSE <= 1e-6; fp32 CPU storage), and a
 *     corrupted block is caught; a replay too large for memory is refused;
 *   - the summary's error statistics on hand-chosen measured times. */
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "base/rng.h"
#include "sim/run.h"
#include "store/store.h"
#include "testutil.h"
#include "validate/replay.h"
#include "validate/validate.h"

/* ------------------------------------------------------------ helpers */

/* A val_run borrowing a simulation's arrays (not to be val_run_free'd). */
static void borrow(val_run *v, const run_config *cfg, const model_spec *m, const trace *tr,
                   const run_result *res)
{
    memset(v, 0, sizeof *v);
    v->run_id = 1;
    v->cfg = *cfg;
    v->model = *m;
    v->tr = *tr;
    v->reqs = res->reqs;
    v->steps = res->steps;
    v->n_steps = res->n_steps;
    v->members = res->members;
    v->n_members = res->n_members;
}

static model_spec tiny(void)
{
    model_spec m;
    kvs_err err;
    ck_assert_int_eq(model_lookup(KVSIM_SOURCE_DIR "/models/tiny.conf", &m, &err), KVS_OK);
    return m;
}


static const tu_variant variants[] = {
    {"paged recompute", SCHED_BATCHING_CONTINUOUS, SCHED_POLICY_FCFS, 0, SCHED_ALLOC_PAGED,
     SCHED_PREEMPT_RECOMPUTE},
    {"paged swap", SCHED_BATCHING_CONTINUOUS, SCHED_POLICY_FCFS, 0, SCHED_ALLOC_PAGED,
     SCHED_PREEMPT_SWAP},
    {"paged off", SCHED_BATCHING_CONTINUOUS, SCHED_POLICY_FCFS, 0, SCHED_ALLOC_PAGED,
     SCHED_PREEMPT_OFF},
    {"priority + priority preemption", SCHED_BATCHING_CONTINUOUS, SCHED_POLICY_PRIORITY, 1,
     SCHED_ALLOC_PAGED, SCHED_PREEMPT_RECOMPUTE},
    {"priority swap + priority preemption", SCHED_BATCHING_CONTINUOUS, SCHED_POLICY_PRIORITY,
     1, SCHED_ALLOC_PAGED, SCHED_PREEMPT_SWAP},
    {"reserved", SCHED_BATCHING_CONTINUOUS, SCHED_POLICY_FCFS, 0, SCHED_ALLOC_RESERVED,
     SCHED_PREEMPT_RECOMPUTE},
    {"reserved-oracle", SCHED_BATCHING_CONTINUOUS, SCHED_POLICY_FCFS, 0,
     SCHED_ALLOC_RESERVED_ORACLE, SCHED_PREEMPT_RECOMPUTE},
    {"static", SCHED_BATCHING_STATIC, SCHED_POLICY_FCFS, 0, SCHED_ALLOC_PAGED,
     SCHED_PREEMPT_RECOMPUTE},
};
#define N_VARIANTS ((int)(sizeof variants / sizeof variants[0]))

/* ------------------------------------------------------------ goldens */

START_TEST(test_pick_steps)
{
    int64_t out[16], n;
    kvs_err err;
    /* window: 4 consecutive steps from 3 */
    ck_assert_int_eq(val_pick_steps(10, VAL_SAMPLING_WINDOW, 3, 4, out, &n, &err), KVS_OK);
    ck_assert_int_eq(n, 4);
    ck_assert(out[0] == 3 && out[3] == 6);
    /* window past the end is cut at the last step: 8, 9 */
    ck_assert_int_eq(val_pick_steps(10, VAL_SAMPLING_WINDOW, 8, 5, out, &n, &err), KVS_OK);
    ck_assert(n == 2 && out[0] == 8 && out[1] == 9);
    /* even, 4 of steps 2..11 (10 available): 2 + floor(k*10/4) = 2, 4, 7, 9 */
    ck_assert_int_eq(val_pick_steps(12, VAL_SAMPLING_EVEN, 2, 4, out, &n, &err), KVS_OK);
    ck_assert(n == 4 && out[0] == 2 && out[1] == 4 && out[2] == 7 && out[3] == 9);
    /* 0 = all */
    ck_assert_int_eq(val_pick_steps(5, VAL_SAMPLING_EVEN, 0, 0, out, &n, &err), KVS_OK);
    ck_assert(n == 5 && out[4] == 4);
    ck_assert_int_eq(val_pick_steps(5, VAL_SAMPLING_WINDOW, 5, 1, out, &n, &err), KVS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "--start 5"));
    ck_assert_int_eq(val_sampling_parse("even"), VAL_SAMPLING_EVEN);
    ck_assert_int_eq(val_sampling_parse("random"), -1);
}
END_TEST

START_TEST(test_profile_id_parse)
{
    ck_assert_int_eq(val_profile_id_parse("calibrated:7", ""), 7);
    ck_assert_int_eq(val_profile_id_parse("calibrated",
                                          "calibrated: profile 12 (calibration 3, model x)"), 12);
    ck_assert_int_eq(val_profile_id_parse("roofline", "roofline model=x"), 0);
    ck_assert_int_eq(val_profile_id_parse("calibrated:abc", ""), 0);
    ck_assert_int_eq(val_profile_id_parse(NULL, NULL), 0);
}
END_TEST

START_TEST(test_embedding)
{
    float a[64], b[64], c[64];
    replay_embedding(1, 3, 5, a, 64);
    replay_embedding(1, 3, 5, b, 64);
    replay_embedding(1, 3, 6, c, 64);
    ck_assert_int_eq(memcmp(a, b, sizeof a), 0);
    ck_assert_int_ne(memcmp(a, c, sizeof a), 0);
    for (int i = 0; i < 64; i++)
        ck_assert(a[i] >= -1.0f && a[i] < 1.0f);
}
END_TEST

/* ------------------------------------------------- block tables, re-timing */

START_TEST(test_blocks_match_simulator)
{
    kvs_err err;
    cost_model cost;
    model_spec m = tiny();
    tu_cost_affine(&cost);
    int64_t recomputes = 0, swaps = 0, priority = 0, off_runs = 0, skipped = 0;
    for (int v = 0; v < N_VARIANTS; v++)
        for (uint64_t seed = 1; seed <= 20; seed++) {
            trace tr;
            tu_random_trace(&tr, 120, seed * 7919 + (uint64_t)v, 120, 60, 1);
            run_config cfg;
            tu_variant_config(&cfg, &variants[v], seed);
            if (variants[v].preempt == SCHED_PREEMPT_OFF) { /* most runs do not get stuck */
                cfg.sched.watermark = 0.3;
                cfg.sched.total_blocks += 200 / cfg.sched.block_size;
            }
            run_result res;
            int rc = run_execute(&cfg, &tr, &cost, &res, &err);
            if (rc != 0 && variants[v].preempt == SCHED_PREEMPT_OFF) {
                trace_free(&tr); /* stuck: every running request needs a block */
                continue;
            }
            ck_assert_msg(rc == 0, "%s", err.msg);
            off_runs += variants[v].preempt == SCHED_PREEMPT_OFF;
            for (int64_t i = 0; i < res.n_steps; i++) /* decodes skipped for want of a block */
                skipped += res.steps[i].step.kind == SCHED_STEP_DECODE &&
                           res.steps[i].step.batch.n_decode < res.steps[i].step.n_running;
            recomputes += res.sum.preempt_recompute;
            swaps += res.sum.preempt_swap;
            priority += res.sum.preempt_priority;
            val_run vr;
            borrow(&vr, &cfg, &m, &tr, &res);
            replay_sched *s = NULL;
            ck_assert_int_eq(replay_sched_init(&vr, &s, &err), KVS_OK);
            int64_t peak = 0;
            for (int64_t i = 0; i < vr.n_steps; i++) {
                ck_assert_msg(replay_sched_begin(s, NULL, &err) == KVS_OK, "%s seed %llu: %s",
                              variants[v].name, (unsigned long long)seed, err.msg);
                ck_assert_msg(replay_sched_held(s) == vr.steps[i].step.kv_blocks_used,
                              "%s seed %llu step %lld: derived %lld blocks, simulator %lld",
                              variants[v].name, (unsigned long long)seed, (long long)i,
                              (long long)replay_sched_held(s),
                              (long long)vr.steps[i].step.kv_blocks_used);
                if (replay_sched_held(s) > peak)
                    peak = replay_sched_held(s);
                /* every member's table covers its context */
                int64_t n;
                const sched_member *mm = val_run_step_members(&vr, i, &n);
                for (int64_t j = 0; j < n; j++) {
                    int64_t nb, tok;
                    replay_sched_blocks(s, mm[j].req_id, &nb, &tok);
                    ck_assert_int_eq(tok, mm[j].context);
                    ck_assert_int_ge(nb * cfg.sched.block_size, mm[j].context);
                }
                replay_sched_end(s);
            }
            int64_t first;
            ck_assert_int_eq(replay_sched_mismatches(s, &first), 0);
            ck_assert_int_eq(first, -1);
            /* fresh ids are handed out only when none is free: ids == peak */
            ck_assert_int_eq(replay_sched_ids(s), peak);
            ck_assert_int_le(peak, cfg.sched.total_blocks);
            /* every finished request gave its blocks back */
            int32_t hold[1];
            ck_assert_int_eq(replay_sched_holders(s, hold, 1), 0);
            replay_sched_free(s);
            run_result_free(&res);
            trace_free(&tr);
        }
    /* every rule was exercised: skipped decodes (off), recompute, swap and
     * priority preemption */
    ck_assert_int_ge(off_runs, 10);
    ck_assert_int_gt(skipped, 0);
    ck_assert_int_gt(recomputes, 0);
    ck_assert_int_gt(swaps, 0);
    ck_assert_int_gt(priority, 0);
    cost_model_free(&cost);
}
END_TEST

START_TEST(test_retime_reproduces_stored)
{
    kvs_err err;
    cost_model cost;
    model_spec m = tiny();
    tu_cost_affine(&cost);
    for (int v = 0; v < N_VARIANTS; v++)
        for (uint64_t seed = 1; seed <= 5; seed++) {
            trace tr;
            tu_random_trace(&tr, 80, seed * 31 + (uint64_t)v, 120, 60, 1);
            run_config cfg;
            tu_variant_config(&cfg, &variants[v], seed);
            run_result res;
            int rc = run_execute(&cfg, &tr, &cost, &res, &err);
            if (rc != 0 && variants[v].preempt == SCHED_PREEMPT_OFF) {
                trace_free(&tr);
                continue;
            }
            ck_assert_msg(rc == 0, "%s", err.msg);
            val_run vr;
            borrow(&vr, &cfg, &m, &tr, &res);
            double *dur = malloc((size_t)vr.n_steps * sizeof *dur);
            double *ends = malloc((size_t)vr.n_steps * sizeof *ends);
            sched_req_result *out = malloc((size_t)tr.n * sizeof *out);
            for (int64_t i = 0; i < vr.n_steps; i++)
                dur[i] = vr.steps[i].step.dur_s;
            val_retime(&vr, dur, out, ends);
            for (int64_t i = 0; i < vr.n_steps; i++)
                ck_assert(ends[i] == vr.steps[i].step.start_s + vr.steps[i].step.dur_s);
            /* each request on its own clock, with the predicted durations:
             * the same times bit for bit (val_retime_local's contract) */
            sched_req_result *loc = malloc((size_t)tr.n * sizeof *loc);
            ck_assert_int_eq(val_retime_local(&vr, dur, ends, dur, NULL, loc), KVS_OK);
            for (int64_t q = 0; q < tr.n; q++) {
                ck_assert_int_eq(out[q].status, res.reqs[q].status);
                if (res.reqs[q].status != SCHED_REQ_FINISHED)
                    continue;
                ck_assert_msg(out[q].first_token_s == res.reqs[q].first_token_s &&
                                  out[q].finish_s == res.reqs[q].finish_s,
                              "%s seed %llu req %lld", variants[v].name,
                              (unsigned long long)seed, (long long)q);
                ck_assert_msg(loc[q].first_token_s == res.reqs[q].first_token_s &&
                                  loc[q].finish_s == res.reqs[q].finish_s,
                              "local: %s seed %llu req %lld: %.17g %.17g vs %.17g %.17g",
                              variants[v].name, (unsigned long long)seed, (long long)q,
                              loc[q].first_token_s, loc[q].finish_s,
                              res.reqs[q].first_token_s, res.reqs[q].finish_s);
            }
            free(loc);
            free(dur);
            free(ends);
            free(out);
            run_result_free(&res);
            trace_free(&tr);
        }
    cost_model_free(&cost);
}
END_TEST

/* Two requests, 1 s per step (affine:1,0,0,0), plenty of blocks:
 *   r0 arrives 0, P 4, O 3; r1 arrives 0.5, P 4, O 2.
 *   step 0 [0,1]   prefill r0        (r0 first token at 1)
 *   step 1 [1,2]   prefill r1        (r1 waited in the queue; first token 2)
 *   step 2 [2,3]   decode r0, r1     (r1 reaches O = 2: finishes at 3)
 *   step 3 [3,4]   decode r0         (r0 finishes at 4)
 * Re-timed with durations 0.25 each: step 0 [0, 0.25]; step 1 cannot start
 * before r1 arrives: [0.5, 0.75]; step 2 [0.75, 1]; step 3 [1, 1.25].  With
 * durations 2, 0.25, 1, 1: [0,2], [2,2.25], [2.25,3.25], [3.25,4.25]. */
START_TEST(test_retime_golden)
{
    kvs_err err;
    cost_model cost;
    model_spec m = tiny();
    ck_assert_int_eq(cost_model_create("affine:1,0,0,0", NULL, NULL, 1, &cost, &err), 0);
    trace tr = {0};
    trace_req reqs[2] = {{0.0, 4, 3, 0}, {0.5, 4, 2, 0}};
    tr.reqs = reqs;
    tr.n = 2;
    run_config cfg;
    run_config_defaults(&cfg);
    cfg.sched.block_size = 16;
    cfg.sched.total_blocks = 100;
    cfg.sched.max_model_len = 100;
    cfg.sched.max_batched_tokens = 100;
    cfg.record_steps = 1;
    run_result res;
    ck_assert_msg(run_execute(&cfg, &tr, &cost, &res, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(res.n_steps, 4);
    ck_assert(res.reqs[0].first_token_s == 1 && res.reqs[0].finish_s == 4);
    ck_assert(res.reqs[1].first_token_s == 2 && res.reqs[1].finish_s == 3);
    val_run vr;
    borrow(&vr, &cfg, &m, &tr, &res);
    sched_req_result out[2];
    double ends[4];
    const double quick[4] = {0.25, 0.25, 0.25, 0.25};
    val_retime(&vr, quick, out, ends);
    ck_assert(ends[0] == 0.25 && ends[1] == 0.75 && ends[2] == 1.0 && ends[3] == 1.25);
    ck_assert(out[0].first_token_s == 0.25 && out[0].finish_s == 1.25);
    ck_assert(out[1].first_token_s == 0.75 && out[1].finish_s == 1.0);
    const double mixed[4] = {2, 0.25, 1, 1};
    val_retime(&vr, mixed, out, ends);
    ck_assert(out[0].first_token_s == 2 && out[0].finish_s == 4.25);
    ck_assert(out[1].first_token_s == 2.25 && out[1].finish_s == 3.25);
    /* Each request on its own clock (val_retime_local), predicted durations
     * 1 s, predicted ends 1, 2, 3, 4.  r0 arrives at 0 with nothing running:
     * its clock re-times steps 0..3 as val_retime does (first 2, finish
     * 4.25 with `mixed`).  r1 arrives at 0.5 while step 0 runs (it is not a
     * member): its clock starts at the end of step 0 with the rest of that
     * step scaled, 1 + (1 - 0.5) * (2 - 1) / 1 = 1.5; step 1 [1.5, 1.75]
     * gives its first token, step 2 [1.75, 2.75] its last: TTFT 1.25 and
     * E2E 2.25 where the back-to-back re-timing gave 1.75 and 2.75, since
     * step 0's extra second ran mostly before r1 arrived.  With `quick`:
     * r1's clock starts at 1 + 0.5 * (0.25 - 1) = 0.625, steps 1 and 2 end
     * at 0.875 and 1.125; r0's step 1 waits for r1's arrival at 0.5, so r0
     * ends as in val_retime: 0.25 and 1.25. */
    const double one[4] = {1, 1, 1, 1}, pred_ends[4] = {1, 2, 3, 4};
    sched_req_result loc[2];
    ck_assert_int_eq(val_retime_local(&vr, one, pred_ends, mixed, NULL, loc), KVS_OK);
    ck_assert(loc[0].first_token_s == 2 && loc[0].finish_s == 4.25);
    ck_assert(loc[1].first_token_s == 1.75 && loc[1].finish_s == 2.75);
    ck_assert_int_eq(val_retime_local(&vr, one, pred_ends, quick, NULL, loc), KVS_OK);
    ck_assert(loc[0].first_token_s == 0.25 && loc[0].finish_s == 1.25);
    ck_assert(loc[1].first_token_s == 0.875 && loc[1].finish_s == 1.125);
    /* keep: only r1 is re-timed; r0 gets no times */
    const int keep[2] = {0, 1};
    ck_assert_int_eq(val_retime_local(&vr, one, pred_ends, quick, keep, loc), KVS_OK);
    ck_assert(isnan(loc[0].first_token_s) && isnan(loc[0].finish_s));
    ck_assert(loc[1].first_token_s == 0.875 && loc[1].finish_s == 1.125);
    run_result_free(&res);
    cost_model_free(&cost);
}
END_TEST

/* ------------------------------------------------------------ store */

static char *db_path(const char *name)
{
    const char *dir = tu_tmpdir();
    char *p = malloc(strlen(dir) + strlen(name) + 2);
    sprintf(p, "%s/%s", dir, name);
    return p;
}

START_TEST(test_store_round_trip)
{
    kvs_err err;
    cost_model cost;
    tu_cost_affine(&cost);
    trace tr;
    tu_random_trace(&tr, 60, 99, 120, 60, 1);
    run_config cfg;
    tu_variant_config(&cfg, &variants[1], 7); /* swap: swap blocks and swap-in members */
    snprintf(cfg.model, sizeof cfg.model, "%s", KVSIM_SOURCE_DIR "/models/tiny.conf");
    snprintf(cfg.cost, sizeof cfg.cost, "calibrated:3");
    run_result res;
    ck_assert_int_eq(run_execute(&cfg, &tr, &cost, &res, &err), 0);
    char *path = db_path("rt.db");
    store *st = NULL;
    ck_assert_int_eq(store_open(path, &st, &err), KVS_OK);
    int64_t id = 0, id2 = 0, id3 = 0;
    ck_assert_msg(store_write_run(st, &cfg, &res, &id, &err) == KVS_OK, "%s", err.msg);
    val_run vr;
    ck_assert_msg(val_run_load(store_db(st), id, &vr, &err) == KVS_OK, "%s", err.msg);
    ck_assert_str_eq(vr.model.name, "tiny");
    ck_assert_int_eq(vr.profile_id, 3);
    ck_assert_int_eq(vr.cfg.sched.block_size, cfg.sched.block_size);
    ck_assert_int_eq(vr.cfg.sched.total_blocks, cfg.sched.total_blocks);
    ck_assert_int_eq(vr.cfg.sched.preemption, SCHED_PREEMPT_SWAP);
    ck_assert(vr.cfg.sched.swap_block_s == cfg.sched.swap_block_s);
    ck_assert_int_eq(vr.tr.n, tr.n);
    for (int64_t q = 0; q < tr.n; q++) {
        ck_assert(vr.tr.reqs[q].arrival_s == tr.reqs[q].arrival_s);
        ck_assert_int_eq(vr.tr.reqs[q].prompt_tokens, tr.reqs[q].prompt_tokens);
        ck_assert_int_eq(vr.tr.reqs[q].output_tokens, tr.reqs[q].output_tokens);
        ck_assert_int_eq(vr.reqs[q].status, res.reqs[q].status);
        if (res.reqs[q].status == SCHED_REQ_FINISHED)
            ck_assert(vr.reqs[q].finish_s == res.reqs[q].finish_s);
    }
    ck_assert_int_eq(vr.n_steps, res.n_steps);
    ck_assert_int_eq(vr.n_members, res.n_members);
    for (int64_t i = 0; i < res.n_steps; i++) {
        const sched_step *a = &vr.steps[i].step, *b = &res.steps[i].step;
        ck_assert(a->start_s == b->start_s && a->dur_s == b->dur_s);
        ck_assert_int_eq(a->kind, b->kind);
        ck_assert_int_eq(a->kv_blocks_used, b->kv_blocks_used);
        ck_assert_int_eq(a->swap_in_blocks, b->swap_in_blocks);
        ck_assert_int_eq(a->batch.kv_read, b->batch.kv_read);
        ck_assert_int_eq(vr.steps[i].member_off, res.steps[i].member_off);
    }
    ck_assert_int_eq(memcmp(vr.members, res.members, (size_t)res.n_members * sizeof *res.members),
                     0);
    val_run_free(&vr);

    /* bad runs: one line each */
    ck_assert_int_eq(val_run_load(store_db(st), 999, &vr, &err), KVS_EINVAL);
    ck_assert_str_eq(err.msg, "--run 999: no such run");
    cfg.record_steps = 0;
    ck_assert_int_eq(store_write_run(st, &cfg, &res, &id2, &err), KVS_OK);
    ck_assert_int_eq(val_run_load(store_db(st), id2, &vr, &err), KVS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "re-run with kvsim run --record-steps"));
    cfg.record_steps = 1;
    cfg.tp = 2;
    ck_assert_int_eq(store_write_run(st, &cfg, &res, &id3, &err), KVS_OK);
    ck_assert_int_eq(val_run_load(store_db(st), id3, &vr, &err), KVS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "--tp 2"));
    ck_assert_ptr_null(strchr(err.msg, '\n'));
    store_close(st);
    free(path);
    run_result_free(&res);
    trace_free(&tr);
    cost_model_free(&cost);
}
END_TEST

/* ------------------------------------------------------------ CPU replay */

/* A tiny-model run on `kv_blocks` blocks of 8 tokens whose 36 requests (prompts
 * 8..64, outputs 2..12) overflow the cache, so requests get preempted. */
static void small_run(sched_preempt pre, int64_t kv_blocks, run_config *cfg, trace *tr,
                      run_result *res)
{
    kvs_err err;
    cost_model cost;
    ck_assert_int_eq(cost_model_create("affine:0.001,0.0001,0.00001,0", NULL, NULL, 1, &cost,
                                       &err), 0);
    memset(tr, 0, sizeof *tr);
    tr->n = 36;
    tr->reqs = calloc(36, sizeof *tr->reqs);
    rng r;
    rng_init(&r, 5);
    for (int i = 0; i < 36; i++) {
        tr->reqs[i].arrival_s = 0.002 * i;
        tr->reqs[i].prompt_tokens = 8 + (int64_t)rng_below(&r, 57);
        tr->reqs[i].output_tokens = 2 + (int64_t)rng_below(&r, 11);
    }
    run_config_defaults(cfg);
    cfg->sched.block_size = 8;
    cfg->sched.total_blocks = kv_blocks;
    cfg->sched.max_model_len = 2048;
    cfg->sched.max_batched_tokens = 2048;
    cfg->sched.preemption = pre;
    cfg->sched.swap_blocks = 1000;
    cfg->sched.swap_block_s = 1e-5;
    cfg->record_steps = 1;
    ck_assert_int_eq(run_execute(cfg, tr, &cost, res, &err), 0);
    cost_model_free(&cost);
}

/* The first step s with a member of `kind` (a prefill that is not the
 * request's first appearance when need_prior) whose request appears again
 * after s + 1, so it still holds blocks after step k = s + 1.  Returns k
 * (-1 if none) and the request in *req. */
static int64_t step_after(const val_run *vr, int32_t kind, int need_prior, int32_t *req)
{
    int64_t *seen = calloc((size_t)vr->tr.n, sizeof *seen), *last = calloc((size_t)vr->tr.n,
                                                                           sizeof *last);
    for (int64_t i = 0; i < vr->n_steps; i++) {
        int64_t n;
        const sched_member *m = val_run_step_members(vr, i, &n);
        for (int64_t j = 0; j < n; j++)
            last[m[j].req_id] = i;
    }
    int64_t k = -1;
    for (int64_t i = 0; i < vr->n_steps && k < 0; i++) {
        int64_t n;
        const sched_member *m = val_run_step_members(vr, i, &n);
        for (int64_t j = 0; j < n && k < 0; j++) {
            if (m[j].kind == kind && (!need_prior || seen[m[j].req_id]) &&
                last[m[j].req_id] > i + 1) {
                k = i + 1;
                *req = m[j].req_id;
            }
            seen[m[j].req_id]++;
        }
    }
    free(seen);
    free(last);
    return k;
}

/* Replay steps 0..k on the CPU and check the KV of every holder; must_hold
 * (if >= 0) must be among the requests checked.  With corrupt, overwrite
 * the first K block of the first holder first: the check must catch it. */
static void replay_and_check(const val_run *vr, int64_t k, int32_t must_hold, int corrupt)
{
    kvs_err err;
    kernels_backend *be = NULL;
    ck_assert_int_eq(kernels_backend_open("cpu", &be, &err), KVS_OK);
    int64_t *idx = malloc((size_t)(k + 1) * sizeof *idx);
    for (int64_t i = 0; i <= k; i++)
        idx[i] = i;
    replay_options o = {.warmup = 0, .repeats = 1, .seed = 11, .check_kv = 1};
    replay *rp = NULL;
    ck_assert_msg(replay_open(be, vr, idx, k + 1, &o, &rp, &err) == KVS_OK, "%s", err.msg);
    int64_t sim_peak = 0;
    for (int64_t i = 0; i <= k; i++) {
        double t;
        ck_assert_msg(replay_step(rp, i, &t, &err) == KVS_OK, "step %lld: %s", (long long)i,
                      err.msg);
        ck_assert(t > 0);
        if (vr->steps[i].step.kv_blocks_used > sim_peak)
            sim_peak = vr->steps[i].step.kv_blocks_used;
    }
    int64_t nb, tok;
    if (must_hold >= 0) {
        (void)replay_sched_blocks(replay_get_sched(rp), must_hold, &nb, &tok);
        ck_assert_int_gt(nb, 0);
        ck_assert_int_gt(tok, 0);
    }
    if (corrupt) {
        int32_t h;
        ck_assert_int_eq(replay_sched_holders(replay_get_sched(rp), &h, 1), 1);
        const int32_t *bt = replay_sched_blocks(replay_get_sched(rp), h, &nb, &tok);
        kernels_kv *kv = replay_get_kv(rp);
        int64_t n = kv->block_size * kv->kv_heads * kv->head_dim;
        float *junk = malloc((size_t)n * sizeof *junk);
        for (int64_t e = 0; e < n; e++)
            junk[e] = 7.0f;
        ck_assert_int_eq(kernels_buf_write(kv->k[kv->layers - 1], (int64_t)bt[0] * n, junk, n,
                                           &err), KVS_OK);
        free(junk);
    }
    int64_t checked, stale;
    double nmse;
    ck_assert_int_eq(replay_check_kv(rp, &checked, &stale, &nmse, &err), KVS_OK);
    ck_assert_int_gt(checked, 0);
    ck_assert_int_eq(stale, 0);
    if (corrupt)
        ck_assert_msg(nmse > 1e-3, "corrupted block not caught: NMSE %g", nmse);
    else
        ck_assert_msg(nmse <= 1e-6, "NMSE %g", nmse);
    val_replay_stats st;
    replay_get_stats(rp, &st);
    ck_assert_int_eq(st.peak_blocks, sim_peak);
    ck_assert_int_eq(st.sched_mismatch, 0);
    ck_assert_int_eq(st.pool_blocks, vr->cfg.sched.total_blocks);
    /* tiny: 2 x 4 layers x 8 tokens x 2 kv heads x 32 x 4 bytes (fp32) */
    ck_assert_int_eq(st.block_bytes, 2 * 4 * 8 * 2 * 32 * 4);
    replay_close(rp);
    kernels_backend_close(be);
    free(idx);
}

START_TEST(test_replay_kv_recompute)
{
    run_config cfg;
    trace tr;
    run_result res;
    small_run(SCHED_PREEMPT_RECOMPUTE, 14, &cfg, &tr, &res);
    ck_assert_int_gt(res.sum.preempt_recompute, 0);
    model_spec m = tiny();
    val_run vr;
    borrow(&vr, &cfg, &m, &tr, &res);
    /* right after a request restarted by a second prefill (recompute) */
    int32_t req = -1;
    int64_t k = step_after(&vr, SCHED_MEMBER_PREFILL, 1, &req);
    ck_assert_int_gt(k, 0);
    replay_and_check(&vr, k, req, 0);
    /* at a third and two thirds of the run */
    replay_and_check(&vr, vr.n_steps / 3, -1, 0);
    replay_and_check(&vr, 2 * vr.n_steps / 3, -1, 0);
    replay_and_check(&vr, vr.n_steps / 2, -1, 1);
    run_result_free(&res);
    trace_free(&tr);
}
END_TEST

START_TEST(test_replay_kv_swap)
{
    run_config cfg;
    trace tr;
    run_result res;
    small_run(SCHED_PREEMPT_SWAP, 14, &cfg, &tr, &res);
    ck_assert_int_gt(res.sum.preempt_swap, 0);
    model_spec m = tiny();
    val_run vr;
    borrow(&vr, &cfg, &m, &tr, &res);
    int32_t req = -1; /* right after a swap-in: its KV came back from the host copy */
    int64_t k = step_after(&vr, SCHED_MEMBER_SWAPIN, 0, &req);
    ck_assert_int_gt(k, 0);
    replay_and_check(&vr, k, req, 0);
    run_result_free(&res);
    trace_free(&tr);
}
END_TEST

/* A sampled replay leaves the skipped steps' contents uncomputed: those
 * requests are skipped by the check, and the block tables still match. */
START_TEST(test_replay_sampled)
{
    run_config cfg;
    trace tr;
    run_result res;
    small_run(SCHED_PREEMPT_RECOMPUTE, 14, &cfg, &tr, &res);
    model_spec m = tiny();
    val_run vr;
    borrow(&vr, &cfg, &m, &tr, &res);
    kvs_err err;
    kernels_backend *be = NULL;
    ck_assert_int_eq(kernels_backend_open("cpu", &be, &err), KVS_OK);
    int64_t idx[8], n;
    ck_assert_int_eq(val_pick_steps(vr.n_steps, VAL_SAMPLING_EVEN, 0, 8, idx, &n, &err), 0);
    replay_options o = {.warmup = 1, .repeats = 3, .seed = 2, .check_kv = 1};
    replay *rp = NULL;
    ck_assert_int_eq(replay_open(be, &vr, idx, n, &o, &rp, &err), KVS_OK);
    for (int64_t k = 0; k < n; k++) {
        double t;
        ck_assert_int_eq(replay_step(rp, idx[k], &t, &err), KVS_OK);
        ck_assert(t > 0);
    }
    ck_assert_int_eq(replay_step(rp, idx[0], &(double){0}, &err), KVS_EINTERNAL); /* order */
    int64_t checked, stale;
    double nmse;
    ck_assert_int_eq(replay_check_kv(rp, &checked, &stale, &nmse, &err), KVS_OK);
    ck_assert(checked == 0 || nmse <= 1e-6);
    val_replay_stats st;
    replay_get_stats(rp, &st);
    ck_assert_int_eq(st.sched_mismatch, 0);
    ck_assert_int_eq(st.sched_checked, idx[n - 1] + 1);
    replay_close(rp);
    kernels_backend_close(be);
    run_result_free(&res);
    trace_free(&tr);
}
END_TEST

/* A pool that cannot fit is refused before anything is allocated. */
START_TEST(test_replay_refused)
{
    run_config cfg;
    trace tr;
    run_result res;
    small_run(SCHED_PREEMPT_RECOMPUTE, 14, &cfg, &tr, &res);
    model_spec m = tiny();
    val_run vr;
    borrow(&vr, &cfg, &m, &tr, &res);
    vr.cfg.sched.total_blocks = (int64_t)1 << 40; /* 2^40 blocks of 16 KiB x 2 ... */
    kvs_err err;
    kernels_backend *be = NULL;
    ck_assert_int_eq(kernels_backend_open("cpu", &be, &err), KVS_OK);
    int64_t idx[1] = {0};
    replay_options o = {.warmup = 0, .repeats = 1, .seed = 0, .check_kv = 0};
    replay *rp = NULL;
    ck_assert_int_eq(replay_open(be, &vr, idx, 1, &o, &rp, &err), KVS_EDEVICE);
    ck_assert_ptr_null(rp);
    ck_assert_ptr_nonnull(strstr(err.msg, "bytes are free"));
    ck_assert_ptr_nonnull(strstr(err.msg, "KV pool 1099511627776 blocks x 4 layers"));
    kernels_backend_close(be);
    run_result_free(&res);
    trace_free(&tr);
}
END_TEST

/* ------------------------------------------------------------ summary */

static double jnum_at(sqlite3 *db, const char *json, const char *path)
{
    sqlite3_stmt *st = NULL;
    ck_assert_int_eq(sqlite3_prepare_v2(db, "SELECT json_extract(?, ?)", -1, &st, NULL),
                     SQLITE_OK);
    sqlite3_bind_text(st, 1, json, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, path, -1, SQLITE_STATIC);
    ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
    double v = sqlite3_column_type(st, 0) == SQLITE_NULL ? NAN : sqlite3_column_double(st, 0);
    sqlite3_finalize(st);
    return v;
}

#define CK_NEAR(a, b) ck_assert_msg(fabs((a) - (b)) < 1e-9, "%s = %.12g, want %.12g", #a, \
                                    (double)(a), (double)(b))

/* Four replayed steps measured at pred * f with f = 2, 0.5, 1, 1.25, so the
 * errors (pred - meas) / meas = 1/f - 1 are -0.5, +1, 0, -0.2:
 *   signed sorted -0.5, -0.2, 0, 1: mean 0.3/4 = 0.075; p50 = rank
 *   ceil(0.5*4) = 2 -> -0.2; p90 = rank ceil(3.6) = 4 -> 1; p99 -> 1;
 *   absolute sorted 0, 0.2, 0.5, 1: mean 1.7/4 = 0.425, p50 = 0.2,
 *   p90 = 1; MAPE 42.5 %.
 * Measured == predicted everywhere: every end-to-end error is 0 and the
 * simulated metrics equal the run's own summary. */
START_TEST(test_summary_golden)
{
    run_config cfg;
    trace tr;
    run_result res;
    small_run(SCHED_PREEMPT_RECOMPUTE, 14, &cfg, &tr, &res);
    model_spec m = tiny();
    val_run vr;
    borrow(&vr, &cfg, &m, &tr, &res);
    kvs_err err;
    double *pred = malloc((size_t)vr.n_steps * sizeof *pred);
    for (int64_t i = 0; i < vr.n_steps; i++)
        pred[i] = vr.steps[i].step.dur_s;
    int64_t idx[4] = {0, 1, 2, 3};
    const double f[4] = {2, 0.5, 1, 1.25};
    double meas[4];
    for (int k = 0; k < 4; k++)
        meas[k] = pred[k] * f[k];
    val_info info = {.device = "cpu", .device_name = "test \"cpu\"", .storage = "fp32",
                     .sampling = VAL_SAMPLING_WINDOW, .max_steps = 4, .repeats = 1};
    val_replay_stats st = {.peak_blocks = 3, .block_bytes = 100, .storage_bytes = 4,
                           .kv_checked = -1, .kv_nmse = NAN, .first_mismatch = -1};
    char *json = NULL;
    ck_assert_int_eq(val_summary_json(&vr, &info, idx, pred, meas, 4, &st, &json, &err), 0);
    sqlite3 *db = NULL;
    ck_assert_int_eq(sqlite3_open(":memory:", &db), SQLITE_OK);
    ck_assert_int_eq((int)jnum_at(db, json, "$.step_error.all.n"), 4);
    CK_NEAR(jnum_at(db, json, "$.step_error.all.mean_signed"), 0.075);
    CK_NEAR(jnum_at(db, json, "$.step_error.all.p50_signed"), -0.2);
    CK_NEAR(jnum_at(db, json, "$.step_error.all.p90_signed"), 1.0);
    CK_NEAR(jnum_at(db, json, "$.step_error.all.p99_signed"), 1.0);
    CK_NEAR(jnum_at(db, json, "$.step_error.all.mean_abs"), 0.425);
    CK_NEAR(jnum_at(db, json, "$.step_error.all.p50_abs"), 0.2);
    CK_NEAR(jnum_at(db, json, "$.step_error.all.p90_abs"), 1.0);
    CK_NEAR(jnum_at(db, json, "$.step_error.all.mape_pct"), 42.5);
    /* groups partition the steps */
    double by_kind = jnum_at(db, json, "$.step_error.by_kind.prefill.n") +
                     jnum_at(db, json, "$.step_error.by_kind.decode.n") +
                     jnum_at(db, json, "$.step_error.by_kind.mixed.n");
    double by_batch = 0;
    const char *bins[] = {"1", "2-8", "9-32", "33-128", ">128"};
    for (int b = 0; b < 5; b++) {
        char p[64];
        snprintf(p, sizeof p, "$.step_error.by_batch.\"%s\".n", bins[b]);
        by_batch += jnum_at(db, json, p);
    }
    CK_NEAR(by_kind, 4);
    CK_NEAR(by_batch, 4);
    CK_NEAR(jnum_at(db, json, "$.step_error.by_shape.new.n") +
                jnum_at(db, json, "$.step_error.by_shape.repeat.n"),
            4);
    /* by_shape_decode: the decode steps alone, split the same way */
    const double n_dec = jnum_at(db, json, "$.step_error.by_kind.decode.n");
    ck_assert(n_dec > 0);
    CK_NEAR(jnum_at(db, json, "$.step_error.by_shape_decode.new.n") +
                jnum_at(db, json, "$.step_error.by_shape_decode.repeat.n"),
            n_dec);
    ck_assert(isnan(jnum_at(db, json, "$.checks.kv_requests")));
    /* memory: simulator bytes = peak x 8 tokens x 2 x 4 layers x 2 heads x 32 x 2 bytes */
    int64_t sim_peak = 0;
    for (int k = 0; k < 4; k++)
        if (vr.steps[k].step.kv_blocks_used > sim_peak)
            sim_peak = vr.steps[k].step.kv_blocks_used;
    CK_NEAR(jnum_at(db, json, "$.memory.kv_bytes_sim"), (double)sim_peak * 8 * 1024);
    CK_NEAR(jnum_at(db, json, "$.memory.kv_bytes_device"), 300);
    free(json);

    /* measured == predicted over every step */
    int64_t *all = malloc((size_t)vr.n_steps * sizeof *all);
    for (int64_t i = 0; i < vr.n_steps; i++)
        all[i] = i;
    ck_assert_int_eq(val_summary_json(&vr, &info, all, pred, pred, vr.n_steps, &st, &json, &err),
                     0);
    CK_NEAR(jnum_at(db, json, "$.step_error.all.mape_pct"), 0);
    CK_NEAR(jnum_at(db, json, "$.e2e.all.error.ttft_p99_s"), 0);
    CK_NEAR(jnum_at(db, json, "$.e2e.all.error.e2e_p50_s"), 0);
    CK_NEAR(jnum_at(db, json, "$.e2e.all.error.throughput_tok_s"), 0);
    ck_assert(jnum_at(db, json, "$.e2e.all.simulated.ttft_p99_s") == res.sum.ttft.p99);
    ck_assert(jnum_at(db, json, "$.e2e.all.simulated.tpot_p50_s") == res.sum.tpot.p50);
    /* every step replayed: every request is covered */
    CK_NEAR(jnum_at(db, json, "$.e2e.covered.n_requests"), (double)tr.n);
    /* each request on its own clock, measured == predicted: the run's own
     * latencies exactly, and no throughput (the clocks share no makespan) */
    CK_NEAR(jnum_at(db, json, "$.e2e.local.covered.n_requests"), (double)tr.n);
    ck_assert(jnum_at(db, json, "$.e2e.local.covered.measured.ttft_p99_s") == res.sum.ttft.p99);
    ck_assert(jnum_at(db, json, "$.e2e.local.covered.measured.e2e_p50_s") == res.sum.e2e.p50);
    CK_NEAR(jnum_at(db, json, "$.e2e.local.covered.error.ttft_p50_s"), 0);
    ck_assert(isnan(jnum_at(db, json, "$.e2e.local.covered.measured.throughput_tok_s")));
    free(json);
    free(all);
    sqlite3_close(db);
    free(pred);
    run_result_free(&res);
    trace_free(&tr);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("validate");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_pick_steps);
    tcase_add_test(tc, test_profile_id_parse);
    tcase_add_test(tc, test_embedding);
    tcase_add_test(tc, test_blocks_match_simulator);
    tcase_add_test(tc, test_retime_reproduces_stored);
    tcase_add_test(tc, test_retime_golden);
    tcase_add_test(tc, test_store_round_trip);
    tcase_add_test(tc, test_replay_kv_recompute);
    tcase_add_test(tc, test_replay_kv_swap);
    tcase_add_test(tc, test_replay_sampled);
    tcase_add_test(tc, test_replay_refused);
    tcase_add_test(tc, test_summary_golden);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    Suite *s = suite();
    return tu_run_suites(&s, 1);
}
