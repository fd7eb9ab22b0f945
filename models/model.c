/* model.c — parameter counts, weight and KV bytes, activation reserve and
 * KV capacity (docs/cost-models.md, "Memory arithmetic"). */
#include "model.h"

#include <stdint.h>
#include <string.h>

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

int64_t model_moe_layers(const model_spec *m)
{
    return m->experts > 0 ? m->layers - m->dense_layers : 0;
}

int64_t model_dense_mlp_layers(const model_spec *m)
{
    return m->experts > 0 ? m->dense_layers : m->layers;
}

/* The parameter groups of a model, whole (tp 1, all experts). */
typedef struct pgroups {
    int64_t embed;      /* embedding + LM head unless tied */
    int64_t attn_split; /* per layer: projections split by heads over tp */
    int64_t attn_repl;  /* per layer: held whole (GQA: the K and V
                           projections, counted per KV head elsewhere; MLA:
                           q_a and kv_a) */
    int64_t attn_small; /* per layer: attention biases, q/k and LoRA norms */
    int64_t mlp;        /* one dense MLP (weights) */
    int64_t expert;     /* one expert (weights) */
    int64_t mlp_bias;   /* one dense MLP's biases */
    int64_t expert_bias;/* one expert's biases */
    int64_t router;     /* one MoE layer's router, bias included */
    int64_t norms;      /* every norm vector of the model, final one included */
    int64_t pos;        /* learned position embedding */
} pgroups;

static int64_t norm_width(const model_spec *m) { return m->layernorm ? 2 : 1; }

static void param_groups(const model_spec *m, pgroups *g)
{
    const int64_t H = m->hidden, D = m->head_dim, mats = m->mlp_plain ? 2 : 3;
    g->embed = m->vocab * H * (m->tied_embeddings ? 1 : 2);
    g->attn_small = m->qk_norm ? 2 * D : 0;
    if (m->attn_type == MODEL_ATTN_MLA) {
        int64_t qk = m->qk_nope_head_dim + m->qk_rope_head_dim;
        int64_t qb = m->q_lora_rank ? m->q_lora_rank * m->heads * qk : H * m->heads * qk;
        g->attn_split = qb + m->kv_lora_rank * m->heads * (m->qk_nope_head_dim + m->v_head_dim) +
                        m->heads * m->v_head_dim * H;
        g->attn_repl = H * m->q_lora_rank + H * (m->kv_lora_rank + m->qk_rope_head_dim);
        g->attn_small += m->q_lora_rank + m->kv_lora_rank; /* the LoRA norms */
    } else {
        g->attn_split = 2 * H * m->heads * D;
        g->attn_repl = 2 * H * m->kv_heads * D;
    }
    if (m->attn_bias)
        g->attn_small += m->heads * D + 2 * m->kv_heads * D + H;
    g->mlp = mats * H * m->intermediate;
    g->expert = mats * H * m->moe_intermediate;
    g->mlp_bias = m->mlp_bias ? (mats - 1) * m->intermediate + H : 0;
    g->expert_bias = m->mlp_bias ? (mats - 1) * m->moe_intermediate + H : 0;
    g->router = m->experts > 0 ? H * m->experts + (m->mlp_bias ? m->experts : 0) : 0;
    int64_t per_layer = m->norms_per_layer ? m->norms_per_layer : 2;
    g->norms = (per_layer * m->layers + 1) * H * norm_width(m);
    g->pos = m->pos_embed * H;
}

int64_t model_params_total(const model_spec *m)
{
    pgroups g;
    param_groups(m, &g);
    int64_t moe = model_moe_layers(m), dense = model_dense_mlp_layers(m);
    return g.embed + g.pos + g.norms +
           m->layers * (g.attn_split + g.attn_repl + g.attn_small) +
           dense * (g.mlp + g.mlp_bias) +
           moe * ((m->experts + m->shared_experts) * (g.expert + g.expert_bias) + g.router);
}

int64_t model_params_active(const model_spec *m)
{
    pgroups g;
    param_groups(m, &g);
    return model_params_total(m) -
           model_moe_layers(m) * (m->experts - m->experts_per_tok) * (g.expert + g.expert_bias);
}

