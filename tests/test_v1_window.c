/* test_v1_window.c — sliding-window layers in the vLLM V1 engine
 * (docs/semantics-v1.md rule 2.9, docs/models.md "Sliding windows in
 * runs"): vLLM's KV cache groups of a model, the pool of one group's pages
 * a run sizes, a golden scenario worked out by hand (pages freed as the
 * window slides) and properties on random traces (pages conserved, never
 * more than the pool, the pages in use equal to an independent count, a
 * window group holding at most ceil((w - 1 + q) / bs) + 1 blocks). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scheduler/sched.h"
#include "sim/engine.h"
#include "sim/run.h"
#include "base/rng.h"
#include "testutil.h"

#define SWA_TINY KVSIM_SOURCE_DIR "/tests/data/swa_tiny/config.json"
#define NOWINDOW KVSIM_SOURCE_DIR "/tests/data/swa_tiny_nowindow/config.json"

/* swa_tiny is Gemma-2 shaped: 4 layers alternating window/full, window 32,
 * 2 KV heads of 32 dims in bf16: 2 * 2 * 32 * 2 = 256 bytes per token per
 * layer, 1024 over all 4 layers.  vLLM groups it as one full group of 2
 * layers and one window group of 2 layers: a page is 16 tokens * 2 layers
 * * 256 = 8192 bytes, half of today's block (16 * 1024 = 16384).
 * gemma-3-27b: 10 full and 52 window layers: groups of 10 layers, 1 full
 * group and ceil(52/10) = 6 window groups (the last padded), a page 10/62
 * of the whole model's block. */
START_TEST(test_groups_of_models)
{
    model_spec m;
    kvs_err err;
    model_kv_pages pg;
    ck_assert_int_eq(model_lookup(SWA_TINY, &m, &err), KVS_OK);
    model_kv_page_groups(&m, 1, &pg);
    ck_assert_int_eq(pg.group_layers, 2);
    ck_assert_int_eq(pg.full_groups, 1);
    ck_assert_int_eq(pg.window_groups, 1);
    ck_assert_int_eq(pg.page_bytes_per_token, 512);
    ck_assert_int_eq(pg.window, 32);
    ck_assert_int_eq(model_kv_bytes_per_token(&m, 1), 1024);

    ck_assert_int_eq(model_lookup("gemma-3-27b", &m, &err), KVS_OK);
    model_kv_page_groups(&m, 1, &pg);
    ck_assert_int_eq(pg.group_layers, 10);
    ck_assert_int_eq(pg.full_groups, 1);
    ck_assert_int_eq(pg.window_groups, 6);
    ck_assert_int_eq(pg.page_bytes_per_token * 62, model_kv_bytes_per_token(&m, 1) * 10);

    ck_assert_int_eq(model_lookup("llama-3-8b", &m, &err), KVS_OK); /* no window */
    model_kv_page_groups(&m, 1, &pg);
    ck_assert_int_eq(pg.group_layers, 32);
    ck_assert_int_eq(pg.full_groups, 1);
    ck_assert_int_eq(pg.window_groups, 0);
    ck_assert_int_eq(pg.page_bytes_per_token, model_kv_bytes_per_token(&m, 1));
}
END_TEST

/* The pool: V1 pages = floor(kv_bytes / 8192); V0 keeps today's blocks,
 * floor(kv_bytes / 16384); a model without windows resolves to the same
 * blocks under both engines. */
