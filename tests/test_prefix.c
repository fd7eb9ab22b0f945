/* test_prefix.c — prefix caching (docs/semantics-extensions.md, P and L):
 * golden scenarios worked out by hand (a shared prefix, LRU eviction, the
 * last-token rule), invariants on random traces with and without chunked
 * prefill (reference counts recounted from scratch, blocks conserved,
 * counts back to zero at the end), the lpm policy, and the hit rate on the
 * shipped Mooncake conversation trace against an independent count. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scheduler/sched.h"
#include "sim/engine.h"
#include "base/rng.h"
#include "sim/run.h"
#include "testutil.h"

/* ----------------------------------------------------------- trace kit */

/* A request and its prompt segments {id, tokens}, ended by {0, 0}. */
typedef struct req_spec {
    double arrival;
    int64_t p, o;
    int64_t seg[8][2];
} req_spec;

static void make_trace(trace *t, const req_spec *rs, int n)
{
    memset(t, 0, sizeof *t);
    t->n = n;
    t->reqs = calloc((size_t)n, sizeof *t->reqs);
    t->hash_off = calloc((size_t)n + 1, sizeof *t->hash_off);
    t->hash_ids = calloc((size_t)n * 8 + 1, sizeof *t->hash_ids);
    t->hash_tokens = calloc((size_t)n * 8 + 1, sizeof *t->hash_tokens);
    int64_t k = 0;
    for (int i = 0; i < n; i++) {
        t->reqs[i].arrival_s = rs[i].arrival;
        t->reqs[i].prompt_tokens = rs[i].p;
        t->reqs[i].output_tokens = rs[i].o;
        t->hash_off[i] = k;
        for (int j = 0; j < 8 && rs[i].seg[j][1] > 0; j++) {
            t->hash_ids[k] = (uint64_t)rs[i].seg[j][0];
            t->hash_tokens[k++] = (int32_t)rs[i].seg[j][1];
        }
    }
    t->hash_off[n] = k;
}


static void golden_setup(golden *g, const req_spec *rs, int n, const char *cost)
{
    memset(g, 0, sizeof *g);
    make_trace(&g->tr, rs, n);
    run_config_defaults(&g->cfg);
    sched_config *s = &g->cfg.sched;
    s->block_size = 4;
    s->total_blocks = 10;
    s->watermark = 0.0;
    s->max_seqs = 256;
    s->max_batched_tokens = 1000;
    s->max_model_len = 1000;
    s->prefix_caching = 1;
    g->cfg.record_steps = 1;
    kvs_err err;
    ck_assert_int_eq(cost_model_create(cost, NULL, NULL, 1, &g->cost, &err), 0);
}

static const sched_member *member(const golden *g, int64_t step, int64_t i)
{
    ck_assert_int_lt(step, g->res.n_steps);
    const run_step_rec *r = &g->res.steps[step];
    int64_t end = step + 1 < g->res.n_steps ? g->res.steps[step + 1].member_off
                                             : g->res.n_members;
    ck_assert_int_lt(r->member_off + i, end);
    return &g->res.members[r->member_off + i];
}

#define EPS 1e-9

/* Scenario A: two requests share a prefix; the second computes only the rest.
 * block 4, 10 blocks, watermark 0; affine 1 + 0.01*tokens + 0.001*(prefill_sq
 * + 2*prefill_ctx).
 *   r0 (t0, P10, O2) segments [7: 8 tokens][8: 2]
 *   r1 (t0, P12, O1) segments [7: 8 tokens][9: 4]
 * Cacheable blocks: r0 floor(10/4) = 2 (tokens 0-7, both in segment 7);
 * r1 3 (blocks 0, 1 in segment 7, the same identities as r0's; block 2,
 * tokens 8-11, in segment 9).
 * t=0  admit r0: cache empty, m = 0, q = 10, 3 blocks (two cached with count
 *      1, one private), F = 7.  Then r1: m = 2 (r0's blocks), c = 8, q = 4;
 *      it holds 3 blocks, of which blocks 0 and 1 are shared with count > 0:
 *      net 1 block, F = 6.  Prefill [r0 r1]: tokens 14, prefill_sq
 *      100 + 16 = 116, prefill_ctx 4*8 = 32, prefill_cached 8:
 *      d = 1 + 0.14 + 0.001*(116 + 64) = 1.32.  Both first tokens at 1.32;
 *      r1 (O1) finishes: its block 2 drops to count 0 (cached, F 7), blocks 0
 *      and 1 to count 1.
 * t=1.32 decode [r0]: context 11 fits its 3 blocks: d = 1.01 -> 2.33, r0
 *      finishes: private block and blocks 1, 0 return, F = 10, 3 cached.
 * Hits: query tokens 10 + 12 = 22, hit tokens 8, saved 8; query blocks
 * 2 + 3 = 5, hit blocks 2. */
