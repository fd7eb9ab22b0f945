/* job_cluster.c — candidates and probes of the cluster capacity search
 * (job_cluster.h). */
#include "job_cluster.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/str.h"

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

static int cand_cmp(const void *a, const void *b)
{
    const job_cluster_cand *x = a, *y = b;
    if (x->cost_h != y->cost_h)
        return x->cost_h < y->cost_h ? -1 : 1;
    int64_t gx = x->tp * x->replicas, gy = y->tp * y->replicas;
    if (gx != gy)
        return gx < gy ? -1 : 1;
    if (x->gpu != y->gpu)
        return x->gpu - y->gpu;
    if (x->tp != y->tp)
        return x->tp < y->tp ? -1 : 1;
    return x->replicas < y->replicas ? -1 : x->replicas > y->replicas;
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
                           int ntp, int64_t max_replicas,
                           void (*skipped)(void *ctx, const char *gpu, int64_t tp,
                                           const char *why),
                           void *ctx, job_cluster_cand **out, int *n, kvs_err *err)
{
    *out = NULL;
    *n = 0;
    size_t cap = (size_t)p->n * (size_t)ntp * (size_t)max_replicas;
    job_cluster_cand *c = malloc((cap ? cap : 1) * sizeof *c);
    if (!c)
        return kvs_errf(err, KVS_ENOMEM, "capacity: out of memory for %zu candidates", cap);
    int k = 0;
    for (int g = 0; g < p->n; g++) {
        job_opts o = *base;
        strcpy(o.cfg.gpu, p->gpu[g]);
        double ok[64];
        int nok = ntp < 64 ? ntp : 64;
        memcpy(ok, tps, (size_t)nok * sizeof *ok);
        skip_ctx sc = {skipped, ctx, p->gpu[g]};
        kvs_err e;
        if (job_search_tps(&o, ok, &nok, skip_one, &sc, &e))
            continue; /* no degree fits this GPU: skipped above */
        for (int t = 0; t < nok; t++)
            for (int64_t r = 1; r <= max_replicas; r++)
                c[k++] = (job_cluster_cand){g, (int64_t)ok[t], r,
                                            (double)r * ok[t] * p->price[g]};
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
    o->cfg.sweep_id = c->sweep_id;
    o->cfg.slo_ttft_s = c->slo.req_ttft_s;
    o->cfg.slo_tpot_s = c->slo.req_tpot_s;
    o->cfg.slo_e2e_s = c->slo.req_e2e_s;
    if (!c->base.cfg.label[0])
        snprintf(o->cfg.label, sizeof o->cfg.label, "search %lld #%lld: %s",
                 (long long)c->sweep_id, (long long)pt->index, pt->key);
    const char *params[4] = {"gpu", "tp", "replicas", c->param};
    const char *values[4] = {o->cfg.gpu, tp, rep, pt->value};
    if ((rc = store_sweep_add_point(c->st, c->sweep_id, pt->index, 4, params, values, &e)) ||
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