START_TEST(test_pool_size)
{
    model_spec m;
    gpu_spec g;
    kvs_err err;
    ck_assert_int_eq(model_lookup(SWA_TINY, &m, &err), KVS_OK);
    ck_assert_int_eq(gpu_lookup("a100-80g", &g, &err), KVS_OK);
    run_config c1, c0;
    run_config_defaults(&c1);
    c1.sched.engine = SCHED_ENGINE_VLLM_V1;
    c1.sched.chunked_prefill = 1;
    c1.sched.block_size = 16;
    c0 = c1;
    c0.sched.engine = SCHED_ENGINE_VLLM_V0;
    c0.sched.chunked_prefill = 0;
    ck_assert_msg(run_config_resolve(&c1, &m, &g, &err) == KVS_OK, "%s", err.msg);
    ck_assert_msg(run_config_resolve(&c0, &m, &g, &err) == KVS_OK, "%s", err.msg);
    kv_capacity cap;
    ck_assert_int_eq(run_config_kv_capacity(&c1, &m, &g, &cap, &err), KVS_OK);
    ck_assert_int_eq(c1.sched.total_blocks, cap.kv_bytes / 8192);
    ck_assert_int_eq(c1.sched.kv_window, 32);
    ck_assert_int_eq(c1.sched.kv_full_groups, 1);
    ck_assert_int_eq(c1.sched.kv_window_groups, 1);
    ck_assert_int_eq(run_config_kv_capacity(&c0, &m, &g, &cap, &err), KVS_OK);
    ck_assert_int_eq(c0.sched.total_blocks, cap.kv_bytes / 16384);
    ck_assert_int_eq(c0.sched.kv_window, 0);
    ck_assert_int_eq(c0.sched.kv_window_groups, 0);

    ck_assert_int_eq(model_lookup("llama-3-8b", &m, &err), KVS_OK);
    run_config l1, l0;
    run_config_defaults(&l1);
    l1.sched.engine = SCHED_ENGINE_VLLM_V1;
    l1.sched.block_size = 16;
    l0 = l1;
    l0.sched.engine = SCHED_ENGINE_VLLM_V0;
    ck_assert_int_eq(run_config_resolve(&l1, &m, &g, &err), KVS_OK);
    ck_assert_int_eq(run_config_resolve(&l0, &m, &g, &err), KVS_OK);
    ck_assert_int_eq(l1.sched.kv_window_groups, 0);
    ck_assert_int_eq(run_config_kv_capacity(&l1, &m, &g, &cap, &err), KVS_OK);
    ck_assert_int_eq(l1.sched.total_blocks, cap.kv_blocks);
}
END_TEST

static void window_config(golden *g, int n, const int64_t (*po)[2])
{
    memset(g, 0, sizeof *g);
    g->tr.n = n;
    g->tr.reqs = calloc((size_t)n, sizeof(trace_req));
    for (int i = 0; i < n; i++) {
        g->tr.reqs[i].prompt_tokens = po[i][0];
        g->tr.reqs[i].output_tokens = po[i][1];
    }
    run_config_defaults(&g->cfg);
    sched_config *s = &g->cfg.sched;
    s->engine = SCHED_ENGINE_VLLM_V1;
    s->block_size = 16;
    s->total_blocks = 20;
    s->max_seqs = 8;
    s->max_batched_tokens = 64;
    s->max_model_len = 1000;
    s->chunked_prefill = 1;
    s->kv_window = 32;
    s->kv_full_groups = 1;
    s->kv_window_groups = 1;
    g->cfg.record_steps = 1;
    kvs_err err;
    ck_assert_int_eq(cost_model_create("affine:1,0.5,0.25,0.125", NULL, NULL, 1, &g->cost, &err),
                     0);
}

/* One request, P = 40, O = 40, block 16, window 32, one full and one
 * window group (swa_tiny's groups).  Before a step that stores c tokens and
 * adds q, the full group holds ceil((c + q)/16) pages and the window group
 * the same less the blocks wholly before the window of the next token,
 * floor(max(0, c - 31)/16) (vLLM's skipped tokens c - w + 1).
 *   step 0  prefill c = 0,  q = 40: 3 + 3                 = 6
 *   c = 40..46 (decodes)         : 3 + 3 (skip 0)         = 6
 *   c = 47                       : 3 + 2 (16/16 = 1 freed) = 5
 *   c = 48..62                   : 4 + 3 (skip 1)         = 7
 *   c = 63                       : 4 + 2 (skip 2)         = 6
 *   c = 64..78 (the last decode) : 5 + 3 (skip 2)         = 8
 * 40 steps in all (1 prefill + 39 decodes).  Charged as one group (today,
 * V0), the same request would hold 3, 4, 5 blocks of twice the size: 6, 8,
 * 10 pages.  With prefix caching off (2.9's rule for window groups is
 * then moot) the pages come back to 20 free at the end. */
