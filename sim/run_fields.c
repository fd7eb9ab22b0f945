/* run_fields.c — the table of run_fields.h and its conversions. */
#include "run_fields.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define CFG(field) offsetof(run_config, field), 0
#define CFG_TEXT(field) offsetof(run_config, field), sizeof(((run_config *)0)->field)
#define SCH(field) offsetof(run_config, sched) + offsetof(sched_config, field), 0
#define SUM(field) offsetof(run_summary, field), 0
#define NONE 0, 0

#define T RUN_FIELD_TYPE_TEXT
#define B RUN_FIELD_TYPE_INT
#define I RUN_FIELD_TYPE_I64
#define U RUN_FIELD_TYPE_U64
#define F RUN_FIELD_TYPE_F64
#define E RUN_FIELD_TYPE_ENUM
#define PROV RUN_FIELD_GROUP_PROV
#define PARAM RUN_FIELD_GROUP_PARAM
#define METRIC RUN_FIELD_GROUP_METRIC
#define J RUN_FIELD_JSON
#define SLO (RUN_FIELD_JSON | RUN_FIELD_SLO)
#define SLO_MIN (SLO | RUN_FIELD_HIGHER_BETTER)

/* A run_dist's four columns: percentiles are nearest-rank over finished
 * requests (docs/semantics.md section 7). */
#define DIST_SINCE(prefix, unit, what, since)                                           \
    {#prefix "_p50_s", "REAL", unit, F, METRIC, SUM(prefix.p50), 0, 0, SLO, since,     \
     "median " what},                                                                  \
    {#prefix "_p90_s", "REAL", unit, F, METRIC, SUM(prefix.p90), 0, 0, SLO, since,     \
     "90th percentile of " what},                                                      \
    {#prefix "_p99_s", "REAL", unit, F, METRIC, SUM(prefix.p99), 0, 0, SLO, since,     \
     "99th percentile of " what},                                                      \
    {#prefix "_mean_s", "REAL", unit, F, METRIC, SUM(prefix.mean), 0, 0, SLO, since,   \
     "mean " what}
#define DIST(prefix, unit, what) DIST_SINCE(prefix, unit, what, 1)

#define EN(fn) (const char *(*)(int))sched_##fn##_name, sched_##fn##_parse

