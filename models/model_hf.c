/* model_hf.c — read a model shape from a Hugging Face config.json.
 *
 * One table of architectures (hf_archs) maps each `architectures[0]` to a
 * family whose rules say which keys give the shape (docs/models.md, "Hugging
 * Face import", lists them with their defaults).  Keys that do not change
 * the shape, KV or weight bytes (rope_theta, eps, activation names,
 * softcapping, token ids, ...) are ignored; a key that changes them is
 * checked: missing where no default exists, zero, negative or of the wrong
 * type is an error "FILE: KEY: what".
 */
#include "model.h"

#include <errno.h>
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_FILE (4 << 20) /* bytes: a config.json is a few KiB */

typedef enum hf_family {
    HF_LLAMA,   /* Llama, Mistral, Mixtral (+ experts) */
    HF_QWEN2,   /* q/k/v biases */
    HF_QWEN3,   /* q/k norms */
    HF_QWEN3_MOE,
    HF_DEEPSEEK, /* V2 and V3: MLA + shared experts */
    HF_GEMMA2,
    HF_GEMMA3,
    HF_OPT,
    HF_GPT_OSS
} hf_family;

typedef struct hf_arch {
    const char *arch;    /* architectures[0] */
    const char *type;    /* model_spec.arch */
    hf_family family;
    int text_config;     /* 1: the shape is under "text_config" */
} hf_arch;

static const hf_arch hf_archs[] = {
    {"LlamaForCausalLM", "llama", HF_LLAMA, 0},
    {"MistralForCausalLM", "mistral", HF_LLAMA, 0},
    {"MixtralForCausalLM", "mixtral", HF_LLAMA, 0},
    {"Qwen2ForCausalLM", "qwen2", HF_QWEN2, 0},
    {"Qwen3ForCausalLM", "qwen3", HF_QWEN3, 0},
    {"Qwen3MoeForCausalLM", "qwen3_moe", HF_QWEN3_MOE, 0},
    {"DeepseekV2ForCausalLM", "deepseek_v2", HF_DEEPSEEK, 0},
    {"DeepseekV3ForCausalLM", "deepseek_v3", HF_DEEPSEEK, 0},
    {"Gemma2ForCausalLM", "gemma2", HF_GEMMA2, 0},
    {"Gemma3ForCausalLM", "gemma3_text", HF_GEMMA3, 0},
    {"Gemma3ForConditionalGeneration", "gemma3", HF_GEMMA3, 1},
    {"OPTForCausalLM", "opt", HF_OPT, 0},
    {"GptOssForCausalLM", "gpt_oss", HF_GPT_OSS, 0},
};

#define N_ARCH (sizeof hf_archs / sizeof hf_archs[0])

/* Where a key is read from, for messages. */
typedef struct hf_ctx {
    const char *file;   /* the config.json read */
    const char *prefix; /* "" or "text_config." */
    json_object *obj;   /* the object holding the shape */
    kvs_err *err;
} hf_ctx;

/* The member `key` of the shape object, NULL when absent or null. */
static json_object *get(const hf_ctx *c, const char *key)
{
    json_object *v = NULL;
    if (!json_object_object_get_ex(c->obj, key, &v) || json_object_is_type(v, json_type_null))
        return NULL;
    return v;
}

/* Read integer `key` into *out: absent -> def when def >= 0, else an error;
 * present: an integer (or integral real) in [1, max]. */
static int get_int(const hf_ctx *c, const char *key, int64_t def, int64_t max, int64_t *out)
{
    json_object *v = get(c, key);
    if (!v) {
        if (def >= 0) {
            *out = def;
            return KVS_OK;
        }
        return kvs_errf(c->err, KVS_EINVAL, "%s: %s%s: missing", c->file, c->prefix, key);
    }
    double d;
    if (json_object_is_type(v, json_type_int))
        d = (double)json_object_get_int64(v);
    else if (json_object_is_type(v, json_type_double))
        d = json_object_get_double(v);
    else
        return kvs_errf(c->err, KVS_EINVAL, "%s: %s%s: not a number", c->file, c->prefix, key);
    if (!(d == floor(d)))
        return kvs_errf(c->err, KVS_EINVAL, "%s: %s%s: %g is not an integer", c->file,
                        c->prefix, key, d);
    if (d < 1)
        return kvs_errf(c->err, KVS_EINVAL, "%s: %s%s: %g must be positive", c->file,
                        c->prefix, key, d);
    if (d > (double)max)
        return kvs_errf(c->err, KVS_EINVAL, "%s: %s%s: %g exceeds %lld", c->file, c->prefix,
                        key, d, (long long)max);
    *out = (int64_t)d;
    return KVS_OK;
}

