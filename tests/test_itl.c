/* test_itl.c — inter-token latency (ITL):
 *   - the streaming histogram (sim/hist.h) against a sorted copy of its
 *     samples: every rank within the documented bound, exact when the
 *     samples repeat a few values;
 *   - a scenario worked by hand (prefill interference in V0);
 *   - random runs of every engine variant with recorded steps: the token
 *     times rebuilt from the steps account for every request's O tokens,
 *     start at first_token_s and end at finish_s, and the run's ITL
 *     percentiles, mean, gap count and per-request max ITL equal those
 *     recomputed from the rebuilt gaps;
 *   - the leap sink's counts (run_itl_leap_end with a count per request)
 *     against a plain list of every leapt step's gap: each request told
 *     of its last c leapt steps gets the largest of those c gaps, however
 *     long ago the record of longest gaps dropped older steps. */
#include "sim/itl.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/hist.h"
#include "sim/run.h"
#include "testutil.h"

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Nearest rank over sorted v[n], as docs/semantics.md section 7. */
static double rank_of(const double *v, int64_t n, double p)
{
    int64_t k = (int64_t)ceil(p / 100.0 * (double)n);
    return v[(k < 1 ? 1 : k) - 1];
}

static uint64_t lcg(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 11;
}

START_TEST(test_hist_bound_every_rank)
{
    uint64_t st = 42;
    for (int round = 0; round < 4; round++) {
        int64_t n = 5000 + round * 997;
        double *v = malloc((size_t)n * sizeof *v);
        hist h;
        ck_assert_int_eq(hist_init(&h), 0);
        for (int64_t i = 0; i < n; i++) {
            /* log-uniform over 1e-6 .. 10 s, and some exact zeros */
            double u = (double)(lcg(&st) % 1000000) / 1e6;
            v[i] = (lcg(&st) % 50 == 0) ? 0.0 : 1e-6 * pow(1e7, u);
            hist_add(&h, v[i]);
        }
        qsort(v, (size_t)n, sizeof *v, cmp_dbl);
        for (int64_t k = 1; k <= n; k++) {
            double got = hist_rank(&h, k), want = v[k - 1];
            ck_assert_msg(fabs(got - want) <= want * ldexp(1.0, -HIST_MANT_BITS),
                          "rank %lld: %.17g vs %.17g", (long long)k, got, want);
        }
        /* the ends of the order are exact */
        ck_assert_double_eq(hist_rank(&h, 1), v[0]);
        ck_assert_double_eq(hist_rank(&h, n), v[n - 1]);
        double sum = 0;
        for (int64_t i = 0; i < n; i++)
            sum += v[i];
        run_dist d = hist_dist(&h);
        ck_assert(fabs(d.mean - sum / (double)n) <= 1e-12 * sum / (double)n);
        ck_assert(fabs(d.p99 - rank_of(v, n, 99)) <= rank_of(v, n, 99) / 1024);
        hist_free(&h);
        free(v);
    }
}
END_TEST

/* Few distinct values (as equal step times give): every rank exact. */
START_TEST(test_hist_exact_on_repeats)
{
    const double vals[] = {0.0123, 0.0123000001, 0.5, 3.25, 0.0124};
    uint64_t st = 7;
    int64_t n = 3001;
    double *v = malloc((size_t)n * sizeof *v);
    hist h;
    ck_assert_int_eq(hist_init(&h), 0);
    for (int64_t i = 0; i < n; i++) {
        v[i] = vals[lcg(&st) % 5];
        hist_add(&h, v[i]);
    }
    qsort(v, (size_t)n, sizeof *v, cmp_dbl);
    /* 0.0123 and 0.0123000001 share a bin: only ranks strictly inside the
     * run of that bin may be off, and only by the bin's spread */
    for (int64_t k = 1; k <= n; k++) {
        double got = hist_rank(&h, k);
        if (v[k - 1] < 0.01231)
            ck_assert(got >= 0.0123 && got <= 0.0123000001);
        else
            ck_assert_double_eq(got, v[k - 1]);
    }
    hist_free(&h);
    free(v);
    hist empty;
    ck_assert_int_eq(hist_init(&empty), 0);
    ck_assert(isnan(hist_dist(&empty).p50) && isnan(hist_dist(&empty).mean));
    hist_free(&empty);
}
END_TEST

