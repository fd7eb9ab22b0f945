/* job_capacity.c — SLOs over run summaries and the rate / list searches
 * (see job.h). */
#include "job.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/str.h"
#include "../sim/run_fields.h"

/* A bound's metric is its row of the run_fields table (sim/run_fields.h):
 * the metric index is the row, the value the summary's field. */
static double metric_value(const run_summary *sum, int metric)
{
    size_t nf;
    const run_field *f = run_fields(&nf);
    run_value v = run_field_get(&f[metric], NULL, sum);
    return v.kind == RUN_VALUE_REAL ? v.d : v.kind == RUN_VALUE_INT ? (double)v.i : NAN;
}

/* Metric index and kind of a name; -1 if unknown. */
static int metric_lookup(const char *name, int *is_min)
{
    size_t nf;
    const run_field *all = run_fields(&nf), *f = run_field_slo(name);
    *is_min = f && (f->flags & RUN_FIELD_HIGHER_BETTER);
    return f ? (int)(f - all) : -1;
}

static int parse_pos(const char *key, const char *v, double *out, kvs_err *err)
{
    char *end;
    double x = strtod(v, &end);
    if (!*v || *end || !isfinite(x) || x <= 0)
        return kvs_errf(err, KVS_EINVAL, "--slo: %s: '%s' is not a positive number", key, v);
    *out = x;
    return KVS_OK;
}

int cap_slo_parse(const char *text, cap_slo *out, kvs_err *err)
{
    memset(out, 0, sizeof *out);
    if (strlen(text) >= sizeof out->text)
        return kvs_errf(err, KVS_EINVAL, "--slo: longer than %zu characters",
                        sizeof out->text - 1);
    strcpy(out->text, text);
    char buf[sizeof out->text];
    strcpy(buf, text);
    int has_att = 0;
    if (!*buf)
        return kvs_errf(err, KVS_EINVAL, "--slo: empty (e.g. ttft_p99=2,tpot_p99=0.1)");
    for (char *item = buf, *next; item; item = next) {
        next = strchr(item, ',');
        if (next)
            *next++ = 0;
        char *eq = strchr(item, '=');
        if (!eq)
            return kvs_errf(err, KVS_EINVAL, "--slo: '%s' is not metric=limit", item);
        *eq = 0;
        const char *v = eq + 1;
        double x = 0.0;
        double *req = !strcmp(item, "ttft") ? &out->req_ttft_s
                      : !strcmp(item, "tpot") ? &out->req_tpot_s
                      : !strcmp(item, "e2e")  ? &out->req_e2e_s
                                              : NULL;
        if (req) {
            if (*req > 0)
                return kvs_errf(err, KVS_EINVAL, "--slo: %s given twice", item);
            if (parse_pos(item, v, req, err))
                return KVS_EINVAL;
            continue;
        }
        int is_min, m = metric_lookup(item, &is_min);
        if (m < 0)
            return kvs_errf(err, KVS_EINVAL,
                            "--slo: unknown metric '%s' (ttft_, tpot_, e2e_, norm_latency_ + "
                            "p50|p90|p99|mean; throughput, throughput_tok_s, throughput_req_s, "
                            "goodput_req_s, attainment; per-request ttft, tpot, e2e)",
                            item);
        for (int i = 0; i < out->n; i++)
            if (out->b[i].metric == m)
                return kvs_errf(err, KVS_EINVAL, "--slo: %s given twice", item);
        if (out->n == CAP_MAX_BOUNDS)
            return kvs_errf(err, KVS_EINVAL, "--slo: more than %d bounds", CAP_MAX_BOUNDS);
        if (parse_pos(item, v, &x, err))
            return KVS_EINVAL;
        const run_field *mf = run_field_slo(item);
        int att = !strcmp(mf->name, "slo_attainment"), good = !strcmp(mf->name, "goodput_req_s");
        if (att && x > 1)
            return kvs_errf(err, KVS_EINVAL, "--slo: attainment: %g is not a fraction in (0, 1]",
                            x);
        has_att |= att || good;
        cap_bound *b = &out->b[out->n++];
        snprintf(b->name, sizeof b->name, "%.31s", item); /* a known metric: short */
        b->metric = m;
        b->is_min = is_min;
        b->limit = x;
    }
    int has_req = out->req_ttft_s > 0 || out->req_tpot_s > 0 || out->req_e2e_s > 0;
    if (has_att && !has_req)
        return kvs_errf(err, KVS_EINVAL, "--slo: attainment and goodput_req_s are measured "
                                         "against per-request targets: add ttft=S, tpot=S "
                                         "and/or e2e=S");
    if (has_req && !has_att)
        return kvs_errf(err, KVS_EINVAL, "--slo: per-request targets (ttft=, tpot=, e2e=) need "
                                         "a bound on attainment or goodput_req_s, e.g. "
                                         "attainment=0.9");
    if (out->n == 0)
        return kvs_errf(err, KVS_EINVAL, "--slo: no bound (e.g. ttft_p99=2)");
    return KVS_OK;
}

