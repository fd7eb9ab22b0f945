/* profile.c — fitting a cost profile from kernel measurements, predicting
 * step times with it, its JSON form (written by hand, read back with
 * SQLite's JSON functions), and the "calibrated" cost model over it. */
#include "profile.h"

#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profile_internal.h"

static const profile_feat decode_feats[] = {PROFILE_FEAT_ONE, PROFILE_FEAT_N_DECODE,
                                            PROFILE_FEAT_KV_READ};
static const profile_feat prefill_feats[] = {
    PROFILE_FEAT_ONE,            PROFILE_FEAT_N_PREFILL, PROFILE_FEAT_PREFILL_TOKENS,
    PROFILE_FEAT_PREFILL_CACHED, PROFILE_FEAT_PREFILL_SQ, PROFILE_FEAT_PREFILL_CTX};
static const char *const feat_names[] = {"one",            "n_decode",       "kv_read",
                                         "n_prefill",      "prefill_tokens", "prefill_cached",
                                         "prefill_sq",     "prefill_ctx"};

const profile_feat *profile_op_feats(calib_op_kind k, int *nf)
{
    *nf = k == CALIB_OP_KIND_DECODE ? 3 : k == CALIB_OP_KIND_PREFILL ? 6 : 0;
    return k == CALIB_OP_KIND_DECODE ? decode_feats : prefill_feats;
}

const char *profile_feat_name(profile_feat f) { return feat_names[f]; }

static double feat_value(profile_feat f, const cost_batch *b)
{
    switch (f) {
    case PROFILE_FEAT_ONE: return 1.0;
    case PROFILE_FEAT_N_DECODE: return (double)b->n_decode;
    case PROFILE_FEAT_KV_READ: return (double)b->kv_read;
    case PROFILE_FEAT_N_PREFILL: return (double)b->n_prefill;
    case PROFILE_FEAT_PREFILL_TOKENS: return (double)(b->tokens - b->n_decode);
    case PROFILE_FEAT_PREFILL_CACHED: return (double)b->prefill_cached;
    case PROFILE_FEAT_PREFILL_SQ: return (double)b->prefill_sq;
    default: return (double)b->prefill_ctx;
    }
}

/* Linear in x between points, flat below the first, last segment beyond. */
static double interp(const double *x, const double *y, int64_t n, double v)
{
    if (n == 1 || v <= x[0])
        return y[0];
    int64_t i = 1;
    while (i < n - 1 && x[i] < v)
        i++;
    double t = (v - x[i - 1]) / (x[i] - x[i - 1]), r = y[i - 1] + t * (y[i] - y[i - 1]);
    return r > 0 ? r : 0;
}

static double op_s(const prof_op *o, const cost_batch *b)
{
    int nf;
    const profile_feat *f = profile_op_feats(o->info->kind, &nf);
    double s = 0;
    switch (o->info->kind) {
    case CALIB_OP_KIND_TOKENS:
        return b->tokens > 0 ? interp(o->x, o->y, o->n, (double)b->tokens) : 0.0;
    case CALIB_OP_KIND_SEQS:
        return b->n_prefill + b->n_decode > 0
                   ? interp(o->x, o->y, o->n, (double)(b->n_prefill + b->n_decode))
                   : 0.0;
    case CALIB_OP_KIND_DECODE:
        if (b->n_decode <= 0)
            return 0.0;
        break;
    case CALIB_OP_KIND_PREFILL:
        if (b->n_prefill <= 0)
            return 0.0;
        break;
    default: return 0.0;
    }
    for (int j = 0; j < nf; j++)
        s += o->coef[j] * feat_value(f[j], b);
    return s;
}

/* All ops of a step (no overhead). */
static double ops_s(const profile *p, const cost_batch *b)
{
    double s = 0;
    for (size_t i = 0; i < p->n_ops; i++) {
        const prof_op *o = &p->ops[i];
        s += (o->per_layer ? (double)(o->per_layer * p->m.layers) : 1.0) * op_s(o, b);
    }
    return s;
}