START_TEST(test_shared_prefix)
{
    const req_spec rs[] = {{0, 10, 2, {{7, 8}, {8, 2}}}, {0, 12, 1, {{7, 8}, {9, 4}}}};
    golden g;
    golden_setup(&g, rs, 2, "affine:1,0.01,0,0.001");
    golden_run(&g);
    const sched_step *s0 = &g.res.steps[0].step;
    ck_assert_int_eq(s0->kind, SCHED_STEP_PREFILL);
    ck_assert_int_eq(s0->batch.tokens, 14);
    ck_assert_int_eq(s0->batch.prefill_sq, 116);
    ck_assert_int_eq(s0->batch.prefill_ctx, 32);
    ck_assert_int_eq(s0->batch.prefill_cached, 8);
    ck_assert_int_eq(s0->kv_blocks_used, 4); /* 3 of r0 + r1's own block 2 */
    /* r1's member: only the 4 uncached tokens, context 12 */
    ck_assert_int_eq(member(&g, 0, 1)->req_id, 1);
    ck_assert_int_eq(member(&g, 0, 1)->tokens, 4);
    ck_assert_int_eq(member(&g, 0, 1)->context, 12);
    ck_assert(fabs(s0->dur_s - 1.32) < EPS);
    ck_assert(fabs(g.res.reqs[1].first_token_s - 1.32) < EPS);
    ck_assert(fabs(g.res.reqs[1].finish_s - 1.32) < EPS);
    ck_assert(fabs(g.res.reqs[0].finish_s - 2.33) < EPS);
    /* the decode step: r0's 3 blocks are in use (blocks 0 and 1 back to
     * count 1 when r1 left), r1's block 2 is cached but unused */
    ck_assert_int_eq(g.res.n_steps, 2);
    ck_assert_int_eq(g.res.steps[1].step.kv_blocks_used, 3);
    ck_assert_int_eq(g.res.sum.prefix_hit_tokens, 8);
    ck_assert_int_eq(g.res.sum.prefix_saved_tokens, 8);
    ck_assert(fabs(g.res.sum.prefix_hit_rate - 8.0 / 22.0) < EPS);
    ck_assert(fabs(g.res.sum.prefix_block_hit_rate - 2.0 / 5.0) < EPS);
    ck_assert_int_eq(g.res.sum.prefix_evictions, 0);
    golden_free(&g);

    /* Without prefix caching r1 computes all 12 tokens: 1 + 0.22 +
     * 0.001*(100 + 144) = 1.464. */
    golden_setup(&g, rs, 2, "affine:1,0.01,0,0.001");
    g.cfg.sched.prefix_caching = 0;
    golden_run(&g);
    ck_assert(fabs(g.res.steps[0].step.dur_s - 1.464) < EPS);
    ck_assert(isnan(g.res.sum.prefix_hit_rate));
    golden_free(&g);
}
END_TEST

/* Scenario B: LRU eviction order and the last-token rule.
 * block 4, 4 blocks, max_seqs 1 (one request at a time), watermark 0, every
 * step 1 s.  Every request has O = 1, so each runs one prefill step and
 * leaves; requests leave their blocks last to first (P7).
 *   r0 P8 [1: 8]  blocks a0 a1      r3 P8 [1: 8]  (= r0)
 *   r1 P8 [2: 8]  blocks b0 b1      r4 P8 [2: 8]  (= r1)
 *   r2 P4 [3: 4]  block c0          r5 P4 [3: 4], r6 P4 [3: 4]  (= r2)
 * t0 r0: F 4 -> 2; leaves: LRU (least recent first) [a1 a0], F 4.
 * t1 r1: takes 2 of the 2 truly free blocks; leaves: [a1 a0 b1 b0].
 * t2 r2: needs 1 fresh block, none truly free: evict a1 (LRU head).
 *        leaves: [a0 b1 b0 c0].  evictions 1.
 * t3 r3: m = 1 (a0 cached, a1 not): c = 4, q = 4 (member tokens 4,
 *        prefill_ctx 16).  a0 leaves the list (now held), a1 needs a fresh
 *        block: evict b1 (not a0!).  evictions 2.  leaves: [b0 c0 a1 a0].
 * t4 r4: m = 1 (b0): c = 4, q = 4; b1 fresh: evict c0.  evictions 3.
 *        leaves: [a1 a0 b1 b0].
 * t5 r5: m = 0 (c0 evicted): q = 4; c0 fresh: evict a1.  evictions 4.
 *        leaves: [a0 b1 b0 c0].
 * t6 r6: m = 1 = the whole prompt: the last token is computed: c = 3,
 *        q = 1 (member tokens 1, context 4, prefill_ctx 3); no eviction.
 * Totals: hit tokens 4+4+4 = 12, saved 4+4+3 = 11, query tokens 44. */
