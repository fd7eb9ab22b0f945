/* model.h — model shapes, GPU datasheet figures, and the arithmetic on them:
 * parameter and weight bytes, KV bytes per token, KV capacity in blocks,
 * FLOPs and bytes of each operation of a decoder layer.  Beside the LLaMA
 * shapes it knows (since 2026) Hugging Face config.json imports, separate
 * weight and KV-cache precisions with quantization overheads, mixtures of
 * experts, DeepSeek's MLA, sliding-window layers, OPT's LayerNorm and plain
 * MLP, expert and context parallelism, and GPU peaks per precision
 * (docs/models.md gives every rule, formula and figure source).
 *
 * Pure data and arithmetic: no I/O except model_lookup and gpu_lookup
 * reading a config file when given a path or a shipped alias.  Every size
 * is int64_t bytes or tokens.
 *
 * Conventions (docs/cost-models.md explains each rule and its source):
 * - Tensor parallelism (tp) shards query heads, the MLP inner width and the
 *   vocabulary over tp GPUs, Megatron style.  KV heads are sharded when
 *   tp <= kv_heads and replicated (one per GPU) when tp > kv_heads, which
 *   needs tp % kv_heads == 0 (vLLM's rule for GQA/MQA).
 * - Weights per GPU count the RMSNorm vectors and the replicated KV
 *   projections in full on every GPU; everything else is split, rounded up.
 * - Every function taking tp expects it to have passed model_check_tp.
 */
#ifndef MODEL_H
#define MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "../base/kvs.h"

typedef struct model_spec {
    char name[256];       /* "llama-7b", or the config file's name= */
    int64_t hidden;       /* d_model */
    int64_t layers;       /* decoder layers */
    int64_t heads;        /* query heads */
    int64_t kv_heads;     /* KV heads: == heads (MHA), < heads (GQA), 1 (MQA) */
    int64_t head_dim;     /* per head */
    int64_t intermediate; /* SwiGLU inner width */
    int64_t vocab;        /* tokens */
    int64_t max_ctx;      /* context length of the released config, tokens */
    int64_t dtype_bytes;  /* bytes per element of activations, and of weights
                             and KV unless weight_bits/kv_bits say otherwise
                             (2 = fp16/bf16, the checkpoint's torch_dtype) */
    /* ---- Added for 2026's models.  Every field below is 0 for the LLaMA
     * shapes above and 0 means the LLaMA behaviour named in its comment, so
     * a zeroed tail keeps every figure of the original fields unchanged. */
    char arch[32];             /* config model_type ("llama", "qwen3_moe", ...);
                                  "" = llama */
    int64_t weight_dtype;      /* model_dtype of the quantized linear weights;
                                  0 = MODEL_DTYPE_AUTO: as dtype_bytes */
    int64_t weight_bits;       /* bits per quantized weight element, scales
                                  excluded (16, 8, 4); 0 = 8*dtype_bytes */
    int64_t quant_group;       /* weight elements sharing one scale (AWQ/GPTQ
                                  group_size, 16384 for 128x128 FP8 blocks,
                                  32 for MXFP4); 0 = no per-group scales */
    int64_t quant_scale_bits;  /* bits stored per group: scale + zero point
                                  (AWQ/GPTQ 16+4 = 20, FP8 block 32, MXFP4 8) */
    int64_t quant_experts_only;/* 1: only the MoE experts are quantized (gpt-oss
                                  MXFP4); 0 = every linear layer but the
                                  embedding, LM head and router */
    int64_t kv_dtype;          /* model_dtype of the KV cache; 0 = AUTO */
    int64_t kv_bits;           /* bits per KV element (16, 8); 0 = 8*dtype_bytes */
    int64_t tied_embeddings;   /* 1: the LM head is the embedding matrix */
    int64_t mlp_plain;         /* 1: non-gated MLP up/act/down (OPT); 0 = gated
                                  gate/up/down (SwiGLU, GeGLU) */
    int64_t layernorm;         /* 1: LayerNorm, weight + bias (OPT); 0 = RMSNorm */
    int64_t norms_per_layer;   /* norm vectors per layer (Gemma-2/3: 4); 0 = 2 */
    int64_t qk_norm;           /* 1: per-head RMSNorm of q and k (Qwen3, Gemma-3),
                                  2*head_dim params per layer */
    int64_t attn_bias;         /* 1: q, k, v, o projections carry biases */
    int64_t mlp_bias;          /* 1: MLP, expert and router projections carry biases */
    int64_t pos_embed;         /* rows of a learned position embedding (OPT:
                                  max_ctx + 2); 0 = rotary, no parameters */
    int64_t attn_type;         /* model_attn: 0 = MODEL_ATTN_GQA (MHA/GQA/MQA by
                                  kv_heads), 1 = MODEL_ATTN_MLA */
    int64_t experts;           /* routed experts per MoE layer; 0 = dense model */
    int64_t experts_per_tok;   /* routed experts each token uses (top-k) */
    int64_t shared_experts;    /* always-used experts of width moe_intermediate */
    int64_t moe_intermediate;  /* inner width of one expert */
    int64_t dense_layers;      /* layers with a dense MLP of width intermediate
                                  when experts > 0 (first_k_dense_replace,
                                  mlp_only_layers); MoE layers = layers - this */
    int64_t kv_lora_rank;      /* MLA: compressed KV width per token and layer */
    int64_t q_lora_rank;       /* MLA: compressed query width; 0 = no q LoRA */
    int64_t qk_rope_head_dim;  /* MLA: rotary part of q/k per head, also cached */
    int64_t qk_nope_head_dim;  /* MLA: non-rotary part of q/k per head */
    int64_t v_head_dim;        /* MLA: value width per head */
    int64_t window_layers;     /* layers attending to at most `window` tokens */
    int64_t window;            /* sliding window, tokens; 0 when window_layers 0 */
    int64_t max_ctx_scaled;    /* longest context rope scaling allows, tokens
                                  (>= max_ctx); 0 = max_ctx */
} model_spec;

