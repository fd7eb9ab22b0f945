/* hist.h — a streaming distribution of positive reals (seconds) with
 * bounded relative error, for metrics over too many samples to keep, such
 * as the inter-token gaps of a run (one per generated token).
 *
 * Method: a value x > 0 falls in a bin fixed by its binary exponent and
 * the top HIST_MANT_BITS bits of its mantissa, so a bin spans at most a
 * 2^-HIST_MANT_BITS (about 0.1%) fraction of its values.  Each bin keeps
 * its count and the smallest and largest value it saw.  A nearest-rank
 * percentile (the value at rank ceil(p/100 * n)) is read from the bin that
 * holds that rank: its smallest value when the rank is the bin's first,
 * its largest when it is the bin's last, else their midpoint.  The true
 * order statistic lies in the same [min, max], so the error is at most
 * max - min of that bin (<= 2^-10 of the value), and it is exact when the
 * bin holds one distinct value (the common case of equal step times) or
 * the rank is at either end of its bin.  Values outside
 * [2^HIST_EXP_MIN, 2^HIST_EXP_MAX) share the end bins (the bound is then
 * their spread); zero and negative values are counted as exact zeros.  The
 * mean is exact (a running sum).  Memory: a fixed 1.5 MiB per histogram;
 * adding is O(1).  No I/O.
 */
#ifndef HIST_H
#define HIST_H

#include <stdint.h>

#include "run.h"

#define HIST_MANT_BITS 10 /* mantissa bits per bin: relative width <= 2^-10 */
#define HIST_EXP_MIN (-40) /* 2^-40 s ~ 1e-12 s: smaller values share bin 0 */
#define HIST_EXP_MAX 24    /* 2^24 s ~ 194 days: larger values share the last bin */

typedef struct hist {
    int64_t *count;   /* [HIST_BINS] samples per bin */
    double *lo, *hi;  /* [HIST_BINS] smallest / largest sample of each bin, s */
    int64_t n;        /* samples, zeros included */
    int64_t n_zero;   /* samples <= 0 */
    double sum;       /* sum of the samples, s */
    double sumsq;     /* sum of their squares, s^2 */
    double max;       /* largest sample, s (-inf when empty) */
} hist;

/* An empty histogram; KVS_ENOMEM if its bins cannot be allocated. */
int hist_init(hist *h);
void hist_free(hist *h);

/* Add one sample (seconds).  O(1). */
void hist_add(hist *h, double x);

/* Add `count` samples equal to x (count >= 0).  O(1). */
void hist_add_n(hist *h, double x, int64_t count);

/* hist_add_n without the running sums (sum, sumsq), which the caller keeps
 * with hist_add_moments and sets itself (sim/itl.c adds them per engine).
 * O(1). */
void hist_add_n_bins(hist *h, double x, int64_t count);
/* What hist_add_n adds to the running sums for `count` samples equal to x:
 * x * count to *sum and x^2 * count to *sumsq (nothing for x <= 0).  O(1). */
void hist_add_moments(double *sum, double *sumsq, double x, int64_t count);

/* p50/p90/p99 (nearest rank, within the bound above) and the exact mean;
 * all NAN when empty.  O(bins). */
run_dist hist_dist(const hist *h);

/* Population standard deviation of the samples (NAN when empty).  O(1). */
double hist_std(const hist *h);

/* The value at 1-based rank k (1 <= k <= n) under the rule above. */
double hist_rank(const hist *h, int64_t k);

#endif