START_TEST(test_lru_eviction)
{
    const req_spec rs[] = {
        {0, 8, 1, {{1, 8}}}, {0, 8, 1, {{2, 8}}}, {0, 4, 1, {{3, 4}}}, {0, 8, 1, {{1, 8}}},
        {0, 8, 1, {{2, 8}}}, {0, 4, 1, {{3, 4}}}, {0, 4, 1, {{3, 4}}},
    };
    golden g;
    golden_setup(&g, rs, 7, "affine:1,0,0,0");
    g.cfg.sched.total_blocks = 4;
    g.cfg.sched.max_seqs = 1;
    golden_run(&g);
    ck_assert_int_eq(g.res.n_steps, 7);
    const int64_t want_q[7] = {8, 8, 4, 4, 4, 4, 1};
    const int64_t want_ctx[7] = {0, 0, 0, 16, 16, 0, 3};
    for (int i = 0; i < 7; i++) {
        ck_assert_int_eq(member(&g, i, 0)->req_id, i);
        ck_assert_msg(member(&g, i, 0)->tokens == want_q[i], "step %d: q %lld, want %lld", i,
                      (long long)member(&g, i, 0)->tokens, (long long)want_q[i]);
        ck_assert_int_eq(g.res.steps[i].step.batch.prefill_ctx, want_ctx[i]);
        ck_assert(fabs(g.res.reqs[i].finish_s - (i + 1)) < EPS);
    }
    ck_assert_int_eq(member(&g, 6, 0)->context, 4);
    ck_assert_int_eq(g.res.sum.prefix_evictions, 4);
    ck_assert_int_eq(g.res.sum.prefix_hit_tokens, 12);
    ck_assert_int_eq(g.res.sum.prefix_saved_tokens, 11);
    ck_assert(fabs(g.res.sum.prefix_hit_rate - 12.0 / 44.0) < EPS);
    golden_free(&g);
}
END_TEST

/* Scenario C: lpm orders W by cached prefix, and re-keys as blocks are
 * cached.  block 4, max_seqs 1, every step 1 s.
 *   r0 (t0, P8 [1: 8], O1)    r1 (t0.5, P8 [2: 8], O1)
 *   r2 (t0.5, P8 [1: 8], O1)  r3 (t0.5, P12 [2: 8][5: 4], O1)
 * t0 r0 alone: prefill, leaves [a0 a1] cached at t1.
 * t1 W = r1 (m 0), r2 (m 2: r0's blocks), r3 (m 0): lpm admits r2 first
 *    (FCFS would take r1).  r2 hits both blocks: c = 7, q = 1.
 * t2 r1 and r3 tie at m 0: r1 (earlier id) runs and caches b0 b1; r3's key
 *    rises to 2 at once (its watchers fire), but only one request runs.
 * t3 r3: c = 8, q = 4.
 * Under FCFS the order would be r1, r2, r3 instead. */
START_TEST(test_lpm_order)
{
    const req_spec rs[] = {{0, 8, 1, {{1, 8}}},
                           {0.5, 8, 1, {{2, 8}}},
                           {0.5, 8, 1, {{1, 8}}},
                           {0.5, 12, 1, {{2, 8}, {5, 4}}}};
    golden g;
    golden_setup(&g, rs, 4, "affine:1,0,0,0");
    g.cfg.sched.max_seqs = 1;
    g.cfg.sched.policy = SCHED_POLICY_LPM;
    golden_run(&g);
    ck_assert_int_eq(g.res.n_steps, 4);
    const int want_id[4] = {0, 2, 1, 3};
    const int64_t want_q[4] = {8, 1, 8, 4};
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(member(&g, i, 0)->req_id, want_id[i]);
        ck_assert_int_eq(member(&g, i, 0)->tokens, want_q[i]);
    }
    ck_assert(fabs(g.res.reqs[2].finish_s - 2.0) < EPS);
    ck_assert(fabs(g.res.reqs[1].finish_s - 3.0) < EPS);
    golden_free(&g);

    golden_setup(&g, rs, 4, "affine:1,0,0,0");
    g.cfg.sched.max_seqs = 1;
    golden_run(&g); /* fcfs */
    ck_assert_int_eq(member(&g, 1, 0)->req_id, 1);
    ck_assert_int_eq(member(&g, 2, 0)->req_id, 2);
    golden_free(&g);
}
END_TEST

/* ------------------------------------------------------ random traces */

/* Prompts drawn from a small pool of shared prefixes: a system part (one of
 * 3), an optional conversation part (one of 5), and a unique tail. */