/* Element types of weights and KV.  model_dtype_bits gives storage bits. */
typedef enum model_dtype {
    MODEL_DTYPE_AUTO = 0, /* follow dtype_bytes (2: fp16, 4: fp32, 1: fp8) */
    MODEL_DTYPE_FP32,
    MODEL_DTYPE_FP16,
    MODEL_DTYPE_BF16,
    MODEL_DTYPE_FP8,      /* e4m3 / e5m2 */
    MODEL_DTYPE_INT8,
    MODEL_DTYPE_INT4,     /* AWQ / GPTQ, weight-only */
    MODEL_DTYPE_FP4,      /* MXFP4 / NVFP4 */
    MODEL_DTYPE_COUNT
} model_dtype;

typedef enum model_attn {
    MODEL_ATTN_GQA = 0, /* K and V per KV head: MHA, GQA, MQA */
    MODEL_ATTN_MLA = 1  /* DeepSeek multi-head latent attention */
} model_attn;

typedef struct gpu_spec {
    char name[32];
    int64_t mem_bytes;     /* HBM capacity, bytes */
    double hbm_Bps;        /* peak HBM bandwidth, bytes/s */
    double fp16_flops;     /* peak dense FP16/BF16 tensor FLOP/s */
    double host_link_Bps;  /* host link (PCIe) per direction, bytes/s */
    double nvlink_Bps;     /* NVLink per GPU per direction, bytes/s (the
                              GPU-to-GPU link: Infinity Fabric on AMD, PCIe
                              on parts without NVLink) */
    /* ---- Added in 2026: dense (no 2:4 sparsity) tensor peaks per precision,
     * FLOP/s (OP/s for INT8); 0 = the GPU has no such units. */
    double bf16_flops;     /* BF16 */
    double fp8_flops;      /* FP8 (Hopper, Ada, Blackwell, CDNA3) */
    double int8_ops;       /* INT8 */
    double fp4_flops;      /* FP4 (Blackwell) */
    int64_t mem_runtime_bytes; /* total the runtime reports (nvidia-smi /
                                  torch.cuda.mem_get_info, rocm-smi), bytes;
                                  0 = not recorded, take mem_bytes */
} gpu_spec;

/* Find a model:
 * - a built-in by name (llama-7b, ..., model_builtin_at);
 * - a shipped Hugging Face config by alias ("llama-3.1-8b", "deepseek-v3":
 *   model_alias_at), read from models/hf/ORG/NAME/config.json in the working
 *   directory or under KVSIM_SOURCE_DIR;
 * - a Hugging Face config.json when `name` ends in ".json" or is a directory
 *   holding config.json (model_hf_read);
 * - otherwise, when `name` contains '/' or ends in ".conf", a key=value
 *   config file (model_conf_read: name, hidden, layers, heads, kv_heads,
 *   head_dim, intermediate, vocab, max_ctx, dtype_bytes; '#' comments).
 * Unknown names list the known ones in err.  Cost: one file read at most. */
int model_lookup(const char *name, model_spec *out, kvs_err *err);

/* model_lookup for a name read back from a database (runs.model), which
 * whoever can write the database chooses: a built-in or alias name, or a
 * path only when it has the shape of a model config (ends in ".conf" or
 * ".json", or names a directory), as a run's --model that was a path has.
 * Any other name is never opened: KVS_EINVAL "model 'X' is not a built-in
 * model name ...".  A stored path that does not read as a model is
 * refused without quoting the file's contents.  Cost: O(models), or one
 * config read. */
int model_lookup_name(const char *name, model_spec *out, kvs_err *err);
/* Find a built-in GPU by name, or read a GPU file (gpu_file_read) when
 * `name` contains '/' or ends in ".gpu". */
int gpu_lookup(const char *name, gpu_spec *out, kvs_err *err);