double profile_step_s(const profile *p, const cost_batch *b)
{
    if (b->tokens <= 0 && b->n_prefill + b->n_decode <= 0)
        return 0.0; /* a step with no request takes no time */
    return p->overhead_s + ops_s(p, b);
}

double profile_op_s(const profile *p, const char *op, const cost_batch *b)
{
    for (size_t i = 0; i < p->n_ops; i++)
        if (!strcmp(p->ops[i].info->name, op))
            return (p->ops[i].per_layer ? (double)(p->ops[i].per_layer * p->m.layers) : 1.0) *
                   op_s(&p->ops[i], b);
    return NAN;
}

double profile_overhead_s(const profile *p) { return p->overhead_s; }
size_t profile_error_count(const profile *p) { return p->n_errs; }
const profile_op_error *profile_error_at(const profile *p, size_t i)
{
    return i < p->n_errs ? &p->errs[i] : NULL;
}
const model_spec *profile_model(const profile *p) { return &p->m; }

void profile_free(profile *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n_ops; i++) {
        free(p->ops[i].x);
        free(p->ops[i].y);
    }
    free(p);
}

/* ------------------------------------------------------------ fitting */

static cost_batch point_batch(const calib_point *q)
{
    cost_batch b = {.tokens = q->tokens, .kv_read = q->kv_read, .prefill_sq = q->prefill_sq,
                    .n_prefill = q->n_prefill, .n_decode = q->n_decode,
                    .prefill_ctx = q->prefill_ctx, .prefill_cached = q->prefill_cached};
    return b;
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median and max of v[n] (sorted in place). */
static void summarize(double *v, int64_t n, double *median, double *mx)
{
    qsort(v, (size_t)n, sizeof *v, cmp_dbl);
    *median = n ? (n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2])) : NAN;
    *mx = n ? v[n - 1] : NAN;
}

static void add_error(profile *p, const char *op, const char *method, double *rel, int64_t n)
{
    profile_op_error *e = &p->errs[p->n_errs++];
    snprintf(e->op, sizeof e->op, "%s", op);
    e->method = method;
    e->n = n;
    summarize(rel, n, &e->median_rel, &e->max_rel);
}

/* Solve the k x k system M z = r (Gaussian elimination, partial pivoting);
 * 0 if singular. */
static int solve(double M[PROFILE_MAX_FEAT][PROFILE_MAX_FEAT + 1], int k, double *z)
{
    for (int c = 0; c < k; c++) {
        int piv = c;
        for (int r = c + 1; r < k; r++)
            if (fabs(M[r][c]) > fabs(M[piv][c]))
                piv = r;
        if (fabs(M[piv][c]) < 1e-12)
            return 0;
        for (int j = 0; j <= k; j++) {
            double t = M[c][j];
            M[c][j] = M[piv][j];
            M[piv][j] = t;
        }
        for (int r = 0; r < k; r++) {
            if (r == c)
                continue;
            double f = M[r][c] / M[c][c];
            for (int j = c; j <= k; j++)
                M[r][j] -= f * M[c][j];
        }
    }
    for (int c = 0; c < k; c++)
        z[c] = M[c][k] / M[c][c];
    return 1;
}

/* Non-negative least squares of relative error: min sum ((A c - y) / y)^2,
 * c >= 0, by trying every support set (nf <= 6: 64 sets); the optimum is
 * the unconstrained solution on its own support, which is feasible. */
