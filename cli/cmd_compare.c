/* cmd_compare.c — `kvsim compare`: several engine configurations on the same
 * workload, each stored as a run tagged with one compare_id (and its
 * variant, compare_runs), and one table side by side.  `--resume ID` runs
 * the variants of compare ID that have no run yet, with its stored flags,
 * after checking that its trace files are the same bytes at the same
 * absolute paths.  Ctrl-C stops after the running variant (cli_stop.c):
 * the compare is marked interrupted, exit 130. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../base/str.h"
#include "../store/store.h"
#include "cli.h"
#include "run_opts.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: kvsim compare [options] [--variant NAME:FLAG=VALUE,...]...\n\n"
            "Run several engine configurations on the same workload and print them side by\n"
            "side.  Every run is stored, tagged with one compare_id.  The default set under\n"
            "--engine vllm-v0 is (under vllm-v1: vllm-v1, no-chunked-prefill, vllm-v0,\n"
            "vllm-v0-static, no-kv-cache and priority):\n"
            "  continuous  the base flags (continuous batching, fcfs, paged KV)\n"
            "  static      batching=static\n"
            "  reserved    alloc=reserved\n"
            "  no-kv-cache kv-cache=off: every step recomputes each request's context\n"
            "  multi-step-8  num-scheduler-steps=8: vLLM 0.6's multi-step scheduling\n"
            "  priority    policy=priority,priority-preemption (when the workload has\n"
            "              priorities: a priority column, or --synthetic priorities=)\n"
            "and, when the workload has prompt prefix hashes (a Mooncake .jsonl trace, or\n"
            "--synthetic with system_prompt= or turns=):\n"
            "  prefix-cache  prefix-caching\n"
            "  lpm           policy=lpm,prefix-caching\n"
            "Each --variant replaces the default set; its FLAG=VALUE pairs are run flags\n"
            "without the leading dashes (a bare FLAG for switches), applied over the base\n"
            "flags, e.g. --variant 'static-8:batching=static,max-seqs=8'.\n\n"
            "  --resume ID  finish compare ID (after Ctrl-C or a kill): run its variants\n"
            "               that have no run yet, with the flags stored in the database;\n"
            "               other flags, when given, must be the ones it was started with.\n"
            "               Refused (exit 2, nothing written) when a trace file now\n"
            "               resolves elsewhere or its SHA-256 changed.\n"
            "Ctrl-C (or SIGTERM) stops after the running variant; the compare is marked\n"
            "interrupted (exit 130) and --resume finishes it.\n\n"
            "base flags (as kvsim run):\n%s",
            job_param_help());
}

/* The header every table carries: model, GPU, TP, engine, workload, rate. */
static void print_header(FILE *f, const run_opts *b, int64_t compare_id)
{
    const run_config *c = &b->cfg;
    fprintf(f, "kvsim compare %lld: %s on %s, tp %lld, engine %s (variants may change it), %s",
            (long long)compare_id, c->model, c->gpu, (long long)c->tp,
            sched_engine_name(c->sched.engine),
            c->synthetic[0] ? c->synthetic : c->trace_path[0] ? c->trace_path : "the default trace");
    if (c->rate_rps > 0 && !c->synthetic[0])
        fprintf(f, " at %g req/s", c->rate_rps);
    else if (c->rate_scale != 1.0)
        fprintf(f, " at rate x%g", c->rate_scale);
    fputc('\n', f);
}