/* Read a Hugging Face config.json (or the config.json of a directory) into
 * *out: architectures LlamaForCausalLM, MistralForCausalLM,
 * Qwen2ForCausalLM, Qwen3ForCausalLM, MixtralForCausalLM,
 * Qwen3MoeForCausalLM, DeepseekV2ForCausalLM, DeepseekV3ForCausalLM,
 * Gemma2ForCausalLM, Gemma3ForCausalLM, Gemma3ForConditionalGeneration
 * (its text_config), OPTForCausalLM, GptOssForCausalLM.  docs/models.md
 * lists the fields read, their defaults and the quantization methods (fp8,
 * block fp8, awq, gptq, mxfp4).  A missing, zero or negative field that
 * changes the shape, an unknown architecture or quantization method is
 * KVS_EINVAL "FILE: FIELD: what"; a file that is not JSON is "FILE: not
 * valid JSON (...)"; fields that do not change the shape are ignored.  The
 * name is the directory holding config.json (or the file's base name).
 * Cost: one parse of the file. */
int model_hf_read(const char *path, model_spec *out, kvs_err *err);

/* The shipped Hugging Face configs: alias i ("llama-3.1-8b") and its hub
 * path ("meta-llama/Llama-3.1-8B", the folder under models/hf/).  NULL past
 * the end.  Cost: O(1). */
size_t model_alias_count(void);
const char *model_alias_at(size_t i, const char **hub_path);
/* Resolve an alias or hub path ("qwen3-8b", "Qwen/Qwen3-8B") to the
 * config.json path in buf (the working directory's models/hf/ first, then
 * KVSIM_SOURCE_DIR's).  KVS_EINVAL when name is neither; KVS_EIO when the
 * file is in neither place. */
int model_alias_path(const char *name, char *buf, size_t n, kvs_err *err);

/* Read a GPU file: key = value lines, '#' comments; keys name (optional,
 * default the file's base name), mem_bytes, hbm_Bps, fp16_flops,
 * bf16_flops, fp8_flops, int8_ops, fp4_flops, host_link_Bps, nvlink_Bps
 * (all required; the peaks of precisions the GPU lacks are 0) and
 * mem_runtime_bytes (optional).  Errors: "FILE: missing key 'K'",
 * "FILE:LINE: K: ...".  Cost: one pass. */
int gpu_file_read(const char *path, gpu_spec *out, kvs_err *err);
/* Dense tensor peak of GPU g for GEMMs whose weights are dt: FP8 and INT8
 * use their units when g has them, FP4 its units, else (weight-only
 * dequantization, as Marlin kernels do) the FP16/BF16 peak; FP32, FP16, BF16
 * and AUTO the fp16_flops figure.  Cost: O(1). */
double gpu_peak_flops(const gpu_spec *g, model_dtype dt);

/* Parse a model config file (the format above).  Every numeric key is
 * required and must be a positive integer no larger than its bound (hidden
 * 65536, layers 1024, heads 1024, kv_heads 1024, head_dim 1024, intermediate
 * 1048576, vocab 4194304, max_ctx 16777216; dtype_bytes 1, 2 or 4), which
 * keeps every product in this module far inside int64_t; `name` is optional
 * (default: the file's base name without ".conf"); kv_heads must divide
 * heads (hidden == heads*head_dim is not required); a repeated or unknown
 * key is an error.  Errors read "PATH:LINE: ...".  Cost: one pass. */
int model_conf_read(const char *path, model_spec *out, kvs_err *err);

size_t model_builtin_count(void);
const model_spec *model_builtin_at(size_t i);
/* A short note on built-in i ("" if none), e.g. that it is hypothetical. */
const char *model_builtin_note(size_t i);
size_t gpu_builtin_count(void);
const gpu_spec *gpu_builtin_at(size_t i);
/* The built-in GPU whose family (its name before '-', e.g. "h100") appears
 * in a device name such as "NVIDIA H100 80GB HBM3" (case-insensitive),
 * nearest to mem_bytes in memory; NULL if none.  Cost: O(built-ins). */
const gpu_spec *gpu_builtin_guess(const char *device_name, int64_t mem_bytes);

/* Validate tp against the model: 1 <= tp <= 1024, heads % tp == 0,
 * intermediate % tp == 0 (the MLP is split by columns), and
 * kv_heads % tp == 0 or tp % kv_heads == 0 (KV heads replicated). */
int model_check_tp(const model_spec *m, int64_t tp, kvs_err *err);

/* floor(mem_bytes * util) with util rounded to a millionth, computed in
 * integers so that e.g. 80 GiB * 0.9 is exact.  util in (0, 1]. */
int64_t gpu_usable_bytes(int64_t mem_bytes, double util);

int64_t model_param_count(const model_spec *m);
/* Weight bytes held by one GPU under tensor parallelism tp
 * (model_weight_bytes_par with ep = cp = 1). */
int64_t model_weight_bytes(const model_spec *m, int64_t tp);
/* KV heads stored per GPU: kv_heads / tp, or 1 when tp > kv_heads. */
int64_t model_kv_heads_per_gpu(const model_spec *m, int64_t tp);
/* 2 * layers * kv_heads_per_gpu * head_dim * dtype_bytes (for the
 * added attention types and KV dtypes see "2026" below). */