static void random_prefix_trace(trace *t, int n, uint64_t seed)
{
    req_spec *rs = calloc((size_t)n, sizeof *rs);
    rng r;
    rng_init(&r, seed);
    double at = 0;
    for (int i = 0; i < n; i++) {
        at += rng_exponential(&r, 0.05);
        if (i > 0 && rng_uniform(&r) < 0.2)
            at = rs[i - 1].arrival;
        rs[i].arrival = at;
        int k = 0;
        int64_t p = 0;
        int64_t sys = (int64_t)rng_below(&r, 3);
        rs[i].seg[k][0] = 1 + sys;
        rs[i].seg[k][1] = 10 + 7 * sys;
        p += rs[i].seg[k++][1];
        if (rng_uniform(&r) < 0.6) {
            int64_t c = (int64_t)rng_below(&r, 5);
            rs[i].seg[k][0] = 10 + c;
            rs[i].seg[k][1] = 5 + 9 * c;
            p += rs[i].seg[k++][1];
        }
        rs[i].seg[k][0] = 1000 + i;
        rs[i].seg[k][1] = 1 + (int64_t)rng_below(&r, 40);
        p += rs[i].seg[k++][1];
        rs[i].p = p + (int64_t)rng_below(&r, 3); /* sometimes beyond the hashed part */
        rs[i].o = 1 + (int64_t)rng_below(&r, 30);
    }
    make_trace(t, rs, n);
    free(rs);
}

typedef struct audit_ctx {
    sched *s;
    int64_t total;           /* KV blocks */
    int64_t steps, bad;
    char first[300];
    int64_t prefill_tokens; /* sum of prefill member tokens */
} audit_ctx;

static void audit_step(void *ctx, const sched_step *st, const sched_member *m, int64_t nm)
{
    audit_ctx *a = ctx;
    char why[256];
    a->steps++;
    for (int64_t i = 0; i < nm; i++)
        if (m[i].kind == SCHED_MEMBER_PREFILL)
            a->prefill_tokens += m[i].tokens;
    sched_counters c;
    sched_get_counters(a->s, &c);
    /* the full recount is O(requests * blocks): every 4th step (and at the
     * end); the counters every step */
    int bad = st->index % 4 == 0 && sched_audit(a->s, why, sizeof why) != 0;
    /* cached (evictable) + used + truly free = total */
    if (!bad && (c.cached_blocks < 0 || c.cached_blocks > c.free_blocks ||
                 c.cached_blocks + c.used_blocks + (c.free_blocks - c.cached_blocks) != a->total)) {
        snprintf(why, sizeof why, "cached %lld, used %lld, free %lld, total %lld",
                 (long long)c.cached_blocks, (long long)c.used_blocks, (long long)c.free_blocks,
                 (long long)a->total);
        bad = 1;
    }
    if (!bad && st->kv_blocks_used != c.used_blocks) {
        snprintf(why, sizeof why, "step says %lld blocks used, counters %lld",
                 (long long)st->kv_blocks_used, (long long)c.used_blocks);
        bad = 1;
    }
    if (bad && a->bad++ == 0)
        snprintf(a->first, sizeof a->first, "step %lld: %s", (long long)st->index, why);
}

/* Run one random configuration with an audit at every step; check the end
 * state.  Returns the counters. */
static void run_audited(uint64_t seed, int chunked, int lpm, sched_counters *out,
                        audit_ctx *a)
{
    trace t;
    random_prefix_trace(&t, 300, seed);
    sched_config c;
    memset(&c, 0, sizeof c);
    c.batching = SCHED_BATCHING_CONTINUOUS;
    c.policy = lpm ? SCHED_POLICY_LPM : SCHED_POLICY_FCFS;
    c.alloc = SCHED_ALLOC_PAGED;
    c.preemption = SCHED_PREEMPT_RECOMPUTE;
    c.block_size = 1 + (int64_t)(seed % 8);
    c.max_model_len = 200;
    c.total_blocks = (c.max_model_len + c.block_size - 1) / c.block_size + (int64_t)(seed % 50);
    c.max_seqs = 2 + (int64_t)(seed % 20);
    c.max_batched_tokens = chunked ? c.block_size + (int64_t)(seed % 90) : 200;
    c.watermark = (seed % 3) * 0.02;
    c.chunked_prefill = chunked;
    c.prefix_caching = 1;
    cost_model cost;
    kvs_err err;
    ck_assert_int_eq(cost_model_create("affine:0.01,0.001,0.0001,0.00001", NULL, NULL, 1, &cost,
                                       &err), 0);
    sched *s;
    ck_assert_msg(sched_init(&s, &c, t.reqs, t.n, &cost, &err) == 0, "%s", err.msg);
    req_prefixes px = trace_prefixes(&t);
    ck_assert_int_eq(sched_attach_prefixes(s, &px, &err), 0);
    memset(a, 0, sizeof *a);
    a->s = s;
    a->total = c.total_blocks;
    sched_set_step_sink(s, audit_step, a, 1);
    double end;
    ck_assert_msg(engine_run(s, &t, &end, &err) == 0, "seed %llu: %s",
                  (unsigned long long)seed, err.msg);
    ck_assert_msg(a->bad == 0, "seed %llu chunked %d lpm %d: %lld bad steps, first: %s",
                  (unsigned long long)seed, chunked, lpm, (long long)a->bad, a->first);
    sched_get_counters(s, out);
    char why[256];
    ck_assert_msg(sched_audit(s, why, sizeof why) == 0, "end: %s", why);
    /* every reference is back to zero: nothing used, all cached blocks free */
    ck_assert_int_eq(out->used_blocks, 0);
    ck_assert_int_eq(out->free_blocks, c.total_blocks);
    ck_assert_int_eq(out->n_finished + out->n_rejected, t.n);
    ck_assert(out->cached_blocks >= 0 && out->cached_blocks <= c.total_blocks);
    sched_free(s);
    cost_model_free(&cost);
    trace_free(&t);
}

