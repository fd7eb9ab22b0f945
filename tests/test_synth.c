/* test_synth.c — synthetic traces: spec parsing, determinism, and the
 * statistics of what is generated (arrival processes, lengths, priority
 * classes), each checked against a tolerance derived from its sampling
 * distribution.  The seeds are fixed, so each check is deterministic; the
 * tolerances are 4-7 standard deviations so that any correct generator with
 * any seed would pass, while a wrong mean, scale or shape would not. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "traces/trace.h"

#define LENGTHS "traces/lengths_sharegpt_8k_llama2tok.csv"

static void gen(const char *text, uint64_t seed, trace *t)
{
    trace_synth_spec s;
    kvs_err err;
    ck_assert_msg(trace_synth_parse(text, &s, &err) == KVS_OK, "%s", err.msg);
    ck_assert_msg(trace_synth_gen(&s, text, seed, t, &err) == KVS_OK, "%s", err.msg);
}

/* ------------------------------------------------------------- parsing */

START_TEST(test_parse_ok)
{
    trace_synth_spec s;
    kvs_err err;
    ck_assert_int_eq(trace_synth_parse("arrival=gamma,rate=8,cv=2,n=1000,prompt=uniform:10:20,"
                                       "output=5,priorities=0:0.8/1:0.2",
                                       &s, &err),
                     KVS_OK);
    ck_assert_int_eq(s.arrival, TRACE_ARRIVAL_GAMMA);
    ck_assert(s.rate == 8 && s.cv == 2);
    ck_assert_int_eq(s.n, 1000);
    ck_assert_int_eq(s.prompt_kind, TRACE_LEN_UNIFORM);
    ck_assert(s.prompt_a == 10 && s.prompt_b == 20);
    ck_assert_int_eq(s.output_kind, TRACE_LEN_FIXED);
    ck_assert(s.output_a == 5 && s.output_b == 5);
    ck_assert_int_eq(s.n_classes, 2);
    ck_assert(s.class_priority[0] == 0 && s.class_share[0] == 0.8);
    ck_assert(s.class_priority[1] == 1 && s.class_share[1] == 0.2);

    ck_assert_int_eq(trace_synth_parse("n=3,arrival=burst,lengths=" LENGTHS, &s, &err), KVS_OK);
    ck_assert_int_eq(s.arrival, TRACE_ARRIVAL_BURST);
    ck_assert(s.prompt_kind == TRACE_LEN_FILE && s.output_kind == TRACE_LEN_FILE);
    ck_assert_str_eq(s.lengths_path, LENGTHS);
    ck_assert_int_eq(s.n_classes, 0);

    /* arrival defaults to poisson. */
    ck_assert_int_eq(trace_synth_parse("rate=0.5,n=1,prompt=7,output=9", &s, &err), KVS_OK);
    ck_assert_int_eq(s.arrival, TRACE_ARRIVAL_POISSON);
    ck_assert(s.rate == 0.5 && s.prompt_a == 7 && s.output_a == 9);
}
END_TEST

typedef struct bad_spec {
    const char *spec;
    const char *msg; /* the message must start with it */
} bad_spec;

