/* sweep_plan.c — building a sweep plan (new or resumed), running, simulating
 * and storing its points, the progress line and the final report (see
 * sweep.h). */
#include "sweep.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "cli.h"


/* ------------------------------------------------------------ argv */

/* Join args with a '\n' after each; NULL (after printing) if an argument
 * holds a newline or memory runs out. */
static char *join_args(const char *cmd, int n, char **args)
{
    size_t len = 1;
    for (int i = 0; i < n; i++) {
        if (strchr(args[i], '\n')) {
            cli_fail(cmd, "argument '%s' holds a newline, which a sweep cannot store", args[i]);
            return NULL;
        }
        len += strlen(args[i]) + 1;
    }
    char *s = malloc(len), *q = s;
    if (!s) {
        cli_fail(cmd, "out of memory");
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        size_t k = strlen(args[i]);
        memcpy(q, args[i], k);
        q[k] = '\n';
        q += k + 1;
    }
    *q = 0;
    return s;
}

int sweep_plan_from_texts(const char *cmd, const char *base_args, const char *grid_text,
                          const char *where, sweep_plan *p)
{
    int rc = CLI_EXIT_ERR;
    kvs_err err;
    char *copy = strdup(base_args);
    int n = 1;
    for (const char *c = base_args; *c; c++)
        n += *c == '\n';
    char **argv = calloc((size_t)n + 1, sizeof *argv);
    if (!copy || !argv) {
        cli_fail(cmd, "out of memory");
        goto out;
    }
    int argc = 0;
    argv[argc++] = (char *)"sweep";
    for (char *s = copy; *s;) {
        char *nl = strchr(s, '\n');
        if (!nl) {
            cli_fail(cmd, "%s: stored arguments do not end in a newline", where);
            goto out;
        }
        *nl = 0;
        argv[argc++] = s;
        s = nl + 1;
    }
    run_opts_defaults(&p->base);
    char sub[1200];
    snprintf(sub, sizeof sub, "%s: %s", cmd, where);
    if (run_opts_parse_argv(sub, &p->base, argc, argv))
        goto out;
    sweep_grid_init(&p->grid);
    if (sweep_grid_read_text(&p->grid, run_opts_long, grid_text, where, &err)) {
        cli_fail(cmd, "%s", err.msg);
        goto out;
    }
    if (p->grid.n_axes == 0) {
        cli_fail(cmd, "%s: empty grid", where);
        goto out;
    }
    free(p->base_args);
    free(p->grid_text);
    p->base_args = strdup(base_args);
    p->grid_text = sweep_grid_text(&p->grid);
    if (!p->base_args || !p->grid_text) {
        cli_fail(cmd, "out of memory");
        goto out;
    }
    rc = 0;
out:
    free(argv);
    free(copy);
    return rc;
}

void sweep_plan_free(sweep_plan *p)
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

int sweep_point_opts(const char *cmd, const sweep_plan *p, int64_t index, run_opts *o)
{
    const sweep_grid *g = &p->grid;
    int choice[SWEEP_MAX_AXES];
    char sub[1200];
    kvs_err err;
    *o = p->base;
    sweep_grid_choice(g, index, choice);
    for (int pass = 0; pass < 2; pass++) { /* flags first, then spec keys */
        for (int i = 0; i < g->n_axes; i++) {
            const sweep_axis *a = &g->axes[i];
            const char *v = a->values[choice[i]];
            snprintf(sub, sizeof sub, "%s: %s", cmd, a->where);
            if (pass == 0 && a->kind == SWEEP_KEY_FLAG) {
                if (run_opts_apply(sub, o, a->opt_val, v))
                    return CLI_EXIT_ERR;
            } else if (pass == 0 && a->kind == SWEEP_KEY_SWITCH) {
                /* off: the base does not give the switch (sweep_setup checks) */
                if (!strcmp(v, "on") && run_opts_apply(sub, o, a->opt_val, NULL))
                    return CLI_EXIT_ERR;
            } else if (pass == 1 && a->kind == SWEEP_KEY_SYNTH) {
                if (!o->cfg.synthetic[0])
                    return cli_fail(sub, "%s: sets a key of the --synthetic spec, but the runs "
                                         "have no --synthetic workload%s",
                                    a->key,
                                    strcmp(a->key, "rate") ? ""
                                                           : " (vary rate-scale for a trace file)");
                if (sweep_spec_set(o->cfg.synthetic, sizeof o->cfg.synthetic, a->synth_key, v,
                                   &err))
                    return cli_fail(sub, "%s", err.msg);
            }
        }
    }
    o->cfg.sweep_id = p->sweep_id;
    if (!p->base.cfg.label[0]) {
        char key[1024];
        if (sweep_grid_point_key(g, index, key, sizeof key, &err))
            return cli_fail(cmd, "%s", err.msg);
        snprintf(o->cfg.label, sizeof o->cfg.label, "sweep %lld #%lld: %.200s",
                 (long long)p->sweep_id, (long long)index, key);
    }
    return 0;
}

