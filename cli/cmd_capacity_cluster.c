/* cmd_capacity_cluster.c — `kvsim capacity --search cluster`: the cheapest
 * replicas x TP x GPU configuration that meets the SLOs (job_cluster.h).
 * This file parses the flags, runs the probes in cost order and prints. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../base/str.h"
#include "../job/job_cluster.h"
#include "../store/store.h"
#include "capacity_search.h"
#include "cli.h"
#include "run_opts.h"


typedef struct cluster_args {
    const char *slo, *gpus, *price, *tps, *max_rep, *splits; /* the search's own flags */
    char **rest;            /* argv minus them: the run flags */
    int nrest;
    run_opts base;
    job_cluster_prices prices;
    double tps_v[CLI_MAX_TPS];
    int ntp;
    int64_t max_replicas;
    job_cluster_splits pd;  /* --pd-splits */
} cluster_args;

static int split_args(const char *cmd, int argc, char **argv, cluster_args *a)
{
    const char *dummy = NULL; /* --search cluster: capacity_search_main sent us here */
    const cli_own_flag own[] = {
        {"--search", &dummy},   {"--slo", &a->slo},      {"--gpus", &a->gpus},
        {"--price", &a->price}, {"--tp-list", &a->tps}, {"--max-replicas", &a->max_rep},
        {"--pd-splits", &a->splits},
    };
    return cli_split_own_flags(cmd, argc, argv, own, (int)(sizeof own / sizeof own[0]), a->rest,
                               &a->nrest);
}

static void tp_skipped(void *ctx, const char *gpu, int64_t tp, const char *why)
{
    if (*(const int *)ctx)
        fprintf(stderr, "kvsim capacity: %s tp %lld skipped: %s\n", gpu, (long long)tp, why);
}

/* The run flag named `flag` (or one of own[0..n)) among the run flags. */
static const char *given_flag(const cluster_args *a, const char *const *own, size_t n_own)
{
    for (int i = 1; i < a->nrest; i++)
        for (size_t k = 0; k < n_own; k++) {
            size_t n = strlen(own[k]);
            if (!strncmp(a->rest[i], own[k], n) && (!a->rest[i][n] || a->rest[i][n] == '='))
                return own[k];
        }
    return NULL;
}

static int setup(const char *cmd, cluster_args *a, job_search *js)
{
    kvs_err err;
    static const char *const searched[] = {"--gpu", "--tp", "--replicas", "--pd", "--pd-tp"};
    const char *own = given_flag(a, searched, sizeof searched / sizeof searched[0]);
    if (own && !strncmp(own, "--pd", 4))
        return cli_fail(cmd, "--search cluster: %s is what is searched; drop it (use "
                             "--pd-splits auto|P:D,..., with --tp-list for each pool)",
                        own);
    if (own)
        return cli_fail(cmd, "--search cluster: %s is what is searched; drop it (use --gpus, "
                             "--tp-list, --max-replicas)",
                        own);
    if (!a->slo)
        return cli_fail(cmd, "--search needs --slo, e.g. --slo ttft_p99=2,tpot_p99=0.1");
    if (!a->gpus || !a->price)
        return cli_fail(cmd, "--search cluster needs --gpus G1,G2 and --price G1=D,G2=D "
                             "(dollars per GPU-hour)");
    if (cap_slo_parse(a->slo, &js->slo, &err) ||
        job_cluster_prices_parse(a->gpus, a->price, &a->prices, &err))
        return cli_fail(cmd, "%s", err.msg);
    a->max_replicas = 8;
    if (a->max_rep && cli_parse_i64(cmd, "--max-replicas", a->max_rep, 1, 1024, &a->max_replicas))
        return CLI_EXIT_ERR;
    const double tps[] = {1, 2, 4, 8};
    memcpy(a->tps_v, tps, sizeof tps);
    a->ntp = 4;
    if (a->tps && cli_parse_tp_list(cmd, a->tps, a->tps_v, &a->ntp))
        return CLI_EXIT_ERR;
    if (job_cluster_splits_parse(a->splits, a->max_replicas, &a->pd, &err))
        return cli_fail(cmd, "%s", err.msg);
    static const char *const link[] = {"--kv-link"};
    if (a->pd.n == 0 && given_flag(a, link, 1))
        return cli_fail(cmd, "--kv-link: applies only with --pd-splits (the P:D candidates)");
    run_opts_defaults(&a->base);
    if (run_opts_parse_argv(cmd, &a->base, a->nrest, a->rest))
        return CLI_EXIT_ERR;
    if (a->pd.n > 0 && a->base.cfg.sched.engine != SCHED_ENGINE_VLLM_V1)
        return cli_fail(cmd, "--pd-splits: disaggregated serving needs --engine vllm-v1; the "
                             "%s profile has no KV hand-off (docs/cluster.md, D7)",
                        sched_engine_name(a->base.cfg.sched.engine));
    job_check(&a->base, &err); /* errors come back with the first probe, named */
    js->param = "cost_per_hour";
    return 0;
}

