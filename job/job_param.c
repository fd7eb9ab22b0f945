/* job_param.c — the table of run flags (see job.h): parsing one by name,
 * the getopt table and the --help text generated from it. */
#include "job.h"

#include <assert.h>
#include <getopt.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../base/str.h"

#define DEFAULT_TRACE "traces/azure_llm_2023_conv.csv"

enum {
    P_MODEL = 1000, P_GPU, P_TP, P_TRACE, P_SYNTH, P_RATE, P_KVB, P_BLOCK, P_SEQS, P_MBT, P_WM,
    P_MML, P_UTIL, P_COST, P_SEED, P_DB, P_REC, P_LABEL, P_QUIET, P_BATCHING, P_POLICY, P_PPRE,
    P_ALLOC, P_PREEMPT, P_SWAP, P_BTO, P_SLO, P_JSON, P_FORCE, P_CHUNKED, P_PREFIX, P_ENGINE,
    P_NO_CHUNKED, P_NO_PREFIX, P_LPT, P_SEG, P_DTYPE, P_KVDTYPE, P_EP, P_CP, P_REPLICAS,
    P_ROUTER, P_ROUTER_SEED, P_AFFINITY_CAP, P_PD, P_KV_LINK, P_GOODPUT, P_RESJSON,
    P_RESDETAIL, P_RATE_RPS, P_KVCACHE, P_PRIOS, P_FRONTEND, P_PD_TP, P_MPT, P_CONS,
    P_OVERLAP, P_NO_OVERLAP, P_MSTEPS
};

#define I64MAX40 1099511627776.0 /* 2^40 */
#define IND "\n                          "

