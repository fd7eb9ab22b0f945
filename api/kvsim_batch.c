/* kvsim_batch.c — the parts of kvsim.h that run many: compare's variants,
 * sweep grids point by point, and the capacity search against SLOs.  The
 * caller (the Python package) decides where each run executes (threads);
 * the configurations, the checks, the searches and the bookkeeping in the
 * database are the job layer's, as for `kvsim compare|sweep|capacity`. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../base/str.h"
#include "api_internal.h"

#define RATE_STOP 1.05     /* as kvsim capacity --search rate */
#define RATE_MAX_STEPS 16
#define MAX_POLICIES 8

/* ------------------------------------------------------------ compare */

char *kvsim_compare_defaults(const kvsim_run *r)
{
    job_variant vs[JOB_MAX_VARIANTS];
    int n = 0, no_pri = 0;
    job_compare_defaults(&r->opts, vs, &n, &no_pri);
    str_buf b = {0};
    str_buf_printf(&b, "%s", "");
    for (int i = 0; i < n; i++)
        str_buf_printf(&b, "%s%s%s\n", vs[i].name, vs[i].flags[0] ? ":" : "", vs[i].flags);
    if (b.oom) {
        free(b.s);
        return NULL;
    }
    return b.s;
}

int kvsim_run_variant(kvsim_run *r, const char *variant, int64_t compare_id)
{
    job_variant v;
    int rc;
    r->err.msg[0] = 0;
    if (r->executed)
        return kvs_errf(&r->err, KVS_EINVAL, "--variant: the run was already executed");
    if ((rc = job_variant_parse(variant, &v, &r->err)) ||
        (rc = job_variant_apply(&r->opts, &v, &r->err)))
        return rc;
    r->opts.cfg.compare_id = compare_id;
    if (compare_id > 0 && !r->opts.cfg.label[0])
        snprintf(r->opts.cfg.label, sizeof r->opts.cfg.label, "compare %lld: %.63s",
                 (long long)compare_id, v.name);
    return KVSIM_OK;
}

static int db_err(char err[1024], int rc, const kvs_err *e)
{
    char m[1100];
    snprintf(m, sizeof m, "--db: %s", e->msg);
    return api_err_out(err, rc, m);
}

int kvsim_db_reserve_compare(kvsim_db *db, const char *variants, int64_t n_runs, int64_t *out,
                             char err[1024])
{
    kvs_err e;
    int rc = store_compare_create(db->st, variants ? variants : "", n_runs, out, &e);
    return rc ? db_err(err, rc, &e) : KVSIM_OK;
}

int kvsim_db_finish_compare(kvsim_db *db, int64_t id, int complete, char err[1024])
{
    kvs_err e;
    int rc = store_group_finish(db->st, "compare", id, complete ? "complete" : "interrupted", &e);
    return rc ? db_err(err, rc, &e) : KVSIM_OK;
}

/* ------------------------------------------------------------ sweep */

struct kvsim_sweep {
    job_sweep plan;      /* base flags, grid, sweep id */
};

int kvsim_sweep_new(const char *base_args, const char *grid_text, kvsim_db *db,
                    kvsim_sweep **out, char err[1024])
{
    kvs_err e;
    *out = NULL;
    kvsim_sweep *s = calloc(1, sizeof *s);
    if (!s)
        return api_err_out(err, KVSIM_ENOMEM, "out of memory");
    int rc = job_sweep_from_texts(&s->plan, base_args, grid_text, "grid", "sweep", &e);
    for (int64_t i = 0; rc == 0 && i < s->plan.grid.n_points; i++)
        rc = job_sweep_point_check(&s->plan, i, &e);
    if (rc == 0 && db)
        rc = job_sweep_create(&s->plan, db->st, &e);
    if (rc) {
        kvsim_sweep_free(s);
        return api_err_out(err, rc, e.msg);
    }
    *out = s;
    return KVSIM_OK;
}

void kvsim_sweep_free(kvsim_sweep *s)
{
    if (!s)
        return;
    job_sweep_free(&s->plan);
    free(s);
}

int64_t kvsim_sweep_point_count(const kvsim_sweep *s) { return s->plan.grid.n_points; }
int64_t kvsim_sweep_id(const kvsim_sweep *s) { return s->plan.sweep_id; }

int kvsim_sweep_point_key(const kvsim_sweep *s, int64_t i, char *buf, size_t n)
{
    kvs_err e;
    if (i < 0 || i >= s->plan.grid.n_points)
        return KVSIM_EINVAL;
    return sweep_grid_point_key(&s->plan.grid, i, buf, n, &e);
}

