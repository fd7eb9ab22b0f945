/* run_opts.c — shared flags of `kvsim run` and `kvsim compare`. */
#include "run_opts.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cost_select.h"

#define DEFAULT_TRACE "traces/azure_llm_2023_conv.csv"

enum {
    OPT_MODEL = 1000, OPT_GPU, OPT_TP, OPT_TRACE, OPT_SYNTH, OPT_RATE, OPT_KVB, OPT_BLOCK,
    OPT_SEQS, OPT_MBT, OPT_WM, OPT_MML, OPT_UTIL, OPT_COST, OPT_SEED, OPT_DB, OPT_REC,
    OPT_LABEL, OPT_QUIET, OPT_BATCHING, OPT_POLICY, OPT_PPRE, OPT_ALLOC, OPT_PREEMPT,
    OPT_SWAP, OPT_BTO, OPT_SLO, OPT_JSON, OPT_FORCE, OPT_CHUNKED, OPT_PREFIX
};

const struct option run_opts_long[] = {
    {"model", required_argument, 0, OPT_MODEL},
    {"gpu", required_argument, 0, OPT_GPU},
    {"tp", required_argument, 0, OPT_TP},
    {"trace", required_argument, 0, OPT_TRACE},
    {"synthetic", required_argument, 0, OPT_SYNTH},
    {"rate-scale", required_argument, 0, OPT_RATE},
    {"kv-blocks", required_argument, 0, OPT_KVB},
    {"block-size", required_argument, 0, OPT_BLOCK},
    {"max-seqs", required_argument, 0, OPT_SEQS},
    {"max-batched-tokens", required_argument, 0, OPT_MBT},
    {"watermark", required_argument, 0, OPT_WM},
    {"max-model-len", required_argument, 0, OPT_MML},
    {"gpu-mem-util", required_argument, 0, OPT_UTIL},
    {"cost", required_argument, 0, OPT_COST},
    {"seed", required_argument, 0, OPT_SEED},
    {"db", required_argument, 0, OPT_DB},
    {"record-steps", no_argument, 0, OPT_REC},
    {"label", required_argument, 0, OPT_LABEL},
    {"quiet", no_argument, 0, OPT_QUIET},
    {"batching", required_argument, 0, OPT_BATCHING},
    {"policy", required_argument, 0, OPT_POLICY},
    {"priority-preemption", no_argument, 0, OPT_PPRE},
    {"alloc", required_argument, 0, OPT_ALLOC},
    {"preemption", required_argument, 0, OPT_PREEMPT},
    {"swap-gib", required_argument, 0, OPT_SWAP},
    {"batch-timeout", required_argument, 0, OPT_BTO},
    {"slo", required_argument, 0, OPT_SLO},
    {"json", no_argument, 0, OPT_JSON},
    {"force-profile", no_argument, 0, OPT_FORCE},
    {"chunked-prefill", no_argument, 0, OPT_CHUNKED},
    {"prefix-caching", no_argument, 0, OPT_PREFIX},
    {0, 0, 0, 0}};