static const job_param params[] = {
    {"trace", P_TRACE, JOB_PARAM_STR, 0, 0, "workload", "FILE",
     "CSV trace: native arrival_s,prompt_tokens,output_tokens[,priority]" IND
     "or Azure TIMESTAMP,ContextTokens,GeneratedTokens, or a" IND
     "Mooncake .jsonl trace (with prompt prefix hashes)" IND "(default " DEFAULT_TRACE ")", JOB_VARY_ALL},
    {"synthetic", P_SYNTH, JOB_PARAM_STR, 0, 0, "workload", "SPEC",
     "synthetic workload instead of a file, e.g." IND
     "'arrival=poisson,rate=8,n=1000,prompt=512,output=128'" IND
     "(keys: arrival=poisson|gamma|burst rate cv n prompt output" IND
     "lengths=FILE priorities=P:SHARE/... system_prompt=TOKENS" IND "turns=K)", JOB_VARY_ALL},
    {"rate", P_RATE_RPS, JOB_PARAM_F64, 1e-6, 1e9, "workload", "R",
     "arrival rate in requests/s: a trace's arrival times are" IND
     "scaled so that (n - 1) / span = R; a --synthetic spec's" IND
     "rate= is replaced by R (not with --rate-scale)", JOB_VARY_ALL},
    {"rate-scale", P_RATE, JOB_PARAM_F64, 1e-6, 1e6, "workload", "K",
     "multiply the arrival rate by K (times divided by K; default 1)", JOB_VARY_ALL},
    {"priorities", P_PRIOS, JOB_PARAM_STR, 0, 0, "workload", "P:S/...",
     "give any trace priority classes, e.g. 0:0.2/1:0.8 (shares" IND
     "sum to 1), drawn per request with --seed", JOB_VARY_ALL},
    {"seed", P_SEED, JOB_PARAM_U64, 0, 0, "workload", "N",
     "seed of the synthetic generator (default 0)", JOB_VARY_ALL},
    {"model", P_MODEL, JOB_PARAM_STR, 0, 0, "hardware and model", "NAME|FILE",
     "a name `kvsim models` lists, a Hugging Face config.json (or" IND
     "its directory) or a .conf file (default llama-3-8b: its 8K" IND
     "context fits the Azure traces)", JOB_VARY_ALL},
    {"gpu", P_GPU, JOB_PARAM_STR, 0, 0, "hardware and model", "NAME",
     "a name `kvsim gpus` lists, or a GPU file (default a100-80g)", JOB_VARY_ALL},
    {"tp", P_TP, JOB_PARAM_I64, 1, 1024, "hardware and model", "N",
     "tensor-parallel degree (default 1)", JOB_VARY_ALL},
    {"ep", P_EP, JOB_PARAM_I64, 1, 1024, "hardware and model", "N",
     "expert-parallel degree of a MoE model (default 1)", JOB_VARY_ALL},
    {"cp", P_CP, JOB_PARAM_I64, 1, 1024, "hardware and model", "N",
     "context-parallel degree: each request's KV split along the" IND
     "sequence over N groups of tp GPUs (default 1)", JOB_VARY_ALL},
    {"dtype", P_DTYPE, JOB_PARAM_STR, 0, 0, "hardware and model", "D",
     "weights: fp16 bf16 fp8 int8 int4 (AWQ g128) (default: the" IND "model's own)",
     JOB_VARY_ALL},
    {"kv-cache-dtype", P_KVDTYPE, JOB_PARAM_STR, 0, 0, "hardware and model", "D",
     "KV cache: fp16 bf16 fp8 (default: as the weights)", JOB_VARY_ALL},
    {"gpu-mem-util", P_UTIL, JOB_PARAM_F64, 0.01, 1.0, "hardware and model", "F",
     "fraction of GPU memory kvsim may use (default 0.9; under" IND
     "sglang its mem_fraction_static, default from GPU memory," IND
     "TP and chunk size as SGLang computes it)", JOB_VARY_ALL},
    {"kv-blocks", P_KVB, JOB_PARAM_I64, 1, I64MAX40, "hardware and model", "N",
     "KV blocks per GPU, replacing the computed capacity", JOB_VARY_ALL},
    {"engine", P_ENGINE, JOB_PARAM_ENUM, 0, 0, "engine", "NAME",
     "engine profile: vllm-v1 (default: vLLM's V1 scheduler and" IND
     "defaults, docs/semantics-v1.md) | vllm-v0 (vLLM's V0 engine," IND
     "docs/semantics.md) | trtllm (TensorRT-LLM in-flight batching," IND
     "docs/engine-trtllm.md) | sglang (SGLang v0.5.18's scheduler," IND
     "docs/semantics-sglang.md); flags given override the profile", JOB_VARY_ALL},
    {"batching", P_BATCHING, JOB_PARAM_ENUM, 0, 0, "engine", "MODE",
     "continuous | static (default continuous)", JOB_VARY_ALL},
    {"policy", P_POLICY, JOB_PARAM_ENUM, 0, 0, "engine", "P",
     "fcfs | priority | lpm (default fcfs; lpm = longest cached" IND
     "prefix first, needs --prefix-caching; sglang: fcfs or lpm)", JOB_VARY_ALL},
    {"priority-preemption", P_PPRE, JOB_PARAM_SWITCH, 0, 0, "engine", NULL,
     "preempt worse-priority running requests for the queue head", JOB_VARY_ALL},
    {"alloc", P_ALLOC, JOB_PARAM_ENUM, 0, 0, "engine", "A",
     "paged | reserved | reserved-oracle (default paged; under" IND
     "trtllm reserved-oracle = guaranteed no evict, the default," IND
     "paged = max utilization)", JOB_VARY_ALL},
    {"preemption", P_PREEMPT, JOB_PARAM_ENUM, 0, 0, "engine", "P",
     "recompute | swap | off (default recompute)", JOB_VARY_ALL},
    {"swap-gib", P_SWAP, JOB_PARAM_F64, 0.0, 1e6, "engine", "G",
     "host swap space for --preemption swap (default 4)", JOB_VARY_ALL},
    {"batch-timeout", P_BTO, JOB_PARAM_F64, 0.0, 1e9, "engine", "S",
     "static batching: wait up to S s for a full batch (default 0)", JOB_VARY_ALL},
    {"block-size", P_BLOCK, JOB_PARAM_I64, 1, 1 << 20, "engine", "N",
     "tokens per KV block (default 16; trtllm 64; sglang 1, its" IND "token slots)",
     JOB_VARY_ALL},
    {"max-seqs", P_SEQS, JOB_PARAM_I64, 1, 1 << 30, "engine", "N",
     "max running requests (default: vllm-v1 1024 on a GPU of" IND
     ">= 70 GiB that is not an A100, else 256; vllm-v0 256;" IND
     "sglang from its token pool, at most half of it)", JOB_VARY_ALL},
    {"max-batched-tokens", P_MBT, JOB_PARAM_I64, 1, I64MAX40, "engine", "N",
     "token budget per step (default: vllm-v1 8192 on a GPU of" IND
     ">= 70 GiB that is not an A100, else 2048, max-model-len" IND
     "without chunked prefill; vllm-v0 max(2048, max-model-len)," IND
     "2048 with --chunked-prefill; sglang its chunked_prefill_size," IND
     "2048 / 4096 / 8192 / 16384 by GPU memory)", JOB_VARY_ALL},
    {"max-prefill-tokens", P_MPT, JOB_PARAM_I64, 1, I64MAX40, "engine", "N",
     "sglang: prompt tokens per extend step (max_prefill_tokens," IND "default 16384)",
     JOB_VARY_ALL},
    {"schedule-conservativeness", P_CONS, JOB_PARAM_F64, 0.01, 100.0, "engine", "S",
     "sglang: scales its new-token ratio, min(0.7 S, 1) at start" IND
     "(default 1; lower admits more against the same memory)", JOB_VARY_ALL},
    {"overlap-schedule", P_OVERLAP, JOB_PARAM_SWITCH, 0, 0, "engine", NULL,
     "sglang: decide each step while the one before runs (its" IND
     "overlap scheduler; default on)", JOB_VARY_ALL},
    {"no-overlap-schedule", P_NO_OVERLAP, JOB_PARAM_OFF, 0, 0, "engine", NULL,
     "sglang: turn the overlap scheduler off", JOB_VARY_ALL},
    {"chunked-prefill", P_CHUNKED, JOB_PARAM_SWITCH, 0, 0, "engine", NULL,
     "split prompts into chunks that run beside decodes" IND
     "(default: on under vllm-v1, off under vllm-v0)", JOB_VARY_ALL},
    {"no-chunked-prefill", P_NO_CHUNKED, JOB_PARAM_OFF, 0, 0, "engine", NULL,
     "turn chunked prefill off", JOB_VARY_ALL},
    {"prefix-caching", P_PREFIX, JOB_PARAM_SWITCH, 0, 0, "engine", NULL,
     "share KV blocks of equal prompt prefixes (a trace with" IND
     "prefix hashes: Mooncake .jsonl, a CSV hash_ids column, or" IND
     "--synthetic with system_prompt= or turns=; default: on under" IND
     "vllm-v1 and sglang (its radix cache), off under vllm-v0)", JOB_VARY_ALL},
    {"no-prefix-caching", P_NO_PREFIX, JOB_PARAM_OFF, 0, 0, "engine", NULL,
     "turn prefix caching off", JOB_VARY_ALL},
    {"long-prefill-threshold", P_LPT, JOB_PARAM_I64, 0, I64MAX40, "engine", "N",
     "vllm-v1: at most N tokens of one request per step (0 = off," IND "the default)",
     JOB_VARY_ALL},
    {"segment-tokens", P_SEG, JOB_PARAM_I64, 1, 1 << 20, "engine", "N",
     "vllm-v1: tokens named by one prefix segment id (default 512," IND
     "the Mooncake segment)", JOB_VARY_ALL},
    {"kv-cache", P_KVCACHE, JOB_PARAM_ENUM, 0, 0, "engine", "on|off",
     "off: no KV cache, every step recomputes each request's" IND
     "whole context (vllm-v0, continuous; the O(S^2) baseline)", JOB_VARY_ALL},
    {"num-scheduler-steps", P_MSTEPS, JOB_PARAM_I64, 1, SCHED_MAX_SCHEDULER_STEPS, "engine", "K",
     "vllm-v0: multi-step scheduling, K decode steps per" IND
     "scheduling, their tokens streamed together (vLLM 0.6's" IND
     "--num-scheduler-steps; default 1 = off)",
     JOB_VARY_ALL},
    {"watermark", P_WM, JOB_PARAM_F64, 0.0, 0.99, "engine", "F",
     "vllm-v0: fraction of KV blocks kept free at admission" IND "(default 0.01)", JOB_VARY_ALL},
    {"max-model-len", P_MML, JOB_PARAM_I64, 1, I64MAX40, "engine", "N",
     "max prompt + output tokens (default: the model's context)", JOB_VARY_ALL},
    {"frontend-ms", P_FRONTEND, JOB_PARAM_F64, 0.0, 1e6, "engine", "F",
     "per-request front-end cost in ms (tokenize, detokenize," IND
     "HTTP), added to TTFT and E2E (default 0)", JOB_VARY_ALL},
    {"cost", P_COST, JOB_PARAM_STR, 0, 0, "engine", "MODEL",
     "roofline | affine:c0,c1,c2,c3 | calibrated[:ID] (default roofline);" IND
     "roofline:KEY=VALUE,... sets constants (kvsim cost show)", JOB_VARY_ALL},
    {"force-profile", P_FORCE, JOB_PARAM_SWITCH, 0, 0, "engine", NULL,
     "use a calibrated profile measured on another GPU/model", JOB_VARY_VARIANT},
    {"replicas", P_REPLICAS, JOB_PARAM_I64, 1, 4096, "cluster", "N",
     "N identical engines behind a router; every other flag" IND
     "applies to each (default 1, docs/cluster.md)", JOB_VARY_ALL},
    {"router", P_ROUTER, JOB_PARAM_STR, 0, 0, "cluster", "NAME",
     "round-robin | least-requests | least-kv | prefix-affinity |" IND
     "random (default round-robin)", JOB_VARY_ALL},
    {"router-seed", P_ROUTER_SEED, JOB_PARAM_U64, 0, 0, "cluster", "N",
     "seed of the random router (default: --seed)", JOB_VARY_ALL},
    {"affinity-cap", P_AFFINITY_CAP, JOB_PARAM_I64, 0, 1 << 30, "cluster", "K",
     "prefix-affinity: skip replicas with more than K outstanding" IND
     "requests above the least loaded one (default 16)", JOB_VARY_ALL},
    {"pd", P_PD, JOB_PARAM_STR, 0, 0, "cluster", "P:D",
     "disaggregated serving: P prefill and D decode replicas" IND
     "(vllm-v1; --replicas left out or P + D; --router picks" IND
     "the prefill replica; docs/cluster.md section D)", JOB_VARY_ALL},
    {"pd-tp", P_PD_TP, JOB_PARAM_STR, 0, 0, "cluster", "TP_P:TP_D",
     "--pd: the TP degree of each prefill and of each decode" IND
     "replica (default both --tp; --tp left out or TP_P)", JOB_VARY_ALL},
    {"kv-link", P_KV_LINK, JOB_PARAM_STR, 0, 0, "cluster", "LINK",
     "--pd: the link that moves the KV: nvlink | ib | roce |" IND
     "BW_GBPS:LAT_US (default nvlink)", JOB_VARY_ALL},
    {"slo", P_SLO, JOB_PARAM_SLO, 0, 0, "results", "ttft=S,tpot=S,e2e=S",
     "per-request SLOs for attainment and goodput", JOB_VARY_ALL},
    {"goodput", P_GOODPUT, JOB_PARAM_SLO, 0, 0, "results", "'ttft:MS tpot:MS'",
     "the same per-request SLOs in vllm bench serve's syntax:" IND
     "milliseconds, keys ttft tpot e2el (spaces or commas)", JOB_VARY_ALL},
    {"db", P_DB, JOB_PARAM_STR, 0, 0, "results", "FILE",
     "SQLite results database (default kvsim.db; made with its first run in it)", 0},
    {"record-steps", P_REC, JOB_PARAM_SWITCH, 0, 0, "results", NULL,
     "store every step in the steps table", JOB_VARY_VARIANT},
    {"label", P_LABEL, JOB_PARAM_STR, 0, 0, "results", "TEXT", "free text stored with the run",
     JOB_VARY_VARIANT},
    {"quiet", P_QUIET, JOB_PARAM_SWITCH, 0, 0, "results", NULL, "print only the run id", 0},
    {"json", P_JSON, JOB_PARAM_SWITCH, 0, 0, "results", NULL,
     "print the summary as one JSON object", 0},
    {"result-json", P_RESJSON, JOB_PARAM_STR, 0, 0, "results", "FILE",
     "kvsim run: also write the result in vllm bench serve's" IND
     "saved-result format (docs/vllm-bench.md)", 0},
    {"result-json-detail", P_RESDETAIL, JOB_PARAM_SWITCH, 0, 0, "results", NULL,
     "add per-request input_lens, output_lens, ttfts, errors" IND
     "(and itls, with --record-steps) to --result-json", 0},
};

