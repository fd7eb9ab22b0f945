/* test_leaps.c — the leaping engine against the step-by-step one.
 *
 * Given a horizon (sched_set_horizon, which the event loop sets to the next
 * arrival), the V1 engine plans runs of forced decode steps at once instead
 * of one per call (scheduler/v1.c, v1_leap).  That must change nothing: on
 * random traces and random configurations (each engine profile; fcfs and
 * priority; chunked prefill on and off; prefix caching on and off, with
 * prefix ids on a grid and of varying lengths; long-prefill thresholds;
 * block sizes 1..8 and caches small enough to preempt), the run with leaps
 * and the run with KVSIM_NO_LEAP=1 (one step per plan, the reference) must
 * give byte-identical step records (every field of every step, in order),
 * per-request results, engine counters and run summaries.  The test also
 * requires that leaps happened in every feature class it mixes, so it
 * cannot pass by leaping never.
 *
 * V0, with a leap sink, sinks a decode step whose members are exactly the
 * previous step's without listing them (leapt = 1, the requests told once
 * per stretch; scheduler/continuous.c), and with a horizon too it leaps
 * over such steps (v0_leap): the first test's V0 runs get a leap sink, and
 * test_v0_leaps_identical and two hand-computed scenarios check V0 leaps
 * against horizons off.  The second
 * test runs random V0 configurations (continuous, chunked, static; fcfs,
 * priority with and without priority preemption; recompute and swap;
 * paged and reserved; prefix caching; no KV cache) and V1 ones (whose
 * steps between leaps, and a cluster's, are sunk the same way), single
 * engines and clusters, twice: with the leap sink, and listing every
 * member (no leap sink, the reference).  The inter-token gaps streamed from
 * each (sim/itl.h: histogram, mean, std, count, every request's largest
 * gap and token state), the step records (but for the leapt flag), the
 * request results and the run summaries must be identical, and same-set
 * steps must have happened. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "scheduler/sched.h"
#include "sim/engine.h"
#include "sim/itl.h"
#include "sim/run.h"
#include "testutil.h"

typedef struct step_log {
    sched_step *st;
    uint64_t *dig; /* [n] a digest of the members the step listed, 0 none or leapt */
    int64_t n, cap;
} step_log;

static void log_step(void *ctx, const sched_step *st, const sched_member *m, int64_t n)
{
    step_log *l = ctx;
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 1024;
        l->st = realloc(l->st, (size_t)l->cap * sizeof *l->st);
        l->dig = realloc(l->dig, (size_t)l->cap * sizeof *l->dig);
        ck_assert(l->st && l->dig);
    }
    uint64_t h = 0;
    for (int64_t i = 0; i < n; i++) { /* FNV-1a over each member's fields */
        const int64_t f[4] = {m[i].req_id, m[i].kind, m[i].tokens, m[i].context};
        for (int k = 0; k < 4; k++)
            h = (h ^ (uint64_t)f[k]) * 1099511628211ULL;
    }
    /* a leapt step lists some members at most (a V1 leap's chunks): none compared */
    l->dig[l->n] = n > 0 && !st->leapt ? h | 1 : 0;
    l->st[l->n++] = *st;
}

/* Steps that both logs list members of list the same ones (a step sunk
 * leapt lists none). */
static void same_members(const step_log *a, const step_log *b, uint64_t seed)
{
    ck_assert_int_eq(a->n, b->n);
    for (int64_t i = 0; i < a->n; i++)
        ck_assert_msg(!a->dig[i] || !b->dig[i] || a->dig[i] == b->dig[i],
                      "seed %llu: step %lld lists other members", (unsigned long long)seed,
                      (long long)i);
}

/* Random prefix ids: segment j of a request gets an id from a pool of 2, so
 * chains are often shared; on a grid of S tokens (grid) or with segment
 * lengths in [1, 2S] (no grid), covering at most the prompt. */
static void add_prefixes(trace *t, uint64_t seed, int64_t S, int grid)
{
    rng r;
    rng_init(&r, seed ^ 0x5eedULL);
    t->hash_off = calloc((size_t)t->n + 1, sizeof *t->hash_off);
    int64_t cap = 0;
    for (int64_t i = 0; i < t->n; i++)
        cap += t->reqs[i].prompt_tokens + 1;
    t->hash_ids = calloc((size_t)cap, sizeof *t->hash_ids);
    t->hash_tokens = calloc((size_t)cap, sizeof *t->hash_tokens);
    int64_t k = 0;
    for (int64_t i = 0; i < t->n; i++) {
        t->hash_off[i] = k;
        int64_t covered = 0; /* segments cover at most the prompt */
        for (;;) {
            int64_t len = grid ? S : 1 + (int64_t)rng_below(&r, (uint64_t)(2 * S));
            if (covered + len > t->reqs[i].prompt_tokens)
                break;
            t->hash_ids[k] = rng_below(&r, 2);
            t->hash_tokens[k] = (int32_t)len;
            k++;
            covered += len;
        }
    }
    t->hash_off[t->n] = k;
    t->hash_block = grid ? S : 0;
}

static void free_trace(trace *t)
{
    free(t->reqs);
    free(t->hash_off);
    free(t->hash_ids);
    free(t->hash_tokens);
}

typedef struct outcome {
    step_log log;
    sched_req_result *res;
    sched_counters ctr;
    int64_t released;   /* sched_state_released at the end, bytes */
    int rc;
} outcome;

static void count_leap(void *ctx, const int32_t *ids, int64_t n, int64_t steps,
                       const int32_t *each)
{
    (void)ctx;
    (void)ids;
    (void)n;
    (void)steps;
    (void)each;
}

/* One engine run through the event loop, horizons on (leaps) or off
 * (KVSIM_NO_LEAP=1); V0 gets a leap sink (it leaps only with one), V1 none
 * (it leaps without one when the sink wants no members). */
static void run_engine(const run_config *cfg, const trace *tr, const cost_model *cost,
                       int leaps, outcome *o)
{
    kvs_err err;
    memset(o, 0, sizeof *o);
    if (leaps)
        unsetenv("KVSIM_NO_LEAP");
    else
        setenv("KVSIM_NO_LEAP", "1", 1);
    sched *s;
    ck_assert_msg(sched_init(&s, &cfg->sched, tr->reqs, tr->n, cost, &err) == 0, "%s", err.msg);
    req_prefixes px = trace_prefixes(tr);
    ck_assert_int_eq(sched_attach_prefixes(s, &px, &err), 0);
    sched_set_step_sink(s, log_step, &o->log, 0);
    if (cfg->sched.engine == SCHED_ENGINE_VLLM_V0)
        sched_set_leap_sink(s, count_leap);
    double end;
    o->rc = engine_run(s, tr, &end, &err);
    ck_assert_msg(o->rc == 0, "%s", err.msg);
    o->res = malloc((size_t)tr->n * sizeof *o->res);
    memcpy(o->res, sched_results(s), (size_t)tr->n * sizeof *o->res);
    sched_get_counters(s, &o->ctr);
    o->released = sched_state_released(s);
    char why[256];
    ck_assert_msg(sched_audit(s, why, sizeof why) == 0, "%s", why);
    sched_free(s);
    unsetenv("KVSIM_NO_LEAP");
}

/* One random V1 (or V0) configuration per seed. */
static void random_config(run_config *cfg, uint64_t seed, int v1)
{
    run_config_defaults(cfg);
    sched_config *s = &cfg->sched;
    rng r;
    rng_init(&r, seed * 2654435761ULL + 17);
    s->engine = v1 ? SCHED_ENGINE_VLLM_V1 : SCHED_ENGINE_VLLM_V0;
    s->batching = SCHED_BATCHING_CONTINUOUS;
    s->policy = rng_below(&r, 2) ? SCHED_POLICY_PRIORITY : SCHED_POLICY_FCFS;
    s->alloc = SCHED_ALLOC_PAGED;
    s->preemption = SCHED_PREEMPT_RECOMPUTE;
    s->block_size = 1 + (int64_t)rng_below(&r, 8);
    s->max_model_len = 400;
    s->total_blocks = (400 + s->block_size - 1) / s->block_size + (int64_t)rng_below(&r, 150);
    s->max_seqs = 2 + (int64_t)rng_below(&r, 40);
    s->max_batched_tokens = 400 + (int64_t)rng_below(&r, 300);
    s->chunked_prefill = (int)rng_below(&r, 2);
    s->prefix_caching = (int)rng_below(&r, 2);
    s->long_prefill_threshold = rng_below(&r, 3) == 0 ? 1 + (int64_t)rng_below(&r, 60) : 0;
    s->segment_tokens = 4 + (int64_t)rng_below(&r, 12);
    s->watermark = 0.0;
    if (!v1) { /* V0: no threshold nor segment size; smaller chunks */
        s->long_prefill_threshold = 0;
        s->segment_tokens = 0;
        if (s->chunked_prefill)
            s->max_batched_tokens = 64 + (int64_t)rng_below(&r, 200);
    }
    cfg->record_steps = 0;
}

