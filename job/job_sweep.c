/* job_sweep.c — a sweep plan (see job.h): rebuilding it from its stored
 * texts, each point's run flags and checks, the points still to run, and
 * simulating and storing one point. */
#include "job.h"

#include "../store/store_spool.h"

#include <errno.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "../base/str.h"

/* ------------------------------------------------------------ plan */

int job_args_split(const char *text, const char *argv0, const char *where, int *argc,
                   char ***argv, char **buf, kvs_err *err)
{
    int n = 1;
    for (const char *c = text; *c; c++)
        n += *c == '\n';
    *argc = 0;
    *buf = strdup(text);
    *argv = calloc((size_t)n + 1, sizeof **argv);
    if (!*buf || !*argv)
        return kvs_errf(err, KVS_ENOMEM, "out of memory");
    (*argv)[(*argc)++] = (char *)argv0;
    for (char *s = *buf; *s;) {
        char *nl = strchr(s, '\n');
        if (!nl)
            return kvs_errf(err, KVS_EINVAL, "%s: stored arguments do not end in a newline",
                            where);
        *nl = 0;
        (*argv)[(*argc)++] = s;
        s = nl + 1;
    }
    return KVS_OK;
}

int job_sweep_from_texts(job_sweep *p, const char *base_args, const char *grid_text,
                         const char *where, const char *cmd, kvs_err *err)
{
    int rc;
    kvs_err e;
    char *copy = NULL;
    char **argv = NULL;
    int argc = 0;
    if ((rc = job_args_split(base_args, "sweep", where, &argc, &argv, &copy, err)))
        goto out;
    job_opts_init(&p->base);
    char sub[1200];
    snprintf(sub, sizeof sub, "%s: %s", cmd, where);
    if ((rc = job_opts_parse_argv(&p->base, argc, argv, sub, &e))) {
        kvs_errf(err, rc, "%s: %s", where, e.msg);
        goto out;
    }
    sweep_grid_init(&p->grid);
    if ((rc = sweep_grid_read_text(&p->grid, job_param_options(), grid_text, where, err)))
        goto out;
    if (p->grid.n_axes == 0) {
        rc = kvs_errf(err, KVS_EINVAL, "%s: empty grid", where);
        goto out;
    }
    free(p->base_args);
    free(p->grid_text);
    p->base_args = strdup(base_args);
    p->grid_text = sweep_grid_text(&p->grid);
    rc = KVS_ENOMEM;
    if (!p->base_args || !p->grid_text) {
        kvs_errf(err, rc, "out of memory");
        goto out;
    }
    rc = KVS_OK;
out:
    free(argv);
    free(copy);
    return rc;
}

void job_sweep_free(job_sweep *p)
{
    sweep_grid_free(&p->grid);
    free(p->base_args);
    free(p->grid_text);
    free(p->todo);
    p->base_args = p->grid_text = NULL;
    p->todo = NULL;
    p->n_todo = 0;
}

/* ------------------------------------------------------------ points */

/* Apply one axis's value (pass 0: flags and switches, pass 1: spec keys). */
static int apply_axis(const sweep_axis *a, const char *v, int pass, job_opts *o, kvs_err *err)
{
    kvs_err e;
    int rc = KVS_OK;
    const job_param *jp = a->kind == SWEEP_KEY_SYNTH ? NULL : job_param_by_id(a->opt_val);
    if (a->kind != SWEEP_KEY_SYNTH && !jp) /* the grid was read with another table */
        return kvs_errf(err, KVS_EINTERNAL, "%s: %s: not a run flag", a->where, a->key);
    if (pass == 0 && a->kind == SWEEP_KEY_FLAG) {
        rc = job_param_set(o, jp->name, v, &e);
    } else if (pass == 0 && a->kind == SWEEP_KEY_SWITCH) {
        /* off: the switch's negation where it has one (a profile may turn
         * it on by default), else the base does not give it (the CLI's
         * setup checks) */
        const char *neg = job_param_negation(jp->name);
        if (!strcmp(v, "on"))
            rc = job_param_set(o, jp->name, NULL, &e);
        else if (neg)
            rc = job_param_set(o, neg, NULL, &e);
    } else if (pass == 1 && a->kind == SWEEP_KEY_SYNTH && !o->cfg.synthetic[0] &&
               !strcmp(a->key, "rate")) {
        rc = job_param_set(o, "rate", v, &e); /* a trace file: scaled to v req/s (--rate) */
    } else if (pass == 1 && a->kind == SWEEP_KEY_SYNTH) {
        if (!o->cfg.synthetic[0])
            return kvs_errf(err, KVS_EINVAL,
                            "%s: %s: sets a key of the --synthetic spec, but the runs "
                            "have no --synthetic workload",
                            a->where, a->key);
        rc = sweep_spec_set(o->cfg.synthetic, sizeof o->cfg.synthetic, a->synth_key, v, &e);
    }
    return rc ? kvs_errf(err, rc, "%s: %s", a->where, e.msg) : KVS_OK;
}

