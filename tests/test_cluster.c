/* test_cluster.c — cluster runs (sim/cluster.h, docs/cluster.md):
 *   - round-robin over N replicas equals N independent single-engine runs
 *     on the trace's round-robin subsequences, request by request (an
 *     independent check of the cluster clock), under V0 and V1 engines,
 *     with and without prefix caching and chunked prefill;
 *   - golden scenarios worked out by hand: least-requests ties (and step
 *     ends handled before an arrival of the same instant), prefix affinity
 *     with and without its load cap;
 *   - invariants on random traces for every router: each request served by
 *     exactly one replica (every step member routed to the step's replica),
 *     blocks conserved per replica, per-replica figures adding up to the
 *     cluster's, the same seed giving the same rows;
 *   - the store's replica columns and replica_metrics rows;
 *   - bad input: --replicas 0 and an unknown router, one line, exit 2. */
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scheduler/sched.h"
#include "sim/cluster.h"
#include "sim/router.h"
#include "sim/run.h"
#include "job/job.h"
#include "store/store.h"
#include "traces/trace.h"
#include "testutil.h"

#define EPS 1e-9

/* ------------------------------------------------------------ helpers */

/* The requests of `tr` with id % n == r, prefix hashes included, as a
 * trace of their own (ids renumbered in order). */
static void subtrace(const trace *tr, int64_t n, int64_t r, trace *out)
{
    memset(out, 0, sizeof *out);
    int64_t m = 0, segs = 0;
    for (int64_t i = r; i < tr->n; i += n, m++)
        if (tr->hash_off)
            segs += tr->hash_off[i + 1] - tr->hash_off[i];
    out->n = m;
    out->reqs = calloc((size_t)(m ? m : 1), sizeof *out->reqs);
    ck_assert_ptr_nonnull(out->reqs);
    out->has_priority = tr->has_priority;
    if (tr->hash_off) {
        out->hash_off = calloc((size_t)m + 1, sizeof *out->hash_off);
        out->hash_ids = calloc((size_t)(segs ? segs : 1), sizeof *out->hash_ids);
        out->hash_tokens = calloc((size_t)(segs ? segs : 1), sizeof *out->hash_tokens);
        out->hash_block = tr->hash_block;
    }
    int64_t k = 0, j = 0;
    for (int64_t i = r; i < tr->n; i += n, j++) {
        out->reqs[j] = tr->reqs[i];
        if (!tr->hash_off)
            continue;
        out->hash_off[j] = k;
        for (int64_t s = tr->hash_off[i]; s < tr->hash_off[i + 1]; s++, k++) {
            out->hash_ids[k] = tr->hash_ids[s];
            out->hash_tokens[k] = tr->hash_tokens[s];
        }
    }
    if (tr->hash_off)
        out->hash_off[m] = k;
}

static void run_ok(const run_config *cfg, const trace *tr, const cost_model *cost,
                   run_result *res)
{
    kvs_err err;
    int rc = run_execute(cfg, tr, cost, res, &err);
    ck_assert_msg(rc == 0, "run failed: %s", err.msg);
}

static void synth(const char *spec, uint64_t seed, trace *tr)
{
    trace_synth_spec sp;
    kvs_err err;
    ck_assert_msg(trace_synth_parse(spec, &sp, &err) == 0, "%s", err.msg);
    ck_assert_msg(trace_synth_gen(&sp, spec, seed, tr, &err) == 0, "%s", err.msg);
}

/* Equal doubles, NaN equal to NaN. */
static int same(double a, double b) { return a == b || (isnan(a) && isnan(b)); }

/* ------------------------------------------------- round-robin = split */

typedef struct rr_case {
    const char *name;
    sched_engine engine;
    sched_preempt preempt;
    int chunked, prefix;
    int synthetic; /* 1: a synthetic trace with shared system prompts */
} rr_case;

static const rr_case rr_cases[] = {
    {"v0 recompute", SCHED_ENGINE_VLLM_V0, SCHED_PREEMPT_RECOMPUTE, 0, 0, 0},
    {"v0 swap", SCHED_ENGINE_VLLM_V0, SCHED_PREEMPT_SWAP, 0, 0, 0},
    {"v0 chunked + prefix", SCHED_ENGINE_VLLM_V0, SCHED_PREEMPT_RECOMPUTE, 1, 1, 1},
    {"v1", SCHED_ENGINE_VLLM_V1, SCHED_PREEMPT_RECOMPUTE, 1, 0, 0},
    {"v1 prefix", SCHED_ENGINE_VLLM_V1, SCHED_PREEMPT_RECOMPUTE, 1, 1, 1},
};

