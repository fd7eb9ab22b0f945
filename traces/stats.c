/* stats.c — summary statistics of a trace: rate, burstiness (inter-arrival
 * CV, index of dispersion of counts) and length percentiles. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "trace.h"

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile of sorted v[n]: the value at rank ceil(p/100*n),
 * computed in integers (p is a whole percent). */
static double pct(const int64_t *v, int64_t n, int p)
{
    int64_t rank = (p * n + 99) / 100;
    return (double)v[rank < 1 ? 0 : rank - 1];
}

/* Variance/mean of the request count in the full `bin`-second bins that
 * start at the first arrival; 0 when fewer than 2 full bins or none hold a
 * request.  One pass over the sorted arrivals, no per-bin storage. */
static double dispersion(const trace *t, double bin)
{
    double t0 = t->reqs[0].arrival_s;
    double span = t->reqs[t->n - 1].arrival_s - t0;
    double m = floor(span / bin);
    if (!(m >= 2))
        return 0;
    double sum = 0, sumsq = 0, cur = 0, bin_idx = 0; /* bin indices are whole doubles */
    for (int64_t i = 0; i < t->n; i++) {
        double b = floor((t->reqs[i].arrival_s - t0) / bin);
        if (b >= m)
            break;
        if (b != bin_idx) {
            sumsq += cur * cur;
            cur = 0;
            bin_idx = b;
        }
        cur += 1;
        sum += 1;
    }
    sumsq += cur * cur;
    double mean = sum / m;
    if (mean <= 0)
        return 0;
    double var = sumsq / m - mean * mean;
    return var > 0 ? var / mean : 0;
}

int trace_stats_compute(const trace *t, trace_stats *out, kvs_err *err)
{
    memset(out, 0, sizeof *out);
    out->n = t->n;
    if (t->n == 0)
        return KVS_OK;
    int64_t n = t->n;
    int64_t *v = malloc((size_t)n * sizeof *v);
    if (!v)
        return kvs_errf(err, KVS_ENOMEM, "trace stats: out of memory for %lld requests",
                        (long long)n);
    out->span_s = t->reqs[n - 1].arrival_s - t->reqs[0].arrival_s;
    out->rate_rps = out->span_s > 0 ? (double)n / out->span_s : 0;
    if (n >= 2) {
        double mean = out->span_s / (double)(n - 1), ss = 0;
        for (int64_t i = 1; i < n; i++) {
            double d = t->reqs[i].arrival_s - t->reqs[i - 1].arrival_s - mean;
            ss += d * d;
        }
        out->iat_cv = mean > 0 ? sqrt(ss / (double)(n - 1)) / mean : 0;
    }
    out->iod_1s = dispersion(t, 1.0);
    out->iod_10s = dispersion(t, 10.0);
    out->iod_60s = dispersion(t, 60.0);
    for (int which = 0; which < 2; which++) {
        double sum = 0;
        for (int64_t i = 0; i < n; i++) {
            v[i] = which ? t->reqs[i].output_tokens : t->reqs[i].prompt_tokens;
            sum += (double)v[i];
        }
        qsort(v, (size_t)n, sizeof *v, cmp_i64);
        double q[5] = {sum / (double)n, pct(v, n, 50), pct(v, n, 90), pct(v, n, 99),
                       (double)v[n - 1]};
        double *dst[2][5] = {
            {&out->prompt_mean, &out->prompt_p50, &out->prompt_p90, &out->prompt_p99,
             &out->prompt_max},
            {&out->output_mean, &out->output_p50, &out->output_p90, &out->output_p99,
             &out->output_max}};
        for (int j = 0; j < 5; j++)
            *dst[which][j] = q[j];
    }
    free(v);
    return KVS_OK;
}
