/* job_engine.c — engine profiles (see job.h): the scheduler rules a run
 * follows and the defaults of that engine's deployments.  Adding a profile
 * is its apply function and one line of the table. */
#include "job.h"

#include <ctype.h>
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
        (rc = refuse_given(o, "swap-gib", "vllm-v1", "V1 preempts by recompute only", err)))
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
    return refuse_given(o, "segment-tokens", "vllm-v0",
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

/* The trtllm profile's roofline constants (docs/engine-trtllm.md, section
 * 6): kernel and per-peer all-reduce latencies from published figures,
 * ridge_loss bounded by the FIT table and chosen on two batch-1 rows
 * (bench/fidelity/fit_ridge.py), the rest fitted on the FIT table. */
#define TRT_COST "eff_gemm=0.8,ridge_loss=0.25,eff_attn=0.6,step_overhead_ms=1,step_overhead_seq_us=5," \
                 "kernel_lat_us=3,collective_lat_us=20,collective_lat_peer_us=1.5"

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
        (rc = refuse_given(o, "segment-tokens", p, "KV block reuse is not modelled", err)) ||
        (rc = refuse_given(o, "prefix-caching", p, "KV block reuse is not modelled", err)))
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
    return profile_cost(o, TRT_COST, err);
}

static const job_engine engines[] = {
    {"vllm-v1", SCHED_ENGINE_VLLM_V1,
     "vLLM V1 scheduler (v0.11.0): one token budget, chunked prefill and prefix caching on",
     v1_apply},
    {"vllm-v0", SCHED_ENGINE_VLLM_V0,
     "vLLM V0 engine: prefill-first steps, watermark, swap or recompute preemption", v0_apply},
    {"trtllm", SCHED_ENGINE_TRTLLM,
     "TensorRT-LLM in-flight batching: context chunks beside generation, guaranteed no evict "
     "(--alloc reserved-oracle) or max utilization (--alloc paged)",
     trt_apply},
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
    return e->apply(o, m, g, err);
}
