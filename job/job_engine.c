/* job_engine.c — engine profiles (see job.h): the scheduler rules a run
 * follows and the defaults of that engine's deployments.  Adding a profile
 * is its apply function and one line of the table. */
#include "job.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* A flag the profile lacks, if it was given. */
static int refuse_given(const job_opts *o, const char *flag, const char *profile,
                        const char *why, kvs_err *err)
{
    if (job_param_given(o, flag))
        return kvs_errf(err, KVS_EINVAL, "--%s: not available under --engine %s (%s)", flag,
                        profile, why);
    return KVS_OK;
}

/* SGLang's own settings, given to another profile. */
static int refuse_sglang_flags(const job_opts *o, const char *profile, kvs_err *err)
{
    static const char *const flags[] = {"max-prefill-tokens", "schedule-conservativeness",
                                        "overlap-schedule", "no-overlap-schedule"};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
        int rc = refuse_given(o, flags[i], profile, "an SGLang setting: needs --engine sglang",
                              err);
        if (rc)
            return rc;
    }
    return KVS_OK;
}

/* vLLM's "large GPU" rule (arg_utils._set_default_args): at least 70 GiB of
 * device memory and a device name without "a100". */
static int large_gpu(const gpu_spec *g)
{
    char name[sizeof g->name];
    size_t i = 0;
    for (; g->name[i] && i + 1 < sizeof name; i++)
        name[i] = (char)tolower((unsigned char)g->name[i]);
    name[i] = 0;
    return g->mem_bytes >= (INT64_C(70) << 30) && !strstr(name, "a100");
}

/* vLLM V1, v0.11.0 defaults (docs/semantics-v1.md, section 8). */
static int v1_apply(job_opts *o, const model_spec *m, const gpu_spec *g, kvs_err *err)
{
    sched_config *s = &o->cfg.sched;
    int rc;
    if ((rc = refuse_given(o, "watermark", "vllm-v1", "V1 keeps no watermark", err)) ||
        (rc = refuse_given(o, "swap-gib", "vllm-v1", "V1 preempts by recompute only", err)) ||
        (rc = refuse_given(o, "num-scheduler-steps", "vllm-v1",
                           "V1 has no multi-step scheduling; it went with V0", err)) ||
        (rc = refuse_sglang_flags(o, "vllm-v1", err)))
        return rc;
    if (!job_param_given(o, "chunked-prefill") && !job_param_given(o, "no-chunked-prefill"))
        s->chunked_prefill = 1;
    if (!job_param_given(o, "prefix-caching") && !job_param_given(o, "no-prefix-caching"))
        s->prefix_caching = 1;
    s->watermark = 0.0;
    int big = large_gpu(g);
    if (!job_param_given(o, "max-batched-tokens")) {
        int64_t mml = s->max_model_len > 0 ? s->max_model_len : m->max_ctx;
        s->max_batched_tokens = !s->chunked_prefill ? mml : big ? 8192 : 2048;
    }
    if (!job_param_given(o, "max-seqs")) {
        int64_t seqs = big ? 1024 : 256;
        s->max_seqs = seqs < s->max_batched_tokens ? seqs : s->max_batched_tokens;
    }
    o->cfg.kv_rule = MODEL_KV_RULE_VLLM; /* docs/engine-memory.md */
    return KVS_OK;
}

/* vLLM V0: today's rules and defaults (run_config_defaults and
 * run_config_resolve), bit for bit. */
static int v0_apply(job_opts *o, const model_spec *m, const gpu_spec *g, kvs_err *err)
{
    (void)m;
    (void)g;
    int rc = refuse_sglang_flags(o, "vllm-v0", err);
    return rc ? rc : refuse_given(o, "segment-tokens", "vllm-v0",
                                  "V0 reads the trace's own prefix segments", err);
}

/* Put a profile's roofline constants before the user's own (later keys
 * win), when the cost model is the roofline. */
static int profile_cost(job_opts *o, const char *params, kvs_err *err)
{
    char *c = o->cfg.cost;
    const char *user = !strcmp(c, "roofline") ? "" : !strncmp(c, "roofline:", 9) ? c + 9 : NULL;
    if (!user || !strncmp(user, params, strlen(params)))
        return KVS_OK; /* not the roofline, or the profile's constants are there */
    char buf[sizeof o->cfg.cost];
    int n = snprintf(buf, sizeof buf, "roofline:%s%s%s", params, *user ? "," : "", user);
    if (n < 0 || (size_t)n >= sizeof buf)
        return kvs_errf(err, KVS_EINVAL, "--cost: too long with the profile's constants");
    memcpy(c, buf, (size_t)n + 1);
    return KVS_OK;
}