/* Reference counts recounted from scratch at every step (sched_audit: each
 * cached block's count = requests holding it; evictable = count 0 and on
 * the LRU list; free = total - private - shared in use; prefix closure),
 * and back to zero at the end; with and without chunked prefill and lpm.
 * Without preemption, prefill tokens computed + tokens saved = prompt
 * tokens admitted. */
START_TEST(test_random_refcounts)
{
    int64_t evictions = 0, hits = 0, preempted = 0;
    for (uint64_t seed = 1; seed <= 16; seed++) {
        for (int mode = 0; mode < 4; mode++) {
            sched_counters c;
            audit_ctx a;
            run_audited(seed, mode & 1, mode >> 1, &c, &a);
            evictions += c.prefix_evictions;
            hits += c.prefix_hit_blocks;
            if (c.preempt_recompute == 0)
                ck_assert_int_eq(a.prefill_tokens + c.prefix_saved_tokens,
                                 c.prefix_query_tokens);
            else
                preempted++;
        }
    }
    /* the random configurations do exercise hits, evictions, preemption */
    ck_assert_int_gt(hits, 1000);
    ck_assert_int_gt(evictions, 100);
    ck_assert_int_gt(preempted, 5);
}
END_TEST

/* Same inputs, same outputs: two runs agree byte for byte. */
START_TEST(test_deterministic)
{
    trace t;
    random_prefix_trace(&t, 400, 99);
    for (int mode = 0; mode < 4; mode++) {
        run_result r[2];
        for (int k = 0; k < 2; k++) {
            run_config cfg;
            run_config_defaults(&cfg);
            cfg.sched.block_size = 4;
            cfg.sched.total_blocks = 60;
            cfg.sched.max_seqs = 8;
            cfg.sched.max_batched_tokens = mode & 1 ? 64 : 200;
            cfg.sched.max_model_len = 200;
            cfg.sched.chunked_prefill = mode & 1;
            cfg.sched.prefix_caching = 1;
            cfg.sched.policy = mode >> 1 ? SCHED_POLICY_LPM : SCHED_POLICY_FCFS;
            cost_model cost;
            kvs_err err;
            ck_assert_int_eq(cost_model_create("affine:0.01,0.001,0.0001,0.00001", NULL, NULL,
                                               1, &cost, &err), 0);
            ck_assert_msg(run_execute(&cfg, &t, &cost, &r[k], &err) == 0, "%s", err.msg);
            cost_model_free(&cost);
        }
        ck_assert(memcmp(r[0].reqs, r[1].reqs, (size_t)t.n * sizeof *r[0].reqs) == 0);
        ck_assert_int_eq(r[0].sum.prefix_hit_tokens, r[1].sum.prefix_hit_tokens);
        ck_assert_int_gt(r[0].sum.prefix_hit_tokens, 0);
        run_result_free(&r[0]);
        run_result_free(&r[1]);
    }
    trace_free(&t);
}
END_TEST

/* A trace without hashes shares nothing: prefix caching (and lpm, which
 * then orders as FCFS) must give exactly the schedule without them, with
 * and without chunked prefill, preemptions included. */