static void outcome_free(outcome *o);

/* The step-by-step engine (KVSIM_NO_LEAP=1) on the same input gives what
 * the leaping run a gave: the same steps (every field), request results
 * and counters, but for the leaps' own counters. */
static void same_as_step_by_step(const run_config *cfg, const trace *tr, const cost_model *cost,
                                 uint64_t seed, const outcome *a)
{
    outcome b;
    run_engine(cfg, tr, cost, 0, &b);
    ck_assert_int_eq(b.ctr.leap_steps, 0);
    ck_assert_msg(a->log.n == b.log.n, "seed %llu: %lld steps with leaps, %lld without",
                  (unsigned long long)seed, (long long)a->log.n, (long long)b.log.n);
    for (int64_t i = 0; i < a->log.n; i++)
        ck_assert_msg(memcmp(&a->log.st[i], &b.log.st[i], sizeof a->log.st[i]) == 0,
                      "seed %llu: step %lld differs (start %.9g vs %.9g, kv_read %lld vs "
                      "%lld, blocks %lld vs %lld)", (unsigned long long)seed, (long long)i,
                      a->log.st[i].start_s, b.log.st[i].start_s,
                      (long long)a->log.st[i].batch.kv_read, (long long)b.log.st[i].batch.kv_read,
                      (long long)a->log.st[i].kv_blocks_used, (long long)b.log.st[i].kv_blocks_used);
    ck_assert_msg(memcmp(a->res, b.res, (size_t)tr->n * sizeof *a->res) == 0,
                  "seed %llu: request results differ", (unsigned long long)seed);
    sched_counters ca = a->ctr;
    ca.leap_steps = 0;
    ca.leap_finishes = 0;
    ca.leap_prefills = 0;
    ca.leap_chunks = 0;
    ca.leap_joins = 0;
    ca.leap_preempted = 0;
    ck_assert_msg(memcmp(&ca, &b.ctr, sizeof ca) == 0, "seed %llu: counters differ "
                  "(prefill chunks %lld vs %lld)", (unsigned long long)seed,
                  (long long)ca.prefill_chunks, (long long)b.ctr.prefill_chunks);
    outcome_free(&b);
}

START_TEST(test_leaps_identical)
{
    kvs_err err;
    cost_model cost;
    tu_cost_affine(&cost);
    /* leapt steps per class: [pfx][chunked][priority] */
    int64_t leapt[2][2][2] = {{{0}}};
    int64_t preempted_runs = 0, leapt_v0 = 0, leap_finishes = 0, leap_prefills = 0,
            leap_chunks = 0, leap_joins = 0, leap_preempted = 0;
    /* 200 seeds: seed 192 (V0, one prefix id named with two segment lengths)
     * broke the prefix cache's closure until segment lengths joined the chain */
    for (uint64_t seed = 1; seed <= 200; seed++) {
        const int v1 = seed % 8 != 0; /* a few V0 runs: no leaps, same answer */
        run_config cfg;
        random_config(&cfg, seed, v1);
        trace tr;
        tu_random_trace(&tr, 120 + (int)(seed % 80), seed * 7919, 300, 90, 1);
        if (cfg.sched.prefix_caching)
            add_prefixes(&tr, seed, v1 ? cfg.sched.segment_tokens : 8, seed % 3 != 0);
        outcome a;
        run_engine(&cfg, &tr, &cost, 1, &a);
        same_as_step_by_step(&cfg, &tr, &cost, seed, &a);
        leap_joins += a.ctr.leap_joins;
        leap_finishes += a.ctr.leap_finishes;
        leap_prefills += a.ctr.leap_prefills;
        leap_chunks += a.ctr.leap_chunks;
        leap_preempted += a.ctr.leap_preempted;
        const sched_config *c = &cfg.sched;
        leapt[c->prefix_caching][c->chunked_prefill][c->policy == SCHED_POLICY_PRIORITY] +=
            a.ctr.leap_steps;
        preempted_runs += a.ctr.preempt_recompute > 0 && a.ctr.leap_steps > 0;
        if (!v1)
            leapt_v0 += a.ctr.leap_steps;
        /* the whole run pipeline: rows and metrics */
        run_result ra, rb;
        unsetenv("KVSIM_NO_LEAP");
        ck_assert_int_eq(run_execute(&cfg, &tr, &cost, &ra, &err), 0);
        setenv("KVSIM_NO_LEAP", "1", 1);
        ck_assert_int_eq(run_execute(&cfg, &tr, &cost, &rb, &err), 0);
        unsetenv("KVSIM_NO_LEAP");
        ck_assert(memcmp(ra.reqs, rb.reqs, (size_t)tr.n * sizeof *ra.reqs) == 0);
        /* the run pipeline wants every member (for the ITL) and leaps through
         * its leap sink all the same: the same leaps, the same gaps */
        ck_assert_int_eq(ra.leap_steps, a.ctr.leap_steps);
        ck_assert_int_eq(rb.leap_steps, 0);
        ck_assert(memcmp(ra.max_itl_s, rb.max_itl_s, (size_t)tr.n * sizeof *ra.max_itl_s) == 0);
        ck_assert_msg(memcmp(&ra.sum, &rb.sum, sizeof ra.sum) == 0,
                      "seed %llu: run summaries differ", (unsigned long long)seed);
        run_result_free(&ra);
        run_result_free(&rb);
        free(a.log.st);
        free(a.log.dig);
        free(a.res);
        free_trace(&tr);
    }
    for (int p = 0; p < 2; p++)
        for (int ch = 0; ch < 2; ch++)
            for (int pr = 0; pr < 2; pr++)
                ck_assert_msg(leapt[p][ch][pr] > 0,
                              "no leap with prefix caching %d, chunked %d, priority %d: the "
                              "test is toothless there", p, ch, pr);
    ck_assert_msg(preempted_runs > 0, "no run both leapt and preempted");
    /* a leap may start right after a step that preempted (docs/semantics-v1.md 9) */
    ck_assert_msg(leap_preempted > 100, "%lld V1 leaps began at a step that preempted: toothless",
                  (long long)leap_preempted);
    ck_assert_msg(leap_finishes > 10, "%lld V1 leaps went on past a finish: toothless",
                  (long long)leap_finishes);
    printf("test_leaps: %lld leaps past a finish, %lld from a step with prefills, %lld from a "
           "step that preempted, %lld leapt steps with a chunk, %lld newcomers joined a leap\n",
           (long long)leap_finishes, (long long)leap_prefills, (long long)leap_preempted,
           (long long)leap_chunks, (long long)leap_joins);
    ck_assert_msg(leap_joins > 100, "%lld newcomers joined a V1 leap: toothless",
                  (long long)leap_joins);
    ck_assert_msg(leap_prefills > 100, "%lld V1 leaps began at a step with prefills: toothless",
                  (long long)leap_prefills);
    ck_assert_msg(leap_chunks > 100, "%lld leapt V1 steps held a prompt chunk: toothless",
                  (long long)leap_chunks);
    ck_assert_msg(leapt_v0 > 100, "V0 leapt %lld steps: toothless", (long long)leapt_v0);
    cost_model_free(&cost);
}
END_TEST


/* cfg on tr run twice, leaps on: without and with the environment
 * variable env set (the engine's reference path); the step records,
 * request results and engine counters must be byte-identical.  Both
 * outcomes are the caller's (outcome_free). */
static void run_both_ways(const run_config *cfg, const trace *tr, const cost_model *cost,
                          const char *env, uint64_t seed, outcome *a, outcome *b)
{
    unsetenv(env);
    run_engine(cfg, tr, cost, 1, a);
    setenv(env, "1", 1);
    run_engine(cfg, tr, cost, 1, b);
    unsetenv(env);
    ck_assert_msg(a->log.n == b->log.n, "seed %llu: %lld steps, %lld with %s",
                  (unsigned long long)seed, (long long)a->log.n, (long long)b->log.n, env);
    for (int64_t i = 0; i < a->log.n; i++)
        ck_assert_msg(memcmp(&a->log.st[i], &b->log.st[i], sizeof a->log.st[i]) == 0,
                      "seed %llu: step %lld differs with %s", (unsigned long long)seed,
                      (long long)i, env);
    ck_assert_msg(memcmp(a->res, b->res, (size_t)tr->n * sizeof *a->res) == 0,
                  "seed %llu: request results differ with %s", (unsigned long long)seed, env);
    ck_assert_msg(memcmp(&a->ctr, &b->ctr, sizeof a->ctr) == 0,
                  "seed %llu: engine counters differ with %s", (unsigned long long)seed, env);
}

static void outcome_free(outcome *o)
{
    free(o->log.st);
    free(o->log.dig);
    free(o->res);
}