/* What run_opts_prepare would reject, checked without loading the trace. */
static int point_check(const char *cmd, int64_t index, const char *key, const run_opts *o)
{
    run_config c = o->cfg;
    model_spec m;
    gpu_spec g;
    trace_synth_spec spec;
    kvs_err err;
    if (model_lookup(c.model, &m, &err) || gpu_lookup(c.gpu, &g, &err) ||
        model_check_tp(&m, c.tp, &err))
        goto fail;
    if (c.trace_path[0] && c.synthetic[0])
        return cli_fail(cmd, "point %lld (%s): --trace and --synthetic: give one workload",
                        (long long)index, key);
    if (c.synthetic[0] && trace_synth_parse(c.synthetic, &spec, &err))
        goto fail;
    if (c.trace_path[0] && access(c.trace_path, R_OK) != 0)
        return cli_fail(cmd, "point %lld (%s): --trace %s: cannot read it", (long long)index, key,
                        c.trace_path);
    if (c.sched.policy == SCHED_POLICY_PRIORITY && c.sched.batching == SCHED_BATCHING_STATIC &&
        c.sched.priority_preemption)
        return cli_fail(cmd, "point %lld (%s): --priority-preemption: static batches are never "
                             "preempted",
                        (long long)index, key);
    if (run_config_resolve(&c, &m, &g, &err))
        goto fail;
    return 0;
fail:
    return cli_fail(cmd, "point %lld (%s): %s", (long long)index, key, err.msg);
}

int sweep_point_exec(const char *cmd, const sweep_plan *p, store *st, int64_t index,
                     int64_t *run_id)
{
    run_opts o;
    char key[1024], sub[1100];
    kvs_err err;
    if (sweep_point_opts(cmd, p, index, &o))
        return CLI_EXIT_ERR;
    if (sweep_grid_point_key(&p->grid, index, key, sizeof key, &err))
        return cli_fail(cmd, "%s", err.msg);
    if (store_sweep_tag(st, p->sweep_id, index, key, &err))
        return cli_fail(cmd, "--db: %s", err.msg);
    snprintf(sub, sizeof sub, "%s (point %lld: %.900s)", cmd, (long long)index, key);
    int rc = run_opts_execute(sub, &o, st, run_id, NULL);
    store_sweep_untag(st);
    return rc;
}

void sweep_point_simulate(const sweep_plan *p, int64_t index, store *cost_st, run_packed *out)
{
    const char *cmd = "sweep";
    run_opts o;
    model_spec m;
    gpu_spec g;
    cost_model cost = {0};
    kvs_err err;
    memset(out, 0, sizeof *out);
    out->point_index = index;
    out->status = 2;
    if (sweep_point_opts(cmd, p, index, &o)) {
        snprintf(out->error, sizeof out->error, "invalid point (see the rank's error)");
        return;
    }
    if (run_opts_prepare(cmd, &o, &m, &g, &out->tr)) {
        snprintf(out->error, sizeof out->error, "could not prepare the run (see the rank's error)");
        return;
    }
    if (!strncmp(o.cfg.cost, "calibrated", 10) && !cost_st) {
        snprintf(out->error, sizeof out->error, "--cost %s needs the database on every rank",
                 o.cfg.cost);
        return;
    }
    if (job_cost_select(&o.cfg, &m, &g, cost_st, o.force_profile, &cost, &err)) {
        snprintf(out->error, sizeof out->error, "--cost: %s", err.msg);
        return;
    }
    out->cfg = o.cfg;
    if (run_execute(&o.cfg, &out->tr, &cost, &out->res, &err)) {
        out->status = 1;
        snprintf(out->error, sizeof out->error, "%s", err.msg);
        run_result_free(&out->res);
    } else {
        out->status = 0;
        out->res.tr = &out->tr;
    }
    cost_model_free(&cost);
}