int cap_slo_check(const cap_slo *s, const run_summary *sum, double *ratio, char *verdict,
                  size_t n)
{
    double worst = -INFINITY;
    int wi = -1;
    for (int i = 0; i < s->n; i++) {
        const cap_bound *b = &s->b[i];
        double v = metric_value(sum, b->metric);
        double r;
        if (isnan(v))
            r = INFINITY;
        else if (b->is_min)
            r = v > 0 ? b->limit / v : INFINITY;
        else
            r = v / b->limit;
        if (r > worst) {
            worst = r;
            wi = i;
        }
    }
    int holds = worst <= 1.0;
    double share = sum->n_requests > 0 ? (double)sum->n_rejected / (double)sum->n_requests : 0.0;
    if (share > s->max_rejected) {
        holds = 0;
        if (1.0 + share - s->max_rejected > worst)
            worst = 1.0 + share - s->max_rejected;
        if (verdict && n)
            snprintf(verdict, n,
                     "rejected %.3g%% of requests (max %.3g%%): %lld over max-model-len, %lld over "
                     "max-batched-tokens, %lld over the KV cache",
                     100.0 * share, 100.0 * s->max_rejected, (long long)sum->n_reject_context,
                     (long long)sum->n_reject_token_budget, (long long)sum->n_reject_kv);
        verdict = NULL;
    }
    if (ratio)
        *ratio = worst;
    if (verdict && n) {
        if (holds || wi < 0) {
            snprintf(verdict, n, "ok");
        } else {
            const cap_bound *b = &s->b[wi];
            double v = metric_value(sum, b->metric);
            if (isnan(v))
                snprintf(verdict, n, "%s has no value (no request finished)", b->name);
            else
                snprintf(verdict, n, "%s %.4g %s %.4g", b->name, v, b->is_min ? "<" : ">",
                         b->limit);
        }
    }
    return holds;
}

double cap_round(double x)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%.6g", x);
    return strtod(buf, NULL);
}

const char *cap_status_name(cap_status s)
{
    static const char *const names[] = {"bracketed", "found", "unreachable", "unbounded"};
    return (unsigned)s < 4 ? names[s] : "?";
}

/* Probe x and keep the best (smallest ratio) probe. */
static int probe(cap_probe_fn fn, void *ctx, double x, cap_result *out, cap_probe *p)
{
    memset(p, 0, sizeof *p);
    p->x = x;
    int rc = fn(ctx, x, p);
    if (rc)
        return rc;
    p->x = x;
    if (out->probes++ == 0 || p->ratio < out->best.ratio)
        out->best = *p;
    return 0;
}

int cap_search_rate(double x0, double stop, int max_steps, cap_probe_fn fn, void *ctx,
                    cap_result *out)
{
    cap_probe p;
    int rc;
    memset(out, 0, sizeof *out);
    double x = cap_round(x0);
    if ((rc = probe(fn, ctx, x, out, &p)))
        return rc;
    if (p.holds) {
        out->lo = p;
        out->have_lo = 1;
        for (int i = 0; i < max_steps && !out->have_hi; i++) {
            x = cap_round(x * 2);
            if ((rc = probe(fn, ctx, x, out, &p)))
                return rc;
            if (p.holds)
                out->lo = p;
            else
                out->hi = p, out->have_hi = 1;
        }
        if (!out->have_hi) {
            out->status = CAP_STATUS_UNBOUNDED;
            return 0;
        }
    } else {
        out->hi = p;
        out->have_hi = 1;
        for (int i = 0; i < max_steps && !out->have_lo; i++) {
            x = cap_round(x / 2);
            if ((rc = probe(fn, ctx, x, out, &p)))
                return rc;
            if (p.holds)
                out->lo = p, out->have_lo = 1;
            else
                out->hi = p;
        }
        if (!out->have_lo) {
            out->status = CAP_STATUS_UNREACHABLE;
            return 0;
        }
    }
    while (out->hi.x / out->lo.x > stop) {
        double m = cap_round(sqrt(out->lo.x * out->hi.x));
        if (m <= out->lo.x || m >= out->hi.x)
            break; /* 6 digits cannot split the bracket further */
        if ((rc = probe(fn, ctx, m, out, &p)))
            return rc;
        if (p.holds)
            out->lo = p;
        else
            out->hi = p;
    }
    out->status = CAP_STATUS_BRACKETED;
    return 0;
}