/* V1's per-request entries set up at arrival and handed back behind the
 * first request still alive (docs/architecture.md, "Memory") against the
 * array set up whole at init and kept (KVSIM_V1_RQ_WHOLE=1, the
 * reference).  Random V1 configurations over a few thousand requests
 * (some rejected for their length, tight caches: preemptions; half under
 * priority, half with prefix ids), leaps on: step records, results and
 * counters byte-identical, and the engine must have handed pages back
 * (which also proves nothing read an entry once handed back: those pages
 * are unmapped, a read would fault). */
START_TEST(test_rq_release_identical)
{
    cost_model cost;
    tu_cost_affine(&cost);
    int64_t released = 0, rejected = 0, preempted = 0;
    for (uint64_t seed = 1; seed <= 24; seed++) {
        run_config cfg;
        random_config(&cfg, seed * 977 + 3, 1);
        cfg.sched.total_blocks = (400 + cfg.sched.block_size - 1) / cfg.sched.block_size +
                                 (int64_t)(seed % 30);
        trace tr;
        tu_random_trace(&tr, 2500 + (int)(seed * 61), seed * 7919 + 1, 300, 120, 1);
        if (seed % 2 == 0)
            add_prefixes(&tr, seed, cfg.sched.segment_tokens, seed % 4 == 0);
        outcome a, b;
        run_both_ways(&cfg, &tr, &cost, "KVSIM_V1_RQ_WHOLE", seed, &a, &b);
        ck_assert_int_eq(b.released, 0);
        ck_assert_msg(a.released > 0, "seed %llu: nothing handed back over %lld requests",
                      (unsigned long long)seed, (long long)tr.n);
        released += a.released;
        rejected += a.ctr.n_rejected;
        preempted += a.ctr.preempt_recompute;
        outcome_free(&a);
        outcome_free(&b);
        free_trace(&tr);
    }
    printf("test_leaps: per-request entries: %lld bytes handed back, %lld rejected, %lld "
           "preemptions\n", (long long)released, (long long)rejected, (long long)preempted);
    ck_assert_msg(rejected > 0 && preempted > 1000, "%lld rejected, %lld preemptions: toothless",
                  (long long)rejected, (long long)preempted);
    cost_model_free(&cost);
}
END_TEST

/* A light load: no preemption, so after its first steps the V1 engine
 * leaps through the whole run, newcomers joining and finishers leaving
 * (one plan).  Its per-request entries must still be handed back as
 * requests end (at each leap finish, not only at plans): halfway through
 * the run, more than a third of the 20,000 entries' 800 KB (those of the
 * requests ended by then) are back.  (At the end of any run the last plan
 * hands back everything, so only a reading mid-run tells.) */
typedef struct mid_sink {
    sched *s;
    int64_t steps, at; /* steps sunk; the step to read at */
    int64_t released;  /* sched_state_released there, bytes */
} mid_sink;

static void mid_step(void *ctx, const sched_step *st, const sched_member *m, int64_t n)
{
    (void)st, (void)m, (void)n;
    mid_sink *k = ctx;
    if (k->steps++ == k->at)
        k->released = sched_state_released(k->s);
}

START_TEST(test_rq_release_in_one_leap)
{
    cost_model cost;
    kvs_err err;
    /* 10 ms a step, 0.1 ms a token, 1 us per token of KV read: ~25
     * requests in flight at 4 req/s */
    ck_assert_int_eq(cost_model_create("affine:0.01,0.0001,0.000001,0", NULL, NULL, 1, &cost,
                                       &err), 0);
    run_config cfg;
    random_config(&cfg, 5, 1);
    cfg.sched.prefix_caching = 0;
    cfg.sched.block_size = 16;
    cfg.sched.max_seqs = 256;
    cfg.sched.total_blocks = 20000;
    trace tr;
    tu_random_trace(&tr, 20000, 4242, 300, 120, 0);
    for (int64_t i = 0; i < tr.n; i++) { /* 4 req/s, 100 in, 256 out */
        tr.reqs[i].arrival_s = 0.25 * (double)i;
        tr.reqs[i].prompt_tokens = 100;
        tr.reqs[i].output_tokens = 256;
    }
    unsetenv("KVSIM_NO_LEAP");
    sched *s;
    ck_assert_msg(sched_init(&s, &cfg.sched, tr.reqs, tr.n, &cost, &err) == 0, "%s", err.msg);
    mid_sink k = {s, 0, 150000, -1}; /* the run takes ~313,000 steps */
    sched_set_step_sink(s, mid_step, &k, 0);
    double end;
    ck_assert_msg(engine_run(s, &tr, &end, &err) == 0, "%s", err.msg);
    sched_counters c;
    sched_get_counters(s, &c);
    const int64_t plans = k.steps - c.leap_steps, entries = tr.n * 40; /* sizeof v1_req */
    ck_assert_int_eq(c.preempt_recompute, 0);
    ck_assert_msg(plans < 10 && c.leap_joins > 10000 && k.steps > 2 * k.at,
                  "%lld plans, %lld joins, %lld steps: not one long leap", (long long)plans,
                  (long long)c.leap_joins, (long long)k.steps);
    ck_assert_msg(k.released > entries / 3, "%lld of %lld bytes handed back halfway",
                  (long long)k.released, (long long)entries);
    sched_free(s);
    free_trace(&tr);
    cost_model_free(&cost);
}
END_TEST

/* V1's saved rows (docs/semantics-v1.md, section 9) against the table they
 * replace: a preempted request's private identities found through its
 * saved row, or entered in the cache table as before
 * (KVSIM_V1_PRIVATE_TABLE=1, the reference).  Random V1 configurations with
 * prefix caching, half of them without prefix ids (every hit is then a
 * preempted request's own block), leaps on: the step records, request
 * results and engine counters must be byte-identical, and re-admitted
 * requests must have found their own blocks. */
START_TEST(test_saved_rows_identical)
{
    cost_model cost;
    tu_cost_affine(&cost);
    int64_t own_hits = 0, preempted = 0;
    for (uint64_t seed = 1; seed <= 120; seed++) {
        run_config cfg;
        random_config(&cfg, seed * 31 + 7, 1);
        cfg.sched.prefix_caching = 1;
        cfg.sched.total_blocks = (400 + cfg.sched.block_size - 1) / cfg.sched.block_size +
                                 (int64_t)(seed % 40); /* tight: preemptions */
        trace tr;
        tu_random_trace(&tr, 100 + (int)(seed % 60), seed * 104723, 300, 120, 1);
        const int ids = seed % 2 == 0;
        if (ids)
            add_prefixes(&tr, seed, cfg.sched.segment_tokens, seed % 4 == 0);
        outcome a, b;
        run_both_ways(&cfg, &tr, &cost, "KVSIM_V1_PRIVATE_TABLE", seed, &a, &b);
        same_as_step_by_step(&cfg, &tr, &cost, seed, &a); /* full hits of own rows */
        preempted += a.ctr.preempt_recompute;
        if (!ids) /* private identities only: every hit is a saved row's */
            own_hits += a.ctr.prefix_hit_blocks;
        outcome_free(&a);
        outcome_free(&b);
        free_trace(&tr);
    }
    printf("test_leaps: saved rows: %lld preemptions, %lld blocks found again by their own "
           "request\n", (long long)preempted, (long long)own_hits);
    ck_assert_msg(preempted > 1000 && own_hits > 1000,
                  "%lld preemptions, %lld own blocks found again: toothless",
                  (long long)preempted, (long long)own_hits);
    cost_model_free(&cost);
}
END_TEST

/* The run pipeline's use of the engine, standalone: a step sink feeding an
 * ITL tracker, with or without a leap sink. */
typedef struct itl_sink {
    step_log log;
    run_itl itl;
    double *max_itl_s; /* [n] */
    int64_t leapt;     /* steps sunk with leapt = 1 */
    int keep_leapt;    /* 1: the log keeps the leapt flag */
} itl_sink;

static void itl_step(void *ctx, const sched_step *st, const sched_member *m, int64_t n)
{
    itl_sink *k = ctx;
    log_step(&k->log, st, m, n);
    if (!k->keep_leapt)
        k->log.st[k->log.n - 1].leapt = 0; /* compared without it */
    if (st->leapt) {
        k->leapt++;
        run_itl_leapt_step(&k->itl, 0, st);
    }
    run_itl_members(&k->itl, 0, m, n, st->start_s + st->dur_s, st->held);
}

static void itl_leap(void *ctx, const int32_t *ids, int64_t n, int64_t steps,
                     const int32_t *each)
{
    itl_sink *k = ctx;
    run_itl_leap_end(&k->itl, 0, ids, n, steps, each);
}