/* Continuous batching only: static batching's batch timeout asks whether
 * more requests will arrive, which a replica of a cluster cannot know for
 * itself (it is told whether any will arrive at the cluster). */
START_TEST(test_round_robin_equals_split)
{
    const rr_case *c = &rr_cases[_i % 5];
    int64_t n_rep = 2 + _i / 5; /* 2, 3, 4 */
    uint64_t seed = 11 + (uint64_t)_i;
    trace tr;
    if (c->synthetic)
        synth("arrival=poisson,rate=40,n=300,prompt=uniform:16:160,output=uniform:1:40,"
              "system_prompt=48",
              seed, &tr);
    else
        tu_random_trace(&tr, 300, seed, 150, 40, 0);
    tu_variant v = {"", SCHED_BATCHING_CONTINUOUS, SCHED_POLICY_FCFS, 0, SCHED_ALLOC_PAGED,
                    c->preempt};
    run_config cfg;
    tu_variant_config(&cfg, &v, seed);
    cfg.sched.engine = c->engine;
    cfg.sched.chunked_prefill = c->chunked;
    cfg.sched.prefix_caching = c->prefix;
    cfg.sched.max_model_len = 400;
    cfg.sched.total_blocks = 400 / cfg.sched.block_size + 30;
    cfg.sched.max_batched_tokens = c->chunked ? 64 : 400;
    if (c->engine == SCHED_ENGINE_VLLM_V1)
        cfg.sched.segment_tokens = 16;
    cost_model cost;
    kvs_err err;
    ck_assert(cost_model_create("affine:0.01,0.0002,0.00001,0.000001", NULL, NULL, 1, &cost,
                                &err) == 0);
    cfg.replicas = n_rep;
    strcpy(cfg.router, "round-robin");
    run_result cl;
    run_ok(&cfg, &tr, &cost, &cl);
    ck_assert_int_eq(cl.n_replicas, n_rep);
    int64_t steps = 0;
    for (int64_t r = 0; r < n_rep; r++) {
        trace sub;
        subtrace(&tr, n_rep, r, &sub);
        run_config one = cfg;
        one.replicas = 1;
        run_result s;
        run_ok(&one, &sub, &cost, &s);
        for (int64_t j = 0; j < sub.n; j++) {
            int64_t i = r + j * n_rep;
            const sched_req_result *a = &cl.reqs[i], *b = &s.reqs[j];
            ck_assert_int_eq(cl.replica[i], r);
            ck_assert_msg(a->status == b->status && same(a->first_token_s, b->first_token_s) &&
                              same(a->finish_s, b->finish_s) &&
                              a->preemptions == b->preemptions &&
                              (cl.swaps ? cl.swaps[i].swaps : 0) ==
                                  (s.swaps ? s.swaps[j].swaps : 0),
                          "%s, %lld replicas: request %lld (replica %lld, #%lld): cluster "
                          "%d %.17g %.17g, alone %d %.17g %.17g",
                          c->name, (long long)n_rep, (long long)i, (long long)r, (long long)j,
                          a->status, a->first_token_s, a->finish_s, b->status,
                          b->first_token_s, b->finish_s);
        }
        const run_summary *rs = &cl.replicas[r].sum;
        ck_assert_int_eq(rs->n_requests, sub.n);
        ck_assert_int_eq(rs->n_steps, s.sum.n_steps);
        ck_assert_int_eq(rs->peak_kv_blocks, s.sum.peak_kv_blocks);
        ck_assert_int_eq(rs->preemptions, s.sum.preemptions);
        ck_assert_int_eq(rs->prefix_hit_tokens, s.sum.prefix_hit_tokens);
        ck_assert(same(rs->ttft.p99, s.sum.ttft.p99) && same(rs->e2e.mean, s.sum.e2e.mean));
        steps += s.sum.n_steps;
        run_result_free(&s);
        trace_free(&sub);
    }
    ck_assert_int_eq(cl.sum.n_steps, steps);
    if (c->prefix)
        ck_assert_int_gt(cl.sum.prefix_hit_tokens, 0); /* the scenario exercises the cache */
    run_result_free(&cl);
    cost_model_free(&cost);
    trace_free(&tr);
}
END_TEST

/* ------------------------------------------------------------ goldens */

