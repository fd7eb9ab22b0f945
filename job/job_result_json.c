/* job_result_json.c — `--result-json FILE`: a run written with the field
 * names and units of `vllm bench serve`'s saved result (docs/vllm-bench.md),
 * whole to a temporary name beside FILE and then renamed into place. */
#include "job.h"

#include <errno.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../base/str.h"

int job_result_json_check(const char *path, kvs_err *err)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", path);
    const char *dir = dirname(buf);
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return kvs_errf(err, KVS_EIO, "--result-json %s: no such directory %s", path, dir);
    if (access(dir, W_OK) != 0)
        return kvs_errf(err, KVS_EIO, "--result-json %s: directory %s is not writable", path,
                        dir);
    return KVS_OK;
}

/* A number, or null for NaN/inf (JSON has neither). */
static void num(FILE *f, const char *key, double v)
{
    if (isfinite(v))
        fprintf(f, ",\n  \"%s\": %.17g", key, v);
    else
        fprintf(f, ",\n  \"%s\": null", key);
}

/* Population standard deviation of one per-request metric over the
 * finished requests (numpy's np.std, which vllm bench serve uses). */
typedef enum metric { METRIC_TTFT, METRIC_TPOT, METRIC_E2E } metric;

static int value_of(const run_result *res, int64_t i, metric m, double *v)
{
    const sched_req_result *r = &res->reqs[i];
    const trace_req *q = &res->tr->reqs[i];
    if (r->status != SCHED_REQ_FINISHED)
        return 0;
    if (m == METRIC_TTFT)
        *v = r->first_token_s - q->arrival_s;
    else if (m == METRIC_E2E)
        *v = r->finish_s - q->arrival_s;
    else if (q->output_tokens > 1)
        *v = (r->finish_s - r->first_token_s) / (double)(q->output_tokens - 1);
    else
        return 0;
    return 1;
}

static double std_of(const run_result *res, metric m)
{
    double sum = 0, v;
    int64_t k = 0;
    for (int64_t i = 0; i < res->tr->n; i++)
        if (value_of(res, i, m, &v)) {
            sum += v;
            k++;
        }
    if (k == 0)
        return NAN;
    double mean = sum / (double)k, ss = 0;
    for (int64_t i = 0; i < res->tr->n; i++)
        if (value_of(res, i, m, &v))
            ss += (v - mean) * (v - mean);
    return sqrt(ss / (double)k);
}

/* mean/median/std/p50/p90/p99 of one metric, in milliseconds. */
static void dist(FILE *f, const char *name, const run_dist *d, double std_s)
{
    char key[64];
    snprintf(key, sizeof key, "mean_%s_ms", name);
    num(f, key, d->mean * 1000.0);
    snprintf(key, sizeof key, "median_%s_ms", name);
    num(f, key, d->p50 * 1000.0);
    snprintf(key, sizeof key, "std_%s_ms", name);
    num(f, key, std_s * 1000.0);
    snprintf(key, sizeof key, "p50_%s_ms", name);
    num(f, key, d->p50 * 1000.0);
    snprintf(key, sizeof key, "p90_%s_ms", name);
    num(f, key, d->p90 * 1000.0);
    snprintf(key, sizeof key, "p99_%s_ms", name);
    num(f, key, d->p99 * 1000.0);
}

/* The per-request lists of --save-detailed: lengths, TTFTs (s), errors,
 * and the ITLs (s) when the steps were recorded. */