int64_t model_kv_bytes_per_token(const model_spec *m, int64_t tp);
/* Bytes set aside for activations and logits of a full step, per GPU:
 *   max_batched_tokens * (4*hidden + 3*ceil(intermediate/tp)) * dtype_bytes
 *   + max_seqs * vocab * 4
 * (residual, normed input, attention output and layer output of every token;
 * the MLP's gate|up output and its SiLU product; fp32 logits of the last
 * token of every sequence, gathered at full vocabulary).  Saturates at
 * INT64_MAX instead of overflowing. */
int64_t model_activation_reserve(const model_spec *m, int64_t tp,
                                 int64_t max_batched_tokens, int64_t max_seqs);

typedef struct kv_capacity {
    int64_t kv_bytes_per_token;  /* per GPU */
    int64_t weight_bytes;        /* per GPU */
    int64_t activation_bytes;    /* per GPU reserve */
    int64_t usable_bytes;        /* gpu_mem * util, per GPU (engine rules: see model_kv_rule) */
    int64_t nontorch_bytes;      /* per GPU outside the engine's tensors (engine rules; else 0) */
    int64_t kv_bytes;            /* usable - weights - activations, >= 0 */
    int64_t block_bytes;         /* block_size * kv_bytes_per_token */
    int64_t kv_blocks;           /* floor(kv_bytes / block_bytes) */
    int64_t kv_tokens;           /* kv_blocks * block_size */
} kv_capacity;

/* KV capacity per the semantics: floor((mem*util - weights - activations) /
 * (block_size * kv_bytes_per_token)), mem*util by gpu_usable_bytes.  Fails
 * (KVS_EINVAL) on a bad tp, mem_util outside (0, 1], block_size outside
 * [1, 65536], and when weights + activations exceed mem*util, naming the
 * shortfall and the flag to change.  A remainder smaller than one block gives
 * kv_blocks == 0 and KVS_OK: callers decide whether that is usable. */
int model_kv_capacity(const model_spec *m, const gpu_spec *g, int64_t tp,
                      double mem_util, int64_t block_size,
                      int64_t max_batched_tokens, int64_t max_seqs,
                      kv_capacity *out, kvs_err *err);

/* ------------------------------------------- 2026: dtypes, MoE, MLA, windows
 * The functions below generalise the ones above to the fields added in
 * 2026; on a model whose added fields are all 0 they give exactly the
 * figures of the functions above (tests/test_hf.c checks it). */

/* Storage bits of one element of dt (AUTO: 0, the caller applies
 * dtype_bytes); "fp16", "bf16", "fp8", ... ("auto", "?").  model_dtype_parse
 * accepts those names and "float16", "bfloat16", "float32", "int4", "mxfp4"
 * (-1 when unknown).  Cost: O(1). */
int64_t model_dtype_bits(model_dtype dt);
const char *model_dtype_name(model_dtype dt);
int model_dtype_parse(const char *s);
/* The weight and KV element types as used: AUTO resolved from dtype_bytes
 * (1 fp8, 2 fp16, 4 fp32).  Cost: O(1). */
model_dtype model_weight_dtype(const model_spec *m);
model_dtype model_kv_dtype(const model_spec *m);
/* Set the KV-cache element type (fp32, fp16, bf16, fp8; --kv-cache-dtype)
 * or the weight type (any; --dtype: fp16/bf16/fp32 also set dtype_bytes,
 * fp8/int8 weight-only per-channel scales, int4 AWQ-style groups of 128
 * with 16-bit scales and 4-bit zeros).  KVS_EINVAL on a type the role
 * cannot take.  Cost: O(1). */
int model_set_kv_dtype(model_spec *m, model_dtype dt, kvs_err *err);
int model_set_weight_dtype(model_spec *m, model_dtype dt, kvs_err *err);

/* "mha", "gqa", "mqa" or "mla". */
const char *model_attn_kind(const model_spec *m);
/* Layers with experts (0 for a dense model) and with a dense MLP. */
int64_t model_moe_layers(const model_spec *m);
int64_t model_dense_mlp_layers(const model_spec *m);

/* Parameters: every weight of the checkpoint's language model (embedding,
 * LM head unless tied, learned positions, attention, MLPs, all experts,
 * routers, norms, biases; no MTP or vision modules).  Active: the same less
 * the routed experts a token does not use, (experts - experts_per_tok) per
 * MoE layer; equal to total for a dense model.  model_param_count is
 * model_params_total.  Cost: O(1). */
int64_t model_params_total(const model_spec *m);
int64_t model_params_active(const model_spec *m);

/* How a model is spread over GPUs.  tp: tensor parallel degree (heads, MLP
 * columns, vocabulary, each expert's width).  ep: expert parallel degree;
 * the tp x ep GPUs run ep data-parallel copies of attention and the dense
 * layers, and split the routed experts, ceil(experts/ep) per tp group, each
 * sharded over tp (ep = 1: every tp GPU holds a 1/tp slice of every
 * expert).  cp: context parallel degree; cp groups of tp GPUs each hold
 * ceil(context/cp) tokens of every request's KV, the weights replicated.
 * GPUs in all: tp * ep * cp. */
