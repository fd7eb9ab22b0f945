/* job_cluster.c — candidates and probes of the cluster capacity search
 * (job_cluster.h). */
#include "job_cluster.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/str.h"
#include "../sim/cluster.h"

static int gpu_index(const job_cluster_prices *p, const char *name)
{
    for (int i = 0; i < p->n; i++)
        if (!strcmp(p->gpu[i], name))
            return i;
    return -1;
}

/* Split `text` at commas into buf, calling fn on each item. */
static int each_item(const char *flag, const char *text, char *buf, size_t n,
                     int (*fn)(void *ctx, char *item, kvs_err *err), void *ctx, kvs_err *err)
{
    if (!text || !*text)
        return kvs_errf(err, KVS_EINVAL, "%s: empty list", flag);
    if (strlen(text) >= n)
        return kvs_errf(err, KVS_EINVAL, "%s: too long", flag);
    strcpy(buf, text);
    for (char *save, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int rc = fn(ctx, t, err);
        if (rc)
            return rc;
    }
    return KVS_OK;
}

static int add_gpu(void *ctx, char *name, kvs_err *err)
{
    job_cluster_prices *p = ctx;
    gpu_spec g;
    kvs_err e;
    if (gpu_lookup(name, &g, &e)) {
        const char *m = strncmp(e.msg, "--gpu: ", 7) ? e.msg : e.msg + 7;
        return kvs_errf(err, KVS_EINVAL, "--gpus: %s", m);
    }
    if (gpu_index(p, name) >= 0)
        return kvs_errf(err, KVS_EINVAL, "--gpus: '%s' given twice", name);
    if (p->n == JOB_CLUSTER_MAX_GPUS || strlen(name) >= sizeof p->gpu[0])
        return kvs_errf(err, KVS_EINVAL, "--gpus: at most %d GPUs of up to %zu characters",
                        JOB_CLUSTER_MAX_GPUS, sizeof p->gpu[0] - 1);
    strcpy(p->gpu[p->n], name);
    p->price[p->n++] = NAN;
    return KVS_OK;
}

static int add_price(void *ctx, char *item, kvs_err *err)
{
    job_cluster_prices *p = ctx;
    char *eq = strchr(item, '=');
    if (!eq)
        return kvs_errf(err, KVS_EINVAL, "--price: '%s' is not GPU=DOLLARS_PER_HOUR", item);
    *eq = 0;
    int i = gpu_index(p, item);
    if (i < 0)
        return kvs_errf(err, KVS_EINVAL, "--price: '%s' is not one of the GPUs searched (--gpus)",
                        item);
    if (!isnan(p->price[i]))
        return kvs_errf(err, KVS_EINVAL, "--price: '%s' priced twice", item);
    return str_parse_f64("--price", eq + 1, 1e-9, 1e9, &p->price[i], err);
}

int job_cluster_prices_parse(const char *gpus, const char *prices, job_cluster_prices *out,
                             kvs_err *err)
{
    char buf[1024];
    memset(out, 0, sizeof *out);
    int rc = each_item("--gpus", gpus, buf, sizeof buf, add_gpu, out, err);
    if (rc || (rc = each_item("--price", prices, buf, sizeof buf, add_price, out, err)))
        return rc;
    for (int i = 0; i < out->n; i++)
        if (isnan(out->price[i]))
            return kvs_errf(err, KVS_EINVAL, "--price: no price for %s (dollars per GPU-hour, "
                                             "e.g. --price %s=2.5)",
                            out->gpu[i], out->gpu[i]);
    return KVS_OK;
}

void job_cluster_splits_free(job_cluster_splits *s)
{
    free(s->p);
    free(s->d);
    memset(s, 0, sizeof *s);
}

static int split_add(job_cluster_splits *s, int64_t cap, int64_t p, int64_t d, kvs_err *err)
{
    for (int64_t i = 0; i < s->n; i++)
        if (s->p[i] == p && s->d[i] == d)
            return kvs_errf(err, KVS_EINVAL, "--pd-splits: %lld:%lld given twice", (long long)p,
                            (long long)d);
    if (s->n == cap)
        return kvs_errf(err, KVS_EINVAL, "--pd-splits: more than %lld splits", (long long)cap);
    s->p[s->n] = p;
    s->d[s->n++] = d;
    return KVS_OK;
}

