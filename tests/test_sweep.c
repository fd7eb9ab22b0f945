/* test_sweep.c — the pieces behind `kvsim sweep` and `kvsim capacity
 * --search` that need no process: grid parsing and the order of its
 * cartesian product (against nested loops), synthetic spec rewriting, SLO
 * parsing and checking, the rate and list searches (against a threshold
 * model of a probe, with the probe sequence worked out by hand), the MPI run
 * buffer round trip, and the store's sweep tables (points tagged atomically
 * with their run, views).  All of it is job/ (kvsim_lib). */
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job/job.h"
#include "store/store.h"
#include "testutil.h"

/* A getopt table standing in for the run flags. */
static const struct option opts[] = {
    {"max-seqs", required_argument, 0, 1},
    {"batching", required_argument, 0, 2},
    {"priority-preemption", no_argument, 0, 3},
    {"db", required_argument, 0, 4},
    {"label", required_argument, 0, 5},
    {"seed", required_argument, 0, 6},
    {0, 0, 0, 0}};

static void add_ok(sweep_grid *g, const char *text)
{
    kvs_err err = {{0}};
    int rc = sweep_grid_add(g, opts, text, "--grid", &err);
    ck_assert_msg(rc == KVS_OK, "%s: %s", text, err.msg);
}

static void key_of(const sweep_grid *g, int64_t i, char *buf, size_t n)
{
    kvs_err err;
    ck_assert_int_eq(sweep_grid_point_key(g, i, buf, n, &err), KVS_OK);
}

/* ------------------------------------------------------------ grid */

START_TEST(test_grid_order)
{
    sweep_grid g;
    sweep_grid_init(&g);
    add_ok(&g, "max-seqs=16,64,256");
    add_ok(&g, "batching=static,continuous");
    ck_assert_int_eq(g.n_points, 6);
    /* first axis slowest: 16/static, 16/continuous, 64/static, ... */
    static const char *const want[] = {
        "max-seqs=16 batching=static",  "max-seqs=16 batching=continuous",
        "max-seqs=64 batching=static",  "max-seqs=64 batching=continuous",
        "max-seqs=256 batching=static", "max-seqs=256 batching=continuous"};
    char key[256];
    for (int i = 0; i < 6; i++) {
        key_of(&g, i, key, sizeof key);
        ck_assert_str_eq(key, want[i]);
    }
    ck_assert_int_eq(g.axes[0].kind, SWEEP_KEY_FLAG);
    ck_assert_int_eq(g.axes[0].opt_val, 1);
    char *text = sweep_grid_text(&g);
    ck_assert_str_eq(text, "max-seqs=16,64,256\nbatching=static,continuous\n");
    /* the canonical text reads back to the same grid */
    sweep_grid g2;
    sweep_grid_init(&g2);
    kvs_err err;
    ck_assert_int_eq(sweep_grid_read_text(&g2, opts, text, "sweep 1", &err), KVS_OK);
    char *text2 = sweep_grid_text(&g2);
    ck_assert_str_eq(text2, text);
    ck_assert_str_eq(g2.axes[1].where, "sweep 1:2");
    free(text);
    free(text2);
    sweep_grid_free(&g2);
    sweep_grid_free(&g);
}
END_TEST

/* The product against nested loops over axes of 2, 3 and 4 values. */
START_TEST(test_grid_matches_nested_loops)
{
    sweep_grid g;
    sweep_grid_init(&g);
    add_ok(&g, "seed=1,2");
    add_ok(&g, "max-seqs=8,9,10");
    add_ok(&g, "batching=a,b,c,d");
    ck_assert_int_eq(g.n_points, 24);
    int64_t idx = 0;
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 3; b++)
            for (int c = 0; c < 4; c++, idx++) {
                int ch[SWEEP_MAX_AXES];
                sweep_grid_choice(&g, idx, ch);
                ck_assert_int_eq(ch[0], a);
                ck_assert_int_eq(ch[1], b);
                ck_assert_int_eq(ch[2], c);
            }
    sweep_grid_free(&g);
}
END_TEST

START_TEST(test_grid_values)
{
    sweep_grid g;
    sweep_grid_init(&g);
    add_ok(&g, "priority-preemption=on,off");
    add_ok(&g, "rate=1.5,3");
    add_ok(&g, "synthetic.n=10,20");
    kvs_err err;
    ck_assert_int_eq(g.axes[0].kind, SWEEP_KEY_SWITCH);
    ck_assert_int_eq(g.axes[1].kind, SWEEP_KEY_SYNTH);
    ck_assert_str_eq(g.axes[1].synth_key, "rate");
    ck_assert_str_eq(g.axes[2].synth_key, "n");
    ck_assert_int_eq(g.n_points, 8);
    sweep_grid_free(&g);

    /* '|' separates values that hold commas */
    sweep_grid_init(&g);
    const struct option o2[] = {{"synthetic", required_argument, 0, 9}, {0, 0, 0, 0}};
    ck_assert_int_eq(sweep_grid_add(&g, o2, "synthetic=rate=1,n=5|rate=2,n=5", "--grid", &err),
                     KVS_OK);
    ck_assert_int_eq(g.axes[0].n_values, 2);
    ck_assert_str_eq(g.axes[0].values[1], "rate=2,n=5");
    char *t = sweep_grid_text(&g);
    ck_assert_str_eq(t, "synthetic=rate=1,n=5|rate=2,n=5\n");
    free(t);
    sweep_grid_free(&g);
}
END_TEST