typedef struct model_par {
    int64_t tp; /* >= 1, passes model_check_tp */
    int64_t ep; /* >= 1; > 1 only for MoE models, <= experts */
    int64_t cp; /* >= 1 */
} model_par;

/* model_check_tp, and 1 <= ep <= experts (ep 1 for a dense model),
 * moe_intermediate % tp == 0, 1 <= cp <= 1024. */
int model_check_par(const model_spec *m, const model_par *p, kvs_err *err);

/* Weight bytes one GPU holds under p (model_weight_bytes is p = {tp,1,1}).
 * Unquantized parameters (embedding, LM head, norms, routers, biases and,
 * with quant_experts_only, all but the experts) cost dtype_bytes each;
 * quantized ones weight_bits each plus quant_scale_bits per quant_group of
 * them, rounded up to whole bytes.  Split over tp as model_weight_bytes
 * says; MLA's q_a/kv_a projections and the routers are replicated.
 * Cost: O(1). */
int64_t model_weight_bytes_par(const model_spec *m, const model_par *p);
/* Bytes per element of the quantized weights, scales included:
 * weight_bits/8 + quant_scale_bits/(8*quant_group) (e.g. AWQ int4 g128:
 * 0.5 + 20/1024 = 0.51953125; fp16: 2).  Cost: O(1). */
double model_weight_elem_bytes(const model_spec *m);

/* model_kv_bytes_per_token (above) reads attn_type and kv_bits: it is the
 * KV bytes per token per GPU summed over every layer (what a token costs
 * while all layers still hold it):
 *   GQA/MHA/MQA: 2 * layers * kv_heads_per_gpu * head_dim * kv_bits/8
 *   MLA:         layers * (kv_lora_rank + qk_rope_head_dim) * kv_bits/8,
 *                whole on every TP rank (vLLM keeps the latent unsplit).
 * kv_bits 0 is 8*dtype_bytes, the formula documented above. */

/* KV accounting per layer group, as vLLM's hybrid allocator keeps it:
 * full-attention layers hold every token of the context; sliding-window
 * layers at most `window` tokens (the last ones) per request. */
typedef struct model_kv_groups {
    int64_t full_layers;          /* layers holding the whole context */
    int64_t full_bytes_per_token; /* their KV bytes per token per GPU */
    int64_t window_layers;        /* layers holding at most window tokens */
    int64_t window_bytes_per_token; /* their KV bytes per token per GPU */
    int64_t window;               /* tokens a window layer keeps; 0 if none */
} model_kv_groups;
/* Fill *g for the model under tensor parallelism tp.  full + window bytes
 * per token == model_kv_bytes_per_token.  Cost: O(1). */
void model_kv_layer_groups(const model_spec *m, int64_t tp, model_kv_groups *g);
/* vLLM V1's KV cache groups (kv_cache_utils.py, the uniform-page-size
 * case): layers of one kind form groups of L = the smallest kind's layer
 * count (the last group of a kind padded to L), every group's page is
 * block_size tokens of L layers, and all groups draw pages from one pool.
 * Without windows: one group of every layer (page = today's block). */
typedef struct model_kv_pages {
    int64_t group_layers;         /* L: layers per group */
    int64_t full_groups;          /* ceil(full_layers / L) */
    int64_t window_groups;        /* ceil(window_layers / L), 0 without windows */
    int64_t page_bytes_per_token; /* L layers' KV bytes per token per GPU */
    int64_t window;               /* tokens a window group keeps, 0 if none */
} model_kv_pages;
/* Fill *pg for the model under tensor parallelism tp.  Cost: O(1). */
void model_kv_page_groups(const model_spec *m, int64_t tp, model_kv_pages *pg);
/* KV bytes one GPU holds for one request of ctx tokens under p:
 *   full_bytes_per_token * ceil(ctx/cp)
 *   + window_bytes_per_token * ceil(min(ctx, window)/cp).
 * Saturates at INT64_MAX.  Cost: O(1). */
int64_t model_kv_request_bytes(const model_spec *m, const model_par *p, int64_t ctx);

/* Paged KV bytes one GPU holds for a request of ctx tokens: each layer group
 * pages its own blocks of block_size tokens (vLLM's hybrid allocator):
 *   full_bytes_per_token * block_size * ceil(ceil(ctx/cp) / block_size)
 *   + window_bytes_per_token * block_size
 *     * ceil(ceil(min(ctx, window)/cp) / block_size).
 * block_size >= 1.  Saturates at INT64_MAX.  Cost: O(1). */
int64_t model_kv_request_block_bytes(const model_spec *m, const model_par *p, int64_t ctx,
                                     int64_t block_size);
/* The longest context the model takes: max_ctx_scaled when rope scaling
 * allows more than max_position_embeddings, else max_ctx (the rule for
 * --max-model-len).  Cost: O(1). */
int64_t model_context_limit(const model_spec *m);

/* Whether the model's weights and activation reserve fit on one GPU of g
 * under p at mem_util, and by how much they do not. */
