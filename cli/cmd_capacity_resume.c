/* cmd_capacity_resume.c — the stored side of `kvsim capacity --search`:
 * creating a search's sweeps row (its description, base flags and input
 * files) and `--resume ID`: reading the stored search back, checking that
 * its inputs and any flags given again are the same, and marking it
 * running again (cmd_capacity_search.c runs the probes). */
#include <stdlib.h>
#include <string.h>

#include "../base/str.h"
#include "../store/store.h"
#include "capacity_search_impl.h"
#include "cli.h"

/* The search's description as stored in sweeps.grid: what --resume reads
 * back (and compares with flags given again). */
static void search_desc(const search_args *a, const search_ctx *c, char *desc, size_t n)
{
    int tp = a->kind == SEARCH_TP;
    snprintf(desc, n, "search=%s\nslo=%s\npolicies=%s\nmax-rejected=%.17g\n%s%s%s", a->search,
             a->slo, a->policies ? a->policies : sched_policy_name(a->pols[0]),
             c->js.slo.max_rejected, tp ? "tp-list=" : "", tp ? (a->tps ? a->tps : "1,2,4,8") : "",
             tp ? "\n" : "");
}

/* Create the search's sweeps row (its description, base arguments and
 * input files). */
int capacity_search_create(const char *cmd, const search_args *a, search_ctx *c, store **st)
{
    kvs_err err;
    job_inputs in = {0, 0, NULL, NULL, NULL};
    if (job_inputs_add_opts(&in, &a->base, &err))
        return cli_fail(cmd, "%s", err.msg);
    char *base_args = str_join(a->nrest - 1, a->rest + 1, "\n");
    if (!base_args) {
        job_inputs_free(&in);
        return cli_fail(cmd, "out of memory");
    }
    char desc[1024];
    search_desc(a, c, desc, sizeof desc);
    int rc = 0;
    store_sweep_def def = {"search", desc, base_args, 0, 0, NULL, NULL, NULL, in.n,
                           (const char *const *)in.path, (const char *const *)in.abs,
                           (const char *const *)in.sha};
    if (cli_open_db(cmd, a->base.db, st))
        rc = CLI_EXIT_ERR;
    else if (store_sweep_create(*st, &def, &c->js.sweep_id, &err))
        rc = cli_fail(cmd, "--db: %s", err.msg);
    free(base_args);
    job_inputs_free(&in);
    return rc;
}


void capacity_stored_free(stored_search *ss)
{
    free(ss->desc);
    free(ss->args_buf);
    free(ss->argv);
}

static int load_search(const char *cmd, store *st, int64_t id, search_args *a,
                       stored_search *ss)
{
    store_sweep_info info;
    kvs_err err;
    char where[64];
    snprintf(where, sizeof where, "search %lld", (long long)id);
    int grc = store_sweep_get(st, id, &info, &err);
    if (grc == KVS_EINVAL)
        return cli_fail(cmd, "--resume: %s: no search %lld", store_path(st), (long long)id);
    if (grc)
        return cli_fail(cmd, "--resume: %s", err.msg);
    int rc = CLI_EXIT_ERR;
    if (strcmp(info.kind, "search")) {
        cli_fail(cmd, "--resume: sweep %lld is a %s sweep, not a capacity search (kvsim sweep "
                      "--resume resumes it)",
                 (long long)id, info.kind);
        goto out;
    }
    if (job_args_split(info.base_args, "capacity", where, &ss->argc, &ss->argv, &ss->args_buf,
                       &err)) {
        cli_fail(cmd, "--resume: %s", err.msg);
        goto out;
    }
    ss->desc = info.grid;
    info.grid = NULL;
    memset(a, 0, sizeof *a);
    for (char *save, *line = strtok_r(ss->desc, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        char *eq = strchr(line, '=');
        if (!eq)
            continue;
        *eq = 0;
        const char **dst = !strcmp(line, "search")         ? &a->search
                           : !strcmp(line, "slo")          ? &a->slo
                           : !strcmp(line, "policies")     ? &a->policies
                           : !strcmp(line, "max-rejected") ? &a->max_rejected
                           : !strcmp(line, "tp-list")      ? &a->tps
                                                           : NULL;
        if (dst)
            *dst = eq + 1;
    }
    if (!a->search || !a->slo) {
        cli_fail(cmd, "--resume: search %lld: sweeps.grid does not name the search and its SLO",
                 (long long)id);
        goto out;
    }
    a->rest = ss->argv;
    a->nrest = ss->argc;
    rc = 0;
out:
    store_sweep_info_free(&info);
    return rc;
}

/* --resume ID: the stored search set up as when it started (flags given
 * again must be the same), its inputs checked, marked running. */
int capacity_search_resume(const char *cmd, search_args *a, search_ctx *c, store **st,
                        stored_search *ss)
{
    kvs_err err;
    int64_t id;
    run_opts given;
    if (cli_parse_i64(cmd, "--resume", a->resume, 1, INT64_MAX, &id))
        return CLI_EXIT_ERR;
    run_opts_defaults(&given);
    if (run_opts_parse_argv(cmd, &given, a->nrest, a->rest))
        return CLI_EXIT_ERR;
    if (cli_require_db(cmd, given.db))
        return CLI_EXIT_ERR;
    if (cli_open_db(cmd, given.db, st))
        return CLI_EXIT_ERR;
    search_args sa;
    search_ctx sc;
    memset(&sc, 0, sizeof sc);
    if (load_search(cmd, *st, id, &sa, ss))
        return CLI_EXIT_ERR;
    if (job_inputs_check(*st, "sweep", "search", id, NULL, &err))
        return cli_fail(cmd, "%s", err.msg);
    char *t_given = cli_identity_args(a->nrest - 1, a->rest + 1);
    char *t_stored = cli_identity_args(sa.nrest - 1, sa.rest + 1);
    int rc = !t_given || !t_stored ? cli_fail(cmd, "out of memory") : 0;
    int own = a->search || a->slo || a->policies || a->tps || a->max_rejected;
    if (!rc && (own || t_given[0])) { /* given again: the same search? */
        char d1[1024], d2[1024];
        search_args ga = *a;
        search_ctx gc;
        memset(&gc, 0, sizeof gc);
        if (capacity_search_setup(cmd, &ga, &gc) || capacity_search_setup(cmd, &sa, &sc))
            rc = CLI_EXIT_ERR;
        if (!rc) {
            search_desc(&ga, &gc, d1, sizeof d1);
            search_desc(&sa, &sc, d2, sizeof d2);
        }
        if (!rc && (strcmp(d1, d2) || strcmp(t_given, t_stored))) {
            for (char *p = t_stored; *p; p++)
                *p = *p == '\n' ? ' ' : *p;
            for (char *p = d2; *p; p++)
                *p = *p == '\n' ? ' ' : *p;
            rc = cli_fail(cmd, "--resume: search %lld was run as '%.300s' with the flags "
                               "'%.300s'; give those, or only --resume and --db",
                          (long long)id, d2, t_stored);
        }
    }
    free(t_given);
    free(t_stored);
    if (rc)
        return rc;
    sa.resume = a->resume;
    *a = sa;
    if (capacity_search_setup(cmd, a, c))
        return CLI_EXIT_ERR;
    snprintf(a->base.db, sizeof a->base.db, "%s", given.db);
    a->base.quiet = given.quiet;
    a->base.json = given.json;
    c->verbose = !a->base.quiet && !a->base.json;
    c->js.sweep_id = id;
    c->js.resume = 1;
    if (store_group_running(*st, "sweep", id, &err))
        return cli_fail(cmd, "--db: %s", err.msg);
    return 0;
}

