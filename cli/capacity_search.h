/* capacity_search.h — the pure parts of `kvsim capacity --search`: service
 * level objectives over a run's summary metrics (parse, check, how far a run
 * is from meeting them) and the two searches over a probe callback:
 *
 *  - cap_search_rate: the highest value x (an arrival rate or rate scale) at
 *    which the SLOs hold, by doubling or halving from x0 until one probe
 *    holds and one fails, then geometric bisection until hi / lo <= stop
 *    (1.05: the bracket is "holds at lo, fails 5% higher").
 *  - cap_search_list: the first value of an ascending list (TP degrees) at
 *    which the SLOs hold.
 *
 * The probe callback runs (and stores) one simulation; this module never
 * touches a run or the database itself, so it is tested against a simple
 * threshold model of a probe.  Bisection assumes nothing about
 * monotonicity: it only keeps "lo held, hi failed" true.
 */
#ifndef CAPACITY_SEARCH_H
#define CAPACITY_SEARCH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../base/kvs.h"
#include "../sim/run.h"

#define CAP_MAX_BOUNDS 24

/* One bound on a summary metric. */
typedef struct cap_bound {
    char name[32];   /* metric as written: "ttft_p99", "throughput_tok_s", ... */
    int metric;      /* index into the metric table (capacity_search.c) */
    int is_min;      /* 1: value >= limit (throughputs, attainment); 0: value <= limit */
    double limit;    /* seconds, s/token, tokens/s, requests/s or a fraction */
} cap_bound;

typedef struct cap_slo {
    cap_bound b[CAP_MAX_BOUNDS]; /* [n] */
    int n;
    double req_ttft_s, req_tpot_s, req_e2e_s; /* per-request targets for attainment; 0 = none */
    char text[512];                           /* the spec as given */
} cap_slo;

/* Parse "metric=limit,..." (docs/exploration.md): ttft_|tpot_|e2e_|
 * norm_latency_ p50|p90|p99|mean (upper bounds, seconds), throughput
 * (= throughput_tok_s), throughput_tok_s, throughput_req_s, goodput_req_s
 * (lower bounds), attainment (lower bound, a fraction in (0, 1]) and the
 * per-request targets ttft=S, tpot=S, e2e=S that attainment and goodput are
 * measured against (which need attainment or goodput_req_s, and vice
 * versa).  Errors (KVS_EINVAL) name the metric: "--slo: unknown metric
 * 'foo' (...)".  Cost: O(length). */
int cap_slo_parse(const char *text, cap_slo *out, kvs_err *err);

/* Check a summary: returns 1 when every bound holds.  *ratio (may be NULL)
 * is the worst bound's distance, value/limit for an upper bound and
 * limit/value for a lower one (> 1 means violated; +inf for a missing
 * value); verdict gets e.g. "ttft_p99 2.31 > 2" for the worst bound, or
 * "ok" when all hold. */
int cap_slo_check(const cap_slo *s, const run_summary *sum, double *ratio, char *verdict,
                  size_t n);

/* One probe's outcome, filled by the callback (x, holds, ratio, run_id,
 * verdict). */
typedef struct cap_probe {
    double x;           /* the value probed */
    int holds;          /* 1 if the SLOs held */
    double ratio;       /* cap_slo_check's ratio */
    int64_t run_id;     /* the stored run */
    char verdict[256];  /* cap_slo_check's verdict */
} cap_probe;

/* Run one probe at x; returns 0 or a non-zero error that ends the search. */
typedef int (*cap_probe_fn)(void *ctx, double x, cap_probe *out);

typedef enum cap_status {
    CAP_STATUS_BRACKETED = 0,   /* rate: lo holds, hi fails, hi/lo <= stop */
    CAP_STATUS_FOUND = 1,       /* list: lo is the first value that holds */
    CAP_STATUS_UNREACHABLE = 2, /* no probe held: best is the closest */
    CAP_STATUS_UNBOUNDED = 3    /* rate: every probe held, lo is the highest */
} cap_status;

typedef struct cap_result {
    cap_status status;
    int have_lo, have_hi; /* whether lo / hi are set */
    cap_probe lo;         /* highest (rate) / first (list) value that held */
    cap_probe hi;         /* lowest value above lo that failed (list: the value before lo) */
    cap_probe best;       /* probe with the smallest ratio (closest to holding) */
    int probes;           /* probes run */
} cap_result;

/* Round x to 6 significant digits, the precision every probed value has
 * (so a value prints, is stored and is simulated identically). */
double cap_round(double x);

/* The rate search described above, from x0 > 0, with at most max_steps
 * doublings or halvings before giving up (UNBOUNDED / UNREACHABLE).
 * Returns 0 or the callback's error. */
int cap_search_rate(double x0, double stop, int max_steps, cap_probe_fn fn, void *ctx,
                    cap_result *out);

/* The list search: probe xs[0], xs[1], ... (ascending) until one holds. */
int cap_search_list(const double *xs, int n, cap_probe_fn fn, void *ctx, cap_result *out);

const char *cap_status_name(cap_status s);

/* The command (cmd_capacity_search.c): `kvsim capacity --search ...`, with
 * argv[0] = "capacity"; its --help text.  Returns the exit status. */
int capacity_search_main(int argc, char **argv);
void capacity_search_usage(FILE *f);

#endif