int job_sweep_point_opts(const job_sweep *p, int64_t index, job_opts *o, kvs_err *err)
{
    const sweep_grid *g = &p->grid;
    int choice[SWEEP_MAX_AXES];
    int rc;
    *o = p->base;
    sweep_grid_choice(g, index, choice);
    for (int pass = 0; pass < 2; pass++) /* flags first, then spec keys */
        for (int i = 0; i < g->n_axes; i++)
            if ((rc = apply_axis(&g->axes[i], g->axes[i].values[choice[i]], pass, o, err)))
                return rc;
    o->cfg.sweep_id = p->sweep_id;
    if (!p->base.cfg.label[0]) {
        char key[1024];
        if ((rc = sweep_grid_point_key(g, index, key, sizeof key, err)))
            return rc;
        snprintf(o->cfg.label, sizeof o->cfg.label, "sweep %lld #%lld: %.200s",
                 (long long)p->sweep_id, (long long)index, key);
    }
    return KVS_OK;
}

int job_sweep_point_check(const job_sweep *p, int64_t index, kvs_err *err)
{
    job_opts o;
    char key[1024];
    kvs_err e;
    int rc;
    if ((rc = job_sweep_point_opts(p, index, &o, err)) ||
        (rc = sweep_grid_point_key(&p->grid, index, key, sizeof key, err)))
        return rc;
    if ((rc = job_check(&o, &e)))
        return kvs_errf(err, rc, "point %lld (%s): %s", (long long)index, key, e.msg);
    return KVS_OK;
}

static int check_key(void *ctx, int64_t point, const char *key)
{
    const job_sweep *p = ctx;
    char want[1024];
    kvs_err err;
    return sweep_grid_point_key(&p->grid, point, want, sizeof want, &err) || strcmp(want, key);
}

static const char *param_value(void *ctx, int64_t point, int i)
{
    const sweep_grid *g = ctx;
    int choice[SWEEP_MAX_AXES];
    sweep_grid_choice(g, point, choice);
    return g->axes[i].values[choice[i]];
}

/* Every point's trace file into in.  Cost: O(points x distinct files). */
static int collect_inputs(const job_sweep *p, job_inputs *in, kvs_err *err)
{
    for (int64_t i = 0; i < p->grid.n_points; i++) {
        job_opts o;
        int rc = job_sweep_point_opts(p, i, &o, err);
        if (rc || (rc = job_inputs_add_opts(in, &o, err)))
            return rc;
    }
    return KVS_OK;
}

int job_sweep_create(job_sweep *p, store *st, kvs_err *err)
{
    kvs_err e;
    const char *params[SWEEP_MAX_AXES];
    job_inputs in = {0, 0, NULL, NULL, NULL};
    for (int i = 0; i < p->grid.n_axes; i++)
        params[i] = p->grid.axes[i].key;
    int rc = collect_inputs(p, &in, err);
    if (rc) {
        job_inputs_free(&in);
        return rc;
    }
    store_sweep_def def = {"grid",         p->grid_text, p->base_args,
                           p->grid.n_points, p->grid.n_axes, params,
                           param_value,    &p->grid,     in.n,
                           (const char *const *)in.path, (const char *const *)in.abs,
                           (const char *const *)in.sha};
    rc = store_sweep_create(st, &def, &p->sweep_id, &e);
    job_inputs_free(&in);
    return rc ? kvs_errf(err, rc, "--db: %s", e.msg) : KVS_OK;
}

int job_sweep_check_inputs(const job_sweep *p, store *st, kvs_err *err)
{
    int64_t seen = 0;
    int rc = job_inputs_check(st, "sweep", "sweep", p->sweep_id, &seen, err);
    if (rc || seen > 0)
        return rc;
    /* an older sweep: its points' runs name the bytes they read */
    job_inputs in = {0, 0, NULL, NULL, NULL};
    if ((rc = collect_inputs(p, &in, err))) {
        job_inputs_free(&in);
        return kvs_errf(err, rc, "--resume: sweep %lld: %s", (long long)p->sweep_id, err->msg);
    }
    for (int i = 0; i < in.n && !rc; i++) {
        sqlite3_stmt *q = NULL;
        if (sqlite3_prepare_v2(store_db(st),
                               "SELECT count(*) FROM sweep_points sp JOIN runs r USING (run_id) "
                               "WHERE sp.sweep_id = ?1 AND r.trace_path = ?2 AND "
                               "r.trace_sha256 IS NOT NULL AND r.trace_sha256 != ?3",
                               -1, &q, NULL) != SQLITE_OK) {
            rc = kvs_errf(err, KVS_EDB, "--db: %s", sqlite3_errmsg(store_db(st)));
            break;
        }
        sqlite3_bind_int64(q, 1, p->sweep_id);
        sqlite3_bind_text(q, 2, in.path[i], -1, SQLITE_STATIC);
        sqlite3_bind_text(q, 3, in.sha[i], -1, SQLITE_STATIC);
        if (sqlite3_step(q) == SQLITE_ROW && sqlite3_column_int64(q, 0) > 0) {
            char safe[512];
            rc = kvs_errf(err, KVS_EINVAL,
                          "--resume: sweep %lld: --trace %s is not the file its runs read "
                          "(SHA-256 differs)",
                          (long long)p->sweep_id, str_sanitize(safe, sizeof safe, in.abs[i]));
        }
        sqlite3_finalize(q);
    }
    job_inputs_free(&in);
    return rc;
}

