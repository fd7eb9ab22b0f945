/* cmd_capacity_search.c — `kvsim capacity --search rate|tp`: load and
 * hardware capacity planning against SLOs.  Every probe is a stored run,
 * grouped as one sweep of kind 'search' (sweep_points, sweep_point_params)
 * with its verdict in search_probes and the answer per policy in
 * search_results.  The searches and the probes' bookkeeping are job/'s
 * (job_capacity.c); this file parses the flags, runs the probes and prints. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../base/str.h"
#include "../store/store.h"
#include "capacity_search.h"
#include "capacity_search_impl.h"
#include "cli.h"
#include "run_opts.h"


void capacity_search_usage(FILE *f)
{
    fprintf(f,
            "usage: kvsim capacity --search rate --slo METRIC=LIMIT,... [--policies P,...]\n"
            "                      [run flags...]\n"
            "       kvsim capacity --search tp --slo METRIC=LIMIT,... [--tp-list 1,2,4,8]\n"
            "                      [--policies P,...] [run flags...]\n"
            "       kvsim capacity --search cluster --slo METRIC=LIMIT,... --gpus G1,G2\n"
            "                      --price G1=D,G2=D [--tp-list 1,2,4,8] [--max-replicas 8]\n"
            "                      [--pd-splits none|auto|P:D,...] [run flags...]\n"
            "       kvsim capacity --resume SEARCH_ID [--db FILE]\n\n"
            "Capacity planning against service level objectives, by simulation:\n"
            "  --search rate   the highest arrival rate whose run meets the SLOs: the rate= of\n"
            "                  a --synthetic workload, or a trace's rate (scaled as --rate R\n"
            "                  does; the answer gives the scale too).  From\n"
            "                  the given rate, doubles (or halves) until one probe holds and\n"
            "                  one fails (at most %d times), then bisects geometrically until\n"
            "                  the failing rate is within %.0f%% of the holding one.\n"
            "  --search tp     the smallest tensor-parallel degree of --tp-list (valid for\n"
            "                  the model and fitting in memory) that carries the workload at\n"
            "                  its given rate within the SLOs.\n"
            "  --search cluster  the cheapest replicas x TP x GPU configuration that carries\n"
            "                  the workload at its given rate within the SLOs, at the prices\n"
            "                  given: every GPU of --gpus, TP degree of --tp-list and 1 ..\n"
            "                  --max-replicas replicas (default 8), probed in order of cost\n"
            "                  per hour (replicas x tp x price) until one holds; reports its\n"
            "                  cost per million output tokens (docs/cluster.md, section S).\n"
            "  --gpus G,...    GPUs for --search cluster (kvsim gpus lists them)\n"
            "  --price G=D,... dollars per GPU-hour of every GPU of --gpus (no defaults)\n"
            "  --max-replicas N  most replicas a --search cluster probe has (default 8)\n"
            "  --pd-splits S   --search cluster also tries disaggregated serving: auto =\n"
            "                  every P:D with P + D <= --max-replicas, or a list 1:1,1:2;\n"
            "                  each pool takes every TP of --tp-list, a probe costs\n"
            "                  (P x TP_P + D x TP_D) x price (vllm-v1; default none)\n\n"
            "  --slo SPEC      bounds, comma-separated (required):\n"
            "                    ttft_|tpot_|e2e_|norm_latency_ + p50|p90|p99|mean = max seconds\n"
            "                    throughput (= throughput_tok_s), throughput_req_s,\n"
            "                    goodput_req_s = min per second\n"
            "                    attainment = min fraction of finished requests meeting the\n"
            "                    per-request targets ttft=S, tpot=S, e2e=S (given alongside)\n"
            "                  e.g. ttft_p99=2,tpot_p99=0.1 or ttft=1,tpot=0.05,attainment=0.9\n"
            "  --policies P,...  search each scheduling policy (fcfs, priority; default: the\n"
            "                  --policy of the run flags)\n"
            "  --tp-list N,... TP degrees for --search tp (default 1,2,4,8)\n"
            "  --max-rejected F  a probe rejecting more than this fraction of its requests\n"
            "                  fails (default 0: any rejected request fails it; the verdict\n"
            "                  counts them by reason)\n"
            "  --resume ID     finish search ID (after Ctrl-C or a kill) with the flags\n"
            "                  stored in the database: the probes already stored are read\n"
            "                  back, the search goes on from there; other flags, when\n"
            "                  given, must be the ones it started with.  Refused (exit 2,\n"
            "                  nothing written) when a trace file now resolves elsewhere\n"
            "                  or its SHA-256 changed.  Ctrl-C stops before the next probe\n"
            "                  and marks the search interrupted (exit 130).\n"
            "  --json          print the answer as one JSON object\n"
            "  --quiet         print only the search id (its sweep_id)\n"
            "  --help          this text\n\n"
            "Every probe is stored as a run (sweep_runs / search_probes WHERE sweep_id = the\n"
            "search id).  Exit 0 when every policy has an answer; 2 (with the best point\n"
            "found) when an SLO holds at no rate or TP tried.\n\n"
            "run flags (as kvsim run; not --slo, which is the bound above):\n%s",
            RATE_MAX_STEPS, (RATE_STOP - 1) * 100, job_param_help());
}


static void probe_note(const search_ctx *c, const job_probe_point *pt, const cap_probe *out,
                       const char *how)
{
    if (c->verbose)
        fprintf(stderr, "kvsim capacity: %s %s=%s: %s (run %lld%s)\n",
                sched_policy_name(pt->opts.cfg.sched.policy), c->js.param, pt->value,
                out->holds ? "holds" : out->verdict, (long long)out->run_id, how);
}

/* A resumed probe whose run is stored: read back and checked again. */
static int probe_stored(search_ctx *c, const job_probe_point *pt, double x, cap_probe *out)
{
    job_run_info row;
    kvs_err err;
    out->run_id = pt->stored_run;
    if (job_read_run(c->js.st, pt->stored_run, &row, &err))
        return cli_fail(c->cmd, "--resume: search %lld: probe %lld: %s",
                        (long long)c->js.sweep_id, (long long)pt->index, err.msg);
    if (strcmp(row.status, "finished"))
        return cli_fail(c->cmd, "--resume: search %lld: probe %lld (%s): its run %lld failed: "
                                "%.300s; delete that run to probe it again",
                        (long long)c->js.sweep_id, (long long)pt->index, pt->key,
                        (long long)pt->stored_run, row.error);
    if (job_search_record(&c->js, pt, x, pt->stored_run, &row.sum, out, &err))
        return cli_fail(c->cmd, "%s", err.msg);
    probe_note(c, pt, out, ", stored");
    return 0;
}

