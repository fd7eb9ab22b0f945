/* run_print.c — the human summary and the JSON object of a finished run
 * (`kvsim run`). */
#include "run_opts.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../sim/run_fields.h"

static void print_dist(FILE *f, const char *name, const run_dist *d)
{
    if (isnan(d->p50)) {
        fprintf(f, "  %-16s -  (no finished request%s)\n", name,
                strstr(name, "TPOT") || strstr(name, "ITL") ? " with more than one output token"
                                                          : "");
        return;
    }
    fprintf(f, "  %-16s p50 %9.4f  p90 %9.4f  p99 %9.4f  mean %9.4f\n", name, d->p50, d->p90,
            d->p99, d->mean);
}

/* A cluster run: the router and one line per replica. */
static void print_replicas(FILE *f, const run_config *c, const run_result *res)
{
    if (res->n_replicas == 0)
        return;
    fprintf(f, "  cluster          %lld replicas, router %s, load imbalance %.3fx "
               "(busiest replica / mean)\n",
            (long long)c->replicas, c->router, res->sum.load_imbalance);
    if (res->decode) /* --pd: the hand-offs (docs/cluster.md, section D) */
        fprintf(f, "  disaggregated    --pd %s over %s: %lld KV transfers, mean %.3f ms, "
                   "max %.3f ms; waits before them for the decode side: mean %.3f ms, "
                   "max %.3f ms\n",
                c->pd, c->kv_link[0] ? c->kv_link : "nvlink", (long long)res->kv_transfers,
                1e3 * res->kv_transfer_mean_s, 1e3 * res->kv_transfer_max_s,
                1e3 * res->kv_wait_mean_s, 1e3 * res->kv_wait_max_s);
    if (res->decode && c->pd_tp[0]) /* --pd-tp: each pool its own TP (D1a) */
        fprintf(f, "  pools            prefill tp %lld (%lld KV blocks each), decode tp %lld "
                   "(%lld KV blocks each)\n",
                (long long)c->tp, (long long)c->sched.total_blocks, (long long)c->decode_tp,
                (long long)c->decode_sched.total_blocks);
    for (int64_t r = 0; r < res->n_replicas; r++) {
        const run_summary *s = &res->replicas[r].sum;
        char name[32];
        int64_t id = res->replicas[r].replica, np = res->n_replicas - res->kv_decoders;
        snprintf(name, sizeof name, "%s %lld",
                 !res->decode ? "replica" : id < np ? "prefill" : "decode", (long long)id);
        fprintf(f, "  %-16s %lld requests (%lld finished): TTFT p50 %.4f p99 %.4f, "
                   "E2E p99 %.4f s; peak KV %lld blocks, %lld steps\n",
                name, (long long)s->n_requests, (long long)s->n_finished, s->ttft.p50,
                s->ttft.p99, s->e2e.p99, (long long)s->peak_kv_blocks, (long long)s->n_steps);
    }
}

/* "batch limited by KV blocks in 71.0% of steps (...)": the shares of
 * sched_step_limit, largest first. */
static void print_limits(FILE *f, const run_summary *s)
{
    if (isnan(s->limit_kv_share))
        return;
    typedef struct share {
        const char *name;
        double v; /* fraction of steps */
    } share;
    share l[5] = {
        {"KV blocks", s->limit_kv_share},
        {"max-seqs", s->limit_max_seqs_share},
        {"token budget", s->limit_token_budget_share},
        {"nothing waiting", s->limit_none_share},
        {"a running batch none may join", s->limit_other_share},
    };
    for (int a = 1; a < 5; a++) /* stable insertion sort, largest first */
        for (int b = a; b > 0 && l[b].v > l[b - 1].v; b--) {
            share t = l[b];
            l[b] = l[b - 1];
            l[b - 1] = t;
        }
    fprintf(f, "  batch limited by %s in %.1f%% of steps", l[0].name, 100.0 * l[0].v);
    const char *sep = " (";
    for (int i = 1; i < 5; i++)
        if (l[i].v >= 0.0005) { /* shown as at least 0.1% */
            fprintf(f, "%s%s %.1f%%", sep, l[i].name, 100.0 * l[i].v);
            sep = ", ";
        }
    fprintf(f, "%s\n", sep[0] == ',' ? ")" : "");
}