/* The all-reduce's fixed latency, per call and per peer past two: the
 * node's, not the engine's (vLLM, SGLang and TensorRT-LLM all reduce small
 * messages with one-shot / two-shot kernels over NVLink), so every profile
 * but vllm-v0 (kept as it was) uses the trtllm profile's: per call fitted
 * on three rows of TensorRT-LLM's v0.14 table (bench/fidelity/
 * fit_collective.py), per peer from nccl-tests' small messages.  On
 * vLLM V1 and SGLang tables they are a check (docs/cost-models.md,
 * section 5): vLLM's ROCm MI300X TP 8 latencies 27.8% -> 11.4% median,
 * the V1 nightly TP 4 batch latencies -6.7/-14.4% -> -4.2/-1.6%, the
 * three SGLang tables 73.6/23.0/25.9% -> 64.0/22.2/22.9%. */
#define AR_COST "collective_lat_us=20,collective_lat_peer_us=1.5"

/* The trtllm profile's roofline constants (docs/engine-trtllm.md, section
 * 6): kernel and per-peer all-reduce latencies from published figures,
 * ridge_loss bounded by the FIT table and chosen on two batch-1 rows
 * (bench/fidelity/fit_ridge.py), the rest fitted on the FIT table. */
#define TRT_COST "eff_gemm=0.8,ridge_loss=0.25,eff_attn=0.6,step_overhead_ms=1,step_overhead_seq_us=5," \
                 "kernel_lat_us=3," AR_COST

/* TensorRT-LLM (docs/engine-trtllm.md): the C++ batch manager's in-flight
 * batching with chunked context, capacity scheduler "guaranteed no evict"
 * (--alloc reserved-oracle, the default) or "max utilization" (--alloc
 * paged); tokens_per_block 64, max_num_tokens 8192, max_batch_size 2048,
 * KV = free_gpu_memory_fraction (--gpu-mem-util, 0.9) of what is free after
 * the engine loads. */
static int trt_apply(job_opts *o, const model_spec *m, const gpu_spec *g, kvs_err *err)
{
    (void)m;
    (void)g;
    sched_config *s = &o->cfg.sched;
    const char *p = "trtllm";
    int rc;
    if ((rc = refuse_given(o, "watermark", p, "TensorRT-LLM keeps no watermark", err)) ||
        (rc = refuse_given(o, "swap-gib", p, "a paused request recomputes", err)) ||
        (rc = refuse_given(o, "num-scheduler-steps", p, "a vLLM V0 setting", err)) ||
        (rc = refuse_given(o, "segment-tokens", p, "KV block reuse is not modelled", err)) ||
        (rc = refuse_given(o, "prefix-caching", p, "KV block reuse is not modelled", err)) ||
        (rc = refuse_sglang_flags(o, p, err)))
        return rc;
    if (!job_param_given(o, "chunked-prefill") && !job_param_given(o, "no-chunked-prefill"))
        s->chunked_prefill = 1;
    s->prefix_caching = 0;
    s->watermark = 0.0;
    if (!job_param_given(o, "alloc"))
        s->alloc = SCHED_ALLOC_RESERVED_ORACLE;
    if (!job_param_given(o, "block-size"))
        s->block_size = 64;
    if (!job_param_given(o, "max-batched-tokens"))
        s->max_batched_tokens = 8192;
    if (!job_param_given(o, "max-seqs"))
        s->max_seqs = 2048;
    o->cfg.kv_rule = MODEL_KV_RULE_TRTLLM;
    return KVS_OK;
}

/* SGLang v0.5.18's defaults (docs/semantics-sglang.md, section 11), from
 * the GPU's memory as nvidia-smi reports it, in MiB. */
static int64_t sgl_gpu_mib(const gpu_spec *g)
{
    int64_t b = g->mem_runtime_bytes > 0 ? g->mem_runtime_bytes : g->mem_bytes;
    return b >> 20;
}

/* chunked_prefill_size by GPU memory (11.1). */
static int64_t sgl_chunk(int64_t G)
{
    return G < 35 * 1024 ? 2048 : G < 60 * 1024 ? 4096 : G < 160 * 1024 ? 8192 : 16384;
}

/* The decode CUDA-graph batch size (11.1); it only enters the memory rule. */
static int64_t sgl_decode_graph_bs(int64_t G, int64_t tp)
{
    return G < 20 * 1024    ? 8
           : G < 35 * 1024  ? (tp < 4 ? 24 : 80)
           : G < 60 * 1024  ? (tp < 4 ? 32 : 160)
           : G < 160 * 1024 ? (tp < 4 ? 256 : 512)
                            : 512;
}

/* Prefill CUDA-graph sizes up to C: 4..32 step 4, 48..256 step 16,
 * 288..512 step 32, 576..1024 step 64, 1280..4096 step 256, 4608.. step 512. */
static int64_t sgl_prefill_graphs(int64_t C)
{
    static const int64_t from[] = {4, 48, 288, 576, 1280, 4608}, to[] = {32, 256, 512, 1024, 4096, INT64_MAX / 2},
                         step[] = {4, 16, 32, 64, 256, 512};
    int64_t n = 0;
    for (int i = 0; i < 6; i++)
        for (int64_t x = from[i]; x <= to[i] && x <= C; x += step[i])
            n++;
    return n;
}