int sweep_point_store(const char *cmd, const sweep_plan *p, store *st, const run_packed *r,
                      int64_t *run_id)
{
    char key[1024];
    kvs_err err;
    int64_t idx = r->point_index;
    if (sweep_grid_point_key(&p->grid, idx, key, sizeof key, &err))
        return cli_fail(cmd, "%s", err.msg);
    if (r->status == 2)
        return cli_fail(cmd, "point %lld (%s): not run: %s", (long long)idx, key, r->error);
    if (store_sweep_tag(st, p->sweep_id, idx, key, &err))
        return cli_fail(cmd, "--db: %s", err.msg);
    int rc = 0;
    if (r->status == 0) {
        run_result res = r->res;
        res.tr = &r->tr;
        if (store_write_run(st, &r->cfg, &res, run_id, &err))
            rc = cli_fail(cmd, "point %lld (%s): --db: %s", (long long)idx, key, err.msg);
    } else {
        int64_t id = 0;
        if (store_write_failed_run(st, &r->cfg, &r->tr, r->error, r->res.started_at,
                                   r->res.wall_s, &id, &err) == 0)
            rc = cli_fail(cmd, "point %lld (%s): %s (recorded as failed run %lld)", (long long)idx,
                          key, r->error, (long long)id);
        else
            rc = cli_fail(cmd, "point %lld (%s): %s", (long long)idx, key, r->error);
    }
    store_sweep_untag(st);
    return rc;
}

/* ------------------------------------------------------------ setup */

