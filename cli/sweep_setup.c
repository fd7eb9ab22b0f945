/* sweep_setup.c — `kvsim sweep`'s flags (a new sweep or --resume ID), the
 * plan's steps printing job/'s errors, the progress line and the final
 * report (see sweep.h). */
#include "sweep.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sqlite3.h>

#include "../base/str.h"
#include "cli.h"

/* ------------------------------------------------------------ plan steps */

int sweep_plan_from_texts(const char *cmd, const char *base_args, const char *grid_text,
                          const char *where, sweep_plan *p)
{
    kvs_err err;
    if (job_sweep_from_texts(p, base_args, grid_text, where, cmd, &err))
        return cli_fail(cmd, "%s", err.msg);
    return 0;
}

void sweep_plan_free(sweep_plan *p) { job_sweep_free(p); }

int sweep_point_opts(const char *cmd, const sweep_plan *p, int64_t index, run_opts *o)
{
    kvs_err err;
    if (job_sweep_point_opts(p, index, o, &err))
        return cli_fail(cmd, "%s", err.msg);
    return 0;
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
    kvs_err err;
    job_sweep_simulate(p, index, cost_st, out, &err);
    if (out->status == 2 && err.msg[0])
        cli_fail("sweep", "%s", err.msg);
}

int sweep_point_store(const char *cmd, const sweep_plan *p, store *st, const run_packed *r,
                      int64_t *run_id)
{
    kvs_err err;
    if (job_sweep_store(p, st, r, run_id, &err))
        return cli_fail(cmd, "%s", err.msg);
    return 0;
}

/* ------------------------------------------------------------ setup */

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
                     ? sweep_grid_read_file(&p->grid, job_param_options(), gs[i].arg, &err)
                     : sweep_grid_add(&p->grid, job_param_options(), gs[i].arg, "--grid", &err);
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
    for (int i = 1; i < nrest; i++)
        if (strchr(rest[i], '\n'))
            return cli_fail(cmd, "argument '%s' holds a newline, which a sweep cannot store",
                            rest[i]);
    if (!(p->base_args = str_join(nrest - 1, rest + 1, "\n")))
        return cli_fail(cmd, "out of memory");
    if (!(p->grid_text = sweep_grid_text(&p->grid)))
        return cli_fail(cmd, "out of memory");
    /* every value of every axis, then every point, before running anything */
    for (int64_t i = 0; i < p->grid.n_points; i++)
        if (job_sweep_point_check(p, i, &err))
            return cli_fail(cmd, "%s", err.msg);
    if (cli_open_db(cmd, p->base.db, st))
        return CLI_EXIT_ERR;
    if (job_sweep_create(p, *st, &err))
        return cli_fail(cmd, "%s", err.msg);
    strcpy(cli->db, p->base.db);
    cli->quiet = p->base.quiet;
    if (job_sweep_todo(p, *st, &err))
        return cli_fail(cmd, "%s", err.msg);
    return 0;
}

static int setup_resume(const char *cmd, int nrest, char **rest, sweep_cli *cli, sweep_plan *p,
                        store **st)
{
    kvs_err err;
    store_sweep_info info = {{0}, NULL, NULL, 0};
    if (resume_args(cmd, nrest, rest, cli))
        return CLI_EXIT_ERR;
    if (cli_require_db(cmd, cli->db))
        return CLI_EXIT_ERR;
    if (cli_open_db(cmd, cli->db, st))
        return CLI_EXIT_ERR;
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
    if (job_sweep_check_inputs(p, *st, &err)) {
        cli_fail(cmd, "%s", err.msg);
        goto out;
    }
    rc = job_sweep_todo(p, *st, &err) ? cli_fail(cmd, "%s", err.msg) : 0;
    if (rc == 0 && store_group_running(*st, "sweep", p->sweep_id, &err))
        rc = cli_fail(cmd, "--db: %s", err.msg);
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
    else {
        const run_config *c = &p->base.cfg;
        printf("kvsim sweep %lld: %lld points; base %s on %s, tp %lld, engine %s, %s",
               (long long)p->sweep_id, (long long)total, c->model, c->gpu, (long long)c->tp,
               sched_engine_name(c->sched.engine),
               c->synthetic[0] ? c->synthetic
                               : c->trace_path[0] ? c->trace_path : "the default trace");
        if (c->rate_rps > 0 && !c->synthetic[0])
            printf(" at %g req/s", c->rate_rps);
        else if (c->rate_scale != 1.0)
            printf(" at rate x%g", c->rate_scale);
        printf(" (the parameters column overrides)\n%6s %7s %10s %9s %9s %9s %7s  %s\n", "point",
               "run_id", "tok/s", "TTFT p99", "TPOT p99", "E2E p99", "SLO %", "parameters");
    }
    while ((r = sqlite3_step(q)) == SQLITE_ROW) {
        stored++;
        const char *status = (const char *)sqlite3_column_text(q, 2);
        int ok = status && !strcmp(status, "finished");
        failed += !ok;
        if (cli->quiet)
            continue;
        char key[1024]; /* stored text: printed without control characters */
        const char *k = (const char *)sqlite3_column_text(q, 8);
        str_sanitize(key, sizeof key, k ? k : "");
        printf("%6lld %7lld", (long long)sqlite3_column_int64(q, 0),
               (long long)sqlite3_column_int64(q, 1));
        if (!ok) {
            printf(" %10s %9s %9s %9s %7s  %s\n", "failed", "", "", "", "", key);
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
        printf("  %s\n", key);
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
    kvs_err ferr;
    if (store_group_finish(st, "sweep", p->sweep_id,
                           !interrupted && stored == total ? "complete" : "interrupted", &ferr))
        rc = cli_fail(cmd, "--db: %s", ferr.msg);
    if (interrupted) {
        cli_fail(cmd, "interrupted: %lld of %lld points stored; resume with: "
                      "kvsim sweep --resume %lld --db %s",
                 (long long)stored, (long long)total, (long long)p->sweep_id, cli->db);
        return rc ? rc : CLI_EXIT_INTERRUPTED;
    }
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