/* The probe: one run at x, stored and tagged, checked against the SLOs. */
static int probe_run(void *vctx, double x, cap_probe *out)
{
    search_ctx *c = vctx;
    job_probe_point pt;
    kvs_err err;
    char sub[256];
    if (job_search_point(&c->js, x, &pt, &err))
        return cli_fail(c->cmd, "%s", err.msg);
    if (pt.stored_run) /* resumed: this probe's run is stored */
        return probe_stored(c, &pt, x, out);
    if (cli_stop_requested()) { /* Ctrl-C: no new probe */
        store_sweep_untag(c->js.st);
        return CLI_EXIT_INTERRUPTED;
    }
    run_result res = {0};
    snprintf(sub, sizeof sub, "capacity (%s)", pt.key);
    int rc = run_opts_execute(sub, &pt.opts, c->js.st, &out->run_id, &res);
    store_sweep_untag(c->js.st);
    if (rc)
        return rc;
    rc = job_search_record(&c->js, &pt, x, out->run_id, &res.sum, out, &err);
    run_result_free(&res);
    if (rc)
        return cli_fail(c->cmd, "%s", err.msg);
    probe_note(c, &pt, out, "");
    return 0;
}

static void json_probe(FILE *f, const char *name, int have, const cap_probe *p)
{
    fprintf(f, ", \"%s\": ", name);
    if (!have) {
        fprintf(f, "null");
        return;
    }
    fprintf(f, "{\"value\": %.17g, \"run_id\": %lld, \"holds\": %s, \"verdict\": ", p->x,
            (long long)p->run_id, p->holds ? "true" : "false");
    str_json_write(f, p->verdict);
    fprintf(f, "}");
}

/* Parse "a,b,c" into policies. */
static int parse_policies(const char *cmd, const char *arg, int *pol, int *n)
{
    char buf[256];
    if (strlen(arg) >= sizeof buf)
        return cli_fail(cmd, "--policies: too long");
    strcpy(buf, arg);
    *n = 0;
    for (char *save, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int v = sched_policy_parse(t);
        if (v < 0)
            return cli_fail(cmd, "--policies: unknown policy '%s' (see kvsim run --help)", t);
        for (int i = 0; i < *n; i++)
            if (pol[i] == v)
                return cli_fail(cmd, "--policies: '%s' given twice", t);
        if (*n == MAX_POLICIES)
            return cli_fail(cmd, "--policies: at most %d", MAX_POLICIES);
        pol[(*n)++] = v;
    }
    if (*n == 0)
        return cli_fail(cmd, "--policies: empty list");
    return 0;
}