#define LEN ",prompt=1,output=1"
static const bad_spec bad_specs[] = {
    {"rate=0,n=5" LEN, "--synthetic: rate: must be > 0"},
    {"rate=-2,n=5" LEN, "--synthetic: rate: must be > 0"},
    {"rate=abc,n=5" LEN, "--synthetic: rate: 'abc' is not a number"},
    {"rate=1,n=5,bogus=1" LEN, "--synthetic: unknown key 'bogus'"},
    {"rate=1" LEN, "--synthetic: n: required"},
    {"n=5" LEN, "--synthetic: rate: required"},
    {"rate=1,n=0" LEN, "--synthetic: n: must be >= 1"},
    {"rate=1,n=1.5" LEN, "--synthetic: n: '1.5' is not an integer"},
    {"rate=1,n=1000000000" LEN, "--synthetic: n: must be in"},
    {"arrival=weird,rate=1,n=5" LEN, "--synthetic: arrival: 'weird' is not"},
    {"arrival=gamma,rate=1,n=5" LEN, "--synthetic: cv: required"},
    {"arrival=gamma,cv=0,rate=1,n=5" LEN, "--synthetic: cv: must be in (0, 100]"},
    {"cv=2,rate=1,n=5" LEN, "--synthetic: cv: only used with arrival=gamma"},
    {"arrival=burst,rate=1,n=5" LEN, "--synthetic: rate: not used with arrival=burst"},
    {"rate=1,n=5,prompt=0,output=1", "--synthetic: prompt: must be >= 1"},
    {"rate=1,n=5,prompt=1,output=x", "--synthetic: output: 'x' is not an integer"},
    {"rate=1,n=5,prompt=uniform:20:10,output=1", "--synthetic: prompt: 'uniform:20:10': need"},
    {"rate=1,n=5,prompt=uniform:0:10,output=1", "--synthetic: prompt: 'uniform:0:10': need"},
    {"rate=1,n=5,prompt=uniform:5,output=1", "--synthetic: prompt: expected uniform:A:B"},
    {"rate=1,n=5,prompt=1", "--synthetic: output: required"},
    {"rate=1,n=5,output=1", "--synthetic: prompt: required"},
    {"rate=1,n=5,prompt=1,lengths=" LENGTHS, "--synthetic: lengths: cannot be combined"},
    {"rate=1,n=5,priorities=0:0.5/1:0.4" LEN, "--synthetic: priorities: shares sum to 0.9"},
    {"rate=1,n=5,priorities=0:0/1:1" LEN, "--synthetic: priorities: share '0'"},
    {"rate=1,n=5,priorities=-1:1" LEN, "--synthetic: priorities: priority '-1'"},
    {"rate=1,n=5,priorities=0:0.5/0:0.5" LEN, "--synthetic: priorities: priority 0 listed twice"},
    {"rate=1,n=5,priorities=0.5" LEN, "--synthetic: priorities: '0.5' is not PRIORITY:SHARE"},
    {"rate=1,rate=2,n=5" LEN, "--synthetic: rate: given twice"},
    {"rate=1,,n=5" LEN, "--synthetic: empty item"},
    {"rate,n=5" LEN, "--synthetic: 'rate' is not key=value"},
    {"rate=,n=5" LEN, "--synthetic: rate: missing value"},
    {"", "--synthetic: empty item"},
};

/* Every bad spec is KVS_EINVAL naming the offending key. */
START_TEST(test_parse_errors)
{
    const bad_spec *b = &bad_specs[_i];
    trace_synth_spec s;
    kvs_err err;
    ck_assert_int_eq(trace_synth_parse(b->spec, &s, &err), KVS_EINVAL);
    ck_assert_msg(!strncmp(err.msg, b->msg, strlen(b->msg)), "spec '%s': got '%s', want '%s'",
                  b->spec, err.msg, b->msg);
}
END_TEST

/* ---------------------------------------------------------- generation */