/* By hand, V0 continuous batching, affine 1 + 0.1*tokens (c2 = c3 = 0):
 *   A (t 0, P 10, O 4)   B (t 1.5, P 10, O 2)
 * t=0    prefill [A]: 1 + 0.1*10 = 2.0 -> t=2.0, A's token 1.
 * t=2.0  B is waiting: the prefill [B] runs alone (V0 puts no decode in a
 *        prefill step): 2.0 -> t=4.0, B's token 1.
 * t=4.0  decode [A B]: 1 + 0.1*2 = 1.2 -> t=5.2: A token 2, B token 2 (done).
 * t=5.2  decode [A]: 1.1 -> 6.3 (A token 3); 1.1 -> 7.4 (A token 4, done).
 * Gaps: A 3.2 (B's prefill interferes), 1.1, 1.1; B 1.2.  Sorted
 * {1.1, 1.1, 1.2, 3.2}: p50 = rank 2 = 1.1, p90 = rank 4 = 3.2, p99 = 3.2,
 * mean 6.6 / 4 = 1.65.  Max ITL: A 3.2, B 1.2.  (TPOT of A is 5.4/3 = 1.8:
 * the mean hides the 3.2 s stall that the ITL p90 shows.) */
START_TEST(test_itl_told_counts)
{
    enum { NREQ = 4000, OUT = 50 };
    trace tr = {0};
    tr.n = NREQ;
    tr.reqs = calloc(NREQ, sizeof *tr.reqs);
    for (int i = 0; i < NREQ; i++)
        tr.reqs[i] = (trace_req){0.0, 8, 1 + (int32_t)(i % OUT), 0};
    run_itl t;
    kvs_err err;
    ck_assert_int_eq(run_itl_init(&t, &tr, 1, &err), 0);
    ck_assert_int_eq(t.window, OUT);
    double gaps[20000]; /* every leapt step's gap, in order (a plain model) */
    int64_t nsteps = 0, told = 0, grown = 0;
    int32_t enter[NREQ];       /* the leapt step count when each made its first token */
    uint64_t r = 7;
    double now = 0.0;
    int next = 0;              /* requests started so far, in order */
    for (int step = 0; step < 20000; step++) {
        /* a few requests make their first token now (a member), then ride
         * along the leapt steps */
        if (next < NREQ && lcg(&r) % 3 == 0) {
            sched_member m = {next, SCHED_MEMBER_DECODE, 8, 1};
            run_itl_members(&t, 0, &m, 1, now, 0);
            enter[next] = tr.reqs[next].output_tokens > 1 ? (int32_t)nsteps : -1;
            next++;
        }
        /* a leapt step; the durations rise and fall at random, and fall
         * steadily for 100 steps in every 500 (each then beats none, so the
         * record fills up to the window and drops the steps behind it) */
        double d = step % 500 < 100 ? 0.2 - 0.001 * (double)(step % 500)
                                    : 0.001 * (double)(1 + lcg(&r) % 97);
        sched_step st = {0};
        st.start_s = now;
        st.dur_s = d;
        st.leapt = 1;
        st.batch.n_decode = 1;
        now += d;
        const int64_t cap0 = t.src[0].mx_cap;
        run_itl_leapt_step(&t, 0, &st);
        grown += t.src[0].mx_cap > cap0;
        gaps[nsteps++] = (st.start_s + st.dur_s) - st.start_s; /* as the tracker's */
        /* requests whose output is complete are told of all their steps at once */
        int32_t ids[64], each[64];
        int64_t n = 0;
        for (int i = 0; i < next && n < 64; i++) {
            const int64_t c = nsteps - enter[i];
            if (enter[i] >= 0 && c == tr.reqs[i].output_tokens - 1) {
                ids[n] = i;
                each[n++] = (int32_t)c;
                enter[i] = -1;
            }
        }
        run_itl_leap_end(&t, 0, ids, n, 0, each);
        for (int64_t k = 0; k < n; k++) {
            const int64_t c = each[k];
            double want = NAN;
            for (int64_t j = nsteps - c; j < nsteps; j++)
                if (!(gaps[j] <= want))
                    want = gaps[j];
            ck_assert_msg(t.max_s[ids[k]] == want, "request %d told of %lld steps: %g, want %g",
                          ids[k], (long long)c, t.max_s[ids[k]], want);
            told++;
        }
    }
    ck_assert_int_eq(t.oom, 0);
    /* requests of one token are never told; the others all were */
    ck_assert_msg(told > 3000 && grown >= 2 && t.src[0].mx_cap <= 2 * OUT,
                  "%lld told, the record grew %lld times to %lld: toothless or unbounded",
                  (long long)told, (long long)grown, (long long)t.src[0].mx_cap);
    run_itl_free(&t);
    free(tr.reqs);
}
END_TEST