static void golden_config(run_config *cfg, int64_t replicas, const char *router)
{
    run_config_defaults(cfg); /* V0 continuous fcfs paged */
    sched_config *s = &cfg->sched;
    s->block_size = 4;
    s->total_blocks = 100;
    s->watermark = 0.0;
    s->max_batched_tokens = 1000;
    s->max_model_len = 1000;
    cfg->replicas = replicas;
    strcpy(cfg->router, router);
    cfg->record_steps = 1;
}

/* Least-requests on 2 replicas, V0 engine, every step 1 s (affine:1,0,0,0).
 *   r0 t0   P4 O3   outstanding (0, 0): a tie -> replica 0
 *   r1 t0   P4 O1   (1, 0) -> replica 1
 *   r2 t0.5 P4 O2   (1, 1): a tie -> replica 0
 * Replica 0: prefill r0 [0,1) (first token 1); prefill r2 [1,2) (V0 runs
 * waiting prompts first; first token 2); decode r0 r2 [2,3): r2 done at 3;
 * decode r0 [3,4): done at 4.  Replica 1: prefill r1 [0,1), done at 1.
 *   r3 t1   P4 O2   the step ends at t=1 come first: r1 is done, (2, 0) -> 1
 *   r4 t1   P4 O1   (2, 1) -> replica 1 (round-robin would say 0)
 * Replica 1: prefill r3 r4 [1,2): r4 done at 2; decode r3 [2,3): done at 3.
 *   r5 t4   P4 O1   replica 0's step ends at 4 (r0 done) before r5 is
 *                   routed: (0, 0), a tie -> replica 0 (round-robin: 1);
 *                   prefill [4,5), done at 5. */
START_TEST(test_least_requests_golden)
{
    static const double arr[] = {0, 0, 0.5, 1, 1, 4};
    static const int64_t out[] = {3, 1, 2, 2, 1, 1};
    static const int32_t want_rep[] = {0, 1, 0, 1, 1, 0};
    static const double want_first[] = {1, 1, 2, 2, 2, 5};
    static const double want_finish[] = {4, 1, 3, 3, 2, 5};
    trace tr = {0};
    tr.n = 6;
    tr.reqs = calloc(6, sizeof *tr.reqs);
    for (int i = 0; i < 6; i++)
        tr.reqs[i] = (trace_req){arr[i], 4, out[i], 0};
    run_config cfg;
    golden_config(&cfg, 2, "least-requests");
    cost_model cost;
    kvs_err err;
    ck_assert(cost_model_create("affine:1,0,0,0", NULL, NULL, 1, &cost, &err) == 0);
    run_result res;
    run_ok(&cfg, &tr, &cost, &res);
    for (int i = 0; i < 6; i++) {
        ck_assert_msg(res.replica[i] == want_rep[i], "r%d on replica %d, want %d", i,
                      res.replica[i], want_rep[i]);
        ck_assert(fabs(res.reqs[i].first_token_s - want_first[i]) < EPS);
        ck_assert(fabs(res.reqs[i].finish_s - want_finish[i]) < EPS);
    }
    /* replica 0: steps at 0 1 2 3 4; replica 1: at 0 1 2.  Steps are
     * numbered in the cluster's start order: at one instant replica 0's
     * plan comes first (its event was queued first). */
    ck_assert_int_eq(res.n_steps, 8);
    ck_assert_int_eq(res.replicas[0].sum.n_steps, 5);
    ck_assert_int_eq(res.replicas[1].sum.n_steps, 3);
    for (int64_t k = 0; k < res.n_steps; k++) {
        ck_assert_int_eq(res.steps[k].step.index, k);
        if (k > 0)
            ck_assert(res.steps[k].step.start_s >= res.steps[k - 1].step.start_s);
    }
    ck_assert_int_eq(res.replicas[0].sum.n_requests, 3);
    ck_assert_int_eq(res.replicas[1].sum.n_requests, 3);
    ck_assert(fabs(res.sum.load_imbalance - 1.0) < EPS); /* 3 and 3 */
    ck_assert(fabs(res.replicas[0].sum.makespan_s - 5.0) < EPS);
    ck_assert(fabs(res.replicas[1].sum.makespan_s - 3.0) < EPS);
    ck_assert(fabs(res.sum.makespan_s - 5.0) < EPS);
    run_result_free(&res);
    cost_model_free(&cost);
    trace_free(&tr);
}
END_TEST

/* A request and its prompt segments {id, tokens}. */
typedef struct seg_req {
    double arrival;
    int64_t p, o;
    int64_t seg[2][2];
} seg_req;

