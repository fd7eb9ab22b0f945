/* cmd_capacity_search.c — `kvsim capacity --search rate|tp`: load and
 * hardware capacity planning against SLOs.  Every probe is a stored run,
 * grouped as one sweep of kind 'search' (sweep_points, sweep_point_params)
 * with its verdict in search_probes and the answer per policy in
 * search_results.  The search itself is capacity_search.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../store/store.h"
#include "capacity_search.h"
#include "cli.h"
#include "run_opts.h"

#define MAX_POLICIES 8
#define MAX_TPS 16
#define RATE_STOP 1.05
#define RATE_MAX_STEPS 16

typedef enum search_kind { SEARCH_RATE = 0, SEARCH_TP = 1 } search_kind;

typedef struct search_ctx {
    const char *cmd;
    run_opts base;        /* base flags with this policy */
    store *st;
    int64_t sweep_id;
    int64_t next_point;   /* probe counter over the whole search */
    const char *param;    /* "rate", "rate-scale" or "tp" */
    cap_slo slo;
    int verbose;          /* one stderr line per probe */
} search_ctx;

void capacity_search_usage(FILE *f)
{
    fprintf(f,
            "usage: kvsim capacity --search rate --slo METRIC=LIMIT,... [--policies P,...]\n"
            "                      [run flags...]\n"
            "       kvsim capacity --search tp --slo METRIC=LIMIT,... [--tp-list 1,2,4,8]\n"
            "                      [--policies P,...] [run flags...]\n\n"
            "Capacity planning against service level objectives, by simulation:\n"
            "  --search rate   the highest arrival rate whose run meets the SLOs: the rate= of\n"
            "                  a --synthetic workload, or the --rate-scale of a trace.  From\n"
            "                  the given rate, doubles (or halves) until one probe holds and\n"
            "                  one fails (at most %d times), then bisects geometrically until\n"
            "                  the failing rate is within %.0f%% of the holding one.\n"
            "  --search tp     the smallest tensor-parallel degree of --tp-list (valid for\n"
            "                  the model and fitting in memory) that carries the workload at\n"
            "                  its given rate within the SLOs.\n\n"
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
            "  --json          print the answer as one JSON object\n"
            "  --quiet         print only the search id (its sweep_id)\n"
            "  --help          this text\n\n"
            "Every probe is stored as a run (sweep_runs / search_probes WHERE sweep_id = the\n"
            "search id).  Exit 0 when every policy has an answer; 2 (with the best point\n"
            "found) when an SLO holds at no rate or TP tried.\n\n"
            "run flags (as kvsim run; not --slo, which is the bound above):\n%s",
            RATE_MAX_STEPS, (RATE_STOP - 1) * 100, run_opts_help);
}


