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

#define GIB_I ((int64_t)1 << 30)
#define GIB_D 1073741824.0

/* Bytes per GPU, from the vLLM logs in docs/engine-memory.md. */
static const double driver_reserve_gib = 0.43; /* nvidia-smi total - cudaMemGetInfo total */
static const double nontorch_base_gib = 1.79;  /* TP 1: CUDA context, cuBLAS, allocator slack */
static const double nontorch_peer_gib = 1.79;  /* each further TP peer: communicator buffers */

int64_t model_cuda_total_bytes(const gpu_spec *g)
{
    int64_t rt = g->mem_runtime_bytes > 0 ? g->mem_runtime_bytes : g->mem_bytes;
    int64_t keep = (int64_t)(driver_reserve_gib * GIB_D);
    return rt > 2 * keep ? rt - keep : rt;
}

int64_t model_nontorch_bytes(int64_t tp)
{
    if (tp < 1)
        tp = 1;
    return (int64_t)((nontorch_base_gib + nontorch_peer_gib * (double)(tp - 1)) * GIB_D);
}

const char *model_kv_rule_name(model_kv_rule r)
{
    switch (r) {
    case MODEL_KV_RULE_KVSIM: return "kvsim";
    case MODEL_KV_RULE_VLLM: return "vllm";
    case MODEL_KV_RULE_TRTLLM: return "trtllm";
    }
    return "?";
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
    const char *flag = rule == MODEL_KV_RULE_VLLM ? "--gpu-mem-util" : "--gpu-mem-util (TensorRT-LLM's free_gpu_memory_fraction)";
    if (!(frac > 0 && frac <= 1))
        return kvs_errf(err, KVS_EINVAL, "%s: %g is out of range (0, 1]", flag, frac);
    if (block_size < 1 || block_size > 65536)
        return kvs_errf(err, KVS_EINVAL, "--block-size: %lld is out of range [1, 65536]",
                        (long long)block_size);
    if (max_batched_tokens < 1 || max_seqs < 1)
        return kvs_errf(err, KVS_EINVAL,
                        "--max-batched-tokens and --max-seqs must be >= 1 (got %lld, %lld)",
                        (long long)max_batched_tokens, (long long)max_seqs);
    kv_capacity c = {0};
    const int64_t tp = p->tp > 1 ? p->tp : 1;
    const int64_t total = model_cuda_total_bytes(g), other = model_nontorch_bytes(tp);
    c.kv_bytes_per_token = model_kv_bytes_per_token(m, tp);
    c.weight_bytes = model_weight_bytes_par(m, p);
    c.activation_bytes = model_activation_reserve(m, tp, max_batched_tokens, max_seqs);
    c.block_bytes = block_size * c.kv_bytes_per_token;
    double kv;
    if (rule == MODEL_KV_RULE_VLLM) {
        c.usable_bytes = (int64_t)(frac * (double)total);
        kv = (double)c.usable_bytes - (double)c.weight_bytes - (double)c.activation_bytes -
             (double)other;
    } else {
        c.usable_bytes = total;
        kv = frac * ((double)total - (double)c.weight_bytes - (double)c.activation_bytes -
                     (double)other);
    }
    if (!(kv > 0))
        return kvs_errf(err, KVS_EINVAL,
                        "%s needs %.1f GiB of weights + %.1f GiB of activations + %.1f GiB "
                        "outside the engine's tensors per GPU at tp %lld, leaving no KV cache "
                        "on %s (%.1f GiB, %s %g); raise --tp",
                        m->name, (double)c.weight_bytes / GIB_D,
                        (double)c.activation_bytes / GIB_D, (double)other / GIB_D,
                        (long long)tp, g->name, (double)total / GIB_D, flag, frac);
    c.kv_bytes = (int64_t)kv;
    if (rule == MODEL_KV_RULE_VLLM) {
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