/* The summary's head: the run, its model and GPU, the trace, the engine
 * profile with its effective settings, and the KV cache. */
static void print_head(FILE *f, const run_config *c, int64_t run_id)
{
    const sched_config *k = &c->sched;
    fprintf(f, "kvsim run %lld: %s on %s (tp %lld", (long long)run_id, c->model, c->gpu,
            (long long)c->tp);
    if (c->ep > 1)
        fprintf(f, ", ep %lld", (long long)c->ep);
    if (c->cp > 1)
        fprintf(f, ", cp %lld", (long long)c->cp);
    fprintf(f, "), %s", c->synthetic[0] ? c->synthetic : c->trace_path);
    if (c->rate_rps > 0 && !c->synthetic[0])
        fprintf(f, " at %g req/s (its arrivals x%.4g)", c->rate_rps, c->rate_scale);
    else if (c->rate_scale != 1.0)
        fprintf(f, " at rate x%g", c->rate_scale);
    if (k->engine == SCHED_ENGINE_VLLM_V1)
        fprintf(f, "\n  engine           vllm-v1: %s, chunked prefill %s, prefix caching %s%s; "
                   "cost %s\n",
                sched_policy_name(k->policy), k->chunked_prefill ? "on" : "off",
                k->prefix_caching ? "on" : "off",
                k->long_prefill_threshold ? ", long-prefill threshold set" : "", c->cost);
    else if (k->engine == SCHED_ENGINE_SGLANG)
        fprintf(f, "\n  engine           sglang: %s, chunked prefill %s, radix cache %s, overlap "
                   "scheduler %s, max-prefill-tokens %lld, conservativeness %g, "
                   "mem fraction %.3f; cost %s\n",
                sched_policy_name(k->policy), k->chunked_prefill ? "on" : "off",
                k->prefix_caching ? "on" : "off", k->overlap ? "on" : "off",
                (long long)k->max_prefill_tokens, k->conservativeness, c->gpu_mem_util, c->cost);
    else if (k->engine == SCHED_ENGINE_TRTLLM)
        fprintf(f, "\n  engine           trtllm: in-flight batching, %s, chunked context %s; "
                   "cost %s\n",
                k->alloc == SCHED_ALLOC_PAGED ? "max utilization" : "guaranteed no evict",
                k->chunked_prefill ? "on" : "off", c->cost);
    else {
        char ms[48] = ""; /* V0 multi-step scheduling, when on */
        if (k->num_scheduler_steps > 1)
            snprintf(ms, sizeof ms, ", multi-step %lld", (long long)k->num_scheduler_steps);
        fprintf(f, "\n  engine           vllm-v0: %s batching%s, %s, %s KV, %s preemption; cost %s\n",
                sched_batching_name(k->batching), ms, sched_policy_name(k->policy),
                sched_alloc_name(k->alloc), sched_preempt_name(k->preemption), c->cost);
    }
    fprintf(f, "  KV cache         %lld blocks x %lld tokens; max-seqs %lld, "
               "max-batched-tokens %lld, max-model-len %lld\n",
            (long long)k->total_blocks, (long long)k->block_size, (long long)k->max_seqs,
            (long long)k->max_batched_tokens, (long long)k->max_model_len);
    if (c->cp > 1)
        fprintf(f, "                   (cp %lld: a block spans %lld tokens of context, %lld on "
                   "each of the cp GPU groups)\n",
                (long long)c->cp, (long long)(c->cp * k->block_size), (long long)k->block_size);
}

/* Requests finished and rejected (by reason), then the latency
 * distributions and the throughput. */