int64_t model_param_count(const model_spec *m)
{
    /* embedding + layers + final norm + untied LM head (the LLaMA shapes:
     * the general count reduces to exactly this) */
    return model_params_total(m);
}

int64_t model_kv_heads_per_gpu(const model_spec *m, int64_t tp)
{
    if (tp <= 1)
        return m->kv_heads;
    return tp >= m->kv_heads ? 1 : ceil_div(m->kv_heads, tp);
}

static int weights_quantized(const model_spec *m)
{
    return (m->weight_bits && m->weight_bits != 8 * m->dtype_bytes) || m->quant_group > 0;
}

double model_weight_elem_bytes(const model_spec *m)
{
    if (!weights_quantized(m))
        return (double)m->dtype_bytes;
    double b = (double)m->weight_bits / 8.0;
    if (m->quant_group > 0)
        b += (double)m->quant_scale_bits / (8.0 * (double)m->quant_group);
    return b;
}

int64_t model_weight_bytes_par(const model_spec *m, const model_par *p)
{
    int64_t tp = p && p->tp > 1 ? p->tp : 1, ep = p && p->ep > 1 ? p->ep : 1;
    pgroups g;
    param_groups(m, &g);
    const int64_t L = m->layers, moe = model_moe_layers(m), dense = model_dense_mlp_layers(m);
    const int64_t routed = m->experts > 0 ? ceil_div(m->experts, ep) : 0;
    /* Linear weights split over tp, and held whole, on one GPU's share. */
    int64_t attn_split = L * g.attn_split;
    int64_t attn_repl = m->attn_type == MODEL_ATTN_MLA
                            ? L * g.attn_repl
                            : L * 2 * m->hidden * model_kv_heads_per_gpu(m, tp) * m->head_dim;
    int64_t mlp = dense * g.mlp + moe * m->shared_experts * g.expert;
    int64_t experts = moe * routed * g.expert;
    /* Unquantized: embedding / LM head (split by vocabulary), norms,
     * position embedding, routers and biases (held whole). */
    int64_t split_u = g.embed, repl_u = g.norms + g.pos + L * g.attn_small +
                                        dense * g.mlp_bias +
                                        moe * ((routed + m->shared_experts) * g.expert_bias +
                                               g.router);
    int64_t split_q = 0, repl_q = 0;
    if (!weights_quantized(m)) {
        split_u += attn_split + mlp + experts;
        repl_u += attn_repl;
    } else if (m->quant_experts_only) {
        split_u += attn_split + mlp;
        repl_u += attn_repl;
        split_q = experts;
    } else {
        split_q = attn_split + mlp + experts;
        repl_q = attn_repl;
    }
    int64_t bytes = (ceil_div(split_u, tp) + repl_u) * m->dtype_bytes;
    if (split_q + repl_q > 0) {
        int64_t n = ceil_div(split_q, tp) + repl_q;
        int64_t bits = sat_mul(n, m->weight_bits);
        if (m->quant_group > 0)
            bits = sat_add(bits, sat_mul(ceil_div(n, m->quant_group), m->quant_scale_bits));
        bytes = sat_add(bytes, ceil_div(bits, 8));
    }
    return bytes;
}