/* As get_int, but 0 is allowed (counts such as first_k_dense_replace). */
static int get_count(const hf_ctx *c, const char *key, int64_t def, int64_t max, int64_t *out)
{
    json_object *v = get(c, key);
    if (v && json_object_is_type(v, json_type_int) && json_object_get_int64(v) == 0) {
        *out = 0;
        return KVS_OK;
    }
    return get_int(c, key, def, max, out);
}

/* Boolean `key` (true/false, or 0/1), def when absent. */
static int get_bool(const hf_ctx *c, const char *key, int def, int64_t *out)
{
    json_object *v = get(c, key);
    if (!v) {
        *out = def;
        return KVS_OK;
    }
    if (json_object_is_type(v, json_type_boolean) ||
        (json_object_is_type(v, json_type_int) && (json_object_get_int64(v) == 0 ||
                                                   json_object_get_int64(v) == 1))) {
        *out = json_object_get_boolean(v) ? 1 : 0;
        return KVS_OK;
    }
    return kvs_errf(c->err, KVS_EINVAL, "%s: %s%s: not a boolean", c->file, c->prefix, key);
}

static int get_real(const hf_ctx *c, json_object *o, const char *where, const char *key,
                    double *out)
{
    json_object *v = NULL;
    if (!json_object_object_get_ex(o, key, &v) || json_object_is_type(v, json_type_null))
        return kvs_errf(c->err, KVS_EINVAL, "%s: %s%s.%s: missing", c->file, c->prefix, where,
                        key);
    if (!json_object_is_type(v, json_type_int) && !json_object_is_type(v, json_type_double))
        return kvs_errf(c->err, KVS_EINVAL, "%s: %s%s.%s: not a number", c->file, c->prefix,
                        where, key);
    *out = json_object_get_double(v);
    if (!(*out > 0) || !isfinite(*out))
        return kvs_errf(c->err, KVS_EINVAL, "%s: %s%s.%s: %g must be positive", c->file,
                        c->prefix, where, key, *out);
    return KVS_OK;
}

/* torch_dtype (or dtype, transformers >= 4.56) -> bytes per element. */
static int read_dtype(const hf_ctx *c, json_object *root, int64_t *bytes)
{
    const char *keys[] = {"torch_dtype", "dtype"};
    for (int pass = 0; pass < 2; pass++) {
        json_object *holder = pass ? root : c->obj;
        for (int k = 0; k < 2; k++) {
            json_object *v = NULL;
            if (!json_object_object_get_ex(holder, keys[k], &v) ||
                json_object_is_type(v, json_type_null))
                continue;
            const char *s = json_object_get_string(v);
            if (!json_object_is_type(v, json_type_string))
                return kvs_errf(c->err, KVS_EINVAL, "%s: %s: not a string", c->file, keys[k]);
            /* float32 checkpoints are served in 16 bits, as vLLM's
             * --dtype auto does */
            if (!strcmp(s, "float16") || !strcmp(s, "bfloat16") || !strcmp(s, "float32")) {
                *bytes = 2;
                return KVS_OK;
            }
            return kvs_errf(c->err, KVS_EINVAL,
                            "%s: %s: unknown '%s' (float16, bfloat16, float32)", c->file,
                            keys[k], s);
        }
    }
    *bytes = 2;
    return KVS_OK;
}

/* rope_scaling -> the longest context: max(max_ctx, factor * original). */
static int read_rope(const hf_ctx *c, model_spec *m)
{
    json_object *r = get(c, "rope_scaling");
    if (!r)
        return KVS_OK;
    if (!json_object_is_type(r, json_type_object))
        return kvs_errf(c->err, KVS_EINVAL, "%s: %srope_scaling: not an object", c->file,
                        c->prefix);
    double factor;
    int rc = get_real(c, r, "rope_scaling", "factor", &factor);
    if (rc)
        return rc;
    json_object *o = NULL;
    if (json_object_object_get_ex(r, "original_max_position_embeddings", &o) &&
        !json_object_is_type(o, json_type_null)) {
        double orig;
        rc = get_real(c, r, "rope_scaling", "original_max_position_embeddings", &orig);
        if (rc)
            return rc;
        double longest = floor(factor * orig);
        if (longest > 16777216.0)
            longest = 16777216.0;
        if (longest > (double)m->max_ctx)
            m->max_ctx_scaled = (int64_t)longest;
    }
    return KVS_OK;
}