START_TEST(test_golden_window_slides)
{
    const int64_t po[1][2] = {{40, 40}};
    golden g;
    window_config(&g, 1, po);
    g.cfg.sched.prefix_caching = 0;
    golden_run(&g);
    ck_assert_int_eq(g.res.n_steps, 40);
    for (int64_t i = 0; i < g.res.n_steps; i++) {
        const sched_step *s = &g.res.steps[i].step;
        int64_t c = i == 0 ? 0 : 39 + i, want;
        if (i == 0 || c <= 46)
            want = 6;
        else if (c == 47)
            want = 5;
        else if (c <= 62)
            want = 7;
        else if (c == 63)
            want = 6;
        else
            want = 8;
        ck_assert_msg(s->kv_blocks_used == want, "step %lld (c %lld): %lld pages, want %lld",
                      (long long)i, (long long)c, (long long)s->kv_blocks_used,
                      (long long)want);
    }
    ck_assert_int_eq(g.res.sum.n_finished, 1);
    golden_free(&g);
}
END_TEST

/* Two requests sharing N = 13 pages, budget 64, prefix caching off:
 * A = (P 40, O 40) as above, B = (P 64, O 2), both at t = 0.  R's order is
 * A, B; the victim of a shortage is the last of R.
 *   step 0: A c 0 q 40 (3 + 3 = 6 pages); B gets the 24 tokens left:
 *           c 0 q 24, 2 + 2 = 4.  10 used, 2 running, 64 tokens.
 *   step 1: A c 40 decodes (fits its 3 blocks: 6); B c 24 q 40 -> 64 tokens
 *           wants 4 + 4 = 8, 4 more: 10 + 4 = 14 > 13, B (last of R) is
 *           preempted: 6 used, 1 running, 1 preemption, 1 token.
 *   steps 2..7: A c 41..46 holds 6; B (c 0, q 63: 8 pages) would need 14.
 *   step 8: A c 47 frees its window block 0 (5 pages): 5 + 8 = 13 fits, B
 *           is admitted (c 0 q 63): 13 used, 64 tokens.  The window's
 *           freed page is what lets B in.
 *   step 9: A c 48 needs a 4th block, 1 + 1 pages, and F = 0: B is preempted
 *           again (its own trim comes after A's in the walk): 7 used.
 *   steps 10..39: A alone, 7 (c 49..62), 6 (c 63), 8 (c 64..78); B needs 8
 *           each time and never fits beside A.
 *   step 40: B c 0 q 64 (T = 64 fits the budget): 4 + 4 = 8 pages, its first
 *           token; step 41: B c 64 decodes: 5 + (5 - floor(33/16)) = 8.
 * 42 steps, B preempted twice, both finish. */
START_TEST(test_two_requests_share_pool)
{
    const int64_t po[2][2] = {{40, 40}, {64, 2}};
    golden g;
    window_config(&g, 2, po);
    g.cfg.sched.total_blocks = 13;
    g.cfg.sched.prefix_caching = 0;
    golden_run(&g);
    ck_assert_int_eq(g.res.n_steps, 42);
    const int64_t used[10] = {10, 6, 6, 6, 6, 6, 6, 6, 13, 7};
    const int64_t run[10] = {2, 1, 1, 1, 1, 1, 1, 1, 2, 1};
    const int64_t tok[10] = {64, 1, 1, 1, 1, 1, 1, 1, 64, 1};
    for (int i = 0; i < 42; i++) {
        const sched_step *st = &g.res.steps[i].step;
        int64_t u = i < 10 ? used[i] : i < 24 ? 7 : i == 24 ? 6 : 8;
        ck_assert_msg(st->kv_blocks_used == u, "step %d: %lld pages, want %lld", i,
                      (long long)st->kv_blocks_used, (long long)u);
        ck_assert_int_eq(st->n_running, i < 10 ? run[i] : 1);
        ck_assert_int_eq(st->batch.tokens, i < 10 ? tok[i] : i == 40 ? 64 : 1);
        ck_assert_int_eq(st->n_preempted, i == 1 || i == 9);
    }
    ck_assert_int_eq(g.res.reqs[1].preemptions, 2);
    ck_assert_int_eq(g.res.sum.n_finished, 2);
    golden_free(&g);
}
END_TEST

/* --------------------------------------------------------- properties */
typedef struct wprop {
    sched *s;
    const trace *t;
    int64_t N, bs, w, gf, gw, pfx;
    int64_t bad, steps, checked, slid;
    char first[320];
} wprop;

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* Independent count of a member's pages for a step storing c and adding q. */
static int64_t member_pages(const wprop *a, int64_t c, int64_t q, int64_t *win)
{
    int64_t want = cdiv(c + q, a->bs);
    int64_t lo = c - a->w + 1 > 0 ? (c - a->w + 1) / a->bs : 0;
    if (lo > want)
        lo = want;
    *win = want - lo;
    return a->gf * want + a->gw * (want - lo);
}