int cap_search_list(const double *xs, int n, cap_probe_fn fn, void *ctx, cap_result *out)
{
    cap_probe p;
    int rc;
    memset(out, 0, sizeof *out);
    for (int i = 0; i < n; i++) {
        if ((rc = probe(fn, ctx, xs[i], out, &p)))
            return rc;
        if (p.holds) {
            out->lo = p;
            out->have_lo = 1;
            out->status = CAP_STATUS_FOUND;
            return 0;
        }
        out->hi = p;
        out->have_hi = 1;
    }
    out->status = CAP_STATUS_UNREACHABLE;
    return 0;
}

/* ------------------------------------------------------------ probes */

int job_search_param(const job_opts *base, int tp, const char **param, double *x0,
                     double *native_rps, kvs_err *err)
{
    *x0 = 0;
    *native_rps = 0;
    if (tp) {
        *param = "tp";
        return base->cfg.pd_tp[0]
                   ? kvs_errf(err, KVS_EINVAL, "--search tp: it varies --tp, which --pd-tp "
                                               "fixes; drop --pd-tp (or search with "
                                               "--search cluster --pd-splits)")
                   : KVS_OK;
    }
    if (!base->cfg.synthetic[0]) {
        int rc = job_workload_rate(base, native_rps, err);
        if (rc)
            return rc;
        *param = "rate";
        *x0 = cap_round(base->cfg.rate_rps > 0 ? base->cfg.rate_rps
                                               : *native_rps * base->cfg.rate_scale);
        return KVS_OK;
    }
    trace_synth_spec spec;
    int rc = trace_synth_parse(base->cfg.synthetic, &spec, err);
    if (rc)
        return rc;
    if (spec.arrival == TRACE_ARRIVAL_BURST)
        return kvs_errf(err, KVS_EINVAL, "--search rate: arrival=burst has no rate to search");
    *param = "rate";
    *x0 = spec.rate;
    return KVS_OK;
}

int job_search_tps(const job_opts *base, double *tps, int *n,
                   void (*skipped)(void *ctx, int64_t tp, const char *why), void *ctx,
                   kvs_err *err)
{
    model_spec m;
    gpu_spec g;
    kvs_err e;
    int rc = job_model_lookup(&base->cfg, &m, &g, err);
    if (rc)
        return rc;
    int k = 0;
    for (int i = 0; i < *n; i++) {
        job_opts o = *base;
        o.cfg.tp = (int64_t)tps[i];
        model_par par = {o.cfg.tp, o.cfg.ep, o.cfg.cp};
        run_config *c = &o.cfg;
        if (model_check_par(&m, &par, &e) || job_engine_apply(&o, &m, &g, &e) ||
            run_config_resolve(c, &m, &g, &e)) {
            if (skipped)
                skipped(ctx, c->tp, e.msg);
            continue;
        }
        tps[k++] = tps[i];
    }
    *n = k;
    if (k == 0)
        return kvs_errf(err, KVS_EINVAL, "--search tp: no degree of --tp-list is valid for %s on %s",
                        base->cfg.model, base->cfg.gpu);
    return KVS_OK;
}