static void seg_trace(trace *t, const seg_req *rs, int n)
{
    memset(t, 0, sizeof *t);
    t->n = n;
    t->reqs = calloc((size_t)n, sizeof *t->reqs);
    t->hash_off = calloc((size_t)n + 1, sizeof *t->hash_off);
    t->hash_ids = calloc((size_t)n * 2, sizeof *t->hash_ids);
    t->hash_tokens = calloc((size_t)n * 2, sizeof *t->hash_tokens);
    int64_t k = 0;
    for (int i = 0; i < n; i++) {
        t->reqs[i] = (trace_req){rs[i].arrival, rs[i].p, rs[i].o, 0};
        t->hash_off[i] = k;
        for (int j = 0; j < 2 && rs[i].seg[j][1] > 0; j++) {
            t->hash_ids[k] = (uint64_t)rs[i].seg[j][0];
            t->hash_tokens[k++] = (int32_t)rs[i].seg[j][1];
        }
    }
    t->hash_off[n] = k;
}

/* Prefix affinity on 2 replicas, V0 with prefix caching, block 4, steps of
 * 1 s.
 *   r0 t0 P8 O2 [7: 8]        nothing cached anywhere: a tie -> replica 0
 *   r1 t0 P8 O2 [9: 8]        nothing cached (r0 not admitted yet); by load
 *                             (1, 0) -> replica 1
 * Both finish at 2 (prefill [0,1), decode [1,2)); replica 0 then caches
 * the 2 blocks of segment 7, replica 1 those of segment 9.
 *   r2 t5 P12 O1 [9: 8][3: 4] replica 1 caches 8 of its tokens, replica 0
 *                             none -> replica 1 (round-robin: 0)
 *   r3 t5 P8 O1 [9: 8]        replica 1 caches 8 tokens; it has 1
 *                             outstanding request (r2), replica 0 none.
 * With --affinity-cap 16 replica 1 is allowed (1 <= 0 + 16): r3 -> 1, and
 * the cache hits are r2's 2 blocks and r3's 2 blocks: 16 tokens.  With cap
 * 0 replica 1 is over the cap (1 > 0 + 0): r3 -> replica 0, where nothing
 * of segment 9 is cached: 8 hit tokens.  Under round-robin, r2 -> 0 and
 * r3 -> 1: r2 misses, r3 hits: 8 tokens. */
/* least-requests' safe_arrivals (docs/cluster.md K8b) against routing
 * itself.  By hand, loads (2, 5, 3): the arrivals go to 0, 0, 2, 0, 2, 0
 * and then 1 (ties to the lower index), so replica 2 is first picked at
 * arrival 2 and replica 1 at arrival 6, replica 0 at once: the bound's
 * 2 = (3 + 1 - 2), 6 = (5 + 1 - 2) + (5 - 3) and 0.  Then on random loads
 * with nothing finishing (the worst case: every arrival raises someone)
 * the bound must equal the first arrival routed to r, so it is exact there
 * and a lower bound whenever loads also fall. */
START_TEST(test_least_requests_safe_arrivals)
{
    const router_vt *lr = router_find("least-requests");
    ck_assert_ptr_nonnull(lr);
    ck_assert_ptr_nonnull(lr->safe_arrivals);
    ck_assert_ptr_null(router_find("least-kv")->safe_arrivals);
    router_replica rep[8];
    router_view v = {3, rep, NULL, NULL, 0, 0, {{0}}};
    const int64_t hand[3] = {2, 5, 3}, want[3] = {0, 6, 2};
    for (int r = 0; r < 3; r++) {
        for (int j = 0; j < 3; j++)
            rep[j].outstanding = hand[j];
        ck_assert_int_eq(lr->safe_arrivals(&v, r), want[r]);
    }
    uint64_t x = 99;
    for (int it = 0; it < 2000; it++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        v.n = 1 + (int64_t)(x >> 60) % 8;
        int64_t load[8];
        for (int64_t j = 0; j < v.n; j++) {
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
            load[j] = (int64_t)(x >> 59);
        }
        const int64_t r = (int64_t)(x >> 40) % v.n;
        for (int64_t j = 0; j < v.n; j++)
            rep[j].outstanding = load[j];
        const int64_t bound = lr->safe_arrivals(&v, r);
        int64_t k = 0; /* the first arrival routed to r */
        for (;; k++) {
            int64_t p = lr->pick(&v, k);
            if (p == r)
                break;
            rep[p].outstanding++;
        }
        if (bound != k)
            ck_abort_msg("it %d: loads of %lld replicas, r %lld: bound %lld, first pick %lld", it,
                         (long long)v.n, (long long)r, (long long)bound, (long long)k);
    }
}
END_TEST

