/* hist.c — the streaming distribution of hist.h. */
#include "hist.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define HIST_SUB (1 << HIST_MANT_BITS)
#define HIST_BINS ((HIST_EXP_MAX - HIST_EXP_MIN) * HIST_SUB)

/* The bin of x > 0 from its IEEE-754 bits: the biased exponent and the
 * top HIST_MANT_BITS mantissa bits, read together, grow with x. */
static int64_t bin_of(double x)
{
    uint64_t bits;
    memcpy(&bits, &x, sizeof bits);
    int64_t key = (int64_t)(bits >> (52 - HIST_MANT_BITS));
    const int64_t base = (int64_t)(1023 + HIST_EXP_MIN) << HIST_MANT_BITS;
    int64_t b = key - base;
    return b < 0 ? 0 : b >= HIST_BINS ? HIST_BINS - 1 : b;
}

int hist_init(hist *h)
{
    h->count = calloc(HIST_BINS, sizeof *h->count);
    h->lo = malloc(HIST_BINS * sizeof *h->lo);
    h->hi = malloc(HIST_BINS * sizeof *h->hi);
    h->n = h->n_zero = 0;
    h->sum = h->sumsq = 0.0;
    h->max = -INFINITY;
    if (!h->count || !h->lo || !h->hi) {
        hist_free(h);
        return KVS_ENOMEM;
    }
    return KVS_OK;
}

void hist_free(hist *h)
{
    free(h->count);
    free(h->lo);
    free(h->hi);
    h->count = NULL;
    h->lo = h->hi = NULL;
}

void hist_add_n_bins(hist *h, double x, int64_t count)
{
    assert(count >= 0);
    if (count == 0)
        return;
    h->n += count;
    if (!(x > 0)) {
        h->n_zero += count;
        if (h->max < 0)
            h->max = 0;
        return;
    }
    if (x > h->max)
        h->max = x;
    int64_t b = bin_of(x);
    if (h->count[b] == 0) {
        h->lo[b] = h->hi[b] = x;
    } else {
        if (x < h->lo[b])
            h->lo[b] = x;
        if (x > h->hi[b])
            h->hi[b] = x;
    }
    h->count[b] += count;
}

void hist_add_moments(double *sum, double *sumsq, double x, int64_t count)
{
    if (count > 0 && x > 0) {
        *sum += x * (double)count;
        *sumsq += x * x * (double)count;
    }
}

void hist_add_n(hist *h, double x, int64_t count)
{
    hist_add_n_bins(h, x, count);
    hist_add_moments(&h->sum, &h->sumsq, x, count);
}

void hist_add(hist *h, double x) { hist_add_n(h, x, 1); }

double hist_rank(const hist *h, int64_t k)
{
    assert(k >= 1 && k <= h->n);
    if (k <= h->n_zero)
        return 0.0;
    int64_t below = h->n_zero;
    for (int64_t b = 0; b < HIST_BINS; b++) {
        int64_t c = h->count[b];
        if (below + c < k) {
            below += c;
            continue;
        }
        int64_t j = k - below; /* 1..c within the bin */
        if (j == 1)
            return h->lo[b];
        if (j == c)
            return h->hi[b];
        return 0.5 * (h->lo[b] + h->hi[b]);
    }
    assert(0 && "rank beyond the samples");
    return NAN;
}

double hist_std(const hist *h)
{
    if (h->n == 0)
        return NAN;
    double m = h->sum / (double)h->n, v = h->sumsq / (double)h->n - m * m;
    return v > 0 ? sqrt(v) : 0.0;
}

run_dist hist_dist(const hist *h)
{
    run_dist d = {NAN, NAN, NAN, NAN};
    if (h->n == 0)
        return d;
    const double ps[3] = {50.0, 90.0, 99.0};
    double *out[3] = {&d.p50, &d.p90, &d.p99};
    for (int i = 0; i < 3; i++) {
        int64_t rank = (int64_t)ceil(ps[i] / 100.0 * (double)h->n);
        *out[i] = hist_rank(h, rank < 1 ? 1 : rank);
    }
    d.mean = h->sum / (double)h->n;
    return d;
}