static const run_field fields[] = {
    /* identity and provenance */
    {"status", "TEXT NOT NULL CHECK (status IN ('finished', 'failed'))", "", T, PROV, NONE, 0, 0,
     0, 1, "`'finished'` or `'failed'`"},
    {"error", "TEXT", "", T, PROV, NONE, 0, 0, 0, 1,
     "the error message of a failed run; NULL otherwise"},
    {"label", "TEXT", "", T, PARAM, CFG_TEXT(label), 0, 0, 0, 1, "free text from `--label`"},
    {"kvsim_version", "TEXT NOT NULL", "", T, PROV, NONE, 0, 0, 0, 1,
     "version of kvsim that wrote the row"},
    {"started_at", "TEXT", "", T, PROV, NONE, 0, 0, 0, 1,
     "wall-clock start of the run, ISO-8601 UTC"},
    {"wall_s", "REAL", "s", F, PROV, NONE, 0, 0, 0, 1,
     "wall-clock seconds the simulation took"},
    /* configuration: one column per flag of `kvsim run` */
    {"model", "TEXT", "", T, PARAM, CFG_TEXT(model), 0, 0, 0, 1,
     "model name or config path (`--model`)"},
    {"gpu", "TEXT", "", T, PARAM, CFG_TEXT(gpu), 0, 0, 0, 1, "GPU name (`--gpu`)"},
    {"tp", "INTEGER", "GPUs", I, PARAM, CFG(tp), 0, 0, 0, 1, "tensor-parallel degree"},
    {"trace_path", "TEXT", "", T, PARAM, CFG_TEXT(trace_path), 0, 0, 0, 1,
     "trace file as given; NULL for a synthetic trace"},
    {"trace_sha256", "TEXT", "", T, PROV, NONE, 0, 0, 0, 1,
     "hex SHA-256 of the trace file's bytes; NULL for synthetic"},
    {"synthetic", "TEXT", "", T, PARAM, CFG_TEXT(synthetic), 0, 0, 0, 1,
     "synthetic trace spec (`arrival=poisson,rate=8,...`); NULL for a file"},
    {"rate_scale", "REAL", "x", F, PARAM, CFG(rate_scale), 0, 0, 0, 1,
     "arrival-rate multiplier applied to the trace"},
    {"seed", "INTEGER", "", U, PARAM, CFG(seed), 0, 0, 0, 1,
     "synthetic generation seed (a uint64 stored as int64: values >= 2^63 appear negative; "
     "add 2^64)"},
    {"batching", "TEXT", "", E, PARAM, SCH(batching), EN(batching), 0, 1,
     "`'continuous'` or `'static'`"},
    {"policy", "TEXT", "", E, PARAM, SCH(policy), EN(policy), 0, 1,
     "`'fcfs'`, `'priority'` or `'lpm'`"},
    {"priority_preemption", "INTEGER", "", B, PARAM, SCH(priority_preemption), 0, 0, 0, 1,
     "1 if a higher-priority arrival may preempt running requests"},
    {"alloc", "TEXT", "", E, PARAM, SCH(alloc), EN(alloc), 0, 1,
     "KV allocation: `'paged'`, `'reserved'`, `'reserved-oracle'`"},
    {"preemption", "TEXT", "", E, PARAM, SCH(preemption), EN(preempt), 0, 1,
     "`'recompute'`, `'swap'` or `'off'`"},
    {"block_size", "INTEGER", "tokens", I, PARAM, SCH(block_size), 0, 0, 0, 1,
     "tokens per KV block"},
    {"kv_blocks", "INTEGER", "blocks", I, PARAM, SCH(total_blocks), 0, 0, J, 1,
     "KV blocks on the cache (per GPU) actually used by the run: the flag, or computed "
     "from memory"},
    {"kv_blocks_flag", "INTEGER", "blocks", I, PARAM, CFG(kv_blocks_flag), 0, 0, 0, 1,
     "`--kv-blocks` as given; 0 = computed from memory"},
    {"max_seqs", "INTEGER", "requests", I, PARAM, SCH(max_seqs), 0, 0, 0, 1,
     "max running requests (max_num_seqs)"},
    {"max_batched_tokens", "INTEGER", "tokens", I, PARAM, SCH(max_batched_tokens), 0, 0, 0, 1,
     "token budget per step"},
    {"max_model_len", "INTEGER", "tokens", I, PARAM, SCH(max_model_len), 0, 0, 0, 1,
     "limit on prompt + output tokens"},
    {"watermark", "REAL", "fraction", F, PARAM, SCH(watermark), 0, 0, 0, 1,
     "fraction of the blocks kept free at admission"},
    {"gpu_mem_util", "REAL", "fraction", F, PARAM, CFG(gpu_mem_util), 0, 0, 0, 1,
     "fraction of GPU memory kvsim may use"},
    {"swap_gib", "REAL", "GiB", F, PARAM, CFG(swap_gib), 0, 0, 0, 1, "host swap space, GiB"},
    {"swap_blocks", "INTEGER", "blocks", I, PARAM, SCH(swap_blocks), 0, 0, 0, 1,
     "host swap space, KV blocks (from swap_gib)"},
    {"swap_block_s", "REAL", "s", F, PARAM, SCH(swap_block_s), 0, 0, 0, 1,
     "seconds to move one block over the host link"},
    {"batch_timeout_s", "REAL", "s", F, PARAM, SCH(batch_timeout_s), 0, 0, 0, 1,
     "static batching: how long an idle engine waits to fill a batch"},
    {"cost", "TEXT", "", T, PARAM, CFG_TEXT(cost), 0, 0, 0, 1,
     "cost model spec as given (`affine:...`, `roofline`, `calibrated:ID`)"},
    {"cost_desc", "TEXT", "", T, PARAM, CFG_TEXT(cost_desc), 0, 0, 0, 1,
     "the cost model's own description of its parameters"},
    {"slo_ttft_s", "REAL", "s", F, PARAM, CFG(slo_ttft_s), 0, 0, 0, 1,
     "TTFT SLO, seconds; 0 = none"},
    {"slo_tpot_s", "REAL", "s/token", F, PARAM, CFG(slo_tpot_s), 0, 0, 0, 1,
     "TPOT SLO, seconds per token; 0 = none"},
    {"slo_e2e_s", "REAL", "s", F, PARAM, CFG(slo_e2e_s), 0, 0, 0, 1,
     "end-to-end latency SLO, seconds; 0 = none"},
    {"record_steps", "INTEGER", "", B, PARAM, CFG(record_steps), 0, 0, 0, 1,
     "1 if the run's steps were stored in `steps`"},
    {"compare_id", "INTEGER", "", I, PARAM, CFG(compare_id), 0, 0, RUN_FIELD_NULL_IF_ZERO, 1,
     "groups the runs of one `kvsim compare` (1, 2, ...); NULL otherwise"},
    {"sweep_id", "INTEGER", "", I, PARAM, CFG(sweep_id), 0, 0, RUN_FIELD_NULL_IF_ZERO, 1,
     "groups the runs of one `kvsim sweep` (1, 2, ...); NULL otherwise"},
    /* summary: docs/semantics.md section 7 */
    {"n_requests", "INTEGER", "requests", I, METRIC, SUM(n_requests), 0, 0, J, 1,
     "requests in the trace"},
    {"n_finished", "INTEGER", "requests", I, METRIC, SUM(n_finished), 0, 0, J, 1,
     "requests that finished"},
    {"n_rejected", "INTEGER", "requests", I, METRIC, SUM(n_rejected), 0, 0, J, 1,
     "requests rejected (could never be admitted)"},
    DIST(ttft, "s", "time to first token = first_token_s - arrival_s, seconds"),
    DIST(tpot, "s/token",
         "time per output token = (finish_s - first_token_s) / (O - 1), seconds per token, "
         "over requests with O > 1"),
    DIST(e2e, "s", "end-to-end latency = finish_s - arrival_s, seconds"),
    DIST(norm_latency, "s/token", "normalized latency = E2E / O, seconds per token"),
    {"throughput_tok_s", "REAL", "tok/s", F, METRIC, SUM(throughput_tok_s), 0, 0, SLO_MIN, 1,
     "output tokens of finished requests / (last finish - first arrival)"},
    {"throughput_req_s", "REAL", "req/s", F, METRIC, SUM(throughput_req_s), 0, 0, SLO_MIN, 1,
     "finished requests / the same span"},
    {"preemptions", "INTEGER", "", I, METRIC, SUM(preemptions), 0, 0, J, 1,
     "preemptions of all kinds"},
    {"preempt_recompute", "INTEGER", "", I, METRIC, SUM(preempt_recompute), 0, 0, J, 1,
     "recompute preemptions"},
    {"preempt_swap", "INTEGER", "", I, METRIC, SUM(preempt_swap), 0, 0, J, 1,
     "swap preemptions"},
    {"preempt_priority", "INTEGER", "", I, METRIC, SUM(preempt_priority), 0, 0, J, 1,
     "preemptions caused by a higher-priority arrival"},
    {"peak_kv_blocks", "INTEGER", "blocks", I, METRIC, SUM(peak_kv_blocks), 0, 0, J, 1,
     "most KV blocks held during any step"},
    {"mean_kv_blocks", "REAL", "blocks", F, METRIC, SUM(mean_kv_blocks), 0, 0, J, 1,
     "step-duration-weighted mean of KV blocks held"},
    {"mean_batch", "REAL", "requests", F, METRIC, SUM(mean_batch), 0, 0, J, 1,
     "mean requests per step"},
    {"makespan_s", "REAL", "s", F, METRIC, SUM(makespan_s), 0, 0, J, 1,
     "last step end - first arrival, seconds"},
    {"n_steps", "INTEGER", "steps", I, METRIC, SUM(n_steps), 0, 0, J, 1, "engine steps run"},
    {"slo_attainment", "REAL", "fraction", F, METRIC, SUM(slo_attainment), 0, 0, SLO_MIN, 1,
     "fraction of finished requests meeting every given SLO; NULL without an SLO"},
    {"goodput_req_s", "REAL", "req/s", F, METRIC, SUM(goodput_req_s), 0, 0, SLO_MIN, 1,
     "finished requests meeting the SLOs per second of the span; NULL without an SLO"},
    {"chunked_prefill", "INTEGER", "", B, PARAM, SCH(chunked_prefill), 0, 0, 0, 1,
     "1 with `--chunked-prefill` (docs/semantics-extensions.md, C), else 0"},
    {"prefix_caching", "INTEGER", "", B, PARAM, SCH(prefix_caching), 0, 0, 0, 1,
     "1 with `--prefix-caching` (docs/semantics-extensions.md, P), else 0"},
    {"prefix_hit_rate", "REAL", "fraction", F, METRIC, SUM(prefix_hit_rate), 0, 0,
     J | RUN_FIELD_IF_PREFIX, 1,
     "prefix-cache hit tokens / prompt tokens (P+g) over all admissions; NULL without "
     "prefix caching"},
    {"prefix_block_hit_rate", "REAL", "fraction", F, METRIC, SUM(prefix_block_hit_rate), 0, 0,
     J | RUN_FIELD_IF_PREFIX, 1,
     "hit blocks / full hashed prompt blocks over all admissions; NULL without prefix "
     "caching or hashes"},
    {"prefix_hit_tokens", "INTEGER", "tokens", I, METRIC, SUM(prefix_hit_tokens), 0, 0,
     J | RUN_FIELD_IF_PREFIX, 1,
     "tokens of the cached leading blocks found at admissions (0 without prefix caching)"},
    {"prefix_saved_tokens", "INTEGER", "tokens", I, METRIC, SUM(prefix_saved_tokens), 0, 0,
     J | RUN_FIELD_IF_PREFIX, 1,
     "prompt tokens not computed thanks to hits (the last prompt token is always computed)"},
    {"prefix_evictions", "INTEGER", "blocks", I, METRIC, SUM(prefix_evictions), 0, 0,
     J | RUN_FIELD_IF_PREFIX, 1,
     "cached blocks evicted (least recently used) to make room"},
    {"prefill_chunks", "INTEGER", "chunks", I, METRIC, SUM(prefill_chunks), 0, 0,
     J | RUN_FIELD_IF_CHUNKED, 1, "prefill chunks run with chunked prefill (0 without)"},
    /* schema version 2: engine profiles */
    {"engine", "TEXT NOT NULL DEFAULT 'vllm-v0'", "", E, PARAM, SCH(engine), EN(engine), J, 2,
     "engine profile: `'vllm-v1'` (docs/semantics-v1.md), `'vllm-v0'` (docs/semantics.md), "
     "`'trtllm'` (docs/engine-trtllm.md) or `'sglang'` (docs/semantics-sglang.md); runs "
     "stored before version 2 read `'vllm-v0'`"},
    {"long_prefill_threshold", "INTEGER NOT NULL DEFAULT 0", "tokens", I, PARAM,
     SCH(long_prefill_threshold), 0, 0, 0, 2,
     "V1: most tokens of one request scheduled in a step (`--long-prefill-threshold`); 0 = no "
     "limit"},
    {"segment_tokens", "INTEGER NOT NULL DEFAULT 0", "tokens", I, PARAM, SCH(segment_tokens), 0,
     0, 0, 2, "V1: tokens named by one prefix segment id (`--segment-tokens`); 0 = 512"},
    {"ep", "INTEGER NOT NULL DEFAULT 1", "GPUs", I, PARAM, CFG(ep), 0, 0, 0, 2,
     "expert-parallel degree (`--ep`; MoE models)"},
    {"dtype", "TEXT", "", T, PARAM, CFG_TEXT(dtype), 0, 0, 0, 2,
     "weight dtype (`--dtype`); NULL = the model's own"},
    {"kv_cache_dtype", "TEXT", "", T, PARAM, CFG_TEXT(kv_cache_dtype), 0, 0, 0, 2,
     "KV-cache dtype (`--kv-cache-dtype`); NULL = the weights'"},
    /* schema version 3 */
    {"cp", "INTEGER NOT NULL DEFAULT 1", "GPUs", I, PARAM, CFG(cp), 0, 0, 0, 3,
     "context-parallel degree (`--cp`): each request's KV split along the sequence over cp "
     "groups of tp GPUs; a scheduler block spans cp * block_size tokens"},
    /* schema version 4: clusters (docs/cluster.md) */
    {"replicas", "INTEGER NOT NULL DEFAULT 1", "engines", I, PARAM, CFG(replicas), 0, 0,
     J | RUN_FIELD_IF_CLUSTER, 4,
     "identical engines behind the router (`--replicas`); the other parameters are each "
     "engine's"},
    {"router", "TEXT", "", T, PARAM, CFG_TEXT(router), 0, 0,
     J | RUN_FIELD_IF_CLUSTER, 4,
     "router of a cluster run (`--router`): `'round-robin'`, `'least-requests'`, "
     "`'least-kv'`, `'prefix-affinity'` or `'random'`; NULL (rows from before version 4) "
     "= round-robin"},
    {"router_seed", "INTEGER NOT NULL DEFAULT 0", "", U, PARAM, CFG(router_seed), 0, 0, 0, 4,
     "seed of the random router (`--router-seed`, default `--seed`)"},
    {"affinity_cap", "INTEGER NOT NULL DEFAULT 16", "requests", I, PARAM, CFG(affinity_cap), 0,
     0, 0, 4,
     "prefix-affinity: outstanding requests a replica may have above the least loaded one "
     "and still be chosen (`--affinity-cap`)"},
    {"load_imbalance", "REAL", "x", F, METRIC, SUM(load_imbalance), 0, 0,
     J | RUN_FIELD_IF_CLUSTER, 4,
     "requests routed to the busiest replica / requests per replica on average (1 = even); "
     "NULL for one engine; under `--pd`, over the prefill pool"},
    /* schema version 6: disaggregated serving (docs/cluster.md, section D) */
    {"pd", "TEXT", "", T, PARAM, CFG_TEXT(pd), 0, 0, J | RUN_FIELD_IF_CLUSTER, 6,
     "disaggregated serving (`--pd P:D`): P prefill and D decode replicas, `replicas` = "
     "P + D; '' or NULL = every replica serves whole requests"},
    {"kv_link", "TEXT", "", T, PARAM, CFG_TEXT(kv_link), 0, 0, 0, 6,
     "the link that moves a prompt's KV to its decode replica (`--kv-link`): `'nvlink'`, "
     "`'ib'`, `'roce'` or `'BW_GBPS:LAT_US'` as given (the default stored as `'nvlink'`); "
     "NULL or '' without `--pd`"},
    /* schema version 7: answers at a glance (inter-token latency, diagnosis) */
    {"priorities", "TEXT", "", T, PARAM, CFG_TEXT(priorities), 0, 0, 0, 7,
     "`--priorities P:SHARE/...` as given: classes drawn per request with the seed; NULL = "
     "the workload's own"},
    {"kv_cache_off", "INTEGER NOT NULL DEFAULT 0", "", B, PARAM, SCH(kv_cache_off), 0, 0, 0, 7,
     "1 with `--kv-cache off`: no KV cache, each step recomputes every member's context "
     "(docs/semantics-extensions.md, N); else 0"},
    {"rate_rps", "REAL", "req/s", F, PARAM, CFG(rate_rps), 0, 0, 0, 7,
     "`--rate` as given: the workload's arrival rate (a trace is scaled to it, `rate_scale` "
     "records the factor; a synthetic spec's rate= is replaced); NULL when not given"},
    DIST_SINCE(itl, "s",
               "inter-token latency: the gaps between consecutive tokens of every request "
               "(O - 1 each), seconds; percentiles streamed within 2^-10 relative (sim/hist.h), "
               "mean exact",
               7),
    {"n_itl", "INTEGER", "gaps", I, METRIC, SUM(n_itl), 0, 0, J, 7,
     "inter-token gaps counted (the sample of the itl_* columns)"},
    {"n_reject_context", "INTEGER", "requests", I, METRIC, SUM(n_reject_context), 0, 0, J, 7,
     "rejected because P + O exceeds max_model_len"},
    {"n_reject_token_budget", "INTEGER", "requests", I, METRIC, SUM(n_reject_token_budget), 0,
     0, J, 7, "rejected because the prompt exceeds max_batched_tokens (without chunked prefill)"},
    {"n_reject_kv", "INTEGER", "requests", I, METRIC, SUM(n_reject_kv), 0, 0, J, 7,
     "rejected because its KV blocks exceed the whole cache (above the watermark)"},
    {"limit_kv_share", "REAL", "fraction", F, METRIC, SUM(limit_kv_share), 0, 0, J, 7,
     "share of steps whose batch KV blocks kept from growing (the waiting head did not fit, "
     "a request was swapped out, or the step preempted)"},
    {"limit_max_seqs_share", "REAL", "fraction", F, METRIC, SUM(limit_max_seqs_share), 0, 0, J,
     7, "share of steps with max_seqs requests running and more waiting"},
    {"limit_token_budget_share", "REAL", "fraction", F, METRIC, SUM(limit_token_budget_share),
     0, 0, J, 7, "share of steps whose token budget (max_batched_tokens) stopped admission"},
    {"limit_none_share", "REAL", "fraction", F, METRIC, SUM(limit_none_share), 0, 0, J, 7,
     "share of steps with nothing left waiting (the load, not the engine, set the batch)"},
    {"limit_other_share", "REAL", "fraction", F, METRIC, SUM(limit_other_share), 0, 0, J, 7,
     "share of steps of a running batch that nothing may join (a static batch, a multi-step "
     "group), with requests waiting"},
    /* schema version 8: front-end latency (docs/semantics-extensions.md) */
    {"frontend_ms", "REAL NOT NULL DEFAULT 0", "ms", F, PARAM, CFG(frontend_ms), 0, 0, 0, 8,
     "per-request front-end cost (`--frontend-ms`: tokenize, detokenize, HTTP): each "
     "request's first token and finish are reported this much after the engine's; 0 = none"},
    /* schema version 10: each pool its own TP (docs/cluster.md, section D) */
    {"pd_tp", "TEXT", "", T, PARAM, CFG_TEXT(pd_tp), 0, 0, J | RUN_FIELD_IF_CLUSTER, 10,
     "`--pd-tp TP_P:TP_D` as given: the TP degree of each prefill and each decode replica "
     "(`tp` is TP_P); NULL or '' = both pools at `tp`"},
    {"decode_tp", "INTEGER", "GPUs", I, PARAM, CFG(decode_tp), 0, 0,
     RUN_FIELD_NULL_IF_ZERO | J | RUN_FIELD_IF_CLUSTER, 10,
     "under `--pd`: the TP degree of each decode replica (TP_D, else `tp`); a `--pd` run "
     "holds P * tp + D * decode_tp GPUs; NULL without `--pd`"},
    {"decode_kv_blocks", "INTEGER", "blocks", I, PARAM,
     offsetof(run_config, decode_sched) + offsetof(sched_config, total_blocks), 0, 0, 0,
     RUN_FIELD_NULL_IF_ZERO | J | RUN_FIELD_IF_CLUSTER, 10,
     "under `--pd`: KV blocks on each decode replica's cache, at `decode_tp` (`kv_blocks` "
     "is a prefill replica's); NULL without `--pd`"},
    /* schema version 13: the sglang profile (docs/semantics-sglang.md) */
    {"max_prefill_tokens", "INTEGER NOT NULL DEFAULT 0", "tokens", I, PARAM,
     SCH(max_prefill_tokens), 0, 0, 0, 13,
     "sglang: prompt tokens per extend step (`--max-prefill-tokens`); 0 under the other "
     "engines"},
    {"conservativeness", "REAL NOT NULL DEFAULT 0", "", F, PARAM, SCH(conservativeness), 0, 0,
     0, 13,
     "sglang: `--schedule-conservativeness` (its new-token ratio starts at min(0.7 x this, "
     "1)); 0 under the other engines"},
    {"overlap_schedule", "INTEGER NOT NULL DEFAULT 0", "", B, PARAM, SCH(overlap), 0, 0, 0, 13,
     "sglang: 1 with its overlap scheduler (each step decided while the one before runs, "
     "`--no-overlap-schedule` turns it off); 0 under the other engines"},
    /* schema version 14: V0 multi-step scheduling (docs/semantics-extensions.md M) */
    {"num_scheduler_steps", "INTEGER NOT NULL DEFAULT 1", "steps", I, PARAM,
     SCH(num_scheduler_steps), 0, 0, 0, 14,
     "vllm-v0: decode steps per scheduling decision (`--num-scheduler-steps`, vLLM 0.6's "
     "multi-step scheduling); 1 = off, and under the other engines"},
};