static void print_table(FILE *f, const run_opts *base, const job_variant *vs, int nv,
                        const run_result *res, const int64_t *ids, char (*errs)[1024],
                        int64_t compare_id)
{
    print_header(f, base, compare_id);
    int classes = 0;
    for (int i = 0; i < nv; i++)
        classes |= !errs[i][0] && res[i].n_classes > 0;
    fprintf(f, "%-14s %7s %10s %9s %9s %9s %9s %9s %9s %7s %6s %7s %6s%s\n", "variant", "run_id",
            "tok/s", "TTFT p50", "TTFT p99", "TPOT p50", "TPOT p99", "E2E p50", "E2E p99",
            "batch", "KV %", "preempt", "rej.", classes ? "  TTFT p99 by priority class" : "");
    for (int i = 0; i < nv; i++) {
        const run_summary *s = &res[i].sum;
        if (errs[i][0]) {
            fprintf(f, "%-14s %7s failed: %s\n", vs[i].name, "-", errs[i]);
            continue;
        }
        double kv = s->total_kv_blocks ? 100.0 * s->mean_kv_blocks / (double)s->total_kv_blocks : 0;
        fprintf(f, "%-14s %7lld %10.1f %9.3f %9.3f %9.4f %9.4f %9.2f %9.2f %7.2f %6.1f %7lld %6lld",
                vs[i].name, (long long)ids[i], s->throughput_tok_s, s->ttft.p50, s->ttft.p99,
                s->tpot.p50, s->tpot.p99, s->e2e.p50, s->e2e.p99, s->mean_batch, kv,
                (long long)s->preemptions, (long long)s->n_rejected);
        for (int k = 0; k < res[i].n_classes; k++)
            fprintf(f, "%s%d: %.3f", k ? ", " : "  ", res[i].classes[k].priority,
                    res[i].classes[k].ttft.p99);
        fputc('\n', f);
    }
    fprintf(f, "(latencies in seconds; TPOT in s/token; KV %% = time-weighted mean of blocks in use)\n");
}

/* The command line, split: --variant values, --resume, the run flags. */
typedef struct compare_args {
    job_variant vs[JOB_MAX_VARIANTS];
    int nv;               /* --variant given */
    int64_t resume_id;    /* --resume; 0 = a new compare */
    char **rest;          /* argv minus --variant/--resume: the run flags */
    int nrest;
} compare_args;

static int parse_args(const char *cmd, int argc, char **argv, compare_args *a)
{
    kvs_err err;
    for (int i = 0; i < argc; i++) {
        const char *val = NULL;
        int missing = 0;
        if (i > 0 && cli_take_value(argc, argv, &i, "--resume", &val, &missing)) {
            if (missing || cli_parse_i64(cmd, "--resume", val, 1, INT64_MAX, &a->resume_id))
                return missing ? cli_fail(cmd, "--resume: missing value") : CLI_EXIT_ERR;
            continue;
        }
        if (i == 0 || !cli_take_value(argc, argv, &i, "--variant", &val, &missing)) {
            a->rest[a->nrest++] = argv[i];
            continue;
        }
        if (missing)
            return cli_fail(cmd, "--variant: missing value");
        if (a->nv == JOB_MAX_VARIANTS)
            return cli_fail(cmd, "--variant: at most %d variants", JOB_MAX_VARIANTS);
        if (job_variant_parse(val, &a->vs[a->nv], &err))
            return cli_fail(cmd, "%s", err.msg);
        for (int j = 0; j < a->nv; j++)
            if (!strcmp(a->vs[j].name, a->vs[a->nv].name))
                return cli_fail(cmd, "--variant: name '%s' given twice", a->vs[a->nv].name);
        a->nv++;
    }
    return 0;
}

/* The base flags and the variants of a new compare (the defaults when no
 * --variant), every variant checked before anything runs. */
static int setup_flags(const char *cmd, int nrest, char **rest, job_variant *vs, int *nv,
                       run_opts *base)
{
    kvs_err err;
    run_opts_defaults(base);
    if (run_opts_parse_argv(cmd, base, nrest, rest))
        return CLI_EXIT_ERR;
    if (*nv == 0) {
        int no_priorities = 0;
        job_compare_defaults(base, vs, nv, &no_priorities);
        if (no_priorities && !base->quiet)
            fprintf(stderr, "kvsim compare: note: the workload has no priorities, so the "
                            "priority variant is left out\n");
    }
    for (int i = 0; i < *nv; i++) {
        run_opts o = *base;
        if (job_variant_apply(&o, &vs[i], &err))
            return cli_fail(cmd, "%s", err.msg);
    }
    return 0;
}

/* --resume ID: read the compare back, check it is the same compare, set
 * base/vs/nv.  Prints errors; 0 or CLI_EXIT_ERR. */
