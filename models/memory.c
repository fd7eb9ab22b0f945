/* memory.c — KV capacity as each engine computes it (model.h,
 * model_kv_capacity_rule; docs/engine-memory.md gives every figure with its
 * source).
 *
 * kvsim's own rule (MODEL_KV_RULE_KVSIM) is model_kv_capacity_par.  The
 * engine rules start from the memory CUDA reports (the runtime total less
 * what the driver keeps) and also take off the memory the engine holds
 * outside its tensors: CUDA context, cuBLAS workspaces and communicator
 * buffers, which grow with the number of peers (TP - 1).
 *   vLLM:         KV = util * total - weights - activation peak - non-torch
 *   TensorRT-LLM: KV = frac * (total - weights - activations - non-torch),
 *                 tokens = floor(KV / bytes per token), blocks = ceil(tokens / bs) */
#include "model.h"

#include <assert.h>
#include <string.h>

#define GIB_I ((int64_t)1 << 30)
#define GIB_D 1073741824.0

/* Bytes per GPU, from the vLLM logs in docs/engine-memory.md. */
static const double driver_reserve_gib = 0.43; /* nvidia-smi total - cudaMemGetInfo total */
static const double nontorch_base_gib = 1.79;  /* TP 1: CUDA context, cuBLAS, allocator slack */
static const double nontorch_peer_gib = 1.79;  /* each further TP peer: communicator buffers */
/* SGLang sizes its pool from the memory free before the weights load,
 * after the CUDA context and the distributed init only (docs/engine-memory.md):
 * sgl-project/sglang PR #11716 (description, 2025-10-16), 8 x H200 at TP 8:
 * "Init torch distributed ends. mem usage=2.01 GB" per rank, then "Load
 * weight begin. avail mem=137.29 GB" of the 139.97 GiB CUDA reports: 0.68
 * GiB before the distributed init (the context) and 2.0 / 7 per peer. */
static const double sglang_context_gib = 0.68;
static const double sglang_peer_gib = 2.0 / 7.0;

int64_t model_cuda_total_bytes(const gpu_spec *g)
{
    int64_t rt = g->mem_runtime_bytes > 0 ? g->mem_runtime_bytes : g->mem_bytes;
    int64_t keep = (int64_t)(driver_reserve_gib * GIB_D);
    return rt > 2 * keep ? rt - keep : rt;
}

/* base GiB on one GPU plus peer GiB for each further TP peer, in bytes. */
static int64_t per_tp_bytes(double base_gib, double peer_gib, int64_t tp)
{
    if (tp < 1)
        tp = 1;
    return (int64_t)((base_gib + peer_gib * (double)(tp - 1)) * GIB_D);
}

int64_t model_nontorch_bytes(int64_t tp)
{
    return per_tp_bytes(nontorch_base_gib, nontorch_peer_gib, tp);
}

const char *model_kv_rule_name(model_kv_rule r)
{
    switch (r) {
    case MODEL_KV_RULE_KVSIM: return "kvsim";
    case MODEL_KV_RULE_VLLM: return "vllm";
    case MODEL_KV_RULE_TRTLLM: return "trtllm";
    case MODEL_KV_RULE_SGLANG: return "sglang";
    }
    return "?";
}

/* The figures of c that a fit gives: everything but the KV memory and
 * blocks. */
static void capacity_from_fit(const model_spec *m, const model_par *p, const model_fit *f,
                              int64_t block_size, kv_capacity *c)
{
    memset(c, 0, sizeof *c);
    c->kv_bytes_per_token = model_kv_bytes_per_token(m, p->tp > 1 ? p->tp : 1);
    c->weight_bytes = f->weight_bytes;
    c->activation_bytes = f->activation_bytes;
    c->usable_bytes = f->usable_bytes;
    c->nontorch_bytes = f->nontorch_bytes;
    c->block_bytes = block_size * c->kv_bytes_per_token;
}

int model_kv_capacity_rule(const model_spec *m, const gpu_spec *g, const model_par *p,
                           model_kv_rule rule, double frac, int64_t block_size,
                           int64_t max_batched_tokens, int64_t max_seqs, kv_capacity *out,
                           kvs_err *err)
{
    if (rule == MODEL_KV_RULE_KVSIM)
        return model_kv_capacity_par(m, g, p, frac, block_size, max_batched_tokens, max_seqs,
                                     out, err);
    int rc = model_check_par(m, p, err);
    if (rc)
        return rc;
    const char *flag = rule == MODEL_KV_RULE_VLLM     ? "--gpu-mem-util"
                       : rule == MODEL_KV_RULE_SGLANG ? "--gpu-mem-util (SGLang's mem_fraction_static)"
                                                      : "--gpu-mem-util (TensorRT-LLM's free_gpu_memory_fraction)";
    if (!(frac > 0 && frac <= 1))
        return kvs_errf(err, KVS_EINVAL, "%s: %g is out of range (0, 1]", flag, frac);
    if (block_size < 1 || block_size > 65536)
        return kvs_errf(err, KVS_EINVAL, "--block-size: %lld is out of range [1, 65536]",
                        (long long)block_size);
    if (max_batched_tokens < 1 || max_seqs < 1)
        return kvs_errf(err, KVS_EINVAL,
                        "--max-batched-tokens and --max-seqs must be >= 1 (got %lld, %lld)",
                        (long long)max_batched_tokens, (long long)max_seqs);
    /* what is usable, needed and left: model_fit_check_rule's arithmetic */
    model_fit f;
    if ((rc = model_fit_check_rule(m, g, p, rule, frac, max_batched_tokens, max_seqs, &f, err)))
        return rc;
    kv_capacity c;
    capacity_from_fit(m, p, &f, block_size, &c);
    if (!f.fits)
        return kvs_errf(err, KVS_EINVAL,
                        "%s needs %.1f GiB of weights + %.1f GiB of activations + %.1f GiB "
                        "outside the engine's tensors per GPU at tp %lld, leaving no KV cache "
                        "on %s (%.1f GiB, %s %g); raise --tp",
                        m->name, (double)c.weight_bytes / GIB_D,
                        (double)c.activation_bytes / GIB_D, (double)c.nontorch_bytes / GIB_D,
                        (long long)p->tp, g->name, (double)model_cuda_total_bytes(g) / GIB_D,
                        flag, frac);
    c.kv_bytes = f.free_bytes;
    if (rule == MODEL_KV_RULE_VLLM || rule == MODEL_KV_RULE_SGLANG) {
        c.kv_blocks = c.kv_bytes / c.block_bytes;
    } else {
        int64_t tokens = c.kv_bytes / c.kv_bytes_per_token;
        c.kv_blocks = (tokens + block_size - 1) / block_size;
    }
    c.kv_tokens = c.kv_blocks * block_size;
    *out = c;
    (void)GIB_I;
    return KVS_OK;
}