START_TEST(test_prefix_affinity_golden)
{
    static const seg_req rs[] = {{0, 8, 2, {{7, 8}, {0, 0}}},
                                 {0, 8, 2, {{9, 8}, {0, 0}}},
                                 {5, 12, 1, {{9, 8}, {3, 4}}},
                                 {5, 8, 1, {{9, 8}, {0, 0}}}};
    static const struct {
        const char *router;
        int64_t cap;
        int32_t rep[4];
        int64_t hit_tokens;
    } cases[] = {{"prefix-affinity", 16, {0, 1, 1, 1}, 16},
                 {"prefix-affinity", 0, {0, 1, 1, 0}, 8},
                 {"round-robin", 16, {0, 1, 0, 1}, 8}};
    cost_model cost;
    kvs_err err;
    ck_assert(cost_model_create("affine:1,0,0,0", NULL, NULL, 1, &cost, &err) == 0);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        trace tr;
        seg_trace(&tr, rs, 4);
        run_config cfg;
        golden_config(&cfg, 2, cases[c].router);
        cfg.sched.prefix_caching = 1;
        cfg.affinity_cap = cases[c].cap;
        run_result res;
        run_ok(&cfg, &tr, &cost, &res);
        for (int i = 0; i < 4; i++)
            ck_assert_msg(res.replica[i] == cases[c].rep[i], "%s cap %lld: r%d on %d, want %d",
                          cases[c].router, (long long)cases[c].cap, i, res.replica[i],
                          cases[c].rep[i]);
        ck_assert_int_eq(res.sum.prefix_hit_tokens, cases[c].hit_tokens);
        ck_assert(fabs(res.reqs[0].finish_s - 2.0) < EPS && fabs(res.reqs[1].finish_s - 2.0) < EPS);
        run_result_free(&res);
        trace_free(&tr);
    }
    cost_model_free(&cost);
}
END_TEST

/* sched_cached_prefix_tokens against the admission's own count: after a
 * V1 engine has served a request, the same prompt is found cached up to
 * floor((P - 1) / block) blocks (rule 2.6). */
START_TEST(test_cached_prefix_query)
{
    static const seg_req rs[] = {{0, 40, 1, {{5, 32}, {6, 8}}}, {9, 40, 1, {{5, 32}, {6, 8}}},
                                 {9, 40, 1, {{5, 32}, {8, 8}}}, {9, 40, 1, {{4, 32}, {6, 8}}}};
    trace tr;
    seg_trace(&tr, rs, 4);
    for (int eng = 0; eng < 2; eng++) {
        run_config cfg;
        golden_config(&cfg, 1, "round-robin");
        cfg.sched.prefix_caching = 1;
        cfg.sched.engine = eng ? SCHED_ENGINE_VLLM_V1 : SCHED_ENGINE_VLLM_V0;
        cfg.sched.segment_tokens = 8;
        cost_model cost;
        kvs_err err;
        ck_assert(cost_model_create("affine:1,0,0,0", NULL, NULL, 1, &cost, &err) == 0);
        sched *s;
        ck_assert(sched_init(&s, &cfg.sched, tr.reqs, tr.n, &cost, &err) == 0);
        req_prefixes px = trace_prefixes(&tr);
        ck_assert(sched_attach_prefixes(s, &px, &err) == 0);
        ck_assert_int_eq(sched_cached_prefix_tokens(s, 1), 0); /* empty cache */
        double t;
        sched_arrive(s, 0);
        ck_assert_int_eq(sched_plan_step(s, 0, 1, &t), SCHED_PLAN_STEP);
        sched_finish_step(s, t); /* r0 done: its 10 blocks cached */
        /* r1 is r0's prompt: V1 finds floor(39/4) = 9 blocks; V0 all 10 */
        ck_assert_int_eq(sched_cached_prefix_tokens(s, 1), eng ? 36 : 40);
        /* r2 shares segment 5 (32 tokens = 8 blocks) only */
        ck_assert_int_eq(sched_cached_prefix_tokens(s, 2), 32);
        /* r3 differs from the first token on */
        ck_assert_int_eq(sched_cached_prefix_tokens(s, 3), 0);
        sched_free(s);
        cost_model_free(&cost);
    }
    trace_free(&tr);
}
END_TEST

/* ---------------------------------------------------------- invariants */