typedef struct model_fit {
    int fits;                /* 1 when weights + activations <= usable */
    int64_t weight_bytes;    /* per GPU (model_weight_bytes_par) */
    int64_t activation_bytes;/* per GPU (model_activation_reserve at tp) */
    int64_t usable_bytes;    /* gpu_usable_bytes(mem_bytes, mem_util); engine rules: see
                              * model_fit_check_rule */
    int64_t nontorch_bytes;  /* per GPU outside the engine's tensors (engine rules; else 0) */
    int64_t free_bytes;      /* KV memory the rule leaves when fits, else 0 */
    int64_t missing_bytes;   /* what the layout lacks per GPU when it does not fit, else 0 */
} model_fit;
/* Fill *out; "does not fit" is fits = 0 and KVS_OK, never an error.
 * KVS_EINVAL only for a bad p, mem_util outside (0, 1], or max_batched_tokens
 * or max_seqs < 1.  Cost: O(1). */
int model_fit_check(const model_spec *m, const gpu_spec *g, const model_par *p,
                    double mem_util, int64_t max_batched_tokens, int64_t max_seqs,
                    model_fit *out, kvs_err *err);
/* The smallest tp (powers of two up to max_tp, those model_check_tp
 * accepts) with which the model fits at ep = p_in->ep and cp = p_in->cp;
 * when none fits and the model has experts, the smallest tp*ep over tp, ep
 * powers of two (ep <= experts, tp*ep <= max_tp), ties to the smaller ep.
 * *out gets that layout and KVS_OK, or ep/tp 0 and KVS_OK when none fits
 * (fit then holds the figures at the largest layout tried).  Cost:
 * O(log^2 max_tp). */
int model_fit_min_par(const model_spec *m, const gpu_spec *g, const model_par *p_in,
                      double mem_util, int64_t max_batched_tokens, int64_t max_seqs,
                      int64_t max_tp, model_par *out, model_fit *fit, kvs_err *err);
/* model_kv_capacity under p (ep's weight split; blocks count a GPU's share
 * of the tokens, so the cp group stores cp times kv_tokens of context). */
int model_kv_capacity_par(const model_spec *m, const gpu_spec *g, const model_par *p,
                          double mem_util, int64_t block_size,
                          int64_t max_batched_tokens, int64_t max_seqs,
                          kv_capacity *out, kvs_err *err);

/* ------------------------------------------------- per-op FLOPs and bytes
 * The operations of one step of a LLaMA decoder on one GPU of a tp group,
 * shared by the roofline cost model (cost/cost_roofline.c) and the kernels.
 * Counts follow cost_batch (cost/cost.h); prefill tokens are
 * tokens - n_decode.  FLOPs count a multiply-add as 2; bytes are HBM
 * traffic assuming each operand is read once and each result written once
 * (GEMM weights read once per step: what makes small-batch decode memory
 * bound).  Notation: T tokens, Tp prefill tokens, R = n_prefill + n_decode
 * sequences, H hidden, D head_dim, q = heads/tp*D, k = kv_heads_per_gpu*D,
 * I = intermediate/tp, Vg = ceil(vocab/tp), b dtype_bytes.
 *   EMBED      per step   gather T rows:            0 FLOPs, 2*T*H*b bytes
 *   QKV        per layer  [T,H]x[H,q+2k]
 *   ATTN_PREFILL per layer causal attention: FLOPs 2*heads/tp*D*prefill_sq
 *              (QK^T and PV are 2*L*L*D each per head, halved by the causal
 *              mask); bytes (2q+2k)*Tp*b (read Q,K,V, write O once)
 *   ATTN_DECODE per layer FLOPs 4*kv_read*heads/tp*D; bytes
 *              (2k*kv_read + 2q*n_decode)*b (read the cached K and V)
 *   O_PROJ     per layer  [T,q]x[q,H]
 *   MLP_GATE_UP per layer [T,H]x[H,2I]
 *   MLP_DOWN   per layer  [T,I]x[I,H]
 *   ELEMENTWISE per layer two fused residual-add+RMSNorms (4*T*H elements
 *              moved each), rotary on Q and K (2*T*(q+k)), KV cache write
 *              (4*T*k), SiLU-and-mul (3*T*I); FLOPs 4/norm element,
 *              3/rotary element, 4/SiLU output
 *   LM_HEAD    per step   final norm over T tokens (2*T*H moved) and
 *              [R,H]x[H,Vg] (only the last token of each sequence)
 *   ALLREDUCE  per all-reduce (2 per layer when tp > 1): ring all-reduce of
 *              T*H activations, 2*(tp-1)/tp*T*H*b bytes sent per GPU
 *   LOGITS_GATHER per step when tp > 1: (tp-1)/tp*R*vocab*b bytes
 * A GEMM [M,K]x[K,N] is 2*M*K*N FLOPs and (K*N + M*K + M*N)*b bytes. */