static const struct {
    const char *text, *msg;
} bad_axes[] = {
    {"max-seqs", "--grid: 'max-seqs' is not flag=v1,v2,..."},
    {"=1,2", "missing or overlong option name"},
    {"nosuch=1", "--grid: unknown option 'nosuch'"},
    {"db=a.db,b.db", "--grid: 'db' cannot vary in a grid"},
    {"label=x", "'label' cannot vary"},
    {"max-seqs=", "--grid: max-seqs: no values"},
    {"max-seqs=1,,2", "max-seqs: empty value"},
    {"max-seqs=1,2,", "max-seqs: empty value"},
    {"max-seqs=1,2,1", "max-seqs: value '1' given twice"},
    {"priority-preemption=yes", "value 'yes' is not on or off"},
    {"synthetic.Bad=1", "'Bad' is not a synthetic spec key"},
    {"synthetic.=1", "'' is not a synthetic spec key"},
    {"max-seqs=1#2", "may not hold '#'"},
};

START_TEST(test_grid_errors)
{
    sweep_grid g;
    sweep_grid_init(&g);
    kvs_err err = {{0}};
    ck_assert_int_eq(sweep_grid_add(&g, opts, bad_axes[_i].text, "--grid", &err), KVS_EINVAL);
    ck_assert_msg(strstr(err.msg, bad_axes[_i].msg), "%s: got '%s'", bad_axes[_i].text, err.msg);
    ck_assert_int_eq(g.n_axes, 0);
    sweep_grid_free(&g);
}
END_TEST

START_TEST(test_grid_limits)
{
    sweep_grid g;
    sweep_grid_init(&g);
    kvs_err err = {{0}};
    add_ok(&g, "max-seqs=1");
    ck_assert_int_eq(sweep_grid_add(&g, opts, "max-seqs=2", "f:3", &err), KVS_EINVAL);
    ck_assert_str_eq(err.msg, "f:3: 'max-seqs' already varied at --grid");
    sweep_grid_free(&g);
    /* 10^3 * 10^3 points is the limit; a third axis of two values is not */
    sweep_grid_init(&g);
    char big[8192];
    for (int axis = 0; axis < 2; axis++) {
        size_t len = (size_t)sprintf(big, "%s=0", axis ? "max-seqs" : "seed");
        for (int i = 1; i < 1000; i++)
            len += (size_t)sprintf(big + len, ",%d", i);
        add_ok(&g, big);
    }
    ck_assert_int_eq(g.n_points, 1000000);
    ck_assert_int_eq(sweep_grid_add(&g, opts, "batching=a,b", "--grid", &err), KVS_EINVAL);
    ck_assert_msg(strstr(err.msg, "more than 1000000 points"), "%s", err.msg);
    sweep_grid_free(&g);
}
END_TEST

START_TEST(test_grid_file)
{
    const char *dir = tu_tmpdir();
    char *ok = tu_write_file(dir, "ok.grid",
                             "# comment\n\n  max-seqs = 8,16 \n"); /* blanks around '=' stay */
    char *good = tu_write_file(dir, "good.grid",
                               "# the batching modes\n\nbatching=static,continuous  # two\n"
                               "   max-seqs=8,16\n");
    char *bad = tu_write_file(dir, "bad.grid", "max-seqs=8\n# fine\n\nnosuch=1\n");
    sweep_grid g;
    sweep_grid_init(&g);
    kvs_err err = {{0}};
    ck_assert_int_eq(sweep_grid_read_file(&g, opts, good, &err), KVS_OK);
    ck_assert_int_eq(g.n_axes, 2);
    ck_assert_int_eq(g.n_points, 4);
    char want[1200];
    snprintf(want, sizeof want, "%s:3", good);
    ck_assert_str_eq(g.axes[0].where, want);
    sweep_grid_free(&g);

    sweep_grid_init(&g);
    ck_assert_int_eq(sweep_grid_read_file(&g, opts, bad, &err), KVS_EINVAL);
    snprintf(want, sizeof want, "%s:4: unknown option 'nosuch'", bad);
    ck_assert_msg(!strncmp(err.msg, want, strlen(want)), "%s", err.msg);
    sweep_grid_free(&g);

    /* "max-seqs " is not a flag name: the name is what precedes '=' */
    sweep_grid_init(&g);
    ck_assert_int_eq(sweep_grid_read_file(&g, opts, ok, &err), KVS_EINVAL);
    ck_assert_msg(strstr(err.msg, ":3: unknown option 'max-seqs '"), "%s", err.msg);
    sweep_grid_free(&g);

    sweep_grid_init(&g);
    char missing[1100];
    snprintf(missing, sizeof missing, "%s/none.grid", dir);
    ck_assert_int_eq(sweep_grid_read_file(&g, opts, missing, &err), KVS_EIO);
    ck_assert_msg(strstr(err.msg, "none.grid: No such file"), "%s", err.msg);
    sweep_grid_free(&g);
    free(ok);
    free(good);
    free(bad);
}
END_TEST