START_TEST(test_no_hashes_no_change)
{
    for (uint64_t seed = 1; seed <= 6; seed++) {
        trace t;
        random_prefix_trace(&t, 400, seed);
        free(t.hash_off);
        free(t.hash_ids);
        free(t.hash_tokens);
        t.hash_off = NULL;
        t.hash_ids = NULL;
        t.hash_tokens = NULL;
        for (int chunked = 0; chunked < 2; chunked++) {
            run_result r[3];
            for (int k = 0; k < 3; k++) {
                run_config cfg;
                run_config_defaults(&cfg);
                cfg.sched.block_size = 1 + (int64_t)(seed % 5);
                cfg.sched.total_blocks = 200 / cfg.sched.block_size + 10;
                cfg.sched.max_seqs = 12;
                cfg.sched.max_batched_tokens = chunked ? 48 : 200;
                cfg.sched.max_model_len = 200;
                cfg.sched.chunked_prefill = chunked;
                cfg.sched.prefix_caching = k > 0;
                cfg.sched.policy = k == 2 ? SCHED_POLICY_LPM : SCHED_POLICY_FCFS;
                cfg.record_steps = 1;
                cost_model cost;
                kvs_err err;
                ck_assert_int_eq(cost_model_create("affine:0.01,0.001,0.0001,0.00001", NULL,
                                                   NULL, 1, &cost, &err), 0);
                ck_assert_msg(run_execute(&cfg, &t, &cost, &r[k], &err) == 0, "%s", err.msg);
                cost_model_free(&cost);
            }
            ck_assert_int_gt(r[0].sum.preemptions, 0);
            for (int k = 1; k < 3; k++) {
                ck_assert(memcmp(r[0].reqs, r[k].reqs, (size_t)t.n * sizeof *r[0].reqs) == 0);
                ck_assert_int_eq(r[0].n_steps, r[k].n_steps);
                ck_assert_int_eq(r[k].sum.prefix_hit_tokens, 0);
                ck_assert(r[k].sum.prefix_hit_rate == 0.0);
                for (int64_t i = 0; i < r[0].n_steps; i++)
                    ck_assert(memcmp(&r[0].steps[i].step, &r[k].steps[i].step,
                                     sizeof r[0].steps[i].step) == 0);
            }
            for (int k = 0; k < 3; k++)
                run_result_free(&r[k]);
        }
        trace_free(&t);
    }
}
END_TEST

/* ------------------------------------------------ the Mooncake trace */

/* The expected hits, counted independently from the JSONL text: request by
 * request, k = the number of leading hash_ids already seen in any earlier
 * request.  The README's "ideal prefix hit" credits min(k*512, P) tokens;
 * the engine caches full blocks inside the prompt only (P1), so with 512-
 * token blocks a request's last, partial Mooncake block is never a hit and
 * the engine's hits are min(k, floor(P/512)) * 512 tokens. */
static void mooncake_expected(const char *path, int64_t *tokens, int64_t *ideal,
                              int64_t *engine)
{
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    /* every id of the file (at most 190k distinct) as a bitmap of seen ids */
    size_t cap = 1 << 20;
    unsigned char *seen = calloc(cap, 1);
    char *line = NULL;
    size_t lcap = 0;
    int64_t ids[1024];
    *tokens = *ideal = *engine = 0;
    while (getline(&line, &lcap, f) > 0) {
        const char *in = strstr(line, "\"input_length\": ");
        const char *h = strstr(line, "\"hash_ids\": [");
        ck_assert(in && h);
        int64_t p = strtoll(in + 16, NULL, 10);
        int n = 0;
        for (char *q = (char *)h + 13; *q && *q != ']';) {
            ids[n++] = strtoll(q, &q, 10);
            ck_assert(n < 1024);
            while (*q == ',' || *q == ' ')
                q++;
        }
        int k = 0;
        while (k < n && ids[k] >= 0 && (size_t)ids[k] < cap && seen[ids[k]])
            k++;
        *tokens += p;
        *ideal += k * INT64_C(512) < p ? k * INT64_C(512) : p;
        *engine += (k < p / 512 ? k : p / 512) * INT64_C(512);
        for (int i = 0; i < n; i++) {
            ck_assert((size_t)ids[i] < cap);
            seen[ids[i]] = 1;
        }
    }
    free(line);
    free(seen);
    fclose(f);
}

/* With an unbounded cache (a block per token of the whole trace, no
 * preemption, every request admitted in arrival order), the engine's hit
 * tokens equal the independent count exactly.  Block size 512 makes the
 * comparison exact and simple: engine block j is Mooncake block j, so the
 * leading cached blocks are exactly the leading ids seen before, capped at
 * the full blocks of the prompt.  (Smaller blocks would also hit the full
 * sub-blocks of a partial last block that an earlier request with the same
 * partial block cached.)  The README's ideal 37.4% counts those partial
 * blocks whole; the engine's figure is slightly lower (37.34%). */