static const char *const routers[] = {"round-robin", "least-requests", "least-kv",
                                      "prefix-affinity", "random"};

START_TEST(test_invariants_random)
{
    const char *router = routers[_i % 5];
    int v1 = _i / 5;
    uint64_t seed = 100 + (uint64_t)_i;
    trace tr;
    synth("arrival=poisson,rate=60,n=400,prompt=uniform:8:120,output=uniform:1:30,turns=3",
          seed, &tr);
    tu_variant v = {"", SCHED_BATCHING_CONTINUOUS, SCHED_POLICY_FCFS, 0, SCHED_ALLOC_PAGED,
                    SCHED_PREEMPT_RECOMPUTE};
    run_config cfg;
    tu_variant_config(&cfg, &v, seed);
    cfg.sched.engine = v1 ? SCHED_ENGINE_VLLM_V1 : SCHED_ENGINE_VLLM_V0;
    cfg.sched.prefix_caching = 1;
    cfg.sched.chunked_prefill = v1;
    cfg.sched.max_model_len = 600;
    cfg.sched.max_batched_tokens = 600;
    cfg.sched.segment_tokens = 16;
    cfg.sched.total_blocks = 600 / cfg.sched.block_size + 20;
    cfg.replicas = 3;
    cfg.router_seed = seed;
    cfg.affinity_cap = 2;
    strcpy(cfg.router, router);
    cost_model cost;
    kvs_err err;
    ck_assert(cost_model_create("affine:0.01,0.0002,0.00001,0.000001", NULL, NULL, 1, &cost,
                                &err) == 0);
    run_result a, b;
    run_ok(&cfg, &tr, &cost, &a);
    run_ok(&cfg, &tr, &cost, &b);
    /* the same inputs and seed: the same rows */
    ck_assert(memcmp(a.replica, b.replica, (size_t)tr.n * sizeof *a.replica) == 0);
    ck_assert(memcmp(a.reqs, b.reqs, (size_t)tr.n * sizeof *a.reqs) == 0);
    ck_assert_int_eq(a.n_steps, b.n_steps);
    ck_assert(memcmp(a.steps, b.steps, (size_t)a.n_steps * sizeof *a.steps) == 0);
    /* every request on one replica; per-replica counts add up */
    int64_t count[3] = {0, 0, 0}, steps[3] = {0, 0, 0}, fin = 0, rej = 0;
    for (int64_t i = 0; i < tr.n; i++) {
        ck_assert(a.replica[i] >= 0 && a.replica[i] < 3);
        count[a.replica[i]]++;
        ck_assert(a.reqs[i].status == SCHED_REQ_FINISHED ||
                  a.reqs[i].status == SCHED_REQ_REJECTED);
    }
    int64_t most = 0;
    for (int r = 0; r < 3; r++) {
        const run_summary *s = &a.replicas[r].sum;
        ck_assert_int_eq(s->n_requests, count[r]);
        fin += s->n_finished;
        rej += s->n_rejected;
        most = count[r] > most ? count[r] : most;
    }
    ck_assert_int_eq(fin, a.sum.n_finished);
    ck_assert_int_eq(rej, a.sum.n_rejected);
    ck_assert(fabs(a.sum.load_imbalance - (double)most * 3.0 / (double)tr.n) < EPS);
    /* every member of a step was routed to the step's replica; blocks per
     * replica within its cache; the V0 decode-step recount of
     * test_sim_props (no prefix sharing among members is possible to
     * rule out here, so only the bound) */
    for (int64_t k = 0; k < a.n_steps; k++) {
        const run_step_rec *st = &a.steps[k];
        int64_t end = k + 1 < a.n_steps ? a.steps[k + 1].member_off : a.n_members;
        ck_assert(st->replica >= 0 && st->replica < 3);
        steps[st->replica]++;
        ck_assert(st->step.kv_blocks_used >= 0 &&
                  st->step.kv_blocks_used <= cfg.sched.total_blocks);
        for (int64_t m = st->member_off; m < end; m++) {
            int32_t id = a.members[m].req_id;
            ck_assert_msg(a.replica[id] == st->replica,
                          "%s: step %lld on replica %d runs request %d of replica %d", router,
                          (long long)k, st->replica, id, a.replica[id]);
            ck_assert(st->step.start_s >= tr.reqs[id].arrival_s);
        }
    }
    for (int r = 0; r < 3; r++)
        ck_assert_int_eq(steps[r], a.replicas[r].sum.n_steps);
    run_result_free(&a);
    run_result_free(&b);
    /* a different router seed moves requests under `random` */
    if (!strcmp(router, "random")) {
        run_config c2 = cfg;
        c2.router_seed = seed + 1;
        run_ok(&cfg, &tr, &cost, &a);
        run_ok(&c2, &tr, &cost, &b);
        ck_assert(memcmp(a.replica, b.replica, (size_t)tr.n * sizeof *a.replica) != 0);
        run_result_free(&a);
        run_result_free(&b);
    }
    cost_model_free(&cost);
    trace_free(&tr);
}
END_TEST