START_TEST(test_spec_set)
{
    char spec[64] = "arrival=poisson,rate=8,n=10";
    kvs_err err;
    ck_assert_int_eq(sweep_spec_set(spec, sizeof spec, "rate", "12.5", &err), KVS_OK);
    ck_assert_str_eq(spec, "arrival=poisson,rate=12.5,n=10");
    ck_assert_int_eq(sweep_spec_set(spec, sizeof spec, "cv", "2", &err), KVS_OK);
    ck_assert_str_eq(spec, "arrival=poisson,rate=12.5,n=10,cv=2");
    /* a key that is a prefix of another is not that key */
    char s2[64] = "rates=1,n=2";
    ck_assert_int_eq(sweep_spec_set(s2, sizeof s2, "rate", "3", &err), KVS_OK);
    ck_assert_str_eq(s2, "rates=1,n=2,rate=3");
    char s3[16] = "n=10,rate=1";
    ck_assert_int_eq(sweep_spec_set(s3, sizeof s3, "rate", "123456789", &err), KVS_EINVAL);
    ck_assert_str_eq(s3, "n=10,rate=1"); /* unchanged on error */
    char s4[32] = "n=10,junk";
    ck_assert_int_eq(sweep_spec_set(s4, sizeof s4, "rate", "1", &err), KVS_EINVAL);
    ck_assert_msg(strstr(err.msg, "'junk' is not key=value"), "%s", err.msg);
}
END_TEST

/* ------------------------------------------------------------ SLOs */

static run_summary summary(double ttft_p99, double tpot_p99, double tok_s)
{
    run_summary s;
    memset(&s, 0, sizeof s);
    s.ttft.p99 = ttft_p99;
    s.tpot.p99 = tpot_p99;
    s.throughput_tok_s = tok_s;
    s.slo_attainment = NAN;
    s.goodput_req_s = NAN;
    return s;
}

START_TEST(test_slo_check)
{
    cap_slo slo;
    kvs_err err;
    ck_assert_int_eq(cap_slo_parse("ttft_p99=2,tpot_p99=0.1,throughput=1000", &slo, &err),
                     KVS_OK);
    ck_assert_int_eq(slo.n, 3);
    ck_assert(slo.b[2].is_min && !slo.b[0].is_min);
    char v[256];
    double ratio;
    /* 2.5 / 2 = 1.25 is the worst of 1.25, 0.05/0.1 = 0.5, 1000/1200 */
    run_summary s = summary(2.5, 0.05, 1200);
    ck_assert_int_eq(cap_slo_check(&slo, &s, &ratio, v, sizeof v), 0);
    ck_assert_double_eq_tol(ratio, 1.25, 1e-12);
    ck_assert_str_eq(v, "ttft_p99 2.5 > 2");
    /* all hold: worst is 1000/1200 */
    s = summary(1.0, 0.05, 1200);
    ck_assert_int_eq(cap_slo_check(&slo, &s, &ratio, v, sizeof v), 1);
    ck_assert_double_eq_tol(ratio, 1000.0 / 1200.0, 1e-12);
    ck_assert_str_eq(v, "ok");
    /* a lower bound: 1000 / 800 = 1.25 */
    s = summary(1.0, 0.05, 800);
    ck_assert_int_eq(cap_slo_check(&slo, &s, &ratio, v, sizeof v), 0);
    ck_assert_str_eq(v, "throughput 800 < 1000");
    /* exactly at the limit holds */
    s = summary(2.0, 0.1, 1000);
    ck_assert_int_eq(cap_slo_check(&slo, &s, &ratio, v, sizeof v), 1);
    /* no finished request: no value, infinitely far */
    s = summary(NAN, NAN, 0);
    ck_assert_int_eq(cap_slo_check(&slo, &s, &ratio, v, sizeof v), 0);
    ck_assert(isinf(ratio));
    ck_assert_str_eq(v, "ttft_p99 has no value (no request finished)");

    ck_assert_int_eq(cap_slo_parse("ttft=0.5,tpot=0.05,attainment=0.9,e2e_mean=3", &slo, &err),
                     KVS_OK);
    ck_assert_double_eq(slo.req_ttft_s, 0.5);
    ck_assert_double_eq(slo.req_tpot_s, 0.05);
    ck_assert_int_eq(slo.n, 2);
    s = summary(0, 0, 0);
    s.slo_attainment = 0.85;
    s.e2e.mean = 1;
    ck_assert_int_eq(cap_slo_check(&slo, &s, &ratio, v, sizeof v), 0);
    ck_assert_str_eq(v, "attainment 0.85 < 0.9");

    /* rejections: 20 of 200 (10%) rejected fail a run whose bounds hold,
     * unless max_rejected allows them; ratio 1 + (0.10 - 0) */
    ck_assert_int_eq(cap_slo_parse("ttft_p99=2", &slo, &err), KVS_OK);
    ck_assert_double_eq(slo.max_rejected, 0.0);
    s = summary(1.0, 0.05, 1200);
    s.n_requests = 200;
    s.n_rejected = 20;
    s.n_reject_context = 15;
    s.n_reject_kv = 5;
    ck_assert_int_eq(cap_slo_check(&slo, &s, &ratio, v, sizeof v), 0);
    ck_assert_double_eq_tol(ratio, 1.10, 1e-12);
    ck_assert_str_eq(v, "rejected 10% of requests (max 0%): 15 over max-model-len, 0 over "
                        "max-batched-tokens, 5 over the KV cache");
    slo.max_rejected = 0.1; /* exactly at the share holds */
    ck_assert_int_eq(cap_slo_check(&slo, &s, &ratio, v, sizeof v), 1);
    ck_assert_str_eq(v, "ok");
    slo.max_rejected = 0.05; /* a bound worse than the rejections wins the ratio */
    s.ttft.p99 = 3.0;
    ck_assert_int_eq(cap_slo_check(&slo, &s, &ratio, v, sizeof v), 0);
    ck_assert_double_eq_tol(ratio, 1.5, 1e-12);
    ck_assert(!strncmp(v, "rejected 10% of requests (max 5%)", 33));
}
END_TEST