static void tp_skipped(void *ctx, int64_t tp, const char *why)
{
    if (*(const int *)ctx)
        fprintf(stderr, "kvsim capacity: tp %lld skipped: %s\n", (long long)tp, why);
}

/* Split argv into the search's own flags and the run flags (a->rest). */
static int split_args(const char *cmd, int argc, char **argv, search_args *a)
{
    const cli_own_flag own[] = {
        {"--search", &a->search},   {"--slo", &a->slo},
        {"--policies", &a->policies}, {"--tp-list", &a->tps},
        {"--max-rejected", &a->max_rejected}, {"--resume", &a->resume},
    };
    return cli_split_own_flags(cmd, argc, argv, own, (int)(sizeof own / sizeof own[0]), a->rest,
                               &a->nrest);
}

/* Check the flags and set up the search: SLO, run flags, policies, TP
 * degrees, the parameter and its start. */
int capacity_search_setup(const char *cmd, search_args *a, search_ctx *c)
{
    kvs_err err;
    if (!a->search || (strcmp(a->search, "rate") && strcmp(a->search, "tp")))
        return cli_fail(cmd, "--search: '%s' is not rate, tp or cluster",
                        a->search ? a->search : "");
    a->kind = !strcmp(a->search, "rate") ? SEARCH_RATE : SEARCH_TP;
    if (!a->slo)
        return cli_fail(cmd, "--search needs --slo, e.g. --slo ttft_p99=2,tpot_p99=0.1");
    run_opts_defaults(&a->base);
    if (run_opts_parse_argv(cmd, &a->base, a->nrest, a->rest))
        return CLI_EXIT_ERR;
    /* per-request targets from the run flags (--goodput 'ttft:MS ...', vLLM's
     * syntax) join the search's SLO, unless --slo names its own */
    const run_config *bc = &a->base.cfg;
    char slo[1024];
    snprintf(slo, sizeof slo, "%s", a->slo);
    if (bc->slo_ttft_s > 0 || bc->slo_tpot_s > 0 || bc->slo_e2e_s > 0) {
        cap_slo own;
        if (cap_slo_parse(a->slo, &own, &err) == 0 &&
            (own.req_ttft_s > 0 || own.req_tpot_s > 0 || own.req_e2e_s > 0))
            return cli_fail(cmd, "--goodput and --slo ttft=/tpot=/e2e=: give the per-request "
                                 "targets once");
        char *p = slo;
        size_t n = sizeof slo;
        const double v[3] = {bc->slo_ttft_s, bc->slo_tpot_s, bc->slo_e2e_s};
        const char *const k[3] = {"ttft", "tpot", "e2e"};
        for (int i = 0; i < 3; i++)
            if (v[i] > 0) {
                int w = snprintf(p, n, "%s=%.17g,", k[i], v[i]);
                p += w;
                n -= (size_t)w;
            }
        snprintf(p, n, "%s", a->slo);
    }
    if (cap_slo_parse(slo, &c->js.slo, &err))
        return cli_fail(cmd, "%s", err.msg);
    if (a->max_rejected) {
        char *end;
        double f = strtod(a->max_rejected, &end);
        if (!*a->max_rejected || *end || !(f >= 0.0 && f < 1.0))
            return cli_fail(cmd, "--max-rejected: '%s' is not a fraction in [0, 1)",
                            a->max_rejected);
        c->js.slo.max_rejected = f;
    }

    a->npol = 1;
    a->pols[0] = a->base.cfg.sched.policy;
    if (a->policies && parse_policies(cmd, a->policies, a->pols, &a->npol))
        return CLI_EXIT_ERR;
    const double tps[] = {1, 2, 4, 8};
    memcpy(a->tps_v, tps, sizeof tps);
    a->ntp = 4;
    if (a->tps && a->kind != SEARCH_TP)
        return cli_fail(cmd, "--tp-list: only with --search tp");
    if (a->tps && cli_parse_tp_list(cmd, a->tps, a->tps_v, &a->ntp))
        return CLI_EXIT_ERR;
    c->verbose = !a->base.quiet && !a->base.json;
    if (job_search_param(&a->base, a->kind == SEARCH_TP, &c->js.param, &a->x0, &c->js.native_rps,
                         &err))
        return cli_fail(cmd, "%s", err.msg);
    if (a->kind == SEARCH_TP) {
        for (int i = 1; i < a->nrest; i++)
            if (!strcmp(a->rest[i], "--tp") || !strncmp(a->rest[i], "--tp=", 5))
                return cli_fail(cmd, "--search tp: the TP degree is what is searched; drop --tp "
                                     "(use --tp-list)");
        if (job_search_tps(&a->base, a->tps_v, &a->ntp, tp_skipped, &c->verbose, &err))
            return cli_fail(cmd, "%s", err.msg);
    }
    return 0;
}

