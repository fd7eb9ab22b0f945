/* fuzz_slo.c — libFuzzer target for SLO specs of `kvsim capacity --search`
 * (cap_slo_parse, and cap_slo_check on summaries from empty to extreme;
 * job/job_capacity.c, in the library).
 *
 * On success: at most CAP_MAX_BOUNDS bounds, each naming a metric and a
 * limit that is a number; checking any summary (NaN metrics of an empty
 * run, zeros, huge values) gives a verdict on one line and a distance that
 * is never NaN.  On failure: one line naming --slo. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../job/job.h"
#include "fuzz_util.h"

static void fill(run_summary *s, double v)
{
    memset(s, 0, sizeof *s);
    run_dist d = {v, v, v, v};
    s->n_requests = s->n_finished = 100;
    s->ttft = s->tpot = s->e2e = s->norm_latency = d;
    s->throughput_tok_s = s->throughput_req_s = v;
    s->slo_attainment = isnan(v) ? v : (v > 1 ? 1 : v < 0 ? 0 : v);
    s->goodput_req_s = v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const int allowed[] = {KVS_EINVAL, KVS_ENOMEM, 0};
    char *text = fuzz_strndup(data, size);
    cap_slo slo;
    kvs_err err = {{0}};
    int rc = cap_slo_parse(text, &slo, &err);
    if (rc != KVS_OK) {
        fuzz_check_error(rc, &err, allowed, "--slo");
        free(text);
        return 0;
    }
    if (slo.n < 0 || slo.n > CAP_MAX_BOUNDS)
        fuzz_fail("bound count out of range", NULL);
    for (int i = 0; i < slo.n; i++)
        if (!slo.b[i].name[0] || isnan(slo.b[i].limit))
            fuzz_fail("bound without a name or with a NaN limit", NULL);
    const double values[] = {NAN, 0.0, 1e-9, 0.5, 1.0, 2.0, 1e300, INFINITY};
    for (size_t k = 0; k < sizeof values / sizeof values[0]; k++) {
        run_summary s;
        fill(&s, values[k]);
        double ratio = 0;
        char verdict[256];
        int holds = cap_slo_check(&slo, &s, &ratio, verdict, sizeof verdict);
        if (holds != 0 && holds != 1)
            fuzz_fail("cap_slo_check returned neither 0 nor 1", NULL);
        if (isnan(ratio) || !verdict[0] || strchr(verdict, '\n'))
            fuzz_fail("NaN distance or an empty or multi-line verdict", NULL);
    }
    free(text);
    return 0;
}