static void print_requests(FILE *f, const run_config *c, const run_summary *s)
{
    fprintf(f, "  requests         %lld: %lld finished, %lld rejected", (long long)s->n_requests,
            (long long)s->n_finished, (long long)s->n_rejected);
    /* by reason, unless a run stored before the reasons were (they sum to 0) */
    if (s->n_rejected > 0 &&
        s->n_reject_context + s->n_reject_token_budget + s->n_reject_kv == s->n_rejected)
        fprintf(f, " (%.1f%%: %lld over max-model-len, %lld over max-batched-tokens, "
                   "%lld over the KV cache)",
                100.0 * (double)s->n_rejected / (double)s->n_requests,
                (long long)s->n_reject_context, (long long)s->n_reject_token_budget,
                (long long)s->n_reject_kv);
    else if (s->n_rejected > 0)
        fprintf(f, " (%.1f%%)", 100.0 * (double)s->n_rejected / (double)s->n_requests);
    fputc('\n', f);
    print_dist(f, "TTFT (s)", &s->ttft);
    print_dist(f, "TPOT (s/token)", &s->tpot);
    if (c->sched.batching == SCHED_BATCHING_STATIC)
        fprintf(f, "                   (static batching: TPOT and E2E include the wait for the "
                   "batch's longest member; ITL does not)\n");
    print_dist(f, "ITL (s)", &s->itl);
    if (c->sched.num_scheduler_steps > 1)
        fprintf(f, "                   (multi-step: tokens reach the client once per group of "
                   "%lld steps; ITL is the gap between deliveries)\n",
                (long long)c->sched.num_scheduler_steps);
    print_dist(f, "E2E (s)", &s->e2e);
    print_dist(f, "norm. (s/token)", &s->norm_latency);
    if (isnan(s->throughput_tok_s))
        fprintf(f, "  throughput       -  (no time elapsed between first arrival and last finish)\n");
    else
        fprintf(f, "  throughput       %.1f output tokens/s, %.3f requests/s\n",
                s->throughput_tok_s, s->throughput_req_s);
}

/* The engine's side: KV use, preemptions, steps and what limited them,
 * chunks, the prefix cache, the SLO and the priority classes. */
static void print_engine(FILE *f, const run_config *c, const run_result *res)
{
    const run_summary *s = &res->sum;
    const sched_config *k = &c->sched;
    fprintf(f, "  KV use           peak %lld of %lld blocks (%.1f%%), mean %.1f\n",
            (long long)s->peak_kv_blocks, (long long)s->total_kv_blocks,
            s->total_kv_blocks ? 100.0 * (double)s->peak_kv_blocks / (double)s->total_kv_blocks : 0.0,
            s->mean_kv_blocks);
    fprintf(f, "  preemptions      %lld (recompute %lld, swap %lld; priority %lld)\n",
            (long long)s->preemptions, (long long)s->preempt_recompute, (long long)s->preempt_swap,
            (long long)s->preempt_priority);
    fprintf(f, "  steps            %lld, mean batch %.2f, makespan %.2f s\n", (long long)s->n_steps,
            s->mean_batch, s->makespan_s);
    print_limits(f, s);
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
    for (int i = 0; i < res->n_classes; i++) {
        const run_class *cl = &res->classes[i];
        char name[48];
        snprintf(name, sizeof name, "priority %d", cl->priority);
        fprintf(f, "  %-16s %lld requests (%lld finished): TTFT p50 %.4f p99 %.4f, "
                   "E2E p50 %.4f p99 %.4f s\n",
                name, (long long)cl->n_requests, (long long)cl->n_finished, cl->ttft.p50,
                cl->ttft.p99, cl->e2e.p50, cl->e2e.p99);
    }
}

void run_opts_print_summary(FILE *f, const run_config *c, const run_result *res, int64_t run_id)
{
    print_head(f, c, run_id);
    print_requests(f, c, &res->sum);
    print_engine(f, c, res);
    print_replicas(f, c, res);
    fprintf(f, "  simulated in     %.3f s wall\n", res->wall_s);
    fprintf(f, "run_id %lld\n", (long long)run_id);
}

/* The JSON summary: run_id, every JSON field of the run_fields table
 * (sim/run_fields.h) that applies to the run, and the wall time. */
void run_opts_print_json(FILE *f, const run_config *c, const run_result *res, int64_t run_id)
{
    size_t need = run_fields_json(c, &res->sum, NULL, 0);
    char *body = malloc(need + 1);
    if (body)
        run_fields_json(c, &res->sum, body, need + 1);
    fprintf(f, "{\"run_id\": %lld, %s", (long long)run_id, body ? body : "");
    if (isfinite(res->wall_s))
        fprintf(f, "\"wall_s\": %.17g}\n", res->wall_s);
    else
        fprintf(f, "\"wall_s\": null}\n");
    free(body);
}
