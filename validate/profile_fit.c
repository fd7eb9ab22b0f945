/* profile_fit.c — fitting a cost profile (cost/profile.h) from measured
 * points: tables with leave-one-out errors, non-negative least squares for
 * the attention ops, the per-step overhead (a line in the step's sequences,
 * unclamped), and whole layers checked against the sum of their ops. */
#include "profile.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cost/profile_internal.h"

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
        double x = (double)(o->info->kind == PROFILE_OP_KIND_SEQS ? pts[i].batch : pts[i].tokens);
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
            A[k * o->nf + j] = profile_feat_value(f[j], &b);
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

static int64_t point_seqs(const calib_point *q) { return q->n_prefill + q->n_decode; }

/* The per-step overhead o0 + o1 n_seqs: least squares of the relative error
 * (pred - meas) / meas over every whole step, where pred = ops + o0 + o1 n;
 * the residual r = meas - ops is what the overhead has to explain.  One
 * distinct batch size: o0 alone.  No clamp: the "step" error row says how
 * well the line fits (res: scratch of n). */
static void fit_overhead(profile *p, const calib_point *pts, size_t n, double *res)
{
    double M[PROFILE_MAX_FEAT][PROFILE_MAX_FEAT + 1] = {{0}}, z[PROFILE_MAX_FEAT] = {0};
    int64_t k = 0, n_min = INT64_MAX, n_max = 0;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(pts[i].op, "step") || !(pts[i].median_s > 0))
            continue;
        cost_batch b = point_batch(&pts[i]);
        double y = pts[i].median_s, r = y - profile_ops_s(p, &b), u[2] = {1 / y, 0};
        double ns = (double)point_seqs(&pts[i]);
        u[1] = ns / y;
        for (int a = 0; a < 2; a++) {
            for (int c = 0; c < 2; c++)
                M[a][c] += u[a] * u[c];
            M[a][2] += u[a] * r / y;
        }
        n_min = point_seqs(&pts[i]) < n_min ? point_seqs(&pts[i]) : n_min;
        n_max = point_seqs(&pts[i]) > n_max ? point_seqs(&pts[i]) : n_max;
        k++;
    }
    if (k == 0)
        return;
    double M2[PROFILE_MAX_FEAT][PROFILE_MAX_FEAT + 1];
    memcpy(M2, M, sizeof M2); /* solve() works in place */
    if (n_max > n_min && solve(M2, 2, z)) {
        p->overhead_s = z[0];
        p->overhead_per_seq_s = z[1];
    } else {
        p->overhead_s = M[0][2] / M[0][0];
        p->overhead_per_seq_s = 0;
    }
    k = 0;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(pts[i].op, "step") && pts[i].median_s > 0) {
            cost_batch b = point_batch(&pts[i]);
            res[k++] = fabs(profile_step_s(p, &b) - pts[i].median_s) / pts[i].median_s;
        }
    add_error(p, "step", "overhead", res, k);
}

/* Whole layers measured against the sum of their ops (timed back to back
 * in the layer, apart in the grid): how far the per-op tables are from
 * what a layer pays. */
static void check_layers(profile *p, const calib_point *pts, size_t n, double *res)
{
    int64_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(pts[i].op, "layer") && pts[i].median_s > 0) {
            cost_batch b = point_batch(&pts[i]);
            res[k++] = fabs(profile_layer_s(p, &b) - pts[i].median_s) / pts[i].median_s;
        }
    if (k > 0)
        add_error(p, "layer", "sum-of-ops", res, k);
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
    for (size_t i = 0; i < profile_op_count() && rc == KVS_OK; i++) {
        const profile_op_info *info = profile_op_at(i);
        if (info->kind == PROFILE_OP_KIND_STEP || info->kind == PROFILE_OP_KIND_LAYER)
            continue;
        prof_op *o = &p->ops[p->n_ops++];
        o->info = info;
        o->per_layer = info->per_layer;
        rc = info->kind == PROFILE_OP_KIND_TOKENS || info->kind == PROFILE_OP_KIND_SEQS
                 ? fit_table(p, o, pts, n, err)
                 : fit_linear(p, o, pts, n, err);
    }
    double *res = malloc((n ? n : 1) * sizeof *res);
    if (rc == KVS_OK && !res)
        rc = kvs_errf(err, KVS_ENOMEM, "out of memory (profile)");
    if (rc == KVS_OK)
        fit_overhead(p, pts, n, res);
    if (rc == KVS_OK)
        check_layers(p, pts, n, res);
    free(res);
    if (rc != KVS_OK) {
        profile_free(p);
        return rc;
    }
    *out = p;
    return KVS_OK;
}