START_TEST(test_itl_by_hand)
{
    golden g;
    memset(&g, 0, sizeof g);
    g.tr.n = 2;
    g.tr.reqs = calloc(2, sizeof *g.tr.reqs);
    g.tr.reqs[0] = (trace_req){0.0, 10, 4, 0};
    g.tr.reqs[1] = (trace_req){1.5, 10, 2, 0};
    run_config_defaults(&g.cfg);
    g.cfg.sched.engine = SCHED_ENGINE_VLLM_V0;
    g.cfg.sched.block_size = 4;
    g.cfg.sched.total_blocks = 100;
    g.cfg.sched.watermark = 0.0;
    g.cfg.sched.max_batched_tokens = 1000;
    g.cfg.sched.max_model_len = 1000;
    kvs_err err;
    ck_assert_int_eq(cost_model_create("affine:1,0.1,0,0", NULL, NULL, 1, &g.cost, &err), 0);
    golden_run(&g);
    const run_summary *s = &g.res.sum;
    ck_assert_int_eq(s->n_itl, 4);
    ck_assert(fabs(s->itl.p50 - 1.1) < 1e-9);
    ck_assert(fabs(s->itl.p90 - 3.2) < 1e-9);
    ck_assert(fabs(s->itl.p99 - 3.2) < 1e-9);
    ck_assert(fabs(s->itl.mean - 1.65) < 1e-9);
    ck_assert(fabs(g.res.max_itl_s[0] - 3.2) < 1e-9);
    ck_assert(fabs(g.res.max_itl_s[1] - 1.2) < 1e-9);
    ck_assert(fabs(s->tpot.p99 - 1.8) < 1e-9);
    golden_free(&g);
}
END_TEST

typedef struct variant {
    const char *name;
    sched_engine engine;
    sched_batching batching;
    sched_preempt preempt;
    sched_alloc alloc;
    int chunked, prefix;
} variant;

static const variant variants[] = {
    {"v0 continuous recompute", SCHED_ENGINE_VLLM_V0, SCHED_BATCHING_CONTINUOUS,
     SCHED_PREEMPT_RECOMPUTE, SCHED_ALLOC_PAGED, 0, 0},
    {"v0 continuous swap", SCHED_ENGINE_VLLM_V0, SCHED_BATCHING_CONTINUOUS, SCHED_PREEMPT_SWAP,
     SCHED_ALLOC_PAGED, 0, 0},
    {"v0 reserved", SCHED_ENGINE_VLLM_V0, SCHED_BATCHING_CONTINUOUS, SCHED_PREEMPT_RECOMPUTE,
     SCHED_ALLOC_RESERVED, 0, 0},
    {"v0 static", SCHED_ENGINE_VLLM_V0, SCHED_BATCHING_STATIC, SCHED_PREEMPT_RECOMPUTE,
     SCHED_ALLOC_PAGED, 0, 0},
    {"v0 chunked", SCHED_ENGINE_VLLM_V0, SCHED_BATCHING_CONTINUOUS, SCHED_PREEMPT_RECOMPUTE,
     SCHED_ALLOC_PAGED, 1, 0},
    {"v1 chunked", SCHED_ENGINE_VLLM_V1, SCHED_BATCHING_CONTINUOUS, SCHED_PREEMPT_RECOMPUTE,
     SCHED_ALLOC_PAGED, 1, 0},
    {"v1 chunked prefix", SCHED_ENGINE_VLLM_V1, SCHED_BATCHING_CONTINUOUS,
     SCHED_PREEMPT_RECOMPUTE, SCHED_ALLOC_PAGED, 1, 1},
};