/* One random V0 configuration per seed (any mix sched_config_check takes). */
static void random_v0_config(run_config *cfg, uint64_t seed)
{
    random_config(cfg, seed, 0);
    sched_config *s = &cfg->sched;
    rng r;
    rng_init(&r, seed * 40503ULL + 3);
    s->preemption = rng_below(&r, 3) == 0 ? SCHED_PREEMPT_SWAP : SCHED_PREEMPT_RECOMPUTE;
    s->swap_blocks = 1 + (int64_t)rng_below(&r, 60);
    s->swap_block_s = 0.0005;
    s->alloc = rng_below(&r, 4) == 0 ? SCHED_ALLOC_RESERVED : SCHED_ALLOC_PAGED;
    s->priority_preemption = s->policy == SCHED_POLICY_PRIORITY && rng_below(&r, 2);
    s->watermark = (double)rng_below(&r, 3) * 0.01;
    s->kv_cache_off = rng_below(&r, 8) == 0;
    if (rng_below(&r, 8) == 0) { /* static batching: its own rules */
        s->batching = SCHED_BATCHING_STATIC;
        s->alloc = SCHED_ALLOC_PAGED;
        s->preemption = SCHED_PREEMPT_RECOMPUTE;
        s->priority_preemption = 0;
        s->chunked_prefill = 0;
        s->prefix_caching = 0;
    }
}

/* random_config's V1 draw for seed turned into engine e's: fcfs, no
 * long-prefill threshold; *r is seeded with rseed for the caller's own
 * draws.  Returns cfg's scheduler configuration. */
static sched_config *profile_config(run_config *cfg, uint64_t seed, sched_engine e,
                                    uint64_t rseed, rng *r)
{
    random_config(cfg, seed, 1);
    rng_init(r, rseed);
    sched_config *s = &cfg->sched;
    s->engine = e;
    s->policy = SCHED_POLICY_FCFS;
    s->long_prefill_threshold = 0;
    return s;
}

/* One random TensorRT-LLM configuration per seed: max utilization (paged,
 * pauses when blocks run short) or guaranteed no evict (reserved), with
 * or without context chunking, small caches. */
static void random_trt_config(run_config *cfg, uint64_t seed)
{
    rng r;
    sched_config *s = profile_config(cfg, seed, SCHED_ENGINE_TRTLLM, seed * 7919ULL + 11, &r);
    s->prefix_caching = 0;
    s->segment_tokens = 0;
    s->alloc = rng_below(&r, 3) == 0 ? SCHED_ALLOC_RESERVED : SCHED_ALLOC_PAGED;
    s->block_size = 1 + (int64_t)rng_below(&r, 16);
    s->total_blocks = (400 + s->block_size - 1) / s->block_size + (int64_t)rng_below(&r, 120);
}

/* One engine run through the event loop feeding an ITL tracker, with or
 * without a leap sink, with horizons (leaps 1) or without (KVSIM_NO_LEAP=1:
 * one step per plan); the log keeps the leapt flag if keep_leapt.  *ctr:
 * the engine's counters at the end. */
static void run_itl_engine_ex(const run_config *cfg, const trace *tr, const cost_model *cost,
                              int leap_sink, int leaps, int keep_leapt, itl_sink *k,
                              sched_req_result **res, sched_counters *ctr)
{
    kvs_err err;
    memset(k, 0, sizeof *k);
    k->keep_leapt = keep_leapt;
    if (leaps)
        unsetenv("KVSIM_NO_LEAP");
    else
        setenv("KVSIM_NO_LEAP", "1", 1);
    ck_assert_int_eq(run_itl_init(&k->itl, tr, 1, &err), 0);
    sched *s;
    ck_assert_msg(sched_init(&s, &cfg->sched, tr->reqs, tr->n, cost, &err) == 0, "%s", err.msg);
    req_prefixes px = trace_prefixes(tr);
    ck_assert_int_eq(sched_attach_prefixes(s, &px, &err), 0);
    sched_set_step_sink(s, itl_step, k, 1);
    if (leap_sink)
        sched_set_leap_sink(s, itl_leap);
    double end;
    ck_assert_msg(engine_run(s, tr, &end, &err) == 0, "%s", err.msg);
    unsetenv("KVSIM_NO_LEAP");
    *res = malloc((size_t)tr->n * sizeof **res);
    memcpy(*res, sched_results(s), (size_t)tr->n * sizeof **res);
    if (ctr)
        sched_get_counters(s, ctr);
    char why[256];
    ck_assert_msg(sched_audit(s, why, sizeof why) == 0, "%s", why);
    sched_free(s);
}

static void run_itl_engine(const run_config *cfg, const trace *tr, const cost_model *cost,
                           int leap_sink, itl_sink *k, sched_req_result **res)
{
    run_itl_engine_ex(cfg, tr, cost, leap_sink, 1, 0, k, res, NULL);
}

/* Two ITL trackers fed the same run two ways must hold the same state and
 * hand over the same figures and largest gaps (run_itl_finish, into
 * a->max_itl_s and b->max_itl_s). */
static void itl_same(itl_sink *a, itl_sink *b, int64_t n, uint64_t seed)
{
    /* the trackers' state, before run_itl_finish hands it over */
    ck_assert(memcmp(a->itl.req, b->itl.req, (size_t)n * sizeof *a->itl.req) == 0);
    run_summary sa = {0}, sb = {0};
    a->max_itl_s = run_itl_finish(&a->itl, &sa);
    b->max_itl_s = run_itl_finish(&b->itl, &sb);
    ck_assert(a->max_itl_s && b->max_itl_s);
    ck_assert_msg(memcmp(&sa, &sb, sizeof sa) == 0, "seed %llu: ITL figures differ",
                  (unsigned long long)seed);
    ck_assert(memcmp(a->max_itl_s, b->max_itl_s, (size_t)n * sizeof *a->max_itl_s) == 0);
}

/* Free what run_itl_engine_ex and itl_same left in a, b, ra and rb. */
static void itl_pair_free(itl_sink *a, itl_sink *b, sched_req_result *ra, sched_req_result *rb)
{
    run_itl_free(&a->itl);
    run_itl_free(&b->itl);
    free(a->max_itl_s);
    free(b->max_itl_s);
    free(a->log.st);
    free(a->log.dig);
    free(b->log.st);
    free(b->log.dig);
    free(ra);
    free(rb);
}

/* cfg on tr with a leap sink against the same run listing every member
 * (no leap sink): the step records but the leapt flag, the members of the
 * steps both list, results, ITL state and figures must be byte-identical,
 * and the run without a leap sink must sink nothing leapt.  Returns the
 * steps sunk leapt; *preempted adds the requests preempted in a run that
 * sank some. */
static int64_t sink_as_listed(const run_config *cfg, const trace *tr, const cost_model *cost,
                              uint64_t seed, int64_t *preempted)
{
    itl_sink a, b;
    sched_req_result *ra, *rb;
    run_itl_engine(cfg, tr, cost, 1, &a, &ra);
    run_itl_engine(cfg, tr, cost, 0, &b, &rb);
    ck_assert_int_eq(b.leapt, 0);
    ck_assert_int_eq(a.log.n, b.log.n);
    ck_assert_msg(memcmp(a.log.st, b.log.st, (size_t)a.log.n * sizeof *a.log.st) == 0,
                  "seed %llu: step records differ", (unsigned long long)seed);
    same_members(&a.log, &b.log, seed);
    ck_assert(memcmp(ra, rb, (size_t)tr->n * sizeof *ra) == 0);
    itl_same(&a, &b, tr->n, seed);
    ck_assert_int_eq(a.itl.n_done, b.itl.n_done);
    for (int64_t i = 0; i < tr->n; i++)
        *preempted += a.leapt > 0 && ra[i].preemptions > 0;
    const int64_t leapt = a.leapt;
    itl_pair_free(&a, &b, ra, rb);
    return leapt;
}

/* The whole pipeline, leap sink (record_steps 0) against every member
 * listed (record_steps 1): rows, largest gaps and summaries.  A cluster
 * behind round-robin or random also routes ahead without recorded steps
 * (sim/cluster.c, route_ahead): its replicas leap past one another's
 * arrivals, so their steps interleave differently.  Returns the steps
 * leapt by the first run. */