int kvsim_sweep_point_run(const kvsim_sweep *s, int64_t i, kvsim_run **out, char err[1024])
{
    kvs_err e;
    *out = NULL;
    if (i < 0 || i >= s->plan.grid.n_points)
        return api_err_out(err, KVSIM_EINVAL, "sweep point out of range");
    kvsim_run *r = kvsim_run_new();
    if (!r)
        return api_err_out(err, KVSIM_ENOMEM, "out of memory");
    int rc = job_sweep_point_opts(&s->plan, i, &r->opts, &e);
    if (rc) {
        kvsim_run_free(r);
        return api_err_out(err, rc, e.msg);
    }
    *out = r;
    return KVSIM_OK;
}

int kvsim_sweep_store_point(const kvsim_sweep *s, int64_t i, kvsim_run *r, kvsim_db *db)
{
    char key[1024];
    kvs_err e;
    int rc;
    if ((rc = kvsim_sweep_point_key(s, i, key, sizeof key)))
        return kvs_errf(&r->err, rc, "sweep point %lld out of range", (long long)i);
    if ((rc = store_sweep_tag(db->st, s->plan.sweep_id, i, key, &e)))
        return kvs_errf(&r->err, rc, "point %lld (%s): --db: %s", (long long)i, key, e.msg);
    rc = kvsim_run_store(r, db);
    store_sweep_untag(db->st);
    if (rc) {
        kvs_err m = r->err;
        kvs_errf(&r->err, rc, "point %lld (%s): %s", (long long)i, key, m.msg);
    }
    return rc;
}

/* ------------------------------------------------------------ capacity */

typedef struct probe_ctx {
    job_search js;       /* base flags with the policy searched, store, SLO */
    kvs_err err;         /* a probe's error */
} probe_ctx;

static int probe_run(void *vctx, double x, cap_probe *out)
{
    probe_ctx *c = vctx;
    job_probe_point pt;
    kvs_err e;
    int rc;
    if ((rc = job_search_point(&c->js, x, &pt, &c->err)))
        return rc;
    run_result res = {0};
    rc = job_execute(&pt.opts, c->js.st, &out->run_id, &res, &e);
    store_sweep_untag(c->js.st);
    if (rc)
        return kvs_errf(&c->err, rc, "capacity (%s): %s", pt.key, e.msg);
    rc = job_search_record(&c->js, &pt, x, out->run_id, &res.sum, out, &c->err);
    run_result_free(&res);
    return rc;
}

static void probe_json(str_buf *b, const char *name, int have, const cap_probe *p)
{
    str_buf_printf(b, ", \"%s\": ", name);
    if (!have) {
        str_buf_printf(b, "null");
        return;
    }
    str_buf_printf(b, "{\"value\": %.17g, \"run_id\": %lld, \"holds\": %s, \"verdict\": ", p->x,
                   (long long)p->run_id, p->holds ? "true" : "false");
    str_buf_json(b, p->verdict);
    str_buf_printf(b, "}");
}

/* The policies of "a,b" (or the base's for NULL / ""). */
static int parse_policies(const char *arg, int base, int *pol, int *n, kvs_err *err)
{
    char buf[256];
    *n = 0;
    if (!arg || !*arg) {
        pol[(*n)++] = base;
        return KVS_OK;
    }
    if (strlen(arg) >= sizeof buf)
        return kvs_errf(err, KVS_EINVAL, "--policies: too long");
    strcpy(buf, arg);
    for (char *save, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int v = sched_policy_parse(t);
        if (v < 0)
            return kvs_errf(err, KVS_EINVAL,
                            "--policies: unknown policy '%s' (see kvsim run --help)", t);
        if (*n == MAX_POLICIES)
            return kvs_errf(err, KVS_EINVAL, "--policies: at most %d", MAX_POLICIES);
        pol[(*n)++] = v;
    }
    return *n ? KVS_OK : kvs_errf(err, KVS_EINVAL, "--policies: empty list");
}

/* Parse base_args (one argument per line) into o. */
static int opts_from_args(const char *base_args, job_opts *o, kvs_err *err)
{
    char *copy = strdup(base_args);
    size_t n = 2;
    for (const char *c = base_args; *c; c++)
        n += *c == '\n';
    char **argv = calloc(n, sizeof *argv);
    int rc = KVS_ENOMEM;
    if (!copy || !argv) {
        kvs_errf(err, rc, "out of memory");
        goto out;
    }
    int argc = 0;
    argv[argc++] = (char *)"capacity";
    for (char *s = copy, *nl; *s && (nl = strchr(s, '\n')); s = nl + 1) {
        *nl = 0;
        argv[argc++] = s;
    }
    job_opts_init(o);
    rc = job_opts_parse_argv(o, argc, argv, "capacity", err);
out:
    free(argv);
    free(copy);
    return rc;
}