START_TEST(test_fields_and_determinism)
{
    const char *text = "arrival=gamma,cv=1.5,rate=4,n=500,prompt=uniform:1:1000,"
                       "output=uniform:1:50,priorities=0:0.5/7:0.5";
    trace a, b, c;
    gen(text, 42, &a);
    gen(text, 42, &b);
    gen(text, 43, &c);
    ck_assert_int_eq(a.format, TRACE_FORMAT_SYNTHETIC);
    ck_assert_str_eq(a.source, text);
    ck_assert_str_eq(a.sha256, "");
    ck_assert_int_eq(a.has_priority, 1);
    ck_assert_int_eq(a.n, 500);
    /* Same seed: identical arrays; another seed: different arrivals,
     * lengths and priorities. */
    ck_assert_int_eq(memcmp(a.reqs, b.reqs, (size_t)a.n * sizeof *a.reqs), 0);
    int64_t d_arr = 0, d_len = 0, d_pri = 0;
    for (int64_t i = 0; i < a.n; i++) {
        d_arr += a.reqs[i].arrival_s != c.reqs[i].arrival_s;
        d_len += a.reqs[i].prompt_tokens != c.reqs[i].prompt_tokens;
        d_pri += a.reqs[i].priority != c.reqs[i].priority;
    }
    ck_assert_int_eq(d_arr, a.n);
    ck_assert_int_gt(d_len, a.n * 9 / 10);
    ck_assert_int_gt(d_pri, a.n / 4); /* expect 1/2 to differ */
    /* Byte-identical CSV for the same seed. */
    char *buf[2];
    size_t len[2];
    for (int k = 0; k < 2; k++) {
        kvs_err err;
        FILE *f = open_memstream(&buf[k], &len[k]);
        ck_assert_int_eq(trace_write_csv(k ? &b : &a, f, &err), KVS_OK);
        fclose(f);
    }
    ck_assert_uint_eq(len[0], len[1]);
    ck_assert_int_eq(memcmp(buf[0], buf[1], len[0]), 0);
    free(buf[0]);
    free(buf[1]);
    trace_free(&a);
    trace_free(&b);
    trace_free(&c);
}
END_TEST

/* Arrivals, lengths and priorities come from separate streams: changing
 * the length spec keeps the arrival times. */
START_TEST(test_streams_independent)
{
    trace a, b;
    gen("rate=3,n=300,prompt=5,output=5", 7, &a);
    gen("rate=3,n=300,lengths=" LENGTHS ",priorities=1:0.5/2:0.5", 7, &b);
    for (int64_t i = 0; i < a.n; i++)
        ck_assert(a.reqs[i].arrival_s == b.reqs[i].arrival_s);
    trace_free(&a);
    trace_free(&b);
}
END_TEST

/* Poisson, n = 20000, rate 8.  The span (last - first arrival) is a sum of
 * n-1 exponential gaps: relative standard deviation 1/sqrt(n-1) = 0.71%,
 * so the measured rate is within 4% (5.7 sigma).  The sample CV of
 * exponential gaps has standard deviation ~1/sqrt(n) = 0.0071 (delta
 * method: CV^4 + (mu4 - s^4)/(4 s^2 mu^2) - mu3/mu^3 = 1 + 2 - 2 = 1 for the
 * unit exponential), so |CV - 1| < 0.04 (5.7 sigma).  Counts in 1 s bins
 * are Poisson(8): IoD 1 with standard deviation ~sqrt(2/2500) = 0.028 over
 * the ~2500 bins, so |IoD - 1| < 0.15 (5.3 sigma). */
START_TEST(test_poisson)
{
    trace t;
    trace_stats s;
    kvs_err err;
    gen("arrival=poisson,rate=8,n=20000,prompt=10,output=10", 1, &t);
    ck_assert_int_eq(trace_stats_compute(&t, &s, &err), KVS_OK);
    ck_assert_double_eq_tol(s.rate_rps, 8.0, 8.0 * 0.04);
    ck_assert_double_eq_tol(s.iat_cv, 1.0, 0.04);
    ck_assert_double_eq_tol(s.iod_1s, 1.0, 0.15);
    /* The first request comes at the first sampled gap, not at 0: a gap of
     * mean 1/8 s, below 3 s with probability 1 - e^-24. */
    ck_assert(t.reqs[0].arrival_s > 0 && t.reqs[0].arrival_s < 3.0);
    for (int64_t i = 1; i < t.n; i++)
        ck_assert(t.reqs[i].arrival_s >= t.reqs[i - 1].arrival_s);
    for (int64_t i = 0; i < t.n; i++)
        ck_assert(t.reqs[i].prompt_tokens == 10 && t.reqs[i].output_tokens == 10 &&
                  t.reqs[i].priority == 0);
    ck_assert_int_eq(t.has_priority, 0);
    trace_free(&t);
}
END_TEST