static void print_json(const search_args *a, const search_ctx *c, const cap_result *res)
{
    printf("{\"search_id\": %lld, \"search\": \"%s\", \"param\": \"%s\", \"slo\": ",
           (long long)c->js.sweep_id, a->search, c->js.param);
    str_json_write(stdout, a->slo);
    if (c->js.native_rps > 0) /* probes scale the trace: value / this = the scale */
        printf(", \"trace_rate_rps\": %.17g", c->js.native_rps);
    printf(", \"results\": [");
    for (int k = 0; k < a->npol; k++) {
        const cap_result *R = &res[k];
        printf("%s\n  {\"policy\": \"%s\", \"status\": \"%s\", \"probes\": %d", k ? "," : "",
               sched_policy_name(a->pols[k]), cap_status_name(R->status), R->probes);
        json_probe(stdout, "holds", R->have_lo, &R->lo);
        json_probe(stdout, "fails", R->have_hi, &R->hi);
        json_probe(stdout, "best", 1, &R->best);
        printf("}");
    }
    printf("\n]}\n");
}

/* " (x0.917 of the trace's 5.53 req/s)" after a probed trace rate. */
static const char *scale_of(const search_ctx *c, double x, char *buf, size_t n)
{
    buf[0] = 0;
    if (c->js.native_rps > 0 && !strcmp(c->js.param, "rate"))
        snprintf(buf, n, " (x%.4g of the trace's %.4g req/s)", x / c->js.native_rps,
                 c->js.native_rps);
    return buf;
}

static void print_text(const search_args *a, const search_ctx *c, const cap_result *res,
                       const char *unit)
{
    const run_config *b = &a->base.cfg;
    const char *param = c->js.param;
    char s1[96], s2[96];
    printf("kvsim capacity --search %s (search %lld): %s on %s, tp %lld, engine %s, %s",
           a->search, (long long)c->js.sweep_id, b->model, b->gpu, (long long)b->tp,
           sched_engine_name(b->sched.engine),
           b->synthetic[0] ? b->synthetic : (b->trace_path[0] ? b->trace_path : "the default trace"));
    if (a->kind == SEARCH_TP && !b->synthetic[0] && b->rate_rps > 0)
        printf(" at %g req/s", b->rate_rps);
    else if (a->kind == SEARCH_TP && !b->synthetic[0] && b->rate_scale != 1.0)
        printf(" at rate x%g", b->rate_scale);
    printf("\nSLO: %s\n", a->slo);
    printf("     and at most %.6g%% of requests rejected (--max-rejected)\n",
           100.0 * c->js.slo.max_rejected);
    for (int k = 0; k < a->npol; k++) {
        const cap_result *R = &res[k];
        const char *pn = sched_policy_name(a->pols[k]);
        if (R->status == CAP_STATUS_BRACKETED)
            printf("  %-9s holds at %s %.6g%s%s (run %lld); fails at %.6g%s%s (run %lld: %s); "
                   "%d probes\n",
                   pn, param, R->lo.x, unit, scale_of(c, R->lo.x, s1, sizeof s1),
                   (long long)R->lo.run_id, R->hi.x, unit, scale_of(c, R->hi.x, s2, sizeof s2),
                   (long long)R->hi.run_id, R->hi.verdict, R->probes);
        else if (R->status == CAP_STATUS_FOUND && R->have_hi)
            printf("  %-9s smallest tp %g (run %lld); tp %g fails (run %lld: %s); "
                   "%d probes\n",
                   pn, R->lo.x, (long long)R->lo.run_id, R->hi.x, (long long)R->hi.run_id,
                   R->hi.verdict, R->probes);
        else if (R->status == CAP_STATUS_FOUND)
            printf("  %-9s smallest tp %g (run %lld); %d probes\n", pn, R->lo.x,
                   (long long)R->lo.run_id, R->probes);
        else if (R->status == CAP_STATUS_UNBOUNDED)
            printf("  %-9s holds at every %s tried, up to %.6g%s%s (run %lld); %d probes\n", pn,
                   param, R->lo.x, unit, scale_of(c, R->lo.x, s1, sizeof s1),
                   (long long)R->lo.run_id, R->probes);
        else
            printf("  %-9s unreachable: best %s %.6g%s%s (run %lld: %s); %d probes\n", pn, param,
                   R->best.x, unit, scale_of(c, R->best.x, s1, sizeof s1),
                   (long long)R->best.run_id, R->best.verdict, R->probes);
    }
    printf("(probes: SELECT * FROM search_probes WHERE sweep_id = %lld)\n",
           (long long)c->js.sweep_id);
}