static int detail(FILE *f, const run_result *res)
{
    const trace *tr = res->tr;
    fprintf(f, ",\n  \"input_lens\": [");
    for (int64_t i = 0; i < tr->n; i++)
        fprintf(f, "%s%lld", i ? ", " : "", (long long)tr->reqs[i].prompt_tokens);
    fprintf(f, "],\n  \"output_lens\": [");
    for (int64_t i = 0; i < tr->n; i++)
        fprintf(f, "%s%lld", i ? ", " : "",
                res->reqs[i].status == SCHED_REQ_FINISHED ? (long long)tr->reqs[i].output_tokens
                                                          : 0LL);
    fprintf(f, "],\n  \"ttfts\": [");
    for (int64_t i = 0; i < tr->n; i++) {
        double v;
        fprintf(f, "%s%.17g", i ? ", " : "", value_of(res, i, METRIC_TTFT, &v) ? v : 0.0);
    }
    fprintf(f, "],\n  \"errors\": [");
    for (int64_t i = 0; i < tr->n; i++) {
        const char *why = sched_reject_reason_name(res->reqs[i].reject_reason);
        fprintf(f, "%s\"%s%s\"", i ? ", " : "", why ? "rejected: " : "", why ? why : "");
    }
    fprintf(f, "]");
    if (!res->steps)
        return 0;
    double *gaps;
    int64_t *off;
    if (run_request_itls(res, &gaps, &off))
        return -1;
    fprintf(f, ",\n  \"itls\": [");
    for (int64_t i = 0; i < tr->n; i++) {
        fprintf(f, "%s[", i ? ", " : "");
        for (int64_t k = off[i]; k < off[i + 1]; k++)
            fprintf(f, "%s%.17g", k > off[i] ? ", " : "", gaps[k]);
        fprintf(f, "]");
    }
    fprintf(f, "]");
    free(gaps);
    free(off);
    return 0;
}

static void body(FILE *f, const run_config *cfg, const run_result *res)
{
    const run_summary *s = &res->sum;
    const trace *tr = res->tr;
    int64_t in = 0, out = 0;
    double last = -INFINITY;
    for (int64_t i = 0; i < tr->n; i++)
        if (res->reqs[i].status == SCHED_REQ_FINISHED) {
            in += tr->reqs[i].prompt_tokens;
            out += tr->reqs[i].output_tokens;
            if (res->reqs[i].finish_s > last)
                last = res->reqs[i].finish_s;
        }
    /* the span of runs.throughput_*: first arrival to last finish */
    double dur = s->n_finished > 0 ? last - tr->reqs[0].arrival_s : 0.0;
    double span = tr->n > 1 ? tr->reqs[tr->n - 1].arrival_s - tr->reqs[0].arrival_s : 0.0;
    fprintf(f, "{\n  \"backend\": \"kvsim\",\n  \"model_id\": ");
    str_json_write(f, cfg->model);
    fprintf(f, ",\n  \"date\": ");
    str_json_write(f, res->started_at);
    fprintf(f, ",\n  \"num_prompts\": %lld", (long long)tr->n);
    num(f, "request_rate", span > 0 ? (double)(tr->n - 1) / span : INFINITY);
    num(f, "duration", dur);
    fprintf(f, ",\n  \"completed\": %lld,\n  \"failed\": %lld", (long long)s->n_finished,
            (long long)s->n_rejected);
    fprintf(f, ",\n  \"total_input_tokens\": %lld,\n  \"total_output_tokens\": %lld",
            (long long)in, (long long)out);
    num(f, "request_throughput", s->throughput_req_s);
    num(f, "request_goodput", s->goodput_req_s);
    num(f, "output_throughput", s->throughput_tok_s);
    num(f, "total_token_throughput", dur > 0 ? (double)(in + out) / dur : NAN);
    dist(f, "ttft", &s->ttft, std_of(res, METRIC_TTFT));
    dist(f, "tpot", &s->tpot, std_of(res, METRIC_TPOT));
    dist(f, "itl", &s->itl, s->itl_std_s);
    dist(f, "e2el", &s->e2e, std_of(res, METRIC_E2E));
}

int job_result_json_write(const char *path, const run_config *cfg, const run_result *res,
                          int want_detail, kvs_err *err)
{
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f)
        return kvs_errf(err, KVS_EIO, "--result-json %s: %s", path, strerror(errno));
    body(f, cfg, res);
    int rc = want_detail ? detail(f, res) : 0;
    fprintf(f, "\n}\n");
    if (rc == 0 && (ferror(f) | fclose(f)) == 0 && rename(tmp, path) == 0)
        return KVS_OK;
    int e = errno;
    if (rc)
        fclose(f);
    unlink(tmp);
    return kvs_errf(err, rc ? KVS_ENOMEM : KVS_EIO, "--result-json %s: %s", path,
                    rc ? "out of memory" : strerror(e));
}