static void nnls_rel(const double *A, const double *y, int64_t n, int nf, double *coef)
{
    double scale[PROFILE_MAX_FEAT] = {0}, best = INFINITY;
    for (int j = 0; j < nf; j++) {
        coef[j] = 0;
        for (int64_t i = 0; i < n; i++)
            scale[j] = fmax(scale[j], fabs(A[i * nf + j] / y[i]));
        if (scale[j] == 0)
            scale[j] = 1;
    }
    for (int set = 0; set < (1 << nf); set++) {
        int idx[PROFILE_MAX_FEAT], k = 0;
        for (int j = 0; j < nf; j++)
            if (set >> j & 1)
                idx[k++] = j;
        double M[PROFILE_MAX_FEAT][PROFILE_MAX_FEAT + 1] = {{0}}, z[PROFILE_MAX_FEAT] = {0};
        for (int64_t i = 0; i < n; i++)
            for (int a = 0; a < k; a++) {
                double ua = A[i * nf + idx[a]] / y[i] / scale[idx[a]];
                for (int b = 0; b < k; b++)
                    M[a][b] += ua * A[i * nf + idx[b]] / y[i] / scale[idx[b]];
                M[a][k] += ua; /* target (y / y) = 1 */
            }
        if (k && !solve(M, k, z))
            continue;
        int ok = 1;
        for (int a = 0; a < k; a++)
            ok &= z[a] >= 0;
        if (!ok)
            continue;
        double ss = 0;
        for (int64_t i = 0; i < n; i++) {
            double pr = 0;
            for (int a = 0; a < k; a++)
                pr += z[a] * A[i * nf + idx[a]] / scale[idx[a]];
            ss += (pr - y[i]) / y[i] * (pr - y[i]) / y[i];
        }
        if (ss < best) {
            best = ss;
            for (int j = 0; j < nf; j++)
                coef[j] = 0;
            for (int a = 0; a < k; a++) /* never -0: it would print as "-0" */
                coef[idx[a]] = z[a] > 0 ? z[a] / scale[idx[a]] : 0.0;
        }
    }
}

/* Table op: points sorted by x, equal x averaged; leave-one-out errors. */
static int fit_table(profile *p, prof_op *o, const calib_point *pts, size_t n, kvs_err *err)
{
    int64_t k = 0;
    o->x = malloc(n * sizeof *o->x);
    o->y = malloc(n * sizeof *o->y);
    double *rel = malloc(n * sizeof *rel);
    if (!o->x || !o->y || !rel) {
        free(rel);
        return kvs_errf(err, KVS_ENOMEM, "out of memory (profile)");
    }
    for (size_t i = 0; i < n; i++) {
        if (strcmp(pts[i].op, o->info->name))
            continue;
        double x = (double)(o->info->kind == CALIB_OP_KIND_SEQS ? pts[i].batch : pts[i].tokens);
        int64_t j = k;
        while (j > 0 && o->x[j - 1] > x) /* insertion sort: grids are small */
            j--;
        if (j > 0 && o->x[j - 1] == x) { /* repeated shape: keep the mean */
            o->y[j - 1] = 0.5 * (o->y[j - 1] + pts[i].median_s);
            continue;
        }
        memmove(o->x + j + 1, o->x + j, (size_t)(k - j) * sizeof *o->x);
        memmove(o->y + j + 1, o->y + j, (size_t)(k - j) * sizeof *o->y);
        o->x[j] = x;
        o->y[j] = pts[i].median_s;
        k++;
    }
    o->n = k;
    if (k == 0) {
        free(rel);
        return kvs_errf(err, KVS_EINVAL, "no measurements of op '%s' to fit", o->info->name);
    }
    /* Leave-one-out: each point but the first (steps never fall below the
     * grid's first size) predicted from its neighbours, the last one by
     * extending the segment before it, as beyond-grid sizes are. */
    int64_t nr = 0;
    for (int64_t i = 1; k >= 3 && i < k; i++) {
        int64_t a = i == k - 1 ? i - 2 : i - 1, b = i == k - 1 ? i - 1 : i + 1;
        double slope = (o->y[b] - o->y[a]) / (o->x[b] - o->x[a]);
        double pr = fmax(0, o->y[a] + slope * (o->x[i] - o->x[a]));
        if (o->y[i] > 0)
            rel[nr++] = fabs(pr - o->y[i]) / o->y[i];
    }
    add_error(p, o->info->name, "interp-loo", rel, nr);
    free(rel);
    return KVS_OK;
}