/* Blocks conserved per replica: with prefix caching off, in every V0
 * decode step where all running requests decode, the blocks in use equal
 * sum(ceil(context / block)) over that replica's members alone. */
START_TEST(test_blocks_per_replica)
{
    trace tr;
    tu_random_trace(&tr, 500, 77 + (uint64_t)_i, 150, 40, 0);
    tu_variant v = {"", SCHED_BATCHING_CONTINUOUS, SCHED_POLICY_FCFS, 0, SCHED_ALLOC_PAGED,
                    SCHED_PREEMPT_RECOMPUTE};
    run_config cfg;
    tu_variant_config(&cfg, &v, 77 + (uint64_t)_i);
    cfg.sched.max_model_len = 400;
    cfg.sched.max_batched_tokens = 400;
    cfg.replicas = 4;
    strcpy(cfg.router, routers[_i % 5]);
    cost_model cost;
    kvs_err err;
    ck_assert(cost_model_create("affine:0.01,0.0002,0.00001,0.000001", NULL, NULL, 1, &cost,
                                &err) == 0);
    run_result a;
    run_ok(&cfg, &tr, &cost, &a);
    int64_t recounts = 0;
    for (int64_t k = 0; k < a.n_steps; k++) {
        const run_step_rec *st = &a.steps[k];
        int64_t end = k + 1 < a.n_steps ? a.steps[k + 1].member_off : a.n_members;
        if (st->step.kind != SCHED_STEP_DECODE || st->step.n_running != end - st->member_off)
            continue;
        int64_t want = 0;
        for (int64_t m = st->member_off; m < end; m++)
            want += (a.members[m].context + cfg.sched.block_size - 1) / cfg.sched.block_size;
        ck_assert_int_eq(want, st->step.kv_blocks_used);
        recounts++;
    }
    ck_assert_int_gt(recounts, 10);
    run_result_free(&a);
    cost_model_free(&cost);
    trace_free(&tr);
}
END_TEST

/* ---------------------------------------------------- store and flags */

START_TEST(test_store_rows)
{
    const char *dir = tu_tmpdir();
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd,
             "%s run --synthetic 'arrival=poisson,rate=30,n=200,prompt=256,output=32' "
             "--replicas 3 --router least-kv --record-steps --db %s/c.db --quiet",
             tu_kvsim(), dir);
    ck_assert_msg(tu_run(cmd, &out) == 0, "%s", out);
    free(out);
    char path[512];
    snprintf(path, sizeof path, "%s/c.db", dir);
    sqlite3 *db;
    ck_assert(sqlite3_open(path, &db) == SQLITE_OK);
    static const tu_sql_want q[] = {
        {"SELECT count(DISTINCT replica) FROM requests", 3},
        {"SELECT count(*) FROM requests", 200},
        {"SELECT count(*) FROM replica_metrics", 3},
        {"SELECT sum(n_requests) FROM replica_metrics", 200},
        {"SELECT (SELECT sum(n_steps) FROM replica_metrics) = (SELECT n_steps FROM runs)", 1},
        {"SELECT (SELECT count(*) FROM steps) = (SELECT n_steps FROM runs)", 1},
        {"SELECT count(*) FROM replica_metrics m WHERE m.n_steps = "
         "(SELECT count(*) FROM steps s WHERE s.replica = m.replica)", 3},
        {"SELECT count(*) FROM replica_metrics m WHERE m.n_requests = "
         "(SELECT count(*) FROM requests q WHERE q.replica = m.replica)", 3},
        {"SELECT replicas FROM runs", 3},
        {"SELECT router = 'least-kv' FROM runs", 1},
    };
    tu_sql_expect(db, q, sizeof q / sizeof q[0]);
    sqlite3_close(db);
}
END_TEST