/* Rebuild every request's token times from the recorded steps (the rule of
 * docs/semantics.md 1 and semantics-extensions.md C1: a decode or swap-in
 * member makes a token at its step's end; a prefill member makes one when
 * its context after the step reaches P + g), check them against the
 * scheduler's own first_token_s / finish_s, and compare the run's ITL. */
static void check_run(const variant *v, uint64_t seed, const trace *tr, const run_result *res)
{
    int64_t n = tr->n;
    int64_t *gen = calloc((size_t)n, sizeof *gen);
    double *last = calloc((size_t)n, sizeof *last), *first = calloc((size_t)n, sizeof *first);
    double *mx = malloc((size_t)n * sizeof *mx);
    double *gaps = NULL;
    int64_t ng = 0, cap = 0;
    for (int64_t i = 0; i < n; i++)
        mx[i] = NAN;
    for (int64_t s = 0; s < res->n_steps; s++) {
        const sched_step *st = &res->steps[s].step;
        int64_t lo = res->steps[s].member_off;
        int64_t hi = s + 1 < res->n_steps ? res->steps[s + 1].member_off : res->n_members;
        double t = st->start_s + st->dur_s;
        for (int64_t j = lo; j < hi; j++) {
            const sched_member *m = &res->members[j];
            const trace_req *q = &tr->reqs[m->req_id];
            int64_t id = m->req_id;
            if (gen[id] >= q->output_tokens)
                continue; /* static batching's padded steps */
            if (m->kind == SCHED_MEMBER_PREFILL && m->context < q->prompt_tokens + gen[id])
                continue; /* an earlier chunk */
            if (gen[id] == 0) {
                first[id] = t;
            } else {
                if (ng == cap) {
                    cap = cap ? 2 * cap : 1024;
                    gaps = realloc(gaps, (size_t)cap * sizeof *gaps);
                }
                double gap = t - last[id];
                gaps[ng++] = gap;
                if (!(gap <= mx[id]))
                    mx[id] = gap;
            }
            gen[id]++;
            last[id] = t;
        }
    }
    int64_t checked = 0;
    for (int64_t i = 0; i < n; i++) {
        const sched_req_result *r = &res->reqs[i];
        if (r->status != SCHED_REQ_FINISHED)
            continue;
        checked++;
        ck_assert_msg(gen[i] == tr->reqs[i].output_tokens, "%s seed %llu req %lld: %lld tokens "
                      "in the steps, O = %lld", v->name, (unsigned long long)seed, (long long)i,
                      (long long)gen[i], (long long)tr->reqs[i].output_tokens);
        ck_assert_double_eq(first[i], r->first_token_s);
        if (v->batching != SCHED_BATCHING_STATIC) /* static holds it until the batch ends */
            ck_assert_double_eq(last[i], r->finish_s);
        else
            ck_assert(last[i] <= r->finish_s);
        if (isnan(mx[i]))
            ck_assert(isnan(res->max_itl_s[i]));
        else
            ck_assert_double_eq(mx[i], res->max_itl_s[i]);
    }
    ck_assert(checked > 0);
    ck_assert_int_eq(res->sum.n_itl, ng);
    /* run_request_itls (--result-json-detail's itls): per request, the same
     * count, largest gap and sum (the first to the last token) */
    double *rg;
    int64_t *ro;
    ck_assert_int_eq(run_request_itls(res, &rg, &ro), 0);
    ck_assert_int_eq(ro[n], ng);
    for (int64_t i = 0; i < n; i++) {
        int64_t k = ro[i + 1] - ro[i];
        ck_assert_int_eq(k, gen[i] > 0 ? gen[i] - 1 : 0);
        double sum = 0, big = NAN;
        for (int64_t j = ro[i]; j < ro[i + 1]; j++) {
            sum += rg[j];
            if (!(rg[j] <= big))
                big = rg[j];
        }
        if (k > 0) {
            ck_assert_double_eq(big, mx[i]);
            ck_assert(fabs(sum - (last[i] - first[i])) <= 1e-9 * (1 + last[i]));
        }
    }
    free(rg);
    free(ro);
    if (ng > 0) {
        double sum = 0;
        for (int64_t i = 0; i < ng; i++)
            sum += gaps[i];
        qsort(gaps, (size_t)ng, sizeof *gaps, cmp_dbl);
        const double ps[3] = {50, 90, 99};
        const double got[3] = {res->sum.itl.p50, res->sum.itl.p90, res->sum.itl.p99};
        for (int k = 0; k < 3; k++) {
            double want = rank_of(gaps, ng, ps[k]);
            ck_assert_msg(fabs(got[k] - want) <= want * ldexp(1.0, -HIST_MANT_BITS),
                          "%s seed %llu: ITL p%g %.17g, recomputed %.17g", v->name,
                          (unsigned long long)seed, ps[k], got[k], want);
        }
        ck_assert(fabs(res->sum.itl.mean - sum / (double)ng) <= 1e-12 * (sum / (double)ng));
    } else {
        ck_assert(isnan(res->sum.itl.p50));
    }
    free(gen);
    free(last);
    free(first);
    free(mx);
    free(gaps);
}