/* Gamma gaps with shape k = 1/cv^2.  Delta-method variance of the sample
 * CV for Gamma(k): (1/(2k) + 1/(2k^2))/n.
 *   cv = 2 (k = 1/4): sd sqrt(10/20000) = 0.022 -> tolerance 0.15 (6.7 sd);
 *     rate: relative sd of the span cv/sqrt(n) = 1.4% -> 8% (5.7 sd).
 *   cv = 0.5 (k = 4): sd sqrt(0.15625/20000) = 0.0028 -> 0.015 (5.4 sd);
 *     rate: 0.35% -> 2% (5.7 sd). */
START_TEST(test_gamma)
{
    trace t;
    trace_stats s;
    kvs_err err;
    gen("arrival=gamma,rate=8,cv=2,n=20000,prompt=1,output=1", 11, &t);
    ck_assert_int_eq(trace_stats_compute(&t, &s, &err), KVS_OK);
    ck_assert_double_eq_tol(s.iat_cv, 2.0, 0.15);
    ck_assert_double_eq_tol(s.rate_rps, 8.0, 8.0 * 0.08);
    ck_assert(t.reqs[0].arrival_s > 0);
    trace_free(&t);
    gen("arrival=gamma,rate=8,cv=0.5,n=20000,prompt=1,output=1", 12, &t);
    ck_assert_int_eq(trace_stats_compute(&t, &s, &err), KVS_OK);
    ck_assert_double_eq_tol(s.iat_cv, 0.5, 0.015);
    ck_assert_double_eq_tol(s.rate_rps, 8.0, 8.0 * 0.02);
    trace_free(&t);
}
END_TEST

START_TEST(test_burst)
{
    trace t;
    trace_stats s;
    kvs_err err;
    gen("arrival=burst,n=50,prompt=3,output=4", 5, &t);
    ck_assert_int_eq(t.n, 50);
    for (int64_t i = 0; i < t.n; i++)
        ck_assert(t.reqs[i].arrival_s == 0.0);
    ck_assert_int_eq(trace_stats_compute(&t, &s, &err), KVS_OK);
    ck_assert(s.span_s == 0 && s.rate_rps == 0);
    trace_free(&t);
}
END_TEST

/* Uniform [10, 20] over 11 values: each endpoint is missed by all 20000
 * draws with probability (10/11)^20000 ~ e^-1906, so both appear; the mean
 * 15 has standard deviation sqrt((11^2-1)/12)/sqrt(20000) = 0.022, so
 * within 0.1 (4.5 sd). */
START_TEST(test_uniform)
{
    trace t;
    gen("rate=100,n=20000,prompt=uniform:10:20,output=uniform:1:1", 3, &t);
    int64_t lo = INT64_MAX, hi = 0;
    double sum = 0;
    for (int64_t i = 0; i < t.n; i++) {
        int64_t p = t.reqs[i].prompt_tokens;
        lo = p < lo ? p : lo;
        hi = p > hi ? p : hi;
        sum += (double)p;
        ck_assert_int_eq(t.reqs[i].output_tokens, 1);
    }
    ck_assert_int_eq(lo, 10);
    ck_assert_int_eq(hi, 20);
    ck_assert_double_eq_tol(sum / (double)t.n, 15.0, 0.1);
    trace_free(&t);
}
END_TEST

typedef struct pair {
    int64_t p, o;
} pair;

static int cmp_pair(const void *a, const void *b)
{
    const pair *x = a, *y = b;
    if (x->p != y->p)
        return (x->p > y->p) - (x->p < y->p);
    return (x->o > y->o) - (x->o < y->o);
}

/* Every sampled (prompt, output) is a row of the lengths file, read here
 * independently with sscanf.  5000 draws with replacement from 30731 rows
 * give ~4600 distinct rows in expectation, so > 4000 distinct shows that
 * the whole file is sampled; the README gives prefill mean 2340 and decode
 * mean 439, with per-row sd < 2500 and < 400 the sample means lie within
 * 150 and 30 (> 4 sd). */