static void wprop_step(void *ctx, const sched_step *st, const sched_member *m, int64_t nm)
{
    wprop *a = ctx;
    char why[256] = "";
    a->steps++;
    if (st->kv_blocks_used > a->N)
        snprintf(why, sizeof why, "%lld pages of %lld", (long long)st->kv_blocks_used,
                 (long long)a->N);
    if (!why[0] && sched_audit(a->s, why, sizeof why) == 0 && !a->pfx && nm == st->n_running) {
        /* every running request is in the step: the pages in use are the
         * sum of each member's count (no sharing without prefix caching) */
        int64_t sum = 0;
        for (int64_t i = 0; i < nm; i++) {
            int64_t win, q = m[i].tokens, c = m[i].context - q;
            sum += member_pages(a, c, q, &win);
            if (win > cdiv(a->w - 1 + q, a->bs) + 1)
                snprintf(why, sizeof why, "r%d holds %lld window blocks (c %lld q %lld)",
                         m[i].req_id, (long long)win, (long long)c, (long long)q);
            if (q == 1 && win > cdiv(a->w, a->bs) + 1)
                snprintf(why, sizeof why, "r%d decodes with %lld window blocks", m[i].req_id,
                         (long long)win);
            a->slid += c - a->w + 1 >= a->bs;
        }
        if (!why[0] && sum != st->kv_blocks_used)
            snprintf(why, sizeof why, "%lld pages used, members hold %lld",
                     (long long)st->kv_blocks_used, (long long)sum);
        a->checked++;
    }
    if (why[0] && a->bad++ == 0)
        snprintf(a->first, sizeof a->first, "step %lld: %s", (long long)st->index, why);
}

static void run_window_prop(uint64_t seed, int pfx, int64_t *checked, int64_t *slid)
{
    trace t;
    tu_random_trace(&t, 150, seed, 120, 60, (int)(seed & 1));
    sched_config c;
    memset(&c, 0, sizeof c);
    c.engine = SCHED_ENGINE_VLLM_V1;
    c.policy = seed & 1 ? SCHED_POLICY_PRIORITY : SCHED_POLICY_FCFS;
    c.block_size = 1 + (int64_t)(seed % 9);
    c.kv_window = 1 + (int64_t)(seed % 40);
    c.kv_full_groups = 1 + (int64_t)(seed % 2);
    c.kv_window_groups = 1 + (int64_t)(seed % 3);
    c.max_model_len = 200;
    c.total_blocks = (c.kv_full_groups + c.kv_window_groups) * 120 / c.block_size +
                     (int64_t)(seed % 50);
    c.max_seqs = 2 + (int64_t)(seed % 12);
    c.max_batched_tokens = 16 + (int64_t)(seed % 100);
    c.chunked_prefill = 1;
    c.prefix_caching = pfx;
    cost_model cost;
    kvs_err err;
    ck_assert_int_eq(cost_model_create("affine:0.01,0.001,0.0001,0.00001", NULL, NULL, 1, &cost,
                                       &err), 0);
    sched *s;
    ck_assert_msg(sched_init(&s, &c, t.reqs, t.n, &cost, &err) == 0, "%s", err.msg);
    wprop a;
    memset(&a, 0, sizeof a);
    a.s = s;
    a.t = &t;
    a.N = c.total_blocks;
    a.bs = c.block_size;
    a.w = c.kv_window;
    a.gf = c.kv_full_groups;
    a.gw = c.kv_window_groups;
    a.pfx = pfx;
    sched_set_step_sink(s, wprop_step, &a, 1);
    double end;
    ck_assert_msg(engine_run(s, &t, &end, &err) == 0, "seed %llu: %s",
                  (unsigned long long)seed, err.msg);
    ck_assert_msg(a.bad == 0, "seed %llu pfx %d: %lld bad steps, first: %s",
                  (unsigned long long)seed, pfx, (long long)a.bad, a.first);
    sched_counters k;
    sched_get_counters(s, &k);
    char why[256];
    ck_assert_msg(sched_audit(s, why, sizeof why) == 0, "end: %s", why);
    ck_assert_int_eq(k.used_blocks, 0);
    ck_assert_int_eq(k.free_blocks, c.total_blocks);
    ck_assert_int_eq(k.n_finished + k.n_rejected, t.n);
    ck_assert_int_gt(k.n_finished, 0);
    *checked += a.checked;
    *slid += a.slid;
    sched_free(s);
    cost_model_free(&cost);
    trace_free(&t);
}