typedef enum model_op {
    MODEL_OP_EMBED = 0,
    MODEL_OP_QKV,
    MODEL_OP_ATTN_PREFILL,
    MODEL_OP_ATTN_DECODE,
    MODEL_OP_O_PROJ,
    MODEL_OP_MLP_GATE_UP,
    MODEL_OP_MLP_DOWN,
    MODEL_OP_ELEMENTWISE,
    MODEL_OP_LM_HEAD,
    MODEL_OP_ALLREDUCE,
    MODEL_OP_LOGITS_GATHER,
    /* Added in 2026; each repeats 0 times on a dense full-attention model
     * without ep or cp, so its step costs are unchanged. */
    MODEL_OP_ATTN_PREFILL_SWA, /* ATTN_PREFILL of a sliding-window layer */
    MODEL_OP_ATTN_DECODE_SWA,  /* ATTN_DECODE of a sliding-window layer */
    MODEL_OP_MOE_ROUTER,       /* [T,H]x[H,experts] router logits */
    MODEL_OP_MOE_GATE_UP,      /* experts' gate|up (or up) GEMMs of a MoE layer */
    MODEL_OP_MOE_DOWN,         /* experts' down GEMMs of a MoE layer */
    MODEL_OP_ALLTOALL,         /* ep > 1: dispatch or combine of a MoE layer */
    MODEL_OP_CP_EXCHANGE,      /* cp > 1: attention partial results per layer */
    MODEL_OP_COUNT
} model_op;

/* The step's batch summary, field for field as cost_batch. */
typedef struct model_op_counts {
    int64_t tokens;     /* prefill tokens + one per decode */
    int64_t kv_read;    /* sum over decodes of context after the step */
    int64_t prefill_sq; /* sum over prefills of (P+g)^2 */
    int64_t n_prefill;  /* prefill requests */
    int64_t n_decode;   /* decode requests */
} model_op_counts;

/* FLOPs and HBM (or, for the collectives, link) bytes of ONE instance of op
 * on one GPU.  Cost: O(1). */
void model_op_cost(const model_spec *m, int64_t tp, model_op op,
                   const model_op_counts *c, double *flops, double *bytes);
/* How many instances of op one step runs: layers for per-layer ops,
 * 2*layers for ALLREDUCE and 1 for LOGITS_GATHER when tp > 1 (else 0),
 * 1 for EMBED and LM_HEAD. */
int64_t model_op_repeats(const model_spec *m, int64_t tp, model_op op);

/* As model_op_cost / model_op_repeats under p, for every model_spec field
 * (with p = {tp, 1, 1} they equal the two above).  What changes:
 * - Weights in a GEMM cost model_weight_elem_bytes each; activations
 *   dtype_bytes; K and V kv_bits/8.
 * - Attention ops repeat over the full-attention layers; the _SWA ops over
 *   the window layers, with decode KV reads capped at n_decode*window and
 *   prefill attention work at 2*window*Tp (bounds from the batch sums:
 *   exact when every context is at least the window).
 * - MLA (attn_type 1): QKV is the q_a|kv_a projection [T,H]x[H,q_lora +
 *   kv_lora + rope] (replicated), q_b [T,q_lora]x[q_lora,hq*(nope+rope)]
 *   and kv_b [T,kv_lora]x[kv_lora,hq*(nope+v)]; decode attention runs on
 *   the compressed cache with the absorbed projections: FLOPs
 *   2*kv_read*hq*(2*kv_lora + rope), bytes kv_read*(kv_lora+rope)*kv_b +
 *   the queries; prefill attention hq*(nope+rope+v)*prefill_sq FLOPs.
 * - MLP_GATE_UP/MLP_DOWN repeat over the dense-MLP layers ([T,H]x[H,I]
 *   for a non-gated MLP).  MoE layers run MOE_ROUTER, MOE_GATE_UP and
 *   MOE_DOWN: FLOPs of T*(experts_per_tok + shared) expert rows of width
 *   moe_intermediate/tp; weight bytes of the experts the step's tokens
 *   touch on this GPU: with T*ep tokens routed (every ep copy runs a batch
 *   like this one) each to experts_per_tok of E experts uniformly, the
 *   expected number of distinct experts is E*(1-(1-k/E)^(T*ep)), of which
 *   this GPU holds 1/ep, plus the shared experts; activations for T*k rows.
 * - ALLTOALL (ep > 1, 2 per MoE layer: dispatch and combine):
 *   (ep-1)/ep * T*experts_per_tok*H*dtype_bytes bytes over the GPU link.
 * - cp > 1: every cp rank runs the step's GEMMs on the whole batch and
 *   attention over its 1/cp of the KV (kv_read/cp, prefill work/cp);
 *   CP_EXCHANGE (one per layer) moves the partial outputs and their
 *   log-sum-exp: 2*(cp-1)/cp * T*(q + heads/tp)*4 bytes (fp32).
 * Cost: O(1). */
void model_op_cost_par(const model_spec *m, const model_par *p, model_op op,
                       const model_op_counts *c, double *flops, double *bytes);
int64_t model_op_repeats_par(const model_spec *m, const model_par *p, model_op op);
/* 1 for the ops whose bytes are not affine in the batch sums (the MoE
 * expert GEMMs and the sliding-window attention): the roofline model
 * evaluates them per step instead of from precomputed coefficients. */
int model_op_is_nonlinear(model_op op);
/* Expected distinct experts that `tokens` routings of k experts each touch
 * among e (uniform routing): e * (1 - (1 - k/e)^tokens); 0 when tokens <= 0. */