#define N_PARAMS (sizeof params / sizeof params[0])

size_t job_param_count(void) { return N_PARAMS; }

const job_param *job_param_at(size_t i) { return i < N_PARAMS ? &params[i] : NULL; }

const job_param *job_param_find(const char *name)
{
    for (size_t i = 0; i < N_PARAMS; i++)
        if (!strcmp(params[i].name, name))
            return &params[i];
    return NULL;
}

const char *job_param_negation(const char *name)
{
    static const char *const pairs[][2] = {{"chunked-prefill", "no-chunked-prefill"},
                                           {"prefix-caching", "no-prefix-caching"},
                                           {"overlap-schedule", "no-overlap-schedule"}};
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++)
        for (int k = 0; k < 2; k++)
            if (!strcmp(name, pairs[i][k]))
                return pairs[i][1 - k];
    return NULL;
}

int job_param_given(const job_opts *o, const char *name)
{
    const job_param *p = job_param_find(name);
    return p && o->given[p - params];
}

const job_param *job_param_by_id(int id)
{
    for (size_t i = 0; i < N_PARAMS; i++)
        if (params[i].id == id)
            return &params[i];
    return NULL;
}

void job_opts_init(job_opts *o)
{
    memset(o, 0, sizeof *o);
    run_config_defaults(&o->cfg);
    o->cfg.sched.engine = SCHED_ENGINE_VLLM_V1; /* the default profile (job_engine.c) */
    strcpy(o->db, "kvsim.db");
}

