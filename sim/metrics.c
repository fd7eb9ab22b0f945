/* metrics.c — the metrics of docs/semantics.md section 7 over per-request
 * results: exact nearest-rank percentiles, throughput, SLO attainment. */
#include <math.h>
#include <stdlib.h>

#include "run.h"

/* Move the k-th smallest of v[lo..hi] (0-based k) to v[k], with smaller
 * values before it and larger after (Hoare's selection, median-of-three
 * pivot).  Expected O(n). */
static void select_kth(double *v, int64_t lo, int64_t hi, int64_t k)
{
    while (hi > lo) {
        int64_t mid = lo + (hi - lo) / 2;
        /* order v[lo], v[mid], v[hi] and use the median as pivot */
        if (v[mid] < v[lo]) { double t = v[mid]; v[mid] = v[lo]; v[lo] = t; }
        if (v[hi] < v[lo]) { double t = v[hi]; v[hi] = v[lo]; v[lo] = t; }
        if (v[hi] < v[mid]) { double t = v[hi]; v[hi] = v[mid]; v[mid] = t; }
        double pivot = v[mid];
        int64_t i = lo, j = hi;
        while (i <= j) {
            while (v[i] < pivot)
                i++;
            while (v[j] > pivot)
                j--;
            if (i <= j) {
                double t = v[i];
                v[i] = v[j];
                v[j] = t;
                i++;
                j--;
            }
        }
        if (k <= j)
            hi = j;
        else if (k >= i)
            lo = i;
        else
            return;
    }
}

/* Nearest rank: the value at 1-based rank ceil(p/100 * n).  Reorders v.
 * Selection from the highest rank down keeps each search inside the part
 * left of the previous one.  Expected O(n). */
static run_dist dist_of(double *v, int64_t n)
{
    run_dist d = {NAN, NAN, NAN, NAN};
    if (n == 0)
        return d;
    const double ps[3] = {99.0, 90.0, 50.0};
    double *out[3] = {&d.p99, &d.p90, &d.p50};
    int64_t hi = n - 1;
    for (int i = 0; i < 3; i++) {
        int64_t rank = (int64_t)ceil(ps[i] / 100.0 * (double)n);
        if (rank < 1)
            rank = 1;
        select_kth(v, 0, hi, rank - 1);
        *out[i] = v[rank - 1];
        hi = rank - 1;
    }
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++)
        sum += v[i];
    d.mean = sum / (double)n;
    return d;
}

/* The k-th latency figure of finished request r (k: 0 TTFT, 1 TPOT, 2 E2E,
 * 3 normalized latency), into *v; 0 when it has none (TPOT of one token). */
static int metric_value(int k, const sched_req_result *r, const trace_req *q, double *v)
{
    switch (k) {
    case 0: *v = r->first_token_s - q->arrival_s; return 1;
    case 1:
        if (q->output_tokens <= 1)
            return 0;
        *v = (r->finish_s - r->first_token_s) / (double)(q->output_tokens - 1);
        return 1;
    case 2: *v = r->finish_s - q->arrival_s; return 1;
    default: *v = (r->finish_s - q->arrival_s) / (double)q->output_tokens; return 1;
    }
}

/* One pass over the requests for the counts, then one per latency figure
 * through a single buffer of n doubles (the figures' distributions one at
 * a time: 8 bytes per request at the end of a run, not 32). */
