/* val_summary.c — judging predictions: which steps to replay, re-timing the
 * schedule with other step durations, and the summary JSON (step-time error
 * by group, end-to-end metrics, memory and replay checks). */
#include "validate.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/str.h"

/* ------------------------------------------------------------ sampling */

const char *val_sampling_name(val_sampling s) { return s == VAL_SAMPLING_EVEN ? "even" : "window"; }

int val_sampling_parse(const char *s)
{
    return !strcmp(s, "window") ? VAL_SAMPLING_WINDOW : !strcmp(s, "even") ? VAL_SAMPLING_EVEN : -1;
}

int val_pick_steps(int64_t n_steps, val_sampling s, int64_t start, int64_t max_steps,
                   int64_t *out, int64_t *n, kvs_err *err)
{
    *n = 0;
    if (start < 0 || start >= n_steps)
        return kvs_errf(err, KVS_EINVAL, "--start %lld: the run has steps 0..%lld",
                        (long long)start, (long long)(n_steps - 1));
    if (max_steps < 0)
        return kvs_errf(err, KVS_EINVAL, "--max-steps must be >= 0 (0 = all)");
    int64_t avail = n_steps - start;
    int64_t m = max_steps == 0 || max_steps > avail ? avail : max_steps;
    for (int64_t k = 0; k < m; k++)
        out[k] = s == VAL_SAMPLING_EVEN ? start + k * avail / m : start + k;
    *n = m;
    return KVS_OK;
}

/* ------------------------------------------------------------ re-timing */

/* The latest arrival among step i's members (-INFINITY without members). */
static double step_latest_arrival(const val_run *r, int64_t i)
{
    int64_t n;
    const sched_member *m = val_run_step_members(r, i, &n);
    double arr = -INFINITY;
    for (int64_t j = 0; j < n; j++)
        if (r->tr.reqs[m[j].req_id].arrival_s > arr)
            arr = r->tr.reqs[m[j].req_id].arrival_s;
    return arr;
}

/* The stored schedule's idle wait before a step beyond its bound,
 * max(stored end of the step before, latest member arrival) (0 but for
 * static batch-timeout waits; 0 when nothing bounds the step). */
static double stored_wait(const sched_step *s, double old_end, double arr)
{
    const double bound = old_end > arr ? old_end : arr;
    return isinf(bound) || !(s->start_s - bound > 0) ? 0.0 : s->start_s - bound;
}

void val_retime(const val_run *r, const double *dur, sched_req_result *out, double *ends)
{
    for (int64_t q = 0; q < r->tr.n; q++) {
        out[q] = r->reqs[q];
        out[q].first_token_s = NAN;
        out[q].finish_s = NAN;
    }
    double old_end = -INFINITY, new_end = -INFINITY;
    for (int64_t i = 0; i < r->n_steps; i++) {
        const sched_step *s = &r->steps[i].step;
        int64_t n;
        const sched_member *m = val_run_step_members(r, i, &n);
        const double arr = step_latest_arrival(r, i);
        double old_bound = old_end > arr ? old_end : arr;
        double new_bound = new_end > arr ? new_end : arr;
        /* the first step without members: nothing bounds it */
        const double start = isinf(old_bound) || isinf(new_bound)
                                 ? s->start_s
                                 : new_bound + stored_wait(s, old_end, arr);
        double end = start + dur[i];
        for (int64_t j = 0; j < n; j++) {
            sched_req_result *q = &out[m[j].req_id];
            if (isnan(q->first_token_s))
                q->first_token_s = end;
            if (q->status == SCHED_REQ_FINISHED)
                q->finish_s = end; /* the last step it appears in wins */
        }
        if (ends)
            ends[i] = end;
        old_end = s->start_s + s->dur_s;
        new_end = end;
    }
}

/* Per step: the latest arrival among its members and the stored
 * schedule's idle wait beyond its bound (the wait_i of val_retime).
 * arr[n_steps], wait[n_steps]. */