static int64_t check_pipeline_resumes(run_config *cfg, const trace *tr,
                                      const cost_model *cost, uint64_t seed, int64_t *resumes)
{
    kvs_err err;
    run_result ra, rb;
    cfg->record_steps = 0;
    ck_assert_msg(run_execute(cfg, tr, cost, &ra, &err) == 0, "%s", err.msg);
    cfg->record_steps = 1;
    ck_assert_msg(run_execute(cfg, tr, cost, &rb, &err) == 0, "%s", err.msg);
    cfg->record_steps = 0;
    ck_assert_msg(memcmp(ra.reqs, rb.reqs, (size_t)tr->n * sizeof *ra.reqs) == 0,
                  "seed %llu: rows differ", (unsigned long long)seed);
    ck_assert_msg(memcmp(ra.max_itl_s, rb.max_itl_s, (size_t)tr->n * sizeof *ra.max_itl_s) == 0,
                  "seed %llu: largest gaps differ", (unsigned long long)seed);
    ck_assert_msg(memcmp(&ra.sum, &rb.sum, sizeof ra.sum) == 0,
                  "seed %llu: run summaries differ", (unsigned long long)seed);
    for (int64_t r = 0; r < ra.n_replicas; r++)
        ck_assert(memcmp(&ra.replicas[r].sum, &rb.replicas[r].sum, sizeof ra.replicas[r].sum) ==
                  0);
    if (ra.replica)
        ck_assert(memcmp(ra.replica, rb.replica, (size_t)tr->n * sizeof *ra.replica) == 0);
    ck_assert_int_eq(rb.leap_steps, 0);
    int64_t leapt = ra.leap_steps;
    if (resumes)
        *resumes = ra.leap_resumes;
    run_result_free(&ra);
    run_result_free(&rb);
    return leapt;
}

static int64_t check_pipeline(run_config *cfg, const trace *tr, const cost_model *cost,
                              uint64_t seed)
{
    return check_pipeline_resumes(cfg, tr, cost, seed, NULL);
}

START_TEST(test_same_set_identical)
{
    kvs_err err;
    cost_model cost;
    tu_cost_affine(&cost);
    int64_t leapt = 0, leapt_v1 = 0, runs = 0, preempted = 0, cluster_leapt = 0;
    int64_t cluster_leapt_v0 = 0; /* V0 replicas behind a router that routes ahead */
    int64_t live_leapt = 0, live_resumes = 0; /* behind a router that reads state */
    int64_t leapt_trt = 0, cluster_leapt_trt = 0; /* TensorRT-LLM's same-set steps, its leaps */
    for (uint64_t seed = 1; seed <= 200; seed++) {
        run_config cfg;
        const int v1 = seed % 4 == 0; /* V1: its leaps and its same-set steps */
        const int trt = seed > 160;  /* the last 40: TensorRT-LLM's */
        if (trt)
            random_trt_config(&cfg, seed);
        else if (v1)
            random_config(&cfg, seed, 1);
        else
            random_v0_config(&cfg, seed);
        if (sched_config_check(&cfg.sched, 200, &err) != 0)
            continue;
        trace tr;
        tu_random_trace(&tr, 120 + (int)(seed % 80), seed * 6151, 300, 90, 1);
        if (cfg.sched.prefix_caching)
            add_prefixes(&tr, seed, v1 ? cfg.sched.segment_tokens : 8, seed % 3 != 0);
        const int64_t sunk = sink_as_listed(&cfg, &tr, &cost, seed, &preempted);
        if (cfg.sched.kv_cache_off || cfg.sched.batching == SCHED_BATCHING_STATIC)
            ck_assert_int_eq(sunk, 0); /* listed: their costs read the members */
        if (trt) {
            leapt_trt += sunk;
        } else if (v1) {
            leapt_v1 += sunk;
        } else {
            leapt += sunk;
            runs++;
        }
        check_pipeline(&cfg, &tr, &cost, seed);
        /* clusters: each engine's stretches interleave with the others' steps */
        cfg.replicas = 2 + (int64_t)(seed % 3);
        snprintf(cfg.router, sizeof cfg.router, "%s", seed % 8 < 4 ? "round-robin" : "random");
        int64_t cl_leapt = check_pipeline(&cfg, &tr, &cost, seed);
        cluster_leapt += cl_leapt;
        if (trt)
            cluster_leapt_trt += cl_leapt;
        else if (!v1)
            cluster_leapt_v0 += cl_leapt;
        /* a router that reads the load: each replica's horizon is the next
         * arrival to route (K8a), and V1's leaps paused there go on */
        snprintf(cfg.router, sizeof cfg.router, "%s", seed % 2 ? "least-requests" : "least-kv");
        int64_t resumes = 0;
        live_leapt += check_pipeline_resumes(&cfg, &tr, &cost, seed, &resumes);
        live_resumes += resumes;
        cfg.router[0] = 0;
        if (v1 && !trt) { /* --pd: decode replicas admit requests whose first token came elsewhere */
            cfg.replicas = 3;
            snprintf(cfg.pd, sizeof cfg.pd, "1:2");
            cfg.kv_bytes_per_token = 4096;
            check_pipeline(&cfg, &tr, &cost, seed);
        }
        free_trace(&tr);
    }
    ck_assert_msg(runs >= 60 && leapt > 1000 && leapt_v1 > 1000,
                  "%lld V0 runs, %lld V0 and %lld V1 leapt steps: toothless", (long long)runs,
                  (long long)leapt, (long long)leapt_v1);
    ck_assert_msg(preempted > 0, "no run both sank same-set steps and preempted");
    ck_assert_msg(leapt_trt > 1000, "TensorRT-LLM sank %lld same-set steps: toothless",
                  (long long)leapt_trt);
    printf("test_leaps: same-set steps: V0 %lld, V1 %lld, TensorRT-LLM %lld\n", (long long)leapt,
           (long long)leapt_v1, (long long)leapt_trt);
    ck_assert_msg(cluster_leapt > 1000, "clusters leapt %lld steps: toothless",
                  (long long)cluster_leapt);
    ck_assert_msg(live_leapt > 1000 && live_resumes > 100,
                  "behind least-requests/least-kv: %lld steps leapt, %lld leaps resumed: toothless",
                  (long long)live_leapt, (long long)live_resumes);
    ck_assert_msg(cluster_leapt_v0 > 1000, "V0 clusters leapt %lld steps: toothless",
                  (long long)cluster_leapt_v0);
    ck_assert_msg(cluster_leapt_trt > 1000, "TensorRT-LLM clusters leapt %lld steps: toothless",
                  (long long)cluster_leapt_trt);
    cost_model_free(&cost);
}
END_TEST


/* V0 leaps (scheduler/continuous.c, v0_leap): with a leap sink and a
 * horizon, a V0 plan runs a stretch of same-set decode steps at once.  On
 * random V0 configurations (those of random_v0_config, lpm among them, on
 * traces whose arrivals are squeezed or spread so that queues form and
 * drain) the run with horizons and the run with KVSIM_NO_LEAP=1 (one step
 * per plan, the reference), both with a leap sink, must give byte-identical
 * step records (the leapt flag included), request results, counters (but
 * leap_steps), ITL figures and whole-pipeline rows and summaries; and every
 * class of configuration the leaps cover must have leapt, so the test
 * cannot pass by leaping never. */
enum { V0C_LPM, V0C_PREFIX, V0C_PRIO_PREEMPT, V0C_SWAP, V0C_RESERVED, V0C_PLAIN, V0C_COUNT };

static int v0_class(const sched_config *c)
{
    if (c->policy == SCHED_POLICY_LPM)
        return V0C_LPM;
    if (c->prefix_caching)
        return V0C_PREFIX;
    if (c->priority_preemption)
        return V0C_PRIO_PREEMPT;
    if (c->preemption == SCHED_PREEMPT_SWAP)
        return V0C_SWAP;
    if (c->alloc != SCHED_ALLOC_PAGED)
        return V0C_RESERVED;
    return V0C_PLAIN;
}

/* A random trace of 120-199 requests for seed (its generator seeded with
 * seed * mult), its arrival times squeezed or spread by a factor of 0.5,
 * 1, 3 or 8 by seed, so that queues form and drain. */
static void spread_trace(trace *tr, uint64_t seed, uint64_t mult)
{
    static const double spread[4] = {0.5, 1.0, 3.0, 8.0}; /* arrival time factors */
    tu_random_trace(tr, 120 + (int)(seed % 80), seed * mult, 300, 90, 1);
    for (int64_t i = 0; i < tr->n; i++)
        tr->reqs[i].arrival_s *= spread[seed % 4];
}

/* The case of seed for cfg: 0 when sched_config_check refuses cfg, else 1
 * with *tr the spread trace (spread_trace) and, under prefix caching, its
 * prefix ids (segments of 8 tokens, on a grid for two seeds in three). */
static int random_case(const run_config *cfg, uint64_t seed, uint64_t mult, trace *tr)
{
    kvs_err err;
    if (sched_config_check(&cfg->sched, 200, &err) != 0)
        return 0;
    spread_trace(tr, seed, mult);
    if (cfg->sched.prefix_caching)
        add_prefixes(tr, seed, 8, seed % 3 != 0);
    return 1;
}

/* cfg on tr run through the event loop with a leap sink, horizons on and
 * off (KVSIM_NO_LEAP=1: one step per plan, the reference): the step
 * records (the leapt flag included if keep_leapt), request results,
 * counters (but leap_steps), ITL figures and whole-pipeline rows and
 * summaries must be byte-identical.  Returns the steps leapt; *ctr gets
 * the leaping run's counters, and *waiting_leapt adds its leapt steps
 * taken while requests waited. */