static int create_search(const char *cmd, const cluster_args *a, job_search *js, store **st)
{
    kvs_err err;
    char *base_args = str_join(a->nrest - 1, a->rest + 1, "\n");
    if (!base_args)
        return cli_fail(cmd, "out of memory");
    char desc[1536];
    snprintf(desc, sizeof desc, "search=cluster\nslo=%s\ngpus=%s\nprice=%s\ntp-list=%s\n"
                                "max-replicas=%lld\npd-splits=%s\n",
             a->slo, a->gpus, a->price, a->tps ? a->tps : "1,2,4,8",
             (long long)a->max_replicas, a->splits ? a->splits : "none");
    int rc = 0;
    store_sweep_def def = {"search", desc, base_args, 0, 0, NULL, NULL, NULL, 0, NULL, NULL, NULL};
    if (cli_open_db(cmd, a->base.db, st))
        rc = CLI_EXIT_ERR;
    else if (store_sweep_create(*st, &def, &js->sweep_id, &err))
        rc = cli_fail(cmd, "--db: %s", err.msg);
    free(base_args);
    return rc;
}

/* One probe: candidate k's run, stored and checked. */
static int probe(const char *cmd, job_search *js, const cluster_args *a,
                 const job_cluster_cand *k, int verbose, cap_probe *out, double *tok_s)
{
    job_probe_point pt;
    kvs_err err;
    if (job_cluster_point(js, &a->prices, k, &pt, &err))
        return cli_fail(cmd, "%s", err.msg);
    run_result res = {0};
    char sub[256];
    snprintf(sub, sizeof sub, "capacity (%s)", pt.key);
    memset(out, 0, sizeof *out);
    int rc = run_opts_execute(sub, &pt.opts, js->st, &out->run_id, &res);
    store_sweep_untag(js->st);
    if (rc)
        return rc;
    *tok_s = res.sum.throughput_tok_s;
    rc = job_search_record(js, &pt, k->cost_h, out->run_id, &res.sum, out, &err);
    run_result_free(&res);
    out->x = k->cost_h;
    if (rc)
        return cli_fail(cmd, "%s", err.msg);
    if (verbose)
        fprintf(stderr, "kvsim capacity: %s ($%.2f/h): %s (run %lld)\n", pt.key, k->cost_h,
                out->holds ? "holds" : out->verdict, (long long)out->run_id);
    return 0;
}

static void describe(char *buf, size_t n, const cluster_args *a, const job_cluster_cand *k)
{
    if (k->p > 0)
        snprintf(buf, n, "P:D %lld:%lld on %s, prefill tp %lld, decode tp %lld (%lld GPUs, "
                         "$%.2f/h)",
                 (long long)k->p, (long long)(k->replicas - k->p), a->prices.gpu[k->gpu],
                 (long long)k->tp, (long long)k->tp_d, (long long)job_cluster_cand_gpus(k),
                 k->cost_h);
    else
        snprintf(buf, n, "%lld x %s tp %lld, aggregated (%lld GPUs, $%.2f/h)",
                 (long long)k->replicas, a->prices.gpu[k->gpu], (long long)k->tp,
                 (long long)job_cluster_cand_gpus(k), k->cost_h);
}