static int check_key(void *ctx, int64_t point, const char *key)
{
    const sweep_plan *p = ctx;
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

/* Collect the points without a run into p->todo. */
static int plan_todo(const char *cmd, sweep_plan *p, store *st)
{
    kvs_err err;
    int64_t n = p->grid.n_points;
    int64_t *ids = calloc((size_t)n, sizeof *ids);
    free(p->todo);
    p->todo = calloc((size_t)n, sizeof *p->todo);
    if (!ids || !p->todo) {
        free(ids);
        return cli_fail(cmd, "out of memory");
    }
    if (store_sweep_done(st, p->sweep_id, n, ids, check_key, p, &err)) {
        free(ids);
        return cli_fail(cmd, "--db: %s", err.msg);
    }
    p->n_todo = 0;
    for (int64_t i = 0; i < n; i++)
        if (!ids[i])
            p->todo[p->n_todo++] = i;
    free(ids);
    return 0;
}

typedef struct grid_src {
    int is_file;      /* --grid-file */
    const char *arg;  /* its value */
} grid_src;


/* Resume: only --db and --quiet may come with --resume. */
static int resume_args(const char *cmd, int n, char **rest, sweep_cli *cli)
{
    for (int i = 1; i < n; i++) {
        const char *v = NULL;
        int missing = 0;
        if (!strcmp(rest[i], "--quiet")) {
            cli->quiet = 1;
        } else if (cli_take_value(n, rest, &i, "--db", &v, &missing)) {
            if (missing)
                return cli_fail(cmd, "--db: missing value");
            if (strlen(v) >= sizeof cli->db)
                return cli_fail(cmd, "--db: path too long");
            strcpy(cli->db, v);
        } else {
            return cli_fail(cmd, "--resume: '%s': a resumed sweep takes its grid and run flags "
                                 "from the database (give only --db, -j, --quiet, --progress)",
                            rest[i]);
        }
    }
    return 0;
}

static int setup_new(const char *cmd, int nrest, char **rest, const grid_src *gs, int ngs,
                     sweep_cli *cli, sweep_plan *p, store **st)
{
    kvs_err err;
    if (ngs == 0)
        return cli_fail(cmd, "empty grid: give --grid FLAG=V1,V2,... or --grid-file FILE "
                             "(see kvsim sweep --help)");
    run_opts_defaults(&p->base);
    if (run_opts_parse_argv(cmd, &p->base, nrest, rest))
        return CLI_EXIT_ERR;
    if (p->base.json)
        return cli_fail(cmd, "--json: not available for a sweep (query the database)");
    sweep_grid_init(&p->grid);
    for (int i = 0; i < ngs; i++) {
        int rc = gs[i].is_file
                     ? sweep_grid_read_file(&p->grid, run_opts_long, gs[i].arg, &err)
                     : sweep_grid_add(&p->grid, run_opts_long, gs[i].arg, "--grid", &err);
        if (rc)
            return cli_fail(cmd, "%s", err.msg);
    }
    if (p->grid.n_axes == 0)
        return cli_fail(cmd, "empty grid: %s names no flag to vary",
                        gs[ngs - 1].is_file ? gs[ngs - 1].arg : "--grid");
    /* a switch varied on/off cannot also be on in the base flags */
    for (int i = 0; i < p->grid.n_axes; i++) {
        const sweep_axis *a = &p->grid.axes[i];
        if (a->kind != SWEEP_KEY_SWITCH)
            continue;
        for (int j = 1; j < nrest; j++)
            if (!strncmp(rest[j], "--", 2) && !strcmp(rest[j] + 2, a->key))
                return cli_fail(cmd, "%s: %s is varied on/off, so the base flags cannot give "
                                     "--%s",
                                a->where, a->key, a->key);
    }
    if (!(p->base_args = join_args(cmd, nrest - 1, rest + 1)))
        return CLI_EXIT_ERR;
    if (!(p->grid_text = sweep_grid_text(&p->grid)))
        return cli_fail(cmd, "out of memory");
    /* every value of every axis, then every point, before running anything */
    run_opts o;
    char key[1024];
    for (int64_t i = 0; i < p->grid.n_points; i++) {
        if (sweep_point_opts(cmd, p, i, &o))
            return CLI_EXIT_ERR;
        if (sweep_grid_point_key(&p->grid, i, key, sizeof key, &err))
            return cli_fail(cmd, "%s", err.msg);
        if (point_check(cmd, i, key, &o))
            return CLI_EXIT_ERR;
    }
    if (store_open(p->base.db, st, &err))
        return cli_fail(cmd, "--db: %s", err.msg);
    const char *params[SWEEP_MAX_AXES];
    for (int i = 0; i < p->grid.n_axes; i++)
        params[i] = p->grid.axes[i].key;
    store_sweep_def def = {"grid",           p->grid_text, p->base_args, p->grid.n_points,
                           p->grid.n_axes, params,       param_value,  &p->grid};
    if (store_sweep_create(*st, &def, &p->sweep_id, &err))
        return cli_fail(cmd, "--db: %s", err.msg);
    strcpy(cli->db, p->base.db);
    cli->quiet = p->base.quiet;
    return plan_todo(cmd, p, *st);
}

static int setup_resume(const char *cmd, int nrest, char **rest, sweep_cli *cli, sweep_plan *p,
                        store **st)
{
    kvs_err err;
    store_sweep_info info = {{0}, NULL, NULL, 0};
    if (resume_args(cmd, nrest, rest, cli))
        return CLI_EXIT_ERR;
    if (access(cli->db, F_OK) != 0)
        return cli_fail(cmd, "--db: %s does not exist", cli->db);
    if (store_open(cli->db, st, &err))
        return cli_fail(cmd, "--db: %s", err.msg);
    if (store_sweep_get(*st, cli->resume_id, &info, &err))
        return cli_fail(cmd, "--resume: %s", err.msg);
    int rc = CLI_EXIT_ERR;
    char where[64];
    snprintf(where, sizeof where, "sweep %lld", (long long)cli->resume_id);
    if (strcmp(info.kind, "grid")) {
        cli_fail(cmd, "--resume: sweep %lld is a %s, not a grid sweep", (long long)cli->resume_id,
                 info.kind);
        goto out;
    }
    if (sweep_plan_from_texts(cmd, info.base_args, info.grid, where, p))
        goto out;
    if (p->grid.n_points != info.n_points) {
        cli_fail(cmd, "--resume: sweep %lld was stored with %lld points, its grid has %lld",
                 (long long)cli->resume_id, (long long)info.n_points,
                 (long long)p->grid.n_points);
        goto out;
    }
    strcpy(p->base.db, cli->db);
    p->base.quiet = cli->quiet;
    p->sweep_id = cli->resume_id;
    rc = plan_todo(cmd, p, *st);
out:
    store_sweep_info_free(&info);
    return rc;
}

int sweep_setup(const char *cmd, int argc, char **argv, sweep_cli *cli, sweep_plan *p,
                store **st)
{
    memset(cli, 0, sizeof *cli);
    memset(p, 0, sizeof *p);
    *st = NULL;
    cli->jobs = 1;
    cli->progress = -1;
    strcpy(cli->db, "kvsim.db");
    char **rest = calloc((size_t)argc + 1, sizeof *rest);
    grid_src *gs = calloc((size_t)argc + 1, sizeof *gs);
    int nrest = 0, ngs = 0, rc = CLI_EXIT_ERR;
    if (!rest || !gs) {
        cli_fail(cmd, "out of memory");
        goto out;
    }
    rest[nrest++] = argv[0];
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        int missing = 0;
        int64_t n;
        if (cli_take_value(argc, argv, &i, "--grid", &v, &missing)) {
            if (missing) {
                cli_fail(cmd, "--grid: missing value");
                goto out;
            }
            gs[ngs++] = (grid_src){0, v};
        } else if (cli_take_value(argc, argv, &i, "--grid-file", &v, &missing)) {
            if (missing) {
                cli_fail(cmd, "--grid-file: missing value");
                goto out;
            }
            gs[ngs++] = (grid_src){1, v};
        } else if (cli_take_value(argc, argv, &i, "--jobs", &v, &missing) ||
                   cli_take_value(argc, argv, &i, "-j", &v, &missing) ||
                   (!strncmp(argv[i], "-j", 2) && argv[i][2] && (v = argv[i] + 2))) {
            if (missing || cli_parse_i64(cmd, "-j", v, 1, 1024, &n))
                goto out;
            cli->jobs = (int)n;
        } else if (cli_take_value(argc, argv, &i, "--resume", &v, &missing)) {
            if (missing || cli_parse_i64(cmd, "--resume", v, 1, INT64_MAX, &cli->resume_id))
                goto out;
        } else if (!strcmp(argv[i], "--progress")) {
            cli->progress = 1;
        } else if (!strcmp(argv[i], "--no-progress")) {
            cli->progress = 0;
        } else {
            rest[nrest++] = argv[i];
        }
    }
    if (cli->resume_id) {
        if (ngs) {
            cli_fail(cmd, "--resume: the grid comes from the database; drop --grid/--grid-file");
            goto out;
        }
        rc = setup_resume(cmd, nrest, rest, cli, p, st);
    } else {
        rc = setup_new(cmd, nrest, rest, gs, ngs, cli, p, st);
    }
out:
    if (rc) {
        store_close(*st);
        *st = NULL;
        sweep_plan_free(p);
    }
    free(rest);
    free(gs);
    return rc;
}