START_TEST(test_random_window_properties)
{
    int64_t checked = 0, slid = 0;
    for (uint64_t seed = 1; seed <= 40; seed++)
        for (int pfx = 0; pfx <= 1; pfx++)
            run_window_prop(seed, pfx, &checked, &slid);
    /* the exact count ran on many steps, and windows did slide */
    ck_assert_int_gt(checked, 1000);
    ck_assert_int_gt(slid, 1000);
}
END_TEST

/* Same inputs, same results: a window run twice gives equal records. */
START_TEST(test_window_deterministic)
{
    const int64_t po[3][2] = {{70, 30}, {50, 45}, {90, 10}};
    golden g1, g2;
    window_config(&g1, 3, po);
    window_config(&g2, 3, po);
    g1.cfg.sched.total_blocks = g2.cfg.sched.total_blocks = 16;
    g1.cfg.sched.prefix_caching = g2.cfg.sched.prefix_caching = 1;
    golden_run(&g1);
    golden_run(&g2);
    ck_assert_int_eq(g1.res.n_steps, g2.res.n_steps);
    for (int64_t i = 0; i < g1.res.n_steps; i++) {
        ck_assert_int_eq(g1.res.steps[i].step.kv_blocks_used, g2.res.steps[i].step.kv_blocks_used);
        ck_assert(g1.res.steps[i].step.dur_s == g2.res.steps[i].step.dur_s);
    }
    golden_free(&g1);
    golden_free(&g2);
}
END_TEST

/* Prefix caching with a window group (rule 2.9): N = 6 pages, block 16,
 * window 32, segments of 16 tokens.  A (t 0, P 40, O 1) takes full-group
 * pages 1, 2, 3 then window pages 4, 5, 6 (Q's front, group by group) and
 * registers the full blocks 0 and 1 of both groups (pages 1, 2 and 4, 5).
 * It finishes; freeing goes full group last to first, then the window
 * group: Q = 3 2 1 6 5 4.  B (t 100, same ids) hits floor(39/16) = 2
 * blocks: c = 32, q = 8, and the window skips floor(1/16) = 0 blocks, so
 * both groups need blocks 0..2.  The window group finds its cached pages
 * 4 and 5 and holds them, like the full group's 1 and 2; the fresh blocks
 * 2 come off Q's front: 3 (full) and 6 (window), neither cached: no
 * eviction.  (Taking the window's pages fresh would evict 5 and 4.)
 * B's step: 8 tokens, 6 pages in use, 32 tokens hit. */
START_TEST(test_window_prefix_reuse)
{
    const int64_t po[2][2] = {{40, 1}, {40, 1}};
    golden g;
    window_config(&g, 2, po);
    g.tr.reqs[1].arrival_s = 100;
    sched_config *s = &g.cfg.sched;
    s->total_blocks = 6;
    s->prefix_caching = 1;
    s->segment_tokens = 16;
    g.tr.hash_off = calloc(3, sizeof *g.tr.hash_off);
    g.tr.hash_ids = calloc(6, sizeof *g.tr.hash_ids);
    g.tr.hash_tokens = calloc(6, sizeof *g.tr.hash_tokens);
    const int64_t off[3] = {0, 3, 6};
    const uint64_t ids[6] = {11, 12, 13, 11, 12, 13};
    const int32_t tok[6] = {16, 16, 8, 16, 16, 8};
    memcpy(g.tr.hash_off, off, sizeof off);
    memcpy(g.tr.hash_ids, ids, sizeof ids);
    memcpy(g.tr.hash_tokens, tok, sizeof tok);
    golden_run(&g);
    ck_assert_int_eq(g.res.n_steps, 2);
    ck_assert_int_eq(g.res.steps[0].step.kv_blocks_used, 6);
    ck_assert_int_eq(g.res.steps[1].step.kv_blocks_used, 6);
    ck_assert_int_eq(g.res.steps[1].step.batch.tokens, 8);
    ck_assert_int_eq(g.res.sum.prefix_hit_tokens, 32);
    ck_assert_int_eq(g.res.sum.prefix_evictions, 0);
    ck_assert_int_eq(g.res.sum.n_finished, 2);
    golden_free(&g);
}
END_TEST