START_TEST(test_lengths_file)
{
    FILE *f = fopen(LENGTHS, "r");
    ck_assert_ptr_nonnull(f);
    char line[256];
    ck_assert_ptr_nonnull(fgets(line, sizeof line, f)); /* header */
    size_t n = 0, cap = 40000;
    pair *rows = malloc(cap * sizeof *rows);
    long long a, b;
    while (fgets(line, sizeof line, f) && n < cap)
        if (sscanf(line, "%lld,%lld,", &a, &b) == 2)
            rows[n++] = (pair){a, b};
    fclose(f);
    ck_assert_uint_eq(n, 30731);
    qsort(rows, n, sizeof *rows, cmp_pair);

    trace t;
    gen("rate=10,n=5000,lengths=" LENGTHS, 9, &t);
    pair *got = malloc((size_t)t.n * sizeof *got);
    double sp = 0, so = 0;
    for (int64_t i = 0; i < t.n; i++) {
        pair q = {t.reqs[i].prompt_tokens, t.reqs[i].output_tokens};
        ck_assert_msg(bsearch(&q, rows, n, sizeof *rows, cmp_pair), "(%lld, %lld) not in file",
                      (long long)q.p, (long long)q.o);
        got[i] = q;
        sp += (double)q.p;
        so += (double)q.o;
    }
    qsort(got, (size_t)t.n, sizeof *got, cmp_pair);
    int64_t distinct = 1;
    for (int64_t i = 1; i < t.n; i++)
        distinct += cmp_pair(&got[i], &got[i - 1]) != 0;
    ck_assert_int_gt(distinct, 4000);
    ck_assert_double_eq_tol(sp / (double)t.n, 2340, 150);
    ck_assert_double_eq_tol(so / (double)t.n, 439, 30);
    free(got);
    free(rows);
    trace_free(&t);
}
END_TEST

static void gen_fail(const char *text, int status, const char *want_prefix)
{
    trace_synth_spec s;
    trace t;
    kvs_err err;
    ck_assert_msg(trace_synth_parse(text, &s, &err) == KVS_OK, "%s", err.msg);
    ck_assert_int_eq(trace_synth_gen(&s, text, 0, &t, &err), status);
    ck_assert_msg(!strncmp(err.msg, want_prefix, strlen(want_prefix)), "got '%s', want '%s'",
                  err.msg, want_prefix);
    ck_assert_ptr_null(t.reqs);
    ck_assert_int_eq(t.n, 0);
}

START_TEST(test_lengths_file_errors)
{
    const char *dir = tu_tmpdir();
    char spec[1200], want[1200];
    struct {
        const char *text;
        const char *rest; /* message after "PATH" */
    } cases[] = {
        {"num_prefill_tokens,num_decode_tokens\n5,6\n7,0\n", ":3: num_decode_tokens: must be >= 1"},
        {"num_prefill_tokens,num_decode_tokens\n0,6\n", ":2: num_prefill_tokens: must be >= 1"},
        {"num_prefill_tokens,num_decode_tokens\n5,x\n", ":2: num_decode_tokens: 'x' is not"},
        {"num_prefill_tokens,tokens\n5,6\n", ":1: header lacks column num_decode_tokens"},
        {"num_prefill_tokens,num_decode_tokens,c\n5,6\n", ":2: expected 3 fields, got 2"},
        /* A quoted newline in an extra column: the bad row is on line 4. */
        {"num_decode_tokens,num_prefill_tokens,note\n1,2,\"a\nb\"\n0,1,x\n",
         ":4: num_decode_tokens: must be >= 1"},
        {"num_prefill_tokens,num_decode_tokens\n", ": no rows"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "len%zu.csv", i);
        char *p = tu_write_file(dir, name, cases[i].text);
        snprintf(spec, sizeof spec, "rate=1,n=10,lengths=%s", p);
        snprintf(want, sizeof want, "%s%s", p, cases[i].rest);
        gen_fail(spec, KVS_EINVAL, want);
        free(p);
    }
    gen_fail("rate=1,n=10,lengths=/nonexistent/l.csv", KVS_EIO, "/nonexistent/l.csv: cannot open");
}
END_TEST