/* Sliding-window layers: layer_types, else the family's rule. */
static int read_window(const hf_ctx *c, hf_family fam, model_spec *m)
{
    int64_t swa = 0, window = 0;
    json_object *lt = get(c, "layer_types");
    if (lt) {
        if (!json_object_is_type(lt, json_type_array) ||
            (int64_t)json_object_array_length(lt) != m->layers)
            return kvs_errf(c->err, KVS_EINVAL,
                            "%s: %slayer_types: not an array of %lld layer names", c->file,
                            c->prefix, (long long)m->layers);
        for (size_t i = 0; i < json_object_array_length(lt); i++) {
            const char *s = json_object_get_string(json_object_array_get_idx(lt, i));
            if (s && !strcmp(s, "sliding_attention"))
                swa++;
            else if (!s || strcmp(s, "full_attention"))
                return kvs_errf(c->err, KVS_EINVAL,
                                "%s: %slayer_types: entry %zu is not full_attention or "
                                "sliding_attention",
                                c->file, c->prefix, i);
        }
    } else if (fam == HF_GEMMA2) {
        swa = (m->layers + 1) / 2; /* even layers are local */
    } else if (fam == HF_GEMMA3) {
        int64_t pattern;
        int rc = get_int(c, "sliding_window_pattern", 6, 1024, &pattern);
        if (rc)
            return rc;
        swa = m->layers - m->layers / pattern; /* every pattern-th layer is global */
    } else if (fam == HF_QWEN2 || fam == HF_QWEN3 || fam == HF_QWEN3_MOE) {
        int64_t use;
        int rc = get_bool(c, "use_sliding_window", 0, &use);
        if (rc)
            return rc;
        if (use) {
            int64_t first;
            rc = get_count(c, "max_window_layers", m->layers, 1024, &first);
            if (rc)
                return rc;
            swa = first < m->layers ? m->layers - first : 0;
        }
    } else if (fam == HF_LLAMA) {
        swa = get(c, "sliding_window") ? m->layers : 0; /* Mistral: every layer */
    }
    if (swa > 0) {
        int rc = get_int(c, "sliding_window", -1, 16777216, &window);
        if (rc)
            return rc;
        int64_t ctx = m->max_ctx_scaled ? m->max_ctx_scaled : m->max_ctx;
        if (window < ctx) { /* a window as long as the context changes nothing */
            m->window_layers = swa;
            m->window = window;
        }
    }
    return KVS_OK;
}