const char run_opts_help[] =
    "workload:\n"
    "  --trace FILE            CSV trace: native arrival_s,prompt_tokens,output_tokens[,priority]\n"
    "                          or Azure TIMESTAMP,ContextTokens,GeneratedTokens, or a\n"
    "                          Mooncake .jsonl trace (with prompt prefix hashes)\n"
    "                          (default " DEFAULT_TRACE ")\n"
    "  --synthetic SPEC        synthetic workload instead of a file, e.g.\n"
    "                          'arrival=poisson,rate=8,n=1000,prompt=512,output=128'\n"
    "                          (keys: arrival=poisson|gamma|burst rate cv n prompt output\n"
    "                          lengths=FILE priorities=P:SHARE/... system_prompt=TOKENS\n"
    "                          turns=K)\n"
    "  --rate-scale K          multiply the arrival rate by K (times divided by K; default 1)\n"
    "  --seed N                seed of the synthetic generator (default 0)\n"
    "hardware and model:\n"
    "  --model NAME|FILE       llama-7b llama-13b llama-65b llama-2-7b llama-2-13b\n"
    "                          llama-2-70b llama-3-8b llama-3-70b llama-7b-mqa, or a .conf\n"
    "                          file (default llama-3-8b: its 8K context fits the Azure traces)\n"
    "  --gpu NAME              a100-40g a100-80g h100-sxm h200 (default a100-80g)\n"
    "  --tp N                  tensor-parallel degree (default 1)\n"
    "  --gpu-mem-util F        fraction of GPU memory kvsim may use (default 0.9)\n"
    "  --kv-blocks N           KV blocks per GPU, replacing the computed capacity\n"
    "engine:\n"
    "  --batching MODE         continuous | static (default continuous)\n"
    "  --policy P              fcfs | priority | lpm (default fcfs; lpm = longest cached\n"
    "                          prefix first, needs --prefix-caching)\n"
    "  --priority-preemption   preempt worse-priority running requests for the queue head\n"
    "  --alloc A               paged | reserved | reserved-oracle (default paged)\n"
    "  --preemption P          recompute | swap | off (default recompute)\n"
    "  --swap-gib G            host swap space for --preemption swap (default 4)\n"
    "  --batch-timeout S       static batching: wait up to S s for a full batch (default 0)\n"
    "  --block-size N          tokens per KV block (default 16)\n"
    "  --max-seqs N            max running requests (default 256)\n"
    "  --max-batched-tokens N  token budget per step (default max(2048, max-model-len);\n"
    "                          2048 with --chunked-prefill)\n"
    "  --chunked-prefill       split prompts into chunks that run beside decodes (default off)\n"
    "  --prefix-caching        share KV blocks of equal prompt prefixes (needs a trace with\n"
    "                          prefix hashes: Mooncake .jsonl, or --synthetic with\n"
    "                          system_prompt= or turns=; default off)\n"
    "  --watermark F           fraction of KV blocks kept free at admission (default 0.01)\n"
    "  --max-model-len N       max prompt + output tokens (default: the model's context)\n"
    "  --cost MODEL            roofline | affine:c0,c1,c2,c3 | calibrated[:ID] (default roofline)\n"
    "  --force-profile         use a calibrated profile measured on another GPU/model\n"
    "results:\n"
    "  --slo ttft=S,tpot=S,e2e=S  per-request SLOs for attainment and goodput\n"
    "  --db FILE               SQLite results database (default kvsim.db)\n"
    "  --record-steps          store every step in the steps table\n"
    "  --label TEXT            free text stored with the run\n"
    "  --quiet                 print only the run id\n"
    "  --json                  print the summary as one JSON object\n";

void run_opts_defaults(run_opts *o)
{
    memset(o, 0, sizeof *o);
    run_config_defaults(&o->cfg);
    strcpy(o->db, "kvsim.db");
}

static int copy_str(const char *cmd, const char *flag, char *dst, size_t n, const char *src)
{
    if (strlen(src) >= n)
        return cli_fail(cmd, "%s: value longer than %zu characters", flag, n - 1);
    strcpy(dst, src);
    return 0;
}

static int parse_slo(const char *cmd, run_config *c, const char *arg)
{
    char buf[256];
    if (strlen(arg) >= sizeof buf)
        return cli_fail(cmd, "--slo: too long");
    strcpy(buf, arg);
    for (char *save, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq)
            return cli_fail(cmd, "--slo: '%s' is not key=seconds", tok);
        *eq = 0;
        double *dst = !strcmp(tok, "ttft") ? &c->slo_ttft_s
                      : !strcmp(tok, "tpot") ? &c->slo_tpot_s
                      : !strcmp(tok, "e2e")  ? &c->slo_e2e_s
                                             : NULL;
        if (!dst)
            return cli_fail(cmd, "--slo: unknown metric '%s' (ttft, tpot, e2e)", tok);
        if (cli_parse_f64(cmd, "--slo", eq + 1, 1e-9, 1e9, dst))
            return CLI_EXIT_ERR;
    }
    return 0;
}

static int parse_enum(const char *cmd, const char *flag, int v, const char *arg,
                      const char *choices)
{
    if (v < 0)
        return cli_fail(cmd, "%s: unknown value '%s' (%s)", flag, arg, choices);
    return 0;
}