int job_search_point(job_search *c, double x, job_probe_point *pt, kvs_err *err)
{
    job_opts *o = &pt->opts;
    kvs_err e;
    int rc;
    *o = c->base;
    pt->index = c->next_point++;
    if (!strcmp(c->param, "tp")) {
        o->cfg.tp = (int64_t)x;
        snprintf(pt->value, sizeof pt->value, "%lld", (long long)o->cfg.tp);
    } else {
        snprintf(pt->value, sizeof pt->value, "%.6g", x);
        if (o->cfg.synthetic[0]) {
            o->cfg.rate_rps = 0; /* the spec carries the rate */
            if ((rc = sweep_spec_set(o->cfg.synthetic, sizeof o->cfg.synthetic, "rate", pt->value,
                                     err)))
                return rc;
        } else {
            o->cfg.rate_rps = x; /* job_prepare scales the trace to it */
            o->cfg.rate_scale = 1.0;
        }
    }
    const char *pol = sched_policy_name(o->cfg.sched.policy);
    snprintf(pt->key, sizeof pt->key, "policy=%s %s=%s", pol, c->param, pt->value);
    o->cfg.sweep_id = c->sweep_id;
    o->cfg.slo_ttft_s = c->slo.req_ttft_s;
    o->cfg.slo_tpot_s = c->slo.req_tpot_s;
    o->cfg.slo_e2e_s = c->slo.req_e2e_s;
    if (!c->base.cfg.label[0])
        snprintf(o->cfg.label, sizeof o->cfg.label, "search %lld #%lld: %s",
                 (long long)c->sweep_id, (long long)pt->index, pt->key);
    const char *params[2] = {"policy", c->param};
    const char *values[2] = {pol, pt->value};
    store_search_point sp = {0, "", "", 0, 0};
    pt->stored_run = 0;
    pt->stored_row = 0;
    if (c->resume && (rc = store_search_point_get(c->st, c->sweep_id, pt->index, c->param, &sp, &e)))
        return kvs_errf(err, rc, "--db: %s", e.msg);
    /* a search is deterministic: resumed, it takes the same path, so
     * probe k is the stored probe k, unless what it read changed */
    if (sp.found && (strcmp(sp.policy, pol) || strcmp(sp.value, pt->value))) {
        char a[64], b[64];
        return kvs_errf(err, KVS_EINVAL,
                        "--resume: search %lld: probe %lld is stored as policy=%s %s=%s, but "
                        "the search now probes %s",
                        (long long)c->sweep_id, (long long)pt->index,
                        str_sanitize(a, sizeof a, sp.policy), c->param,
                        str_sanitize(b, sizeof b, sp.value), pt->key);
    }
    if (sp.run_id > 0) {
        pt->stored_run = sp.run_id;
        pt->stored_row = sp.has_probe;
        return KVS_OK;
    }
    /* the point's rows go in with its run, in the run's transaction (or
     * its spool file): nothing is written before the simulation */
    if ((rc = store_sweep_tag(c->st, c->sweep_id, pt->index, pt->key, &e)) ||
        (rc = store_sweep_tag_params(c->st, 2, params, values, &e))) {
        store_sweep_untag(c->st);
        return kvs_errf(err, rc, "--db: %s", e.msg);
    }
    return KVS_OK;
}

int job_search_record(job_search *c, const job_probe_point *pt, double x, int64_t run_id,
                      const run_summary *sum, cap_probe *out, kvs_err *err)
{
    kvs_err e;
    out->run_id = run_id;
    out->holds = cap_slo_check(&c->slo, sum, &out->ratio, out->verdict, sizeof out->verdict);
    if (pt->stored_row)
        return KVS_OK;
    int rc = store_search_probe(c->st, c->sweep_id, pt->index, run_id,
                                sched_policy_name(pt->opts.cfg.sched.policy), c->param, x,
                                out->holds, out->verdict, &e);
    return rc ? kvs_errf(err, rc, "--db: %s", e.msg) : KVS_OK;
}

int job_search_store_result(job_search *c, const char *slo_text, const cap_result *r,
                            kvs_err *err)
{
    kvs_err e;
    store_search_row row = {sched_policy_name(c->base.cfg.sched.policy),
                            c->param,
                            slo_text,
                            cap_status_name(r->status),
                            r->lo.x,
                            r->hi.x,
                            r->have_lo ? r->lo.run_id : 0,
                            r->have_hi ? r->hi.run_id : 0,
                            r->best.run_id,
                            r->probes};
    int rc = store_search_result(c->st, c->sweep_id, &row, &e);
    return rc ? kvs_errf(err, rc, "--db: %s", e.msg) : KVS_OK;
}