/* The groups' fields are checked: a window needs window groups and the
 * other way round. */
START_TEST(test_config_rules)
{
    sched_config c;
    memset(&c, 0, sizeof c);
    c.engine = SCHED_ENGINE_VLLM_V1;
    c.block_size = 16;
    c.total_blocks = 100;
    c.max_seqs = 8;
    c.max_batched_tokens = 2048;
    c.max_model_len = 4096;
    c.chunked_prefill = 1;
    kvs_err err;
    c.kv_window = 32;
    ck_assert_int_eq(sched_config_check(&c, 10, &err), KVS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "KV groups"));
    c.kv_window_groups = 1;
    ck_assert_int_eq(sched_config_check(&c, 10, &err), KVS_OK);
    c.kv_window = 0;
    ck_assert_int_eq(sched_config_check(&c, 10, &err), KVS_EINVAL);
    c.kv_window = 32;
    c.kv_full_groups = -1;
    ck_assert_int_eq(sched_config_check(&c, 10, &err), KVS_EINVAL);
}
END_TEST

/* The CLI: `kvsim run` on swa_tiny prints twice the blocks of
 * swa_tiny_nowindow (pages of 2 of the 4 layers of the same size; the same
 * bytes, so 2 * blocks or 2 * blocks + 1 after rounding).  Then the same bytes of KV as 80 pages of swa_tiny or 40
 * blocks of swa_tiny_nowindow (its window as long as its context: no
 * window layer, one group): prompts of 200 tokens, far beyond the window
 * of 32, hold about (ceil(300/16) + 3) / 2 = 11 blocks' worth instead of 19,
 * so the window model runs larger batches. */
static double field_after(const char *out, const char *key)
{
    const char *p = strstr(out, key);
    ck_assert_msg(p != NULL, "'%s' not in: %s", key, out);
    return strtod(p + strlen(key), NULL);
}

static double cli_field(const char *args, const char *key)
{
    char cmd[2048];
    char *out;
    snprintf(cmd, sizeof cmd, "%s run --db %s/a.db %s --synthetic "
             "'arrival=poisson,rate=50,n=200,prompt=200,output=100' --seed 3",
             tu_kvsim(), tu_tmpdir(), args);
    ck_assert_msg(tu_run(cmd, &out) == 0, "%s: %s", cmd, out);
    double v = field_after(out, key);
    free(out);
    return v;
}

START_TEST(test_cli_run)
{
    double v0 = cli_field("--model " NOWINDOW, "KV cache ");
    double v1 = cli_field("--model " SWA_TINY, "KV cache ");
    ck_assert_msg(v1 == 2 * v0 || v1 == 2 * v0 + 1, "%.0f pages, %.0f blocks", v1, v0);
    /* V0 keeps blocks of all 4 layers: the window model's blocks equal
     * the windowless one's under V0 */
    ck_assert(cli_field("--model " SWA_TINY " --engine vllm-v0", "KV cache ") ==
              cli_field("--model " NOWINDOW " --engine vllm-v0", "KV cache "));
    double bw = cli_field("--model " SWA_TINY " --kv-blocks 80", "mean batch ");
    double bf = cli_field("--model " NOWINDOW " --kv-blocks 40", "mean batch ");
    ck_assert_msg(bw > 1.5 * bf, "mean batch %.2f with windows, %.2f without", bw, bf);
}
END_TEST

/* Disaggregated serving's hooks with a window (block 4, window 8, one full
 * and one window group, N 100).  Kept: r0 (P 20, O 1) finishes at its
 * first step (c 0 q 20: 5 + 5 = 10 pages) and, kept, still holds its 10
 * pages, both groups' (audited); r1 (P 6) beside it takes 2 + 2: 14.
 * Releases give back 4, then 10.  Prefilled: r2 (P 20, O 3) arrives with
 * its 20 prompt tokens stored; it never takes the window blocks already
 * skipped: lo = floor((20 - 7) / 4) = 3, so its first decode holds
 * ceil(21 / 4) = 6 full + 6 - 3 = 3 window pages = 9, and its second (c 21,
 * lo floor(14 / 4) = 3, 6 blocks) 9 again. */