/* mem_fraction_static (11.3): round((G - reserved) / G, 3), reserved in MiB. */
static double sgl_mem_fraction(int64_t G, int64_t C, int64_t tp)
{
    double reserved = 512.0 + 1.5 * (double)(C > 2048 ? C : 2048) + 1024.0 * (double)tp / 8.0 +
                      2.0 * (double)sgl_decode_graph_bs(G, tp) +
                      8.0 * (double)sgl_prefill_graphs(C);
    if (G > 60 * 1024 && reserved < 10240.0)
        reserved = 10240.0;
    return nearbyint((double)(G - reserved) / (double)G * 1000.0) / 1000.0;
}

/* SGLang, v0.5.18 (docs/semantics-sglang.md): prefill-first steps, the
 * radix cache, token slots (block size 1), the overlap scheduler, its
 * chunk size and memory fraction from the GPU; max_seqs 0 lets
 * run_config_resolve derive max_running_requests from the pool. */
static int sgl_apply(job_opts *o, const model_spec *m, const gpu_spec *g, kvs_err *err)
{
    (void)m;
    sched_config *s = &o->cfg.sched;
    const char *p = "sglang";
    int rc;
    if ((rc = refuse_given(o, "watermark", p, "SGLang keeps no watermark", err)) ||
        (rc = refuse_given(o, "swap-gib", p, "a retracted request recomputes", err)) ||
        (rc = refuse_given(o, "long-prefill-threshold", p, "no such limit in SGLang", err)) ||
        (rc = refuse_given(o, "kv-cache", p, "SGLang always keeps a KV cache", err)) ||
        (rc = refuse_given(o, "num-scheduler-steps", p, "a vLLM V0 setting", err)))
        return rc;
    if (!job_param_given(o, "chunked-prefill") && !job_param_given(o, "no-chunked-prefill"))
        s->chunked_prefill = 1;
    if (!job_param_given(o, "prefix-caching") && !job_param_given(o, "no-prefix-caching"))
        s->prefix_caching = 1;
    if (!job_param_given(o, "overlap-schedule") && !job_param_given(o, "no-overlap-schedule"))
        s->overlap = 1;
    if (!job_param_given(o, "block-size"))
        s->block_size = 1;
    const int64_t G = sgl_gpu_mib(g);
    if (!job_param_given(o, "max-batched-tokens"))
        s->max_batched_tokens = sgl_chunk(G);
    if (!job_param_given(o, "max-prefill-tokens"))
        s->max_prefill_tokens = 16384;
    if (!job_param_given(o, "schedule-conservativeness"))
        s->conservativeness = 1.0;
    if (!job_param_given(o, "max-seqs"))
        s->max_seqs = 0; /* run_config_resolve: SGLang's rule from the pool */
    if (!job_param_given(o, "gpu-mem-util"))
        o->cfg.gpu_mem_util = sgl_mem_fraction(G, s->max_batched_tokens, o->cfg.tp);
    s->watermark = 0.0;
    o->cfg.kv_rule = MODEL_KV_RULE_SGLANG;
    return KVS_OK;
}

static const job_engine engines[] = {
    {"vllm-v1", SCHED_ENGINE_VLLM_V1,
     "vLLM V1 scheduler (v0.11.0): one token budget, chunked prefill and prefix caching on",
     v1_apply, AR_COST},
    {"vllm-v0", SCHED_ENGINE_VLLM_V0,
     "vLLM V0 engine: prefill-first steps, watermark, swap or recompute preemption", v0_apply,
     NULL},
    {"trtllm", SCHED_ENGINE_TRTLLM,
     "TensorRT-LLM in-flight batching: context chunks beside generation, guaranteed no evict "
     "(--alloc reserved-oracle) or max utilization (--alloc paged)",
     trt_apply, TRT_COST},
    {"sglang", SCHED_ENGINE_SGLANG,
     "SGLang scheduler (v0.5.18): prefill-first steps, radix cache, new-token-ratio admission, "
     "retraction, overlap scheduler",
     sgl_apply, AR_COST},
};

#define N_ENGINES (sizeof engines / sizeof engines[0])

size_t job_engine_count(void) { return N_ENGINES; }
const job_engine *job_engine_at(size_t i) { return i < N_ENGINES ? &engines[i] : NULL; }

const job_engine *job_engine_of(sched_engine e)
{
    for (size_t i = 0; i < N_ENGINES; i++)
        if (engines[i].engine == e)
            return &engines[i];
    return NULL;
}

int job_engine_apply(job_opts *o, const model_spec *m, const gpu_spec *g, kvs_err *err)
{
    const job_engine *e = job_engine_of(o->cfg.sched.engine);
    if (!e)
        return kvs_errf(err, KVS_EINVAL, "--engine: unknown engine %d", (int)o->cfg.sched.engine);
    int rc = e->apply(o, m, g, err);
    return rc || !e->cost ? rc : profile_cost(o, e->cost, err);
}