START_TEST(test_mooncake_unbounded_hit_rate)
{
    const char *path = "traces/mooncake_fast25_conversation_trace.jsonl";
    int64_t tokens, ideal, engine;
    mooncake_expected(path, &tokens, &ideal, &engine);
    ck_assert_int_eq(tokens, 144793823);
    ck_assert_msg(fabs((double)ideal / (double)tokens - 0.3736) < 5e-5, "ideal %.5f",
                  (double)ideal / (double)tokens);
    trace t;
    kvs_err err;
    ck_assert_msg(trace_load(path, &t, &err) == 0, "%s", err.msg);
    run_config cfg;
    run_config_defaults(&cfg);
    sched_config *s = &cfg.sched;
    s->block_size = 512;
    s->total_blocks = 1000000; /* > 144.8M / 512 blocks: nothing is ever evicted */
    s->max_seqs = 1 << 20;
    s->max_batched_tokens = 1 << 30;
    s->max_model_len = 1 << 30;
    s->watermark = 0;
    s->prefix_caching = 1;
    cost_model cost;
    ck_assert_int_eq(cost_model_create("affine:0.01,0,0,0", NULL, NULL, 1, &cost, &err), 0);
    run_result res;
    ck_assert_msg(run_execute(&cfg, &t, &cost, &res, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(res.sum.n_finished, t.n);
    ck_assert_int_eq(res.sum.preemptions, 0);
    ck_assert_int_eq(res.sum.prefix_evictions, 0);
    ck_assert_int_eq(res.sum.prefix_hit_tokens, engine);
    ck_assert(res.sum.prefix_hit_rate == (double)engine / (double)tokens);
    ck_assert_msg(fabs(res.sum.prefix_hit_rate - 0.37338) < 1e-5, "hit rate %.6f",
                  res.sum.prefix_hit_rate);
    run_result_free(&res);
    cost_model_free(&cost);
    trace_free(&t);
}
END_TEST

/* ------------------------------------------------- synthetic prefixes */

/* system_prompt and turns (T2): the same seed gives the same arrivals and
 * sampled lengths as without them; conversation c = i mod C (C = ceil(10/3)
 * = 4) holds turns i / C; turn 0 is [system 100][user u_i], turn t the
 * previous turn's segments + [its output] + [user u_i]. */
START_TEST(test_synth_prefixes)
{
    const char *base = "arrival=poisson,rate=2,n=10,prompt=uniform:5:9,output=uniform:1:4";
    char spec[256];
    snprintf(spec, sizeof spec, "%s,system_prompt=100,turns=3", base);
    trace a, b;
    trace_synth_spec sa, sb;
    kvs_err err;
    ck_assert_int_eq(trace_synth_parse(base, &sa, &err), 0);
    ck_assert_int_eq(trace_synth_parse(spec, &sb, &err), 0);
    ck_assert_int_eq(sb.system_prompt, 100);
    ck_assert_int_eq(sb.turns, 3);
    ck_assert_int_eq(trace_synth_gen(&sa, base, 5, &a, &err), 0);
    ck_assert_int_eq(trace_synth_gen(&sb, spec, 5, &b, &err), 0);
    ck_assert(a.hash_off == NULL);
    ck_assert(b.hash_off != NULL);
    for (int i = 0; i < 10; i++) {
        ck_assert(a.reqs[i].arrival_s == b.reqs[i].arrival_s);
        ck_assert_int_eq(a.reqs[i].output_tokens, b.reqs[i].output_tokens);
        int64_t u = a.reqs[i].prompt_tokens, p, k = b.hash_off[i], n = b.hash_off[i + 1] - k;
        if (i < 4) {
            p = 100 + u;
            ck_assert_int_eq(n, 2);
            ck_assert(b.hash_ids[k] == 1 && b.hash_tokens[k] == 100);
        } else {
            int j = i - 4;
            p = b.reqs[j].prompt_tokens + a.reqs[j].output_tokens + u;
            int64_t kj = b.hash_off[j], nj = b.hash_off[j + 1] - kj;
            ck_assert_int_eq(n, nj + 2);
            for (int64_t x = 0; x < nj; x++)
                ck_assert(b.hash_ids[k + x] == b.hash_ids[kj + x] &&
                          b.hash_tokens[k + x] == b.hash_tokens[kj + x]);
            ck_assert(b.hash_ids[k + nj] == 3 + 2 * (uint64_t)j); /* turn j's output */
            ck_assert_int_eq(b.hash_tokens[k + nj], a.reqs[j].output_tokens);
        }
        ck_assert_int_eq(b.reqs[i].prompt_tokens, p);
        ck_assert(b.hash_ids[k + n - 1] == 2 + 2 * (uint64_t)i); /* its own user part */
        ck_assert_int_eq(b.hash_tokens[k + n - 1], u);
    }
    trace_free(&a);
    trace_free(&b);
    ck_assert_int_eq(trace_synth_parse("n=5,rate=1,prompt=5,output=5,turns=0", &sa, &err),
                     KVS_EINVAL);
    ck_assert(strstr(err.msg, "--synthetic: turns:") != NULL);
    ck_assert_int_eq(trace_synth_parse("n=5,rate=1,prompt=5,output=5,system_prompt=-3", &sa,
                                       &err), KVS_EINVAL);
    ck_assert(strstr(err.msg, "--synthetic: system_prompt:") != NULL);
    /* turns that grow a prompt past TRACE_MAX_TOKENS: request 4 (turn 1 of
     * conversation 0) would hold 9e8 + 9e8 + 9e8 = 2.7e9 tokens, past what a
     * request's 32-bit length holds, so the sum is taken and refused in
     * 64 bits, naming the true total */
    const char *huge = "arrival=poisson,rate=1,n=10,prompt=900000000,output=900000000,turns=3";
    ck_assert_int_eq(trace_synth_parse(huge, &sa, &err), 0);
    ck_assert_int_eq(trace_synth_gen(&sa, huge, 5, &a, &err), KVS_EINVAL);
    ck_assert_msg(strstr(err.msg, "--synthetic: turns: request 4's prompt of 2700000000 tokens is "
                                  "above the limit of 1000000000") != NULL, "%s", err.msg);
}
END_TEST

/* ---------------------------------------------------- configuration */

START_TEST(test_config_errors)
{
    sched_config c;
    memset(&c, 0, sizeof c);
    c.block_size = 16;
    c.total_blocks = 100;
    c.max_seqs = 4;
    c.max_batched_tokens = 64;
    c.max_model_len = 1000;
    kvs_err err;
    c.policy = SCHED_POLICY_LPM;
    ck_assert_int_eq(sched_config_check(&c, 1, &err), KVS_EINVAL);
    ck_assert(strstr(err.msg, "--policy lpm") && strstr(err.msg, "--prefix-caching"));
    c.prefix_caching = 1;
    ck_assert_int_eq(sched_config_check(&c, 1, &err), KVS_OK);
    c.alloc = SCHED_ALLOC_RESERVED;
    ck_assert_int_eq(sched_config_check(&c, 1, &err), KVS_EINVAL);
    ck_assert(strstr(err.msg, "--alloc paged") != NULL);
    c.alloc = SCHED_ALLOC_PAGED;
    c.preemption = SCHED_PREEMPT_SWAP;
    c.swap_blocks = 10;
    ck_assert_int_eq(sched_config_check(&c, 1, &err), KVS_EINVAL);
    ck_assert(strstr(err.msg, "--preemption swap") != NULL);
    c.preemption = SCHED_PREEMPT_RECOMPUTE;
    c.policy = SCHED_POLICY_FCFS;
    c.batching = SCHED_BATCHING_STATIC;
    ck_assert_int_eq(sched_config_check(&c, 1, &err), KVS_EINVAL);
    ck_assert(strstr(err.msg, "--prefix-caching") && strstr(err.msg, "--batching"));
}
END_TEST

/* kvsim run: the summary reports the hit rate; lpm without prefix caching
 * is one line naming the flag, exit 2. */
START_TEST(test_cli)
{
    char cmd[2048], *out = NULL;
    const char *dir = tu_tmpdir();
    snprintf(cmd, sizeof cmd,
             "%s run --engine vllm-v0 --synthetic 'arrival=poisson,rate=5,n=200,prompt=uniform:20:200,"
             "output=uniform:5:50,system_prompt=600,turns=3' --db %s/a.db --prefix-caching "
             "--policy lpm --cost affine:0.01,0.0001,0,0",
             tu_kvsim(), dir);
    ck_assert_int_eq(tu_run(cmd, &out), 0);
    ck_assert_msg(strstr(out, "prefix cache     hit ") != NULL, "%s", out);
    free(out);
    /* the runs row holds the configuration and the prefix metrics */
    snprintf(cmd, sizeof cmd,
             "%s query --db %s/a.db --csv --no-header \"SELECT chunked_prefill, prefix_caching, "
             "policy, prefix_hit_rate > 0.5, prefix_saved_tokens <= prefix_hit_tokens, "
             "prefix_hit_tokens > 0, prefill_chunks FROM runs\"",
             tu_kvsim(), dir);
    ck_assert_int_eq(tu_run(cmd, &out), 0);
    ck_assert_msg(!strcmp(out, "0,1,lpm,1,1,1,0\n"), "%s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "%s run --engine vllm-v0 --synthetic 'n=10,rate=1,prompt=10,output=5' --db %s/b.db "
             "--policy lpm", tu_kvsim(), dir);
    ck_assert_int_eq(tu_run(cmd, &out), 2);
    ck_assert_msg(strstr(out, "--policy lpm") && strchr(out, '\n') == strrchr(out, '\n'), "%s",
                  out);
    free(out);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("prefix");
    TCase *g = tcase_create("golden");
    tcase_add_test(g, test_shared_prefix);
    tcase_add_test(g, test_lru_eviction);
    tcase_add_test(g, test_lpm_order);
    suite_add_tcase(s, g);
    TCase *p = tcase_create("properties");
    tcase_set_timeout(p, 120);
    tcase_add_test(p, test_random_refcounts);
    tcase_add_test(p, test_deterministic);
    tcase_add_test(p, test_no_hashes_no_change);
    suite_add_tcase(s, p);
    TCase *m = tcase_create("mooncake");
    tcase_set_timeout(m, 120);
    tcase_add_test(m, test_mooncake_unbounded_hit_rate);
    suite_add_tcase(s, m);
    TCase *c = tcase_create("config");
    tcase_add_test(c, test_synth_prefixes);
    tcase_add_test(c, test_config_errors);
    tcase_add_test(c, test_cli);
    suite_add_tcase(s, c);
    return tu_run_suites(&s, 1);
}
