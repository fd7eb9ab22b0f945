/* cmd_run.c — `kvsim run`: simulate one configuration and store it. */
#include <stdlib.h>
#include <string.h>

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
    if (cli_open_db(cmd, o.db, &st))
        return CLI_EXIT_ERR;
    int64_t run_id = 0;
    run_result res = {0};
    rc = run_opts_execute(cmd, &o, st, &run_id, &res);
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