int64_t model_weight_bytes(const model_spec *m, int64_t tp)
{
    if (tp < 1)
        tp = 1;
    if (m->experts || m->attn_type || weights_quantized(m) || m->tied_embeddings ||
        m->mlp_plain || m->layernorm || m->norms_per_layer || m->qk_norm || m->attn_bias ||
        m->mlp_bias || m->pos_embed) {
        model_par p = {tp, 1, 1};
        return model_weight_bytes_par(m, &p);
    }
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

/* KV bytes per token of `layers` layers on one GPU. */
static int64_t kv_bytes_layers(const model_spec *m, int64_t tp, int64_t layers)
{
    if (m->attn_type == MODEL_ATTN_MLA) {
        int64_t bits = m->kv_bits ? m->kv_bits : 8 * m->dtype_bytes;
        return layers * (m->kv_lora_rank + m->qk_rope_head_dim) * bits / 8;
    }
    if (m->kv_bits)
        return 2 * layers * model_kv_heads_per_gpu(m, tp) * m->head_dim * m->kv_bits / 8;
    return 2 * layers * model_kv_heads_per_gpu(m, tp) * m->head_dim * m->dtype_bytes;
}

int64_t model_kv_bytes_per_token(const model_spec *m, int64_t tp)
{
    return kv_bytes_layers(m, tp, m->layers);
}

void model_kv_layer_groups(const model_spec *m, int64_t tp, model_kv_groups *g)
{
    int64_t w = m->window > 0 ? m->window_layers : 0;
    g->full_layers = m->layers - w;
    g->full_bytes_per_token = kv_bytes_layers(m, tp, g->full_layers);
    g->window_layers = w;
    g->window_bytes_per_token = kv_bytes_layers(m, tp, w);
    g->window = w ? m->window : 0;
}

void model_kv_page_groups(const model_spec *m, int64_t tp, model_kv_pages *pg)
{
    model_kv_groups g;
    model_kv_layer_groups(m, tp, &g);
    memset(pg, 0, sizeof *pg);
    if (g.window_layers == 0 || g.full_layers == 0) { /* one kind: one group */
        pg->group_layers = m->layers;
        pg->full_groups = g.full_layers > 0 ? 1 : 0;
        pg->window_groups = g.full_layers > 0 ? 0 : 1;
        pg->window = g.full_layers > 0 ? 0 : g.window;
    } else {
        int64_t L = g.full_layers < g.window_layers ? g.full_layers : g.window_layers;
        pg->group_layers = L;
        pg->full_groups = ceil_div(g.full_layers, L);
        pg->window_groups = ceil_div(g.window_layers, L);
        pg->window = g.window;
    }
    pg->page_bytes_per_token = kv_bytes_layers(m, tp, pg->group_layers);
}

int64_t model_kv_request_bytes(const model_spec *m, const model_par *p, int64_t ctx)
{
    int64_t tp = p && p->tp > 1 ? p->tp : 1, cp = p && p->cp > 1 ? p->cp : 1;
    if (ctx <= 0)
        return 0;
    model_kv_groups g;
    model_kv_layer_groups(m, tp, &g);
    int64_t wctx = ctx < g.window ? ctx : g.window;
    return sat_add(sat_mul(g.full_bytes_per_token, ceil_div(ctx, cp)),
                   sat_mul(g.window_bytes_per_token, ceil_div(wctx, cp)));
}

int64_t model_activation_reserve(const model_spec *m, int64_t tp,
                                 int64_t max_batched_tokens, int64_t max_seqs)
{
    if (tp < 1)
        tp = 1;
    int64_t inner = m->intermediate;
    if (m->experts > 0) {
        /* a MoE layer's fused kernels hold k + shared expert rows per token */
        int64_t moe = (m->experts_per_tok + m->shared_experts) * m->moe_intermediate;
        inner = m->dense_layers > 0 && inner > moe ? inner : moe;
    }
    int64_t per_token = (4 * m->hidden + 3 * ceil_div(inner, tp)) * m->dtype_bytes;
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

/* ------------------------------------------------------------ 2026 */

static const struct {
    const char *name;
    int64_t bits;
} dtypes[MODEL_DTYPE_COUNT] = {
    {"auto", 0}, {"fp32", 32}, {"fp16", 16}, {"bf16", 16},
    {"fp8", 8},  {"int8", 8},  {"int4", 4},  {"fp4", 4},
};

int64_t model_dtype_bits(model_dtype dt)
{
    return (unsigned)dt < MODEL_DTYPE_COUNT ? dtypes[dt].bits : 0;
}

const char *model_dtype_name(model_dtype dt)
{
    return (unsigned)dt < MODEL_DTYPE_COUNT ? dtypes[dt].name : "?";
}

int model_dtype_parse(const char *s)
{
    static const struct {
        const char *alias;
        model_dtype dt;
    } aliases[] = {
        {"float32", MODEL_DTYPE_FP32}, {"float16", MODEL_DTYPE_FP16},
        {"half", MODEL_DTYPE_FP16},    {"bfloat16", MODEL_DTYPE_BF16},
        {"fp8_e4m3", MODEL_DTYPE_FP8}, {"fp8_e5m2", MODEL_DTYPE_FP8},
        {"mxfp4", MODEL_DTYPE_FP4},    {"nvfp4", MODEL_DTYPE_FP4},
    };
    if (!s)
        return -1;
    for (int i = 0; i < MODEL_DTYPE_COUNT; i++)
        if (!strcmp(s, dtypes[i].name))
            return i;
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (!strcmp(s, aliases[i].alias))
            return (int)aliases[i].dt;
    return -1;
}

static model_dtype dtype_of_bytes(int64_t b)
{
    return b == 4 ? MODEL_DTYPE_FP32 : b == 1 ? MODEL_DTYPE_FP8 : MODEL_DTYPE_FP16;
}

model_dtype model_weight_dtype(const model_spec *m)
{
    return m->weight_dtype ? (model_dtype)m->weight_dtype : dtype_of_bytes(m->dtype_bytes);
}

model_dtype model_kv_dtype(const model_spec *m)
{
    return m->kv_dtype ? (model_dtype)m->kv_dtype : dtype_of_bytes(m->dtype_bytes);
}

int model_set_kv_dtype(model_spec *m, model_dtype dt, kvs_err *err)
{
    switch (dt) {
    case MODEL_DTYPE_AUTO:
        m->kv_dtype = 0;
        m->kv_bits = 0;
        return KVS_OK;
    case MODEL_DTYPE_FP32:
    case MODEL_DTYPE_FP16:
    case MODEL_DTYPE_BF16:
    case MODEL_DTYPE_FP8:
        m->kv_dtype = dt;
        m->kv_bits = model_dtype_bits(dt);
        return KVS_OK;
    default:
        return kvs_errf(err, KVS_EINVAL,
                        "--kv-cache-dtype: '%s' is not a KV-cache type (fp16, bf16, fp8, fp32)",
                        model_dtype_name(dt));
    }
}

int model_set_weight_dtype(model_spec *m, model_dtype dt, kvs_err *err)
{
    m->quant_group = 0;
    m->quant_scale_bits = 0;
    m->quant_experts_only = 0;
    switch (dt) {
    case MODEL_DTYPE_AUTO:
        m->weight_dtype = 0;
        m->weight_bits = 0;
        return KVS_OK;
    case MODEL_DTYPE_FP32:
    case MODEL_DTYPE_FP16:
    case MODEL_DTYPE_BF16:
        /* the checkpoint computed in this type: activations follow */
        m->dtype_bytes = model_dtype_bits(dt) / 8;
        m->weight_dtype = dt;
        m->weight_bits = 0;
        return KVS_OK;
    case MODEL_DTYPE_FP8:
    case MODEL_DTYPE_INT8:
        /* per-channel scales: one per output row, negligible; not counted */
        m->weight_dtype = dt;
        m->weight_bits = 8;
        return KVS_OK;
    case MODEL_DTYPE_INT4:
        /* AWQ/GPTQ default: groups of 128 with an fp16 scale and a 4-bit zero */
        m->weight_dtype = dt;
        m->weight_bits = 4;
        m->quant_group = 128;
        m->quant_scale_bits = 20;
        return KVS_OK;
    case MODEL_DTYPE_FP4:
        /* MXFP4: groups of 32 with an 8-bit power-of-two scale */
        m->weight_dtype = dt;
        m->weight_bits = 4;
        m->quant_group = 32;
        m->quant_scale_bits = 8;
        return KVS_OK;
    default:
        return kvs_errf(err, KVS_EINVAL, "--dtype: unknown weight type %d", (int)dt);
    }
}

const char *model_attn_kind(const model_spec *m)
{
    if (m->attn_type == MODEL_ATTN_MLA)
        return "mla";
    if (m->kv_heads == m->heads)
        return "mha";
    return m->kv_heads == 1 ? "mqa" : "gqa";
}

int64_t model_kv_request_block_bytes(const model_spec *m, const model_par *p, int64_t ctx,
                                     int64_t block_size)
{
    int64_t tp = p && p->tp > 1 ? p->tp : 1, cp = p && p->cp > 1 ? p->cp : 1;
    if (ctx <= 0 || block_size < 1)
        return 0;
    model_kv_groups g;
    model_kv_layer_groups(m, tp, &g);
    int64_t wctx = ctx < g.window ? ctx : g.window;
    int64_t full_blocks = ceil_div(ceil_div(ctx, cp), block_size);
    int64_t win_blocks = g.window_layers ? ceil_div(ceil_div(wctx, cp), block_size) : 0;
    return sat_add(sat_mul(sat_mul(g.full_bytes_per_token, block_size), full_blocks),
                   sat_mul(sat_mul(g.window_bytes_per_token, block_size), win_blocks));
}

int64_t model_context_limit(const model_spec *m)
{
    return m->max_ctx_scaled > m->max_ctx ? m->max_ctx_scaled : m->max_ctx;
}

int model_check_par(const model_spec *m, const model_par *p, kvs_err *err)
{
    int rc = model_check_tp(m, p->tp, err);
    if (rc)
        return rc;
    if (p->ep < 1 || p->ep > 1024)
        return kvs_errf(err, KVS_EINVAL, "--ep: %lld is out of range [1, 1024]",
                        (long long)p->ep);
    if (p->ep > 1 && m->experts <= 0)
        return kvs_errf(err, KVS_EINVAL, "--ep: %s has no experts to split", m->name);
    if (m->experts > 0 && p->ep > m->experts)
        return kvs_errf(err, KVS_EINVAL, "--ep: %lld exceeds the %lld experts of %s",
                        (long long)p->ep, (long long)m->experts, m->name);
    if (m->experts > 0 && m->moe_intermediate % p->tp)
        return kvs_errf(err, KVS_EINVAL,
                        "--tp: %lld does not divide the expert width %lld of %s",
                        (long long)p->tp, (long long)m->moe_intermediate, m->name);
    if (p->cp < 1 || p->cp > 1024)
        return kvs_errf(err, KVS_EINVAL, "--cp: %lld is out of range [1, 1024]",
                        (long long)p->cp);
    return KVS_OK;
}

int model_fit_check(const model_spec *m, const gpu_spec *g, const model_par *p,
                    double mem_util, int64_t max_batched_tokens, int64_t max_seqs,
                    model_fit *out, kvs_err *err)
{
    int rc = model_check_par(m, p, err);
    if (rc)
        return rc;
    if (!(mem_util > 0 && mem_util <= 1))
        return kvs_errf(err, KVS_EINVAL, "--gpu-mem-util: %g is out of range (0, 1]",
                        mem_util);
    if (max_batched_tokens < 1 || max_seqs < 1)
        return kvs_errf(err, KVS_EINVAL,
                        "--max-batched-tokens and --max-seqs must be >= 1 (got %lld, %lld)",
                        (long long)max_batched_tokens, (long long)max_seqs);
    model_fit f = {0};
    f.weight_bytes = model_weight_bytes_par(m, p);
    f.activation_bytes = model_activation_reserve(m, p->tp, max_batched_tokens, max_seqs);
    f.usable_bytes = gpu_usable_bytes(g->mem_bytes, mem_util);
    int64_t need = sat_add(f.weight_bytes, f.activation_bytes);
    f.fits = need <= f.usable_bytes;
    if (f.fits)
        f.free_bytes = f.usable_bytes - need;
    else
        f.missing_bytes = need - f.usable_bytes;
    *out = f;
    return KVS_OK;
}

int model_fit_min_par(const model_spec *m, const gpu_spec *g, const model_par *p_in,
                      double mem_util, int64_t max_batched_tokens, int64_t max_seqs,
                      int64_t max_tp, model_par *out, model_fit *fit, kvs_err *err)
{
    return model_fit_min_par_rule(m, g, p_in, MODEL_KV_RULE_KVSIM, mem_util,
                                  max_batched_tokens, max_seqs, max_tp, out, fit, err);
}

int model_fit_min_par_rule(const model_spec *m, const gpu_spec *g, const model_par *p_in,
                           model_kv_rule rule, double mem_util, int64_t max_batched_tokens,
                           int64_t max_seqs, int64_t max_tp, model_par *out, model_fit *fit,
                           kvs_err *err)
{
    model_fit f = {0};
    int tried = 0;
    if (max_tp < 1 || max_tp > 1024)
        return kvs_errf(err, KVS_EINVAL, "--tp: largest degree %lld is out of range [1, 1024]",
                        (long long)max_tp);
    for (int64_t tp = 1; tp <= max_tp; tp *= 2) {
        model_par p = {tp, p_in->ep, p_in->cp};
        if (model_check_par(m, &p, NULL))
            continue;
        int rc = model_fit_check_rule(m, g, &p, rule, mem_util, max_batched_tokens, max_seqs,
                                      &f, err);
        if (rc)
            return rc;
        tried = 1;
        if (f.fits) {
            *out = p;
            *fit = f;
            return KVS_OK;
        }
    }
    if (m->experts > 0) {
        for (int64_t gpus = 2; gpus <= max_tp; gpus *= 2) {
            for (int64_t ep = 1; ep <= gpus && ep <= m->experts; ep *= 2) {
                model_par p = {gpus / ep, ep, p_in->cp};
                if (model_check_par(m, &p, NULL))
                    continue;
                int rc = model_fit_check_rule(m, g, &p, rule, mem_util, max_batched_tokens,
                                              max_seqs, &f, err);
                if (rc)
                    return rc;
                tried = 1;
                if (f.fits) {
                    *out = p;
                    *fit = f;
                    return KVS_OK;
                }
            }
        }
    }
    if (!tried)
        return kvs_errf(err, KVS_EINVAL, "--tp: no degree up to %lld suits %s",
                        (long long)max_tp, m->name);
    out->tp = out->ep = 0;
    out->cp = p_in->cp;
    *fit = f;
    return KVS_OK;
}

int model_kv_capacity_par(const model_spec *m, const gpu_spec *g, const model_par *p,
                          double mem_util, int64_t block_size,
                          int64_t max_batched_tokens, int64_t max_seqs,
                          kv_capacity *out, kvs_err *err)
{
    if (p->ep == 1 && p->cp >= 1) {
        int rc = model_check_par(m, p, err);
        if (rc)
            return rc;
        /* ep 1: the weights are model_weight_bytes' */
        return model_kv_capacity(m, g, p->tp, mem_util, block_size, max_batched_tokens,
                                 max_seqs, out, err);
    }
    int rc = model_check_par(m, p, err);
    if (rc)
        return rc;
    model_fit f;
    rc = model_fit_check(m, g, p, mem_util, max_batched_tokens, max_seqs, &f, err);
    if (rc)
        return rc;
    if (block_size < 1 || block_size > 65536)
        return kvs_errf(err, KVS_EINVAL, "--block-size: %lld is out of range [1, 65536]",
                        (long long)block_size);
    if (!f.fits)
        return kvs_errf(err, KVS_EINVAL,
                        "%s needs %.1f GiB of weights + %.1f GiB of activation reserve per "
                        "GPU at tp %lld ep %lld but %s offers %.1f GiB at --gpu-mem-util %g; "
                        "raise --tp or --ep",
                        m->name, (double)f.weight_bytes / GIB_F,
                        (double)f.activation_bytes / GIB_F, (long long)p->tp,
                        (long long)p->ep, g->name, (double)f.usable_bytes / GIB_F, mem_util);
    kv_capacity c = {0};
    c.kv_bytes_per_token = model_kv_bytes_per_token(m, p->tp);
    c.weight_bytes = f.weight_bytes;
    c.activation_bytes = f.activation_bytes;
    c.usable_bytes = f.usable_bytes;
    c.kv_bytes = f.free_bytes;
    c.block_bytes = block_size * c.kv_bytes_per_token;
    c.kv_blocks = c.kv_bytes / c.block_bytes;
    c.kv_tokens = c.kv_blocks * block_size;
    *out = c;
    return KVS_OK;
}