/* Experts, and how many layers keep a dense MLP. */
static int read_moe(const hf_ctx *c, hf_family fam, model_spec *m)
{
    int rc = KVS_OK;
    const char *ekey = fam == HF_QWEN3_MOE ? "num_experts"
                       : fam == HF_DEEPSEEK ? "n_routed_experts"
                                            : "num_local_experts";
    if (!get(c, ekey))
        return KVS_OK; /* dense */
    if ((rc = get_int(c, ekey, -1, 4096, &m->experts)))
        return rc;
    const char *kkey = fam == HF_GPT_OSS && !get(c, "num_experts_per_tok") ? "experts_per_token"
                                                                            : "num_experts_per_tok";
    if ((rc = get_int(c, kkey, -1, m->experts, &m->experts_per_tok)))
        return rc;
    if (fam == HF_QWEN3_MOE || fam == HF_DEEPSEEK) {
        if ((rc = get_int(c, "moe_intermediate_size", -1, 1048576, &m->moe_intermediate)))
            return rc;
    } else {
        m->moe_intermediate = m->intermediate; /* Mixtral, gpt-oss */
    }
    if (fam == HF_DEEPSEEK) {
        int64_t first, freq;
        if ((rc = get_count(c, "n_shared_experts", 0, 64, &m->shared_experts)) ||
            (rc = get_count(c, "first_k_dense_replace", 0, m->layers, &first)) ||
            (rc = get_int(c, "moe_layer_freq", 1, 1024, &freq)))
            return rc;
        int64_t moe = 0;
        for (int64_t i = first; i < m->layers; i++)
            moe += i % freq == 0;
        m->dense_layers = m->layers - moe;
    } else if (fam == HF_QWEN3_MOE) {
        int64_t step;
        if ((rc = get_int(c, "decoder_sparse_step", 1, 1024, &step)))
            return rc;
        char dense[1024] = {0};
        json_object *only = get(c, "mlp_only_layers");
        if (only) {
            if (!json_object_is_type(only, json_type_array))
                return kvs_errf(c->err, KVS_EINVAL, "%s: %smlp_only_layers: not an array",
                                c->file, c->prefix);
            for (size_t i = 0; i < json_object_array_length(only); i++) {
                json_object *e = json_object_array_get_idx(only, i);
                int64_t idx = json_object_get_int64(e);
                if (!json_object_is_type(e, json_type_int) || idx < 0 || idx >= m->layers)
                    return kvs_errf(c->err, KVS_EINVAL,
                                    "%s: %smlp_only_layers: entry %zu is not a layer index",
                                    c->file, c->prefix, i);
                dense[idx] = 1;
            }
        }
        int64_t moe = 0;
        for (int64_t i = 0; i < m->layers; i++)
            moe += !dense[i] && (i + 1) % step == 0;
        m->dense_layers = m->layers - moe;
    }
    return KVS_OK;
}

static int read_mla(const hf_ctx *c, model_spec *m)
{
    int rc;
    m->attn_type = MODEL_ATTN_MLA;
    if ((rc = get_int(c, "kv_lora_rank", -1, 65536, &m->kv_lora_rank)) ||
        (rc = get_int(c, "qk_rope_head_dim", -1, 1024, &m->qk_rope_head_dim)) ||
        (rc = get_int(c, "qk_nope_head_dim", -1, 1024, &m->qk_nope_head_dim)) ||
        (rc = get_int(c, "v_head_dim", -1, 1024, &m->v_head_dim)) ||
        (rc = get_count(c, "q_lora_rank", 0, 65536, &m->q_lora_rank)))
        return rc;
    m->head_dim = m->qk_nope_head_dim + m->qk_rope_head_dim;
    if (m->head_dim > 1024) /* the bound every head_dim keeps (read_shape) */
        return kvs_errf(c->err, KVS_EINVAL,
                        "%s: %sqk_nope_head_dim + qk_rope_head_dim: %lld exceeds 1024", c->file,
                        c->prefix, (long long)m->head_dim);
    return KVS_OK;
}