/* Class shares over n = 20000: the count of a class with share p is
 * binomial, sd sqrt(p(1-p)/n) <= 0.0036, so each share within 0.02 (> 5 sd). */
START_TEST(test_priorities)
{
    trace t;
    gen("rate=10,n=20000,prompt=1,output=1,priorities=0:0.8/1:0.2", 21, &t);
    ck_assert_int_eq(t.has_priority, 1);
    int64_t ones = 0;
    for (int64_t i = 0; i < t.n; i++) {
        ck_assert(t.reqs[i].priority == 0 || t.reqs[i].priority == 1);
        ones += t.reqs[i].priority == 1;
    }
    ck_assert_double_eq_tol((double)ones / (double)t.n, 0.2, 0.02);
    trace_free(&t);

    gen("rate=10,n=20000,prompt=1,output=1,priorities=5:0.5/2:0.3/9:0.2", 22, &t);
    int64_t c5 = 0, c2 = 0, c9 = 0;
    for (int64_t i = 0; i < t.n; i++) {
        int32_t p = t.reqs[i].priority;
        ck_assert(p == 5 || p == 2 || p == 9);
        c5 += p == 5;
        c2 += p == 2;
        c9 += p == 9;
    }
    ck_assert_double_eq_tol((double)c5 / (double)t.n, 0.5, 0.02);
    ck_assert_double_eq_tol((double)c2 / (double)t.n, 0.3, 0.02);
    ck_assert_double_eq_tol((double)c9 / (double)t.n, 0.2, 0.02);
    trace_free(&t);
}
END_TEST

/* Synthetic arrivals are whole nanoseconds, so the native CSV (%.9f) loads
 * back to exactly the same doubles. */
START_TEST(test_write_round_trip)
{
    trace a, b;
    kvs_err err;
    gen("arrival=gamma,cv=3,rate=50,n=3000,prompt=uniform:1:9000,output=uniform:1:900,"
        "priorities=0:0.25/3:0.75",
        77, &a);
    char path[600];
    snprintf(path, sizeof path, "%s/syn.csv", tu_tmpdir());
    FILE *f = fopen(path, "wb");
    ck_assert_int_eq(trace_write_csv(&a, f, &err), KVS_OK);
    fclose(f);
    ck_assert_int_eq(trace_load(path, &b, &err), KVS_OK);
    ck_assert_int_eq(b.n, a.n);
    ck_assert_int_eq(b.has_priority, 1);
    for (int64_t i = 0; i < a.n; i++) {
        ck_assert_msg(a.reqs[i].arrival_s == b.reqs[i].arrival_s, "row %lld", (long long)i);
        ck_assert_int_eq(a.reqs[i].prompt_tokens, b.reqs[i].prompt_tokens);
        ck_assert_int_eq(a.reqs[i].output_tokens, b.reqs[i].output_tokens);
        ck_assert_int_eq(a.reqs[i].priority, b.reqs[i].priority);
    }
    trace_free(&a);
    trace_free(&b);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("synth");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_parse_ok);
    tcase_add_loop_test(tc, test_parse_errors, 0, (int)(sizeof bad_specs / sizeof bad_specs[0]));
    tcase_add_test(tc, test_fields_and_determinism);
    tcase_add_test(tc, test_streams_independent);
    tcase_add_test(tc, test_poisson);
    tcase_add_test(tc, test_gamma);
    tcase_add_test(tc, test_burst);
    tcase_add_test(tc, test_uniform);
    tcase_add_test(tc, test_lengths_file);
    tcase_add_test(tc, test_lengths_file_errors);
    tcase_add_test(tc, test_priorities);
    tcase_add_test(tc, test_write_round_trip);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    Suite *s = suite();
    return tu_run_suites(&s, 1);
}