#define N_FIELDS (sizeof fields / sizeof fields[0])

const run_field *run_fields(size_t *n)
{
    *n = N_FIELDS;
    return fields;
}

const run_field *run_field_find(const char *name)
{
    for (size_t i = 0; i < N_FIELDS; i++)
        if (!strcmp(fields[i].name, name))
            return &fields[i];
    return NULL;
}

const run_field *run_field_slo(const char *name)
{
    if (!strcmp(name, "throughput"))
        name = "throughput_tok_s";
    else if (!strcmp(name, "attainment"))
        name = "slo_attainment";
    size_t n = strlen(name);
    for (size_t i = 0; i < N_FIELDS; i++) {
        const char *c = fields[i].name;
        size_t k = strlen(c);
        if (!(fields[i].flags & RUN_FIELD_SLO))
            continue;
        int dist = k > 2 && !strcmp(c + k - 2, "_s") && strncmp(c, "slo_", 4) &&
                   strncmp(c, "throughput", 10) && strncmp(c, "goodput", 7);
        if (!strcmp(c, name) || (dist && n == k - 2 && !strncmp(c, name, n)))
            return &fields[i];
    }
    return NULL;
}

/* The field's bytes in cfg or sum; NULL for provenance or a missing struct. */
static void *field_ptr(const run_field *f, const run_config *cfg, const run_summary *sum)
{
    if (f->group == RUN_FIELD_GROUP_PARAM && cfg)
        return (char *)cfg + f->off;
    if (f->group == RUN_FIELD_GROUP_METRIC && sum)
        return (char *)sum + f->off;
    return NULL;
}