/* ------------------------------------------------------------ setting */

static int copy_str(const char *flag, char *dst, size_t n, const char *src, kvs_err *err)
{
    if (strlen(src) >= n)
        return kvs_errf(err, KVS_EINVAL, "%s: value longer than %zu characters", flag, n - 1);
    strcpy(dst, src);
    return KVS_OK;
}

static int parse_slo(run_config *c, const char *arg, kvs_err *err)
{
    char buf[256];
    if (strlen(arg) >= sizeof buf)
        return kvs_errf(err, KVS_EINVAL, "--slo: too long");
    strcpy(buf, arg);
    for (char *save, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq)
            return kvs_errf(err, KVS_EINVAL, "--slo: '%s' is not key=seconds", tok);
        *eq = 0;
        double *dst = !strcmp(tok, "ttft") ? &c->slo_ttft_s
                      : !strcmp(tok, "tpot") ? &c->slo_tpot_s
                      : !strcmp(tok, "e2e")  ? &c->slo_e2e_s
                                             : NULL;
        if (!dst)
            return kvs_errf(err, KVS_EINVAL, "--slo: unknown metric '%s' (ttft, tpot, e2e)", tok);
        int rc = str_parse_f64("--slo", eq + 1, 1e-9, 1e9, dst, err);
        if (rc)
            return rc;
    }
    return KVS_OK;
}