static int64_t leaps_as_steps(const run_config *cfg, const trace *tr, const cost_model *cost,
                              uint64_t seed, int keep_leapt, sched_counters *ctr,
                              int64_t *waiting_leapt)
{
    kvs_err err;
    itl_sink a, b;
    sched_req_result *ra, *rb;
    sched_counters ca, cb;
    run_itl_engine_ex(cfg, tr, cost, 1, 1, 1, &a, &ra, &ca);
    run_itl_engine_ex(cfg, tr, cost, 1, 0, keep_leapt, &b, &rb, &cb);
    ck_assert_int_eq(cb.leap_steps, 0);
    ck_assert_msg(a.log.n == b.log.n, "seed %llu: %lld steps with leaps, %lld without",
                  (unsigned long long)seed, (long long)a.log.n, (long long)b.log.n);
    for (int64_t i = 0; i < a.log.n; i++) {
        *waiting_leapt += a.log.st[i].leapt && a.log.st[i].n_waiting > 0;
        if (!keep_leapt) /* the reference marks no same-set step (trtllm) */
            a.log.st[i].leapt = 0;
    }
    ck_assert(!keep_leapt || a.leapt == b.leapt);
    same_members(&a.log, &b.log, seed);
    for (int64_t i = 0; i < a.log.n; i++)
        ck_assert_msg(memcmp(&a.log.st[i], &b.log.st[i], sizeof a.log.st[i]) == 0,
                      "seed %llu: step %lld differs (start %.9g vs %.9g, kv_read %lld vs "
                      "%lld, limit %d vs %d, leapt %d vs %d)", (unsigned long long)seed,
                      (long long)i, a.log.st[i].start_s, b.log.st[i].start_s,
                      (long long)a.log.st[i].batch.kv_read,
                      (long long)b.log.st[i].batch.kv_read, a.log.st[i].limit,
                      b.log.st[i].limit, a.log.st[i].leapt, b.log.st[i].leapt);
    ck_assert_msg(memcmp(ra, rb, (size_t)tr->n * sizeof *ra) == 0,
                  "seed %llu: request results differ", (unsigned long long)seed);
    const int64_t leaps = ca.leap_steps;
    *ctr = ca;
    ca.leap_steps = 0;
    ck_assert_msg(memcmp(&ca, &cb, sizeof ca) == 0, "seed %llu: counters differ",
                  (unsigned long long)seed);
    itl_same(&a, &b, tr->n, seed);
    /* the whole run pipeline, horizons on and off */
    run_result pa, pb;
    unsetenv("KVSIM_NO_LEAP");
    ck_assert_int_eq(run_execute(cfg, tr, cost, &pa, &err), 0);
    setenv("KVSIM_NO_LEAP", "1", 1);
    ck_assert_int_eq(run_execute(cfg, tr, cost, &pb, &err), 0);
    unsetenv("KVSIM_NO_LEAP");
    ck_assert_int_eq(pa.leap_steps, leaps);
    ck_assert_int_eq(pb.leap_steps, 0);
    ck_assert(memcmp(pa.reqs, pb.reqs, (size_t)tr->n * sizeof *pa.reqs) == 0);
    ck_assert(memcmp(pa.max_itl_s, pb.max_itl_s, (size_t)tr->n * sizeof *pa.max_itl_s) == 0);
    ck_assert_msg(memcmp(&pa.sum, &pb.sum, sizeof pa.sum) == 0,
                  "seed %llu: run summaries differ", (unsigned long long)seed);
    run_result_free(&pa);
    run_result_free(&pb);
    itl_pair_free(&a, &b, ra, rb);
    return leaps;
}

START_TEST(test_v0_leaps_identical)
{
    cost_model cost;
    tu_cost_affine(&cost);
    int64_t leapt[V0C_COUNT] = {0}, waiting_leapt = 0, preempted = 0;
    for (uint64_t seed = 1; seed <= 240; seed++) {
        run_config cfg;
        random_v0_config(&cfg, seed);
        sched_config *c = &cfg.sched;
        if (c->prefix_caching && seed % 3 == 0) { /* lpm: W's order follows the cache */
            c->policy = SCHED_POLICY_LPM;
            c->priority_preemption = 0;
        }
        trace tr;
        if (!random_case(&cfg, seed, 104729, &tr))
            continue;
        sched_counters ca;
        const int64_t leaps = leaps_as_steps(&cfg, &tr, &cost, seed, 1, &ca, &waiting_leapt);
        leapt[v0_class(c)] += leaps;
        if (leaps > 0 && ca.preempt_recompute + ca.preempt_swap > 0)
            preempted++;
        free_trace(&tr);
    }
    static const char *const names[V0C_COUNT] = {"lpm", "prefix caching", "priority preemption",
                                                 "swap", "reserved", "plain"};
    for (int k = 0; k < V0C_COUNT; k++)
        ck_assert_msg(leapt[k] > 50, "V0 leaps with %s: %lld steps, toothless", names[k],
                      (long long)leapt[k]);
    ck_assert_msg(waiting_leapt > 1000, "%lld leapt steps with requests waiting: toothless",
                  (long long)waiting_leapt);
    ck_assert_msg(preempted > 0, "no V0 run both leapt and preempted");
    cost_model_free(&cost);
}
END_TEST

/* TensorRT-LLM leaps (scheduler/trtllm.c, trt_leap): under guaranteed no
 * evict, with a leap sink and a horizon, a step of generation requests
 * only is followed by the same-set steps up to the first finish, planned
 * at once; arrivals behind a capacity pass that stopped short of A are
 * taken in (and rejected there when too long).  Random TensorRT-LLM
 * configurations (random_trt_config: reserved or paged blocks, chunked or
 * not, small caches; a third with a max_model_len that rejects some
 * requests) on traces whose arrivals are squeezed or spread: the run with
 * horizons and the run with KVSIM_NO_LEAP=1 must be byte-identical
 * (leaps_as_steps); paged runs never leap (max utilization takes blocks as
 * contexts grow), and the reserved ones must have leapt, while requests
 * waited too, so the test cannot pass by leaping never. */
START_TEST(test_trt_leaps_identical)
{
    cost_model cost;
    tu_cost_affine(&cost);
    int64_t leapt = 0, waiting_leapt = 0, rejected = 0, reserved_runs = 0;
    for (uint64_t seed = 1; seed <= 120; seed++) {
        run_config cfg;
        random_trt_config(&cfg, seed);
        sched_config *c = &cfg.sched;
        if (seed % 4 != 0) /* mostly guaranteed no evict, where leaps are */
            c->alloc = SCHED_ALLOC_RESERVED;
        if (seed % 3 == 0)
            c->max_model_len = 330; /* some requests rejected on arrival */
        trace tr;
        if (!random_case(&cfg, seed, 15485863, &tr))
            continue;
        sched_counters ca;
        const int64_t leaps = leaps_as_steps(&cfg, &tr, &cost, seed, 0, &ca, &waiting_leapt);
        if (c->alloc == SCHED_ALLOC_PAGED)
            ck_assert_int_eq(leaps, 0);
        else
            reserved_runs++;
        leapt += leaps;
        rejected += leaps > 0 ? ca.n_rejected : 0;
        free_trace(&tr);
    }
    printf("test_leaps: TensorRT-LLM: %lld runs under guaranteed no evict, %lld steps leapt, "
           "%lld same-set steps while requests waited; %lld requests rejected in runs that leapt\n",
           (long long)reserved_runs, (long long)leapt, (long long)waiting_leapt,
           (long long)rejected);
    ck_assert_msg(leapt > 5000 && waiting_leapt > 1000 && rejected > 50,
                  "TensorRT-LLM: %lld steps leapt, %lld while requests waited, %lld rejected: "
                  "toothless", (long long)leapt, (long long)waiting_leapt, (long long)rejected);
    cost_model_free(&cost);
}
END_TEST


/* One random SGLang configuration per seed: small pools (full flags,
 * retractions, rejections), overlap on or off, chunks or not, the radix
 * cache or not (lpm under it for some), a conservative new-token ratio
 * for some. */
static void random_sgl_config(run_config *cfg, uint64_t seed)
{
    rng r;
    sched_config *s = profile_config(cfg, seed, SCHED_ENGINE_SGLANG, seed * 104723ULL + 5, &r);
    s->block_size = 1;
    s->segment_tokens = 8;
    s->total_blocks = 300 + (int64_t)rng_below(&r, 900);
    s->max_seqs = 2 + (int64_t)rng_below(&r, 40);
    s->max_batched_tokens = 64 + (int64_t)rng_below(&r, 600);
    s->max_prefill_tokens = 100 + (int64_t)rng_below(&r, 800);
    s->overlap = (int)rng_below(&r, 4) != 0;
    s->conservativeness = rng_below(&r, 3) == 0 ? 0.3 : 1.0;
    if (s->prefix_caching && rng_below(&r, 3) == 0)
        s->policy = SCHED_POLICY_LPM;
}