run_value run_field_get(const run_field *f, const run_config *cfg, const run_summary *sum)
{
    run_value v = {RUN_VALUE_NULL, 0, 0.0, NULL};
    const void *p = field_ptr(f, cfg, sum);
    if (!p)
        return v;
    switch (f->type) {
    case RUN_FIELD_TYPE_TEXT:
        if (*(const char *)p) {
            v.kind = RUN_VALUE_TEXT;
            v.s = p;
        }
        return v;
    case RUN_FIELD_TYPE_INT: v.i = *(const int *)p; break;
    case RUN_FIELD_TYPE_I64: v.i = *(const int64_t *)p; break;
    case RUN_FIELD_TYPE_U64: v.i = (int64_t)*(const uint64_t *)p; break;
    case RUN_FIELD_TYPE_F64:
        v.d = *(const double *)p;
        if (!isnan(v.d))
            v.kind = RUN_VALUE_REAL;
        return v;
    case RUN_FIELD_TYPE_ENUM:
        v.kind = RUN_VALUE_TEXT;
        v.s = f->enum_name(*(const int *)p);
        return v;
    }
    if (!(v.i == 0 && (f->flags & RUN_FIELD_NULL_IF_ZERO)))
        v.kind = RUN_VALUE_INT;
    return v;
}