static int read_quant(const hf_ctx *c, json_object *root, model_spec *m)
{
    json_object *q = NULL;
    if (!json_object_object_get_ex(root, "quantization_config", &q) ||
        json_object_is_type(q, json_type_null))
        return KVS_OK;
    if (!json_object_is_type(q, json_type_object))
        return kvs_errf(c->err, KVS_EINVAL, "%s: quantization_config: not an object", c->file);
    json_object *mv = NULL;
    if (!json_object_object_get_ex(q, "quant_method", &mv) ||
        !json_object_is_type(mv, json_type_string))
        return kvs_errf(c->err, KVS_EINVAL, "%s: quantization_config.quant_method: missing",
                        c->file);
    const char *method = json_object_get_string(mv);
    hf_ctx qc = {c->file, "quantization_config.", q, c->err};
    int rc;
    if (!strcmp(method, "fp8")) {
        m->weight_dtype = MODEL_DTYPE_FP8;
        m->weight_bits = 8;
        json_object *bs = NULL;
        if (json_object_object_get_ex(q, "weight_block_size", &bs) &&
            !json_object_is_type(bs, json_type_null)) {
            if (!json_object_is_type(bs, json_type_array) || json_object_array_length(bs) != 2)
                return kvs_errf(c->err, KVS_EINVAL,
                                "%s: quantization_config.weight_block_size: not [rows, cols]",
                                c->file);
            int64_t r = json_object_get_int64(json_object_array_get_idx(bs, 0));
            int64_t k = json_object_get_int64(json_object_array_get_idx(bs, 1));
            if (r < 1 || k < 1 || r > 65536 || k > 65536)
                return kvs_errf(c->err, KVS_EINVAL,
                                "%s: quantization_config.weight_block_size: sizes must be "
                                "positive",
                                c->file);
            m->quant_group = r * k; /* one fp32 scale per block */
            m->quant_scale_bits = 32;
        }
        return KVS_OK;
    }
    if (!strcmp(method, "awq") || !strcmp(method, "gptq")) {
        int64_t bits, group = 0;
        const char *bkey = get(&qc, "bits") || strcmp(method, "awq") ? "bits" : "w_bit";
        if ((rc = get_int(&qc, bkey, 4, 8, &bits)))
            return rc;
        if (bits != 4 && !(bits == 8 && !strcmp(method, "gptq")))
            return kvs_errf(c->err, KVS_EINVAL, "%s: quantization_config.%s: %lld bits not "
                            "supported (4; 8 for gptq)", c->file, bkey, (long long)bits);
        const char *gkey = get(&qc, "group_size") || strcmp(method, "awq") ? "group_size"
                                                                          : "q_group_size";
        json_object *gv = get(&qc, gkey);
        if (gv && json_object_is_type(gv, json_type_int) && json_object_get_int64(gv) == -1)
            group = 0; /* per channel: scales negligible */
        else if ((rc = get_int(&qc, gkey, -1, 1 << 20, &group)))
            return rc;
        m->weight_dtype = bits == 4 ? MODEL_DTYPE_INT4 : MODEL_DTYPE_INT8;
        m->weight_bits = bits;
        m->quant_group = group;
        m->quant_scale_bits = group ? 16 + bits : 0; /* fp16 scale + packed zero */
        return KVS_OK;
    }
    if (!strcmp(method, "mxfp4")) {
        m->weight_dtype = MODEL_DTYPE_FP4;
        m->weight_bits = 4;
        m->quant_group = 32;     /* OCP MX: 32 elements per block */
        m->quant_scale_bits = 8; /* E8M0 scale */
        m->quant_experts_only = m->experts > 0; /* gpt-oss keeps attention in bf16 */
        return KVS_OK;
    }
    return kvs_errf(c->err, KVS_EINVAL,
                    "%s: quantization_config.quant_method: unknown method '%s' (known: fp8, "
                    "awq, gptq, mxfp4)",
                    c->file, method);
}

/* What the family adds to the common shape: biases, norms, MLA (DeepSeek),
 * OPT's plain MLP and learned positions.  Errors name the file and key. */
static int read_family(const hf_ctx *c, hf_family fam, model_spec *m)
{
    int rc;
    switch (fam) {
    case HF_LLAMA:
        if ((rc = get_bool(c, "attention_bias", 0, &m->attn_bias)) ||
            (rc = get_bool(c, "mlp_bias", 0, &m->mlp_bias)))
            return rc;
        break;
    case HF_QWEN2:
        m->attn_bias = 1;
        break;
    case HF_QWEN3:
    case HF_QWEN3_MOE:
        m->qk_norm = 1;
        if ((rc = get_bool(c, "attention_bias", 0, &m->attn_bias)))
            return rc;
        break;
    case HF_DEEPSEEK:
        if ((rc = read_mla(c, m)))
            return rc;
        break;
    case HF_GEMMA2:
        m->norms_per_layer = 4;
        break;
    case HF_GEMMA3:
        m->norms_per_layer = 4;
        m->qk_norm = 1;
        break;
    case HF_OPT: {
        int64_t proj;
        if ((rc = get_int(c, "word_embed_proj_dim", m->hidden, 65536, &proj)))
            return rc;
        if (proj != m->hidden)
            return kvs_errf(c->err, KVS_EINVAL,
                            "%s: word_embed_proj_dim: %lld differs from hidden_size %lld "
                            "(projected embeddings are not modelled)",
                            c->file, (long long)proj, (long long)m->hidden);
        m->mlp_plain = 1;
        m->layernorm = 1;
        m->pos_embed = m->max_ctx + 2; /* OPT's learned positions start at offset 2 */
        if ((rc = get_bool(c, "enable_bias", 1, &m->attn_bias)))
            return rc;
        m->mlp_bias = m->attn_bias;
        break;
    }
    case HF_GPT_OSS:
        if ((rc = get_bool(c, "attention_bias", 1, &m->attn_bias)))
            return rc;
        m->mlp_bias = 1;
        break;
    }
    return KVS_OK;
}