static void print_result(const cluster_args *a, const job_search *js, const cap_result *r,
                         const job_cluster_cand *found, const job_cluster_cand *last_fail,
                         double tok_s)
{
    char what[160];
    if (a->base.quiet) {
        printf("%lld\n", (long long)js->sweep_id);
        return;
    }
    double per_mtok = found ? job_cluster_cost_per_mtok(found->cost_h, tok_s) : NAN;
    if (a->base.json) {
        printf("{\"search_id\": %lld, \"search\": \"cluster\", \"slo\": ",
               (long long)js->sweep_id);
        str_json_write(stdout, a->slo);
        printf(", \"status\": \"%s\", \"probes\": %d", cap_status_name(r->status), r->probes);
        if (found)
            printf(", \"gpu\": \"%s\", \"tp\": %lld, \"replicas\": %lld, \"gpus\": %lld, "
                   "\"cost_per_hour\": %.17g, \"cost_per_mtok\": %.17g, \"run_id\": %lld",
                   a->prices.gpu[found->gpu], (long long)found->tp, (long long)found->replicas,
                   (long long)job_cluster_cand_gpus(found), found->cost_h, per_mtok,
                   (long long)r->lo.run_id);
        if (found && found->p > 0)
            printf(", \"layout\": \"pd\", \"pd\": \"%lld:%lld\", \"decode_tp\": %lld",
                   (long long)found->p, (long long)(found->replicas - found->p),
                   (long long)found->tp_d);
        else if (found)
            printf(", \"layout\": \"aggregated\"");
        printf("}\n");
        return;
    }
    const run_config *b = &a->base.cfg;
    printf("kvsim capacity --search cluster (search %lld): %s, %s\nSLO: %s\n",
           (long long)js->sweep_id, b->model,
           b->synthetic[0] ? b->synthetic : (b->trace_path[0] ? b->trace_path : "the default trace"),
           a->slo);
    if (found) {
        describe(what, sizeof what, a, found);
        printf("  cheapest: %s, $%.4f per million output tokens at %.1f tok/s (run %lld); "
               "%d probes\n",
               what, per_mtok, tok_s, (long long)r->lo.run_id, r->probes);
        if (last_fail) {
            describe(what, sizeof what, a, last_fail);
            printf("  the next cheaper, %s, fails (run %lld: %s)\n", what,
                   (long long)r->hi.run_id, r->hi.verdict);
        }
    } else {
        printf("  unreachable: no configuration up to %lld replicas meets the SLOs; closest "
               "run %lld: %s; %d probes\n",
               (long long)a->max_replicas, (long long)r->best.run_id, r->best.verdict,
               r->probes);
    }
    printf("(probes: SELECT * FROM search_probes WHERE sweep_id = %lld)\n",
           (long long)js->sweep_id);
}

/* Probe the candidates in cost order until one holds. */
static int search(const char *cmd, const cluster_args *a, job_search *js,
                  const job_cluster_cand *c, int n, int verbose)
{
    cap_result r;
    memset(&r, 0, sizeof r);
    r.status = CAP_STATUS_UNREACHABLE;
    const job_cluster_cand *found = NULL, *fail = NULL;
    double tok_s = NAN;
    for (int i = 0; i < n && !found; i++) {
        cap_probe p;
        double t = NAN;
        int rc = probe(cmd, js, a, &c[i], verbose, &p, &t);
        if (rc)
            return cli_fail(cmd, "search %lld stopped: a probe failed (see above)",
                            (long long)js->sweep_id);
        if (r.probes++ == 0 || p.ratio < r.best.ratio)
            r.best = p;
        if (p.holds) {
            r.lo = p;
            r.have_lo = 1;
            r.status = CAP_STATUS_FOUND;
            found = &c[i];
            tok_s = t;
        } else {
            r.hi = p;
            r.have_hi = 1;
            fail = &c[i];
        }
    }
    kvs_err err;
    if (job_search_store_result(js, a->slo, &r, &err))
        return cli_fail(cmd, "%s", err.msg);
    print_result(a, js, &r, found, found ? fail : NULL, tok_s);
    fflush(stdout);
    if (!found)
        return cli_fail(cmd, "SLO unreachable: no configuration of --gpus, --tp-list and up to "
                             "%lld replicas meets it; closest: run %lld (%s)",
                        (long long)a->max_replicas, (long long)r.best.run_id, r.best.verdict);
    return 0;
}

int capacity_cluster_main(int argc, char **argv)
{
    const char *cmd = "capacity";
    cluster_args a;
    job_search js;
    store *st = NULL;
    job_cluster_cand *cand = NULL;
    int n = 0, rc = CLI_EXIT_ERR;
    memset(&a, 0, sizeof a);
    memset(&js, 0, sizeof js);
    if (!(a.rest = calloc((size_t)argc + 1, sizeof *a.rest)))
        return cli_fail(cmd, "out of memory");
    if (split_args(cmd, argc, argv, &a) || setup(cmd, &a, &js))
        goto out;
    int verbose = !a.base.quiet && !a.base.json;
    kvs_err err;
    if (job_cluster_candidates(&a.base, &a.prices, a.tps_v, a.ntp, a.max_replicas, &a.pd,
                               tp_skipped, &verbose, &cand, &n, &err)) {
        rc = cli_fail(cmd, "%s", err.msg);
        goto out;
    }
    if (create_search(cmd, &a, &js, &st))
        goto out;
    js.st = st;
    js.base = a.base;
    rc = search(cmd, &a, &js, cand, n, verbose);
    kvs_err ferr; /* the group's status: complete once the search has run */
    if (store_group_finish(st, "sweep", js.sweep_id, rc == 0 ? "complete" : "interrupted", &ferr) &&
        rc == 0)
        rc = cli_fail(cmd, "--db: %s", ferr.msg);
out:
    free(cand);
    job_cluster_splits_free(&a.pd);
    store_close(st);
    free(a.rest);
    return rc;
}