static const struct {
    const char *text, *msg;
} bad_slos[] = {
    {"", "--slo: empty"},
    {"foo=1", "--slo: unknown metric 'foo'"},
    {"ttft_p98=1", "unknown metric 'ttft_p98'"},
    {"ttft_p99", "'ttft_p99' is not metric=limit"},
    {"ttft_p99=-1", "ttft_p99: '-1' is not a positive number"},
    {"ttft_p99=x", "'x' is not a positive number"},
    {"ttft_p99=1,ttft_p99=2", "ttft_p99 given twice"},
    {"throughput=1,throughput_tok_s=2", "throughput_tok_s given twice"},
    {"attainment=0.9", "measured against per-request targets"},
    {"ttft=1", "need a bound on attainment or goodput_req_s"},
    {"ttft=1,attainment=1.5", "attainment: 1.5 is not a fraction"},
};

START_TEST(test_slo_errors)
{
    cap_slo slo;
    kvs_err err = {{0}};
    ck_assert_int_eq(cap_slo_parse(bad_slos[_i].text, &slo, &err), KVS_EINVAL);
    ck_assert_msg(strstr(err.msg, bad_slos[_i].msg), "%s: got '%s'", bad_slos[_i].text, err.msg);
}
END_TEST

/* ------------------------------------------------------------ searches */

/* A probe model: the SLO holds iff x <= T (rates) or x >= T (TP degrees);
 * the ratio is x / T (or T / x).  Records every x probed. */
typedef struct model {
    double T;
    int tp;          /* holds iff x >= T */
    double xs[64];
    int n;
    int fail_at;     /* return an error on this call (1-based), 0 = never */
} model;

static int model_probe(void *ctx, double x, cap_probe *out)
{
    model *m = ctx;
    ck_assert_int_lt(m->n, 64);
    m->xs[m->n++] = x;
    if (m->fail_at && m->n == m->fail_at)
        return 7;
    out->holds = m->tp ? x >= m->T : x <= m->T;
    out->ratio = m->tp ? m->T / x : x / m->T;
    out->run_id = m->n;
    snprintf(out->verdict, sizeof out->verdict, "%s", out->holds ? "ok" : "no");
    return 0;
}

START_TEST(test_rate_search_by_hand)
{
    /* T = 13.7 from 10: 10 holds, 20 fails; then sqrt(10*20) = 14.1421
     * (fails), sqrt(10*14.1421) = 11.8921, sqrt(11.8921*14.1421) = 12.9684,
     * sqrt(12.9684*14.1421) = 13.5425 (all hold, 6 digits each);
     * 14.1421 / 13.5425 = 1.0443 <= 1.05 stops. */
    model m = {13.7, 0, {0}, 0, 0};
    cap_result r;
    ck_assert_int_eq(cap_search_rate(10, 1.05, 16, model_probe, &m, &r), 0);
    const double want[] = {10, 20, 14.1421, 11.8921, 12.9684, 13.5425};
    ck_assert_int_eq(m.n, 6);
    ck_assert_int_eq(r.probes, 6);
    for (int i = 0; i < 6; i++)
        ck_assert_double_eq(m.xs[i], want[i]);
    ck_assert_int_eq(r.status, CAP_STATUS_BRACKETED);
    ck_assert_double_eq(r.lo.x, 13.5425);
    ck_assert_double_eq(r.hi.x, 14.1421);
    ck_assert_int_eq(r.lo.run_id, 6);
    ck_assert_int_eq(r.hi.run_id, 3);
    /* from above: 100, 50, 25 fail, 12.5 holds, then bisection */
    model m2 = {13.7, 0, {0}, 0, 0};
    ck_assert_int_eq(cap_search_rate(100, 1.05, 16, model_probe, &m2, &r), 0);
    ck_assert_double_eq(m2.xs[3], 12.5);
    ck_assert_int_eq(r.status, CAP_STATUS_BRACKETED);
    ck_assert(r.lo.x <= 13.7 && r.hi.x > 13.7 && r.hi.x / r.lo.x <= 1.05);
}
END_TEST

START_TEST(test_rate_search_invariants)
{
    const double Ts[] = {0.37, 3, 9.99, 10, 10.01, 99, 1000, 12345};
    const double x0s[] = {10, 0.5, 777};
    for (size_t i = 0; i < sizeof Ts / sizeof Ts[0]; i++)
        for (size_t j = 0; j < sizeof x0s / sizeof x0s[0]; j++) {
            model m = {Ts[i], 0, {0}, 0, 0};
            cap_result r;
            ck_assert_int_eq(cap_search_rate(x0s[j], 1.05, 16, model_probe, &m, &r), 0);
            ck_assert_int_eq(r.status, CAP_STATUS_BRACKETED);
            ck_assert_msg(r.lo.x <= Ts[i] && r.hi.x > Ts[i], "T %g: [%g, %g]", Ts[i], r.lo.x,
                          r.hi.x);
            ck_assert(r.lo.holds && !r.hi.holds);
            ck_assert_double_le(r.hi.x / r.lo.x, 1.05);
            ck_assert_int_eq(r.probes, m.n);
            ck_assert_int_le(m.n, 16 + 1 + 8); /* the rounding bound: bisection takes ~4 */
        }
}
END_TEST

