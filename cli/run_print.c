/* run_print.c — the human summary and the JSON object of a finished run
 * (`kvsim run`). */
#include "run_opts.h"

#include <math.h>
#include <string.h>

static void print_dist(FILE *f, const char *name, const run_dist *d)
{
    if (isnan(d->p50)) {
        fprintf(f, "  %-16s -  (no finished request%s)\n", name,
                strstr(name, "TPOT") ? " with more than one output token" : "");
        return;
    }
    fprintf(f, "  %-16s p50 %9.4f  p90 %9.4f  p99 %9.4f  mean %9.4f\n", name, d->p50, d->p90,
            d->p99, d->mean);
}

void run_opts_print_summary(FILE *f, const run_config *c, const run_result *res, int64_t run_id)
{
    const run_summary *s = &res->sum;
    const sched_config *k = &c->sched;
    fprintf(f, "kvsim run %lld: %s on %s (tp %lld), %s", (long long)run_id, c->model, c->gpu,
            (long long)c->tp, c->synthetic[0] ? c->synthetic : c->trace_path);
    if (c->rate_scale != 1.0)
        fprintf(f, " at rate x%g", c->rate_scale);
    fprintf(f, "\n  engine           %s batching, %s, %s KV, %s preemption; cost %s\n",
            sched_batching_name(k->batching), sched_policy_name(k->policy),
            sched_alloc_name(k->alloc), sched_preempt_name(k->preemption), c->cost);
    fprintf(f, "  KV cache         %lld blocks x %lld tokens; max-seqs %lld, "
               "max-batched-tokens %lld, max-model-len %lld\n",
            (long long)k->total_blocks, (long long)k->block_size, (long long)k->max_seqs,
            (long long)k->max_batched_tokens, (long long)k->max_model_len);
    fprintf(f, "  requests         %lld: %lld finished, %lld rejected\n", (long long)s->n_requests,
            (long long)s->n_finished, (long long)s->n_rejected);
    print_dist(f, "TTFT (s)", &s->ttft);
    print_dist(f, "TPOT (s/token)", &s->tpot);
    print_dist(f, "E2E (s)", &s->e2e);
    print_dist(f, "norm. (s/token)", &s->norm_latency);
    if (isnan(s->throughput_tok_s))
        fprintf(f, "  throughput       -  (no time elapsed between first arrival and last finish)\n");
    else
        fprintf(f, "  throughput       %.1f output tokens/s, %.3f requests/s\n",
                s->throughput_tok_s, s->throughput_req_s);
    fprintf(f, "  KV use           peak %lld of %lld blocks (%.1f%%), mean %.1f\n",
            (long long)s->peak_kv_blocks, (long long)s->total_kv_blocks,
            s->total_kv_blocks ? 100.0 * (double)s->peak_kv_blocks / (double)s->total_kv_blocks : 0.0,
            s->mean_kv_blocks);
    fprintf(f, "  preemptions      %lld (recompute %lld, swap %lld; priority %lld)\n",
            (long long)s->preemptions, (long long)s->preempt_recompute, (long long)s->preempt_swap,
            (long long)s->preempt_priority);
    fprintf(f, "  steps            %lld, mean batch %.2f, makespan %.2f s\n", (long long)s->n_steps,
            s->mean_batch, s->makespan_s);
    if (k->chunked_prefill)
        fprintf(f, "  chunked prefill  %lld prefill chunks\n", (long long)s->prefill_chunks);
    if (k->prefix_caching) {
        if (isnan(s->prefix_hit_rate))
            fprintf(f, "  prefix cache     -  (no prompt was admitted)\n");
        else
            fprintf(f, "  prefix cache     hit %.2f%% of prompt tokens (%.2f%% of full blocks), "
                       "%lld prefill tokens saved, %lld evictions\n",
                    100.0 * s->prefix_hit_rate,
                    isnan(s->prefix_block_hit_rate) ? 0.0 : 100.0 * s->prefix_block_hit_rate,
                    (long long)s->prefix_saved_tokens, (long long)s->prefix_evictions);
    }
    if (!isnan(s->slo_attainment))
        fprintf(f, "  SLO              attainment %.2f%%, goodput %.3f requests/s\n",
                100.0 * s->slo_attainment, s->goodput_req_s);
    for (int k = 0; k < res->n_classes; k++) {
        const run_class *c = &res->classes[k];
        char name[48];
        snprintf(name, sizeof name, "priority %d", c->priority);
        fprintf(f, "  %-16s %lld requests (%lld finished): TTFT p50 %.4f p99 %.4f, "
                   "E2E p50 %.4f p99 %.4f s\n",
                name, (long long)c->n_requests, (long long)c->n_finished, c->ttft.p50,
                c->ttft.p99, c->e2e.p50, c->e2e.p99);
    }
    fprintf(f, "  simulated in     %.3f s wall\n", res->wall_s);
    fprintf(f, "run_id %lld\n", (long long)run_id);
}