static int setup_resume(const char *cmd, compare_args *a, run_opts *base, store **st)
{
    kvs_err err;
    run_opts given;
    const char *db = "kvsim.db";
    int quiet = 0, rc = CLI_EXIT_ERR, argc = 0;
    char *base_args = NULL, *buf = NULL, *t_given = NULL, *t_stored = NULL, where[64];
    char **argv = NULL;
    job_variant vs[JOB_MAX_VARIANTS];
    int nv = 0;
    run_opts_defaults(&given);
    if (run_opts_parse_argv(cmd, &given, a->nrest, a->rest))
        return CLI_EXIT_ERR;
    db = given.db;
    quiet = given.quiet;
    if (cli_require_db(cmd, db))
        return CLI_EXIT_ERR;
    if (cli_open_db(cmd, db, st))
        return CLI_EXIT_ERR;
    snprintf(where, sizeof where, "compare %lld", (long long)a->resume_id);
    if (job_compare_load(*st, a->resume_id, &base_args, vs, &nv, &err) ||
        job_args_split(base_args, "compare", where, &argc, &argv, &buf, &err) ||
        job_inputs_check(*st, "compare", "compare", a->resume_id, NULL, &err)) {
        cli_fail(cmd, "%s", err.msg);
        goto out;
    }
    /* flags given besides --resume/--db/--quiet must be the stored ones */
    t_given = cli_identity_args(a->nrest - 1, a->rest + 1);
    t_stored = cli_identity_args(argc - 1, argv + 1);
    if (!t_given || !t_stored) {
        cli_fail(cmd, "out of memory");
        goto out;
    }
    if ((t_given[0] || a->nv) && strcmp(t_given, t_stored)) {
        for (char *p = t_stored; *p; p++)
            *p = *p == '\n' ? ' ' : *p;
        cli_fail(cmd, "--resume: compare %lld was run with the flags '%.400s'; give those, or "
                      "only --resume and --db",
                 (long long)a->resume_id, t_stored);
        goto out;
    }
    if (a->nv && job_compare_check_same(vs, nv, a->vs, a->nv, a->resume_id, &err)) {
        cli_fail(cmd, "%s", err.msg);
        goto out;
    }
    run_opts_defaults(base);
    if (run_opts_parse_argv(where, base, argc, argv))
        goto out;
    snprintf(base->db, sizeof base->db, "%s", db);
    base->quiet = quiet;
    memcpy(a->vs, vs, sizeof vs);
    a->nv = nv;
    if (store_group_running(*st, "compare", a->resume_id, &err)) {
        cli_fail(cmd, "--db: %s", err.msg);
        goto out;
    }
    rc = 0;
out:
    free(base_args);
    free(buf);
    free(argv);
    free(t_given);
    free(t_stored);
    return rc;
}

/* A new compare: flags, then its row (flags and inputs stored). */
static int setup_new(const char *cmd, compare_args *a, run_opts *base, store **st,
                     int64_t *compare_id)
{
    kvs_err err;
    if (setup_flags(cmd, a->nrest, a->rest, a->vs, &a->nv, base))
        return CLI_EXIT_ERR;
    char *base_args = NULL; /* NULL (not resumable) when an argument holds a newline */
    int newline = 0;
    for (int i = 1; i < a->nrest; i++)
        newline |= strchr(a->rest[i], '\n') != NULL;
    if (!newline && !(base_args = str_join(a->nrest - 1, a->rest + 1, "\n")))
        return cli_fail(cmd, "out of memory");
    int rc = 0;
    if (cli_open_db(cmd, base->db, st))
        rc = CLI_EXIT_ERR;
    else if (job_compare_create(*st, base, base_args, a->vs, a->nv, compare_id, &err))
        rc = cli_fail(cmd, "%s", err.msg);
    free(base_args);
    return rc;
}

/* Run (or, resuming, read back) every variant; returns the failures, and
 * sets *interrupted to 1 when Ctrl-C stopped it, 2 when a run could not be
 * stored (the database stayed locked: it may be in the spool). */