/* Run the search for every policy and store each answer. */
static int run_searches(const char *cmd, const search_args *a, search_ctx *c, cap_result *res)
{
    kvs_err err;
    for (int k = 0; k < a->npol; k++) {
        c->js.base = a->base;
        c->js.base.cfg.sched.policy = a->pols[k];
        int r = a->kind == SEARCH_RATE
                    ? cap_search_rate(a->x0, RATE_STOP, RATE_MAX_STEPS, probe_run, c, &res[k])
                    : cap_search_list(a->tps_v, a->ntp, probe_run, c, &res[k]);
        if (r == CLI_EXIT_INTERRUPTED)
            return r;
        if (r)
            return cli_fail(cmd, "search %lld stopped: a probe failed (see above)",
                            (long long)c->js.sweep_id);
        if (job_search_store_result(&c->js, a->slo, &res[k], &err))
            return cli_fail(cmd, "%s", err.msg);
    }
    return 0;
}

int capacity_search_main(int argc, char **argv)
{
    const char *cmd = "capacity";
    search_args a;
    search_ctx c;
    store *st = NULL;
    cap_result res[MAX_POLICIES];
    int rc = CLI_EXIT_ERR, ran = 0, interrupted = 0;
    stored_search ss = {NULL, NULL, NULL, 0};
    memset(&a, 0, sizeof a);
    memset(&c, 0, sizeof c);
    char **rest = calloc((size_t)argc + 1, sizeof *rest); /* a.rest: the given flags */
    if (!(a.rest = rest))
        return cli_fail(cmd, "out of memory");
    if (split_args(cmd, argc, argv, &a))
        goto out;
    if (a.search && !strcmp(a.search, "cluster")) {
        rc = capacity_cluster_main(argc, argv);
        goto out;
    }
    if (a.resume ? capacity_search_resume(cmd, &a, &c, &st, &ss)
                 : capacity_search_setup(cmd, &a, &c) || capacity_search_create(cmd, &a, &c, &st))
        goto out;
    c.js.st = st;
    c.cmd = cmd;
    cli_stop_install(0);
    int r = run_searches(cmd, &a, &c, res);
    cli_stop_restore();
    if (r == CLI_EXIT_INTERRUPTED) {
        interrupted = 1;
        rc = r;
        goto out;
    }
    if (r)
        goto out;
    ran = 1;
    const char *unit = a.kind == SEARCH_TP ? "" : " req/s";
    if (a.base.quiet)
        printf("%lld\n", (long long)c.js.sweep_id);
    else if (a.base.json)
        print_json(&a, &c, res);
    else
        print_text(&a, &c, res, unit);
    fflush(stdout);
    rc = 0;
    for (int k = 0; k < a.npol; k++) {
        const cap_result *R = &res[k];
        if (R->status != CAP_STATUS_UNREACHABLE)
            continue;
        rc = cli_fail(cmd, "SLO unreachable for policy %s: it fails even at %s %.6g%s, the %s "
                           "tried; best point: %s %.6g (run %lld): %s",
                      sched_policy_name(a.pols[k]), c.js.param, R->hi.x, unit,
                      a.kind == SEARCH_TP ? "largest" : "lowest", c.js.param, R->best.x,
                      (long long)R->best.run_id, R->best.verdict);
    }
out:
    if (st && c.js.sweep_id > 0) {
        kvs_err ferr; /* a search that ran to its verdicts is complete */
        if (store_group_finish(st, "sweep", c.js.sweep_id, ran ? "complete" : "interrupted",
                               &ferr) && (rc == 0 || interrupted))
            rc = cli_fail(cmd, "--db: %s", ferr.msg);
        else if (interrupted)
            cli_fail(cmd, "interrupted: %lld probes stored; resume with: kvsim capacity "
                          "--resume %lld --db %s",
                     (long long)c.js.next_point - 1, (long long)c.js.sweep_id, a.base.db);
    }
    capacity_stored_free(&ss); /* a.rest may be its stored flags */
    store_close(st);
    free(rest);
    return rc;
}