int model_fit_check_rule(const model_spec *m, const gpu_spec *g, const model_par *p,
                         model_kv_rule rule, double frac, int64_t max_batched_tokens,
                         int64_t max_seqs, model_fit *out, kvs_err *err)
{
    /* model_fit_check validates p, frac and the budget and sizes the weights
     * and the activation peak; the engine rules then change what is usable. */
    int rc = model_fit_check(m, g, p, frac, max_batched_tokens, max_seqs, out, err);
    if (rc || rule == MODEL_KV_RULE_KVSIM)
        return rc;
    model_fit f = *out;
    const int64_t total = model_cuda_total_bytes(g);
    if (rule == MODEL_KV_RULE_SGLANG) { /* f * (memory free before the weights) - weights */
        f.nontorch_bytes = per_tp_bytes(sglang_context_gib, sglang_peer_gib, p->tp);
        f.activation_bytes = 0;
        f.usable_bytes = (int64_t)(frac * (double)(total - f.nontorch_bytes));
        f.fits = f.weight_bytes < f.usable_bytes;
        f.free_bytes = f.fits ? f.usable_bytes - f.weight_bytes : 0;
        f.missing_bytes = f.fits ? 0 : f.weight_bytes - f.usable_bytes + 1;
        *out = f;
        return KVS_OK;
    }
    f.nontorch_bytes = model_nontorch_bytes(p->tp);
    /* every term < 2^62 (weights are capped by model.h's limits) */
    const double need = (double)f.weight_bytes + (double)f.activation_bytes +
                        (double)f.nontorch_bytes;
    f.usable_bytes = rule == MODEL_KV_RULE_VLLM ? (int64_t)(frac * (double)total) : total;
    f.fits = need < (double)f.usable_bytes;
    f.free_bytes = f.missing_bytes = 0;
    if (f.fits)
        f.free_bytes = rule == MODEL_KV_RULE_VLLM
                           ? (int64_t)((double)f.usable_bytes - need)
                           : (int64_t)(frac * ((double)total - need));
    else
        f.missing_bytes = (int64_t)(need - (double)f.usable_bytes) + 1;
    *out = f;
    return KVS_OK;
}

/* The longest context whose paged KV fits in avail bytes: a bisection on a
 * monotone function, capped at 2^40 tokens. */
static int64_t longest_context(const model_spec *m, const model_par *p, int64_t block_size,
                               int64_t avail)
{
    int64_t lo = 0, hi = (int64_t)1 << 40;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo + 1) / 2;
        if (model_kv_request_block_bytes(m, p, mid, block_size) <= avail)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

int model_kv_plan_eval(const model_spec *m, const gpu_spec *g, const model_par *p,
                       const model_kv_budget *b, int64_t seq_len, model_kv_plan *out,
                       kvs_err *err)
{
    memset(out, 0, sizeof *out);
    if (seq_len < 1)
        return kvs_errf(err, KVS_EINVAL, "--seq-len: %lld is out of range", (long long)seq_len);
    int rc = model_fit_check_rule(m, g, p, b->rule, b->frac, b->max_batched_tokens,
                                  b->max_seqs, &out->fit, err);
    if (rc)
        return rc;
    if (b->block_size < 1 || b->block_size > 65536)
        return kvs_errf(err, KVS_EINVAL, "--block-size: %lld is out of range [1, 65536]",
                        (long long)b->block_size);
    const int64_t per_rank = (seq_len + p->cp - 1) / p->cp;
    out->blocks_per_req = (per_rank + b->block_size - 1) / b->block_size;
    out->req_bytes = model_kv_request_block_bytes(m, p, seq_len, b->block_size);
    out->req_exact = model_kv_request_bytes(m, p, seq_len);
    kv_capacity *c = &out->c;
    if (!out->fit.fits) {
        capacity_from_fit(m, p, &out->fit, b->block_size, c);
        return KVS_OK;
    }
    rc = model_kv_capacity_rule(m, g, p, b->rule, b->frac, b->block_size,
                                b->max_batched_tokens, b->max_seqs, c, err);
    if (rc)
        return rc;
    assert(c->kv_blocks >= 0 && c->block_bytes > 0);
    const int64_t avail = c->kv_blocks * c->block_bytes;
    out->max_batch = out->req_bytes > 0 ? avail / out->req_bytes : 0;
    out->max_context = longest_context(m, p, b->block_size, avail);
    return KVS_OK;
}
