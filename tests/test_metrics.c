/* test_metrics.c — the metrics of section 7: nearest-rank percentiles by
 * selection checked against sorting (the simple model), throughput, SLO
 * attainment and goodput on a hand-made result. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "sim/run.h"
#include "testutil.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Build a trace with arrival 0 and the given TTFT / E2E per request. */
static void make(trace *tr, sched_req_result **res, const double *ttft, const double *e2e,
                 const int64_t *out, int n)
{
    memset(tr, 0, sizeof *tr);
    tr->n = n;
    tr->reqs = calloc((size_t)n, sizeof *tr->reqs);
    *res = calloc((size_t)n, sizeof **res);
    for (int i = 0; i < n; i++) {
        tr->reqs[i].prompt_tokens = 10;
        tr->reqs[i].output_tokens = out[i];
        (*res)[i].status = isnan(e2e[i]) ? SCHED_REQ_REJECTED : SCHED_REQ_FINISHED;
        (*res)[i].first_token_s = ttft[i];
        (*res)[i].finish_s = e2e[i];
    }
}

START_TEST(test_percentiles_match_sort)
{
    rng r;
    rng_init(&r, 42);
    for (int trial = 0; trial < 60; trial++) {
        int n = 1 + (int)rng_below(&r, trial < 20 ? 12 : 3000);
        double *t = malloc((size_t)n * sizeof *t), *e = malloc((size_t)n * sizeof *e);
        int64_t *o = malloc((size_t)n * sizeof *o);
        for (int i = 0; i < n; i++) {
            /* many ties: values on a coarse grid */
            t[i] = (double)rng_below(&r, 50) / 10.0;
            e[i] = t[i] + (double)rng_below(&r, 100);
            o[i] = 1 + (int64_t)rng_below(&r, 5);
        }
        trace tr;
        sched_req_result *res;
        make(&tr, &res, t, e, o, n);
        run_config cfg;
        run_config_defaults(&cfg);
        run_summary s;
        run_metrics_compute(&cfg, &tr, res, &s);
        qsort(t, (size_t)n, sizeof *t, cmp_double);
        const double ps[3] = {50, 90, 99};
        const double got[3] = {s.ttft.p50, s.ttft.p90, s.ttft.p99};
        for (int k = 0; k < 3; k++) {
            int64_t rank = (int64_t)ceil(ps[k] / 100.0 * n);
            ck_assert_msg(got[k] == t[rank - 1], "n=%d p%g: %g vs %g", n, ps[k], got[k],
                          t[rank - 1]);
        }
        free(t);
        free(e);
        free(o);
        free(tr.reqs);
        free(res);
    }
}
END_TEST

/* Four requests arriving at 0:
 *   r0 TTFT 1, E2E 5, O 5 -> TPOT (5-1)/4 = 1.0
 *   r1 TTFT 2, E2E 4, O 3 -> TPOT 1.0
 *   r2 TTFT 3, E2E 3, O 1 -> no TPOT
 *   r3 rejected.
 * nearest rank over 3 finished: p50 = rank 2, p90 = p99 = rank 3.
 * throughput = (5+3+1) / (5 - 0) = 1.8 tok/s; 3 / 5 = 0.6 req/s.
 * SLO ttft <= 2, tpot <= 1: r0 and r1 meet it (r2 misses TTFT, r3 is
 * rejected): attainment 2/4 = 0.5, goodput 2 / 5 s = 0.4 req/s. */
START_TEST(test_summary_by_hand)
{
    const double t[4] = {1, 2, 3, NAN}, e[4] = {5, 4, 3, NAN};
    const int64_t o[4] = {5, 3, 1, 2};
    trace tr;
    sched_req_result *res;
    make(&tr, &res, t, e, o, 4);
    run_config cfg;
    run_config_defaults(&cfg);
    cfg.slo_ttft_s = 2;
    cfg.slo_tpot_s = 1;
    run_summary s;
    run_metrics_compute(&cfg, &tr, res, &s);
    ck_assert_int_eq(s.n_finished, 3);
    ck_assert_int_eq(s.n_rejected, 1);
    ck_assert(s.ttft.p50 == 2 && s.ttft.p90 == 3 && s.ttft.p99 == 3);
    ck_assert(fabs(s.ttft.mean - 2.0) < 1e-12);
    ck_assert(s.e2e.p50 == 4 && s.e2e.p99 == 5);
    ck_assert(s.tpot.p50 == 1.0 && s.tpot.p99 == 1.0);
    ck_assert(fabs(s.norm_latency.p99 - 3.0) < 1e-12); /* r2: 3 s / 1 token */
    ck_assert(fabs(s.throughput_tok_s - 1.8) < 1e-12);
    ck_assert(fabs(s.throughput_req_s - 0.6) < 1e-12);
    ck_assert(fabs(s.slo_attainment - 0.5) < 1e-12);
    ck_assert(fabs(s.goodput_req_s - 0.4) < 1e-12);
    /* without SLOs: NaN */
    cfg.slo_ttft_s = cfg.slo_tpot_s = 0;
    run_metrics_compute(&cfg, &tr, res, &s);
    ck_assert(isnan(s.slo_attainment) && isnan(s.goodput_req_s));
    free(tr.reqs);
    free(res);
}
END_TEST


/* Per-class metrics: the same four requests as above, r0 and r2 in class
 * 1, r1 and r3 in class 0 (r3 rejected).
 *   class 0: r1 only finished: TTFT 2, E2E 4, TPOT 1.
 *   class 1: r0 (TTFT 1, E2E 5) and r2 (TTFT 3, E2E 3): p50 = rank 1 of
 *   the sorted pair, p99 = rank 2: TTFT p50 1, p99 3; E2E p50 3, p99 5. */
START_TEST(test_by_class)
{
    const double t[4] = {1, 2, 3, NAN}, e[4] = {5, 4, 3, NAN};
    const int64_t o[4] = {5, 3, 1, 2};
    trace tr;
    sched_req_result *res;
    make(&tr, &res, t, e, o, 4);
    tr.reqs[0].priority = 1;
    tr.reqs[2].priority = 1;
    run_config cfg;
    run_config_defaults(&cfg);
    run_class *c;
    int n;
    /* no priority column: no classes */
    ck_assert_int_eq(run_metrics_by_class(&cfg, &tr, res, &c, &n), 0);
    ck_assert_int_eq(n, 0);
    ck_assert_ptr_null(c);
    tr.has_priority = 1;
    ck_assert_int_eq(run_metrics_by_class(&cfg, &tr, res, &c, &n), 0);
    ck_assert_int_eq(n, 2);
    ck_assert_int_eq(c[0].priority, 0);
    ck_assert_int_eq(c[0].n_requests, 2);
    ck_assert_int_eq(c[0].n_finished, 1);
    ck_assert_int_eq(c[0].n_rejected, 1);
    ck_assert(c[0].ttft.p50 == 2 && c[0].e2e.p99 == 4 && c[0].tpot.p50 == 1);
    ck_assert_int_eq(c[1].priority, 1);
    ck_assert_int_eq(c[1].n_finished, 2);
    ck_assert(c[1].ttft.p50 == 1 && c[1].ttft.p99 == 3);
    ck_assert(c[1].e2e.p50 == 3 && c[1].e2e.p99 == 5);
    free(c);
    free(tr.reqs);
    free(res);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("metrics");
    TCase *tc = tcase_create("metrics");
    tcase_add_test(tc, test_percentiles_match_sort);
    tcase_add_test(tc, test_summary_by_hand);
    tcase_add_test(tc, test_by_class);
    suite_add_tcase(s, tc);
    return tu_run_suites(&s, 1);
}