double model_moe_expected_experts(double e, double k, double tokens);
/* "qkv", "attn_prefill", ...; "?" when out of range. */
const char *model_op_name(model_op op);
/* 1 for ALLREDUCE, LOGITS_GATHER, ALLTOALL and CP_EXCHANGE (timed over
 * the GPU link), else 0. */
int model_op_is_collective(model_op op);


/* ------------------------------------------- engine capacity rules (memory.c)
 * How an engine sizes its KV cache (docs/engine-memory.md).  KVSIM is
 * model_kv_capacity_par (today's rule, the V0 profile's); VLLM takes
 * util * total - weights - activation peak - non-torch memory; TRTLLM takes
 * frac * (total - weights - activations - non-torch memory) and rounds its
 * token count up to whole blocks; SGLANG takes frac * (total - non-torch
 * memory) - weights (mem_fraction_static of the memory free before the
 * weights load, less the weights; docs/semantics-sglang.md section 12).
 * total is model_cuda_total_bytes. */
typedef enum model_kv_rule {
    MODEL_KV_RULE_KVSIM = 0,
    MODEL_KV_RULE_VLLM = 1,
    MODEL_KV_RULE_TRTLLM = 2,
    MODEL_KV_RULE_SGLANG = 3
} model_kv_rule;

/* Memory CUDA reports on g: the runtime total less the driver's share. */
int64_t model_cuda_total_bytes(const gpu_spec *g);
/* Memory per GPU an engine holds outside its tensors at TP degree tp:
 * CUDA context and workspaces, plus communicator buffers per peer. */
int64_t model_nontorch_bytes(int64_t tp);
const char *model_kv_rule_name(model_kv_rule r);
/* KV capacity under rule; frac is --gpu-mem-util.  Errors as
 * model_kv_capacity, naming the flags. */
int model_kv_capacity_rule(const model_spec *m, const gpu_spec *g, const model_par *p,
                           model_kv_rule rule, double frac, int64_t block_size,
                           int64_t max_batched_tokens, int64_t max_seqs, kv_capacity *out,
                           kvs_err *err);
/* model_fit_check under an engine's rule.  KVSIM: exactly model_fit_check.
 * VLLM: usable = frac * total, need = weights + activation peak + non-torch
 * memory, fits when need < usable (the rule then leaves KV memory > 0).
 * TRTLLM: usable = total, fits when need < total, free = frac * (total -
 * need).  SGLANG: usable = frac * (total - non-torch), need = weights, free
 * = usable - need (no activation term: CUDA graphs, activations and later
 * buffers come out of the 1 - frac slack).  "Does not fit" is fits 0 and
 * KVS_OK; errors as model_fit_check.
 * Cost: O(1). */
int model_fit_check_rule(const model_spec *m, const gpu_spec *g, const model_par *p,
                         model_kv_rule rule, double frac, int64_t max_batched_tokens,
                         int64_t max_seqs, model_fit *out, kvs_err *err);
/* model_fit_min_par with fits judged by model_fit_check_rule(rule, frac). */
int model_fit_min_par_rule(const model_spec *m, const gpu_spec *g, const model_par *p_in,
                           model_kv_rule rule, double frac, int64_t max_batched_tokens,
                           int64_t max_seqs, int64_t max_tp, model_par *out, model_fit *fit,
                           kvs_err *err);

/* How an engine sizes its KV cache: its rule and the settings it reads. */
typedef struct model_kv_budget {
    model_kv_rule rule;
    double frac;                /* --gpu-mem-util (TensorRT-LLM: free memory fraction) */
    int64_t block_size;         /* tokens per KV block */
    int64_t max_batched_tokens; /* tokens per step: sizes the activation peak */
    int64_t max_seqs;           /* sequences per step: sizes the logits reserve */
} model_kv_budget;

/* The KV memory plan of one layout for requests of seq_len tokens. */
typedef struct model_kv_plan {
    model_fit fit;          /* under the budget's rule */
    kv_capacity c;          /* the rule's capacity; when !fit.fits only the per-token,
                             * weight, activation, usable, non-torch and block figures */
    int64_t req_bytes;      /* paged KV bytes of one request of seq_len, per GPU */
    int64_t req_exact;      /* the same without block rounding */
    int64_t blocks_per_req; /* blocks: ceil(ceil(seq_len / cp) / block_size) */
    int64_t max_batch;      /* requests of seq_len the KV blocks hold (0 when !fits) */
    int64_t max_context;    /* tokens: the longest single request the blocks hold, cp
                             * included (0 when !fits) */
} model_kv_plan;
/* Fill *out for layout p under budget b.  "Does not fit" is fit.fits 0 and
 * KVS_OK; KVS_EINVAL for a bad layout or budget, naming the flag.  Cost:
 * O(40) request-size evaluations (a bisection on the longest context). */
int model_kv_plan_eval(const model_spec *m, const gpu_spec *g, const model_par *p,
                       const model_kv_budget *b, int64_t seq_len, model_kv_plan *out,
                       kvs_err *err);

#endif
