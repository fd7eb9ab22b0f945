/* model.h — model shapes, GPU datasheet figures, and the arithmetic on them:
 * parameter and weight bytes, KV bytes per token, KV capacity in blocks,
 * FLOPs and bytes of each operation of a LLaMA decoder layer.
 *
 * Pure data and arithmetic: no I/O except model_lookup reading a model config
 * file when given a path.  Every size is int64_t bytes or tokens.
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
    int64_t dtype_bytes;  /* bytes per weight and KV element (2 = fp16/bf16) */
} model_spec;

typedef struct gpu_spec {
    char name[32];
    int64_t mem_bytes;     /* HBM capacity, bytes */
    double hbm_Bps;        /* peak HBM bandwidth, bytes/s */
    double fp16_flops;     /* peak dense FP16/BF16 tensor FLOP/s */
    double host_link_Bps;  /* host link (PCIe) per direction, bytes/s */
    double nvlink_Bps;     /* NVLink per GPU per direction, bytes/s */
} gpu_spec;

/* Find a built-in model by name, or read a config file when `name` contains
 * '/' or ends in ".conf" (key=value lines: name, hidden, layers, heads,
 * kv_heads, head_dim, intermediate, vocab, max_ctx, dtype_bytes; '#'
 * comments).  Unknown names list the known ones in err. */
int model_lookup(const char *name, model_spec *out, kvs_err *err);
int gpu_lookup(const char *name, gpu_spec *out, kvs_err *err);

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
/* Weight bytes held by one GPU under tensor parallelism tp. */
int64_t model_weight_bytes(const model_spec *m, int64_t tp);
/* KV heads stored per GPU: kv_heads / tp, or 1 when tp > kv_heads. */
int64_t model_kv_heads_per_gpu(const model_spec *m, int64_t tp);
/* 2 * layers * kv_heads_per_gpu * head_dim * dtype_bytes. */
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
    int64_t usable_bytes;        /* gpu_mem * util, per GPU */
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
/* "qkv", "attn_prefill", ...; "?" when out of range. */
const char *model_op_name(model_op op);
/* 1 for ALLREDUCE and LOGITS_GATHER (timed over NVLink), else 0. */
int model_op_is_collective(model_op op);

#endif