static int run_variants(const run_opts *base, const compare_args *a, store *st,
                        int64_t compare_id, const int64_t *done, run_result *res, int64_t *ids,
                        char (*errs)[1024], int *interrupted)
{
    kvs_err err;
    int failed = 0;
    *interrupted = 0;
    /* every variant runs, even after one fails: the others' rows still count */
    for (int i = 0; i < a->nv; i++) {
        errs[i][0] = 0;
        if (done[i]) { /* resumed: its run is stored */
            job_run_info row;
            ids[i] = done[i];
            if (job_read_run(st, done[i], &row, &err)) {
                snprintf(errs[i], sizeof errs[i], "%s", err.msg);
                failed++;
            } else if (strcmp(row.status, "finished")) {
                snprintf(errs[i], sizeof errs[i], "run %lld failed: %.900s", (long long)done[i],
                         row.error);
                failed++;
            } else {
                res[i].sum = row.sum;
                res[i].sum.total_kv_blocks = row.cfg.sched.total_blocks; /* runs.kv_blocks */
            }
            continue;
        }
        if (cli_stop_requested()) {
            *interrupted = 1;
            break;
        }
        run_opts o = *base;
        job_variant_apply(&o, &a->vs[i], &err); /* checked in setup */
        o.cfg.compare_id = compare_id;
        if (!o.cfg.label[0])
            snprintf(o.cfg.label, sizeof o.cfg.label, "compare %lld: %.63s",
                     (long long)compare_id, a->vs[i].name);
        int rc = store_compare_tag(st, compare_id, i, a->vs[i].name, &err);
        if (!rc)
            rc = job_execute(&o, st, &ids[i], &res[i], &err);
        store_compare_untag(st);
        if (rc == KVS_EDB) /* not stored (perhaps spooled): the compare is not whole */
            *interrupted = 2;
        if (rc) {
            snprintf(errs[i], sizeof errs[i], "%s", err.msg);
            fprintf(stderr, "kvsim compare (%.63s): %s\n", a->vs[i].name, err.msg);
            failed++;
        } else if (!base->quiet) {
            fprintf(stderr, "kvsim compare: %s done (run %lld)\n", a->vs[i].name,
                    (long long)ids[i]);
        }
    }
    return failed;
}

int cmd_compare(int argc, char **argv)
{
    const char *cmd = "compare";
    if (cli_wants_help(argc, argv)) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    static compare_args a;
    static run_result res[JOB_MAX_VARIANTS];
    static char errs[JOB_MAX_VARIANTS][1024]; /* "" = the variant's run finished */
    int64_t ids[JOB_MAX_VARIANTS], done[JOB_MAX_VARIANTS];
    run_opts base;
    store *st = NULL;
    int64_t compare_id = 0;
    int rc = CLI_EXIT_ERR;
    kvs_err err;
    memset(&a, 0, sizeof a);
    memset(res, 0, sizeof res);
    memset(ids, 0, sizeof ids);
    memset(done, 0, sizeof done);
    if (!(a.rest = calloc((size_t)argc + 1, sizeof *a.rest)))
        return cli_fail(cmd, "out of memory");
    if (parse_args(cmd, argc, argv, &a))
        goto out;
    if (a.resume_id) {
        if (setup_resume(cmd, &a, &base, &st))
            goto out;
        compare_id = a.resume_id;
        if (store_compare_done(st, compare_id, a.nv, done, &err)) {
            rc = cli_fail(cmd, "--db: %s", err.msg);
            goto out;
        }
    } else if (setup_new(cmd, &a, &base, &st, &compare_id)) {
        goto out;
    }
    cli_stop_install(0);
    int interrupted;
    int failed = run_variants(&base, &a, st, compare_id, done, res, ids, errs, &interrupted);
    cli_stop_restore();
    /* every variant ran to its end, finished or failed: the group is complete */
    int frc = store_group_finish(st, "compare", compare_id,
                                 interrupted ? "interrupted" : "complete", &err);
    if (base.quiet)
        printf("%lld\n", (long long)compare_id);
    else if (interrupted != 1)
        print_table(stdout, &base, a.vs, a.nv, res, ids, errs, compare_id);
    fflush(stdout);
    rc = 0;
    if (frc)
        rc = cli_fail(cmd, "--db: %s", err.msg);
    else if (interrupted == 2)
        rc = cli_fail(cmd, "%d of %d variants were not stored (see above); after `kvsim store "
                           "recover --db %s`, kvsim compare --resume %lld --db %s finishes it",
                      failed, a.nv, base.db, (long long)compare_id, base.db);
    else if (interrupted) {
        int64_t stored = 0;
        for (int i = 0; i < a.nv; i++)
            stored += ids[i] > 0;
        cli_fail(cmd, "interrupted: %lld of %d variants stored; resume with: kvsim compare "
                      "--resume %lld --db %s",
                 (long long)stored, a.nv, (long long)compare_id, base.db);
        rc = CLI_EXIT_INTERRUPTED;
    } else if (failed)
        rc = cli_fail(cmd, "%d of %d variants failed (their rows name the error; the others are "
                           "stored under compare_id %lld)",
                      failed, a.nv, (long long)compare_id);
out:
    for (int i = 0; i < JOB_MAX_VARIANTS; i++)
        run_result_free(&res[i]);
    store_close(st);
    free(a.rest);
    return rc;
}