/* A metric is a count, a time, a rate or a ratio: never negative, and a
 * "fraction" never above 1.  Parameters are checked against their flags'
 * ranges one layer up (job_run_check_stored). */
static int metric_range(const run_field *f, double x, kvs_err *err)
{
    if (f->group != RUN_FIELD_GROUP_METRIC)
        return KVS_OK;
    if (x < 0)
        return kvs_errf(err, KVS_EINVAL, "runs.%s: %g is negative", f->name, x);
    if (!strcmp(f->unit, "fraction") && x > 1)
        return kvs_errf(err, KVS_EINVAL, "runs.%s: %g is not a fraction in [0, 1]", f->name,
                        x);
    return KVS_OK;
}

int run_field_set(const run_field *f, run_config *cfg, run_summary *sum, const run_value *v,
                  kvs_err *err)
{
    int rc;
    void *p = field_ptr(f, cfg, sum);
    if (!p)
        return KVS_OK;
    int null = v->kind == RUN_VALUE_NULL;
    switch (f->type) {
    case RUN_FIELD_TYPE_TEXT: {
        const char *s = v->kind == RUN_VALUE_TEXT && v->s ? v->s : "";
        if (!null && (v->kind != RUN_VALUE_TEXT || !v->s))
            return kvs_errf(err, KVS_EINVAL, "runs.%s: not text", f->name);
        if (strlen(s) >= f->size)
            return kvs_errf(err, KVS_EINVAL, "runs.%s: longer than %zu characters", f->name,
                            f->size - 1);
        strcpy(p, s);
        return KVS_OK;
    }
    case RUN_FIELD_TYPE_ENUM: {
        int e = v->kind == RUN_VALUE_TEXT && v->s ? f->enum_parse(v->s) : -1;
        if (e < 0)
            return kvs_errf(err, KVS_EINVAL, "runs.%s: '%s' is not a known value", f->name,
                            v->kind == RUN_VALUE_TEXT && v->s ? v->s : "NULL");
        *(int *)p = e;
        return KVS_OK;
    }
    case RUN_FIELD_TYPE_F64:
        if (!null && v->kind != RUN_VALUE_REAL && v->kind != RUN_VALUE_INT)
            return kvs_errf(err, KVS_EINVAL, "runs.%s: not a number", f->name);
        if (!null && v->kind == RUN_VALUE_REAL && !isfinite(v->d))
            return kvs_errf(err, KVS_EINVAL, "runs.%s: %g is not a finite number", f->name, v->d);
        if (!null && (rc = metric_range(f, v->kind == RUN_VALUE_INT ? (double)v->i : v->d, err)))
            return rc;
        /* a NULL metric had no sample; a NULL parameter is its zero */
        *(double *)p = null ? (f->group == RUN_FIELD_GROUP_METRIC ? NAN : 0.0)
                       : v->kind == RUN_VALUE_INT ? (double)v->i
                                                  : v->d;
        return KVS_OK;
    default:
        if (!null && v->kind != RUN_VALUE_INT)
            return kvs_errf(err, KVS_EINVAL, "runs.%s: not an integer", f->name);
        if (!null && f->type != RUN_FIELD_TYPE_U64 && (rc = metric_range(f, (double)v->i, err)))
            return rc;
        if (f->type == RUN_FIELD_TYPE_INT) {
            if (v->i < INT32_MIN || v->i > INT32_MAX)
                return kvs_errf(err, KVS_EINVAL, "runs.%s: %lld is out of range", f->name,
                                (long long)v->i);
            *(int *)p = (int)v->i;
        } else if (f->type == RUN_FIELD_TYPE_U64) {
            *(uint64_t *)p = (uint64_t)v->i;
        } else {
            *(int64_t *)p = v->i;
        }
        return KVS_OK;
    }
}