int job_sweep_todo(job_sweep *p, store *st, kvs_err *err)
{
    kvs_err e;
    int64_t n = p->grid.n_points;
    int64_t *ids = calloc((size_t)n, sizeof *ids);
    free(p->todo);
    p->todo = calloc((size_t)n, sizeof *p->todo);
    if (!ids || !p->todo) {
        free(ids);
        return kvs_errf(err, KVS_ENOMEM, "out of memory");
    }
    int rc = store_sweep_done(st, p->sweep_id, n, ids, check_key, p, &e);
    if (rc) {
        free(ids);
        return kvs_errf(err, rc, "--db: %s", e.msg);
    }
    p->n_todo = 0;
    for (int64_t i = 0; i < n; i++)
        if (!ids[i])
            p->todo[p->n_todo++] = i;
    free(ids);
    return KVS_OK;
}

void job_sweep_simulate(const job_sweep *p, int64_t index, store *cost_st, run_packed *out,
                        kvs_err *err)
{
    job_opts o;
    model_spec m;
    gpu_spec g;
    kvs_err e;
    memset(out, 0, sizeof *out);
    if (err)
        err->msg[0] = 0;
    out->point_index = index;
    out->status = 2;
    if (job_sweep_point_opts(p, index, &o, err)) {
        snprintf(out->error, sizeof out->error, "invalid point (see the rank's error)");
        return;
    }
    if (job_prepare(&o, &m, &g, &out->tr, err)) {
        snprintf(out->error, sizeof out->error, "could not prepare the run (see the rank's error)");
        return;
    }
    if (!strncmp(o.cfg.cost, "calibrated", 10) && !cost_st) {
        snprintf(out->error, sizeof out->error, "--cost %s needs the database on every rank",
                 o.cfg.cost);
        return;
    }
    int ran;
    int rc = job_simulate(&o, &m, &g, &out->tr, cost_st, &out->res, &ran, &e);
    if (ran)
        out->cfg = o.cfg; /* with cost_desc as the cost selection set it */
    if (rc) {
        out->status = ran ? 1 : 2;
        snprintf(out->error, sizeof out->error, "%s", e.msg);
        run_result_free(&out->res);
    } else {
        out->status = 0;
        out->res.tr = &out->tr;
    }
}

int job_sweep_store(const job_sweep *p, store *st, const run_packed *r, int64_t *run_id,
                    kvs_err *err)
{
    char key[1024];
    kvs_err e;
    int64_t idx = r->point_index;
    int rc;
    if ((rc = sweep_grid_point_key(&p->grid, idx, key, sizeof key, err)))
        return rc;
    if (r->status == 2)
        return kvs_errf(err, KVS_EINVAL, "point %lld (%s): not run: %s", (long long)idx, key,
                        r->error);
    if ((rc = store_sweep_tag(st, p->sweep_id, idx, key, &e)))
        return kvs_errf(err, rc, "--db: %s", e.msg);
    if (r->status == 0) {
        run_result res = r->res;
        res.tr = &r->tr;
        if ((rc = store_save_run(st, &r->cfg, &res, run_id, &e)))
            kvs_errf(err, rc, "point %lld (%s): --db: %s", (long long)idx, key, e.msg);
    } else {
        int64_t id = 0;
        rc = KVS_EINVAL;
        if (store_save_failed_run(st, &r->cfg, &r->tr, r->error, r->res.started_at,
                                   r->res.wall_s, &id, &e) == 0)
            kvs_errf(err, rc, "point %lld (%s): %s (recorded as failed run %lld)", (long long)idx,
                     key, r->error, (long long)id);
        else
            kvs_errf(err, rc, "point %lld (%s): %s", (long long)idx, key, r->error);
    }
    store_sweep_untag(st);
    return rc;
}