/* SGLang leaps (scheduler/sglang.c, sgl_leap): with a leap sink and a
 * horizon, runs of decode steps that admission cannot interrupt (nothing
 * waits and nothing arrives, or R's full flag keeps admission shut while
 * arrivals are taken in) are planned at once up to the step before
 * someone's last token.  Random SGLang configurations on traces whose
 * arrivals are squeezed or spread: byte-identical against KVSIM_NO_LEAP=1
 * (leaps_as_steps), the leap sink against every member listed (step
 * records but the leapt flag, results, ITL state and figures), and the
 * whole pipeline with --record-steps; leaps with and without overlap,
 * with the radix cache, and taking arrivals in while R was full must all
 * have happened. */
START_TEST(test_sgl_leaps_identical)
{
    cost_model cost;
    tu_cost_affine(&cost);
    int64_t leapt[2][2] = {{0}}; /* [overlap][radix] */
    int64_t waiting_leapt = 0, retracted = 0, rejected = 0, runs = 0, cluster_leapt = 0;
    for (uint64_t seed = 1; seed <= 160; seed++) {
        run_config cfg;
        random_sgl_config(&cfg, seed);
        const sched_config *c = &cfg.sched;
        trace tr;
        if (!random_case(&cfg, seed, 49979687, &tr))
            continue;
        sched_counters ca;
        const int64_t leaps = leaps_as_steps(&cfg, &tr, &cost, seed, 0, &ca, &waiting_leapt);
        leapt[c->overlap][c->prefix_caching] += leaps;
        retracted += leaps > 0 ? ca.preempt_recompute : 0;
        rejected += leaps > 0 ? ca.n_rejected : 0;
        int64_t preempted = 0;
        sink_as_listed(&cfg, &tr, &cost, seed, &preempted); /* every member listed */
        check_pipeline(&cfg, &tr, &cost, seed);
        /* replicas: behind a router that routes ahead, and one that reads state */
        cfg.replicas = 2 + (int64_t)(seed % 3);
        snprintf(cfg.router, sizeof cfg.router, "%s", seed % 2 ? "round-robin" : "random");
        cluster_leapt += check_pipeline(&cfg, &tr, &cost, seed);
        snprintf(cfg.router, sizeof cfg.router, "%s", seed % 2 ? "least-requests" : "least-kv");
        cluster_leapt += check_pipeline(&cfg, &tr, &cost, seed);
        runs++;
        free_trace(&tr);
    }
    printf("test_leaps: SGLang: %lld runs; steps leapt without / with overlap: %lld / %lld "
           "(radix cache: %lld / %lld); %lld same-set steps while requests waited; %lld "
           "retractions and %lld rejections in runs that leapt; replicas leapt %lld steps\n",
           (long long)runs, (long long)(leapt[0][0] + leapt[0][1]),
           (long long)(leapt[1][0] + leapt[1][1]), (long long)leapt[0][1], (long long)leapt[1][1],
           (long long)waiting_leapt, (long long)retracted, (long long)rejected,
           (long long)cluster_leapt);
    /* 12,000 requests: the run's ITL tracker hands pages of done requests
     * back (4,096 a page), so a request listed after the tracker let it go
     * (a finisher's extra decode under overlap, O2, after a leap that told
     * its last token) would be read from a page handed back */
    for (uint64_t seed = 1; seed <= 2; seed++) {
        run_config cfg;
        random_sgl_config(&cfg, seed);
        cfg.sched.overlap = 1;
        cfg.sched.prefix_caching = seed == 2;
        cfg.sched.policy = SCHED_POLICY_FCFS;
        cfg.sched.total_blocks = 4000;
        cfg.sched.max_seqs = 40;
        trace tr;
        tu_random_trace(&tr, 12000, seed * 7, 300, 90, 1);
        for (int64_t i = 0; i < tr.n; i++)
            tr.reqs[i].arrival_s *= 3.0;
        if (cfg.sched.prefix_caching)
            add_prefixes(&tr, seed, 8, 1);
        sched_counters ca;
        int64_t w = 0;
        const int64_t leaps = leaps_as_steps(&cfg, &tr, &cost, seed, 0, &ca, &w);
        ck_assert_msg(leaps > 3000 && ca.n_finished > 11000, "seed %llu: %lld steps leapt, "
                      "%lld finished: toothless", (unsigned long long)seed, (long long)leaps,
                      (long long)ca.n_finished);
        free_trace(&tr);
    }
    for (int ov = 0; ov < 2; ov++)
        for (int rx = 0; rx < 2; rx++)
            ck_assert_msg(leapt[ov][rx] > 500, "SGLang leaps with overlap %d, radix %d: %lld "
                          "steps, toothless", ov, rx, (long long)leapt[ov][rx]);
    ck_assert_msg(cluster_leapt > 1000, "SGLang replicas leapt %lld steps: toothless",
                  (long long)cluster_leapt);
    ck_assert_msg(waiting_leapt > 500 && retracted > 50 && rejected > 10,
                  "SGLang: %lld leapt steps while requests waited, %lld retractions, %lld "
                  "rejections: toothless", (long long)waiting_leapt, (long long)retracted,
                  (long long)rejected);
    cost_model_free(&cost);
}
END_TEST

/* A V0 engine config for the hand-computed scenarios below. */
static void golden_v0_config(run_config *cfg, int64_t bs, int64_t blocks)
{
    run_config_defaults(cfg);
    sched_config *c = &cfg->sched;
    c->engine = SCHED_ENGINE_VLLM_V0;
    c->batching = SCHED_BATCHING_CONTINUOUS;
    c->policy = SCHED_POLICY_FCFS;
    c->alloc = SCHED_ALLOC_PAGED;
    c->preemption = SCHED_PREEMPT_RECOMPUTE;
    c->block_size = bs;
    c->total_blocks = blocks;
    c->max_seqs = 8;
    c->max_batched_tokens = 64;
    c->max_model_len = 400;
    c->watermark = 0.0;
    cfg->record_steps = 0;
}

static void golden_req(trace *t, int64_t i, double at, int64_t p, int64_t o)
{
    t->reqs[i].arrival_s = at;
    t->reqs[i].prompt_tokens = p;
    t->reqs[i].output_tokens = o;
}

/* The two runs of a scenario, horizons on and off, must agree byte for
 * byte; returns the steps leapt with horizons. */
static int64_t golden_both(const run_config *cfg, const trace *tr, const cost_model *cost,
                           outcome *a)
{
    outcome b;
    run_engine(cfg, tr, cost, 1, a);
    run_engine(cfg, tr, cost, 0, &b);
    ck_assert_int_eq(b.ctr.leap_steps, 0);
    ck_assert_int_eq(a->log.n, b.log.n);
    ck_assert(memcmp(a->log.st, b.log.st, (size_t)a->log.n * sizeof *a->log.st) == 0);
    ck_assert(memcmp(a->res, b.res, (size_t)tr->n * sizeof *a->res) == 0);
    free(b.log.st);
    free(b.log.dig);
    free(b.res);
    return a->ctr.leap_steps;
}

/* Every step takes 0.25 s (affine c0 only, exact in binary).  r0 (P 10,
 * O 10) arrives at 0, r1 (P 10, O 3) exactly at 1.0; blocks are plenty.
 * The plan at 0 (horizon 1.0) forms:
 *   0.00 prefill r0 (r0's token 1 at 0.25; nobody's last)
 *   0.25 decode r0 (the first after a prefill: listed)
 *   0.50 decode r0, same set: leapt
 *   0.75 decode r0, leapt; 1.0 is not before the horizon: it returns 1.0.
 * The plan at 1.0 (no horizon left):
 *   1.00 prefill r1: it arrived at 1.0, before this plan (a leap that
 *        planned a step starting at its horizon would have decoded r0 here)
 *   1.25 decode r0, r1 (listed)
 *   1.50 decode r0, r1, same set: leapt, but r1 makes its last token (O 3)
 *        at its end, so the plan returns 1.75; r1 finishes at 1.75.
 * The plan at 1.75:
 *   1.75 decode r0: R lost r1 only, and r0 made a token at 1.75, so this
 *        is a same-set step too, the first of a stretch of r0 alone: leapt
 *   2.00, 2.25, 2.50 decode r0, leapt; 2.75 is r0's last token.
 * 11 steps; 3 + 2 + 3 = 8 of them formed after the first of their plan. */
