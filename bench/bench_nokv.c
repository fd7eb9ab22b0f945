/* bench_nokv.c — a benchmark (not a test): the first lesson of KV caching.
 * One LLaMA-7B request on an A100-80GB under the roofline cost model, with
 * the KV cache and without it (`--kv-cache off`: every step recomputes the
 * whole context, O(S^2) work per request against O(S)).  For each final
 * sequence length S the request has a prompt of S/2 and an output of S/2
 * tokens; the table gives the last decode step's time (the step at
 * context S) and the request's total time for both, with both ratios.
 * Issue 19's target: at S = 2048 the cached step is at least 10x faster
 * (the whole request, whose contexts run from S/2 to S, gains less: about
 * the ratio at its mean context).  Lines "RESULT key value" are for
 * scripts.
 *
 * usage: bench_nokv [MODEL [GPU]]   (default llama-7b a100-80g) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cost/cost.h"
#include "../models/model.h"
#include "../sim/run.h"

static void die(const char *what, const kvs_err *err)
{
    fprintf(stderr, "bench_nokv: %s: %s\n", what, err->msg);
    exit(2);
}

/* One run of a lone request (P, O); *total = its finish, *last = the last
 * step's duration. */
static void run_one(const model_spec *m, const gpu_spec *g, int64_t p, int64_t o, int off,
                    double *total, double *last)
{
    kvs_err err;
    run_config cfg;
    run_config_defaults(&cfg);
    snprintf(cfg.model, sizeof cfg.model, "%s", m->name);
    cfg.sched.engine = SCHED_ENGINE_VLLM_V0;
    cfg.sched.max_model_len = p + o;
    cfg.sched.kv_cache_off = off;
    cfg.record_steps = 1;
    if (run_config_resolve(&cfg, m, g, &err))
        die("config", &err);
    trace tr;
    memset(&tr, 0, sizeof tr);
    tr.n = 1;
    tr.reqs = calloc(1, sizeof *tr.reqs);
    tr.reqs[0] = (trace_req){0.0, p, o, 0};
    cost_model cost;
    if (cost_model_create("roofline", m, g, 1, &cost, &err))
        die("cost", &err);
    run_result res;
    if (run_execute(&cfg, &tr, &cost, &res, &err))
        die("run", &err);
    *total = res.reqs[0].finish_s;
    *last = res.steps[res.n_steps - 1].step.dur_s;
    run_result_free(&res);
    cost_model_free(&cost);
    free(tr.reqs);
}

int main(int argc, char **argv)
{
    if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        printf("usage: bench_nokv [MODEL [GPU]]   (default llama-7b a100-80g)\n"
               "One request with and without the KV cache at S = 128..2048 (roofline).\n");
        return 0;
    }
    if (argc > 3 || (argc > 1 && argv[1][0] == '-')) {
        fprintf(stderr, "bench_nokv: unknown argument '%s' (usage: bench_nokv [MODEL [GPU]])\n",
                argv[argc > 3 ? 3 : 1]);
        return 2;
    }
    const char *mname = argc > 1 ? argv[1] : "llama-7b", *gname = argc > 2 ? argv[2] : "a100-80g";
    kvs_err err;
    model_spec m;
    gpu_spec g;
    if (model_lookup(mname, &m, &err))
        die(mname, &err);
    if (gpu_lookup(gname, &g, &err))
        die(gname, &err);
    printf("%s on %s, roofline; one request of prompt S/2 and output S/2\n", mname, gname);
    printf("%6s %14s %14s %8s %12s %12s %8s\n", "S", "last step (ms)", "no cache (ms)", "ratio",
           "total (s)", "no cache (s)", "ratio");
    const int64_t lens[] = {128, 256, 512, 1024, 2048};
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        int64_t s = lens[i];
        if (s > m.max_ctx)
            break;
        double t_on, l_on, t_off, l_off;
        run_one(&m, &g, s / 2, s / 2, 0, &t_on, &l_on);
        run_one(&m, &g, s / 2, s / 2, 1, &t_off, &l_off);
        printf("%6lld %14.3f %14.3f %7.1fx %12.3f %12.3f %7.1fx\n", (long long)s, 1e3 * l_on,
               1e3 * l_off, l_off / l_on, t_on, t_off, t_off / t_on);
        printf("RESULT nokv_step_ratio_S%lld %.3f\nRESULT nokv_total_ratio_S%lld %.3f\n",
               (long long)s, l_off / l_on, (long long)s, t_off / t_on);
    }
    return 0;
}