START_TEST(test_rate_search_edges)
{
    /* unreachable: 10 and 16 halvings (down to 10/65536) all fail */
    model m = {1e-9, 0, {0}, 0, 0};
    cap_result r;
    ck_assert_int_eq(cap_search_rate(10, 1.05, 16, model_probe, &m, &r), 0);
    ck_assert_int_eq(r.status, CAP_STATUS_UNREACHABLE);
    ck_assert_int_eq(r.probes, 17);
    ck_assert(!r.have_lo && r.have_hi);
    ck_assert_double_eq(r.hi.x, m.xs[16]); /* halved and rounded 16 times */
    ck_assert_double_eq_tol(r.hi.x, 10.0 / 65536, 1e-9);
    ck_assert_double_eq(r.best.x, r.hi.x); /* smallest x / T */
    /* unbounded: 10 and 16 doublings all hold */
    model m2 = {1e9, 0, {0}, 0, 0};
    ck_assert_int_eq(cap_search_rate(10, 1.05, 16, model_probe, &m2, &r), 0);
    ck_assert_int_eq(r.status, CAP_STATUS_UNBOUNDED);
    ck_assert_int_eq(r.probes, 17);
    ck_assert_double_eq(r.lo.x, 655360);
    /* a probe error ends the search with that error */
    model m3 = {13.7, 0, {0}, 0, 3};
    ck_assert_int_eq(cap_search_rate(10, 1.05, 16, model_probe, &m3, &r), 7);
    ck_assert_int_eq(m3.n, 3);
}
END_TEST

START_TEST(test_list_search)
{
    const double tps[] = {1, 2, 4, 8};
    model m = {4, 1, {0}, 0, 0};
    cap_result r;
    ck_assert_int_eq(cap_search_list(tps, 4, model_probe, &m, &r), 0);
    ck_assert_int_eq(r.status, CAP_STATUS_FOUND);
    ck_assert_int_eq(r.probes, 3);
    ck_assert_double_eq(r.lo.x, 4);
    ck_assert_double_eq(r.hi.x, 2);
    model m2 = {16, 1, {0}, 0, 0};
    ck_assert_int_eq(cap_search_list(tps, 4, model_probe, &m2, &r), 0);
    ck_assert_int_eq(r.status, CAP_STATUS_UNREACHABLE);
    ck_assert_int_eq(r.probes, 4);
    ck_assert_double_eq(r.best.x, 8); /* 16/8 is the closest */
    ck_assert_str_eq(cap_status_name(r.status), "unreachable");
}
END_TEST

/* ------------------------------------------------------------ MPI buffer */