/* Set up the search of base_args: flags, SLO, parameter, start, TPs. */
static int search_setup(const char *base_args, const char *search, const char *slo,
                        probe_ctx *c, double *x0, double *tps, int *ntp, kvs_err *err)
{
    int tp = search && !strcmp(search, "tp");
    if (!search || (strcmp(search, "rate") && !tp))
        return kvs_errf(err, KVS_EINVAL, "--search: '%s' is not rate or tp",
                        search ? search : "");
    if (!slo || !*slo)
        return kvs_errf(err, KVS_EINVAL,
                        "--search needs --slo, e.g. --slo ttft_p99=2,tpot_p99=0.1");
    int rc = cap_slo_parse(slo, &c->js.slo, err);
    if (rc == 0)
        rc = opts_from_args(base_args, &c->js.base, err);
    if (rc == 0 && tp && job_param_given(&c->js.base, "tp"))
        rc = kvs_errf(err, KVS_EINVAL, "--search tp: the TP degree is what is searched; drop "
                                       "--tp (tps 1, 2, 4, 8 are tried)");
    if (rc == 0)
        rc = job_search_param(&c->js.base, tp, &c->js.param, x0, &c->js.native_rps, err);
    if (rc == 0 && tp)
        rc = job_search_tps(&c->js.base, tps, ntp, NULL, NULL, err);
    return rc;
}

int kvsim_capacity_search(const char *base_args, const char *search, const char *slo,
                          const char *policies, kvsim_db *db, char **json, char err[1024])
{
    probe_ctx c;
    memset(&c, 0, sizeof c);
    kvs_err e;
    double x0 = 0, tps[] = {1, 2, 4, 8};
    int ntp = 4, pols[MAX_POLICIES], npol = 0;
    *json = NULL;
    int rc = search_setup(base_args, search, slo, &c, &x0, tps, &ntp, &e);
    if (rc == 0)
        rc = parse_policies(policies, c.js.base.cfg.sched.policy, pols, &npol, &e);
    if (rc)
        return api_err_out(err, rc, e.msg);
    char desc[1024];
    snprintf(desc, sizeof desc, "search=%s\nslo=%s\npolicies=%s\n%s", search, slo,
             policies && *policies ? policies : sched_policy_name(pols[0]),
             strcmp(search, "tp") ? "" : "tp-list=1,2,4,8\n");
    store_sweep_def def = {"search", desc, base_args, 0, 0, NULL, NULL, NULL, 0, NULL, NULL, NULL};
    c.js.st = db->st;
    if ((rc = store_sweep_create(db->st, &def, &c.js.sweep_id, &e))) {
        char m[1100];
        snprintf(m, sizeof m, "--db: %s", e.msg);
        return api_err_out(err, rc, m);
    }
    str_buf b = {0};
    str_buf_printf(&b, "{\"search_id\": %lld, \"search\": \"%s\", \"param\": \"%s\", \"slo\": ",
                   (long long)c.js.sweep_id, search, c.js.param);
    str_buf_json(&b, slo);
    str_buf_printf(&b, ", \"results\": [");
    job_opts base = c.js.base;
    for (int k = 0; k < npol && rc == 0; k++) {
        cap_result R;
        c.js.base = base;
        c.js.base.cfg.sched.policy = pols[k];
        rc = strcmp(search, "tp") ? cap_search_rate(x0, RATE_STOP, RATE_MAX_STEPS, probe_run,
                                                    &c, &R)
                                  : cap_search_list(tps, ntp, probe_run, &c, &R);
        if (rc)
            break;
        if ((rc = job_search_store_result(&c.js, slo, &R, &c.err)))
            break;
        str_buf_printf(&b, "%s{\"policy\": \"%s\", \"status\": \"%s\", \"probes\": %d",
                       k ? ", " : "", sched_policy_name(pols[k]), cap_status_name(R.status),
                       R.probes);
        probe_json(&b, "holds", R.have_lo, &R.lo);
        probe_json(&b, "fails", R.have_hi, &R.hi);
        probe_json(&b, "best", 1, &R.best);
        str_buf_printf(&b, "}");
    }
    str_buf_printf(&b, "]}");
    if (rc) {
        free(b.s);
        char m[1200];
        snprintf(m, sizeof m, "search %lld stopped: %s", (long long)c.js.sweep_id, c.err.msg);
        return api_err_out(err, rc, m);
    }
    if (b.oom) {
        free(b.s);
        return api_err_out(err, KVSIM_ENOMEM, "out of memory");
    }
    *json = b.s;
    return KVSIM_OK;
}