/* The items of a --pd-splits list. */
static int splits_list(const char *spec, int64_t max_replicas, job_cluster_splits *out,
                       int64_t cap, kvs_err *err)
{
    char buf[1024], *save;
    if (strlen(spec) >= sizeof buf)
        return kvs_errf(err, KVS_EINVAL, "--pd-splits: too long");
    strcpy(buf, spec);
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int64_t p, d;
        kvs_err e;
        if (cluster_pd_parse(t, &p, &d, &e) || p == 0)
            return kvs_errf(err, KVS_EINVAL, "--pd-splits: '%s' is not P:D with P, D >= 1 "
                                             "(or give auto or none)", t);
        if (p + d > max_replicas)
            return kvs_errf(err, KVS_EINVAL, "--pd-splits: %s has %lld replicas, over "
                                             "--max-replicas %lld", t, (long long)(p + d),
                            (long long)max_replicas);
        int rc = split_add(out, cap, p, d, err);
        if (rc)
            return rc;
    }
    return out->n > 0 ? KVS_OK : kvs_errf(err, KVS_EINVAL, "--pd-splits: empty list");
}

int job_cluster_splits_parse(const char *spec, int64_t max_replicas, job_cluster_splits *out,
                             kvs_err *err)
{
    memset(out, 0, sizeof *out);
    if (!spec || !*spec || !strcmp(spec, "none"))
        return KVS_OK;
    int is_auto = !strcmp(spec, "auto");
    if (is_auto && max_replicas > JOB_CLUSTER_MAX_AUTO)
        return kvs_errf(err, KVS_EINVAL, "--pd-splits auto: at most --max-replicas %d (give a "
                                         "list of P:D splits)", JOB_CLUSTER_MAX_AUTO);
    /* auto: (R - 1) splits of each R in 2 .. max; a list: one per comma + 1 */
    int64_t cap = is_auto ? max_replicas * (max_replicas - 1) / 2 : 1;
    for (const char *c = spec; !is_auto && *c; c++)
        cap += *c == ',';
    out->p = malloc((size_t)(cap > 0 ? cap : 1) * sizeof *out->p);
    out->d = malloc((size_t)(cap > 0 ? cap : 1) * sizeof *out->d);
    if (!out->p || !out->d) {
        job_cluster_splits_free(out);
        return kvs_errf(err, KVS_ENOMEM, "--pd-splits: out of memory");
    }
    int rc = KVS_OK;
    if (is_auto)
        for (int64_t r = 2; r <= max_replicas && !rc; r++)
            for (int64_t p = 1; p < r && !rc; p++)
                rc = split_add(out, cap, p, r - p, err);
    else
        rc = splits_list(spec, max_replicas, out, cap, err);
    if (!rc && out->n == 0)
        rc = kvs_errf(err, KVS_EINVAL, "--pd-splits auto: --max-replicas 1 leaves no P:D split");
    if (rc)
        job_cluster_splits_free(out);
    return rc;
}

int64_t job_cluster_cand_gpus(const job_cluster_cand *k)
{
    return k->p > 0 ? k->p * k->tp + (k->replicas - k->p) * k->tp_d : k->replicas * k->tp;
}

static int cmp_i64(int64_t a, int64_t b) { return a < b ? -1 : a > b; }

static int cand_cmp(const void *a, const void *b)
{
    const job_cluster_cand *x = a, *y = b;
    if (x->cost_h != y->cost_h)
        return x->cost_h < y->cost_h ? -1 : 1;
    int c;
    if ((c = cmp_i64(job_cluster_cand_gpus(x), job_cluster_cand_gpus(y))))
        return c;
    if (x->gpu != y->gpu)
        return x->gpu - y->gpu;
    if ((c = cmp_i64(x->p > 0, y->p > 0)) || (c = cmp_i64(x->tp, y->tp)) ||
        (c = cmp_i64(x->tp_d, y->tp_d)) || (c = cmp_i64(x->replicas, y->replicas)))
        return c;
    return cmp_i64(x->p, y->p);
}

typedef struct skip_ctx {
    void (*fn)(void *ctx, const char *gpu, int64_t tp, const char *why);
    void *ctx;
    const char *gpu;
} skip_ctx;

static void skip_one(void *vctx, int64_t tp, const char *why)
{
    skip_ctx *s = vctx;
    if (s->fn)
        s->fn(s->ctx, s->gpu, tp, why);
}

