/* run_opts.c — the run flags of `kvsim run`, `compare`, `sweep` and
 * `capacity`: a thin layer over job/ that prints its errors. */
#include "run_opts.h"

#include <string.h>

#include "cli.h"

void run_opts_defaults(run_opts *o) { job_opts_init(o); }

int run_opts_apply(const char *cmd, run_opts *o, int opt, const char *arg)
{
    const job_param *p = job_param_by_id(opt);
    kvs_err err;
    if (!p)
        return -1;
    if (job_param_set(o, p->name, arg, &err))
        return cli_fail(cmd, "%s", err.msg);
    return 0;
}

int run_opts_prepare(const char *cmd, run_opts *o, model_spec *m, gpu_spec *g, trace *tr)
{
    kvs_err err;
    if (job_prepare(o, m, g, tr, &err))
        return cli_fail(cmd, "%s", err.msg);
    return 0;
}

int run_opts_execute(const char *cmd, run_opts *o, store *st, int64_t *run_id,
                     run_result *res_out)
{
    kvs_err err;
    if (job_execute(o, st, run_id, res_out, &err))
        return cli_fail(cmd, "%s", err.msg);
    return CLI_EXIT_OK;
}

int run_opts_parse_argv(const char *cmd, run_opts *o, int argc, char **argv)
{
    kvs_err err;
    if (job_opts_parse_argv(o, argc, argv, cmd, &err))
        return cli_fail(cmd, "%s", err.msg);
    if ((o->result_json[0] || o->result_json_detail) && strcmp(cmd, "run"))
        return cli_fail(cmd, "--result-json: only with kvsim run (one run, one file)");
    if (o->result_json_detail && !o->result_json[0])
        return cli_fail(cmd, "--result-json-detail: give --result-json FILE too");
    return 0;
}
