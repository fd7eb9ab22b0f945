/* cmd_compare.c — `kvsim compare`: several engine configurations on the same
 * workload, each stored as a run tagged with one compare_id, and one table
 * side by side. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

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
            "  priority    policy=priority,priority-preemption (when the workload has\n"
            "              priorities: a priority column, or --synthetic priorities=)\n"
            "and, when the workload has prompt prefix hashes (a Mooncake .jsonl trace, or\n"
            "--synthetic with system_prompt= or turns=):\n"
            "  prefix-cache  prefix-caching\n"
            "  lpm           policy=lpm,prefix-caching\n"
            "Each --variant replaces the default set; its FLAG=VALUE pairs are run flags\n"
            "without the leading dashes (a bare FLAG for switches), applied over the base\n"
            "flags, e.g. --variant 'static-8:batching=static,max-seqs=8'.\n\n"
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

int cmd_compare(int argc, char **argv)
{
    const char *cmd = "compare";
    if (cli_wants_help(argc, argv)) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    /* pull out --variant before the shared parser sees argv */
    job_variant vs[JOB_MAX_VARIANTS];
    int nv = 0;
    char **rest = calloc((size_t)argc + 1, sizeof *rest);
    if (!rest)
        return cli_fail(cmd, "out of memory");
    int nrest = 0;
    int rc = 0;
    kvs_err err;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *val = NULL;
        if (i > 0 && !strcmp(a, "--variant")) {
            if (i + 1 >= argc) {
                rc = cli_fail(cmd, "--variant: missing value");
                goto out;
            }
            val = argv[++i];
        } else if (i > 0 && !strncmp(a, "--variant=", 10)) {
            val = a + 10;
        } else {
            rest[nrest++] = argv[i];
            continue;
        }
        if (nv == JOB_MAX_VARIANTS) {
            rc = cli_fail(cmd, "--variant: at most %d variants", JOB_MAX_VARIANTS);
            goto out;
        }
        if (job_variant_parse(val, &vs[nv], &err)) {
            rc = cli_fail(cmd, "%s", err.msg);
            goto out;
        }
        for (int j = 0; j < nv; j++)
            if (!strcmp(vs[j].name, vs[nv].name)) {
                rc = cli_fail(cmd, "--variant: name '%s' given twice", vs[nv].name);
                goto out;
            }
        nv++;
    }
    int defaults = nv == 0;
    run_opts base;
    run_opts_defaults(&base);
    if ((rc = run_opts_parse_argv(cmd, &base, nrest, rest)))
        goto out;
    int no_priorities = 0;
    if (defaults) {
        job_compare_defaults(&base, vs, &nv, &no_priorities);
        if (no_priorities && !base.quiet)
            fprintf(stderr, "kvsim compare: note: the workload has no priorities, so the "
                            "priority variant is left out\n");
    }
    /* check every variant's flags before running anything */
    for (int i = 0; i < nv; i++) {
        run_opts o = base;
        if (job_variant_apply(&o, &vs[i], &err)) {
            rc = cli_fail(cmd, "%s", err.msg);
            goto out;
        }
    }
    store *st = NULL;
    if (cli_open_db(cmd, base.db, &st)) {
        rc = CLI_EXIT_ERR;
        goto out;
    }
    int64_t compare_id = 0;
    if (job_compare_reserve(st, vs, nv, &compare_id, &err)) {
        rc = cli_fail(cmd, "--db: %s", err.msg);
        store_close(st);
        goto out;
    }
    run_result res[JOB_MAX_VARIANTS];
    int64_t ids[JOB_MAX_VARIANTS];
    static char errs[JOB_MAX_VARIANTS][1024]; /* "" = the variant's run finished */
    memset(res, 0, sizeof res);
    memset(ids, 0, sizeof ids);
    int failed = 0;
    /* every variant runs, even after one fails: the others' rows still count */
    for (int i = 0; i < nv; i++) {
        run_opts o = base;
        job_variant_apply(&o, &vs[i], &err); /* checked above */
        o.cfg.compare_id = compare_id;
        if (!o.cfg.label[0])
            snprintf(o.cfg.label, sizeof o.cfg.label, "compare %lld: %.63s", (long long)compare_id,
                     vs[i].name);
        errs[i][0] = 0;
        if (job_execute(&o, st, &ids[i], &res[i], &err)) {
            snprintf(errs[i], sizeof errs[i], "%s", err.msg);
            fprintf(stderr, "kvsim compare (%.63s): %s\n", vs[i].name, err.msg);
            failed++;
        } else if (!base.quiet) {
            fprintf(stderr, "kvsim compare: %s done (run %lld)\n", vs[i].name, (long long)ids[i]);
        }
    }
    /* every variant ran to its end, finished or failed: the group is complete */
    kvs_err ferr;
    int frc = store_group_finish(st, "compare", compare_id, "complete", &ferr);
    if (base.quiet)
        printf("%lld\n", (long long)compare_id);
    else
        print_table(stdout, &base, vs, nv, res, ids, errs, compare_id);
    if (frc)
        rc = cli_fail(cmd, "--db: %s", ferr.msg);
    else if (failed)
        rc = cli_fail(cmd, "%d of %d variants failed (their rows name the error; the others are "
                           "stored under compare_id %lld)",
                      failed, nv, (long long)compare_id);
    for (int i = 0; i < nv; i++)
        run_result_free(&res[i]);
    store_close(st);
out:
    free(rest);
    return rc;
}