int job_cluster_candidates(const job_opts *base, const job_cluster_prices *p, const double *tps,
                           int ntp, int64_t max_replicas, const job_cluster_splits *splits,
                           void (*skipped)(void *ctx, const char *gpu, int64_t tp,
                                           const char *why),
                           void *ctx, job_cluster_cand **out, int *n, kvs_err *err)
{
    *out = NULL;
    *n = 0;
    const int64_t ns = splits ? splits->n : 0;
    size_t cap = (size_t)p->n * (size_t)ntp * ((size_t)max_replicas + (size_t)ntp * (size_t)ns);
    job_cluster_cand *c = malloc((cap ? cap : 1) * sizeof *c);
    if (!c)
        return kvs_errf(err, KVS_ENOMEM, "capacity: out of memory for %zu candidates", cap);
    int k = 0;
    for (int g = 0; g < p->n; g++) {
        job_opts o = *base;
        strcpy(o.cfg.gpu, p->gpu[g]);
        o.cfg.kv_link[0] = 0; /* --pd-splits' link: the TP checks run without --pd */
        double ok[64];
        int nok = ntp < 64 ? ntp : 64;
        memcpy(ok, tps, (size_t)nok * sizeof *ok);
        skip_ctx sc = {skipped, ctx, p->gpu[g]};
        kvs_err e;
        if (job_search_tps(&o, ok, &nok, skip_one, &sc, &e))
            continue; /* no degree fits this GPU: skipped above */
        for (int t = 0; t < nok; t++)
            for (int64_t r = 1; r <= max_replicas; r++)
                c[k++] = (job_cluster_cand){g, (int64_t)ok[t], r, 0, 0,
                                            (double)r * ok[t] * p->price[g]};
        for (int64_t i = 0; i < ns; i++) /* P:D, each pool its own TP (D1a) */
            for (int t = 0; t < nok; t++)
                for (int u = 0; u < nok; u++) {
                    job_cluster_cand x = {g, (int64_t)ok[t], splits->p[i] + splits->d[i],
                                          splits->p[i], (int64_t)ok[u], 0};
                    x.cost_h = (double)job_cluster_cand_gpus(&x) * p->price[g];
                    c[k++] = x;
                }
    }
    if (k == 0) {
        free(c);
        return kvs_errf(err, KVS_EINVAL,
                        "--search cluster: %s fits no GPU of --gpus at any degree of --tp-list",
                        base->cfg.model);
    }
    qsort(c, (size_t)k, sizeof *c, cand_cmp);
    *out = c;
    *n = k;
    return KVS_OK;
}

int job_cluster_point(job_search *c, const job_cluster_prices *p, const job_cluster_cand *k,
                      job_probe_point *pt, kvs_err *err)
{
    job_opts *o = &pt->opts;
    kvs_err e;
    int rc;
    *o = c->base;
    pt->index = c->next_point++;
    pt->stored_run = 0; /* a cluster search is not resumed */
    pt->stored_row = 0;
    strcpy(o->cfg.gpu, p->gpu[k->gpu]);
    o->cfg.tp = k->tp;
    o->cfg.replicas = k->replicas;
    char tp[24], rep[24];
    snprintf(tp, sizeof tp, "%lld", (long long)k->tp);
    snprintf(rep, sizeof rep, "%lld", (long long)k->replicas);
    snprintf(pt->value, sizeof pt->value, "%.6g", k->cost_h);
    snprintf(pt->key, sizeof pt->key, "gpu=%s tp=%s replicas=%s", o->cfg.gpu, tp, rep);
    int np = 4;
    if (k->p > 0) { /* P:D: the pools and their TPs */
        /* at most 1024 replicas and TP 1024 (the flags' bounds): ints fit */
        snprintf(o->cfg.pd, sizeof o->cfg.pd, "%d:%d", (int)k->p, (int)(k->replicas - k->p));
        snprintf(o->cfg.pd_tp, sizeof o->cfg.pd_tp, "%d:%d", (int)k->tp, (int)k->tp_d);
        size_t len = strlen(pt->key);
        snprintf(pt->key + len, sizeof pt->key - len, " pd=%s pd-tp=%s", o->cfg.pd,
                 o->cfg.pd_tp);
        np = 6;
    } else { /* aggregated: no hand-off, so no link */
        o->cfg.pd[0] = o->cfg.pd_tp[0] = o->cfg.kv_link[0] = 0;
    }
    o->cfg.sweep_id = c->sweep_id;
    o->cfg.slo_ttft_s = c->slo.req_ttft_s;
    o->cfg.slo_tpot_s = c->slo.req_tpot_s;
    o->cfg.slo_e2e_s = c->slo.req_e2e_s;
    if (!c->base.cfg.label[0])
        snprintf(o->cfg.label, sizeof o->cfg.label, "search %lld #%lld: %s",
                 (long long)c->sweep_id, (long long)pt->index, pt->key);
    const char *params[6] = {"gpu", "tp", "replicas", c->param, "pd", "pd-tp"};
    const char *values[6] = {o->cfg.gpu, tp, rep, pt->value, o->cfg.pd, o->cfg.pd_tp};
    if ((rc = store_sweep_add_point(c->st, c->sweep_id, pt->index, np, params, values, &e)) ||
        (rc = store_sweep_tag(c->st, c->sweep_id, pt->index, pt->key, &e)))
        return kvs_errf(err, rc, "--db: %s", e.msg);
    return KVS_OK;
}

double job_cluster_cost_per_mtok(double cost_h, double throughput_tok_s)
{
    if (!(throughput_tok_s > 0))
        return NAN;
    return cost_h / 3600.0 / throughput_tok_s * 1e6;
}