START_TEST(test_itl_equals_recorded_steps)
{
    kvs_err err;
    cost_model cost;
    tu_cost_affine(&cost);
    int64_t preempted = 0, gaps = 0;
    for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
        for (uint64_t seed = 1; seed <= 12; seed++) {
            trace tr;
            tu_random_trace(&tr, 150, seed * 104729 + v, 120, 60, 0);
            run_config cfg;
            tu_variant c = {variants[v].name, variants[v].batching, SCHED_POLICY_FCFS, 0,
                            variants[v].alloc, variants[v].preempt};
            tu_variant_config(&cfg, &c, seed);
            cfg.sched.engine = variants[v].engine;
            cfg.sched.chunked_prefill = variants[v].chunked;
            cfg.sched.prefix_caching = variants[v].prefix;
            if (variants[v].chunked)
                cfg.sched.max_batched_tokens = 16 + (int64_t)(seed % 64);
            run_result res;
            int rc = run_execute(&cfg, &tr, &cost, &res, &err);
            ck_assert_msg(rc == 0, "%s seed %llu: %s", variants[v].name,
                          (unsigned long long)seed, err.msg);
            check_run(&variants[v], seed, &tr, &res);
            preempted += res.sum.preemptions;
            gaps += res.sum.n_itl;
            run_result_free(&res);
            free(tr.reqs);
        }
    }
    /* the runs did preempt (recomputed prefills of P + g) and made gaps */
    ck_assert(preempted > 0 && gaps > 10000);
    cost_model_free(&cost);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("itl");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_hist_bound_every_rank);
    tcase_add_test(tc, test_hist_exact_on_repeats);
    tcase_add_test(tc, test_itl_by_hand);
    tcase_add_test(tc, test_itl_told_counts);
    tcase_add_test(tc, test_itl_equals_recorded_steps);
    suite_add_tcase(s, tc);
    return tu_run_suites(&s, 1);
}