START_TEST(test_v0_leap_golden)
{
    kvs_err err;
    cost_model cost;
    ck_assert_int_eq(cost_model_create("affine:0.25,0,0,0", NULL, NULL, 1, &cost, &err), 0);
    run_config cfg;
    golden_v0_config(&cfg, 16, 100);
    trace tr = {0};
    tr.n = 2;
    tr.reqs = calloc(2, sizeof *tr.reqs);
    golden_req(&tr, 0, 0.0, 10, 10);
    golden_req(&tr, 1, 1.0, 10, 3);
    outcome a;
    ck_assert_int_eq(golden_both(&cfg, &tr, &cost, &a), 8);
    static const int kind[11] = {0, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1};
    static const int leapt[11] = {0, 0, 1, 1, 0, 0, 1, 1, 1, 1, 1};
    ck_assert_int_eq(a.log.n, 11);
    for (int i = 0; i < 11; i++) {
        ck_assert_double_eq(a.log.st[i].start_s, 0.25 * i);
        ck_assert_int_eq(a.log.st[i].kind, kind[i]);
        ck_assert_int_eq(a.log.st[i].leapt, leapt[i]);
    }
    ck_assert_double_eq(a.res[0].first_token_s, 0.25);
    ck_assert_double_eq(a.res[0].finish_s, 2.75);
    ck_assert_double_eq(a.res[1].first_token_s, 1.25);
    ck_assert_double_eq(a.res[1].finish_s, 1.75);
    free(a.log.st);
    free(a.log.dig);
    free(a.res);
    free_trace(&tr);
    cost_model_free(&cost);
}
END_TEST

/* lpm: an eviction during a leap can change W's head.  Block size 4, 10
 * blocks, steps of 0.25 s.  At 0: r0 (P 4, O 40, no prefix), x (P 12, O 1,
 * segments 1 2 3) and y (P 12, O 2, segments 5 6 7) are prefilled
 * together (7 blocks).  x finishes at 0.25: its 3 blocks are cached, its
 * last one least recent; y takes a decode block and finishes at 0.5: its 3
 * blocks cached after x's, its decode block free.  Then r0 decodes alone,
 * its step k (start 0.25 k) storing 4 + k tokens and taking a block when
 * that passes a multiple of 4: at k = 5 and 9 from the 2 uncached free
 * blocks, at k = 13, 17, 21 (starts 3.25, 4.25, 5.25) by evicting x's
 * blocks 2, 1, 0 in that order.  b (P 4, O 5, no prefix) and a (P 40,
 * O 5, segments 1 9: block 0 is x's) arrive together at 2.6.  W's lpm
 * order is a (1 cached block) then b, and a needs 10 blocks of the 6 free:
 * both wait.  The eviction of x's block 0 (step 5.25) takes a's cached
 * block: a's key falls to 0 and b (same arrival, lower id) becomes the
 * head; it needs 1 block of the 3 free (y's cached ones), so the plan at
 * 5.5 is b's prefill, its first token at 5.75, its last (4 decodes beside
 * r0's) at 6.75.  A leap that ran on across the evictions would have
 * decoded r0 past 5.5 with b waiting.  The same with a and b arriving at
 * 5.2: x's block 0 is then evicted in the first step of the plan at 5.25,
 * the plan that found them waiting, and b's times are the same. */
START_TEST(test_v0_leap_lpm_eviction)
{
    kvs_err err;
    cost_model cost;
    ck_assert_int_eq(cost_model_create("affine:0.25,0,0,0", NULL, NULL, 1, &cost, &err), 0);
    run_config cfg;
    golden_v0_config(&cfg, 4, 10);
    cfg.sched.prefix_caching = 1;
    cfg.sched.policy = SCHED_POLICY_LPM;
    for (int variant = 0; variant < 2; variant++) {
    const double at = variant ? 5.2 : 2.6;
    trace tr = {0};
    tr.n = 5;
    tr.reqs = calloc(5, sizeof *tr.reqs);
    golden_req(&tr, 0, 0.0, 4, 40);  /* r0 */
    golden_req(&tr, 1, 0.0, 12, 1);  /* x */
    golden_req(&tr, 2, 0.0, 12, 2);  /* y */
    golden_req(&tr, 3, at, 4, 5);    /* b */
    golden_req(&tr, 4, at, 40, 5);   /* a */
    static const int64_t off[6] = {0, 0, 3, 6, 6, 8};
    static const uint64_t ids[8] = {1, 2, 3, 5, 6, 7, 1, 9};
    tr.hash_off = malloc(sizeof off);
    tr.hash_ids = malloc(sizeof ids);
    tr.hash_tokens = malloc(8 * sizeof *tr.hash_tokens);
    memcpy(tr.hash_off, off, sizeof off);
    memcpy(tr.hash_ids, ids, sizeof ids);
    for (int i = 0; i < 8; i++)
        tr.hash_tokens[i] = 4;
    tr.hash_block = 4;
    outcome o;
    ck_assert_int_gt(golden_both(&cfg, &tr, &cost, &o), 0);
    ck_assert_int_eq(o.ctr.prefix_evictions >= 3, 1);
    ck_assert_double_eq(o.res[1].finish_s, 0.25);
    ck_assert_double_eq(o.res[2].finish_s, 0.5);
    ck_assert_double_eq(o.res[3].first_token_s, 5.75);
    ck_assert_double_eq(o.res[3].finish_s, 6.75);
    ck_assert(o.res[4].first_token_s > 6.75);
    free(o.log.st);
    free(o.log.dig);
    free(o.res);
    free_trace(&tr);
    }
    cost_model_free(&cost);
}
END_TEST

/* Behind least-requests a replica may plan past arrivals that cannot come
 * to it (docs/cluster.md K8b), but only while its own load stays: a
 * request it rejects in a plan brings its horizon back to the next
 * arrival.  Here max_model_len 250 against prompts up to 300 and outputs
 * up to 90 makes V0 replicas reject at admission (inside their plans) and
 * V1 ones at arrival; every run with horizons must equal the same cluster
 * planned step by step (record_steps 1), and rejections, leaps and resumed
 * leaps must all have happened.  (Without the clamp in sched_reject this
 * test fails.) */
START_TEST(test_live_router_rejections)
{
    kvs_err err;
    cost_model cost;
    tu_cost_affine(&cost);
    int64_t rejected = 0, leapt = 0, resumed = 0;
    for (uint64_t seed = 1; seed <= 48; seed++) {
        run_config cfg;
        random_config(&cfg, seed, seed % 3 == 0);
        cfg.sched.max_model_len = 250;
        if (sched_config_check(&cfg.sched, 200, &err) != 0)
            continue;
        trace tr;
        tu_random_trace(&tr, 150 + (int)(seed % 60), seed * 7919, 300, 90, 1);
        cfg.replicas = 2 + (int64_t)(seed % 5);
        snprintf(cfg.router, sizeof cfg.router, "least-requests");
        run_result ra, rb;
        cfg.record_steps = 0;
        ck_assert_msg(run_execute(&cfg, &tr, &cost, &ra, &err) == 0, "%s", err.msg);
        cfg.record_steps = 1;
        ck_assert_msg(run_execute(&cfg, &tr, &cost, &rb, &err) == 0, "%s", err.msg);
        ck_assert_msg(memcmp(ra.reqs, rb.reqs, (size_t)tr.n * sizeof *ra.reqs) == 0,
                      "seed %llu: rows differ", (unsigned long long)seed);
        ck_assert_msg(memcmp(ra.replica, rb.replica, (size_t)tr.n * sizeof *ra.replica) == 0,
                      "seed %llu: replicas differ", (unsigned long long)seed);
        ck_assert_msg(memcmp(&ra.sum, &rb.sum, sizeof ra.sum) == 0,
                      "seed %llu: run summaries differ", (unsigned long long)seed);
        rejected += ra.sum.n_rejected;
        leapt += ra.leap_steps;
        resumed += ra.leap_resumes;
        run_result_free(&ra);
        run_result_free(&rb);
        free_trace(&tr);
    }
    ck_assert_msg(rejected > 50 && leapt > 1000 && resumed > 50,
                  "%lld rejected, %lld steps leapt, %lld leaps resumed: toothless",
                  (long long)rejected, (long long)leapt, (long long)resumed);
    cost_model_free(&cost);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("leaps");
    TCase *tc = tcase_create("leaps");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_leaps_identical);
    tcase_add_test(tc, test_saved_rows_identical);
    tcase_add_test(tc, test_rq_release_identical);
    tcase_add_test(tc, test_rq_release_in_one_leap);
    tcase_add_test(tc, test_same_set_identical);
    tcase_add_test(tc, test_v0_leaps_identical);
    tcase_add_test(tc, test_trt_leaps_identical);
    tcase_add_test(tc, test_sgl_leaps_identical);
    tcase_add_test(tc, test_v0_leap_golden);
    tcase_add_test(tc, test_v0_leap_lpm_eviction);
    tcase_add_test(tc, test_live_router_rejections);
    suite_add_tcase(s, tc);
    return tu_run_suites(&s, 1);
}