/* The probe: one run at x, stored and tagged, checked against the SLOs. */
static int probe_run(void *vctx, double x, cap_probe *out)
{
    search_ctx *c = vctx;
    run_opts o = c->base;
    kvs_err err;
    char val[64], key[128], sub[256];
    int64_t point = c->next_point++;
    if (!strcmp(c->param, "tp")) {
        o.cfg.tp = (int64_t)x;
        snprintf(val, sizeof val, "%lld", (long long)o.cfg.tp);
    } else {
        snprintf(val, sizeof val, "%.6g", x);
        if (!strcmp(c->param, "rate")) {
            if (sweep_spec_set(o.cfg.synthetic, sizeof o.cfg.synthetic, "rate", val, &err))
                return cli_fail(c->cmd, "%s", err.msg);
        } else {
            o.cfg.rate_scale = x;
        }
    }
    const char *pol = sched_policy_name(o.cfg.sched.policy);
    snprintf(key, sizeof key, "policy=%s %s=%s", pol, c->param, val);
    o.cfg.sweep_id = c->sweep_id;
    o.cfg.slo_ttft_s = c->slo.req_ttft_s;
    o.cfg.slo_tpot_s = c->slo.req_tpot_s;
    o.cfg.slo_e2e_s = c->slo.req_e2e_s;
    if (!c->base.cfg.label[0])
        snprintf(o.cfg.label, sizeof o.cfg.label, "search %lld #%lld: %s", (long long)c->sweep_id,
                 (long long)point, key);
    const char *params[2] = {"policy", c->param};
    const char *values[2] = {pol, val};
    if (store_sweep_add_point(c->st, c->sweep_id, point, 2, params, values, &err) ||
        store_sweep_tag(c->st, c->sweep_id, point, key, &err))
        return cli_fail(c->cmd, "--db: %s", err.msg);
    run_result res = {0};
    snprintf(sub, sizeof sub, "capacity (%s)", key);
    int rc = run_opts_execute(sub, &o, c->st, &out->run_id, &res);
    store_sweep_untag(c->st);
    if (rc)
        return rc;
    out->holds = cap_slo_check(&c->slo, &res.sum, &out->ratio, out->verdict, sizeof out->verdict);
    run_result_free(&res);
    if (store_search_probe(c->st, c->sweep_id, point, out->run_id, pol, c->param, x, out->holds,
                           out->verdict, &err))
        return cli_fail(c->cmd, "--db: %s", err.msg);
    if (c->verbose)
        fprintf(stderr, "kvsim capacity: %s %s=%s: %s (run %lld)\n", pol, c->param, val,
                out->holds ? "holds" : out->verdict, (long long)out->run_id);
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
    cli_json_str(f, p->verdict);
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

static int parse_tps(const char *cmd, const char *arg, double *tps, int *n)
{
    char buf[256];
    if (strlen(arg) >= sizeof buf)
        return cli_fail(cmd, "--tp-list: too long");
    strcpy(buf, arg);
    *n = 0;
    for (char *save, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int64_t v;
        if (cli_parse_i64(cmd, "--tp-list", t, 1, 1024, &v))
            return CLI_EXIT_ERR;
        if (*n && v <= tps[*n - 1])
            return cli_fail(cmd, "--tp-list: give ascending degrees ('%s')", arg);
        if (*n == MAX_TPS)
            return cli_fail(cmd, "--tp-list: at most %d degrees", MAX_TPS);
        tps[(*n)++] = (double)v;
    }
    if (*n == 0)
        return cli_fail(cmd, "--tp-list: empty list");
    return 0;
}

/* Keep the TP degrees valid for the model that fit in memory. */
static int filter_tps(const char *cmd, const run_opts *base, double *tps, int *n, int verbose)
{
    model_spec m;
    gpu_spec g;
    kvs_err err;
    if (model_lookup(base->cfg.model, &m, &err) || gpu_lookup(base->cfg.gpu, &g, &err))
        return cli_fail(cmd, "%s", err.msg);
    int k = 0;
    for (int i = 0; i < *n; i++) {
        run_config c = base->cfg;
        c.tp = (int64_t)tps[i];
        if (model_check_tp(&m, c.tp, &err) || run_config_resolve(&c, &m, &g, &err)) {
            if (verbose)
                fprintf(stderr, "kvsim capacity: tp %lld skipped: %s\n", (long long)c.tp, err.msg);
            continue;
        }
        tps[k++] = tps[i];
    }
    *n = k;
    if (k == 0)
        return cli_fail(cmd, "--search tp: no degree of --tp-list is valid for %s on %s",
                        base->cfg.model, base->cfg.gpu);
    return 0;
}

int capacity_search_main(int argc, char **argv)
{
    const char *cmd = "capacity";
    const char *s_search = NULL, *s_slo = NULL, *s_pol = NULL, *s_tps = NULL;
    char **rest = calloc((size_t)argc + 1, sizeof *rest);
    int nrest = 0, rc = CLI_EXIT_ERR;
    store *st = NULL;
    char *base_args = NULL;
    kvs_err err;
    search_ctx c;
    memset(&c, 0, sizeof c);
    if (!rest)
        return cli_fail(cmd, "out of memory");
    rest[nrest++] = argv[0];
    for (int i = 1; i < argc; i++) {
        int missing = 0;
        const char *v = NULL;
        const char **dst = NULL;
        if (cli_take_value(argc, argv, &i, "--search", &v, &missing))
            dst = &s_search;
        else if (cli_take_value(argc, argv, &i, "--slo", &v, &missing))
            dst = &s_slo;
        else if (cli_take_value(argc, argv, &i, "--policies", &v, &missing))
            dst = &s_pol;
        else if (cli_take_value(argc, argv, &i, "--tp-list", &v, &missing))
            dst = &s_tps;
        if (!dst) {
            rest[nrest++] = argv[i];
            continue;
        }
        if (missing) {
            cli_fail(cmd, "%s: missing value", argv[i]);
            goto out;
        }
        *dst = v;
    }
    search_kind kind;
    if (!s_search || (strcmp(s_search, "rate") && strcmp(s_search, "tp"))) {
        cli_fail(cmd, "--search: '%s' is not rate or tp", s_search ? s_search : "");
        goto out;
    }
    kind = !strcmp(s_search, "rate") ? SEARCH_RATE : SEARCH_TP;
    if (!s_slo) {
        cli_fail(cmd, "--search needs --slo, e.g. --slo ttft_p99=2,tpot_p99=0.1");
        goto out;
    }
    if (cap_slo_parse(s_slo, &c.slo, &err)) {
        cli_fail(cmd, "%s", err.msg);
        goto out;
    }
    run_opts_defaults(&c.base);
    if (run_opts_parse_argv(cmd, &c.base, nrest, rest))
        goto out;
    int pols[MAX_POLICIES], npol = 1;
    pols[0] = c.base.cfg.sched.policy;
    if (s_pol && parse_policies(cmd, s_pol, pols, &npol))
        goto out;
    double tps[MAX_TPS] = {1, 2, 4, 8};
    int ntp = 4;
    if (s_tps && kind != SEARCH_TP) {
        cli_fail(cmd, "--tp-list: only with --search tp");
        goto out;
    }
    if (s_tps && parse_tps(cmd, s_tps, tps, &ntp))
        goto out;
    c.verbose = !c.base.quiet && !c.base.json;
    double x0 = 0;
    if (kind == SEARCH_RATE) {
        if (c.base.cfg.synthetic[0]) {
            trace_synth_spec spec;
            if (trace_synth_parse(c.base.cfg.synthetic, &spec, &err)) {
                cli_fail(cmd, "%s", err.msg);
                goto out;
            }
            if (spec.arrival == TRACE_ARRIVAL_BURST) {
                cli_fail(cmd, "--search rate: arrival=burst has no rate to search");
                goto out;
            }
            c.param = "rate";
            x0 = spec.rate;
        } else {
            c.param = "rate-scale";
            x0 = c.base.cfg.rate_scale;
        }
    } else {
        c.param = "tp";
        for (int i = 1; i < nrest; i++)
            if (!strcmp(rest[i], "--tp") || !strncmp(rest[i], "--tp=", 5)) {
                cli_fail(cmd, "--search tp: the TP degree is what is searched; drop --tp "
                              "(use --tp-list)");
                goto out;
            }
        if (filter_tps(cmd, &c.base, tps, &ntp, c.verbose))
            goto out;
    }
    /* the stored description and base arguments */
    size_t blen = 1;
    for (int i = 1; i < nrest; i++)
        blen += strlen(rest[i]) + 1;
    if (!(base_args = malloc(blen))) {
        cli_fail(cmd, "out of memory");
        goto out;
    }
    base_args[0] = 0;
    for (int i = 1; i < nrest; i++) {
        strcat(base_args, rest[i]);
        strcat(base_args, "\n");
    }
    char desc[1024];
    snprintf(desc, sizeof desc, "search=%s\nslo=%s\npolicies=%s\n%s%s%s", s_search, s_slo,
             s_pol ? s_pol : sched_policy_name(pols[0]), kind == SEARCH_TP ? "tp-list=" : "",
             kind == SEARCH_TP ? (s_tps ? s_tps : "1,2,4,8") : "", kind == SEARCH_TP ? "\n" : "");
    if (store_open_writable(c.base.db, &st, &err)) {
        cli_fail(cmd, "--db: %s", err.msg);
        goto out;
    }
    store_sweep_def def = {"search", desc, base_args, 0, 0, NULL, NULL, NULL};
    if (store_sweep_create(st, &def, &c.sweep_id, &err)) {
        cli_fail(cmd, "--db: %s", err.msg);
        goto out;
    }
    c.st = st;
    c.cmd = cmd;
    cap_result res[MAX_POLICIES];
    run_opts base = c.base;
    for (int k = 0; k < npol; k++) {
        c.base = base;
        c.base.cfg.sched.policy = pols[k];
        int r = kind == SEARCH_RATE
                    ? cap_search_rate(x0, RATE_STOP, RATE_MAX_STEPS, probe_run, &c, &res[k])
                    : cap_search_list(tps, ntp, probe_run, &c, &res[k]);
        if (r) {
            cli_fail(cmd, "search %lld stopped: a probe failed (see above)", (long long)c.sweep_id);
            goto out;
        }
        const cap_result *R = &res[k];
        store_search_row row = {sched_policy_name(pols[k]),
                                c.param,
                                s_slo,
                                cap_status_name(R->status),
                                R->lo.x,
                                R->hi.x,
                                R->have_lo ? R->lo.run_id : 0,
                                R->have_hi ? R->hi.run_id : 0,
                                R->best.run_id,
                                R->probes};
        if (store_search_result(st, c.sweep_id, &row, &err)) {
            cli_fail(cmd, "--db: %s", err.msg);
            goto out;
        }
    }
    /* report */
    const char *unit = kind == SEARCH_TP ? "" : !strcmp(c.param, "rate") ? " req/s" : "x";
    if (base.quiet) {
        printf("%lld\n", (long long)c.sweep_id);
    } else if (base.json) {
        printf("{\"search_id\": %lld, \"search\": \"%s\", \"param\": \"%s\", \"slo\": ",
               (long long)c.sweep_id, s_search, c.param);
        cli_json_str(stdout, s_slo);
        printf(", \"results\": [");
        for (int k = 0; k < npol; k++) {
            const cap_result *R = &res[k];
            printf("%s\n  {\"policy\": \"%s\", \"status\": \"%s\", \"probes\": %d", k ? "," : "",
                   sched_policy_name(pols[k]), cap_status_name(R->status), R->probes);
            json_probe(stdout, "holds", R->have_lo, &R->lo);
            json_probe(stdout, "fails", R->have_hi, &R->hi);
            json_probe(stdout, "best", 1, &R->best);
            printf("}");
        }
        printf("\n]}\n");
    } else {
        printf("kvsim capacity --search %s (search %lld): %s on %s, %s\nSLO: %s\n", s_search,
               (long long)c.sweep_id, base.cfg.model, base.cfg.gpu,
               base.cfg.synthetic[0] ? base.cfg.synthetic
                                     : (base.cfg.trace_path[0] ? base.cfg.trace_path
                                                               : "the default trace"),
               s_slo);
        for (int k = 0; k < npol; k++) {
            const cap_result *R = &res[k];
            const char *pn = sched_policy_name(pols[k]);
            if (R->status == CAP_STATUS_BRACKETED)
                printf("  %-9s holds at %s %.6g%s (run %lld); fails at %.6g%s (run %lld: %s); "
                       "%d probes\n",
                       pn, c.param, R->lo.x, unit, (long long)R->lo.run_id, R->hi.x, unit,
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
                printf("  %-9s holds at every %s tried, up to %.6g%s (run %lld); %d probes\n", pn,
                       c.param, R->lo.x, unit, (long long)R->lo.run_id, R->probes);
            else
                printf("  %-9s unreachable: best %s %.6g%s (run %lld: %s); %d probes\n", pn,
                       c.param, R->best.x, unit, (long long)R->best.run_id, R->best.verdict,
                       R->probes);
        }
        printf("(probes: SELECT * FROM search_probes WHERE sweep_id = %lld)\n",
               (long long)c.sweep_id);
    }
    fflush(stdout);
    rc = 0;
    for (int k = 0; k < npol; k++) {
        const cap_result *R = &res[k];
        if (R->status != CAP_STATUS_UNREACHABLE)
            continue;
        rc = cli_fail(cmd, "SLO unreachable for policy %s: it fails even at %s %.6g%s, the %s "
                           "tried; best point: %s %.6g (run %lld): %s",
                      sched_policy_name(pols[k]), c.param, R->hi.x, unit,
                      kind == SEARCH_TP ? "largest" : "lowest", c.param, R->best.x,
                      (long long)R->best.run_id, R->best.verdict);
    }
out:
    store_close(st);
    free(base_args);
    free(rest);
    return rc;
}
