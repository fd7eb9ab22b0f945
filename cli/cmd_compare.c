/* cmd_compare.c — `kvsim compare`: several engine configurations on the same
 * workload, each stored as a run tagged with one compare_id, and one table
 * side by side. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "../store/store.h"
#include "cli.h"
#include "run_opts.h"

#define MAX_VARIANTS 32

typedef struct variant {
    char name[64];    /* column label */
    char flags[512];  /* flag=value,flag=value applied over the base flags */
} variant;

static const variant default_variants[] = {
    {"continuous", ""},
    {"static", "batching=static"},
    {"reserved", "alloc=reserved"},
    {"priority", "policy=priority,priority-preemption"},
};

/* Added to the default set when the workload has prompt prefix hashes (a
 * Mooncake .jsonl trace, or --synthetic with system_prompt= or turns=). */
static const variant prefix_variants[] = {
    {"prefix-cache", "prefix-caching"},
    {"lpm", "policy=lpm,prefix-caching"},
};

/* What the base workload carries: prompt prefix hashes, priorities.
 * Loads the trace once (a bad one is reported by the runs themselves). */
static void workload_features(const run_opts *o, int *prefixes, int *priorities)
{
    const run_config *c = &o->cfg;
    kvs_err err;
    *prefixes = *priorities = 0;
    if (c->synthetic[0]) {
        trace_synth_spec sp;
        if (trace_synth_parse(c->synthetic, &sp, &err) == 0) {
            *prefixes = sp.system_prompt > 0 || sp.turns > 1;
            *priorities = sp.n_classes > 0;
        }
        return;
    }
    trace t;
    if (!c->trace_path[0] || trace_load(c->trace_path, &t, &err) != 0)
        return; /* the default trace has neither */
    *prefixes = t.hash_off != NULL;
    *priorities = t.has_priority;
    trace_free(&t);
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: kvsim compare [options] [--variant NAME:FLAG=VALUE,...]...\n\n"
            "Run several engine configurations on the same workload and print them side by\n"
            "side.  Every run is stored, tagged with one compare_id.  The default set is:\n"
            "  continuous  the base flags (continuous batching, fcfs, paged KV)\n"
            "  static      batching=static\n"
            "  reserved    alloc=reserved\n"
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
            run_opts_help);
}

static int apply_variant(const char *cmd, run_opts *o, const variant *v)
{
    char buf[512];
    strcpy(buf, v->flags);
    for (char *save, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        const char *val = "";
        if (eq) {
            *eq = 0;
            val = eq + 1;
        }
        const struct option *opt = NULL;
        for (const struct option *p = run_opts_long; p->name; p++)
            if (!strcmp(p->name, tok))
                opt = p;
        if (!opt || !strcmp(tok, "db") || !strcmp(tok, "quiet") || !strcmp(tok, "json"))
            return cli_fail(cmd, "--variant %s: unknown or disallowed flag '%s'", v->name, tok);
        if (opt->has_arg == required_argument && !eq)
            return cli_fail(cmd, "--variant %s: flag '%s' needs a value", v->name, tok);
        if (opt->has_arg == no_argument && eq)
            return cli_fail(cmd, "--variant %s: flag '%s' takes no value", v->name, tok);
        char flag[80];
        snprintf(flag, sizeof flag, "--variant %s", v->name);
        int rc = run_opts_apply(flag, o, opt->val, val);
        if (rc)
            return CLI_EXIT_ERR;
    }
    return 0;
}

static int parse_variant(const char *cmd, const char *arg, variant *v)
{
    const char *colon = strchr(arg, ':');
    size_t nlen = colon ? (size_t)(colon - arg) : strlen(arg);
    if (nlen == 0 || nlen >= sizeof v->name)
        return cli_fail(cmd, "--variant: '%s' needs a name of 1 to %zu characters", arg,
                        sizeof v->name - 1);
    memcpy(v->name, arg, nlen);
    v->name[nlen] = 0;
    const char *flags = colon ? colon + 1 : "";
    if (strlen(flags) >= sizeof v->flags)
        return cli_fail(cmd, "--variant %s: flags too long", v->name);
    strcpy(v->flags, flags);
    return 0;
}

static int next_compare_id(store *st, int64_t *id, kvs_err *err)
{
    sqlite3_stmt *q = NULL;
    int rc = sqlite3_prepare_v2(store_db(st),
                                "SELECT COALESCE(MAX(compare_id), 0) + 1 FROM runs", -1, &q, NULL);
    if (rc == SQLITE_OK && sqlite3_step(q) == SQLITE_ROW) {
        *id = sqlite3_column_int64(q, 0);
        sqlite3_finalize(q);
        return KVS_OK;
    }
    sqlite3_finalize(q);
    return kvs_errf(err, KVS_EDB, "%s: %s", store_path(st), sqlite3_errmsg(store_db(st)));
}

