/* cmd_run.c — `kvsim run`: simulate one configuration and store it. */
#include <stdlib.h>
#include <string.h>

#include "../store/store.h"
#include "cli.h"
#include "cost_select.h"
#include "run_opts.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: kvsim run [options]\n\n"
               "Simulate one serving engine on a trace and store the run (config, per-request\n"
               "results, summary) in SQLite.  Prints a summary and the new run_id.\n\n%s",
            run_opts_help);
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
    int opt;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "", run_opts_long, NULL)) != -1) {
        if (opt == '?' || opt == ':') {
            if (optopt)
                return cli_fail(cmd, "%s: missing value or unknown flag (see kvsim run --help)",
                                argv[optind - 1]);
            return cli_fail(cmd, "unknown flag '%s' (see kvsim run --help)", argv[optind - 1]);
        }
        int rc = run_opts_apply(cmd, &o, opt, optarg);
        if (rc)
            return rc < 0 ? cli_fail(cmd, "internal: unhandled flag") : rc;
    }
    if (optind < argc)
        return cli_fail(cmd, "unexpected argument '%s' (see kvsim run --help)", argv[optind]);

    model_spec m;
    gpu_spec g;
    trace tr;
    int rc = run_opts_prepare(cmd, &o, &m, &g, &tr);
    if (rc)
        return rc;
    kvs_err err;
    store *st = NULL;
    cost_model cost = {0};
    run_result res = {0};
    int exit_code = CLI_EXIT_ERR;
    if (store_open(o.db, &st, &err)) {
        cli_fail(cmd, "--db: %s", err.msg);
        goto done;
    }
    if (cost_select(&o.cfg, &m, &g, st, o.force_profile, &cost, &err)) {
        cli_fail(cmd, "--cost: %s", err.msg);
        goto done;
    }
    int64_t run_id = 0;
    if (run_execute(&o.cfg, &tr, &cost, &res, &err)) {
        kvs_err err2;
        int64_t failed_id = 0;
        if (store_write_failed_run(st, &o.cfg, &tr, err.msg, res.started_at, res.wall_s,
                                   &failed_id, &err2) == 0)
            cli_fail(cmd, "%s (recorded as failed run %lld)", err.msg, (long long)failed_id);
        else
            cli_fail(cmd, "%s", err.msg);
        goto done;
    }
    if (store_write_run(st, &o.cfg, &res, &run_id, &err)) {
        cli_fail(cmd, "--db: %s", err.msg);
        goto done;
    }
    if (o.quiet)
        printf("%lld\n", (long long)run_id);
    else if (o.json)
        run_opts_print_json(stdout, &o.cfg, &res, run_id);
    else
        run_opts_print_summary(stdout, &o.cfg, &res, run_id);
    exit_code = CLI_EXIT_OK;
done:
    run_result_free(&res);
    if (cost.vt)
        cost_model_free(&cost);
    store_close(st);
    trace_free(&tr);
    return exit_code;
}