void run_metrics_compute(const run_config *cfg, const trace *tr,
                         const sched_req_result *reqs, run_summary *sum)
{
    int64_t n = tr->n;
    sum->n_requests = n;
    sum->n_finished = sum->n_rejected = 0;
    sum->n_reject_context = sum->n_reject_token_budget = sum->n_reject_kv = 0;
    int64_t nf = 0, good = 0;
    double out_tokens = 0.0, last_finish = -INFINITY;
    int has_slo = cfg->slo_ttft_s > 0 || cfg->slo_tpot_s > 0 || cfg->slo_e2e_s > 0;
    run_dist *dist[4] = {&sum->ttft, &sum->tpot, &sum->e2e, &sum->norm_latency};
    double *buf = malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
    for (int64_t i = 0; buf && i < n; i++) {
        const sched_req_result *r = &reqs[i];
        const trace_req *q = &tr->reqs[i];
        if (r->status != SCHED_REQ_FINISHED) {
            sum->n_rejected++;
            sum->n_reject_context += r->reject_reason == SCHED_REJECT_CONTEXT;
            sum->n_reject_token_budget += r->reject_reason == SCHED_REJECT_TOKEN_BUDGET;
            sum->n_reject_kv += r->reject_reason == SCHED_REJECT_KV_CAPACITY;
            continue;
        }
        double t1, te, tp = NAN;
        metric_value(0, r, q, &t1);
        metric_value(2, r, q, &te);
        metric_value(1, r, q, &tp);
        nf++;
        out_tokens += (double)q->output_tokens;
        if (r->finish_s > last_finish)
            last_finish = r->finish_s;
        int ok = (!(cfg->slo_ttft_s > 0) || t1 <= cfg->slo_ttft_s) &&
                 (!(cfg->slo_e2e_s > 0) || te <= cfg->slo_e2e_s) &&
                 (!(cfg->slo_tpot_s > 0) || isnan(tp) || tp <= cfg->slo_tpot_s);
        good += ok;
    }
    sum->n_finished = nf; /* out of memory: 0, NaNs below (callers check it) */
    for (int k = 0; k < 4; k++) {
        int64_t m = 0;
        for (int64_t i = 0; buf && i < n; i++)
            if (reqs[i].status == SCHED_REQ_FINISHED)
                m += metric_value(k, &reqs[i], &tr->reqs[i], &buf[m]);
        *dist[k] = dist_of(buf, m);
    }
    free(buf);
    double span = nf > 0 ? last_finish - tr->reqs[0].arrival_s : 0.0;
    sum->throughput_tok_s = span > 0 ? out_tokens / span : NAN;
    sum->throughput_req_s = span > 0 ? (double)nf / span : NAN;
    sum->slo_attainment = has_slo && n > 0 ? (double)good / (double)n : NAN;
    sum->goodput_req_s = has_slo && span > 0 ? (double)good / span : NAN;
}

int run_metrics_by_class(const run_config *cfg, const trace *tr,
                         const sched_req_result *reqs, run_class **out, int *n)
{
    *out = NULL;
    *n = 0;
    if (!tr->has_priority || tr->n == 0)
        return KVS_OK;
    int32_t prio[RUN_MAX_CLASSES];
    int np = 0;
    for (int64_t i = 0; i < tr->n; i++) {
        int32_t p = tr->reqs[i].priority;
        int k = 0;
        while (k < np && prio[k] != p)
            k++;
        if (k < np)
            continue;
        if (np == RUN_MAX_CLASSES)
            return KVS_OK; /* too many classes for a per-class table */
        prio[np++] = p;
    }
    for (int a = 1; a < np; a++) /* insertion sort: np <= 64 */
        for (int b = a; b > 0 && prio[b - 1] > prio[b]; b--) {
            int32_t t = prio[b];
            prio[b] = prio[b - 1];
            prio[b - 1] = t;
        }
    run_class *cls = calloc((size_t)np, sizeof *cls);
    trace sub = *tr;
    sub.reqs = malloc((size_t)tr->n * sizeof *sub.reqs);
    sched_req_result *sr = malloc((size_t)tr->n * sizeof *sr);
    if (!cls || !sub.reqs || !sr) {
        free(cls);
        free(sub.reqs);
        free(sr);
        return KVS_ENOMEM;
    }
    for (int k = 0; k < np; k++) {
        int64_t m = 0;
        for (int64_t i = 0; i < tr->n; i++)
            if (tr->reqs[i].priority == prio[k]) {
                sub.reqs[m] = tr->reqs[i];
                sr[m++] = reqs[i];
            }
        sub.n = m;
        run_summary s;
        run_metrics_compute(cfg, &sub, sr, &s);
        cls[k].priority = prio[k];
        cls[k].n_requests = s.n_requests;
        cls[k].n_finished = s.n_finished;
        cls[k].n_rejected = s.n_rejected;
        cls[k].ttft = s.ttft;
        cls[k].tpot = s.tpot;
        cls[k].e2e = s.e2e;
        cls[k].slo_attainment = s.slo_attainment;
    }
    free(sub.reqs);
    free(sr);
    *out = cls;
    *n = np;
    return KVS_OK;
}

void run_metrics_limit_shares(const int64_t steps[SCHED_LIMIT_COUNT], int64_t n_steps,
                              run_summary *sum)
{
    const double ns = (double)n_steps;
    sum->limit_kv_share = ns > 0 ? (double)steps[SCHED_LIMIT_KV] / ns : NAN;
    sum->limit_max_seqs_share = ns > 0 ? (double)steps[SCHED_LIMIT_MAX_SEQS] / ns : NAN;
    sum->limit_token_budget_share = ns > 0 ? (double)steps[SCHED_LIMIT_TOKEN_BUDGET] / ns : NAN;
    sum->limit_none_share = ns > 0 ? (double)steps[SCHED_LIMIT_NONE_WAITING] / ns : NAN;
    sum->limit_other_share = ns > 0 ? (double)steps[SCHED_LIMIT_OTHER] / ns : NAN;
}