static void json_num(FILE *f, const char *k, double v, int last)
{
    if (isnan(v) || isinf(v))
        fprintf(f, "\"%s\": null%s", k, last ? "" : ", ");
    else
        fprintf(f, "\"%s\": %.17g%s", k, v, last ? "" : ", ");
}

void run_opts_print_json(FILE *f, const run_config *c, const run_result *res, int64_t run_id)
{
    const run_summary *s = &res->sum;
    fprintf(f, "{\"run_id\": %lld, \"n_requests\": %lld, \"n_finished\": %lld, "
               "\"n_rejected\": %lld, ",
            (long long)run_id, (long long)s->n_requests, (long long)s->n_finished,
            (long long)s->n_rejected);
    const struct { const char *name; const run_dist *d; } ds[] = {
        {"ttft", &s->ttft}, {"tpot", &s->tpot}, {"e2e", &s->e2e}, {"norm_latency", &s->norm_latency}};
    char key[64];
    for (size_t i = 0; i < 4; i++) {
        snprintf(key, sizeof key, "%s_p50_s", ds[i].name);
        json_num(f, key, ds[i].d->p50, 0);
        snprintf(key, sizeof key, "%s_p90_s", ds[i].name);
        json_num(f, key, ds[i].d->p90, 0);
        snprintf(key, sizeof key, "%s_p99_s", ds[i].name);
        json_num(f, key, ds[i].d->p99, 0);
        snprintf(key, sizeof key, "%s_mean_s", ds[i].name);
        json_num(f, key, ds[i].d->mean, 0);
    }
    json_num(f, "throughput_tok_s", s->throughput_tok_s, 0);
    json_num(f, "throughput_req_s", s->throughput_req_s, 0);
    fprintf(f, "\"preemptions\": %lld, \"peak_kv_blocks\": %lld, \"kv_blocks\": %lld, ",
            (long long)s->preemptions, (long long)s->peak_kv_blocks, (long long)s->total_kv_blocks);
    json_num(f, "mean_kv_blocks", s->mean_kv_blocks, 0);
    json_num(f, "mean_batch", s->mean_batch, 0);
    json_num(f, "makespan_s", s->makespan_s, 0);
    fprintf(f, "\"n_steps\": %lld, ", (long long)s->n_steps);
    json_num(f, "slo_attainment", s->slo_attainment, 0);
    json_num(f, "goodput_req_s", s->goodput_req_s, 0);
    if (c->sched.chunked_prefill)
        fprintf(f, "\"prefill_chunks\": %lld, ", (long long)s->prefill_chunks);
    if (c->sched.prefix_caching) {
        json_num(f, "prefix_hit_rate", s->prefix_hit_rate, 0);
        json_num(f, "prefix_block_hit_rate", s->prefix_block_hit_rate, 0);
        fprintf(f, "\"prefix_hit_tokens\": %lld, \"prefix_saved_tokens\": %lld, "
                   "\"prefix_evictions\": %lld, ",
                (long long)s->prefix_hit_tokens, (long long)s->prefix_saved_tokens,
                (long long)s->prefix_evictions);
    }
    json_num(f, "wall_s", res->wall_s, 1);
    fprintf(f, "}\n");
}