static void step_bounds(const val_run *r, double *arr, double *wait)
{
    double old_end = -INFINITY;
    for (int64_t i = 0; i < r->n_steps; i++) {
        const sched_step *s = &r->steps[i].step;
        arr[i] = step_latest_arrival(r, i);
        wait[i] = stored_wait(s, old_end, arr[i]);
        old_end = s->start_s + s->dur_s;
    }
}

/* First step whose predicted end is after t (n_steps when none). */
static int64_t first_end_after(const double *ends, int64_t n, double t)
{
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (ends[mid] > t)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* One request's clock (val_retime_local): steps from..last re-timed with
 * dur from new_end on; the ends of steps `first` and `last`. */
static void local_clock(const val_run *r, const double *arr, const double *wait,
                        const double *dur, int64_t from, int64_t first, int64_t last,
                        double new_end, double *first_end, double *last_end)
{
    for (int64_t i = from; i <= last; i++) {
        double bound = new_end > arr[i] ? new_end : arr[i];
        double start = isinf(bound) ? r->steps[i].step.start_s : bound + wait[i];
        new_end = start + dur[i];
        if (i == first)
            *first_end = new_end;
    }
    *last_end = new_end;
}

int val_retime_local(const val_run *r, const double *pred, const double *pred_ends,
                     const double *dur, const int *keep, sched_req_result *out)
{
    size_t nr = (size_t)(r->tr.n > 0 ? r->tr.n : 1);
    size_t ns = (size_t)(r->n_steps > 0 ? r->n_steps : 1);
    int64_t *first = malloc(nr * sizeof *first), *last = malloc(nr * sizeof *last);
    double *arr = malloc(ns * sizeof *arr), *wait = malloc(ns * sizeof *wait);
    int rc = KVS_OK;
    if (!first || !last || !arr || !wait) {
        rc = KVS_ENOMEM;
        goto done;
    }
    step_bounds(r, arr, wait);
    for (int64_t q = 0; q < r->tr.n; q++) {
        out[q] = r->reqs[q];
        out[q].first_token_s = NAN;
        out[q].finish_s = NAN;
        first[q] = last[q] = -1;
    }
    for (int64_t i = 0; i < r->n_steps; i++) {
        int64_t n;
        const sched_member *m = val_run_step_members(r, i, &n);
        for (int64_t j = 0; j < n; j++) {
            if (first[m[j].req_id] < 0)
                first[m[j].req_id] = i;
            last[m[j].req_id] = i;
        }
    }
    for (int64_t q = 0; q < r->tr.n; q++) {
        if (first[q] < 0 || (keep && !keep[q]))
            continue;
        const double a = r->tr.reqs[q].arrival_s;
        int64_t k = first_end_after(pred_ends, r->n_steps, a), from = k;
        if (k > first[q]) /* ends past a: rounding at a step that starts exactly at a */
            k = from = first[q];
        double new_end = k > 0 ? pred_ends[k - 1] : -INFINITY;
        if (k < first[q] && pred_ends[k] - pred[k] < a) {
            /* step k was running when q arrived: the rest of it, scaled by
             * its measured / predicted time (exact when they are equal) */
            new_end = pred_ends[k] + (pred_ends[k] - a) * (dur[k] - pred[k]) / pred[k];
            from = k + 1;
        }
        double fe = NAN, le = NAN;
        local_clock(r, arr, wait, dur, from, first[q], last[q], new_end, &fe, &le);
        out[q].first_token_s = fe;
        if (out[q].status == SCHED_REQ_FINISHED)
            out[q].finish_s = le;
    }
done:
    free(first);
    free(last);
    free(arr);
    free(wait);
    return rc;
}

/* ------------------------------------------------------------ JSON text */

/* "key":number, exact (17 digits), null for NaN or infinity; then a comma. */
static void jnum(str_buf *b, const char *key, double v)
{
    if (isfinite(v))
        str_buf_printf(b, "\"%s\":%.17g,", key, v);
    else
        str_buf_printf(b, "\"%s\":null,", key);
}

static void jint(str_buf *b, const char *key, int64_t v) { str_buf_printf(b, "\"%s\":%lld,", key, (long long)v); }

static void jstr(str_buf *b, const char *key, const char *v)
{
    str_buf_printf(b, "\"%s\":", key);
    str_buf_json(b, v);
    str_buf_printf(b, ",");
}

/* Drop a trailing comma before closing an object. */
static void jclose(str_buf *b, const char *close)
{
    if (!b->oom && b->len > 0 && b->s[b->len - 1] == ',')
        b->len--;
    str_buf_printf(b, "%s,", close);
}

/* ------------------------------------------------------------ statistics */

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Nearest rank of sorted v[n]: the value at rank ceil(p/100 n). */
static double rank_of(const double *v, int64_t n, double p)
{
    if (n == 0)
        return NAN;
    int64_t k = (int64_t)ceil(p / 100.0 * (double)n);
    k = k < 1 ? 1 : k > n ? n : k;
    return v[k - 1];
}

/* One group's error statistics over the replayed steps selected by sel[k]. */
static void group_stats(str_buf *b, const char *name, const int64_t *idx, const double *pred,
                        const double *meas, int64_t n, const int *sel, double *sg, double *ab)
{
    int64_t m = 0;
    double sum_s = 0, sum_a = 0, sum_abs_s = 0, tot_p = 0, tot_m = 0;
    for (int64_t k = 0; k < n; k++) {
        if (!sel[k] || !(meas[k] > 0))
            continue;
        double p = pred[idx[k]], e = (p - meas[k]) / meas[k];
        sg[m] = e;
        ab[m] = fabs(e);
        sum_s += e;
        sum_a += fabs(e);
        sum_abs_s += fabs(p - meas[k]);
        tot_p += p;
        tot_m += meas[k];
        m++;
    }
    qsort(sg, (size_t)m, sizeof *sg, cmp_dbl);
    qsort(ab, (size_t)m, sizeof *ab, cmp_dbl);
    double dm = m ? (double)m : NAN;
    str_buf_printf(b, "\"%s\":{", name);
    jint(b, "n", m);
    jnum(b, "mean_signed", sum_s / dm);
    jnum(b, "p50_signed", rank_of(sg, m, 50));
    jnum(b, "p90_signed", rank_of(sg, m, 90));
    jnum(b, "p99_signed", rank_of(sg, m, 99));
    jnum(b, "mean_abs", sum_a / dm);
    jnum(b, "p50_abs", rank_of(ab, m, 50));
    jnum(b, "p90_abs", rank_of(ab, m, 90));
    jnum(b, "p99_abs", rank_of(ab, m, 99));
    jnum(b, "mape_pct", 100.0 * sum_a / dm);
    jnum(b, "mae_s", sum_abs_s / dm);
    jnum(b, "predicted_total_s", tot_p);
    jnum(b, "measured_total_s", tot_m);
    jclose(b, "}");
}

static const char *const batch_names[] = {"1", "2-8", "9-32", "33-128", ">128"};

static int batch_bin(int64_t n)
{
    return n <= 1 ? 0 : n <= 8 ? 1 : n <= 32 ? 2 : n <= 128 ? 3 : 4;
}

static void metrics_obj(str_buf *b, const char *name, const run_summary *s)
{
    str_buf_printf(b, "\"%s\":{", name);
    jnum(b, "ttft_p50_s", s->ttft.p50);
    jnum(b, "ttft_p99_s", s->ttft.p99);
    jnum(b, "tpot_p50_s", s->tpot.p50);
    jnum(b, "tpot_p99_s", s->tpot.p99);
    jnum(b, "e2e_p50_s", s->e2e.p50);
    jnum(b, "e2e_p99_s", s->e2e.p99);
    jnum(b, "throughput_tok_s", s->throughput_tok_s);
    jclose(b, "}");
}

static double rel(double sim, double meas) { return (sim - meas) / meas; }

/* Simulated vs measured end-to-end metrics over the requests with keep[q]
 * (all when keep is NULL). */
static int e2e_section(str_buf *b, const char *name, const val_run *r, const sched_req_result *ps,
                       const sched_req_result *ms, const int *keep, int latency_only)
{
    int64_t n = 0;
    trace sub = r->tr;
    sched_req_result *sp = NULL, *sm = NULL;
    if (keep) {
        size_t nn = (size_t)(r->tr.n > 0 ? r->tr.n : 1);
        sub.reqs = malloc(nn * sizeof *sub.reqs);
        sp = malloc(nn * sizeof *sp);
        sm = malloc(nn * sizeof *sm);
        if (!sub.reqs || !sp || !sm) {
            free(sub.reqs);
            free(sp);
            free(sm);
            return KVS_ENOMEM;
        }
        for (int64_t q = 0; q < r->tr.n; q++)
            if (keep[q]) {
                sub.reqs[n] = r->tr.reqs[q];
                sp[n] = ps[q];
                sm[n++] = ms[q];
            }
        sub.n = n;
        ps = sp;
        ms = sm;
    }
    run_summary s, m;
    memset(&s, 0, sizeof s);
    memset(&m, 0, sizeof m);
    run_metrics_compute(&r->cfg, &sub, ps, &s);
    run_metrics_compute(&r->cfg, &sub, ms, &m);
    if (latency_only) /* per-request clocks: no common makespan */
        s.throughput_tok_s = m.throughput_tok_s = NAN;
    str_buf_printf(b, "\"%s\":{", name);
    jint(b, "n_requests", sub.n);
    jint(b, "n_finished", s.n_finished);
    metrics_obj(b, "simulated", &s);
    metrics_obj(b, "measured", &m);
    run_summary e;
    memset(&e, 0, sizeof e);
    e.ttft.p50 = rel(s.ttft.p50, m.ttft.p50);
    e.ttft.p99 = rel(s.ttft.p99, m.ttft.p99);
    e.tpot.p50 = rel(s.tpot.p50, m.tpot.p50);
    e.tpot.p99 = rel(s.tpot.p99, m.tpot.p99);
    e.e2e.p50 = rel(s.e2e.p50, m.e2e.p50);
    e.e2e.p99 = rel(s.e2e.p99, m.e2e.p99);
    e.throughput_tok_s = rel(s.throughput_tok_s, m.throughput_tok_s);
    metrics_obj(b, "error", &e);
    jclose(b, "}");
    if (keep) {
        free(sub.reqs);
        free(sp);
        free(sm);
    }
    return KVS_OK;
}

/* ------------------------------------------------------------ summary */

/* The identity of the validation: run, device, predictor, sampling. */
static void header_section(str_buf *b, const val_run *r, const val_info *info, const int64_t *idx,
                           int64_t n, int64_t excluded)
{
    jint(b, "run_id", r->run_id);
    jstr(b, "device", info->device);
    jstr(b, "device_name", info->device_name);
    jstr(b, "storage", info->storage);
    jstr(b, "model", r->model.name);
    jstr(b, "predictor", info->profile_given ? "profile" : "run");
    jstr(b, "cost", r->cfg.cost);
    if (info->profile_id > 0)
        jint(b, "profile_id", info->profile_id);
    else
        str_buf_printf(b, "\"profile_id\":null,");
    jstr(b, "sampling", val_sampling_name(info->sampling));
    jint(b, "start", info->start);
    jint(b, "max_steps", info->max_steps);
    jint(b, "steps_in_run", r->n_steps);
    jint(b, "steps_replayed", n);
    jint(b, "first_step", n ? idx[0] : -1);
    jint(b, "last_step", n ? idx[n - 1] : -1);
    jint(b, "steps_excluded", excluded);
    jint(b, "repeats", info->repeats);
    jint(b, "warmup", info->warmup);
    str_buf_printf(b, "\"seed\":%llu,", (unsigned long long)info->seed);
    jstr(b, "error_convention", "(predicted - measured) / measured");
}

typedef struct tok_at {
    int64_t tok; /* the step's token count: the M of its GEMMs */
    int64_t k;   /* its position among the replayed steps */
} tok_at;

static int cmp_tok_at(const void *a, const void *b)
{
    const tok_at *x = a, *y = b;
    if (x->tok != y->tok)
        return (x->tok > y->tok) - (x->tok < y->tok);
    return (x->k > y->k) - (x->k < y->k);
}

/* is_new[k] = 1 when replayed step k is the first of the replay with its
 * token count: cuBLAS chooses and loads kernels on the first call of a
 * shape, so cold replays time such steps slower (docs/validation.md).
 * O(n log n); 0, or -1 when out of memory. */
static int mark_new_shapes(const val_run *r, const int64_t *idx, int64_t n, int *is_new)
{
    tok_at *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    if (!v)
        return -1;
    for (int64_t k = 0; k < n; k++)
        v[k] = (tok_at){r->steps[idx[k]].step.batch.tokens, k};
    qsort(v, (size_t)n, sizeof *v, cmp_tok_at);
    for (int64_t k = 0; k < n; k++)
        is_new[v[k].k] = k == 0 || v[k].tok != v[k - 1].tok;
    free(v);
    return 0;
}

/* Step-time error, all steps, by kind, by batch size and by whether the
 * step's token count was new to the replay (sel, sg and ab are [n]
 * scratch). */
static void step_error_section(str_buf *b, const val_run *r, const int64_t *idx, const double *pred,
                               const double *meas, int64_t n, int *sel, double *sg, double *ab)
{
    str_buf_printf(b, "\"step_error\":{");
    for (int64_t k = 0; k < n; k++)
        sel[k] = 1;
    group_stats(b, "all", idx, pred, meas, n, sel, sg, ab);
    str_buf_printf(b, "\"by_kind\":{");
    static const char *const kinds[] = {"prefill", "decode", "mixed"};
    for (int kd = 0; kd < 3; kd++) {
        for (int64_t k = 0; k < n; k++)
            sel[k] = r->steps[idx[k]].step.kind == kd;
        group_stats(b, kinds[kd], idx, pred, meas, n, sel, sg, ab);
    }
    jclose(b, "}");
    str_buf_printf(b, "\"by_batch\":{");
    for (int bin = 0; bin < 5; bin++) {
        for (int64_t k = 0; k < n; k++) {
            int64_t nm;
            (void)val_run_step_members(r, idx[k], &nm);
            sel[k] = batch_bin(nm) == bin;
        }
        group_stats(b, batch_names[bin], idx, pred, meas, n, sel, sg, ab);
    }
    jclose(b, "}");
    int *is_new = malloc((size_t)(n > 0 ? n : 1) * sizeof *is_new);
    if (!is_new || mark_new_shapes(r, idx, n, is_new) != 0) {
        free(is_new);
        b->oom = 1; /* the summary reports out of memory */
        return;
    }
    /* by_shape: every kind; by_shape_decode: decode steps alone, whose
     * new and repeated counts agree on a warm replay (mixed steps nearly
     * all have new counts, so they weigh on by_shape's "new") */
    for (int dec_only = 0; dec_only <= 1; dec_only++) {
        str_buf_printf(b, dec_only ? "\"by_shape_decode\":{" : "\"by_shape\":{");
        for (int fresh = 1; fresh >= 0; fresh--) {
            for (int64_t k = 0; k < n; k++)
                sel[k] = is_new[k] == fresh &&
                         (!dec_only || r->steps[idx[k]].step.kind == SCHED_STEP_DECODE);
            group_stats(b, fresh ? "new" : "repeat", idx, pred, meas, n, sel, sg, ab);
        }
        jclose(b, "}");
    }
    free(is_new);
    jclose(b, "}");
}

/* Scratch of the end-to-end section, one array per request or step. */
typedef struct e2e_scratch {
    int *keep;                  /* [requests] every step of it was replayed */
    int64_t *seen, *seen_rep;   /* [requests] its steps, replayed ones */
    double *dmeas;              /* [steps] measured where replayed, else predicted */
    double *ends;               /* [steps] ends re-timed with predicted durations */
    sched_req_result *ps, *ms;  /* [requests] re-timed with predicted / measured */
    sched_req_result *ls;       /* [requests] measured, each on its own clock */
} e2e_scratch;

/* End-to-end metrics on the schedule re-timed with predicted and measured
 * step times, over all requests and over those whose steps were all
 * replayed. */
static int e2e_block(str_buf *b, const val_run *r, const int64_t *idx, const double *pred,
                     const double *meas, int64_t n, e2e_scratch *x)
{
    for (int64_t i = 0; i < r->n_steps; i++)
        x->dmeas[i] = pred[i];
    for (int64_t k = 0; k < n; k++)
        x->dmeas[idx[k]] = meas[k];
    val_retime(r, pred, x->ps, x->ends);
    val_retime(r, x->dmeas, x->ms, NULL);
    for (int64_t i = 0, k = 0; i < r->n_steps; i++) {
        int replayed = k < n && idx[k] == i;
        k += replayed;
        int64_t nm;
        const sched_member *m = val_run_step_members(r, i, &nm);
        for (int64_t j = 0; j < nm; j++) {
            x->seen[m[j].req_id]++;
            x->seen_rep[m[j].req_id] += replayed;
        }
    }
    for (int64_t q = 0; q < r->tr.n; q++)
        x->keep[q] = x->seen[q] > 0 && x->seen[q] == x->seen_rep[q];
    str_buf_printf(b, "\"e2e\":{");
    jstr(b, "rule", "start_i = max(end_{i-1}, latest member arrival); unreplayed steps keep "
                    "predicted durations");
    if (e2e_section(b, "all", r, x->ps, x->ms, NULL, 0) != KVS_OK ||
        e2e_section(b, "covered", r, x->ps, x->ms, x->keep, 0) != KVS_OK)
        return KVS_ENOMEM;
    /* each covered request on its own clock: no drift carried from earlier
     * steps (val_retime_local); its throughput is meaningless, so null */
    if (val_retime_local(r, pred, x->ends, x->dmeas, x->keep, x->ls) != KVS_OK)
        return KVS_ENOMEM;
    str_buf_printf(b, "\"local\":{");
    jstr(b, "rule", "each request's clock starts at its arrival: the steps it waits for and runs "
                    "in at measured durations, earlier ones as predicted");
    if (e2e_section(b, "covered", r, x->ps, x->ls, x->keep, 1) != KVS_OK)
        return KVS_ENOMEM;
    jclose(b, "}");
    jclose(b, "}");
    return KVS_OK;
}

/* Blocks and bytes the replay held against the simulator's, with a note
 * saying why they differ when they do. */
static void memory_section(str_buf *b, const val_run *r, const val_info *info,
                           const val_replay_stats *st, int64_t sim_peak)
{
    int64_t sim_block = r->cfg.sched.block_size * model_kv_bytes_per_token(&r->model, 1);
    int64_t dev_bytes = st->peak_blocks * st->block_bytes, sim_bytes = sim_peak * sim_block;
    int blocks_match = st->peak_blocks == sim_peak, bytes_match = dev_bytes == sim_bytes;
    char note[384] = "";
    if (!blocks_match && st->hit_starts > 0)
        snprintf(note, sizeof note, "the run shares prefix-cache blocks (%lld prefills started "
                 "over a hit), which the replay gives each request privately: the derived "
                 "tables peak at %lld blocks, the simulator's steps at %lld",
                 (long long)st->hit_starts, (long long)st->peak_blocks, (long long)sim_peak);
    else if (!blocks_match)
        snprintf(note, sizeof note, "the derived block tables peak at %lld blocks, the "
                 "simulator's steps at %lld", (long long)st->peak_blocks, (long long)sim_peak);
    else if (!bytes_match && st->storage_bytes != r->model.dtype_bytes)
        snprintf(note, sizeof note, "the %s backend stores KV in %lld-byte elements, the model "
                 "in %lld-byte ones: bytes differ by that factor", info->device,
                 (long long)st->storage_bytes, (long long)r->model.dtype_bytes);
    else if (!bytes_match)
        snprintf(note, sizeof note, "block bytes differ: device %lld, simulator %lld",
                 (long long)st->block_bytes, (long long)sim_block);
    str_buf_printf(b, "\"memory\":{");
    jint(b, "peak_blocks_replay", st->peak_blocks);
    jint(b, "peak_blocks_sim", sim_peak);
    jint(b, "block_bytes_device", st->block_bytes);
    jint(b, "block_bytes_sim", sim_block);
    jint(b, "kv_bytes_device", dev_bytes);
    jint(b, "kv_bytes_sim", sim_bytes);
    jint(b, "pool_blocks", st->pool_blocks);
    jint(b, "run_kv_blocks", r->cfg.sched.total_blocks);
    str_buf_printf(b, "\"blocks_match\":%s,\"bytes_match\":%s,", blocks_match ? "true" : "false",
         bytes_match ? "true" : "false");
    jstr(b, "note", note);
    jclose(b, "}");
}

/* The replay's own checks: block tables against the schedule, KV contents. */
static void checks_section(str_buf *b, const val_replay_stats *st)
{
    str_buf_printf(b, "\"checks\":{");
    jint(b, "schedule_steps", st->sched_checked);
    jint(b, "schedule_mismatch_steps", st->sched_mismatch);
    jint(b, "schedule_first_mismatch", st->first_mismatch);
    jint(b, "prefix_hit_starts", st->hit_starts);
    if (st->kv_checked >= 0)
        jint(b, "kv_requests", st->kv_checked);
    else
        str_buf_printf(b, "\"kv_requests\":null,");
    jint(b, "kv_stale_requests", st->kv_stale);
    jnum(b, "kv_max_nmse", st->kv_nmse);
    jnum(b, "kv_nmse_bound", st->kv_nmse_bound);
    if (st->kv_checked > 0)
        str_buf_printf(b, "\"kv_ok\":%s,", st->kv_nmse <= st->kv_nmse_bound ? "true" : "false");
    else
        str_buf_printf(b, "\"kv_ok\":null,");
    jstr(b, "kv_note", st->kv_note);
    jclose(b, "}");
}

int val_summary_json(const val_run *r, const val_info *info, const int64_t *idx,
                     const double *pred, const double *meas, int64_t n,
                     const val_replay_stats *st, char **json, kvs_err *err)
{
    *json = NULL;
    str_buf b = {0};
    size_t nn = (size_t)(n > 0 ? n : 1), nr = (size_t)(r->tr.n > 0 ? r->tr.n : 1);
    size_t ns = (size_t)(r->n_steps > 0 ? r->n_steps : 1);
    double *sg = malloc(nn * sizeof *sg), *ab = malloc(nn * sizeof *ab);
    int *sel = malloc(nn * sizeof *sel);
    e2e_scratch x = {calloc(nr, sizeof *x.keep), calloc(nr, sizeof *x.seen),
                     calloc(nr, sizeof *x.seen_rep), malloc(ns * sizeof *x.dmeas),
                     malloc(ns * sizeof *x.ends), malloc(nr * sizeof *x.ps),
                     malloc(nr * sizeof *x.ms), malloc(nr * sizeof *x.ls)};
    int rc = KVS_OK;
    if (!sg || !ab || !sel || !x.keep || !x.seen || !x.seen_rep || !x.dmeas || !x.ends ||
        !x.ps || !x.ms || !x.ls)
        goto nomem;
    int64_t excluded = 0, sim_peak = 0;
    for (int64_t k = 0; k < n; k++) {
        excluded += !(meas[k] > 0);
        if (r->steps[idx[k]].step.kv_blocks_used > sim_peak)
            sim_peak = r->steps[idx[k]].step.kv_blocks_used;
    }
    str_buf_printf(&b, "{");
    header_section(&b, r, info, idx, n, excluded);
    step_error_section(&b, r, idx, pred, meas, n, sel, sg, ab);
    if (e2e_block(&b, r, idx, pred, meas, n, &x) != KVS_OK)
        goto nomem;
    memory_section(&b, r, info, st, sim_peak);
    checks_section(&b, st);
    jclose(&b, "}");
    if (b.oom)
        goto nomem;
    b.s[b.len - 1] = 0; /* the final comma jclose added */
    *json = b.s;
    b.s = NULL;
    goto done;
nomem:
    rc = kvs_errf(err, KVS_ENOMEM, "validation summary: out of memory");
done:
    free(b.s);
    free(sg);
    free(ab);
    free(sel);
    free(x.keep);
    free(x.seen);
    free(x.seen_rep);
    free(x.dmeas);
    free(x.ends);
    free(x.ps);
    free(x.ms);
    free(x.ls);
    return rc;
}