START_TEST(test_bad_flags)
{
    static const struct {
        const char *flags, *want;
    } cases[] = {
        {"--replicas 0", "--replicas"},
        {"--replicas 2 --router nearest", "--router: unknown router 'nearest'"},
        {"--router sticky", "--router: unknown router 'sticky'"},
        {"--replicas 2 --affinity-cap -1", "--affinity-cap"},
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
    /* nothing half-written: no run row */
    char cmd[512], *out = NULL;
    snprintf(cmd, sizeof cmd, "sqlite3 %s/bad.db 'SELECT count(*) FROM runs' 2>/dev/null || echo 0",
             dir);
    tu_run(cmd, &out);
    ck_assert_msg(out && atoi(out) == 0, "%s", out);
    free(out);
}
END_TEST

/* The JSON summary names the cluster fields only for a cluster run, so a
 * single engine's JSON is what it was before clusters. */
START_TEST(test_json_fields)
{
    const char *dir = tu_tmpdir();
    for (int k = 1; k <= 2; k++) {
        char cmd[1024], *out = NULL;
        snprintf(cmd, sizeof cmd,
                 "%s run --synthetic 'arrival=poisson,rate=30,n=40,prompt=64,output=8' "
                 "--replicas %d --router least-requests --json --db %s/j.db",
                 tu_kvsim(), k, dir);
        ck_assert_msg(tu_run(cmd, &out) == 0, "%s", out);
        if (k == 1) {
            ck_assert_msg(!strstr(out, "\"replicas\"") && !strstr(out, "\"router\"") &&
                              !strstr(out, "load_imbalance"),
                          "%s", out);
        } else {
            ck_assert_msg(strstr(out, "\"replicas\": 2,") &&
                              strstr(out, "\"router\": \"least-requests\",") &&
                              strstr(out, "\"load_imbalance\": "),
                          "%s", out);
        }
        free(out);
    }
}
END_TEST

START_TEST(test_router_registry)
{
    for (size_t i = 0; i < 5; i++) {
        const router_vt *r = router_find(routers[i]);
        ck_assert_ptr_nonnull(r);
        ck_assert_str_eq(r->name, routers[i]);
        ck_assert(strstr(router_names(), routers[i]));
    }
    ck_assert_ptr_null(router_find("nope"));
    run_config cfg;
    run_config_defaults(&cfg);
    kvs_err err;
    ck_assert_int_eq(cluster_config_check(&cfg, &err), 0); /* 1 replica, round-robin */
    cfg.replicas = 0;
    ck_assert_int_eq(cluster_config_check(&cfg, &err), KVS_EINVAL);
}
END_TEST

/* --router-seed defaults to --seed (job_prepare), and is its own when given. */
START_TEST(test_router_seed_default)
{
    for (int given = 0; given < 2; given++) {
        job_opts o;
        job_opts_init(&o);
        kvs_err err;
        ck_assert(job_param_set(&o, "synthetic", "arrival=poisson,rate=5,n=20,prompt=64,output=8",
                                &err) == 0);
        ck_assert(job_param_set(&o, "seed", "7", &err) == 0);
        ck_assert(job_param_set(&o, "replicas", "3", &err) == 0);
        ck_assert(job_param_set(&o, "router", "random", &err) == 0);
        if (given)
            ck_assert(job_param_set(&o, "router-seed", "3", &err) == 0);
        model_spec m;
        gpu_spec g;
        trace tr;
        ck_assert_msg(job_prepare(&o, &m, &g, &tr, &err) == 0, "%s", err.msg);
        ck_assert_uint_eq(o.cfg.router_seed, given ? 3 : 7);
        ck_assert_int_eq(o.cfg.replicas, 3);
        trace_free(&tr);
    }
}
END_TEST

static Suite *cluster_suite(void)
{
    Suite *s = suite_create("cluster");
    TCase *t = tcase_create("core");
    tcase_set_timeout(t, 300);
    tcase_add_loop_test(t, test_round_robin_equals_split, 0, 15);
    tcase_add_test(t, test_least_requests_golden);
    tcase_add_test(t, test_least_requests_safe_arrivals);
    tcase_add_test(t, test_prefix_affinity_golden);
    tcase_add_test(t, test_cached_prefix_query);
    tcase_add_loop_test(t, test_invariants_random, 0, 10);
    tcase_add_loop_test(t, test_blocks_per_replica, 0, 5);
    tcase_add_test(t, test_store_rows);
    tcase_add_test(t, test_bad_flags);
    tcase_add_test(t, test_router_registry);
    tcase_add_test(t, test_router_seed_default);
    tcase_add_test(t, test_json_fields);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    Suite *s[] = {cluster_suite()};
    return tu_run_suites(s, 1);
}
