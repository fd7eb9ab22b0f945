/* cmd_run.c — `kvsim run`: simulate one configuration and store it. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../store/store.h"
#include "cli.h"
#include "run_opts.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: kvsim run [options]\n\n"
               "Simulate one serving engine on a trace and store the run (config, per-request\n"
               "results, summary) in SQLite.  Prints a summary and the new run_id.\n\n%s",
            job_param_help());
}

/* The progress line of a long run on a terminal: nothing for the first
 * 2 wall seconds ($KVSIM_PROGRESS_AFTER_S changes it, for tests), then one
 * line rewritten in place at most every 0.25 s, cleared when the run ends. */
typedef struct progress {
    double after_s;     /* wall seconds before the first line */
    int shown;          /* a line is on the terminal */
    double last_wall_s; /* wall time of the last line, s */
} progress;

static void show_progress(void *ctx, double sim_s, int64_t done, int64_t total, double wall_s)
{
    progress *p = ctx;
    if (wall_s < p->after_s || (p->shown && wall_s - p->last_wall_s < 0.25))
        return;
    p->shown = 1;
    p->last_wall_s = wall_s;
    fprintf(stderr, "\rkvsim run: simulated %.1f s, %lld of %lld requests done", sim_s,
            (long long)done, (long long)total);
    if (done > 0)
        fprintf(stderr, ", ETA %.0f s   ", wall_s * (double)(total - done) / (double)done);
    fflush(stderr);
}

int cmd_run(int argc, char **argv)
{
    const char *cmd = "run";
    if (cli_wants_help(argc, argv)) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    run_opts o;
    run_opts_defaults(&o);
    int rc = run_opts_parse_argv(cmd, &o, argc, argv);
    if (rc)
        return rc;
    store *st = NULL;
    if (cli_open_db_run(cmd, o.db, &st))
        return CLI_EXIT_ERR;
    int64_t run_id = 0;
    run_result res = {0};
    o.stream_rows = 1; /* one run: its rows go in while it simulates (job_stream.h) */
    const char *after = getenv("KVSIM_PROGRESS_AFTER_S");
    progress pr = {after ? atof(after) : 2.0, 0, 0.0};
    if (!o.quiet && isatty(STDERR_FILENO)) {
        o.progress = show_progress;
        o.progress_ctx = &pr;
    }
    rc = run_opts_execute(cmd, &o, st, &run_id, &res);
    if (pr.shown)
        fprintf(stderr, "\r%-78s\r", ""); /* clear the progress line */
    if (rc == 0) {
        if (o.quiet)
            printf("%lld\n", (long long)run_id);
        else if (o.json)
            run_opts_print_json(stdout, &o.cfg, &res, run_id);
        else
            run_opts_print_summary(stdout, &o.cfg, &res, run_id);
    }
    run_result_free(&res);
    store_close(st);
    return rc;
}