static int64_t pages_used(const sched *s)
{
    sched_counters c;
    sched_get_counters(s, &c);
    char why[256];
    ck_assert_msg(sched_audit(s, why, sizeof why) == 0, "%s", why);
    return c.used_blocks;
}

START_TEST(test_keep_and_remote)
{
    trace_req reqs[3] = {{0, 20, 1, 0}, {0, 6, 1, 0}, {0, 20, 3, 0}};
    sched_config sc;
    memset(&sc, 0, sizeof sc);
    sc.engine = SCHED_ENGINE_VLLM_V1;
    sc.block_size = 4;
    sc.total_blocks = 100;
    sc.max_seqs = 16;
    sc.max_batched_tokens = 1000;
    sc.max_model_len = 1000;
    sc.kv_window = 8;
    sc.kv_full_groups = 1;
    sc.kv_window_groups = 1;
    cost_model cost;
    kvs_err err;
    ck_assert_int_eq(cost_model_create("affine:1,0,0,0", NULL, NULL, 1, &cost, &err), 0);
    sched *p;
    ck_assert(sched_init(&p, &sc, reqs, 3, &cost, &err) == 0);
    ck_assert(sched_keep_finished(p, 1, &err) == 0);
    double t;
    sched_arrive(p, 0);
    ck_assert_int_eq(sched_plan_step(p, 0, 1, &t), SCHED_PLAN_STEP);
    sched_finish_step(p, t);
    ck_assert_int_eq(sched_results(p)[0].status, SCHED_REQ_FINISHED);
    ck_assert_int_eq(pages_used(p), 10);
    sched_arrive(p, 1);
    ck_assert_int_eq(sched_plan_step(p, t, 0, &t), SCHED_PLAN_STEP);
    ck_assert_int_eq(pages_used(p), 14);
    sched_finish_step(p, t);
    sched_release_finished(p, 1);
    ck_assert_int_eq(pages_used(p), 10);
    sched_release_finished(p, 0);
    ck_assert_int_eq(pages_used(p), 0);
    sched_free(p);

    /* the remote request r2 (P 20, O 3): its load allocates for P + 1 =
     * 21 tokens, 6 blocks in each group (a window group trims only from
     * the stored tokens, none yet): 12 pages in flight; admitted with 20
     * stored, the window group keeps blocks 3.. ((20 - 8 + 1) / 4 = 3
     * skipped): 6 + 3 = 9 pages */
    ck_assert(sched_init(&p, &sc, reqs, 3, &cost, &err) == 0);
    ck_assert_int_eq(sched_accept_remote(p, &err), 0);
    sched_arrive_remote(p, 2);
    ck_assert_int_eq(sched_plan_step(p, 0, 0, &t), SCHED_PLAN_IDLE);
    int64_t nl;
    const sched_kv_load *ld = sched_loads_started(p, &nl);
    ck_assert_int_eq(nl, 1);
    ck_assert_int_eq(ld[0].id, 2);
    ck_assert_int_eq(ld[0].tokens, 20);
    ck_assert_int_eq(pages_used(p), 12);
    sched_kv_loaded(p, 2);
    int steps = 0;
    double now = 0;
    while (sched_plan_step(p, now, 0, &t) == SCHED_PLAN_STEP) {
        ck_assert_int_eq(pages_used(p), 9);
        sched_finish_step(p, t);
        now = t;
        steps++;
    }
    ck_assert_int_eq(steps, 2);
    ck_assert_int_eq(sched_results(p)[2].status, SCHED_REQ_FINISHED);
    ck_assert_int_eq(pages_used(p), 0);
    sched_free(p);
    cost_model_free(&cost);
}
END_TEST

int main(void)
{
    Suite *su = suite_create("v1_window");
    TCase *t = tcase_create("window");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, test_groups_of_models);
    tcase_add_test(t, test_pool_size);
    tcase_add_test(t, test_golden_window_slides);
    tcase_add_test(t, test_two_requests_share_pool);
    tcase_add_test(t, test_random_window_properties);
    tcase_add_test(t, test_window_deterministic);
    tcase_add_test(t, test_config_rules);
    tcase_add_test(t, test_cli_run);
    tcase_add_test(t, test_keep_and_remote);
    tcase_add_test(t, test_window_prefix_reuse);
    suite_add_tcase(su, t);
    Suite *all[] = {su};
    return tu_run_suites(all, 1);
}
