/* model.c — parameter counts, weight and KV bytes, activation reserve and
 * KV capacity (docs/cost-models.md, "Memory arithmetic"). */
#include "model.h"

#include <stdint.h>

#define GIB_F 1073741824.0

/* Saturating helpers for non-negative operands: INT64_MAX instead of UB. */
static int64_t sat_mul(int64_t a, int64_t b)
{
    if (a <= 0 || b <= 0)
        return 0;
    return a > INT64_MAX / b ? INT64_MAX : a * b;
}

static int64_t sat_add(int64_t a, int64_t b)
{
    return a > INT64_MAX - b ? INT64_MAX : a + b;
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

int model_check_tp(const model_spec *m, int64_t tp, kvs_err *err)
{
    if (tp < 1 || tp > 1024)
        return kvs_errf(err, KVS_EINVAL, "--tp: %lld is out of range [1, 1024]",
                        (long long)tp);
    if (m->heads % tp)
        return kvs_errf(err, KVS_EINVAL,
                        "--tp: %lld does not divide the %lld attention heads of %s",
                        (long long)tp, (long long)m->heads, m->name);
    if (m->intermediate % tp)
        return kvs_errf(err, KVS_EINVAL,
                        "--tp: %lld does not divide the MLP width %lld of %s",
                        (long long)tp, (long long)m->intermediate, m->name);
    if (m->kv_heads % tp && tp % m->kv_heads)
        return kvs_errf(err, KVS_EINVAL,
                        "--tp: %lld neither divides nor is a multiple of the %lld KV heads of %s",
                        (long long)tp, (long long)m->kv_heads, m->name);
    return KVS_OK;
}

/* Parameters of one decoder layer: q, k, v, o projections, SwiGLU MLP
 * (gate, up, down) and the two RMSNorm weight vectors. */
static int64_t layer_params(const model_spec *m)
{
    int64_t q = m->hidden * m->heads * m->head_dim;
    int64_t kv = 2 * m->hidden * m->kv_heads * m->head_dim;
    int64_t o = m->heads * m->head_dim * m->hidden;
    int64_t mlp = 3 * m->hidden * m->intermediate;
    return q + kv + o + mlp + 2 * m->hidden;
}

int64_t model_param_count(const model_spec *m)
{
    /* embedding + layers + final norm + untied LM head */
    return m->vocab * m->hidden + m->layers * layer_params(m) + m->hidden +
           m->vocab * m->hidden;
}

int64_t model_kv_heads_per_gpu(const model_spec *m, int64_t tp)
{
    if (tp <= 1)
        return m->kv_heads;
    return tp >= m->kv_heads ? 1 : ceil_div(m->kv_heads, tp);
}

int64_t model_weight_bytes(const model_spec *m, int64_t tp)
{
    if (tp < 1)
        tp = 1;
    /* Split over tp: embedding and LM head (by vocab), q and o (by head),
     * the MLP (by column/row).  Held whole on every GPU: the norms, and the
     * KV projections of the KV heads this GPU stores (equal to a 1/tp share
     * when tp divides kv_heads, a full head each when they are replicated). */
    int64_t split = 2 * m->vocab * m->hidden +
                    m->layers * (2 * m->hidden * m->heads * m->head_dim +
                                 3 * m->hidden * m->intermediate);
    int64_t kv = m->layers * 2 * m->hidden * model_kv_heads_per_gpu(m, tp) * m->head_dim;
    int64_t norms = (2 * m->layers + 1) * m->hidden;
    return (ceil_div(split, tp) + kv + norms) * m->dtype_bytes;
}

int64_t model_kv_bytes_per_token(const model_spec *m, int64_t tp)
{
    return 2 * m->layers * model_kv_heads_per_gpu(m, tp) * m->head_dim * m->dtype_bytes;
}

int64_t model_activation_reserve(const model_spec *m, int64_t tp,
                                 int64_t max_batched_tokens, int64_t max_seqs)
{
    if (tp < 1)
        tp = 1;
    int64_t per_token = (4 * m->hidden + 3 * ceil_div(m->intermediate, tp)) * m->dtype_bytes;
    int64_t act = sat_mul(max_batched_tokens, per_token);
    int64_t logits = sat_mul(max_seqs, m->vocab * 4);
    return sat_add(act, logits);
}

int model_kv_capacity(const model_spec *m, const gpu_spec *g, int64_t tp,
                      double mem_util, int64_t block_size,
                      int64_t max_batched_tokens, int64_t max_seqs,
                      kv_capacity *out, kvs_err *err)
{
    int rc = model_check_tp(m, tp, err);
    if (rc)
        return rc;
    if (!(mem_util > 0 && mem_util <= 1))
        return kvs_errf(err, KVS_EINVAL, "--gpu-mem-util: %g is out of range (0, 1]",
                        mem_util);
    if (block_size < 1 || block_size > 65536)
        return kvs_errf(err, KVS_EINVAL, "--block-size: %lld is out of range [1, 65536]",
                        (long long)block_size);
    if (max_batched_tokens < 1 || max_seqs < 1)
        return kvs_errf(err, KVS_EINVAL,
                        "--max-batched-tokens and --max-seqs must be >= 1 (got %lld, %lld)",
                        (long long)max_batched_tokens, (long long)max_seqs);
    kv_capacity c = {0};
    c.kv_bytes_per_token = model_kv_bytes_per_token(m, tp);
    c.weight_bytes = model_weight_bytes(m, tp);
    c.activation_bytes = model_activation_reserve(m, tp, max_batched_tokens, max_seqs);
    c.usable_bytes = gpu_usable_bytes(g->mem_bytes, mem_util);
    c.block_bytes = block_size * c.kv_bytes_per_token;
    if (c.weight_bytes > c.usable_bytes)
        return kvs_errf(err, KVS_EINVAL,
                        "%s needs %.1f GiB of weights per GPU at tp %lld but %s offers "
                        "%.1f GiB at --gpu-mem-util %g; raise --tp",
                        m->name, (double)c.weight_bytes / GIB_F, (long long)tp, g->name,
                        (double)c.usable_bytes / GIB_F, mem_util);
    if (c.activation_bytes > c.usable_bytes - c.weight_bytes)
        return kvs_errf(err, KVS_EINVAL,
                        "%s needs %.1f GiB of weights + %.1f GiB of activation reserve per "
                        "GPU at tp %lld but %s offers %.1f GiB at --gpu-mem-util %g; lower "
                        "--max-batched-tokens or --max-seqs, or raise --tp",
                        m->name, (double)c.weight_bytes / GIB_F,
                        (double)c.activation_bytes / GIB_F, (long long)tp, g->name,
                        (double)c.usable_bytes / GIB_F, mem_util);
    c.kv_bytes = c.usable_bytes - c.weight_bytes - c.activation_bytes;
    c.kv_blocks = c.kv_bytes / c.block_bytes;
    c.kv_tokens = c.kv_blocks * block_size;
    *out = c;
    return KVS_OK;
}