static int read_shape(const hf_ctx *c, json_object *root, const hf_arch *a, model_spec *m)
{
    int rc;
    const hf_family fam = a->family;
    const int opt = fam == HF_OPT;
    snprintf(m->arch, sizeof m->arch, "%s", a->type);
    if ((rc = get_int(c, "hidden_size", -1, 65536, &m->hidden)) ||
        (rc = get_int(c, "num_hidden_layers", -1, 1024, &m->layers)) ||
        (rc = get_int(c, "num_attention_heads", -1, 1024, &m->heads)) ||
        (rc = get_int(c, "num_key_value_heads", m->heads, 1024, &m->kv_heads)) ||
        (rc = get_int(c, opt ? "ffn_dim" : "intermediate_size", -1, 1048576,
                      &m->intermediate)) ||
        (rc = get_int(c, "vocab_size", -1, 4194304, &m->vocab)) ||
        (rc = get_int(c, "max_position_embeddings", -1, 16777216, &m->max_ctx)))
        return rc;
    if (m->kv_heads > m->heads || m->heads % m->kv_heads)
        return kvs_errf(c->err, KVS_EINVAL,
                        "%s: %snum_key_value_heads: %lld does not divide num_attention_heads %lld",
                        c->file, c->prefix, (long long)m->kv_heads, (long long)m->heads);
    if (get(c, "head_dim")) {
        if ((rc = get_int(c, "head_dim", -1, 1024, &m->head_dim)))
            return rc;
    } else {
        if (m->hidden % m->heads)
            return kvs_errf(c->err, KVS_EINVAL,
                            "%s: %shead_dim: missing, and num_attention_heads %lld does not "
                            "divide hidden_size %lld",
                            c->file, c->prefix, (long long)m->heads, (long long)m->hidden);
        m->head_dim = m->hidden / m->heads;
        if (m->head_dim > 1024)
            return kvs_errf(c->err, KVS_EINVAL, "%s: %shead_dim: %lld exceeds 1024", c->file,
                            c->prefix, (long long)m->head_dim);
    }
    if ((rc = read_dtype(c, root, &m->dtype_bytes)))
        return rc;
    int tied_default = fam == HF_GEMMA2 || fam == HF_GEMMA3 || opt;
    json_object *tv = NULL;
    /* Gemma-3 keeps tie_word_embeddings at the top level, the rest nested */
    hf_ctx top = *c;
    top.prefix = "";
    top.obj = root;
    const hf_ctx *tc = get(c, "tie_word_embeddings") || !json_object_object_get_ex(
                                                            root, "tie_word_embeddings", &tv)
                           ? c
                           : &top;
    if ((rc = get_bool(tc, "tie_word_embeddings", tied_default, &m->tied_embeddings)))
        return rc;
    if ((rc = read_family(c, fam, m)))
        return rc;
    if ((rc = read_rope(c, m)) || (rc = read_window(c, fam, m)))
        return rc;
    if (fam == HF_LLAMA || fam == HF_QWEN3_MOE || fam == HF_DEEPSEEK || fam == HF_GPT_OSS)
        if ((rc = read_moe(c, fam, m)))
            return rc;
    if (fam == HF_GPT_OSS && !m->experts)
        return kvs_errf(c->err, KVS_EINVAL, "%s: num_local_experts: missing", c->file);
    return read_quant(c, root, m);
}

/* The model's name: the folder holding config.json, else the file's base
 * name without ".json". */
static void hf_name(const char *file, char *name, size_t n)
{
    const char *end = file + strlen(file);
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    if (!strcmp(base, "config.json") && base > file + 1) {
        end = base - 1;
        const char *b = end;
        while (b > file && b[-1] != '/')
            b--;
        base = b;
    } else if (end - base > 5 && !strcmp(end - 5, ".json")) {
        end -= 5;
    }
    size_t len = (size_t)(end - base);
    if (len >= n)
        len = n - 1;
    memcpy(name, base, len);
    name[len] = 0;
}