/* ------------------------------------------------------------ progress */

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void fmt_dur(char *buf, size_t n, double s)
{
    long t = (long)(s + 0.5);
    if (t >= 3600)
        snprintf(buf, n, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else
        snprintf(buf, n, "%ld:%02ld", t / 60, t % 60);
}

void sweep_progress_init(sweep_progress *pr, int enable, int64_t total)
{
    memset(pr, 0, sizeof *pr);
    pr->on = enable;
    pr->total = total;
    pr->t0 = mono_s();
}

void sweep_progress_draw(sweep_progress *pr)
{
    if (!pr->on)
        return;
    enum { W = 30 };
    int64_t ended = pr->done + pr->failed;
    int fill = pr->total ? (int)(W * ended / pr->total) : W;
    char bar[W + 1];
    for (int i = 0; i < W; i++)
        bar[i] = i < fill ? '#' : '.';
    bar[W] = 0;
    double el = mono_s() - pr->t0;
    char e[32], eta[32] = "?";
    fmt_dur(e, sizeof e, el);
    if (ended > 0)
        fmt_dur(eta, sizeof eta, el / (double)ended * (double)(pr->total - ended));
    fprintf(stderr, "\r[%s] %lld/%lld points", bar, (long long)ended, (long long)pr->total);
    if (pr->failed)
        fprintf(stderr, " (%lld failed)", (long long)pr->failed);
    fprintf(stderr, ", %d running, %s elapsed, ETA %s   ", pr->running, e, eta);
    fflush(stderr);
}

void sweep_progress_end(sweep_progress *pr)
{
    if (!pr->on)
        return;
    sweep_progress_draw(pr);
    fputc('\n', stderr);
}

/* ------------------------------------------------------------ report */

static void print_num(double v, int null, const char *fmt)
{
    if (null || isnan(v))
        printf(" %9s", "-");
    else
        printf(fmt, v);
}

int sweep_finish(const char *cmd, const sweep_cli *cli, const sweep_plan *p, store *st,
                 int interrupted)
{
    sqlite3_stmt *q = NULL;
    int64_t stored = 0, failed = 0, total = p->grid.n_points;
    int r;
    if (sqlite3_prepare_v2(store_db(st),
                           "SELECT point_index, run_id, status, throughput_tok_s, ttft_p99_s, "
                           "tpot_p99_s, e2e_p99_s, slo_attainment, point_key "
                           "FROM sweep_runs WHERE sweep_id = ?1 ORDER BY point_index",
                           -1, &q, NULL) != SQLITE_OK)
        return cli_fail(cmd, "--db: %s: %s", cli->db, sqlite3_errmsg(store_db(st)));
    sqlite3_bind_int64(q, 1, p->sweep_id);
    if (cli->quiet)
        printf("%lld\n", (long long)p->sweep_id);
    else
        printf("kvsim sweep %lld: %lld points\n%6s %7s %10s %9s %9s %9s %7s  %s\n",
               (long long)p->sweep_id, (long long)total, "point", "run_id", "tok/s", "TTFT p99",
               "TPOT p99", "E2E p99", "SLO %", "parameters");
    while ((r = sqlite3_step(q)) == SQLITE_ROW) {
        stored++;
        int ok = !strcmp((const char *)sqlite3_column_text(q, 2), "finished");
        failed += !ok;
        if (cli->quiet)
            continue;
        printf("%6lld %7lld", (long long)sqlite3_column_int64(q, 0),
               (long long)sqlite3_column_int64(q, 1));
        if (!ok) {
            printf(" %10s %9s %9s %9s %7s  %s\n", "failed", "", "", "", "",
                   (const char *)sqlite3_column_text(q, 8));
            continue;
        }
        print_num(sqlite3_column_double(q, 3), sqlite3_column_type(q, 3) == SQLITE_NULL,
                  " %10.1f");
        for (int c = 4; c <= 6; c++)
            print_num(sqlite3_column_double(q, c), sqlite3_column_type(q, c) == SQLITE_NULL,
                      " %9.4f");
        if (sqlite3_column_type(q, 7) == SQLITE_NULL)
            printf(" %7s", "-");
        else
            printf(" %7.2f", 100.0 * sqlite3_column_double(q, 7));
        printf("  %s\n", (const char *)sqlite3_column_text(q, 8));
    }
    int bad = r != SQLITE_DONE;
    sqlite3_finalize(q);
    if (bad)
        return cli_fail(cmd, "--db: %s: %s", cli->db, sqlite3_errmsg(store_db(st)));
    if (!cli->quiet)
        printf("(latencies in seconds, TPOT in s/token; SELECT * FROM sweep_runs WHERE "
               "sweep_id = %lld)\n",
               (long long)p->sweep_id);
    fflush(stdout);
    int rc = 0;
    if (interrupted)
        rc = cli_fail(cmd, "interrupted: %lld of %lld points stored; resume with: "
                           "kvsim sweep --resume %lld --db %s",
                      (long long)stored, (long long)total, (long long)p->sweep_id, cli->db);
    else if (stored < total)
        rc = cli_fail(cmd, "%lld of %lld points have no run (see the errors above); "
                           "kvsim sweep --resume %lld --db %s runs them again",
                      (long long)(total - stored), (long long)total, (long long)p->sweep_id,
                      cli->db);
    if (failed)
        rc = cli_fail(cmd, "%lld points failed (runs.status = 'failed'); delete those runs and "
                           "--resume to retry them",
                      (long long)failed);
    return rc;
}