int run_opts_apply(const char *cmd, run_opts *o, int opt, const char *arg)
{
    run_config *c = &o->cfg;
    sched_config *s = &c->sched;
    int v;
    switch (opt) {
    case OPT_MODEL: return copy_str(cmd, "--model", c->model, sizeof c->model, arg);
    case OPT_GPU: return copy_str(cmd, "--gpu", c->gpu, sizeof c->gpu, arg);
    case OPT_TP: return cli_parse_i64(cmd, "--tp", arg, 1, 1024, &c->tp);
    case OPT_TRACE: return copy_str(cmd, "--trace", c->trace_path, sizeof c->trace_path, arg);
    case OPT_SYNTH: return copy_str(cmd, "--synthetic", c->synthetic, sizeof c->synthetic, arg);
    case OPT_RATE: return cli_parse_f64(cmd, "--rate-scale", arg, 1e-6, 1e6, &c->rate_scale);
    case OPT_KVB: return cli_parse_i64(cmd, "--kv-blocks", arg, 1, INT64_C(1) << 40, &c->kv_blocks_flag);
    case OPT_BLOCK: return cli_parse_i64(cmd, "--block-size", arg, 1, 1 << 20, &s->block_size);
    case OPT_SEQS: return cli_parse_i64(cmd, "--max-seqs", arg, 1, 1 << 30, &s->max_seqs);
    case OPT_MBT:
        return cli_parse_i64(cmd, "--max-batched-tokens", arg, 1, INT64_C(1) << 40,
                             &s->max_batched_tokens);
    case OPT_WM: return cli_parse_f64(cmd, "--watermark", arg, 0.0, 0.99, &s->watermark);
    case OPT_MML:
        return cli_parse_i64(cmd, "--max-model-len", arg, 1, INT64_C(1) << 40, &s->max_model_len);
    case OPT_UTIL: return cli_parse_f64(cmd, "--gpu-mem-util", arg, 0.01, 1.0, &c->gpu_mem_util);
    case OPT_COST: return copy_str(cmd, "--cost", c->cost, sizeof c->cost, arg);
    case OPT_SEED: return cli_parse_u64(cmd, "--seed", arg, &c->seed);
    case OPT_DB: return copy_str(cmd, "--db", o->db, sizeof o->db, arg);
    case OPT_REC: c->record_steps = 1; return 0;
    case OPT_LABEL: return copy_str(cmd, "--label", c->label, sizeof c->label, arg);
    case OPT_QUIET: o->quiet = 1; return 0;
    case OPT_JSON: o->json = 1; return 0;
    case OPT_FORCE: o->force_profile = 1; return 0;
    case OPT_CHUNKED: s->chunked_prefill = 1; return 0;
    case OPT_PREFIX: s->prefix_caching = 1; return 0;
    case OPT_BATCHING:
        v = sched_batching_parse(arg);
        s->batching = v;
        o->batching_set = 1;
        return parse_enum(cmd, "--batching", v, arg, "continuous, static");
    case OPT_POLICY:
        v = sched_policy_parse(arg);
        s->policy = v;
        return parse_enum(cmd, "--policy", v, arg, "fcfs, priority, lpm");
    case OPT_PPRE: s->priority_preemption = 1; return 0;
    case OPT_ALLOC:
        v = sched_alloc_parse(arg);
        s->alloc = v;
        o->alloc_set = 1;
        return parse_enum(cmd, "--alloc", v, arg, "paged, reserved, reserved-oracle");
    case OPT_PREEMPT:
        v = sched_preempt_parse(arg);
        s->preemption = v;
        return parse_enum(cmd, "--preemption", v, arg, "recompute, swap, off");
    case OPT_SWAP: return cli_parse_f64(cmd, "--swap-gib", arg, 0.0, 1e6, &c->swap_gib);
    case OPT_BTO: return cli_parse_f64(cmd, "--batch-timeout", arg, 0.0, 1e9, &s->batch_timeout_s);
    case OPT_SLO: return parse_slo(cmd, c, arg);
    default: return -1;
    }
}