static int fit_linear(profile *p, prof_op *o, const calib_point *pts, size_t n, kvs_err *err)
{
    const profile_feat *f = profile_op_feats(o->info->kind, &o->nf);
    double *A = malloc(n * PROFILE_MAX_FEAT * sizeof *A), *y = malloc(n * sizeof *y);
    int64_t k = 0;
    if (!A || !y) {
        free(A), free(y);
        return kvs_errf(err, KVS_ENOMEM, "out of memory (profile)");
    }
    for (size_t i = 0; i < n; i++) {
        if (strcmp(pts[i].op, o->info->name) || !(pts[i].median_s > 0))
            continue;
        cost_batch b = point_batch(&pts[i]);
        for (int j = 0; j < o->nf; j++)
            A[k * o->nf + j] = feat_value(f[j], &b);
        y[k++] = pts[i].median_s;
    }
    if (k == 0) {
        free(A), free(y);
        return kvs_errf(err, KVS_EINVAL, "no measurements of op '%s' to fit", o->info->name);
    }
    nnls_rel(A, y, k, o->nf, o->coef);
    for (int64_t i = 0; i < k; i++) { /* reuse y for relative errors */
        double pr = 0;
        for (int j = 0; j < o->nf; j++)
            pr += o->coef[j] * A[i * o->nf + j];
        y[i] = fabs(pr - y[i]) / y[i];
    }
    add_error(p, o->info->name, "nnls", y, k);
    free(A), free(y);
    return KVS_OK;
}

int profile_fit(const model_spec *m, const calib_point *pts, size_t n, profile **out,
                kvs_err *err)
{
    *out = NULL;
    profile *p = calloc(1, sizeof *p);
    if (!p)
        return kvs_errf(err, KVS_ENOMEM, "out of memory (profile)");
    p->m = *m;
    int rc = KVS_OK;
    for (size_t i = 0; i < calib_op_count() && rc == KVS_OK; i++) {
        const calib_op_info *info = calib_op_at(i);
        if (info->kind == CALIB_OP_KIND_STEP)
            continue;
        prof_op *o = &p->ops[p->n_ops++];
        o->info = info;
        o->per_layer = info->per_layer;
        rc = info->kind == CALIB_OP_KIND_TOKENS || info->kind == CALIB_OP_KIND_SEQS
                 ? fit_table(p, o, pts, n, err)
                 : fit_linear(p, o, pts, n, err);
    }
    /* overhead: median residual of whole steps */
    double *res = malloc((n ? n : 1) * sizeof *res);
    int64_t k = 0;
    if (rc == KVS_OK && !res)
        rc = kvs_errf(err, KVS_ENOMEM, "out of memory (profile)");
    for (size_t i = 0; rc == KVS_OK && i < n; i++)
        if (!strcmp(pts[i].op, "step") && pts[i].median_s > 0) {
            cost_batch b = point_batch(&pts[i]);
            res[k++] = pts[i].median_s - ops_s(p, &b);
        }
    if (rc == KVS_OK && k > 0) {
        double med, mx;
        summarize(res, k, &med, &mx);
        p->overhead_s = med > 0 ? med : 0;
        k = 0;
        for (size_t i = 0; i < n; i++)
            if (!strcmp(pts[i].op, "step") && pts[i].median_s > 0) {
                cost_batch b = point_batch(&pts[i]);
                res[k++] = fabs(profile_step_s(p, &b) - pts[i].median_s) / pts[i].median_s;
            }
        add_error(p, "step", "overhead", res, k);
    }
    free(res);
    if (rc != KVS_OK) {
        profile_free(p);
        return rc;
    }
    *out = p;
    return KVS_OK;
}