/* A small real run: llama-2-7b on a100-80g, roofline, steps recorded. */
static void small_run(run_config *cfg, trace *tr, run_result *res, const char *spec,
                      int record)
{
    kvs_err err = {{0}};
    model_spec m;
    gpu_spec g;
    trace_synth_spec ss;
    cost_model cost = {0};
    run_config_defaults(cfg);
    strcpy(cfg->model, "llama-2-7b");
    strcpy(cfg->synthetic, spec);
    cfg->record_steps = record;
    cfg->seed = 11;
    ck_assert_int_eq(model_lookup(cfg->model, &m, &err), 0);
    ck_assert_int_eq(gpu_lookup(cfg->gpu, &g, &err), 0);
    ck_assert_msg(trace_synth_parse(spec, &ss, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(trace_synth_gen(&ss, spec, cfg->seed, tr, &err), 0);
    ck_assert_msg(run_config_resolve(cfg, &m, &g, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(cost_model_create(cfg->cost, &m, &g, cfg->tp, &cost, &err), 0);
    ck_assert_msg(run_execute(cfg, tr, &cost, res, &err) == 0, "%s", err.msg);
    cost_model_free(&cost);
}

/* 100,000 values on one axis (the parser is linear: the values grow
 * geometrically and duplicates are found on a sorted copy): every value
 * kept in order; the same list with its last value repeating the 50,000th
 * is refused naming that value. */
START_TEST(test_grid_many_values)
{
    enum { N = 100000 };
    char *text = malloc((size_t)N * 8 + 32);
    ck_assert_ptr_nonnull(text);
    size_t len = (size_t)sprintf(text, "seed=");
    for (int i = 0; i < N; i++)
        len += (size_t)sprintf(text + len, "%s%d", i ? "," : "", i);
    sweep_grid g;
    sweep_grid_init(&g);
    add_ok(&g, text);
    ck_assert_int_eq(g.axes[0].n_values, N);
    ck_assert_int_eq(g.n_points, N);
    ck_assert_str_eq(g.axes[0].values[0], "0");
    ck_assert_str_eq(g.axes[0].values[N - 1], "99999");
    sweep_grid_free(&g);
    sprintf(text + len, ",49999");
    kvs_err err = {{0}};
    sweep_grid_init(&g);
    ck_assert_int_eq(sweep_grid_add(&g, opts, text, "--grid", &err), KVS_EINVAL);
    ck_assert_str_eq(err.msg, "--grid: seed: value '49999' given twice");
    sweep_grid_free(&g);
    free(text);
}
END_TEST

START_TEST(test_pack_round_trip)
{
    run_packed p;
    memset(&p, 0, sizeof p);
    small_run(&p.cfg, &p.tr, &p.res, "arrival=poisson,rate=20,n=60,prompt=uniform:8:300,"
                                     "output=uniform:1:40,priorities=0:0.5/3:0.5", 1);
    p.point_index = 41;
    ck_assert_int_gt(p.res.n_steps, 0);
    ck_assert_ptr_nonnull(p.res.steps);
    unsigned char *buf = NULL;
    size_t len = 0;
    kvs_err err = {{0}};
    ck_assert_int_eq(run_pack(&p, &buf, &len, &err), KVS_OK);
    run_packed u;
    ck_assert_msg(run_unpack(buf, len, &u, &err) == KVS_OK, "%s", err.msg);
    ck_assert_int_eq(u.point_index, 41);
    ck_assert_int_eq(u.status, 0);
    ck_assert(!memcmp(&u.cfg, &p.cfg, sizeof u.cfg));
    ck_assert_int_eq(u.tr.n, 60);
    ck_assert(!memcmp(u.tr.reqs, p.tr.reqs, 60 * sizeof(trace_req)));
    ck_assert_int_eq(u.tr.has_priority, 1);
    ck_assert_str_eq(u.tr.source, p.tr.source);
    ck_assert(!memcmp(u.res.reqs, p.res.reqs, 60 * sizeof(sched_req_result)));
    ck_assert(!memcmp(&u.res.sum, &p.res.sum, sizeof u.res.sum));
    ck_assert_int_eq(u.res.n_steps, p.res.n_steps);
    ck_assert_int_eq(u.res.n_members, p.res.n_members);
    ck_assert_ptr_null(u.res.swaps); /* a run that could not swap carries no swaps */
    ck_assert(!memcmp(u.res.steps, p.res.steps, (size_t)p.res.n_steps * sizeof(run_step_rec)));
    ck_assert(!memcmp(u.res.members, p.res.members,
                      (size_t)p.res.n_members * sizeof(sched_member)));
    ck_assert_str_eq(u.res.started_at, p.res.started_at);
    ck_assert_double_eq(u.res.wall_s, p.res.wall_s);
    ck_assert_ptr_eq(u.res.tr, &u.tr);
    run_packed_free(&u);
    /* a run that could swap carries its swaps, apart from the results */
    p.res.swaps = calloc(60, sizeof *p.res.swaps);
    ck_assert_ptr_nonnull(p.res.swaps);
    p.res.swaps[7] = (sched_req_swap){2.5, 3};
    p.res.swaps[59] = (sched_req_swap){0.125, 1};
    unsigned char *sbuf = NULL;
    size_t slen = 0;
    ck_assert_int_eq(run_pack(&p, &sbuf, &slen, &err), KVS_OK);
    ck_assert_int_eq(slen, len + 60 * sizeof(sched_req_swap));
    ck_assert_msg(run_unpack(sbuf, slen, &u, &err) == KVS_OK, "%s", err.msg);
    ck_assert_ptr_nonnull(u.res.swaps);
    ck_assert(!memcmp(u.res.swaps, p.res.swaps, 60 * sizeof(sched_req_swap)));
    run_packed_free(&u);
    free(sbuf);
    free(p.res.swaps);
    p.res.swaps = NULL;

    /* every truncation, a trailing byte and a foreign header are refused */
    for (size_t cut = 0; cut < len; cut += 1 + cut / 7) {
        ck_assert_int_eq(run_unpack(buf, cut, &u, &err), KVS_EINVAL);
        ck_assert_ptr_null(u.tr.reqs);
    }
    unsigned char *longer = malloc(len + 1);
    memcpy(longer, buf, len);
    longer[len] = 0;
    ck_assert_int_eq(run_unpack(longer, len + 1, &u, &err), KVS_EINVAL);
    longer[0] = 'X';
    ck_assert_int_eq(run_unpack(longer, len, &u, &err), KVS_EINVAL);
    ck_assert_msg(strstr(err.msg, "not a run buffer of this kvsim build"), "%s", err.msg);
    free(longer);
    free(buf);

    /* a failed run travels without a result */
    run_result_free(&p.res);
    p.status = 1;
    strcpy(p.error, "step 3: the engine is stuck");
    ck_assert_int_eq(run_pack(&p, &buf, &len, &err), KVS_OK);
    ck_assert_int_eq(run_unpack(buf, len, &u, &err), KVS_OK);
    ck_assert_int_eq(u.status, 1);
    ck_assert_str_eq(u.error, "step 3: the engine is stuck");
    ck_assert_ptr_null(u.res.reqs);
    ck_assert_int_eq(u.tr.n, 60);
    run_packed_free(&u);
    free(buf);
    trace_free(&p.tr);
}
END_TEST

/* ------------------------------------------------------------ store */

static char *q_text(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st = NULL;
    ck_assert_msg(sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK, "%s: %s", sql,
                  sqlite3_errmsg(db));
    int rc = sqlite3_step(st);
    ck_assert_msg(rc == SQLITE_ROW || rc == SQLITE_DONE, "%s: %s", sql, sqlite3_errmsg(db));
    const char *v = rc == SQLITE_DONE ? "<none>"
                    : sqlite3_column_type(st, 0) == SQLITE_NULL
                        ? "NULL"
                        : (const char *)sqlite3_column_text(st, 0);
    char *out = strdup(v);
    sqlite3_finalize(st);
    return out;
}

static void q_eq(sqlite3 *db, const char *sql, const char *want)
{
    char *got = q_text(db, sql);
    ck_assert_msg(!strcmp(got, want), "%s: got '%s', want '%s'", sql, got, want);
    free(got);
}

static const char *grid_value(void *ctx, int64_t point, int i)
{
    static char buf[32];
    (void)ctx;
    snprintf(buf, sizeof buf, "%c%lld", i ? 'b' : 'a', (long long)point);
    return buf;
}

static int key_check(void *ctx, int64_t point, const char *key)
{
    (void)ctx;
    char want[32];
    snprintf(want, sizeof want, "k%lld", (long long)point);
    return strcmp(want, key);
}

START_TEST(test_store_sweeps)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/sweeps.db", tu_tmpdir());
    store *s = NULL;
    kvs_err err = {{0}};
    ck_assert_int_eq(store_open(path, &s, &err), KVS_OK);
    sqlite3 *db = store_db(s);
    const char *params[] = {"alpha", "beta"};
    store_sweep_def def = {"grid", "alpha=...\n", "--model\nx\n", 3, 2, params, grid_value, NULL, 0, NULL, NULL, NULL};
    int64_t id = 0;
    ck_assert_msg(store_sweep_create(s, &def, &id, &err) == KVS_OK, "%s", err.msg);
    ck_assert_int_eq(id, 1);
    q_eq(db, "SELECT kind || '|' || n_points || '|' || base_args FROM sweeps", "grid|3|--model\nx\n");
    q_eq(db, "SELECT group_concat(point_index || param || value, ' ') FROM "
             "(SELECT * FROM sweep_point_params ORDER BY point_index, param)",
         "0alphaa0 0betab0 1alphaa1 1betab1 2alphaa2 2betab2");

    run_config cfg;
    trace tr;
    run_result res;
    small_run(&cfg, &tr, &res, "rate=10,n=30,prompt=64,output=8", 0);
    cfg.sweep_id = id;
    int64_t run1 = 0, run2 = 0;
    /* tagged: the point row comes with the run */
    ck_assert_int_eq(store_sweep_tag(s, id, 1, "k1", &err), KVS_OK);
    ck_assert_msg(store_write_run(s, &cfg, &res, &run1, &err) == KVS_OK, "%s", err.msg);
    q_eq(db, "SELECT point_index || point_key || '=' || run_id FROM sweep_points", "1k1=1");
    /* a second run for the same point fails whole: no run, no row */
    ck_assert_int_eq(store_write_run(s, &cfg, &res, &run2, &err), KVS_EDB);
    ck_assert_msg(strstr(err.msg, "UNIQUE"), "%s", err.msg);
    q_eq(db, "SELECT count(*) FROM runs", "1");
    /* tagged, but a run of another (or no) sweep is not the point */
    cfg.sweep_id = 0;
    ck_assert_int_eq(store_sweep_tag(s, id, 2, "k2", &err), KVS_OK);
    ck_assert_int_eq(store_write_run(s, &cfg, &res, &run2, &err), KVS_OK);
    q_eq(db, "SELECT count(*) FROM sweep_points", "1");
    /* untagged: a sweep run without a point */
    store_sweep_untag(s);
    cfg.sweep_id = id;
    ck_assert_int_eq(store_write_run(s, &cfg, &res, &run2, &err), KVS_OK);
    q_eq(db, "SELECT count(*) FROM sweep_points", "1");
    /* a failed run tagged as point 0 is that point's run */
    ck_assert_int_eq(store_sweep_tag(s, id, 0, "k0", &err), KVS_OK);
    int64_t run3 = 0;
    ck_assert_int_eq(store_write_failed_run(s, &cfg, &tr, "boom", res.started_at, 0.1, &run3, &err),
                     KVS_OK);
    store_sweep_untag(s);
    q_eq(db, "SELECT group_concat(point_index || ':' || status, ' ') FROM "
             "(SELECT * FROM sweep_runs ORDER BY point_index)",
         "0:failed 1:finished");
    q_eq(db, "SELECT group_concat(param || '=' || value, ' ') FROM sweep_params WHERE run_id = 1",
         "alpha=a1 beta=b1");

    int64_t ids[3];
    ck_assert_int_eq(store_sweep_done(s, id, 3, ids, key_check, NULL, &err), KVS_OK);
    ck_assert_int_eq(ids[0], run3);
    ck_assert_int_eq(ids[1], run1);
    ck_assert_int_eq(ids[2], 0);
    /* a stored key that is not the grid's point fails */
    sqlite3_exec(db, "UPDATE sweep_points SET point_key = 'other' WHERE point_index = 1", NULL,
                 NULL, NULL);
    ck_assert_int_eq(store_sweep_done(s, id, 3, ids, key_check, NULL, &err), KVS_EDB);
    ck_assert_msg(strstr(err.msg, "point 1 is stored as 'other'"), "%s", err.msg);
    /* a point beyond the grid fails */
    ck_assert_int_eq(store_sweep_done(s, id, 1, ids, NULL, NULL, &err), KVS_EDB);

    store_sweep_info info;
    ck_assert_int_eq(store_sweep_get(s, id, &info, &err), KVS_OK);
    ck_assert_str_eq(info.kind, "grid");
    ck_assert_str_eq(info.grid, "alpha=...\n");
    ck_assert_int_eq(info.n_points, 3);
    store_sweep_info_free(&info);
    ck_assert_int_eq(store_sweep_get(s, 99, &info, &err), KVS_EINVAL);
    ck_assert_msg(strstr(err.msg, "no sweep 99"), "%s", err.msg);

    /* deleting a run removes its point (and only that) */
    sqlite3_exec(db, "DELETE FROM runs WHERE run_id = 1", NULL, NULL, NULL);
    q_eq(db, "SELECT count(*) FROM sweep_points", "1");

    /* search rows */
    ck_assert_int_eq(store_search_probe(s, id, 5, run2, "fcfs", "rate", 12.5, 1, "ok", &err),
                     KVS_OK);
    store_search_row row = {"fcfs", "rate", "ttft_p99=1", "bracketed", 12.5, 13, run2, 0, 0, 4};
    ck_assert_int_eq(store_search_result(s, id, &row, &err), KVS_OK);
    q_eq(db, "SELECT lo || '|' || coalesce(hi, 'NULL') || '|' || probes FROM search_results",
         "12.5|NULL|4");
    run_result_free(&res);
    trace_free(&tr);
    store_close(s);
}
END_TEST

/* The slo_attainment view recomputes the simulator's attainment from the
 * stored requests; policy_at_load groups runs of one workload and load. */
START_TEST(test_store_views)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/views.db", tu_tmpdir());
    store *s = NULL;
    kvs_err err = {{0}};
    ck_assert_int_eq(store_open(path, &s, &err), KVS_OK);
    sqlite3 *db = store_db(s);
    const char *spec = "rate=40,n=200,prompt=uniform:16:800,output=uniform:1:200";
    int64_t ids[3];
    for (int i = 0; i < 3; i++) {
        run_config cfg;
        trace tr;
        run_result res;
        small_run(&cfg, &tr, &res, spec, 0);
        (void)i;
        /* the SLOs change attainment only: set them after the run, then
         * recompute the metrics as the simulator does */
        cfg.slo_ttft_s = i == 2 ? 0 : 0.6;
        cfg.slo_tpot_s = i == 2 ? 0 : 0.1;
        cfg.sched.policy = i == 1 ? SCHED_POLICY_PRIORITY : SCHED_POLICY_FCFS;
        run_metrics_compute(&cfg, &tr, res.reqs, &res.sum);
        ck_assert_int_eq(store_write_run(s, &cfg, &res, &ids[i], &err), KVS_OK);
        run_result_free(&res);
        trace_free(&tr);
    }
    char *att = q_text(db, "SELECT slo_attainment FROM runs WHERE run_id = 1");
    double a = atof(att);
    free(att);
    ck_assert(a > 0 && a < 1); /* the SLO bites on some requests, not all */
    q_eq(db, "SELECT count(*) FROM slo_attainment", "2"); /* run 3 has no SLO */
    q_eq(db, "SELECT abs(attainment - (SELECT avg(ttft_s <= 0.6 AND (tpot_s IS NULL OR "
             "tpot_s <= 0.1)) FROM requests_metrics WHERE run_id = 1 AND status = 'finished')) "
             "< 1e-12 FROM slo_attainment WHERE run_id = 1",
         "1");
    q_eq(db, "SELECT ttft_attainment >= attainment AND tpot_attainment >= attainment "
             "AND e2e_attainment IS NULL FROM slo_attainment WHERE run_id = 1",
         "1");
    q_eq(db, "SELECT group_concat(runs_at_load || policy, ' ') FROM "
             "(SELECT * FROM policy_at_load ORDER BY run_id)",
         "3fcfs 3priority 3fcfs");
    q_eq(db, "SELECT count(*) FROM run_load WHERE n_requests = 200 AND offered_req_s > 0", "3");
    store_close(s);
    /* a read-only handle reads the views without writing */
    char uri[1300];
    snprintf(uri, sizeof uri, "file:%s?mode=ro", path);
    ck_assert_int_eq(store_open(uri, &s, &err), KVS_OK);
    store_close(s);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("sweep");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_grid_order);
    tcase_add_test(tc, test_grid_matches_nested_loops);
    tcase_add_test(tc, test_grid_values);
    tcase_add_loop_test(tc, test_grid_errors, 0, (int)(sizeof bad_axes / sizeof bad_axes[0]));
    tcase_add_test(tc, test_grid_limits);
    tcase_add_test(tc, test_grid_file);
    tcase_add_test(tc, test_spec_set);
    tcase_add_test(tc, test_slo_check);
    tcase_add_loop_test(tc, test_slo_errors, 0, (int)(sizeof bad_slos / sizeof bad_slos[0]));
    tcase_add_test(tc, test_rate_search_by_hand);
    tcase_add_test(tc, test_rate_search_invariants);
    tcase_add_test(tc, test_rate_search_edges);
    tcase_add_test(tc, test_list_search);
    tcase_add_test(tc, test_grid_many_values);
    tcase_add_test(tc, test_pack_round_trip);
    tcase_add_test(tc, test_store_sweeps);
    tcase_add_test(tc, test_store_views);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    Suite *s = suite();
    return tu_run_suites(&s, 1);
}