int run_opts_prepare(const char *cmd, run_opts *o, model_spec *m, gpu_spec *g, trace *tr)
{
    run_config *c = &o->cfg;
    kvs_err err;
    memset(tr, 0, sizeof *tr);
    if (model_lookup(c->model, m, &err))
        return cli_fail(cmd, "%s", err.msg);
    if (gpu_lookup(c->gpu, g, &err))
        return cli_fail(cmd, "%s", err.msg);
    if (model_check_tp(m, c->tp, &err))
        return cli_fail(cmd, "%s", err.msg);
    if (c->trace_path[0] && c->synthetic[0])
        return cli_fail(cmd, "--trace and --synthetic: give one workload, not both");
    if (c->sched.policy == SCHED_POLICY_PRIORITY && c->sched.batching == SCHED_BATCHING_STATIC &&
        c->sched.priority_preemption)
        return cli_fail(cmd, "--priority-preemption: static batches are never preempted");
    if (c->synthetic[0]) {
        trace_synth_spec spec;
        if (trace_synth_parse(c->synthetic, &spec, &err))
            return cli_fail(cmd, "%s", err.msg);
        if (trace_synth_gen(&spec, c->synthetic, c->seed, tr, &err))
            return cli_fail(cmd, "%s", err.msg);
    } else {
        if (!c->trace_path[0]) {
            strcpy(c->trace_path, DEFAULT_TRACE);
#ifdef KVSIM_SOURCE_DIR
            /* run from anywhere: fall back to the source tree's copy */
            if (access(c->trace_path, R_OK) != 0)
                snprintf(c->trace_path, sizeof c->trace_path, "%s/%s", KVSIM_SOURCE_DIR,
                         DEFAULT_TRACE);
#endif
        }
        if (trace_load(c->trace_path, tr, &err))
            return cli_fail(cmd, "%s", err.msg);
    }
    if (c->rate_scale != 1.0)
        trace_scale_rate(tr, c->rate_scale);
    if (run_config_resolve(c, m, g, &err) || sched_config_check(&c->sched, tr->n, &err)) {
        trace_free(tr);
        return cli_fail(cmd, "%s", err.msg);
    }
    if (c->sched.policy == SCHED_POLICY_PRIORITY && !tr->has_priority) {
        trace_free(tr);
        return cli_fail(cmd, "--policy priority: %s has no priorities (give the native CSV a "
                             "priority column, or the synthetic spec priorities=P:SHARE/...)",
                        c->synthetic[0] ? "the synthetic workload" : c->trace_path);
    }
    return 0;
}

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

int run_opts_execute(const char *cmd, run_opts *o, store *st, int64_t *run_id,
                     run_result *res_out)
{
    model_spec m;
    gpu_spec g;
    trace tr;
    int rc = run_opts_prepare(cmd, o, &m, &g, &tr);
    if (rc)
        return rc;
    kvs_err err;
    cost_model cost = {0};
    run_result res = {0};
    int exit_code = CLI_EXIT_ERR;
    if (cost_select(&o->cfg, &m, &g, st, o->force_profile, &cost, &err)) {
        cli_fail(cmd, "--cost: %s", err.msg);
        goto done;
    }
    if (run_execute(&o->cfg, &tr, &cost, &res, &err)) {
        kvs_err err2;
        int64_t failed_id = 0;
        if (store_write_failed_run(st, &o->cfg, &tr, err.msg, res.started_at, res.wall_s,
                                   &failed_id, &err2) == 0)
            cli_fail(cmd, "%s (recorded as failed run %lld)", err.msg, (long long)failed_id);
        else
            cli_fail(cmd, "%s", err.msg);
        goto done;
    }
    if (store_write_run(st, &o->cfg, &res, run_id, &err)) {
        cli_fail(cmd, "--db: %s", err.msg);
        goto done;
    }
    exit_code = CLI_EXIT_OK;
    if (res_out) {
        *res_out = res;
        res_out->tr = NULL; /* the trace is freed below */
        memset(&res, 0, sizeof res);
    }
done:
    run_result_free(&res);
    if (cost.vt)
        cost_model_free(&cost);
    trace_free(&tr);
    return exit_code;
}

int run_opts_parse_argv(const char *cmd, run_opts *o, int argc, char **argv)
{
    int opt;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "", run_opts_long, NULL)) != -1) {
        if (opt == '?' || opt == ':')
            return cli_fail(cmd, "unknown flag or missing value: '%s' (see kvsim %s --help)",
                            argv[optind - 1], cmd);
        int rc = run_opts_apply(cmd, o, opt, optarg);
        if (rc)
            return rc < 0 ? cli_fail(cmd, "internal: unhandled flag") : rc;
    }
    if (optind < argc)
        return cli_fail(cmd, "unexpected argument '%s' (see kvsim %s --help)", argv[optind], cmd);
    return 0;
}