/* vllm bench serve's --goodput: "ttft:MS tpot:MS e2el:MS" (any of them,
 * separated by spaces or commas), milliseconds, into the per-request SLOs. */
static int parse_goodput(run_config *c, const char *arg, kvs_err *err)
{
    char buf[256];
    if (strlen(arg) >= sizeof buf)
        return kvs_errf(err, KVS_EINVAL, "--goodput: too long");
    strcpy(buf, arg);
    int n = 0;
    for (char *save, *tok = strtok_r(buf, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
        char *colon = strchr(tok, ':');
        if (!colon)
            return kvs_errf(err, KVS_EINVAL, "--goodput: '%s' is not KEY:MS (e.g. ttft:500)", tok);
        *colon = 0;
        double *dst = !strcmp(tok, "ttft")   ? &c->slo_ttft_s
                      : !strcmp(tok, "tpot") ? &c->slo_tpot_s
                      : !strcmp(tok, "e2el") ? &c->slo_e2e_s
                                             : NULL;
        if (!dst)
            return kvs_errf(err, KVS_EINVAL, "--goodput: unknown metric '%s' (ttft, tpot, e2el)",
                            tok);
        double ms;
        int rc = str_parse_f64("--goodput", colon + 1, 1e-6, 1e12, &ms, err);
        if (rc)
            return rc;
        *dst = ms / 1000.0;
        n++;
    }
    return n ? KVS_OK : kvs_errf(err, KVS_EINVAL, "--goodput: empty (e.g. 'ttft:500 tpot:50')");
}

/* A string parameter's buffer. */
static char *str_field(job_opts *o, int id, size_t *n)
{
    run_config *c = &o->cfg;
    switch (id) {
    case P_MODEL: *n = sizeof c->model; return c->model;
    case P_GPU: *n = sizeof c->gpu; return c->gpu;
    case P_TRACE: *n = sizeof c->trace_path; return c->trace_path;
    case P_SYNTH: *n = sizeof c->synthetic; return c->synthetic;
    case P_COST: *n = sizeof c->cost; return c->cost;
    case P_DB: *n = sizeof o->db; return o->db;
    case P_RESJSON: *n = sizeof o->result_json; return o->result_json;
    case P_PRIOS: *n = sizeof c->priorities; return c->priorities;
    case P_LABEL: *n = sizeof c->label; return c->label;
    case P_DTYPE: *n = sizeof c->dtype; return c->dtype;
    case P_KVDTYPE: *n = sizeof c->kv_cache_dtype; return c->kv_cache_dtype;
    case P_ROUTER: *n = sizeof c->router; return c->router;
    case P_PD: *n = sizeof c->pd; return c->pd;
    case P_KV_LINK: *n = sizeof c->kv_link; return c->kv_link;
    case P_PD_TP: *n = sizeof c->pd_tp; return c->pd_tp;
    default: return NULL;
    }
}

static int64_t *i64_field(job_opts *o, int id)
{
    run_config *c = &o->cfg;
    sched_config *s = &c->sched;
    switch (id) {
    case P_TP: return &c->tp;
    case P_EP: return &c->ep;
    case P_CP: return &c->cp;
    case P_KVB: return &c->kv_blocks_flag;
    case P_BLOCK: return &s->block_size;
    case P_SEQS: return &s->max_seqs;
    case P_MBT: return &s->max_batched_tokens;
    case P_MML: return &s->max_model_len;
    case P_LPT: return &s->long_prefill_threshold;
    case P_SEG: return &s->segment_tokens;
    case P_MPT: return &s->max_prefill_tokens;
    case P_MSTEPS: return &s->num_scheduler_steps;
    case P_REPLICAS: return &c->replicas;
    case P_AFFINITY_CAP: return &c->affinity_cap;
    default: return NULL;
    }
}

static double *f64_field(job_opts *o, int id)
{
    run_config *c = &o->cfg;
    switch (id) {
    case P_RATE: return &c->rate_scale;
    case P_RATE_RPS: return &c->rate_rps;
    case P_WM: return &c->sched.watermark;
    case P_UTIL: return &c->gpu_mem_util;
    case P_SWAP: return &c->swap_gib;
    case P_BTO: return &c->sched.batch_timeout_s;
    case P_FRONTEND: return &c->frontend_ms;
    case P_CONS: return &c->sched.conservativeness;
    default: return NULL;
    }
}

static int *switch_field(job_opts *o, int id)
{
    run_config *c = &o->cfg;
    switch (id) {
    case P_REC: return &c->record_steps;
    case P_QUIET: return &o->quiet;
    case P_JSON: return &o->json;
    case P_RESDETAIL: return &o->result_json_detail;
    case P_FORCE: return &o->force_profile;
    case P_CHUNKED: return &c->sched.chunked_prefill;
    case P_PREFIX: return &c->sched.prefix_caching;
    case P_PPRE: return &c->sched.priority_preemption;
    case P_NO_CHUNKED: return &c->sched.chunked_prefill;
    case P_NO_PREFIX: return &c->sched.prefix_caching;
    case P_OVERLAP: return &c->sched.overlap;
    case P_NO_OVERLAP: return &c->sched.overlap;
    default: return NULL;
    }
}

static int set_enum(job_opts *o, const job_param *p, const char *arg, kvs_err *err)
{
    sched_config *s = &o->cfg.sched;
    const char *choices;
    int v;
    switch (p->id) {
    case P_BATCHING:
        v = s->batching = sched_batching_parse(arg);
        choices = "continuous, static";
        break;
    case P_POLICY:
        v = s->policy = sched_policy_parse(arg);
        choices = "fcfs, priority, lpm";
        break;
    case P_ALLOC:
        v = s->alloc = sched_alloc_parse(arg);
        choices = "paged, reserved, reserved-oracle";
        break;
    case P_PREEMPT:
        v = s->preemption = sched_preempt_parse(arg);
        choices = "recompute, swap, off";
        break;
    case P_ENGINE:
        v = s->engine = sched_engine_parse(arg);
        choices = "vllm-v1, vllm-v0, trtllm, sglang";
        break;
    case P_KVCACHE:
        v = !strcmp(arg, "on") ? 0 : !strcmp(arg, "off") ? 1 : -1;
        if (v >= 0)
            s->kv_cache_off = v;
        choices = "on, off";
        break;
    default:
        return kvs_errf(err, KVS_EINTERNAL, "--%s: internal: not an enum", p->name);
    }
    if (v < 0)
        return kvs_errf(err, KVS_EINVAL, "--%s: unknown value '%s' (%s)", p->name, arg, choices);
    return KVS_OK;
}

int job_param_set(job_opts *o, const char *name, const char *value, kvs_err *err)
{
    const job_param *p = job_param_find(name);
    if (!p)
        return kvs_errf(err, KVS_EINVAL, "--%s: not a run flag", name);
    char flag[64];
    snprintf(flag, sizeof flag, "--%s", p->name);
    const char *twin = job_param_negation(p->name);
    if (twin && job_param_given(o, twin))
        return kvs_errf(err, KVS_EINVAL, "%s and --%s: give one of them", flag, twin);
    if ((p->id == P_RATE && job_param_given(o, "rate")) ||
        (p->id == P_RATE_RPS && job_param_given(o, "rate-scale")))
        return kvs_errf(err, KVS_EINVAL, "--rate and --rate-scale: give one of them (a rate in "
                                         "req/s, or a multiplier)");
    o->given[p - params] = 1;
    if (!value && p->kind != JOB_PARAM_SWITCH && p->kind != JOB_PARAM_OFF)
        return kvs_errf(err, KVS_EINVAL, "%s: missing value", flag);
    size_t n;
    char *s;
    int64_t *i;
    double *d;
    int *sw;
    switch (p->kind) {
    case JOB_PARAM_STR:
        if (!(s = str_field(o, p->id, &n)))
            break;
        if (p->id == P_PRIOS && !*value)
            return kvs_errf(err, KVS_EINVAL, "--priorities: empty (e.g. 0:0.2/1:0.8)");
        return copy_str(flag, s, n, value, err);
    case JOB_PARAM_I64:
        if (!(i = i64_field(o, p->id)))
            break;
        return str_parse_i64(flag, value, (int64_t)p->lo, (int64_t)p->hi, i, err);
    case JOB_PARAM_U64: /* --seed and --router-seed */
        return str_parse_u64(flag, value,
                             p->id == P_ROUTER_SEED ? &o->cfg.router_seed : &o->cfg.seed, err);
    case JOB_PARAM_F64:
        if (!(d = f64_field(o, p->id)))
            break;
        return str_parse_f64(flag, value, p->lo, p->hi, d, err);
    case JOB_PARAM_ENUM: return set_enum(o, p, value, err);
    case JOB_PARAM_SWITCH:
    case JOB_PARAM_OFF:
        if (!(sw = switch_field(o, p->id)))
            break;
        *sw = p->kind == JOB_PARAM_SWITCH;
        return KVS_OK;
    case JOB_PARAM_SLO:
        if (job_param_given(o, p->id == P_SLO ? "goodput" : "slo"))
            return kvs_errf(err, KVS_EINVAL, "--slo and --goodput: give one of them (the same "
                                             "targets in seconds or in milliseconds)");
        return p->id == P_SLO ? parse_slo(&o->cfg, value, err)
                              : parse_goodput(&o->cfg, value, err);
    }
    return kvs_errf(err, KVS_EINTERNAL, "%s: internal: no field", flag);
}

/* ------------------------------------------------------------ argv */

int job_opts_parse_argv(job_opts *o, int argc, char **argv, const char *cmd, kvs_err *err)
{
    int opt;
    optind = 1;
    opterr = 0;
    char why[256];
    while ((opt = str_getopt_exact(argc, argv, "", job_param_options(), why, sizeof why)) != -1) {
        if (opt == '!')
            return kvs_errf(err, KVS_EINVAL, "%s", why);
        if (opt == '?' || opt == ':')
            return kvs_errf(err, KVS_EINVAL,
                            "unknown flag or missing value: '%s' (see kvsim %s --help)",
                            argv[optind - 1], cmd);
        const job_param *p = job_param_by_id(opt);
        if (!p)
            return kvs_errf(err, KVS_EINTERNAL, "internal: unhandled flag");
        int rc = job_param_set(o, p->name, optarg, err);
        if (rc)
            return rc;
    }
    if (optind < argc)
        return kvs_errf(err, KVS_EINVAL, "unexpected argument '%s' (see kvsim %s --help)",
                        argv[optind], cmd);
    return KVS_OK;
}

/* ------------------------------------------------------------ tables */

/* Both tables are filled once (pthread_once), so threads may ask for them
 * at the same time (the Python package runs jobs in threads). */
static struct option opts_table[N_PARAMS + 1];
static char help_text[12288];
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static void tables_fill(void)
{
    for (size_t i = 0; i < N_PARAMS; i++)
        opts_table[i] = (struct option){params[i].name,
                                        params[i].kind == JOB_PARAM_SWITCH ||
                                                params[i].kind == JOB_PARAM_OFF
                                            ? no_argument
                                            : required_argument,
                                        0, params[i].id};
    size_t len = 0;
    const char *section = NULL;
    for (size_t i = 0; i < N_PARAMS && len < sizeof help_text; i++) {
        const job_param *p = &params[i];
        if (!section || strcmp(section, p->section))
            len += (size_t)snprintf(help_text + len, sizeof help_text - len, "%s:\n",
                                    p->section);
        section = p->section;
        char left[64];
        snprintf(left, sizeof left, "  --%s%s%s", p->name, p->metavar ? " " : "",
                 p->metavar ? p->metavar : "");
        if (len < sizeof help_text)
            len += (size_t)snprintf(help_text + len, sizeof help_text - len, "%-24s  %s\n",
                                    left, p->help);
    }
    assert(len < sizeof help_text); /* the table is fixed: grow help_text with it */
}

const struct option *job_param_options(void)
{
    pthread_once(&tables_once, tables_fill);
    return opts_table;
}

const char *job_param_help(void)
{
    pthread_once(&tables_once, tables_fill);
    return help_text;
}