static int read_file(const char *file, char **text, kvs_err *err)
{
    FILE *f = fopen(file, "rb");
    if (!f)
        return kvs_errf(err, KVS_EIO, "--model: cannot open '%s': %s", file, strerror(errno));
    char *buf = malloc(MAX_FILE + 1);
    if (!buf) {
        fclose(f);
        return kvs_errf(err, KVS_ENOMEM, "%s: out of memory", file);
    }
    size_t n = fread(buf, 1, MAX_FILE + 1, f);
    int bad = ferror(f);
    fclose(f);
    if (bad || n > MAX_FILE) {
        free(buf);
        return kvs_errf(err, bad ? KVS_EIO : KVS_EINVAL, "%s: %s", file,
                        bad ? "read error" : "larger than 4 MiB: not a config.json");
    }
    buf[n] = 0;
    if (memchr(buf, 0, n)) {
        free(buf);
        return kvs_errf(err, KVS_EINVAL, "%s: not valid JSON (NUL byte)", file);
    }
    *text = buf;
    return KVS_OK;
}

int model_hf_read(const char *path, model_spec *out, kvs_err *err)
{
    char file[4096];
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        size_t n = strlen(path);
        snprintf(file, sizeof file, "%s%sconfig.json", path, n && path[n - 1] == '/' ? "" : "/");
    } else {
        snprintf(file, sizeof file, "%s", path);
    }
    char *text = NULL;
    int rc = read_file(file, &text, err);
    if (rc)
        return rc;
    json_tokener *tok = json_tokener_new();
    json_object *root = tok ? json_tokener_parse_ex(tok, text, (int)strlen(text)) : NULL;
    if (!tok) {
        free(text);
        return kvs_errf(err, KVS_ENOMEM, "%s: out of memory", file);
    }
    enum json_tokener_error jerr = json_tokener_get_error(tok);
    size_t used = (size_t)tok->char_offset;
    json_tokener_free(tok);
    if (root && jerr == json_tokener_success)
        while (text[used] == ' ' || text[used] == '\n' || text[used] == '\r' ||
               text[used] == '\t')
            used++;
    int trailing = root && text[used] != 0;
    free(text);
    if (!root || jerr != json_tokener_success || trailing) {
        json_object_put(root);
        return kvs_errf(err, KVS_EINVAL, "%s: not valid JSON (%s)", file,
                        !root || jerr != json_tokener_success
                            ? (jerr == json_tokener_continue ? "unexpected end of file"
                                                             : json_tokener_error_desc(jerr))
                            : "text after the top-level value");
    }
    if (!json_object_is_type(root, json_type_object)) {
        json_object_put(root);
        return kvs_errf(err, KVS_EINVAL, "%s: not valid JSON (the top level is not an object)",
                        file);
    }
    model_spec m;
    memset(&m, 0, sizeof m);
    json_object *archs = NULL, *a0 = NULL;
    const hf_arch *a = NULL;
    if (!json_object_object_get_ex(root, "architectures", &archs) ||
        !json_object_is_type(archs, json_type_array) || json_object_array_length(archs) < 1 ||
        !json_object_is_type((a0 = json_object_array_get_idx(archs, 0)), json_type_string)) {
        rc = kvs_errf(err, KVS_EINVAL, "%s: architectures: missing (a list of one class name)",
                      file);
        goto done;
    }
    for (size_t i = 0; i < N_ARCH && !a; i++)
        if (!strcmp(json_object_get_string(a0), hf_archs[i].arch))
            a = &hf_archs[i];
    if (!a) {
        char known[1024] = "";
        size_t len = 0;
        for (size_t i = 0; i < N_ARCH && len < sizeof known; i++)
            len += (size_t)snprintf(known + len, sizeof known - len, "%s%s", i ? ", " : "",
                                    hf_archs[i].arch);
        rc = kvs_errf(err, KVS_EINVAL, "%s: architectures: unknown architecture '%s' (known: %s)",
                      file, json_object_get_string(a0), known);
        goto done;
    }
    hf_ctx c = {file, "", root, err};
    if (a->text_config) {
        json_object *tc = NULL;
        if (!json_object_object_get_ex(root, "text_config", &tc) ||
            !json_object_is_type(tc, json_type_object)) {
            rc = kvs_errf(err, KVS_EINVAL, "%s: text_config: missing", file);
            goto done;
        }
        c.obj = tc;
        c.prefix = "text_config.";
    }
    rc = read_shape(&c, root, a, &m);
    if (rc)
        goto done;
    hf_name(file, m.name, sizeof m.name);
    *out = m;
done:
    json_object_put(root);
    return rc;
}