static void print_table(FILE *f, const variant *vs, int nv, const run_result *res,
                        const int64_t *ids, int64_t compare_id)
{
    fprintf(f, "kvsim compare %lld\n", (long long)compare_id);
    fprintf(f, "%-14s %7s %10s %9s %9s %9s %9s %9s %9s %7s %6s %7s %6s\n", "variant", "run_id",
            "tok/s", "TTFT p50", "TTFT p99", "TPOT p50", "TPOT p99", "E2E p50", "E2E p99",
            "batch", "KV %", "preempt", "rej.");
    for (int i = 0; i < nv; i++) {
        const run_summary *s = &res[i].sum;
        double kv = s->total_kv_blocks ? 100.0 * s->mean_kv_blocks / (double)s->total_kv_blocks : 0;
        fprintf(f, "%-14s %7lld %10.1f %9.3f %9.3f %9.4f %9.4f %9.2f %9.2f %7.2f %6.1f %7lld %6lld\n",
                vs[i].name, (long long)ids[i], s->throughput_tok_s, s->ttft.p50, s->ttft.p99,
                s->tpot.p50, s->tpot.p99, s->e2e.p50, s->e2e.p99, s->mean_batch, kv,
                (long long)s->preemptions, (long long)s->n_rejected);
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
    variant vs[MAX_VARIANTS];
    int nv = 0;
    char **rest = calloc((size_t)argc + 1, sizeof *rest);
    if (!rest)
        return cli_fail(cmd, "out of memory");
    int nrest = 0;
    int rc = 0;
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
        if (nv == MAX_VARIANTS) {
            rc = cli_fail(cmd, "--variant: at most %d variants", MAX_VARIANTS);
            goto out;
        }
        if ((rc = parse_variant(cmd, val, &vs[nv])))
            goto out;
        for (int j = 0; j < nv; j++)
            if (!strcmp(vs[j].name, vs[nv].name)) {
                rc = cli_fail(cmd, "--variant: name '%s' given twice", vs[nv].name);
                goto out;
            }
        nv++;
    }
    int defaults = nv == 0;
    if (defaults) {
        nv = (int)(sizeof default_variants / sizeof default_variants[0]);
        memcpy(vs, default_variants, sizeof default_variants);
    }
    run_opts base;
    run_opts_defaults(&base);
    if ((rc = run_opts_parse_argv(cmd, &base, nrest, rest)))
        goto out;
    int has_prefixes = 0, has_priorities = 0;
    if (defaults)
        workload_features(&base, &has_prefixes, &has_priorities);
    if (defaults && !has_priorities) {
        nv--; /* the priority variant is last: it needs priorities */
        if (!base.quiet)
            fprintf(stderr, "kvsim compare: note: the workload has no priorities, so the "
                            "priority variant is left out\n");
    }
    if (has_prefixes)
        for (size_t i = 0; i < sizeof prefix_variants / sizeof prefix_variants[0]; i++)
            vs[nv++] = prefix_variants[i];
    /* check every variant's flags before running anything */
    for (int i = 0; i < nv; i++) {
        run_opts o = base;
        if ((rc = apply_variant(cmd, &o, &vs[i])))
            goto out;
    }
    kvs_err err;
    store *st = NULL;
    if (store_open_writable(base.db, &st, &err)) {
        rc = cli_fail(cmd, "--db: %s", err.msg);
        goto out;
    }
    int64_t compare_id = 0;
    if (next_compare_id(st, &compare_id, &err)) {
        rc = cli_fail(cmd, "--db: %s", err.msg);
        store_close(st);
        goto out;
    }
    run_result res[MAX_VARIANTS];
    int64_t ids[MAX_VARIANTS];
    memset(res, 0, sizeof res);
    int done = 0;
    for (int i = 0; i < nv && rc == 0; i++) {
        run_opts o = base;
        apply_variant(cmd, &o, &vs[i]);
        o.cfg.compare_id = compare_id;
        if (!o.cfg.label[0])
            snprintf(o.cfg.label, sizeof o.cfg.label, "compare %lld: %.63s", (long long)compare_id,
                     vs[i].name);
        char sub[96];
        snprintf(sub, sizeof sub, "compare (%.63s)", vs[i].name);
        rc = run_opts_execute(sub, &o, st, &ids[i], &res[i]);
        if (rc == 0)
            done++;
        if (!base.quiet && rc == 0)
            fprintf(stderr, "kvsim compare: %s done (run %lld)\n", vs[i].name, (long long)ids[i]);
    }
    if (rc == 0) {
        if (base.quiet)
            printf("%lld\n", (long long)compare_id);
        else
            print_table(stdout, vs, nv, res, ids, compare_id);
    }
    for (int i = 0; i < done; i++)
        run_result_free(&res[i]);
    store_close(st);
out:
    free(rest);
    return rc;
}