/* snprintf onto buf[*len..cap); *len counts what the whole text needs. */
static void put(char *buf, size_t cap, size_t *len, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
static void put(char *buf, size_t cap, size_t *len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(*len < cap ? buf + *len : NULL, *len < cap ? cap - *len : 0, fmt, ap);
    va_end(ap);
    if (k > 0)
        *len += (size_t)k;
}

size_t run_fields_json(const run_config *cfg, const run_summary *sum, char *buf, size_t cap)
{
    size_t len = 0;
    if (cap)
        buf[0] = 0;
    for (size_t i = 0; i < N_FIELDS; i++) {
        const run_field *f = &fields[i];
        if (!(f->flags & RUN_FIELD_JSON) ||
            ((f->flags & RUN_FIELD_IF_CHUNKED) && !cfg->sched.chunked_prefill) ||
            ((f->flags & RUN_FIELD_IF_PREFIX) && !cfg->sched.prefix_caching) ||
            ((f->flags & RUN_FIELD_IF_CLUSTER) && cfg->replicas <= 1))
            continue;
        run_value v = run_field_get(f, cfg, sum);
        if (v.kind == RUN_VALUE_INT)
            put(buf, cap, &len, "\"%s\": %lld, ", f->name, (long long)v.i);
        else if (v.kind == RUN_VALUE_REAL && isfinite(v.d))
            put(buf, cap, &len, "\"%s\": %.17g, ", f->name, v.d);
        else if (v.kind == RUN_VALUE_TEXT) /* flag names: no character needs escaping */
            put(buf, cap, &len, "\"%s\": \"%s\", ", f->name, v.s);
        else
            put(buf, cap, &len, "\"%s\": null, ", f->name);
    }
    return len;
}

size_t run_fields_markdown(run_field_group group, char *buf, size_t cap)
{
    size_t len = 0;
    if (cap)
        buf[0] = 0;
    put(buf, cap, &len, "| column | type | unit | meaning |\n|---|---|---|---|\n");
    if (group == RUN_FIELD_GROUP_PROV)
        put(buf, cap, &len, "| run_id | INTEGER PRIMARY KEY |  | the run's id (1, 2, ...) |\n");
    for (size_t i = 0; i < N_FIELDS; i++) {
        const run_field *f = &fields[i];
        if (f->group != group)
            continue;
        const char *sql = f->sql;
        char type[32];
        size_t k = strcspn(sql, " ");
        if (!strncmp(sql + k, " NOT NULL", 9))
            k += 9;
        snprintf(type, sizeof type, "%.*s", (int)k, sql);
        put(buf, cap, &len, "| %s | %s | %s | %s |\n", f->name, type, f->unit, f->doc);
    }
    return len;
}
